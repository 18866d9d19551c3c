"""Where the test suite's time goes: a pytest JUnit XML file grouped by module and by kind of work.

  .venv/bin/python -m pytest -q -n 2 --dist worksteal tests --junitxml=/tmp/suite.xml
  python bench/suite_profile.py /tmp/suite.xml [--wall SECONDS] [--json bench/results/suite.json]

A test's time is its setup, call and teardown (JUnit's `time`), so a module fixture counts once, in
the test that built it. Each module is put under the kind of work its tests spend their time in, read
from the tests (`KINDS`): XLA compilation of models and steps, entry points run as subprocesses, the
scoring sandbox (compilers and programs in bubblewrap), Beam pipelines, the GCS emulator. Test time is
summed over the workers, so with two workers it is about twice the wall time (`--wall` prints the
ratio). Prints the tables and writes them as JSON.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys
import xml.etree.ElementTree as ElementTree

# The kind of work that dominates each module's time (what its slow tests do), read from the tests.
KINDS = {
    "emulator": ["test_gcs_emulator"],
    "subprocess": ["test_demo_quiet", "test_multihost", "test_launch", "test_preflight", "test_licenses",
                   "test_readers", "test_bench", "test_summary", "test_prompts"],
    "beam": ["test_beam_scoring", "test_tasks", "test_mixtures", "test_finetune_grid", "test_infilling",
             "test_multiple_score", "test_corpus", "test_corpus_shards", "test_decontamination"],
    "sandbox": ["test_execution", "test_batching", "test_batching_csharp", "test_batching_go",
                "test_batching_haskell", "test_batching_java", "test_batching_rust", "test_batching_typescript",
                "test_babelcode", "test_humaneval_typed", "test_multiple_execution", "test_paper_limits",
                "test_practical_scoring", "test_practical_verdicts", "test_probes", "test_r_harness",
                "test_renderers", "test_resumable", "test_score", "test_selfcheck", "test_translation",
                "test_iterative", "test_ablation"],
    "compile": ["test_train", "test_finetune", "test_sampler", "test_sharding", "test_strategies",
                "test_transformer", "test_train_step", "test_export_hf", "test_fim", "test_ul2",
                "test_conversation", "test_passk_hook", "test_profiling", "test_goodput", "test_checkpoints",
                "test_remote_paths", "test_iterative_report"],
}
KIND_OF = {module: kind for kind, modules in KINDS.items() for module in modules}


def read(path: str) -> list[tuple[str, str, float]]:
  """(module, test name, seconds) per test case of a JUnit XML file."""
  cases = []
  for case in ElementTree.parse(path).getroot().iter("testcase"):
    parts = case.get("classname", "?").split(".")  # tests.test_train or tests.test_x.TestClass
    module = next((part for part in parts if part.startswith("test_")), parts[-1])
    cases.append((module, case.get("name", "?"), float(case.get("time", 0.0))))
  return cases


def profile(cases, wall: float | None) -> dict:
  by_module = collections.defaultdict(lambda: [0, 0.0])
  by_kind = collections.defaultdict(lambda: [0, 0.0])
  for module, _, seconds in cases:
    kind = KIND_OF.get(module, "other")
    for table, key in ((by_module, module), (by_kind, kind)):
      table[key][0] += 1
      table[key][1] += seconds
  total = sum(seconds for _, _, seconds in cases)
  longest = sorted(cases, key=lambda case: -case[2])[:15]
  return {
      "tests": len(cases), "test_seconds": round(total, 1), "wall_seconds": wall,
      "by_kind": {k: {"tests": n, "seconds": round(s, 1)} for k, (n, s) in sorted(by_kind.items(), key=lambda i: -i[1][1])},
      "by_module": {k: {"tests": n, "seconds": round(s, 1), "kind": KIND_OF.get(k, "other")}
                    for k, (n, s) in sorted(by_module.items(), key=lambda i: -i[1][1])},
      "longest": [{"test": f"{m}::{name}", "seconds": round(s, 1)} for m, name, s in longest],
  }


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("junit_xml")
  parser.add_argument("--wall", type=float, help="the run's wall time in seconds, to print beside the sum")
  parser.add_argument("--json", help="write the tables here as JSON")
  parser.add_argument("--modules", type=int, default=25, help="how many modules to print (slowest first)")
  args = parser.parse_args(argv)
  if not os.path.isfile(args.junit_xml):
    print(f"suite_profile: no such file: {args.junit_xml}", file=sys.stderr)
    return 2
  try:
    cases = read(args.junit_xml)
  except ElementTree.ParseError as error:  # error.position: (line, column)
    print(f"suite_profile: {args.junit_xml}:{error.position[0]}: not JUnit XML ({error})", file=sys.stderr)
    return 2
  result = profile(cases, args.wall)
  total = result["test_seconds"]
  print(f"{result['tests']} tests, {total:,.0f} s of test time"
        + (f", {args.wall:,.0f} s wall ({total / args.wall:.2f} workers busy on average)" if args.wall else ""))
  print("\n| kind | tests | seconds | share |\n|---|---:|---:|---:|")
  for kind, row in result["by_kind"].items():
    print(f"| {kind} | {row['tests']} | {row['seconds']:,.0f} | {100 * row['seconds'] / total:.0f}% |")
  print("\n| module | kind | tests | seconds |\n|---|---|---:|---:|")
  for module, row in list(result["by_module"].items())[:args.modules]:
    print(f"| {module} | {row['kind']} | {row['tests']} | {row['seconds']:,.0f} |")
  print("\n| longest test | seconds |\n|---|---:|")
  for row in result["longest"]:
    print(f"| {row['test']} | {row['seconds']:.0f} |")
  if args.json:
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    with open(args.json, "w") as f:
      json.dump(result, f, indent=1)
  return 0


if __name__ == "__main__":
  sys.exit(main())
