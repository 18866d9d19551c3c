"""Score MultiPL-E problems MultiPL-E's way, with codelm's scorer and sandbox.

A prediction's program is MultiPL-E's: the problem's prompt + the completion + "\\n" + its tests (the
bigcode harness's: prompt.strip() + completion + "\\n" + tests), run whole by execution.py as
MultiPL-E's evaluator for the language runs it; it passes when its status is OK and its exit code 0
(MultiPL-E's pass_k.py). Three inputs, one scorer:
- sample.py's predictions for prompts from `python -m evaluation.prompts multiple`, with the dataset;
- MultiPL-E's completions files (<name>.json.gz, which carry prompt and tests themselves);
- the harness's generations JSON (`--save_generations`) for one language, with the dataset in its order.
Scoring is evaluation/resumable.py's loop, the one every benchmark shares (one results.jsonl line per
prediction, resumable; each distinct program run once; `--runner` for Beam), and writes metrics.json
in evaluation.score's shape (per codelm language: pass@k and the shares of each status), so the
paper's tables read it as they read typed HumanEval's, and MultiPL-E's results files
(<name>.results.json.gz, one folder per language) for MultiPL-E's own pass_k.py.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import time
from collections.abc import Mapping, Sequence

import storage
from evaluation import beam_scoring, resumable
from evaluation.multiple import execution as multiple_execution
from evaluation.multiple import files
from evaluation.multiple.problems import Problem, read_problems
from evaluation import passk
from evaluation.passk import DEFAULT_KS, mean_pass_at_k
from evaluation.resumable import Prediction
from languages import BY_NAME, get as language_named
from sandbox import batching, execution
from sandbox.renderers import NOT_EVALUATED

# How a completion joins its prompt: MultiPL-E's prompt as written, or the harness's stripped one.
RULES = ("multiple", "harness")
# Part of a result's identity (resumable.Benchmark.settings): a change of the rule rescores.
JUDGE = "multiple: status OK and exit code 0, v1"
OUTPUT_TAIL = 4000  # characters of stdout and stderr kept per result (MultiPL-E keeps them whole)


def language_key(problem: Problem) -> str:
  """A problem's language as the scorer names it: codelm's name where codelm has it ("cpp",
  "go"), else MultiPL-E's code ("rb"), so metrics.json reads like evaluation.score's."""
  return problem.codelm_language or problem.language


def index_problems(problems: Sequence[Problem]) -> tuple[dict[tuple[str, str], Problem], list[str]]:
  """Problems by (language_key, name); a second problem for one key is reported, the first kept."""
  out: dict[tuple[str, str], Problem] = {}
  invalid = []
  for problem in problems:
    key = (language_key(problem), problem.name)
    if key in out:
      invalid.append(f"{problem.where}: a second problem {problem.name!r} in {key[0]} (the first is "
                     f"{out[key].where}); the first is scored")
      continue
    out[key] = problem
  return out, invalid


def display_name(language: str) -> str:
  return BY_NAME[language].display_name if language in BY_NAME else language


class MultiPLEBenchmark(resumable.Benchmark):
  """MultiPL-E for the shared scorer: a prediction of problem P is P's whole program."""
  command = "evaluation.multiple"

  def __init__(self, problems: Mapping[tuple[str, str], Problem], limits: execution.Limits,
               ks: Sequence[int] = DEFAULT_KS, timeouts: Mapping[str, float] | None = None, rule: str = "multiple"):
    if rule not in RULES:
      raise ValueError(f"unknown prompt rule {rule!r}; one of {', '.join(RULES)}")
    self.problems, self.limits, self.ks, self.rule = problems, limits, tuple(ks), rule
    self.timeouts = dict(multiple_execution.TIMEOUT_S if timeouts is None else timeouts)

  def limits_for(self, language: str) -> execution.Limits:
    return dataclasses.replace(self.limits, timeout_s=self.timeouts.get(language, self.limits.timeout_s))

  def prompt(self, problem: Problem) -> str:
    return problem.harness_prompt if self.rule == "harness" else problem.prompt

  def program(self, prediction: Prediction) -> str:
    problem = self.problems[(prediction.language, prediction.qid)]
    return self.prompt(problem) + prediction.code + "\n" + problem.tests

  def settings(self, language: str) -> dict:
    return {"limits": dataclasses.asdict(self.limits_for(language)), "judge": JUDGE}

  @staticmethod
  def result_key(record: dict) -> tuple | None:
    if record.get("status") not in multiple_execution.STATUSES:
      return None
    return record["language"], record["qid"], record["sample_id"]

  def run(self, unit, stats):
    language = unit[0].language
    version = execution.toolchain_version(multiple_execution.toolchain(language))
    stats.alone += len(unit)  # whole programs with a main each: built one at a time
    verdicts = []
    for p in unit:
      result = multiple_execution.run_program(language, self.program(p), self.limits_for(language))
      verdicts.append({"status": result["status"], "exit_code": result["exit_code"],
                       "passed": multiple_execution.passed(result), "stdout": result["stdout"][-OUTPUT_TAIL:],
                       "stderr": result["stderr"][-OUTPUT_TAIL:], "run_s": result.get("run_s"),
                       "timestamp": int(time.time()), "toolchain": version})
    return verdicts

  def summarise(self, predictions, results) -> dict:
    out: dict = {"languages": [], "toolchains": {}}
    present = sorted({p.language for p in predictions}, key=_language_order)
    for name in present:
      scored = [p for p in predictions if p.language == name and p.key in results]
      if not scored:
        continue
      out[name] = {**language_metrics([results[p.key] for p in scored], self.ks),
                   **resumable.sampling_counts(scored)}
      out["languages"].append(name)
      out["toolchains"][name] = execution.toolchain_version(multiple_execution.toolchain(name))
    return out


def _language_order(name: str) -> tuple[int, str]:
  order = list(BY_NAME)
  return (order.index(name), "") if name in BY_NAME else (len(order), name)


def language_metrics(records: Sequence[dict], ks: Sequence[int]) -> dict:
  """pass@k and the share of each MultiPL-E status over one language's records."""
  per_problem: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
  for r in records:
    per_problem[r["qid"]][0] += 1
    per_problem[r["qid"]][1] += bool(r["passed"])
  statuses = collections.Counter(r["status"] for r in records)
  percent = lambda n: round(100 * n / len(records), 4) if records else None  # noqa: E731
  ok_but_exit = sum(r["status"] == "OK" and not r["passed"] for r in records)
  # What failed while running: Exception, and the finer names some evaluators give (JavaScript's
  # AssertionError, ReferenceError).
  raised = sum(n for status, n in statuses.items() if status not in ("OK", "SyntaxError", "Timeout"))
  return {**mean_pass_at_k({qid: (n, c) for qid, (n, c) in per_problem.items()}, ks=tuple(ks)),
          "not_computable": passk.not_computable({qid: (n, c) for qid, (n, c) in per_problem.items()}, ks),
          "percent_passed": percent(sum(bool(r["passed"]) for r in records)),
          "percent_exception": percent(raised),
          # a compiled program that does not build: evaluation.score's "% error" column
          "percent_error": percent(statuses["SyntaxError"]),
          "percent_timeout": percent(statuses["Timeout"]),
          "percent_ok_nonzero_exit": percent(ok_but_exit),
          "num_predictions": len(records), "num_problems": len(per_problem),
          "samples_per_problem": sorted({n for n, _ in per_problem.values()}),
          "counts": {s: statuses[s] for s in multiple_execution.STATUSES}}


@dataclasses.dataclass(frozen=True)
class Read:
  """An input read against its problems: what the scorer scores."""
  problems: dict[tuple[str, str], Problem]
  predictions: list[Prediction]
  invalid: list[str]           # WHERE: why, for every record that is not a valid prediction
  rule: str                    # how a completion joins its prompt (RULES)


def read_sample_predictions(path: str, dataset: str) -> Read:
  """sample.py's predictions for `evaluation.prompts multiple` prompts of `dataset`."""
  problems, invalid = index_problems_of(dataset)
  by_code: dict[str, set[str]] = collections.defaultdict(set)
  for (key, _), problem in problems.items():
    by_code[problem.language].add(key)
  stripped = collections.Counter()

  def resolve(record: dict) -> tuple[str, str]:
    if not isinstance(record.get("language"), str):
      raise ValueError("a prediction needs a language (a string)")
    language = resolve_language(record["language"], by_code)
    qid = str(record["qid"])
    if (language, qid) not in problems:
      raise ValueError(f"no problem {qid!r} in {language} in {dataset}")
    stripped[record.get("prompt_stripped") is True] += 1
    return language, qid

  predictions, bad = resumable.read_predictions(path, resolve)
  if stripped[True] and stripped[False]:
    raise ValueError(f"{path}: {stripped[True]} predictions were sampled from stripped prompts (prompt_stripped, "
                     f"the harness's rule) and {stripped[False]} from whole ones: score them apart")
  return Read(problems, predictions, invalid + bad, "harness" if stripped[True] else "multiple")


def resolve_language(name: str, by_code: Mapping[str, set[str]]) -> str:
  """A prediction's language as the scorer keys it: a MultiPL-E code of the dataset, or any
  spelling of a codelm language."""
  if name in by_code:
    return next(iter(by_code[name]))
  try:
    return language_named(name).name
  except ValueError:
    raise ValueError(f"language {name!r} is neither a MultiPL-E language of the dataset "
                     f"({', '.join(sorted(by_code))}) nor a codelm language") from None


def index_problems_of(dataset: str) -> tuple[dict[tuple[str, str], Problem], list[str]]:
  problems, invalid = read_problems(dataset)
  indexed, repeated = index_problems(problems)
  return indexed, invalid + repeated


def read_completion_files(path: str) -> Read:
  """MultiPL-E's completions files: each carries its problem (prompt, tests) and its completions. A
  folder is one language's (MultiPL-E's layout), or holds one folder per language (`export`'s)."""
  records, invalid = files.read_completions(path)
  if not records and not invalid and storage.isdir(path):
    for name in storage.listdir(path):
      if storage.isdir(storage.join(path, name)):
        found, bad = files.read_completions(storage.join(path, name))
        records, invalid = records + found, invalid + bad
  if not records and not invalid:
    raise ValueError(f"{path}: no MultiPL-E completions file (<name>.json.gz or <name>.json) in it or in its "
                     "subfolders")
  problems: dict[tuple[str, str], Problem] = {}
  predictions = []
  for record in records:
    problem = files.problem_of(record)
    key = (language_key(problem), problem.name)
    if key in problems:
      invalid.append(f"{problem.where}: a second completions file for {problem.name!r} in {key[0]}")
      continue
    problems[key] = problem
    for index, completion in enumerate(record["completions"]):
      predictions.append(Prediction(problem.name, index, key[0], completion, index + 1))
  return Read(problems, predictions, invalid, "multiple")


def read_harness_generations(path: str, dataset: str, language: str | None) -> Read:
  """The harness's generations JSON for the problems of one language of `dataset`, in its order."""
  problems, invalid = index_problems_of(dataset)
  languages = sorted({key for key, _ in problems})
  if language is not None:
    wanted = resolve_language(language, {p.language: {k} for (k, _), p in problems.items()})
    languages = [wanted] if wanted in languages else []
  if len(languages) != 1:
    raise ValueError(f"--generations: the harness scores one language at a time; {dataset} holds "
                     f"{', '.join(languages) or 'none of it'}: name one with --languages")
  ordered = [p for (key, _), p in problems.items() if key == languages[0]]
  generations, bad = files.read_generations(path, ordered)
  predictions = [Prediction(problem.name, index, languages[0], completion, position + 1)
                 for position, (problem, index, completion) in enumerate(generations)]
  return Read(problems, predictions, invalid + bad, "harness")


def score(read: Read, output_dir: str, source: str, languages: Sequence[str] | None = None,
          workers: int | None = None, limits: execution.Limits = execution.Limits(),
          ks: Sequence[int] = DEFAULT_KS, timeouts: Mapping[str, float] | None = None,
          pipeline_args: Sequence[str] | None = None, progress: bool = True,
          make: functools.partial | None = None, metadata: Mapping | None = None) -> dict:
  """Scores the predictions of `read` not yet in output_dir/results.jsonl; writes metrics.json and
  MultiPL-E's results files (output_dir/multiple/<language>/<name>.results.json.gz)."""
  wanted = None if languages is None else set(languages)
  present = sorted({p.language for p in read.predictions}, key=_language_order)
  not_evaluated = {}
  runnable = []
  for name in present:
    if wanted is not None and name not in wanted:
      continue
    if name not in BY_NAME:
      not_evaluated[name] = "not one of codelm's languages: no toolchain"
    elif name in NOT_EVALUATED:
      not_evaluated[name] = NOT_EVALUATED[name]
    elif (pipeline_args is None or beam_scoring.runs_here(pipeline_args)) and \
        execution.missing(multiple_execution.toolchain(name)):
      not_evaluated[name] = (f"missing {', '.join(execution.missing(multiple_execution.toolchain(name)))}; "
                             "run `make toolchains`")
    else:
      runnable.append(name)
  mine = [p for p in read.predictions if p.language in runnable]
  scorer = MultiPLEBenchmark(read.problems, limits, ks, timeouts, read.rule)
  results, report = beam_scoring.dispatch(scorer, make, mine, output_dir, pipeline_args, workers,
                                          batching.DEFAULT_BATCH_SIZE, progress, source=source)
  written, held_back = write_results_files(scorer, mine, results, storage.join(output_dir, "multiple"), metadata or {})
  scoring = report.as_dict()
  metrics = {"benchmark": "multipl-e", "predictions": storage.resolve(source), "prompt_rule": read.rule,
             "limits": {**dataclasses.asdict(limits), "timeout_s": {n: scorer.limits_for(n).timeout_s for n in runnable}},
             "judge": JUDGE, "scored_now": scoring["scored_now"], **scorer.summarise(mine, results),
             "not_evaluated": not_evaluated, "invalid_predictions": list(read.invalid),
             "unscored_predictions": list(report.unscored), "results_files": written, "results_files_held_back": held_back,
             "scoring": scoring}
  storage.write_json(storage.join(output_dir, "metrics.json"), metrics)
  return metrics


def write_results_files(scorer: MultiPLEBenchmark, predictions: Sequence[Prediction], results: Mapping[tuple, dict],
                        directory: str, metadata: Mapping) -> tuple[int, int]:
  """One <name>.results.json.gz per problem whose predictions all have results, in a folder per
  MultiPL-E language code (pass_k.py reads a folder as one dataset); returns how many were written,
  and how many problems were not (some prediction unscored: a rerun writes them)."""
  by_problem: dict[tuple[str, str], list[Prediction]] = collections.defaultdict(list)
  for p in predictions:
    by_problem[(p.language, p.qid)].append(p)
  written = held_back = 0
  for key, members in sorted(by_problem.items()):
    if not all(p.key in results for p in members):
      held_back += 1  # a rerun writes it once every sample has its verdict
      continue
    problem = scorer.problems[key]
    members.sort(key=lambda p: (str(type(p.sample_id)), p.sample_id))
    if "completions" in problem.record:  # read from MultiPL-E's completions file: its own metadata
      completions = dict(problem.record)
    else:
      completions = files.completions_record(problem, [p.code for p in members], **{
          "temperature": metadata.get("temperature", 0.8), "top_p": metadata.get("top_p", 0.95),
          "max_tokens": metadata.get("max_tokens", 512)})
    entries = [{"program": scorer.program(p), "stdout": results[p.key]["stdout"],
                "stderr": results[p.key]["stderr"], "exit_code": results[p.key]["exit_code"],
                "status": results[p.key]["status"], "timestamp": results[p.key]["timestamp"]} for p in members]
    files.write_results(storage.join(directory, problem.language), files.results_record(completions, entries))
    written += 1
  return written, held_back


COLUMNS = (("percent_passed", "% passed"), ("percent_exception", "% exception"),
           ("percent_error", "% syntax error"), ("percent_timeout", "% timed out"),
           ("percent_prompt_truncated", "% prompt truncated"), ("percent_cut_by_length", "% at max length"))


def table(metrics: dict) -> str:
  """The per-language markdown table printed at the end of a run."""
  lines = resumable.table(metrics, metrics["languages"],
                          [("language", lambda name, m: display_name(name)),
                           ("problems", lambda name, m: str(m["num_problems"])),
                           ("predictions", lambda name, m: str(m["num_predictions"]))], COLUMNS, 3)
  lines += [f"| {display_name(name)} | not evaluated: {why} |" for name, why in metrics["not_evaluated"].items()]
  return "\n".join(lines)


def summary(metrics: dict) -> str:
  scoring = metrics["scoring"]
  lines = [table(metrics), "", f"scored now: {metrics['scored_now']} predictions with "
           f"{scoring['programs_executed']} executions ({scoring['duplicates_reused']} reused a verdict)",
           f"MultiPL-E results files: {metrics['results_files']} problems under multiple/ "
           "(MultiPL-E's pass_k.py reads each language's folder)"]
  if metrics["results_files_held_back"]:
    lines.append(f"warning: {metrics['results_files_held_back']} problems have no results file: some of their "
                 "predictions could not be scored (below); a rerun writes them")
  odd = {name: metrics[name]["percent_ok_nonzero_exit"] for name in metrics["languages"]
         if metrics[name].get("percent_ok_nonzero_exit")}
  for name, share in odd.items():
    lines.append(f"note: {display_name(name)}: {share:g}% of the programs had status OK with a nonzero exit code "
                 "(not passed, as MultiPL-E's pass_k.py counts them)")
  lines += resumable.listed_lines(metrics)
  lines += passk.not_computable_lines({display_name(name): metrics[name] for name in metrics["languages"]})
  lines += resumable.sampling_warnings({display_name(name): metrics[name] for name in metrics["languages"]})
  lines += resumable.unscored_lines(metrics["unscored_predictions"])
  return "\n".join(lines)
