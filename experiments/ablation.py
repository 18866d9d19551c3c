"""The paper's ablation: every model size x data mixture trained, then compared per language.

  python -m experiments.ablation --sizes tiny,mini --mixtures natural,unimax_1,unimax_2 --corpus CORPUS_DIR \
      --steps 1000 --output ABL_DIR [--repeat mini:natural] [--dry_run] [--gin.BATCH_SIZE=16 ...]
  python -m experiments.ablation --launcher tpu --zone us-central2-b --corpus gs://BUCKET/corpus \
      --output gs://BUCKET/ablation [--tpu_name codelm-{cell}]
  python -m experiments.ablation --collect_only --output ABL_DIR [--sizes ... --mixtures ...]

Each cell is one train.py run (runs/ablation.gin locally, runs/pretrain.gin on TPU, then models/<size>.gin
and mixtures/<mixture>.gin) with MODEL_DIR = ABL_DIR/<size>_<mixture> and its console in train.log there.
Locally the cells train one after another; a cell with done.json (or a final checkpoint and a validation
record at the last step) is not rerun, a half-finished one resumes from its checkpoints. `--launcher tpu`
only prints one tpu/launch.py command per cell (default grid: the paper's 1b/2b/4b x natural, unimax_1..4);
when those runs finish, --collect_only --output gs://BUCKET/ablation reads their metrics from the bucket.
`--repeat SIZE:MIXTURE` trains a second copy of a cell with another train.seed, so the table shows which
differences are seed noise. Extra --gin.NAME=VALUE flags go to every cell's train.py.

Outputs in ABL_DIR: results.csv and results.md (per-language validation loss of the last eval record of
each cell, high- and low-resource means, pass@k from <cell>/scores/metrics.json where predictions were
scored; % change against Natural per size; the seed spread), and two validation-loss figures in the
layout of the paper's Figures 5 and 6 (not the paper's measure): fig5_mean_loss.png (mean loss over
high- and low-resource languages per size and mixture) and fig6_change_vs_natural.png (% change of
loss against Natural per language, per size). Where cells were scored (<cell>/scores/[DATASET/]metrics.json),
experiments.paper_results adds the paper's own: fig5_passk.png, fig6_passk_relative_change.png and
paper_tables.md (pass@100 for generation, pass@25 for translation; `--k humaneval=1` for a grid
sampled with fewer samples than that).
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import io
import json
import math
import os
import re
import shlex
import sys
import time
from typing import Callable, Mapping, Sequence

import storage
from data.languages import BY_NAME, HIGH_RESOURCE, LANGUAGES, LOW_RESOURCE, Language
from evaluation.languages import NOT_EVALUATED
from experiments import paper_results
from experiments.logged_runs import duration, run_logged

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GIN_DIR = "gin_configs"  # relative to ROOT, where train.py runs
RUN_GIN = {"local": f"{GIN_DIR}/runs/ablation.gin", "tpu": f"{GIN_DIR}/runs/pretrain.gin"}
DEFAULT_SIZES = {"local": ("tiny", "mini"), "tpu": ("1b", "2b", "4b")}
NATURAL = "natural"
# Bound per cell by the runner; a --gin flag setting one would silently make every cell the same run.
OWNED_BINDINGS = {"MODEL_DIR": "--output", "CORPUS_DIR": "--corpus", "TRAIN_STEPS": "--steps",
                  "MODEL_SIZE": "--sizes", "MIXTURE_OR_TASK_NAME": "--mixtures"}
ECHOED = ("step ", "  validation", "resumed from")  # train.py's progress lines, echoed under the cell's name

# ---------------------------------------------------------------------------------------------
# The grid.


@dataclasses.dataclass(frozen=True)
class Cell:
  size: str
  mixture: str
  seed: int = 0  # train.seed
  repeat: bool = False  # a second copy of a cell, to measure seed noise

  @property
  def name(self) -> str:
    return f"{self.size}_{self.mixture}" + (f"_seed{self.seed}" if self.repeat else "")


def available(kind: str) -> list[str]:
  """The sizes ("models") or mixtures the gin files offer: what the runner can train."""
  folder = os.path.join(ROOT, GIN_DIR, kind)
  return sorted(f[:-len(".gin")] for f in os.listdir(folder) if f.endswith(".gin"))


def default_steps(size: str) -> int:
  """TRAIN_STEPS of models/<size>.gin (the paper's 38k / 77k / 190k for 1b / 2b / 4b)."""
  with open(os.path.join(ROOT, GIN_DIR, "models", f"{size}.gin")) as f:
    found = re.search(r"^TRAIN_STEPS\s*=\s*(\d+)", f.read(), re.MULTILINE)
  if not found:
    raise ValueError(f"{GIN_DIR}/models/{size}.gin sets no TRAIN_STEPS; pass --steps")
  return int(found.group(1))


def make_grid(sizes: Sequence[str], mixtures: Sequence[str], repeats: Sequence[str], seed: int = 0) -> list[Cell]:
  """sizes x mixtures, then one repeat per `SIZE:MIXTURE` with the next seed."""
  cells = [Cell(size, mixture, seed) for size in sizes for mixture in mixtures]
  if not cells:
    raise ValueError("the grid is empty: give at least one size and one mixture")
  for spec in repeats:
    size, _, mixture = spec.partition(":")
    if Cell(size, mixture, seed) not in cells:
      raise ValueError(f"--repeat {spec!r}: expected SIZE:MIXTURE of a cell in the grid, "
                       f"e.g. {cells[0].size}:{cells[0].mixture}")
    cells.append(Cell(size, mixture, seed + 1, repeat=True))
  return cells


def train_args(cell: Cell, run_gin: str, model_dir: str, corpus_dir: str, steps: int | None,
               bindings: Sequence[str]) -> list[str]:
  """train.py's flags for one cell; steps None keeps the model file's TRAIN_STEPS."""
  args = [f"--gin_file={run_gin}", f"--gin_file={GIN_DIR}/models/{cell.size}.gin",
          f"--gin_file={GIN_DIR}/mixtures/{cell.mixture}.gin",
          f"--gin.MODEL_DIR={model_dir!r}", f"--gin.CORPUS_DIR={corpus_dir!r}"]
  args += [f"--gin.TRAIN_STEPS={steps}"] if steps is not None else []
  args += list(bindings)
  return args + ([f"--gin.train.seed={cell.seed}"] if cell.repeat else [])  # last: wins over a bound seed


def parse_bindings(flags: Sequence[str]) -> tuple[list[str], int]:
  """The --gin.NAME=VALUE flags passed through to train.py, and the seed they bind (0 unless train.seed)."""
  seed = 0
  for flag in flags:
    if not flag.startswith("--gin.") or "=" not in flag:
      raise ValueError(f"unrecognised flag {flag!r}: extra flags must be --gin.NAME=VALUE (passed to train.py)")
    name, value = flag[len("--gin."):].split("=", 1)
    if name.strip() in OWNED_BINDINGS:
      raise ValueError(f"{flag}: the runner binds {name} per cell; use {OWNED_BINDINGS[name.strip()]}")
    if name.strip() == "train.seed":
      seed = int(value)
  return list(flags), seed


# ---------------------------------------------------------------------------------------------
# Training the cells.


def _read_json(path: str) -> dict | None:
  if not storage.exists(path):
    return None
  try:
    return storage.read_json(path)
  except json.JSONDecodeError:
    return None


def finished(cell_dir: str, steps: int) -> bool:
  """done.json of a run to the same step count, or (a run killed before its marker, or trained elsewhere)
  the final checkpoint and a validation record at the last step."""
  marker = _read_json(storage.join(cell_dir, "done.json"))
  if marker is not None:
    return marker.get("steps") == steps
  step, _ = last_validation(storage.join(cell_dir, "metrics.jsonl"))
  from training.run_info import RUN_INFO, read_checkpoint_dir

  checkpoints = (read_checkpoint_dir(cell_dir) if storage.exists(storage.join(cell_dir, RUN_INFO))
                 else storage.join(cell_dir, "checkpoints"))  # train.checkpoint_dir may have moved them
  return step == steps and storage.isdir(storage.join(checkpoints, str(steps)))


# (train.py args, log path, echo for progress lines) -> exit status
Runner = Callable[[Sequence[str], str, Callable[[str], None]], int]


def run_train(args: Sequence[str], log_path: str, echo: Callable[[str], None]) -> int:
  """train.py as a subprocess from the repository root, its console appended to the cell's log."""
  return run_logged(["train.py", *args], log_path, echo, lambda line: line.startswith(ECHOED))


def _eta(remaining: Sequence[Cell], took: Mapping[Cell, float]) -> float | None:
  """Remaining cells at the mean time of the cells of their size trained so far (else of all of them)."""
  if not took:
    return None
  overall = sum(took.values()) / len(took)
  total = 0.0
  for cell in remaining:
    same = [t for c, t in took.items() if c.size == cell.size]
    total += sum(same) / len(same) if same else overall
  return total


def train_locally(cells: Sequence[Cell], output: str, corpus: str, steps: int | None, run_gin: str,
                  bindings: Sequence[str], dry_run: bool = False, runner: Runner = run_train) -> int:
  """Trains the unfinished cells in order (dry run: prints their train.py commands); returns an exit status."""
  note = (lambda *a: print(*a, file=sys.stderr)) if dry_run else (lambda *a: print(*a, flush=True))
  plan = []
  for cell in cells:
    cell_steps = steps if steps is not None else default_steps(cell.size)
    model_dir = os.path.join(output, cell.name)
    args = train_args(cell, run_gin, model_dir, corpus, cell_steps, bindings)
    plan.append((cell, cell_steps, model_dir, args, finished(model_dir, cell_steps)))
  start, took = time.monotonic(), {}
  for i, (cell, cell_steps, model_dir, args, done) in enumerate(plan, 1):
    prefix = f"[cell {i}/{len(plan)}] {cell.name}"
    if done:
      note(f"{prefix}: finished earlier ({cell_steps} steps), not rerun")
      continue
    if dry_run:
      print(shlex.join(["python", "train.py", *args]))
      continue
    remaining = [c for c, *_, d in plan[i - 1:] if not d]
    log_path = os.path.join(model_dir, "train.log")
    note(f"{prefix}: training {cell_steps} steps, log {log_path}  "
         f"(elapsed {duration(time.monotonic() - start)}, ETA {duration(_eta(remaining, took))})")
    os.makedirs(model_dir, exist_ok=True)
    cell_start = time.monotonic()
    status = runner(args, log_path, lambda line: note(f"  {cell.name} | {line.strip()}"))
    if status != 0:
      tail = []
      if os.path.exists(log_path):
        with open(log_path) as f:
          tail = f.readlines()[-15:]
      note(f"{prefix}: train.py exited with status {status}; the end of {log_path}:\n" + "".join(tail))
      return status
    took[cell] = time.monotonic() - cell_start
    storage.write_json(os.path.join(model_dir, "done.json"),
                       {"steps": cell_steps, "seconds": took[cell], "train_args": args})
    note(f"{prefix}: done in {duration(took[cell])}")
  todo = sum(not done for *_, done in plan)
  note(f"{todo} of {len(plan)} cells {'to train' if dry_run else 'trained'}; "
       f"elapsed {duration(time.monotonic() - start)}")
  return 0


def tpu_commands(cells: Sequence[Cell], output: str, corpus: str, steps: int | None, run_gin: str,
                 bindings: Sequence[str], tpu_name: str, zone: str, project: str | None) -> list[list[str]]:
  """One tpu/launch.py command per cell. tpu_name may name {size}, {mixture} and {cell} (with '-' for '_',
  as TPU names allow): one pod per cell by default; a fixed name runs the cells on one pod, one at a time
  (launch.py refuses to start a second train.py while one runs)."""
  from tpu import common

  common.zone(zone)
  if project:
    common.project(project)
  commands = []
  for cell in cells:
    name = tpu_name.format(size=cell.size, mixture=cell.mixture, cell=cell.name).replace("_", "-")
    common.tpu_name(name)  # raises argparse.ArgumentTypeError naming the problem
    launch = ["python", "tpu/launch.py", "--name", name, "--zone", zone, *(["--project", project] if project else [])]
    model_dir = f"{output.rstrip('/')}/{cell.name}"
    commands.append(launch + ["--run_name", cell.name, "--",
                              *train_args(cell, run_gin, model_dir, corpus, steps, bindings)])
  return commands


# ---------------------------------------------------------------------------------------------
# Collecting results.


def last_validation(metrics_path: str) -> tuple[int | None, dict[str, float]]:
  """(step, {language: loss}) of the last record with validation losses in a metrics.jsonl."""
  step, losses = None, {}
  if not storage.exists(metrics_path):
    return step, losses
  for _, record in storage.read_jsonl(metrics_path, warn=lambda message: None):  # a torn last line: a killed run
    found = {k.split("/", 1)[1]: float(v) for k, v in record.items() if k.startswith("validation/")}
    if found:
      step, losses = int(record["step"]), found
  return step, losses


def pass_at_k(scores_path: str) -> dict[str, float]:
  """pass@k from evaluation.score's metrics.json: top-level `pass@K` keys, and `OUTER/pass@K` for one
  level of nesting (per language or per dataset)."""
  scores = _read_json(scores_path) or {}
  found = {}
  for key, value in scores.items():
    if key.startswith("pass@") and isinstance(value, (int, float)):
      found[key] = float(value)
    elif isinstance(value, dict):
      found.update({f"{key}/{k}": float(v) for k, v in value.items()
                    if k.startswith("pass@") and isinstance(v, (int, float))})
  return found


@dataclasses.dataclass(frozen=True)
class Result:
  cell: Cell
  step: int
  losses: dict[str, float]  # language name -> validation loss (nats per target token)
  passk: dict[str, float]


def collect(output: str, cells: Sequence[Cell]) -> tuple[list[Result], list[Cell]]:
  """The results of the cells that have a validation record, and the cells that have none."""
  results, missing = [], []
  for cell in cells:
    step, losses = last_validation(storage.join(output, cell.name, "metrics.jsonl"))
    if step is None:
      missing.append(cell)
    else:
      results.append(Result(cell, step, losses, pass_at_k(storage.join(output, cell.name, "scores", "metrics.json"))))
  return results, missing


def group_mean(values: Mapping[str, float], group: Sequence[Language]) -> float:
  """Mean over the languages of the group that have a value (nan when none)."""
  present = [values[l.name] for l in group if l.name in values and not math.isnan(values[l.name])]
  return sum(present) / len(present) if present else math.nan


def languages_of(results: Sequence[Result]) -> list[Language]:
  """Languages with a validation loss in any cell, in the paper's order (high- to low-resource)."""
  return [l for l in LANGUAGES if any(l.name in r.losses for r in results)]


def _against_natural(results: Sequence[Result], change: Callable[[Result, Result], dict[str, float]],
                     keep_empty: bool = True) -> dict[str, dict[str, dict[str, float]]]:
  """size -> mixture -> `change(cell, natural)` for each first-copy cell with a Natural cell of its size
  (repeats measure noise)."""
  base = {(r.cell.size, r.cell.mixture): r for r in results if not r.cell.repeat}
  changes: dict[str, dict[str, dict[str, float]]] = {}
  for (size, mixture), result in base.items():
    natural = base.get((size, NATURAL))
    if mixture == NATURAL or natural is None:
      continue
    values = change(result, natural)
    if values or keep_empty:
      changes.setdefault(size, {})[mixture] = values
  return changes


def change_vs_natural(results: Sequence[Result]) -> dict[str, dict[str, dict[str, float]]]:
  """size -> mixture -> language -> % change of validation loss against the same size's Natural cell
  (negative: lower loss than Natural)."""
  return _against_natural(results, lambda result, natural: {
      language: 100 * (loss - natural.losses[language]) / natural.losses[language]
      for language, loss in result.losses.items() if language in natural.losses})


def passk_change_vs_natural(results: Sequence[Result], k: str = "pass@1"
                            ) -> dict[str, dict[str, dict[str, float]]]:
  """size -> mixture -> language -> change of the language's pass@k against the same size's Natural
  cell, in percentage points (positive: more problems solved), from evaluation.score's per-language
  metrics ("LANGUAGE/pass@K"). Languages scored in both cells only."""
  def change(result: Result, natural: Result) -> dict[str, float]:
    keys = {language.name: f"{language.name}/{k}" for language in LANGUAGES}
    return {name: 100 * (result.passk[key] - natural.passk[key]) for name, key in keys.items()
            if key in result.passk and key in natural.passk}

  return _against_natural(results, change, keep_empty=False)


def seed_spread(results: Sequence[Result]) -> dict[str, dict[str, float]]:
  """Repeated cell -> language -> |loss(repeat) - loss(first)|, with "high_resource_mean" and
  "low_resource_mean" (the difference of the group means) and "mean" (mean over languages)."""
  first = {(r.cell.size, r.cell.mixture): r for r in results if not r.cell.repeat}
  spread = {}
  for result in results:
    other = first.get((result.cell.size, result.cell.mixture))
    if not result.cell.repeat or other is None:
      continue
    diffs = {k: abs(v - other.losses[k]) for k, v in result.losses.items() if k in other.losses}
    spread[result.cell.name] = {
        **diffs, "mean": sum(diffs.values()) / len(diffs) if diffs else math.nan,
        "high_resource_mean": abs(group_mean(result.losses, HIGH_RESOURCE) - group_mean(other.losses, HIGH_RESOURCE)),
        "low_resource_mean": abs(group_mean(result.losses, LOW_RESOURCE) - group_mean(other.losses, LOW_RESOURCE))}
  return spread


# ---------------------------------------------------------------------------------------------
# Tables.


def table_rows(results: Sequence[Result]) -> tuple[list[str], list[dict]]:
  """(columns, rows) of results.csv: one row per cell."""
  languages = languages_of(results)
  passk = sorted({k for r in results for k in r.passk})
  columns = (["cell", "size", "mixture", "seed", "step"] + [f"validation/{l.name}" for l in languages]
             + ["validation/high_resource_mean", "validation/low_resource_mean"] + passk)
  rows = []
  for r in results:
    row = {"cell": r.cell.name, "size": r.cell.size, "mixture": r.cell.mixture, "seed": r.cell.seed, "step": r.step}
    row.update({f"validation/{l.name}": r.losses.get(l.name, math.nan) for l in languages})
    row["validation/high_resource_mean"] = group_mean(r.losses, HIGH_RESOURCE)
    row["validation/low_resource_mean"] = group_mean(r.losses, LOW_RESOURCE)
    row.update({k: r.passk.get(k, math.nan) for k in passk})
    rows.append(row)
  return columns, rows


def write_csv(path: str, columns: Sequence[str], rows: Sequence[Mapping]) -> None:
  """Missing values are empty fields."""
  text = io.StringIO(newline="")
  writer = csv.DictWriter(text, columns)
  writer.writeheader()
  for row in rows:
    writer.writerow({k: "" if isinstance(v, float) and math.isnan(v) else v for k, v in row.items()})
  storage.write_atomic(path, text.getvalue())


def _markdown_table(header: Sequence[str], lines: Sequence[Sequence[str]]) -> list[str]:
  return (["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
          + ["| " + " | ".join(line) + " |" for line in lines])


def _number(value: float, fmt: str = "{:.3f}") -> str:
  return "–" if value is None or math.isnan(value) else fmt.format(value)


def markdown(results: Sequence[Result], missing: Sequence[Cell]) -> str:
  """results.md: the per-cell table, % change against Natural per size, the seed spread, and notes."""
  languages = languages_of(results)
  names = [l.display_name for l in languages]
  columns, rows = table_rows(results)
  passk = [c for c in columns if c.startswith("pass@") or "/pass@" in c]
  out = ["# Ablation: validation loss per language", "",
         "Mean cross-entropy (nats per target token) on each language's validation split, from the last "
         "eval record of each cell (lower is better): the CPU-scale proxy for the paper's pass@k, which "
         "models this small barely move. HR / LR: mean over the high- / low-resource languages present. "
         "LANGUAGE/pass@K columns: execution results where a cell's predictions were scored.", ""]
  out += _markdown_table(
      ["cell", "step", *names, "HR mean", "LR mean", *passk],
      [[row["cell"], str(row["step"]), *(_number(row[f"validation/{l.name}"]) for l in languages),
        _number(row["validation/high_resource_mean"]), _number(row["validation/low_resource_mean"]),
        *(_number(row[k]) for k in passk)] for row in rows])
  absent = [l.display_name for l in LANGUAGES if l not in languages]
  if absent:
    out += ["", f"No validation data in the corpus (left out): {', '.join(absent)}."]
  if missing:
    out += ["", f"No validation record yet (left out): {', '.join(c.name for c in missing)}."]

  changes = change_vs_natural(results)
  if changes:
    out += ["", "## % change of validation loss against Natural", "",
            "100 · (loss − Natural) / Natural per language, same size; negative: lower loss than Natural. "
            "HR / LR: mean of the languages' changes (as the paper's Figure 6).", ""]
    for size, per_mixture in changes.items():
      out += [f"### {size}", ""]
      percent = "{:+.1f}%"
      out += _markdown_table(["mixture", *names, "HR mean", "LR mean"], [
          [mixture, *(_number(change.get(l.name, math.nan), percent) for l in languages),
           _number(group_mean(change, HIGH_RESOURCE), percent), _number(group_mean(change, LOW_RESOURCE), percent)]
          for mixture, change in per_mixture.items()])
      out.append("")
  passk_changes = passk_change_vs_natural(results)
  if passk_changes:
    scored = [l for l in LANGUAGES if any(l.name in c for m in passk_changes.values() for c in m.values())]
    out += ["", "## Change of pass@1 against Natural (execution, per language)", "",
            "pass@1(mixture) − pass@1(Natural) in percentage points per language, from `python -m "
            "evaluation.score` on each cell's predictions (`scores/metrics.json`); positive: more "
            "problems solved (points, not the paper's relative change: see paper_tables.md). Not evaluated: "
            + "; ".join(f"{BY_NAME[n].display_name} ({why})" for n, why in NOT_EVALUATED.items()) + ".", ""]
    for size, per_mixture in passk_changes.items():
      out += [f"### {size}", ""]
      out += _markdown_table(["mixture", *(l.display_name for l in scored)], [
          [mixture, *(_number(change.get(l.name, math.nan), "{:+.1f}") for l in scored)]
          for mixture, change in per_mixture.items()])
      out.append("")
  spread = seed_spread(results)
  if spread:
    seeds = {r.cell.name: f"{r.cell.seed - 1} vs {r.cell.seed}" for r in results if r.cell.repeat}
    out += ["## Seed spread", "",
            "Absolute difference of validation loss between the two seeds of a repeated cell: differences "
            "between mixtures no larger than this are within seed noise.", ""]
    out += _markdown_table(["cell", "seeds", *names, "HR mean", "LR mean", "mean over languages"], [
        [cell, seeds[cell], *(_number(diffs.get(l.name, math.nan), "{:.4f}") for l in languages),
         _number(diffs["high_resource_mean"], "{:.4f}"), _number(diffs["low_resource_mean"], "{:.4f}"),
         _number(diffs["mean"], "{:.4f}")] for cell, diffs in spread.items()])
  return "\n".join(out).rstrip() + "\n"


# ---------------------------------------------------------------------------------------------
# Figures in the layout of the paper's Figures 5 and 6, with validation loss (paper_results.py has the paper's).


def _label(mixture: str) -> str:
  return "Natural" if mixture == NATURAL else mixture.replace("unimax_", "UniMax N=")


def _color(mixture: str) -> str:
  """One colour per mixture in both figures (Natural first: C0)."""
  return f"C{available('mixtures').index(mixture) % 10}"


def plot_mean_loss(results: Sequence[Result], sizes: Sequence[str], mixtures: Sequence[str], path: str) -> None:
  """Figure 5: mean validation loss over the high- and the low-resource languages, x = size, a line per
  mixture; repeats as crosses."""
  import matplotlib

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  fig, axes = plt.subplots(1, 2, figsize=(10, 4))
  for ax, (title, group) in zip(axes, (("High-resource languages", HIGH_RESOURCE),
                                       ("Low-resource languages", LOW_RESOURCE))):
    drawn = False
    for mixture in mixtures:
      for repeat in (False, True):
        points = [(sizes.index(r.cell.size), group_mean(r.losses, group)) for r in results
                  if r.cell.mixture == mixture and r.cell.repeat == repeat and r.cell.size in sizes]
        points = sorted(p for p in points if not math.isnan(p[1]))
        if not points:
          continue
        drawn = True
        if repeat:
          ax.scatter(*zip(*points), marker="x", color=_color(mixture), label=f"{_label(mixture)}, second seed")
        else:
          ax.plot(*zip(*points), marker="o", color=_color(mixture), label=_label(mixture))
    if not drawn:
      ax.text(0.5, 0.5, "no validation data", transform=ax.transAxes, ha="center", va="center")
    ax.set_xticks(range(len(sizes)), sizes)
    ax.set_xlim(-0.5, len(sizes) - 0.5)
    ax.set_xlabel("model size")
    ax.set_ylabel("mean validation loss (nats / token)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
  handles, labels = axes[0].get_legend_handles_labels()
  if not handles:
    handles, labels = axes[1].get_legend_handles_labels()
  fig.legend(handles, labels, loc="lower center", ncol=min(len(labels), 5) or 1, fontsize=8, frameon=False)
  fig.tight_layout(rect=(0, 0.1, 1, 1))
  storage.save_figure(fig, path, dpi=120)
  plt.close(fig)


def plot_change(results: Sequence[Result], sizes: Sequence[str], path: str) -> bool:
  """Figure 6: % change of validation loss against Natural per language (high- to low-resource), a bar
  per mixture, a panel per size; grey: ± the seed spread where a cell of that size was repeated.
  Returns False (and draws nothing) when no size has Natural and another mixture."""
  changes = change_vs_natural(results)
  panels = [s for s in sizes if s in changes]
  if not panels:
    return False
  import matplotlib

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  languages = languages_of(results)
  first = {(r.cell.size, r.cell.mixture): r for r in results if not r.cell.repeat}
  spreads = seed_spread(results)
  fig, axes = plt.subplots(len(panels), 1, figsize=(max(7.0, 0.8 * len(languages) + 2), 3.2 * len(panels)),
                           squeeze=False)
  for ax, size in zip(axes[:, 0], panels):
    mixtures = list(changes[size])
    repeated = [r.cell for r in results if r.cell.repeat and r.cell.size == size and r.cell.name in spreads]
    if repeated:  # the spread of this size's first repeated cell, relative to its loss
      diffs, base = spreads[repeated[0].name], first[(size, repeated[0].mixture)].losses
      band = [100 * diffs[l.name] / base[l.name] if l.name in diffs else 0.0 for l in languages]
      ax.bar(range(len(languages)), [2 * b for b in band], 0.9, bottom=[-b for b in band], color="0.85",
             label="± seed spread")
    _bars_per_mixture(ax, changes[size], mixtures, languages)
    high = sum(1 for l in languages if l.high_resource)
    if 0 < high < len(languages):
      ax.axvline(high - 0.5, color="0.5", linestyle="--", linewidth=0.8)
    ax.set_xticks(range(len(languages)), [l.display_name for l in languages], rotation=30, ha="right")
    ax.set_ylabel("% change vs Natural")
    ax.set_title(f"{size}: validation loss against Natural (negative is better)")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=7, ncol=len(mixtures) + 1)
  fig.tight_layout()
  storage.save_figure(fig, path, dpi=120)
  plt.close(fig)
  return True


def _bars_per_mixture(ax, changes: Mapping[str, Mapping[str, float]], mixtures: Sequence[str],
                      languages: Sequence[Language]) -> None:
  """Figure 6's grouped bars: per language, one bar per mixture of its change against Natural."""
  width = 0.8 / len(mixtures)
  for j, mixture in enumerate(mixtures):
    offset = (j - (len(mixtures) - 1) / 2) * width
    ax.bar([i + offset for i in range(len(languages))], [changes[mixture].get(l.name, 0.0) for l in languages],
           width, color=_color(mixture), label=_label(mixture))
  ax.axhline(0, color="black", linewidth=0.8)


def report(output: str, cells: Sequence[Cell], sizes: Sequence[str], mixtures: Sequence[str],
           k_overrides: Mapping[str, int] | None = None) -> list[str]:
  """Writes results.csv, results.md and the figures into output (and the paper's figures and tables
  where cells were scored, experiments/paper_results.py); returns the paths written."""
  results, missing = collect(output, cells)
  if not results:
    raise FileNotFoundError(f"no cell under {output} has a validation record (train.eval_every > 0?)")
  columns, rows = table_rows(results)
  paths = [storage.join(output, name) for name in
           ("results.csv", "results.md", "fig5_mean_loss.png", "fig6_change_vs_natural.png")]
  write_csv(paths[0], columns, rows)
  storage.write_atomic(paths[1], markdown(results, missing))
  plot_mean_loss(results, sizes, mixtures, paths[2])
  if not plot_change(results, sizes, paths[3]):
    paths.pop()
  paths += paper_results.write(output, sizes, mixtures, k_overrides=k_overrides)
  return paths


# ---------------------------------------------------------------------------------------------
# Command line.


def _names(value: str) -> list[str]:
  return [v for v in value.split(",") if v]


def build_parser() -> argparse.ArgumentParser:
  p = argparse.ArgumentParser(prog="python -m experiments.ablation", description=__doc__,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
  p.add_argument("--sizes", type=_names, default=None, help="comma-separated (default: tiny,mini; tpu: 1b,2b,4b)")
  p.add_argument("--mixtures", type=_names, default=None, help="comma-separated (default: natural,unimax_1..4)")
  p.add_argument("--corpus", default=None, help="CORPUS_DIR with spm.model and cache/ (required to train)")
  p.add_argument("--steps", type=int, default=None, help="TRAIN_STEPS (default: each models/<size>.gin's)")
  p.add_argument("--output", required=True, help="ABL_DIR: a folder per cell, the tables and figures")
  p.add_argument("--launcher", choices=("local", "tpu"), default="local")
  p.add_argument("--run_gin", default=None, help="run policy (default: runs/ablation.gin; tpu: runs/pretrain.gin)")
  p.add_argument("--repeat", action="append", default=[], metavar="SIZE:MIXTURE",
                 help="train a second copy of this cell with the next train.seed (repeatable)")
  p.add_argument("--dry_run", action="store_true", help="print the train.py commands of unfinished cells")
  p.add_argument("--collect_only", action="store_true", help="train nothing; write tables and figures")
  p.add_argument("--tpu_name", default="codelm-{cell}", help="tpu: pod name; may use {size} {mixture} {cell}")
  p.add_argument("--zone", default=None, help="tpu: zone, e.g. us-central2-b")
  p.add_argument("--project", default=None, help="tpu: Google Cloud project")
  p.add_argument("--k", default=None, metavar="DATASET=K,...",
                 help="pass@k of the paper's figures per dataset (default: 100 generation, 25 translation)")
  return p


def main(argv: Sequence[str] | None = None, runner: Runner = run_train) -> int:
  p = build_parser()
  args, rest = p.parse_known_args(argv)
  try:
    bindings, seed = parse_bindings(rest)
  except ValueError as error:
    p.error(str(error))
  sizes = args.sizes or list(DEFAULT_SIZES[args.launcher])
  mixtures = args.mixtures or available("mixtures")
  for kind, names in (("models", sizes), ("mixtures", mixtures)):
    unknown = sorted(set(names) - set(available(kind)))
    if unknown:
      p.error(f"no {GIN_DIR}/{kind}/ file for {', '.join(unknown)}; choose from {', '.join(available(kind))}")
  try:
    cells = make_grid(sizes, mixtures, args.repeat, seed)
  except ValueError as error:
    p.error(str(error))
  run_gin = args.run_gin or RUN_GIN[args.launcher]
  try:
    ks = paper_results.parse_ks(args.k)
  except ValueError as error:
    p.error(str(error))

  if not args.collect_only:
    if not args.corpus:
      p.error("--corpus is required to train (or pass --collect_only)")
    if args.launcher == "tpu":
      if not args.zone:
        p.error("--launcher tpu needs --zone")
      try:
        commands = tpu_commands(cells, args.output, args.corpus, args.steps, run_gin, bindings, args.tpu_name,
                                args.zone, args.project)
      except argparse.ArgumentTypeError as error:
        p.error(str(error))
      if not args.output.startswith("gs://"):
        print(f"warning: --output {args.output} is not a gs:// path; every worker of a pod needs to see "
              "MODEL_DIR", file=sys.stderr)
      for command in commands:
        print(shlex.join(command))
      print(f"# {len(commands)} cells: run each command above (create and install the pods first, tpu/README.md); "
            f"when they finish, collect the tables and figures into {args.output} with "
            f"`python -m experiments.ablation --launcher tpu --collect_only --output {args.output}`", file=sys.stderr)
      return 0
    if storage.is_url(args.output):
      p.error(f"--output {args.output}: the local launcher writes its train.log files locally; give a local "
              "folder, or use --launcher tpu for a bucket")
    if not storage.isdir(args.corpus):
      p.error(f"--corpus {args.corpus}: no such folder")
    status = train_locally(cells, os.path.abspath(args.output), storage.resolve(args.corpus), args.steps, run_gin,
                           bindings, args.dry_run, runner)
    if status or args.dry_run:
      return status
  try:
    paths = report(args.output, cells, sizes, mixtures, ks)
  except FileNotFoundError as error:
    print(f"error: {error}", file=sys.stderr)
    return 1
  print(storage.read_text(paths[1]))
  print("wrote " + ", ".join(paths))
  return 0


if __name__ == "__main__":
  sys.exit(main())
