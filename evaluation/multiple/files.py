"""MultiPL-E's completions and results files and bigcode-evaluation-harness's generations file, read
and written as those tools do, so that either can pick up what codelm writes and the other way round.

MultiPL-E (nuprl/MultiPL-E):
- completions, DIR/<name>.json.gz: one problem's record, keys in the order multipl_e/completions.py
  builds it: name, language, temperature, top_p, max_tokens, prompt, tests, completions, stop_tokens;
  written `gzip.open(p, "wt").write(json.dumps(record))` (no indent, no final newline).
- results, DIR/<name>.results.json.gz: evaluation/src/main.py copies the completions record, deletes
  "completions" and appends "results": one dict per completion, in completion order; written
  `json.dumps(record, indent=2)` (gzip text for a .json.gz input, plain text for a .json one). Each
  result's keys come out as program, timestamp, stdout, stderr, exit_code, status: main.py sets
  "timestamp" inside its loop over containerized_eval's keys (program, stdout, stderr, exit_code,
  status), so it lands second. pass_k.py counts a result as passing when status == "OK" and
  exit_code == 0.
Both tools also read plain .json files the same way; `read_completions` / `read_results` do too.

bigcode-evaluation-harness (bigcode_eval/evaluator.py, main.py): `--save_generations` writes
`json.dump(generations, fp)` (no indent, no final newline) to f"{splitext(--save_generations_path)[0]}_{task}.json",
i.e. generations_multiple-<lang>.json by default: one list per problem, in the dataset's order, of the
n generations as strings. `--load_generations_path` reads it back with json.load and keeps the first
n_tasks lists. A generation is the stripped prompt and the completion cut at the stop words
(tasks/multiple.py: `prompt + _stop_at_stop_token(generation[len(prompt):], stop_words)`, prompt being
`doc["prompt"].strip()`); it runs as `generation + "\\n" + tests`.

Writers go through storage.write_atomic (local or URL). A gzip file is written deterministically
(mtime 0, no file name in its header), so a rerun gives identical bytes. MultiPL-E's own gzip headers
carry a time and a file name (gzip.open): against its files, byte-for-byte equality holds for the
decompressed JSON text, which `json.dumps` of the record as read reproduces exactly (the same key
order, ensure_ascii, separators).

Readers report a bad file or record as "FILE: why" and keep the others (evaluation/resumable.py's policy).
"""

from __future__ import annotations

import gzip
import json
import posixpath
import zlib
from collections.abc import Sequence

import storage
from evaluation.multiple.problems import Problem

COMPLETIONS_KEYS = ("name", "language", "temperature", "top_p", "max_tokens", "prompt", "tests", "completions",
                    "stop_tokens")
RESULT_KEYS = ("program", "timestamp", "stdout", "stderr", "exit_code", "status")
COMPLETIONS_SUFFIXES = (".json.gz", ".json")
RESULTS_SUFFIXES = (".results.json.gz", ".results.json")


class FileRecord(dict):
  """A completions or results record as read, and the file it came from (`where`): to json and to ==
  still the plain dict the file holds, so it writes back unchanged."""

  where: str = ""


def problem_of(record: dict) -> Problem:
  """The problem a completions or results record carries (MultiPL-E copies name, language, prompt,
  tests and stop_tokens into both; the harness's own records have no stop_tokens: none then), placed
  at the record's file when `read_completions` / `read_results` read it."""
  return Problem(record["name"], record["language"], record["prompt"], record["tests"],
                 tuple(record.get("stop_tokens", ())), record, getattr(record, "where", ""))


def completions_record(problem: Problem, completions: Sequence[str], temperature: float, top_p: float,
                       max_tokens: int) -> dict:
  """MultiPL-E's completions record for `problem`, in its key order (COMPLETIONS_KEYS)."""
  return {"name": problem.name, "language": problem.language, "temperature": temperature, "top_p": top_p,
          "max_tokens": max_tokens, "prompt": problem.prompt, "tests": problem.tests,
          "completions": list(completions), "stop_tokens": list(problem.stop_tokens)}


def results_record(completions_record: dict, results: Sequence[dict]) -> dict:
  """MultiPL-E's results record: the completions record without "completions", then "results", each
  result's keys in MultiPL-E's order (RESULT_KEYS; any others after them)."""
  record = {key: value for key, value in completions_record.items() if key != "completions"}
  ordered = []
  for index, result in enumerate(results):
    missing = [key for key in RESULT_KEYS if key not in result]
    if missing:
      raise ValueError(f"result {index} has no {', '.join(missing)}")
    ordered.append({**{key: result[key] for key in RESULT_KEYS}, **result})
  record["results"] = ordered
  return record


def write_completions(directory: str, record: dict) -> str:
  """DIR/<name>.json.gz, as MultiPL-E writes it (module docstring); returns its path."""
  return _write_gzip_json(directory, record, ".json.gz", indent=None)


def write_results(directory: str, record: dict) -> str:
  """DIR/<name>.results.json.gz, as MultiPL-E writes it (module docstring); returns its path."""
  return _write_gzip_json(directory, record, ".results.json.gz", indent=2)


def read_completions(path: str) -> tuple[list[dict], list[str]]:
  """The completions records (FileRecord: each knows its file) of a .json.gz / .json file, or of a
  directory's such files (not its subdirectories, as MultiPL-E's evaluator without --recursive;
  *.results.json[.gz] skipped), in name order; and one "FILE: why" per file that is not one
  (unreadable, a field missing or ill-typed, or a (language, name) already read)."""
  files = _files(path, COMPLETIONS_SUFFIXES, exclude=RESULTS_SUFFIXES)
  return _read_records(files, _check_completions)


def read_results(path: str) -> tuple[list[dict], list[str]]:
  """The results records of a .results.json.gz / .results.json file or of a directory's such files,
  as `read_completions` reads completions."""
  return _read_records(_files(path, RESULTS_SUFFIXES), _check_results)


def harness_generation(problem: Problem, completion: str) -> str:
  """What bigcode-evaluation-harness would have saved for `completion`, sampled after the whole prompt
  (as MultiPL-E samples): the stripped prompt, the whitespace the strip took off its end, then the
  completion. `generation + "\\n" + tests` (the harness's program) is then MultiPL-E's
  `prompt + completion + "\\n" + tests` without the prompt's leading whitespace."""
  prompt = problem.prompt
  return prompt.strip() + prompt[len(prompt.rstrip()):] + completion


def read_generations(path: str, problems: Sequence[Problem]) -> tuple[list[tuple[Problem, int, str]], list[str]]:
  """The harness's generations file for `problems` (one language, in the dataset's order, as the harness
  reads it): (problem, sample index, completion) with completion = generation[len(prompt.strip()):],
  the text the model wrote after the harness's prompt (Problem.harness_prompt). For a
  `harness_generation` that is the prompt's trailing whitespace and the completion sampled after the
  whole prompt; either way `problem.harness_prompt + completion` is the harness's generation.

  A generation that is not a string or does not start with the stripped prompt is reported
  "FILE: problem I (name) generation J: why", a problem's entry that is not a list likewise, and more
  lists than problems once (the harness would ignore them too); the rest are kept. Fewer lists than
  problems is a run with --limit: the problems without one are not in the answer. A file that is not
  a JSON list is a ValueError naming it."""
  codes = sorted({problem.language for problem in problems})
  if len(codes) > 1:
    raise ValueError(f"{path}: one harness task (language) per generations file; these problems are in "
                     f"{', '.join(codes)}")
  data = storage.read_bytes(path)
  try:
    generations = json.loads(data.decode("utf-8"))
  except (UnicodeDecodeError, ValueError, RecursionError) as error:
    raise ValueError(f"{path}: not JSON ({type(error).__name__}: {str(error)[:120]})") from None
  if not isinstance(generations, list):
    raise ValueError(f"{path}: expected a JSON list (one list of generations per problem), "
                     f"got {type(generations).__name__}")
  found, invalid = [], []
  if len(generations) > len(problems):
    invalid.append(f"{path}: {len(generations)} lists of generations for {len(problems)} problems; "
                   f"the last {len(generations) - len(problems)} belong to none and are not read")
  for index, (problem, samples) in enumerate(zip(problems, generations)):
    where = f"{path}: problem {index} ({problem.name})"
    if not isinstance(samples, list):
      invalid.append(f"{where}: expected a list of generations, got {type(samples).__name__}")
      continue
    head = problem.harness_prompt
    for sample, generation in enumerate(samples):
      if not isinstance(generation, str):
        invalid.append(f"{where} generation {sample}: not a string ({type(generation).__name__})")
      elif not generation.startswith(head):
        invalid.append(f"{where} generation {sample}: does not start with the problem's prompt (stripped)")
      else:
        found.append((problem, sample, generation[len(head):]))
  return found, invalid


def write_generations(path: str, generations: Sequence[Sequence[str]]) -> None:
  """The harness's generations file: `json.dump(generations, fp)`'s text, written atomically."""
  storage.makedirs(storage.dirname(path))
  storage.write_atomic(path, json.dumps([list(samples) for samples in generations]))


def generations_file_name(language: str, save_generations_path: str = "generations.json") -> str:
  """The name the harness saves a MultiPL-E language's generations under: its task is
  multiple-<code> (Go's "go", not "go_test.go"), the file f"{stem}_{task}.json"."""
  stem = posixpath.splitext(save_generations_path)[0]  # evaluator.py: os.path.splitext
  return f"{stem}_multiple-{'go' if language == 'go_test.go' else language}.json"


# ---------------------------------------------------------------------------------------------


def _write_gzip_json(directory: str, record: dict, suffix: str, indent: int | None) -> str:
  name = record.get("name")
  if not isinstance(name, str) or not name or "/" in name:
    raise ValueError(f"the record's name {name!r} cannot name a file")
  path = storage.join(directory, name + suffix)
  storage.makedirs(directory)
  # mtime 0 (zlib's own header: no name either), so a rerun writes the same bytes.
  storage.write_atomic(path, gzip.compress(json.dumps(record, indent=indent).encode("utf-8"), mtime=0))
  return path


def _files(path: str, suffixes: tuple[str, ...], exclude: tuple[str, ...] = ()) -> list[str]:
  if not storage.isdir(path):
    return [path]
  return [storage.join(path, name) for name in storage.listdir(path)
          if name.endswith(suffixes) and not name.endswith(exclude)]


def _read_records(files: list[str], check) -> tuple[list[dict], list[str]]:
  records, invalid = [], []
  first: dict[tuple[str, str], str] = {}
  for file in files:
    try:
      record = _read_json(file)
      check(record, file)
    except ValueError as error:
      invalid.append(str(error))
      continue
    except OSError as error:  # a dangling symlink, a file that went away: that file's problem, not the run's
      invalid.append(f"{file}: cannot be read ({error.strerror or type(error).__name__})")
      continue
    key = (record["language"], record["name"])
    if key in first:
      invalid.append(f"{file}: problem {record['name']} in {record['language']} again (first in {first[key]})")
      continue
    first[key] = file
    records.append(record)
  return records, invalid


def _read_json(file: str) -> FileRecord:
  data = storage.read_bytes(file)
  if file.endswith(".gz"):
    try:
      data = gzip.decompress(data)
    except (OSError, EOFError, zlib.error) as error:
      raise ValueError(f"{file}: not gzip ({type(error).__name__}: {str(error)[:120]})") from None
  try:
    record = json.loads(data.decode("utf-8"))
  except (UnicodeDecodeError, ValueError, RecursionError) as error:
    raise ValueError(f"{file}: not JSON ({type(error).__name__}: {str(error)[:120]})") from None
  if not isinstance(record, dict):
    raise ValueError(f"{file}: expected a JSON object, got {type(record).__name__}")
  found = FileRecord(record)
  found.where = file
  return found


def _require(record: dict, where: str, key: str, types: type | tuple[type, ...], what: str,
             optional: bool = False) -> None:
  """`record[key]` is one of `types` (never a bool: no field here is one), or absent when `optional`."""
  if key not in record:
    if optional:
      return
    raise ValueError(f"{where}: no {key} field")
  if isinstance(record[key], bool) or not isinstance(record[key], types):
    raise ValueError(f"{where}: {key} must be {what}, got {type(record[key]).__name__}")


def _strings(record: dict, where: str, key: str, optional: bool = False) -> None:
  _require(record, where, key, list, "a list of strings", optional)
  if key in record and not all(isinstance(item, str) for item in record[key]):
    raise ValueError(f"{where}: {key} must be a list of strings")


def _check_common(record: dict, file: str) -> None:
  """The fields both files share: the harness's own records lack temperature, top_p, max_tokens and
  stop_tokens (pass_k.py takes a missing temperature as 0.2), so those are checked only when present."""
  for key in ("name", "language", "prompt", "tests"):
    _require(record, file, key, str, "a string")
  for key in ("temperature", "top_p"):
    _require(record, file, key, (int, float), "a number", optional=True)
  _require(record, file, "max_tokens", int, "an integer", optional=True)
  _strings(record, file, "stop_tokens", optional=True)


def _check_completions(record: dict, file: str) -> None:
  _check_common(record, file)
  _strings(record, file, "completions")


def _check_results(record: dict, file: str) -> None:
  _check_common(record, file)
  _require(record, file, "results", list, "a list")
  for index, result in enumerate(record["results"]):
    where = f"{file}: result {index}"
    if not isinstance(result, dict):
      raise ValueError(f"{where}: not a JSON object")
    _require(result, where, "program", str, "a string")
    _require(result, where, "status", str, "a string")
    _require(result, where, "exit_code", (int, type(None)), "an integer or null")
    for key in ("stdout", "stderr"):
      _require(result, where, key, str, "a string", optional=True)
    _require(result, where, "timestamp", int, "an integer", optional=True)
