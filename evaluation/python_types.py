"""Python annotations and values as typed-format types (sandbox/typed.py), for HumanEval's questions
(evaluation/humaneval/questions.py) and the iterative tasks' ground truth (evaluation/iterative/tasks.py).

A parameter's type comes from its annotation where that says enough; what it leaves open (UNKNOWN:
`list`, `Any`, no annotation) is unified over every test value: int with float gives float, None
makes optional<T>, an empty list takes its element type from the other cases.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from typing import Any

from sandbox import typed
from sandbox.typed import Type

UNKNOWN = Type("?")          # a type not known yet (an empty list's element, a bare `list` hint)


class Unsupported(ValueError):
  """The automatic path cannot type this problem; the message is the reason."""


# ---- annotations -----------------------------------------------------------------------------

_SCALAR_HINTS = {"int": "int", "float": "float", "str": "string", "bool": "bool"}


def annotation_type(node: ast.expr | None) -> Type:
  """A Python annotation -> a Type with UNKNOWN where it says nothing (`list`, `Any`, none)."""
  if node is None:
    return UNKNOWN
  if isinstance(node, ast.Name):
    if node.id in _SCALAR_HINTS:
      return Type(_SCALAR_HINTS[node.id])
    if node.id in ("list", "List"):
      return Type("list", (UNKNOWN,))
    if node.id in ("dict", "Dict"):
      return Type("map", (UNKNOWN, UNKNOWN))
    return UNKNOWN
  if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
    args = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
    inner = [annotation_type(a) for a in args]
    name = node.value.id.lower()
    if name == "list" and len(inner) == 1:
      return Type("list", tuple(inner))
    if name == "set" and len(inner) == 1:
      return Type("set", tuple(inner))
    if name == "dict" and len(inner) == 2:
      return Type("map", tuple(inner))
    if name == "tuple" and not any(isinstance(a, ast.Constant) and a.value is Ellipsis for a in args):
      return Type("tuple", tuple(inner))
    if name == "optional" and len(inner) == 1:
      return Type("optional", tuple(inner))
  return UNKNOWN


# ---- type inference --------------------------------------------------------------------------

def value_type(value: Any) -> Type:
  """The type of one Python literal value, UNKNOWN where it cannot tell (an empty list's items)."""
  if value is None:
    return Type("optional", (UNKNOWN,))
  if type(value) in (bool, int, float, str):
    return Type({bool: "bool", int: "int", float: "float", str: "string"}[type(value)])
  if type(value) is list:
    return Type("list", (unify_all(value_type(v) for v in value),))
  if type(value) in (set, frozenset):
    return Type("set", (unify_all(value_type(v) for v in value),))
  if type(value) is tuple:
    return Type("tuple", tuple(value_type(v) for v in value))
  if type(value) is dict:
    return Type("map", (unify_all(value_type(k) for k in value), unify_all(value_type(v) for v in value.values())))
  raise Unsupported(f"a value of type {type(value).__name__}: {value!r:.60}")


def unify_all(types: Iterable[Type]) -> Type:
  out = UNKNOWN
  for t in types:
    out = unify(out, t)
  return out


def unify(a: Type, b: Type) -> Type:
  """The one type both fit; int and float give float, None gives optional; else Unsupported."""
  if a == b:
    return a
  if a == UNKNOWN:
    return b
  if b == UNKNOWN:
    return a
  if a.name == "optional" or b.name == "optional":
    inner_a = a.element if a.name == "optional" else a
    inner_b = b.element if b.name == "optional" else b
    return Type("optional", (unify(inner_a, inner_b),))
  if {a.name, b.name} == {"int", "float"}:
    return Type("float")
  if a.name == b.name and a.name in ("list", "set", "map") or (
      a.name == b.name == "tuple" and len(a.args) == len(b.args)):
    return Type(a.name, tuple(unify(x, y) for x, y in zip(a.args, b.args)))
  raise Unsupported(f"mixed types {a} and {b}")


def complete(t: Type, what: str) -> Type:
  """`t` with no UNKNOWN left (an Unsupported names `what` otherwise)."""
  if UNKNOWN in typed.walk_types(t):
    raise Unsupported(f"cannot tell the type of {what} ({t}): no value shows it")
  text = str(t)
  try:
    return typed.parse_type(text)
  except ValueError as error:
    raise Unsupported(f"{what}: {error}") from None


def to_json(t: Type, value: Any, where: str) -> Any:
  """A Python value -> typed.py's canonical JSON for `t` (tuples and lists interchangeable)."""
  name = t.name
  if name == "optional":
    return None if value is None else to_json(t.element, value, where)
  if name == "float" and type(value) in (int, float):
    return float(value)
  if name == "int" and type(value) is int or name == "bool" and type(value) is bool \
      or name == "string" and type(value) is str:
    return value
  if name == "list" and type(value) in (list, tuple):
    return [to_json(t.element, v, where) for v in value]
  if name == "set" and type(value) in (set, frozenset):
    return [to_json(t.element, v, where) for v in sorted(value)]
  if name == "tuple" and type(value) in (list, tuple) and len(value) == len(t.args):
    return [to_json(a, v, where) for a, v in zip(t.args, value)]
  if name == "map" and type(value) is dict:
    return [[to_json(t.args[0], k, where), to_json(t.args[1], v, where)] for k, v in value.items()]
  raise Unsupported(f"{where}: {value!r:.60} is not a {t}")
