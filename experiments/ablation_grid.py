"""The ablation's grid: cells of model size x data mixture (x objective), and each cell's train.py flags.

Sizes and mixtures are what gin_configs/models/ and gin_configs/mixtures/ offer; the objective is the
paper's mixture or it + fill-in-the-middle (gin_configs/objectives/fim.gin). experiments/ablation.py
trains the cells, experiments/ablation_results.py collects what they logged.
"""

from __future__ import annotations

import dataclasses
import os
import re
from typing import Sequence

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GIN_DIR = "gin_configs"  # relative to ROOT, where train.py runs
NATURAL = "natural"
# Bound per cell by the runner; a --gin flag setting one would silently make every cell the same run.
OWNED_BINDINGS = {"MODEL_DIR": "--output", "CORPUS_DIR": "--corpus", "TRAIN_STEPS": "--steps",
                  "MODEL_SIZE": "--sizes", "MIXTURE_OR_TASK_NAME": "--mixtures"}


# The objective axis: the paper's UL2 + causal-LM mixture, or it with FIM on half the causal-LM share.
PAPER, FIM = "paper", "fim"
OBJECTIVE_GINS = {PAPER: (), FIM: (f"{GIN_DIR}/objectives/fim.gin",)}


@dataclasses.dataclass(frozen=True)
class Cell:
  size: str
  mixture: str
  seed: int = 0  # train.seed
  repeat: bool = False  # a second copy of a cell, to measure seed noise
  objective: str = PAPER

  @property
  def name(self) -> str:
    return (f"{self.size}_{self.mixture}" + ("_fim" if self.objective == FIM else "")
            + (f"_seed{self.seed}" if self.repeat else ""))


def parse_cell_name(name: str) -> tuple[str, str, str] | None:
  """(size, mixture, objective) of a first-seed cell's directory name, or None for another name."""
  size, sep, rest = name.partition("_")
  if not sep or not rest or "_seed" in rest:
    return None
  if rest.endswith("_fim"):
    return size, rest[:-len("_fim")], FIM
  return size, rest, PAPER


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


def make_grid(sizes: Sequence[str], mixtures: Sequence[str], repeats: Sequence[str], seed: int = 0,
              objectives: Sequence[str] = (PAPER,)) -> list[Cell]:
  """sizes x mixtures x objectives, then one repeat per `SIZE:MIXTURE` (of the first objective) with
  the next seed."""
  unknown = [o for o in objectives if o not in OBJECTIVE_GINS]
  if unknown:
    raise ValueError(f"--objectives: unknown {', '.join(unknown)}; choose from {', '.join(OBJECTIVE_GINS)}")
  cells = [Cell(size, mixture, seed, objective=objective)
           for size in sizes for mixture in mixtures for objective in objectives]
  if not cells:
    raise ValueError("the grid is empty: give at least one size, one mixture and one objective")
  for spec in repeats:
    size, _, mixture = spec.partition(":")
    if Cell(size, mixture, seed, objective=objectives[0]) not in cells:
      raise ValueError(f"--repeat {spec!r}: expected SIZE:MIXTURE of a cell in the grid, "
                       f"e.g. {cells[0].size}:{cells[0].mixture}")
    cells.append(Cell(size, mixture, seed + 1, repeat=True, objective=objectives[0]))
  return cells


def train_args(cell: Cell, run_gin: str, model_dir: str, corpus_dir: str, steps: int | None,
               bindings: Sequence[str]) -> list[str]:
  """train.py's flags for one cell; steps None keeps the model file's TRAIN_STEPS."""
  args = [f"--gin_file={run_gin}", f"--gin_file={GIN_DIR}/models/{cell.size}.gin",
          f"--gin_file={GIN_DIR}/mixtures/{cell.mixture}.gin",
          *(f"--gin_file={path}" for path in OBJECTIVE_GINS[cell.objective]),
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
