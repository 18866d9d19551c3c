"""The corpus builder on a small tree with every kind of bad file: skips, content, determinism, stats."""

import collections
import hashlib
import json
import os
import subprocess
import sys

import pytest

from objectives import corpus
from objectives import records

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


EXPECTED_SKIPS = {"symlink": 2, "not_code": 1, "capped": 0, "unreadable": 0, "empty": 1, "too_large": 1,
                  "binary": 1, "not_utf8": 1, "duplicate": 1}


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
  subprocess.run([sys.executable, "-m", "objectives.corpus", "--source", str(source), "--output", str(second),
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
  assert stats[0]["options"] == {"validation_share": 0.5, "num_shards": 2, "max_file_bytes": MAX_FILE_BYTES,
                                 "max_files_per_language": None}
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
                     for language in stats["languages"] for split in records.SPLITS] + ["stats.json"])
  assert names == expected
  assert sum(s["validation"]["files"] for s in stats["languages"].values()) == 0


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
  assert from_url["skipped"] == dict(EXPECTED_SKIPS, symlink=0)
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
                       for language in stats["languages"] for split in records.SPLITS] + ["stats.json"])
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
