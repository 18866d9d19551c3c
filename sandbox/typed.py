"""Typed benchmark questions: a signature in language-neutral types and test cases as literal values.

One question per JSON line (the format `evaluation/data/humaneval_typed.jsonl` is written in):

  {"qid": "HumanEval/0", "entry_fn_name": "has_close_elements",
   "params": [{"name": "numbers", "type": "list<float>"}, {"name": "threshold", "type": "float"}],
   "return_type": "bool",
   "description": "Check if in given list of numbers, are any two numbers closer ...",
   "test_cases": [{"idx": 0, "inputs": [[1.0, 2.0, 3.9, 4.0, 5.0, 2.2], 0.3], "output": true}, ...]}

Types, written as strings: `bool`, `int` (64-bit), `float` (double), `string`, `list<T>`,
`set<T>`, `map<K,V>` (K is `int` or `string`), `tuple<A,B,...>`, `optional<T>`.

Values are JSON in one canonical form per type, the same form the test programs print their outputs
in: bool, int and float as JSON literals (`NaN`, `Infinity` and `-Infinity` allowed for floats),
string as a JSON string, list/set/tuple as an array (a set in any order), map as an array of
[key, value] pairs in any order (JSON objects only have string keys), optional as null or its
value. Optional fields: `float_precision` ("float" or "double": how returned floats compare, where
the question's source declares it; Tolerance), `solutions` (language name -> source program,
for translation prompts) and `declared_types` (`{"params": [...], "return": ...}`: the types the
question's source declares, finer than these, in BabelCode's leaf names: a whole program in a typed
language is called with them; `Question.declared`). `decode` turns such JSON into Python values of
the right type and refuses anything else, so the scorer compares plain data and never an object a
program made.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import reprlib
import sys
from collections.abc import Iterable, Sequence
from typing import Any

import storage

SCALARS = ("bool", "int", "float", "string")
# BabelCode's leaf types: what a source's signature declares (a 32-bit integer or a 64-bit long, a
# single float or a double, a character), and what each is here.
DECLARED_SCALARS = {"boolean": "bool", "integer": "int", "long": "int", "float": "float", "double": "float",
                    "character": "string", "string": "string"}
GENERICS = {"list": 1, "set": 1, "optional": 1, "map": 2, "tuple": None}  # None: any arity >= 1
INT64 = (-(2 ** 63), 2 ** 63 - 1)
FLOAT_TOLERANCE = 1e-6  # relative and absolute, as BabelCode's default
# BabelCode's literal rule: a float written with a run of 7 or more digits after some character
# (0.1234567, 12345678.0) is a double; typed questions have one float type, so the rule is applied to
# the expected values (Tolerance).
_DOUBLE_LITERAL = re.compile(r".[0-9]{7,}")


@dataclasses.dataclass(frozen=True)
class Type:
  name: str                        # one of SCALARS or GENERICS
  args: tuple["Type", ...] = ()

  def __str__(self) -> str:
    return self.name if not self.args else f"{self.name}<{','.join(map(str, self.args))}>"

  @property
  def element(self) -> "Type":
    """The element type of a list, set or optional."""
    return self.args[0]


def parse_type(text: str, scalars: Sequence[str] = SCALARS) -> Type:
  """`list<map<string,int>>` -> Type; a ValueError names what is wrong. `scalars`: the leaf names
  (DECLARED_SCALARS for a declared type)."""
  parsed, rest = _parse(text.replace(" ", ""), text, tuple(scalars))
  if rest:
    raise ValueError(f"type {text!r}: unexpected {rest!r}")
  return parsed


def _parse(text: str, whole: str, scalars: tuple[str, ...]) -> tuple[Type, str]:
  end = 0
  while end < len(text) and (text[end].isalnum() or text[end] == "_"):
    end += 1
  name, rest = text[:end], text[end:]
  if name in scalars:
    return Type(name), rest
  if name not in GENERICS:
    raise ValueError(f"type {whole!r}: unknown type {name!r}; types are "
                     f"{', '.join(scalars + tuple(GENERICS))}")
  if not rest.startswith("<"):
    raise ValueError(f"type {whole!r}: {name} needs <...> arguments")
  args, rest = [], rest[1:]
  while True:
    arg, rest = _parse(rest, whole, scalars)
    args.append(arg)
    if rest.startswith(","):
      rest = rest[1:]
    elif rest.startswith(">"):
      rest = rest[1:]
      break
    else:
      raise ValueError(f"type {whole!r}: expected ',' or '>' at {rest!r}")
  arity = GENERICS[name]
  if arity is not None and len(args) != arity:
    raise ValueError(f"type {whole!r}: {name} takes {arity} argument(s), got {len(args)}")
  if name == "map" and (DECLARED_SCALARS.get(args[0].name) or args[0].name) not in ("int", "string"):
    raise ValueError(f"type {whole!r}: map keys are int or string")
  if name in ("set",) and args[0].name not in scalars:
    raise ValueError(f"type {whole!r}: set elements are scalars")
  return Type(name, tuple(args)), rest


class NotADouble(ValueError):
  """An int past a double's range where a float belongs: data no harness prints (each converts a
  returned value to a double first), so a forged record."""


def decode(type_: Type, value: Any, where: str = "value") -> Any:
  """JSON data -> the Python value of `type_` (tuple for tuple, frozenset for set, dict for map,
  None for an absent optional). Raises ValueError naming `where` when the data does not fit."""
  name = type_.name
  if name == "optional":
    return None if value is None else decode(type_.element, value, where)
  if name == "bool":
    if type(value) is not bool:
      raise ValueError(f"{where}: expected bool, got {_show(value)}")
    return value
  if name == "int":
    if type(value) is float and value.is_integer():  # R and Lua 5.3 may print 3.0 for an int
      value = int(value)
    if type(value) is not int or not INT64[0] <= value <= INT64[1]:
      raise ValueError(f"{where}: expected a 64-bit int, got {_show(value)}")
    return value
  if name == "float":
    if type(value) not in (int, float):
      raise ValueError(f"{where}: expected float, got {_show(value)}")
    if type(value) is int and not -_MAX_DOUBLE <= value <= _MAX_DOUBLE:  # float() would overflow
      raise NotADouble(f"{where}: expected float, got an int of {_digits(value)} digits")
    return float(value)
  if name == "string":
    if type(value) is not str:
      raise ValueError(f"{where}: expected string, got {_show(value)}")
    return value
  if type(value) is not list:
    raise ValueError(f"{where}: expected an array for {type_}, got {_show(value)}")
  if name == "list":
    return [decode(type_.element, v, f"{where}[{i}]") for i, v in enumerate(value)]
  if name == "set":
    items = [decode(type_.element, v, f"{where}[{i}]") for i, v in enumerate(value)]
    return frozenset(items)
  if name == "tuple":
    if len(value) != len(type_.args):
      raise ValueError(f"{where}: expected {len(type_.args)} items for {type_}, got {len(value)}")
    return tuple(decode(t, v, f"{where}[{i}]") for i, (t, v) in enumerate(zip(type_.args, value)))
  if name == "map":
    out = {}
    for i, pair in enumerate(value):
      if type(pair) is not list or len(pair) != 2:
        raise ValueError(f"{where}[{i}]: a map entry is a [key, value] pair, got {_show(pair)}")
      key = decode(type_.args[0], pair[0], f"{where}[{i}][0]")
      if key in out:
        raise ValueError(f"{where}: key {_show(key)} appears twice")
      out[key] = decode(type_.args[1], pair[1], f"{where}[{i}][1]")
    return out
  raise AssertionError(name)


_MAX_DOUBLE = int(sys.float_info.max)
_SHOW = reprlib.Repr()
_SHOW.maxlevel, _SHOW.maxstring, _SHOW.maxother = 3, 60, 60


def _show(value: Any) -> str:
  """A short repr of any decoded JSON (reprlib: bounded for deep or long data) that never raises:
  repr of an int over 4,300 digits does."""
  try:
    return _SHOW.repr(value)[:80]
  except Exception:  # noqa: BLE001 - a message, never a second failure
    return f"{type(value).__name__} (too large to show)"


def _digits(value: int) -> str:
  return f"about {int(value.bit_length() * 0.30103) + 1}"


def encode(type_: Type, value: Any) -> Any:
  """The inverse of `decode`: a Python value of `type_` -> canonical JSON data."""
  name = type_.name
  if name == "optional":
    return None if value is None else encode(type_.element, value)
  if name == "float":
    return float(value)
  if name in SCALARS:
    return value
  if name == "list":
    return [encode(type_.element, v) for v in value]
  if name == "set":
    return [encode(type_.element, v) for v in sorted(value, key=_sort_key)]
  if name == "tuple":
    return [encode(t, v) for t, v in zip(type_.args, value)]
  if name == "map":
    return [[encode(type_.args[0], k), encode(type_.args[1], v)] for k, v in value.items()]
  raise AssertionError(name)


def _sort_key(value: Any) -> tuple:
  return (type(value).__name__, value)


def equal(type_: Type, expected: Any, actual: Any, tolerance: float = FLOAT_TOLERANCE) -> bool:
  """Deep equality of two decoded values of `type_`; floats within `tolerance` (relative or
  absolute), NaN equal to NaN."""
  name = type_.name
  if name == "optional":
    if expected is None or actual is None:
      return expected is None and actual is None
    return equal(type_.element, expected, actual, tolerance)
  if name == "float":
    if math.isnan(expected) or math.isnan(actual):
      return math.isnan(expected) and math.isnan(actual)
    return math.isclose(expected, actual, rel_tol=tolerance, abs_tol=tolerance)
  if name in ("bool", "int", "string", "set"):
    return type(expected) is type(actual) and expected == actual
  if name in ("list", "tuple"):
    types = [type_.element] * len(expected) if name == "list" else list(type_.args)
    return len(expected) == len(actual) and all(
        equal(t, e, a, tolerance) for t, e, a in zip(types, expected, actual))
  if name == "map":
    return expected.keys() == actual.keys() and all(
        equal(type_.args[1], expected[k], actual[k], tolerance) for k in expected)
  raise AssertionError(name)


def is_double(value: float) -> bool:
  """Whether BabelCode would type this float literal as a double (Python's shortest repr)."""
  return bool(_DOUBLE_LITERAL.search(repr(float(value))))


def floats(type_: Type, value: Any) -> Iterable[float]:
  """The float values inside a decoded value of `type_`."""
  name = type_.name
  if value is None:
    return
  if name == "float":
    yield value
  elif name in ("list", "set", "optional"):
    for item in (value if name != "optional" else (value,)):
      yield from floats(type_.element, item)
  elif name == "tuple":
    for t, item in zip(type_.args, value):
      yield from floats(t, item)
  elif name == "map":
    for k, v in value.items():
      yield from floats(type_.args[0], k)
      yield from floats(type_.args[1], v)


@dataclasses.dataclass(frozen=True)
class Tolerance:
  """How close a returned float must be to the expected one (relative or absolute), as the paper
  (BabelCode) compares: 1e-6 for a float, 1e-9 for a double. A question's return values are doubles
  when any expected float of any test case is a double literal (`is_double`), as BabelCode reconciles
  one return type over the test cases; otherwise floats."""
  float: float = FLOAT_TOLERANCE
  double: float = 1e-9

  def of(self, question: "Question") -> float:
    if question.float_precision is not None:  # declared by the question (a BabelCode schema)
      return self.double if question.float_precision == "double" else self.float
    doubles = any(is_double(x) for case in question.test_cases
                  for x in floats(question.return_type, case.output) if math.isfinite(x))
    return self.double if doubles else self.float


PAPER_TOLERANCE = Tolerance()


def default_value(type_: Type) -> Any:
  """The return type's default (0, 0.0, "", false, empty, null): what the stub programs return."""
  return {"bool": False, "int": 0, "float": 0.0, "string": "", "list": [], "set": frozenset(),
          "map": {}, "optional": None}.get(type_.name) if type_.name != "tuple" else tuple(
              default_value(t) for t in type_.args)


@dataclasses.dataclass(frozen=True)
class Param:
  name: str
  type: Type


@dataclasses.dataclass(frozen=True)
class TestCase:
  idx: int
  inputs: tuple            # decoded Python values, one per parameter
  output: Any              # decoded expected value


@dataclasses.dataclass(frozen=True)
class Question:
  qid: str
  entry_fn_name: str       # the benchmark's (Python, snake_case) name; renderers convert it
  params: tuple[Param, ...]
  return_type: Type
  description: str         # plain text; renderers turn it into the language's doc comment
  test_cases: tuple[TestCase, ...]
  # "float" or "double" where the question's source declares how its returned floats compare (a
  # BabelCode schema's float or double); None: told from the expected values (Tolerance.of).
  float_precision: str | None = None
  # Source programs for translation, (language, program) pairs by codelm language name.
  solutions: tuple[tuple[str, str], ...] = ()
  # The types the source declares (each parameter's, then the return's) in DECLARED_SCALARS' leaf
  # names; () when it declares none beyond these.
  declared_types: tuple[Type, ...] = ()

  def solution(self, language: str) -> str | None:
    return dict(self.solutions).get(language)

  @property
  def declared(self) -> tuple[Type, ...]:
    """Each parameter's type, then the return type, in DECLARED_SCALARS' leaf names: what a whole
    program's signature is written in. Without declared types: an int is a long, a float a double,
    as the prompts declare them (an optional return is its element)."""
    if self.declared_types:
      return self.declared_types
    return tuple(_as_declared(t) for t in (*self.types, self.return_type))

  @property
  def types(self) -> tuple[Type, ...]:
    return tuple(p.type for p in self.params)

  def to_json(self) -> dict:
    return {"qid": self.qid, "entry_fn_name": self.entry_fn_name,
            "params": [{"name": p.name, "type": str(p.type)} for p in self.params],
            "return_type": str(self.return_type), "description": self.description,
            "test_cases": [{"idx": t.idx,
                            "inputs": [encode(p.type, v) for p, v in zip(self.params, t.inputs)],
                            "output": encode(self.return_type, t.output)} for t in self.test_cases],
            **({"float_precision": self.float_precision} if self.float_precision else {}),
            **({"solutions": dict(self.solutions)} if self.solutions else {}),
            **({"declared_types": {"params": [str(t) for t in self.declared_types[:-1]],
                                   "return": str(self.declared_types[-1])}} if self.declared_types else {})}


def _as_declared(type_: Type) -> Type:
  if type_.name == "optional":
    return _as_declared(type_.element)
  leaf = {"bool": "boolean", "int": "long", "float": "double", "string": "string"}.get(type_.name)
  return Type(leaf) if leaf else Type(type_.name, tuple(_as_declared(a) for a in type_.args))


def _declared_types(record: dict, params: Sequence[Param], return_type: Type) -> tuple[Type, ...]:
  """A record's declared_types, checked against its typed types: one per parameter, each of the same
  shape, leaf for leaf (an optional return declares its element)."""
  declared = record.get("declared_types")
  if declared is None:
    return ()
  if not isinstance(declared, dict) or not isinstance(declared.get("params"), list) or "return" not in declared:
    raise ValueError("declared_types is {params: [type, ...], return: type}")
  if len(declared["params"]) != len(params):
    raise ValueError(f"declared_types has {len(declared['params'])} params for {len(params)} parameters")
  out = tuple(parse_type(str(t), DECLARED_SCALARS) for t in (*declared["params"], declared["return"]))
  returns = return_type.element if return_type.name == "optional" else return_type
  for name, plain, fine in zip([p.name for p in params] + ["the return"], [*(p.type for p in params), returns], out):
    if _shape(plain) != _shape(fine):
      raise ValueError(f"declared type {fine} of {name} does not fit its type {plain}")
  return out


def _shape(type_: Type) -> tuple:
  """A type with declared leaves as the typed leaves they are."""
  return (DECLARED_SCALARS.get(type_.name, type_.name), tuple(_shape(a) for a in type_.args))


def question_from_json(record: dict, where: str = "question") -> Question:
  """A Question from one JSON line; a ValueError names `where` and the field at fault."""
  try:
    params = tuple(Param(p["name"], parse_type(p["type"])) for p in record["params"])
    return_type = parse_type(record["return_type"])
    cases = []
    for i, case in enumerate(record["test_cases"]):
      inputs = case["inputs"]
      if len(inputs) != len(params):
        raise ValueError(f"test case {i} has {len(inputs)} inputs for {len(params)} parameters")
      cases.append(TestCase(int(case.get("idx", i)), tuple(
          decode(p.type, v, f"test case {i} input {p.name}") for p, v in zip(params, inputs)),
          decode(return_type, case["output"], f"test case {i} output")))
    if not cases:
      raise ValueError("no test cases")
    precision = record.get("float_precision")
    if precision not in (None, "float", "double"):
      raise ValueError(f"float_precision is float or double, got {precision!r}")
    solutions = record.get("solutions", {})
    if not isinstance(solutions, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in solutions.items()):
      raise ValueError("solutions maps a language name to a program")
    return Question(str(record["qid"]), str(record["entry_fn_name"]), params, return_type,
                    str(record.get("description", "")), tuple(cases), precision,
                    tuple(sorted(solutions.items())), _declared_types(record, params, return_type))
  except KeyError as error:
    raise ValueError(f"{where}: missing field {error}") from None
  except (ValueError, TypeError) as error:
    raise ValueError(f"{where}: {error}") from None


def read_questions(path: str) -> list[Question]:
  return [question_from_json(record, f"{path}:{number}") for number, record in storage.read_jsonl(path)]


def write_questions(questions: Iterable[Question], path: str) -> None:
  storage.write_atomic(path, "".join(json.dumps(q.to_json(), ensure_ascii=False) + "\n" for q in questions))


def walk_types(type_: Type) -> Sequence[Type]:
  """`type_` and every type nested in it, outermost first."""
  out = [type_]
  for arg in type_.args:
    out.extend(walk_types(arg))
  return out
