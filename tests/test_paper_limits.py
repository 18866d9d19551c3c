"""The paper's limits (BabelCode's): 10 s a run, 15 s for Java and TypeScript; floats equal within
1e-6, doubles within 1e-9, a double told by its digits. Both overridable, both in metrics.json."""

from __future__ import annotations

import json
import os

import pytest

from evaluation import score
from sandbox import execution, typed
from sandbox.judge import Status, judge
from sandbox.renderers import get
from sandbox.renderers.base import RECORD_PREFIX

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "data", "typed_questions.jsonl")
with open(os.path.join(HERE, "solutions", "python.json"), encoding="utf-8") as f:
  PYTHON = json.load(f)

needs_python = pytest.mark.skipif(bool(execution.missing(get("python").toolchain)),
                                  reason="no sandbox (bwrap) on this machine; run `make toolchains`")


def question(return_type: str, outputs: list) -> typed.Question:
  return typed.question_from_json({
      "qid": "t/1", "entry_fn_name": "f", "params": [{"name": "x", "type": "int"}], "return_type": return_type,
      "description": "d", "test_cases": [{"idx": i, "inputs": [i], "output": out} for i, out in enumerate(outputs)]})


def printed(values: list) -> execution.Execution:
  """An execution whose program printed `values` (JSON) as its records, one per test case."""
  stdout = "".join(f"\n{RECORD_PREFIX}{i} ok {json.dumps(v)}\n" for i, v in enumerate(values))
  run = execution.Step(argv=("./main",), exit_code=0, runtime_s=0.1, timed_out=False)
  return execution.Execution(compile=(), run=run, stdout=stdout, stderr="", output_truncated=False)


def test_a_double_is_a_float_with_a_run_of_seven_digits():
  assert [typed.is_double(x) for x in (0.5, 1.25, 0.123456, 1234567.0, -1.5e-08, 100.0)] == [False] * 6
  assert [typed.is_double(x) for x in (0.1234567, 2 / 3, 12345678.0, -0.3333333)] == [True] * 4
  tolerance = typed.Tolerance()
  assert (tolerance.float, tolerance.double) == (1e-6, 1e-9)
  assert tolerance.of(question("float", [0.5, 1.25])) == 1e-6
  assert tolerance.of(question("float", [0.5, 2 / 3])) == 1e-9  # one double makes the return type double
  assert tolerance.of(question("list<tuple<string,float>>", [[["a", 0.25]], [["b", 0.1234567]]])) == 1e-9
  assert tolerance.of(question("map<string,optional<float>>", [[["a", None], ["b", 0.5]]])) == 1e-6
  assert tolerance.of(question("int", [12345678901])) == 1e-6  # ints are compared exactly anyway


def test_the_float_or_double_rule_decides_a_verdict():
  floats = question("float", [0.5, 0.25])
  doubles = question("float", [0.1234567, 0.25])
  # 4e-7 off: within a float's 1e-6, not within a double's 1e-9.
  assert judge(floats, printed([0.5 + 4e-7, 0.25])).status is Status.PASSED
  assert judge(doubles, printed([0.1234567 + 4e-7, 0.25])).status is Status.FAILED
  assert judge(doubles, printed([0.1234567 + 4e-11, 0.25])).status is Status.PASSED
  loose = typed.Tolerance(float=1e-6, double=1e-6)
  assert judge(doubles, printed([0.1234567 + 4e-7, 0.25]), loose).status is Status.PASSED
  strict = typed.Tolerance(float=1e-9, double=1e-9)
  assert judge(floats, printed([0.5 + 4e-7, 0.25]), strict).status is Status.FAILED


def test_the_papers_timeouts_and_overrides():
  table = score.parse_timeouts(None)
  assert table == score.paper_timeouts() and set(table) == set(score.EVALUATED)
  assert {name for name, s in table.items() if s == 15.0} == {"java", "typescript"}
  assert {s for name, s in table.items() if name not in ("java", "typescript")} == {10.0}
  assert set(score.parse_timeouts("20").values()) == {20.0}
  some = score.parse_timeouts("Java=30,c++=3")
  assert (some["java"], some["cpp"], some["typescript"], some["python"]) == (30.0, 3.0, 15.0, 10.0)
  for bad, message in (("java=x", "java: 'x' is not a number"), ("cobol=3", "unknown language 'cobol'"),
                       ("0", "must be positive"), ("java", "not a number")):
    with pytest.raises(ValueError, match=message):
      score.parse_timeouts(bad)
  scorer = score.TypedBenchmark({}, execution.Limits(timeout_s=10, memory_mb=512), timeouts={"java": 15.0})
  assert scorer.limits_for("java") == execution.Limits(timeout_s=15.0, memory_mb=512)
  assert scorer.limits_for("python") == execution.Limits(timeout_s=10, memory_mb=512)


@needs_python
def test_a_languages_timeout_decides_a_verdict_and_metrics_record_the_limits(tmp_path):
  # The correct HumanEval/0, slowed by 1.5 s once: a timeout at python=1, a pass at python=4.
  slow = ("    import builtins, time\n    if not getattr(builtins, 'codelm_slept', False):\n"
          "        builtins.codelm_slept = True\n        time.sleep(1.5)\n") + PYTHON["correct"]["HumanEval/0"]
  predictions = tmp_path / "p.jsonl"
  predictions.write_text(json.dumps({"qid": "HumanEval/0", "language": "Python", "sample_id": 0, "code": slow}) + "\n")
  statuses = {}
  for seconds in (1, 4):
    out = tmp_path / f"out{seconds}"
    assert score.main(["--predictions", str(predictions), "--benchmark", FIXTURES, "--output", str(out),
                       "--workers", "1", "--timeout", f"python={seconds}", "--double_tolerance", "1e-8"]) == 0
    record = json.loads((out / "results.jsonl").read_text())
    statuses[seconds] = record["status"]
    limits = json.loads((out / "metrics.json").read_text())["limits"]
    assert limits["timeout_s"] == {"python": float(seconds)}
    assert limits["float_tolerance"] == {"float": 1e-6, "double": 1e-8}
  assert statuses == {1: "timeout", 4: "passed"}


def test_cli_names_a_bad_timeout(tmp_path, capsys):
  predictions = tmp_path / "p.jsonl"
  predictions.write_text("")
  assert score.main(["--predictions", str(predictions), "--output", str(tmp_path / "o"), "--timeout", "java=soon"]) == 2
  assert "--timeout: java: 'soon' is not a number of seconds" in capsys.readouterr().err
  assert score.main(["--predictions", str(predictions), "--output", str(tmp_path / "o"), "--double_tolerance", "-1"]) == 2
  assert "--double_tolerance" in capsys.readouterr().err
