"""evaluation/multiple/problems.py and files.py: MultiPL-E's prompt datasets, completions and results
files and bigcode-evaluation-harness's generations file, each made here the way its own code writes
it (the calls copied from nuprl/MultiPL-E and bigcode-evaluation-harness), read, and written back."""

import gzip
import json
import os

import pyarrow
import pyarrow.parquet
import pytest

import languages
import storage
from evaluation.multiple import files, problems as mp

PY_PROMPT = 'def add(x: int, y: int) -> int:\n    """Add two numbers x and y\n    >>> add(2, 3)\n    5\n    """\n'
PY_TESTS = ("def check(candidate):\n    assert candidate(2, 3) == 5\n\n"
            "def test_check():\n    check(add)\n\ntest_check()\n")
PY_STOPS = ["\ndef", "\n#", "\nif", "\nclass"]


def dataset_record(name, language="py", prompt=PY_PROMPT, tests=PY_TESTS, stop_tokens=PY_STOPS):
  """A row as dataset_builder/prepare_prompts_json.py builds it (its eight fields, its order)."""
  return {"name": name, "language": language, "prompt": prompt, "doctests": "transform",
          "original": f"/datasets/originals/{name}.py", "prompt_terminology": "reworded", "tests": tests,
          "stop_tokens": list(stop_tokens)}


def write_parquet(path, records):
  pyarrow.parquet.write_table(pyarrow.Table.from_pylist(records), str(path))


def read_gzip_text(path):
  with gzip.open(path, "rb") as f:
    return f.read()


# ---------------------------------------------------------------------------------------------
# Languages.


def test_language_codes_map_to_codelm_names_or_to_none():
  assert mp.codelm_language("go_test.go") == mp.codelm_language("go") == "go"
  assert [mp.codelm_language(c) for c in ("py", "js", "ts", "cs", "rs", "hs", "jl", "dart")] == [
      "python", "javascript", "typescript", "csharp", "rust", "haskell", "julia", "dart"]
  assert all(mp.codelm_language(code) is None for code in ("rb", "sh", "swift", "scala", "d", "rkt", "pl", "ml"))
  assert set(mp.LANGUAGES.values()) == set(languages.BY_NAME)  # all 14 reachable


# ---------------------------------------------------------------------------------------------
# (1) MultiPL-E's completions and results files, written by its code, read and written back.


def multipl_e_completions(directory, problem, completions):
  """multipl_e/completions.py: read_completions' new record, completions appended, then
  `gzip.open(exp_dir / f"{name}.json.gz", "wt").write(json.dumps(record))`."""
  record = {"name": problem["name"], "language": problem["language"], "temperature": 0.2, "top_p": 0.95,
            "max_tokens": 512, "prompt": problem["prompt"], "tests": problem["tests"], "completions": [],
            "stop_tokens": problem["stop_tokens"]}
  record["completions"].extend(completions)
  path = os.path.join(directory, f"{problem['name']}.json.gz")
  with gzip.open(path, "wt") as f:
    f.write(json.dumps(record))
  return path


def multipl_e_results(path, outcomes):
  """evaluation/src/main.py's evaluate_problem and cached_eval_script (timestamp set inside the loop
  over containerized_eval's keys), writing `json.dumps(test_results, indent=2)` after each result."""
  with gzip.open(path, "rt") as f:
    problem = json.load(f)
  test_results = problem.copy()
  del test_results["completions"]
  test_results["results"] = []
  results_path = path[:-len(".json.gz")] + ".results.json.gz"
  for completion, (status, exit_code, stderr) in zip(problem["completions"], outcomes):
    program = problem["prompt"] + completion + "\n" + problem["tests"]
    result_dict = {"program": program, "stdout": "", "stderr": stderr, "exit_code": exit_code, "status": status}
    result_yaml = dict()
    for k in result_dict.keys():
      result_yaml[k] = result_dict[k]
      result_yaml["timestamp"] = 1700000000
    test_results["results"].append(result_yaml)
    with gzip.open(results_path, "wt") as f:
      f.write(json.dumps(test_results, indent=2))
  return results_path


COMPLETIONS = ["    return x + y\n", "    return x - y  # \u00e9t\u00e9 \u2603\n"]
OUTCOMES = [("OK", 0, ""), ("Exception", 1, "AssertionError\n")]


def test_multipl_e_files_read_and_written_back_are_the_same_json_text(tmp_path):
  source = tmp_path / "humaneval-py-model-0.2-reworded"
  source.mkdir()
  completions_path = multipl_e_completions(str(source), dataset_record("HumanEval_53_add"), COMPLETIONS)
  results_path = multipl_e_results(completions_path, OUTCOMES)

  completions, invalid = files.read_completions(str(source))  # the results file beside it is skipped
  assert invalid == [] and [r["name"] for r in completions] == ["HumanEval_53_add"]
  results, invalid = files.read_results(str(source))
  assert invalid == [] and list(results[0]) == [k for k in files.COMPLETIONS_KEYS if k != "completions"] + ["results"]
  assert list(results[0]["results"][0]) == list(files.RESULT_KEYS)

  out = str(tmp_path / "out")
  written = files.write_completions(out, completions[0]), files.write_results(out, results[0])
  assert written == (os.path.join(out, "HumanEval_53_add.json.gz"),
                     os.path.join(out, "HumanEval_53_add.results.json.gz"))
  assert read_gzip_text(written[0]) == read_gzip_text(completions_path)
  assert read_gzip_text(written[1]) == read_gzip_text(results_path)
  # Deterministic: no time and no name in the gzip header, so a rewrite gives the same bytes.
  first = storage.read_bytes(written[1])
  assert first[4:8] == b"\0\0\0\0" and not first[3] & 0x08
  files.write_results(out, results[0])
  assert storage.read_bytes(written[1]) == first

  # Built from a Problem, the records are MultiPL-E's own, key for key.
  problem = mp.problem_from_record(dataset_record("HumanEval_53_add"), "x")
  ours = files.completions_record(problem, COMPLETIONS, temperature=0.2, top_p=0.95, max_tokens=512)
  assert json.dumps(ours) == read_gzip_text(completions_path).decode()
  shuffled = [dict(reversed(list(r.items()))) for r in results[0]["results"]]  # any key order in
  assert json.dumps(files.results_record(ours, shuffled), indent=2) == read_gzip_text(results_path).decode()
  with pytest.raises(ValueError, match="result 0 has no status"):
    files.results_record(ours, [{k: v for k, v in shuffled[0].items() if k != "status"}])


def test_plain_json_files_read_as_multipl_e_reads_them(tmp_path):
  record = files.completions_record(mp.problem_from_record(dataset_record("HumanEval_0_x"), "x"), COMPLETIONS, 0.8,
                                    0.95, 512)
  (tmp_path / "HumanEval_0_x.json").write_text(json.dumps(record))
  assert files.read_completions(str(tmp_path / "HumanEval_0_x.json")) == ([record], [])
  assert files.read_completions(str(tmp_path)) == ([record], [])
  # The problem it carries, placed at its file; the harness's records have no stop_tokens.
  (found,), _ = files.read_completions(str(tmp_path))
  problem = files.problem_of(found)
  assert problem == mp.problem_from_record(dataset_record("HumanEval_0_x"), "x")
  assert problem.where == str(tmp_path / "HumanEval_0_x.json")
  harness = {"name": "HumanEval_0_x", "language": "py", "prompt": PY_PROMPT, "completions": ["x"], "tests": PY_TESTS}
  assert files.problem_of(harness).stop_tokens == ()


# ---------------------------------------------------------------------------------------------
# The harness's generations file, and (4) a completion through it and back.


def test_harness_generations_read_and_written_back_are_the_same_bytes(tmp_path):
  lua = dataset_record("HumanEval_1_f", "lua", "local function f(x)\n", "lu = require('luaunit')\n", ["\nlocal"])
  problems = [mp.problem_from_record(dataset_record(f"HumanEval_{i}_add"), f"x:{i}") for i in range(2)]
  head = problems[0].harness_prompt  # both prompts are the same
  generations = [[head + "\n    return x + y", head + "\n    return \u2603"], [head + "\n    pass"]]
  path = tmp_path / "generations_multiple-py.json"
  with open(path, "w") as fp:  # bigcode_eval/evaluator.py: save_json_files
    json.dump(generations, fp)
  found, invalid = files.read_generations(str(path), problems)
  assert invalid == []
  assert [(p.name, j, c) for p, j, c in found] == [
      ("HumanEval_0_add", 0, "\n    return x + y"), ("HumanEval_0_add", 1, "\n    return \u2603"),
      ("HumanEval_1_add", 0, "\n    pass")]
  regrouped = [[problems[i].harness_prompt + c for p, _, c in found if p is problems[i]] for i in range(2)]
  files.write_generations(str(tmp_path / "again" / "generations_multiple-py.json"), regrouped)
  assert (tmp_path / "again" / "generations_multiple-py.json").read_bytes() == path.read_bytes()
  assert files.generations_file_name("py") == "generations_multiple-py.json"
  assert files.generations_file_name("go_test.go", "out/gens.json") == "out/gens_multiple-go.json"
  with pytest.raises(ValueError, match="one harness task"):
    files.read_generations(str(path), problems + [mp.problem_from_record(lua, "y")])


def test_a_completion_through_the_harness_format_and_back_runs_as_the_same_program(tmp_path):
  problem = mp.problem_from_record(dataset_record("HumanEval_53_add", prompt="\n" + PY_PROMPT), "x")
  completion = "    return x + y\n"
  generation = files.harness_generation(problem, completion)
  # The harness's postprocess_generation keeps it whole (no stop word in it) ...
  harness_prompt = problem.prompt.strip()
  assert generation.startswith(harness_prompt) and not any(s in generation[len(harness_prompt):] for s in PY_STOPS)
  # ... and runs `generation + "\n" + tests`: MultiPL-E's program without the prompt's leading "\n".
  assert "\n" + generation + "\n" + problem.tests == problem.prompt + completion + "\n" + problem.tests
  path = str(tmp_path / "generations_multiple-py.json")
  files.write_generations(path, [[generation]])
  (found,), invalid = files.read_generations(path, [problem])
  assert invalid == [] and found[:2] == (problem, 0)
  # What the model wrote after the harness's prompt: the prompt's stripped trailing "\n", then the completion.
  assert found[2] == "\n" + completion and problem.harness_prompt + found[2] == generation
  # A prompt without trailing whitespace gives the completion back exactly.
  bare = mp.problem_from_record(dataset_record("HumanEval_1_f", "lua", "local function f(x)", "", ["\nlocal"]), "y")
  files.write_generations(path, [[files.harness_generation(bare, "\n  return x\nend")]])
  assert files.read_generations(path, [bare]) == ([(bare, 0, "\n  return x\nend")], [])


# ---------------------------------------------------------------------------------------------
# (2) Problems from JSONL, a JSON list, parquet and a directory of them.


def write_dataset_forms(directory, records):
  """The first record in JSONL, the second in a JSON list, the rest in parquet (a subdirectory)."""
  os.makedirs(os.path.join(directory, "hf"), exist_ok=True)
  with open(os.path.join(directory, "a.jsonl"), "w") as f:  # prepare_prompts_json.py: json.dump + "\n"
    json.dump(records[0], f)
    f.write("\n")
  with open(os.path.join(directory, "b.json"), "w") as f:  # the repository's prompts/*.json
    f.write(json.dumps(records[1:2], indent=2))
  write_parquet(os.path.join(directory, "hf", "test-00000-of-00001.parquet"), records[2:])


RECORDS = [dataset_record("HumanEval_0_add"), dataset_record("HumanEval_1_add"),
           dataset_record("HumanEval_2_f", "go_test.go", "package f\n\nfunc f() int {\n",
                          "func TestF(t *testing.T) {}\n", ["\nfunc", "struct", "\n// "]),
           dataset_record("HumanEval_3_f", "rb", "def f\n", "require 'test/unit'\n", ["\nclass"])]


def test_problems_from_each_form_and_from_a_directory_of_them(tmp_path):
  write_dataset_forms(str(tmp_path), RECORDS)
  found, invalid = mp.read_problems(str(tmp_path))
  assert invalid == []
  assert [(p.language, p.name, p.codelm_language) for p in found] == [
      ("py", "HumanEval_0_add", "python"), ("py", "HumanEval_1_add", "python"),
      ("go_test.go", "HumanEval_2_f", "go"), ("rb", "HumanEval_3_f", None)]
  assert [p.where for p in found] == [f"{tmp_path}/a.jsonl:1", f"{tmp_path}/b.json:[0]",
                                      f"{tmp_path}/hf/test-00000-of-00001.parquet:row 0",
                                      f"{tmp_path}/hf/test-00000-of-00001.parquet:row 1"]
  assert [dict(p.record) for p in found] == RECORDS and all(list(p.record) == list(RECORDS[0]) for p in found)
  assert found[2].stop_tokens == ("\nfunc", "struct", "\n// ") and found[2].key == ("go_test.go", "HumanEval_2_f")
  # Each file alone; prepare_prompts_json.py's JSONL under a .json name reads too.
  assert mp.read_problems(str(tmp_path / "a.jsonl"))[0] == found[:1]
  (tmp_path / "c").mkdir()
  (tmp_path / "c" / "humaneval-py-reworded.json").write_text(json.dumps(RECORDS[1]) + "\n")
  assert mp.read_problems(str(tmp_path / "c" / "humaneval-py-reworded.json"))[0] == found[1:2]


def test_problems_through_a_url(tmp_path):
  """ram:// (TensorFlow's in-memory file system) stands in for gs://: the same problems, and a
  completions file written there reads back."""
  import tensorflow as tf

  local, url = tmp_path / "local", f"ram://multiple_files_test{tmp_path}"
  write_dataset_forms(str(local), RECORDS)
  for directory, _, names in os.walk(local):
    for name in names:
      target = storage.join(url, os.path.relpath(os.path.join(directory, name), local))
      storage.makedirs(storage.dirname(target))
      with open(os.path.join(directory, name), "rb") as f:
        storage.write_atomic(target, f.read())
  try:
    found, invalid = mp.read_problems(url)
    assert invalid == [] and found == mp.read_problems(str(local))[0]
    record = files.completions_record(found[0], COMPLETIONS, 0.2, 0.95, 512)
    path = files.write_completions(url + "/completions", record)
    assert path == f"{url}/completions/HumanEval_0_add.json.gz"
    assert files.read_completions(url + "/completions") == ([record], [])
  finally:
    tf.io.gfile.rmtree(url)


# ---------------------------------------------------------------------------------------------
# (3) A malformed record is reported with its place; the others are kept.


def test_a_malformed_problem_is_reported_with_its_place_and_the_others_kept(tmp_path):
  good, other = dataset_record("HumanEval_0_add"), dataset_record("HumanEval_1_add")
  (tmp_path / "a.jsonl").write_text("\n".join([json.dumps(good), "{not json", json.dumps({**other, "tests": 3}),
                                               json.dumps(good), json.dumps(other)]) + "\n")
  (tmp_path / "b.json").write_text(json.dumps([dataset_record("HumanEval_2_x"), [1],
                                               {**dataset_record("HumanEval_3_x"), "stop_tokens": "\n"}]))
  write_parquet(tmp_path / "c.parquet", [dataset_record("HumanEval_4_x"),
                                         {**dataset_record("HumanEval_5_x"), "name": ""},
                                         {**dataset_record("HumanEval_6_x"), "prompt": None}])
  found, invalid = mp.read_problems(str(tmp_path))
  assert [p.name for p in found] == ["HumanEval_0_add", "HumanEval_1_add", "HumanEval_2_x", "HumanEval_4_x"]
  assert invalid == [
      f"{tmp_path}/a.jsonl:2: not valid JSON (Expecting property name enclosed in double quotes)",
      f"{tmp_path}/a.jsonl:3: tests must be a string, got int",
      f"{tmp_path}/a.jsonl:4: problem HumanEval_0_add in py again (first at {tmp_path}/a.jsonl:1)",
      f"{tmp_path}/b.json:[1]: expected a JSON object, got list",
      f"{tmp_path}/b.json:[2]: stop_tokens must be a list of strings",
      f"{tmp_path}/c.parquet:row 1: name is empty",
      f"{tmp_path}/c.parquet:row 2: prompt must be a string, got NoneType"]
  # A file that does not parse at all names itself.
  (tmp_path / "d.json").write_text('[{"name": ')
  with pytest.raises(ValueError, match=r"d\.json: not a JSON list"):
    mp.read_problems(str(tmp_path / "d.json"))
  (tmp_path / "e.parquet").write_bytes(b"PAR1 not really")
  with pytest.raises(ValueError, match=r"e\.parquet: not a parquet file"):
    mp.read_problems(str(tmp_path / "e.parquet"))


def test_a_malformed_completions_or_results_file_is_reported_and_the_others_kept(tmp_path):
  problem = mp.problem_from_record(dataset_record("HumanEval_0_add"), "x")
  record = files.completions_record(problem, COMPLETIONS, 0.2, 0.95, 512)
  files.write_completions(str(tmp_path), record)
  (tmp_path / "HumanEval_1_x.json.gz").write_bytes(b"not gzip")
  files.write_completions(str(tmp_path), {**record, "name": "HumanEval_2_x", "completions": [1]})
  files.write_completions(str(tmp_path), {k: v for k, v in record.items() if k != "tests"} | {"name": "HumanEval_3_x"})
  (tmp_path / "HumanEval_4_x.json").write_text(json.dumps(record))  # HumanEval_0_add again
  found, invalid = files.read_completions(str(tmp_path))
  assert found == [record]
  assert [message.split(": ", 1) for message in invalid] == [
      [f"{tmp_path}/HumanEval_1_x.json.gz", "not gzip (BadGzipFile: Not a gzipped file (b'no'))"],
      [f"{tmp_path}/HumanEval_2_x.json.gz", "completions must be a list of strings"],
      [f"{tmp_path}/HumanEval_3_x.json.gz", "no tests field"],
      [f"{tmp_path}/HumanEval_4_x.json",
       f"problem HumanEval_0_add in py again (first in {tmp_path}/HumanEval_0_add.json.gz)"]]

  result = {"program": "p", "timestamp": 1, "stdout": "", "stderr": "", "exit_code": 0, "status": "OK"}
  files.write_results(str(tmp_path), files.results_record(record, [result, result]))
  bad = files.results_record({**record, "name": "HumanEval_5_x"}, [result])
  del bad["results"][0]["status"]
  files.write_results(str(tmp_path), bad)
  found, invalid = files.read_results(str(tmp_path))
  assert [r["name"] for r in found] == ["HumanEval_0_add"]
  assert invalid == [f"{tmp_path}/HumanEval_5_x.results.json.gz: result 0: no status field"]


def test_gzipped_problems_read_by_their_magic_and_a_dangling_link_is_that_file_s_problem(tmp_path):
  # MultiPL-E's prompts come as .jsonl.gz too: read through, not as "not UTF-8" lines.
  (tmp_path / "p.jsonl.gz").write_bytes(gzip.compress(json.dumps(RECORDS[0]).encode() + b"\n"))
  (tmp_path / "misnamed.jsonl").write_bytes(gzip.compress(json.dumps(RECORDS[1]).encode() + b"\n"))
  (tmp_path / "broken.jsonl.gz").write_bytes(gzip.compress(b"x" * 100)[:20])  # cut short
  (tmp_path / "gone.jsonl").symlink_to(tmp_path / "nowhere.jsonl")
  found, invalid = mp.read_problems(str(tmp_path))
  assert [p.name for p in found] == ["HumanEval_1_add", "HumanEval_0_add"]  # misnamed.jsonl, p.jsonl.gz
  assert [message.split(": ", 1)[0] for message in invalid] == [f"{tmp_path}/broken.jsonl.gz", f"{tmp_path}/gone.jsonl"]
  assert "gzip that cannot be read" in invalid[0] and "cannot be read (No such file or directory)" in invalid[1]
  # A completions folder with a dangling link: that file is reported, the others read.
  completions = tmp_path / "completions"
  completions.mkdir()
  problem = mp.problem_from_record(dataset_record("HumanEval_0_add"), "x")
  record = files.completions_record(problem, COMPLETIONS, 0.2, 0.95, 512)
  files.write_completions(str(completions), record)
  (completions / "HumanEval_9_x.json.gz").symlink_to(tmp_path / "missing.json.gz")
  found, invalid = files.read_completions(str(completions))
  assert found == [record]
  assert invalid == [f"{completions}/HumanEval_9_x.json.gz: cannot be read (No such file or directory)"]


def test_a_malformed_generation_is_reported_with_problem_and_sample_and_the_others_kept(tmp_path):
  problems = [mp.problem_from_record(dataset_record(f"HumanEval_{i}_add"), f"x:{i}") for i in range(3)]
  head = problems[0].harness_prompt
  path = tmp_path / "generations_multiple-py.json"
  path.write_text(json.dumps([[head + "\n  a", None, "def other(): pass"], "oops", [head + "\n  c"], [head]]))
  found, invalid = files.read_generations(str(path), problems)
  assert [(p.name, j, c) for p, j, c in found] == [("HumanEval_0_add", 0, "\n  a"), ("HumanEval_2_add", 0, "\n  c")]
  assert invalid == [
      f"{path}: 4 lists of generations for 3 problems; the last 1 belong to none and are not read",
      f"{path}: problem 0 (HumanEval_0_add) generation 1: not a string (NoneType)",
      f"{path}: problem 0 (HumanEval_0_add) generation 2: does not start with the problem's prompt (stripped)",
      f"{path}: problem 1 (HumanEval_1_add): expected a list of generations, got str"]
  path.write_text('{"multiple-py": []}')
  with pytest.raises(ValueError, match=r"generations_multiple-py\.json: expected a JSON list"):
    files.read_generations(str(path), problems)
