"""A small two-language corpus with a trained vocabulary, shared by the data and objective tests."""

import os
import shutil

import scratch
import storage
from data import records, tasks
from data.vocab import get_vocabulary, train_vocabulary

_WORDS = [a + b for a in ("get", "set", "load", "parse", "build", "read", "emit", "scan", "sort", "find")
          for b in ("Name", "Value", "Token", "Tree", "Node", "Index", "Count", "Path", "Item", "Block")]
PY = ["".join(f"def {_WORDS[(i * 7 + j) % 100]}_{j}(x, y):\n    return x * {j} + y  # {_WORDS[j]}\n\n"
              for j in range(1 + i % 5)) for i in range(40)]
GO = ["package main\n\n" + "".join(f"func {_WORDS[(i * 3 + j) % 100]}{j}(n int) int {{\n\treturn n + {i * j}\n}}\n"
                                   for j in range(3)) for i in range(25)]
LONG_PY = "".join(f"value_{i} = {i} * 2  # line {i}\n" for i in range(300))


# The corpus is the same bytes every time, and training its vocabulary and caching its tasks (a Beam
# pipeline) take seconds that dozens of test modules would repeat: each pytest worker builds each kind
# once, in a folder of its own, and a local `root` gets a copy. Remote roots (gs://, ram://) are
# still written through storage, since writing there is what their tests check.
_TEMPLATES: dict[tuple[str, int], str] = {}


def _from_template(kind: str, extra_ids: int, root: str, make) -> None:
  key = (kind, extra_ids)
  if key not in _TEMPLATES:
    folder = scratch.folder(f"corpus-{kind}-{extra_ids}")
    make(folder)
    _TEMPLATES[key] = folder
  shutil.copytree(_TEMPLATES[key], root, dirs_exist_ok=True)


def build(root: str, extra_ids: int = 100):
  """Writes python (PY + LONG_PY) and go (GO) in two train shards each, one validation file each, and
  trains a 500-id vocabulary; returns (vocab_path, seqio vocabulary)."""
  if not storage.is_url(root):
    _from_template("vocab", extra_ids, root, lambda folder: _build(folder, extra_ids))
    vocab_path = os.path.join(root, "spm.model")
    return vocab_path, get_vocabulary(vocab_path, extra_ids=extra_ids)
  return _build(root, extra_ids)


def _build(root: str, extra_ids: int):
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
  def make(folder):
    vocab_path, _ = build(folder)
    tasks.cache_tasks(folder, vocab_path)

  if not storage.is_url(root):
    _from_template("cached", 100, root, make)
  else:
    make(root)
  return root
