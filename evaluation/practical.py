"""Score completions of practical Python tasks (data/practical_tasks.py) as CodeInsight does (Beau &
Crabbé 2024, §4): pass@1 by unit tests, overall and per category, plus BLEU and CodeBLEU against the
reference solution; and mean ± std over seeds for a grid of fine-tuning runs.

  python -m evaluation.practical --predictions P.jsonl --dataset D.jsonl --output_dir DIR

P is sample.py's output for data.practical_tasks.prompt_records: `qid`, `sample_id`, `code` (the text
generated after the problem's prompt). Each completion is cut where its function ends, appended to
the prompt and run in the bubblewrap sandbox (evaluation/execution.py) with numpy and pandas
importable, every unit test in its own try block. Scoring is evaluation/resumable.py's loop, the one
every benchmark shares: DIR/results.jsonl gets one line per prediction as it finishes, so a killed
run resumes, and completions of a problem that are the same once cut run once; a malformed line is
reported with its file:line and the others scored. DIR/metrics.json holds, overall and per category (a problem counts in each of its categories): problems, pass@1 (mean over problems
of c/n, in %), tests_passed (% of the unit tests of every sample), BLEU and CodeBLEU (0-100) of each
problem's first sample.

The unit tests are assert blocks; their verdicts are reached outside the sandbox, as for typed
HumanEval (evaluation/judge.py). evaluation/assertions.py rewrites each test so that the candidate's
run records, as plain data (evaluation/recorded_values.py), the values of the leaves of each assertion
that depend on its code; the reference solution runs the same rewritten tests in its own sandbox once
per problem (and must pass them); each assertion is then evaluated here over the candidate's values
and the reference's values of its other leaves. The candidate's process never holds a compared-with
value or a verdict it could write: whatever it prints is a claim about values, and an object that is
not plain data (one equal to everything) fails the check that uses it. What it can still do is what a
function could: return the right value. One limit: an assertion on a bare boolean computed from the
candidate's behaviour (`assert raised`) is decided by the boolean the candidate's process reports.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import functools
import importlib.metadata
import io
import math
import json
import os
import secrets
import sys
import threading
import tokenize
from collections.abc import Iterable, Mapping, Sequence

from data.practical_tasks import SMALL_DATASET, Problem, categories, load_problems
from evaluation import assertions, execution, recorded_values, resumable
from evaluation.languages import base
from evaluation.languages.python import RENDERER as PYTHON
from evaluation.passk import mean_pass_at_k
from evaluation.resumable import Prediction
import storage

# Wheels of the packages the tasks import; their install requirements (not extras) come along.
PACKAGES = ("numpy", "pandas")
# numpy's OpenBLAS starts a thread per core at import, each with its buffers: on a many-core scorer
# that would exceed RLIMIT_NPROC (64) and RLIMIT_AS; one thread keeps `import numpy, pandas` at a
# 157 MB address-space peak (measured in the sandbox), well inside the default 2 GB cap.
THREADS_ENV = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
               "NUMEXPR_MAX_THREADS": "1"}


# ---- the sandbox's view: the base interpreter plus a few site-packages entries -------------------

def _requirements(name: str) -> set[str]:
  """`name` and, recursively, the distributions it requires outside extras (pandas -> numpy,
  python-dateutil -> six, pytz, tzdata): what its import needs, without optional pyarrow."""
  from packaging.requirements import Requirement
  from packaging.utils import canonicalize_name

  seen: set[str] = set()
  todo = [name]
  while todo:
    current = canonicalize_name(todo.pop())
    if current in seen:
      continue
    seen.add(current)
    for text in importlib.metadata.distribution(current).requires or ():
      requirement = Requirement(text)
      if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
        todo.append(requirement.name)
  return seen


@functools.cache
def site_entries() -> tuple[str, ...]:
  """Absolute paths of the site-packages entries (packages, `.libs` folders of bundled shared
  libraries, single-file modules, dist-info) of PACKAGES and their requirements."""
  entries = set()
  for name in sorted(set().union(*(_requirements(p) for p in PACKAGES))):
    distribution = importlib.metadata.distribution(name)
    for file in distribution.files or ():
      top = file.parts[0]
      if top not in ("..", "__pycache__"):  # scripts in bin/; the shared bytecode cache
        entries.add(os.path.normpath(str(distribution.locate_file(top))))
  return tuple(sorted(entries))


def site_packages() -> str:
  """The site-packages folder holding numpy (the program puts it on sys.path: it runs -I -S)."""
  folders = {os.path.dirname(e) for e in site_entries()}
  if len(folders) != 1:
    raise RuntimeError(f"{', '.join(PACKAGES)} and their requirements are spread over {sorted(folders)}")
  return folders.pop()


@functools.cache
def toolchain() -> base.Toolchain:
  """evaluation/languages/python.py's base interpreter, plus read-only site_entries(); the rest of
  the virtualenv (jax, this project) stays invisible."""
  interpreter = PYTHON.toolchain.binaries[0]
  versions = ", ".join(f"{p} {importlib.metadata.version(p)}" for p in PACKAGES)
  entries = site_entries()
  return dataclasses.replace(
      PYTHON.toolchain, read_only=(*PYTHON.toolchain.read_only, *entries),
      # (codelm installed into the base interpreter itself: its site-packages stays visible)
      hidden=tuple(h for h in PYTHON.toolchain.hidden if not any(e.startswith(h + os.sep) for e in entries)),
      version_command=(interpreter, "-c",
                       f"import sys; print('Python', sys.version.split()[0] + ', {versions}')"))


# ---- the program ---------------------------------------------------------------------------------

_LAYOUT = (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT,
           tokenize.ENDMARKER)


def _lines(text: str) -> list[str]:
  """Lines with their newlines, split at "\n" only, as tokenize numbers them (str.splitlines would
  also split at "\r", "\x0c" ...)."""
  parts = text.split("\n")
  return [part + "\n" for part in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def _end_line(completion: str) -> int:
  """Index of the completion's first line that starts a statement at column 0 (the function has
  ended there), or the number of lines. tokenize, so that a column-0 line inside a string or brackets
  does not count; on a tokenize error, the first non-blank line that is not indented."""
  lines = _lines(completion)
  try:
    previous = tokenize.NEWLINE
    for token in tokenize.generate_tokens(io.StringIO(completion).readline):
      if token.type not in _LAYOUT and token.start[1] == 0 and previous in (
          tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT):
        return token.start[0] - 1
      if token.type not in (tokenize.NL, tokenize.COMMENT):
        previous = token.type
    return len(lines)
  except (tokenize.TokenError, SyntaxError):
    return next((i for i, line in enumerate(lines) if line.strip() and not line[0].isspace()), len(lines))


def completion_code(problem: Problem, completion: str) -> str:
  """The completion up to where the function ends (a new `def`, a `print(`, `if __name__`: whatever
  starts at column 0), without trailing blank lines and column-0 comments ("# Example usage")."""
  del problem  # the prompt always ends inside the function's body, after its docstring
  completion = _normalise(completion)
  lines = _lines(completion)[:_end_line(completion)]
  while lines and (not lines[-1].strip() or lines[-1].startswith("#")):
    lines.pop()
  text = "".join(lines)
  return text if not text or text.endswith("\n") else text + "\n"


def generated_function(problem: Problem, completion: str) -> str:
  """The import lines, the def line and the cut completion: what BLEU compares with the reference
  (the prompt's docstring left out, as the reference has none)."""
  return problem.header + problem.signature + completion_code(problem, completion)


def reference_function(problem: Problem) -> str:
  """The reference code without a docstring of its own (Problem.body already drops one)."""
  return problem.header + problem.signature + problem.body


# Runs inside the sandbox after recorded_values.py's source (its `encode`); program() puts SITE
# (site-packages) and TESTS (the rewritten test blocks) between them.
_HARNESS = '''
import os, sys
sys.path.insert(0, SITE)


def _codelm_main():
    import traceback
    with open("nonce") as f:
        nonce = f.read()
    os.remove("nonce")
    write, flush, dumps, run = sys.stdout.write, sys.stdout.flush, json.dumps, exec
    current = [None]

    def record(test, kind, text):
        write(nonce + " " + str(test) + " " + kind + " " + text.replace("\\n", " ") + "\\n")
        flush()

    def describe(error, filename, source):
        # The failing line of the test (or solution), read from its source: exec'd text has no file.
        text = type(error).__name__ + (": " + str(error)[:200] if str(error) else "")
        lines = [f.lineno for f in traceback.extract_tb(error.__traceback__) if f.filename == filename]
        if lines and 0 < lines[-1] <= len(source.splitlines()):
            text += " (line %d: %s)" % (lines[-1], source.splitlines()[lines[-1] - 1].strip())
        return text

    def check(index, thunks):
        values = []
        for thunk in thunks:
            if thunk is None:
                values.append(None)
                continue
            try:
                values.append(encode(thunk()))
            except BaseException as e:  # the original assertion would have raised it: the check fails
                values.append(["unrecorded", type(e).__name__ + (": " + str(e)[:200] if str(e) else "")])
        record(current[0], "check", dumps([index, values]))

    with open("solution.py") as f:
        source = f.read()
    try:
        code = compile(source, "solution.py", "exec")
    except SyntaxError as e:
        record("-", "compile", "%s: %s (line %s)" % (type(e).__name__, e.msg, e.lineno))
        return
    module = {"__name__": "solution", "__builtins__": __builtins__}
    try:
        run(code, module)
    except BaseException as e:  # an import the sandbox lacks, a NameError at module level
        record("-", "module", describe(e, "solution.py", source))
        return
    for index, test in enumerate(TESTS):
        current[0] = index
        filename = "test_%d" % index
        namespace = dict(module)  # each test on a fresh copy
        namespace["_codelm_check"] = check
        try:
            run(compile(test, filename, "exec"), namespace)
            record(index, "done", "")
        except BaseException as e:  # SystemExit and KeyboardInterrupt too: the test failed
            record(index, "error", describe(e, filename, test))


_codelm_main()
'''


def _normalise(text: str) -> str:
  r"""Line breaks as Python reads a file: "\r\n" and a lone "\r" end a line too, so they become "\n"
  before the completion is cut (else a "\r" smuggles module-level code past completion_code)."""
  return text.replace("\r\n", "\n").replace("\r", "\n")


@functools.cache
def rewritten_tests(problem: Problem) -> tuple[assertions.RewrittenTest, ...]:
  names = assertions.solution_names(problem.code)
  return tuple(assertions.rewrite(_normalise(test), names) for test in problem.tests)


@functools.cache
def _values_source() -> str:
  with open(recorded_values.__file__, encoding="utf-8") as f:
    return f.read()


def program(problem: Problem, code: str, reference: bool = False) -> base.Program:
  """`code` (the prompt + a cut completion, or the reference solution) as solution.py, and main.py
  running each of the problem's rewritten tests on it; records `<nonce> <test> check [index, values]`
  per assertion, `<nonce> <test> done|error <why>` per test, or `<nonce> - compile|module <why>`."""
  tests = [t.reference if reference else t.candidate for t in rewritten_tests(problem)]
  main = (_values_source() + f"\n\nSITE = {site_packages()!r}\nTESTS = {tests!r}\n" + _HARNESS)
  return base.Program(files={"main.py": main, "solution.py": _normalise(code), "nonce": secrets.token_hex(16)},
                      run=(PYTHON.toolchain.binaries[0], "-I", "-S", "-B", "main.py"), env=THREADS_ENV)


@dataclasses.dataclass
class _TestRecords:
  checks: list = dataclasses.field(default_factory=list)  # (check index, raw values) in order
  end: str | None = None                                   # "done", or "error <why>"
  forged: bool = False                                     # records after the test ended


def _records(result: execution.Execution, nonce: str, tests: int
             ) -> tuple[list[_TestRecords], tuple[str, str] | None]:
  """Each test's records, and a problem-wide error ("compile" or "module", why) or None."""
  records = [_TestRecords() for _ in range(tests)]
  for line in result.stdout.splitlines():
    fields = line.split(" ", 3)
    if len(fields) < 3 or fields[0] != nonce:
      continue
    test, kind, text = fields[1], fields[2], fields[3] if len(fields) > 3 else ""
    if test == "-":
      return records, (kind, text)
    if not test.isdigit() or int(test) >= tests:
      continue
    entry = records[int(test)]
    if entry.end is not None:
      entry.forged = True
    elif kind == "check":
      try:
        index, values = json.loads(text)
        entry.checks.append((int(index), list(values)))
      except (ValueError, TypeError):
        entry.forged = True
    elif kind in ("done", "error"):
      entry.end = "done" if kind == "done" else "error " + text
  return records, None


def _test_outcome(test: assertions.RewrittenTest, candidate: _TestRecords, reference: _TestRecords) -> str:
  """"pass", "not run", or "fail <why>": every check that ran in the reference's run ran in the
  candidate's, in the same order, and holds for the candidate's leaf values (the reference's for the
  leaves that do not depend on the candidate)."""
  if candidate.end is None:
    return "not run"
  if candidate.forged:
    return "fail records written after the test ended"
  if candidate.end != "done":
    return "fail " + candidate.end.removeprefix("error ")
  for n, ((index, values), (ref_index, ref_values)) in enumerate(zip(candidate.checks, reference.checks)):
    check = test.checks[ref_index]
    if index != ref_index:
      return f"fail assertion {n + 1} ran out of the reference's order (line {check.line}: {check.text})"
    if len(values) != len(check.slots):
      return f"fail a malformed record for line {check.line}: {check.text}"
    merged = [recorded_values.decode(v) if slot.candidate else recorded_values.decode(r)
              for slot, v, r in zip(check.slots, values, ref_values)]
    why = assertions.decide(check, merged)
    if why is not None:
      return "fail " + why
  if len(candidate.checks) != len(reference.checks):
    return (f"fail {len(candidate.checks)} assertions ran where the reference solution ran "
            f"{len(reference.checks)}")
  return "pass"


class ReferenceFailure(RuntimeError):
  """The dataset's reference solution does not pass its own tests in the sandbox."""


_REFERENCE_LOCK = threading.Lock()
_REFERENCE: dict[tuple, list[_TestRecords]] = {}


def reference_records(problem: Problem, limits: execution.Limits) -> list[_TestRecords]:
  """The reference solution's records on the rewritten tests: run once per (problem, limits) in this
  process, and every test must pass (else ReferenceFailure names the problem and the test)."""
  key = (problem, limits)
  with _REFERENCE_LOCK:
    if key in _REFERENCE:
      return _REFERENCE[key]
  prog = program(problem, problem.code, reference=True)
  result = execution.execute(prog, toolchain(), limits)
  records, error = _records(result, prog.files["nonce"], len(problem.tests))
  if error is not None:
    raise ReferenceFailure(f"{problem.problem_id}: the reference solution does not load: {error[1]}")
  for index, (test, entry) in enumerate(zip(rewritten_tests(problem), records)):
    outcome = _test_outcome(test, entry, entry)
    if outcome != "pass":
      timed_out = result.run is None or result.run.timed_out
      raise ReferenceFailure(f"{problem.problem_id}: the reference solution fails test {index}: "
                             f"{'timeout' if timed_out and outcome == 'not run' else outcome}")
  with _REFERENCE_LOCK:
    _REFERENCE[key] = records
  return records


def run_problem(problem: Problem, completion: str, limits: execution.Limits = execution.Limits()) -> dict:
  """Run the problem's tests on prompt + completion_code(completion) in the sandbox and decide them
  here against the reference's run: `passed` (every test passed), `tests_passed`, `tests`, `error`
  (None, "compile", "timeout", or the first failure's text), `detail` (the compile message or the
  stderr tail), `outcomes` (per test), `run_s`."""
  reference = reference_records(problem, limits)
  code = problem.prompt + completion_code(problem, completion)
  prog = program(problem, code)
  result = execution.execute(prog, toolchain(), limits)
  records, problem_error = _records(result, prog.files["nonce"], len(problem.tests))
  run = result.run
  timed_out = run is None or run.timed_out
  outcomes = [] if problem_error is not None else [
      _test_outcome(test, candidate, ref)
      for test, candidate, ref in zip(rewritten_tests(problem), records, reference)]
  passed = sum(o == "pass" for o in outcomes)
  error, detail = None, ""
  if problem_error is None:
    failures = [o.removeprefix("fail ") for o in outcomes if o.startswith("fail ")]
    if failures:
      error = failures[0]
    elif timed_out and passed < len(problem.tests):
      error = "timeout"
    elif passed < len(problem.tests) or run.exit_code != 0:
      error = f"no result for test {outcomes.index('not run') if 'not run' in outcomes else len(outcomes)} (exit {run.exit_code})"
      detail = result.stderr[-600:]
  else:
    kind, detail = problem_error
    error = "compile" if kind == "compile" else detail
  return {"passed": error is None and passed == len(problem.tests), "tests_passed": passed,
          "tests": len(problem.tests), "error": error, "detail": detail[:1000],
          "outcomes": outcomes + ["not run"] * (len(problem.tests) - len(outcomes)),
          "run_s": round(run.runtime_s, 3) if run else None}


# ---- scoring a predictions file: evaluation/resumable.py's loop ---------------------------------

JUDGE = "assertions decided outside the sandbox, v1"  # part of a result's identity (Benchmark.settings)

def read_predictions(path: str, problems: Mapping[str, Problem]) -> tuple[list[Prediction], list[str]]:
  """The valid predictions of a sample.py output and one message per line that is not one (file:line:
  malformed, unknown qid, not Python, a second prediction for one sample): the shared reader."""

  def resolve(record: dict) -> tuple[str, str]:
    qid = str(record["qid"])
    if qid not in problems:
      raise ValueError(f"unknown qid {qid!r} (not among the problems given)")
    language = record.get("language", "python")
    if not isinstance(language, str) or language.lower() != "python":
      raise ValueError(f"language {language!r}; practical tasks are Python")
    return "python", qid

  return resumable.read_predictions(path, resolve)


def read_results(path: str) -> dict[tuple[str, str, int | str], dict]:
  """Records already in results.jsonl by (language, qid, sample_id), the later line winning; a torn
  last line is cut off, any other unreadable line ignored (that prediction is scored again)."""
  return storage.read_results(path, PracticalBenchmark.result_key)


class PracticalBenchmark(resumable.Benchmark):
  """Practical tasks for the shared scorer: a program is the prompt plus the completion as
  completion_code cuts it (so completions that differ only after the function share a run)."""
  command = "evaluation.practical"

  def __init__(self, problems: Mapping[str, Problem], limits: execution.Limits):
    self.problems, self.limits = problems, limits

  @staticmethod
  def result_key(record: dict) -> tuple:
    # Results written before the shared loop carry no language: they are all Python.
    return record.get("language", "python"), record["qid"], record["sample_id"]

  def program(self, prediction: Prediction) -> str:
    return completion_code(self.problems[prediction.qid], prediction.code)

  def settings(self, language: str) -> dict:
    # The judge's version too: results of the in-sandbox verdicts (before values-out) are redone.
    return {"limits": dataclasses.asdict(self.limits), "judge": JUDGE}

  def run(self, unit, stats):
    version = execution.toolchain_version(toolchain())
    stats.alone += len(unit)  # interpreted: nothing to build
    return [{**run_problem(self.problems[p.qid], p.code, self.limits), "toolchain": version} for p in unit]

  def summarise(self, predictions, results) -> dict:
    return metrics(list(self.problems.values()), predictions, results)


def group_metrics(problems: Sequence[Problem], records: Mapping[str, list[dict]],
                  completions: Mapping[str, str]) -> dict:
  """CodeInsight's columns over a group of problems. `records`: each problem's result records;
  `completions`: each problem's sample-0 completion (BLEU and CodeBLEU use one sample per problem)."""
  import sacrebleu
  from codebleu import calc_codebleu

  if not problems:  # a category none of whose predictions could be scored
    return {"problems": 0, **{k: None for k in ("pass@1", "tests_passed", "bleu", "codebleu")}}
  counts = {p.problem_id: (len(records[p.problem_id]), sum(r["passed"] for r in records[p.problem_id]))
            for p in problems}
  tests = sum(r["tests"] for p in problems for r in records[p.problem_id])
  passed = sum(r["tests_passed"] for p in problems for r in records[p.problem_id])
  hypotheses = [generated_function(p, completions[p.problem_id]) for p in problems]
  references = [reference_function(p) for p in problems]
  # codebleu counts a dataflow score of 0 as 1 (`dataflow_match_score or 1`): its library's rule.
  codebleu = calc_codebleu(references, hypotheses, lang="python")["codebleu"]
  return {"problems": len(problems),
          "pass@1": round(100 * mean_pass_at_k(counts, ks=(1,))["pass@1"], 4),
          "tests_passed": round(100 * passed / tests, 4) if tests else None,
          "bleu": round(sacrebleu.corpus_bleu(hypotheses, [references]).score, 4),
          "codebleu": round(100 * codebleu, 4)}


def metrics(problems: Sequence[Problem], predictions: Sequence[Prediction],
            results: Mapping[tuple[str, int], dict]) -> dict:
  """group_metrics overall and per category (most frequent first), over the scored predictions."""

  records: dict[str, list[dict]] = collections.defaultdict(list)
  first: dict[str, Prediction] = {}
  for p in sorted(predictions, key=lambda p: p.sample_id):
    if p.key in results:
      records[p.qid].append(results[p.key])
      first.setdefault(p.qid, p)
  scored = [p for p in problems if records[p.problem_id]]
  completions = {qid: p.code for qid, p in first.items()}
  out = {"overall": group_metrics(scored, records, completions), "categories": {}}
  for label in categories(scored):
    group = [p for p in scored if label in p.categories]
    out["categories"][label] = group_metrics(group, records, completions)
  return out


def score_predictions(predictions_path: str, problems: Mapping[str, Problem], output_dir: str,
                      workers: int | None = None, limits: execution.Limits = execution.Limits(),
                      progress: bool = False) -> dict:
  """Score the predictions not yet in output_dir/results.jsonl, then write output_dir/metrics.json.
  Every problem of `problems` needs a prediction (a ValueError counts and names the missing ones):
  metrics over a silently smaller set of problems would not compare across runs. A malformed line is
  reported in metrics.json's invalid_predictions (file:line) and the others are scored."""
  predictions, invalid = read_predictions(predictions_path, problems)
  predicted = {p.qid for p in predictions}
  missing = [qid for qid in problems if qid not in predicted]
  if missing:
    raise ValueError(f"{predictions_path}: no prediction for {len(missing)} of {len(problems)} problems: "
                     f"{', '.join(missing[:10])}{' ...' if len(missing) > 10 else ''}")
  lacking = execution.missing(toolchain())
  if lacking:
    raise RuntimeError(f"cannot run the practical tasks' sandbox: missing {', '.join(lacking)}")
  scorer = PracticalBenchmark(problems, limits)
  results, report = resumable.score_predictions(scorer, predictions, output_dir, workers, progress=progress,
                                                source=predictions_path)
  scoring = report.as_dict()
  values = {"predictions": storage.resolve(predictions_path), "limits": dataclasses.asdict(limits),
            "toolchain": execution.toolchain_version(toolchain()), "scored_now": scoring["scored_now"],
            **scorer.summarise(predictions, results), "invalid_predictions": invalid,
            "unscored_predictions": report.unscored, "scoring": scoring}
  storage.write_json(storage.join(output_dir, "metrics.json"), values)
  return values


COLUMNS = (("problems", "problems"), ("pass@1", "pass@1"), ("tests_passed", "% tests passed"),
           ("bleu", "BLEU"), ("codebleu", "CodeBLEU"))


def table(values: dict) -> str:
  """The per-category markdown table of a metrics.json."""
  lines = ["| category | " + " | ".join(t for _, t in COLUMNS) + " |", "|" + "---|" * (len(COLUMNS) + 1)]
  for label, group in [("overall", values["overall"]), *values["categories"].items()]:
    cells = [str(group[k]) if k == "problems" else ("–" if group[k] is None else f"{group[k]:.1f}")
             for k, _ in COLUMNS]
    lines.append(f"| {label} | " + " | ".join(cells) + " |")
  return "\n".join(lines)


# ---- a grid of runs: mean ± std over seeds per train fraction ------------------------------------

# Overall (categories get pass@1); the held-out losses where a cell's metrics carry them (the grid adds
# train.py's loss on the test problems before fine-tuning and after it).
SUMMARY_METRICS = ("pass@1", "tests_passed", "bleu", "codebleu", "held_out_loss_start", "held_out_loss_end")


def _stat(values: Sequence[float]) -> dict:
  """Mean and sample std (ddof=1) over seeds; std 0 for a single seed (n says so)."""
  mean = sum(values) / len(values)
  std = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1)) if len(values) > 1 else 0.0
  return {"mean": round(mean, 4), "std": round(std, 4), "n": len(values)}


def summarise(cells: Iterable[tuple[float, int, dict]]) -> dict:
  """cells: (train_fraction, seed, metrics as score_predictions returns). Per train fraction (keys
  "%g" of it), mean ± std over seeds: overall for SUMMARY_METRICS, per category for pass@1 (over the
  seeds whose test split has the category)."""
  by_fraction: dict[float, dict[int, dict]] = collections.defaultdict(dict)
  for fraction, seed, values in cells:
    if seed in by_fraction[fraction]:
      raise ValueError(f"two cells for train fraction {fraction:g}, seed {seed}")
    by_fraction[fraction][seed] = values
  fractions = sorted(by_fraction)
  labels: collections.Counter = collections.Counter()
  for runs in by_fraction.values():
    for values in runs.values():
      labels.update({label: values["categories"][label]["problems"] for label in values["categories"]})
  out: dict = {"train_fractions": [f"{f:g}" for f in fractions],
               "seeds": {f"{f:g}": sorted(by_fraction[f]) for f in fractions},
               "overall": {}, "categories": {label: {} for label, _ in labels.most_common()}}
  for f in fractions:
    runs = list(by_fraction[f].values())
    overall = {m: [r["overall"][m] for r in runs if r["overall"].get(m) is not None] for m in SUMMARY_METRICS}
    out["overall"][f"{f:g}"] = {m: _stat(v) if v else None for m, v in overall.items()}
    for label in out["categories"]:
      values = [r["categories"][label]["pass@1"] for r in runs
                if r["categories"].get(label, {}).get("pass@1") is not None]
      out["categories"][label][f"{f:g}"] = _stat(values) if values else None
  return out


def _cell(stat: dict | None, digits: int = 1) -> str:
  return "–" if not stat or not stat["n"] else f"{stat['mean']:.{digits}f} ± {stat['std']:.{digits}f}"


def summary_markdown(summary: dict) -> str:
  fractions = summary["train_fractions"]
  header = [f"train {f} (n={len(summary['seeds'][f])})" for f in fractions]
  lines = ["pass@1 (%), mean ± std over seeds (sample std; 0 for one seed)", "",
           "| category | " + " | ".join(header) + " |", "|" + "---|" * (len(header) + 1)]
  for label, row in summary["categories"].items():
    lines.append(f"| {label} | " + " | ".join(_cell(row[f]) for f in fractions) + " |")
  overall = " | ".join(_cell(summary["overall"][f]["pass@1"]) for f in fractions)
  lines.append(f"| **overall** | {overall} |")
  lines += ["", "overall, mean ± std over seeds", "",
            "| metric | " + " | ".join(header) + " |", "|" + "---|" * (len(header) + 1)]
  for metric in SUMMARY_METRICS:
    if any(summary["overall"][f][metric] for f in fractions):
      digits = 3 if metric.startswith("held_out_loss") else 1
      lines.append(f"| {metric} | " + " | ".join(_cell(summary["overall"][f][metric], digits) for f in fractions)
                   + " |")
  return "\n".join(lines) + "\n"


def _figure(summary: dict):
  """Grouped bars: pass@1 per category (and overall), one bar per train fraction, std error bars."""
  from matplotlib.figure import Figure  # no pyplot: its global state and backend choice stay untouched

  rows = [*summary["categories"].items(), ("overall", {f: summary["overall"][f]["pass@1"]
                                                       for f in summary["train_fractions"]})]
  fractions = summary["train_fractions"]
  width = 0.8 / max(len(fractions), 1)
  figure = Figure(figsize=(max(6, 0.9 * len(rows) + 2), 4), layout="constrained")
  axes = figure.add_subplot()
  for i, f in enumerate(fractions):
    stats = [row[f] or {"mean": 0.0, "std": 0.0} for _, row in rows]  # no test problem: no bar
    axes.bar([j + (i - (len(fractions) - 1) / 2) * width for j in range(len(rows))],
             [s["mean"] for s in stats], width, yerr=[s["std"] for s in stats], capsize=2,
             label=f"train {f} (n={len(summary['seeds'][f])})")
  axes.set_xticks(range(len(rows)), [label for label, _ in rows], rotation=30, ha="right")
  axes.set_ylabel("pass@1 (%)")
  axes.legend(fontsize="small")
  return figure


def write_summary(cells: Iterable[tuple[float, int, dict]], output_dir: str) -> dict:
  """summarise(cells), written as summary.json, summary.md and pass_at_1_by_category.png."""
  summary = summarise(cells)
  storage.makedirs(output_dir)
  storage.write_json(storage.join(output_dir, "summary.json"), summary)
  storage.write_atomic(storage.join(output_dir, "summary.md"), summary_markdown(summary))
  storage.save_figure(_figure(summary), storage.join(output_dir, "pass_at_1_by_category.png"))
  return summary


# ---- entry point ---------------------------------------------------------------------------------

def main(argv: Sequence[str] | None = None) -> int:

  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--predictions", required=True, help="sample.py's predictions JSONL")
  parser.add_argument("--dataset", default=SMALL_DATASET, help="the problems (JSON or JSONL)")
  parser.add_argument("--output_dir", required=True, help="directory for results.jsonl and metrics.json")
  parser.add_argument("--workers", type=int, default=os.cpu_count(), help="sandboxes at a time")
  parser.add_argument("--timeout", type=float, default=execution.Limits.timeout_s,
                      help="wall-clock seconds of each program's run")
  args = parser.parse_args(argv)
  try:
    if args.workers < 1:
      raise ValueError(f"--workers must be at least 1, got {args.workers}")
    dataset = {p.problem_id: p for p in load_problems(args.dataset)}
    # The dataset may hold more than was sampled (a test split): score the predicted problems (a
    # line naming a problem the dataset lacks is reported with its file:line, the others scored).
    predicted = {p.qid for p in read_predictions(args.predictions, dataset)[0]}
    if not predicted:
      raise ValueError(f"{args.predictions}: no valid prediction for a problem of {args.dataset}")
    problems = {qid: p for qid, p in dataset.items() if qid in predicted}
    values = score_predictions(args.predictions, problems, args.output_dir, args.workers,
                               execution.Limits(timeout_s=args.timeout), progress=True)
  except (ValueError, OSError, RuntimeError) as error:  # OutputLocked is a RuntimeError
    print(f"error: {error}", file=sys.stderr)
    return 2
  print(table(values))
  print(f"\nscored now: {values['scored_now']} ({values['scoring']['duplicates_reused']} by a duplicate's run)")
  for message in values["invalid_predictions"][:20]:
    print(f"invalid prediction: {message}", file=sys.stderr)
  for message in values["unscored_predictions"][:20]:
    print(message)
  return 0


if __name__ == "__main__":
  sys.exit(main())
