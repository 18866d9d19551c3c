"""The paper's ablation: every model size x data mixture trained, then compared per language.

  python -m experiments.ablation --sizes tiny,mini --mixtures natural,unimax_1,unimax_2 --corpus CORPUS_DIR \
      --steps 1000 --output ABL_DIR [--repeat mini:natural] [--dry_run] [--gin.BATCH_SIZE=16 ...]
  python -m experiments.ablation --launcher tpu --zone us-central2-b --corpus gs://BUCKET/corpus \
      --output gs://BUCKET/ablation [--tpu_name codelm-{cell}]
  python -m experiments.ablation --collect_only --output ABL_DIR [--sizes ... --mixtures ...]
  python -m experiments.ablation --sizes tiny --mixtures natural --objectives paper,fim --corpus CORPUS_DIR \
      --steps 1000 --output ABL_DIR

Each cell is one train.py run (runs/ablation.gin locally, runs/pretrain.gin on TPU, then models/<size>.gin
and mixtures/<mixture>.gin) with MODEL_DIR = ABL_DIR/<size>_<mixture> and its console in train.log there.
Locally the cells train one after another; a cell with done.json (or a final checkpoint and a validation
record at the last step) is not rerun, a half-finished one resumes from its checkpoints. `--launcher tpu`
only prints one tpu/launch.py command per cell (default grid: the paper's 1b/2b/4b x natural, unimax_1..4);
when those runs finish, --collect_only --output gs://BUCKET/ablation reads their metrics from the bucket.
`--repeat SIZE:MIXTURE` trains a second copy of a cell with another train.seed, so the table shows which
differences are seed noise. Extra --gin.NAME=VALUE flags go to every cell's train.py. `--objectives paper,fim` adds the objective axis:
each cell also trained with fill-in-the-middle (gin_configs/objectives/fim.gin) as <size>_<mixture>_fim,
compared in results.md's "Objective" section and fig_objective.png (HumanEval pass@1 from
<cell>/scores/humaneval/, infilling pass@1 from <cell>/scores/infilling/: experiments.score_grid
--datasets humaneval,infilling).

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
import os
import shlex
import sys
import time
from typing import Callable, Mapping, Sequence

import storage
from experiments import paper_results
# The grid and the results live in experiments/ablation_grid.py and experiments/ablation_results.py;
# their names are re-exported here, where the runner's have always been found.
from experiments.ablation_grid import (GIN_DIR, NATURAL, OBJECTIVE_GINS, OWNED_BINDINGS, PAPER, ROOT, Cell,
                                       available, default_steps, make_grid, parse_bindings, train_args)
from experiments.ablation_results import (Result, change_vs_natural, collect, last_validation, markdown,
                                          pass_at_k, passk_change_vs_natural, plot_change, plot_mean_loss,
                                          read_json_or_none, report, seed_spread, table_rows, write_csv)
from experiments.logged_runs import duration, run_logged
from tpu import common

RUN_GIN = {"local": f"{GIN_DIR}/runs/ablation.gin", "tpu": f"{GIN_DIR}/runs/pretrain.gin"}
DEFAULT_SIZES = {"local": ("tiny", "mini"), "tpu": ("1b", "2b", "4b")}
ECHOED = ("step ", "  validation", "resumed from")  # train.py's progress lines, echoed under the cell's name

# ---------------------------------------------------------------------------------------------
# Training the cells.


def finished(cell_dir: str, steps: int) -> bool:
  """done.json of a run to the same step count, or (a run killed before its marker, or trained elsewhere)
  the final checkpoint and a validation record at the last step."""
  marker = read_json_or_none(storage.join(cell_dir, "done.json"))
  if marker is not None:
    return marker.get("steps") == steps
  step, _ = last_validation(storage.join(cell_dir, "metrics.jsonl"))
  from training.run_info import RUN_INFO, read_checkpoint_dir  # here: it imports JAX (model.config)

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
# Command line.


def _names(value: str) -> list[str]:
  return [v for v in value.split(",") if v]


def build_parser() -> argparse.ArgumentParser:
  p = argparse.ArgumentParser(prog="python -m experiments.ablation", description=__doc__,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
  p.add_argument("--sizes", type=_names, default=None, help="comma-separated (default: tiny,mini; tpu: 1b,2b,4b)")
  p.add_argument("--mixtures", type=_names, default=None, help="comma-separated (default: natural,unimax_1..4)")
  p.add_argument("--objectives", type=_names, default=[PAPER],
                 help=f"comma-separated, of {', '.join(OBJECTIVE_GINS)} (default: paper; fim: + fill-in-the-middle)")
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
  p.add_argument("--passk_every", type=int, default=0, metavar="N",
                 help="pass@k of a HumanEval subset every N steps while each cell trains (train.passk, "
                      "docs/observability.md; 0: off)")
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
  if args.passk_every < 0:
    p.error(f"--passk_every must be 0 (off) or a number of steps, got {args.passk_every}")
  if args.passk_every:  # the training hook of training/passk_hook.py in every cell
    bindings += ["--gin.train.passk=@codelm.PasskConfig()", f"--gin.codelm.PasskConfig.every={args.passk_every}"]
  sizes = args.sizes or list(DEFAULT_SIZES[args.launcher])
  mixtures = args.mixtures or available("mixtures")
  for kind, names in (("models", sizes), ("mixtures", mixtures)):
    unknown = sorted(set(names) - set(available(kind)))
    if unknown:
      p.error(f"no {GIN_DIR}/{kind}/ file for {', '.join(unknown)}; choose from {', '.join(available(kind))}")
  try:
    cells = make_grid(sizes, mixtures, args.repeat, seed, args.objectives)
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
