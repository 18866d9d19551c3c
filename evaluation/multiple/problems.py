"""MultiPL-E's problems as its prompt datasets hold them, read from any of the three forms they come in.

A problem is one record with (at least) `name`, `language` (MultiPL-E's code: "py", "cpp", "go_test.go"),
`prompt`, `tests` and `stop_tokens`; the datasets carry `doctests`, `original` and `prompt_terminology`
too (nuprl/MultiPL-E dataset_builder/prepare_prompts_json.py and prepare_prompts_for_hfhub.py write
exactly these eight fields, in that order). The three forms:
- JSONL: prepare_prompts_json.py's output (`json.dump(item, f); f.write("\\n")`), also the repository's
  prompts/*.jsonl. It writes JSONL whatever its --output is named, so a ".json" file that does not
  start with "[" is read as JSONL too.
- a JSON list: the repository's older prompts/*.json (`[ {...}, ... ]`, indented).
- parquet: the Hugging Face dataset nuprl/MultiPL-E (one config per "humaneval-<lang>" /
  "mbpp-<lang>", Go's config named "go" while its rows say "go_test.go").
Each may come gzipped (`.jsonl.gz`, `.json.gz`; told by the gzip magic, whatever the name). A directory
is every such file under it, recursively, in sorted path order.

One policy for a bad record (as evaluation/resumable.py's for a bad prediction): it is reported as
"WHERE: why" and the others are kept, WHERE being FILE:LINE (JSONL, from 1), FILE:[INDEX] (a JSON
list, from 0) or FILE:row N (parquet, from 0, as the dataset indexes its rows). A file that cannot
be parsed at all is a ValueError naming it: there is no record to keep.
"""

from __future__ import annotations

import dataclasses
import io
import json
from collections.abc import Iterator, Mapping

import languages
import storage

# MultiPL-E's language codes (its translators' file_ext(); containerized_eval.py's keys) for codelm's 14
# languages (whether this machine can run one is the sandbox's business: sandbox/renderers'
# NOT_EVALUATED). "go" is the Hugging Face config's name for "go_test.go" and the code
# bigcode-evaluation-harness writes into its problems. Every other MultiPL-E language (rb, sh, swift,
# scala, d, rkt, pl, ml, clj, elixir, fs, kt, lean, ...) is none of codelm's: `codelm_language` is None.
LANGUAGES: dict[str, str] = {
    "py": "python", "js": "javascript", "ts": "typescript", "lua": "lua", "php": "php", "cpp": "cpp",
    "go_test.go": "go", "go": "go", "rs": "rust", "java": "java", "cs": "csharp", "r": "r",
    "hs": "haskell", "jl": "julia", "dart": "dart",
}
assert set(LANGUAGES.values()) <= set(languages.BY_NAME), "a MultiPL-E code maps to no codelm language"

SUFFIXES = (".jsonl", ".json", ".parquet", ".jsonl.gz", ".json.gz")
_TEXT_FIELDS = ("name", "language", "prompt", "tests")


def codelm_language(code: str) -> str | None:
  """codelm's name (languages.py) for a MultiPL-E language code, or None when codelm cannot run it."""
  return LANGUAGES.get(code)


@dataclasses.dataclass(frozen=True)
class Problem:
  name: str                      # "HumanEval_0_has_close_elements"
  language: str                  # MultiPL-E's code, as in the record ("go_test.go")
  prompt: str
  tests: str
  stop_tokens: tuple[str, ...]
  # The whole record as read (every field, in the file's order), so that files written back carry
  # what the dataset had. Not compared: the fields above are what identify and run a problem.
  record: Mapping[str, object] = dataclasses.field(compare=False, repr=False)
  where: str = dataclasses.field(default="", compare=False)   # FILE:LINE, FILE:[INDEX] or FILE:row N

  @property
  def key(self) -> tuple[str, str]:
    return self.language, self.name

  @property
  def codelm_language(self) -> str | None:
    return codelm_language(self.language)

  @property
  def harness_prompt(self) -> str:
    """What bigcode-evaluation-harness samples after (tasks/multiple.py: `doc["prompt"].strip()`)."""
    return self.prompt.strip()


def problem_from_record(record: object, where: str) -> Problem:
  """The record as a Problem; a ValueError starting with `where` says what is missing or ill-typed."""
  if not isinstance(record, dict):
    raise ValueError(f"{where}: expected a JSON object, got {type(record).__name__}")
  for key in _TEXT_FIELDS:
    if key not in record:
      raise ValueError(f"{where}: no {key} field")
    if not isinstance(record[key], str):
      raise ValueError(f"{where}: {key} must be a string, got {type(record[key]).__name__}")
  for key in ("name", "language"):
    if not record[key]:
      raise ValueError(f"{where}: {key} is empty")
  stops = record.get("stop_tokens")
  if not isinstance(stops, (list, tuple)) or not all(isinstance(stop, str) for stop in stops):
    raise ValueError(f"{where}: stop_tokens must be a list of strings"
                     + ("" if "stop_tokens" in record else " (there is none)"))
  return Problem(record["name"], record["language"], record["prompt"], record["tests"], tuple(stops),
                 record, where)


def read_problems(path: str) -> tuple[list[Problem], list[str]]:
  """The problems of a JSONL, JSON-list or parquet file, or of every such file under a directory
  (module docstring), in file order; and one "WHERE: why" message per record that is not a problem
  (missing or ill-typed field, or a (language, name) already read, the first one kept)."""
  problems, invalid = [], []
  first: dict[tuple[str, str], str] = {}
  for where, record in _records(path, invalid):
    try:
      problem = problem_from_record(record, where)
    except ValueError as error:
      invalid.append(str(error))
      continue
    if problem.key in first:
      invalid.append(f"{where}: problem {problem.name} in {problem.language} again (first at {first[problem.key]})")
      continue
    first[problem.key] = where
    problems.append(problem)
  return problems, invalid


def problem_files(path: str) -> list[str]:
  """`path` itself, or the dataset files under the directory `path`, recursively, sorted."""
  if not storage.isdir(path):
    return [path]
  found = []
  for directory, _, names in storage.walk(path):
    found += [storage.join(directory, name) for name in names if name.endswith(SUFFIXES)]
  return sorted(found)


def _records(path: str, invalid: list[str]) -> Iterator[tuple[str, object]]:
  """(where, record) of every record of every file; a bad JSONL line goes to `invalid`."""
  for file in problem_files(path):
    if file.endswith(".parquet"):
      yield from _parquet_records(file)
      continue
    try:
      data = storage.read_data(file)  # gzip by its magic (a .jsonl.gz), whatever the name says
    except OSError as error:  # a dangling symlink, a file that went away: that file's problem
      invalid.append(f"{file}: cannot be read ({error.strerror or type(error).__name__})")
      continue
    except ValueError as error:
      invalid.append(str(error))
      continue
    if data.lstrip()[:1] == b"[":
      yield from _json_list_records(file, data)
      continue
    for number, line in storage.read_jsonl_lines(file, warn=invalid.append):  # (read again: small files)
      where = f"{file}:{number}"
      try:
        yield where, storage.parse_line(line, where)
      except ValueError as error:
        invalid.append(str(error))


def _json_list_records(file: str, data: bytes) -> Iterator[tuple[str, object]]:
  try:
    records = json.loads(data.decode("utf-8"))
  except (UnicodeDecodeError, ValueError, RecursionError) as error:
    raise ValueError(f"{file}: not a JSON list ({type(error).__name__}: {str(error)[:120]})") from None
  if not isinstance(records, list):
    raise ValueError(f"{file}: not a JSON list")
  for index, record in enumerate(records):
    yield f"{file}:[{index}]", record


def _parquet_records(file: str) -> Iterator[tuple[str, object]]:
  import pyarrow  # only for parquet: the JSON forms need nothing beyond the standard library
  import pyarrow.parquet

  data = storage.read_bytes(file)
  try:
    table = pyarrow.parquet.read_table(io.BytesIO(data))
  except (pyarrow.ArrowException, OSError) as error:
    raise ValueError(f"{file}: not a parquet file ({type(error).__name__}: {str(error)[:120]})") from None
  for index, record in enumerate(table.to_pylist()):
    yield f"{file}:row {index}", record
