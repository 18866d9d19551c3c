"""Batches from a registered SeqIO task or mixture, sharded over hosts. Training's stream resumes from a
checkpoint of its iterator (or, failing that, by replaying the batches consumed)."""

from __future__ import annotations

from typing import Iterator, Mapping

import jax
import numpy as np
import tensorflow as tf

from data import stream


def _dataset(source: stream.Stream, sequence_length: int, batch_size: int, split: str, shuffle: bool, seed: int | None,
             num_epochs: int | None, use_cached: bool = True) -> tf.data.Dataset:
  dataset = stream.examples(source, sequence_length, split, shuffle, seed, num_epochs, use_cached)
  return stream.packed_rows(dataset, source, sequence_length).batch(batch_size, drop_remainder=num_epochs is None)


class TrainBatches:
  """This host's share of each global batch, endlessly, as numpy arrays.

  The stream is a pure function of (name, lengths, batch size, seed, host), so a resumed run sees
  exactly the batches an uninterrupted run would have. Two ways to get back to batch n: restore
  `iterator` from a checkpoint of it (constant time; tf.train.Checkpoint saves shuffle buffers,
  mixture sampling, packing and prefetch state alike) or `replay(n)`, which recomputes and drops the n
  batches (time grows with n: the fallback). Hence `iter(dataset)`: as_numpy_iterator's iterators
  cannot be checkpointed.
  """

  def __init__(self, name: str, sequence_length: int, global_batch_size: int, seed: int):
    if global_batch_size % jax.process_count():
      raise ValueError(f"batch size {global_batch_size} does not divide over {jax.process_count()} hosts")
    per_host = global_batch_size // jax.process_count()
    source = stream.resolve(name)  # once: a replay builds the dataset again from it
    self._make = lambda: _dataset(source, sequence_length, per_host, "train", shuffle=True, seed=seed,
                                  num_epochs=None).prefetch(2)
    # What a saved iterator must match to be restored here (plus `position`).
    self.pipeline = {"name": name, "sequence_length": sequence_length, "host_batch_size": per_host, "seed": seed,
                     "host": jax.process_index(), "hosts": jax.process_count()}
    self.iterator = iter(self._make())
    self.position = 0  # batches consumed

  def __iter__(self) -> Iterator[Mapping[str, np.ndarray]]:
    return self

  def __next__(self) -> Mapping[str, np.ndarray]:
    batch = next(self.iterator)
    self.position += 1
    return {k: v.numpy() for k, v in batch.items()}

  def replay(self, batches: int) -> None:
    """From the start again, `batches` batches computed and dropped. The dataset is built anew: a
    second iterator of the same tf.data.Dataset would shuffle differently (reshuffle_each_iteration)."""
    self.iterator = iter(self._make())
    for _ in range(batches):  # not dataset.skip(n): this must stay the pipeline later checkpoints restore into
      next(self.iterator)
    self.position = batches


def validation_batches(name: str, sequence_length: int, batch_size: int, max_batches: int
                       ) -> list[Mapping[str, np.ndarray]]:
  """Up to max_batches of the validation split, in order (the same every time)."""
  # Uncached: validation sets are small, and SeqIO's cache of an empty split has no usable info.
  dataset = _dataset(stream.resolve(name), sequence_length, batch_size, "validation", shuffle=False, seed=0, num_epochs=1,
                     use_cached=False)
  batches = []
  for batch in dataset.take(max_batches).as_numpy_iterator():
    missing = batch_size - len(batch["decoder_input_tokens"])
    if missing:  # pad the last batch with empty rows (zero loss weight)
      batch = {k: np.concatenate([v, np.zeros((missing,) + v.shape[1:], v.dtype)]) for k, v in batch.items()}
    batches.append(batch)
  return batches
