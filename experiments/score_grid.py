"""Sample and score every trained cell of an ablation grid, then draw the paper's figures from it.

  python -m experiments.score_grid --grid ABL_DIR [--datasets humaneval,translation,infilling,NAME=FILE:TASK[:SOURCE]] \
      [--sizes tiny,mini] [--mixtures natural,unimax_1] [--languages all] [--limit N] \
      [--num_samples N] [--max_decode_length L] [--workers N] [--truncate_prompts] [--dry_run]

A cell is experiments.ablation's <size>_<mixture>[_fim] directory with done.json (a finished train.py run).
Per dataset, the prompts are written once to ABL_DIR/prompts/<dataset>.jsonl; per cell, sample.py
(gin_configs/sample/humaneval.gin for generation, translation.gin for translation, with --num_samples
and --max_decode_length as overrides) writes <cell>/predictions/<dataset>.jsonl and evaluation.score
writes <cell>/scores/<dataset>/, both resumable, so a rerun only does what is missing. Then
experiments.paper_results draws fig5_passk.png, fig6_passk_relative_change.png and paper_tables.md in
ABL_DIR at the paper's k (100 generation, 25 translation), or at the samples per problem where fewer.

Datasets: `humaneval` (typed HumanEval, generation), `translation` (HumanEval from Python), `infilling`
(HumanEval-infilling's single-line subset, gin_configs/sample/infilling.gin, scored by
evaluation.infilling at pass@1: the objective axis's second measure), or NAME=FILE:TASK[:SOURCE] for a typed question file (e.g. converted by `python -m evaluation.humaneval.babelcode`):
`bc_transcoder_cpp=transcoder.jsonl:translation:C++`, `bc_mbpp=mbpp.jsonl:generation`; or NAME=PATH:multiple
for MultiPL-E's problems (a file or folder of its prompts, `multiple_humaneval=humaneval-multiple/:multiple`),
scored MultiPL-E's way by `python -m evaluation.multiple score`, whose metrics.json the figures read alike.
This runs every cell on this machine, one after another; on a TPU grid, sample each cell where it was
trained and point experiments.paper_results at the bucket.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence

import storage
from evaluation import prompts as benchmark_prompts
from evaluation import score as scoring
from evaluation.infilling import prompts as infilling_prompts
from evaluation.infilling import score as infilling_scoring
from evaluation.infilling.problems import Subset
from evaluation.multiple import score as multiple_scoring
from sandbox.judge import Status
from experiments import paper_results
from experiments.ablation_grid import FIM, parse_cell_name
from model.config import SIZES

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SAMPLE_GINS = {"generation": os.path.join("gin_configs", "sample", "humaneval.gin"),
               "multiple": os.path.join("gin_configs", "sample", "humaneval.gin"),
               "translation": os.path.join("gin_configs", "sample", "translation.gin"),
               "infilling": os.path.join("gin_configs", "sample", "infilling.gin")}
INFILLING_SUBSETS = (Subset.SINGLE_LINE,)


@dataclasses.dataclass(frozen=True)
class Dataset:
  name: str
  benchmark: str            # "humaneval" or a typed question file
  task: str                 # generation | translation | infilling
  source_language: str = "python"


def parse_datasets(value: str) -> list[Dataset]:
  """--datasets: humaneval, translation, or NAME=FILE:TASK[:SOURCE]."""
  out = []
  for item in (v.strip() for v in value.split(",")):
    if not item:
      continue
    if item == "humaneval":
      out.append(Dataset("humaneval", "humaneval", "generation"))
    elif item == "translation":
      out.append(Dataset("translation", "humaneval", "translation"))
    elif item == "infilling":
      out.append(Dataset("infilling", "humaneval-infilling", "infilling"))
    else:
      name, sep, spec = item.partition("=")
      parts = spec.split(":")
      if not sep or not name or len(parts) not in (2, 3) or parts[1] not in ("generation", "translation", "multiple"):
        raise ValueError(f"--datasets: {item!r} is not humaneval, translation, infilling or NAME=FILE:TASK[:SOURCE] "
                         "(TASK generation, translation or multiple)")
      if parts[1] != "translation" and len(parts) == 3:
        raise ValueError(f"--datasets: {item!r}: a source language is for translation only")
      out.append(Dataset(name, parts[0], parts[1], *parts[2:]))
  if not out:
    raise ValueError("--datasets: none given")
  return out


def finished_cells(grid: str, sizes: Sequence[str] | None, mixtures: Sequence[str] | None) -> list[tuple[str, str]]:
  """(size, mixture) of every cell directory with done.json, in the order sizes x mixtures if given,
  else model sizes from the smallest up and mixtures by name. A cell trained with FIM (the ablation's
  objective axis) is (size, mixture + "_fim"), after its paper cell; `mixtures` names base mixtures."""
  cells = []
  for name in sorted(storage.listdir(grid)) if storage.isdir(grid) else []:
    parsed = parse_cell_name(name.rstrip("/"))
    if parsed and storage.exists(storage.join(grid, name.rstrip("/"), "done.json")):
      cells.append(parsed)
  order = list(sizes) if sizes else list(SIZES)  # smallest model first, as Figure 5's axis
  cells = [c for c in cells if c[0] in order and (not mixtures or c[1] in mixtures)]
  cells.sort(key=lambda c: (order.index(c[0]), list(mixtures).index(c[1]) if mixtures else c[1], c[2] == FIM))
  return [(size, mixture + ("_fim" if objective == FIM else "")) for size, mixture, objective in cells]


def sample_command(cell_dir: str, dataset: Dataset, prompts_path: str, predictions: str,
                   num_samples: int | None, max_decode_length: int | None,
                   truncate_prompts: bool = False) -> list[str]:
  command = [sys.executable, os.path.join(ROOT, "sample.py"), f"--gin_file={os.path.join(ROOT, SAMPLE_GINS[dataset.task])}",
             f"--checkpoint={cell_dir}", f"--prompts={prompts_path}", f"--output={predictions}"]
  if num_samples:
    command.append(f"--num_samples={num_samples}")
  if max_decode_length:
    command.append(f"--max_decode_length={max_decode_length}")
  if truncate_prompts:
    command.append("--truncate_prompts")
  return command


def k_for(dataset: Dataset, num_samples: int | None) -> int:
  """The paper's k for the dataset, or the samples per problem where fewer were drawn."""
  k = paper_results.TRANSLATION_K if dataset.task == "translation" else paper_results.GENERATION_K
  return min(k, num_samples) if num_samples else k


def run(grid: str, datasets: Sequence[Dataset], sizes: Sequence[str] | None = None,
        mixtures: Sequence[str] | None = None, languages: Sequence[str] | None = None, limit: int | None = None,
        num_samples: int | None = None, max_decode_length: int | None = None, workers: int | None = None,
        dry_run: bool = False, runner: Callable[[list[str]], int] = subprocess.call,
        truncate_prompts: bool = False) -> int:
  cells = finished_cells(grid, sizes, mixtures)
  if not cells:
    print(f"error: no finished cell (<size>_<mixture>/done.json) under {grid}", file=sys.stderr)
    return 2
  began, totals = time.perf_counter(), collections.Counter()
  prompt_paths = {}
  for dataset in datasets:
    path = prompt_paths[dataset.name] = storage.join(grid, "prompts", f"{dataset.name}.jsonl")
    if dry_run or storage.exists(path):
      continue
    if dataset.task == "infilling":
      benchmark_prompts.write_jsonl(infilling_prompts.humaneval_prompts(INFILLING_SUBSETS, limit), path)
    elif dataset.task == "multiple":
      records, invalid = benchmark_prompts.multiple_prompts(dataset.benchmark, languages, limit)
      for message in invalid:
        print(f"warning: {dataset.name}: skipped malformed problem: {message}", flush=True)
      benchmark_prompts.write_jsonl(records, path)
    else:
      benchmark_prompts.write_jsonl(benchmark_prompts.typed_prompts(
          dataset.benchmark, dataset.task, dataset.source_language, languages or scoring.EVALUATED, limit), path)
  for number, (size, mixture) in enumerate(cells, 1):
    cell_dir = storage.join(grid, f"{size}_{mixture}")
    for dataset in datasets:
      predictions = storage.join(cell_dir, "predictions", f"{dataset.name}.jsonl")
      scores = storage.join(cell_dir, "scores", dataset.name)
      command = sample_command(cell_dir, dataset, prompt_paths[dataset.name], predictions, num_samples,
                               max_decode_length, truncate_prompts)
      print(f"[cell {number}/{len(cells)}] {size}_{mixture} {dataset.name}: sampling", flush=True)
      if dry_run:
        print("  " + " ".join(command))
        if dataset.task == "infilling":
          print(f"  python -m evaluation.infilling score --predictions {predictions} --output_dir {scores} "
                f"--subset {','.join(s.value for s in INFILLING_SUBSETS)} --k 1")
        elif dataset.task == "multiple":
          print(f"  python -m evaluation.multiple score --dataset {dataset.benchmark} --predictions {predictions} "
                f"--output {scores} --k 1,{k_for(dataset, num_samples)}")
        else:
          print(f"  python -m evaluation.score --predictions {predictions} --benchmark {dataset.benchmark} "
                f"--output {scores} --k 1,{k_for(dataset, num_samples)}")
        continue
      storage.makedirs(storage.dirname(predictions))
      if runner(command) != 0:
        print(f"error: sample.py failed for {size}_{mixture} {dataset.name}; its output so far is kept, "
              "rerun to resume", file=sys.stderr)
        return 1
      print(f"[cell {number}/{len(cells)}] {size}_{mixture} {dataset.name}: scoring", flush=True)
      counts = collections.Counter()
      if dataset.task == "infilling":
        metrics = infilling_scoring.score(predictions, scores, INFILLING_SUBSETS, ks=[1], workers=workers,
                                          progress=False)
        for subset in metrics["subsets"]:
          counts.update(metrics[subset]["counts"])
      elif dataset.task == "multiple":
        read = multiple_scoring.read_sample_predictions(predictions, dataset.benchmark)
        metrics = multiple_scoring.score(read, scores, predictions, workers=workers,
                                         ks=sorted({1, k_for(dataset, num_samples)}), progress=False)
        for language in metrics["languages"]:
          counts.update(metrics[language]["counts"])
      else:
        metrics = scoring.score(predictions, dataset.benchmark, scores, languages=None, workers=workers,
                                ks=sorted({1, k_for(dataset, num_samples)}), progress=False)
        for language in metrics["languages"]:
          counts.update(metrics[language]["counts"])
      totals.update(counts)
      print(f"  {sum(counts.values())} programs: {_counts(counts)}", flush=True)
  if dry_run:
    return 0
  print(f"all cells: {sum(totals.values())} programs: {_counts(totals)}; "
        f"{(time.perf_counter() - began) / 60:.1f} min", flush=True)
  # The paper's figures: its datasets, over the cells of the paper's objective (the FIM axis is
  # experiments.ablation's "Objective" section).
  ks = {d.name: k_for(d, num_samples) for d in datasets if d.task != "infilling"}
  paper = [(s, m) for s, m in cells if not m.endswith("_fim")]
  sizes, mixtures = list(dict.fromkeys(s for s, _ in paper)), list(dict.fromkeys(m for _, m in paper))
  for path in paper_results.write(grid, sizes, mixtures, None, ks):
    print(f"wrote {path}")
  return 0


def _counts(counts: collections.Counter) -> str:
  """Typed HumanEval's statuses in their order, then any other benchmark's (MultiPL-E's OK, Exception...)."""
  names = [s.value for s in Status] + sorted(set(counts) - {s.value for s in Status})
  return ", ".join(f"{counts[name]} {name}" for name in names if name in counts or name in {s.value for s in Status})


def main(argv: Sequence[str] | None = None) -> int:
  parser = argparse.ArgumentParser(prog="python -m experiments.score_grid", description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--grid", required=True, help="experiments.ablation's output directory")
  parser.add_argument("--datasets", default="humaneval,translation",
                      help="comma-separated: humaneval, translation, infilling, NAME=FILE:TASK[:SOURCE]")
  parser.add_argument("--sizes", help="comma-separated (default: every finished cell)")
  parser.add_argument("--mixtures", help="comma-separated (default: every finished cell)")
  parser.add_argument("--languages", default="all", help="comma-separated scoring languages, or all")
  parser.add_argument("--limit", type=int, help="the first N problems of each dataset")
  parser.add_argument("--num_samples", type=int, help="samples per prompt (default: the sample gin's)")
  parser.add_argument("--max_decode_length", type=int, help="tokens per sample (default: the sample gin's)")
  parser.add_argument("--workers", type=int, help="scoring workers (default: the CPUs)")
  parser.add_argument("--truncate_prompts", action="store_true",
                      help="sample.py keeps the last tokens of a prompt that does not fit (counted in its "
                           "summary) instead of refusing it")
  parser.add_argument("--dry_run", action="store_true", help="print the commands, run nothing")
  args = parser.parse_args(argv)
  for flag in ("limit", "num_samples", "max_decode_length", "workers"):
    if getattr(args, flag) is not None and getattr(args, flag) < 1:
      parser.error(f"--{flag} must be >= 1")
  try:
    datasets = parse_datasets(args.datasets)
    languages = scoring.parse_languages(args.languages)
  except ValueError as error:
    parser.error(str(error))
  split = lambda value: [v for v in value.split(",") if v] if value else None  # noqa: E731
  return run(args.grid, datasets, split(args.sizes), split(args.mixtures), languages, args.limit,
             args.num_samples, args.max_decode_length, args.workers, args.dry_run,
             truncate_prompts=args.truncate_prompts)


if __name__ == "__main__":
  sys.exit(main())
