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
import glob
import hashlib
import json
import os
import posixpath
import re
import sysconfig
from typing import Iterable, Iterator

import apache_beam as beam
import datasketch
import numpy as np
from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions
import tqdm

import storage
from data import languages
from data import records

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
_SKIPPED = "skipped"  # tag of the pipeline's skip-reason output

# A file to read, as the pipeline carries it: plain tuples (picklable, no schema inference).
#   (absolute path or URL, relative path "label/dir/name", language name)
SourceFile = tuple[str, str, str]

# Near-deduplication (see the module docstring): BigCode's setting for The Stack / SantaCoder.
NEAR_DUP_THRESHOLD = 0.7  # estimated Jaccard similarity of the shingle sets at or above which a file goes
NEAR_DUP_NUM_PERM = 256  # MinHash permutations (signature length)
NEAR_DUP_SHINGLE_SIZE = 5  # tokens per shingle
NEAR_DUP_SEED = 1  # MinHash permutation seed: fixed, so signatures are the same in every worker and run
_MINHASH_SCHEME = "affine32"  # datasketch 2.0's default, named so a new default cannot change signatures
_MINHASH_BATCH = 4096  # shingles per update_batch: it builds a (shingles x permutations) array
_CODE_TOKEN_RE = re.compile(r"\w+|[^\w\s]")

LOCAL_PRESET_GLOBS = ("/usr/include", "/usr/lib/node_modules", "/usr/local/lib/node_modules",
                      "/usr/share/javascript", "/usr/lib/go*/src", "/usr/local/go/src", "/usr/share/R",
                      "/usr/lib/R/library", "/usr/share/lua", "~/.cargo/registry/src", "/usr/share/php",
                      "/usr/share/dart", "/usr/share/julia", "/usr/lib/ghc*")
LOCAL_PRESET_MAX_FILES_PER_LANGUAGE = 3000


# ----------------------------------------------------------------------------------------------
# Paths: local, or a URL ("scheme://...") that only tf.io.gfile can reach (storage.py). The crawler
# walks and stats source trees, which storage does not offer: it uses gfile for URLs itself.

is_url = storage.is_url
_gfile = storage._gfile


def normalize_path(path: str) -> str:
  """A local path resolved (symlinks too), or a URL without trailing slashes ("gs://b/x/" -> "gs://b/x")."""
  if is_url(path):
    scheme, rest = path.split("://", 1)
    return f"{scheme}://{rest.rstrip('/')}"
  return os.path.realpath(path)


is_dir = storage.isdir
_join = storage.join


# ----------------------------------------------------------------------------------------------
# Driver side: find the files.

def local_preset_sources() -> tuple[list[str], list[str]]:
  """(sources, excluded directories) already on this machine: the running Python's stdlib and
  whichever others of LOCAL_PRESET_GLOBS exist. The stdlib's site-packages is third-party code, not
  the standard library, and would outnumber it: excluded."""
  stdlib = sysconfig.get_paths()["stdlib"]
  found = [stdlib]
  for pattern in LOCAL_PRESET_GLOBS:
    found.extend(sorted(path for path in glob.glob(os.path.expanduser(pattern)) if os.path.isdir(path)))
  return _unique_roots(found), [os.path.join(stdlib, name) for name in ("site-packages", "dist-packages")]


def _unique_roots(roots: Iterable[str]) -> list[str]:
  """Absolute, resolved, de-duplicated roots in first-seen order (a root named twice is read once)."""
  seen: dict[str, None] = {}
  for root in roots:
    seen.setdefault(normalize_path(root), None)
  return list(seen)


def _path_parts(root: str) -> list[str]:
  """The directory names of a root; a URL's scheme is not one ("gs://bucket/crawl" -> bucket, crawl)."""
  if is_url(root):
    return [p for p in root.split("://", 1)[1].split("/") if p]
  return [p for p in root.split(os.sep) if p]


def source_labels(roots: list[str]) -> dict[str, str]:
  """The prefix of each root's relative paths: its basename, lengthened by parents where two clash.

  "/usr/lib/go-1.22/src" and "/usr/local/go/src" become "go-1.22/src" and "go/src", so two
  sources never yield the same relative path. Roots must be unique (see `_unique_roots`).
  """
  parts = {root: _path_parts(root) or ["root"] for root in roots}
  depth = dict.fromkeys(roots, 1)
  while True:
    labels = {root: "/".join(parts[root][-depth[root]:]) for root in roots}
    by_label = collections.defaultdict(list)
    for root, label in labels.items():
      by_label[label].append(root)
    clashing = [root for group in by_label.values() if len(group) > 1 for root in group]
    if not clashing:
      return labels
    for root in clashing:  # a root already at full length waits: the other, longer one diverges
      depth[root] = min(depth[root] + 1, len(parts[root]))


def scan_tree(root: str, label: str, skipped: collections.Counter,
              exclude: frozenset[str] = frozenset()) -> list[SourceFile]:
  """Code files under `root`, sorted by relative path; symlinks and non-code files only counted.

  Directories whose resolved path (`normalize_path`) is in `exclude` are not entered (and not counted).
  A URL root is walked with tf.io.gfile (object stores have no symlinks).
  """
  if is_url(root):
    return _scan_url_tree(root, label, skipped, exclude)
  found: list[SourceFile] = []
  stack = [root]
  with tqdm.tqdm(desc=f"scanning {label}", unit=" files", leave=False) as progress:
    while stack:
      directory = stack.pop()
      try:
        entries = sorted(os.scandir(directory), key=lambda entry: entry.name)
      except OSError:
        skipped["unreadable"] += 1
        continue
      for entry in entries:
        # Symlinks are never followed: a link into the tree is a duplicate, one out of it is not ours,
        # and a link to a parent would loop.
        if entry.is_symlink():
          skipped["symlink"] += 1
        elif entry.is_dir(follow_symlinks=False):
          if not exclude or os.path.realpath(entry.path) not in exclude:
            stack.append(entry.path)
        else:
          progress.update(1)
          try:
            entry.path.encode("utf-8")  # os.scandir keeps undecodable bytes as lone surrogates
          except UnicodeEncodeError:
            skipped["undecodable_name"] += 1
            continue
          language = languages.classify(entry.name)
          if language is None or not entry.is_file(follow_symlinks=False):  # sockets, fifos: not code
            skipped["not_code"] += 1
            continue
          relpath = posixpath.join(label, os.path.relpath(entry.path, root).replace(os.sep, "/"))
          found.append((entry.path, relpath, language.name))
  found.sort(key=lambda source: source[1])
  return found


def _scan_url_tree(root: str, label: str, skipped: collections.Counter,
                   exclude: frozenset[str]) -> list[SourceFile]:
  """`scan_tree` of a URL root, through tf.io.gfile.walk (top-down, pruned, visited in sorted order)."""
  found: list[SourceFile] = []

  def unreadable(_: Exception) -> None:
    skipped["unreadable"] += 1

  with tqdm.tqdm(desc=f"scanning {label}", unit=" files", leave=False) as progress:
    for directory, subdirs, names in _gfile().walk(root, topdown=True, onerror=unreadable):
      # Some object stores list a "directory" with a trailing slash: names are compared without it.
      subdirs[:] = sorted(name for name in subdirs
                          if not exclude or normalize_path(_join(directory, name)) not in exclude)
      relative_dir = directory[len(root):].strip("/")
      for name in sorted(names):
        progress.update(1)
        language = languages.classify(name)
        if language is None:
          skipped["not_code"] += 1
          continue
        relpath = posixpath.join(label, relative_dir, name) if relative_dir else posixpath.join(label, name)
        found.append((_join(directory, name), relpath, language.name))
  found.sort(key=lambda source: source[1])
  return found


def cap_per_language(files: list[SourceFile], max_files: int | None,
                     skipped: collections.Counter) -> list[SourceFile]:
  """At most `max_files` per language, chosen deterministically.

  Ordered by a hash of the relative path rather than the path itself, so a cap samples across all
  sources and directories instead of taking the alphabetically first tree (e.g. only /usr/include/a*).
  """
  if max_files is None:
    return files
  by_language: dict[str, list[SourceFile]] = collections.defaultdict(list)
  for source in files:
    by_language[source[2]].append(source)
  kept: list[SourceFile] = []
  for group in by_language.values():
    group.sort(key=lambda source: (hashlib.sha256(source[1].encode("utf-8")).hexdigest(), source[1]))
    kept.extend(group[:max_files])
    skipped["capped"] += max(0, len(group) - max_files)
  kept.sort(key=lambda source: source[1])
  return kept


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
  gfile = _gfile()
  gfile.makedirs(directory)
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


def code_shingles(text: str, size: int = NEAR_DUP_SHINGLE_SIZE) -> set[bytes]:
  """The set of `size`-token shingles of a source text, UTF-8 encoded; whitespace is not a token.

  Fewer than `size` tokens: one shingle of them all; none: the empty set.
  """
  tokens = _CODE_TOKEN_RE.findall(text)
  if len(tokens) <= size:
    return {" ".join(tokens).encode("utf-8")} if tokens else set()
  # Tokens hold no whitespace, so " " separates them unambiguously.
  return {" ".join(tokens[i:i + size]).encode("utf-8") for i in range(len(tokens) - size + 1)}


def lsh_bands(threshold: float, num_perm: int = NEAR_DUP_NUM_PERM) -> tuple[int, int]:
  """(bands, rows per band) for a Jaccard threshold: datasketch's MinHashLSH choice.

  For thresholds so close to 1 that MinHashLSH refuses (its best split has one band, >= 0.99 for
  256 permutations), one band of all `num_perm` values: candidates have identical signatures.
  """
  try:
    lsh = datasketch.MinHashLSH(threshold=threshold, num_perm=num_perm)
  except ValueError:
    if not 0.0 < threshold <= 1.0:
      raise
    return 1, num_perm
  return lsh.b, lsh.r


def estimated_jaccard(signature: bytes, other: bytes) -> float:
  """The share of equal values of two MinHash signatures (as `MinHashBands` encodes them)."""
  a, b = np.frombuffer(signature, dtype="<u4"), np.frombuffer(other, dtype="<u4")
  return np.count_nonzero(a == b) / len(a)


class MinHashBands(beam.DoFn):
  """(digest, relpath, language, text) -> one ((language, band, band bytes), (digest, signature)) per band.

  The signature is the file's MinHash over `code_shingles`, little-endian uint32 bytes; computed
  once per file. A file without tokens yields nothing (it is never a near duplicate).
  """

  def __init__(self, num_perm: int, bands: int, rows: int, shingle_size: int):
    self._num_perm, self._bands, self._rows, self._shingle_size = num_perm, bands, rows, shingle_size
    self._permutations = None

  def setup(self) -> None:
    # Drawing the permutations once per worker rather than once per file.
    self._permutations = datasketch.MinHash(num_perm=self._num_perm, seed=NEAR_DUP_SEED,
                                            scheme=_MINHASH_SCHEME).permutations

  def process(self, record: tuple) -> Iterator:
    digest, _, language, text = record
    shingles = list(code_shingles(text, self._shingle_size))  # any order: a minimum per permutation
    if not shingles:
      return
    if self._permutations is None:
      self.setup()
    minhash = datasketch.MinHash(num_perm=self._num_perm, seed=NEAR_DUP_SEED, scheme=_MINHASH_SCHEME,
                                 permutations=self._permutations)
    for start in range(0, len(shingles), _MINHASH_BATCH):
      minhash.update_batch(shingles[start:start + _MINHASH_BATCH])
    signature = minhash.hashvalues.astype("<u4").tobytes()
    width = 4 * self._rows  # bytes per band
    for band in range(self._bands):
      yield (language, band, signature[band * width:(band + 1) * width]), (digest, signature)


class NearDuplicatesInBucket(beam.DoFn):
  """((language, band, bytes), [(digest, signature), ...]) -> digests of the bucket's near duplicates.

  The member of smallest digest is the representative; every other member whose estimated Jaccard
  with it reaches the threshold is a near duplicate. Two passes over the bucket, one signature held:
  a large bucket need not fit in memory (Beam's grouped values can be iterated again).
  """

  def __init__(self, threshold: float):
    self._threshold = threshold

  def process(self, element: tuple) -> Iterator[str]:
    _, members = element
    representative = None
    count = 0
    for member in members:
      count += 1
      if representative is None or member[0] < representative[0]:
        representative = member
    if count < 2:
      return
    for digest, signature in members:
      if digest != representative[0] and estimated_jaccard(representative[1], signature) >= self._threshold:
        yield digest


def key_record(record: tuple) -> tuple[str, tuple]:
  return record[0], record


def key_near_duplicate(digest: str) -> tuple[str, None]:
  return digest, None


class DropNearDuplicates(beam.DoFn):
  """(digest, {"record": [record], "near": [None, ...]}) -> the record, or "near_duplicate" on `skipped`."""

  def process(self, element: tuple) -> Iterator:
    _, grouped = element
    is_near_duplicate = any(True for _ in grouped["near"])
    for record in grouped["record"]:
      if is_near_duplicate:
        yield beam.pvalue.TaggedOutput(_SKIPPED, "near_duplicate")
      else:
        yield record


def remove_near_duplicates(records_in: beam.PCollection, threshold: float) -> beam.pvalue.DoOutputsTuple:
  """The near-deduplication transforms on exactly de-duplicated records (digest, relpath, language, text):
  outputs "kept" (the records that stay) and `skipped` (one "near_duplicate" per record removed)."""
  bands, rows = lsh_bands(threshold, NEAR_DUP_NUM_PERM)
  near = (records_in
          | "MinHashBands" >> beam.ParDo(MinHashBands(NEAR_DUP_NUM_PERM, bands, rows, NEAR_DUP_SHINGLE_SIZE))
          | "GroupBuckets" >> beam.GroupByKey()
          | "NearInBucket" >> beam.ParDo(NearDuplicatesInBucket(threshold))
          | "NearDigests" >> beam.Distinct()
          | "KeyNear" >> beam.Map(key_near_duplicate))
  keyed = records_in | "KeyRecords" >> beam.Map(key_record)
  return ({"record": keyed, "near": near}
          | "JoinNear" >> beam.CoGroupByKey()
          | "DropNear" >> beam.ParDo(DropNearDuplicates()).with_outputs(_SKIPPED, main="kept"))


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
  """The count lines, sorted, as one file (through tf.io.gfile: any file system the shards can go to)."""
  with _gfile().GFile(filename, "w") as f:
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
  with _gfile().GFile(filename, "r") as f:
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
  gfile = _gfile()
  removed = []
  for language in languages.BY_NAME:
    directory = _join(output, language)
    if not gfile.isdir(directory):
      continue
    for name in sorted(gfile.listdir(directory)):
      relative = os.path.join(language, name)
      if _SHARD_RE.match(name) and relative not in expected:
        gfile.remove(_join(directory, name))
        removed.append(relative)
    if not gfile.exists(directory):  # an object store's "directory" goes with its last object
      continue
    if not gfile.listdir(directory):
      gfile.rmtree(directory)
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


def collect_files(roots: list[str], max_files_per_language: int | None, skipped: collections.Counter,
                  exclude: Iterable[str] = ()) -> list[SourceFile]:
  """Scans every root, applies the per-language cap, and prints what each root contributed."""
  labels = source_labels(roots)
  excluded = frozenset(normalize_path(path) for path in exclude)
  found = {root: scan_tree(root, labels[root], skipped, excluded) for root in roots}
  files = sorted((source for sources in found.values() for source in sources), key=lambda source: source[1])
  kept = cap_per_language(files, max_files_per_language, skipped)
  origin = {source[1]: root for root in roots for source in found[root]}
  kept_per_root = collections.Counter(origin[source[1]] for source in kept)
  for root in roots:
    per_language = collections.Counter(language for _, _, language in found[root])
    summary = ", ".join(f"{name} {count:,}" for name, count in per_language.most_common())
    capped = f", {kept_per_root[root]:,} kept under the cap" if max_files_per_language is not None else ""
    print(f"{root} -> {labels[root]}/: {len(found[root]):,} code files{capped} ({summary or 'none'})")
  return kept


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

  gfile = _gfile()
  output = normalize_path(output) if is_url(output) else os.path.abspath(output)
  options = PipelineOptions(pipeline_args or [])
  _warn_if_local_on_remote_runner(options, sources, output)
  gfile.makedirs(output)
  # Until the new stats.json lands, the directory is not a finished corpus.
  if gfile.exists(_join(output, STATS_FILE)):
    gfile.remove(_join(output, STATS_FILE))
  skipped: collections.Counter = collections.Counter()
  files = collect_files(_unique_roots(sources), max_files_per_language, skipped, exclude)
  print(f"{len(files):,} code files go to the pipeline")

  work_dir = _join(output, _WORK_DIR)
  if gfile.exists(work_dir):
    gfile.rmtree(work_dir)
  manifest = write_manifest(files, work_dir)
  counts_file = _join(work_dir, "counts.jsonl")
  with beam.Pipeline(options=options) as pipeline:
    build_pipeline(pipeline, manifest, output, counts_file, validation_share, num_shards, max_file_bytes,
                   near_dedup, near_dup_threshold)
  sizes = read_counts(counts_file, skipped)
  gfile.rmtree(work_dir)

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
