"""`python -m evaluation.multiple`: score MultiPL-E problems MultiPL-E's way, and write its formats.

  python -m evaluation.multiple score --dataset PROBLEMS --predictions P.jsonl --output DIR
  python -m evaluation.multiple score --completions MULTIPLE_COMPLETIONS_DIR --output DIR
  python -m evaluation.multiple score --dataset PROBLEMS --generations generations_multiple-cpp.json \
      --languages cpp --output DIR
      [--languages cpp,rs] [--workers N] [--timeout S|cpp=S,...] [--memory_mb M] [--k 1,10,100]
      [--temperature 0.8 --top_p 0.95 --max_tokens 512] [--runner DirectRunner|DataflowRunner|... [Beam options]]
  python -m evaluation.multiple export --dataset PROBLEMS --predictions P.jsonl \
      [--completions DIR] [--generations FILE.json --languages cpp] [--temperature 0.8 --top_p 0.95 --max_tokens 512]

PROBLEMS: MultiPL-E's prompt records (name, language, prompt, tests, stop_tokens, ...) as JSONL, JSON
(a list, as its prompts/*.json) or the dataset's parquet, a file or a folder; P.jsonl: sample.py's
predictions for `python -m evaluation.prompts multiple --dataset PROBLEMS`. `score` writes
DIR/results.jsonl (one verdict per prediction: MultiPL-E's status and exit code), DIR/metrics.json
(pass@k per language and the share of each status) and DIR/multiple/<language>/<name>.results.json.gz,
MultiPL-E's results files, which its pass_k.py reads (it takes one temperature per folder: 0.2 or 0.8).
`export` writes codelm's predictions as MultiPL-E completions files (DIR/<language>/<name>.json.gz) or
as the harness's generations.
--temperature, --top_p and --max_tokens are what those files record of the sampling (sample.py's
defaults; the predictions do not carry them). Every path may be local or gs://.
"""

from __future__ import annotations

import argparse
import functools
import os
from collections.abc import Sequence

import storage
from evaluation import resumable
from evaluation import score as scoring
from evaluation.multiple import files, score
from evaluation.multiple import execution as multiple_execution
from evaluation.passk import parse_ks
from sandbox import execution


def _parser() -> argparse.ArgumentParser:
  parser = argparse.ArgumentParser(prog="python -m evaluation.multiple", description=__doc__.split("\n\n")[0],
                                   formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
  commands = parser.add_subparsers(dest="command", required=True)
  run = commands.add_parser("score", help="run each program MultiPL-E's way: pass@k per language")
  export = commands.add_parser("export", help="codelm predictions as MultiPL-E completions or harness generations")
  for command in (run, export):
    command.add_argument("--dataset", help="MultiPL-E's problems: a JSONL, JSON or parquet file, or a folder")
    command.add_argument("--predictions", help="sample.py's predictions JSONL")
    command.add_argument("--generations", help="the bigcode harness's generations JSON (score: read; export: "
                                                "written), one language")
    command.add_argument("--languages", help="comma-separated MultiPL-E codes or codelm names (default: all)")
    command.add_argument("--temperature", type=float, default=0.8, help="recorded in the files written")
    command.add_argument("--top_p", type=float, default=0.95, help="recorded in the files written")
    command.add_argument("--max_tokens", type=int, default=512, help="recorded in the files written")
  run.add_argument("--completions", help="MultiPL-E's completions files (<name>.json.gz): a folder or one file")
  run.add_argument("--output", required=True, help="directory for results.jsonl, metrics.json and multiple/")
  run.add_argument("--workers", type=int, default=os.cpu_count(), help="sandboxes at a time")
  run.add_argument("--timeout", default=None,
                   help="run-step seconds: S for every language or language=S pairs (default: MultiPL-E's per "
                        "language)")
  run.add_argument("--memory_mb", type=int, default=execution.Limits.memory_mb,
                   help="address-space cap per program (RLIMIT_AS)")
  run.add_argument("--k", default=",".join(map(str, score.DEFAULT_KS)), help="pass@k values")
  run.add_argument("--runner", default=None,
                   help="score as an Apache Beam pipeline on this runner (DirectRunner, DataflowRunner, ...); other "
                        "unknown flags are Beam's pipeline options")
  export.add_argument("--completions", help="folder for MultiPL-E completions files (<name>.json.gz)")
  return parser


def _languages(value: str | None) -> list[str] | None:
  return None if value is None else [n.strip() for n in value.split(",") if n.strip()]


def reader(kind: str, source: str, dataset: str | None, language: str | None) -> score.Read:
  """The input of a scoring run, read against its problems (also in each Beam worker)."""
  if kind == "completions":
    return score.read_completion_files(source)
  if dataset is None:
    raise ValueError(f"--{kind} needs --dataset (the MultiPL-E problems it was sampled from)")
  if kind == "generations":
    return score.read_harness_generations(source, dataset, language)
  return score.read_sample_predictions(source, dataset)


def benchmark_of(kind: str, source: str, dataset: str | None, language: str | None, limits, ks, timeouts
                 ) -> score.MultiPLEBenchmark:
  """The benchmark a Beam worker scores with: the same problems and rule as the driver's."""
  read = reader(kind, source, dataset, language)
  return score.MultiPLEBenchmark(read.problems, limits, ks, timeouts, read.rule)


def _input(args) -> tuple[str, str]:
  given = [(kind, getattr(args, kind)) for kind in ("predictions", "completions", "generations")
           if getattr(args, kind) is not None]
  if len(given) != 1:
    raise ValueError("give one of --predictions, --completions or --generations")
  return given[0]


def _score(args, pipeline_args: Sequence[str]) -> int:
  if args.workers < 1:
    raise ValueError(f"--workers must be at least 1, got {args.workers}")
  if args.memory_mb < 1:
    raise ValueError(f"--memory_mb must be at least 1, got {args.memory_mb}")
  ks = parse_ks(args.k)
  kind, source = _input(args)
  languages = _languages(args.languages)
  language = languages[0] if kind == "generations" and languages and len(languages) == 1 else None
  read = reader(kind, source, args.dataset, language)
  wanted = None if languages is None else [score.resolve_language(n, _codes(read)) for n in languages]
  timeouts = scoring.parse_timeouts(args.timeout, multiple_execution.TIMEOUT_S)
  limits = execution.Limits(memory_mb=args.memory_mb)
  beam_args = None if args.runner is None else ["--runner", args.runner, *pipeline_args]
  make = functools.partial(benchmark_of, kind, source, args.dataset, language, limits, tuple(ks), timeouts)
  metrics = score.score(read, args.output, source, wanted, args.workers, limits, ks, timeouts, beam_args, make=make,
                        metadata={"temperature": args.temperature, "top_p": args.top_p, "max_tokens": args.max_tokens})
  print(score.summary(metrics))
  return 1 if metrics["unscored_predictions"] else 0


def _codes(read: score.Read) -> dict[str, set[str]]:
  codes: dict[str, set[str]] = {}
  for (key, _), problem in read.problems.items():
    codes.setdefault(problem.language, set()).add(key)
  return codes


def _export(args) -> int:
  if args.predictions is None or args.dataset is None:
    raise ValueError("export needs --predictions and --dataset")
  if args.completions is None and args.generations is None:
    raise ValueError("export needs --completions DIR and/or --generations FILE")
  read = score.read_sample_predictions(args.predictions, args.dataset)
  languages = _languages(args.languages)
  wanted = None if languages is None else {score.resolve_language(n, _codes(read)) for n in languages}
  chosen = [p for p in read.predictions if wanted is None or p.language in wanted]
  by_problem: dict[tuple[str, str], list] = {}
  for p in chosen:
    by_problem.setdefault((p.language, p.qid), []).append(p)
  joined = score.MultiPLEBenchmark(read.problems, execution.Limits(), rule=read.rule)
  for message in read.invalid[:20]:
    print(f"invalid prediction: {message}")
  if args.completions is not None:
    if read.rule == "harness":
      print("warning: these predictions continue the stripped prompt (--strip_prompt); MultiPL-E joins a completion "
            "to the whole prompt, so its programs differ from the scored ones by the prompt's trailing whitespace")
    for key, members in sorted(by_problem.items()):
      members.sort(key=lambda p: (str(type(p.sample_id)), p.sample_id))
      problem = read.problems[key]
      files.write_completions(storage.join(args.completions, problem.language), files.completions_record(
          problem, [p.code for p in members], args.temperature, args.top_p, args.max_tokens))
    folders = sorted({problem_language for problem_language, _ in
                      ((read.problems[key].language, key) for key in by_problem)})
    print(f"wrote {len(by_problem)} MultiPL-E completions files ({len(chosen)} completions) to "
          f"{', '.join(storage.join(args.completions, f) for f in folders)} (one folder per language, as MultiPL-E "
          "keeps them)")
  if args.generations is not None:
    present = sorted({key for key, _ in by_problem})
    if len(present) != 1:
      raise ValueError(f"--generations: the harness's file holds one language; the predictions hold "
                       f"{', '.join(present) or 'none'}: name one with --languages")
    ordered = [p for (key, _), p in read.problems.items() if key == present[0]]
    generations = []
    for problem in ordered:
      members = sorted(by_problem.get((present[0], problem.name), []),
                       key=lambda p: (str(type(p.sample_id)), p.sample_id))
      generations.append([files.harness_generation(problem, p.code) if read.rule == "multiple"
                          else joined.prompt(problem) + p.code for p in members])
    while generations and not generations[-1]:
      generations.pop()  # the harness's file covers the first problems of the dataset (--limit)
    missing = sum(not g for g in generations)
    files.write_generations(args.generations, generations)
    print(f"wrote generations for {len(generations)} problems to {args.generations}"
          + (f" ({missing} without predictions, written as empty lists)" if missing else ""))
  return 0


def main(argv: Sequence[str] | None = None) -> int:
  return resumable.command_main(_parser(), argv, lambda args, beam_options: (
      _score(args, beam_options) if args.command == "score" else _export(args)))

