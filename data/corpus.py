r"""Builds the code corpus: source trees in, sharded TFRecords per language and split out.

  python -m data.corpus --source DIR [--source DIR ...] --output CORPUS_DIR \
      [--validation_share 0.05] [--num_shards 4] [--max_file_bytes 1000000] \
      [--max_files_per_language N] [--exclude DIR ...] [--preset local] \
      [--near_dedup | --no_near_dedup] [--near_dup_threshold 0.7] [--runner DirectRunner] \
      [other Beam options]

The driver walks the trees (never following symlinks, so a symlink loop is harmless) and keeps the
files whose name `languages.classify` recognises; a path that is not valid UTF-8 (a Latin-1 file name)
cannot be recorded and is skipped and counted as "undecodable_name". An Apache Beam pipeline then reads them, drops
empty / too large / binary / non-UTF-8 files, exact duplicates (by sha256 of the content) and near
duplicates (below), splits train / validation and assigns shards by the content hash, and writes each
shard sorted by that hash (`records.write_shard`). Everything is a function of the file contents and
their relative paths, so the same input gives byte-identical shards and stats.json on any runner.

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
`--project` ...). Any --source, --exclude and --output may be a URL that tf.io.gfile reads (gs://,
hdfs://, s3:// once tensorflow-io is installed, ram://); all file access, the driver's and the
workers', goes through tf.io.gfile for those. On a remote runner (Dataflow, Flink, Spark) the workers
cannot see the driver's disk: give URLs for --source and --output, and ship this package to the
workers. On Dataflow, from the repository root:

  pip install "apache-beam[gcp]==2.77.0" build "setuptools>=68"   # once, where you launch from
  python -m data.corpus --source gs://BUCKET/crawl --output gs://BUCKET/corpus --num_shards 256 \
      --runner DataflowRunner --project PROJECT --region REGION --temp_location gs://BUCKET/tmp \
      --setup_file ./pyproject.toml

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
import hashlib
import json
import os
import re
from typing import Iterable, Iterator

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions

import storage
from data import languages
from data import records
# The driver's crawl (data/crawl.py) and the near-deduplication (data/near_dedup.py), re-exported:
# this module is where the corpus builder's names have always been found.
from data.crawl import (LOCAL_PRESET_GLOBS, LOCAL_PRESET_MAX_FILES_PER_LANGUAGE, SourceFile, cap_per_language,
                        collect_files, is_dir, is_url, local_preset_sources, normalize_path, scan_tree,
                        source_labels, unique_roots)
from data.near_dedup import (NEAR_DUP_NUM_PERM, NEAR_DUP_SEED, NEAR_DUP_SHINGLE_SIZE, NEAR_DUP_THRESHOLD,
                             SKIPPED as _SKIPPED, DropNearDuplicates, MinHashBands, NearDuplicatesInBucket,
                             code_shingles, estimated_jaccard, lsh_bands, remove_near_duplicates)

# Why a file was left out. Driver side: symlink, not_code, undecodable_name (a path that is not UTF-8:
# it could not be recorded in the corpus), capped (over --max_files_per_language); pipeline side: the
# rest. All are always reported, so stats.json has a fixed shape.
SKIP_REASONS = ("symlink", "not_code", "undecodable_name", "capped", "unreadable", "empty", "too_large",
                "binary", "not_utf8", "duplicate", "near_duplicate")
STATS_FILE = "stats.json"
# The driver's list of files for the pipeline and the pipeline's counts, read back by the driver; removed.
_WORK_DIR = ".corpus-work"
_MANIFEST_CHUNK = 10_000  # files per manifest file: the pipeline graph holds only their names
_SHARD_RE = re.compile(r"^(train|validation)-\d{5}-of-\d{5}\.tfrecord(\.tmp)?$")
_join = storage.join


# ----------------------------------------------------------------------------------------------
# Pipeline side: read, de-duplicate, split, shard, write, count. DoFns are top-level (picklable).

def placement(digest: str, validation_share: float, num_shards: int) -> tuple[str, int]:
  """(split, shard index) from a sha256 hex digest; disjoint bits, so split and shard are independent."""
  fraction = int(digest[:16], 16) / 2.0**64
  split = "validation" if fraction < validation_share else "train"
  return split, int(digest[16:32], 16) % num_shards


def write_manifest(files: list[SourceFile], directory: str) -> list[str]:
  """Writes the files to read as JSON lines in chunks under `directory`; returns the chunks' names.

  The pipeline reads these rather than holding the list in its graph, which a remote runner would
  have to upload (Dataflow refuses a job graph of more than a few MB; a large crawl is millions of files).
  """
  storage.makedirs(directory)
  names = []
  for start in range(0, len(files), _MANIFEST_CHUNK):
    name = _join(directory, f"files-{start // _MANIFEST_CHUNK:06d}.jsonl")
    storage.write_atomic(name, "".join(json.dumps(dict(zip(("path", "relpath", "language"), source))) + "\n"
                                       for source in files[start:start + _MANIFEST_CHUNK]))
    names.append(name)
  return names


def read_manifest(filename: str) -> Iterator[SourceFile]:
  for _, record in storage.read_jsonl(filename):
    yield record["path"], record["relpath"], record["language"]


def _read_head(path: str, max_bytes: int) -> bytes | str:
  """At most `max_bytes` + 1 bytes of a file, or the skip reason "empty" / "too_large" from its size.

  Local paths are read directly; URLs through tf.io.gfile, whose errors become OSError.
  """
  if not is_url(path):
    size = os.stat(path).st_size
    if size == 0 or size > max_bytes:  # checked before reading: a huge file never enters memory
      return "empty" if size == 0 else "too_large"
    with open(path, "rb") as f:
      return f.read(max_bytes + 1)
  import tensorflow as tf

  try:
    size = tf.io.gfile.stat(path).length
    if size == 0 or size > max_bytes:
      return "empty" if size == 0 else "too_large"
    with tf.io.gfile.GFile(path, "rb") as f:
      return f.read(max_bytes + 1)
  except tf.errors.OpError as error:
    raise OSError(f"{path}: {error.message}") from error


class ReadFile(beam.DoFn):
  """(path, relpath, language) -> (digest, relpath, language, text), or a skip reason on `skipped`."""

  def __init__(self, max_file_bytes: int):
    self._max_file_bytes = max_file_bytes

  def process(self, source: SourceFile) -> Iterator:
    path, relpath, language = source
    try:
      data = _read_head(path, self._max_file_bytes)
    except OSError:
      yield beam.pvalue.TaggedOutput(_SKIPPED, "unreadable")
      return
    if isinstance(data, str):  # a skip reason
      yield beam.pvalue.TaggedOutput(_SKIPPED, data)
      return
    if not data:  # emptied since the stat
      yield beam.pvalue.TaggedOutput(_SKIPPED, "empty")
    elif len(data) > self._max_file_bytes:  # grew since the stat
      yield beam.pvalue.TaggedOutput(_SKIPPED, "too_large")
    elif b"\0" in data:  # text never holds NUL; compiled or generated binaries do
      yield beam.pvalue.TaggedOutput(_SKIPPED, "binary")
    else:
      try:
        text = data.decode("utf-8")
      except UnicodeDecodeError:
        yield beam.pvalue.TaggedOutput(_SKIPPED, "not_utf8")
        return
      yield hashlib.sha256(data).hexdigest(), relpath, language, text


def key_by_digest(record: tuple) -> tuple[str, tuple]:
  digest, relpath, language, text = record
  return digest, (relpath, language, text)


class KeepOne(beam.DoFn):
  """One representative per content hash: the smallest relative path, whatever order copies arrive in."""

  def process(self, element: tuple[str, Iterable[tuple]]) -> Iterator:
    digest, copies = element
    copies = list(copies)
    relpath, language, text = min(copies, key=lambda copy: copy[0])
    for _ in range(len(copies) - 1):
      yield beam.pvalue.TaggedOutput(_SKIPPED, "duplicate")
    yield digest, relpath, language, text


class Place(beam.DoFn):
  """(digest, relpath, language, text) -> ((language, split, shard), (digest, relpath, text))."""

  def __init__(self, validation_share: float, num_shards: int):
    self._validation_share = validation_share
    self._num_shards = num_shards

  def process(self, record: tuple) -> Iterator:
    digest, relpath, language, text = record
    split, shard = placement(digest, self._validation_share, self._num_shards)
    yield (language, split, shard), (digest, relpath, text)


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
    records.write_shard(filename, [records.encode(text, relpath) for _, relpath, text in rows])
    yield filename


def size_of(element: tuple) -> tuple[tuple[str, str], tuple[int, int, int]]:
  """((language, split), (files, UTF-8 bytes, characters)) of one placed record."""
  (language, split, _), (_, _, text) = element
  return (language, split), (1, len(text.encode("utf-8")), len(text))


def add_sizes(sizes: Iterable[tuple[int, int, int]]) -> tuple[int, int, int]:
  files = num_bytes = characters = 0
  for f, b, c in sizes:
    files, num_bytes, characters = files + f, num_bytes + b, characters + c
  return files, num_bytes, characters


def size_line(element: tuple) -> str:
  (language, split), (files, num_bytes, characters) = element
  return json.dumps(["files", language, split, files, num_bytes, characters])


def skip_line(element: tuple[str, int]) -> str:
  reason, count = element
  return json.dumps(["skipped", reason, count])


def write_lines(lines: list[str], filename: str) -> str:
  """The count lines, sorted, as one file (through storage: any file system the shards can go to)."""
  with storage.open_file(filename, "w") as f:
    f.write("".join(line + "\n" for line in sorted(lines)))
  return filename


def build_pipeline(pipeline: beam.Pipeline, manifest: list[str], output: str, counts_file: str,
                   validation_share: float, num_shards: int, max_file_bytes: int, near_dedup: bool = True,
                   near_dup_threshold: float = NEAR_DUP_THRESHOLD) -> None:
  """Adds the corpus transforms to `pipeline`: reads the files listed in the `manifest` files
  (`write_manifest`), writes shards under `output` and the count lines to `counts_file`."""
  read = (pipeline
          | "Manifest" >> beam.Create(manifest)
          | "Files" >> beam.FlatMap(read_manifest)
          | "Spread" >> beam.Reshuffle()  # a manifest file lists thousands: read them on many workers
          | "Read" >> beam.ParDo(ReadFile(max_file_bytes)).with_outputs(_SKIPPED, main="texts"))
  unique = (read.texts
            | "KeyByDigest" >> beam.Map(key_by_digest)
            | "GroupCopies" >> beam.GroupByKey()
            | "KeepOne" >> beam.ParDo(KeepOne()).with_outputs(_SKIPPED, main="unique"))
  skipped = [read[_SKIPPED], unique[_SKIPPED]]
  kept = unique.unique
  if near_dedup:
    near = remove_near_duplicates(unique.unique, near_dup_threshold)
    kept = near.kept
    skipped.append(near[_SKIPPED])
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
  skips = (tuple(skipped)
           | "AllSkips" >> beam.Flatten()
           | "CountSkips" >> beam.combiners.Count.PerElement()
           | "SkipLines" >> beam.Map(skip_line))
  _ = ((sizes, skips)
       | "AllCounts" >> beam.Flatten()
       | "CountLines" >> beam.combiners.ToList()
       | "WriteCounts" >> beam.Map(write_lines, counts_file))


# ----------------------------------------------------------------------------------------------
# Driver side again: stats, clean-up, report.

def read_counts(filename: str, skipped: collections.Counter) -> dict[str, dict[str, dict[str, int]]]:
  """Per language and split sizes from the pipeline's count lines; adds its skips to `skipped`."""
  sizes: dict[str, dict[str, dict[str, int]]] = {}
  with storage.open_file(filename, "r") as f:
    for line in f:
      row = json.loads(line)
      if row[0] == "files":
        _, language, split, files, num_bytes, characters = row
        per_split = sizes.setdefault(language, {s: {"files": 0, "bytes": 0, "characters": 0}
                                                for s in records.SPLITS})
        per_split[split] = {"files": files, "bytes": num_bytes, "characters": characters}
      else:
        _, reason, count = row
        skipped[reason] += count
  return sizes


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


def format_table(stats: dict) -> str:
  """A readable per-language summary of stats.json."""
  header = f"{'language':<12}{'train files':>13}{'valid files':>13}{'MB':>10}{'characters':>15}"
  lines = [header, "-" * len(header)]
  totals = [0, 0, 0, 0]
  for language in [l.name for l in languages.LANGUAGES if l.name in stats["languages"]]:
    train, valid = (stats["languages"][language][split] for split in records.SPLITS)
    row = [train["files"], valid["files"], train["bytes"] + valid["bytes"],
           train["characters"] + valid["characters"]]
    totals = [t + r for t, r in zip(totals, row)]
    lines.append(f"{language:<12}{row[0]:>13,}{row[1]:>13,}{row[2] / 1e6:>10.2f}{row[3]:>15,}")
  lines.append("-" * len(header))
  lines.append(f"{'total':<12}{totals[0]:>13,}{totals[1]:>13,}{totals[2] / 1e6:>10.2f}{totals[3]:>15,}")
  skipped = ", ".join(f"{reason} {count:,}" for reason, count in stats["skipped"].items() if count)
  lines.append(f"skipped: {skipped or 'none'}")
  return "\n".join(lines)


def build_corpus(sources: list[str], output: str, validation_share: float = 0.05, num_shards: int = 4,
                 max_file_bytes: int = 1_000_000, pipeline_args: list[str] | None = None,
                 max_files_per_language: int | None = None, exclude: Iterable[str] = (),
                 near_dedup: bool = True, near_dup_threshold: float = NEAR_DUP_THRESHOLD) -> dict:
  """Builds the corpus under `output` and returns its stats (also written to output/stats.json).

  near_dedup: remove near duplicates (module docstring), at estimated Jaccard >= near_dup_threshold.
  """
  for source in sources:
    if not is_dir(source):
      raise FileNotFoundError(f"corpus source {source!r} does not exist or is not a directory")
  if not 0.0 <= validation_share <= 1.0:
    raise ValueError(f"validation_share must be in [0, 1], got {validation_share}")
  if num_shards < 1 or max_file_bytes < 1:
    raise ValueError(f"num_shards and max_file_bytes must be positive, got {num_shards}, {max_file_bytes}")
  if max_files_per_language is not None and max_files_per_language < 0:
    raise ValueError(f"max_files_per_language must be >= 0, got {max_files_per_language}")
  if not 0.0 < near_dup_threshold <= 1.0:  # NaN fails too
    raise ValueError(f"near_dup_threshold must be in (0, 1], got {near_dup_threshold}")

  output = normalize_path(output) if is_url(output) else os.path.abspath(output)
  options = PipelineOptions(pipeline_args or [])
  _warn_if_local_on_remote_runner(options, sources, output)
  storage.makedirs(output)
  # Until the new stats.json lands, the directory is not a finished corpus.
  if storage.exists(_join(output, STATS_FILE)):
    storage.remove(_join(output, STATS_FILE))
  skipped: collections.Counter = collections.Counter()
  files = collect_files(unique_roots(sources), max_files_per_language, skipped, exclude)
  print(f"{len(files):,} code files go to the pipeline")

  work_dir = _join(output, _WORK_DIR)
  if storage.exists(work_dir):
    storage.rmtree(work_dir)
  manifest = write_manifest(files, work_dir)
  counts_file = _join(work_dir, "counts.jsonl")
  with beam.Pipeline(options=options) as pipeline:
    build_pipeline(pipeline, manifest, output, counts_file, validation_share, num_shards, max_file_bytes,
                   near_dedup, near_dup_threshold)
  sizes = read_counts(counts_file, skipped)
  storage.rmtree(work_dir)

  expected = {records.shard_name(language, split, shard, num_shards)
              for language in sizes for split in records.SPLITS for shard in range(num_shards)}
  for stale in remove_stale_shards(output, expected):
    print(f"removed stale shard {stale}")
  stats = {
      "languages": sizes,
      "skipped": {reason: skipped[reason] for reason in SKIP_REASONS},
      "options": {"validation_share": validation_share, "num_shards": num_shards,
                  "max_file_bytes": max_file_bytes, "max_files_per_language": max_files_per_language,
                  "near_dedup": near_dedup, "near_dup_threshold": near_dup_threshold,
                  "near_dup_num_perm": NEAR_DUP_NUM_PERM, "near_dup_shingle_size": NEAR_DUP_SHINGLE_SIZE},
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


def parse_args(argv: list[str] | None) -> tuple[argparse.Namespace, list[str], argparse.ArgumentParser]:
  parser = argparse.ArgumentParser(prog="python -m data.corpus", description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--source", action="append", default=[],
                      help="a source tree, a local directory or a URL such as gs://BUCKET/crawl (repeatable)")
  parser.add_argument("--output", required=True, help="the corpus directory to write (local or a URL)")
  parser.add_argument("--validation_share", type=float, default=0.05)
  parser.add_argument("--num_shards", type=int, default=4)
  parser.add_argument("--max_file_bytes", type=int, default=1_000_000)
  parser.add_argument("--max_files_per_language", type=int, default=None,
                      help=f"cap per language (default: none; {LOCAL_PRESET_MAX_FILES_PER_LANGUAGE} with "
                           "--preset local)")
  parser.add_argument("--exclude", action="append", default=[],
                      help="a directory (or URL) not to enter (repeatable)")
  parser.add_argument("--preset", choices=["local"], default=None,
                      help="local: add source trees already on this machine (stdlib, /usr/include, ...)")
  parser.add_argument("--near_dedup", action=argparse.BooleanOptionalAction, default=True,
                      help="remove near-duplicate files of the same language (MinHash LSH; default: on); "
                           "--no_near_dedup (or --no-near_dedup) keeps them")
  # BooleanOptionalAction's negation is "--no-near_dedup"; the other flags use "_", so this spelling too
  # (unparsed, parse_known_args would hand it to Beam and near-dedup would silently stay on).
  parser.add_argument("--no_near_dedup", dest="near_dedup", action="store_false", help=argparse.SUPPRESS)
  parser.add_argument("--near_dup_threshold", type=float, default=NEAR_DUP_THRESHOLD,
                      help="estimated Jaccard similarity of 5-token shingle sets, in (0, 1], at or above "
                           f"which a file is a near duplicate (default: {NEAR_DUP_THRESHOLD})")
  args, pipeline_args = parser.parse_known_args(argv)
  return args, pipeline_args, parser


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
  if not sources:
    parser.error("give at least one --source DIR, or --preset local")
  for name, value in (("--num_shards", args.num_shards), ("--max_file_bytes", args.max_file_bytes)):
    if value < 1:
      parser.error(f"{name} must be positive, got {value}")
  if not 0.0 <= args.validation_share <= 1.0:
    parser.error(f"--validation_share must be in [0, 1], got {args.validation_share}")
  if not 0.0 < args.near_dup_threshold <= 1.0:
    parser.error(f"--near_dup_threshold must be in (0, 1], got {args.near_dup_threshold}")
  stats = build_corpus(sources, args.output, args.validation_share, args.num_shards, args.max_file_bytes,
                       pipeline_args, max_files, exclude, near_dedup=args.near_dedup,
                       near_dup_threshold=args.near_dup_threshold)
  print(format_table(stats))
  print(f"wrote {args.output if is_url(args.output) else os.path.abspath(args.output)}")
  return stats


if __name__ == "__main__":
  main()
