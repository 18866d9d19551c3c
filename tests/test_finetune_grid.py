"""experiments/finetune_grid.py with a fake runner in place of train.py and sample.py: the cells and their
commands, owned bindings, each cell's test prompts, real scoring of fake predictions into the mean ± std
summary, resuming, and a failing phase. (train.py and sample.py themselves: tests/test_train.py,
tests/test_sampler.py.)"""

import collections
import json
import os
import re
import shlex
import shutil
import statistics

import pytest

from data.practical_tasks import SMALL_DATASET, load_problems, prompt_records, split_problems
from evaluation.practical import score as practical
from sandbox import execution
from experiments import finetune_grid

needs_sandbox = pytest.mark.skipif(bool(execution.missing(practical.toolchain())),
                                   reason="no sandbox (bwrap) on this machine; run `make toolchains`")
PROBLEMS = {p.problem_id: p for p in load_problems(SMALL_DATASET)}
SOLVED_SHARE = {0: 0.25, 1: 0.5, 2: 0.75}  # split seed -> share of its test problems the fake model solves


def _flag(args, name):
  return next(a.split("=", 1)[1] for a in args if a.startswith(f"--{name}="))


def _solved(n, seed):
  return round(SOLVED_SHARE[seed] * n)


def fake_runner(calls, fail=lambda args: False):
  """train.py: makes MODEL_DIR and echoes a step line. sample.py: the reference body for the first
  _solved(n, seed) prompts of the file, `return None` for the rest. `fail(args)`: exit status 3."""

  def run(args, log_path, echo):
    calls.append(list(args))
    with open(log_path, "a") as log:
      log.write(f"fake {args[0]}\n")
    if fail(args):
      return 3
    if args[0] == "train.py":
      model_dir = _flag(args, "gin.MODEL_DIR").strip("'")
      os.makedirs(model_dir, exist_ok=True)
      seed = int(_flag(args, "gin.SPLIT_SEED"))
      with open(os.path.join(model_dir, "metrics.jsonl"), "w") as f:  # held-out loss before and after
        for step, loss in ((0, 4.0 + seed), (3, 2.0 + seed)):
          f.write(json.dumps({"step": step, "validation/practical_tasks": loss}) + "\n")
      echo("step 3/3  loss 1.0")
      return 0
    seed = int(re.search(r"_s(\d+)/run$", _flag(args, "checkpoint")).group(1))
    with open(_flag(args, "prompts")) as f:
      qids = [json.loads(line)["qid"] for line in f]
    with open(_flag(args, "output"), "w") as f:
      for i, qid in enumerate(qids):
        code = PROBLEMS[qid].body if i < _solved(len(qids), seed) else "    return None\n"
        f.write(json.dumps({"qid": qid, "language": "python", "sample_id": 0, "code": code}) + "\n")
    return 0

  return run


@pytest.fixture
def no_scoring(monkeypatch):
  """score_predictions stubbed (no sandbox): pass@1 0 for every cell; its categories are the problems'
  (with their counts), so a test sees which labels the grid scored with."""

  def score(predictions_path, problems, output_dir, workers=None, labels="dataset"):
    group = lambda n: {"problems": n, "pass@1": 0.0, "tests_passed": 0.0, "bleu": 0.0, "codebleu": 0.0}
    counts = collections.Counter(c for p in problems.values() for c in p.categories)
    values = {"overall": group(len(problems)), "categories": {c: group(n) for c, n in counts.items()},
              "unscored_predictions": [], "labels": labels}
    os.makedirs(output_dir, exist_ok=True)
    with open(os.path.join(output_dir, "metrics.json"), "w") as f:
      json.dump(values, f)
    return values

  monkeypatch.setattr(practical, "score_predictions", score)


def _argv(tmp_path, *extra):
  pretrained = tmp_path / "pretrained"
  pretrained.mkdir(exist_ok=True)
  return ["--pretrained", str(pretrained), "--output", str(tmp_path / "grid"), "--workers", "2", *extra]


def test_cells_commands_and_dry_run(tmp_path, capsys, no_scoring):
  dataset = str(tmp_path / "tasks.jsonl")
  shutil.copy(SMALL_DATASET, dataset)
  argv = _argv(tmp_path, "--dataset", dataset, "--fractions", "0.6,0.8", "--seeds", "0,1",
               "--run_gin", "finetune_lora.gin", "--steps", "3", "--gin.BATCH_SIZE=2", "--max_decode_length", "128")
  calls = []
  assert finetune_grid.main(argv + ["--dry_run"], runner=fake_runner(calls)) == 0
  printed = capsys.readouterr().out.splitlines()
  assert not calls and not (tmp_path / "grid").exists()
  assert len(printed) == 4 * 4 and [line.split()[1] for line in printed[:4]] == [
      "train.py", "-m", "sample.py", "-m"]

  assert finetune_grid.main(argv, runner=fake_runner(calls)) == 0
  grid = tmp_path / "grid"
  names = ["f60_s0", "f60_s1", "f80_s0", "f80_s1"]
  assert sorted(p.name for p in grid.iterdir() if p.is_dir()) == names
  assert [c[0] for c in calls] == ["train.py", "sample.py"] * 4
  pretrained = str(tmp_path / "pretrained")
  assert calls[2] == ["train.py", "--gin_file=gin_configs/runs/finetune_lora.gin",
                      f"--gin.PRETRAINED_DIR={pretrained!r}", f"--gin.MODEL_DIR={str(grid / 'f60_s1' / 'run')!r}",
                      f"--gin.DATASET={dataset!r}", "--gin.TRAIN_FRACTION=0.6", "--gin.SPLIT_SEED=1",
                      "--gin.TRAIN_STEPS=3", "--gin.BATCH_SIZE=2"]
  cell = grid / "f80_s0"
  assert calls[5] == ["sample.py", f"--checkpoint={cell / 'run'}", f"--prompts={cell / 'prompts.jsonl'}",
                      f"--output={cell / 'predictions.jsonl'}", "--num_samples=1", "--temperature=0",
                      "--max_decode_length=128", "--batch_size=64"]
  done = json.loads((cell / "done.json").read_text())
  assert (done["train_fraction"], done["seed"], done["dataset"], done["steps"]) == (0.8, 0, dataset, 3)
  assert done["commands"]["train"][1:] == calls[4] and done["test_problems"] == 16
  assert (cell / "train.log").read_text() == "fake train.py\n" and (cell / "score" / "metrics.json").exists()
  assert "truncate_prompts" not in done["sampling"]  # the same run as grids from before

  # --truncate_prompts reaches every cell's sample.py (refused by default: see tests/test_sampler.py).
  calls = []
  fresh = [str(tmp_path / "grid2") if a == str(grid) else a for a in argv]
  assert finetune_grid.main(fresh + ["--truncate_prompts", "--dry_run"], runner=fake_runner(calls)) == 0
  printed = [line for line in capsys.readouterr().out.splitlines() if " sample.py " in f" {line} "]
  assert len(printed) == 4 and all(line.endswith(" --truncate_prompts") for line in printed), printed

  # A dataset with a bad record: the grid runs on the rest and says so (each cell's train.py says it again).
  with open(dataset, "a") as f:
    f.write("{torn\n")
  assert finetune_grid.main(fresh + ["--dry_run"], runner=fake_runner([])) == 0
  assert f"warning: 1 bad record of {dataset} skipped, the rest loaded: {dataset}:" in capsys.readouterr().err


def test_test_prompts_of_each_cell(tmp_path, no_scoring):
  assert finetune_grid.main(_argv(tmp_path, "--fractions", "0.4,0.8", "--seeds", "0,2"),
                            runner=fake_runner([])) == 0
  problems = load_problems(SMALL_DATASET)
  seen = set()
  for fraction in (0.4, 0.8):
    for seed in (0, 2):
      path = tmp_path / "grid" / f"f{round(100 * fraction)}_s{seed}" / "prompts.jsonl"
      records = [json.loads(line) for line in path.read_text().splitlines()]
      train, test = split_problems(problems, fraction, seed)
      assert records == prompt_records(test)
      assert not {r["qid"] for r in records} & {p.problem_id for p in train}
      seen.add(tuple(r["qid"] for r in records))
  assert len(seen) == 4  # each cell its own split


@pytest.mark.parametrize("flag", [f"--gin.{name}=1" for name in finetune_grid.OWNED_BINDINGS])
def test_owned_bindings_are_refused_naming_the_runner_flag(flag, tmp_path, capsys):
  with pytest.raises(SystemExit):
    finetune_grid.main(_argv(tmp_path, flag), runner=fake_runner([]))
  name = flag[len("--gin."):].split("=")[0]
  err = capsys.readouterr().err
  assert f"the runner binds {name} per cell; use {finetune_grid.OWNED_BINDINGS[name]}" in err


@pytest.mark.parametrize("extra", [["--batch_size=3"], ["--steps", "3", "--gin.TRAIN_STEPS=4"],
                                   ["--fractions", "0.4,0.401"], ["--fractions", "1.0"], ["--run_gin", "nope"]])
def test_bad_arguments_are_errors(extra, tmp_path):
  calls = []
  with pytest.raises(SystemExit):
    finetune_grid.main(_argv(tmp_path, *extra), runner=fake_runner(calls))
  assert not calls


def _expected(fraction, seeds):
  n = len(split_problems(list(PROBLEMS.values()), fraction, 0)[1])
  values = [100 * _solved(n, s) / n for s in seeds]
  return statistics.mean(values), statistics.stdev(values)


@needs_sandbox
def test_summary_resume_and_rerun_of_one_cell(tmp_path, capsys):
  calls = []
  argv = _argv(tmp_path, "--fractions", "0.6,0.8", "--seeds", "0,1", "--steps", "3")
  assert finetune_grid.main(argv, runner=fake_runner(calls)) == 0
  out = capsys.readouterr().out
  assert len(calls) == 8
  assert "[cell 1/4] f60_s0: training" in out and "ETA ?" in out and "  f60_s0 | step 3/3  loss 1.0" in out
  assert re.search(r"\[cell 4/4\] f80_s1: train fraction 0.8, split seed 1, 16 test problems .*ETA \d+s", out)

  grid = tmp_path / "grid"
  summary = json.loads((grid / "summary.json").read_text())
  means = {f: _expected(f, (0, 1)) for f in (0.6, 0.8)}
  for fraction, (mean, std) in means.items():
    stat = summary["overall"][f"{fraction:g}"]["pass@1"]
    assert (stat["mean"], stat["std"], stat["n"]) == (pytest.approx(mean, abs=1e-3), pytest.approx(std, abs=1e-3), 2)
    # train.py's loss on the test problems before and after, from each cell's metrics.jsonl: seeds 0 and 1.
    assert summary["overall"][f"{fraction:g}"]["held_out_loss_start"]["mean"] == pytest.approx(4.5)
    assert summary["overall"][f"{fraction:g}"]["held_out_loss_end"]["mean"] == pytest.approx(2.5)
  assert "| held_out_loss_end | 2.500 ± 0.707 | 2.500 ± 0.707 |" in (grid / "summary.md").read_text()
  row = " | ".join(f"{m:.1f} ± {s:.1f}" for m, s in means.values())
  assert f"| **overall** | {row} |" in (grid / "summary.md").read_text() and row in out
  assert (grid / "pass_at_1_by_category.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

  # Again: nothing runs. Other settings: still not rerun, but said so.
  assert finetune_grid.main(argv, runner=fake_runner(calls)) == 0
  assert len(calls) == 8 and capsys.readouterr().out.count("finished earlier, not rerun") == 4
  assert finetune_grid.main(argv[:-1] + ["4"], runner=fake_runner(calls)) == 0
  assert len(calls) == 8 and "steps 3 then, 4 now" in capsys.readouterr().out

  # Without its done.json a cell runs again (its phases resume), and only it.
  os.remove(grid / "f80_s0" / "done.json")
  os.remove(grid / "summary.json")
  assert finetune_grid.main(argv, runner=fake_runner(calls)) == 0
  assert len(calls) == 10 and all("f80_s0" in "".join(c) for c in calls[8:])
  assert json.loads((grid / "summary.json").read_text()) == summary

  # --collect_only needs no --pretrained; cells outside the grid are left out, missing ones named.
  assert finetune_grid.main(["--collect_only", "--output", str(grid), "--fractions", "0.8", "--seeds", "0,1,2"]) == 0
  assert "not finished (left out): f80_s2" in capsys.readouterr().out
  assert json.loads((grid / "summary.json").read_text())["train_fractions"] == ["0.8"]


@needs_sandbox
def test_a_failing_phase_stops_the_grid_naming_the_cell_and_its_log(tmp_path, capsys):
  calls = []
  argv = _argv(tmp_path, "--fractions", "0.8", "--seeds", "0,1,2")
  grid = tmp_path / "grid"
  failing_train = fake_runner(calls, fail=lambda args: args[0] == "train.py" and "--gin.SPLIT_SEED=1" in args)
  assert finetune_grid.main(argv, runner=failing_train) == 3
  err = capsys.readouterr().err
  assert f"error: cell f80_s1: train.py exited with status 3; its log: {grid / 'f80_s1' / 'train.log'}" in err
  assert "fake train.py" in err  # the log's end
  assert len(calls) == 3 and (grid / "f80_s0" / "done.json").exists()
  assert not (grid / "f80_s1" / "done.json").exists() and not (grid / "f80_s2").exists()
  assert not (grid / "summary.md").exists()

  failing_sample = fake_runner(calls, fail=lambda args: args[0] == "sample.py")
  assert finetune_grid.main(argv, runner=failing_sample) == 3
  assert f"cell f80_s1: sample.py exited with status 3; its log: {grid / 'f80_s1' / 'sample.log'}" in \
      capsys.readouterr().err
  assert len(calls) == 5  # f80_s0 kept: not rerun

  assert finetune_grid.main(argv, runner=fake_runner(calls)) == 0
  assert len(calls) == 9 and "| **overall** | " in capsys.readouterr().out
  mean, std = _expected(0.8, (0, 1, 2))
  stat = json.loads((grid / "summary.json").read_text())["overall"]["0.8"]["pass@1"]
  assert (stat["mean"], stat["std"], stat["n"]) == (pytest.approx(mean, abs=1e-3), pytest.approx(std, abs=1e-3), 3)


# ---- the prompt variant axis and the labels (issue 29) -------------------------------------------

def test_prompt_variants_are_an_axis_of_the_grid(tmp_path, capsys, no_scoring):
  argv = _argv(tmp_path, "--fractions", "0.8", "--seeds", "0,1", "--prompt_variants", "plain,return_the_result")
  grid = tmp_path / "grid"
  assert finetune_grid.main(argv + ["--dry_run"], runner=fake_runner([])) == 0
  printed = [shlex.split(line) for line in capsys.readouterr().out.splitlines()]
  assert len(printed) == 4 * 4 and not any("PROMPT_VARIANT" in a for a in printed[0])
  assert printed[8][-1] == "--gin.PROMPT_VARIANT='return_the_result'"  # the third cell's train.py
  assert printed[9][-4:] == ["--prompt_variant", "return_the_result", "--output",
                             str(grid / "return_the_result" / "f80_s0" / "prompts.jsonl")]

  calls = []
  assert finetune_grid.main(argv, runner=fake_runner(calls)) == 0
  # Variant-major: the plain cells where a grid from before the variants had them, the others a grid each.
  models = [_flag(c, "gin.MODEL_DIR").strip("'") for c in calls if c[0] == "train.py"]
  assert models == [str(grid / name / "run") for name in
                    ("f80_s0", "f80_s1", "return_the_result/f80_s0", "return_the_result/f80_s1")]
  variants = [[a for a in c if a.startswith("--gin.PROMPT_VARIANT=")] for c in calls if c[0] == "train.py"]
  assert variants == [[], []] + [["--gin.PROMPT_VARIANT='return_the_result'"]] * 2
  # A cell's sampling prompts are its variant's, on its own test split: the variant its training used.
  problems = load_problems(SMALL_DATASET)
  for name, variant, seed in (("f80_s1", "plain", 1), ("return_the_result/f80_s0", "return_the_result", 0)):
    records = [json.loads(line) for line in (grid / name / "prompts.jsonl").read_text().splitlines()]
    assert records == prompt_records(split_problems(problems, 0.8, seed)[1], variant)
    assert json.loads((grid / name / "done.json").read_text())["prompt_variant"] == variant
  assert all("Return the Result." in " ".join(json.loads(line)["prompt"].split())  # long docstrings wrap
             for line in (grid / "return_the_result" / "f80_s0" / "prompts.jsonl").read_text().splitlines())
  # One summary per variant, and their comparison.
  assert (grid / "summary.md").exists() and (grid / "return_the_result" / "summary.md").exists()
  compared = json.loads((grid / "prompt_variants.json").read_text())
  assert sorted(compared) == ["plain", "return_the_result"] and compared["plain"]["0.8"]["seeds"] == [0, 1]
  assert "| return_the_result | 0.8 (n=2) | 0.0 ± 0.0 |" in (grid / "prompt_variants.md").read_text()
  capsys.readouterr()

  # Rerun: nothing runs. A third variant added: only its cells run.
  assert finetune_grid.main(argv, runner=fake_runner(calls)) == 0
  assert len(calls) == 8 and capsys.readouterr().out.count("finished earlier, not rerun") == 4
  assert finetune_grid.main(argv[:-1] + ["plain,return_the_result,preprompt"], runner=fake_runner(calls)) == 0
  assert len(calls) == 12 and all("/preprompt/f80_s" in "".join(c) for c in calls[8:])
  assert sorted(json.loads((grid / "prompt_variants.json").read_text())) == ["plain", "preprompt", "return_the_result"]


def test_a_grid_from_before_the_variants_and_labels_resumes(tmp_path, capsys, no_scoring):
  argv = _argv(tmp_path, "--fractions", "0.8", "--seeds", "0")
  calls = []
  assert finetune_grid.main(argv, runner=fake_runner(calls)) == 0
  done = tmp_path / "grid" / "f80_s0" / "done.json"
  marker = json.loads(done.read_text())
  assert (marker["prompt_variant"], marker["labels"]) == ("plain", "dataset")
  # The train.py command of a plain cell is the one a grid wrote before the variants.
  assert not any("PROMPT_VARIANT" in a for a in marker["commands"]["train"])
  del marker["prompt_variant"], marker["labels"]  # what a done.json from before the change holds
  done.write_text(json.dumps(marker))
  capsys.readouterr()
  assert finetune_grid.main(argv, runner=fake_runner(calls)) == 0
  out = capsys.readouterr().out
  assert len(calls) == 2 and "f80_s0: finished earlier, not rerun\n" in out and "other settings" not in out
  # Derived labels are another setting: said so, not rerun.
  assert finetune_grid.main(argv + ["--labels", "derived"], runner=fake_runner(calls)) == 0
  assert len(calls) == 2 and "labels 'dataset' then, 'derived' now" in capsys.readouterr().out


def test_labels_reach_the_scoring(tmp_path, no_scoring):
  for flags, source, present, absent in ((["--labels", "derived"], "derived", {"noimport", "str"}, {"string"}),
                                         ([], "dataset", {"string"}, {"noimport"})):
    output = tmp_path / source
    assert finetune_grid.main(_argv(tmp_path, "--output", str(output), "--fractions", "0.8", "--seeds", "0", *flags),
                              runner=fake_runner([])) == 0
    metrics = json.loads((output / "f80_s0" / "score" / "metrics.json").read_text())
    assert metrics["labels"] == source and present <= set(metrics["categories"])
    assert not absent & set(metrics["categories"])
    assert json.loads((output / "f80_s0" / "done.json").read_text())["labels"] == source


@pytest.mark.parametrize("variants, message", [("plain,polite", "--prompt_variants: 'polite' is not one of plain"),
                                               ("plain,plain", "a variant twice")])
def test_bad_prompt_variants_are_refused(variants, message, tmp_path, capsys):
  calls = []
  with pytest.raises(SystemExit):
    finetune_grid.main(_argv(tmp_path, "--prompt_variants", variants), runner=fake_runner(calls))
  assert message in capsys.readouterr().err and not calls
