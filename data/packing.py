"""How many examples and packed rows a language's documents make: what mixture rates and budgets need.

A task cuts each cached document (`[code]` file `[eod]`, n tokens) into consecutive chunks: plain
tasks into chunks of the sequence length L, `_ul2` tasks into chunks whose raw length depends on an
objective drawn per chunk (objectives/ul2/, described by objectives/chunking.py); the last chunk takes what is left. SeqIO mixes tasks
per example (chunk) and then packs examples into rows of L tokens.

- `examples_per_pass`: the expected number of examples one pass over the documents makes, exactly,
  from the cache's histogram of document lengths (a renewal count: f(n) = 1 + sum_j p_j f(n - r_j)).
- `example_lengths`: a sample of the tokens an example takes in a row (raw chunk plus the sentinels
  and mode token an objective adds), for the packing simulation.
- `rows_for`: the rows SeqIO's packing makes of a stream of examples (`seqio.utils.trim_and_pack_dataset`
  without custom ops: next-fit within consecutive batches of L examples, each batch's last row flushed).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

# The description of a task's chunking lives with the objectives that make it (objectives/ul2/
# builds one); it is re-exported here, where the counting that reads it is.
from objectives.chunking import Chunking, plain_chunking

# (document length in tokens, number of documents of that length), as the SeqIO cache pass counts them.
LengthHistogram = Sequence[tuple[int, int]]


def _chunks_needed(max_length: int, chunking: Chunking) -> np.ndarray:
  """f[n]: the expected number of chunks that cover a document of n tokens, for n = 0..max_length."""
  raw = np.asarray(chunking.raw_lengths)
  p = chunking.probabilities
  f = np.zeros(max_length + 1)
  step = int(raw.min())
  # f[n] needs f at n - raw_j <= n - step only: a block of `step` lengths is computed at once.
  for start in range(1, max_length + 1, step):
    n = np.arange(start, min(start + step, max_length + 1))
    f[n] = 1.0 + sum(p_j * f[np.maximum(n - r_j, 0)] for r_j, p_j in zip(raw, p))
  return f


def examples_per_pass(lengths: LengthHistogram, chunking: Chunking) -> float:
  """The expected number of examples one pass over the documents makes (exact: no sampling)."""
  if not lengths:
    return 0.0
  f = _chunks_needed(max(n for n, _ in lengths), chunking)
  return float(sum(count * f[n] for n, count in lengths))


def example_lengths(lengths: LengthHistogram, chunking: Chunking, rng: np.random.Generator,
                    num_documents: int = 2048) -> np.ndarray:
  """Row lengths of the examples of `num_documents` documents drawn from the histogram (all their
  chunks: long documents give proportionally more examples, as they do in a pass)."""
  sizes_of, counts = np.array([n for n, _ in lengths]), np.array([c for _, c in lengths], np.float64)
  documents = rng.choice(sizes_of, size=num_documents, p=counts / counts.sum())
  raw = np.asarray(chunking.raw_lengths)
  p = chunking.probabilities
  objectives, sizes = [], []
  for n in documents:
    drawn = rng.choice(len(raw), size=int(n) // int(raw.min()) + 1, p=p)
    ends = np.cumsum(raw[drawn])
    count = int(np.searchsorted(ends, n)) + 1  # chunks until the document is covered
    starts = ends[:count] - raw[drawn[:count]]
    objectives.append(drawn[:count])
    sizes.append(np.minimum(ends[:count], n) - starts)
  objectives, sizes = np.concatenate(objectives), np.concatenate(sizes)
  if chunking.extra_tokens is None:
    return sizes
  extra = np.zeros_like(sizes)
  for j in range(len(raw)):
    chosen = objectives == j
    extra[chosen] = chunking.extra_tokens(j, sizes[chosen])
  return sizes + extra


def rows_for(row_lengths: Sequence[int], sequence_length: int) -> int:
  """The rows SeqIO packs `row_lengths` (in stream order) into: next-fit within batches of
  sequence_length examples, each batch's open row written out at its end."""
  rows = 0
  for start in range(0, len(row_lengths), sequence_length):
    used = 0
    for length in row_lengths[start:start + sequence_length]:
      if used and used + length > sequence_length:
        rows, used = rows + 1, 0
      used += length
    rows += 1
  return rows


def examples_per_row(pools: Sequence[np.ndarray], example_shares: Sequence[float], sequence_length: int,
                     num_examples: int = 20_000, seed: int = 0) -> float:
  """Examples per packed row when tasks are picked per example at `example_shares` and each example
  takes a row length drawn from its task's pool (`example_lengths`). Seeded: the same on every host."""
  # The same uniforms for any shares (common random numbers): a small change of the shares changes the
  # task of a few examples only, so the planner's fixed-point iteration on the budget settles.
  rng = np.random.default_rng(seed)
  pick, position = rng.random(num_examples), rng.random(num_examples)
  shares = np.asarray(example_shares, np.float64)
  tasks = np.minimum(np.searchsorted(np.cumsum(shares / shares.sum()), pick, side="right"), len(pools) - 1)
  stream = np.empty(num_examples, np.int64)
  for i, pool in enumerate(pools):
    chosen = tasks == i
    stream[chosen] = pool[(position[chosen] * len(pool)).astype(np.int64)]
  return num_examples / rows_for(stream.tolist(), sequence_length)
