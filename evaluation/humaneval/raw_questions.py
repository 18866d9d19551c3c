"""BabelCode's raw question files -> its parsed question format, with BabelCode's own question sets:
161 / 855 / 370 / 524 questions for HumanEval / MBPP / TP3 / Transcoder.

  python -m evaluation.humaneval.raw_questions --raw mbpp_questions.jsonl --output mbpp.jsonl \
      --failures mbpp_failures.jsonl [--fixes dataset_fixes/mbpp.jsonl]
  python -m evaluation.humaneval.babelcode --questions mbpp.jsonl --output mbpp_typed.jsonl

A raw question (BabelCode's `RawQuestion`) holds a Python `solution` with the entry function and
`testing_code` with `assert f(...) == literal` lines. A fix (one line of the fixes file) replaces the
fields it names in the question of its id; of two fixes for one id the later counts. Then, as
BabelCode's `dataset_conversion` does (google-research/babelcode, commit e8314f6):

- the signature: the entry function's parameters, lowercased, numbered where two meet (a, A -> a0, a1),
  renamed `<name>_arg<i>` where a language reserves the name (`string` -> `string_arg0`); types from
  `int`, `str`, `bool`, `float`, `List[...]`, `Set[...]`, `Dict[K, V]`, `Tuple[...]` annotations;
  defaults, `*args`, keyword-only and positional-only parameters refuse the question;
- the tests: an `assert f(args) == literal`, `assert f(args)` (true) or `assert not f(args)` (false) at
  any depth outside functions, classes, loops, `with` and assignments (those are skipped, asserts in
  them too); keyword arguments are dropped. Refused: other operators, a call that is not on the left
  or is an attribute, a call wrapped in another, a name or expression where a literal belongs, imports;
- literal types: an int of more than 9 digits is a long, a float whose text has 7 digits after its
  first character a double, a one-character string a character; the elements of a list, set or map
  must agree after widening (integer -> long -> double, integer -> float -> double, character ->
  string); `[[], [1]]` is list<list<integer>> (an empty list takes its type from a later one, not an
  earlier one); `{}` is an empty set; a tuple types each element;
- each parameter's type and the return type: the test literals' types, merged over the tests (a null
  one yields to any other, a deeper one wins), reconciled with the annotation where there is one.

Then, as BabelCode's generator (`generate_test_code.py`) does, questions are left out that no language
can build tests for: a tuple whose elements differ (no language has a type for it), an input null where
the type has none (integer, float, boolean), an input whose value is not of its type, a set of lists.
A null expected output stays null, except for a boolean return, which becomes false: the literal that
BabelCode's generator writes in 15 of its 16 languages (its Python template writes `None`, so BabelCode's
own Python tests of those questions expect None). (A null int or float output is compared as Python's
None by BabelCode; the typed converter makes such a question's return type optional, and the summary
names those questions.)

Every question left out goes to the failures file with BabelCode's error class and message.
"""

from __future__ import annotations

import argparse
import ast
import collections
import dataclasses
import json
import re
import sys
from collections.abc import Sequence
from typing import Any

import storage
from sandbox.renderers.base import convention_name

PY_TO_GENERIC = {"int": "integer", "str": "string", "bool": "boolean", "float": "float"}
PRIMITIVES = ("string", "integer", "boolean", "float", "double", "character", "long")
NULLABLE = ("string", "character", "list", "map", "tuple", "set")
# BabelCode's reconcile_type: a leaf type widens to these on a collision.
WIDENS = {"float": {"double"}, "integer": {"long", "float", "double"}, "long": {"double"},
          "character": {"string"}}
# The type words whose presence makes BabelCode merge an element list's types before comparing them.
MERGED_WORDS = ("long", "integer", "float", "double", "string", "character")
# The entries of BabelCode's data/reserved_keywords.txt (Apache-2.0) that a lowercased Python parameter
# name can equal; Python's own keywords are left out, as no parameter can have their names.
RESERVED = frozenset("""
_ abstract add alias and_eq arguments ascending asm auto base bitand bitor bool boolean byte case catch
chan char checked cin compare compl const const_cast cout data debugger decimal default defer delegate
delete deriving descending do double dynamic dynamic_cast end endl entry enum eval event explicit export
extends extern fallthrough false family final fixed float forall foreach foreign friend func function
get go goto group hiding implement implements implicit imports include infix infixl infixr inline
instance instanceof int interface internal into iomanip iostream java join length let lock long main
map maximum mdo minimum mod module mutable name namespace native new newtype not_eq npos null object
operator or_eq orderby out override package params partial private proc protected prototype public
qualified range readonly rec ref register reinterpret_cast remove sbyte sealed select set short sizeof
stackalloc static static_cast std strictfp string struct super switch synchronized template then this
throw throws transient true type typedef typeid typename typeof uint ulong unchecked undefined union
unsafe unsigned ushort using value var virtual void volatile wchar_t where xor xor_eq""".split())
# The naming convention of each BabelCode language: a solution's entry name is rewritten in it.
CONVENTIONS = {"C++": "camel", "CSharp": "pascal", "Dart": "camel", "Elixir": "snake", "Go": "camel",
               "Haskell": "camel", "Java": "camel", "Javascript": "camel", "Julia": "snake",
               "Kotlin": "camel", "Lua": "snake", "PHP": "camel", "Python": "snake", "R": "snake",
               "Rust": "snake", "Scala": "camel", "TypeScript": "camel"}
REQUIRED_FIELDS = ("id", "title", "testing_code", "entry_fn_name", "solution")
OPTIONAL_FIELDS = ("text", "entry_cls_name", "metadata", "other_lang_solutions")
SKIPPED = (ast.Assign, ast.With, ast.For, ast.While, ast.FunctionDef, ast.ClassDef, ast.AnnAssign,
           ast.ListComp, ast.Lambda, ast.DictComp, ast.GeneratorExp)
# BabelCode's double test: seven digits that do not start the float's text ("0.1234567", "12345678.0").
DOUBLE_DIGITS = re.compile(r"(?<=.)[0-9]{7}")


class Rejected(Exception):
  """A question left out: `error` is BabelCode's error class for it, `reason` its message."""

  def __init__(self, error: str, reason: str, detail: str = ""):
    super().__init__(f"{error}: {reason}")
    self.error, self.reason, self.detail = error, reason, detail


# ---------------------------------------------------------------------------------------------
# BabelCode's generic types (schema_parsing.SchemaType), as strings and parsed.


@dataclasses.dataclass(frozen=True)
class SchemaType:
  """A generic type: a leaf name, or list/set/tuple/map with their element types (a map's key apart)."""
  name: str
  elements: tuple["SchemaType", ...] = ()
  key: "SchemaType | None" = None

  def __post_init__(self):
    if self.name in ("list", "map", "tuple", "set") and not self.elements:
      raise Rejected("SchemaTypeError", "data structure type must have a value")

  @property
  def leaf(self) -> bool:
    return not self.elements

  @property
  def depth(self) -> int:
    return 0 if self.leaf else 1 + max(e.depth for e in self.elements)

  def generic(self) -> str:
    if self.name in ("list", "set", "tuple"):
      return f"{self.name}<{('|' if self.name == 'tuple' else ',').join(e.generic() for e in self.elements)}>"
    if self.name == "map":
      return f"map<{self.key.generic()};{self.elements[0].generic()}>"
    return self.name  # other names (an `Optional[int]` annotation's) lose their arguments, as in BabelCode


def parse_type(text: str) -> SchemaType:
  """A generic type string parsed; `tuple<A|A>` is list<A>, as everywhere in BabelCode."""
  opens = text.count("<")
  if opens != text.count(">"):
    raise Rejected("SchemaTypeError", f'"{text}" does not have same number of <>')
  if "[]" in text:
    if opens:
      raise Rejected("SchemaTypeError", f'"{text}" has both [] and <>')
    return SchemaType("list", (parse_type(text.replace("[]", "", 1)),))
  if not opens:
    return SchemaType(text)
  name, _, inner = text.partition("<")
  if not inner.endswith(">"):
    raise Rejected("SchemaTypeError", f"{text} has extra after last >")
  inner = inner[:-1]
  if name == "map":
    if ";" not in inner:
      raise Rejected("SchemaTypeError", f"Expected map to be in the form map<TYPE_1;TYPE_2>, but got {text}")
    key, value = inner.split(";", 1)
    return SchemaType("map", (parse_type(value),), parse_type(key))
  if name == "tuple":
    parts = _tuple_parts(inner)
    if len(set(parts)) == 1:
      return SchemaType("list", (parse_type(parts[0]),))
    return SchemaType("tuple", tuple(parse_type(p) for p in parts))
  return SchemaType(name, (parse_type(inner),))


def _tuple_parts(inner: str) -> list[str]:
  """A tuple's element types: `inner` split at the |s outside <>; an empty last part is dropped."""
  parts, depth, current = [], 0, ""
  for char in inner:
    if char == "|" and depth == 0:
      parts.append(current)
      current = ""
      continue
    depth += {"<": 1, ">": -1}.get(char, 0)
    if depth < 0:
      raise Rejected("SchemaTypeError", f'{inner} has uneven ">" characters')
    current += char
  if depth:
    raise Rejected("SchemaTypeError", f'{inner} has uneven ">" characters')
  return parts + ([current] if current else [])


def generic_equal(left: SchemaType, right: SchemaType) -> bool:
  """BabelCode's is_generic_equal: the same shape, where a null leaf equals anything."""
  if left.leaf or right.leaf:
    return "null" in (left.name, right.name) or left.name == right.name
  if left.name != right.name or len(left.elements) != len(right.elements):
    return False
  if left.name == "map" and (left.key is None or right.key is None or not generic_equal(left.key, right.key)):
    return False
  return all(generic_equal(a, b) for a, b in zip(left.elements, right.elements))


def reconcile(left: SchemaType, right: SchemaType) -> SchemaType | None:
  """The wider of two types that differ only in widenable leaves (integer and float -> float), or None."""
  if left.leaf or right.leaf:
    if not (left.leaf and right.leaf):
      return None
    if right.name in WIDENS.get(left.name, ()):
      return right
    if left.name in WIDENS.get(right.name, ()):
      return left
    return None
  if left.name != right.name or len(left.elements) != len(right.elements) or left.key != right.key:
    return None
  elements = []
  for a, b in zip(left.elements, right.elements):
    merged = reconcile(a, b)
    if merged is None:
      return None
    elements.append(merged)
  return parse_type(dataclasses.replace(left, elements=tuple(elements)).generic())


# ---------------------------------------------------------------------------------------------
# Literals (assertion_parsing.LiteralParser): a Python literal's value, type string and depth.


@dataclasses.dataclass(frozen=True)
class Literal:
  value: Any
  type: str
  depth: int  # how many containers are nested, which decides between two tests' types of a parameter


def parse_literal(node: ast.AST | None, depth: int = 0) -> Literal:
  if isinstance(node, ast.Constant):
    return _constant(node.value, depth)
  if isinstance(node, (ast.List, ast.Set)):
    values, types, deepest = _children(node.elts, depth + 1)
    element = _one_type(types)
    if element in ("float", "double"):
      values = [float(v) for v in values]
    return Literal(values, f"{'list' if isinstance(node, ast.List) else 'set'}<{element}>", deepest)
  if isinstance(node, ast.Tuple):
    values, types, deepest = _children(node.elts, depth + 1)
    return Literal(values, f"tuple<{'|'.join(types) or 'null'}>", deepest)
  if isinstance(node, ast.Dict):
    return _dict(node, depth + 1)
  if isinstance(node, ast.UnaryOp):
    values, types, deepest = _children([node.operand], depth)
    type_, value = _one_type(types), values[0]
    if isinstance(node.op, ast.USub):
      try:
        value = -1 * value  # BabelCode's rule, so -"a" is "" and -True is -1 of type boolean
      except (TypeError, ValueError):
        raise Rejected("LiteralParsingError", "Could not apply -1 * node") from None
    elif isinstance(node.op, ast.Not):
      value, type_ = not value, "boolean"
    else:
      raise Rejected("LiteralParsingError", f"Unsupported unary op {type(node.op).__name__}")
    return Literal(value, type_, deepest)
  raise Rejected("LiteralParsingError", f"{type(node).__name__} is not supported")


def _constant(value: Any, depth: int) -> Literal:
  if value is None:
    return Literal(None, "null", depth)
  name = type(value).__name__
  if name not in PY_TO_GENERIC:
    raise Rejected("LiteralParsingError", f"{name} is a constant but not a primitive")
  type_ = PY_TO_GENERIC[name]
  if type_ == "float" and DOUBLE_DIGITS.search(str(value)):
    type_ = "double"
  elif type_ == "integer" and len(str(value)) > 9:
    type_ = "long"
  elif type_ == "string" and len(value) == 1:
    type_ = "character"
  return Literal(value, type_, depth)


def _children(nodes: Sequence[ast.AST | None], depth: int) -> tuple[list, list[str], int]:
  """The elements' values, their types and the deepest depth. A type replaces an earlier one of the same
  shape that has a null in it ([[], [1]]: list<integer> once); any other type is added."""
  values, types, deepest = [], [], depth
  for node in nodes:
    literal = parse_literal(node, depth)
    schema = parse_type(literal.type)
    replace = None
    for i, (text, other) in enumerate(types):
      if generic_equal(schema, other) and not schema.leaf:
        if "null" in text and "null" not in literal.type and "tuple" not in literal.type:
          replace = i
        break
    if replace is None:
      types.append((literal.type, schema))
    else:
      types[replace] = (literal.type, schema)
    values.append(literal.value)
    deepest = max(deepest, literal.depth)
  return values, [text for text, _ in types], deepest


def _one_type(types: list[str]) -> str:
  """The one element type of a container (after widening where a numeric or text type is among them);
  "null" for none; more than one refuses the literal."""
  if any(word in text for text in types for word in MERGED_WORDS):
    kept: list[SchemaType] = []
    for text in types:
      new, survivors = parse_type(text), []
      for other in kept:
        merged = reconcile(new, other)
        if merged is None:
          survivors.append(other)
        else:
          new = merged
      kept = survivors + [new]
    types = [k.generic() for k in kept]
  if not types:
    return "null"
  if len(set(types)) != 1:
    raise Rejected("LiteralParsingError", f"Expecting one type, got {len(set(types))}")
  return types[0]


def _dict(node: ast.Dict, depth: int) -> Literal:
  keys, key_types, _ = _children(node.keys, depth)  # a **spread's key is None: "NoneType is not supported"
  key_type = _one_type(key_types)
  if key_type == "character":
    key_type = "string"
  elif key_type not in ("integer", "string", "boolean"):
    if key_type == "null":  # {} (and, as in BabelCode, {None: x}) is an empty set
      return Literal({}, "set<null>", depth)
    raise Rejected("LiteralParsingError", f"Dictionary keys cannot be of type {key_type}")
  values, value_types, deepest = _children(node.values, depth)
  value_type = _one_type(value_types)
  if value_type in ("float", "double"):
    values = [float(v) for v in values]
  return Literal(dict(zip(keys, values)), f"map<{key_type};{value_type}>", deepest)


# ---------------------------------------------------------------------------------------------
# The tests (assertion_parsing.AssertionToSchemaVisitor) and the signature (question_parsing).


@dataclasses.dataclass(frozen=True)
class TestCase:
  __test__ = False  # not a pytest class
  inputs: tuple[Literal, ...]
  output: Literal


class _Asserts:
  """Walks testing code as BabelCode's visitor does, including its state: the arguments of the last
  call read stay until the next assert, so a bare call after an assert refuses the question."""

  def __init__(self, entry: str):
    self.entry, self.cases, self.inputs = entry, [], []

  def walk(self, node: ast.AST) -> None:
    if isinstance(node, ast.Assert):
      self._assert(node)
    elif isinstance(node, ast.Call):
      self._call(node)
    elif isinstance(node, (ast.Import, ast.ImportFrom)):
      raise Rejected("AssertionToSchemaError", "Imports are not supported")
    elif not isinstance(node, SKIPPED):
      for child in ast.iter_child_nodes(node):
        self.walk(child)

  def _assert(self, node: ast.Assert) -> None:
    self.inputs = []
    test = node.test
    if isinstance(test, ast.Compare):
      if not isinstance(test.ops[0], ast.Eq):
        raise Rejected("AssertionToSchemaError", "Only == is supported for operators")
      if not isinstance(test.left, ast.Call):
        raise Rejected("AssertionToSchemaError", "Only calls on the left side are currently supported")
      self._call(test.left)
      if len(test.comparators) != 1:
        raise Rejected("AssertionToSchemaError", "The right hand side must be a single value")
      output = parse_literal(test.comparators[0])
    elif isinstance(test, ast.UnaryOp):
      if not isinstance(test.op, ast.Not):
        raise Rejected("AssertionToSchemaError", 'Only "not" is supported for unary operators')
      if not isinstance(test.operand, ast.Call):
        raise Rejected("AssertionToSchemaError", 'When using "not", the operand must be a call')
      self._call(test.operand)
      output = Literal(False, "boolean", 0)
    elif isinstance(test, ast.Call):
      self._call(test)
      output = Literal(True, "boolean", 0)
    else:
      raise Rejected("AssertionToSchemaError", f"Unexpected type of {type(test).__name__} for test call")
    self.cases.append(TestCase(tuple(self.inputs), output))

  def _call(self, node: ast.Call) -> None:
    """The call's positional arguments become the test's inputs, whatever function it names; a call
    inside another function's arguments is read first, so the outer one then refuses the question."""
    if not isinstance(node.func, ast.Name):
      raise Rejected("AssertionToSchemaError", "The calling function must be a name (i.e. not an attribute)")
    if node.func.id != self.entry:
      for arg in node.args:
        self.walk(arg)
    if self.inputs:
      raise Rejected("AssertionToSchemaError", "Multiple non-nested function calls are not yet supported")
    for arg in node.args:
      self.inputs.append(parse_literal(arg))
    if not self.inputs:
      raise Rejected("AssertionToSchemaError", "Calls with no arguments are not supported.")


@dataclasses.dataclass(frozen=True)
class Signature:
  names: tuple[str, ...]  # as BabelCode renames them
  annotations: dict[str, str | None]
  returns: str | None

  @property
  def annotated(self) -> bool:
    return any(t is not None for t in self.annotations.values())


def signature(solution: str, entry: str) -> Signature:
  function = next((s for s in _parse_python(solution, "solution").body
                   if isinstance(s, ast.FunctionDef) and s.name == entry), None)
  if function is None:
    raise Rejected("QuestionValidationError", "Unable to find entry function")
  args = function.args
  if args.defaults:
    raise Rejected("QuestionValidationError", "Defaults are not supported yet")
  if args.posonlyargs or args.vararg or args.kwonlyargs:
    raise Rejected("QuestionValidationError", "Unsupported argument types in the solution")
  if not args.args:
    raise Rejected("QuestionParsingError", "No arguments")
  names: list[str] = []
  annotations: dict[str, str | None] = {}
  repeats = collections.Counter()
  for arg in args.args:
    name = arg.arg.lower()
    if repeats[name]:
      repeats[name] += 1
      name = f"{name}{repeats[name]}"
    elif name in annotations:  # the second of a name: the first becomes name0, this one name1
      annotations[f"{name}0"] = annotations.pop(name)
      names[names.index(name)] = f"{name}0"
      repeats[name] += 1
      name = f"{name}{repeats[name]}"
    names.append(name)
    annotations[name] = _annotation(arg.annotation)
  for i, name in enumerate(names):
    if name in RESERVED:
      names[i] = f"{name}_arg{i}"
      annotations[names[i]] = annotations.pop(name)
  return Signature(tuple(names), annotations, _annotation(function.returns))


def _annotation(node: ast.AST | None) -> str | None:
  """An annotation as a generic type, or None where there is none or BabelCode cannot read it."""
  try:
    return None if node is None else _annotation_type(node)
  except ValueError:
    return None


def _annotation_type(node: ast.AST) -> str:
  if isinstance(node, ast.Name):
    if node.id not in PY_TO_GENERIC:
      raise ValueError(node.id)
    return PY_TO_GENERIC[node.id]
  # Only X[name] and X[a, b] read: List[List[int]] is no annotation for BabelCode.
  if not isinstance(node, ast.Subscript) or not isinstance(node.slice, (ast.Tuple, ast.Name)):
    raise ValueError("not a subscript of names")
  index = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
  children = [_annotation_type(c) for c in index]
  if not isinstance(node.value, ast.Name) or node.value.id in PY_TO_GENERIC:  # typing.List: BabelCode crashes
    raise ValueError("not a container name")
  name = node.value.id
  if name == "Dict":
    if len(children) != 2:
      raise ValueError("Dict needs two")
    return f"map<{';'.join(children)}>"
  if name == "Tuple":
    return f"tuple<{'|'.join(children)}>"
  if len(children) != 1:
    raise ValueError(f"{name} needs one")
  return f"{name.lower() if name in ('List', 'Set') else name}<{children[0]}>"


def _parse_python(source: str, what: str) -> ast.Module:
  try:
    return ast.parse(source)
  except (SyntaxError, ValueError) as error:  # BabelCode's converter stops on these; here the question does
    raise Rejected("SyntaxError", f"the {what} does not parse", str(error)) from None


# ---------------------------------------------------------------------------------------------
# The schema from the tests' literals and the annotations (question_parsing).


@dataclasses.dataclass(frozen=True)
class _Candidate:
  text: str
  schema: SchemaType
  depth: int


def _add(new: _Candidate, found: list[_Candidate]) -> None:
  """Merges one test's type of a parameter into the types seen so far."""
  for i, old in enumerate(found):
    if generic_equal(new.schema, old.schema):  # the deeper wins; at equal depth, the one without null
      keep_new = new.depth > old.depth or ("null" in old.text and new.depth >= old.depth)
      found[i] = new if keep_new else old
      return
    merged = reconcile(new.schema, old.schema)
    if merged is not None:
      found[i] = _Candidate(merged.generic(), merged, merged.depth)
      return
  found.append(new)


def _final(found: list[_Candidate], declared: str | None) -> str:
  known = [c for c in found if "null" not in c.text]
  if len(known) > 1:
    raise Rejected("IOPairError", "Inconsistent Types found")
  if declared is None:
    if not known:
      raise Rejected("IOPairError", "No Non-Null types found")
    return known[0].text
  if known and not generic_equal(known[0].schema, parse_type(declared)):
    merged = reconcile(known[0].schema, parse_type(declared))
    if merged is None:
      raise Rejected("IOPairError", "Non equal and non reconcilable types")
    return merged.generic()
  return declared


def schema(sig: Signature, cases: list[TestCase]) -> tuple[dict[str, str], str]:
  """Each parameter's type and the return type."""
  per_param: list[list[_Candidate]] = [[] for _ in sig.names]
  returns: list[_Candidate] = []
  for case in cases:
    if len(case.inputs) != len(sig.names):
      raise Rejected("IOPairError", "Incorrect number of inputs")
    for literal, found in zip(case.inputs, per_param):
      _add(_Candidate(literal.type, parse_type(literal.type), literal.depth), found)
    _add(_Candidate(case.output.type, parse_type(case.output.type), case.output.depth), returns)
  types = dict(sig.annotations)
  for name, found in zip(sig.names, per_param):
    types[name] = _final(found, types[name])
  return types, _final(returns, sig.returns)


# ---------------------------------------------------------------------------------------------
# One question: raw -> BabelCode's parsed record, then the generator's checks.


def parse_question(raw: dict) -> dict:
  """A raw question (its fix applied) -> BabelCode's parsed record, as its converter writes it
  (convert_dataset.py); Rejected says why not."""
  entry = raw["entry_fn_name"]
  sig = signature(raw["solution"], entry)
  tests = _Asserts(entry)
  tests.walk(_parse_python(raw["testing_code"], "testing code"))
  if not tests.cases:
    raise Rejected("QuestionParsingError", "No test cases were found")
  types, return_type = schema(sig, tests.cases)
  solutions = {}
  for label, source in (raw.get("other_lang_solutions") or {}).items():
    if label not in CONVENTIONS:
      raise Rejected("QuestionValidationError", f"other_lang_solutions names {label!r}, not a BabelCode language")
    solutions[label] = source.replace(entry, convention_name(entry, CONVENTIONS[label]))
  solutions["Python"] = raw["solution"].replace(entry, convention_name(entry, "snake"))
  record = {
      "qid": raw["id"], "title": raw["title"], "entry_cls_name": raw.get("entry_cls_name", "Solution"),
      "text": raw.get("text"), "metadata": raw.get("metadata", {}),
      "schema": {"params": [{"name": n, "type": types[n]} for n in sig.names], "return": {"type": return_type}},
      "test_list": [{"idx": i, "outputs": case.output.value,
                     "inputs": {n: literal.value for n, literal in zip(sig.names, case.inputs)}}
                    for i, case in enumerate(tests.cases)],
      "entry_fn_name": convention_name(entry, "snake"), "use_type_annotation": sig.annotated,
      "solutions": solutions}
  # BabelCode's generator reads the parsed file back: map keys become strings, tuples lists.
  return json.loads(json.dumps(record))


def generator_checks(record: dict) -> None:
  """What makes BabelCode's generator leave a question out in every language."""
  params = [(p["name"], parse_type(p["type"])) for p in record["schema"]["params"]]
  returns = parse_type(record["schema"]["return"]["type"])
  for _, type_ in params + [("", returns)]:
    _supported(type_)
  try:
    for case in record["test_list"]:
      for name, type_ in params:
        _literal(type_, _validated(type_, case["inputs"].get(name)))
      _literal(returns, case["outputs"])  # outputs are not validated, only written out
  except (TypeError, AttributeError):  # an output not of its type: BabelCode's generator stops here
    raise Rejected("IOPairError", "an expected output is not of the return type") from None


def _supported(type_: SchemaType) -> None:
  if type_.leaf:
    if type_.name not in PRIMITIVES:
      raise Rejected("SchemaTypeError", f'Leaf type "{type_.name}" is not supported by any language')
    return
  for element in type_.elements:
    _supported(element)
  if type_.name == "map":
    _supported(type_.key)
  elif type_.name not in ("list", "set"):
    # tuple<A|A> is already a list, so a tuple here mixes element types: no language has a type for it.
    what = "a tuple of mixed element types" if type_.name == "tuple" else type_.name
    raise Rejected("SchemaTypeError", f"{what} is not supported by any language", type_.generic())


PYTHON_TYPES = {"list": list, "set": list, "map": dict, "tuple": tuple, "integer": int, "long": int,
                "float": float, "double": float, "boolean": bool, "string": str, "character": str}


def _validated(type_: SchemaType, value: Any) -> Any:
  """An input value checked against its type (schema_parsing.validate_correct_type): a null is the
  empty value where the type has one; an int is a float where a float is expected."""
  expected = PYTHON_TYPES[type_.name]
  if value is None:
    if type_.name not in NULLABLE:
      raise Rejected("SchemaTypeError", f"{type_.name} does not support null")
    value = expected()
  if not isinstance(value, expected):  # bool is an int here, as in BabelCode
    if expected is not float or not isinstance(value, int):
      raise Rejected("SchemaTypeError", f"Value is not of type {expected.__name__}")
    value = float(value)
  if type_.name in ("list", "set"):
    value = [_validated(type_.elements[0], v) for v in value]
    _one_kind(type_, value)
  elif type_.name == "map":  # the values first, then the keys (JSON strings) as ints where ints are expected
    items = {key: _validated(type_.elements[0], item) for key, item in value.items()}
    value = {}
    for key, item in items.items():
      if PYTHON_TYPES[type_.key.name] is int:
        try:
          key = int(key)
        except ValueError:
          raise Rejected("SchemaTypeError",
                         "Key is expected to be an int, but could not convert the string to int.") from None
      else:
        key = str(key)
      if key in value:
        raise Rejected("SchemaTypeError", f"Duplicate key {key} found in value")
      value[key] = item
    _one_kind(type_, list(value.values()))
    _one_kind(type_, list(value))
  return value


def _one_kind(type_: SchemaType, values: list) -> None:
  if len({type(v).__name__ for v in values}) > 1:
    raise Rejected("SchemaTypeError", f"{type_.name} does not support multiple element types.")


def _literal(type_: SchemaType, value: Any) -> None:
  """The checks of writing a value as a literal (translation.LiteralTranslator): a set's elements must
  hash, so a set of lists (or of tuples, which are lists here) cannot be written."""
  if type_.leaf or type_.name in PRIMITIVES:
    return
  if type_.name == "map":
    for item in (value or {}).values():  # keys are primitives
      _literal(type_.elements[0], item)
    return
  if type_.name == "set":
    try:
      value = list(set(value)) if value else []
    except TypeError:
      raise Rejected("QuestionValidationError", "Could not convert nested values to set") from None
  if value:
    _nested(type_, value, type_.name)


def _nested(type_: SchemaType, value: Any, kind: str) -> None:
  """A list of lists (or set of sets) walked down to its first element type of another kind."""
  if type_.name != kind:
    _literal(type_, value)
    return
  for item in value:
    _nested(type_.elements[0], item, kind)


def boolean_nulls_to_false(record: dict) -> dict:
  """A null expected output of a boolean function is false: the literal BabelCode's generator writes
  for it in every language but Python (translation.primitive_translator: `'true' if t else 'false'`;
  Python's writes `str(None)`)."""
  if record["schema"]["return"]["type"] == "boolean":
    for case in record["test_list"]:
      if case["outputs"] is None:
        case["outputs"] = False
  return record


# ---------------------------------------------------------------------------------------------
# Files.


@dataclasses.dataclass(frozen=True)
class Failure:
  """A question left out: its line, the stage (read, convert: BabelCode's converter, generate: its
  generator in every language), BabelCode's error class and message."""
  qid: Any
  line: int
  stage: str
  error: str
  reason: str
  detail: str = ""

  def to_json(self) -> dict:
    out = {"qid": self.qid, "line": self.line, "stage": self.stage, "error": self.error, "reason": self.reason}
    return out | ({"detail": self.detail} if self.detail else {})


@dataclasses.dataclass(frozen=True)
class Conversion:
  questions: list[dict]
  failures: list[Failure]
  read: int
  fixes_applied: int
  fixes_unused: list[str]
  null_outputs: list[str]  # qids whose expected output is a null int or float (kept, as BabelCode keeps it)


def read_fixes(path: str) -> dict[str, dict]:
  """id -> the fields it replaces; a later line for an id replaces an earlier one, as in BabelCode."""
  fixes = {}
  for number, record in storage.read_jsonl(path):
    if "id" not in record:
      raise ValueError(f"{path}:{number}: a fix needs an id")
    fix = dict(record)
    fixes[str(fix.pop("id"))] = fix
  return fixes


def _field_problem(record: dict) -> str | None:
  missing = [k for k in REQUIRED_FIELDS if k not in record]
  unknown = sorted(set(record) - set(REQUIRED_FIELDS) - set(OPTIONAL_FIELDS))
  wrong = [k for k in ("solution", "testing_code", "entry_fn_name")
           if k in record and not isinstance(record[k], str)]
  problems = [f"{what} {', '.join(keys)}" for what, keys in
              [("missing", missing), ("unknown field", unknown), ("not a string:", wrong)] if keys]
  return "; ".join(problems) or None


def convert(raw_path: str, fixes: dict[str, dict] | None = None) -> Conversion:
  """Every raw question of `raw_path` with its fix, parsed; a question that is not says why."""
  fixes = fixes or {}
  questions, failures, seen, used, read = [], [], {}, set(), 0
  for number, record in storage.read_jsonl(raw_path):
    read += 1
    qid, key = record.get("id"), str(record.get("id"))
    if key in seen:  # BabelCode keeps the later line silently; here the earlier, and says so
      failures.append(Failure(qid, number, "read", "RawQuestionError", f"id repeats line {seen[key]}"))
      continue
    seen[key] = number
    if key in fixes:
      record, _ = {**record, **fixes[key]}, used.add(key)
    problem = _field_problem(record)
    if problem:
      failures.append(Failure(qid, number, "read", "RawQuestionError", problem))
      continue
    stage = "convert"
    try:
      parsed = parse_question(record)
      stage = "generate"
      generator_checks(parsed)
    except Rejected as error:
      failures.append(Failure(qid, number, stage, error.error, error.reason, error.detail))
      continue
    except RecursionError:
      failures.append(Failure(qid, number, stage, "RecursionError", "nested too deeply"))
      continue
    questions.append(boolean_nulls_to_false(parsed))
  null_outputs = [str(q["qid"]) for q in questions if q["schema"]["return"]["type"] not in NULLABLE
                  and any(c["outputs"] is None for c in q["test_list"])]
  return Conversion(questions, failures, read, len(used), sorted(set(fixes) - used), null_outputs)


def main(argv: Sequence[str] | None = None) -> int:
  parser = argparse.ArgumentParser(prog="python -m evaluation.humaneval.raw_questions", description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--raw", required=True, help="BabelCode raw question JSONL (local or gs://)")
  parser.add_argument("--fixes", help="BabelCode's per-question fixes JSONL (dataset_fixes/<name>.jsonl)")
  parser.add_argument("--output", required=True, help="parsed question JSONL (replaced atomically)")
  parser.add_argument("--failures", required=True, help="JSONL of the questions left out and why")
  args = parser.parse_args(argv)
  fixes = {}
  if args.fixes:
    try:
      fixes = read_fixes(args.fixes)
    except (ValueError, OSError) as error:
      parser.error(f"--fixes: {error}")
  try:
    result = convert(args.raw, fixes)
  except (ValueError, OSError) as error:
    parser.error(f"--raw: {error}")
  for path in (args.output, args.failures):
    storage.makedirs(storage.dirname(path))
  storage.write_atomic(args.output, "".join(json.dumps(q) + "\n" for q in result.questions))
  storage.write_atomic(args.failures, "".join(json.dumps(f.to_json()) + "\n" for f in result.failures))
  unused = result.fixes_unused
  print(f"read {result.read} questions from {args.raw}; fixes applied: {result.fixes_applied}"
        + (f", unused: {len(unused)} ({', '.join(unused)})" if unused else ""))
  print(f"wrote {len(result.questions)} parsed questions to {args.output}")
  reasons = collections.Counter((f.stage, f.error, f.reason) for f in result.failures)
  print(f"left out {len(result.failures)} (listed in {args.failures}):")
  stages = {"read": 0, "convert": 1, "generate": 2}
  for (stage, error, reason), count in sorted(reasons.items(), key=lambda item: (stages[item[0][0]], -item[1])):
    print(f"  {count:4d}  {stage:8s}  {error}: {reason}")
  if result.null_outputs:
    print(f"note: {len(result.null_outputs)} kept with a null expected int or float output, which BabelCode "
          f"compares as Python's None (the typed converter makes their return type optional): "
          f"{', '.join(result.null_outputs)}")
  if not result.questions:
    print(f"error: no question of {args.raw} was written", file=sys.stderr)
    return 1
  return 0


if __name__ == "__main__":
  sys.exit(main())
