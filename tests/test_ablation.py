"""experiments/ablation.py: the grid, finished-cell reuse, the TPU dry run, and the tables and figures
(on synthetic metrics.jsonl files); one test trains a 1 x 2 grid of 2-step runs end to end."""

import csv
import json
import math
import os
import shlex

import pytest

import code_corpus
from sandbox import execution
from sandbox.renderers import get
from experiments import ablation, score_grid

LOSSES = {  # cell -> language -> final validation loss; Python and Go are high-resource, Rust and Haskell low
    "tiny_natural": {"python": 2.0, "go": 3.0, "rust": 4.0, "haskell": 5.0},
    "tiny_unimax_1": {"python": 2.2, "go": 3.3, "rust": 3.6, "haskell": 4.0},
    "mini_natural": {"python": 1.0, "go": 2.0, "rust": 3.0, "haskell": 4.0},
    "mini_unimax_1": {"python": 1.1, "go": 2.0, "rust": 2.7, "haskell": 3.0},
    "mini_natural_seed1": {"python": 1.05, "go": 1.9, "rust": 3.0, "haskell": 4.2},
}
GRID = ["--sizes", "tiny,mini", "--mixtures", "natural,unimax_1"]


def _write_metrics(cell_dir, losses, step=10):
  """Train records, an early eval record with other numbers, then the final eval record."""
  os.makedirs(cell_dir, exist_ok=True)
  with open(os.path.join(cell_dir, "metrics.jsonl"), "w") as f:
    for s in range(1, step + 1):
      f.write(json.dumps({"step": s, "loss": 9.0 - s / step}) + "\n")
      if s == step // 2:
        f.write(json.dumps({"step": s, **{f"validation/{k}": 99.0 for k in losses}}) + "\n")
    f.write(json.dumps({"step": step, **{f"validation/{k}": v for k, v in losses.items()}}) + "\n")
    f.write('{"step": 11, "loss": 1.')  # the torn last line of a killed run


@pytest.fixture
def synthetic(tmp_path):
  for cell, losses in LOSSES.items():
    _write_metrics(str(tmp_path / cell), losses)
  scores = tmp_path / "mini_unimax_1" / "scores"
  scores.mkdir()
  (scores / "metrics.json").write_text(json.dumps({"pass@1": 0.25, "pass@10": 0.5, "num_samples": 20,
                                                   "python": {"pass@1": 0.3}}))
  return tmp_path


def _csv(path):
  with open(path) as f:
    return list(csv.DictReader(f))


def _is_png(path):
  return os.path.getsize(path) > 1000 and open(path, "rb").read(8) == b"\x89PNG\r\n\x1a\n"


def test_tables_and_figures_from_synthetic_metrics(synthetic, capsys):
  assert ablation.main(["--collect_only", *GRID, "--repeat", "mini:natural", "--output", str(synthetic)]) == 0
  rows = _csv(synthetic / "results.csv")
  assert [r["cell"] for r in rows] == list(LOSSES)
  assert list(rows[0]) == ["cell", "size", "mixture", "seed", "step", "validation/python", "validation/go",
                           "validation/rust", "validation/haskell", "validation/high_resource_mean",
                           "validation/low_resource_mean", "pass@1", "pass@10", "python/pass@1"]
  tiny = rows[0]
  assert float(tiny["validation/python"]) == 2.0  # the last eval record, not the earlier one
  assert float(tiny["validation/high_resource_mean"]) == pytest.approx(2.5)
  assert float(tiny["validation/low_resource_mean"]) == pytest.approx(4.5)
  assert (rows[3]["pass@1"], rows[3]["python/pass@1"], rows[0]["pass@1"]) == ("0.25", "0.3", "")
  assert (rows[4]["seed"], rows[4]["mixture"], rows[2]["seed"]) == ("1", "natural", "0")

  md = (synthetic / "results.md").read_text()
  assert md == capsys.readouterr().out.split("wrote ")[0].rstrip("\n") + "\n"
  # % change against Natural: tiny unimax_1 Haskell (4.0 - 5.0) / 5.0; HR mean of +10% and +10%.
  assert "| unimax_1 | +10.0% | +10.0% | -10.0% | -20.0% | +10.0% | -15.0% |" in md
  assert "| unimax_1 | +10.0% | +0.0% | -10.0% | -25.0% | +5.0% | -17.5% |" in md
  assert "| mini_natural_seed1 | 0 vs 1 | 0.0500 | 0.1000 | 0.0000 | 0.2000 | 0.0250 | 0.1000 | 0.0875 |" in md
  assert "No validation data in the corpus (left out): Java, C++, PHP, TypeScript, JavaScript, Dart, Lua, C#, R, " \
         "Julia." in md
  assert _is_png(synthetic / "fig5_mean_loss.png") and _is_png(synthetic / "fig6_change_vs_natural.png")


def test_per_language_pass_at_k_from_scored_predictions(synthetic, capsys):
  # evaluation.score's metrics.json: one block per language.
  for cell, python, cpp in (("mini_natural", 0.30, 0.10), ("mini_unimax_1", 0.25, 0.15)):
    scores = synthetic / cell / "scores"
    scores.mkdir(exist_ok=True)
    (scores / "metrics.json").write_text(json.dumps({
        "languages": ["python", "cpp"], "python": {"pass@1": python, "percent_passed": 1.0},
        "cpp": {"pass@1": cpp}, "toolchains": {"python": "Python 3.11"}}))
  assert ablation.main(["--collect_only", *GRID, "--output", str(synthetic), "--k", "humaneval=1"]) == 0
  rows = {r["cell"]: r for r in _csv(synthetic / "results.csv")}
  assert rows["mini_natural"]["cpp/pass@1"] == "0.1" and rows["mini_unimax_1"]["python/pass@1"] == "0.25"
  md = (synthetic / "results.md").read_text()
  assert "## Change of pass@1 against Natural (execution, per language)" in md
  assert "| unimax_1 | -5.0 | +5.0 |" in md  # Python, then C++ (the paper's order)
  assert "CPU-scale proxy" in md and "Not evaluated: Dart (" in md
  # The paper's measures (experiments/paper_results.py): relative change of pass@k against Natural.
  tables = (synthetic / "paper_tables.md").read_text()
  assert "| humaneval | mini | unimax_1 | 1 | -16.7 | +50.0 | +16.7 |" in tables  # Python, C++, HR mean
  assert _is_png(synthetic / "fig5_passk.png") and _is_png(synthetic / "fig6_passk_relative_change.png")
  # At the paper's k (100) a grid of few samples has no pass@k: the cells say so, nothing is drawn for Figure 6.
  assert ablation.main(["--collect_only", *GRID, "--output", str(synthetic)]) == 0
  assert "| mini | natural | n < k | n < k |" in (synthetic / "paper_tables.md").read_text()
  assert not (synthetic / "fig6_passk_relative_change.png").exists()


def test_cells_without_records_are_noted_and_figure_6_needs_natural(synthetic):
  ablation.main(["--collect_only", "--sizes", "tiny,small", "--mixtures", "unimax_1", "--output", str(synthetic)])
  assert [r["cell"] for r in _csv(synthetic / "results.csv")] == ["tiny_unimax_1"]
  assert "No validation record yet (left out): small_unimax_1." in (synthetic / "results.md").read_text()
  assert not (synthetic / "fig6_change_vs_natural.png").exists()


def test_finished_needs_the_same_steps_or_the_final_checkpoint_and_record(tmp_path):
  cell = str(tmp_path / "c")
  _write_metrics(cell, {"python": 1.0}, step=10)
  assert not ablation.finished(cell, 10)  # a validation record but no final checkpoint: resume
  os.makedirs(os.path.join(cell, "checkpoints", "10"))
  assert ablation.finished(cell, 10) and not ablation.finished(cell, 20)
  with open(os.path.join(cell, "done.json"), "w") as f:
    json.dump({"steps": 5}, f)
  assert not ablation.finished(cell, 10) and ablation.finished(cell, 5)


def _fake_runner(calls, status=0):
  """Stands in for train.py: records the call and writes a final validation record."""

  def run(args, log_path, echo):
    calls.append(list(args))
    model_dir = next(a for a in args if a.startswith("--gin.MODEL_DIR="))[len("--gin.MODEL_DIR="):].strip("'")
    _write_metrics(model_dir, {"python": 1.0 + len(calls)}, step=3)
    echo("step 3/3  loss 1.0")
    return status

  return run


def test_local_runner_progress_resume_and_failure(tmp_path, capsys):
  calls = []
  (tmp_path / "corpus").mkdir()
  argv = [*GRID, "--corpus", str(tmp_path / "corpus"), "--steps", "3", "--output", str(tmp_path / "abl"),
          "--gin.BATCH_SIZE=2", "--repeat", "tiny:unimax_1"]
  assert ablation.main(argv, runner=_fake_runner(calls)) == 0
  out = capsys.readouterr().out
  assert len(calls) == 5
  assert "[cell 1/5] tiny_natural: training 3 steps" in out and "ETA ?" in out
  assert "[cell 5/5] tiny_unimax_1_seed1: training 3 steps" in out and "  tiny_natural | step 3/3" in out
  first = calls[0]
  assert first[:3] == ["--gin_file=gin_configs/runs/ablation.gin", "--gin_file=gin_configs/models/tiny.gin",
                       "--gin_file=gin_configs/mixtures/natural.gin"]
  assert f"--gin.CORPUS_DIR={str(tmp_path / 'corpus')!r}" in first
  assert "--gin.TRAIN_STEPS=3" in first and "--gin.BATCH_SIZE=2" in first
  assert calls[4][-1] == "--gin.train.seed=1" and not any("seed" in a for a in first)
  assert json.load(open(tmp_path / "abl" / "tiny_natural" / "done.json"))["steps"] == 3

  # Rerun: nothing trains. More steps: every cell runs again (train.py resumes it).
  assert ablation.main(argv, runner=_fake_runner(calls)) == 0
  assert len(calls) == 5 and capsys.readouterr().out.count("finished earlier (3 steps), not rerun") == 5
  os.remove(tmp_path / "abl" / "mini_natural" / "done.json")
  assert ablation.main(argv + ["--dry_run"], runner=_fake_runner(calls)) == 0
  printed = capsys.readouterr().out.splitlines()
  assert len(calls) == 5 and len(printed) == 1 and "mini_natural" in printed[0]
  assert shlex.split(printed[0])[:2] == ["python", "train.py"]
  failing = argv[:-2] + ["--steps", "4"]
  assert ablation.main(failing, runner=_fake_runner(calls, status=3)) == 3
  assert len(calls) == 6  # stopped at the first failure


@pytest.mark.parametrize("flag", ["--gin.TRAIN_STEPS=5", "--gin.MODEL_DIR='x'", "--batch_size=3"])
def test_flags_the_runner_owns_or_does_not_know_are_errors(flag, tmp_path, capsys):
  with pytest.raises(SystemExit):
    ablation.main(["--corpus", "c", "--output", str(tmp_path), flag])
  assert flag.split("=")[0] in capsys.readouterr().err
  with pytest.raises(SystemExit):
    ablation.main(["--corpus", "c", "--output", str(tmp_path), "--repeat", "4b:natural"])
  with pytest.raises(SystemExit):
    ablation.main(["--corpus", "c", "--output", str(tmp_path), "--sizes", "huge"])


def test_tpu_dry_run_prints_the_paper_grid(capsys):
  argv = ["--launcher", "tpu", "--dry_run", "--zone", "us-central2-b", "--corpus", "gs://b/corpus",
          "--output", "gs://b/ablation", "--gin.train.microbatches=8"]
  assert ablation.main(argv) == 0
  lines = capsys.readouterr().out.splitlines()
  assert len(lines) == 15
  seen = set()
  for line in lines:
    argv_ = shlex.split(line)
    assert argv_[:3] == ["python", "tpu/launch.py", "--name"]
    train = argv_[argv_.index("--") + 1:]
    size = train[1].split("/")[-1][:-len(".gin")]
    mixture = train[2].split("/")[-1][:-len(".gin")]
    seen.add((size, mixture))
    assert train[0] == "--gin_file=gin_configs/runs/pretrain.gin"
    assert argv_[3] == f"codelm-{size}-{mixture}".replace("_", "-")
    assert f"--gin.MODEL_DIR='gs://b/ablation/{size}_{mixture}'" in train
    assert "--gin.train.microbatches=8" in train
  assert ablation.main(argv + ["--passk_every", "500"]) == 0  # pass@k while training, in every cell
  for line in capsys.readouterr().out.splitlines():
    train = shlex.split(line)
    at = train.index("--gin.train.passk=@codelm.PasskConfig()")
    assert train[at + 1] == "--gin.codelm.PasskConfig.every=500"
    assert not any(a.startswith("--gin.TRAIN_STEPS") for a in train)  # the paper's, from models/<size>.gin
  assert seen == {(s, m) for s in ("1b", "2b", "4b") for m in ("natural", "unimax_1", "unimax_2", "unimax_3",
                                                                 "unimax_4")}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
  return code_corpus.build_cached(str(tmp_path_factory.mktemp("ablation_corpus")))


@pytest.mark.e2e
def test_grid_trains_with_train_py_then_reuses_finished_cells(corpus, tmp_path, monkeypatch, capsys):
  monkeypatch.setenv("XLA_FLAGS", "")  # one CPU device in train.py, as a user runs it
  output = tmp_path / "abl"
  # One size, two mixtures (Figure 6 compares each with natural): the runner's walk over sizes is
  # test_local_runner_progress_resume_and_failure's, with train.py stubbed.
  argv = ["--sizes", "tiny", "--mixtures", "natural,unimax_1", "--corpus", corpus, "--steps", "2",
          "--output", str(output), "--gin.TASK_FEATURE_LENGTHS={'inputs': 64, 'targets': 64}", "--gin.BATCH_SIZE=2",
          "--gin.train.eval_batches=1", "--gin.train.log_every=1"]
  assert ablation.main(argv) == 0
  out = capsys.readouterr().out
  assert "[cell 2/2] tiny_unimax_1: training 2 steps" in out
  rows = _csv(output / "results.csv")
  assert [r["cell"] for r in rows] == ["tiny_natural", "tiny_unimax_1"]
  assert {"validation/python", "validation/go", "validation/high_resource_mean"} <= set(rows[0])
  assert all(r["step"] == "2" and math.isfinite(float(r["validation/go"])) for r in rows)
  assert rows[0]["validation/low_resource_mean"] == ""  # the fixture corpus has no low-resource language
  assert "validation python" in (output / "tiny_natural" / "train.log").read_text()
  assert _is_png(output / "fig5_mean_loss.png") and _is_png(output / "fig6_change_vs_natural.png")

  def must_not_train(*args):
    raise AssertionError(f"train.py invoked again: {args}")

  assert ablation.main(argv, runner=must_not_train) == 0
  assert capsys.readouterr().out.count("not rerun") == 2

  if execution.missing(get("python").toolchain):
    return
  # Then the tiny cells sampled and scored (2 problems, 2 samples each, in Python), and the paper's
  # figures drawn from their metrics.json files at k = 2.
  score_argv = ["--grid", str(output), "--sizes", "tiny", "--datasets", "humaneval", "--languages", "python",
                "--limit", "2", "--num_samples", "2", "--max_decode_length", "8", "--workers", "1",
                "--truncate_prompts"]  # HumanEval prompts in a tiny cell's context
  assert score_grid.main(score_argv) == 0
  for cell in ("tiny_natural", "tiny_unimax_1"):
    metrics = json.loads((output / cell / "scores" / "humaneval" / "metrics.json").read_text())
    assert metrics["python"]["num_predictions"] == 4 and "pass@2" in metrics["python"]
  tables = (output / "paper_tables.md").read_text()
  assert "pass@2" in tables and "tiny" in tables and _is_png(output / "fig5_passk.png")
  # A rerun finds every sample and every verdict there: sample.py (stubbed here) and the scorer skip them.
  results = (output / "tiny_natural" / "scores" / "humaneval" / "results.jsonl").read_text()
  commands = []
  assert score_grid.run(str(output), score_grid.parse_datasets("humaneval"), ["tiny"], languages=["python"],
                        limit=2, num_samples=2, runner=lambda command: commands.append(command) or 0) == 0
  assert len(commands) == 2 and (output / "tiny_natural" / "scores" / "humaneval" / "results.jsonl").read_text() == results


def test_score_grid_finds_finished_cells_and_prints_its_commands(tmp_path, capsys):
  for cell in ("tiny_natural", "tiny_unimax_1", "mini_natural"):
    (tmp_path / cell).mkdir()
    (tmp_path / cell / "done.json").write_text("{}")
  (tmp_path / "mini_unimax_1").mkdir()  # not finished: left out
  assert score_grid.finished_cells(str(tmp_path), None, None) == [   # the smallest model first
      ("tiny", "natural"), ("tiny", "unimax_1"), ("mini", "natural")]
  assert score_grid.finished_cells(str(tmp_path), ["mini", "tiny"], ["natural"]) == [("mini", "natural"), ("tiny", "natural")]
  assert score_grid.main(["--grid", str(tmp_path), "--sizes", "tiny", "--datasets",
                          "translation,bc_tp3=tp3.jsonl:translation:C++", "--num_samples", "10", "--dry_run"]) == 0
  out = capsys.readouterr().out
  assert out.count("sampling") == 4
  assert f"--checkpoint={tmp_path / 'tiny_unimax_1'} --prompts={tmp_path / 'prompts' / 'bc_tp3.jsonl'}" in out
  assert "gin_configs/sample/translation.gin" in out and "--num_samples=10" in out
  assert f"--benchmark tp3.jsonl --output {tmp_path / 'tiny_natural' / 'scores' / 'bc_tp3'} --k 1,10" in out
  assert not (tmp_path / "prompts").exists()  # a dry run writes nothing
  assert "--truncate_prompts" not in out  # refused by default; passed through only when asked
  assert score_grid.main(["--grid", str(tmp_path), "--sizes", "mini", "--datasets", "humaneval",
                          "--truncate_prompts", "--dry_run"]) == 0
  assert capsys.readouterr().out.count("--truncate_prompts") == 1
  assert score_grid.parse_datasets("humaneval,bc_mbpp=m.jsonl:generation") == [
      score_grid.Dataset("humaneval", "humaneval", "generation"),
      score_grid.Dataset("bc_mbpp", "m.jsonl", "generation")]
  # k by task, whatever the name says: the paper's 100 (generation) or 25 (translation), or fewer samples.
  assert [score_grid.k_for(score_grid.Dataset("tp3_like", "f", task), n)
          for task, n in (("generation", None), ("translation", None), ("generation", 10))] == [100, 25, 10]
  for bad in ("tp3.jsonl", "x=f.jsonl:summarise", "x=f.jsonl:generation:C++", ""):
    with pytest.raises(ValueError, match="--datasets"):
      score_grid.parse_datasets(bad)
  assert score_grid.main(["--grid", str(tmp_path / "nothing"), "--dry_run"]) == 2


def test_the_objective_axis_trains_each_cell_with_fim_too(tmp_path, capsys):
  calls = []
  (tmp_path / "corpus").mkdir()
  argv = ["--sizes", "tiny", "--mixtures", "natural", "--objectives", "paper,fim", "--corpus",
          str(tmp_path / "corpus"), "--steps", "3", "--output", str(tmp_path / "abl")]
  assert ablation.main(argv, runner=_fake_runner(calls)) == 0
  assert "[cell 2/2] tiny_natural_fim: training 3 steps" in capsys.readouterr().out
  assert "--gin_file=gin_configs/objectives/fim.gin" not in calls[0]
  assert calls[1][3] == "--gin_file=gin_configs/objectives/fim.gin"  # after the mixture file
  with pytest.raises(SystemExit):
    ablation.main(argv[:5] + ["paper,fiim"] + argv[6:], runner=_fake_runner(calls))
  assert "--objectives: unknown fiim; choose from paper, fim" in capsys.readouterr().err


def test_the_objective_section_sets_pass_at_1_of_both_measures_side_by_side(tmp_path, capsys):
  for cell, losses, humaneval, single_line in (("tiny_natural", {"python": 2.0, "go": 3.0}, (0.10, 0.20), 0.01),
                                               ("tiny_natural_fim", {"python": 2.1, "go": 3.1}, (0.08, 0.20), 0.30),
                                               ("tiny_unimax_1", {"python": 2.2, "go": 3.3}, (0.05, 0.05), None)):
    _write_metrics(str(tmp_path / cell), losses)
    scores = tmp_path / cell / "scores"
    (scores / "humaneval").mkdir(parents=True)
    (scores / "humaneval" / "metrics.json").write_text(json.dumps({
        "languages": ["python", "go"], "python": {"pass@1": humaneval[0]}, "go": {"pass@1": humaneval[1]}}))
    if single_line is not None:
      (scores / "infilling").mkdir()
      (scores / "infilling" / "metrics.json").write_text(json.dumps({
          "subsets": ["single-line"], "single-line": {"pass@1": single_line, "num_problems": 1033}}))
  argv = ["--collect_only", "--sizes", "tiny", "--mixtures", "natural,unimax_1", "--objectives", "paper,fim",
          "--output", str(tmp_path)]
  assert ablation.main(argv) == 0
  md = (tmp_path / "results.md").read_text()
  assert "## Objective: the paper's mixture against + fill-in-the-middle" in md
  # HumanEval pass@1: mean over languages; infilling: the single-line subset; mean validation loss.
  assert "| tiny | natural | 0.150 | 0.140 | 0.010 | 0.300 | 2.500 | 2.600 |" in md
  assert "| tiny | unimax_1 |" not in md.split("## Objective")[1]  # no FIM cell: no pair
  # The mixture comparison is over the paper's objective only: unimax_1 against natural, not natural_fim.
  assert "| unimax_1 | +10.0% | +10.0% |" in md and "natural_fim |" not in md.split("## % change")[1].split("##")[0]
  assert _is_png(tmp_path / "fig_objective.png")
  assert "tiny_natural_fim" in [r["cell"] for r in _csv(tmp_path / "results.csv")]


def test_score_grid_samples_infilling_prompts_and_scores_them_by_execution(tmp_path, capsys):
  for cell in ("tiny_natural", "tiny_natural_fim"):
    (tmp_path / cell).mkdir()
    (tmp_path / cell / "done.json").write_text("{}")
  assert score_grid.finished_cells(str(tmp_path), None, ["natural"]) == [("tiny", "natural"), ("tiny", "natural_fim")]
  assert score_grid.main(["--grid", str(tmp_path), "--datasets", "infilling", "--dry_run"]) == 0
  out = capsys.readouterr().out
  assert "gin_configs/sample/infilling.gin" in out and f"--checkpoint={tmp_path / 'tiny_natural_fim'}" in out
  assert (f"python -m evaluation.infilling score --predictions {tmp_path / 'tiny_natural_fim' / 'predictions' / 'infilling.jsonl'} "
          f"--output_dir {tmp_path / 'tiny_natural_fim' / 'scores' / 'infilling'} --subset single-line --k 1") in out
  # Scored for real on two problems: the canonical middle passes, a wrong one fails (sample.py faked).
  from evaluation.infilling import problems

  first = problems.load(problems.Subset.SINGLE_LINE)[:2]

  def fake_sample(command):
    flag = lambda name: next(a for a in command if a.startswith(f"--{name}="))[len(name) + 3:]  # noqa: E731
    prompts = [json.loads(line) for line in open(flag("prompts"))]
    output = flag("output")
    with open(output, "w") as f:
      for prompt, problem, code in zip(prompts, first, (first[0].middle, "    return None\n")):
        assert prompt["qid"] == problem.task_id
        f.write(json.dumps({"qid": prompt["qid"], "language": "Python", "sample_id": 0, "code": code,
                            "finish_reason": "eos", "num_tokens": 5}) + "\n")
    return 0

  assert score_grid.run(str(tmp_path), score_grid.parse_datasets("infilling"), ["tiny"], ["natural"], limit=2,
                        runner=fake_sample) == 0
  metrics = json.loads((tmp_path / "tiny_natural_fim" / "scores" / "infilling" / "metrics.json").read_text())
  assert metrics["single-line"]["pass@1"] == 0.5 and metrics["single-line"]["num_problems"] == 2
