"""Score infilling predictions by execution: pass@k per HumanEval-infilling subset.

sample.py's predictions for `python -m evaluation.infilling prompts` carry `qid` (the task id),
`language`, `sample_id`, `code` (the generated middle) and `finish_reason`. Each middle is put between
its problem's prefix and suffix and run in the sandbox: on typed HumanEval's test cases, the values
compared outside (155 of HumanEval's 164 problems), or with HumanEval's test under the nonce harness
where typed HumanEval has no question (program.py says how each verdict is made). Scoring is
evaluation/resumable.py's loop, the one every benchmark shares: DIR/results.jsonl gets one line per
prediction as it finishes, so a killed run resumes and a rerun reuses every verdict it has; middles
of one problem that are equal run once; with `--runner`, the same units run as an Apache Beam
pipeline (evaluation/beam_scoring.py).

DIR/metrics.json holds per subset: pass@k (the unbiased estimator, evaluation/passk.py; k no larger
than the samples of every problem), the problems predicted (of the subset's size), the share of
predictions passed / failed / error / timeout, how many stopped at --max_decode_length or came from a
truncated prompt, and how many of its problems the nonce harness judged (nonce_judged_problems); and
for the file: the problems predicted that the nonce harness judged (nonce_judged: how many, of how
many, their HumanEval ids; printed too), the predictions whose qid is no problem of the scored
subsets (unknown_qids), every line that is not a valid prediction (file:line: why), and what the run
did (programs executed, verdicts reused).
"""

from __future__ import annotations

import collections
import dataclasses
import functools
from collections.abc import Callable, Iterable, Mapping, Sequence

import storage
from evaluation import beam_scoring, resumable
from evaluation.infilling.problems import Problem, Subset, problems_by_id
from evaluation.benchmark_data import humaneval_number
from evaluation.infilling.program import JUDGE, TIMEOUT_S, Status, identity, question_of, run_middle
from evaluation import passk
from evaluation.passk import DEFAULT_KS, mean_pass_at_k
from evaluation.resumable import Prediction
from languages import get as language_named
from sandbox import batching, execution
from sandbox.renderers.python import RENDERER as PYTHON

LIMITS = execution.Limits(timeout_s=TIMEOUT_S)


@dataclasses.dataclass(frozen=True)
class Read:
  """A predictions file as read against the problems."""
  predictions: list[Prediction]
  invalid: list[str]              # file:line: why, for every line that is not a valid prediction
  unknown_qids: int               # of them, lines whose qid names no problem of the scored subsets


def _python_only(record: dict, problem: Problem) -> str:
  language = language_named(record.get("language", "python")).name
  if language != "python":
    raise ValueError(f"language {record.get('language')!r}; HumanEval-infilling is Python")
  return language


def read_predictions(path: str, problems: Mapping, language_of: Callable[[dict, object], str] = _python_only,
                     unknown_means: str = "no problem of the subsets scored") -> Read:
  """The valid predictions of a sample.py output (the shared reader), counting those whose qid names
  no problem; `language_of(record, problem)` is a prediction's language (or raises: an invalid line)."""
  unknown = 0

  def resolve(record: dict) -> tuple[str, str]:
    nonlocal unknown
    qid = str(record["qid"])
    if qid not in problems:
      unknown += 1
      raise ValueError(f"unknown qid {qid!r} ({unknown_means})")
    return language_of(record, problems[qid]), qid

  predictions, invalid = resumable.read_predictions(path, resolve)
  return Read(predictions, invalid, unknown)


class InfillingBenchmark(resumable.Benchmark):
  """HumanEval-infilling for the shared scorer: a program is what decides the middle's verdict
  (program.identity), so predictions of one problem with the same middle share one execution."""
  command = "evaluation.infilling"

  def __init__(self, problems: Mapping[str, Problem], limits: execution.Limits = LIMITS,
               ks: Sequence[int] = DEFAULT_KS):
    self.problems, self.limits, self.ks = problems, limits, tuple(ks)

  def program(self, prediction: Prediction) -> str:
    return identity(self.problems[prediction.qid], prediction.code)

  def settings(self, language: str) -> dict:
    return {"limits": dataclasses.asdict(self.limits), "judge": JUDGE}

  @staticmethod
  def result_key(record: dict) -> tuple | None:
    statuses = {s.value for s in Status}
    return (record["language"], record["qid"], record["sample_id"]) if record.get("status") in statuses else None

  def run(self, unit, stats):
    version = execution.toolchain_version(PYTHON.toolchain)
    stats.alone += len(unit)  # interpreted: nothing to build
    return [{**run_middle(self.problems[p.qid], p.code, self.limits), "toolchain": version} for p in unit]

  def summarise(self, predictions, results) -> dict:
    by_subset: dict[Subset, list[Prediction]] = collections.defaultdict(list)
    for p in predictions:
      if p.key in results:
        by_subset[self.problems[p.qid].subset].append(p)
    out: dict = {"subsets": [s.value for s in Subset if s in by_subset]}
    for subset, scored in by_subset.items():
      out[subset.value] = {**subset_metrics(subset, [results[p.key] for p in scored], self.ks),
                           **resumable.sampling_counts(scored),
                           "nonce_judged_problems": nonce_judged(self.problems[p.qid] for p in scored)["problems"]}
    out["nonce_judged"] = nonce_judged(self.problems[p.qid] for ps in by_subset.values() for p in ps)
    return out


def nonce_judged(problems: Iterable[Problem]) -> dict:
  """Of `problems` (each counted once), those the nonce harness judges, having no typed question: how
  many, of how many, and their HumanEval ids."""
  distinct = {p.task_id: p for p in problems}.values()
  nonce = [p for p in distinct if question_of(p) is None]
  return {"problems": len(nonce), "of": len(distinct),
          "humaneval_ids": sorted({p.humaneval_id for p in nonce}, key=humaneval_number)}


def infilling_benchmark(subsets: Sequence[Subset], limits: execution.Limits, ks: Sequence[int]) -> InfillingBenchmark:
  """The benchmark of `subsets` (built again in each Beam worker)."""
  return InfillingBenchmark(problems_by_id(subsets), limits, ks)


def subset_metrics(subset: Subset, records: Sequence[dict], ks: Sequence[int]) -> dict:
  """pass@k and the verdicts' shares over one subset's records (one per prediction)."""
  per_problem: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
  for r in records:
    per_problem[r["qid"]][0] += 1
    per_problem[r["qid"]][1] += r["status"] == Status.PASSED.value
  statuses = collections.Counter(r["status"] for r in records)
  percent = lambda n: round(100 * n / len(records), 4) if records else None  # noqa: E731
  return {**mean_pass_at_k({qid: (n, c) for qid, (n, c) in per_problem.items()}, ks=tuple(ks)),
          "not_computable": passk.not_computable({qid: (n, c) for qid, (n, c) in per_problem.items()}, ks),
          **{f"percent_{s.value}": percent(statuses[s.value]) for s in Status},
          "num_predictions": len(records), "num_problems": len(per_problem), "subset_size": subset.published_size,
          "samples_per_problem": sorted({n for n, _ in per_problem.values()}),
          "counts": {s.value: statuses[s.value] for s in Status}}


def score(predictions_path: str, output_dir: str, subsets: Sequence[Subset] = tuple(Subset),
          limits: execution.Limits = LIMITS, ks: Sequence[int] = DEFAULT_KS, workers: int | None = None,
          batch_size: int = batching.DEFAULT_BATCH_SIZE, pipeline_args: Sequence[str] | None = None,
          progress: bool = True) -> dict:
  """Scores the predictions not yet in output_dir/results.jsonl and writes output_dir/metrics.json:
  here with `workers` threads, or with `pipeline_args` (`--runner` and Beam's options) as a Beam
  pipeline on that runner's workers."""
  problems = problems_by_id(subsets)
  read = read_predictions(predictions_path, problems)
  scorer = InfillingBenchmark(problems, limits, ks)
  if pipeline_args is None or beam_scoring.runs_here(pipeline_args):
    lacking = execution.missing(PYTHON.toolchain)
    if lacking:
      raise RuntimeError(f"cannot run the infilling sandbox: missing {', '.join(lacking)}")
  make = functools.partial(infilling_benchmark, tuple(subsets), limits, tuple(ks))
  results, report = beam_scoring.dispatch(scorer, make, read.predictions, output_dir, pipeline_args, workers,
                                          batch_size, progress, source=predictions_path)
  scoring = report.as_dict()
  metrics = {"benchmark": "humaneval-infilling", "predictions": storage.resolve(predictions_path),
             "limits": dataclasses.asdict(limits), "judge": JUDGE,
             "toolchain": execution.toolchain_version(PYTHON.toolchain), "scored_now": scoring["scored_now"],
             **scorer.summarise(read.predictions, results), "unknown_qids": read.unknown_qids,
             "invalid_predictions": read.invalid, "unscored_predictions": report.unscored, "scoring": scoring}
  storage.write_json(storage.join(output_dir, "metrics.json"), metrics)
  return metrics


COLUMNS = (("percent_passed", "% passed"), ("percent_failed", "% failed"), ("percent_error", "% error"),
           ("percent_timeout", "% timed out"), ("percent_prompt_truncated", "% prompt truncated"),
           ("percent_cut_by_length", "% at max length"))


def table(metrics: dict) -> str:
  """The per-subset markdown table printed at the end of a run."""
  return "\n".join(resumable.table(
      metrics, metrics["subsets"],
      [("subset", lambda name, m: name), ("problems", lambda name, m: f"{m['num_problems']} of {m['subset_size']}"),
       ("predictions", lambda name, m: str(m["num_predictions"]))], COLUMNS, 4))


def summary(metrics: dict) -> str:
  """What a scoring run prints: the table, what it ran, and every count that qualifies the scores."""
  scoring = metrics["scoring"]
  lines = [table(metrics) if metrics["subsets"] else "no prediction scored", "",
           f"scored now: {metrics['scored_now']} predictions with {scoring['programs_executed']} executions "
           f"({scoring['duplicates_reused']} reused a verdict, {scoring['duplicates_reused_from_earlier_runs']} "
           "of them from an earlier run)"]
  partial = [f"{name} ({metrics[name]['num_problems']} of {metrics[name]['subset_size']})"
             for name in metrics["subsets"] if metrics[name]["num_problems"] < metrics[name]["subset_size"]]
  if partial:
    lines.append(f"note: predictions cover part of a subset: {', '.join(partial)}; pass@k is over those problems")
  lines += passk.not_computable_lines({name: metrics[name] for name in metrics["subsets"]})
  nonce = metrics["nonce_judged"]
  if nonce["problems"]:
    lines.append(f"note: {nonce['problems']} of {nonce['of']} problems judged by the nonce harness (no typed "
                 f"question): {', '.join(nonce['humaneval_ids'])}; a middle there can forge a pass, the others' "
                 "values are compared outside the sandbox (docs/infilling.md)")
  if metrics["unknown_qids"]:
    lines.append(f"warning: {metrics['unknown_qids']} predictions name a qid that is no problem of the subsets "
                 "scored (listed below with the invalid lines)")
  lines += resumable.listed_lines(metrics)
  lines += resumable.sampling_warnings({name: metrics[name] for name in metrics["subsets"]})
  lines += resumable.unscored_lines(metrics["unscored_predictions"])
  return "\n".join(lines)
