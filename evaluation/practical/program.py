"""One practical task's completion, run and judged: the sandbox's Python, the program, the verdicts.

evaluation/practical/score.py's docstring says how (the unit tests rewritten by evaluation/practical/assertions.py, the
candidate's and the reference's recorded values, the assertions evaluated outside the sandbox); this
module runs one completion that way (`run_problem`), and practical.py scores a predictions file with it.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import importlib.metadata
import io
import json
import os
import re
import secrets
import threading
import tokenize

from data.practical_tasks import Problem
from evaluation.practical import assertions
from sandbox import execution, recorded_values
from sandbox.renderers import base
from sandbox.renderers.python import RENDERER as PYTHON

# Wheels of the packages the tasks import; their install requirements (not extras) come along.
PACKAGES = ("numpy", "pandas")
# The other libraries CodeInsight's references import, visible where installed (scikit-learn and
# beautifulsoup4 are dependencies of this project; torch comes with its `hf` extra): a problem that
# imports one that is not installed fails on the import and is counted out of pass@1 by name.
OPTIONAL_PACKAGES = ("scipy", "scikit-learn", "beautifulsoup4", "packaging", "torch")


def installed_packages() -> tuple[str, ...]:
  """PACKAGES, then the OPTIONAL_PACKAGES installed here."""
  def installed(name):
    try:
      importlib.metadata.distribution(name)
      return True
    except importlib.metadata.PackageNotFoundError:
      return False
  return PACKAGES + tuple(p for p in OPTIONAL_PACKAGES if installed(p))
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
  libraries, single-file modules, dist-info) of installed_packages() and their requirements."""
  entries = set()
  for name in sorted(set().union(*(_requirements(p) for p in installed_packages()))):
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
    raise RuntimeError(f"{', '.join(installed_packages())} and their requirements are spread over {sorted(folders)}")
  return folders.pop()


@functools.cache
def toolchain() -> base.Toolchain:
  """sandbox/renderers/python.py's base interpreter, plus read-only site_entries(); the rest of
  the virtualenv (jax, this project) stays invisible."""
  interpreter = PYTHON.toolchain.binaries[0]
  versions = ", ".join(f"{p} {importlib.metadata.version(p)}" for p in installed_packages())
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
  starts at column 0), without trailing blank lines and column-0 comments ("# Example usage"). Where
  Python's own parser reads prompt + cut as more than the function (a character tokenize and the
  compiler read differently), it is cut again where Python sees the first module-level statement:
  what runs in the sandbox is the function and nothing else, or does not compile."""
  completion = _normalise(completion)
  lines = _lines(completion)[:_end_line(completion)]
  prompt = _normalise(problem.prompt)
  while (end := _module_level_start(prompt, lines)) is not None:
    lines = lines[:end]
  while lines and (not lines[-1].strip() or lines[-1].startswith("#")):
    lines.pop()
  text = "".join(lines)
  return text if not text or text.endswith("\n") else text + "\n"


def _module_level_start(prompt: str, lines: list[str]) -> int | None:
  """The index in `lines` (the prompt's continuation) of the first statement that Python's parser puts
  at module level, or None (none there, or it does not parse: then the sandbox's compile() fails too
  and nothing runs)."""
  try:
    tree = ast.parse(prompt + "".join(lines))
  except (SyntaxError, ValueError, MemoryError, RecursionError):  # ValueError: a null byte
    return None
  first = prompt.count("\n") + 1  # the source line of lines[0]
  starts = [min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", ()))])
            for node in tree.body]
  inside = [start - first for start in starts if start >= first]
  return min(inside) if inside else None


def generated_function(problem: Problem, completion: str) -> str:
  """The import lines, the def line and the cut completion: what BLEU compares with the reference
  (the prompt's docstring left out, as the reference has none)."""
  return problem.header + problem.signature + completion_code(problem, completion)


def reference_function(problem: Problem) -> str:
  """The reference code without a docstring of its own (Problem.body already drops one)."""
  return problem.header + problem.signature + problem.body


# Runs inside the sandbox after recorded_values.py's source (its `encode`); program() puts SITE
# (site-packages), TESTS (the rewritten test blocks), PRELOAD (name -> module imported before the
# solution runs) and SHARED (the tests share one namespace) between them.
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
        numbered = source.split("\\n")  # as compile() numbers lines (splitlines also splits at "\\x0c")
        if lines and 0 < lines[-1] <= len(numbered):
            text += " (line %d: %s)" % (lines[-1], numbered[lines[-1] - 1].strip())
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
    except (SyntaxError, ValueError) as e:  # ValueError: a null byte (Python 3.11)
        record("-", "compile", "%s: %s (line %s)" % (type(e).__name__, getattr(e, "msg", e), getattr(e, "lineno", None)))
        return
    module = {"__name__": "solution", "__builtins__": __builtins__}
    for name, imported in PRELOAD.items():
        try:
            module[name] = __import__(imported)
        except ImportError:  # as if never imported: a test that reads the name fails on it
            pass
    try:
        run(code, module)
    except BaseException as e:  # an import the sandbox lacks, a NameError at module level
        record("-", "module", describe(e, "solution.py", source))
        return
    for index, test in enumerate(TESTS):
        current[0] = index
        filename = "test_%d" % index
        if SHARED:  # one namespace, the solution run again before each test (as codeinsight.py does)
            namespace = module
            if index:
                try:
                    run(code, namespace)
                except BaseException as e:
                    record(index, "error", describe(e, "solution.py", source))
                    continue
        else:
            namespace = dict(module)  # each test on a fresh copy
        namespace["_codelm_check"] = check
        try:
            run(compile(test, filename, "exec"), namespace)
            record(index, "done", "")
        except BaseException as e:  # SystemExit and KeyboardInterrupt too: the test failed
            record(index, "error", describe(e, filename, test))


_codelm_main()
'''


_FORM_FEED_INDENT = re.compile(r"^[ \t\f]*\f", re.MULTILINE)


def _normalise(text: str) -> str:
  r"""Line breaks and indentation as Python reads a file: "\r\n" and a lone "\r" end a line too, so
  they become "\n"; a form feed in a line's indentation resets Python's column count to 0 (tokenize's
  does not), so the indentation up to the last one goes. Else a "\r" or "\f" smuggles module-level
  code past completion_code. "\v", "\x1c"-"\x1e", "\x85", "\u2028", "\u2029" (line breaks to
  str.splitlines) are no line break or indentation to Python: they stay, and code is never split at
  them here."""
  text = text.replace("\r\n", "\n").replace("\r", "\n")
  return _FORM_FEED_INDENT.sub("", text)


@functools.cache
def rewritten_tests(problem: Problem) -> tuple[assertions.RewrittenTest, ...]:
  names = assertions.solution_names(problem.code)
  return assertions.rewrite_all([_normalise(test) for test in problem.tests], names,
                                shared=problem.harness == "codeinsight")


# The codeinsight harness's imports (the authors' codeinsight.py, CodeInsightProblem.test): name ->
# module, each bound before the solution runs.
CODEINSIGHT_IMPORTS = {"np": "numpy", "pd": "pandas", "numpy": "numpy", "math": "math", "pandas": "pandas",
                       "string": "string", "datetime": "datetime", "json": "json", "itertools": "itertools",
                       "random": "random", "functools": "functools", "collections": "collections",
                       "sklearn": "sklearn", "bs4": "bs4", "re": "re"}


def preloaded(problem: Problem) -> dict[str, str]:
  """What the problem's harness imports before its solution runs, limited to the names its code or
  tests read (an import nobody reads changes nothing but the run's time: sklearn's is a second)."""
  if problem.harness != "codeinsight":
    return {}
  read = set()
  for text in (problem.code, *problem.tests):
    try:
      read |= {n.id for n in ast.walk(ast.parse(_normalise(text))) if isinstance(n, ast.Name)}
    except SyntaxError:
      return dict(CODEINSIGHT_IMPORTS)
  return {name: module for name, module in CODEINSIGHT_IMPORTS.items() if name in read}


@functools.cache
def _values_source() -> str:
  with open(recorded_values.__file__, encoding="utf-8") as f:
    return f.read()


def program(problem: Problem, code: str, reference: bool = False) -> base.Program:
  """`code` (the prompt + a cut completion, or the reference solution) as solution.py, and main.py
  running each of the problem's rewritten tests on it; records `<nonce> <test> check [index, values]`
  per assertion, `<nonce> <test> done|error <why>` per test, or `<nonce> - compile|module <why>`."""
  tests = [t.reference if reference else t.candidate for t in rewritten_tests(problem)]
  main = (_values_source() + f"\n\nSITE = {site_packages()!r}\nTESTS = {tests!r}\n"
          f"PRELOAD = {preloaded(problem)!r}\nSHARED = {problem.harness == 'codeinsight'!r}\n" + _HARNESS)
  return base.Program(files={"main.py": main, "solution.py": _normalise(code), "nonce": secrets.token_hex(16)},
                      run=(PYTHON.toolchain.binaries[0], "-I", "-S", "-B", "main.py"), env=THREADS_ENV)


@dataclasses.dataclass
class _TestRecords:
  checks: list = dataclasses.field(default_factory=list)  # (check index, raw values) in order
  end: str | None = None                                   # "done", or "error <why>"
  forged: str = ""                                         # why its records cannot be trusted


def _records(result: execution.Execution, nonce: str, tests: int
             ) -> tuple[list[_TestRecords], tuple[str, str] | None]:
  """Each test's records, and a problem-wide error ("compile" or "module", why) or None."""
  records = [_TestRecords() for _ in range(tests)]
  for line in result.stdout.split("\n"):  # "\n" only, as the harness writes them
    fields = line.split(" ", 3)
    if len(fields) < 3 or fields[0] != nonce:
      continue
    test, kind, text = fields[1], fields[2], fields[3] if len(fields) > 3 else ""
    if test == "-":
      return records, (kind, text)
    if not _INDEX.fullmatch(test) or int(test) >= tests:
      continue
    entry = records[int(test)]
    if entry.end is not None:
      entry.forged = entry.forged or "records written after the test ended"
    elif kind == "check":
      try:
        entry.checks.append(_check_record(text))
      except Exception as error:  # noqa: BLE001 - not JSON, too deep, an index of 1e400: forged
        entry.forged = entry.forged or f"{MALFORMED} ({type(error).__name__})"
    elif kind in ("done", "error"):
      entry.end = "done" if kind == "done" else "error " + text
  return records, None


# A test's index as the harness prints it ("²".isdigit() is true; int() of 5,000 digits raises).
_INDEX = re.compile(r"[0-9]{1,9}")
MALFORMED = "forged or malformed record"


def _check_record(text: str) -> tuple[int, list]:
  """`[index, values]` of a check record, exactly as the harness writes it; else ValueError."""
  data = json.loads(text)
  if type(data) is not list or len(data) != 2 or type(data[0]) is not int or type(data[1]) is not list:
    raise ValueError("not [index, values]")
  return data[0], data[1]


def _test_outcome(test: assertions.RewrittenTest, candidate: _TestRecords, reference: _TestRecords) -> str:
  """"pass", "not run", or "fail <why>": every check that ran in the reference's run ran in the
  candidate's, in the same order, and holds for the candidate's leaf values (the reference's for the
  leaves that do not depend on the candidate). Total: a record that cannot be decoded or decided
  fails the test ("fail forged or malformed record ..."), never raises."""
  if candidate.end is None:
    return "not run"
  if candidate.forged:
    return f"fail {candidate.forged}" if candidate.forged.startswith(MALFORMED) else \
        f"fail {MALFORMED}: {candidate.forged}"
  if candidate.end != "done":
    return "fail " + candidate.end.removeprefix("error ")
  for n, ((index, values), (ref_index, ref_values)) in enumerate(zip(candidate.checks, reference.checks)):
    check = test.checks[ref_index]
    if index != ref_index:
      return f"fail assertion {n + 1} ran out of the reference's order (line {check.line}: {check.text})"
    if len(values) != len(check.slots):
      return f"fail {MALFORMED} for line {check.line}: {check.text}"
    try:
      why = _decide(check, values, ref_values)
    except Exception as error:  # noqa: BLE001 - the one guard: no record may raise out of the scorer
      return f"fail {MALFORMED} for line {check.line} ({type(error).__name__}: {str(error)[:120]}): {check.text}"
    if why is not None:
      return "fail " + why
  if len(candidate.checks) != len(reference.checks):
    return (f"fail {len(candidate.checks)} assertions ran where the reference solution ran "
            f"{len(reference.checks)}")
  return "pass"


def _decide(check: assertions.Check, values: list, ref_values: list) -> str | None:
  merged = [recorded_values.decode(v) if slot.candidate else recorded_values.decode(r)
            for slot, v, r in zip(check.slots, values, ref_values)]
  return assertions.decide(check, merged)


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
