"""Score predictions in 12 languages: compile and run each in the sandbox, pass@k per language.

  python -m evaluation.score --predictions PREDICTIONS.jsonl --benchmark humaneval --output DIR \
      [--languages all|python,cpp,...] [--workers N] [--timeout S] [--memory_mb M] [--k 1,10,100]

PREDICTIONS is sample.py's output for prompts from `python -m evaluation.prompts humaneval`: one line
per sample with `qid`, `language`, `sample_id` and `code` (the completion). Each prediction becomes
the language's test program (evaluation/languages/): the prompt's signature, the completion, and a
harness that prints each test case's returned value; evaluation/judge.py compares the values with the
expected outputs outside the sandbox (evaluation/execution.py).

DIR/results.jsonl gets one line per prediction as it finishes (status passed / failed /
compile_error / error / timeout, the outcome of every test case, runtime, toolchain version), each
written and flushed whole, so a killed run resumes: a rerun skips the (language, qid, sample_id)
triples already scored with the same code and drops a torn last line. DIR/metrics.json holds, per
language, pass@k by the unbiased estimator (k no larger than the samples per problem) and the paper's
columns: % error (compile or runtime error outside the test cases), % failed test, % passed, % passed
at least one test but failed, mean % tests passed, % timed out. A malformed prediction line is
reported with its line number and skipped; the other predictions are scored. Dart and Julia are
listed as not evaluated (no toolchain in any reachable registry).
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import dataclasses
import hashlib
import json
import os
import sys
from collections.abc import Mapping, Sequence

from evaluation import execution, typed
from evaluation.judge import Status, judge
from evaluation.languages import MODULES, NOT_EVALUATED, get
from evaluation.passk import mean_pass_at_k
import storage
from storage import OutputLocked, exclusive_output, parse_line
from data.languages import BY_NAME, LANGUAGES

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
BENCHMARKS = {"humaneval": os.path.join(DATA, "humaneval_typed.jsonl")}
EVALUATED = tuple(l.name for l in LANGUAGES if l.name in MODULES)  # the paper's order
DEFAULT_K = (1, 10, 100)


@dataclasses.dataclass(frozen=True)
class Prediction:
  qid: str
  sample_id: int | str
  language: str     # codelm's name ("cpp")
  code: str
  line: int         # in the predictions file

  @property
  def key(self) -> tuple[str, str, int | str]:
    return self.language, self.qid, self.sample_id

  @property
  def code_sha1(self) -> str:
    return hashlib.sha1(self.code.encode()).hexdigest()


def load_benchmark(benchmark: str) -> dict[str, typed.Question]:
  if benchmark in BENCHMARKS:
    path = BENCHMARKS[benchmark]
  elif storage.exists(benchmark):
    path = benchmark  # a typed question file of one's own
  else:
    raise ValueError(f"unknown benchmark {benchmark!r}; choose {', '.join(BENCHMARKS)} or give a "
                     "typed question file (evaluation/typed.py)")
  return {q.qid: q for q in typed.read_questions(path)}


def language_name(name: str) -> str:
  """codelm's name for any spelling: "C++", "cpp", "CSharp", "Javascript" -> "cpp", ..."""
  from evaluation.prompts import resolve_language
  return resolve_language(name).name


def parse_languages(value: str) -> list[str]:
  if value.strip().lower() == "all":
    return list(EVALUATED)
  names = [language_name(v) for v in value.split(",") if v.strip()]
  for name in names:
    if name in NOT_EVALUATED:
      raise ValueError(f"--languages: {BY_NAME[name].display_name} is not evaluated: {NOT_EVALUATED[name]}")
  return names


def read_predictions(path: str, questions: Mapping[str, typed.Question]
                     ) -> tuple[list[Prediction], list[str]]:
  """The valid predictions, and one message per line that is not (file:line: why).

  A qid may be the benchmark's id or its last part ("HumanEval/12" or "12"). A prediction without a
  sample_id gets its index among its (language, qid) predictions, as BabelCode numbers them.
  """
  aliases = {qid.rsplit("/", 1)[-1]: qid for qid in questions}
  predictions, invalid, seen = [], [], set()
  count: collections.Counter = collections.Counter()
  for number, line in storage.read_jsonl_lines(path, warn=invalid.append):
    where = f"{path}:{number}"
    try:
      record = parse_line(line, where)
    except ValueError as error:
      invalid.append(str(error))
      continue
    try:
      missing = [k for k in ("qid", "language", "code") if k not in record]
      if missing:
        raise ValueError(f"a prediction needs qid, language and code; missing {missing}")
      if not isinstance(record["code"], str):
        raise ValueError(f"code must be a string, got {type(record['code']).__name__}")
      if not isinstance(record["qid"], (str, int)) or not isinstance(record["language"], str):
        raise ValueError("qid must be a string and language a string")
      language = language_name(record["language"])
      qid = str(record["qid"])
      qid = qid if qid in questions else aliases.get(qid)
      if qid is None:
        raise ValueError(f"unknown qid {record['qid']!r}")
      sample_id = record.get("sample_id", count[(language, qid)])
      if type(sample_id) not in (int, str):
        raise ValueError(f"sample_id must be an int or a string, got {json.dumps(sample_id)[:40]}")
      if (language, qid, sample_id) in seen:
        raise ValueError(f"a second prediction for {language} {qid} sample {sample_id!r}")
      count[(language, qid)] += 1
    except ValueError as error:
      invalid.append(f"{where}: {error}")
      continue
    seen.add((language, qid, sample_id))
    predictions.append(Prediction(qid, sample_id, language, record["code"], number))
  return predictions, invalid


def read_results(path: str) -> dict[tuple, dict]:
  """Results already in `path` by (language, qid, sample_id); the later of two lines wins. A torn last
  line (a kill mid-write) is cut off; any other unreadable line is ignored (that prediction is
  scored again)."""
  statuses = {s.value for s in Status}
  return storage.read_results(path, lambda r: (r["language"], r["qid"], r["sample_id"])
                              if r["status"] in statuses else None)


def score_one(prediction: Prediction, question: typed.Question, limits: execution.Limits) -> dict:
  """The results.jsonl record for one prediction."""
  renderer = get(prediction.language)
  program = renderer.program(question, prediction.code)
  result = execution.execute(program, renderer.toolchain, limits)
  outcome = judge(question, result)
  run = result.run
  return {"language": prediction.language, "qid": prediction.qid, "sample_id": prediction.sample_id,
          "status": outcome.status.value, "cases": [c.value for c in outcome.cases],
          "tests_passed": outcome.tests_passed, "num_tests": len(outcome.cases),
          "detail": outcome.detail[:1000],
          "compile_s": round(sum(s.runtime_s for s in result.compile), 3),
          "run_s": round(run.runtime_s, 3) if run else None,
          "output_truncated": result.output_truncated,
          "toolchain": execution.toolchain_version(renderer.toolchain),
          "code_sha1": prediction.code_sha1}


def language_metrics(records: Sequence[dict], ks: Sequence[int]) -> dict:
  """pass@k and the paper's columns over one language's records (one per prediction)."""
  statuses = collections.Counter(r["status"] for r in records)
  per_problem: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
  for r in records:
    per_problem[r["qid"]][0] += 1
    per_problem[r["qid"]][1] += r["status"] == Status.PASSED.value

  def percent(count: float) -> float | None:
    return round(100 * count / len(records), 4) if records else None

  some = sum(r["status"] != Status.PASSED.value and any(r["tests_passed"]) for r in records)
  fractions = [sum(r["tests_passed"]) / len(r["tests_passed"]) if r["tests_passed"] else 0.0
               for r in records]
  return {
      **mean_pass_at_k({qid: (n, c) for qid, (n, c) in per_problem.items()}, ks=tuple(ks)),
      "percent_passed": percent(statuses[Status.PASSED.value]),
      "percent_failed_test": percent(statuses[Status.FAILED.value]),
      "percent_error": percent(statuses[Status.ERROR.value] + statuses[Status.COMPILE_ERROR.value]),
      "percent_timeout": percent(statuses[Status.TIMEOUT.value]),
      "percent_passed_some_tests_but_failed": percent(some),
      "percent_tests_passed": percent(sum(fractions)),
      "num_predictions": len(records),
      "num_problems": len(per_problem),
      "samples_per_problem": sorted({n for n, _ in per_problem.values()}),
      "counts": {s.value: statuses[s.value] for s in Status},
  }


def score(predictions_path: str, benchmark: str, output_dir: str, languages: Sequence[str] | None = None,
          workers: int | None = None, limits: execution.Limits = execution.Limits(),
          ks: Sequence[int] = DEFAULT_K, progress: bool = True) -> dict:
  """Scores the predictions not yet in output_dir/results.jsonl, then writes metrics.json."""
  from tqdm import tqdm

  questions = load_benchmark(benchmark)
  predictions, invalid = read_predictions(predictions_path, questions)
  wanted = list(languages or EVALUATED)
  present = sorted({p.language for p in predictions}, key=lambda n: list(BY_NAME).index(n))
  missing_toolchain = {}
  for name in wanted:
    if name in present and name not in NOT_EVALUATED:
      lacking = execution.missing(get(name).toolchain)
      if lacking:
        missing_toolchain[name] = f"missing {', '.join(lacking)}; run `make toolchains`"
  runnable = [n for n in wanted if n in present and n not in missing_toolchain and n not in NOT_EVALUATED]
  storage.makedirs(output_dir)
  results_path = storage.join(output_dir, "results.jsonl")
  with exclusive_output(results_path, "evaluation.score"):  # one scorer per output folder at a time
    mine = [p for p in predictions if p.language in runnable]
    results = read_results(results_path)
    todo = [p for p in mine if results.get(p.key, {}).get("code_sha1") != p.code_sha1]
    failures: list[str] = []
    pool = concurrent.futures.ThreadPoolExecutor(workers or os.cpu_count() or 1)
    try:
      with storage.JsonlAppender(results_path) as out, \
           tqdm(total=len(todo), unit="prog", desc="scoring", disable=not progress,
                smoothing=0.05) as bar:
        futures = {pool.submit(score_one, p, questions[p.qid], limits): p for p in todo}
        for future in concurrent.futures.as_completed(futures):
          p = futures[future]
          try:
            record = future.result()
          except Exception as error:  # noqa: BLE001 - one prediction never stops the others
            failures.append(f"{predictions_path}:{p.line}: {p.language} {p.qid} sample "
                            f"{p.sample_id!r} could not be scored: {type(error).__name__}: {error}")
            bar.update()
            continue
          out.write(record)  # one write per line: a kill tears at most the last
          results[p.key] = record
          bar.update()
    finally:  # on an interrupt, start no more sandboxes
      pool.shutdown(wait=True, cancel_futures=True)
    metrics: dict = {"benchmark": benchmark, "predictions": storage.resolve(predictions_path),
                     "limits": dataclasses.asdict(limits), "scored_now": len(todo) - len(failures),
                     "languages": [], "toolchains": {}}
    for name in runnable:
      records = [results[p.key] for p in mine if p.language == name and p.key in results]
      metrics[name] = language_metrics(records, ks)
      metrics["languages"].append(name)
      metrics["toolchains"][name] = execution.toolchain_version(get(name).toolchain)
    metrics["not_evaluated"] = {**{n: NOT_EVALUATED[n] for n in NOT_EVALUATED}, **missing_toolchain}
    metrics["invalid_predictions"] = invalid
    metrics["unscored_predictions"] = failures
    storage.write_atomic(storage.join(output_dir, "metrics.json"), json.dumps(metrics, indent=2) + "\n")
    return metrics


COLUMNS = (("percent_error", "% error"), ("percent_failed_test", "% failed test"),
           ("percent_passed", "% passed"), ("percent_passed_some_tests_but_failed", "% passed some, failed"),
           ("percent_tests_passed", "% tests passed"), ("percent_timeout", "% timed out"))


def table(metrics: dict) -> str:
  """The per-language markdown table printed at the end of a run (and shown in the README)."""
  ks = sorted({k for name in metrics["languages"] for k in metrics[name] if k.startswith("pass@")},
              key=lambda k: int(k[5:]))
  header = ["language", "predictions", *ks, *(title for _, title in COLUMNS)]
  lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
  for name in metrics["languages"]:
    m = metrics[name]
    cells = [BY_NAME[name].display_name, str(m["num_predictions"])]
    cells += [f"{m[k]:.3f}" if isinstance(m.get(k), float) else "–" for k in ks]
    cells += [f"{m[key]:.1f}" if m[key] is not None else "–" for key, _ in COLUMNS]
    lines.append("| " + " | ".join(cells) + " |")
  for name, why in metrics["not_evaluated"].items():
    lines.append(f"| {BY_NAME[name].display_name} | not evaluated: {why} |")
  return "\n".join(lines)


def summary(metrics: dict) -> str:
  lines = [table(metrics), "", f"scored now: {metrics['scored_now']}"]
  for message in metrics["invalid_predictions"][:20]:
    lines.append(f"invalid prediction: {message}")
  for message in metrics["unscored_predictions"][:20]:
    lines.append(message)
  extra = len(metrics["invalid_predictions"]) - 20
  if extra > 0:
    lines.append(f"... and {extra} more invalid predictions (metrics.json lists them all)")
  return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--predictions", required=True, help="sample.py's predictions JSONL")
  parser.add_argument("--benchmark", default="humaneval",
                      help="humaneval, or the path of a typed question file")
  parser.add_argument("--output", required=True, help="directory for results.jsonl and metrics.json")
  parser.add_argument("--languages", default="all", help="all, or a comma-separated list")
  parser.add_argument("--workers", type=int, default=os.cpu_count(), help="sandboxes at a time")
  parser.add_argument("--timeout", type=float, default=execution.Limits.timeout_s,
                      help="wall-clock seconds of each program's run step")
  parser.add_argument("--memory_mb", type=int, default=execution.Limits.memory_mb,
                      help="address-space cap per program (RLIMIT_AS)")
  parser.add_argument("--k", default=",".join(map(str, DEFAULT_K)),
                      help="pass@k values (the paper: 1,10,100 for generation; 1,25 for translation)")
  args = parser.parse_args(argv)
  try:
    if args.workers < 1:
      raise ValueError(f"--workers must be at least 1, got {args.workers}")
    ks = [int(k) for k in args.k.split(",")]
    if any(k < 1 for k in ks):
      raise ValueError(f"--k values must be positive, got {args.k}")
    limits = execution.Limits(timeout_s=args.timeout, memory_mb=args.memory_mb)
    metrics = score(args.predictions, args.benchmark, args.output, parse_languages(args.languages),
                    args.workers, limits, ks)
  except (ValueError, OSError, OutputLocked) as error:
    print(f"error: {error}", file=sys.stderr)
    return 2
  print(summary(metrics))
  return 0


if __name__ == "__main__":
  sys.exit(main())
