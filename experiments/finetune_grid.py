"""CodeInsight's split x seed grid (Beau & Crabbé 2024): fine-tune one pretrained run on each train
fraction of the practical tasks with each split seed (and each prompt variant: its prompt study),
sample its test split, score it, and report pass@1 per category as mean ± std over seeds.

  python -m experiments.finetune_grid --pretrained MODEL_DIR --output GRID_DIR [--dataset D] \
      [--fractions 0.2,0.4,0.6,0.8] [--seeds 0,1,2,3,4] [--prompt_variants plain,return_the_result,preprompt] \
      [--labels derived|dataset] [--run_gin gin_configs/runs/codeinsight_lora.gin] \
      [--steps N] [--num_samples 1 --temperature 0 --max_decode_length 256 --sample_batch_size 64] \
      [--gin.BATCH_SIZE=16 ...] [--dry_run]
  python -m experiments.finetune_grid --collect_only --output GRID_DIR [--fractions ... --seeds ... --prompt_variants ...]

Each cell (variant, fraction, seed) lives in GRID_DIR/f{percent}_s{seed}/ for the plain prompt (f40_s0:
40% of the problems to train on, split seed 0) and in GRID_DIR/{variant}/f{percent}_s{seed}/ for the
others (return_the_result/f40_s0), and runs four phases, one after another:
  1. train.py with the run gin (runs/finetune.gin by default; finetune_lora.gin, codeinsight_lora.gin),
     PRETRAINED_DIR, MODEL_DIR = <cell>/run, DATASET, TRAIN_FRACTION, SPLIT_SEED, PROMPT_VARIANT (when not
     plain) and TRAIN_STEPS with --steps; its console appended to <cell>/train.log, its progress lines
     echoed under the cell's name;
  2. the test split's prompts (data/practical_tasks.py) in the cell's variant, the one its training
     examples used -> <cell>/prompts.jsonl;
  3. sample.py on <cell>/run -> <cell>/predictions.jsonl, its console in <cell>/sample.log;
  4. evaluation/practical/score.py's scoring -> <cell>/score/metrics.json, per category of --labels (the
     dataset's when it has any, else derived from the references: data/practical_labels.py);
then <cell>/done.json records what ran. A cell with done.json is not rerun; a half-done one continues
(train.py resumes from its checkpoints, sample.py skips sampled prompts, scoring reuses its results).
A failed phase stops the grid, naming the cell and its log; finished cells are kept. Extra
--gin.NAME=VALUE flags go to every cell's train.py.

Then, for every finished cell of the grid: GRID_DIR/summary.md, summary.json and
pass_at_1_by_category.png (evaluation.practical.score.write_summary: per train fraction, mean ± std over seeds)
of the plain prompt's cells, the same in GRID_DIR/{variant}/ for each other variant, and with more than
one variant GRID_DIR/prompt_variants.md and .json (the paper's Table 2: overall metrics per variant).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import shlex
import sys
import time
from typing import Callable, Mapping, Sequence

import storage
from data.practical_labels import LABEL_SOURCES, with_labels
from data.practical_tasks import (PROMPT_VARIANTS, SMALL_DATASET, TASK_NAME, Problem, PromptVariant, load_problems,
                                  prompt_records, prompt_variant, skipped_warning, split_problems)
from experiments.logged_runs import duration, run_logged

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUNS_DIR = "gin_configs/runs"  # relative to ROOT, where train.py runs
DEFAULT_RUN_GIN = f"{RUNS_DIR}/finetune.gin"
DEFAULT_FRACTIONS = (0.2, 0.4, 0.6, 0.8)  # CodeInsight's 20/80 .. 80/20 splits
DEFAULT_SEEDS = (0, 1, 2, 3, 4)  # and its five seeds
# Bound per cell by the runner; a --gin flag setting one would make every cell the same run.
OWNED_BINDINGS = {"MODEL_DIR": "--output", "PRETRAINED_DIR": "--pretrained", "DATASET": "--dataset",
                  "TRAIN_FRACTION": "--fractions", "SPLIT_SEED": "--seeds", "PROMPT_VARIANT": "--prompt_variants"}
PLAIN = PromptVariant.PLAIN.value
# What a done.json written before a setting existed ran with (grids from before it resume unchanged).
LEGACY_SETTINGS = {"labels": "dataset"}
# train.py's and sample.py's progress lines, echoed under the cell's name.
ECHOED = re.compile(r"(step |  validation|resumed from|initialised parameters|practical_tasks: |\d+ prompts, |"
                    r"wrote \d+ samples)")

# ---------------------------------------------------------------------------------------------
# The grid.


@dataclasses.dataclass(frozen=True)
class Cell:
  fraction: float  # TRAIN_FRACTION
  seed: int  # SPLIT_SEED
  variant: str = PLAIN  # PROMPT_VARIANT: the prompts of its training examples and of its sampling

  @property
  def name(self) -> str:
    """f40_s0 for the plain prompt (the names of grids from before the variants), return_the_result/f40_s0
    for another: each variant's cells a grid of their own under GRID_DIR/{variant}/."""
    base = f"f{round(100 * self.fraction):02d}_s{self.seed}"
    return base if self.variant == PLAIN else f"{self.variant}/{base}"


def make_grid(fractions: Sequence[float], seeds: Sequence[int], variants: Sequence[str] = (PLAIN,)) -> list[Cell]:
  """variants x fractions x seeds, variant-major then fraction-major; each fraction in (0, 1) with its
  own whole percent (the name), each variant one of PROMPT_VARIANTS."""
  for v in variants:
    prompt_variant(v, "--prompt_variants")
  if len(set(variants)) != len(variants):
    raise ValueError(f"--prompt_variants {','.join(variants)}: a variant twice")
  cells = [Cell(f, s, v) for v in variants for f in fractions for s in seeds]
  if not cells:
    raise ValueError("the grid is empty: give at least one prompt variant, one fraction and one seed")
  for f in fractions:
    if not 0 < f < 1:
      raise ValueError(f"train fraction {f:g}: must be in (0, 1)")
  names = [c.name for c in cells]
  repeated = sorted({n for n in names if names.count(n) > 1})
  if repeated:
    raise ValueError(f"two cells named {repeated[0]}: fractions and seeds must be distinct, at whole percents")
  return cells


@dataclasses.dataclass(frozen=True)
class Grid:
  """What every cell shares. Paths are absolute: train.py and sample.py run from the repository root."""
  output: str  # GRID_DIR
  pretrained: str  # PRETRAINED_DIR: a train.py MODEL_DIR
  dataset: str | None = None  # None: the small in-repo set (the run gin's DATASET default)
  run_gin: str = DEFAULT_RUN_GIN
  steps: int | None = None  # None: the run gin's TRAIN_STEPS
  bindings: tuple[str, ...] = ()  # --gin.NAME=VALUE for train.py
  num_samples: int = 1
  temperature: float = 0.0
  max_decode_length: int = 256
  sample_batch_size: int = 64
  workers: int | None = None  # scoring sandboxes at a time (None: one per CPU)
  labels: str = "dataset"  # the categories scored: "dataset" or "derived" (data/practical_labels.py)
  truncate_prompts: bool = False  # sample.py --truncate_prompts (refused by default)

  def cell_dir(self, cell: Cell) -> str:
    return os.path.join(self.output, cell.name)

  @property
  def settings(self) -> dict:
    """What makes two runs of a cell the same run (kept in done.json)."""
    return {"pretrained": self.pretrained, "dataset": self.dataset or SMALL_DATASET, "run_gin": self.run_gin,
            "steps": self.steps, "bindings": list(self.bindings), "labels": self.labels,
            "sampling": {"num_samples": self.num_samples, "temperature": self.temperature,
                         "max_decode_length": self.max_decode_length,
                         # only when set: the done.json of grids from before stay the same runs
                         **({"truncate_prompts": True} if self.truncate_prompts else {})}}


def train_args(cell: Cell, grid: Grid) -> list[str]:
  """The train.py command (after `python`) of one cell."""
  args = ["train.py", f"--gin_file={grid.run_gin}", f"--gin.PRETRAINED_DIR={grid.pretrained!r}",
          f"--gin.MODEL_DIR={os.path.join(grid.cell_dir(cell), 'run')!r}"]
  args += [f"--gin.DATASET={grid.dataset!r}"] if grid.dataset else []
  args += [f"--gin.TRAIN_FRACTION={cell.fraction!r}", f"--gin.SPLIT_SEED={cell.seed}"]
  # The plain prompt is the run gin's default: its cells' commands are those of grids from before.
  args += [f"--gin.PROMPT_VARIANT={cell.variant!r}"] if cell.variant != PLAIN else []
  args += [f"--gin.TRAIN_STEPS={grid.steps}"] if grid.steps is not None else []
  return args + list(grid.bindings)


def sample_args(cell: Cell, grid: Grid) -> list[str]:
  """The sample.py command (after `python`) of one cell: its fine-tuned run on its test prompts."""
  cell_dir = grid.cell_dir(cell)
  return ["sample.py", f"--checkpoint={os.path.join(cell_dir, 'run')}",
          f"--prompts={os.path.join(cell_dir, 'prompts.jsonl')}",
          f"--output={os.path.join(cell_dir, 'predictions.jsonl')}", f"--num_samples={grid.num_samples}",
          f"--temperature={grid.temperature:g}", f"--max_decode_length={grid.max_decode_length}",
          f"--batch_size={grid.sample_batch_size}"] + (["--truncate_prompts"] if grid.truncate_prompts else [])


def dry_run_commands(cell: Cell, grid: Grid) -> list[list[str]]:
  """The cell as four shell commands: the two in-process phases as their command-line equivalents."""
  cell_dir, dataset = grid.cell_dir(cell), grid.dataset or SMALL_DATASET
  return [["python", *train_args(cell, grid)],
          ["python", "-m", "data.practical_tasks", "--dataset", dataset, "--train_fraction", f"{cell.fraction!r}",
           "--seed", str(cell.seed), "--split", "test", "--prompt_variant", cell.variant,
           "--output", os.path.join(cell_dir, "prompts.jsonl")],
          ["python", *sample_args(cell, grid)],
          ["python", "-m", "evaluation.practical", "--predictions", os.path.join(cell_dir, "predictions.jsonl"),
           "--dataset", dataset, "--labels", grid.labels, "--output_dir", os.path.join(cell_dir, "score")]]


def parse_bindings(flags: Sequence[str], steps: int | None) -> list[str]:
  """The --gin.NAME=VALUE flags passed through to train.py; an owned binding is an error naming the
  runner's flag for it."""
  for flag in flags:
    if not flag.startswith("--gin.") or "=" not in flag:
      raise ValueError(f"unrecognised flag {flag!r}: extra flags must be --gin.NAME=VALUE (passed to train.py)")
    name = flag[len("--gin."):].split("=", 1)[0].strip()
    if name in OWNED_BINDINGS:
      raise ValueError(f"{flag}: the runner binds {name} per cell; use {OWNED_BINDINGS[name]}")
    if name == "TRAIN_STEPS" and steps is not None:
      raise ValueError(f"{flag} and --steps {steps}: give one of them")
  return list(flags)


# ---------------------------------------------------------------------------------------------
# Running the cells.

# (python's arguments: the script then its flags, log path, echo for progress lines) -> exit status
Runner = Callable[[Sequence[str], str, Callable[[str], None]], int]


def run_script(args: Sequence[str], log_path: str, echo: Callable[[str], None]) -> int:
  """`python *args` as a subprocess from the repository root, its console appended to the cell's log
  (buffered: sample.py's tqdm bar would otherwise split its lines)."""
  return run_logged(args, log_path, echo, lambda line: bool(ECHOED.match(line)), unbuffered=False)


class CellFailed(Exception):
  def __init__(self, message: str, status: int):
    super().__init__(message)
    self.status = status


def _read_json(path: str) -> dict | None:
  """The marker, or None when there is none (or a torn one: the cell then continues)."""
  try:
    return storage.read_json(path) if storage.exists(path) else None
  except json.JSONDecodeError:
    return None


def _phase(cell: Cell, args: Sequence[str], log_path: str, runner: Runner, note: Callable[..., None]) -> float:
  """One subprocess phase; its seconds, or CellFailed naming the cell, the script and the log's end."""
  start = time.monotonic()
  status = runner(args, log_path, lambda line: note(f"  {cell.name} | {line.strip()}"))
  if status != 0:
    tail = []
    if os.path.exists(log_path):
      with open(log_path, errors="replace") as f:
        tail = f.readlines()[-15:]
    raise CellFailed(f"cell {cell.name}: {args[0]} exited with status {status}; its log: {log_path}\n"
                     + "".join(tail), status)
  return time.monotonic() - start


def run_cell(cell: Cell, grid: Grid, test: Sequence[Problem], runner: Runner, prefix: str,
             note: Callable[..., None]) -> dict:
  """The four phases of one cell, then its done.json (returned)."""
  from evaluation.practical.score import score_predictions

  cell_dir = grid.cell_dir(cell)
  os.makedirs(cell_dir, exist_ok=True)
  seconds = {}
  train_log = os.path.join(cell_dir, "train.log")
  note(f"{prefix}: training, log {train_log}")
  seconds["train"] = _phase(cell, train_args(cell, grid), train_log, runner, note)
  prompts_path = os.path.join(cell_dir, "prompts.jsonl")
  storage.write_atomic(prompts_path, "".join(json.dumps(r) + "\n" for r in prompt_records(test, cell.variant)))
  sample_log = os.path.join(cell_dir, "sample.log")
  note(f"{prefix}: sampling {len(test)} test prompts x {grid.num_samples}, log {sample_log}")
  seconds["sample"] = _phase(cell, sample_args(cell, grid), sample_log, runner, note)
  predictions = os.path.join(cell_dir, "predictions.jsonl")
  note(f"{prefix}: scoring {predictions}")
  start = time.monotonic()
  try:
    metrics = score_predictions(predictions, {p.problem_id: p for p in test}, os.path.join(cell_dir, "score"),
                                grid.workers, labels=grid.labels)
  except (ValueError, OSError, RuntimeError) as error:  # OutputLocked is a RuntimeError
    raise CellFailed(f"cell {cell.name}: scoring {predictions} failed: {error}", 1) from None
  seconds["score"] = time.monotonic() - start
  marker = {"cell": cell.name, "train_fraction": cell.fraction, "seed": cell.seed, "prompt_variant": cell.variant,
            **grid.settings,
            "test_problems": len(test), "pass@1": metrics["overall"]["pass@1"],
            "unscored_predictions": len(metrics["unscored_predictions"]),
            "commands": {"train": ["python", *train_args(cell, grid)], "sample": ["python", *sample_args(cell, grid)]},
            "seconds": {k: round(v, 1) for k, v in seconds.items()}}
  storage.write_json(os.path.join(cell_dir, "done.json"), marker)
  return marker


def _changed(marker: Mapping, settings: Mapping) -> list[str]:
  then = lambda key: marker.get(key, LEGACY_SETTINGS.get(key))
  return [f"{key} {then(key)!r} then, {value!r} now" for key, value in settings.items() if then(key) != value]


def run_grid(cells: Sequence[Cell], grid: Grid, tests: Mapping[Cell, Sequence[Problem]], dry_run: bool = False,
             runner: Runner = run_script) -> int:
  """Runs the unfinished cells in order (dry run: prints their commands); returns an exit status."""
  note = (lambda *a: print(*a, file=sys.stderr)) if dry_run else (lambda *a: print(*a, flush=True))
  markers = {cell: _read_json(os.path.join(grid.cell_dir(cell), "done.json")) for cell in cells}
  start, took = time.monotonic(), []
  for i, cell in enumerate(cells, 1):
    prefix = f"[cell {i}/{len(cells)}] {cell.name}"
    if markers[cell] is not None:
      changed = _changed(markers[cell], grid.settings)
      note(f"{prefix}: finished earlier, not rerun" + (
          f" (with other settings: {'; '.join(changed)}; delete its done.json to rerun it)" if changed else ""))
      continue
    if dry_run:
      for command in dry_run_commands(cell, grid):
        print(shlex.join(command))
      continue
    remaining = sum(markers[c] is None for c in cells[i - 1:])
    eta = duration(remaining * sum(took) / len(took)) if took else "?"
    note(f"{prefix}: train fraction {cell.fraction:g}, split seed {cell.seed}, {len(tests[cell])} test problems  "
         f"(elapsed {duration(time.monotonic() - start)}, ETA {eta})")
    cell_start = time.monotonic()
    try:
      marker = run_cell(cell, grid, tests[cell], runner, prefix, note)
    except CellFailed as failure:
      print(f"error: {failure}", file=sys.stderr, flush=True)
      print(f"finished cells are kept; rerun the same command to continue from {cell.name}", file=sys.stderr)
      return failure.status
    took.append(time.monotonic() - cell_start)
    note(f"{prefix}: done in {duration(took[-1])}: pass@1 {marker['pass@1']:.1f}%")
  todo = sum(m is None for m in markers.values())
  note(f"{todo} of {len(cells)} cells {'to run' if dry_run else 'run'}; elapsed {duration(time.monotonic() - start)}")
  return 0


# ---------------------------------------------------------------------------------------------
# The summary.


def collect(output: str, cells: Sequence[Cell]) -> tuple[dict[str, list[tuple[float, int, dict]]], list[Cell]]:
  """Per prompt variant (in the cells' order), (train_fraction, seed, metrics) of its finished cells
  (write_summary's input); and the unfinished cells."""
  found: dict[str, list[tuple[float, int, dict]]] = {}
  missing = []
  for cell in cells:
    cell_dir = os.path.join(output, cell.name)
    metrics = _read_json(os.path.join(cell_dir, "score", "metrics.json"))
    if _read_json(os.path.join(cell_dir, "done.json")) is None or metrics is None:
      missing.append(cell)
    else:
      overall = dict(metrics["overall"], **held_out_losses(os.path.join(cell_dir, "run", "metrics.jsonl")))
      found.setdefault(cell.variant, []).append((cell.fraction, cell.seed, dict(metrics, overall=overall)))
  return found, missing


def held_out_losses(metrics_path: str) -> dict[str, float]:
  """The loss on the test problems train.py logged before its first step and at its last (the
  fine-tuning's validation = test split), where the run logged them."""
  key = f"validation/{TASK_NAME}"
  losses = {}
  if os.path.exists(metrics_path):
    with open(metrics_path) as f:
      for line in f:
        try:
          record = json.loads(line)
        except ValueError:
          continue  # a torn last line of a killed run
        if key in record:
          losses[record["step"]] = record[key]
  if not losses or min(losses) != 0:
    return {}
  return {"held_out_loss_start": losses[0], "held_out_loss_end": losses[max(losses)]}


def report(output: str, cells: Sequence[Cell]) -> int:
  """Writes the summary of each prompt variant's finished cells (the plain prompt's in `output`, another's
  in output/{variant}) and, with more than one variant, their comparison; prints the tables; 1 when no
  cell has finished."""
  from evaluation.practical.score import write_summary, write_variant_summary

  found, missing = collect(output, cells)
  if not found:
    print(f"error: no finished cell (with done.json and score/metrics.json) under {output}", file=sys.stderr)
    return 1
  summaries, written = {}, []
  for variant, variant_cells in found.items():
    folder = output if variant == PLAIN else os.path.join(output, variant)
    summaries[variant] = write_summary(variant_cells, folder)
    if len(found) > 1:
      print(f"prompt variant {variant}:\n")
    print(storage.read_text(os.path.join(folder, "summary.md")))
    written += [os.path.join(folder, n) for n in ("summary.md", "summary.json", "pass_at_1_by_category.png")]
  if len(found) > 1:
    write_variant_summary(summaries, output)
    print(storage.read_text(os.path.join(output, "prompt_variants.md")))
    written += [os.path.join(output, n) for n in ("prompt_variants.md", "prompt_variants.json")]
  if missing:
    print(f"not finished (left out): {', '.join(c.name for c in missing)}")
  print("wrote " + ", ".join(written))
  return 0


# ---------------------------------------------------------------------------------------------
# Command line.


def _list(kind: type) -> Callable[[str], list]:
  def parse(value: str) -> list:
    try:
      return [kind(v) for v in value.split(",") if v.strip()]
    except ValueError:
      raise argparse.ArgumentTypeError(f"expected comma-separated {kind.__name__}s, got {value!r}") from None

  return parse


def run_gin_path(value: str) -> str:
  """A gin file relative to the repository root (or absolute), or a name in gin_configs/runs/."""
  for candidate in (value, f"{RUNS_DIR}/{value}", f"{RUNS_DIR}/{value}.gin"):
    if os.path.isfile(os.path.join(ROOT, candidate)):
      return candidate
  raise argparse.ArgumentTypeError(f"{value}: no such gin file (from {ROOT}, or in {RUNS_DIR}/)")


def build_parser() -> argparse.ArgumentParser:
  p = argparse.ArgumentParser(prog="python -m experiments.finetune_grid", description=__doc__,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
  p.add_argument("--pretrained", default=None, help="PRETRAINED_DIR: a train.py MODEL_DIR (required to run cells)")
  p.add_argument("--output", required=True, help="GRID_DIR: a folder per cell, and the summary")
  p.add_argument("--dataset", default=None, help="practical tasks JSON or JSONL (default: the small in-repo set)")
  p.add_argument("--fractions", type=_list(float), default=list(DEFAULT_FRACTIONS), help="train fractions")
  p.add_argument("--seeds", type=_list(int), default=list(DEFAULT_SEEDS), help="split seeds")
  p.add_argument("--prompt_variants", type=_list(str), default=[PLAIN],
                 help=f"prompt variants, one more axis of the grid: {', '.join(PROMPT_VARIANTS)} (default: plain)")
  p.add_argument("--labels", choices=LABEL_SOURCES, default=None,
                 help="categories to score: the dataset's, or derived from the references by the paper's rules "
                      "(data/practical_labels.py); default: the dataset's when it has any, else derived")
  p.add_argument("--run_gin", type=run_gin_path, default=DEFAULT_RUN_GIN,
                 help="finetune.gin (default), finetune_lora.gin or codeinsight_lora.gin, or a path")
  p.add_argument("--steps", type=int, default=None, help="TRAIN_STEPS (default: the run gin's)")
  p.add_argument("--num_samples", type=int, default=1)
  p.add_argument("--temperature", type=float, default=0.0)
  p.add_argument("--max_decode_length", type=int, default=256)
  p.add_argument("--sample_batch_size", type=int, default=64)
  p.add_argument("--truncate_prompts", action="store_true",
                 help="sample.py keeps the last tokens of a prompt that does not fit (counted in each cell's "
                      "predictions.jsonl.summary.json) instead of refusing it")
  p.add_argument("--workers", type=int, default=None, help="scoring sandboxes at a time (default: one per CPU)")
  p.add_argument("--dry_run", action="store_true", help="print the commands of the unfinished cells")
  p.add_argument("--collect_only", action="store_true", help="run nothing; write the summary")
  return p


def main(argv: Sequence[str] | None = None, runner: Runner = run_script) -> int:
  p = build_parser()
  args, rest = p.parse_known_args(argv)
  try:
    bindings = parse_bindings(rest, args.steps)
    cells = make_grid(args.fractions, args.seeds, args.prompt_variants)
  except ValueError as error:
    p.error(str(error))
  if storage.is_url(args.output):
    p.error(f"--output {args.output}: the cells write their logs locally; give a local folder")
  output = os.path.abspath(args.output)
  if not args.collect_only:
    if not args.pretrained:
      p.error("--pretrained is required to run cells (or pass --collect_only)")
    if not storage.is_url(args.pretrained) and not os.path.isdir(args.pretrained):
      p.error(f"--pretrained {args.pretrained}: no such folder")
    if args.workers is not None and args.workers < 1:
      p.error(f"--workers must be at least 1, got {args.workers}")
    dataset = args.dataset and storage.resolve(args.dataset)
    skipped: list[str] = []
    try:  # every split before any training: a fraction that leaves a split empty fails now, not at cell 7
      problems, labels = with_labels(load_problems(dataset or SMALL_DATASET, skipped), args.labels)
      tests = {cell: split_problems(problems, cell.fraction, cell.seed)[1] for cell in cells}
    except (ValueError, OSError) as error:
      p.error(f"--dataset {dataset or SMALL_DATASET}: {error}")
    if skipped:  # each cell's train.py prints it again, in its log
      print(skipped_warning(dataset or SMALL_DATASET, skipped), file=sys.stderr)
    grid = Grid(output, storage.resolve(args.pretrained), dataset, args.run_gin, args.steps, tuple(bindings),
                args.num_samples, args.temperature, args.max_decode_length, args.sample_batch_size, args.workers,
                labels, args.truncate_prompts)
    status = run_grid(cells, grid, tests, args.dry_run, runner)
    if status or args.dry_run:
      return status
  return report(output, cells)


if __name__ == "__main__":
  sys.exit(main())
