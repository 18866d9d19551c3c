"""Batches from a registered SeqIO task or mixture, sharded over hosts, resumable by batch count."""

from __future__ import annotations

from typing import Iterator, Mapping

import jax
import numpy as np
import tensorflow as tf

from data import stream


def _dataset(name: str, sequence_length: int, batch_size: int, split: str, shuffle: bool, seed: int | None,
             num_epochs: int | None, use_cached: bool = True) -> tf.data.Dataset:
  dataset = stream.examples(name, sequence_length, split, shuffle, seed, num_epochs, use_cached)
  return stream.packed_rows(dataset, name, sequence_length).batch(batch_size, drop_remainder=num_epochs is None)


def train_batches(name: str, sequence_length: int, global_batch_size: int, seed: int,
                  start_batch: int = 0) -> Iterator[Mapping[str, np.ndarray]]:
  """This host's share of each global batch, endlessly; `start_batch` resumes where a run stopped.

  The stream is a pure function of (name, lengths, batch size, seed, host), so skipping the batches
  already consumed reproduces exactly the batches an uninterrupted run would have seen.
  """
  if global_batch_size % jax.process_count():
    raise ValueError(f"batch size {global_batch_size} does not divide over {jax.process_count()} hosts")
  per_host = global_batch_size // jax.process_count()
  dataset = _dataset(name, sequence_length, per_host, "train", shuffle=True, seed=seed, num_epochs=None)
  return dataset.skip(start_batch).prefetch(2).as_numpy_iterator()


def validation_batches(name: str, sequence_length: int, batch_size: int, max_batches: int
                       ) -> list[Mapping[str, np.ndarray]]:
  """Up to max_batches of the validation split, in order (the same every time)."""
  # Uncached: validation sets are small, and SeqIO's cache of an empty split has no usable info.
  dataset = _dataset(name, sequence_length, batch_size, "validation", shuffle=False, seed=0, num_epochs=1,
                     use_cached=False)
  batches = []
  for batch in dataset.take(max_batches).as_numpy_iterator():
    missing = batch_size - len(batch["decoder_input_tokens"])
    if missing:  # pad the last batch with empty rows (zero loss weight)
      batch = {k: np.concatenate([v, np.zeros((missing,) + v.shape[1:], v.dtype)]) for k, v in batch.items()}
    batches.append(batch)
  return batches
