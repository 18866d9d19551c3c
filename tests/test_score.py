"""Scoring: per-language metrics, forgeries that must fail, bad prediction lines, resume."""

from __future__ import annotations

import json
import os

import pytest

from evaluation import score
from sandbox import execution
from sandbox.judge import Status
from sandbox.renderers import get

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "data", "typed_questions.jsonl")
LIMITS = execution.Limits(timeout_s=5)
with open(os.path.join(HERE, "solutions", "python.json"), encoding="utf-8") as f:
  PYTHON = json.load(f)

needs_python = pytest.mark.skipif(bool(execution.missing(get("python").toolchain)),
                                  reason="no sandbox (bwrap) on this machine; run `make toolchains`")


def write_predictions(path, records) -> str:
  with open(path, "w", encoding="utf-8") as f:
    for record in records:
      f.write((record if isinstance(record, str) else json.dumps(record)) + "\n")
  return str(path)


def run(tmp_path, records, **kwargs) -> dict:
  predictions = write_predictions(tmp_path / "predictions.jsonl", records)
  return score.score(predictions, FIXTURES, str(tmp_path / "out"), limits=LIMITS, progress=False,
                     workers=2, **kwargs)


def results(tmp_path) -> dict:
  return {(r["qid"], r["sample_id"]): r for r in
          map(json.loads, open(tmp_path / "out" / "results.jsonl", encoding="utf-8"))}


# Each of these tries to turn a wrong answer to HumanEval/0 (expected: true, false, true, false) into
# a pass from inside the program.
FORGERIES = {
    # Records of its own for every case, written through the harness's own output from its frame.
    "callers_frame": (
        "    import sys\n"
        "    frame = sys._getframe(1)\n"
        "    while frame is not None and 'out' not in frame.f_locals:\n"
        "        frame = frame.f_back\n"
        "    for i in range(4):\n"
        "        sys.stdout.write('#codelm# %d ok true\\n' % i)\n"
        "    return False\n"),
    # The serializer patched to print `true` whatever is returned.
    "patched_builtins": (
        "    import json, builtins\n"
        "    json.dumps = lambda *a, **k: 'true'\n"
        "    builtins.compile = lambda *a, **k: None\n"
        "    return False\n"),
    # The harness's test cases swapped for none at all.
    "switched_off_harness": (
        "    import sys\n"
        "    sys.modules['__main__'].CASES = []\n"
        "    return False\n"),
    # An object that claims to equal anything.
    "always_equal": (
        "    class Yes:\n"
        "        def __eq__(self, other):\n"
        "            return True\n"
        "        __hash__ = object.__hash__\n"
        "    return Yes()\n"),
    # Fake records on stdout, then an exit before the harness runs.
    "fake_records_then_exit": (
        "    import os\n"
        "    print('#codelm# 0 ok true')\n"
        "    print('#codelm# 1 ok true')\n"
        "    os._exit(0)\n"),
    # A crafted record whose value is not the return type's data.
    "crafted_record": (
        "    print('#codelm# 0 ok {\"peak_kb\": \"boom\"}')\n"
        "    return False\n"),
}


@needs_python
def test_forgeries_fail_and_the_run_goes_on(tmp_path):
  records = [{"qid": "HumanEval/0", "language": "Python", "sample_id": name, "code": code}
             for name, code in FORGERIES.items()]
  records.append({"qid": "HumanEval/0", "language": "Python", "sample_id": "real",
                  "code": PYTHON["correct"]["HumanEval/0"]})
  metrics = run(tmp_path, records)
  got = results(tmp_path)
  for name in FORGERIES:
    assert got[("HumanEval/0", name)]["status"] != Status.PASSED.value, (name, got[("HumanEval/0", name)])
  assert got[("HumanEval/0", "real")]["status"] == Status.PASSED.value
  assert got[("HumanEval/0", "callers_frame")]["detail"].startswith("forged records")
  assert got[("HumanEval/0", "always_equal")]["cases"][0] == "exception"
  assert metrics["python"]["num_predictions"] == len(FORGERIES) + 1


@needs_python
def test_malformed_prediction_lines_are_reported_and_the_others_scored(tmp_path):
  good = {"qid": "HumanEval/13", "language": "python", "sample_id": 0, "code": PYTHON["correct"]["HumanEval/13"]}
  records = [good,
             {"qid": "HumanEval/13", "language": "python", "sample_id": [1], "code": "x"},
             "{not json",
             {"qid": "HumanEval/999", "language": "python", "code": "x"},
             {"qid": "HumanEval/13", "language": "Klingon", "code": "x"},
             {"qid": "HumanEval/13", "language": "python", "sample_id": 0, "code": "again"},
             {"qid": "13", "language": "Python", "code": PYTHON["wrong"]["HumanEval/0"]}]
  metrics = run(tmp_path, records)
  invalid = metrics["invalid_predictions"]
  assert [m.split(": ", 1)[0].rsplit(":", 1)[1] for m in invalid] == ["2", "3", "4", "5", "6"]
  assert "sample_id must be an int or a string" in invalid[0]
  assert "not valid JSON" in invalid[1] and "unknown qid" in invalid[2]
  assert "unknown language" in invalid[3] and "a second prediction" in invalid[4]
  got = results(tmp_path)
  assert got[("HumanEval/13", 0)]["status"] == "passed"
  assert got[("HumanEval/13", 1)]["status"] == "failed"  # "13" is an alias; sample_id by position
  assert metrics["python"]["num_predictions"] == 2


@needs_python
def test_metrics_per_language_and_resume(tmp_path, monkeypatch):
  records = [{"qid": qid, "language": "Python", "sample_id": i, "code": code}
             for qid, code in PYTHON["correct"].items() for i in range(2)]
  records += [{"qid": qid, "language": "Python", "sample_id": 2, "code": code}
              for qid, code in PYTHON["wrong"].items()]
  metrics = run(tmp_path, records, ks=(1, 2))
  python = metrics["python"]
  assert metrics["languages"] == ["python"]
  assert python["num_predictions"] == 2 * len(PYTHON["correct"]) + len(PYTHON["wrong"])
  wrong = len(PYTHON["wrong"])
  assert python["percent_passed"] == pytest.approx(100 * (python["num_predictions"] - wrong) / python["num_predictions"], abs=1e-3)
  assert python["pass@2"] == 1.0
  # pass@1 over problems: 2/3 on the problems with a wrong third sample, 1 elsewhere.
  problems = len(PYTHON["correct"])
  assert python["pass@1"] == pytest.approx((problems - wrong + wrong * 2 / 3) / problems)
  assert "dart" in metrics["not_evaluated"] and "julia" in metrics["not_evaluated"]
  assert "Python" in metrics["toolchains"]["python"]
  table = score.table(metrics)
  assert "| Python |" in table and "not evaluated" in table

  # Each sample of a correct solution appears twice (sample 0 and 1, the same code): run once.
  assert metrics["scoring"]["programs_executed"] == len(PYTHON["correct"]) + wrong
  assert metrics["scoring"]["duplicates_reused"] == len(PYTHON["correct"])

  # A rerun scores nothing again; a torn last line is dropped and that prediction rescored (from
  # its twin's verdict when the twin is in the results, else by running it).
  path = tmp_path / "out" / "results.jsonl"
  lines = path.read_bytes().splitlines(keepends=True)
  path.write_bytes(b"".join(lines[:-1]) + lines[-1][:-20])
  calls = []
  original = score.batching.execute_all
  monkeypatch.setattr(score.batching, "execute_all", lambda r, jobs, *a, **k: calls.extend(jobs) or original(r, jobs, *a, **k))
  again = run(tmp_path, records, ks=(1, 2))
  torn = json.loads(lines[-1])
  twin_done = any(json.loads(l)["code_sha1"] == torn["code_sha1"] for l in lines[:-1])
  assert again["scored_now"] == 1 and len(calls) == (0 if twin_done else 1)
  assert again["python"] == python
  assert len(path.read_bytes().splitlines()) == len(lines)  # each result once


@needs_python
def test_each_distinct_program_runs_once_and_duplicates_share_its_verdict(tmp_path, monkeypatch):
  correct, wrong = PYTHON["correct"]["HumanEval/13"], PYTHON["wrong"]["HumanEval/0"]
  records = [{"qid": "HumanEval/13", "language": "Python", "sample_id": i, "code": correct} for i in range(5)]
  records += [{"qid": "HumanEval/0", "language": "Python", "sample_id": i, "code": wrong} for i in range(3)]
  # The same completion for another problem is another program.
  records += [{"qid": "HumanEval/0", "language": "Python", "sample_id": 3, "code": correct}]
  calls = []
  original = score.batching.execute_all
  monkeypatch.setattr(score.batching, "execute_all", lambda r, jobs, *a, **k: calls.extend(jobs) or original(r, jobs, *a, **k))
  metrics = run(tmp_path, records)
  assert len(calls) == 3 and metrics["scoring"]["programs_executed"] == 3
  assert metrics["scoring"]["duplicates_reused"] == 6 and metrics["scoring"]["executions_saved_percent"] == pytest.approx(66.67)
  got = results(tmp_path)
  assert len(got) == 9 and {got[("HumanEval/13", i)]["status"] for i in range(5)} == {"passed"}
  verdict = lambda r: {k: v for k, v in r.items() if k not in ("sample_id", "code_sha1", "program_sha1")}
  assert all(verdict(got[("HumanEval/0", i)]) == verdict(got[("HumanEval/0", 0)]) for i in range(3))
  assert got[("HumanEval/0", 3)]["status"] != "passed"
  # New samples of an already judged program are not run again in a later run.
  calls.clear()
  more = records + [{"qid": "HumanEval/13", "language": "Python", "sample_id": 9, "code": correct}]
  metrics = run(tmp_path, more)
  assert calls == [] and metrics["scored_now"] == 1
  assert metrics["scoring"]["duplicates_reused_from_earlier_runs"] == 1
  assert results(tmp_path)[("HumanEval/13", 9)]["status"] == "passed"


@needs_python
def test_partial_passes_and_an_exception_in_one_case(tmp_path):
  code = PYTHON["throws_once"]["HumanEval/13"]
  run(tmp_path, [{"qid": "HumanEval/13", "language": "Python", "sample_id": 0, "code": code}])
  record = results(tmp_path)[("HumanEval/13", 0)]
  assert record["status"] == "failed"
  assert record["cases"] == ["passed", "passed", "exception", "passed"]
  assert record["num_tests"] == 4 and "ValueError: boom" in record["detail"]


def test_languages_flag_and_not_evaluated():
  assert score.parse_languages("all") == list(score.EVALUATED)
  assert len(score.EVALUATED) == 12
  assert score.parse_languages("C++,CSharp,python") == ["cpp", "csharp", "python"]
  with pytest.raises(ValueError, match="Dart is not evaluated"):
    score.parse_languages("dart")


def test_cli_errors_name_the_flag(tmp_path, capsys):
  predictions = write_predictions(tmp_path / "p.jsonl", [])
  assert score.main(["--predictions", predictions, "--output", str(tmp_path / "o"), "--workers", "0"]) == 2
  assert "--workers" in capsys.readouterr().err
  for flags, message in ((["--memory_mb", "0"], "--memory_mb must be at least 1"),
                         (["--timeout", "0"], "--timeout: seconds: must be positive"),
                         (["--timeout", "java=-1"], "--timeout: java: must be positive")):
    assert score.main(["--predictions", predictions, "--output", str(tmp_path / "o"), *flags]) == 2
    assert message in capsys.readouterr().err
  assert not (tmp_path / "o").exists()
  assert score.main(["--predictions", predictions, "--output", str(tmp_path / "o"),
                     "--benchmark", "nope"]) == 2
  assert "unknown benchmark" in capsys.readouterr().err


@needs_python
def test_an_unscored_prediction_is_exit_1_and_said_at_the_end(tmp_path, monkeypatch, capsys):
  original = score.TypedBenchmark.run

  def run(self, unit, stats):  # a fault of the scorer's own on one completion (a judge bug, say)
    if any("POISON" in p.code for p in unit):
      raise OverflowError("int too large to convert to float")
    return original(self, unit, stats)

  monkeypatch.setattr(score.TypedBenchmark, "run", run)
  correct = PYTHON["correct"]["HumanEval/0"]
  predictions = write_predictions(tmp_path / "predictions.jsonl", [
      {"qid": "HumanEval/0", "language": "Python", "sample_id": i, "code": code}
      for i, code in enumerate([correct, correct + "\n# POISON\n", correct + "\n# another program\n"])])
  argv = ["--predictions", predictions, "--benchmark", FIXTURES, "--output", str(tmp_path / "out"),
          "--languages", "python", "--workers", "1", "--k", "1"]
  assert score.main(argv) == 1
  out = capsys.readouterr().out
  assert f"{predictions}:2: python HumanEval/0 sample 1 could not be scored: OverflowError" in out
  assert out.rstrip().endswith("1 predictions could not be scored: pass@k above leaves them out; rerun the same "
                               "command to try them again (exit status 1)")
  assert {k: r["status"] for k, r in results(tmp_path).items()} == {("HumanEval/0", 0): "passed",
                                                                     ("HumanEval/0", 2): "passed"}
  monkeypatch.setattr(score.TypedBenchmark, "run", original)  # the fault fixed: the rerun scores it
  assert score.main(argv) == 0
  assert "could not be scored" not in capsys.readouterr().out and len(results(tmp_path)) == 3


@needs_python
def test_truncated_prompts_and_length_cut_completions_are_counted_shown_and_warned(tmp_path, capsys):
  correct = PYTHON["correct"]["HumanEval/0"]
  records = [{"qid": "HumanEval/0", "language": "Python", "sample_id": i, "code": correct + f"\n# {i}\n",
              "finish_reason": "length" if i == 3 else "stop", **({"prompt_truncated": True} if i < 2 else {})}
             for i in range(4)]
  predictions = write_predictions(tmp_path / "predictions.jsonl", records)
  argv = ["--predictions", predictions, "--benchmark", FIXTURES, "--output", str(tmp_path / "out"),
          "--languages", "python", "--workers", "1", "--k", "1"]
  assert score.main(argv) == 0
  out = capsys.readouterr().out
  metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())["python"]
  assert (metrics["prompt_truncated"], metrics["percent_prompt_truncated"]) == (2, 50.0)
  assert (metrics["cut_by_length"], metrics["percent_cut_by_length"]) == (1, 25.0)
  header = next(line for line in out.splitlines() if line.startswith("| language"))
  assert header.endswith("| % prompt truncated | % at max length |")
  assert next(line for line in out.splitlines() if line.startswith("| Python")).endswith("| 50.0 | 25.0 |")
  assert ("warning: Python: 2 predictions (50%) were sampled from prompts sample.py truncated to fit "
          "(--truncate_prompts)") in out
  assert "note: Python: 1 predictions (25%) stopped at --max_decode_length (finish_reason length)" in out

  # Sampled with room for every prompt: zeros in the table, no warning.
  for r in records:
    r.pop("prompt_truncated", None)
    r["finish_reason"] = "stop"
  write_predictions(tmp_path / "predictions.jsonl", records)
  assert score.main(argv) == 0  # every verdict reused: the code is the same
  out = capsys.readouterr().out
  assert next(line for line in out.splitlines() if line.startswith("| Python")).endswith("| 0.0 | 0.0 |")
  assert "warning:" not in out and "note:" not in out


@needs_python
def test_a_k_above_the_samples_per_problem_is_shown_not_computable(tmp_path, capsys):
  """--k 1,5 with 2 samples per problem: pass@5 gets its column, "n < k" in it, and a note saying why,
  not a silently missing column."""
  correct = PYTHON["correct"]["HumanEval/0"]
  predictions = write_predictions(tmp_path / "predictions.jsonl", [
      {"qid": "HumanEval/0", "language": "Python", "sample_id": i, "code": correct + f"\n# {i}\n"} for i in range(2)])
  argv = ["--predictions", predictions, "--benchmark", FIXTURES, "--output", str(tmp_path / "out"),
          "--languages", "python", "--workers", "1", "--k", "1,5"]
  assert score.main(argv) == 0
  out = capsys.readouterr().out
  metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())["python"]
  assert metrics["pass@1"] == 1.0 and "pass@5" not in metrics
  assert metrics["not_computable"] == {"pass@5": "1 of 1 problems have fewer than 5 samples (fewest 2)"}
  assert next(line for line in out.splitlines() if line.startswith("| language")).startswith(
      "| language | predictions | pass@1 | pass@5 |")
  assert next(line for line in out.splitlines() if line.startswith("| Python")).startswith("| Python | 2 | 1.000 | n < k |")
  assert "note: Python: pass@5 not computable: 1 of 1 problems have fewer than 5 samples (fewest 2)" in out
