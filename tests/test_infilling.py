"""evaluation/infilling/: HumanEval-infilling's construction (sizes, reassembly, the published
examples, seeded spans), its prompts, scoring by execution (correct, wrong, crashing and tampering
middles; resumption; unknown qids; the Beam runner), and exact match for SantaCoder-FIM files.
Judged by values (typed HumanEval's test cases, compared outside) where typed HumanEval has the
problem, by the nonce harness elsewhere: the forgeries of an in-process verdict pass the one and fail
the other. Only a few problems are executed: each sandbox run is ~40 ms, the whole benchmark minutes."""

from __future__ import annotations

import json

import pytest

from evaluation.benchmark_data import load_humaneval_problems
from evaluation.infilling import cli, exact, problems, program, prompts, score
from evaluation.infilling.problems import Subset
from sandbox import execution
from sandbox.renderers.python import RENDERER as PYTHON

needs_sandbox = pytest.mark.skipif(bool(execution.missing(PYTHON.toolchain)),
                                   reason="no sandbox here (bubblewrap); run `make toolchains`")
LIMITS = execution.Limits(timeout_s=3.0)


def write_jsonl(path, records) -> str:
  path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records))
  return str(path)


def read_jsonl(path) -> list[dict]:
  return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


# ---- construction ----------------------------------------------------------------------------------

def test_the_subsets_have_the_published_sizes():
  humaneval = load_humaneval_problems()
  assert len(humaneval) == 164
  for subset in Subset:
    built = problems.build(subset, humaneval)
    assert len(built) == subset.published_size == len({p.task_id for p in built}), subset
  assert [len(problems.load(s)) for s in Subset] == [1033, 5815, 1640, 164]


def test_every_canonical_middle_reassembles_the_canonical_program():
  humaneval = load_humaneval_problems()
  for subset in Subset:
    for p in problems.load(subset):
      source = humaneval[p.humaneval_id]
      # The solution without its trailing whitespace (13 solutions have some), plus one "\n".
      whole = source["prompt"] + source["canonical_solution"].rstrip() + "\n"
      assert p.prefix + p.middle + p.suffix == whole, p.task_id
      assert p.prefix.startswith(source["prompt"]) and p.middle.strip(), p.task_id
      assert (p.test, p.entry_point) == (source["test"], source["entry_point"])
      assert p.task_id.startswith(f"{subset.task_prefix}/{p.humaneval_id}/")


def test_line_subsets_match_the_published_records():
  single = {p.task_id: p for p in problems.load(Subset.SINGLE_LINE)}
  # SingleLineInfilling/HumanEval/9/L7 as the published file has it (its prompt ends "else:\n").
  p = single["SingleLineInfilling/HumanEval/9/L7"]
  assert p.prefix.endswith("            running_max = n\n        else:\n")
  assert p.middle == "            running_max = max(running_max, n)\n"
  assert p.suffix == "\n        result.append(running_max)\n\n    return result\n"
  assert "SingleLineInfilling/HumanEval/9/L8" not in single  # a blank line is never a middle
  multi = {p.task_id: p for p in problems.load(Subset.MULTI_LINE)}
  whole = multi["MultiLineInfilling/HumanEval/0/L0_L7"]
  assert whole.middle == load_humaneval_problems()["HumanEval/0"]["canonical_solution"] and whole.suffix == ""
  assert "MultiLineInfilling/HumanEval/0/L0_L6" not in multi  # a span never ends at a blank line


def test_random_spans_are_seeded_and_do_not_depend_on_the_other_problems():
  humaneval = load_humaneval_problems()
  one = problems.build(Subset.RANDOM_SPAN, {"HumanEval/7": humaneval["HumanEval/7"]})
  assert one == [p for p in problems.load(Subset.RANDOM_SPAN) if p.humaneval_id == "HumanEval/7"]
  assert [p.task_id for p in one] == [f"RandomSpanInfilling/HumanEval/7/{k}" for k in range(10)]
  assert len({(p.prefix, p.middle) for p in one}) == 10
  light = problems.build(Subset.RANDOM_SPAN_LIGHT, {"HumanEval/7": humaneval["HumanEval/7"]})
  assert [p.task_id for p in light] == ["RandomSpanInfillingLight/HumanEval/7/0"]
  # The spans are part of the benchmark: pinned, so that a change of the construction shows here.
  prompt = len(humaneval["HumanEval/0"]["prompt"])
  spans = {p.task_id: (len(p.prefix) - prompt, len(p.prefix) - prompt + len(p.middle))
           for subset in (Subset.RANDOM_SPAN, Subset.RANDOM_SPAN_LIGHT) for p in problems.load(subset)[:2]}
  assert spans["RandomSpanInfilling/HumanEval/0/0"] == (14, 204)
  assert spans["RandomSpanInfilling/HumanEval/0/1"] == (69, 133)
  assert spans["RandomSpanInfillingLight/HumanEval/0/0"] == (36, 176)


def test_subset_names_are_checked():
  assert problems.parse_subsets("all") == tuple(Subset)
  assert problems.parse_subsets("multi-line, single-line") == (Subset.MULTI_LINE, Subset.SINGLE_LINE)
  with pytest.raises(ValueError, match="unknown subset 'single'"):
    problems.parse_subsets("single")


# ---- prompts ---------------------------------------------------------------------------------------

def test_prompts_are_prefix_and_suffix_without_stops(tmp_path):
  output = tmp_path / "prompts.jsonl"
  assert cli.main(["prompts", "--subset", "single-line,random-span-light", "--output", str(output),
                   "--limit", "2"]) == 0
  records = read_jsonl(output)
  assert [r["qid"] for r in records] == [
      "SingleLineInfilling/HumanEval/0/L0", "SingleLineInfilling/HumanEval/0/L1",
      "RandomSpanInfillingLight/HumanEval/0/0", "RandomSpanInfillingLight/HumanEval/1/0"]
  first = problems.problems_by_id([Subset.SINGLE_LINE])["SingleLineInfilling/HumanEval/0/L0"]
  assert records[0] == {"qid": first.task_id, "language": "Python", "prefix": first.prefix, "suffix": first.suffix}


# ---- the harness and its verdicts ------------------------------------------------------------------

def l7() -> problems.Problem:
  """HumanEval/0's last line, `    return False`, as the middle."""
  return problems.problems_by_id([Subset.SINGLE_LINE])["SingleLineInfilling/HumanEval/0/L7"]


# A middle that looks for the verdict's channel: it reads the nonce file (gone by then) and writes
# "<what it read> passed" on every descriptor, then leaves before the tests.
FORGER = """    import os
    try:
        nonce = open("nonce").read()
    except OSError:
        nonce = "nonce"
    for fd in range(1, 8):
        try:
            os.write(fd, ("\\n" + nonce + " passed\\n").encode())
        except OSError:
            pass
    print("passed")
    os._exit(0)
"""

TAMPERING = {
    "sys.exit(0) in the function": "    import sys; sys.exit(0)\n",
    "os._exit(0) in the function": "    import os; os._exit(0)\n",
    "sys.exit(0) at module level": "    return True\nimport sys\nsys.exit(0)\n",
    "os._exit(0) at module level": "    return True\nimport os\nos._exit(0)\n",
    "check redefined": "    return True\ndef check(candidate):\n    pass\n",
    "check redefined, the test swallowed": "    return True\ndef check(candidate):\n    pass\n_ = '''\n",
    "the marker printed": FORGER,
}


@needs_sandbox
def test_a_correct_middle_passes_and_wrong_or_crashing_ones_fail():
  p = l7()
  assert program.question_of(p).qid == "HumanEval/0"  # judged by values
  assert program.run_middle(p, p.middle, LIMITS)["status"] == "passed"
  assert program.run_middle(p, "    return False  # the same line, restated\n", LIMITS)["passed"]
  # The values come out and are compared outside: the detail names the test case and both values.
  wrong = program.run_middle(p, "    return True\n", LIMITS)
  assert wrong["status"] == "failed" and wrong["detail"] == "test case 1 failed: expected false, got true"
  crash = program.run_middle(p, "    return 1 / 0\n", LIMITS)
  assert crash["status"] == "failed" and "exception: ZeroDivisionError" in crash["detail"]
  broken = program.run_middle(p, "    return (\n", LIMITS)
  assert broken["status"] == "error" and "SyntaxError" in broken["detail"]
  slow = program.run_middle(p, "    while True: pass\n", execution.Limits(timeout_s=0.5))
  assert slow["status"] == "timeout"


@needs_sandbox
@pytest.mark.parametrize("name", TAMPERING)
def test_a_middle_that_tampers_with_the_harness_does_not_pass(name):
  verdict = program.run_middle(l7(), TAMPERING[name], LIMITS)
  assert not verdict["passed"] and verdict["status"] in ("failed", "error"), verdict


def test_the_nonce_is_not_in_the_program_and_a_record_needs_it():
  p = l7()
  a, b = program.nonce_program(p, p.middle), program.nonce_program(p, p.middle)
  assert a.files["nonce"] != b.files["nonce"]
  assert not any(a.files["nonce"] in a.files[name] for name in ("main.py", "code.py", "test.py"))
  nonce = a.files["nonce"]
  run = execution.Step(("python",), 0, 0.1, False)

  def judged(stdout: str) -> program.Verdict:
    return program.nonce_judge(execution.Execution((), run, stdout, "", False), nonce)

  assert judged(f"\n{nonce} passed\n").passed
  assert judged(f"\n{nonce} failed AssertionError\n").status is program.Status.FAILED
  assert judged("passed\n").status is program.Status.ERROR              # no nonce: no verdict
  assert judged(f"x{nonce} passed\n").status is program.Status.ERROR    # not at a line's start
  twice = judged(f"\n{nonce} passed\n{nonce} passed\n")
  assert twice.status is program.Status.ERROR and "forged" in twice.detail


# Middles written against an in-process verdict (issue 55): each is wrong (`return True` where
# HumanEval/0's last line returns False) and forges the nonce harness's `passed`.
FRAME_WALK = """    import sys
    frame = sys._getframe(1)
    while frame is not None:
        if "record" in frame.f_locals:
            frame.f_locals["record"]("passed")
        frame = frame.f_back
    return True
"""
GC_WALK = """    import gc
    for found in gc.get_objects():
        if type(found).__name__ == "function" and found.__name__ == "record":
            found("passed")
    return True
"""
# Every 32-hex-digit string in the heap and anonymous mappings, written as a record to fds 3-9.
MEMORY_SCAN = """    import os, re
    found = set()
    with open("/proc/self/maps") as maps, open("/proc/self/mem", "rb", 0) as mem:
        for line in maps:
            fields = line.split()
            if not fields[1].startswith("rw") or len(fields) > 5 and fields[5] != "[heap]":
                continue
            start, end = (int(x, 16) for x in fields[0].split("-"))
            try:
                mem.seek(start)
                found.update(re.findall(rb"(?<![0-9a-f])[0-9a-f]{32}(?![0-9a-f])", mem.read(end - start)))
            except (OSError, ValueError, OverflowError):
                pass
    for fd in range(3, 10):
        for nonce in found:
            try:
                os.write(fd, b"\\n" + nonce + b" passed\\n")
            except OSError:
                break
    os._exit(0)
"""
ALWAYS_EQUAL = """    class Equal:
        __eq__ = lambda self, other: True
    return Equal()
"""
FORGERIES = {"a frame walk to the harness's record": FRAME_WALK, "a gc walk to the harness's record": GC_WALK,
             "a /proc/self/mem scan for the nonce, written to fds 3-9": MEMORY_SCAN,
             "an object equal to everything": ALWAYS_EQUAL}
SLACK = execution.Limits(timeout_s=30.0)  # no verdict here may depend on the machine's speed


@needs_sandbox
@pytest.mark.parametrize("name", FORGERIES)
def test_a_forgery_of_the_nonce_harness_fails_by_values(name):
  p = l7()
  forged, _ = program.run_by_nonce(p, FORGERIES[name], SLACK)
  assert forged.passed, forged  # the attack is real: in the process, the verdict is the middle's
  verdict = program.run_middle(p, FORGERIES[name], SLACK)
  assert verdict["status"] == "failed" and not verdict["passed"], verdict
  assert verdict["detail"].startswith("test case 1 "), verdict  # the first case the middle runs in
  if name == "an object equal to everything":
    assert "TypeError: expected bool, got Equal" in verdict["detail"]  # refused, never compared


@needs_sandbox
def test_value_records_printed_by_the_middle_are_caught_as_forged():
  printing = "    for i in range(7):\n        print('#codelm# %d ok true' % i)\n    return True\n"
  verdict = program.run_middle(l7(), printing, SLACK)
  assert verdict["status"] == "error" and verdict["detail"].startswith("forged records"), verdict


def test_the_value_program_is_the_code_as_given_calling_the_problems_own_entry_point():
  humaneval = load_humaneval_problems()
  judged = {}
  for p in problems.load(Subset.RANDOM_SPAN_LIGHT):
    question = program.question_of(p)
    if question is None:
      continue
    text = program.value_program(p, question, p.middle).files["main.py"]
    assert text.startswith(p.code(p.middle)), p.task_id  # no head of imports: the prefix's own
    assert f"lambda: {humaneval[p.humaneval_id]['entry_point']}(" in text, p.task_id
    judged[p.humaneval_id] = question
  assert len(judged) == 155
  # Five HumanEval names are not BabelCode's snake case, which the whole-program renderer would call.
  renamed = {qid for qid, q in judged.items() if PYTHON.entry_name(q) != humaneval[qid]["entry_point"]}
  assert renamed == {"HumanEval/66", "HumanEval/114", "HumanEval/129", "HumanEval/146", "HumanEval/153"}


@needs_sandbox
def test_a_problem_whose_name_is_not_snake_case_is_judged_by_values():
  p = problems.problems_by_id([Subset.SINGLE_LINE])["SingleLineInfilling/HumanEval/66/L0"]  # digitSum
  assert p.entry_point == "digitSum" and program.question_of(p) is not None
  assert program.run_middle(p, p.middle, LIMITS)["status"] == "passed"
  wrong = program.run_middle(p, "    if s == '': return 1\n", LIMITS)
  assert wrong["status"] == "failed" and wrong["detail"].startswith("test case 0 failed: expected 0, got 1"), wrong


def l10() -> problems.Problem:
  """HumanEval/10 (make_palindrome), which typed HumanEval leaves out: `        return ''` as the middle."""
  return problems.problems_by_id([Subset.SINGLE_LINE])["SingleLineInfilling/HumanEval/10/L1"]


@needs_sandbox
def test_a_problem_typed_humaneval_lacks_is_judged_by_the_nonce_harness():
  p = l10()
  assert program.question_of(p) is None
  assert program.run_middle(p, p.middle, LIMITS)["status"] == "passed"
  wrong = program.run_middle(p, "        return 'x'\n", LIMITS)
  assert wrong["status"] == "failed" and wrong["detail"].startswith("AssertionError"), wrong  # check() raised
  assert program.run_middle(p, "        import sys; sys.exit(0)\n", LIMITS)["status"] == "failed"


# ---- scoring a predictions file ---------------------------------------------------------------------

def predictions(tmp_path) -> tuple[str, list]:
  p = l7()
  whole = problems.problems_by_id([Subset.MULTI_LINE])["MultiLineInfilling/HumanEval/0/L0_L7"]
  records = [{"qid": p.task_id, "language": "Python", "sample_id": 0, "code": p.middle, "finish_reason": "eod"},
             {"qid": p.task_id, "language": "Python", "sample_id": 1, "code": "    return True\n",
              "finish_reason": "length"},
             {"qid": p.task_id, "language": "Python", "sample_id": 2, "code": p.middle},  # a duplicate
             {"qid": p.task_id, "language": "Python", "sample_id": 3, "code": TAMPERING["sys.exit(0) in the function"]},
             {"qid": whole.task_id, "language": "python", "sample_id": 0, "code": whole.middle},
             {"qid": "SingleLineInfilling/HumanEval/999/L0", "language": "Python", "sample_id": 0, "code": "x"},
             '{"qid": "torn',
             {"qid": p.task_id, "language": "Python", "sample_id": 4, "code": "    return False\n"}]
  return write_jsonl(tmp_path / "predictions.jsonl", records), records


@needs_sandbox
def test_scoring_counts_pass_at_k_per_subset_and_a_rerun_reuses_every_verdict(tmp_path, capsys):
  path, _ = predictions(tmp_path)
  output = tmp_path / "scored"
  argv = ["score", "--predictions", path, "--output_dir", str(output), "--subset", "single-line,multi-line",
          "--k", "1,10", "--workers", "2"]
  assert cli.main(argv) == 0
  printed = capsys.readouterr().out
  metrics = json.loads((output / "metrics.json").read_text())
  assert metrics["subsets"] == ["single-line", "multi-line"]
  single = metrics["single-line"]
  assert single["pass@1"] == pytest.approx(3 / 5) and single["num_predictions"] == 5
  assert single["counts"] == {"passed": 3, "failed": 2, "error": 0, "timeout": 0}
  assert single["cut_by_length"] == 1 and (single["num_problems"], single["subset_size"]) == (1, 1033)
  assert metrics["multi-line"]["pass@1"] == 1.0
  assert metrics["unknown_qids"] == 1
  assert len(metrics["invalid_predictions"]) == 2  # the unknown qid and the malformed line, each file:line
  assert any(m.startswith(f"{path}:6: unknown qid") for m in metrics["invalid_predictions"])
  assert any(m.startswith(f"{path}:7:") for m in metrics["invalid_predictions"])
  # Four distinct programs: samples 0, 2 and 4 of L7 (the canonical line) share one execution.
  assert metrics["scoring"]["programs_executed"] == 4 and metrics["scoring"]["duplicates_reused"] == 2
  assert "| single-line | 1 of 1033 | 5 | 0.6000 | n < k |" in printed
  assert "note: single-line: pass@10 not computable: 1 of 1 problems have fewer than 10 samples (fewest 5)" in printed
  assert "1 predictions name a qid" in printed and "--max_decode_length" in printed
  assert "invalid prediction: " + f"{path}:6: unknown qid" in printed
  assert metrics["nonce_judged"] == {"problems": 0, "of": 2, "humaneval_ids": []}
  assert single["nonce_judged_problems"] == 0 and "nonce harness" not in printed
  results = read_jsonl(output / "results.jsonl")
  assert len(results) == 6 and {r["status"] for r in results} == {"passed", "failed"}

  assert cli.main(argv) == 0  # resumed: every verdict is in results.jsonl
  again = json.loads((output / "metrics.json").read_text())
  assert again["scoring"]["programs_executed"] == 0 and again["scored_now"] == 0
  assert again["single-line"] == single
  assert len(read_jsonl(output / "results.jsonl")) == 6
  # A longer timeout is another setting: every verdict is redone, each distinct program once.
  assert cli.main(argv + ["--timeout", "5"]) == 0
  redone = json.loads((output / "metrics.json").read_text())
  assert redone["scoring"]["programs_executed"] == 4 and redone["single-line"]["pass@1"] == single["pass@1"]


@needs_sandbox
def test_the_problems_on_the_nonce_harness_are_counted_and_printed(tmp_path, capsys):
  p, light = l10(), problems.problems_by_id([Subset.RANDOM_SPAN_LIGHT])["RandomSpanInfillingLight/HumanEval/10/0"]
  path = write_jsonl(tmp_path / "predictions.jsonl", [
      {"qid": p.task_id, "language": "Python", "sample_id": 0, "code": p.middle},
      {"qid": p.task_id, "language": "Python", "sample_id": 1, "code": "        return 'x'\n"},
      {"qid": l7().task_id, "language": "Python", "sample_id": 0, "code": l7().middle},
      {"qid": light.task_id, "language": "Python", "sample_id": 0, "code": light.middle}])
  output = tmp_path / "scored"
  assert cli.main(["score", "--predictions", path, "--output_dir", str(output), "--k", "1", "--workers", "1",
                   "--subset", "single-line,random-span-light"]) == 0
  metrics = json.loads((output / "metrics.json").read_text())
  assert metrics["nonce_judged"] == {"problems": 2, "of": 3, "humaneval_ids": ["HumanEval/10"]}
  assert metrics["single-line"]["nonce_judged_problems"] == 1
  assert metrics["random-span-light"]["nonce_judged_problems"] == 1
  assert metrics["single-line"]["counts"] == {"passed": 2, "failed": 1, "error": 0, "timeout": 0}
  assert ("note: 2 of 3 problems judged by the nonce harness (no typed question): HumanEval/10; "
          "a middle there can forge a pass") in capsys.readouterr().out


@needs_sandbox
def test_the_beam_runner_gives_the_local_verdicts(tmp_path):
  path, _ = predictions(tmp_path)
  subsets = (Subset.SINGLE_LINE, Subset.MULTI_LINE)
  local = score.score(path, str(tmp_path / "local"), subsets, LIMITS, (1,), workers=2, progress=False)
  beam = score.score(path, str(tmp_path / "beam"), subsets, LIMITS, (1,), batch_size=2,
                     pipeline_args=["--runner", "DirectRunner"], progress=False)
  verdicts = lambda name: {(r["qid"], r["sample_id"]): r["status"]  # noqa: E731
                           for r in read_jsonl(tmp_path / name / "results.jsonl")}
  assert verdicts("beam") == verdicts("local") and len(verdicts("local")) == 6
  assert beam["single-line"] == local["single-line"] and beam["unknown_qids"] == 1


def test_bad_flags_are_refused(tmp_path, capsys):
  path = write_jsonl(tmp_path / "p.jsonl", [])
  assert cli.main(["score", "--predictions", path, "--output_dir", str(tmp_path), "--k", "0"]) == 2
  assert "--k values must be positive" in capsys.readouterr().err
  with pytest.raises(SystemExit):
    cli.main(["score", "--predictions", path, "--output_dir", str(tmp_path), "--project", "p"])
  assert "Beam's options need --runner" in capsys.readouterr().err


# ---- exact match -----------------------------------------------------------------------------------

FIM = [{"task_id": "add", "prompt": "def add(a, b):\n", "suffix": "\n", "canonical_solution": "    return a + b",
        "language": "py"},
       {"prompt": "def sub(a, b):\n", "suffix": "", "canonical_solution": "    return a - b\n", "language": "py"},
       {"prompt": "function f() {\n", "suffix": "\n}\n", "canonical_solution": "  return 1;", "language": "js"}]


def test_exact_match_per_language_by_stripped_equality(tmp_path, capsys):
  problems_path = write_jsonl(tmp_path / "fim.jsonl", FIM)
  prompts_path = tmp_path / "prompts.jsonl"
  assert cli.main(["prompts", "--santacoder_fim", problems_path, "--output", str(prompts_path)]) == 0
  made = read_jsonl(prompts_path)
  assert [(r["qid"], r["language"]) for r in made] == [("add", "Python"), ("1", "Python"), ("2", "JavaScript")]
  assert made[0]["prefix"] == "def add(a, b):\n" and made[2]["suffix"] == "\n}\n"
  predictions_path = write_jsonl(tmp_path / "predictions.jsonl", [
      {"qid": "add", "sample_id": 0, "code": "    return a + b\n\n"},     # the same once stripped
      {"qid": "add", "sample_id": 1, "code": "    return b + a"},
      {"qid": "1", "sample_id": 0, "code": "return a - b"},                # leading spaces too
      {"qid": "2", "sample_id": 0, "code": "  return 2;", "finish_reason": "length"},
      {"qid": "3", "sample_id": 0, "code": "x"}])
  output = tmp_path / "exact"
  assert cli.main(["exact", "--problems", problems_path, "--predictions", predictions_path,
                   "--output_dir", str(output)]) == 0
  metrics = json.loads((output / "exact_match.json").read_text())
  assert metrics["languages"]["py"] == {"predictions": 3, "exact": 2, "exact_match": pytest.approx(200 / 3, abs=1e-3)}
  assert metrics["languages"]["js"]["exact_match"] == 0.0 and metrics["overall"]["exact"] == 2
  assert metrics["unknown_qids"] == 1 and metrics["sampling"]["cut_by_length"] == 1
  assert len(read_jsonl(output / "exact_match.jsonl")) == 4
  printed = capsys.readouterr().out
  assert "| py | 3 | 66.67 |" in printed and "1 predictions name a qid" in printed


def test_a_malformed_santacoder_fim_record_names_its_line(tmp_path, capsys):
  bad = write_jsonl(tmp_path / "fim.jsonl", [FIM[0], "{not json", FIM[2]])
  assert cli.main(["prompts", "--santacoder_fim", bad, "--output", str(tmp_path / "p.jsonl")]) == 2
  assert f"{bad}:2: not valid JSON" in capsys.readouterr().err
  lacking = write_jsonl(tmp_path / "lacking.jsonl", [FIM[0], {"prompt": "x", "suffix": "", "language": "py"}])
  with pytest.raises(ValueError, match=rf"{lacking}:2: .*canonical_solution"):
    exact.read_problems(lacking)
  twice = write_jsonl(tmp_path / "twice.jsonl", [FIM[0], FIM[0]])
  with pytest.raises(ValueError, match=rf"{twice}:2: qid 'add' repeats"):
    exact.read_problems(twice)
  torn = tmp_path / "torn.jsonl"
  torn.write_text(json.dumps(FIM[0]) + "\n" + '{"prompt": ')
  with pytest.raises(ValueError, match=rf"{torn}:2"):
    exact.read_problems(str(torn))
  assert not (tmp_path / "p.jsonl").exists()
  assert prompts.santacoder_fim_prompts(write_jsonl(tmp_path / "ok.jsonl", FIM), limit=1)[0]["qid"] == "add"
