"""Near-deduplication of the corpus: MinHash signatures of 5-token shingles, LSH buckets per band.

data/corpus.py's docstring says what goes and why (BigCode's setting for The Stack / SantaCoder);
here are the pieces its pipeline runs on the exactly de-duplicated records (digest, relpath, language,
text). DoFns are top-level (picklable).
"""

from __future__ import annotations

import re
import zlib
from typing import Iterator

import apache_beam as beam
import datasketch
import numpy as np

SKIPPED = "skipped"  # tag of the pipeline's skip-reason output (the corpus pipeline's, too)

# BigCode's setting for The Stack / SantaCoder.
NEAR_DUP_THRESHOLD = 0.7  # estimated Jaccard similarity of the shingle sets at or above which a file goes
NEAR_DUP_NUM_PERM = 256  # MinHash permutations (signature length)
NEAR_DUP_SHINGLE_SIZE = 5  # tokens per shingle
NEAR_DUP_SEED = 1  # MinHash permutation seed: fixed, so signatures are the same in every worker and run
_MINHASH_SCHEME = "affine32"  # datasketch 2.0's default, named so a new default cannot change signatures
_MINHASH_BATCH = 256  # shingles per update_batch: it builds a (shingles x permutations) array
_CODE_TOKEN_RE = re.compile(r"\w+|[^\w\s]")


def code_shingles(text: str, size: int = NEAR_DUP_SHINGLE_SIZE) -> set[bytes]:
  """The set of `size`-token shingles of a source text, UTF-8 encoded; whitespace is not a token.

  Fewer than `size` tokens: one shingle of them all; none: the empty set.
  """
  tokens = _CODE_TOKEN_RE.findall(text)
  if len(tokens) <= size:
    return {" ".join(tokens).encode("utf-8")} if tokens else set()
  # Tokens hold no whitespace, so " " separates them unambiguously.
  return {" ".join(tokens[i:i + size]).encode("utf-8") for i in range(len(tokens) - size + 1)}


# Shingle hashes: each distinct token's crc32, spread to 64 bits by the odd multiplier below, five of them
# combined as a polynomial in _SHINGLE_BASE (mod 2^64) and finished by MurmurHash3's 64-bit finaliser;
# the high 32 bits are the shingle's hash. Vectorised in numpy, so one Python step per token, not per
# shingle: datasketch's sha1 per shingle was 70% of the time of the corpus pipeline's slowest stage.
_TOKEN_SPREAD = np.uint64(0x9E3779B97F4A7C15)
_SHINGLE_BASE = np.uint64(0x100000001B3)
_FMIX64 = (np.uint64(33), np.uint64(0xFF51AFD7ED558CCD), np.uint64(0xC4CEB9FE1A85EC53))


def shingle_hashes(text: str, size: int = NEAR_DUP_SHINGLE_SIZE) -> np.ndarray:
  """The distinct 32-bit hashes of `code_shingles(text, size)`, sorted, as uint32 (empty: no tokens).

  Deterministic in every process (no Python `hash`). Two distinct shingles of a file share a hash with
  probability ~ n^2 / 2^33 for n shingles, as for datasketch's own 32-bit sha1 hash.
  """
  tokens = _CODE_TOKEN_RE.findall(text)
  if not tokens:
    return np.zeros(0, dtype=np.uint32)
  crc = {token: zlib.crc32(token.encode("utf-8")) for token in set(tokens)}
  token_hashes = np.fromiter(map(crc.__getitem__, tokens), dtype=np.uint64, count=len(tokens))
  token_hashes = (token_hashes + np.uint64(1)) * _TOKEN_SPREAD
  width = min(size, len(tokens))  # fewer tokens than `size`: one shingle of them all
  count = len(tokens) - width + 1
  combined = np.zeros(count, dtype=np.uint64)
  for offset in range(width):
    combined = combined * _SHINGLE_BASE + token_hashes[offset:offset + count]
  shift, first, second = _FMIX64
  combined ^= combined >> shift
  combined *= first
  combined ^= combined >> shift
  combined *= second
  combined ^= combined >> shift
  return np.unique((combined >> np.uint64(32)).astype(np.uint32))


def _identity(value: int) -> int:
  return value


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

  The signature is the file's MinHash over `shingle_hashes`, little-endian uint32 bytes; computed
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
    digest, language, text = record[0], record[2], record[3]
    hashes = shingle_hashes(text, self._shingle_size)
    if not len(hashes):
      return
    if self._permutations is None:
      self.setup()
    # The shingles come hashed: datasketch applies its permutations (affine32 mixes its input first).
    minhash = datasketch.MinHash(num_perm=self._num_perm, seed=NEAR_DUP_SEED, scheme=_MINHASH_SCHEME,
                                 hashfunc=_identity, permutations=self._permutations)
    for start in range(0, len(hashes), _MINHASH_BATCH):
      minhash.update_batch(hashes[start:start + _MINHASH_BATCH].tolist())
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
  """(digest, {"record": [record], "near": [None, ...]}) -> the record, or ("near_duplicate", language,
  bytes) on `skipped`."""

  def process(self, element: tuple) -> Iterator:
    _, grouped = element
    is_near_duplicate = any(True for _ in grouped["near"])
    for record in grouped["record"]:
      if is_near_duplicate:
        yield beam.pvalue.TaggedOutput(SKIPPED, ("near_duplicate", record[2], len(record[3].encode("utf-8"))))
      else:
        yield record


def remove_near_duplicates(records_in: beam.PCollection, threshold: float) -> beam.pvalue.DoOutputsTuple:
  """The near-deduplication transforms on exactly de-duplicated records (digest, relpath, language, text, license):
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
          | "DropNear" >> beam.ParDo(DropNearDuplicates()).with_outputs(SKIPPED, main="kept"))
