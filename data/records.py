"""The on-disk corpus format shared by the corpus builder, the vocabulary trainer and the SeqIO tasks.

CORPUS_DIR/
  stats.json                                   per language and split: files, bytes, characters; skips
  {language}/{split}-{i:05d}-of-{n:05d}.tfrecord   tf.train.Example records, sorted by content hash

Each record has `text` (the file's UTF-8 bytes, unchanged unless PII redaction replaced some), `path`
(relative to its source root, or "repo/path" of a dataset shard's row) and `license` (the SPDX
expression its licence verdict found, "" for none); SeqIO's TFExampleDataSource reads `text`.
"""

from __future__ import annotations

from typing import Iterator

import storage

SPLITS = ("train", "validation")
TEXT, PATH, LICENSE = "text", "path", "license"


def shard_name(language: str, split: str, index: int, num_shards: int) -> str:
  return storage.join(language, f"{split}-{index:05d}-of-{num_shards:05d}.tfrecord")


def shard_pattern(corpus_dir: str, language: str, split: str) -> str:
  """A glob of one language's shards of one split (what a SeqIO data source reads)."""
  return storage.join(corpus_dir, language, f"{split}-*-of-*.tfrecord")


def shard_files(corpus_dir: str, language: str, split: str) -> list[str]:
  return storage.glob(shard_pattern(corpus_dir, language, split))


def encode(text: str, path: str, license: str = "") -> bytes:
  """One serialized tf.train.Example."""
  import tensorflow as tf  # heavy: only where records are made

  def value(string: str):
    return tf.train.Feature(bytes_list=tf.train.BytesList(value=[string.encode("utf-8")]))

  feature = {TEXT: value(text), PATH: value(path), LICENSE: value(license)}
  # Features are a protobuf map, written in an order that varies between processes unless sorted:
  # `deterministic=True` makes a record's bytes depend on its content alone.
  return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString(deterministic=True)


def write_shard(filename: str, records: list[bytes]) -> None:
  """Writes serialized records to a TFRecord file atomically (a temporary name, then a rename).

  `filename` may be local or any URL tf.io.gfile knows (gs://, s3:// with tensorflow-io, hdfs://,
  ram://): where a rename is a copy (object stores), the final name still appears all at once.
  """
  import tensorflow as tf

  storage.makedirs(storage.dirname(filename))
  tmp = filename + ".tmp"
  with tf.io.TFRecordWriter(tmp) as writer:
    for record in records:
      writer.write(record)
  storage.rename(tmp, filename)


def read_texts(corpus_dir: str, language: str, split: str) -> Iterator[tuple[str, str]]:
  """(path, text) of every file of one language and split, in shard order."""
  import tensorflow as tf

  spec = {TEXT: tf.io.FixedLenFeature([], tf.string), PATH: tf.io.FixedLenFeature([], tf.string)}
  for filename in shard_files(corpus_dir, language, split):
    for raw in tf.data.TFRecordDataset(filename).as_numpy_iterator():
      example = tf.io.parse_single_example(raw, spec)
      yield example[PATH].numpy().decode("utf-8"), example[TEXT].numpy().decode("utf-8")
