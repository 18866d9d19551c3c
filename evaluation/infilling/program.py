"""One infilling middle, run and judged: the program in the sandbox and its verdict.

The published harness (human_eval_infilling/execution.py) execs `prefix + middle + suffix + "\n" +
test + "\n" + check(entry_point)` in a child process and calls it passed when the exec returns within
3 s. In that process the middle runs with the harness, so a middle that exits early (`sys.exit(0)`,
`os._exit(0)`), redefines `check`, or prints what a passed run prints would pass with an exit status or a
marker for a verdict. Here the verdict is one record line that only the harness can write, after
check(...) has returned:
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
attack the harness itself (reading its frames for the nonce, patching builtins the asserts call,
returning an object equal to everything). The sandbox (sandbox/execution.py) bounds what such code can
do to the machine; the tests' verdict is the program's own.
"""

from __future__ import annotations

import dataclasses
import enum
import secrets

from evaluation.infilling.problems import Problem
from sandbox import execution
from sandbox.renderers import base
from sandbox.renderers.python import RENDERER as PYTHON

# The published harness's timeout (evaluate_functional_correctness's default): 3 s per program.
TIMEOUT_S = 3.0
# Part of a result's identity (resumable.Benchmark.settings): a new harness version rescores.
JUDGE = "nonce record after check returns, code and test compiled apart, v1"


class Status(enum.Enum):
  PASSED = "passed"     # check(entry_point) returned
  FAILED = "failed"     # the code or the tests raised (an assertion, an exception, SystemExit)
  ERROR = "error"       # did not compile, or ended without a verdict (os._exit, a crash, a forged record)
  TIMEOUT = "timeout"   # the run hit its wall-clock limit before a verdict


# Runs as main.py; program() puts ENTRY_POINT (the name check is called on) in front of it.
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


def program(problem: Problem, middle: str) -> base.Program:
  """The sandbox program of `middle` in `problem` (module docstring)."""
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


def judge(result: execution.Execution, nonce: str) -> Verdict:
  """The verdict of one execution: its one record that carries the nonce."""
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


def run_middle(problem: Problem, middle: str, limits: execution.Limits) -> dict:
  """Runs `middle` in `problem` in the sandbox: a results.jsonl record's verdict fields."""
  prog = program(problem, middle)
  result = execution.execute(prog, PYTHON.toolchain, limits)
  verdict = judge(result, prog.files["nonce"])
  return {"status": verdict.status.value, "passed": verdict.passed, "detail": verdict.detail[:1000],
          "run_s": round(result.run.runtime_s, 3) if result.run else None}
