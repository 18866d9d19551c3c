"""BabelCode's question format -> typed questions (sandbox/typed.py), for BC-TP3, BC-Transcoder,
BC-MBPP and any dataset written in that format.

  python -m evaluation.humaneval.babelcode --questions tp3_questions.jsonl --output tp3_typed.jsonl

A BabelCode question (its parsed-dataset JSONL, as `convert_dataset.py` writes it) is one JSON object:

  {"qid": "3", "title": "...", "entry_fn_name": "binary_search", "entry_cls_name": "Solution",
   "text": "description, or null",
   "schema": {"params": [{"name": "arr", "type": "list<integer>"}, {"name": "x", "type": "integer"}],
              "return": {"type": "integer"}},
   "test_list": [{"idx": 0, "inputs": {"arr": [1, 2], "x": 2}, "outputs": 1}, ...],
   "solutions": {"Python": "def binary_search(arr, x): ...", "C++": "int binary_search(...) {...}"}}

(`question_id` for `qid` and the schema as a list with an entry named `expected` for the return
type are read as well.) Its type language, and what each becomes:

  boolean -> bool; integer, long -> int (64-bit everywhere here, where BabelCode gives integer 32
  bits in C++, Java, ...); float, double -> float, and the question compares returned floats within
  the float or the double tolerance (1e-6 / 1e-9) as the return type says (`float_precision`);
  character -> string; string -> string; list<S> and S[] -> list; set<C> -> set; map<C;S> -> map
  (the JSON object's keys turned into ints for integer keys); tuple<A|B|...> -> tuple, or a list
  where all its element types agree (as BabelCode does).

A null where BabelCode allows one (string, character, list, set, map, tuple) is that type's empty
value, as BabelCode reads it; a boolean's null expected output is false (the literal BabelCode's
generator writes). A null expected output of an integer, long, float or double function (MBPP 452,
546, ...) makes the return type optional: BabelCode's Python test compares the returned value with
None there, so only a function that returns None passes that case. The declared types (BabelCode's,
finer than the typed ones: integer or long, float or double, character) are kept as
`declared_types`: a whole program in a typed language is called with them (sandbox/renderers/).

`text` becomes the description (empty when null); `solutions` in the paper's languages become the question's source programs for translation prompts (`python -m
evaluation.prompts typed --task translation --source_language C++`). A question that does not
convert is reported with its file, line and reason and left out; the others are written.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Sequence
from typing import Any

import languages
from sandbox import typed
import storage

LEAVES = {"boolean": "bool", "integer": "int", "long": "int", "float": "float", "double": "float",
          "character": "string", "string": "string"}
KEY_LEAVES = ("character", "integer", "long", "string")      # BabelCode's map keys and set elements
NULLABLE = ("string", "character", "list", "set", "map", "tuple")
# BabelCode's types nest a few levels (list<list<integer>>, map<string;list<integer>>); a type nested
# deeper than this is refused with a message, long before Python's recursion limit (1,000 frames) would
# end the converter in a RecursionError.
MAX_TYPE_DEPTH = 32


@dataclasses.dataclass(frozen=True)
class BabelType:
  """A parsed BabelCode type: a leaf name, or list/set/map/tuple with their element types (a map's
  key first)."""
  name: str
  args: tuple["BabelType", ...] = ()

  def typed(self) -> typed.Type:
    if self.name in LEAVES:
      return typed.Type(LEAVES[self.name])
    return typed.Type(self.name, tuple(arg.typed() for arg in self.args))

  def declared(self) -> typed.Type:
    """The type with BabelCode's leaf names kept (typed.DECLARED_SCALARS): what a whole program's
    signature declares."""
    return typed.Type(self.name, tuple(arg.declared() for arg in self.args))

  def precision(self) -> str | None:
    """"double" if a double is inside, else "float" if a float is, else None."""
    names = {self.name, *(p for arg in self.args for p in [arg.precision()] if p)}
    return "double" if "double" in names else "float" if "float" in names else None


def parse_type(text: str) -> BabelType:
  """BabelCode's type string -> BabelType; a ValueError says what is wrong (a type nested deeper
  than MAX_TYPE_DEPTH included)."""
  return _parse(text, text, 0)


def _parse(text: str, whole: str, depth: int) -> BabelType:
  """`text`, a part of `whole` `depth` levels down, parsed."""
  if depth > MAX_TYPE_DEPTH:
    shown = whole.strip() if len(whole.strip()) <= 60 else whole.strip()[:50] + "..."
    raise ValueError(f"type {shown!r} is nested deeper than {MAX_TYPE_DEPTH} levels")
  text = text.strip()
  if not text:
    raise ValueError("empty type")
  if text.endswith("[]"):
    if "<" in text:
      raise ValueError(f"type {text!r} mixes [] and <>")
    return BabelType("list", (_parse(text[:-2], whole, depth + 1),))
  if "<" not in text:
    if text not in LEAVES:
      raise ValueError(f"unknown type {text!r}; BabelCode's are {', '.join(LEAVES)}, list<S>, S[], "
                       "set<C>, map<C;S>, tuple<A|B|...>")
    return BabelType(text)
  name, _, inner = text.partition("<")
  name = name.strip()
  if not inner.endswith(">"):
    raise ValueError(f"type {text!r} does not end with >")
  inner = inner[:-1]
  if name == "map":
    parts = _split(inner, ";", text)
    if len(parts) != 2:
      raise ValueError(f"type {text!r}: a map is map<KEY;VALUE>")
    key, value = parts
    parsed_key = _parse(key, whole, depth + 1)
    if parsed_key.name not in KEY_LEAVES:
      raise ValueError(f"type {text!r}: map keys are one of {', '.join(KEY_LEAVES)}")
    return BabelType("map", (parsed_key, _parse(value, whole, depth + 1)))
  if name == "tuple":
    parts = _split(inner, "|", text)
    elements = tuple(_parse(p, whole, depth + 1) for p in parts)
    if len(set(elements)) == 1:  # BabelCode's rule: a tuple of one element type is a list
      return BabelType("list", (elements[0],))
    return BabelType("tuple", elements)
  if name in ("list", "set"):
    element = _parse(inner, whole, depth + 1)
    if name == "set" and element.name not in KEY_LEAVES:
      raise ValueError(f"type {text!r}: set elements are one of {', '.join(KEY_LEAVES)}")
    return BabelType(name, (element,))
  raise ValueError(f"unknown type {name!r} in {text!r}")


def _split(inner: str, separator: str, whole: str) -> list[str]:
  """`inner` split at `separator` where it is outside any <>."""
  parts, depth, start = [], 0, 0
  for i, char in enumerate(inner):
    depth += {"<": 1, ">": -1}.get(char, 0)
    if depth < 0:
      raise ValueError(f"type {whole!r} has an unmatched >")
    if char == separator and depth == 0:
      parts.append(inner[start:i])
      start = i + 1
  if depth:
    raise ValueError(f"type {whole!r} has an unmatched <")
  return parts + [inner[start:]]


def value(type_: BabelType, data: Any, where: str) -> Any:
  """A BabelCode test value -> typed.py's canonical JSON for `type_.typed()`."""
  name = type_.name
  if data is None:
    if name not in NULLABLE:
      raise ValueError(f"{where}: {name} cannot be null")
    return typed.encode(type_.typed(), typed.default_value(type_.typed()))
  if name == "boolean":
    if type(data) is not bool:
      raise ValueError(f"{where}: expected boolean, got {data!r:.80}")
    return data
  if name in ("integer", "long"):
    if type(data) is not int:
      raise ValueError(f"{where}: expected {name}, got {data!r:.80}")
    return data
  if name in ("float", "double"):
    if type(data) not in (int, float):
      raise ValueError(f"{where}: expected {name}, got {data!r:.80}")
    return float(data)
  if name in ("string", "character"):
    if type(data) is not str:
      raise ValueError(f"{where}: expected {name}, got {data!r:.80}")
    return data
  if name == "map":
    if not isinstance(data, dict):
      raise ValueError(f"{where}: expected a JSON object for {name}, got {data!r:.80}")
    key_type, value_type = type_.args
    pairs = []
    for key, item in data.items():
      if key_type.name in ("integer", "long"):
        try:
          key = int(key)
        except ValueError:
          raise ValueError(f"{where}: key {key!r} is not an integer") from None
      pairs.append([key, value(value_type, item, f"{where}[{key!r}]")])
    return pairs
  if not isinstance(data, list):
    raise ValueError(f"{where}: expected an array for {name}, got {data!r:.80}")
  if name == "tuple" and len(data) != len(type_.args):
    raise ValueError(f"{where}: expected {len(type_.args)} items, got {len(data)}")
  types = type_.args if name == "tuple" else [type_.args[0]] * len(data)
  return [value(t, item, f"{where}[{i}]") for i, (t, item) in enumerate(zip(types, data))]


def schema(record: dict) -> tuple[list[tuple[str, BabelType]], BabelType]:
  """The parameters (name, type) in order and the return type of a question's schema."""
  raw = record["schema"]
  if isinstance(raw, dict):
    params, returns = raw.get("params"), raw.get("return")
    if not isinstance(params, list) or not isinstance(returns, dict) or "type" not in returns:
      raise ValueError("schema needs params (a list) and return (with a type)")
  elif isinstance(raw, list):  # the older form: one entry named "expected" is the return type
    returns = next((p for p in raw if isinstance(p, dict) and p.get("name") == "expected"), None)
    if returns is None:
      raise ValueError("a schema list needs an entry named expected (the return type)")
    params = [p for p in raw if p is not returns]
  else:
    raise ValueError(f"schema is a dict or a list, got {type(raw).__name__}")
  out = []
  for i, param in enumerate(params):
    if not isinstance(param, dict) or not isinstance(param.get("name"), str) or "type" not in param:
      raise ValueError(f"schema parameter {i} needs a name and a type")
    try:
      out.append((param["name"], parse_type(str(param["type"]))))
    except ValueError as error:
      raise ValueError(f"parameter {param['name']}: {error}") from None
  try:
    return_type = parse_type(str(returns["type"]))
  except ValueError as error:
    raise ValueError(f"return type: {error}") from None
  return out, return_type


def question(record: dict) -> typed.Question:
  """One BabelCode question -> a typed question; a ValueError says what does not fit."""
  for key in ("schema", "test_list", "entry_fn_name"):
    if key not in record:
      raise ValueError(f"missing field {key!r}")
  qid = record.get("qid", record.get("question_id"))
  if qid is None:
    raise ValueError("missing field 'qid' (or 'question_id')")
  params, return_type = schema(record)
  names = [name for name, _ in params]
  if len(set(names)) != len(names):
    raise ValueError(f"parameter names repeat: {names}")
  cases, seen = [], set()
  # A null expected output of a number: the return type is optional (a boolean's is false, the literal
  # BabelCode's generator writes for it).
  optional = return_type.name in ("integer", "long", "float", "double") and any(
      isinstance(case, dict) and "outputs" in case and case["outputs"] is None for case in record["test_list"])
  for i, case in enumerate(record["test_list"]):
    where = f"test_list[{i}]"
    if not isinstance(case, dict) or not isinstance(case.get("inputs"), dict) or "outputs" not in case:
      raise ValueError(f"{where}: a test is {{idx, inputs: {{name: value}}, outputs}}")
    idx = case.get("idx", i)
    if type(idx) is not int or idx in seen:
      raise ValueError(f"{where}: idx must be an int and unique, got {idx!r}")
    seen.add(idx)
    given = set(case["inputs"])
    if given != set(names):
      raise ValueError(f"{where}: inputs {sorted(given)} do not match the parameters {names}")
    cases.append({"idx": idx,
                  "inputs": [value(t, case["inputs"][n], f"{where} input {n}") for n, t in params],
                  "output": None if optional and case["outputs"] is None
                  else False if return_type.name == "boolean" and case["outputs"] is None
                  else value(return_type, case["outputs"], f"{where} outputs")})
  solutions = {}
  for label, program in (record.get("solutions") or {}).items():
    language = languages.from_label(label)  # None: Kotlin, Scala, ...: not a language of the paper
    if language is not None:
      solutions[language.name] = program
  returns = str(return_type.typed())
  converted = {"qid": str(qid), "entry_fn_name": record["entry_fn_name"],
               "params": [{"name": n, "type": str(t.typed())} for n, t in params],
               "return_type": f"optional<{returns}>" if optional else returns,
               "description": record.get("text") or "",
               "test_cases": cases, "solutions": solutions,
               "declared_types": {"params": [str(t.declared()) for _, t in params],
                                  "return": str(return_type.declared())}}
  precision = return_type.precision()
  if precision:
    converted["float_precision"] = precision
  return typed.question_from_json(converted, f"question {qid}")


def convert(path: str) -> tuple[list[typed.Question], list[str]]:
  """Every question of a BabelCode question file that converts, and one message per one that does
  not (file:line (qid): why)."""
  questions, failures, seen = [], [], {}
  for number, record in storage.read_jsonl(path):
    where = f"{path}:{number}"
    if not isinstance(record, dict):
      failures.append(f"{where}: not a JSON object")
      continue
    qid = record.get("qid", record.get("question_id"))
    try:
      converted = question(record)
    except (ValueError, TypeError) as error:
      failures.append(f"{where} ({qid}): {error}")
      continue
    if converted.qid in seen:
      failures.append(f"{where} ({qid}): qid repeats line {seen[converted.qid]}")
      continue
    seen[converted.qid] = number
    questions.append(converted)
  return questions, failures


def main(argv: Sequence[str] | None = None) -> int:
  parser = argparse.ArgumentParser(prog="python -m evaluation.humaneval.babelcode", description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--questions", required=True, help="BabelCode question JSONL (local or gs://)")
  parser.add_argument("--output", required=True, help="typed question JSONL (replaced atomically)")
  args = parser.parse_args(argv)
  try:
    questions, failures = convert(args.questions)
  except (ValueError, OSError) as error:
    parser.error(f"--questions: {error}")
  for failure in failures:
    print(f"left out: {failure}", file=sys.stderr)
  if not questions:
    print(f"error: no question of {args.questions} converted", file=sys.stderr)
    return 1
  storage.makedirs(storage.dirname(args.output))
  typed.write_questions(questions, args.output)
  with_sources = sorted({language for q in questions for language, _ in q.solutions})
  print(f"wrote {len(questions)} typed questions to {args.output} ({len(failures)} left out); "
        f"source programs in: {', '.join(with_sources) or 'none'}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
