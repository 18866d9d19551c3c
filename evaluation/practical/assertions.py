"""Assertion-based unit tests decided outside the sandbox: values in, verdicts out.

A test block (`df = ...; result = f(df); assert result['a'].tolist() == [1, 3]`) is rewritten twice.
Each assertion (and each `np.testing.assert_*` / `pd.testing.assert_*` call) becomes a call to
`_codelm_check(index, thunks)` that records the values of its *leaves*; the assertion itself, with
its leaves replaced by those values, is evaluated here, outside the sandbox. A leaf is a maximal
sub-expression that cannot be evaluated outside: anything but literals, displays, comparisons,
boolean and arithmetic operators, and calls of a short list of pure functions (`len`, `np.allclose`,
`pd.DataFrame`, ...). A leaf that depends on the candidate's code (taint analysis below) is recorded
in the candidate's run; every other leaf only in the reference solution's run. So the candidate's
process evaluates the test's inputs and the expressions applied to its results, and never the values
they are compared with: the literals are not in its program at all, and neither is an assignment
that computes only an expected value.

Taint (flow-insensitive, to a fixed point): the entry point and the other names the problem's code
defines (not its imports) are tainted; so is every name of the test bound from a tainted expression,
bound anywhere inside a statement (if/for/while/try/with) that mentions a tainted name (the
`try: f([]); raised = False / except: raised = True` pattern), or appearing in a call of a tainted
callee (`f(df)` may mutate `df`; `result.update(x)` may mutate `x`; `result.equals(x)`, one of
SAFE_METHODS, does not).
"""

from __future__ import annotations

import ast
import copy
import dataclasses
import functools
import math
import types

from sandbox import recorded_values

CHECK = "_codelm_check"  # the harness's recording function, as the rewritten tests call it
SLOT = "_codelm_slot_"   # leaf i is the name SLOT + str(i) in a check's expression

# Pure functions and constants a check may use outside the sandbox, by their dotted names; the root
# must not be rebound by the test (an import of that module under that name is fine).
_BUILTINS = ("abs", "all", "any", "bool", "dict", "float", "frozenset", "int", "isinstance", "len", "list",
             "max", "min", "round", "set", "sorted", "str", "sum", "tuple", "type")
_NUMPY = ("array", "asarray", "array_equal", "array_equiv", "allclose", "isclose", "all", "any", "isnan",
          "isinf", "isfinite", "round", "sort", "abs", "sum", "log", "exp", "sqrt", "float64", "int64", "nan", "inf", "e", "pi",
          "ndarray", "dtype", "float32", "float16", "int32", "int16", "int8", "uint8", "bool_", "integer",
          "floating", "number", "generic", "str_",
          "testing.assert_array_equal", "testing.assert_allclose", "testing.assert_array_almost_equal",
          "testing.assert_almost_equal", "testing.assert_equal")
_PANDAS = ("isna", "isnull", "DataFrame", "Series", "Index", "Timestamp", "Timedelta", "NaT", "NA",
           "testing.assert_frame_equal", "testing.assert_series_equal", "testing.assert_index_equal")
_MATH = ("isclose", "isnan", "isinf", "fabs", "sqrt", "log", "exp", "inf", "nan", "pi", "e")
_MODULES = {"np": ("numpy", _NUMPY), "numpy": ("numpy", _NUMPY), "pd": ("pandas", _PANDAS),
            "pandas": ("pandas", _PANDAS), "math": ("math", _MATH)}
SAFE_NAMES = frozenset(_BUILTINS) | frozenset(f"{alias}.{name}" for alias, (_, names) in _MODULES.items()
                                              for name in names)
# Called on values decoded outside (dict views: what `sorted(d.items())` compares).
SAFE_METHODS = frozenset({"equals", "all", "any", "items", "keys", "values"})
# Expression statements that are checks: they raise instead of returning False.
RAISING = frozenset(n for n in SAFE_NAMES if ".testing.assert_" in n)


@dataclasses.dataclass(frozen=True)
class Slot:
  source: str      # the leaf expression
  candidate: bool  # depends on the candidate's code: recorded in its run (else in the reference's only)


@dataclasses.dataclass(frozen=True)
class Check:
  index: int        # in the test's source order
  line: int         # of the original test block
  text: str         # the original statement, for messages
  kind: str         # "assert" (true when it holds) or "call" (holds when it does not raise)
  expression: str   # the check over SLOT names, evaluated outside
  slots: tuple[Slot, ...]


@dataclasses.dataclass(frozen=True)
class RewrittenTest:
  candidate: str    # the test as the candidate's sandbox runs it
  reference: str    # the test as the reference solution's sandbox runs it
  checks: tuple[Check, ...]


def _dotted(node: ast.AST) -> str | None:
  if isinstance(node, ast.Name):
    return node.id
  if isinstance(node, ast.Attribute):
    base = _dotted(node.value)
    return f"{base}.{node.attr}" if base else None
  return None


def _names(node: ast.AST) -> set[str]:
  return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _bound(node: ast.AST) -> set[str]:
  """Names that `node` binds anywhere (assignment targets, loop variables, defs, imports, except-as)."""
  names = {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del))}
  for n in ast.walk(node):
    if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
      names.add(n.name)
    elif isinstance(n, ast.ExceptHandler) and n.name:
      names.add(n.name)
    elif isinstance(n, (ast.Import, ast.ImportFrom)):
      names.update((a.asname or a.name).split(".")[0] for a in n.names)
  return names


def _imported(node: ast.AST) -> set[str]:
  return {(a.asname or a.name).split(".")[0] for n in ast.walk(node) if isinstance(n, (ast.Import, ast.ImportFrom))
          for a in n.names}


_COMPOUND = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.Try, ast.With, ast.AsyncWith, ast.Match)
if hasattr(ast, "TryStar"):
  _COMPOUND += (ast.TryStar,)


def tainted_names(tree: ast.AST, solution_names: set[str]) -> set[str]:
  """The names of the test whose values may depend on the candidate's code (see the module doc).
  `solution_names`: what the problem's code defines other than by import (the entry point first)."""
  local = _bound(tree) - _imported(tree)
  tainted = set(solution_names) - _imported(tree)
  while True:
    before = len(tainted)

    def mentions(node: ast.AST) -> bool:
      return bool(_names(node) & tainted)

    for node in ast.walk(tree):
      pure = isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in SAFE_METHODS
      if isinstance(node, ast.Call) and mentions(node.func) and not pure:
        tainted |= _names(node) & local
      elif isinstance(node, ast.Assign) and mentions(node.value):
        for target in node.targets:
          tainted |= _names(target) & local
      elif isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.NamedExpr)) and node.value is not None \
          and mentions(node.value):
        tainted |= _names(node.target) & local
      elif isinstance(node, (ast.comprehension, ast.For, ast.AsyncFor)) and mentions(node.iter):
        tainted |= _names(node.target) & local
      elif isinstance(node, ast.withitem) and node.optional_vars is not None and mentions(node.context_expr):
        tainted |= _names(node.optional_vars) & local
      elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)) and mentions(node):
        if not isinstance(node, ast.Lambda):
          tainted.add(node.name)
      if isinstance(node, (ast.For, ast.AsyncFor)):  # the loop variable comes from the iterable alone
        if any(mentions(n) for n in node.body + node.orelse):
          tainted |= set().union(*(_bound(n) for n in node.body + node.orelse)) & local
      elif isinstance(node, _COMPOUND) and mentions(node):
        tainted |= _bound(node) & local
    if len(tainted) == before:
      return tainted


class _Unsplittable(Exception):
  """A leaf would name a comprehension's or lambda's own variable: it cannot run on its own."""


class _Splitter:
  """Replaces an assertion's leaves by SLOT names, collecting them as Slots. A comprehension or lambda
  (`all(0 <= x <= 1 for x in result)`, `key=lambda d: sorted(d.items())`) is evaluated outside too
  when none of its leaves names its own variables (its iterable is a leaf: the recorded items); else
  it is one leaf."""

  def __init__(self, tainted: set[str], rebound: set[str]):
    self.tainted, self.rebound, self.slots = tainted, rebound, []
    self.bound: set[str] = set()  # the variables of the comprehensions and lambdas being split

  def safe_name(self, node: ast.AST) -> bool:
    name = _dotted(node)
    return name is not None and name in SAFE_NAMES and name.split(".")[0] not in self.rebound

  def leaf(self, node: ast.expr) -> ast.expr:
    if _names(node) & self.bound:
      raise _Unsplittable
    self.slots.append(Slot(ast.unparse(node), bool(_names(node) & self.tainted)))
    return ast.Name(id=f"{SLOT}{len(self.slots) - 1}", ctx=ast.Load())

  def scoped(self, node: ast.expr) -> ast.expr:
    """A comprehension or lambda split with its variables bound, or one leaf."""
    slots, bound = len(self.slots), set(self.bound)
    try:
      if isinstance(node, ast.Lambda):
        arguments = node.args
        if arguments.vararg or arguments.kwarg or arguments.kw_defaults or arguments.defaults:
          raise _Unsplittable
        self.bound |= {a.arg for a in arguments.posonlyargs + arguments.args + arguments.kwonlyargs}
        return ast.Lambda(args=arguments, body=self.split(node.body))
      generators = []
      for generator in node.generators:
        if generator.is_async or not all(isinstance(n, (ast.Name, ast.Tuple)) for n in ast.walk(generator.target)
                                         if not isinstance(n, ast.expr_context)):
          raise _Unsplittable
        iterable = self.split(generator.iter)
        self.bound |= _names(generator.target)
        generators.append(ast.comprehension(target=generator.target, iter=iterable,
                                            ifs=[self.split(c) for c in generator.ifs], is_async=0))
      if isinstance(node, ast.DictComp):
        return ast.DictComp(key=self.split(node.key), value=self.split(node.value), generators=generators)
      return type(node)(elt=self.split(node.elt), generators=generators)
    except _Unsplittable:
      del self.slots[slots:]
      self.bound = bound
      return self.leaf(node)
    finally:
      self.bound = bound

  def split(self, node: ast.expr) -> ast.expr:
    def each(nodes):
      return [self.split(n) for n in nodes]

    if isinstance(node, ast.Constant):
      return node
    if isinstance(node, ast.Name) and node.id in self.bound:
      return node
    if isinstance(node, (ast.GeneratorExp, ast.ListComp, ast.SetComp, ast.DictComp, ast.Lambda)):
      return self.scoped(node)
    if isinstance(node, ast.Subscript) and _names(node.value) & self.bound:  # `d[0]` of a comprehension's d
      index = node.slice
      if isinstance(index, ast.Slice):
        index = ast.Slice(*(self.split(p) if p is not None else None for p in (index.lower, index.upper, index.step)))
      else:
        index = self.split(index)
      return ast.Subscript(value=self.split(node.value), slice=index, ctx=ast.Load())
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)) and not any(isinstance(e, ast.Starred) for e in node.elts):
      return type(node)(elts=each(node.elts), **({"ctx": ast.Load()} if not isinstance(node, ast.Set) else {}))
    if isinstance(node, ast.Dict) and None not in node.keys:
      return ast.Dict(keys=each(node.keys), values=each(node.values))
    if isinstance(node, ast.Compare):
      return ast.Compare(left=self.split(node.left), ops=node.ops, comparators=each(node.comparators))
    if isinstance(node, ast.BoolOp):
      return ast.BoolOp(op=node.op, values=each(node.values))
    if isinstance(node, ast.UnaryOp):
      return ast.UnaryOp(op=node.op, operand=self.split(node.operand))
    if isinstance(node, ast.BinOp):
      return ast.BinOp(left=self.split(node.left), op=node.op, right=self.split(node.right))
    if isinstance(node, ast.IfExp):
      return ast.IfExp(test=self.split(node.test), body=self.split(node.body), orelse=self.split(node.orelse))
    if isinstance(node, (ast.Name, ast.Attribute)) and self.safe_name(node):
      return node
    if isinstance(node, ast.Call) and not any(isinstance(a, ast.Starred) for a in node.args) \
        and all(k.arg is not None for k in node.keywords):
      if self.safe_name(node.func):
        keywords = [ast.keyword(arg=k.arg, value=self.split(k.value)) for k in node.keywords]
        return ast.Call(func=node.func, args=each(node.args), keywords=keywords)
      if isinstance(node.func, ast.Attribute) and node.func.attr in SAFE_METHODS:
        keywords = [ast.keyword(arg=k.arg, value=self.split(k.value)) for k in node.keywords]
        receiver = ast.Attribute(value=self.split(node.func.value), attr=node.func.attr, ctx=ast.Load())
        return ast.Call(func=receiver, args=each(node.args), keywords=keywords)
    return self.leaf(node)


def _check_call(check: Check, for_candidate: bool) -> ast.stmt:
  """`_codelm_check(index, (thunk, ...))`, None in place of a leaf the candidate's run does not record."""
  thunks = [ast.parse(f"lambda: ({slot.source})", mode="eval").body
            if slot.candidate or not for_candidate else ast.Constant(None) for slot in check.slots]
  return ast.Expr(ast.Call(func=ast.Name(id=CHECK, ctx=ast.Load()),
                           args=[ast.Constant(check.index), ast.Tuple(elts=thunks, ctx=ast.Load())], keywords=[]))


def _position(node: ast.stmt) -> tuple[int, int]:
  return node.lineno, node.col_offset


def _checks(tree: ast.Module, source: str, tainted: set[str], rebound: set[str]) -> dict[tuple[int, int], Check]:
  """The test's checks by the position of their statement, numbered in source order."""
  lines = source.splitlines()
  found = []
  for node in ast.walk(tree):
    if isinstance(node, ast.Assert):
      kind, expression = "assert", node.test
    elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) and _dotted(node.value.func) in RAISING \
        and _dotted(node.value.func).split(".")[0] not in rebound:
      kind, expression = "call", node.value
    else:
      continue
    splitter = _Splitter(tainted, rebound)
    split = splitter.split(expression)
    if kind == "call" and not isinstance(split, ast.Call):
      continue  # (starred arguments: a plain statement, run where it stands)
    text = "\n".join(lines[node.lineno - 1:node.end_lineno]).strip()
    found.append((_position(node), kind, text, ast.unparse(split), tuple(splitter.slots)))
  found.sort(key=lambda f: f[0])
  return {position: Check(index=i, line=position[0], text=text, kind=kind, expression=expression, slots=slots)
          for i, (position, kind, text, expression, slots) in enumerate(found)}


class _Rewriter(ast.NodeTransformer):
  """Replaces each check's statement by its _codelm_check call."""

  def __init__(self, checks: dict[tuple[int, int], Check], for_candidate: bool):
    self.checks, self.for_candidate = checks, for_candidate

  def visit_Assert(self, node):
    return self._replace(node)

  def visit_Expr(self, node):
    return self._replace(node)

  def _replace(self, node):
    check = self.checks.get(_position(node))
    if check is None:
      return self.generic_visit(node)
    return ast.copy_location(_check_call(check, self.for_candidate), node)


def _drop_expected_assignments(tree: ast.Module, tainted: set[str], rebound: set[str]) -> None:
  """Remove `name = <expression evaluable outside>` for untainted names no longer read: the expected
  values whose only use was a leaf recorded in the reference's run. Never in a class body: there an
  assignment defines an attribute (`class C: a = 'x'`, read as `C.a`), so dropping it would change
  what the test defines."""
  while True:
    loaded = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    removed = False
    for parent in ast.walk(tree):
      if isinstance(parent, ast.ClassDef):
        continue
      for field in ("body", "orelse", "finalbody"):
        body = getattr(parent, field, None)
        if not isinstance(body, list):
          continue
        keep = []
        for statement in body:
          if (isinstance(statement, ast.Assign) and all(isinstance(t, ast.Name) for t in statement.targets)
              and not {t.id for t in statement.targets} & (tainted | loaded)):
            splitter = _Splitter(tainted, rebound)
            splitter.split(statement.value)
            if not splitter.slots:
              removed = True
              continue
          keep.append(statement)
        if len(keep) != len(body):
          setattr(parent, field, keep or [ast.Pass()])
    if not removed:
      return


def rewrite(source: str, solution_names: set[str]) -> RewrittenTest:
  """The two variants of one test block and its checks. A SyntaxError propagates (the dataset is
  wrong, not the candidate)."""
  return rewrite_all([source], solution_names)[0]


def rewrite_all(sources: list[str], solution_names: set[str], shared: bool = False) -> tuple[RewrittenTest, ...]:
  """Each test block's two variants. `shared`: the blocks run one after another in one namespace (the
  codeinsight harness), so a name one block binds from the candidate's results is tainted in the
  blocks after it, and an expected value is dropped only where no block reads it."""
  trees = [ast.parse(source) for source in sources]
  if any(CHECK in _names(tree) for tree in trees):
    raise ValueError(f"a test may not use the name {CHECK}")
  scopes = [ast.Module(body=[s for tree in trees for s in tree.body], type_ignores=[])] * len(trees) \
      if shared else trees
  out, candidates = [], []
  for source, tree, scope in zip(sources, trees, scopes):
    tainted = tainted_names(scope, solution_names)
    rebound = _bound(scope) - _imported(scope)
    checks = _checks(tree, source, tainted, rebound)
    reference = _Rewriter(checks, for_candidate=False).visit(copy.deepcopy(tree))
    candidates.append(_Rewriter(checks, for_candidate=True).visit(tree))
    out.append((reference, checks, tainted, rebound))
  if shared:  # one drop over all blocks, each a body of its own (an `if True:` holding it)
    holders = [ast.If(test=ast.Constant(True), body=c.body, orelse=[]) for c in candidates]
    _drop_expected_assignments(ast.Module(body=holders, type_ignores=[]), out[0][2], out[0][3])
    for candidate, holder in zip(candidates, holders):
      candidate.body = holder.body
  else:
    for candidate, (_, _, tainted, rebound) in zip(candidates, out):
      _drop_expected_assignments(candidate, tainted, rebound)
  return tuple(RewrittenTest(candidate=ast.unparse(ast.fix_missing_locations(candidate)),
                             reference=ast.unparse(ast.fix_missing_locations(reference)),
                             checks=tuple(sorted(checks.values(), key=lambda c: c.index)))
               for candidate, (reference, checks, _, _) in zip(candidates, out))


def solution_names(code: str) -> set[str]:
  """What the problem's code binds at module level other than by import."""
  tree = ast.parse(code)
  names = set()
  for statement in tree.body:
    if not isinstance(statement, (ast.Import, ast.ImportFrom)):
      names |= _bound(statement) if not isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                                   ast.ClassDef)) else {statement.name}
  return names


# ---- outside: a check's verdict --------------------------------------------------------------------

@functools.cache
def _namespace() -> dict:
  import builtins

  import numpy
  import pandas

  modules = {"numpy": numpy, "pandas": pandas, "math": math}
  # __import__ for the libraries' own lazy imports (numpy imports a module on an array's first
  # `.all()`): without it the first such check in a process raised KeyError, so a verdict depended on
  # what the process had judged before. A check's expression cannot name it: a call of anything
  # outside SAFE_NAMES is a leaf, evaluated in the sandbox.
  space: dict = {"__builtins__": {"__import__": builtins.__import__}}
  space.update({name: getattr(builtins, name) for name in _BUILTINS})
  for alias, (module, names) in _MODULES.items():
    root = types.SimpleNamespace()
    for name in names:
      *parents, last = name.split(".")
      holder = root
      for parent in parents:
        if not hasattr(holder, parent):
          setattr(holder, parent, types.SimpleNamespace())
        holder = getattr(holder, parent)
      value = modules[module]
      for part in name.split("."):
        value = getattr(value, part)
      setattr(holder, last, value)
    space[alias] = root
  return space


def decide(check: Check, values: list) -> str | None:
  """None when the check holds for the leaf values (decoded, in slot order), else why not, naming the
  test's line."""
  space = dict(_namespace())
  space.update({f"{SLOT}{i}": v for i, v in enumerate(values)})
  where = f"(line {check.line}: {check.text})"
  unrecorded = next((v for v in values if isinstance(v, recorded_values.Unrecorded)), None)
  try:
    result = eval(compile(check.expression, "<check>", "eval"), space)  # noqa: S307 (our values only)
    if check.kind == "assert" and not bool(result):
      # `x is False` compares no value: say why x did not cross (it raised, it is not data) if so.
      return f"{unrecorded.why if unrecorded else 'AssertionError'} {where}"
  except recorded_values.UnrecordedValue as error:  # what the leaf raised, or why it is not data
    return f"{error} {where}"
  except Exception as error:  # a comparison that raised, a testing assert that failed
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}{': ' + text[0][:200] if text else ''} {where}"
  return None
