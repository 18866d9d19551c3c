"""Practical-task verdicts are decided outside the sandbox (evaluation/practical/assertions.py,
sandbox/recorded_values.py): the rewrite keeps expected values out of the candidate's program,
only plain data crosses the wall, every reference solution of the in-repo set passes, and the
forgeries that once scored 3/3 (an object equal to everything, "\\r" line breaks smuggling
module-level code, a frame walk to the harness's record function or nonce, patching builtins.exec)
and the typed-HumanEval sandbox's hostile programs in Python all fail."""

from __future__ import annotations

import collections
import concurrent.futures
import json
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from data.practical_tasks import SMALL_DATASET, Problem, load_problems
from evaluation.practical import assertions, score as practical
from sandbox import execution, recorded_values

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIMITS = execution.Limits(timeout_s=10)
needs_sandbox = pytest.mark.skipif(bool(execution.missing(practical.toolchain())),
                                   reason="no sandbox (bwrap) on this machine; run `make toolchains`")
DATASET = {p.problem_id: p for p in load_problems(SMALL_DATASET)}
TARGETS = ("pandas_001", "numpy_001", "dict_001", "regex_007")


# ---- the rewrite -----------------------------------------------------------------------------------

def test_expected_values_never_reach_the_candidates_program():
  test = ("df = pd.DataFrame({'a': [1, -2, 3]})\n"
          "expected = pd.DataFrame({'a': [1, 3]}, index=[0, 2])\n"
          "result = f(df)\n"
          "assert result['a'].tolist() == [1, 3]\n"
          "assert result.equals(expected)\n"
          "assert 'total' not in df.columns\n"
          "pd.testing.assert_frame_equal(result, expected)\n")
  rewritten = assertions.rewrite(test, {"f"})
  assert "[1, 3]" not in rewritten.candidate and "expected" not in rewritten.candidate
  assert "'total'" not in rewritten.candidate
  assert "df = pd.DataFrame({'a': [1, -2, 3]})" in rewritten.candidate  # the input stays
  assert "expected" in rewritten.reference
  kinds = [(c.kind, [(s.source, s.candidate) for s in c.slots]) for c in rewritten.checks]
  assert kinds == [("assert", [("result['a'].tolist()", True)]),
                   ("assert", [("result", True), ("expected", False)]),
                   ("assert", [("df.columns", True)]),  # f(df) may have mutated df
                   ("call", [("result", True), ("expected", False)])]


def test_the_rewrite_keeps_what_a_test_defines():
  # CodeInsight: a class attribute, read as an attribute (never as a bare name), is what the test defines.
  test = ("class DummyClass:\n    a_string = 'hello'\n    count = 2\n"
          "result = f(DummyClass)\nexpected = 'hellohello'\nassert result == expected\n")
  rewritten = assertions.rewrite(test, {"f"})
  namespace = {"f": lambda c: c.a_string * c.count, assertions.CHECK: lambda index, thunks: [t and t() for t in thunks]}
  exec(rewritten.candidate, namespace)  # the class keeps its attributes in the candidate's program
  assert namespace["DummyClass"].a_string == "hello" and namespace["DummyClass"].count == 2
  assert "'hellohello'" not in rewritten.candidate  # the expected value still stays out


def test_a_check_s_verdict_does_not_depend_on_what_the_process_judged_before():
  # In a fresh process (numpy's lazy imports not yet done), the first `.all()` check must be decided.
  code = ("import numpy as np\nfrom evaluation.practical import assertions\n"
          "test = 'arr0 = np.array([1, 2])\\nassert (f(arr0) == np.array([1, 2])).all()\\n'\n"
          "check = assertions.rewrite(test, {'f'}).checks[0]\n"
          "print(assertions.decide(check, [np.array([1, 2])]), assertions.decide(check, [np.array([1, 3])]))\n")
  out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
  assert out.stdout.strip() == "None AssertionError (line 2: assert (f(arr0) == np.array([1, 2])).all())", (
      out.stdout + out.stderr)


def test_taint_follows_assignments_calls_and_control_flow():
  test = ("x = [3, 1]\ny = sorted([3, 1])\nz = sorted(x)\nresult = f(x)\nalias = result\nextra = []\nalias.extend(extra)\n"
          "try:\n    f(None)\n    raised = False\nexcept TypeError:\n    raised = True\n"
          "for a, b in [(1, 2), (3, 4)]:\n    assert f([a]) == [b]\n")
  tainted = assertions.tainted_names(__import__("ast").parse(test), {"f"})
  assert {"f", "x", "z", "result", "alias", "extra", "raised"} <= tainted  # z: flow-insensitive
  assert "a" in tainted and not {"y", "b"} & tainted  # f([a]) could mutate a; b only iterates
  checks = assertions.rewrite(test, {"f"}).checks
  assert [(s.source, s.candidate) for s in checks[0].slots] == [("f([a])", True), ("b", False)]


def test_plain_data_only_crosses_the_wall():
  values = [None, True, 2 ** 80, float("nan"), "s", (1, [2]), {3, 1}, {1: "a"}, collections.Counter("aab"),
            np.int64(3), np.array([[1.5, 2.0]]), np.array(["2020-01-01"], dtype="M8[ns]"),
            pd.Series([1, None], dtype="Int64", name="n"), pd.DataFrame({"a": [1, 2], "b": ["x", "y"]}),
            pd.Index([1, 2], name="i"), pd.Timestamp("2020-01-01")]
  for value in values:
    back = recorded_values.loads(recorded_values.dumps(value))
    assert type(back) is type(value), value
    if isinstance(value, pd.DataFrame):
      pd.testing.assert_frame_equal(back, value)
    elif isinstance(value, pd.Series):
      pd.testing.assert_series_equal(back, value)
    elif isinstance(value, pd.Index):
      pd.testing.assert_index_equal(back, value)
    elif isinstance(value, np.ndarray):
      assert back.dtype == value.dtype and np.array_equal(back, value)
    elif value == value:
      assert back == value

  class Anything:
    def __eq__(self, other):
      return True

  class Yes(list):
    def __eq__(self, other):
      return True

  looped = []
  looped.append(looped)
  for forged in (Anything(), Yes(), looped, list(range(10 ** 6)), pd.DataFrame({"a": [Anything()]})):
    back = recorded_values.loads(recorded_values.dumps(forged))
    check = assertions.Check(0, 1, "assert x == [1]", "assert", f"{assertions.SLOT}0 == [1]",
                             (assertions.Slot("x", True),))
    assert assertions.decide(check, [back]) is not None, forged
  assert isinstance(recorded_values.loads("[\"list\", [[\"int\""), recorded_values.Unrecorded)


def test_iterators_namedtuples_plain_objects_and_library_values_cross_as_values():
  def back(value):
    return recorded_values.loads(recorded_values.dumps(value))

  def twice():
    yield 1
    yield 2

  import itertools

  # Iterators arrive as iterators over the items `list(it)` would have drawn.
  assert list(back(twice())) == [1, 2] and list(back(map(str, [1, 2]))) == ["1", "2"]
  assert list(back(itertools.product([1], "ab"))) == [(1, "a"), (1, "b")]
  assert back(twice()) != [1, 2]  # a generator is no list, as in Python
  assert isinstance(back(itertools.count()), recorded_values.Unrecorded)  # endless: too large
  point = collections.namedtuple("Point", "x y")
  assert back(point(1, 2)) == (1, 2) and back([point(1, 2)]) == [(1, 2)]

  class Item:  # a plain class: its class's name and attributes
    def __init__(self, age):
      self.age = age

  assert back([Item(25), Item(30)]) == back([Item(25), Item(30)])
  assert back(Item(25)) != back(Item(26)) and back(Item(25)) != 25

  class Counted:  # a class with its own __eq__ runs its code: never recorded
    def __init__(self):
      self.age = 1

    def __eq__(self, other):
      return True

  assert isinstance(back(Counted()), recorded_values.Unrecorded)
  structured = np.array([("a", [1, 2, 3])], dtype=[("name", "U10"), ("value", "3int16")])
  assert back(structured).dtype == structured.dtype and (back(structured) == structured).all()
  assert back(np.dtype("float32")) == np.float32 and back(np.asmatrix([[1, 2]])).shape == (1, 2)
  assert type(back(np.asmatrix([[1, 2]]))) is np.matrix
  assert back(pd.Interval(0, 1, closed="left")) == pd.Interval(0, 1, closed="left")
  assert back(pd.Series({"A": int, "B": float})).tolist() == [int, float]
  # Document nodes: an ElementTree Element by its tag, text and children; bs4's Tag by its markup.
  from xml.etree.ElementTree import Element
  from bs4 import BeautifulSoup

  root, child = Element("root"), Element("child")
  root.append(child)
  assert back(list(root)) == back([Element("child")]) and back(list(root)) != back([Element("other")])
  soup = BeautifulSoup('<a href="#">E</a><a>F</a>', "html.parser")
  assert back(soup.find_all("a", string="E")) == back([soup.find_all("a")[0]])
  assert back(soup.find_all("a")) != back(soup.find_all("a")[:1]) and back(soup.a.string) == "E"
  # A list of ints travels as one JSON list: 30,000 of them fit in a record.
  assert back([0] * 30_000) == [0] * 30_000 and back((1, 2)) == (1, 2) and back([True, 1]) == [True, 1]
  assert isinstance(back(list(range(10 ** 6))), recorded_values.Unrecorded)
  with pytest.raises(recorded_values.MalformedRecord):
    recorded_values.decode(["ints", "list", [1, "2"]])
  with pytest.raises(recorded_values.MalformedRecord):
    recorded_values.decode(["builtin_type", "exec"])  # only the builtin types encode writes
  with pytest.raises(recorded_values.MalformedRecord):
    recorded_values.decode(["object", "Item", [["age"]]])


def test_comprehensions_and_lambdas_are_decided_outside():
  def checks(test):
    return [(c.expression, [(s.source, s.candidate) for s in c.slots])
            for c in assertions.rewrite(test, {"f"}).checks]

  slot = assertions.SLOT
  assert checks("r = f()\nassert all(0.0 <= x <= 1.0 for x in r)") == [
      (f"all((0.0 <= x <= 1.0 for x in {slot}0))", [("r", True)])]
  assert checks("assert sorted(f(), key=lambda d: sorted(d.items())) == [{'a': 1}]") == [
      (f"sorted({slot}0, key=lambda d: sorted(d.items())) == [{{'a': 1}}]", [("f()", True)])]
  assert checks("r = f()\nassert [p[0] for p in r if p[1] > 2] == [1]") == [
      (f"[p[0] for p in {slot}0 if p[1] > 2] == [1]", [("r", True)])]
  # A leaf that needs the comprehension's own variable (an attribute of it): the whole comprehension
  # is one leaf, evaluated in the sandbox and recorded as the items it yields.
  assert checks("r = f()\nassert all(x.age > 1 for x in r)") == [
      (f"all({slot}0)", [("(x.age > 1 for x in r)", True)])]

  def decide(test, *values):
    check = assertions.rewrite(test, {"f"}).checks[0]
    return assertions.decide(check, [recorded_values.loads(recorded_values.dumps(v)) for v in values])

  assert decide("r = f()\nassert all(0.0 <= x <= 1.0 for x in r)", iter([0.5, 1.0])) is None
  assert decide("r = f()\nassert all(0.0 <= x <= 1.0 for x in r)", iter([0.5, 1.5])) is not None
  assert decide("r = f()\nassert isinstance(r, np.ndarray) and r.dtype == np.float32",
                np.zeros(2, np.float32), np.dtype("float32")) is None
  assert decide("assert sorted(f(), key=lambda d: sorted(d.items())) == [{'a': 1}, {'b': 2}]",
                [{"b": 2}, {"a": 1}]) is None


def test_a_shared_harness_taints_and_keeps_names_across_tests():
  # The codeinsight harness runs a problem's tests in one namespace: test 1 compares the `result`
  # that test 0 computed, so it is the candidate's value (tainted), and `expected` that only test 1
  # reads is kept out of the candidate's tests but stays in the reference's.
  tests = ["expected = [1, 2]\nresult = f()\nassert len(result) == 2\n", "assert result == expected\n"]
  shared = assertions.rewrite_all(tests, {"f"}, shared=True)
  assert [(s.source, s.candidate) for s in shared[1].checks[0].slots] == [("result", True), ("expected", False)]
  assert "expected" not in shared[0].candidate and "result = f()" in shared[0].candidate
  assert "expected = [1, 2]" in shared[0].reference
  alone = assertions.rewrite_all(tests, {"f"})  # isolated: test 1's `result` is not the candidate's
  assert [(s.source, s.candidate) for s in alone[1].checks[0].slots] == [("result", False), ("expected", False)]


def test_checks_are_decided_with_the_tests_own_semantics():
  def decide(expression, *values):
    check = assertions.Check(0, 3, "assert ...", "assert", expression,
                             tuple(assertions.Slot(f"v{i}", True) for i in range(len(values))))
    return assertions.decide(check, list(values))

  slot = assertions.SLOT
  assert decide(f"{slot}0 == [1, 3]", [1, 3]) is None
  assert decide(f"{slot}0 == [1, 3]", (1, 3)) == "AssertionError (line 3: assert ...)"
  assert decide(f"np.allclose({slot}0, [0.0, 1.0])", np.array([0.0, 1.0 + 1e-9])) is None
  assert decide(f"abs({slot}0 - 5.0) < 1e-09", 5.0) is None
  assert decide(f"{slot}0 is True", np.bool_(True)) is not None  # `is` is identity, as in the test
  assert "ZeroDivisionError" in decide(f"{slot}0", recorded_values.Unrecorded("ZeroDivisionError: x"))
  frame = pd.DataFrame({"a": [1]})
  call = assertions.Check(0, 1, "pd.testing.assert_frame_equal(r, e)", "call",
                          f"pd.testing.assert_frame_equal({slot}0, {slot}1)",
                          (assertions.Slot("r", True), assertions.Slot("e", False)))
  assert assertions.decide(call, [frame, frame.copy()]) is None
  assert assertions.decide(call, [frame, frame.astype(float)]).startswith("AssertionError")


# ---- in the sandbox --------------------------------------------------------------------------------

@needs_sandbox
def test_every_reference_solution_of_the_in_repo_set_passes():
  practical._REFERENCE.clear()  # run them here, not from another test's cache
  with concurrent.futures.ThreadPoolExecutor(2) as pool:
    records = list(pool.map(lambda p: practical.reference_records(p, LIMITS), DATASET.values()))
  assert len(records) == 82 and all(r.end == "done" for rs in records for r in rs)
  problem = DATASET["pandas_001"]
  assert practical.run_problem(problem, problem.body, LIMITS)["outcomes"] == ["pass"] * 3


_ANYTHING = ("    class Anything:\n"
             "        def __eq__(self, other): return True\n"
             "        def __ne__(self, other): return False\n"
             "        def __getattr__(self, name): return self\n"
             "        def __getitem__(self, key): return self\n"
             "        def __call__(self, *args, **kwargs): return self\n"
             "        def __bool__(self): return True\n"
             "        def __len__(self): return 0\n"
             "        def __iter__(self): return iter(())\n"
             "    return Anything()\n")
_SUBCLASS = ("    class Yes(dict):\n"
             "        def __eq__(self, other): return True\n"
             "    return Yes()\n")
_CARRIAGE_RETURN = "    return None\rimport builtins\rbuiltins.exec = lambda *a, **k: None\r"
_RECORD_WALK = ("    import os, sys\n"
                "    frame = sys._getframe()\n"
                "    while 'record' not in frame.f_locals:\n"
                "        frame = frame.f_back\n"
                "    for index in range(len(frame.f_globals['TESTS'])):\n"
                "        frame.f_locals['record'](index, 'done', '')\n"
                "    os._exit(0)\n")
# The strongest generic claim: every check of every test, every leaf True, 1 or the input.
_NONCE_WALK = ("    import ast, json, os, sys\n"
               "    frame = sys._getframe()\n"
               "    while 'nonce' not in frame.f_locals:\n"
               "        frame = frame.f_back\n"
               "    nonce, tests = frame.f_locals['nonce'], frame.f_globals['TESTS']\n"
               "    for index, test in enumerate(tests):\n"
               "        for node in ast.walk(ast.parse(test)):\n"
               "            if isinstance(node, ast.Call) and getattr(node.func, 'id', '') == '_codelm_check':\n"
               "                thunks = node.args[1].elts\n"
               "                values = [None if isinstance(t, ast.Constant) else GUESS for t in thunks]\n"
               "                sys.stdout.write('%s %d check %s\\n' % (nonce, index, json.dumps([node.args[0].value, values])))\n"
               "        sys.stdout.write('%s %d done \\n' % (nonce, index))\n"
               "    sys.stdout.flush()\n"
               "    os._exit(0)\n")
_EXEC_PATCH = ("    import builtins\n"
               "    builtins.exec = lambda *a, **k: None\n"
               "    return None\n")
FORGERIES = {"object equal to everything": _ANYTHING, "dict subclass equal to everything": _SUBCLASS,
             "carriage returns": _CARRIAGE_RETURN, "frame walk to record": _RECORD_WALK,
             "frame walk to the nonce, every leaf True": _NONCE_WALK.replace("GUESS", "['bool', True]"),
             "frame walk to the nonce, every leaf 1": _NONCE_WALK.replace("GUESS", "['int', 1]"), "builtins.exec patched": _EXEC_PATCH}


@needs_sandbox
def test_forged_passes_fail_on_every_problem():
  jobs = [(kind, qid) for kind in FORGERIES for qid in TARGETS]

  def score(job):
    kind, qid = job
    return kind, qid, practical.run_problem(DATASET[qid], FORGERIES[kind], LIMITS)

  with concurrent.futures.ThreadPoolExecutor(2) as pool:
    for kind, qid, result in pool.map(score, jobs):
      assert not result["passed"] and result["tests_passed"] == 0, (kind, qid, result)
  # The carriage returns are line breaks before the cut: the module-level lines are gone.
  assert practical.completion_code(DATASET["dict_001"], _CARRIAGE_RETURN) == "    return None\n"


@needs_sandbox
def test_the_candidates_program_holds_no_expected_value():
  problem = DATASET["pandas_001"]
  main = practical.program(problem, problem.prompt + problem.body).files["main.py"]
  assert "df0['a'] >= 0" not in main  # (the reference's code is not there either)
  for expected in ("[1, 3]", "[4, 6]", "[0, 2]", "== 0"):
    assert expected not in main, expected
  # Literals are compared here, outside: not even the reference's program holds them.
  assert "[1, 3]" not in practical.program(problem, problem.code, reference=True).files["main.py"]
  assert practical.rewritten_tests(problem)[0].checks[0].expression.endswith("== [1, 3]")


@needs_sandbox
def test_the_typed_humaneval_hostile_programs_fail():
  with open(os.path.join(ROOT, "tests", "solutions", "python.json"), encoding="utf-8") as f:
    attacks = json.load(f)["attacks"]
  problem = Problem(problem_id="h0", intent="Say whether two numbers are closer than threshold.",
                    code=("def has_close_elements(numbers, threshold):\n"
                          "    return any(abs(a - b) < threshold for i, a in enumerate(numbers)\n"
                          "               for b in numbers[i + 1:])\n"),
                    tests=("assert has_close_elements([1.0, 2.0, 3.9], 0.3) is False\n",
                           "assert has_close_elements([1.0, 2.8, 3.0], 0.3) is True\n"), categories=())
  limits = execution.Limits(timeout_s=3)

  def score(kind):
    code = (attacks[kind].replace("{PORT}", "9").replace("{HOSTDIR}", "/nonexistent")
            .replace("{SECRET}", "/etc/shadow"))
    return kind, practical.run_problem(problem, code, limits)

  with concurrent.futures.ThreadPoolExecutor(2) as pool:
    for kind, result in pool.map(score, attacks):
      assert not result["passed"] and result["tests_passed"] <= 1, (kind, result)  # returns False: 1 of 2


@needs_sandbox
def test_per_test_outcomes_and_messages_stay():
  problem = DATASET["dict_001"]
  # Inverts the mapping but drops the empty case's type: {} -> [] fails only the second test.
  wrong = "    if not dict0:\n        return []\n    return {v: k for k, v in dict0.items()}\n"
  result = practical.run_problem(problem, wrong, LIMITS)
  assert result["outcomes"][0] == "pass" and result["outcomes"][2] == "pass"
  assert result["outcomes"][1] == "fail AssertionError (line 1: assert f_dict_001({}) == {})"
  raises = practical.run_problem(problem, "    return 1 / 0\n", LIMITS)
  assert raises["error"].startswith("ZeroDivisionError: division by zero (line 1: assert f_dict_001("), raises
  broken = practical.run_problem(problem, "    return {(\n", LIMITS)
  assert broken["error"] == "compile" and broken["detail"].startswith("SyntaxError: "), broken
  assert broken["outcomes"] == ["not run"] * 3
