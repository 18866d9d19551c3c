"""CodeInsight's category labels derived from a reference solution's AST (Beau & Crabbé 2024,
Appendix C, Table 9: "Detailed Labels for Automated Annotation"), and the package it imports.

The paper gives each label one line; the rules below follow it, and where it is silent the choice
is written next to the rule. On the in-repo dataset (data/practical_tasks_small.jsonl) they give its
hand labels but in four places: two f-string-only solutions (an f-string alone is not a string
operation, as issue 29 settled) and two `builtin`s from a builtin passed as a value (`astype(int)`,
`dtype=int`), which the hand labels leave out.

  assign        "Includes variable assignment": an `=`, augmented (`+=`) or annotated-with-value
                assignment statement, or a `:=`, anywhere in the code (a subscript or attribute
                target counts: `df0['a'] = ...`). Loop and comprehension variables do not.
  builtin       "Uses a built-in function": a name of the Python docs' Built-in Functions (a callable
                of `builtins` that is not an exception class) read and not rebound by the code
                (a parameter, assignment or import of that name shadows it): `len(x)`, `key=len`.
  cond          "Has conditional statement(s)": `if` statements, conditional expressions
                (`a if c else b`), `match`, and a comprehension's `if` filter (a condition on each item).
  loop          "Contains `for` or `while` loops": those statements (async too) and every
                comprehension (list, set, dict, generator: a `for` written inline).
  str           "Performs string operation(s)": a call of a method on a string, or `+` / `%` / `*`
                with a string operand. A string is a literal, an f-string, a `str(...)` call, a name
                annotated `str`, a name CodeInsight's normalisation gives strings (str0, str1: its
                Table 8), or pandas' `.str` accessor. A call of a method only strings have (`lower`,
                `split`, `join`: str's methods that list, dict, set and tuple lack) counts on any
                receiver but a module (`re.split`) or a name normalised as another type (df0, arr0,
                lst0/list0, dict0, mat0). An f-string by itself is formatting, not an operation.
  list          "Uses list method(s)": `append`, `extend`, `insert`, `sort`, `reverse` (list's methods
                that str, dict, set and tuple lack) on any receiver but a module or a name normalised
                as another type; `remove`, `pop`, `index`, `count`, `clear`, `copy` (shared with
                other types) only on a known list: a list literal, comprehension or `list(...)`, a
                name annotated `list`, or a name normalised as a list (lst0, list0).
  multiline     "Code exceeds two lines": the function's body (what the model writes) has more than
                two lines, blank and comment-only lines, and the reference's docstring, left out. The
                body, not the whole file: with imports counted, every function that imports a
                package would be multiline, yet the paper's NoMultiline rows average 2.7 ± 0.5 code
                lines (its Table 11) and the in-repo labels count the body.
  multipletask  "Has >= 3 other labels": three or more of the nine other labels of this table
                (the package is not a label).
  >threevars    "Function with > 3 parameters": positional-only, ordinary and keyword-only
                parameters, and *args and **kwargs one each, of the entry function.
  complextask   "Has >= 2 imports": two or more distinct top-level modules imported anywhere in the
                code (`from collections import Counter, defaultdict` is one import, `import os,
                sys` two).

The package (the paper's Tables 5 and 10): `pandas`, `numpy` and `regex` (module `re`, or the
`regex` package) for each one imported (a problem importing pandas and numpy counts in both),
`noimport` when the code imports nothing, and `other` when it imports only other modules.
"""

from __future__ import annotations

import ast
import builtins
import dataclasses
import re
from collections.abc import Sequence

from data.practical_tasks import Problem, function_node, is_docstring

LABELS = ("assign", "builtin", "cond", "loop", "str", "list", "multiline", "multipletask", ">threevars",
          "complextask")  # Table 9's order
PACKAGES = ("pandas", "numpy", "regex", "noimport", "other")
_PACKAGE_MODULES = {"pandas": "pandas", "numpy": "numpy", "re": "regex", "regex": "regex"}

BUILTIN_FUNCTIONS = frozenset(
    name for name in dir(builtins) if not name.startswith("_") and callable(getattr(builtins, name))
    and not (isinstance(getattr(builtins, name), type) and issubclass(getattr(builtins, name), BaseException)))


def _methods(kind: type) -> set[str]:
  return {name for name in dir(kind) if not name.startswith("_")}


_OTHERS = _methods(dict) | _methods(set) | _methods(tuple)
STR_ONLY_METHODS = frozenset(_methods(str) - _methods(list) - _OTHERS)
LIST_ONLY_METHODS = frozenset(_methods(list) - _methods(str) - _OTHERS)  # append extend insert reverse sort
LIST_SHARED_METHODS = frozenset(_methods(list) - LIST_ONLY_METHODS)  # clear copy count index pop remove
# CodeInsight's normalised argument names (its Table 8): the prefix says the type.
_STR_NAME = re.compile(r"str\d*$")
_LIST_NAME = re.compile(r"(lst|list)\d*$")
_OTHER_TYPE_NAME = re.compile(r"(df|arr|dict|mat|int)\d*$")


def _root_name(node: ast.expr) -> ast.Name | None:
  """The name an attribute / subscript chain starts from (`df0['a'].b` -> df0); None through a call."""
  while isinstance(node, (ast.Attribute, ast.Subscript)):
    node = node.value
  return node if isinstance(node, ast.Name) else None


class _Facts:
  """One pass over a module: what each label's rule asks about."""

  def __init__(self, tree: ast.Module):
    self.modules: set[str] = set()  # top-level modules imported
    self.module_names: set[str] = set()  # names bound to a module or an imported object
    self.bound: set[str] = set()  # parameters, assigned and imported names (shadow builtins)
    self.annotated: dict[str, str] = {}  # parameter / variable -> its annotation's source
    for node in ast.walk(tree):
      if isinstance(node, ast.Import):
        for alias in node.names:
          self.modules.add(alias.name.split(".")[0])
          self.module_names.add(alias.asname or alias.name.split(".")[0])
      elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
        self.modules.add(node.module.split(".")[0])
        self.module_names.update(a.asname or a.name for a in node.names)
      elif isinstance(node, ast.arg):
        self.bound.add(node.arg)
        if node.annotation is not None:
          self.annotated[node.arg] = ast.unparse(node.annotation)
      elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
        self.bound.add(node.id)
      elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        self.annotated[node.target.id] = ast.unparse(node.annotation)
      elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        self.bound.add(node.name)
    self.bound |= self.module_names

  def _typed(self, node: ast.expr, kind: str, pattern: re.Pattern) -> bool:
    if isinstance(node, ast.Name):
      annotation = self.annotated.get(node.id, "")
      return bool(pattern.match(node.id)) or annotation == kind or annotation.startswith(
          (f"{kind}[", f"{kind.capitalize()}["))
    return False

  def is_module(self, node: ast.expr) -> bool:
    """An imported module or an attribute of one (`re`, `os.path`, `np.char`)."""
    while isinstance(node, ast.Attribute):
      node = node.value
    return isinstance(node, ast.Name) and node.id in self.module_names

  def other_type(self, node: ast.expr, *kinds: re.Pattern) -> bool:
    """A receiver whose chain starts from a name normalised as another type than the method's."""
    root = _root_name(node)
    return root is not None and any(k.match(root.id) for k in kinds)

  def is_str(self, node: ast.expr) -> bool:
    if (isinstance(node, ast.Constant) and isinstance(node.value, str)) or isinstance(node, ast.JoinedStr):
      return True
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "str":
      return node.func.id not in self.bound
    if isinstance(node, ast.Attribute) and node.attr == "str" and not self.is_module(node.value):
      return True  # pandas' .str accessor: its methods are string operations on each item
    return self._typed(node, "str", _STR_NAME)

  def is_list(self, node: ast.expr) -> bool:
    if isinstance(node, (ast.List, ast.ListComp)):
      return True
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "list":
      return "list" not in self.bound
    return self._typed(node, "list", _LIST_NAME)


def _method_calls(tree: ast.AST):
  """(receiver, method name) of every `x.m(...)`."""
  for node in ast.walk(tree):
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
      yield node.func.value, node.func.attr


def _string_operation(tree: ast.Module, facts: _Facts) -> bool:
  for receiver, method in _method_calls(tree):
    if facts.is_str(receiver):
      return True
    if method in STR_ONLY_METHODS and not facts.is_module(receiver) and not facts.other_type(
        receiver, _OTHER_TYPE_NAME, _LIST_NAME):
      return True
  return any(isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mod, ast.Mult))
             and (facts.is_str(node.left) or facts.is_str(node.right)) for node in ast.walk(tree))


def _list_method(tree: ast.Module, facts: _Facts) -> bool:
  for receiver, method in _method_calls(tree):
    if method in LIST_ONLY_METHODS and not facts.is_module(receiver) and not facts.other_type(
        receiver, _OTHER_TYPE_NAME, _STR_NAME):
      return True
    if method in LIST_SHARED_METHODS and facts.is_list(receiver):
      return True
  return False


def body_lines(code: str) -> int:
  """Lines of the function's body, blank and comment-only lines and a leading docstring left out."""
  function = function_node(code)
  body = function.body[1:] if len(function.body) > 1 and is_docstring(function.body[0]) else function.body
  lines = code.splitlines()[body[0].lineno - 1:function.end_lineno]
  return sum(1 for line in lines if line.strip() and not line.strip().startswith("#"))


def parameters(function: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
  a = function.args
  return len(a.posonlyargs) + len(a.args) + len(a.kwonlyargs) + (a.vararg is not None) + (a.kwarg is not None)


def imported_modules(code: str) -> set[str]:
  """The distinct top-level modules the code imports (anywhere, relative imports left out)."""
  return _Facts(ast.parse(code)).modules


def labels(code: str) -> tuple[str, ...]:
  """Table 9's labels of a reference solution (data.practical_tasks.function_node's shape), in LABELS order."""
  tree = ast.parse(code)
  facts = _Facts(tree)
  nodes = list(ast.walk(tree))
  comprehensions = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
  found = {
      "assign": any(isinstance(n, (ast.Assign, ast.AugAssign, ast.NamedExpr))
                    or isinstance(n, ast.AnnAssign) and n.value is not None for n in nodes),
      "builtin": any(isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id in BUILTIN_FUNCTIONS
                     and n.id not in facts.bound for n in nodes),
      "cond": any(isinstance(n, (ast.If, ast.IfExp, ast.Match)) or isinstance(n, ast.comprehension) and n.ifs
                  for n in nodes),
      "loop": any(isinstance(n, (ast.For, ast.AsyncFor, ast.While, *comprehensions)) for n in nodes),
      "str": _string_operation(tree, facts),
      "list": _list_method(tree, facts),
      "multiline": body_lines(code) > 2,
      ">threevars": parameters(function_node(code)) > 3,
      "complextask": len(facts.modules) >= 2,
  }
  found["multipletask"] = sum(found.values()) >= 3
  return tuple(label for label in LABELS if found[label])


def packages(code: str) -> tuple[str, ...]:
  """The package labels of a solution: pandas / numpy / regex for each imported, else noimport or other."""
  modules = imported_modules(code)
  found = {_PACKAGE_MODULES[m] for m in modules if m in _PACKAGE_MODULES}
  if found:
    return tuple(p for p in PACKAGES if p in found)
  return ("other",) if modules else ("noimport",)


def derived_categories(code: str) -> tuple[str, ...]:
  """What --labels derived gives a problem: its labels, then its package(s)."""
  return labels(code) + packages(code)


def is_package(category: str) -> bool:
  """Whether a category names a package (derived, or the in-repo dataset's pandas / numpy / regex)."""
  return category in PACKAGES


def ast_depth(code: str) -> int:
  """Nodes on the longest root-to-leaf path of ast.parse(code), the module counted and every child
  ast.iter_child_nodes yields (Load / Store contexts too) counted. The paper does not define its depth."""

  def depth(node: ast.AST) -> int:
    return 1 + max((depth(child) for child in ast.iter_child_nodes(node)), default=0)

  return depth(ast.parse(code))


def code_lines(code: str) -> int:
  """Non-blank lines of the whole solution, imports included (the paper's Avg. Code Lines)."""
  return sum(1 for line in code.splitlines() if line.strip())


LABEL_SOURCES = ("derived", "dataset")


def with_labels(problems: Sequence[Problem], source: str | None, flag: str = "--labels"
                ) -> tuple[list[Problem], str]:
  """The problems with the categories of `source` ("derived": derived_categories of each reference;
  "dataset": as the file gives them; None: the dataset's when any problem has one, else derived),
  and the source used. `flag` names the setting in the error a dataset without labels raises."""
  if source is None:
    source = "dataset" if any(p.categories for p in problems) else "derived"
  if source not in LABEL_SOURCES:
    raise ValueError(f"{flag}: {source!r} is not one of {', '.join(LABEL_SOURCES)}")
  if source == "dataset":
    if not any(p.categories for p in problems):
      raise ValueError(f"{flag} dataset: no problem of the dataset has a category label; use {flag} derived")
    return list(problems), source
  return [dataclasses.replace(p, categories=derived_categories(p.code)) for p in problems], source
