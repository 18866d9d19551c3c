"""`python -m evaluation.infilling`: infilling prompts, scoring by execution, exact match.

  python -m evaluation.infilling prompts --subset single-line|multi-line|random-span|random-span-light|all \
      --output PROMPTS.jsonl [--limit N]
  python -m evaluation.infilling prompts --santacoder_fim FILE.jsonl --output PROMPTS.jsonl [--limit N]
  python -m evaluation.infilling score --predictions P.jsonl --output_dir DIR [--subset all|single-line,...] \
      [--k 1,10,100] [--workers N] [--timeout 3] [--memory_mb M] [--batch_size B] \
      [--runner DirectRunner|DataflowRunner|... [Beam options]]
  python -m evaluation.infilling exact --problems FILE.jsonl --predictions P.jsonl --output_dir DIR

problems.py builds HumanEval-infilling, program.py runs one middle, score.py scores a predictions
file (docs/infilling.md), exact.py does exact match for SantaCoder-FIM-shaped files. Every path may
be local or gs://.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence

from evaluation import resumable
from evaluation.infilling import exact, prompts, score
from evaluation.infilling.problems import parse_subsets
from evaluation.passk import DEFAULT_KS, parse_ks
from evaluation.prompts import write_jsonl
from sandbox import batching, execution


def _parser() -> argparse.ArgumentParser:
  parser = argparse.ArgumentParser(prog="python -m evaluation.infilling", description=__doc__.split("\n\n")[0])
  commands = parser.add_subparsers(dest="command", required=True)
  make = commands.add_parser("prompts", help="sample.py prompts (qid, language, prefix, suffix)")
  make.add_argument("--subset", default="single-line",
                    help="HumanEval-infilling subsets: all, or a comma-separated list of single-line, "
                         "multi-line, random-span, random-span-light")
  make.add_argument("--santacoder_fim", default=None,
                    help="instead: a JSONL of prompt, suffix, canonical_solution, language records (task_id or "
                         "the record's index as qid)")
  make.add_argument("--output", required=True, help="prompts JSONL (replaced whole)")
  make.add_argument("--limit", type=int, default=None, help="the first N problems of each subset (or of the file)")

  run = commands.add_parser("score", help="run the middles on typed HumanEval's test cases, values compared "
                                          "outside (HumanEval's tests under a nonce harness where no typed "
                                          "question): pass@k per subset")
  run.add_argument("--predictions", required=True, help="sample.py's predictions JSONL")
  run.add_argument("--output_dir", required=True, help="directory for results.jsonl and metrics.json")
  run.add_argument("--subset", default="all", help="subsets whose problems the qids may name: all, or a list")
  run.add_argument("--k", default=",".join(map(str, DEFAULT_KS)), help="pass@k values")
  run.add_argument("--workers", type=int, default=os.cpu_count(), help="sandboxes at a time")
  run.add_argument("--timeout", type=float, default=score.LIMITS.timeout_s,
                   help="wall-clock seconds of each program (the published harness's: 3)")
  run.add_argument("--memory_mb", type=int, default=execution.Limits.memory_mb,
                   help="address-space cap per program (RLIMIT_AS)")
  run.add_argument("--batch_size", type=int, default=batching.DEFAULT_BATCH_SIZE,
                   help="programs per unit of work (a Beam work item)")
  run.add_argument("--runner", default=None,
                   help="score as an Apache Beam pipeline on this runner (DirectRunner, DataflowRunner, "
                        "FlinkRunner, SparkRunner); other unknown flags are Beam's pipeline options")

  match = commands.add_parser("exact", help="exact match (stripped equality) per language, SantaCoder-FIM's rule")
  match.add_argument("--problems", required=True, help="the SantaCoder-FIM-shaped JSONL the prompts came from")
  match.add_argument("--predictions", required=True, help="sample.py's predictions JSONL")
  match.add_argument("--output_dir", required=True, help="directory for exact_match.jsonl and exact_match.json")
  return parser


def _prompts(args) -> int:
  if args.limit is not None and args.limit < 1:
    raise ValueError(f"--limit must be at least 1, got {args.limit}")
  if args.santacoder_fim is not None:
    records = prompts.santacoder_fim_prompts(args.santacoder_fim, args.limit)
  else:
    records = prompts.humaneval_prompts(parse_subsets(args.subset), args.limit)
  write_jsonl(records, args.output)
  print(f"wrote {len(records)} prompts to {args.output}")
  return 0


def _score(args, pipeline_args: Sequence[str]) -> int:
  if args.workers < 1:
    raise ValueError(f"--workers must be at least 1, got {args.workers}")
  if args.batch_size < 1:
    raise ValueError(f"--batch_size must be at least 1, got {args.batch_size}")
  if not args.timeout > 0:
    raise ValueError(f"--timeout must be positive, got {args.timeout}")
  if args.memory_mb < 1:
    raise ValueError(f"--memory_mb must be at least 1, got {args.memory_mb}")
  ks = parse_ks(args.k)
  limits = execution.Limits(timeout_s=args.timeout, memory_mb=args.memory_mb)
  beam_args = None if args.runner is None else ["--runner", args.runner, *pipeline_args]
  metrics = score.score(args.predictions, args.output_dir, parse_subsets(args.subset), limits, ks, args.workers,
                        args.batch_size, beam_args)
  print(score.summary(metrics))
  return 1 if metrics["unscored_predictions"] else 0


def main(argv: Sequence[str] | None = None) -> int:
  return resumable.command_main(_parser(), argv, _command)


def _command(args: argparse.Namespace, beam_options: list[str]) -> int:
  if args.command == "prompts":
    return _prompts(args)
  if args.command == "score":
    return _score(args, beam_options)
  metrics = exact.score(args.problems, args.predictions, args.output_dir)
  print(exact.summary(metrics))
  return 0
