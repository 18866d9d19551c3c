"""How an objective cuts documents into examples: the description data/packing.py counts with.

A task cuts each document into consecutive chunks; the objective of each chunk is drawn at a rate and
decides the chunk's raw length and what its example adds in a row (sentinels, a mode token). Plain
language tasks are the one-objective case: chunks of the sequence length, nothing added.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import numpy as np


@dataclasses.dataclass(frozen=True)
class Chunking:
  """How a task cuts documents into examples: objective j (drawn with probability rates[j]) takes a raw
  chunk of up to raw_lengths[j] tokens, and its example takes extra_tokens(j, sizes) more in a row."""
  raw_lengths: tuple[int, ...]
  rates: tuple[float, ...]
  extra_tokens: Callable[[int, np.ndarray], np.ndarray] | None = None

  def __post_init__(self):
    if len(self.raw_lengths) != len(self.rates) or not self.raw_lengths:
      raise ValueError(f"one rate per raw length, got {self.raw_lengths} and {self.rates}")
    if min(self.raw_lengths) < 1 or min(self.rates) < 0 or not sum(self.rates) > 0:
      raise ValueError(f"raw lengths must be >= 1 and rates >= 0 with a positive sum: {self}")

  @property
  def probabilities(self) -> np.ndarray:
    rates = np.asarray(self.rates, np.float64)
    return rates / rates.sum()


def plain_chunking(sequence_length: int) -> Chunking:
  """A plain language task: chunks of sequence_length tokens, nothing added."""
  return Chunking((int(sequence_length),), (1.0,))
