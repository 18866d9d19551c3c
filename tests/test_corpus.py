"""The corpus builder on a small tree with every kind of bad file: skips, content, determinism, stats."""

import collections
import hashlib
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import storage

from data import corpus
from data import near_dedup
from data import records

MAX_FILE_BYTES = 4096

# Good files: relative path -> text. Several languages, `.rs.in` and an upper-case `.PY`.
GOOD = {
    "app/main.py": "def main():\n  print('héllo, wörld')\n",
    "app/UPPER.PY": "X = 1\n",
    "app/util.py": "import os\n\n\ndef cwd():\n  return os.getcwd()\n",
    "app/deep/nested/mod.py": "# ünïcödé: 文字\nVALUE = 'π'\n",
    "rust/lib.rs": "pub fn add(a: i32, b: i32) -> i32 { a + b }\n",
    "rust/build.rs.in": "fn generated() -> u8 { 7 }\n",
    "java/Main.java": "class Main { public static void main(String[] a) {} }\n",
    "java/Other.java": "class Other { int x = 3; }\n",
    "go/util.go": "package util\n\nfunc One() int { return 1 }\n",
    "cpp/vec.hpp": "#pragma once\nstruct Vec { float x, y; };\n",
    "cpp/vec.cc": "#include \"vec.hpp\"\nint f() { return 0; }\n",
    "js/index.js": "export const answer = 42;\n",
}
DUPLICATE = "app/zz_copy_of_util.py"  # same bytes as app/util.py, larger path: the copy that goes


def make_tree(root):
  for relpath, text in GOOD.items():
    path = root / relpath
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
  (root / DUPLICATE).write_text(GOOD["app/util.py"], encoding="utf-8")
  (root / "app/compiled.py").write_bytes(b"print(1)\n\x00\x01\x02")  # binary
  (root / "java/Latin.java").write_bytes("class Latin { String s = \"caf\u00e9\"; }\n".encode("latin-1"))
  (root / "go/empty.go").write_bytes(b"")
  (root / "app/huge.py").write_text("x = 1\n" * (MAX_FILE_BYTES // 6 + 1), encoding="utf-8")
  (root / "README.md").write_text("# not code\n", encoding="utf-8")
  os.symlink("..", root / "app/loop")  # a directory link to its parent: followed, it would loop
  os.symlink("main.py", root / "app/link.py")  # a file link
  # Names that are not UTF-8 (Latin-1 bytes): a file, and a good file in a folder so named.
  with open(os.fsencode(root / "app") + b"/caf\xe9.py", "wb") as f:
    f.write(b"print('latin-1 name')\n")
  os.mkdir(os.fsencode(root / "app") + b"/d\xe9j\xe0")
  with open(os.fsencode(root / "app") + b"/d\xe9j\xe0/ok.py", "wb") as f:
    f.write(b"print('in a latin-1 folder')\n")


EXPECTED_SKIPS = dict(dict.fromkeys(corpus.SKIP_REASONS, 0), symlink=2, not_code=1, undecodable_name=2, empty=1,
                      too_large=1, binary=1, not_utf8=1, duplicate=1)


def read_corpus(corpus_dir):
  """{(language, split): {path: text}} of every record, checking no path repeats."""
  found = collections.defaultdict(dict)
  for language in os.listdir(corpus_dir):
    if not os.path.isdir(os.path.join(corpus_dir, language)):
      continue
    for split in records.SPLITS:
      for path, text in records.read_texts(str(corpus_dir), language, split):
        assert path not in found[language, split]
        found[language, split][path] = text
  return found


def file_bytes(directory):
  result = {}
  for dirpath, _, names in os.walk(directory):
    for name in names:
      path = os.path.join(dirpath, name)
      result[os.path.relpath(path, directory)] = open(path, "rb").read()
  return result


@pytest.fixture(scope="module")
def built(tmp_path_factory):
  """The fixture tree built twice with validation_share 0.5: in this process, and by the CLI in another.

  A second process matters: protobuf map order varies between processes, not within one.
  """
  source = tmp_path_factory.mktemp("trees") / "proj"
  make_tree(source)
  first, second = tmp_path_factory.mktemp("out1"), tmp_path_factory.mktemp("out2")
  options = dict(validation_share=0.5, num_shards=2, max_file_bytes=MAX_FILE_BYTES)
  stats = corpus.build_corpus([str(source)], str(first), **options)
  flags = [f"--{name}={value}" for name, value in options.items()]
  subprocess.run([sys.executable, "-m", "data.corpus", "--source", str(source), "--output", str(second),
                  *flags], check=True, capture_output=True, cwd=os.path.dirname(os.path.dirname(__file__)))
  with open(second / "stats.json") as f:
    second_stats = json.load(f)
  return source, [first, second], [stats, second_stats]


def test_bad_files_are_skipped_and_counted(built):
  _, _, stats = built
  assert stats[0]["skipped"] == EXPECTED_SKIPS


def test_every_good_file_present_exactly_once(built):
  _, (output, _), _ = built
  found = read_corpus(output)
  everything = {}
  for (language, split), texts in found.items():
    for path, text in texts.items():
      assert path not in everything, f"{path} in two splits"
      everything[path] = text
  # Paths are relative to the source root, prefixed with its basename.
  assert everything == {f"proj/{relpath}": text for relpath, text in GOOD.items()}
  assert set(found["rust", "train"]) | set(found["rust", "validation"]) == {"proj/rust/lib.rs",
                                                                           "proj/rust/build.rs.in"}
  assert "proj/app/UPPER.PY" in set(found["python", "train"]) | set(found["python", "validation"])


def test_build_is_byte_identical(built):
  _, (first, second), stats = built
  assert stats[0] == stats[1]
  a, b = file_bytes(first), file_bytes(second)
  assert sorted(a) == sorted(b)
  assert "stats.json" in a
  assert not any(name.endswith(".tmp") or name.startswith(".") for name in a)
  for name in a:
    assert a[name] == b[name], name


def test_every_shard_written_even_empty(built):
  _, (output, _), stats = built
  for language in stats[0]["languages"]:
    for split in records.SPLITS:
      assert [os.path.basename(f) for f in records.shard_files(str(output), language, split)] == [
          f"{split}-00000-of-00002.tfrecord", f"{split}-00001-of-00002.tfrecord"]


def test_splits_disjoint_and_validation_nonempty(built):
  _, (output, _), _ = built
  found = read_corpus(output)
  train = {path for (_, split), texts in found.items() if split == "train" for path in texts}
  validation = {path for (_, split), texts in found.items() if split == "validation" for path in texts}
  assert train and validation
  assert not train & validation


def test_stats_match_records(built):
  _, (output, _), stats = built
  found = read_corpus(output)
  languages = {language for language, _ in found}
  assert set(stats[0]["languages"]) == languages == {"python", "rust", "java", "go", "cpp", "javascript"}
  for language in languages:
    for split in records.SPLITS:
      texts = list(found[language, split].values())
      assert stats[0]["languages"][language][split] == {
          "files": len(texts),
          "bytes": sum(len(t.encode("utf-8")) for t in texts),
          "characters": sum(len(t) for t in texts)}
  options = stats[0]["options"]
  assert {key: options[key] for key in (
      "validation_share", "num_shards", "max_file_bytes", "max_files_per_language", "near_dedup",
      "near_dup_threshold", "near_dup_num_perm", "near_dup_shingle_size", "shards")} == {
          "validation_share": 0.5, "num_shards": 2, "max_file_bytes": MAX_FILE_BYTES,
          "max_files_per_language": None, "near_dedup": True, "near_dup_threshold": 0.7,
          "near_dup_num_perm": 256, "near_dup_shingle_size": 5, "shards": 0}
  assert options["license_filter"] and options["quality"] and options["decontaminate"]
  assert not options["pii"]
  on_disk = (output / "stats.json").read_text()
  assert str(output) not in on_disk and "proj" not in on_disk  # no absolute paths


def test_each_shard_sorted_by_content_hash(built):

  import tensorflow as tf

  _, (output, _), _ = built
  spec = {records.TEXT: tf.io.FixedLenFeature([], tf.string)}
  for shard in sorted((output / "python").iterdir()):
    texts = [tf.io.parse_single_example(raw, spec)[records.TEXT].numpy()
             for raw in tf.data.TFRecordDataset(str(shard)).as_numpy_iterator()]
    digests = [hashlib.sha256(text).hexdigest() for text in texts]
    assert digests == sorted(digests)


def test_tfrecord_bytes_depend_only_on_records(tmp_path):
  rows = [records.encode("a = 1\n", "x/a.py"), records.encode("ü\n", "x/b.py")]
  records.write_shard(str(tmp_path / "one" / "s.tfrecord"), rows)
  records.write_shard(str(tmp_path / "two" / "s.tfrecord"), list(rows))
  assert (tmp_path / "one" / "s.tfrecord").read_bytes() == (tmp_path / "two" / "s.tfrecord").read_bytes()


def test_encoded_records_are_canonical():
  # Sorted map keys: "path" is always written before "text", in every process.
  encoded = records.encode("x = 1\n", "proj/a.py")
  assert encoded.index(b"path") < encoded.index(b"text")


def test_rebuild_with_other_num_shards_removes_stale(built, tmp_path, capsys):
  source, _, _ = built
  output = tmp_path / "corpus"
  corpus.main(["--source", str(source), "--output", str(output), "--num_shards", "3",
               "--max_file_bytes", str(MAX_FILE_BYTES), "--runner", "DirectRunner"])
  stats = corpus.main(["--source", str(source), "--output", str(output), "--num_shards", "1",
                       "--max_file_bytes", str(MAX_FILE_BYTES), "--validation_share", "0"])
  out = capsys.readouterr().out
  assert "removed stale shard" in out and "python" in out and "total" in out
  names = sorted(file_bytes(output))
  expected = sorted([os.path.join(language, f"{split}-00000-of-00001.tfrecord")
                     for language in stats["languages"] for split in records.SPLITS]
                    + ["stats.json", corpus.PROBLEMS_FILE, corpus.DECONTAMINATED_FILE])
  assert names == expected
  assert sum(s["validation"]["files"] for s in stats["languages"].values()) == 0


def test_a_second_build_on_the_same_output_is_refused_and_touches_nothing(built, tmp_path, capsys):
  source, _, _ = built
  output = tmp_path / "corpus"
  args = ["--source", str(source), "--output", str(output), "--num_shards", "1", "--max_file_bytes", str(MAX_FILE_BYTES)]
  corpus.main(args)
  finished = file_bytes(output)
  assert "stats.json" in finished and not (output / f"{corpus.LOCK_NAME}.lock").exists()  # released at the end
  with storage.exclusive_output(str(output / corpus.LOCK_NAME), "data.corpus (the first build)"):
    with pytest.raises(SystemExit) as exit_info:
      corpus.main([*args[:-4], "--num_shards", "3"])
  assert exit_info.value.code == 2
  error = capsys.readouterr().err
  assert f"--output {output}: the corpus {output} is being written by another run (data.corpus (the first build), pid" in error
  assert file_bytes(output) == finished  # the first build's stats.json and shards are untouched


def test_an_output_that_cannot_be_written_is_refused_before_work(built, tmp_path, capsys):
  source, _, _ = built
  (tmp_path / "a_file").write_text("not a folder")
  with pytest.raises(SystemExit) as exit_info:
    corpus.main(["--source", str(source), "--output", str(tmp_path / "a_file" / "corpus")])
  assert exit_info.value.code == 2
  error = capsys.readouterr().err
  assert f"--output {tmp_path / 'a_file' / 'corpus'}: cannot be written" in error and "Traceback" not in error


def test_two_sources_and_cap(tmp_path):
  for name in ("one", "two"):
    for i in range(3):
      (tmp_path / name / "src").mkdir(parents=True, exist_ok=True)
      (tmp_path / name / "src" / f"f{i}.py").write_text(f"{name} = {i}\n")
  (tmp_path / "one" / "src" / "vendored").mkdir()
  (tmp_path / "one" / "src" / "vendored" / "v.py").write_text("vendored = True\n")
  # Both roots are called "src": labels grow by a parent so their paths cannot collide.
  roots = [str(tmp_path / "one" / "src"), str(tmp_path / "two" / "src")]
  stats = corpus.build_corpus(roots, str(tmp_path / "out"), validation_share=0.0, num_shards=1,
                              max_files_per_language=4, exclude=[str(tmp_path / "one" / "src" / "vendored")])
  assert stats["skipped"]["capped"] == 2
  paths = dict(records.read_texts(str(tmp_path / "out"), "python", "train"))
  assert len(paths) == 4 and all(p.startswith(("one/src/", "two/src/")) for p in paths)


def test_missing_source_is_a_clear_error(tmp_path, capsys):
  missing = str(tmp_path / "no_such_dir")
  with pytest.raises(SystemExit) as exit_info:
    corpus.main(["--source", missing, "--output", str(tmp_path / "out")])
  assert exit_info.value.code == 2
  assert missing in capsys.readouterr().err
  with pytest.raises(FileNotFoundError, match="no_such_dir"):
    corpus.build_corpus([missing], str(tmp_path / "out"))


def test_source_labels_disambiguate():
  labels = corpus.source_labels(["/usr/lib/go-1.22/src", "/usr/local/go/src", "/a/b", "/x/a/b", "/"])
  assert labels == {"/usr/lib/go-1.22/src": "go-1.22/src", "/usr/local/go/src": "go/src", "/a/b": "a/b",
                    "/x/a/b": "x/a/b", "/": "root"}


def test_placement_is_deterministic_and_balanced():
  digests = [hashlib.sha256(str(i).encode()).hexdigest() for i in range(2000)]
  placed = [corpus.placement(d, 0.25, 4) for d in digests]
  assert placed == [corpus.placement(d, 0.25, 4) for d in digests]
  share = sum(split == "validation" for split, _ in placed) / len(placed)
  assert 0.2 < share < 0.3
  assert collections.Counter(shard for _, shard in placed).keys() == {0, 1, 2, 3}


# ----------------------------------------------------------------------------------------------
# Remote file systems: every path operation goes through tf.io.gfile for a URL. TensorFlow's in-memory
# `ram://` file system stands in for gs:// and friends (walk, stat, read, write, rename all work on it).

def make_tree_at_url(root, write_bytes):
  """The fixture tree without its symlinks (object stores have none), through `write_bytes(relpath, data)`."""
  for relpath, text in GOOD.items():
    write_bytes(relpath, text.encode("utf-8"))
  write_bytes(DUPLICATE, GOOD["app/util.py"].encode("utf-8"))
  write_bytes("app/compiled.py", b"print(1)\n\x00\x01\x02")
  write_bytes("java/Latin.java", "class Latin { String s = \"caf\u00e9\"; }\n".encode("latin-1"))
  write_bytes("go/empty.go", b"")
  write_bytes("app/huge.py", ("x = 1\n" * (MAX_FILE_BYTES // 6 + 1)).encode("utf-8"))
  write_bytes("README.md", b"# not code\n")
  write_bytes("vendored/skip.py", b"skipped = True\n")  # excluded below


def test_url_source_gives_the_same_corpus_as_a_local_one(tmp_path):
  import tensorflow as tf

  url_root = "ram://corpus_test_src/proj"

  def write_url(relpath, data):
    tf.io.gfile.makedirs(os.path.dirname(f"{url_root}/{relpath}"))
    with tf.io.gfile.GFile(f"{url_root}/{relpath}", "wb") as f:
      f.write(data)

  local_root = tmp_path / "src" / "proj"

  def write_local(relpath, data):
    (local_root / relpath).parent.mkdir(parents=True, exist_ok=True)
    (local_root / relpath).write_bytes(data)

  make_tree_at_url(url_root, write_url)
  make_tree_at_url(str(local_root), write_local)
  try:
    options = dict(validation_share=0.5, num_shards=2, max_file_bytes=MAX_FILE_BYTES)
    from_url = corpus.build_corpus([url_root + "/"], str(tmp_path / "from_url"),
                                   exclude=[url_root + "/vendored"], **options)
    from_local = corpus.build_corpus([str(local_root)], str(tmp_path / "from_local"),
                                     exclude=[str(local_root / "vendored")], **options)
  finally:
    tf.io.gfile.rmtree("ram://corpus_test_src")
  assert from_url == from_local
  assert from_url["skipped"] == dict(EXPECTED_SKIPS, symlink=0, undecodable_name=0)  # object stores: no such names
  found = read_corpus(tmp_path / "from_url")
  assert found == read_corpus(tmp_path / "from_local")
  assert {path for texts in found.values() for path in texts} == {f"proj/{relpath}" for relpath in GOOD}
  # Same records, same shards, byte for byte; no manifest or counts left behind.
  assert file_bytes(tmp_path / "from_url") == file_bytes(tmp_path / "from_local")
  assert not any(name.startswith(".") for name in os.listdir(tmp_path / "from_url"))


def test_corpus_written_to_a_url(tmp_path):
  """--output may be a URL too: shards, stats.json and the clean-up of stale shards all go through gfile."""
  import tensorflow as tf

  source = tmp_path / "proj"
  make_tree_at_url(str(source), lambda relpath, data: (
      (source / relpath).parent.mkdir(parents=True, exist_ok=True), (source / relpath).write_bytes(data)))
  # ram:// lists by name prefix: its "java/" would also list "javascript/..." as "java/script" (TF's
  # in-memory file system only; object stores list by "dir/" prefix). No JavaScript here, then.
  (source / "js" / "index.js").unlink()
  output = "ram://corpus_test_out/corpus"
  try:
    corpus.main(["--source", str(source), "--output", output, "--num_shards", "3",
                 "--max_file_bytes", str(MAX_FILE_BYTES)])
    stats = corpus.main(["--source", str(source), "--output", output + "/", "--num_shards", "1",
                         "--max_file_bytes", str(MAX_FILE_BYTES), "--validation_share", "0"])
    written = sorted(os.path.relpath(os.path.join(directory, name), output)
                     for directory, _, names in tf.io.gfile.walk(output) for name in names)
    expected = sorted([os.path.join(language, f"{split}-00000-of-00001.tfrecord")
                       for language in stats["languages"] for split in records.SPLITS]
                    + ["stats.json", corpus.PROBLEMS_FILE, corpus.DECONTAMINATED_FILE])
    assert written == expected
    with tf.io.gfile.GFile(f"{output}/stats.json") as f:
      assert json.load(f) == stats
    spec = {records.TEXT: tf.io.FixedLenFeature([], tf.string), records.PATH: tf.io.FixedLenFeature([], tf.string)}
    texts = {}
    for raw in tf.data.TFRecordDataset(f"{output}/python/train-00000-of-00001.tfrecord").as_numpy_iterator():
      example = tf.io.parse_single_example(raw, spec)
      texts[example[records.PATH].numpy().decode()] = example[records.TEXT].numpy().decode()
    assert texts == {f"proj/{p}": t for p, t in GOOD.items() if p.lower().endswith(".py")} | {
        "proj/vendored/skip.py": "skipped = True\n"}
  finally:
    tf.io.gfile.rmtree("ram://corpus_test_out")


def test_write_shard_to_a_url_reads_back(tmp_path):
  import tensorflow as tf

  rows = [records.encode("a = 1\n", "x/a.py"), records.encode("ü\n", "x/b.py")]
  url = "ram://shard_test/python/train-00000-of-00001.tfrecord"
  try:
    records.write_shard(url, rows)
    records.write_shard(url, rows)  # over an existing shard: the rename overwrites
    assert tf.io.gfile.listdir("ram://shard_test/python") == ["train-00000-of-00001.tfrecord"]  # no .tmp
    assert list(tf.data.TFRecordDataset(url).as_numpy_iterator()) == rows
    # The same bytes as a local shard, which read_texts reads.
    local = tmp_path / records.shard_name("python", "train", 0, 1)
    records.write_shard(str(local), rows)
    with tf.io.gfile.GFile(url, "rb") as f:
      assert f.read() == local.read_bytes()
    assert list(records.read_texts(str(tmp_path), "python", "train")) == [("x/a.py", "a = 1\n"), ("x/b.py", "ü\n")]
  finally:
    tf.io.gfile.rmtree("ram://shard_test")


def test_url_paths_and_labels():
  assert corpus.normalize_path("gs://bucket/crawl/") == "gs://bucket/crawl"
  assert corpus.normalize_path("ram://") == "ram://"
  assert corpus.source_labels(["gs://a/src", "gs://b/src", "gs://bucket"]) == {
      "gs://a/src": "a/src", "gs://b/src": "b/src", "gs://bucket": "bucket"}


def test_missing_url_source_is_a_clear_error(tmp_path, capsys):
  with pytest.raises(SystemExit):
    corpus.main(["--source", "ram://no_such_tree", "--output", str(tmp_path / "out")])
  assert "ram://no_such_tree" in capsys.readouterr().err
  with pytest.raises(FileNotFoundError, match="no_such_tree"):
    corpus.build_corpus(["ram://no_such_tree"], str(tmp_path / "out"))


# ----------------------------------------------------------------------------------------------
# Near-deduplication: realistic files and edited copies of them.

PY_INVENTORY = '''\
"""Inventory bookkeeping for a small shop: load stock from CSV, value it, and plan restocking."""

import csv
import dataclasses
import sys


@dataclasses.dataclass
class Item:
  sku: str
  name: str
  quantity: int
  unit_price: float
  reorder_level: int = 5


def parse_row(row):
  # A row is sku, name, quantity, unit price and an optional reorder level.
  sku, name, quantity, price = row[:4]
  level = int(row[4]) if len(row) > 4 and row[4] else 5
  return Item(sku.strip(), name.strip(), int(quantity), float(price), level)


def load_inventory(path):
  items = {}
  with open(path, newline="") as f:
    for row in csv.reader(f):
      if not row or row[0].startswith("#"):
        continue
      item = parse_row(row)
      if item.sku in items:
        raise ValueError(f"duplicate sku {item.sku} in {path}")
      items[item.sku] = item
  return items


def total_value(items):
  total = 0.0
  for item in items.values():
    total += item.quantity * item.unit_price
  return round(total, 2)


def needs_restock(items):
  low = [item for item in items.values() if item.quantity <= item.reorder_level]
  low.sort(key=lambda item: (item.quantity - item.reorder_level, item.sku))
  return low


def restock_order(items, budget):
  order = []
  remaining = budget
  for item in needs_restock(items):
    wanted = 2 * item.reorder_level - item.quantity
    affordable = int(remaining // item.unit_price) if item.unit_price > 0 else wanted
    count = min(wanted, affordable)
    if count <= 0:
      continue
    order.append((item.sku, count))
    remaining -= count * item.unit_price
  return order, round(budget - remaining, 2)


def report(items, out=sys.stdout):
  width = max((len(item.name) for item in items.values()), default=4)
  for sku in sorted(items):
    item = items[sku]
    flag = " LOW" if item.quantity <= item.reorder_level else ""
    out.write(f"{sku:<8} {item.name:<{width}} {item.quantity:>5} {item.unit_price:>9.2f}{flag}\\n")
  out.write(f"total value: {total_value(items):.2f}\\n")


def main(argv):
  items = load_inventory(argv[1])
  report(items)
  order, cost = restock_order(items, float(argv[2]) if len(argv) > 2 else 500.0)
  for sku, count in order:
    print(f"order {count} x {sku}")
  print(f"restock cost: {cost:.2f}")


if __name__ == "__main__":
  main(sys.argv)
'''
# Its near duplicates: (a) one comment reworded, (b) a local variable renamed everywhere, (c) reformatted.
PY_COMMENT = PY_INVENTORY.replace(
    "  # A row is sku, name, quantity, unit price and an optional reorder level.\n",
    "  # Columns: the SKU, a display name, units in stock, the price per unit, then the reorder level if any.\n")
PY_RENAMED = PY_INVENTORY.replace("remaining", "money_left")
def _reindent(text):
  """2-space indentation made 4-space, runs of blank lines made one, a blank line after each return/continue."""
  out = []
  for line in text.split("\n"):
    stripped = line.lstrip(" ")
    indent = (len(line) - len(stripped)) // 2
    out.append("    " * indent + stripped)
    if stripped.startswith(("return", "continue")):
      out.append("")
  return "\n".join(out).replace("\n\n\n", "\n\n")
PY_REFORMATTED = _reindent(PY_INVENTORY)

# Different files of the same languages, of similar size: all stay.
PY_GRAPH = '''\
"""Small graph algorithms over adjacency dictionaries: traversal, ordering and shortest paths."""

import collections
import heapq


def breadth_first(graph, start):
  seen = {start}
  queue = collections.deque([start])
  order = []
  while queue:
    node = queue.popleft()
    order.append(node)
    for neighbour in graph.get(node, ()):
      if neighbour not in seen:
        seen.add(neighbour)
        queue.append(neighbour)
  return order


def depth_first(graph, start, seen=None):
  seen = set() if seen is None else seen
  seen.add(start)
  result = [start]
  for neighbour in graph.get(start, ()):
    if neighbour not in seen:
      result.extend(depth_first(graph, neighbour, seen))
  return result


def topological_order(graph):
  indegree = collections.Counter()
  for node, targets in graph.items():
    indegree.setdefault(node, 0)
    for target in targets:
      indegree[target] += 1
  ready = sorted(node for node, degree in indegree.items() if degree == 0)
  order = []
  while ready:
    node = ready.pop(0)
    order.append(node)
    for target in graph.get(node, ()):
      indegree[target] -= 1
      if indegree[target] == 0:
        ready.append(target)
    ready.sort()
  if len(order) != len(indegree):
    raise ValueError("the graph has a cycle")
  return order


def shortest_paths(weighted, source):
  distance = {source: 0}
  previous = {}
  heap = [(0, source)]
  while heap:
    cost, node = heapq.heappop(heap)
    if cost > distance.get(node, float("inf")):
      continue
    for target, weight in weighted.get(node, {}).items():
      candidate = cost + weight
      if candidate < distance.get(target, float("inf")):
        distance[target] = candidate
        previous[target] = node
        heapq.heappush(heap, (candidate, target))
  return distance, previous


def path_to(previous, source, target):
  path = [target]
  while path[-1] != source:
    if path[-1] not in previous:
      return None
    path.append(previous[path[-1]])
  return path[::-1]


def connected_components(graph):
  undirected = collections.defaultdict(set)
  for node, targets in graph.items():
    undirected[node]
    for target in targets:
      undirected[node].add(target)
      undirected[target].add(node)
  components, seen = [], set()
  for node in sorted(undirected):
    if node not in seen:
      component = depth_first(undirected, node, seen)
      components.append(sorted(component))
  return components
'''

PY_TEXTSTATS = '''\
"""Word and sentence statistics for plain-text documents, as used by the readability report."""

import math
import re
import string

WORD = re.compile(r"[A-Za-z']+")
SENTENCE_END = re.compile(r"[.!?]+\\s+")
VOWELS = set("aeiouy")


def words(text):
  return [w.lower().strip("'") for w in WORD.findall(text) if w.strip("'")]


def sentences(text):
  parts = [p.strip() for p in SENTENCE_END.split(text)]
  return [p for p in parts if p]


def syllables(word):
  word = word.lower()
  count, previous_vowel = 0, False
  for ch in word:
    vowel = ch in VOWELS
    if vowel and not previous_vowel:
      count += 1
    previous_vowel = vowel
  if word.endswith("e") and count > 1:
    count -= 1
  return max(count, 1)


def frequencies(text, stopwords=frozenset()):
  counts = {}
  for word in words(text):
    if word in stopwords:
      continue
    counts[word] = counts.get(word, 0) + 1
  return counts


def top_words(text, n=10, stopwords=frozenset()):
  counts = frequencies(text, stopwords)
  ranked = sorted(counts.items(), key=lambda pair: (-pair[1], pair[0]))
  return ranked[:n]


def flesch_reading_ease(text):
  all_words = words(text)
  if not all_words:
    return 0.0
  n_sentences = max(len(sentences(text)), 1)
  n_syllables = sum(syllables(w) for w in all_words)
  return 206.835 - 1.015 * len(all_words) / n_sentences - 84.6 * n_syllables / len(all_words)


def entropy(text):
  letters = [c for c in text.lower() if c in string.ascii_lowercase]
  if not letters:
    return 0.0
  total = len(letters)
  counts = {c: letters.count(c) for c in set(letters)}
  return -sum(k / total * math.log2(k / total) for k in counts.values())


def summary(text):
  return {
      "words": len(words(text)),
      "sentences": len(sentences(text)),
      "reading_ease": round(flesch_reading_ease(text), 1),
      "letter_entropy": round(entropy(text), 3),
      "top": top_words(text, 5),
  }


def compare(first, second):
  a, b = set(words(first)), set(words(second))
  if not a and not b:
    return 1.0
  return len(a & b) / len(a | b)
'''

GO_LRU = '''\
// Package cache implements a fixed-size least-recently-used cache.
package cache

import (
	"container/list"
	"sync"
)

type entry struct {
	key   string
	value []byte
}

// LRU is safe for concurrent use.
type LRU struct {
	mu       sync.Mutex
	capacity int
	order    *list.List
	items    map[string]*list.Element
	hits     int
	misses   int
}

func New(capacity int) *LRU {
	if capacity < 1 {
		capacity = 1
	}
	return &LRU{capacity: capacity, order: list.New(), items: make(map[string]*list.Element)}
}

func (c *LRU) Get(key string) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	element, ok := c.items[key]
	if !ok {
		c.misses++
		return nil, false
	}
	c.hits++
	c.order.MoveToFront(element)
	return element.Value.(*entry).value, true
}

func (c *LRU) Put(key string, value []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if element, ok := c.items[key]; ok {
		element.Value.(*entry).value = value
		c.order.MoveToFront(element)
		return
	}
	c.items[key] = c.order.PushFront(&entry{key: key, value: value})
	for c.order.Len() > c.capacity {
		oldest := c.order.Back()
		c.order.Remove(oldest)
		delete(c.items, oldest.Value.(*entry).key)
	}
}

func (c *LRU) Remove(key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	element, ok := c.items[key]
	if ok {
		c.order.Remove(element)
		delete(c.items, key)
	}
	return ok
}

func (c *LRU) Stats() (hits, misses, size int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hits, c.misses, c.order.Len()
}
'''
GO_COMMENT = GO_LRU.replace("// LRU is safe for concurrent use.", "// LRU guards its state with a mutex, so goroutines may share one.")
GO_RENAMED = GO_LRU.replace("element", "elem")  # a local of Get, Put and Remove
GO_REFORMATTED = GO_LRU.replace("\t", "    ").replace("\n\n", "\n\n\n")  # spaces for tabs, more blank lines

GO_TOKENS = '''\
// Package ratelimit hands out tokens at a steady rate with a bounded burst.
package ratelimit

import (
	"errors"
	"time"
)

var ErrTooMany = errors.New("ratelimit: request exceeds burst")

type Clock func() time.Time

type Bucket struct {
	rate     float64
	burst    float64
	tokens   float64
	last     time.Time
	now      Clock
}

func NewBucket(perSecond float64, burst int, now Clock) *Bucket {
	if now == nil {
		now = time.Now
	}
	return &Bucket{rate: perSecond, burst: float64(burst), tokens: float64(burst), last: now(), now: now}
}

func (b *Bucket) refill() {
	t := b.now()
	elapsed := t.Sub(b.last).Seconds()
	if elapsed > 0 {
		b.tokens += elapsed * b.rate
		if b.tokens > b.burst {
			b.tokens = b.burst
		}
		b.last = t
	}
}

func (b *Bucket) Allow(n int) bool {
	b.refill()
	if float64(n) <= b.tokens {
		b.tokens -= float64(n)
		return true
	}
	return false
}

func (b *Bucket) Wait(n int) (time.Duration, error) {
	if float64(n) > b.burst {
		return 0, ErrTooMany
	}
	b.refill()
	missing := float64(n) - b.tokens
	if missing <= 0 {
		b.tokens -= float64(n)
		return 0, nil
	}
	delay := time.Duration(missing / b.rate * float64(time.Second))
	b.tokens = 0
	b.last = b.last.Add(delay)
	return delay, nil
}

func (b *Bucket) Available() float64 {
	b.refill()
	return b.tokens
}
'''

JS_DEBOUNCE = '''\
// Rate-limiting helpers for UI event handlers.
export function debounce(fn, waitMs) {
  let timer = null;
  return function debounced(...args) {
    if (timer !== null) {
      clearTimeout(timer);
    }
    timer = setTimeout(() => {
      timer = null;
      fn.apply(this, args);
    }, waitMs);
  };
}

export function throttle(fn, intervalMs) {
  let last = 0;
  let pending = null;
  return function throttled(...args) {
    const now = Date.now();
    const remaining = intervalMs - (now - last);
    if (remaining <= 0) {
      last = now;
      fn.apply(this, args);
    } else if (pending === null) {
      pending = setTimeout(() => {
        pending = null;
        last = Date.now();
        fn.apply(this, args);
      }, remaining);
    }
  };
}
'''
# The same code re-indented as TypeScript: a near duplicate, but of another language, so both stay.
TS_DEBOUNCE = JS_DEBOUNCE.replace("  ", "    ")

NEAR_GROUPS = {  # near-duplicate groups: exactly one file of each stays
    "inventory": {"shop/inventory.py": PY_INVENTORY, "shop/inventory_fixed_comment.py": PY_COMMENT,
                  "vendor/shop/inventory.py": PY_RENAMED, "legacy/inventory.py": PY_REFORMATTED},
    "lru": {"cache/lru.go": GO_LRU, "cache/lru_doc.go": GO_COMMENT, "vendor/cache/lru.go": GO_RENAMED,
            "old/cache/lru.go": GO_REFORMATTED},
}
NEAR_DISTINCT = {"shop/graph.py": PY_GRAPH, "shop/textstats.py": PY_TEXTSTATS, "ratelimit/bucket.go": GO_TOKENS,
                 "web/debounce.js": JS_DEBOUNCE, "web/debounce.ts": TS_DEBOUNCE}
VARIANTS = {"comment": ("shop/inventory_fixed_comment.py", "cache/lru_doc.go"),
            "renamed": ("vendor/shop/inventory.py", "vendor/cache/lru.go"),
            "reformatted": ("legacy/inventory.py", "old/cache/lru.go")}
NEAR_FILES = {path: text for group in NEAR_GROUPS.values() for path, text in group.items()} | NEAR_DISTINCT
NEAR_OPTIONS = dict(validation_share=0.5, num_shards=2)


def write_files(root, files):
  for relpath, text in files.items():
    (root / relpath).parent.mkdir(parents=True, exist_ok=True)
    (root / relpath).write_text(text, encoding="utf-8")


def kept_texts(corpus_dir):
  """{path without the source label: text} of every record of the corpus."""
  return {path.split("/", 1)[1]: text for texts in read_corpus(corpus_dir).values() for path, text in texts.items()}


def jaccard(a, b):
  a, b = corpus.code_shingles(a), corpus.code_shingles(b)
  return len(a & b) / len(a | b)


def sha256(text):
  return hashlib.sha256(text.encode("utf-8")).hexdigest()


@pytest.fixture(scope="module")
def near_built(tmp_path_factory):
  """The near-duplicate tree built with near-dedup in this process and by the CLI in another, and without it."""
  source = tmp_path_factory.mktemp("near") / "proj"
  write_files(source, NEAR_FILES)
  first, second, off = (tmp_path_factory.mktemp(name) for name in ("near1", "near2", "near_off"))
  stats = corpus.build_corpus([str(source)], str(first), **NEAR_OPTIONS)
  flags = [f"--{name}={value}" for name, value in NEAR_OPTIONS.items()]
  subprocess.run([sys.executable, "-m", "data.corpus", "--source", str(source), "--output", str(second),
                  *flags], check=True, capture_output=True, cwd=os.path.dirname(os.path.dirname(__file__)))
  with open(second / "stats.json") as f:
    second_stats = json.load(f)
  off_stats = corpus.main(["--source", str(source), "--output", str(off), "--no_near_dedup", *flags])
  return source, [first, second, off], [stats, second_stats, off_stats]


def test_near_dup_fixture_is_what_it_claims():
  # Edited copies: similar (above the 0.7 threshold) but not the same tokens; the reformatted copy has the
  # same tokens and other bytes; different files share (almost) no shingle.
  for original, comment, renamed, reformatted in [(PY_INVENTORY, PY_COMMENT, PY_RENAMED, PY_REFORMATTED),
                                                  (GO_LRU, GO_COMMENT, GO_RENAMED, GO_REFORMATTED)]:
    assert 60 <= original.count("\n") <= 100
    assert len({original, comment, renamed, reformatted}) == 4
    assert 0.8 < jaccard(original, comment) < 1 and 0.8 < jaccard(original, renamed) < 1
    assert jaccard(original, reformatted) == 1.0
  assert PY_REFORMATTED.count("\n    ") > 40 and "\n    \n" not in PY_REFORMATTED
  distinct = [PY_INVENTORY, PY_GRAPH, PY_TEXTSTATS]
  assert all(jaccard(a, b) < 0.05 for i, a in enumerate(distinct) for b in distinct[i + 1:])
  assert jaccard(GO_LRU, GO_TOKENS) < 0.05
  assert jaccard(JS_DEBOUNCE, TS_DEBOUNCE) == 1.0 and JS_DEBOUNCE != TS_DEBOUNCE


def test_code_shingles():
  assert corpus.code_shingles("a = f(x)  # hi") == {b"a = f ( x", b"= f ( x )", b"f ( x ) #", b"( x ) # hi"}
  assert corpus.code_shingles("x=1") == corpus.code_shingles("  x =\n\t1\n") == {b"x = 1"}  # < 5 tokens: one
  assert corpus.code_shingles(" \n\t") == set()
  assert corpus.code_shingles(PY_INVENTORY) == corpus.code_shingles(PY_REFORMATTED)


def test_shingle_hashes_are_one_per_distinct_shingle():
  from data.near_dedup import shingle_hashes

  for text in (PY_INVENTORY, PY_GRAPH, GO_LRU, JS_DEBOUNCE, "a = f(x)  # hi", "x=1"):
    hashes = shingle_hashes(text)
    assert hashes.dtype == np.uint32 and list(hashes) == sorted(set(hashes.tolist()))
    assert len(hashes) == len(corpus.code_shingles(text))  # no collision here, none merged or lost
  assert len(shingle_hashes(" \n\t")) == 0
  assert np.array_equal(shingle_hashes(PY_INVENTORY), shingle_hashes(PY_REFORMATTED))
  # A shingle's hash depends on its tokens and their order, not on where it occurs.
  assert set(shingle_hashes("a b c d e")) <= set(shingle_hashes("z a b c d e y"))
  assert not np.array_equal(shingle_hashes("a b c d e"), shingle_hashes("e d c b a"))


def test_shingle_hashes_are_the_same_in_every_process():
  # Workers must agree on signatures: nothing may depend on Python's per-process string hash seed.
  from data.near_dedup import shingle_hashes

  code = ("import sys; sys.path.insert(0, '.'); from data.near_dedup import shingle_hashes; "
          "print(shingle_hashes(open(sys.argv[1]).read()).tolist())")
  path = os.path.join(os.path.dirname(__file__), "test_corpus.py")
  root = os.path.dirname(os.path.dirname(__file__))
  for seed in ("1", "2"):
    out = subprocess.run([sys.executable, "-c", code, path], check=True, capture_output=True, text=True,
                         cwd=root, env={**os.environ, "PYTHONHASHSEED": seed}).stdout
    assert json.loads(out) == shingle_hashes(open(path).read()).tolist()


def test_signatures_estimate_the_shingle_jaccard():
  bands, rows = corpus.lsh_bands(0.7)
  minhash = near_dedup.MinHashBands(256, bands, rows, 5)
  minhash.setup()

  def signature(text):
    return next(iter(minhash.process(("d", "p", "python", text))))[1][1]

  for a, b in [(PY_INVENTORY, PY_COMMENT), (PY_INVENTORY, PY_RENAMED), (GO_LRU, GO_COMMENT),
               (PY_INVENTORY, PY_GRAPH), (GO_LRU, GO_TOKENS)]:
    # 256 permutations: the estimate's standard deviation is at most 0.5 / 16 = 0.031; 4 of them.
    assert abs(corpus.estimated_jaccard(signature(a), signature(b)) - jaccard(a, b)) < 0.125
  assert corpus.estimated_jaccard(signature(PY_INVENTORY), signature(PY_REFORMATTED)) == 1.0


def test_lsh_bands_are_datasketchs():
  import datasketch

  lsh = datasketch.MinHashLSH(threshold=0.7, num_perm=256)
  assert corpus.lsh_bands(0.7) == (lsh.b, lsh.r) == (25, 10)
  assert corpus.lsh_bands(1.0) == (1, 256)  # MinHashLSH refuses one band: all values in one


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_each_kind_of_near_duplicate_is_removed(tmp_path, variant):
  """(a) a comment changed, (b) a local renamed, (c) reformatted: with its original, one of the two goes."""
  files = {path: text for group in NEAR_GROUPS.values() for path, text in list(group.items())[:1]}
  files |= {path: NEAR_FILES[path] for path in VARIANTS[variant]} | NEAR_DISTINCT
  write_files(tmp_path / "proj", files)
  stats = corpus.build_corpus([str(tmp_path / "proj")], str(tmp_path / "out"), **NEAR_OPTIONS)
  assert stats["skipped"]["near_duplicate"] == 2
  assert sum(stats["skipped"].values()) == 2
  kept = kept_texts(tmp_path / "out")
  assert len(kept) == len(files) - 2
  for pair in [("shop/inventory.py", VARIANTS[variant][0]), ("cache/lru.go", VARIANTS[variant][1])]:
    assert len(set(pair) & set(kept)) == 1, pair
  assert {path: kept.get(path) for path in NEAR_DISTINCT} == NEAR_DISTINCT


def test_near_duplicate_groups_keep_one_each(near_built):
  _, (output, _, _), (stats, _, _) = near_built
  assert stats["skipped"] == dict(dict.fromkeys(corpus.SKIP_REASONS, 0), near_duplicate=6)
  kept = kept_texts(output)
  for name, group in NEAR_GROUPS.items():
    survivors = set(group) & set(kept)
    # The file of smallest content digest is never removed: which one stays depends on contents only.
    assert survivors == {min(group, key=lambda path: sha256(group[path]))}, name
  assert sum(files for per_split in stats["languages"].values() for files in
             (per_split["train"]["files"], per_split["validation"]["files"])) == len(NEAR_FILES) - 6
  assert stats["options"]["near_dedup"] is True and stats["options"]["near_dup_threshold"] == 0.7


def test_different_files_are_not_near_duplicates(near_built):
  # (d) Different code of similar size in the same language stays; so does a near copy in another language.
  _, (output, _, _), (stats, _, _) = near_built
  kept = kept_texts(output)
  assert {path: kept.get(path) for path in NEAR_DISTINCT} == NEAR_DISTINCT
  assert {"javascript", "typescript"} <= set(stats["languages"])


def test_no_near_dedup_keeps_every_file(near_built):
  # (e) --no_near_dedup: every variant stays and nothing is counted.
  _, (_, _, off), (_, _, off_stats) = near_built
  assert kept_texts(off) == NEAR_FILES
  assert off_stats["skipped"]["near_duplicate"] == 0
  assert off_stats["options"]["near_dedup"] is False


def test_near_duplicate_count_in_stats_and_table(near_built):
  _, (output, _, _), (stats, _, _) = near_built
  with open(output / "stats.json") as f:
    assert json.load(f)["skipped"]["near_duplicate"] == 6
  assert "near_duplicate 6" in corpus.format_table(stats)


def test_near_dedup_build_is_byte_identical(near_built):
  # (g) In another process too (the CLI): same shards, same stats.json, byte for byte.
  _, (first, second, _), (stats, second_stats, _) = near_built
  assert stats == second_stats
  a, b = file_bytes(first), file_bytes(second)
  assert sorted(a) == sorted(b) and "stats.json" in a
  for name in a:
    assert a[name] == b[name], name


def test_threshold_one_removes_only_same_token_copies(tmp_path):
  write_files(tmp_path / "proj", NEAR_FILES)
  stats = corpus.build_corpus([str(tmp_path / "proj")], str(tmp_path / "out"), near_dup_threshold=1.0,
                              **NEAR_OPTIONS)
  # Only a copy with the very same tokens goes: the reformatted one, or its original.
  assert stats["skipped"]["near_duplicate"] == 2
  removed = set(NEAR_FILES) - set(kept_texts(tmp_path / "out"))
  for original, reformatted in [("shop/inventory.py", "legacy/inventory.py"), ("cache/lru.go", "old/cache/lru.go")]:
    assert len({original, reformatted} & removed) == 1


def test_near_dedup_flags():
  base = ["--source", "s", "--output", "o"]
  for flags, expected in [([], True), (["--near_dedup"], True), (["--no_near_dedup"], False),
                          (["--no-near_dedup"], False)]:
    args, pipeline_args, _ = corpus.parse_args(base + flags)
    assert (args.near_dedup, pipeline_args) == (expected, []), flags
  args, _, _ = corpus.parse_args(base + ["--near_dup_threshold", "0.85"])
  assert args.near_dup_threshold == 0.85 and corpus.parse_args(base)[0].near_dup_threshold == 0.7


@pytest.mark.parametrize("threshold", ["0", "1.5", "-0.2", "nan"])
def test_bad_near_dup_threshold_is_refused(tmp_path, capsys, threshold):
  # (f) Refused before anything is read or written, naming the flag.
  (tmp_path / "proj").mkdir()
  with pytest.raises(SystemExit) as exit_info:
    corpus.main(["--source", str(tmp_path / "proj"), "--output", str(tmp_path / "out"),
                 "--near_dup_threshold", threshold])
  assert exit_info.value.code == 2
  assert "--near_dup_threshold" in capsys.readouterr().err
  assert not (tmp_path / "out").exists()
  with pytest.raises(ValueError, match="near_dup_threshold"):
    corpus.build_corpus([str(tmp_path / "proj")], str(tmp_path / "out"), near_dup_threshold=float(threshold))
