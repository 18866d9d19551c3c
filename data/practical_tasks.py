"""Practical Python tasks in CodeInsight's shape (Beau & Crabbé 2024): an intent, a reference solution
written as one function, a few unit tests and category labels per problem; splits by fraction and
seed; one SeqIO task whose splits are those splits, for fine-tuning.

The prompt is the solution's import lines (and the helper functions and constants before its entry
function, which the reference may call), the entry function's `def` line and the intent as its
docstring, ending right after the docstring; the target is the entry function's body. A docstring (not a comment)
because that is how the pretraining corpus documents Python functions and how HumanEval-style
prompts (evaluation/prompts.py) hand a model a task: fine-tuning and sampling then share one format,
and the model writes only the body, which the unit tests call by the function's name.

The prompt has three variants (PromptVariant; the paper's prompt study, §4.2 and its Table 2), one
switch of the prompt builder shared by the fine-tuning examples (PracticalTasks.prompt_variant, gin
PROMPT_VARIANT) and the sampling prompts (prompt_records, --prompt_variant):
  plain              the intent as it is (the paper's "Without prompt");
  return_the_result  "Return the Result." appended to the intent (its "Second prompt", quoted as the
                     paper writes it);
  preprompt          the paper's pre-prompt ("First prompt") as comment lines above the imports: a
                     code model is not instructed in prose, and a comment keeps the prompt plus the
                     completion a valid program.
Only the prompt changes: the body to write, the program the tests run (the plain prompt plus the
completion: a docstring or a comment changes no behaviour) and BLEU's function are the same.

Records are JSON objects, in a JSON list (or an object of id -> record) or JSONL, at a local path or a
URL (storage.py). Field names follow this repo's small dataset (`data/practical_tasks_small.jsonl`);
CodeInsight's released names are accepted too: problem_id|id|task_id, intent|nl|natural_language,
code|solution, tests|test|unit_tests (a list of test blocks or one string), categories|labels.

CodeInsight's repository layout is read as it is released (a clone, its `Codeinsight/` folder, or
one folder holding `train/` and `test/`): each `<split>/<id>/` folder's nl.txt is the intent, code.txt
the reference, unit_tests/test_N.py the tests (in N's order), and .cfg's [labels] the categories.
Ids are `<split>/<id>` (the two splits number their problems alike), and each problem keeps its
released split (PracticalTasks.released_split uses it instead of a seeded one).

A problem's tests run under one of two harnesses (Problem.harness; a record's `harness` field):
  isolated     each test on a fresh copy of the solution's namespace, with only what the code and the
               test import (the default);
  codeinsight  as the authors' codeinsight.py runs them, which CodeInsight's tests were written for:
               numpy as np and numpy, pandas as pd and pandas, and math, string, datetime, json,
               itertools, random, functools, collections, sklearn, bs4 and re already imported, and
               one namespace shared by a problem's tests in their order, the solution run again before
               each (a test may use what an earlier one defined). CodeInsight's folders get it.
"""

from __future__ import annotations

import ast
import configparser
import dataclasses
import enum
import json
import re
import sys
import textwrap
from typing import Callable, Mapping, Sequence

import numpy as np

import storage

SMALL_DATASET = storage.join(storage.dirname(storage.resolve(__file__)), "practical_tasks_small.jsonl")
TASK_NAME = "practical_tasks"  # MIXTURE_OR_TASK_NAME of gin_configs/runs/finetune.gin
SPLITS = ("train", "validation", "test")  # validation = test: CodeInsight has no third split (loss only)
HARNESSES = ("isolated", "codeinsight")  # the module's docstring


class PromptVariant(str, enum.Enum):
  PLAIN = "plain"
  RETURN_THE_RESULT = "return_the_result"
  PREPROMPT = "preprompt"


PROMPT_VARIANTS = tuple(v.value for v in PromptVariant)
# Beau & Crabbé 2024, §4.2, word for word.
RETURN_THE_RESULT = "Return the Result."
PREPROMPT = ("You are a powerful code generation model. Your job is to convert a given natural language prompt "
             "into Python function code and return the result.")


def prompt_variant(value: str, where: str = "prompt variant") -> PromptVariant:
  """`value` as a PromptVariant, or a ValueError naming `where` (the flag or gin name) and the choices."""
  try:
    return PromptVariant(value)
  except ValueError:
    raise ValueError(f"{where}: {value!r} is not one of {', '.join(PROMPT_VARIANTS)}") from None


_ALIASES = {"problem_id": ("problem_id", "id", "task_id"), "intent": ("intent", "nl", "natural_language"),
            "code": ("code", "solution"), "tests": ("tests", "test", "unit_tests"),
            "categories": ("categories", "labels", "category")}


@dataclasses.dataclass(frozen=True)
class Problem:
  problem_id: str
  intent: str
  code: str  # import lines (helper functions and constants too), then the entry function
  tests: tuple[str, ...]  # each a block of statements that calls the function and asserts
  categories: tuple[str, ...]
  released_split: str | None = None  # "train" or "test": the dataset's own split, where it has one
  harness: str = "isolated"  # how its tests run: one of HARNESSES (the module's docstring)

  def __post_init__(self):
    function_node(self.code)  # an entry function, or a ValueError saying what is wrong
    if self.harness not in HARNESSES:
      raise ValueError(f"harness must be one of {', '.join(HARNESSES)}, got {self.harness!r}")

  @property
  def entry_point(self) -> str:
    return function_node(self.code).name

  def _parts(self) -> tuple[str, str, str]:
    """(import lines, def line(s), body) of the reference code, each with its newlines."""
    node = function_node(self.code)
    lines = self.code.splitlines(keepends=True)
    statement = node.body[1] if is_docstring(node.body[0]) and len(node.body) > 1 else node.body[0]
    body_start = statement.lineno - 1  # a reference docstring is left out: it would duplicate the prompt's
    first = min([node.lineno] + [d.lineno for d in node.decorator_list]) - 1
    header = "".join(lines[:first]).rstrip()
    header = header + "\n\n" if header else ""
    line = lines[body_start].encode()
    before = line[:statement.col_offset].decode()  # col_offset counts UTF-8 bytes
    if before.strip():  # `def f(x): return x`: the body on the def line, moved to a line of its own
      return (header, "".join(lines[first:body_start]) + before.rstrip() + "\n",
              "    " + line[statement.col_offset:].decode() + "".join(lines[body_start + 1:]))
    return header, "".join(lines[first:body_start]), "".join(lines[body_start:])

  @property
  def header(self) -> str:
    return self._parts()[0]

  @property
  def signature(self) -> str:
    return self._parts()[1]

  @property
  def body(self) -> str:
    """The reference body: what fine-tuning teaches the model to write after the prompt."""
    body = self._parts()[2]
    return body if body.endswith("\n") else body + "\n"

  @property
  def prompt(self) -> str:
    return self.render_prompt(PromptVariant.PLAIN)

  @property
  def indent(self) -> str:
    """The body's indentation (its first line's), which the prompt's docstring takes: a docstring
    indented otherwise than a tab- or 2-space-indented body would not compile with it."""
    first = self.body.lstrip("\n")
    return first[:len(first) - len(first.lstrip(" \t"))] or "    "

  def render_prompt(self, variant: PromptVariant | str = PromptVariant.PLAIN) -> str:
    """The prompt of one variant (the module's docstring): what the model reads before the body."""
    variant = prompt_variant(variant)
    if variant is PromptVariant.RETURN_THE_RESULT:
      return self.header + self.signature + docstring(f"{self.intent} {RETURN_THE_RESULT}", self.indent)
    preamble = textwrap.fill(PREPROMPT, 96, initial_indent="# ", subsequent_indent="# ") + "\n\n"
    return (preamble if variant is PromptVariant.PREPROMPT else "") + self.header + self.signature + docstring(
        self.intent, self.indent)


def docstring(intent: str, indent: str = "    ", width: int = 96) -> str:
  """The intent as a docstring under a `def` line: one line if it fits, else wrapped. Any text parses
  back to the intent (its whitespace runs as single spaces): backslashes and triple quotes are
  escaped, and so are quotes at the end, which would close the string early (an intent ending in a
  quote, then the three closing quotes)."""
  text = " ".join(intent.split()).replace("\\", "\\\\")
  body = text.rstrip('"')
  text = body.replace('"""', '\\"\\"\\"') + '\\"' * (len(text) - len(body))
  if len(indent) + len(text) + 6 <= width:
    return f'{indent}"""{text}"""\n'
  # No break inside a word: one inside an escape (a backslash at a line's end) would change the text.
  # Breaks after hyphens stay: an escape holds no hyphen.
  wrapped = textwrap.fill(text, width - len(indent), initial_indent=indent, subsequent_indent=indent,
                          break_long_words=False)
  return f'{indent}"""\n{wrapped}\n{indent}"""\n'


def is_docstring(node: ast.stmt) -> bool:
  return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)


# What may stand before the entry function: imports, the helpers it calls, and module-level constants
# (CodeInsight has references with a helper function).
_BEFORE_ENTRY = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Assign,
                 ast.AnnAssign)


def function_node(code: str) -> ast.FunctionDef:
  """The entry function of a reference: its last top-level statement, a function; before it, only
  imports, helper functions and classes, and assignments (constants). A ValueError says what is wrong."""
  try:
    tree = ast.parse(code)
  except SyntaxError as e:
    raise ValueError(f"code does not parse: {e.msg} (line {e.lineno})") from None
  if not tree.body or not isinstance(tree.body[-1], (ast.FunctionDef, ast.AsyncFunctionDef)):
    raise ValueError("code must end with its entry function (after its imports, helpers and constants)")
  others = [n for n in tree.body[:-1] if not isinstance(n, _BEFORE_ENTRY)]
  if others:
    raise ValueError(f"code may hold only imports, helper functions and classes, and assignments before its "
                     f"entry function; line {others[0].lineno} is a {type(others[0]).__name__} statement")
  return tree.body[-1]


def _field(record: Mapping, name: str, where: str):
  for key in _ALIASES[name]:
    if key in record:
      return record[key]
  raise ValueError(f"{where}: no {name} field (any of {', '.join(_ALIASES[name])})")


def problem_from_record(record: Mapping, where: str) -> Problem:
  """One record as a Problem; `where` (file:line) names it in every error."""
  if not isinstance(record, Mapping):
    raise ValueError(f"{where}: a record must be a JSON object, got {type(record).__name__}")
  problem_id, intent, code = (_field(record, k, where) for k in ("problem_id", "intent", "code"))
  tests, categories = _field(record, "tests", where), record.get("categories", record.get("labels", ()))
  if isinstance(tests, str):
    tests = [tests]
  if isinstance(categories, str):
    categories = [categories]
  released_split = record.get("split")
  if released_split not in (None, "train", "test"):
    raise ValueError(f"{where}: split must be train or test, got {released_split!r}")
  harness = record.get("harness", "isolated")
  if harness not in HARNESSES:
    raise ValueError(f"{where}: harness must be one of {', '.join(HARNESSES)}, got {harness!r}")
  if isinstance(problem_id, bool) or not isinstance(problem_id, (str, int)):
    raise ValueError(f"{where}: problem_id must be a string or an integer, got {problem_id!r}")
  for name, value in (("intent", intent), ("code", code)):
    if not isinstance(value, str) or not value.strip():
      raise ValueError(f"{where}: {name} must be a non-empty string")
  if not isinstance(tests, list) or not tests or not all(isinstance(t, str) and t.strip() for t in tests):
    raise ValueError(f"{where}: tests must be a non-empty list of non-empty strings")
  if not isinstance(categories, (list, tuple)) or not all(isinstance(c, str) for c in categories):
    raise ValueError(f"{where}: categories must be a list of strings")
  try:
    return Problem(str(problem_id), intent.strip(), code, tuple(tests), tuple(c.lower() for c in categories),
                   released_split, harness)
  except ValueError as e:
    raise ValueError(f"{where} (problem {problem_id}): {e}") from None


def load_problems(path: str, skipped: list[str] | None = None) -> list[Problem]:
  """Every problem of a JSON or JSONL file (local or URL), or of CodeInsight's folders (the module's
  docstring), in order; ids must be unique.

  A bad record (not JSON, a field or file missing or malformed, code that does not end with its entry
  function, an id seen before) raises a ValueError naming its file and line. Given `skipped`, it is left out instead and
  that error appended there, for the caller to count and print (skipped_warning): a released dataset
  with a few bad records still loads. A file with no good record is an error either way."""
  def bad(message: str) -> None:
    if skipped is None:
      raise ValueError(message)
    skipped.append(message)

  if storage.isdir(path):
    items = codeinsight_records(path, bad)
  else:
    items = _file_records(path, bad)
  problems, seen = [], {}
  for where, record in items:
    try:
      problem = problem_from_record(record, where)
    except ValueError as e:
      bad(str(e))
      continue
    if problem.problem_id in seen:
      bad(f"{where}: problem_id {problem.problem_id!r} again (first at {seen[problem.problem_id]})")
      continue
    seen[problem.problem_id] = where
    problems.append(problem)
  if not problems:
    raise ValueError(f"{path}: no problems" + (f" ({len(skipped)} bad record{'s' if len(skipped) > 1 else ''} "
                                                f"skipped)" if skipped else ""))
  return problems


def _file_records(path: str, bad: Callable[[str], None]) -> list[tuple[str, object]]:
  """(where, record) of each record of a JSON or JSONL file; a line that is not JSON goes to `bad`."""
  text = storage.read_text(path)
  stripped = text.lstrip()
  # A .jsonl file is one record per line, however many lines; otherwise a JSON array or id -> record
  # object, told from the text (an object whose values are not all records is one JSONL record).
  whole = not path.endswith(".jsonl") and (stripped.startswith("[") or (
      stripped.startswith("{") and _is_one_json(stripped)
      and all(isinstance(v, dict) for v in json.loads(stripped).values())))
  items = []
  if whole:
    data = json.loads(text)
    if isinstance(data, dict):  # id -> record
      items = [(f"{path}: record {key!r}", dict(value, problem_id=value.get("problem_id", key))
                if isinstance(value, dict) else value) for key, value in data.items()]
    else:
      items = [(f"{path}: record {i}", value) for i, value in enumerate(data)]
  else:
    for number, line in enumerate(text.splitlines(), 1):
      if not line.strip():
        continue
      try:
        items.append((f"{path}:{number}", json.loads(line)))
      except json.JSONDecodeError as e:
        bad(f"{path}:{number}: not JSON ({e.msg})")
  return items


def codeinsight_records(root: str, bad: Callable[[str], None]) -> list[tuple[str, dict]]:
  """(folder, record) of each problem folder of CodeInsight's released layout under `root` (the
  module's docstring), train before test, each in its ids' numeric order. A folder missing a file, or
  whose .cfg does not parse, goes to `bad`."""
  base = root
  if storage.isdir(storage.join(root, "Codeinsight")):
    base = storage.join(root, "Codeinsight")
  splits = [s for s in ("train", "test") if storage.isdir(storage.join(base, s))]
  if not splits:
    raise ValueError(f"{root}: a folder, but not CodeInsight's layout (no train/ or test/ folder, nor "
                     f"Codeinsight/ holding them)")
  items = []
  for split in splits:
    ids = [name.rstrip("/") for name in storage.listdir(storage.join(base, split))
           if storage.isdir(storage.join(base, split, name.rstrip("/")))]
    for id_ in sorted(ids, key=lambda i: (not i.isdigit(), int(i) if i.isdigit() else 0, i)):
      folder = storage.join(base, split, id_)
      try:
        items.append((folder, _codeinsight_record(folder, split, id_)))
      except (OSError, ValueError, SyntaxError, configparser.Error) as e:
        bad(f"{folder}: {e}")
  return items


def _codeinsight_record(folder: str, split: str, id_: str) -> dict:
  """One problem folder as a record of this module's field names."""
  config = configparser.ConfigParser()
  config.read_string(storage.read_text(storage.join(folder, ".cfg")))
  labels = ast.literal_eval(config.get("labels", "labels", fallback="[]"))
  if not isinstance(labels, list) or not all(isinstance(label, str) for label in labels):
    raise ValueError(f".cfg: labels must be a list of strings, got {labels!r}")
  tests_folder = storage.join(folder, "unit_tests")
  names = [n for n in storage.listdir(tests_folder) if re.fullmatch(r"test_\d+\.py", n)] \
      if storage.isdir(tests_folder) else []
  tests = [storage.read_text(storage.join(tests_folder, n)) for n in sorted(names, key=lambda n: int(n[5:-3]))]
  return {"problem_id": f"{split}/{id_}", "intent": storage.read_text(storage.join(folder, "nl.txt")),
          "code": storage.read_text(storage.join(folder, "code.txt")), "tests": tests,
          "categories": [label for label in labels if label], "split": split, "harness": "codeinsight"}


def skipped_warning(path: str, skipped: Sequence[str], shown: int = 5) -> str | None:
  """The line a loading command prints when records of `path` were skipped: how many, and the first
  `shown` reasons; None when none was."""
  if not skipped:
    return None
  more = f"; and {len(skipped) - shown} more" if len(skipped) > shown else ""
  return (f"warning: {len(skipped)} bad record{'s' if len(skipped) > 1 else ''} of {path} skipped, the rest "
          f"loaded: " + "; ".join(skipped[:shown]) + more)


def _is_one_json(text: str) -> bool:
  try:
    json.loads(text)
    return True
  except json.JSONDecodeError:
    return False


def split_problems(problems: Sequence[Problem], train_fraction: float, seed: int
                   ) -> tuple[list[Problem], list[Problem]]:
  """(train, test): a permutation of the problems (ordered by id first, so file order does not
  matter) drawn from `seed`, its first round(train_fraction * n) problems for training."""
  if not 0 < train_fraction < 1:
    raise ValueError(f"train_fraction must be in (0, 1), got {train_fraction}")
  ordered = sorted(problems, key=lambda p: p.problem_id)
  order = np.random.default_rng(seed).permutation(len(ordered))
  cut = int(round(train_fraction * len(ordered)))
  if not 0 < cut < len(ordered):
    raise ValueError(f"a train fraction of {train_fraction} of {len(ordered)} problems leaves a split empty")
  return [ordered[i] for i in order[:cut]], [ordered[i] for i in order[cut:]]


def released_split(problems: Sequence[Problem], dataset: str) -> tuple[list[Problem], list[Problem]]:
  """(train, test) as the dataset releases them (CodeInsight's folders, or a `split` field), in file
  order; a ValueError when a problem has no released split or a split is empty."""
  unsplit = [p.problem_id for p in problems if p.released_split is None]
  if unsplit:
    raise ValueError(f"{dataset}: no released split for {len(unsplit)} problems ({', '.join(unsplit[:5])}"
                     f"{' ...' if len(unsplit) > 5 else ''}); use a train fraction and seed instead")
  train = [p for p in problems if p.released_split == "train"]
  test = [p for p in problems if p.released_split == "test"]
  if not train or not test:
    raise ValueError(f"{dataset}: the released split leaves {'train' if not train else 'test'} empty")
  return train, test


def categories(problems: Sequence[Problem]) -> list[str]:
  """Every category label of the problems, most frequent first."""
  counts: dict[str, int] = {}
  for problem in problems:
    for label in problem.categories:
      counts[label] = counts.get(label, 0) + 1
  return sorted(counts, key=lambda c: (-counts[c], c))


def prompt_records(problems: Sequence[Problem], variant: PromptVariant | str = PromptVariant.PLAIN) -> list[dict]:
  """sample.py's prompts (qid, language, prompt, stop) for the problems, in one prompt variant."""
  return [{"qid": p.problem_id, "language": "python", "prompt": p.render_prompt(variant),
           "stop": ["\ndef ", "\nclass ", "\nif __name__", "\nprint(", "\nassert "]} for p in problems]


@dataclasses.dataclass(frozen=True)
class PracticalTasks:
  """Which dataset file and which split the fine-tuning task reads (gin: codelm.PracticalTasks)."""
  path: str | None = None  # None: the small dataset in this repo (SMALL_DATASET)
  train_fraction: float = 0.4  # CodeInsight's chosen 40/60 split
  seed: int = 0
  prompt_variant: str = PromptVariant.PLAIN.value  # PROMPT_VARIANT: the examples' prompts (PromptVariant)
  released_split: bool = False  # RELEASED_SPLIT: the dataset's own train/test, not train_fraction and seed

  def __post_init__(self):
    prompt_variant(self.prompt_variant, "codelm.PracticalTasks.prompt_variant (PROMPT_VARIANT)")

  @property
  def dataset(self) -> str:
    return self.path or SMALL_DATASET

  def split(self, skipped: list[str] | None = None) -> tuple[list[Problem], list[Problem]]:
    """(train, test) of the dataset; bad records are left out and listed in `skipped` when it is given
    (load_problems)."""
    problems = load_problems(self.dataset, skipped)
    if self.released_split:
      return released_split(problems, self.dataset)
    return split_problems(problems, self.train_fraction, self.seed)


def encode_examples(problems: Sequence[Problem], vocabulary, sequence_length: int,
                    variant: PromptVariant | str = PromptVariant.PLAIN
                    ) -> tuple[list[tuple[list[int], list[int]]], list[str]]:
  """([code] + prompt ids, body ids + [eod]) per problem that fits in `sequence_length` tokens, and the
  ids of those that do not (left out of the task: a cut example would teach a cut function)."""
  from data.vocab import CODE_TOKEN, EOD_TOKEN

  code_id = vocabulary.tokenizer.piece_to_id(CODE_TOKEN)
  eod_id = vocabulary.tokenizer.piece_to_id(EOD_TOKEN)
  examples, too_long = [], []
  for problem in problems:
    inputs = [code_id] + list(vocabulary.encode(problem.render_prompt(variant)))
    targets = list(vocabulary.encode(problem.body)) + [eod_id]
    if len(inputs) + len(targets) > sequence_length:
      too_long.append(problem.problem_id)
    else:
      examples.append((inputs, targets))
  return examples, too_long


def register_task(config: PracticalTasks, vocabulary, sequence_length: int, name: str = TASK_NAME) -> dict:
  """Registers SeqIO task `name` with splits train / test (and validation = test) of `config`'s
  dataset, as token ids: `inputs` ([code] + prompt) and `targets` (body + [eod]); training reads it
  causally with the loss on the targets only (data/stream.py). Returns what was registered, per split:
  problems, examples, ids left out as too long, and the dataset's bad records skipped before splitting
  (the same list in every split)."""
  import seqio
  import tensorflow as tf

  from data import stream

  skipped: list[str] = []
  train, test = config.split(skipped)
  encoded = {split: encode_examples(problems, vocabulary, sequence_length, config.prompt_variant)
             for split, problems in (("train", train), ("test", test))}
  encoded["validation"] = encoded["test"]
  for split, (examples, _) in encoded.items():
    if not examples:
      raise ValueError(f"{config.dataset}: no {split} problem fits in {sequence_length} tokens")

  def dataset_fn(split: str, shuffle_files: bool, seed: int | None = None) -> tf.data.Dataset:
    del shuffle_files, seed  # one in-memory "file"; training shuffles examples
    examples = encoded[split][0]
    signature = {"inputs": tf.TensorSpec([None], tf.int32), "targets": tf.TensorSpec([None], tf.int32)}
    return tf.data.Dataset.from_generator(lambda: ({"inputs": i, "targets": t} for i, t in examples),
                                          output_signature=signature)

  features = {key: seqio.Feature(vocabulary, add_eos=False, dtype=tf.int32) for key in ("inputs", "targets")}
  source = seqio.FunctionDataSource(dataset_fn, splits=SPLITS,
                                    num_input_examples={s: len(encoded[s][0]) for s in SPLITS})
  seqio.TaskRegistry.remove(name)
  seqio.TaskRegistry.add(name, source=source, output_features=features, preprocessors=[])
  stream.PROMPT_COMPLETION_TASKS.add(name)
  return {split: {"problems": len(train if split == "train" else test), "examples": len(examples),
                  "tokens": sum(len(i) + len(t) for i, t in examples), "too_long": too_long,
                  "skipped_records": skipped}
          for split, (examples, too_long) in encoded.items()}


def main(argv: Sequence[str] | None = None) -> int:
  """python -m data.practical_tasks [--dataset D] [--train_fraction 0.4] [--seed 0 | --released_split]
  [--split test] [--prompt_variant plain] --output prompts.jsonl: one split's prompts for sample.py,
  and the split's size per category."""
  import argparse

  parser = argparse.ArgumentParser(description=main.__doc__)
  parser.add_argument("--dataset", default=SMALL_DATASET, help="JSON or JSONL (default: the small in-repo set)")
  parser.add_argument("--train_fraction", type=float, default=0.4)
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--split", choices=("train", "test"), default="test")
  parser.add_argument("--released_split", action="store_true",
                      help="the dataset's own train/test split (CodeInsight's folders), not --train_fraction/--seed")
  parser.add_argument("--prompt_variant", choices=PROMPT_VARIANTS, default=PromptVariant.PLAIN.value,
                      help="the prompt builder's variant; the same as the fine-tuning's PROMPT_VARIANT")
  parser.add_argument("--output", required=True, help="prompts JSONL for sample.py --prompts")
  args = parser.parse_args(argv)
  skipped: list[str] = []
  try:
    problems = load_problems(args.dataset, skipped)
    train, test = (released_split(problems, args.dataset) if args.released_split
                   else split_problems(problems, args.train_fraction, args.seed))
  except (ValueError, OSError) as e:
    parser.error(str(e))
  if skipped:
    print(skipped_warning(args.dataset, skipped), file=sys.stderr)
  chosen = train if args.split == "train" else test
  storage.write_atomic(args.output, "".join(json.dumps(r) + "\n" for r in prompt_records(chosen, args.prompt_variant)))
  counts = {c: sum(c in p.categories for p in chosen) for c in categories(chosen)}
  print(f"{len(chosen)} {args.split} prompts ({len(train)} train / {len(test)} test) -> {args.output}; "
        + ", ".join(f"{c} {n}" for c, n in counts.items()))
  return 0


if __name__ == "__main__":
  raise SystemExit(main())
