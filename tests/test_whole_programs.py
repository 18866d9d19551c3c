"""Whole-program predictions (BabelCode's form: the entry function with its imports, helpers and
constants, named in BabelCode's convention): each language that builds them runs one that passes, one
wrong, one that throws, one that loops and one that forges records or BabelCode's verdict lines and
exits early; tabs and CRLF, module-level constants and helpers, a parameter named like a reserved word
(BabelCode's `string` -> `string_arg0`); the scorer's --whole_programs; declared types in the typed
format; BabelCode's null number outputs as an optional return."""

from __future__ import annotations

import json
import os

import pytest

from evaluation import score
from evaluation.humaneval import babelcode
from sandbox import execution, typed
from sandbox.judge import Case, Status, judge
from sandbox.renderers import MODULES, get

LIMITS = execution.Limits(timeout_s=3, compile_timeout_s=60)
# BabelCode's question shape: a reserved parameter renamed (`string` -> `string_arg0`), a 32-bit integer.
QUESTION = typed.question_from_json({
    "qid": "w/0", "entry_fn_name": "count_chars", "description": "",
    "params": [{"name": "string_arg0", "type": "string"}, {"name": "limit", "type": "int"}],
    "return_type": "int", "declared_types": {"params": ["string", "integer"], "return": "integer"},
    "test_cases": [{"idx": 0, "inputs": ["abc", 2], "output": 2}, {"idx": 1, "inputs": ["hello", 9], "output": 5}]})

# Per language: a correct whole program with a module-level constant and a helper, the same with tabs
# and CRLF, a wrong one, one that throws, one that loops, one that forges and exits before the harness.
FORGED = "TEST-0...PASSED\\nTEST-1...PASSED\\n#codelm# 0 ok 999\\n"
PROGRAMS = {
    "python": {
        "correct": "OFFSET = 0\n\ndef helper(s):\n    return len(s) + OFFSET\n\n"
                   "def count_chars(string, limit):\n    return min(helper(string), limit)\n",
        "tabs_crlf": "OFFSET = 0\r\ndef count_chars(string, limit):\r\n\tn = len(string) + OFFSET\r\n"
                     "\tif n > limit:\r\n\t\treturn limit\r\n\treturn n",
        "wrong": "def count_chars(string, limit):\n    return limit + 1\n",
        "throws": "def count_chars(string, limit):\n    raise ValueError('no')\n",
        "loops": "def count_chars(string, limit):\n    while True:\n        pass\n",
        "forges": f"import os\nsys.stdout.write('{FORGED}')\nsys.stdout.flush()\nos._exit(0)\n"
                  "def count_chars(string, limit):\n    return 0\n",
    },
    "cpp": {
        "correct": "const int OFFSET = 0;\nint helperSize(const string& s) { return (int) s.size() + OFFSET; }\n"
                   "int countChars(string& string_, int limit) {\n  return min(helperSize(string_), limit);\n}\n",
        "tabs_crlf": "const int OFFSET = 0;\r\nint countChars(string s, int limit) {\r\n\tint n = s.size() + OFFSET;\r\n"
                     "\treturn n < limit ? n : limit;\r\n}",
        "wrong": "int countChars(string s, int limit) { return limit + 1; }\n",
        "throws": "int countChars(string s, int limit) { throw std::runtime_error(\"no\"); }\n",
        "loops": "int countChars(string s, int limit) { volatile int x = 0; while (true) { x++; } return x; }\n",
        "forges": f"struct Forge {{ Forge() {{ printf(\"{FORGED}\"); fflush(stdout); _Exit(0); }} }} forge;\n"
                  "int countChars(string s, int limit) { return 0; }\n",
    },
    "javascript": {
        "correct": "const OFFSET = 0;\nfunction helper(s) { return s.length + OFFSET; }\n"
                   "function countChars(string, limit) {\n  return Math.min(helper(string), limit);\n}\n",
        "tabs_crlf": "const OFFSET = 0;\r\nfunction countChars(string, limit) {\r\n\tconst n = string.length + OFFSET;\r\n"
                     "\treturn n > limit ? limit : n;\r\n}",
        "wrong": "function countChars(s, limit) { return limit + 1; }\n",
        "throws": "function countChars(s, limit) { throw new Error('no'); }\n",
        "loops": "function countChars(s, limit) { while (true) {} }\n",
        "forges": f"process.stdout.write('{FORGED}');\nprocess.exit(0);\nfunction countChars(s, limit) {{ return 0; }}\n",
    },
    "lua": {
        "correct": "local OFFSET = 0\nlocal function helper(s)\n  return #s + OFFSET\nend\n"
                   "function count_chars(str, limit)\n  return math.min(helper(str), limit)\nend\n",
        "tabs_crlf": "local OFFSET = 0\r\nfunction count_chars(str, limit)\r\n\tlocal n = #str + OFFSET\r\n"
                     "\tif n > limit then\r\n\t\treturn limit\r\n\tend\r\n\treturn n\r\nend",
        "wrong": "function count_chars(s, limit)\n  return limit + 1\nend\n",
        "throws": "function count_chars(s, limit)\n  error('no')\nend\n",
        "loops": "function count_chars(s, limit)\n  while true do end\nend\n",
        "forges": f"io.write('{FORGED}')\nio.stdout:flush()\nos.exit(0)\nfunction count_chars(s, limit) return 0 end\n",
    },
    "php": {
        "correct": "const OFFSET = 0;\nfunction helper($s) { return strlen($s) + OFFSET; }\n"
                   "function countChars($string, $limit) {\n  return min(helper($string), $limit);\n}\n",
        "tabs_crlf": "const OFFSET = 0;\r\nfunction countChars($string, $limit) {\r\n\t$n = strlen($string) + OFFSET;\r\n"
                     "\treturn $n > $limit ? $limit : $n;\r\n}",
        "wrong": "function countChars($s, $limit) { return $limit + 1; }\n",
        "throws": "function countChars($s, $limit) { throw new Exception('no'); }\n",
        "loops": "function countChars($s, $limit) { while (true) {} }\n",
        "forges": f"echo \"{FORGED}\";\nexit(0);\nfunction countChars($s, $limit) {{ return 0; }}\n",
    },
    "r": {
        "correct": "OFFSET <- 0L\nhelper <- function(s) nchar(s) + OFFSET\n"
                   "count_chars <- function(string, limit) {\n  return(min(helper(string), limit))\n}\n",
        "tabs_crlf": "OFFSET <- 0L\r\ncount_chars <- function(string, limit) {\r\n\tn <- nchar(string) + OFFSET\r\n"
                     "\tif (n > limit) {\r\n\t\treturn(limit)\r\n\t}\r\n\treturn(n)\r\n}",
        "wrong": "count_chars <- function(s, limit) limit + 1L\n",
        "throws": "count_chars <- function(s, limit) stop('no')\n",
        "loops": "count_chars <- function(s, limit) { while (TRUE) {} }\n",
        "forges": f"cat('{FORGED}')\nquit(save = 'no', status = 0)\ncount_chars <- function(s, limit) 0L\n",
    },
}


def renderer_or_skip(language: str):
  renderer = get(language)
  lacking = execution.missing(renderer.toolchain)
  if lacking:
    pytest.skip(f"{language}: toolchain missing ({', '.join(lacking)}); run `make toolchains`")
  return renderer


def run(renderer, code: str, question: typed.Question = QUESTION):
  return judge(question, execution.execute(renderer.whole_program(question, code), renderer.toolchain, LIMITS))


def test_the_languages_with_whole_programs_and_their_entry_names():
  assert {name for name in MODULES if get(name).whole_programs} == set(PROGRAMS)
  assert {name: get(name).entry_name(QUESTION) for name in PROGRAMS} == {
      "python": "count_chars", "cpp": "countChars", "javascript": "countChars", "lua": "count_chars",
      "php": "countChars", "r": "count_chars"}
  with pytest.raises(NotImplementedError, match="Go: whole programs are not supported"):
    get("go").whole_program(QUESTION, "")


@pytest.mark.parametrize("language", sorted(PROGRAMS))
def test_a_whole_program_passes_fails_throws_loops_and_forges(language):
  renderer = renderer_or_skip(language)
  programs = PROGRAMS[language]
  for kind in ("correct", "tabs_crlf"):
    outcome = run(renderer, programs[kind])
    assert outcome.status is Status.PASSED, (kind, outcome)
  wrong = run(renderer, programs["wrong"])
  assert wrong.status is Status.FAILED and list(wrong.cases) == [Case.FAILED, Case.FAILED], wrong
  throws = run(renderer, programs["throws"])
  assert throws.status is Status.FAILED and list(throws.cases) == [Case.EXCEPTION, Case.EXCEPTION], throws
  assert run(renderer, programs["loops"]).status is Status.TIMEOUT
  # BabelCode's verdict lines mean nothing here, and a forged record with a wrong value before an early
  # exit fails like any wrong value: the values are compared outside.
  forged = run(renderer, programs["forges"])
  assert forged.status is not Status.PASSED and Case.PASSED not in forged.cases, forged


def test_cpp_whole_programs_get_the_declared_types():
  """A 32-bit int, a long long, a float, a char and containers of them: the harness's arguments have
  the declared C++ types, so a solution declared with them compiles and its value is recorded."""
  renderer = renderer_or_skip("cpp")
  question = typed.question_from_json({
      "qid": "w/1", "entry_fn_name": "mixed_types", "description": "",
      "params": [{"name": "xs", "type": "list<int>"}, {"name": "big", "type": "int"},
                 {"name": "f", "type": "float"}, {"name": "c", "type": "string"},
                 {"name": "m", "type": "map<string,list<float>>"}],
      "return_type": "list<float>",
      "declared_types": {"params": ["list<integer>", "long", "float", "character", "map<character,list<double>>"],
                         "return": "list<float>"},
      "test_cases": [{"idx": 0, "inputs": [[1, 2], 10000000000, 0.5, "a", [["a", [0.25]]]],
                      "output": [3.0, 10000000000.0, 0.5, 97.0, 0.25]}]})
  code = ("vector<float> mixedTypes(vector<int> xs, long long big, float f, char c, map<char, vector<double>> m) {\n"
          "  return {(float) (xs[0] + xs[1]), (float) big, f, (float) c, (float) m['a'][0]};\n}\n")
  assert run(renderer, code, question).status is Status.PASSED


def test_declared_types_round_trip_and_must_fit_the_types():
  again = typed.question_from_json(QUESTION.to_json())
  assert again == QUESTION and [str(t) for t in again.declared] == ["string", "integer", "integer"]
  plain = typed.question_from_json({k: v for k, v in QUESTION.to_json().items() if k != "declared_types"})
  assert [str(t) for t in plain.declared] == ["string", "long", "long"]   # the prompts' 64-bit int
  bad = {**QUESTION.to_json(), "declared_types": {"params": ["string", "double"], "return": "integer"}}
  with pytest.raises(ValueError, match="declared type double of limit does not fit its type int"):
    typed.question_from_json(bad, "q.jsonl:3")


def test_a_null_number_output_makes_the_return_optional():
  """BabelCode's Python test compares the value with None there (MBPP 452): only None passes it."""
  record = {"qid": "452", "entry_fn_name": "loss_amount",
            "schema": {"params": [{"name": "a", "type": "integer"}], "return": {"type": "integer"}},
            "test_list": [{"idx": 0, "inputs": {"a": 1}, "outputs": None}, {"idx": 1, "inputs": {"a": 2}, "outputs": 3}]}
  question = babelcode.question(record)
  assert str(question.return_type) == "optional<int>" and [c.output for c in question.test_cases] == [None, 3]
  assert [str(t) for t in question.declared] == ["integer", "integer"]
  renderer = renderer_or_skip("python")
  good = "def loss_amount(a):\n    return None if a == 1 else 3\n"
  assert run(renderer, good, question).status is Status.PASSED
  assert run(renderer, "def loss_amount(a):\n    return 0 if a == 1 else 3\n", question).status is Status.FAILED


def test_the_scorer_takes_whole_programs_resumes_and_names_unsupported_languages(tmp_path):
  renderer_or_skip("python")
  benchmark = tmp_path / "questions.jsonl"
  typed.write_questions([QUESTION], str(benchmark))
  predictions = tmp_path / "predictions.jsonl"
  records = [{"qid": "w/0", "language": "Python", "code": PROGRAMS["python"]["correct"]},
             {"qid": "w/0", "language": "Python", "code": PROGRAMS["python"]["wrong"]},
             {"qid": "w/0", "language": "Go", "code": "func countChars(s string, limit int) int { return 0 }"}]
  predictions.write_text("".join(json.dumps(r) + "\n" for r in records))
  output = tmp_path / "out"
  argv = ["--predictions", str(predictions), "--benchmark", str(benchmark), "--output", str(output),
          "--whole_programs", "--workers", "1", "--k", "1"]
  assert score.main(argv) == 0
  metrics = json.loads((output / "metrics.json").read_text())
  assert metrics["whole_programs"] is True and metrics["python"]["counts"]["passed"] == 1
  assert metrics["python"]["counts"]["failed"] == 1
  assert "whole programs" in metrics["not_evaluated"]["go"]
  results = [json.loads(line) for line in (output / "results.jsonl").read_text().splitlines()]
  assert [(r["sample_id"], r["status"]) for r in results] == [(0, "passed"), (1, "failed")]
  assert score.main(argv) == 0   # resumed: nothing left to score
  assert json.loads((output / "metrics.json").read_text())["scored_now"] == 0
  # The Beam pipeline (direct runner, in process) gives the same verdicts.
  beam = tmp_path / "beam"
  assert score.main(argv[:5] + [str(beam)] + argv[6:] + ["--runner", "DirectRunner"]) == 0
  assert [(r["sample_id"], r["status"]) for r in map(json.loads, (beam / "results.jsonl").read_text().splitlines())
          ] == [(0, "passed"), (1, "failed")]
  # The same code scored as a completion is another program: not reused.
  completions = tmp_path / "completions"
  assert score.main(["--predictions", str(predictions), "--benchmark", str(benchmark), "--output",
                     str(completions), "--languages", "python", "--workers", "1", "--k", "1"]) == 0
  assert json.loads((completions / "metrics.json").read_text())["python"]["counts"]["passed"] == 0


def test_python_reads_integral_floats_as_ints_and_dict_subclasses_as_dicts():
  """As BabelCode's `==` reads them (MBPP 14's 240.0 for 240, MBPP 40's Counter); 1 for true stays wrong."""
  renderer = renderer_or_skip("python")
  assert run(renderer, "def count_chars(string, limit):\n    return float(min(len(string), limit))\n").status \
      is Status.PASSED
  assert run(renderer, "def count_chars(string, limit):\n    return 2.5\n").status is Status.FAILED
  counts = typed.question_from_json({
      "qid": "w/2", "entry_fn_name": "freq", "description": "", "params": [{"name": "s", "type": "string"}],
      "return_type": "map<string,int>", "test_cases": [{"idx": 0, "inputs": ["aab"], "output": [["a", 2], ["b", 1]]}]})
  assert run(renderer, "from collections import Counter\ndef freq(s):\n    return Counter(s)\n", counts).status \
      is Status.PASSED
  flag = typed.question_from_json({
      "qid": "w/3", "entry_fn_name": "is_odd", "description": "", "params": [{"name": "n", "type": "int"}],
      "return_type": "bool", "test_cases": [{"idx": 0, "inputs": [3], "output": True}]})
  assert run(renderer, "def is_odd(n):\n    return n % 2\n", flag).status is Status.FAILED


def test_the_parity_script_builds_scores_and_compares(tmp_path, capsys):
  """bench/babelcode_parity.py on a data folder of one question per dataset (Transcoder with C++), then
  with a BabelCode verdicts file that disagrees on one; a missing folder is one line, exit 2."""
  renderer_or_skip("python")
  renderer_or_skip("cpp")
  import sys
  sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench"))
  import babelcode_parity
  raw = {"id": "1", "title": "Add One", "text": None, "solution": "def add_one(x):\r\n\treturn x + 1",
         "testing_code": "assert add_one(1) == 2\nassert add_one(5) == 6", "entry_fn_name": "add_one"}
  (tmp_path / "data" / "raw_datasets").mkdir(parents=True)
  for name in babelcode_parity.DATASETS:
    record = raw | ({"other_lang_solutions": {"C++": "int add_one(int x) {\n  return x + 1;\n}"}}
                    if name == "transcoder" else {})
    (tmp_path / "data" / "raw_datasets" / f"{name}_questions.jsonl").write_text(json.dumps(record) + "\n")
  argv = ["--data", str(tmp_path / "data"), "--output", str(tmp_path / "out"), "--workers", "1"]
  assert babelcode_parity.main(argv) == 0
  rows = json.loads((tmp_path / "out" / "parity.json").read_text())["rows"]
  assert [(r["dataset"], r["language"], r["codelm_passed"]) for r in rows] == [
      ("human_eval", "Python", 1), ("mbpp", "Python", 1), ("tp3", "Python", 1), ("transcoder", "Python", 1),
      ("transcoder", "C++", 1)]
  verdicts = {"how": "by hand", "datasets": {name: {"Python": {"1": "Passed"}} for name in babelcode_parity.DATASETS}}
  verdicts["datasets"]["transcoder"]["C++"] = {"1": "Had Error"}
  (tmp_path / "verdicts.json").write_text(json.dumps(verdicts))
  assert babelcode_parity.main(argv + ["--babelcode_verdicts", str(tmp_path / "verdicts.json")]) == 0
  rows = json.loads((tmp_path / "out" / "parity.json").read_text())["rows"]
  assert [len(r["differ"]) for r in rows] == [0, 0, 0, 0, 1]
  assert rows[-1]["differ"][0] | {"detail": ""} == {"qid": "1", "codelm": "passed", "babelcode": "Had Error", "detail": ""}
  capsys.readouterr()
  assert babelcode_parity.main(["--data", str(tmp_path / "nowhere"), "--output", str(tmp_path / "o2")]) == 2
  assert "nowhere/raw_datasets/human_eval_questions.jsonl: no such file" in capsys.readouterr().err
