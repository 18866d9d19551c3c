r"""Code from dataset shards: Parquet and JSON Lines (plain or gzip), in The Stack's schema or mapped columns.

The datasets code models are trained on come as shards of rows, one source file a row: The Stack and
StarCoderData as Parquet (columns `content`, `max_stars_repo_path`, `max_stars_repo_name`,
`max_stars_repo_licenses`, `ext`, `lang`, ...), other dumps as JSON Lines with a `text` field (a
`.json` file may also hold one JSON array of such records, the one shard read whole). This
module turns a shard into the corpus pipeline's records without ever holding a shard in memory:

  ExpandShard  shard -> units: one per Parquet row group (read from the footer alone), one per JSONL file
  ReadRows     unit  -> rows, streamed in batches of `_BATCH_ROWS` with only the projected columns

A Reshuffle between the two spreads a shard's row groups over workers. A JSONL file is one unit (gzip
cannot be split, and plain JSONL rows are numbered from the top), read line by line; the rows it yields
are spread over workers by the pipeline's next grouping.

Column names: the first present of each `DEFAULT_COLUMNS` list, unless a flag names one (`Columns`).
Language: the paper's extension mapping (languages.py) from the path column, else the extension
column; the language column only when the user asks (`Columns.language_from_column`), since
datasets label languages their own way ("C++", "c-sharp").

Bad input never stops the pipeline: a shard that cannot be opened, lacks the text column, or a row
that is not an object, holds no text, text that is not a string (a number, a list, an int column) or
non-UTF-8 text is a `Problem` (shard, row, message) on its own
output, counted, written to the corpus's problems.jsonl and printed, and every other row is kept.
"""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import io
import itertools
import json
import posixpath
from typing import Any, Iterator

import apache_beam as beam

import storage
import languages

PROBLEMS = "problems"  # tag of the (shard, row, message) output
SKIPPED = "skipped"  # tag of the (reason, language, bytes) output (the corpus pipeline's)
PARQUET, JSONL = "parquet", "jsonl"
_BATCH_ROWS = 256  # rows per Arrow batch: memory is one batch of content, not a row group

# The Stack (v1, v2), StarCoderData, and the `text` of MaxText / Levanter / Dolma-style dumps.
DEFAULT_COLUMNS: dict[str, tuple[str, ...]] = {
    "text": ("content", "text"),
    "path": ("max_stars_repo_path", "path"),
    "repo": ("max_stars_repo_name", "repo_name", "repository_name"),
    "license": ("max_stars_repo_licenses", "detected_licenses", "license_type", "license"),
    "ext": ("ext", "extension"),
    "language": ("lang", "language"),
}


@dataclasses.dataclass(frozen=True)
class Columns:
  """Column (or JSON field) names; None: the first of DEFAULT_COLUMNS[field] that a shard has."""
  text: str | None = None
  path: str | None = None
  repo: str | None = None
  license: str | None = None
  ext: str | None = None
  language: str | None = None
  language_from_column: bool = False  # classify by the language column instead of the extension

  def candidates(self, field: str) -> tuple[str, ...]:
    named = getattr(self, field)
    return (named,) if named else DEFAULT_COLUMNS[field]


@dataclasses.dataclass(frozen=True)
class Problem:
  shard: str
  row: int | None  # 1-based row (JSONL: line) number; None for the whole shard
  message: str
  counted: bool = True  # counted as "malformed"; False where the row is counted under its own reason

  def to_json(self) -> dict:
    return {"shard": self.shard, "row": self.row, "message": self.message}

  def __str__(self) -> str:
    return f"{self.shard}{f' row {self.row}' if self.row is not None else ''}: {self.message}"


def shard_format(path: str) -> str | None:
  name = path.lower()
  if name.endswith((".parquet", ".parq")):
    return PARQUET
  if name.endswith((".jsonl", ".jsonl.gz", ".json", ".json.gz", ".ndjson", ".ndjson.gz")):
    return JSONL
  return None


def expand_sources(patterns: list[str]) -> list[str]:
  """The shard files of `--shards` arguments (files or globs, local or URLs), sorted and de-duplicated.

  FileNotFoundError naming the argument when one matches nothing; ValueError for a file of neither format.
  """
  found: dict[str, None] = {}
  for pattern in patterns:
    matches = storage.glob(pattern) if any(c in pattern for c in "*?[") else (
        [pattern] if storage.isfile(pattern) else [])
    if not matches:
      raise FileNotFoundError(f"--shards {pattern}: no such file")
    for match in sorted(matches):
      if shard_format(match) is None:
        raise ValueError(f"--shards {pattern}: {match} is neither Parquet (.parquet) nor JSON Lines "
                         "(.jsonl, .jsonl.gz, .json.gz, .ndjson)")
      found.setdefault(match, None)
  return list(found)


def classify(row: dict[str, Any], columns: Columns) -> languages.Language | None:
  """The row's language: by the language column when asked, else the path's or the ext column's extension."""
  if columns.language_from_column:
    label = first_present(row, columns.candidates("language"))
    return languages.from_label(str(label)) if label is not None else None
  path = first_present(row, columns.candidates("path"))
  if path:
    language = languages.classify(str(path))
    if language is not None:
      return language
  ext = first_present(row, columns.candidates("ext"))
  if ext:
    return languages.classify("file." + str(ext).lstrip("."))
  return None


def first_present(row: dict[str, Any], names: tuple[str, ...]) -> Any:
  for name in names:
    value = row.get(name)
    if value is not None:
      return value
  return None


def relative_path(row: dict[str, Any], columns: Columns, shard: str, number: int) -> str:
  """"repo/path" as the record's path (a tree source's files read "label/dir/name"); without a path
  column, the shard's name and row number."""
  path = first_present(row, columns.candidates("path"))
  repo = first_present(row, columns.candidates("repo"))
  if not path:
    return f"{posixpath.basename(shard)}#{number}"
  return posixpath.join(str(repo), str(path).lstrip("/")) if repo else str(path).lstrip("/")


def _as_python(value: Any) -> Any:
  """Arrow / numpy list values as Python lists (a license column is a list of SPDX ids in The Stack v1)."""
  if hasattr(value, "tolist"):
    return value.tolist()
  return value


class ExpandShard(beam.DoFn):
  """shard -> (shard, format, row group or -1, first row number); a shard that cannot be opened or has
  no text column -> a Problem."""

  def __init__(self, columns: Columns):
    self._columns = columns

  def process(self, shard: str) -> Iterator:
    kind = shard_format(shard)
    if kind == JSONL:
      yield shard, JSONL, -1, 1
      return
    import pyarrow.parquet as pq

    try:
      with storage.open_file(shard, "rb") as f:
        metadata = pq.ParquetFile(f).metadata
    except Exception as error:  # pyarrow's ArrowInvalid, OSError, a storage error: all "cannot read"
      yield beam.pvalue.TaggedOutput(PROBLEMS, Problem(shard, None, f"not a readable Parquet file ({error})"))
      return
    names = set(metadata.schema.names)
    text = next((name for name in self._columns.candidates("text") if name in names), None)
    if text is None:
      yield beam.pvalue.TaggedOutput(PROBLEMS, Problem(
          shard, None, f"no text column {' or '.join(map(repr, self._columns.candidates('text')))} "
                       f"(columns: {', '.join(sorted(names))}); give --text_column"))
      return
    first = 1
    for group in range(metadata.num_row_groups):
      yield shard, PARQUET, group, first
      first += metadata.row_group(group).num_rows


class ReadRows(beam.DoFn):
  """A unit -> (digest, relpath, language, text, license value) per row of our languages; skips on
  SKIPPED as (reason, language, bytes); rows that cannot be read on PROBLEMS."""

  def __init__(self, columns: Columns, max_file_bytes: int):
    self._columns = columns
    self._max_file_bytes = max_file_bytes

  def process(self, unit: tuple[str, str, int, int]) -> Iterator:
    shard, kind, group, first = unit
    rows = self._parquet_rows(shard, group, first) if kind == PARQUET else self._jsonl_rows(shard)
    for number, row in rows:
      if isinstance(row, Problem):
        yield beam.pvalue.TaggedOutput(PROBLEMS, row)
      else:
        yield from self._record(shard, number, row)

  def _record(self, shard: str, number: int, row: dict[str, Any]) -> Iterator:
    text = first_present(row, self._columns.candidates("text"))
    if text is None:
      yield beam.pvalue.TaggedOutput(PROBLEMS, Problem(
          shard, number, f"no text field {' or '.join(map(repr, self._columns.candidates('text')))}"))
      return
    if not isinstance(text, (str, bytes)):  # 1234567, true, a list, an int64 column: not a source file
      yield beam.pvalue.TaggedOutput(PROBLEMS, Problem(
          shard, number, f"text is {type(text).__name__}, not a string or UTF-8 bytes"))
      return
    language = classify(row, self._columns)
    data = text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass")
    if language is None:
      yield beam.pvalue.TaggedOutput(SKIPPED, ("not_code", "", len(data)))
      return
    reason = None
    if not data:
      reason = "empty"
    elif len(data) > self._max_file_bytes:
      reason = "too_large"
    elif b"\0" in data:
      reason = "binary"
    if reason is not None:
      yield beam.pvalue.TaggedOutput(SKIPPED, (reason, language.name, len(data)))
      return
    try:
      decoded = data.decode("utf-8")
    except UnicodeDecodeError as error:
      yield beam.pvalue.TaggedOutput(PROBLEMS, Problem(shard, number, f"text is not UTF-8 ({error.reason} at "
                                                                      f"byte {error.start})", counted=False))
      yield beam.pvalue.TaggedOutput(SKIPPED, ("not_utf8", language.name, len(data)))
      return
    license_value = _as_python(first_present(row, self._columns.candidates("license")))
    yield (hashlib.sha256(data).hexdigest(), relative_path(row, self._columns, shard, number), language.name,
           decoded, license_value)

  def _projection(self, names: list[str]) -> list[str]:
    wanted = [name for field in DEFAULT_COLUMNS for name in self._columns.candidates(field)]
    return [name for name in dict.fromkeys(wanted) if name in names]

  def _parquet_rows(self, shard: str, group: int, first: int) -> Iterator[tuple[int, Any]]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    number = first
    try:
      with storage.open_file(shard, "rb") as f:
        parquet = pq.ParquetFile(f)
        columns = self._projection(parquet.schema_arrow.names)
        for batch in parquet.iter_batches(batch_size=_BATCH_ROWS, row_groups=[group], columns=columns):
          # Text as bytes: UTF-8 is checked per row here, so a bad row is reported, not a bad batch.
          arrays = {name: batch.column(name) for name in batch.schema.names}
          for name in self._columns.candidates("text"):
            if name in arrays and pa.types.is_string(arrays[name].type):
              arrays[name] = arrays[name].cast(pa.binary())
            elif name in arrays and pa.types.is_large_string(arrays[name].type):
              arrays[name] = arrays[name].cast(pa.large_binary())
          values = {name: array.to_pylist() for name, array in arrays.items()}
          for i in range(batch.num_rows):
            yield number, {name: column[i] for name, column in values.items()}
            number += 1
    except Exception as error:  # a damaged row group: what was read stays, the rest is reported
      yield number, Problem(shard, number, f"row group {group} cannot be read from here on ({error})")

  def _jsonl_rows(self, shard: str) -> Iterator[tuple[int, Any]]:
    number = 0
    try:
      with storage.open_file(shard, "rb") as raw:
        lines = gzip.GzipFile(fileobj=raw) if shard.lower().endswith(".gz") else raw
        if shard.lower().endswith((".json", ".json.gz")):  # JSON Lines, or one JSON array of records
          head = b""
          while not head.strip() and (chunk := lines.read(1 << 12)):
            head += chunk
          if head.lstrip()[:1] == b"[":
            yield from self._array_rows(shard, head + lines.read())
            return
          lines = itertools.chain(io.BytesIO(head + lines.readline()), lines)  # streamed on, line by line
        for number, line in enumerate(lines, start=1):
          if not line.strip():
            continue
          try:
            row = json.loads(line)
          except ValueError as error:  # UnicodeDecodeError included
            yield number, Problem(shard, number, f"not JSON ({error})")
            continue
          if not isinstance(row, dict):
            yield number, Problem(shard, number, f"a JSON {type(row).__name__}, not an object")
            continue
          yield number, row
    except Exception as error:  # a truncated gzip stream, a storage error: rows read so far stay
      yield number + 1, Problem(shard, number + 1, f"cannot be read from here on ({error})")


  @staticmethod
  def _array_rows(shard: str, data: bytes) -> Iterator[tuple[int, Any]]:
    """A .json file holding one array: its records, numbered from 1 (read whole, as a JSON array cannot
    be streamed without a streaming parser; JSON Lines streams)."""
    try:
      rows = json.loads(data)
    except ValueError as error:  # UnicodeDecodeError included
      yield 1, Problem(shard, None, f"a JSON array that is not valid JSON ({error})")
      return
    for number, row in enumerate(rows, start=1):
      if isinstance(row, dict):
        yield number, row
      else:
        yield number, Problem(shard, number, f"a JSON {type(row).__name__}, not an object")


def read_shards(pipeline: beam.Pipeline, shards: list[str], columns: Columns,
                max_file_bytes: int) -> tuple[beam.PCollection, beam.PCollection, beam.PCollection]:
  """(records, skips, problems) of the shards: records as (digest, relpath, language, text, license value)."""
  units = (pipeline
           | "Shards" >> beam.Create(shards)
           | "ExpandShards" >> beam.ParDo(ExpandShard(columns)).with_outputs(PROBLEMS, main="units"))
  rows = (units.units
          | "SpreadUnits" >> beam.Reshuffle()
          | "ReadRows" >> beam.ParDo(ReadRows(columns, max_file_bytes)).with_outputs(PROBLEMS, SKIPPED,
                                                                                       main="records"))
  problems = (units[PROBLEMS], rows[PROBLEMS]) | "ShardProblems" >> beam.Flatten()
  return rows.records, rows[SKIPPED], problems
