"""Scoring throughput per language, before and after batched compilation, and the paper-scale cost.

  python bench/score_throughput.py [--languages all] [--programs 96] [--workers 2] [--batch_size 32]
      [--repeats 2] [--before_revision REV | --no_before] [--beam] [--duplicates PREDICTIONS.jsonl]

The workload per language is `--programs` distinct programs for the fixture questions of
tests/data/typed_questions.jsonl, made of tests/solutions/<language>.json's hand-written completions
(correct, wrong, throwing in one case, failing to compile) and each question's stub, in turn, each copy
made distinct by a comment line of its own (so no two are the same program and nothing is saved by
running duplicates once: that is counted separately, below). Each is scored three ways in the same
run, each in a fresh process with the same --workers:
  before    the scorer of --before_revision (git worktree; default: the commit before this work):
            one sandbox per program, compile and run;
  alone     today's scorer with --batch_size 1 (each program compiled on its own);
  batched   today's scorer (compiled languages built --batch_size at a time, sandbox/batching.py).
Each way runs --repeats times, interleaved, and its fastest run is reported (this machine's timings
vary by a third between runs). Every way must give the same verdicts (checked: a mismatch is
printed and counted). Printed and written
to JSON: programs/s and seconds of one worker per program for each way, the speedup, and the cost of
the paper's evaluation of one checkpoint (164 problems x 200 samples x 12 languages, generation) and
of the 15-checkpoint ablation, in core-hours (workers x wall time; one worker per core here). Without
running duplicates once, and with it at the duplicate share of a real predictions file
(--duplicates: the share of its programs that repeat an earlier (language, problem, program), read
and keyed as the scorer does).
--beam also scores the whole workload (every language in one file) with the Beam pipeline on the
direct runner with --workers worker processes and compares its programs/s with the local scorer's.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from evaluation import resumable, score  # noqa: E402
from sandbox import execution, typed
from sandbox.renderers import MODULES, get  # noqa: E402
import storage  # noqa: E402

FIXTURES = os.path.join(ROOT, "tests", "data", "typed_questions.jsonl")
SOLUTIONS = os.path.join(ROOT, "tests", "solutions")
BEFORE_REVISION = "fe5c7b8"  # the last commit before batched compilation and the shared scorer
KINDS = ("correct", "wrong", "throws_once", "compile_error")
# A comment line that makes each copy of a completion a program of its own (the completion starts
# inside the function's body; Haskell's continues an equation, so its comment is inline).
COMMENT = {"python": "    # copy {}\n", "r": "  # copy {}\n", "lua": "  -- copy {}\n", "haskell": "{{- copy {} -}} "}
PAPER_PROGRAMS = 164 * 200  # per language and checkpoint: HumanEval, n = 200
CHECKPOINTS = 15  # the scaling ablation: 3 sizes x 5 mixtures

# Run in a fresh interpreter (today's tree or the before worktree): score and report the seconds.
_SCORE = """
import json, sys, time
sys.path.insert(0, {root!r})
from evaluation import score
kwargs = {kwargs}
start = time.perf_counter()
metrics = score.score({predictions!r}, {fixtures!r}, {output!r}, [{language!r}] if {language!r} else None,
                      {workers}, progress=False, **kwargs)
print(json.dumps({{"seconds": time.perf_counter() - start,
                   "scoring": metrics.get("scoring")}}))
"""


def workload(language: str, count: int) -> list[dict]:
  """`count` distinct predictions (module docstring)."""
  renderer = get(language)
  with open(os.path.join(SOLUTIONS, f"{language}.json"), encoding="utf-8") as f:
    data = json.load(f)
  base = [(qid, code) for kind in KINDS for qid, code in data.get(kind, {}).items()]
  base += [(q.qid, renderer.stub(q)) for q in typed.read_questions(FIXTURES)]
  comment = COMMENT.get(language, "  // copy {}\n")
  return [{"qid": base[i % len(base)][0], "language": language, "sample_id": i,
           "code": comment.format(i) + base[i % len(base)][1]} for i in range(count)]


def score_in_process(tree: str, predictions: str, output: str, language: str | None, workers: int,
                     env: dict, **kwargs) -> dict:
  script = _SCORE.format(root=tree, predictions=predictions, fixtures=FIXTURES, output=output,
                         language=language or "", workers=workers, kwargs=repr(kwargs))
  done = subprocess.run([sys.executable, "-c", script], cwd=tree, capture_output=True, text=True, env=env)
  if done.returncode != 0:
    raise RuntimeError(f"scoring in {tree} failed: {done.stderr[-2000:]}")
  return json.loads(done.stdout.strip().splitlines()[-1])


def verdicts(output: str) -> dict:
  with open(os.path.join(output, "results.jsonl"), encoding="utf-8") as f:
    records = [json.loads(line) for line in f]
  return {(r["language"], r["qid"], r["sample_id"]):
          (r["status"], None if r["status"] == "timeout" else tuple(r["cases"])) for r in records}


def before_tree(revision: str) -> str | None:
  """A git worktree of `revision` (None when there is no git history to take it from)."""
  path = tempfile.mkdtemp(prefix="codelm-before-")
  done = subprocess.run(["git", "worktree", "add", "--detach", path, revision], cwd=ROOT,
                        capture_output=True, text=True)
  if done.returncode != 0:
    print(f"'before' skipped: no revision {revision} here ({done.stderr.strip()[:200]})")
    return None
  return path


def duplicate_share(path: str) -> float:
  """The share of a HumanEval predictions file's programs that the scorer runs no more (they repeat an
  earlier (language, problem, program) exactly), read and keyed as `evaluation.score` does."""
  benchmark = score.typed_benchmark("humaneval", execution.Limits(), ())
  predictions, _ = score.read_predictions(path, benchmark.questions)
  distinct = {resumable.program_key(benchmark, p) for p in predictions}
  return 1 - len(distinct) / len(predictions) if predictions else 0.0


def core_hours(seconds_per_program: dict[str, float], programs: int = PAPER_PROGRAMS) -> float:
  return sum(seconds_per_program.values()) * programs / 3600


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--languages", default="all")
  parser.add_argument("--programs", type=int, default=96, help="distinct programs per language")
  parser.add_argument("--workers", type=int, default=os.cpu_count())
  parser.add_argument("--batch_size", type=int, default=32)
  parser.add_argument("--repeats", type=int, default=2, help="runs of each way; the fastest is reported")
  parser.add_argument("--before_revision", default=BEFORE_REVISION)
  parser.add_argument("--no_before", action="store_true")
  parser.add_argument("--beam", action="store_true", help="also the Beam pipeline on the direct runner")
  parser.add_argument("--duplicates", default=None, help="a predictions file whose duplicate share to apply")
  parser.add_argument("--output", default=os.path.join(ROOT, "bench", "results", "score_throughput.json"))
  args = parser.parse_args(argv)
  languages = list(MODULES) if args.languages == "all" else args.languages.split(",")
  env = {**os.environ, "CODELM_TOOLCHAINS": os.path.join(ROOT, ".toolchains")}
  before = None if args.no_before else before_tree(args.before_revision)
  figures: dict = {"programs_per_language": args.programs, "workers": args.workers, "cpus": os.cpu_count(),
                   "batch_size": args.batch_size, "before_revision": args.before_revision if before else None,
                   "languages": {}}
  ways = [("before", before, {}), ("alone", ROOT, {"batch_size": 1}), ("batched", ROOT, {"batch_size": args.batch_size})]
  ways = [w for w in ways if w[1]]
  mismatches = 0
  try:
    with tempfile.TemporaryDirectory() as work:
      everything = []
      for language in languages:
        records = workload(language, args.programs)
        everything += records
        path = os.path.join(work, f"{language}.jsonl")
        with open(path, "w", encoding="utf-8") as f:
          f.writelines(json.dumps(r) + "\n" for r in records)
        warm = os.path.join(work, f"{language}-warm.jsonl")  # caches (PCH, runtimes) built before timing
        with open(warm, "w", encoding="utf-8") as f:
          f.writelines(json.dumps({**r, "sample_id": f"warm{i}"}) + "\n" for i, r in enumerate(records[:3]))
        row, seen, times = {}, {}, collections.defaultdict(list)
        for name, tree, kwargs in ways:
          score_in_process(tree, warm, os.path.join(work, f"{language}-{name}-warm"), language, args.workers, env, **kwargs)
        for repeat in range(args.repeats):  # the ways interleaved, so a slow spell hits them alike
          for name, tree, kwargs in ways:
            output = os.path.join(work, f"{language}-{name}-{repeat}")
            times[name].append(score_in_process(tree, path, output, language, args.workers, env, **kwargs)["seconds"])
            seen[name] = verdicts(output)
        for name, _, _ in ways:
          took = min(times[name])  # the least disturbed run
          row[name] = {"seconds": round(took, 2), "all_seconds": [round(t, 2) for t in times[name]],
                       "programs_per_s": round(len(records) / took, 2),
                       "seconds_per_program_per_worker": round(took * args.workers / len(records), 4)}
        for name in seen:
          differ = [k for k in seen[name] if seen[name][k] != seen["alone"].get(k)]
          if differ:
            mismatches += len(differ)
            print(f"{language}: {name} and alone differ on {len(differ)} programs, e.g. {differ[:2]}")
        row["speedup_batched_vs_before"] = round(row["batched"]["programs_per_s"] / row["before"]["programs_per_s"], 2) \
            if "before" in row else None
        row["speedup_batched_vs_alone"] = round(row["batched"]["programs_per_s"] / row["alone"]["programs_per_s"], 2)
        row["statuses"] = dict(collections.Counter(s for s, _ in seen["batched"].values()))
        figures["languages"][language] = row
        cells = "  ".join(f"{name} {row[name]['seconds_per_program_per_worker']:.3f}" for name, _, _ in ways)
        print(f"{language:>10}: s/program/worker  {cells}  -> {row['speedup_batched_vs_alone']}x vs alone"
              + (f", {row['speedup_batched_vs_before']}x vs before" if row["speedup_batched_vs_before"] else ""),
              flush=True)
      if args.beam:
        path = os.path.join(work, "all.jsonl")
        with open(path, "w", encoding="utf-8") as f:
          f.writelines(json.dumps(r) + "\n" for r in everything)
        beam_args = ["--runner", "DirectRunner", "--direct_num_workers", str(args.workers),
                     "--direct_running_mode", "multi_processing"]
        locals_, beams = [], []
        for repeat in range(args.repeats):
          locals_.append(score_in_process(ROOT, path, os.path.join(work, f"all-local-{repeat}"), None, args.workers,
                                          env, batch_size=args.batch_size)["seconds"])
          beams.append(score_in_process(ROOT, path, os.path.join(work, f"all-beam-{repeat}"), None, args.workers, env,
                                        batch_size=args.batch_size, pipeline_args=beam_args)["seconds"])
        local, beam = min(locals_), min(beams)
        same = verdicts(os.path.join(work, "all-local-0")) == verdicts(os.path.join(work, "all-beam-0"))
        figures["beam"] = {"programs": len(everything), "local_programs_per_s": round(len(everything) / local, 2),
                           "beam_programs_per_s": round(len(everything) / beam, 2),
                           "local_seconds": [round(t, 1) for t in locals_], "beam_seconds": [round(t, 1) for t in beams],
                           "beam_vs_local": round(local / beam, 3), "same_verdicts": same}
        print(f"beam (direct runner, {args.workers} worker processes): {len(everything)} programs in {beam:.1f} s "
              f"vs {local:.1f} s locally ({local / beam:.0%} of the local throughput); same verdicts: {same}")
  finally:
    if before:
      subprocess.run(["git", "worktree", "remove", "--force", before], cwd=ROOT, capture_output=True)
  projection = {}
  for name, _, _ in ways:
    rates = {l: row[name]["seconds_per_program_per_worker"] for l, row in figures["languages"].items()}
    projection[name] = {"checkpoint_core_hours": round(core_hours(rates), 2),
                        "ablation_core_hours": round(core_hours(rates) * CHECKPOINTS, 1)}
  share = duplicate_share(args.duplicates) if args.duplicates else None
  if share is not None:
    projection["batched_with_duplicates_run_once"] = {
        "duplicate_share": round(share, 4), "source": args.duplicates,
        "checkpoint_core_hours": round(projection["batched"]["checkpoint_core_hours"] * (1 - share), 2),
        "ablation_core_hours": round(projection["batched"]["ablation_core_hours"] * (1 - share), 1)}
  figures["projection"] = projection
  figures["verdict_mismatches"] = mismatches
  print(f"one checkpoint ({PAPER_PROGRAMS} programs x {len(figures['languages'])} languages), core-hours: "
        + ", ".join(f"{name} {p['checkpoint_core_hours']}" for name, p in projection.items())
        + f"; the {CHECKPOINTS}-checkpoint ablation: "
        + ", ".join(f"{name} {p['ablation_core_hours']}" for name, p in projection.items()))
  print(f"verdict mismatches between the ways: {mismatches}")
  os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
  storage.write_json(args.output, figures)
  return 1 if mismatches else 0


if __name__ == "__main__":
  sys.exit(main())
