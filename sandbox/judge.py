"""From a test program's execution to per-test-case outcomes, compared outside the sandbox.

The program printed record lines (sandbox/renderers/base.py): values, never verdicts. Here each
value is decoded strictly by the question's return type and compared with the expected output, which
never entered the sandbox.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import re

from sandbox import typed
from sandbox.execution import Execution
from sandbox.renderers.base import RECORD_PREFIX
from sandbox.typed import Question


class Status(enum.Enum):
  PASSED = "passed"              # every test case returned the expected value
  FAILED = "failed"              # it ran; at least one test case is wrong, threw, or is missing
  COMPILE_ERROR = "compile_error"
  ERROR = "error"                # crashed outside the test cases, or forged/garbled records
  TIMEOUT = "timeout"            # the run step hit its wall-clock limit


class Case(enum.Enum):
  PASSED = "passed"
  FAILED = "failed"        # wrong value
  EXCEPTION = "exception"  # raised / threw / panicked, or returned a value of the wrong type
  MISSING = "missing"      # no record: the program ended or was killed first


@dataclasses.dataclass(frozen=True)
class Outcome:
  status: Status
  cases: tuple[Case, ...]        # in the question's test-case order
  detail: str                    # first failing case, compiler message, or why it errored

  @property
  def tests_passed(self) -> list[bool]:
    return [c is Case.PASSED for c in self.cases]


MALFORMED = "forged or malformed record"  # the detail's start where a record could not be read
# A test case index as the harnesses print it: ASCII digits that fit an int64 ("²".isdigit() is true,
# and int() of 5,000 digits raises).
_INDEX = re.compile(r"-?[0-9]{1,18}")


class _Forged(Exception):
  """A record no harness prints: its message is the verdict's detail."""


@dataclasses.dataclass
class _Reading:
  """The cases read so far from one program's records."""
  cases: list
  details: list
  order: list = dataclasses.field(default_factory=list)


def judge(question: Question, execution: Execution, tolerance: typed.Tolerance = typed.PAPER_TOLERANCE) -> Outcome:
  """The question's verdict from what its program printed; floats compared within
  `tolerance.of(question)` (1e-6, or 1e-9 where the expected values are doubles). Total: whatever the
  program printed is a verdict, never an exception."""
  n = len(question.test_cases)
  if execution.compile_failed:
    step = next(s for s in execution.compile if s.exit_code != 0)
    why = "compile step timed out" if step.timed_out else _tail(execution.stderr, 600)
    return Outcome(Status.COMPILE_ERROR, (Case.MISSING,) * n, why)
  by_idx = {case.idx: i for i, case in enumerate(question.test_cases)}
  reading = _Reading([None] * n, [""] * n)
  epsilon = tolerance.of(question)
  forged = ""
  # "\n" only: str.splitlines would also split a record at a "\x1c" or "\u2028" inside a string value.
  for line in execution.stdout.split("\n"):
    if not line.startswith(RECORD_PREFIX):
      continue
    try:
      _read(question, by_idx, epsilon, line, reading)
    except _Forged as error:
      forged = forged or str(error)
    except Exception as error:  # noqa: BLE001 - the one guard: no record may raise out of the judge
      forged = forged or f"{MALFORMED} ({type(error).__name__}) {_show(line)}"
  final = tuple(c if c is not None else Case.MISSING for c in reading.cases)
  if forged:  # printed records of its own: nothing it printed can be trusted
    return Outcome(Status.ERROR, tuple(Case.FAILED if c is Case.PASSED else c for c in final), forged)
  return _verdict(question, execution, final, reading.details)


def _read(question: Question, by_idx: dict, epsilon: float, line: str, reading: _Reading) -> None:
  """One record line into `reading`; _Forged where no harness prints it."""
  parts = line[len(RECORD_PREFIX):].split(" ", 2)
  if len(parts) < 2 or not _INDEX.fullmatch(parts[0]) or int(parts[0]) not in by_idx \
      or parts[1] not in ("ok", "exception"):
    raise _Forged(f"forged records: garbled record {_show(line)}")
  i = by_idx[int(parts[0])]
  if reading.cases[i] is not None or (reading.order and i <= reading.order[-1]):
    raise _Forged(f"forged records: a second or out-of-order record for test case "
                  f"{question.test_cases[i].idx}")
  reading.order.append(i)
  payload = parts[2] if len(parts) > 2 else ""
  if parts[1] == "exception":
    reading.cases[i], reading.details[i] = Case.EXCEPTION, payload[:300]
    return
  try:
    data = json.loads(payload)
  except (ValueError, RecursionError) as error:  # not JSON, too deep, an int of 5,000 digits
    raise _Forged(f"{MALFORMED} for test case {question.test_cases[i].idx}: {type(error).__name__} "
                  f"{_show(payload)}") from None
  try:
    actual = typed.decode(question.return_type, data, "returned value")
  except typed.NotADouble as error:
    raise _Forged(f"{MALFORMED} for test case {question.test_cases[i].idx}: {error}") from None
  except ValueError as error:  # well-formed data of another type: what the function returned
    reading.cases[i], reading.details[i] = Case.EXCEPTION, f"unreadable value: {str(error)[:200]}"
    return
  expected = question.test_cases[i].output
  if typed.equal(question.return_type, expected, actual, epsilon):
    reading.cases[i] = Case.PASSED
  else:
    reading.cases[i] = Case.FAILED
    reading.details[i] = f"expected {payload_of(question, expected)}, got {payload[:200]}"


def _verdict(question: Question, execution: Execution, final: tuple, details: list) -> Outcome:
  run = execution.run
  if all(c is Case.PASSED for c in final):
    return Outcome(Status.PASSED, final, "")
  if run is not None and run.timed_out:
    return Outcome(Status.TIMEOUT, final, f"timed out after {run.runtime_s:.1f} s")
  if all(c is Case.MISSING for c in final):
    why = f"exit {run.exit_code}" if run is not None else "did not run"
    return Outcome(Status.ERROR, final, f"no result records ({why}): {_tail(execution.stderr, 600)}")
  first = next(i for i, c in enumerate(final) if c is not Case.PASSED)
  detail = details[first] or (f"exit {run.exit_code}: {_tail(execution.stderr, 300)}"
                              if run is not None else "")
  return Outcome(Status.FAILED, final, f"test case {question.test_cases[first].idx} "
                                       f"{final[first].value}: {detail}")


def _show(text: str) -> str:
  return repr(text[:120])


def payload_of(question: Question, value) -> str:
  return json.dumps(typed.encode(question.return_type, value))[:200]


def _tail(text: str, n: int) -> str:
  text = text.strip()
  return text[-n:] if len(text) > n else text
