r"""Builds the code corpus: source trees and dataset shards in, sharded TFRecords per language and split out.

  python -m data.corpus [--source DIR ...] [--shards FILE_OR_GLOB ...] --output CORPUS_DIR \
      [--validation_share 0.05] [--num_shards 4] [--max_file_bytes 1000000] \
      [--max_files_per_language N] [--exclude DIR ...] [--preset local] \
      [--text_column content --path_column ... --language_column lang] \
      [--no_license_filter] [--no_license keep|drop] [--no_quality_filters] [--max_line_length 1000 ...] \
      [--no_decontaminate] [--benchmark_file FILE ...] [--decontamination_ngram N] [--pii] \
      [--near_dedup | --no_near_dedup] [--near_dup_threshold 0.7] [--runner DirectRunner] \
      [other Beam options]

Two kinds of source feed one pipeline. Source trees: the driver walks them (never following symlinks,
so a symlink loop is harmless) and keeps the files whose name `languages.classify` recognises; a path
that is not valid UTF-8 (a Latin-1 file name) cannot be recorded and is counted as "undecodable_name".
Dataset shards (data/shards.py): Parquet and JSON Lines files in The Stack's schema (`content`,
`max_stars_repo_path`, `max_stars_repo_licenses`, ...) or with the columns the flags name, read in the
pipeline one row group at a time; a shard or row that cannot be read is listed in problems.jsonl
(shard, row, why), counted as "malformed" and printed, and the rest is kept.

The pipeline then, in this order (data/corpus_report.py names each stage's count):
  read        drops empty / too large / binary / non-UTF-8 files;
  licence     (data/licenses.py) drops files whose licence is not permissive: for shards the row's
              licence column, for trees the licences ScanCode detects in the LICENSE / COPYING /
              README files of the file's directory and every directory above it; files with no licence
              found are kept, as The Stack keeps them (--no_license drop removes them);
  quality     (data/quality.py) StarCoder's rules: longest line, mean line length, alphanumeric
              fraction, auto-generated markers, data-like files, each a flag, with per-language overrides;
  duplicates  exact (by sha256 of the content) and near (below);
  benchmarks  (data/decontamination.py) drops files holding text of a benchmark this project scores,
              or of --benchmark_file files, listing each in decontaminated.jsonl with the item it matched;
  PII         (data/pii.py, --pii, off by default) replaces emails, IP addresses and secrets by placeholders;
then splits train / validation and assigns shards by the content hash, and writes each shard sorted by
that hash (`records.write_shard`); each record carries its licence. stats.json and the printed tables
count every file and byte per language and stage (read = the stages' removals + kept).
Everything is a function of the file contents and their relative paths, so the same input gives
byte-identical shards and stats.json on any runner.

Near-deduplication (on by default; --no_near_dedup turns it off) removes files that are almost the
same as another file of the same language: a copy with a comment edited, a variable renamed, or
re-indented. Each file becomes the set of its 5-token shingles, the tokens being identifiers and
numbers (`\w+`) and single punctuation characters; whitespace is not a token, so reformatting changes
nothing. A file of fewer than 5 tokens is one shingle of them all; a file without tokens is not
compared. A 256-permutation MinHash (datasketch, fixed seed), computed once per file, estimates the
Jaccard similarity of two such sets as the share of equal signature values. Locality-sensitive
hashing finds the candidates without comparing all pairs: the signature is cut into b bands of r
values (b and r from datasketch's MinHashLSH for the threshold: 25 bands of 10 for 0.7), and files of
one language that agree on a whole band meet in one bucket (a Beam GroupByKey on (language, band,
band values)). In a bucket, the file of smallest content digest is the representative, and every other
file whose estimated Jaccard with it is at least --near_dup_threshold is a near duplicate: it goes, and
is counted as "near_duplicate". A file only goes for a similar file of smaller digest, so of a group of
near duplicates the one of smallest digest always stays.

The default threshold, 0.7 (with 5-token shingles and 256 permutations), is BigCode's near-dedup
setting for The Stack and SantaCoder. An edited copy (a comment reworded, a local renamed) keeps a
similarity of about 0.8-0.95 to its original and goes; different files of one project share
boilerplate but few 5-token runs and score far below it. Thresholds from about 0.99 up, for which
MinHashLSH's best banding is a single band (which it refuses), use one band of all 256 values: the
candidates are then files with identical signatures. stats.json's "options" records the settings.

Unknown flags go to Beam's PipelineOptions unchanged (`--runner`, `--direct_num_workers`, Dataflow's
`--project` ...). Any --source, --shards, --exclude and --output may be a URL that tf.io.gfile reads (gs://,
hdfs://, s3:// once tensorflow-io is installed, ram://); all file access, the driver's and the
workers', goes through tf.io.gfile for those. On a remote runner (Dataflow, Flink, Spark) the workers
cannot see the driver's disk: give URLs for --source and --output, and ship this package to the
workers. On Dataflow, from the repository root:

  pip install "apache-beam[gcp]==2.77.0" build "setuptools>=68"   # once, where you launch from
  python -m data.corpus --source gs://BUCKET/crawl --output gs://BUCKET/corpus --num_shards 256 \
      --runner DataflowRunner --project PROJECT --region REGION --temp_location gs://BUCKET/tmp \
      --setup_file ./pyproject.toml

and for The Stack-format Parquet shards in a bucket (one row group is a work unit):

  python -m data.corpus --shards 'gs://BUCKET/the-stack/data/*/*.parquet' --output gs://BUCKET/corpus \
      --num_shards 1024 --runner DataflowRunner --project PROJECT --region REGION \
      --temp_location gs://BUCKET/tmp --setup_file ./pyproject.toml --max_num_workers 64

Beam 2.77 takes a pyproject.toml as --setup_file: it builds an sdist of codelm (`python -m build
--no-isolation --sdist`, hence `build` and setuptools >= 68 in the launching environment) and the
workers pip install it with its dependencies. Instead, `pip wheel --no-deps -w dist .` and
`--extra_package dist/codelm-0.1.0-py3-none-any.whl` ships the same package; a custom worker image
(`--sdk_container_image`) with codelm installed saves each worker that install. Flink and Spark take
the same flags with their own runner options. A shard is sorted in one worker's memory: choose
--num_shards so that a language's share of the crawl divided by it is at most a few hundred MB.
"""

from __future__ import annotations

import quiet

if __name__ == "__main__":  # before TensorFlow, JAX and Beam are imported
  quiet.setup()

import argparse
import collections
import dataclasses
import hashlib
import json
import os
import re
from typing import Iterable, Iterator

import apache_beam as beam
import tqdm
from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions

import quiet
import storage
from data import corpus_report
from data import decontamination
import languages
from data import licenses
from data import records
from data import shards
from data.decontamination import Decontaminator
from data.filters import CONTAMINATED, REDACTED, Decontaminate, LicenseAndQuality, LicensePolicy, RedactPII
from data.licenses import LicenseVerdict
from data.quality import QualityFilters, parse_overrides
from data.shards import Columns, Problem
# The driver's crawl (data/crawl.py) and the near-deduplication (data/near_dedup.py), re-exported:
# this module is where the corpus builder's names have always been found.
from data.crawl import (LOCAL_PRESET_GLOBS, LOCAL_PRESET_MAX_FILES_PER_LANGUAGE, SourceFile, cap_per_language,
                        collect_files, is_dir, is_url, local_preset_sources, normalize_path, scan_tree,
                        source_labels, unique_roots)
from data.near_dedup import (NEAR_DUP_NUM_PERM, NEAR_DUP_SEED, NEAR_DUP_SHINGLE_SIZE, NEAR_DUP_THRESHOLD,
                             SKIPPED as _SKIPPED, DropNearDuplicates, MinHashBands, NearDuplicatesInBucket,
                             code_shingles, estimated_jaccard, lsh_bands, remove_near_duplicates)

# Why a file was left out, in pipeline order (data/corpus_report.py); always all reported, so
# stats.json has a fixed shape.
SKIP_REASONS = corpus_report.SKIP_REASONS
STATS_FILE = "stats.json"
PROBLEMS_FILE = "problems.jsonl"  # shards and rows that could not be read: shard, row, message
LOCK_NAME = "corpus"  # output/corpus.lock: held while a build writes the output (storage.exclusive_output)
DECONTAMINATED_FILE = "decontaminated.jsonl"  # files removed for benchmark text: path, language, item
# The driver's list of files for the pipeline and the pipeline's counts, read back by the driver; removed.
_WORK_DIR = ".corpus-work"
_MANIFEST_CHUNK = 10_000  # files per manifest file: the pipeline graph holds only their names
_SHARD_RE = re.compile(r"^(train|validation)-\d{5}-of-\d{5}\.tfrecord(\.tmp)?$")
_PRINTED_PROBLEMS = 10
_join = storage.join


@dataclasses.dataclass(frozen=True)
class Filters:
  """What the pipeline removes besides unreadable files and duplicates (module docstring)."""
  license: LicensePolicy = LicensePolicy()
  quality: QualityFilters | None = QualityFilters()  # None: no quality rule
  decontaminate: bool = True
  benchmark_files: tuple[str, ...] = ()  # the user's benchmark files, beside the project's benchmarks
  decontamination_ngram: int | None = None  # also remove files sharing this many consecutive words with an item
  pii: bool = False  # replace emails, IP addresses and secrets by placeholders

  def as_dict(self) -> dict:
    return {**self.license.as_dict(), "quality": self.quality.as_dict() if self.quality else None,
            "decontaminate": self.decontaminate, "benchmark_files": list(self.benchmark_files),
            "decontamination_ngram": self.decontamination_ngram, "pii": self.pii}


# ----------------------------------------------------------------------------------------------
# Pipeline side: read, filter, de-duplicate, split, shard, write, count. DoFns are top-level (picklable).

def placement(digest: str, validation_share: float, num_shards: int) -> tuple[str, int]:
  """(split, shard index) from a sha256 hex digest; disjoint bits, so split and shard are independent."""
  fraction = int(digest[:16], 16) / 2.0**64
  split = "validation" if fraction < validation_share else "train"
  return split, int(digest[16:32], 16) % num_shards


def write_manifest(files: list[SourceFile], verdicts: list[LicenseVerdict], directory: str) -> list[str]:
  """Writes the files to read, with their licence verdicts, as JSON lines in chunks under `directory`;
  returns the chunks' names.

  The pipeline reads these rather than holding the list in its graph, which a remote runner would
  have to upload (Dataflow refuses a job graph of more than a few MB; a large crawl is millions of files).
  """
  storage.makedirs(directory)
  names = []
  for start in range(0, len(files), _MANIFEST_CHUNK):
    name = _join(directory, f"files-{start // _MANIFEST_CHUNK:06d}.jsonl")
    chunk = zip(files[start:start + _MANIFEST_CHUNK], verdicts[start:start + _MANIFEST_CHUNK])
    storage.write_atomic(name, "".join(
        json.dumps({**dict(zip(("path", "relpath", "language"), source)),
                    "license": [verdict.verdict, verdict.license, verdict.reason]}) + "\n"
        for source, verdict in chunk))
    names.append(name)
  return names


def read_manifest(filename: str) -> Iterator[tuple[str, str, str, LicenseVerdict]]:
  for _, record in storage.read_jsonl(filename):
    yield record["path"], record["relpath"], record["language"], LicenseVerdict(*record["license"])


def _read_head(path: str, max_bytes: int) -> bytes | tuple[str, int]:
  """At most `max_bytes` + 1 bytes of a file, or (skip reason "empty" / "too_large", size) from its size.

  Local paths are read directly; URLs through tf.io.gfile, whose errors become OSError.
  """
  if not is_url(path):
    size = os.stat(path).st_size
    if size == 0 or size > max_bytes:  # checked before reading: a huge file never enters memory
      return ("empty" if size == 0 else "too_large"), size
    with open(path, "rb") as f:
      return f.read(max_bytes + 1)
  import tensorflow as tf

  try:
    size = tf.io.gfile.stat(path).length
    if size == 0 or size > max_bytes:
      return ("empty" if size == 0 else "too_large"), size
    with tf.io.gfile.GFile(path, "rb") as f:
      return f.read(max_bytes + 1)
  except tf.errors.OpError as error:
    raise OSError(f"{path}: {error.message}") from error


class ReadFile(beam.DoFn):
  """(path, relpath, language, verdict) -> (digest, relpath, language, text, verdict), or
  (reason, language, bytes) on `skipped`."""

  def __init__(self, max_file_bytes: int):
    self._max_file_bytes = max_file_bytes

  def process(self, source: tuple) -> Iterator:
    path, relpath, language, verdict = source
    try:
      data = _read_head(path, self._max_file_bytes)
    except OSError:
      yield beam.pvalue.TaggedOutput(_SKIPPED, ("unreadable", language, 0))
      return
    if isinstance(data, tuple):  # a skip reason and the size
      yield beam.pvalue.TaggedOutput(_SKIPPED, (data[0], language, data[1]))
      return
    reason = None
    if not data:  # emptied since the stat
      reason = "empty"
    elif len(data) > self._max_file_bytes:  # grew since the stat
      reason = "too_large"
    elif b"\0" in data:  # text never holds NUL; compiled or generated binaries do
      reason = "binary"
    if reason is None:
      try:
        text = data.decode("utf-8")
      except UnicodeDecodeError:
        reason = "not_utf8"
    if reason is not None:
      yield beam.pvalue.TaggedOutput(_SKIPPED, (reason, language, len(data)))
    else:
      yield hashlib.sha256(data).hexdigest(), relpath, language, text, verdict


def key_by_digest(record: tuple) -> tuple[str, tuple]:
  return record[0], record[1:]


class KeepOne(beam.DoFn):
  """One representative per content hash: the smallest relative path, whatever order copies arrive in."""

  def process(self, element: tuple[str, Iterable[tuple]]) -> Iterator:
    digest, copies = element
    copies = list(copies)
    relpath, language, text, license_ = min(copies)  # by relpath first
    for _ in range(len(copies) - 1):
      yield beam.pvalue.TaggedOutput(_SKIPPED, ("duplicate", language, len(text.encode("utf-8"))))
    yield digest, relpath, language, text, license_


class Place(beam.DoFn):
  """(digest, relpath, language, text, license) -> ((language, split, shard), (digest, relpath, text, license))."""

  def __init__(self, validation_share: float, num_shards: int):
    self._validation_share = validation_share
    self._num_shards = num_shards

  def process(self, record: tuple) -> Iterator:
    digest, relpath, language, text, license_ = record
    split, shard = placement(digest, self._validation_share, self._num_shards)
    yield (language, split, shard), (digest, relpath, text, license_)


def language_of(element: tuple) -> str:
  return element[0][0]


def all_shard_keys(language: str, num_shards: int) -> Iterator[tuple[tuple[str, str, int], None]]:
  """Every shard of a language, with no record: so empty shards are written too (predictable file set)."""
  for split in records.SPLITS:
    for shard in range(num_shards):
      yield (language, split, shard), None


class WriteShard(beam.DoFn):
  """Writes one shard, records sorted by content hash (so its bytes do not depend on arrival order)."""

  def __init__(self, output: str, num_shards: int):
    self._output = output
    self._num_shards = num_shards

  def process(self, element: tuple[tuple[str, str, int], Iterable]) -> Iterator[str]:
    (language, split, shard), values = element
    rows = sorted(value for value in values if value is not None)
    filename = _join(self._output, records.shard_name(language, split, shard, self._num_shards))
    records.write_shard(filename, [records.encode(text, relpath, license_) for _, relpath, text, license_ in rows])
    yield filename


def size_of(element: tuple) -> tuple[tuple[str, str], tuple[int, int, int]]:
  """((language, split), (files, UTF-8 bytes, characters)) of one placed record."""
  (language, split, _), (_, _, text, _) = element
  return (language, split), (1, len(text.encode("utf-8")), len(text))


def add_sizes(sizes: Iterable[tuple[int, ...]]) -> tuple[int, ...]:
  totals = None
  for size in sizes:
    totals = size if totals is None else tuple(t + s for t, s in zip(totals, size))
  return totals or (0, 0, 0)


def size_line(element: tuple) -> str:
  (language, split), (files, num_bytes, characters) = element
  return json.dumps(["files", language, split, files, num_bytes, characters])


def stage_key(skip: tuple[str, str, int]) -> tuple[tuple[str, str], tuple[int, int]]:
  reason, language, num_bytes = skip
  return (reason, language), (1, num_bytes)


def read_key(record: tuple) -> tuple[tuple[str, str], tuple[int, int]]:
  """A record that was read, for the "read" stage (the read-stage skips are added to it)."""
  return (corpus_report.READ, record[2]), (1, len(record[3].encode("utf-8")))


def problem_stage(problem: Problem) -> tuple[str, str, int]:
  return "malformed", "", 0


def redacted_stage(redacted: tuple) -> tuple[tuple[str, str], tuple[int, int]]:
  language, num_bytes, _ = redacted
  return (corpus_report.PII_REDACTED, language), (1, num_bytes)


def redacted_kinds(redacted: tuple) -> Iterator[tuple[str, int]]:
  yield from redacted[2].items()


def stage_line(element: tuple) -> str:
  (stage, language), (files, num_bytes) = element
  return json.dumps(["stage", stage, language, files, num_bytes])


def pii_line(element: tuple[str, int]) -> str:
  return json.dumps(["pii", *element])


def contaminated_line(element: tuple) -> str:
  relpath, language, benchmark, item = element
  return json.dumps({"path": relpath, "language": language, "benchmark": benchmark, "item": item})


def problem_line(problem: Problem) -> str:
  return json.dumps(problem.to_json())


def write_lines(lines: list[str], filename: str) -> str:
  """The lines, sorted, as one file (through storage: any file system the shards can go to)."""
  with storage.open_file(filename, "w") as f:
    f.write("".join(line + "\n" for line in sorted(lines)))
  return filename


def _write_all(lines: beam.PCollection, filename: str, label: str) -> None:
  _ = (lines | f"{label}List" >> beam.combiners.ToList() | f"{label}Write" >> beam.Map(write_lines, filename))


def build_pipeline(pipeline: beam.Pipeline, manifest: list[str], output: str, counts_file: str,
                   validation_share: float, num_shards: int, max_file_bytes: int, near_dedup: bool = True,
                   near_dup_threshold: float = NEAR_DUP_THRESHOLD, shard_files: list[str] = (),
                   columns: Columns = Columns(), filters: Filters = Filters(),
                   decontaminator: Decontaminator | None = None) -> None:
  """Adds the corpus transforms to `pipeline`: reads the files listed in the `manifest` files
  (`write_manifest`) and the rows of `shard_files`, writes shards, problems.jsonl and
  decontaminated.jsonl under `output` and the count lines to `counts_file`."""
  tree = (pipeline
          | "Manifest" >> beam.Create(manifest)
          | "Files" >> beam.FlatMap(read_manifest)
          | "Spread" >> beam.Reshuffle()  # a manifest file lists thousands: read them on many workers
          | "Read" >> beam.ParDo(ReadFile(max_file_bytes)).with_outputs(_SKIPPED, main="texts"))
  skipped = [tree[_SKIPPED]]
  read = [tree.texts]
  problems = pipeline | "NoProblems" >> beam.Create([])
  if shard_files:
    rows, row_skips, problems = shards.read_shards(pipeline, list(shard_files), columns, max_file_bytes)
    read.append(rows)
    skipped += [row_skips, problems | "CountedProblems" >> beam.Filter(lambda p: p.counted)
                | "ProblemStage" >> beam.Map(problem_stage)]
  texts = tuple(read) | "AllRead" >> beam.Flatten()
  judged = texts | "LicenseQuality" >> beam.ParDo(
      LicenseAndQuality(filters.license, filters.quality)).with_outputs(_SKIPPED, main="kept")
  unique = (judged.kept
            | "KeyByDigest" >> beam.Map(key_by_digest)
            | "GroupCopies" >> beam.GroupByKey()
            | "KeepOne" >> beam.ParDo(KeepOne()).with_outputs(_SKIPPED, main="unique"))
  skipped += [judged[_SKIPPED], unique[_SKIPPED]]
  kept = unique.unique
  if near_dedup:
    near = remove_near_duplicates(kept, near_dup_threshold)
    kept = near.kept
    skipped.append(near[_SKIPPED])
  contaminated = pipeline | "NoContaminated" >> beam.Create([])
  if decontaminator is not None:
    clean = kept | "Decontaminate" >> beam.ParDo(Decontaminate(decontaminator)).with_outputs(
        _SKIPPED, CONTAMINATED, main="clean")
    kept, contaminated = clean.clean, clean[CONTAMINATED]
    skipped.append(clean[_SKIPPED])
  redacted = pipeline | "NoRedacted" >> beam.Create([])
  if filters.pii:
    pii_out = kept | "RedactPII" >> beam.ParDo(RedactPII()).with_outputs(REDACTED, main="texts")
    kept, redacted = pii_out.texts, pii_out[REDACTED]
  placed = kept | "Place" >> beam.ParDo(Place(validation_share, num_shards))

  empty_shards = (placed
                  | "Language" >> beam.Map(language_of)
                  | "Languages" >> beam.Distinct()
                  | "AllShards" >> beam.FlatMap(all_shard_keys, num_shards))
  _ = ((placed, empty_shards)
       | "WithEmptyShards" >> beam.Flatten()
       | "GroupShards" >> beam.GroupByKey()
       | "WriteShards" >> beam.ParDo(WriteShard(output, num_shards)))

  sizes = (placed
           | "Size" >> beam.Map(size_of)
           | "AddSizes" >> beam.CombinePerKey(add_sizes)
           | "SizeLines" >> beam.Map(size_line))
  all_skips = tuple(skipped) | "AllSkips" >> beam.Flatten()
  read_stage_skips = all_skips | "ReadStageSkips" >> beam.Filter(lambda skip: skip[0] in _READ_STAGES)
  stages = ((all_skips | "SkipStages" >> beam.Map(stage_key),
             texts | "ReadStage" >> beam.Map(read_key),
             read_stage_skips | "ReadSkips" >> beam.Map(lambda skip: ((corpus_report.READ, skip[1]), (1, skip[2]))),
             redacted | "RedactedStage" >> beam.Map(redacted_stage))
            | "AllStages" >> beam.Flatten()
            | "AddStages" >> beam.CombinePerKey(add_sizes)
            | "StageLines" >> beam.Map(stage_line))
  pii_counts = (redacted
                | "RedactedKinds" >> beam.FlatMap(redacted_kinds)
                | "AddKinds" >> beam.CombinePerKey(sum)
                | "PiiLines" >> beam.Map(pii_line))
  _write_all((sizes, stages, pii_counts) | "AllCounts" >> beam.Flatten(), counts_file, "Counts")
  _write_all(problems | "ProblemLines" >> beam.Map(problem_line), _join(output, PROBLEMS_FILE), "Problems")
  _write_all(contaminated | "ContaminatedLines" >> beam.Map(contaminated_line),
             _join(output, DECONTAMINATED_FILE), "Contaminated")


# Skips of the reading stage, which count as read too (a file read and found empty was read).
_READ_STAGES = frozenset(("unreadable", "malformed", "empty", "too_large", "binary", "not_utf8"))


# ----------------------------------------------------------------------------------------------
# Driver side again: licences of the trees, stats, clean-up, report.

_LICENSE_FILE_BYTES = 200_000  # a licence is a few KB; a README can be long, and its licence section is early


def tree_license_verdicts(files: list[SourceFile], license_files: list[tuple[str, str]]) -> list[LicenseVerdict]:
  """Each file's verdict from the licence files found on its directory path (licenses.TreeLicenses)."""
  found: dict[str, set[str]] = collections.defaultdict(set)
  truncated = 0
  for path, directory in tqdm.tqdm(license_files, desc="detecting licences", unit=" files", leave=False,
                                   disable=not license_files):
    try:
      data = storage.read_bytes(path)
      truncated += len(data) > _LICENSE_FILE_BYTES
      text = data[:_LICENSE_FILE_BYTES].decode("utf-8", "replace")
    except OSError as error:  # its directory's files may lose their licence: say which
      print(f"could not read licence file {path} ({error}); its directory's licences are those of the others")
      continue
    found[directory].update(licenses.detect_licenses(text))
  if truncated:
    print(f"{truncated:,} licence files over {_LICENSE_FILE_BYTES:,} bytes: licences read from their first "
          f"{_LICENSE_FILE_BYTES:,} bytes only")
  tree = licenses.TreeLicenses({directory: sorted(ids) for directory, ids in found.items() if ids})
  return [tree.verdict(relpath) for _, relpath, _ in files]


def remove_stale_shards(output: str, expected: set[str]) -> list[str]:
  """Deletes shard files (and leftover .tmp) that this run did not write, e.g. from another num_shards."""
  removed = []
  for language in languages.BY_NAME:
    directory = _join(output, language)
    if not storage.isdir(directory):
      continue
    for name in storage.listdir(directory):
      relative = os.path.join(language, name)
      if _SHARD_RE.match(name) and relative not in expected:
        storage.remove(_join(directory, name))
        removed.append(relative)
    if not storage.exists(directory):  # an object store's "directory" goes with its last object
      continue
    if not storage.listdir(directory):
      storage.rmtree(directory)
  return removed


def write_json(filename: str, value: dict) -> None:
  """Deterministic JSON (sorted keys), written atomically: stats.json marks a finished corpus."""
  storage.write_json(filename, value)


format_table = corpus_report.format_table


def make_decontaminator(filters: Filters) -> Decontaminator | None:
  """The project's benchmarks and the user's files as one matcher; prints what it holds."""
  if not filters.decontaminate:
    return None
  items = list(decontamination.project_benchmark_items())
  for path in filters.benchmark_files:
    items.extend(decontamination.file_benchmark_items(path))
  decontaminator = Decontaminator(items, ngram=filters.decontamination_ngram)
  per_benchmark = collections.Counter(item.benchmark for item in items)
  print(f"decontamination against {len(items):,} benchmark items ("
        + ", ".join(f"{name} {count:,}" for name, count in sorted(per_benchmark.items()))
        + (f"; {decontaminator.skipped_short:,} too short to match, left out" if decontaminator.skipped_short else "")
        + ")")
  return decontaminator


def print_problems(output: str) -> int:
  """Prints the first problems.jsonl lines and how many there are; returns the count."""
  lines = storage.read_text(_join(output, PROBLEMS_FILE)).splitlines()
  if lines:
    print(f"{len(lines):,} shard rows or shards could not be read (all listed in {_join(output, PROBLEMS_FILE)}):")
    for line in lines[:_PRINTED_PROBLEMS]:
      print(f"  {Problem(**json.loads(line))}")
    if len(lines) > _PRINTED_PROBLEMS:
      print(f"  ... and {len(lines) - _PRINTED_PROBLEMS:,} more")
  return len(lines)


def build_corpus(sources: list[str], output: str, validation_share: float = 0.05, num_shards: int = 4,
                 max_file_bytes: int = 1_000_000, pipeline_args: list[str] | None = None,
                 max_files_per_language: int | None = None, exclude: Iterable[str] = (),
                 near_dedup: bool = True, near_dup_threshold: float = NEAR_DUP_THRESHOLD,
                 shard_sources: Iterable[str] = (), columns: Columns = Columns(),
                 filters: Filters = Filters()) -> dict:
  """Builds the corpus under `output` from source trees and dataset shards (files or globs) and returns
  its stats (also written to output/stats.json).

  near_dedup: remove near duplicates (module docstring), at estimated Jaccard >= near_dup_threshold.
  """
  for source in sources:
    if not is_dir(source):
      raise FileNotFoundError(f"corpus source {source!r} does not exist or is not a directory")
  shard_files = shards.expand_sources(list(shard_sources))
  if not sources and not shard_files:
    raise ValueError("give at least one source tree or shard")
  if not 0.0 <= validation_share <= 1.0:
    raise ValueError(f"validation_share must be in [0, 1], got {validation_share}")
  if num_shards < 1 or max_file_bytes < 1:
    raise ValueError(f"num_shards and max_file_bytes must be positive, got {num_shards}, {max_file_bytes}")
  if max_files_per_language is not None and max_files_per_language < 0:
    raise ValueError(f"max_files_per_language must be >= 0, got {max_files_per_language}")
  if not 0.0 < near_dup_threshold <= 1.0:  # NaN fails too
    raise ValueError(f"near_dup_threshold must be in (0, 1], got {near_dup_threshold}")
  decontaminator = make_decontaminator(filters)  # before any work: a bad benchmark file is refused here

  output = normalize_path(output) if is_url(output) else os.path.abspath(output)
  options = PipelineOptions(quiet.beam_worker_args(pipeline_args or []))
  _warn_if_local_on_remote_runner(options, [*sources, *shard_files], output)
  storage.makedirs(output)
  # One build per output: a second one on it (a typo, a retry while the first runs) would mix its
  # shards with the first's and leave a stats.json that describes neither.
  with storage.exclusive_output(_join(output, LOCK_NAME), "data.corpus", f"the corpus {output}"):
    # Until the new stats.json lands, the directory is not a finished corpus.
    if storage.exists(_join(output, STATS_FILE)):
      storage.remove(_join(output, STATS_FILE))
    skipped: collections.Counter = collections.Counter()
    license_files: list[tuple[str, str]] = []
    files = collect_files(unique_roots(sources), max_files_per_language, skipped, exclude,
                          license_files if filters.license.enabled else None) if sources else []
    verdicts = tree_license_verdicts(files, license_files)
    if sources:
      by_verdict = collections.Counter(verdict.verdict for verdict in verdicts)
      print(f"{len(files):,} code files go to the pipeline ({len(license_files):,} licence files read: "
            + ", ".join(f"{by_verdict[v]:,} {v.replace('_', ' ')}" for v in
                        (licenses.PERMISSIVE, licenses.NON_PERMISSIVE, licenses.NO_LICENSE)) + ")")
    if shard_files:
      print(f"{len(shard_files):,} shards go to the pipeline")

    work_dir = _join(output, _WORK_DIR)
    if storage.exists(work_dir):
      storage.rmtree(work_dir)
    storage.makedirs(work_dir)
    manifest = write_manifest(files, verdicts, work_dir) if files else []
    counts_file = _join(work_dir, "counts.jsonl")
    with beam.Pipeline(options=options) as pipeline:
      build_pipeline(pipeline, manifest, output, counts_file, validation_share, num_shards, max_file_bytes,
                     near_dedup, near_dup_threshold, shard_files, columns, filters, decontaminator)
    stages = corpus_report.empty_stages()
    for reason in corpus_report.DRIVER_STAGES:
      if skipped[reason]:
        corpus_report.add(stages, reason, "", skipped[reason], 0)
    pii_items: collections.Counter = collections.Counter()
    sizes = corpus_report.read_counts(counts_file, skipped, stages, pii_items)
    storage.rmtree(work_dir)
    print_problems(output)

    expected = {records.shard_name(language, split, shard, num_shards)
                for language in sizes for split in records.SPLITS for shard in range(num_shards)}
    for stale in remove_stale_shards(output, expected):
      print(f"removed stale shard {stale}")
    stats = {
        "languages": sizes,
        "skipped": {reason: skipped[reason] for reason in SKIP_REASONS},
        "stages": stages,
        "pii": {"items": dict(sorted(pii_items.items()))},
        "options": {"validation_share": validation_share, "num_shards": num_shards,
                    "max_file_bytes": max_file_bytes, "max_files_per_language": max_files_per_language,
                    "near_dedup": near_dedup, "near_dup_threshold": near_dup_threshold,
                    "near_dup_num_perm": NEAR_DUP_NUM_PERM, "near_dup_shingle_size": NEAR_DUP_SHINGLE_SIZE,
                    "shards": len(shard_files), "columns": dataclasses.asdict(columns), **filters.as_dict()},
    }
    write_json(_join(output, STATS_FILE), stats)
    return stats


def _warn_if_local_on_remote_runner(options: PipelineOptions, sources: list[str], output: str) -> None:
  """A remote runner's workers cannot see this machine's disk: say so before a long job fails."""
  runner = str(options.view_as(StandardOptions).runner or "DirectRunner")
  if any(name in runner for name in ("Direct", "Prism", "InteractiveRunner")):
    return
  local = [path for path in [*sources, output] if not is_url(path)]
  if local:
    print(f"warning: {runner} runs on workers that may not see local paths {local}; "
          "give URLs (gs://...) for --source and --output")


def _switch(parser: argparse.ArgumentParser, name: str, default: bool, help: str) -> None:
  """--NAME / --no_NAME (and argparse's --no-NAME): unparsed, parse_known_args would hand a misspelt
  negation to Beam and the switch would silently keep its default."""
  parser.add_argument(f"--{name}", action=argparse.BooleanOptionalAction, default=default, help=help)
  parser.add_argument(f"--no_{name}", dest=name, action="store_false", help=argparse.SUPPRESS)


def _limit(kind):
  """A rule's limit from the command line, "none" turning the rule off."""
  def parse(text: str):
    if text.strip().lower() == "none":
      return None
    try:
      return kind(text)
    except ValueError:
      raise argparse.ArgumentTypeError(f"expected a number or none, got {text!r}") from None
  return parse


def parse_args(argv: list[str] | None) -> tuple[argparse.Namespace, list[str], argparse.ArgumentParser]:
  parser = argparse.ArgumentParser(prog="python -m data.corpus", description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--source", action="append", default=[],
                      help="a source tree, a local directory or a URL such as gs://BUCKET/crawl (repeatable)")
  parser.add_argument("--shards", action="append", default=[],
                      help="dataset shards: a Parquet or JSON Lines (.jsonl, .jsonl.gz) file or a glob, local or "
                           "a URL such as 'gs://BUCKET/the-stack/data/*/*.parquet' (repeatable)")
  parser.add_argument("--output", required=True, help="the corpus directory to write (local or a URL)")
  parser.add_argument("--validation_share", type=float, default=0.05)
  parser.add_argument("--num_shards", type=int, default=4)
  parser.add_argument("--max_file_bytes", type=int, default=1_000_000)
  parser.add_argument("--max_files_per_language", type=int, default=None,
                      help=f"cap per language of a tree's files (default: none; {LOCAL_PRESET_MAX_FILES_PER_LANGUAGE} "
                           "with --preset local)")
  parser.add_argument("--exclude", action="append", default=[],
                      help="a directory (or URL) not to enter (repeatable)")
  parser.add_argument("--preset", choices=["local"], default=None,
                      help="local: add source trees already on this machine (stdlib, /usr/include, ...)")
  columns = parser.add_argument_group("shard columns (default: the first present of The Stack's names)")
  for field in shards.DEFAULT_COLUMNS:
    columns.add_argument(f"--{field}_column", default=None,
                         help=f"default: {' or '.join(shards.DEFAULT_COLUMNS[field])}"
                              + ("; given, a row's language comes from this column instead of its extension"
                                 if field == "language" else ""))
  _switch(parser, "near_dedup", True, "remove near-duplicate files of the same language (MinHash LSH; default: on)")
  parser.add_argument("--near_dup_threshold", type=float, default=NEAR_DUP_THRESHOLD,
                      help="estimated Jaccard similarity of 5-token shingle sets, in (0, 1], at or above "
                           f"which a file is a near duplicate (default: {NEAR_DUP_THRESHOLD})")
  group = parser.add_argument_group("licence filter (The Stack's: permissive licences only)")
  _switch(group, "license_filter", True, "remove files whose licence is not permissive (default: on)")
  group.add_argument("--no_license", choices=licenses.NO_LICENSE_POLICIES, default="keep",
                     help="files with no licence found: keep (The Stack's choice, the default) or drop")
  defaults = QualityFilters()
  group = parser.add_argument_group("quality filters (StarCoder's; a limit of 'none' turns a rule off)")
  _switch(group, "quality_filters", True, "apply the quality rules below (default: on)")
  group.add_argument("--max_line_length", type=_limit(int), default=defaults.max_line_length)
  group.add_argument("--max_mean_line_length", type=_limit(float), default=defaults.max_mean_line_length)
  group.add_argument("--min_alphanum_fraction", type=_limit(float), default=defaults.min_alphanum_fraction)
  _switch(group, "auto_generated", defaults.auto_generated, "remove files marked as generated in their first lines")
  _switch(group, "data_like", defaults.data_like, "remove files that are data (an XML declaration, one long JSON line)")
  group.add_argument("--quality_overrides", default="",
                     help="per-language limits, e.g. 'javascript:max_line_length=2000;r:min_alphanum_fraction=0.2'")
  group = parser.add_argument_group("decontamination and PII")
  _switch(group, "decontaminate", True, "remove files holding text of the benchmarks this project scores "
                                         "(listed in decontaminated.jsonl; default: on)")
  group.add_argument("--benchmark_file", action="append", default=[],
                     help="more benchmark text to keep out: BabelCode questions, prompts JSONL or plain text (repeatable)")
  group.add_argument("--decontamination_ngram", type=int, default=None,
                     help="also remove files sharing this many consecutive words with a benchmark item (default: off)")
  _switch(group, "pii", False, "replace emails, IP addresses and secrets by placeholders (default: off)")
  args, pipeline_args = parser.parse_known_args(argv)
  return args, pipeline_args, parser


def filters_from_args(args: argparse.Namespace) -> Filters:
  quality = None
  if args.quality_filters:
    quality = QualityFilters(max_line_length=args.max_line_length, max_mean_line_length=args.max_mean_line_length,
                             min_alphanum_fraction=args.min_alphanum_fraction, auto_generated=args.auto_generated,
                             data_like=args.data_like, overrides=parse_overrides(args.quality_overrides)
                             if args.quality_overrides else ())
  return Filters(LicensePolicy(args.license_filter, args.no_license), quality, args.decontaminate,
                 tuple(args.benchmark_file), args.decontamination_ngram, args.pii)


def main(argv: list[str] | None = None) -> dict:
  args, pipeline_args, parser = parse_args(argv)
  for source in args.source:
    if not is_dir(source):
      parser.error(f"--source {source} does not exist or is not a directory")
  sources, exclude = list(args.source), list(args.exclude)
  max_files = args.max_files_per_language
  if args.preset == "local":
    preset, preset_exclude = local_preset_sources()
    print("preset local adds: " + ", ".join(preset))
    sources += preset
    exclude += preset_exclude
    if max_files is None:
      max_files = LOCAL_PRESET_MAX_FILES_PER_LANGUAGE
  if not sources and not args.shards:
    parser.error("give at least one --source DIR or --shards FILE_OR_GLOB, or --preset local")
  for name, value in (("--num_shards", args.num_shards), ("--max_file_bytes", args.max_file_bytes)):
    if value < 1:
      parser.error(f"{name} must be positive, got {value}")
  if not 0.0 <= args.validation_share <= 1.0:
    parser.error(f"--validation_share must be in [0, 1], got {args.validation_share}")
  if not 0.0 < args.near_dup_threshold <= 1.0:
    parser.error(f"--near_dup_threshold must be in (0, 1], got {args.near_dup_threshold}")
  if args.decontamination_ngram is not None and args.decontamination_ngram < 1:
    parser.error(f"--decontamination_ngram must be positive, got {args.decontamination_ngram}")
  try:
    shard_files = shards.expand_sources(args.shards)
    filters = filters_from_args(args)
    columns = Columns(**{field: getattr(args, f"{field}_column") for field in shards.DEFAULT_COLUMNS},
                      language_from_column=args.language_column is not None)
    if filters.decontaminate:
      for path in filters.benchmark_files:  # read now: a bad file is refused before any work
        decontamination.file_benchmark_items(path)
  except (ValueError, FileNotFoundError) as error:
    parser.error(str(error))
  try:  # an output that cannot be written is refused before any work
    storage.makedirs(args.output)
  except OSError as error:
    parser.error(f"--output {args.output}: cannot be written ({error.strerror or error})")
  try:
    stats = build_corpus(sources, args.output, args.validation_share, args.num_shards, args.max_file_bytes,
                         pipeline_args, max_files, exclude, near_dedup=args.near_dedup,
                         near_dup_threshold=args.near_dup_threshold, shard_sources=shard_files, columns=columns,
                         filters=filters)
  except storage.OutputLocked as error:  # another build holds it: nothing of it was touched
    parser.exit(2, f"{parser.prog}: error: --output {args.output}: {error}\n")
  print(format_table(stats))
  print(f"wrote {args.output if is_url(args.output) else os.path.abspath(args.output)}")
  return stats


if __name__ == "__main__":
  main()
