"""Score completions of practical Python tasks (data/practical_tasks.py) as CodeInsight does (Beau &
Crabbé 2024, §4): pass@1 by unit tests, overall and per category, plus BLEU and CodeBLEU against the
reference solution; and mean ± std over seeds for a grid of fine-tuning runs.

  python -m evaluation.practical --predictions P.jsonl --dataset D.jsonl --output_dir DIR \
      [--labels derived|dataset]

P is sample.py's output for data.practical_tasks.prompt_records: `qid`, `sample_id`, `code` (the text
generated after the problem's prompt). Each completion is cut where its function ends, appended to
the prompt and run in the bubblewrap sandbox (sandbox/execution.py) with numpy and pandas
importable, every unit test in its own try block. Scoring is evaluation/resumable.py's loop, the one
every benchmark shares: DIR/results.jsonl gets one line per prediction as it finishes, so a killed
run resumes, and completions of a problem that are the same once cut run once; a malformed line is
reported with its file:line and the others scored. DIR/metrics.json holds, overall and per category (a problem counts in each of its categories): problems, pass@1 (mean over problems
of c/n, in %), tests_passed (% of the unit tests of every sample), BLEU and CodeBLEU (0-100) of each
problem's first sample. The categories are the dataset's labels, or (--labels derived, the default
for a dataset without any) the labels and package data/practical_labels.py derives from each
reference solution by the paper's rules (its Table 9); the table shows labels, then packages, as the
paper's Table 5 does.

The unit tests are assert blocks; their verdicts are reached outside the sandbox, as for typed
HumanEval (sandbox/judge.py). evaluation/practical/assertions.py rewrites each test so that the candidate's
run records, as plain data (sandbox/recorded_values.py), the values of the leaves of each assertion
that depend on its code; the reference solution runs the same rewritten tests in its own sandbox once
per problem (and must pass them); each assertion is then evaluated here over the candidate's values
and the reference's values of its other leaves. The candidate's process never holds a compared-with
value or a verdict it could write: whatever it prints is a claim about values, and an object that is
not plain data (one equal to everything) fails the check that uses it. What it can still do is what a
function could: return the right value. One limit: an assertion on a bare boolean computed from the
candidate's behaviour (`assert raised`) is decided by the boolean the candidate's process reports.
"""

from __future__ import annotations

import quiet

if __name__ == "__main__":  # before Beam and TensorFlow are imported: no start-up lines
  quiet.setup()

import argparse
import collections
import dataclasses
import math
import os
import sys
from collections.abc import Iterable, Mapping, Sequence

from data.practical_labels import LABEL_SOURCES, is_package, with_labels
from data.practical_tasks import SMALL_DATASET, Problem, categories, load_problems, skipped_warning
from evaluation import resumable
from sandbox import execution
from evaluation.passk import mean_pass_at_k
# Running one completion: evaluation/practical/program.py (its names re-exported, the reference
# cache _REFERENCE too: tests clear it).
from evaluation.practical.program import (_REFERENCE, PACKAGES, THREADS_ENV, ReferenceFailure, completion_code,
                                          generated_function, program, reference_function, reference_records,
                                          rewritten_tests, run_problem, site_entries, site_packages, toolchain)
from evaluation.resumable import Prediction
import storage

# ---- scoring a predictions file: evaluation/resumable.py's loop ---------------------------------

JUDGE = "assertions decided outside the sandbox, v2"  # part of a result's identity (Benchmark.settings)

def read_predictions(path: str, problems: Mapping[str, Problem]) -> tuple[list[Prediction], list[str]]:
  """The valid predictions of a sample.py output and one message per line that is not one (file:line:
  malformed, unknown qid, not Python, a second prediction for one sample): the shared reader."""

  def resolve(record: dict) -> tuple[str, str]:
    qid = str(record["qid"])
    if qid not in problems:
      raise ValueError(f"unknown qid {qid!r} (not among the problems given)")
    language = record.get("language", "python")
    if not isinstance(language, str) or language.lower() != "python":
      raise ValueError(f"language {language!r}; practical tasks are Python")
    return "python", qid

  return resumable.read_predictions(path, resolve)


def read_results(path: str) -> dict[tuple[str, str, int | str], dict]:
  """Records already in results.jsonl by (language, qid, sample_id), the later line winning; a torn
  last line is cut off, any other unreadable line ignored (that prediction is scored again)."""
  return storage.read_results(path, PracticalBenchmark.result_key)


class PracticalBenchmark(resumable.Benchmark):
  """Practical tasks for the shared scorer: a program is the prompt plus the completion as
  completion_code cuts it (so completions that differ only after the function share a run)."""
  command = "evaluation.practical"

  def __init__(self, problems: Mapping[str, Problem], limits: execution.Limits):
    self.problems, self.limits = problems, limits

  @staticmethod
  def result_key(record: dict) -> tuple:
    # Results written before the shared loop carry no language: they are all Python.
    return record.get("language", "python"), record["qid"], record["sample_id"]

  def program(self, prediction: Prediction) -> str:
    return completion_code(self.problems[prediction.qid], prediction.code)

  def settings(self, language: str) -> dict:
    # The judge's version too: results of the in-sandbox verdicts (before values-out) are redone.
    return {"limits": dataclasses.asdict(self.limits), "judge": JUDGE}

  def run(self, unit, stats):
    version = execution.toolchain_version(toolchain())
    stats.alone += len(unit)  # interpreted: nothing to build
    return [{**run_problem(self.problems[p.qid], p.code, self.limits), "toolchain": version} for p in unit]

  def summarise(self, predictions, results) -> dict:
    return metrics(list(self.problems.values()), predictions, results)


def group_metrics(problems: Sequence[Problem], records: Mapping[str, list[dict]],
                  completions: Mapping[str, str]) -> dict:
  """CodeInsight's columns over a group of problems. `records`: each problem's result records;
  `completions`: each problem's sample-0 completion (BLEU and CodeBLEU use one sample per problem)."""
  import sacrebleu
  from codebleu import calc_codebleu

  if not problems:  # a category none of whose predictions could be scored
    return {"problems": 0, **{k: None for k in ("pass@1", "tests_passed", "bleu", "codebleu")}}
  counts = {p.problem_id: (len(records[p.problem_id]), sum(r["passed"] for r in records[p.problem_id]))
            for p in problems}
  tests = sum(r["tests"] for p in problems for r in records[p.problem_id])
  passed = sum(r["tests_passed"] for p in problems for r in records[p.problem_id])
  hypotheses = [generated_function(p, completions[p.problem_id]) for p in problems]
  references = [reference_function(p) for p in problems]
  # codebleu counts a dataflow score of 0 as 1 (`dataflow_match_score or 1`): its library's rule.
  codebleu = calc_codebleu(references, hypotheses, lang="python")["codebleu"]
  return {"problems": len(problems),
          "pass@1": round(100 * mean_pass_at_k(counts, ks=(1,))["pass@1"], 4),
          "tests_passed": round(100 * passed / tests, 4) if tests else None,
          "bleu": round(sacrebleu.corpus_bleu(hypotheses, [references]).score, 4),
          "codebleu": round(100 * codebleu, 4)}


def metrics(problems: Sequence[Problem], predictions: Sequence[Prediction],
            results: Mapping[tuple[str, int], dict]) -> dict:
  """group_metrics overall and per category (most frequent first), over the scored predictions."""

  records: dict[str, list[dict]] = collections.defaultdict(list)
  first: dict[str, Prediction] = {}
  for p in sorted(predictions, key=lambda p: p.sample_id):
    if p.key in results:
      records[p.qid].append(results[p.key])
      first.setdefault(p.qid, p)
  scored = [p for p in problems if records[p.problem_id]]
  completions = {qid: p.code for qid, p in first.items()}
  out = {"overall": group_metrics(scored, records, completions), "categories": {},
         "problems_left_out": [p.problem_id for p in problems if not records[p.problem_id]],
         "sampling": resumable.sampling_counts([p for p in predictions if p.key in results])}
  for label in categories(scored):
    group = [p for p in scored if label in p.categories]
    out["categories"][label] = group_metrics(group, records, completions)
  return out


def score_predictions(predictions_path: str, problems: Mapping[str, Problem], output_dir: str,
                      workers: int | None = None, limits: execution.Limits = execution.Limits(),
                      progress: bool = False, labels: str = "dataset") -> dict:
  """Score the predictions not yet in output_dir/results.jsonl, then write output_dir/metrics.json.
  `labels` says where the problems' categories came from (data.practical_labels.with_labels), for
  metrics.json.
  Every problem of `problems` needs a prediction (a ValueError counts and names the missing ones):
  metrics over a silently smaller set of problems would not compare across runs. A malformed line is
  reported in metrics.json's invalid_predictions (file:line) and the others are scored."""
  predictions, invalid = read_predictions(predictions_path, problems)
  predicted = {p.qid for p in predictions}
  missing = [qid for qid in problems if qid not in predicted]
  if missing:
    raise ValueError(f"{predictions_path}: no prediction for {len(missing)} of {len(problems)} problems: "
                     f"{', '.join(missing[:10])}{' ...' if len(missing) > 10 else ''}")
  lacking = execution.missing(toolchain())
  if lacking:
    raise RuntimeError(f"cannot run the practical tasks' sandbox: missing {', '.join(lacking)}")
  scorer = PracticalBenchmark(problems, limits)
  results, report = resumable.score_predictions(scorer, predictions, output_dir, workers, progress=progress,
                                                source=predictions_path)
  scoring = report.as_dict()
  values = {"predictions": storage.resolve(predictions_path), "limits": dataclasses.asdict(limits),
            "toolchain": execution.toolchain_version(toolchain()), "scored_now": scoring["scored_now"],
            "labels": labels, **scorer.summarise(predictions, results), "invalid_predictions": invalid,
            "unscored_predictions": report.unscored, "scoring": scoring}
  storage.write_json(storage.join(output_dir, "metrics.json"), values)
  return values


COLUMNS = (("problems", "problems"), ("pass@1", "pass@1"), ("tests_passed", "% tests passed"),
           ("bleu", "BLEU"), ("codebleu", "CodeBLEU"))


def table(values: dict) -> str:
  """The per-category markdown table of a metrics.json: overall, then the labels, then the packages
  (each most frequent first), as the paper's Table 5 lists them."""
  lines = ["| category | " + " | ".join(t for _, t in COLUMNS) + " |", "|" + "---|" * (len(COLUMNS) + 1)]

  def row(label: str, group: dict) -> str:
    cells = [str(group[k]) if k == "problems" else ("–" if group[k] is None else f"{group[k]:.1f}")
             for k, _ in COLUMNS]
    return f"| {label} | " + " | ".join(cells) + " |"

  lines.append(row("overall", values["overall"]))
  for kind, groups in labels_then_packages(values["categories"]):
    lines += [f"| *{kind}* |" + " |" * len(COLUMNS), *(row(label, group) for label, group in groups)]
  return "\n".join(lines)


def denominator_line(values: dict, loaded: int, skipped: int) -> str:
  """Under the table: how many problems pass@1 is over, against the dataset's records, and every
  problem left out of it (no prediction of it has a verdict: metrics.json's problems_left_out)."""
  scored, left_out = values["overall"]["problems"], values.get("problems_left_out", [])
  predicted = scored + len(left_out)
  line = (f"pass@1 over {scored} problems: {predicted} predicted of the {loaded} loaded from the dataset"
          + (f" ({skipped} bad record{'s' if skipped > 1 else ''} skipped)" if skipped else ""))
  if left_out:
    line += (f"; {len(left_out)} left out, no prediction of them scored: {', '.join(left_out[:10])}"
             + (" ..." if len(left_out) > 10 else ""))
  return line


def labels_then_packages(categories: Mapping[str, dict]) -> list[tuple[str, list[tuple[str, dict]]]]:
  """("labels", [(label, value), ...]) then ("packages", [...]), each kept only when it has any: the
  order of the paper's Table 5."""
  kinds = [(kind, [(c, v) for c, v in categories.items() if is_package(c) == packages])
           for kind, packages in (("labels", False), ("packages", True))]
  return [(kind, items) for kind, items in kinds if items]


# ---- a grid of runs: mean ± std over seeds per train fraction ------------------------------------

# Overall (categories get pass@1); the held-out losses where a cell's metrics carry them (the grid adds
# train.py's loss on the test problems before fine-tuning and after it).
SUMMARY_METRICS = ("pass@1", "tests_passed", "bleu", "codebleu", "held_out_loss_start", "held_out_loss_end")


def _stat(values: Sequence[float]) -> dict:
  """Mean and sample std (ddof=1) over seeds; std 0 for a single seed (n says so)."""
  mean = sum(values) / len(values)
  std = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1)) if len(values) > 1 else 0.0
  return {"mean": round(mean, 4), "std": round(std, 4), "n": len(values)}


def summarise(cells: Iterable[tuple[float, int, dict]]) -> dict:
  """cells: (train_fraction, seed, metrics as score_predictions returns). Per train fraction (keys
  "%g" of it), mean ± std over seeds: overall for SUMMARY_METRICS, per category for pass@1 (over the
  seeds whose test split has the category)."""
  by_fraction: dict[float, dict[int, dict]] = collections.defaultdict(dict)
  for fraction, seed, values in cells:
    if seed in by_fraction[fraction]:
      raise ValueError(f"two cells for train fraction {fraction:g}, seed {seed}")
    by_fraction[fraction][seed] = values
  fractions = sorted(by_fraction)
  labels: collections.Counter = collections.Counter()
  for runs in by_fraction.values():
    for values in runs.values():
      labels.update({label: values["categories"][label]["problems"] for label in values["categories"]})
  out: dict = {"train_fractions": [f"{f:g}" for f in fractions],
               "seeds": {f"{f:g}": sorted(by_fraction[f]) for f in fractions},
               "overall": {}, "categories": {label: {} for label, _ in labels.most_common()}}
  for f in fractions:
    runs = list(by_fraction[f].values())
    overall = {m: [r["overall"][m] for r in runs if r["overall"].get(m) is not None] for m in SUMMARY_METRICS}
    out["overall"][f"{f:g}"] = {m: _stat(v) if v else None for m, v in overall.items()}
    for label in out["categories"]:
      values = [r["categories"][label]["pass@1"] for r in runs
                if r["categories"].get(label, {}).get("pass@1") is not None]
      out["categories"][label][f"{f:g}"] = _stat(values) if values else None
  return out


def _cell(stat: dict | None, digits: int = 1) -> str:
  return "–" if not stat or not stat["n"] else f"{stat['mean']:.{digits}f} ± {stat['std']:.{digits}f}"


def summary_markdown(summary: dict) -> str:
  fractions = summary["train_fractions"]
  header = [f"train {f} (n={len(summary['seeds'][f])})" for f in fractions]
  lines = ["pass@1 (%), mean ± std over seeds (sample std; 0 for one seed)", "",
           "| category | " + " | ".join(header) + " |", "|" + "---|" * (len(header) + 1)]
  for kind, rows in labels_then_packages(summary["categories"]):
    lines += [f"| *{kind}* |" + " |" * len(fractions),
              *(f"| {label} | " + " | ".join(_cell(row[f]) for f in fractions) + " |" for label, row in rows)]
  overall = " | ".join(_cell(summary["overall"][f]["pass@1"]) for f in fractions)
  lines.append(f"| **overall** | {overall} |")
  lines += ["", "overall, mean ± std over seeds", "",
            "| metric | " + " | ".join(header) + " |", "|" + "---|" * (len(header) + 1)]
  for metric in SUMMARY_METRICS:
    if any(summary["overall"][f][metric] for f in fractions):
      digits = 3 if metric.startswith("held_out_loss") else 1
      lines.append(f"| {metric} | " + " | ".join(_cell(summary["overall"][f][metric], digits) for f in fractions)
                   + " |")
  return "\n".join(lines) + "\n"


def _figure(summary: dict):
  """Grouped bars: pass@1 per category (and overall), one bar per train fraction, std error bars."""
  from matplotlib.figure import Figure  # no pyplot: its global state and backend choice stay untouched

  rows = [*summary["categories"].items(), ("overall", {f: summary["overall"][f]["pass@1"]
                                                       for f in summary["train_fractions"]})]
  fractions = summary["train_fractions"]
  width = 0.8 / max(len(fractions), 1)
  figure = Figure(figsize=(max(6, 0.9 * len(rows) + 2), 4), layout="constrained")
  axes = figure.add_subplot()
  for i, f in enumerate(fractions):
    stats = [row[f] or {"mean": 0.0, "std": 0.0} for _, row in rows]  # no test problem: no bar
    axes.bar([j + (i - (len(fractions) - 1) / 2) * width for j in range(len(rows))],
             [s["mean"] for s in stats], width, yerr=[s["std"] for s in stats], capsize=2,
             label=f"train {f} (n={len(summary['seeds'][f])})")
  axes.set_xticks(range(len(rows)), [label for label, _ in rows], rotation=30, ha="right")
  axes.set_ylabel("pass@1 (%)")
  axes.legend(fontsize="small")
  return figure


def write_summary(cells: Iterable[tuple[float, int, dict]], output_dir: str) -> dict:
  """summarise(cells), written as summary.json, summary.md and pass_at_1_by_category.png."""
  summary = summarise(cells)
  storage.makedirs(output_dir)
  storage.write_json(storage.join(output_dir, "summary.json"), summary)
  storage.write_atomic(storage.join(output_dir, "summary.md"), summary_markdown(summary))
  storage.save_figure(_figure(summary), storage.join(output_dir, "pass_at_1_by_category.png"))
  return summary


VARIANT_METRICS = (("pass@1", "pass@1"), ("tests_passed", "% tests passed"), ("bleu", "BLEU"),
                   ("codebleu", "CodeBLEU"))


def variant_summary(summaries: Mapping[str, dict]) -> dict:
  """Per prompt variant (summaries: variant -> summarise's output), per train fraction, the overall
  mean ± std of VARIANT_METRICS and the seeds: the paper's prompt study (its Table 2) over the grid."""
  return {variant: {f: {"seeds": summary["seeds"][f], **{m: summary["overall"][f][m] for m, _ in VARIANT_METRICS}}
                    for f in summary["train_fractions"]}
          for variant, summary in summaries.items()}


def variant_markdown(table_: dict) -> str:
  lines = ["overall metrics per prompt variant, mean ± std over seeds (the paper's Table 2: its prompt study)", "",
           "| prompt | train fraction (n) | " + " | ".join(t for _, t in VARIANT_METRICS) + " |",
           "|" + "---|" * (len(VARIANT_METRICS) + 2)]
  for variant, fractions in table_.items():
    for f, row in fractions.items():
      lines.append(f"| {variant} | {f} (n={len(row['seeds'])}) | "
                   + " | ".join(_cell(row[m]) for m, _ in VARIANT_METRICS) + " |")
  return "\n".join(lines) + "\n"


def write_variant_summary(summaries: Mapping[str, dict], output_dir: str) -> dict:
  """variant_summary(summaries), written as prompt_variants.json and prompt_variants.md."""
  table_ = variant_summary(summaries)
  storage.makedirs(output_dir)
  storage.write_json(storage.join(output_dir, "prompt_variants.json"), table_)
  storage.write_atomic(storage.join(output_dir, "prompt_variants.md"), variant_markdown(table_))
  return table_


# ---- entry point ---------------------------------------------------------------------------------

def main(argv: Sequence[str] | None = None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--predictions", required=True, help="sample.py's predictions JSONL")
  parser.add_argument("--dataset", default=SMALL_DATASET, help="the problems (JSON or JSONL)")
  parser.add_argument("--output_dir", required=True, help="directory for results.jsonl and metrics.json")
  parser.add_argument("--workers", type=int, default=os.cpu_count(), help="sandboxes at a time")
  parser.add_argument("--timeout", type=float, default=execution.Limits.timeout_s,
                      help="wall-clock seconds of each program's run")
  parser.add_argument("--labels", choices=LABEL_SOURCES, default=None,
                      help="categories: the dataset's, or derived from each reference solution by the paper's "
                           "rules (data/practical_labels.py); default: the dataset's when it has any, else derived")
  args = parser.parse_args(argv)
  skipped: list[str] = []
  try:
    if args.workers < 1:
      raise ValueError(f"--workers must be at least 1, got {args.workers}")
    labelled, labels = with_labels(load_problems(args.dataset, skipped), args.labels)
    dataset = {p.problem_id: p for p in labelled}
    # The dataset may hold more than was sampled (a test split): score the predicted problems (a
    # line naming a problem the dataset lacks is reported with its file:line, the others scored).
    predicted = {p.qid for p in read_predictions(args.predictions, dataset)[0]}
    if not predicted:
      raise ValueError(f"{args.predictions}: no valid prediction for a problem of {args.dataset}")
    problems = {qid: p for qid, p in dataset.items() if qid in predicted}
    values = score_predictions(args.predictions, problems, args.output_dir, args.workers,
                               execution.Limits(timeout_s=args.timeout), progress=True, labels=labels)
  except (ValueError, OSError, RuntimeError) as error:  # OutputLocked is a RuntimeError
    print(f"error: {error}", file=sys.stderr)
    return 2
  print(table(values))
  print(denominator_line(values, len(dataset), len(skipped)))
  if skipped:  # under the table: those problems are in no denominator
    print(skipped_warning(args.dataset, skipped))
  print(f"\nscored now: {values['scored_now']} ({values['scoring']['duplicates_reused']} by a duplicate's run)")
  for message in values["invalid_predictions"][:20]:
    print(f"invalid prediction: {message}", file=sys.stderr)
  for message in values["unscored_predictions"][:20]:
    print(message)
  if "sampling" in values:
    c = values["sampling"]
    print(f"prompt truncated: {c['percent_prompt_truncated']:g}% of the scored predictions; at max length: "
          f"{c['percent_cut_by_length']:g}%")
    for line in resumable.sampling_warnings({"overall": c}):
      print(line)
  for line in resumable.unscored_lines(values["unscored_predictions"]):
    print(line)
  return 1 if values["unscored_predictions"] else 0


if __name__ == "__main__":
  sys.exit(main())
