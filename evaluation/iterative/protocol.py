"""One round of evaluation/iterative/run.py's protocol (its docstring states the rules): the prompt sent
(the first prompt, the feedback text), the code taken from a completion, whether that code special-
cases the given inputs (input matching), and the check of an attempt against the given examples and the
differential-testing pool, with its verdict.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import json
import re
from collections.abc import Sequence
from typing import Any

from sandbox import batching, execution, typed
from evaluation.iterative.tasks import Example, input_key
from sandbox.judge import Case, Status, judge
from sandbox.renderers import get
from sandbox.renderers.base import Renderer
from sandbox.typed import Question, TestCase
from sampling.stops import cut_index

EXAMPLES_HEADER = "Examples of what it returns:"
FEEDBACK_HEADER = "A corrected version. The previous one was wrong on the last {new} of these examples:"
EXAMPLES, NATURAL = "examples", "natural"
SUCCESS, DISTINGUISHED = "success", "distinguished"
TERMINAL_FAILURES = ("compile_error", "error", "timeout", "wrong_on_given", "not_converged")



# ---- prompts ------------------------------------------------------------------------------------

def literal_of(language: str, t: typed.Type, value: Any) -> str:
  """`value` as the language's literal (its renderer's)."""
  return get(language).value_literal(t, value)


def example_line(language: str, renderer: Renderer, question: Question, example: Example) -> str:
  args = [renderer.value_literal(t, v) for t, v in zip(question.types, example.inputs)]
  return f"{renderer.call(renderer.function_name(question), args)} == {renderer.value_literal(question.return_type, example.output)}"


def with_doc(question: Question, header: str, language: str, renderer: Renderer,
             examples: Sequence[Example]) -> Question:
  """The question with its description replaced by `header` and the example lines."""
  lines = [header, *(example_line(language, renderer, question, e) for e in examples)]
  return dataclasses.replace(question, description="\n".join(lines))


def first_prompt(kind: str, language: str, question: Question, examples: Sequence[Example]) -> str:
  renderer = get(language)
  if kind == NATURAL:
    return renderer.prompt(question)
  return renderer.prompt(with_doc(question, EXAMPLES_HEADER, language, renderer, examples))


def feedback_text(language: str, question: Question, examples: Sequence[Example], new: int) -> str:
  """What a reply appends to the conversation: the examples so far (the last `new` are the
  distinguishing ones) in a fresh doc comment + signature, which the next completion continues."""
  renderer = get(language)
  doc = with_doc(question, FEEDBACK_HEADER.format(new=new), language, renderer, examples)
  return "\n\n" + renderer.signature_with_docstring(doc)


def extract_code(language: str, text: str) -> str:
  """The function's body: the completion cut at the language's stops (the sampler cuts there too)."""
  cut = cut_index(text, get(language).stop_sequences)
  return text if cut < 0 else text[:cut]


# ---- input matching ---------------------------------------------------------------------------

def _squeeze(text: str) -> str:
  return re.sub(r"\s+", "", text)


def _distinctive(t: typed.Type, value: Any) -> bool:
  if t.name == "string":
    return len(value) >= 2
  if t.name in ("list", "set", "map", "tuple"):
    return len(value) >= 2
  if t.name in ("int", "float"):
    return len(repr(value)) >= 3
  return False


def _nested(t: typed.Type, value: Any, top: bool = True):
  """(type, value, top level?) of `value` and of every value inside it."""
  yield t, value, top
  if value is None:
    return
  if t.name == "optional":
    yield from _nested(t.element, value, top)
  elif t.name in ("list", "set"):
    for v in value:
      yield from _nested(t.element, v, False)
  elif t.name == "tuple":
    for a, v in zip(t.args, value):
      yield from _nested(a, v, False)
  elif t.name == "map":
    for k, v in value.items():
      yield from _nested(t.args[0], k, False)
      yield from _nested(t.args[1], v, False)


def input_matching(language: str, question: Question, code: str, examples: Sequence[Example]) -> bool:
  """Whether `code` special-cases the given inputs (evaluation/iterative/run.py's docstring: the rule)."""
  squeezed = _squeeze(code)
  compared: set[str] = set()
  for example in examples:
    for param_type, argument in zip(question.types, example.inputs):
      for t, value, top in _nested(param_type, argument):
        if value is None or t.name == "optional":
          continue
        numeric = t.name in ("int", "float")
        if _distinctive(t, value) and (top or not numeric):
          data = json.dumps(typed.encode(t, value))
          candidates = {literal_of(language, t, value), data}
          if t.name in ("list", "set", "tuple", "map"):
            candidates.add(data[1:-1])  # the items in any language's brackets: {20, 47} or vec![20, 47]
          if any(_squeeze(c) in squeezed for c in candidates if _squeeze(c)):
            return True
        if numeric:
          text = re.escape(json.dumps(typed.encode(t, value)))
          if re.search(rf"==\s*{text}(?![\w.])|(?<![\w.]){text}L?\s*==", code):
            compared.add(repr(value))
  return len(compared) >= 2


# ---- checking one attempt ---------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Check:
  verdict: str                       # SUCCESS, DISTINGUISHED or one of TERMINAL_FAILURES
  distinguishing: tuple[Example, ...]
  detail: str
  # Every given example passed (seed 001's O1 judges round 1 by these alone): also true where the
  # code then crashed or timed out on a pool input, whose verdict is "error" / "timeout".
  given_passed: bool = False


def check(language: str, question: Question, code: str, given: Sequence[Example], pool: Sequence[Example],
          final_round: bool, limits: execution.Limits) -> Check:
  """Run `code` on the given examples and the pool (one program); the verdict of this round."""
  return check_all(language, [(question, code, given, pool)], final_round, limits)[0]


def check_all(language: str, items: Sequence[tuple[Question, str, Sequence[Example], Sequence[Example]]],
              final_round: bool, limits: execution.Limits, workers: concurrent.futures.Executor | None = None,
              batch_size: int = batching.DEFAULT_BATCH_SIZE) -> list[Check]:
  """check() of every (question, code, given, pool) of one language and round: a compiled
  language's programs are built together, `batch_size` at a time, one batch per worker of `workers`
  (sandbox/batching.py); each still runs in its own sandbox."""
  renderer = get(language)
  probes, fresh_examples = [], []
  for question, code, given, pool in items:
    given_keys = {input_key(question, e.inputs) for e in given}
    fresh = [e for e in pool if input_key(question, e.inputs) not in given_keys]
    cases = tuple(TestCase(i, e.inputs, e.output) for i, e in enumerate([*given, *fresh]))
    probes.append(dataclasses.replace(question, test_cases=cases))
    fresh_examples.append(fresh)
  jobs = [(probe, code) for probe, (_, code, _, _) in zip(probes, items)]
  size = max(1, min(batch_size, -(-len(jobs) // max(1, getattr(workers, "_max_workers", 1)))))
  chunks = [jobs[i:i + size] for i in range(0, len(jobs), size)]
  run = lambda chunk: batching.execute_all(renderer, chunk, limits, batch_size)
  executions = [e for done in (workers.map(run, chunks) if workers else map(run, chunks)) for e in done]
  return [_verdict(judge(probe, result), len(given), fresh, final_round)
          for probe, result, (_, _, given, _), fresh in zip(probes, executions, items, fresh_examples)]


def _verdict(outcome, given: int, fresh: Sequence[Example], final_round: bool) -> Check:
  # The given examples are the program's first test cases, so their records precede any pool input's.
  given_passed = outcome.status is not Status.COMPILE_ERROR and all(c is Case.PASSED for c in outcome.cases[:given])
  if outcome.status in (Status.COMPILE_ERROR, Status.ERROR, Status.TIMEOUT):
    return Check(outcome.status.value, (), outcome.detail, given_passed)
  if not given_passed:
    return Check("wrong_on_given", (), outcome.detail)
  found = tuple(e for e, c in zip(fresh, outcome.cases[given:]) if c is not Case.PASSED)
  if not found:
    return Check(SUCCESS, (), "", True)
  return Check("not_converged" if final_round else DISTINGUISHED, found, outcome.detail, True)
