"""Score predictions in 12 languages: compile and run each in the sandbox, pass@k per language.

  python -m evaluation.score --predictions PREDICTIONS.jsonl --benchmark humaneval --output DIR \
      [--languages all|python,cpp,...] [--workers N] [--batch_size 32] [--timeout S|java=S,...] [--memory_mb M] \
      [--k 1,10,100] [--whole_programs] [--runner DirectRunner|DataflowRunner|FlinkRunner|SparkRunner [Beam options]]

PREDICTIONS is sample.py's output for prompts from `python -m evaluation.prompts humaneval`: one line
per sample with `qid`, `language`, `sample_id` and `code` (the completion). Each prediction becomes
the language's test program (sandbox/renderers/): the prompt's signature, the completion, and a
harness that prints each test case's returned value; sandbox/judge.py compares the values with the
expected outputs outside the sandbox (sandbox/execution.py).

With `--whole_programs`, each prediction's `code` is a whole solution instead, as BabelCode's
predictions are (`{"qid", "language", "code"}`, sample_id optional): the entry function with its
imports, helpers and constants, named in BabelCode's convention for the language. It becomes the
language's whole program (Renderer.whole_program: the head BabelCode's test programs have, the code
as given, the same harness, called with the question's declared types) and is judged the same way;
each compiles on its own. A language whose renderer builds no whole programs is listed as not
evaluated.

The scoring loop is evaluation/resumable.py's: DIR/results.jsonl gets one line per prediction as it
finishes (status passed / failed / compile_error / error / timeout, the outcome of every test case,
runtime, toolchain version), each written and flushed whole, so a killed run resumes: a rerun skips
the (language, qid, sample_id) triples already scored with the same code and drops a torn last line.
Identical programs (language, problem, completion) run once and share their verdict; a compiled
language's programs are compiled `--batch_size` at a time in one build (sandbox/batching.py;
1 compiles each alone) and each runs in its own sandbox. With `--runner`, the same scoring runs as an
Apache Beam pipeline on that runner's workers (evaluation/beam_scoring.py) and writes the same files.

DIR/metrics.json holds, per language, pass@k by the unbiased estimator (k no larger than the samples
per problem; a larger k is listed under "not_computable" with why, shown as "n < k" and noted) and the
paper's columns: % error (compile or runtime error outside the test cases),
% failed test, % passed, % passed at least one test but failed, mean % tests passed, % timed out; and
under "scoring", what the run did (programs executed, duplicates reused, builds). A malformed
prediction line is reported with its line number and skipped; the other predictions are scored.
Dart and Julia are listed as not evaluated (no toolchain in any reachable registry).

The paper's limits (BabelCode's) are the defaults, and metrics.json's "limits" records those used: a
program's run step has 10 s, 15 s for Java and TypeScript (`--timeout 20` for every language,
`--timeout java=30,typescript=20` to change some); a returned float must be within 1e-6 (relative or
absolute) of the expected one, within 1e-9 where the expected values are doubles (a run of 7 digits
or more; `--float_tolerance`, `--double_tolerance`; sandbox/typed.py's Tolerance).
"""
from __future__ import annotations

import quiet

if __name__ == "__main__":  # before Beam and TensorFlow are imported: no start-up lines
  quiet.setup()

import argparse
import collections
import dataclasses
import functools
import json
import os
import sys
from collections.abc import Mapping, Sequence

from evaluation import beam_scoring, resumable
from sandbox import batching, execution, typed
from sandbox.judge import Status, judge
# EVALUATED, parse_languages, BENCHMARKS and load_benchmark live with the languages and the typed
# format; they stay importable from here, where scripts have always found them.
from sandbox.renderers import EVALUATED, NOT_EVALUATED, get, parse_languages
from evaluation import passk
from evaluation.passk import mean_pass_at_k, parse_ks
from evaluation.resumable import Prediction
from evaluation.benchmark_data import BENCHMARKS, load_benchmark
import storage
from storage import OutputLocked
from languages import BY_NAME, get as language_named

DEFAULT_K = (1, 10, 100)
# The paper's run-step limits (BabelCode's): 10 s, 15 s for Java and TypeScript.
PAPER_TIMEOUT_S = 10.0
PAPER_LONGER_TIMEOUTS_S = {"java": 15.0, "typescript": 15.0}


def read_predictions(path: str, questions: Mapping[str, typed.Question]
                     ) -> tuple[list[Prediction], list[str]]:
  """The valid predictions, and one message per line that is not (file:line: why): the shared
  reader (evaluation/resumable.py). A qid may be the benchmark's id or its last part ("HumanEval/12"
  or "12"); the language any spelling of a scoring language's name."""
  aliases = {qid.rsplit("/", 1)[-1]: qid for qid in questions}

  def resolve(record: dict) -> tuple[str, str]:
    if not isinstance(record.get("language"), str):
      raise ValueError("a prediction needs a language (a string)")
    language = language_named(record["language"]).name
    qid = str(record["qid"])
    qid = qid if qid in questions else aliases.get(qid)
    if qid is None:
      raise ValueError(f"unknown qid {record['qid']!r}")
    return language, qid

  return resumable.read_predictions(path, resolve)


def read_results(path: str) -> dict[tuple, dict]:
  """Results already in `path` by (language, qid, sample_id); the later of two lines wins. A torn last
  line (a kill mid-write) is cut off; any other unreadable line is ignored (that prediction is
  scored again)."""
  return storage.read_results(path, TypedBenchmark.result_key)


def verdict(question: typed.Question, result: execution.Execution, toolchain: str,
            tolerance: typed.Tolerance = typed.PAPER_TOLERANCE) -> dict:
  """A results.jsonl record's verdict fields for one execution."""
  outcome = judge(question, result, tolerance)
  run = result.run
  return {"status": outcome.status.value, "cases": [c.value for c in outcome.cases],
          "tests_passed": outcome.tests_passed, "num_tests": len(outcome.cases),
          "detail": outcome.detail[:1000],
          "compile_s": round(sum(s.runtime_s for s in result.compile), 3),
          "run_s": round(run.runtime_s, 3) if run else None,
          "output_truncated": result.output_truncated, "toolchain": toolchain}


class TypedBenchmark(resumable.Benchmark):
  """Typed questions (sandbox/typed.py) in any scoring language: each prediction becomes the
  language's test program (sandbox/renderers/), a unit of them is compiled in one build where the
  language batches (sandbox/batching.py), and the judge compares values outside the sandbox."""
  command = "evaluation.score"

  def __init__(self, questions: Mapping[str, typed.Question], limits: execution.Limits = execution.Limits(),
               ks: Sequence[int] = DEFAULT_K, timeouts: Mapping[str, float] | None = None,
               tolerance: typed.Tolerance = typed.PAPER_TOLERANCE, whole: bool = False):
    """`timeouts`: a language's run-step seconds where it differs from `limits.timeout_s`; `whole`:
    a prediction's code is a whole solution (Renderer.whole_program), not a completion."""
    self.questions, self.limits, self.ks = questions, limits, tuple(ks)
    self.timeouts, self.tolerance, self.whole = dict(timeouts or {}), tolerance, whole

  def limits_for(self, language: str) -> execution.Limits:
    return dataclasses.replace(self.limits, timeout_s=self.timeouts.get(language, self.limits.timeout_s))

  def settings(self, language: str) -> dict:
    whole = {"whole_programs": True} if self.whole else {}  # a completion's result is not a whole program's
    return {"limits": dataclasses.asdict(self.limits_for(language)), "tolerance": dataclasses.asdict(self.tolerance),
            **whole}

  @staticmethod
  def result_key(record: dict) -> tuple | None:
    statuses = {s.value for s in Status}
    return (record["language"], record["qid"], record["sample_id"]) if record["status"] in statuses else None

  def run(self, unit, stats):
    renderer = get(unit[0].language)
    jobs = [(self.questions[p.qid], p.code) for p in unit]
    limits = self.limits_for(unit[0].language)
    if self.whole:  # a whole program may hold anything at file scope: each compiles on its own
      executions = [execution.execute(renderer.whole_program(q, code), renderer.toolchain, limits) for q, code in jobs]
      stats.alone += len(jobs)
    else:
      executions = batching.execute_all(renderer, jobs, limits, batch_size=len(unit), stats=stats)
    version = execution.toolchain_version(renderer.toolchain)
    return [verdict(question, result, version, self.tolerance) for (question, _), result in zip(jobs, executions)]

  def summarise(self, predictions, results) -> dict:
    out: dict = {"languages": [], "toolchains": {}}
    present = sorted({p.language for p in predictions}, key=list(BY_NAME).index)
    for name in present:
      scored = [p for p in predictions if p.language == name and p.key in results]
      out[name] = {**language_metrics([results[p.key] for p in scored], self.ks),
                   **resumable.sampling_counts(scored)}
      out["languages"].append(name)
      out["toolchains"][name] = execution.toolchain_version(get(name).toolchain)
    return out


def language_metrics(records: Sequence[dict], ks: Sequence[int]) -> dict:
  """pass@k and the paper's columns over one language's records (one per prediction)."""
  statuses = collections.Counter(r["status"] for r in records)
  per_problem: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
  for r in records:
    per_problem[r["qid"]][0] += 1
    per_problem[r["qid"]][1] += r["status"] == Status.PASSED.value

  def percent(count: float) -> float | None:
    return round(100 * count / len(records), 4) if records else None

  some = sum(r["status"] != Status.PASSED.value and any(r["tests_passed"]) for r in records)
  fractions = [sum(r["tests_passed"]) / len(r["tests_passed"]) if r["tests_passed"] else 0.0
               for r in records]
  return {
      **mean_pass_at_k({qid: (n, c) for qid, (n, c) in per_problem.items()}, ks=tuple(ks)),
      "not_computable": passk.not_computable({qid: (n, c) for qid, (n, c) in per_problem.items()}, ks),
      "percent_passed": percent(statuses[Status.PASSED.value]),
      "percent_failed_test": percent(statuses[Status.FAILED.value]),
      "percent_error": percent(statuses[Status.ERROR.value] + statuses[Status.COMPILE_ERROR.value]),
      "percent_timeout": percent(statuses[Status.TIMEOUT.value]),
      "percent_passed_some_tests_but_failed": percent(some),
      "percent_tests_passed": percent(sum(fractions)),
      "num_predictions": len(records),
      "num_problems": len(per_problem),
      "samples_per_problem": sorted({n for n, _ in per_problem.values()}),
      "counts": {s.value: statuses[s.value] for s in Status},
  }


def score(predictions_path: str, benchmark: str, output_dir: str, languages: Sequence[str] | None = None,
          workers: int | None = None, limits: execution.Limits = execution.Limits(),
          ks: Sequence[int] = DEFAULT_K, progress: bool = True,
          batch_size: int = batching.DEFAULT_BATCH_SIZE, pipeline_args: Sequence[str] | None = None,
          timeouts: Mapping[str, float] | None = None, tolerance: typed.Tolerance = typed.PAPER_TOLERANCE,
          whole: bool = False) -> dict:
  """Scores the predictions not yet in output_dir/results.jsonl, then writes metrics.json: here with
  `workers` threads, or with `pipeline_args` (`--runner` and Beam's options) as a Beam pipeline on
  that runner's workers (evaluation/beam_scoring.py), whose machines must have the toolchains.
  `timeouts`: per-language run-step seconds (`paper_timeouts()` is the paper's), others
  `limits.timeout_s`. `whole`: the predictions' code is whole solutions (module docstring)."""
  questions = load_benchmark(benchmark)
  predictions, invalid = read_predictions(predictions_path, questions)
  runnable, not_evaluated = runnable_languages(predictions, languages, check_toolchains=pipeline_args is None
                                               or beam_scoring.runs_here(pipeline_args), whole=whole)
  mine = [p for p in predictions if p.language in runnable]
  scorer = TypedBenchmark(questions, limits, ks, timeouts, tolerance, whole)
  make = functools.partial(typed_benchmark, benchmark, limits, tuple(ks), dict(timeouts or {}), tolerance, whole)
  results, report = beam_scoring.dispatch(scorer, make, mine, output_dir, pipeline_args, workers, batch_size,
                                          progress, source=predictions_path)
  metrics = write_metrics(scorer, benchmark, predictions_path, output_dir, mine, results, report, invalid,
                          not_evaluated)
  return metrics


def typed_benchmark(benchmark: str, limits: execution.Limits, ks: Sequence[int],
                    timeouts: Mapping[str, float] | None = None,
                    tolerance: typed.Tolerance = typed.PAPER_TOLERANCE, whole: bool = False) -> TypedBenchmark:
  """The TypedBenchmark of a benchmark name or file (built again in each Beam worker)."""
  return TypedBenchmark(load_benchmark(benchmark), limits, ks, timeouts, tolerance, whole)


def paper_timeouts(overrides: Mapping[str, float] | None = None) -> dict[str, float]:
  """Run-step seconds of every scoring language: the paper's (10 s, 15 s for Java and TypeScript),
  then `overrides`."""
  table = {name: PAPER_LONGER_TIMEOUTS_S.get(name, PAPER_TIMEOUT_S) for name in EVALUATED}
  return {**table, **(overrides or {})}


def parse_timeouts(value: str | None, defaults: Mapping[str, float] | None = None) -> dict[str, float]:
  """--timeout: None (the defaults: the paper's unless given), seconds for every language ("20"), or
  language=seconds pairs over the defaults ("java=30,typescript=20", any spelling of a language's name)."""
  table = paper_timeouts() if defaults is None else dict(defaults)

  def seconds(text: str, where: str) -> float:
    try:
      result = float(text)
    except ValueError:
      raise ValueError(f"--timeout: {where}: {text!r} is not a number of seconds") from None
    if not result > 0:
      raise ValueError(f"--timeout: {where}: must be positive, got {text}")
    return result

  if value is None:
    return table
  if "=" not in value:
    return {name: seconds(value, "seconds") for name in table}
  overrides = {}
  for pair in value.split(","):
    name, sep, text = pair.partition("=")
    if not sep:
      raise ValueError(f"--timeout: {pair!r} is not language=seconds")
    try:
      language = language_named(name.strip()).name
    except ValueError as error:
      raise ValueError(f"--timeout: {error}") from None
    overrides[language] = seconds(text.strip(), name.strip())
  return {**table, **overrides}


def runnable_languages(predictions: Sequence[Prediction], languages: Sequence[str] | None,
                       check_toolchains: bool = True, whole: bool = False) -> tuple[list[str], dict[str, str]]:
  """The wanted languages that have predictions and a toolchain here, and why the others are not
  evaluated (Dart and Julia always; a language whose toolchain is missing; with `whole`, a language
  whose renderer builds no whole programs). `check_toolchains` False: the programs run elsewhere (a
  remote Beam runner's workers)."""
  wanted = list(languages or EVALUATED)
  present = {p.language for p in predictions}
  missing_toolchain = {}
  for name in wanted:
    if whole and name in present and name not in NOT_EVALUATED and not get(name).whole_programs:
      missing_toolchain[name] = "whole programs (--whole_programs) are not supported in this language yet"
      continue
    if check_toolchains and name in present and name not in NOT_EVALUATED:
      lacking = execution.missing(get(name).toolchain)
      if lacking:
        missing_toolchain[name] = f"missing {', '.join(lacking)}; run `make toolchains`"
  runnable = [n for n in wanted if n in present and n not in missing_toolchain and n not in NOT_EVALUATED]
  return runnable, {**NOT_EVALUATED, **missing_toolchain}


def write_metrics(scorer: TypedBenchmark, benchmark: str, predictions_path: str, output_dir: str,
                  predictions: Sequence[Prediction], results: Mapping[tuple, dict],
                  report: resumable.Report, invalid: Sequence[str], not_evaluated: Mapping[str, str]) -> dict:
  """metrics.json: per language pass@k and the paper's columns, what was left out and why, and what
  this run did (executions saved by running each distinct program once, batching)."""
  scoring = report.as_dict()
  limits = {**dataclasses.asdict(scorer.limits),  # the run step's seconds per language, as used
            "timeout_s": {p: scorer.limits_for(p).timeout_s for p in dict.fromkeys(x.language for x in predictions)},
            "float_tolerance": dataclasses.asdict(scorer.tolerance)}
  metrics: dict = {"benchmark": benchmark, "predictions": storage.resolve(predictions_path),
                   "whole_programs": scorer.whole, "limits": limits, "scored_now": scoring["scored_now"],
                   **scorer.summarise(predictions, results), "not_evaluated": dict(not_evaluated),
                   "invalid_predictions": list(invalid), "unscored_predictions": list(report.unscored),
                   "scoring": scoring}
  storage.write_atomic(storage.join(output_dir, "metrics.json"), json.dumps(metrics, indent=2) + "\n")
  return metrics


COLUMNS = (("percent_error", "% error"), ("percent_failed_test", "% failed test"),
           ("percent_passed", "% passed"), ("percent_passed_some_tests_but_failed", "% passed some, failed"),
           ("percent_tests_passed", "% tests passed"), ("percent_timeout", "% timed out"),
           # what sample.py did to the predictions (its prompt cut to fit; stopped at the length limit)
           ("percent_prompt_truncated", "% prompt truncated"), ("percent_cut_by_length", "% at max length"))


def table(metrics: dict) -> str:
  """The per-language markdown table printed at the end of a run (and shown in docs/results.md)."""
  lines = resumable.table(metrics, metrics["languages"],
                          [("language", lambda name, m: BY_NAME[name].display_name),
                           ("predictions", lambda name, m: str(m["num_predictions"]))], COLUMNS, 3)
  lines += [f"| {BY_NAME[name].display_name} | not evaluated: {why} |" for name, why in metrics["not_evaluated"].items()]
  return "\n".join(lines)


def summary(metrics: dict) -> str:
  scoring = metrics["scoring"]
  lines = [table(metrics), "", f"scored now: {metrics['scored_now']} predictions with "
           f"{scoring['programs_executed']} executions ({scoring['duplicates_reused']} duplicates reused, "
           f"{scoring['executions_saved_percent']:g}% saved)"]
  lines += resumable.listed_lines(metrics)
  lines += passk.not_computable_lines({BY_NAME[name].display_name: metrics[name] for name in metrics["languages"]})
  lines += resumable.sampling_warnings({BY_NAME[name].display_name: metrics[name] for name in metrics["languages"]
                                       if "prompt_truncated" in metrics[name]})
  lines += resumable.unscored_lines(metrics["unscored_predictions"])
  return "\n".join(lines)



def main(argv: Sequence[str] | None = None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--predictions", required=True, help="sample.py's predictions JSONL")
  parser.add_argument("--benchmark", default="humaneval",
                      help="humaneval, or the path of a typed question file")
  parser.add_argument("--output", required=True, help="directory for results.jsonl and metrics.json")
  parser.add_argument("--languages", default="all", help="all, or a comma-separated list")
  parser.add_argument("--workers", type=int, default=os.cpu_count(), help="sandboxes at a time")
  parser.add_argument("--batch_size", type=int, default=batching.DEFAULT_BATCH_SIZE,
                      help="programs of a compiled language built together (1: each alone)")
  parser.add_argument("--timeout", default=None,
                      help="wall-clock seconds of each program's run step: S for every language, or "
                           "language=S pairs (default: the paper's, 10 s, 15 s for Java and TypeScript)")
  parser.add_argument("--float_tolerance", type=float, default=typed.PAPER_TOLERANCE.float,
                      help="relative or absolute difference allowed for a returned float")
  parser.add_argument("--double_tolerance", type=float, default=typed.PAPER_TOLERANCE.double,
                      help="... where the expected values are doubles (7 or more digits in a row)")
  parser.add_argument("--memory_mb", type=int, default=execution.Limits.memory_mb,
                      help="address-space cap per program (RLIMIT_AS)")
  parser.add_argument("--k", default=",".join(map(str, DEFAULT_K)),
                      help="pass@k values (the paper: 1,10,100 for generation; 1,25 for translation)")
  parser.add_argument("--whole_programs", action="store_true",
                      help="each prediction's code is a whole solution (BabelCode's predictions), not a completion")
  parser.add_argument("--runner", default=None,
                      help="score as an Apache Beam pipeline on this runner (DirectRunner, DataflowRunner, "
                           "FlinkRunner, SparkRunner); other unknown flags are Beam's pipeline options")
  args, pipeline_args = parser.parse_known_args(argv)
  if pipeline_args and args.runner is None:
    parser.error(f"unrecognized arguments: {' '.join(pipeline_args)} (Beam's options need --runner)")
  try:
    if args.workers < 1:
      raise ValueError(f"--workers must be at least 1, got {args.workers}")
    if args.batch_size < 1:
      raise ValueError(f"--batch_size must be at least 1, got {args.batch_size}")
    if args.memory_mb < 1:
      raise ValueError(f"--memory_mb must be at least 1, got {args.memory_mb} (every program would fail to start)")
    ks = parse_ks(args.k)
    timeouts = parse_timeouts(args.timeout)
    if not (args.float_tolerance >= 0 and args.double_tolerance >= 0):
      raise ValueError("--float_tolerance and --double_tolerance must not be negative")
    tolerance = typed.Tolerance(float=args.float_tolerance, double=args.double_tolerance)
    limits = execution.Limits(timeout_s=PAPER_TIMEOUT_S, memory_mb=args.memory_mb)
    beam_args = None if args.runner is None else ["--runner", args.runner, *pipeline_args]
    metrics = score(args.predictions, args.benchmark, args.output, parse_languages(args.languages),
                    args.workers, limits, ks, batch_size=args.batch_size, pipeline_args=beam_args,
                    timeouts=timeouts, tolerance=tolerance, whole=args.whole_programs)
  except (ValueError, OSError, OutputLocked) as error:
    print(f"error: {error}", file=sys.stderr)
    return 2
  print(summary(metrics))
  return 1 if metrics["unscored_predictions"] else 0


if __name__ == "__main__":
  sys.exit(main())
