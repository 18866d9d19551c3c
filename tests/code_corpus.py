"""A small two-language corpus with a trained vocabulary, shared by the data and objective tests."""

import os

from data import records, tasks
from data.vocab import get_vocabulary, train_vocabulary

_WORDS = [a + b for a in ("get", "set", "load", "parse", "build", "read", "emit", "scan", "sort", "find")
          for b in ("Name", "Value", "Token", "Tree", "Node", "Index", "Count", "Path", "Item", "Block")]
PY = ["".join(f"def {_WORDS[(i * 7 + j) % 100]}_{j}(x, y):\n    return x * {j} + y  # {_WORDS[j]}\n\n"
              for j in range(1 + i % 5)) for i in range(40)]
GO = ["package main\n\n" + "".join(f"func {_WORDS[(i * 3 + j) % 100]}{j}(n int) int {{\n\treturn n + {i * j}\n}}\n"
                                   for j in range(3)) for i in range(25)]
LONG_PY = "".join(f"value_{i} = {i} * 2  # line {i}\n" for i in range(300))


def build(root: str, extra_ids: int = 100):
  """Writes python (PY + LONG_PY) and go (GO) in two train shards each, one validation file each, and
  trains a 500-id vocabulary; returns (vocab_path, seqio vocabulary)."""
  for language, texts in (("python", PY + [LONG_PY]), ("go", GO)):
    train = [records.encode(t, f"{language}/{i}") for i, t in enumerate(texts)]
    records.write_shard(os.path.join(root, records.shard_name(language, "train", 0, 2)), train[::2])
    records.write_shard(os.path.join(root, records.shard_name(language, "train", 1, 2)), train[1::2])
    for shard in range(2):
      records.write_shard(os.path.join(root, records.shard_name(language, "validation", shard, 2)),
                          train[:1] if shard == 0 else [])
  vocab_path = train_vocabulary(root, vocab_size=500, output=os.path.join(root, "spm.model"), extra_ids=extra_ids)
  return vocab_path, get_vocabulary(vocab_path, extra_ids=extra_ids)


def build_cached(root: str) -> str:
  """`build`, then every task's SeqIO cache: a corpus train.py can run on. Returns `root`."""
  vocab_path, _ = build(root)
  tasks.cache_tasks(root, vocab_path)
  return root
