"""Training-step and sampling throughput of an earlier revision against this working tree, in one run.

  python bench/before_after.py --before_revision 5555a05 [--repeats 3]

The earlier revision is checked out in a temporary git worktree; bench/train_step.py and
bench/sample_throughput.py run there and here with this venv, alternately, --repeats times each (this
machine's timings vary between runs: the best of each side is compared, and every run is kept in
the JSON). Prints a table and writes bench/results/before_after.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# (name, script, arguments, the figure it reports and whether larger is better)
BENCHES = (
    ("train_step", "bench/train_step.py", ["--size", "mini", "--seq", "256", "--batch", "8", "--steps", "10"],
     "tokens_per_second"),
    ("sample", "bench/sample_throughput.py", ["--size", "mini", "--prompts", "4", "--samples", "16",
                                              "--new_tokens", "128", "--no_before"], "useful_tokens_per_second"),
)


def figure(result: dict, key: str) -> float:
  """The throughput a bench wrote: train_step's top-level figure, or sample_throughput's run of the
  current sampler (its "after")."""
  return float(result[key] if key in result else result["runs"]["after"][key])


def run_bench(tree: str, script: str, arguments: list[str], output: str) -> dict:
  subprocess.run([sys.executable, script, *arguments, "--output", output], cwd=tree, check=True,
                 stdout=subprocess.DEVNULL, env={**os.environ, "PYTHONPATH": tree})
  with open(output) as f:
    return json.load(f)


def main() -> int:
  parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--before_revision", required=True, help="a git revision of this repository")
  parser.add_argument("--repeats", type=int, default=3)
  parser.add_argument("--output", default=os.path.join(ROOT, "bench", "results", "before_after.json"))
  args = parser.parse_args()
  revision = subprocess.run(["git", "rev-parse", "--short", args.before_revision], cwd=ROOT, check=True,
                            capture_output=True, text=True).stdout.strip()
  with tempfile.TemporaryDirectory() as scratch:
    before_tree = os.path.join(scratch, "before")
    subprocess.run(["git", "worktree", "add", "--detach", before_tree, revision], cwd=ROOT, check=True,
                   capture_output=True)
    try:
      results: dict = {name: {"before": [], "after": []} for name, *_ in BENCHES}
      for repeat in range(args.repeats):
        for name, script, arguments, key in BENCHES:
          for side, tree in (("before", before_tree), ("after", ROOT)):
            result = run_bench(tree, script, arguments, os.path.join(scratch, f"{name}_{side}_{repeat}.json"))
            results[name][side].append(figure(result, key))
            print(f"{name} {side} run {repeat + 1}: {results[name][side][-1]:,.0f} tokens/s", flush=True)
    finally:
      subprocess.run(["git", "worktree", "remove", "--force", before_tree], cwd=ROOT, check=False,
                     capture_output=True)
  print(f"\n| bench | before ({revision}), best tokens/s | after (working tree), best tokens/s | after / before |")
  print("|---|---|---|---|")
  summary = {}
  for name, _, arguments, _ in BENCHES:
    before, after = max(results[name]["before"]), max(results[name]["after"])
    summary[name] = {"arguments": arguments, "before_runs": results[name]["before"],
                     "after_runs": results[name]["after"], "before_best": before, "after_best": after,
                     "ratio": after / before}
    print(f"| {name} | {before:,.0f} | {after:,.0f} | {after / before:.3f} |")
  os.makedirs(os.path.dirname(args.output), exist_ok=True)
  with open(args.output, "w") as f:
    json.dump({"before_revision": revision, "repeats": args.repeats, "unit": "tokens/s", **summary}, f, indent=1)
  print(f"wrote {args.output}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
