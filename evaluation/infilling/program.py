"""One infilling middle, run and judged: the program in the sandbox and its verdict.

The published harness (human_eval_infilling/execution.py) execs `prefix + middle + suffix + "\n" +
test + "\n" + check(entry_point)` in a child process and calls it passed when the exec returns within
3 s. There the middle runs in the process that decides the verdict, so it can decide it: exit early
(`sys.exit(0)`), redefine `check`, walk the stack to the harness, or return an object equal to
everything. Here a problem is judged the way typed HumanEval judges a Python program, where it can be:

**By values (155 of HumanEval's 164 problems).** An infilling problem's task id names its HumanEval
problem (`SingleLineInfilling/HumanEval/0/L0` -> `HumanEval/0`); where typed HumanEval
(evaluation/data/humaneval_typed.jsonl, sandbox/typed.py) has that question, the program is the code
exactly as given (prefix + middle + suffix: the whole HumanEval function with its imports; no head of
imports of ours) followed by codelm's Python harness (sandbox/renderers/python.py, `code_program`),
which calls the function on each typed test case's inputs and prints one value record per case
(sandbox/renderers/base.py). The expected outputs never enter the sandbox; sandbox/judge.py decodes each
value strictly by the return type and compares it outside. The function called is the problem's own
entry point: five HumanEval names are not snake case (digitSum, minSubArraySum, minPath,
specialFilter, Strongest_Extension), where BabelCode's `entry_name` (digit_sum, ...) is not what the
code defines. HumanEval's `check` is not run. So the forgeries of an in-process verdict fail:
- a stack or gc walk to the harness's `record`, a scan of /proc/self/mem for a nonce, writes to other
  descriptors: there is no verdict in the process to reach, only values, and a wrong value is wrong;
- an object equal to everything: the harness encodes only the exact built-in type the question
  returns (`type(v) is bool`), so the case is an exception, not a comparison;
- records of its own on stdout: a second or out-of-order record marks the run forged (error);
- exiting early: `sys.exit` in the function is that case's exception; after `os._exit` (or a crash)
  the cases not yet run have no record, so they are missing.
The judge's outcome maps to infilling's statuses: passed (every case returned the expected value),
failed (a case wrong, raised, or missing after others ran), error (no record at all: the code did
not compile or ended first; or forged records), timeout.

**By the nonce harness (the other 9: HumanEval/10, /22, /32, /38, /50, /103, /125, /137, /148).**
Typed HumanEval has no question for these (evaluation/humaneval/questions.py: /22, /103, /125, /137
and /148 take or return values of no single type; /10, /32, /38 and /50 have a prompt that defines a
helper the solution calls, which the other languages' prompts would not show), so the published test
runs in the process, with a verdict only the harness can write, after check(...) has returned:
- the run's nonce (16 random bytes, new for every execution) is a file of the box, never part of the
  program text: the harness reads it and deletes it before any of the program's code runs;
- the harness keeps a duplicate of stdout for its record and points file descriptor 1 at /dev/null,
  so what the program prints (as the published harness swallows it) never reaches the scorer;
- the code (prefix + middle + suffix) and the test are compiled and run as two modules in one
  namespace, the test after the code, so the middle can neither swallow the test into a string it
  opens nor keep a `check` of its own (the test's def comes later); the harness then calls the
  test's `check` on the entry point itself;
- the record `<nonce> passed` is written only when that call returns; an exception anywhere
  (SystemExit and KeyboardInterrupt too) writes `<nonce> failed <why>`, a compile error `<nonce> error
  <why>`; the harness then leaves with os._exit, so no atexit hook or thread of the program runs after
  the verdict. A run with no record (os._exit, a crash, a kill) or a record twice is not passed.
What this cannot stop, as no in-process test can (the published harness neither): code written to
attack the harness itself (walking frames or the gc to its `record`, reading its memory for the
nonce, returning an object equal to everything). score.py counts and prints the problems judged so.
The sandbox (sandbox/execution.py) bounds what such code can do to the machine.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import json
import secrets
from collections.abc import Mapping

from evaluation.benchmark_data import load_benchmark
from evaluation.infilling.problems import Problem
from sandbox import execution
from sandbox import judge as values
from sandbox.renderers import base
from sandbox.renderers.python import RENDERER as PYTHON
from sandbox.typed import Question

# The published harness's timeout (evaluate_functional_correctness's default): 3 s per program.
TIMEOUT_S = 3.0
# Part of a result's identity (resumable.Benchmark.settings): a new judge version rescores.
JUDGE = ("values compared outside with typed HumanEval's test cases (the problem's entry point called), "
         "the nonce record where no typed question, v2")


class Status(enum.Enum):
  PASSED = "passed"     # every test case returned the expected value (nonce harness: check returned)
  FAILED = "failed"     # a test case returned a wrong value, raised, or had no record after others ran
  ERROR = "error"       # did not compile, ended before any test case, or forged records
  TIMEOUT = "timeout"   # the run hit its wall-clock limit before every test case passed


# The nonce harness (the problems typed HumanEval lacks). Runs as main.py; nonce_program() puts
# ENTRY_POINT (the name check is called on) in front of it.
_HARNESS = '''
import os, sys


def _codelm_main():
    with open("nonce") as f:
        nonce = f.read()
    os.remove("nonce")
    channel = os.dup(1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.close(devnull)
    write, leave = os.write, os._exit

    def record(kind, text=""):
        line = "\\n" + nonce + " " + kind + " " + text.replace("\\r", " ").replace("\\n", " ")[:600] + "\\n"
        write(channel, line.encode("utf-8", "backslashreplace"))
        leave(0)

    def why(error):
        return type(error).__name__ + (": " + str(error)[:300] if str(error) else "")

    namespace = {"__name__": "__infilling__", "__builtins__": __builtins__}
    modules = []
    for name in ("code.py", "test.py"):
        with open(name, encoding="utf-8") as f:
            source = f.read()
        try:
            modules.append(compile(source, name, "exec"))
        except (SyntaxError, ValueError) as e:  # ValueError: a null byte
            record("error", "%s does not compile: %s: %s (line %s)"
                   % (name, type(e).__name__, getattr(e, "msg", e), getattr(e, "lineno", None)))
    try:
        for module in modules:
            exec(module, namespace)
        check, candidate = namespace["check"], namespace[ENTRY_POINT]
        check(candidate)
    except BaseException as e:  # SystemExit and KeyboardInterrupt too: the tests did not pass
        record("failed", why(e))
    record("passed")


_codelm_main()
'''


def nonce_program(problem: Problem, middle: str) -> base.Program:
  """The nonce harness's sandbox program of `middle` in `problem` (module docstring)."""
  return base.Program(files={"main.py": f"ENTRY_POINT = {problem.entry_point!r}\n{_HARNESS}",
                             "code.py": problem.code(middle), "test.py": problem.test,
                             "nonce": secrets.token_hex(16)},
                      run=(PYTHON.toolchain.binaries[0], "-I", "-S", "-B", "main.py"))


@dataclasses.dataclass(frozen=True)
class Verdict:
  status: Status
  detail: str           # why it did not pass: the exception, the compile error, the stderr tail

  @property
  def passed(self) -> bool:
    return self.status is Status.PASSED


def nonce_judge(result: execution.Execution, nonce: str) -> Verdict:
  """The nonce harness's verdict of one execution: its one record that carries the nonce."""
  records = [line[len(nonce) + 1:] for line in result.stdout.split("\n") if line.startswith(nonce + " ")]
  run = result.run
  if len(records) > 1:
    return Verdict(Status.ERROR, f"forged record: {len(records)} verdict lines")
  if records:
    kind, _, text = records[0].partition(" ")
    if kind == "passed":
      return Verdict(Status.PASSED, "")
    if kind in ("failed", "error"):
      return Verdict(Status(kind), text.strip())
    return Verdict(Status.ERROR, f"forged record: {records[0][:80]!r}")
  if run is None or run.timed_out:
    return Verdict(Status.TIMEOUT, f"no verdict within {run.runtime_s:.1f} s" if run else "did not run")
  tail = result.stderr.strip()[-600:]
  return Verdict(Status.ERROR, f"no verdict: the program ended (exit {run.exit_code}) before check returned"
                               + (f": {tail}" if tail else ""))


@functools.cache
def typed_questions() -> Mapping[str, Question]:
  """Typed HumanEval's questions by HumanEval id (evaluation/data/humaneval_typed.jsonl)."""
  return load_benchmark("humaneval")


def question_of(problem: Problem) -> Question | None:
  """The typed question that judges `problem` by values; None: the nonce harness judges it."""
  return typed_questions().get(problem.humaneval_id)


def value_program(problem: Problem, question: Question, middle: str) -> base.Program:
  """The code as given (prefix + middle + suffix), then the Python harness calling the problem's
  entry point on each typed test case's inputs and printing the values (module docstring)."""
  return PYTHON.code_program(question, problem.code(middle), problem.entry_point)


_OUTCOMES = {values.Status.PASSED: Status.PASSED, values.Status.FAILED: Status.FAILED,
             values.Status.COMPILE_ERROR: Status.ERROR, values.Status.ERROR: Status.ERROR,
             values.Status.TIMEOUT: Status.TIMEOUT}


def value_verdict(question: Question, result: execution.Execution) -> Verdict:
  """The verdict of one execution of a value program: sandbox/judge.py's outcome, as infilling's status."""
  outcome = values.judge(question, result)
  return Verdict(_OUTCOMES[outcome.status], outcome.detail)


def identity(problem: Problem, middle: str) -> str:
  """Everything besides the settings that decides the verdict of `middle` (the shared scorer's program
  text: equal texts share one execution, a changed one is run again): the program, and the expected
  outputs where values are judged."""
  question = question_of(problem)
  if question is None:
    return problem.program(middle)
  return (value_program(problem, question, middle).files["main.py"] + "\0"
          + json.dumps(question.to_json(), sort_keys=True))


def run_by_values(problem: Problem, question: Question, middle: str,
                  limits: execution.Limits) -> tuple[Verdict, execution.Execution]:
  result = execution.execute(value_program(problem, question, middle), PYTHON.toolchain, limits)
  return value_verdict(question, result), result


def run_by_nonce(problem: Problem, middle: str, limits: execution.Limits) -> tuple[Verdict, execution.Execution]:
  prog = nonce_program(problem, middle)
  result = execution.execute(prog, PYTHON.toolchain, limits)
  return nonce_judge(result, prog.files["nonce"]), result


def run_middle(problem: Problem, middle: str, limits: execution.Limits) -> dict:
  """Runs `middle` in `problem` in the sandbox, judged by values where typed HumanEval has the
  problem's question and by the nonce harness elsewhere: a results.jsonl record's verdict fields."""
  question = question_of(problem)
  verdict, result = (run_by_nonce(problem, middle, limits) if question is None
                     else run_by_values(problem, question, middle, limits))
  return {"status": verdict.status.value, "passed": verdict.passed, "detail": verdict.detail[:1000],
          "run_s": round(result.run.runtime_s, 3) if result.run else None}
