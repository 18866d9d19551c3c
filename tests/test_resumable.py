"""The shared scoring loop's planning, without a sandbox: what is left, each program once, units."""

from __future__ import annotations

from evaluation import resumable
from evaluation.resumable import Prediction


class Cut(resumable.Benchmark):
  """A benchmark whose program is the completion up to a "#" (as practical tasks cut theirs)."""

  def program(self, prediction):
    return prediction.code.split("#")[0]


def test_units_are_one_language_ordered_by_problem_and_even():
  predictions = [Prediction(f"q{i % 7}", i, "cpp", f"x{i}", i) for i in range(96)]
  predictions += [Prediction("q0", i, "java", f"y{i}", i) for i in range(5)]
  units = resumable.units(Cut(), predictions, size=32, workers=2)
  assert [len(u) for u in units] == [24, 24, 24, 24, 3, 2]  # cpp: 4 even units for 2 workers, not 32 x 3
  assert all(len({p.language for p in u}) == 1 for u in units)
  cpp = [p for u in units[:4] for p in u]
  assert [p.qid for p in cpp] == sorted(p.qid for p in cpp)
  assert [len(u) for u in resumable.units(Cut(), predictions[:96], size=32, workers=1)] == [32, 32, 32]
  assert [len(u) for u in resumable.units(Cut(), predictions[:1], size=32, workers=2)] == [1]


def test_plan_runs_each_program_once_and_reuses_earlier_verdicts():
  a, b = "return 1  # first", "return 1  # second"  # the same program once cut
  predictions = [Prediction("q", 0, "python", a, 1), Prediction("q", 1, "python", b, 2),
                 Prediction("r", 0, "python", a, 3),  # another problem: another program
                 Prediction("q", 2, "python", "return 2", 4)]
  groups, reused = resumable.plan(Cut(), predictions, {})
  assert sorted(len(g) for g in groups.values()) == [1, 1, 2] and reused == []
  # Sample 2's program was judged in an earlier run (for sample 9), sample 0 is done as it is.
  earlier = {("python", "q", 9): resumable.record_of(Prediction("q", 9, "python", "return 2", 7),
                                                      {"status": "failed"}, resumable.sha1("return 2")),
             ("python", "q", 0): resumable.record_of(predictions[0], {"status": "passed"}, resumable.sha1("return 1  "))}
  groups, reused = resumable.plan(Cut(), predictions, earlier)
  # Sample 1 shares sample 0's program, which is in the results: its verdict is reused too.
  assert [(r["sample_id"], r["status"]) for r in reused] == [(1, "passed"), (2, "failed")]
  assert reused[1]["code_sha1"] == predictions[3].code_sha1 and reused[0]["code_sha1"] == predictions[1].code_sha1
  assert sorted((g[0].qid, g[0].sample_id) for g in groups.values()) == [("r", 0)]


def test_read_predictions_reports_bad_lines_and_numbers_samples(tmp_path):
  path = tmp_path / "p.jsonl"
  path.write_text('{"qid": "q", "code": "a"}\n{"qid": "q", "code": "b"}\nnot json\n'
                  '{"qid": "q", "code": 1}\n{"qid": "q", "sample_id": 0, "code": "c"}\n{"qid": true, "code": ""}\n')
  predictions, invalid = resumable.read_predictions(str(path), lambda r: ("python", str(r["qid"])))
  assert [(p.sample_id, p.code, p.line) for p in predictions] == [(0, "a", 1), (1, "b", 2)]
  assert [m.split(": ", 1)[0] for m in invalid] == [f"{path}:{n}" for n in (3, 4, 5, 6)]
  assert "a second prediction for python q sample 0" in invalid[2] and "qid must be a string" in invalid[3]


class Timed(Cut):
  """Cut, judged under a run-step limit that decides verdicts (a timeout is a failure)."""

  def __init__(self, timeout_s: float):
    self.timeout_s = timeout_s

  def settings(self, language):
    return {"timeout_s": self.timeout_s}

  def run(self, unit, stats):
    return [{"status": "passed" if self.timeout_s > 1 else "timeout"} for _ in unit]

  def summarise(self, predictions, results):
    return {}


def test_a_rerun_under_other_settings_judges_again(tmp_path):
  predictions = [Prediction("q", 0, "python", "return 1  # a", 1), Prediction("q", 1, "python", "return 2", 2)]
  output = str(tmp_path / "scores")
  results, report = resumable.score_predictions(Timed(0.5), predictions, output, workers=1)
  assert {r["status"] for r in results.values()} == {"timeout"} and report.executed == 2
  results, report = resumable.score_predictions(Timed(0.5), predictions, output, workers=1)
  assert report.executed == 0 and report.to_score == 0  # the same settings: done
  # A longer timeout: the old verdicts are not kept (they were cached by code alone once).
  results, report = resumable.score_predictions(Timed(10), predictions, output, workers=1)
  assert report.executed == 2 and {r["status"] for r in results.values()} == {"passed"}
  results, report = resumable.score_predictions(Timed(10), predictions, output, workers=1)
  assert report.executed == 0


class Poisoned(Cut):
  """A benchmark whose run raises for a whole unit when one member's code says POISON (as a judge
  bug on one completion's record would)."""

  def __init__(self):
    self.runs = []

  def run(self, unit, stats):
    self.runs.append([p.sample_id for p in unit])
    if any("POISON" in p.code for p in unit):
      raise OverflowError("int too large to convert to float")
    return [{"status": "passed"} for _ in unit]


def test_one_member_s_fault_leaves_the_others_of_its_unit_scored_and_a_rerun_retries_it(tmp_path):
  predictions = [Prediction("q", i, "python", code, i + 1)
                 for i, code in enumerate(["a", "b", "POISON", "c"])]
  predictions.append(Prediction("q", 4, "python", "b# the same program as sample 1", 5))
  benchmark = Poisoned()
  results, report = resumable.score_predictions(benchmark, predictions, str(tmp_path), workers=1, source="p.jsonl")
  assert benchmark.runs[0] == [0, 1, 2, 3]  # one unit, then each member alone
  assert sorted(map(tuple, benchmark.runs[1:])) == [(0,), (1,), (2,), (3,)]
  assert sorted(k[2] for k in results) == [0, 1, 3, 4]  # sample 4 shares sample 1's verdict
  assert report.unscored == ["p.jsonl:3: python q sample 2 could not be scored: OverflowError: int too large "
                             "to convert to float"]
  assert report.as_dict()["scored_now"] == 4
  lines = resumable.unscored_lines(report.unscored)
  assert lines == ["1 predictions could not be scored: pass@k above leaves them out; rerun the same command "
                   "to try them again (exit status 1)"]
  assert resumable.unscored_lines([]) == []

  # The unscored prediction has no result line: a rerun (the fault fixed) runs it alone.
  fixed = Cut()
  fixed.run = lambda unit, stats: [{"status": "failed"} for _ in unit]
  results, report = resumable.score_predictions(fixed, predictions, str(tmp_path), workers=1)
  assert report.to_score == 1 and not report.unscored and results[("python", "q", 2)]["status"] == "failed"
