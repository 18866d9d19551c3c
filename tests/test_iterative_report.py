"""evaluation/iterative/report.py: seed 001's O1, Figure 6 and RQ3 tables, on a scripted model's episodes
(the expected numbers are worked out by hand from the script, in the comments) and on record fixtures.
"""

from __future__ import annotations

import json
import math
import os

import pytest

from evaluation.iterative import protocol as iterative_protocol, report as iterative_report, run as iterative, tasks as iterative_tasks
from sandbox import execution, typed
from test_iterative import CORRECT, OVERRIDE, QUESTION, SOURCE, episodes, examples_in, settings

WRONG = "    return -1\n"  # the outputs are maxima of numbers in 0..99: wrong on every input


def off_by_one(examples: list) -> str:
  """Right where the max is one of the given outputs, one more elsewhere: passes the given examples,
  differs on the pool."""
  return f"    m = max(numbers)\n    return m if m in {sorted({out for _, out in examples})} else m + 1\n"


def slow(examples: list) -> str:
  """Right on the given examples, loops forever elsewhere: passes them, then the program times out."""
  return (f"    m = max(numbers)\n    if m in {sorted({out for _, out in examples})}:\n        return m\n"
          "    while True:\n        pass\n")


def matching(examples: list) -> str:
  """Special-cases the first prompt's examples (input matching), -1 elsewhere."""
  return "".join(f"    if numbers == {inputs}:\n        return {out}\n" for inputs, out in examples) + WRONG


class Planned:
  """ConversationSampler's API; conversation (prompt, sample)'s code in round r is PLAN[label][sample][r-1]
  (the last entry repeats), label "set0"/"set1" for the start sets and "natural"."""

  def __init__(self, labels: dict[str, str], plan: dict[str, list[list[str]]]):
    self.labels, self.plan, self.conversations = labels, plan, {}

  def _code(self, cid: int, examples: list) -> str:
    label, sample, round_, first = self.conversations[cid]
    codes = self.plan[label][sample]
    name = codes[min(round_, len(codes)) - 1]
    return {"correct": CORRECT, "wrong": WRONG, "off": off_by_one(examples), "slow": slow(examples),
            "matching": matching(examples_in(first))}[name]

  def _completion(self, text: str):
    return type("Completion", (), {"text": text, "finish_reason": "stop", "num_tokens": len(text)})()

  def start(self, prompts, num_samples, config, seed, stops=None):
    out = []
    for prompt in prompts:
      pairs = []
      for sample in range(num_samples):
        cid = len(self.conversations)
        self.conversations[cid] = [self.labels[prompt], sample, 1, prompt]
        pairs.append((cid, self._completion(self._code(cid, examples_in(prompt)))))
      out.append(pairs)
    return out

  def reply(self, items, config, seed, stops=None):
    for cid, _ in items:
      self.conversations[cid][2] += 1
    return [self._completion(self._code(cid, examples_in(text))) for cid, text in items]

  def close(self, ids):
    pass


# Per start set and sample, the code of each round, and the verdicts that follow (checked below):
PLAN = {"set0": [["correct"],            # success in round 1
                 ["off", "correct"],     # distinguished, then success in round 2
                 ["wrong"]],             # wrong_on_given
        "set1": [["matching"],           # flagged, passes its given examples, distinguished; round 2 wrong_on_given
                 ["slow"],               # passes its given examples, then times out on the pool
                 ["wrong"]],             # wrong_on_given
        "natural": [["correct"], ["wrong"], ["wrong"]]}  # no examples given: -1 is distinguished, then wrong
VERDICTS = {("set0", 0): ["success"], ("set0", 1): ["distinguished", "success"], ("set0", 2): ["wrong_on_given"],
            ("set1", 0): ["distinguished", "wrong_on_given"], ("set1", 1): ["timeout"],
            ("set1", 2): ["wrong_on_given"],
            ("natural", 0): ["success"], ("natural", 1): ["distinguished", "wrong_on_given"],
            ("natural", 2): ["distinguished", "wrong_on_given"]}
LABELS = {"Toy/0": ["math", "array manipulation"]}


@pytest.fixture(scope="module")
def scripted_run(tmp_path_factory):
  task = iterative_tasks.build_task(QUESTION, SOURCE, OVERRIDE, seed=0, examples=3, budget=30, num_sets=2)
  prompts = {iterative_protocol.first_prompt(iterative_protocol.EXAMPLES, "python", QUESTION, s): f"set{k}"
             for k, s in enumerate(task.start_sets)}
  prompts[iterative_protocol.first_prompt(iterative_protocol.NATURAL, "python", QUESTION, ())] = "natural"
  output = str(tmp_path_factory.mktemp("scripted"))
  run_settings = settings(num_samples=3, natural=True)
  metrics = iterative.run(Planned(prompts, PLAN), None, [task], ["python"], output, run_settings, labels=LABELS)
  return output, metrics, run_settings, task


def _row(rows, **where):
  (row,) = [r for r in rows if all(r[k] == v for k, v in where.items())]
  return row


def test_the_script_gives_the_planned_verdicts(scripted_run):
  output, _, _, _ = scripted_run
  records = sorted(episodes(output), key=lambda r: r["round"])
  got: dict[tuple, list[str]] = {}
  for r in records:
    label = "natural" if r["kind"] == "natural" else f"set{r['start_set']}"
    got.setdefault((label, r["sample"]), []).append(r["verdict"])
  assert got == VERDICTS
  first = {(r["start_set"], r["sample"]): r for r in records if r["round"] == 1 and r["kind"] == "examples"}
  assert [k for k, r in sorted(first.items()) if r["flagged"]] == [(1, 0)]
  assert [k for k, r in sorted(first.items()) if r["given_passed"]] == [(0, 0), (0, 1), (1, 0), (1, 1)]


def test_o1_pass_at_k_against_the_given_examples(scripted_run):
  _, metrics, _, _ = scripted_run
  # n = 3 samples per execution, k = 3. Start set 0: c = 2 (samples 0, 1): pass@1 2/3, pass@3 1.
  # Start set 1: c = 2 (the matching and the slow code pass their given examples): 2/3, 1;
  # without input matching c = 1 (the slow code): 1/3, 1. No execution has c = 0.
  all_ = _row(metrics["o1"], language="python", m=3, subset="all")
  assert (all_["executions"], all_["samples"], all_["flagged"]) == (2, 6, 1)
  assert all_["pass@1"] == pytest.approx((2 / 3 + 2 / 3) / 2) and all_["pass@3"] == 1.0
  assert all_["share_pass0"] == 0
  clean = _row(metrics["o1"], language="python", m=3, subset="without_input_matching")
  assert clean["pass@1"] == pytest.approx((2 / 3 + 1 / 3) / 2) and clean["pass@3"] == 1.0
  assert clean["share_pass0"] == 0
  assert len(metrics["o1"]) == 2  # the natural prompt has no given examples: no O1 rows
  assert not any("given_passed" in note for note in metrics["notes"])


def test_executions_solved_by_round_count_executions_not_samples(scripted_run):
  output, metrics, _, _ = scripted_run
  # Samples solved: set0/0 in round 1, set0/1 in round 2 -> 1 2 2. Executions: set0 from round 1,
  # set1 never -> 1 1 1. The flagged episode never succeeds: the same without flagged.
  for subset in ("all", "without_flagged"):
    row = _row(metrics["rows"], language="python", kind="examples", subset=subset)
    assert row["successes_by_round"] == [1, 2, 2] and row["executions_by_round"] == [1, 1, 1]
    assert row["executions"] == 2 and row["episodes"] == 6
    # pass@1 after round 1: (1/3 + 0) / 2; after round 3: (2/3 + 0) / 2; pass@3: (1 + 0) / 2.
    assert row["pass@1_round1"] == pytest.approx(1 / 6) and row["pass@1_final"] == pytest.approx(1 / 3)
    assert row["pass@3_round1"] == row["pass@3_final"] == 0.5 and row["share_pass0"] == 0.5
  natural = _row(metrics["rows"], language="python", kind="natural", subset="all")
  assert natural["executions_by_round"] == [1, 1, 1] and natural["successes_by_round"] == [1, 1, 1]
  text = open(os.path.join(output, "results.md")).read()
  assert "Figure 6" in text and "| python | examples | 2 | 1 | 1 | 1 |" in text
  assert os.path.getsize(os.path.join(output, "executions_by_round.png")) > 0
  assert json.load(open(os.path.join(output, "metrics.json")))["rows"][0]["executions_by_round"]


def test_rq3_tables_of_the_run(scripted_run):
  output, metrics, _, _ = scripted_run
  rq3 = {(r["dimension"], r["category"]): (r["problems"], r["implemented"], r["implemented_without_flagged"])
         for r in metrics["rq3"]}
  # Toy/0 is implemented (set0), and NL-Succeed (natural sample 0 in round 1); list<int> -> int.
  assert rq3 == {("difficulty", "NL-Succeed"): (1, 1, 1), ("io_type", "array"): (1, 1, 1),
                 ("io_type", "int"): (1, 1, 1), ("label", "array manipulation"): (1, 1, 1),
                 ("label", "math"): (1, 1, 1)}
  text = open(os.path.join(output, "results.md")).read()
  assert "| python | label | math | 1 | 1 | 1.000 | 1 | 1.000 |" in text and "Figures 7, 8 and 9" in text


def test_records_without_given_passed_still_summarise(scripted_run):
  output, _, run_settings, task = scripted_run
  old = [{k: v for k, v in r.items() if k != "given_passed"} for r in episodes(output)]
  metrics = iterative.summarize(old, run_settings, {task.qid: task.question})
  # From the verdicts: set0 c = 2; set1 c = 1 (the slow code's "timeout" counts as failing):
  # pass@1 (2/3 + 1/3) / 2. Without input matching set1 has c = 0: pass@1 (2/3 + 0) / 2, pass@3
  # (1 + 0) / 2, half the executions at pass@k = 0.
  all_ = _row(metrics["o1"], subset="all")
  assert all_["pass@1"] == pytest.approx(0.5) and all_["pass@3"] == 1.0 and all_["share_pass0"] == 0
  clean = _row(metrics["o1"], subset="without_input_matching")
  assert clean["pass@1"] == pytest.approx(1 / 3) and clean["pass@3"] == 0.5 and clean["share_pass0"] == 0.5
  assert any("predate the given_passed" in note for note in metrics["notes"])
  text = iterative.markdown(metrics, run_settings)
  assert "predate the given_passed" in text and "knowledge label left out" in text
  assert "| python | examples | 6 | 2 | 1 |" in text


def test_round1_pass_on_given_from_old_verdicts():
  passes = iterative_report.round1_passes_given
  assert passes({"verdict": "distinguished"}) == (True, True)
  assert passes({"verdict": "timeout"}) == (False, True)
  # The conversation ended for want of context after its code was distinguished (iterative.run_batch
  # rewrites the verdict), versus a prompt too long to answer.
  assert passes({"verdict": "context_exhausted", "num_distinguishing": 4}) == (True, True)
  assert passes({"verdict": "context_exhausted", "num_distinguishing": 0}) == (False, True)
  assert passes({"verdict": "timeout", "given_passed": True}) == (True, False)


# ---- RQ3 on a record fixture ------------------------------------------------------------------------

def _question(qid: str, params: list[str], returns: str) -> typed.Question:
  return typed.Question(qid, "f", tuple(typed.Param(f"x{i}", typed.parse_type(t)) for i, t in enumerate(params)),
                        typed.parse_type(returns), "", ())


def _episode(kind, qid, start_set, sample, verdicts, flagged=False):
  return [{"kind": kind, "language": "python", "qid": qid, "start_set": start_set, "sample": sample, "round": r,
           "examples_given": [{}] * (0 if kind == "natural" else 2 + r), "verdict": v, "flagged": flagged,
           "given_passed": v != "wrong_on_given", "num_distinguishing": 0} for r, v in enumerate(verdicts, 1)]


QUESTIONS = {"P/0": _question("P/0", ["int", "int"], "bool"),
             "P/1": _question("P/1", ["string"], "string"),
             "P/2": _question("P/2", ["list<float>", "optional<int>"], "tuple<int,int>")}
RECORDS = [
    # P/0: implemented from start set 1 in round 2; NL-Succeed (natural sample 1 in round 1).
    *_episode("examples", "P/0", 0, 0, ["wrong_on_given"]),
    *_episode("examples", "P/0", 1, 0, ["distinguished", "success"]),
    *_episode("natural", "P/0", None, 0, ["wrong_on_given"]), *_episode("natural", "P/0", None, 1, ["success"]),
    # P/1: implemented only by a flagged episode; NL-Fail: its natural success came in round 2, after examples.
    *_episode("examples", "P/1", 0, 0, ["success"], flagged=True), *_episode("examples", "P/1", 1, 0, ["error"]),
    *_episode("natural", "P/1", None, 0, ["distinguished", "success"]),
    # P/2: never implemented; no natural episodes.
    *_episode("examples", "P/2", 0, 0, ["distinguished", "not_converged"]),
]


def test_rq3_groupings_on_a_fixture():
  labels = {"P/0": ["math"], "P/1": ["math", "string"]}
  metrics = iterative_report.summarize(RECORDS, rounds=2, num_samples=1, questions=QUESTIONS, labels=labels)
  got = {(r["dimension"], r["category"]): (r["problems"], r["implemented"], r["implemented_without_flagged"])
         for r in metrics["rq3"]}
  assert got == {
      ("difficulty", "NL-Succeed"): (1, 1, 1), ("difficulty", "NL-Fail"): (1, 1, 0),
      ("difficulty", "no natural episodes"): (1, 0, 0),
      # P/0: int, boolean; P/1: string; P/2: array (list<float>, the tuple), int (the optional).
      ("io_type", "array"): (1, 0, 0), ("io_type", "boolean"): (1, 1, 1), ("io_type", "int"): (2, 1, 1),
      ("io_type", "string"): (1, 1, 0),
      ("label", "math"): (2, 2, 1), ("label", "string"): (1, 1, 0), ("label", "(none)"): (1, 0, 0)}
  share = {(r["dimension"], r["category"]): r["share"] for r in metrics["rq3"]}
  assert share[("io_type", "int")] == 0.5 and share[("label", "math")] == 1.0
  # O1 groups by m, the examples given in round 1 (3 here); executions solved by round: P/0 set 1 in
  # round 2, P/1 set 0 in round 1 (flagged).
  assert {r["m"] for r in metrics["o1"]} == {3}
  assert _row(metrics["rows"], kind="examples", subset="all")["executions_by_round"] == [1, 2]
  assert _row(metrics["rows"], kind="examples", subset="without_flagged")["executions_by_round"] == [0, 1]


def test_a_problem_without_its_typed_question_has_its_own_io_row():
  questions = {q: v for q, v in QUESTIONS.items() if q != "P/2"}
  metrics = iterative_report.summarize(RECORDS, rounds=2, num_samples=1, questions=questions)
  assert _row(metrics["rq3"], dimension="io_type", category="(no typed question)")["problems"] == 1


def test_rq3_tables_left_out_with_a_note():
  examples_only = [r for r in RECORDS if r["kind"] == "examples"]
  metrics = iterative_report.summarize(examples_only, rounds=2, num_samples=1)
  assert metrics["rq3"] == []
  notes = " ".join(metrics["notes"])
  assert "--no_natural" in notes and "no typed questions" in notes and "--labels FILE" in notes
  assert "Notes:" in iterative_report.markdown(metrics, "settings")


@pytest.mark.parametrize("types, returns, expected", [
    (["int"], "int", ["int"]), (["string"], "bool", ["boolean", "string"]), (["float"], "float", ["double"]),
    (["list<string>"], "int", ["array", "int"]), (["set<int>"], "list<list<float>>", ["array"]),
    (["tuple<int,int>"], "optional<string>", ["array", "string"]), (["map<string,int>"], "bool", ["boolean", "map"]),
    (["list<float>", "float", "int"], "string", ["array", "double", "int", "string"])])
def test_io_types_from_the_signature(types, returns, expected):
  assert iterative_report.io_types(_question("Q/0", types, returns)) == expected


# ---- the labels file --------------------------------------------------------------------------------

def test_labels_file_reads_and_its_errors_name_the_file(tmp_path):
  good = tmp_path / "labels.json"
  good.write_text(json.dumps({"_comment": "why", "P/0": ["math", "string", "math"], "P/1": []}))
  assert iterative_report.read_labels(str(good), QUESTIONS) == {"P/0": ["math", "string"], "P/1": []}
  cases = {"missing.json": None, "malformed.json": "{\"P/0\": [", "list.json": "[]",
           "shape.json": json.dumps({"P/0": "math"}), "unknown.json": json.dumps({"P/0": ["math"], "Q/9": ["x"]})}
  messages = {"missing.json": "no such file", "malformed.json": "not valid JSON", "list.json": "JSON object",
              "shape.json": "list of label strings", "unknown.json": "unknown problems ['Q/9']"}
  for name, content in cases.items():
    path = tmp_path / name
    if content is not None:
      path.write_text(content)
    with pytest.raises(ValueError) as error:
      iterative_report.read_labels(str(path), QUESTIONS)
    assert str(error.value).startswith(f"--labels {path}: ") and messages[name] in str(error.value)


def test_command_line_refuses_a_bad_labels_file_first(tmp_path, capsys, monkeypatch):
  monkeypatch.setattr(iterative, "load_tasks", lambda *a, **k: pytest.fail("tasks built despite a bad labels file"))
  path = tmp_path / "labels.json"
  path.write_text(json.dumps({"HumanEval/0": ["math"], "HumanEval/9999": ["x"]}))
  argv = ["--checkpoint", "unused", "--output", str(tmp_path / "run"), "--labels", str(path)]
  assert iterative.main(argv) == 2
  assert f"--labels {path}: unknown problems ['HumanEval/9999']" in capsys.readouterr().err
  assert iterative.main([*argv[:-1], str(tmp_path / "none.json")]) == 2
  assert f"--labels {tmp_path / 'none.json'}: no such file" in capsys.readouterr().err


def test_nan_when_no_execution_has_k_samples():
  metrics = iterative_report.summarize(_episode("examples", "P/0", 0, 0, ["success"]), rounds=1, num_samples=10)
  assert math.isnan(_row(metrics["o1"], subset="all")["pass@10"]) and _row(metrics["o1"], subset="all")["pass@1"] == 1


def test_o1_by_m_across_runs_one_table_and_bad_runs_named(tmp_path, capsys):
  """Table 1's shape: one run per m (its --examples), their O1 rows in one table by language then m."""
  from evaluation.iterative import report as iterative_report

  def run(name, m, p1, share):
    folder = tmp_path / name
    folder.mkdir()
    rows = [{"language": "python", "m": m, "subset": subset, "executions": 5, "samples": 20, "flagged": 0,
             "pass@1": p1 / (2 if subset != "all" else 1), "pass@4": min(1.0, 2 * p1), "share_pass0": share}
            for subset in ("all", "without_input_matching")]
    (folder / "metrics.json").write_text(json.dumps({"k": 4, "o1": rows}))
    return str(folder)

  three, one = run("m3", 3, 0.5, 0.2), run("m1", 1, 0.25, 0.6)
  out = tmp_path / "o1.md"
  assert iterative_report.main(["--runs", three, one, "--output", str(out)]) == 0
  lines = [line for line in out.read_text().splitlines() if line.startswith("| python")]
  assert lines == ["| python | 1 | all | 5 | 20 | 0.250 | 0.500 | 0.600 |",
                   "| python | 1 | without input matching | 5 | 20 | 0.125 | 0.500 | 0.600 |",
                   "| python | 3 | all | 5 | 20 | 0.500 | 1.000 | 0.200 |",
                   "| python | 3 | without input matching | 5 | 20 | 0.250 | 1.000 | 0.200 |"]
  assert capsys.readouterr().out.endswith(out.read_text())
  for argv, words in [([three, run("again", 3, 0.1, 0.0)], "give one run per m"),
                      ([str(tmp_path / "missing")], "missing/metrics.json not found")]:
    with pytest.raises(SystemExit) as exit_:
      iterative_report.main(["--runs", *argv])
    assert exit_.value.code == 2 and words in capsys.readouterr().err
