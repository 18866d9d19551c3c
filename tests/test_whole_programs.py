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

from evaluation import resumable, score
from evaluation.humaneval import babelcode
from sandbox import execution, typed
from sandbox.judge import Case, Status, judge
from sandbox.renderers import MODULES, base, get
from toolchains import renderer_or_skip

# A program that must finish gets room a busy 2-core host cannot eat (a JVM or mono starting); only the
# one that loops runs under the short limit, which it must reach.
LIMITS = execution.Limits(timeout_s=30, compile_timeout_s=120)
LOOP_LIMITS = execution.Limits(timeout_s=3, compile_timeout_s=120)
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
        "entry": "count_chars",
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
        "entry": "countChars",
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
        "entry": "countChars",
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
        "entry": "count_chars",
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
        "entry": "countChars",
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
        "entry": "count_chars",
        "correct": "OFFSET <- 0L\nhelper <- function(s) nchar(s) + OFFSET\n"
                   "count_chars <- function(string, limit) {\n  return(min(helper(string), limit))\n}\n",
        "tabs_crlf": "OFFSET <- 0L\r\ncount_chars <- function(string, limit) {\r\n\tn <- nchar(string) + OFFSET\r\n"
                     "\tif (n > limit) {\r\n\t\treturn(limit)\r\n\t}\r\n\treturn(n)\r\n}",
        "wrong": "count_chars <- function(s, limit) limit + 1L\n",
        "throws": "count_chars <- function(s, limit) stop('no')\n",
        "loops": "count_chars <- function(s, limit) { while (TRUE) {} }\n",
        "forges": f"cat('{FORGED}')\nquit(save = 'no', status = 0)\ncount_chars <- function(s, limit) 0L\n",
    },
    "haskell": {
        "entry": "countChars",
        "correct": "import Data.Char (ord)\n\noffset :: Integer\noffset = 0\n\n"
                   "helper :: String -> Integer\nhelper s = List.genericLength [c | c <- s, ord c >= 0] + offset\n\n"
                   "countChars :: String -> Integer -> Integer\ncountChars string limit = min (helper string) limit\n",
        "tabs_crlf": "offset :: Integer\r\noffset = 0\r\ncountChars :: String -> Integer -> Integer\r\n"
                     "countChars s limit =\r\n\tlet n = List.genericLength s + offset\r\n\tin if n > limit then limit else n",
        "wrong": "countChars :: String -> Integer -> Integer\ncountChars s limit = limit + 1\n",
        "throws": "countChars :: String -> Integer -> Integer\ncountChars s limit = error \"no\"\n",
        "loops": "countChars :: String -> Integer -> Integer\ncountChars s limit = go limit\n"
                 "  where go n = if n < 0 then n else go (n + 1)\n",
        # No code runs before `main` in Haskell: it forges and exits (C's exit) at the first call.
        "forges": "import System.IO (hFlush, stdout)\nimport System.IO.Unsafe (unsafePerformIO)\n"
                  "foreign import ccall \"exit\" cExit :: Int -> IO ()\ncountChars :: String -> Integer -> Integer\n"
                  f"countChars s limit = unsafePerformIO (putStr \"{FORGED}\" >> hFlush stdout >> cExit 0 >> return 0)\n",
    },
    "typescript": {
        "entry": "countChars",
        "correct": "const OFFSET: number = 0;\nfunction helper(s: string): number { return s.length + OFFSET; }\n"
                   "function countChars(string: string, limit: number): number {\n  return Math.min(helper(string), limit);\n}\n",
        "tabs_crlf": "const OFFSET = 0;\r\nfunction countChars(str: string, limit: number): number {\r\n"
                     "\tconst n: number = str.length + OFFSET;\r\n\treturn n > limit ? limit : n;\r\n}",
        "wrong": "function countChars(s: string, limit: number): number { return limit + 1; }\n",
        "throws": "function countChars(s: string, limit: number): number { throw new Error('no'); }\n",
        "loops": "function countChars(s: string, limit: number): number { while (true) {} }\n",
        "forges": f"process.stdout.write('{FORGED}');\nprocess.exit(0);\n"
                  "function countChars(s: string, limit: number): number { return 0; }\n",
    },
    "go": {
        "entry": "countChars",
        # Its own import after BabelCode's head, which already imports math.
        "correct": 'import "strings"\n\nconst offset = 0\n\n'
                   "func helperLen(s string) int { return len(strings.ToLower(s)) + offset }\n\n"
                   "func countChars(string_arg0 string, limit int) int {\n"
                   "\treturn int(math.Min(float64(helperLen(string_arg0)), float64(limit)))\n}\n",
        "tabs_crlf": "const offset = 0\r\nfunc countChars(str string, limit int) int {\r\n\tn := len(str) + offset\r\n"
                     "\tif n > limit {\r\n\t\treturn limit\r\n\t}\r\n\treturn n\r\n}",
        "wrong": "func countChars(s string, limit int) int { return limit + 1 }\n",
        "throws": 'func countChars(s string, limit int) int { panic("no") }\n',
        "loops": "func countChars(s string, limit int) int {\n\tfor {\n\t}\n}\n",
        "forges": f'import "os"\n\nfunc init() {{\n\tfmt.Print("{FORGED}")\n\tos.Exit(0)\n}}\n\n'
                  "func countChars(s string, limit int) int { return 0 }\n",
    },
    "rust": {
        "entry": "count_chars",
        # `min` from BabelCode's head (std::cmp::*); a helper named like the harness's libc `dup`.
        "correct": "use std::collections::BTreeSet;\n\nconst OFFSET: usize = 0;\n\n"
                   "fn dup(s: &str) -> usize {\n    let seen: BTreeSet<char> = s.chars().collect();\n"
                   "    s.chars().count() + OFFSET + seen.len() * 0\n}\n\n"
                   "pub fn count_chars(string_arg0: String, limit: i32) -> i32 {\n"
                   "    min(dup(&string_arg0) as i32, limit)\n}\n",
        "tabs_crlf": "const OFFSET: i32 = 0;\r\npub fn count_chars(s: String, limit: i32) -> i32 {\r\n"
                     "\tlet n = s.len() as i32 + OFFSET;\r\n\tif n > limit {\r\n\t\treturn limit;\r\n\t}\r\n\tn\r\n}",
        "wrong": "pub fn count_chars(s: String, limit: i32) -> i32 { limit + 1 }\n",
        "throws": 'pub fn count_chars(s: String, limit: i32) -> i32 { panic!("no") }\n',
        "loops": "pub fn count_chars(s: String, limit: i32) -> i32 { loop {} }\n",
        # A constructor in .init_array runs before main.
        "forges": '#[used]\n#[link_section = ".init_array"]\nstatic FORGE: extern "C" fn() = forge;\n'
                  f'extern "C" fn forge() {{\n    use std::io::Write;\n    print!("{FORGED}");\n'
                  "    std::io::stdout().flush().unwrap();\n    std::process::exit(0);\n}\n"
                  "pub fn count_chars(s: String, limit: i32) -> i32 { 0 }\n",
    },
    "java": {
        "entry": "countChars",
        # A public class (BabelCode's `java file.java` takes it in any file), a helper class, boxed types.
        "correct": "final class Helper {\n    static final int OFFSET = 0;\n"
                   "    static int size(String s) { return s.length() + OFFSET; }\n}\n\n"
                   "public class Solution {\n    public Integer countChars(String string_arg0, Integer limit) {\n"
                   "        return Math.min(Helper.size(string_arg0), limit);\n    }\n}\n",
        "tabs_crlf": "class Solution {\r\n\tstatic final int OFFSET = 0;\r\n\tpublic int countChars(String s, int limit) {\r\n"
                     "\t\tint n = s.length() + OFFSET;\r\n\t\treturn n > limit ? limit : n;\r\n\t}\r\n}",
        "wrong": "class Solution {\n    public int countChars(String s, int limit) { return limit + 1; }\n}\n",
        "throws": "class Solution {\n    public int countChars(String s, int limit) { throw new IllegalStateException(\"no\"); }\n}\n",
        "loops": "class Solution {\n    public int countChars(String s, int limit) { while (true) { } }\n}\n",
        # A static initialiser runs when the harness first touches Solution, before any record.
        "forges": f"class Solution {{\n    static {{\n        System.out.print(\"{FORGED}\");\n        System.out.flush();\n"
                  "        System.exit(0);\n    }\n    public int countChars(String s, int limit) { return 0; }\n}\n",
    },
    "csharp": {
        "entry": "CountChars",
        # Its own using directive after BabelCode's head; a helper class; C#'s verbatim `@string`.
        "correct": "using System.Text.RegularExpressions;\n\nstatic class Helper {\n    public const int OFFSET = 0;\n"
                   "    public static int Size(string s) { return Regex.Replace(s, \"x\", \"x\").Length + OFFSET; }\n}\n\n"
                   "public class Solution {\n    public int CountChars(string @string, int limit) {\n"
                   "        return Math.Min(Helper.Size(@string), limit);\n    }\n}\n",
        "tabs_crlf": "class Solution {\r\n\tconst int OFFSET = 0;\r\n\tpublic int CountChars(string s, int limit) {\r\n"
                     "\t\tint n = s.Length + OFFSET;\r\n\t\treturn n > limit ? limit : n;\r\n\t}\r\n}",
        "wrong": "class Solution {\n    public int CountChars(string s, int limit) { return limit + 1; }\n}\n",
        "throws": "class Solution {\n    public int CountChars(string s, int limit) { throw new InvalidOperationException(\"no\"); }\n}\n",
        "loops": "class Solution {\n    public int CountChars(string s, int limit) { while (true) { } }\n}\n",
        # A static constructor runs when the harness first touches Solution, before any record.
        "forges": f"class Solution {{\n    static Solution() {{\n        Console.Write(\"{FORGED}\");\n        Console.Out.Flush();\n"
                  "        Environment.Exit(0);\n    }\n    public int CountChars(string s, int limit) { return 0; }\n}\n",
    },
}


def run(renderer, code: str, question: typed.Question = QUESTION, limits: execution.Limits = LIMITS):
  return judge(question, execution.execute(renderer.whole_program(question, code), renderer.toolchain, limits))


def test_the_languages_with_whole_programs_and_their_entry_names():
  assert {name for name in MODULES if get(name).whole_programs} == set(PROGRAMS)
  assert {name: get(name).entry_name(QUESTION) for name in PROGRAMS} == {
      name: programs["entry"] for name, programs in PROGRAMS.items()}


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
  assert run(renderer, programs["loops"], limits=LOOP_LIMITS).status is Status.TIMEOUT
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


def test_the_scorer_takes_whole_programs_and_resumes(tmp_path):
  renderer_or_skip("python")
  benchmark = tmp_path / "questions.jsonl"
  typed.write_questions([QUESTION], str(benchmark))
  predictions = tmp_path / "predictions.jsonl"
  records = [{"qid": "w/0", "language": "Python", "code": PROGRAMS["python"]["correct"]},
             {"qid": "w/0", "language": "Python", "code": PROGRAMS["python"]["wrong"]}]
  predictions.write_text("".join(json.dumps(r) + "\n" for r in records))
  output = tmp_path / "out"
  argv = ["--predictions", str(predictions), "--benchmark", str(benchmark), "--output", str(output),
          "--whole_programs", "--workers", "1", "--k", "1"]
  assert score.main(argv) == 0
  metrics = json.loads((output / "metrics.json").read_text())
  assert metrics["whole_programs"] is True and metrics["python"]["counts"]["passed"] == 1
  assert metrics["python"]["counts"]["failed"] == 1
  results = [json.loads(line) for line in (output / "results.jsonl").read_text().splitlines()]
  assert [(r["sample_id"], r["status"]) for r in results] == [(0, "passed"), (1, "failed")]
  assert score.main(argv) == 0   # resumed: nothing left to score
  assert json.loads((output / "metrics.json").read_text())["scored_now"] == 0
  assert "python" not in json.loads((output / "metrics.json").read_text())["not_evaluated"]
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
  assert "gold verdicts agreeing with BabelCode's: 4 of 5 (80.0%)" in (tmp_path / "out" / "parity.md").read_text()
  assert rows[-1]["differ"][0] | {"detail": ""} == {"qid": "1", "codelm": "passed", "babelcode": "Had Error", "detail": ""}
  capsys.readouterr()
  assert babelcode_parity.main(["--data", str(tmp_path / "nowhere"), "--output", str(tmp_path / "o2")]) == 2
  assert "nowhere/raw_datasets/human_eval_questions.jsonl: no such file" in capsys.readouterr().err


# Every declared leaf but boolean and string (integer vs long, float vs double, character) and each
# container, in and out: a map with a negative integer key as the result.
DECLARED_QUESTION = typed.question_from_json({
    "qid": "w/4", "entry_fn_name": "mixed_types", "description": "",
    "params": [{"name": "xs", "type": "list<int>"}, {"name": "big", "type": "int"}, {"name": "f", "type": "float"},
               {"name": "d", "type": "float"}, {"name": "c", "type": "string"},
               {"name": "m", "type": "map<string,list<float>>"}, {"name": "s", "type": "set<int>"}],
    "return_type": "map<int,list<float>>",
    "declared_types": {"params": ["list<integer>", "long", "float", "double", "character",
                                  "map<character,list<double>>", "set<long>"],
                       "return": "map<integer,list<float>>"},
    "test_cases": [{"idx": 0, "inputs": [[1, 2], 10000000000, 0.5, 0.25, "a", [["a", [0.75]]], [3, 4]],
                    "output": [[0, [3.0, 10000000000.0, 0.5, 0.25, 97.0, 0.75, 7.0]], [-1, []]]}]})


def test_haskell_whole_programs_get_the_declared_types():
  """BabelCode's Haskell types: integer and long are Integer, float and double Double, character
  Char, Map.Map and Set.Set: a solution declared with them compiles (an Int would not) and its
  value is recorded."""
  renderer = renderer_or_skip("haskell")
  code = ("mixedTypes :: [Integer] -> Integer -> Double -> Double -> Char -> Map.Map Char [Double] -> Set.Set Integer\n"
          "  -> Map.Map Integer [Double]\n"
          "mixedTypes xs big f d c m s = Map.fromList [(0, [fromIntegral (sum xs), fromIntegral big, f, d,\n"
          "  fromIntegral (fromEnum c), head (m Map.! c), fromIntegral (sum (Set.toList s))]), (-1, [])]\n")
  assert run(renderer, code, DECLARED_QUESTION).status is Status.PASSED


def test_typescript_whole_programs_get_the_declared_types():
  """BabelCode's TypeScript types: number for every number, string for a character, Array, Set and
  Record for a map, whose values are plain objects in and out (a Map would have no m[c])."""
  renderer = renderer_or_skip("typescript")
  code = ("function mixedTypes(xs: Array<number>, big: number, f: number, d: number, c: string,\n"
          "    m: Record<string,Array<number>>, s: Set<number>): Record<number,Array<number>> {\n"
          "  let total = 0;\n  s.forEach((x) => { total += x; });\n"
          "  return {0: [xs[0] + xs[1], big, f, d, c.charCodeAt(0), m[c][0], total], [-1]: []};\n}\n")
  assert run(renderer, code, DECLARED_QUESTION).status is Status.PASSED
  # A Map where BabelCode's Record is declared does not compile, as in BabelCode's driver.
  as_map = code.replace("m: Record<string,Array<number>>", "m: Map<string,Array<number>>").replace("m[c][0]", "m.get(c)[0]")
  assert run(renderer, as_map, DECLARED_QUESTION).status is Status.COMPILE_ERROR


# A character parameter and a set of characters returned (a rune / char recorded as its string).
CHARS_QUESTION = typed.question_from_json({
    "qid": "w/5", "entry_fn_name": "other_chars", "description": "",
    "params": [{"name": "s", "type": "string"}, {"name": "c", "type": "string"}], "return_type": "set<string>",
    "declared_types": {"params": ["string", "character"], "return": "set<character>"},
    "test_cases": [{"idx": 0, "inputs": ["ab\u00e9a", "b"], "output": ["a", "\u00e9"]}]})


def test_go_whole_programs_get_the_declared_types():
  """BabelCode's Go types: integer int, long int64 (an int would not compile), float and double
  float64, character rune, map[T]bool for a set: a solution declared with them compiles and its
  value is recorded."""
  renderer = renderer_or_skip("go")
  code = ("func mixedTypes(xs []int, big int64, f float64, d float64, c rune, m map[rune][]float64,\n"
          "\ts map[int64]bool) map[int][]float64 {\n\ttotal := int64(0)\n\tfor x := range s {\n\t\ttotal += x\n\t}\n"
          "\treturn map[int][]float64{0: {float64(xs[0] + xs[1]), float64(big), f, d, float64(c), m[c][0],\n"
          "\t\tfloat64(total)}, -1: {}}\n}\n")
  assert run(renderer, code, DECLARED_QUESTION).status is Status.PASSED
  as_int = code.replace("big int64", "big int")
  assert run(renderer, as_int, DECLARED_QUESTION).status is Status.COMPILE_ERROR
  chars = ("func otherChars(s string, c rune) map[rune]bool {\n\tout := map[rune]bool{}\n"
           "\tfor _, r := range s {\n\t\tif r != c {\n\t\t\tout[r] = true\n\t\t}\n\t}\n\treturn out\n}\n")
  assert run(renderer, chars, CHARS_QUESTION).status is Status.PASSED


def test_rust_whole_programs_get_the_declared_types():
  """BabelCode's Rust types: integer i32, long i64, float f32, double f64, character char, Vec,
  HashMap, HashSet: a solution declared with them compiles (an i64 for an integer would not) and its
  value is recorded; edition 2015, as BabelCode's plain `rustc` (`async` is a name there)."""
  renderer = renderer_or_skip("rust")
  code = ("pub fn mixed_types(xs: Vec<i32>, big: i64, f: f32, d: f64, c: char, m: HashMap<char, Vec<f64>>,\n"
          "    s: HashSet<i64>) -> HashMap<i32, Vec<f32>> {\n    let async: i64 = s.iter().sum();\n"
          "    let mut out = HashMap::new();\n"
          "    out.insert(0, vec![(xs[0] + xs[1]) as f32, big as f32, f, d as f32, c as u32 as f32, m[&c][0] as f32,\n"
          "        async as f32]);\n    out.insert(-1, Vec::new());\n    out\n}\n")
  assert run(renderer, code, DECLARED_QUESTION).status is Status.PASSED
  as_long = code.replace("xs: Vec<i32>", "xs: Vec<i64>")
  assert run(renderer, as_long, DECLARED_QUESTION).status is Status.COMPILE_ERROR
  chars = ("pub fn other_chars(s: String, c: char) -> HashSet<char> {\n"
           "    s.chars().filter(|&x| x != c).collect()\n}\n")
  assert run(renderer, chars, CHARS_QUESTION).status is Status.PASSED


def test_java_whole_programs_get_the_declared_types():
  """BabelCode's Java types, boxed even at the top (Integer, Long, Float, Double, Character),
  ArrayList, Map and HashSet: a solution declared with them (or their primitives) compiles, an
  ArrayList<Long> for a list of integers does not, and a returned Character is recorded as a string;
  also without the precompiled runtime. The code's own import does not compile, as in BabelCode's
  test program, where the code follows its classes."""
  renderer = renderer_or_skip("java")
  code = ("class Solution {\n"
          "    public Map<Integer, ArrayList<Float>> mixedTypes(ArrayList<Integer> xs, long big, float f, Double d,\n"
          "            char c, Map<Character, ArrayList<Double>> m, HashSet<Long> s) {\n"
          "        long total = 0;\n        for (long x : s) total += x;\n"
          "        Map<Integer, ArrayList<Float>> out = new HashMap<>();\n"
          "        out.put(0, new ArrayList<>(Arrays.asList((float) (xs.get(0) + xs.get(1)), (float) big, f,\n"
          "            d.floatValue(), (float) c, m.get(c).get(0).floatValue(), (float) total)));\n"
          "        out.put(-1, new ArrayList<>());\n        return out;\n    }\n}\n")
  assert run(renderer, code, DECLARED_QUESTION).status is Status.PASSED
  bare = renderer.whole_program(DECLARED_QUESTION, code, runtime=None)
  assert judge(DECLARED_QUESTION, execution.execute(bare, renderer.toolchain, LIMITS)).status is Status.PASSED
  as_long = code.replace("ArrayList<Integer> xs", "ArrayList<Long> xs")
  assert run(renderer, as_long, DECLARED_QUESTION).status is Status.COMPILE_ERROR
  chars = ("class Solution {\n    public HashSet<Character> otherChars(String s, Character c) {\n"
           "        HashSet<Character> out = new HashSet<>();\n"
           "        for (char x : s.toCharArray()) if (x != c) out.add(x);\n        return out;\n    }\n}\n")
  assert run(renderer, chars, CHARS_QUESTION).status is Status.PASSED
  imports = "import java.util.stream.*;\n\n" + PROGRAMS["java"]["correct"]
  assert run(renderer, imports).status is Status.COMPILE_ERROR


def test_csharp_whole_programs_get_the_declared_types():
  """BabelCode's C# types: int, long, float, decimal for a double, char, List, Dictionary, HashSet: a
  solution declared with them compiles (a double for a decimal does not), and a returned decimal and
  char are recorded as the typed float and string; also without the precompiled runtime."""
  renderer = renderer_or_skip("csharp")
  code = ("public class Solution {\n"
          "    public Dictionary<int, List<float>> MixedTypes(List<int> xs, long big, float f, decimal d, char c,\n"
          "            Dictionary<char, List<decimal>> m, HashSet<long> s) {\n"
          "        return new Dictionary<int, List<float>> {\n"
          "            {0, new List<float> {xs[0] + xs[1], big, f, (float) d, c, (float) m[c][0], s.Sum()}},\n"
          "            {-1, new List<float>()}};\n    }\n}\n")
  assert run(renderer, code, DECLARED_QUESTION).status is Status.PASSED
  as_double = code.replace("decimal d", "double d")
  assert run(renderer, as_double, DECLARED_QUESTION).status is Status.COMPILE_ERROR
  chars = ("public class Solution {\n    public HashSet<char> OtherChars(string s, char c) {\n"
           "        return new HashSet<char>(s.Where(x => x != c));\n    }\n}\n")
  assert run(renderer, chars, CHARS_QUESTION).status is Status.PASSED
  doubles = typed.question_from_json({
      "qid": "w/6", "entry_fn_name": "scaled", "description": "",
      "params": [{"name": "xs", "type": "list<float>"}, {"name": "c", "type": "string"}],
      "return_type": "map<string,list<float>>",
      "declared_types": {"params": ["list<double>", "character"], "return": "map<character,list<double>>"},
      "test_cases": [{"idx": 0, "inputs": [[0.1, 2.5], "z"], "output": [["z", [0.2, 5.0]]]}]})
  scaled = ("public class Solution {\n    public Dictionary<char, List<decimal>> Scaled(List<decimal> xs, char c) {\n"
            "        return new Dictionary<char, List<decimal>> {{c, xs.Select(x => x * 2).ToList()}};\n    }\n}\n")
  assert run(renderer, scaled, doubles).status is Status.PASSED
  bare = renderer.whole_program(doubles, scaled, runtime=None)
  assert judge(doubles, execution.execute(bare, renderer.toolchain, LIMITS)).status is Status.PASSED


def test_javascript_whole_programs_take_and_give_babelcodes_maps_and_sets():
  """BabelCode's JavaScript writes a map as an object literal and a set as a Set, and compares
  JSON.stringify texts: a solution indexing the map object passes, its returned object is read back
  as the map (integer keys from property names), and a returned Map, `{}` to BabelCode, is refused."""
  renderer = renderer_or_skip("javascript")
  code = ("function mixedTypes(xs, big, f, d, c, m, s) {\n  let total = 0;\n  s.forEach((x) => { total += x; });\n"
          "  return {0: [xs[0] + xs[1], big, f, d, c.charCodeAt(0), m[c][0], total], [-1]: []};\n}\n")
  assert run(renderer, code, DECLARED_QUESTION).status is Status.PASSED
  as_map = code.replace("return {0: [", "return new Map([[0, [").replace("total], [-1]: []};", "total]], [-1, []]]);")
  outcome = run(renderer, as_map, DECLARED_QUESTION)
  assert outcome.status is Status.FAILED and "expected an object for a map, got Map" in outcome.detail, outcome


def test_php_whole_programs_take_and_give_babelcodes_sets():
  """BabelCode's PHP set is an array from each member to true, in and out (its test compares
  serialize() texts); a list of the members returned for a set is refused. A completion's set stays
  the list of members codelm's prompt documents."""
  renderer = renderer_or_skip("php")
  question = typed.question_from_json({
      "qid": "w/7", "entry_fn_name": "set_stuff", "description": "",
      "params": [{"name": "s", "type": "set<int>"}, {"name": "words", "type": "list<string>"}],
      "return_type": "tuple<set<string>,list<int>>",
      "test_cases": [{"idx": 0, "inputs": [[3, 1], ["1", "b", "b"]], "output": [["1", "b"], [1, 3]]}]})
  keys = ("function setStuff($s, $words) {\n  $out = [];\n  foreach ($words as $w) $out[$w] = true;\n"
          "  $members = array_keys($s);\n  sort($members);\n  return [$out, $members];\n}\n")
  assert run(renderer, keys, question).status is Status.PASSED
  members = "function setStuff($s, $words) { return [array_values(array_unique($words)), [1, 3]]; }\n"
  outcome = run(renderer, members, question)
  assert outcome.status is Status.FAILED and "an array from each member to true" in outcome.detail, outcome
  completion = judge(question, execution.execute(renderer.program(question, "  return [['b', '1'], [1, 3]];\n}\n"),
                                                 renderer.toolchain, LIMITS))
  assert completion.status is Status.PASSED


def test_a_renderer_without_whole_programs_is_listed_as_not_evaluated(monkeypatch):
  """Every renderer builds them today; one that does not (base.Renderer's) is named, not crashed on."""
  monkeypatch.setattr(type(get("go")), "whole_program", base.Renderer.whole_program)
  assert not get("go").whole_programs
  predictions = [resumable.Prediction("w/0", 0, "go", "func countChars() {}", 1),
                 resumable.Prediction("w/0", 0, "python", PROGRAMS["python"]["correct"], 2)]
  runnable, not_evaluated = score.runnable_languages(predictions, ["go", "python"], check_toolchains=False, whole=True)
  assert runnable == ["python"]
  assert not_evaluated["go"] == "whole programs (--whole_programs) are not supported in this language yet"


def test_the_parity_script_reads_babelcodes_runs_and_merges_them(tmp_path, capsys):
  """--from_babelcode_eval: BabelCode's pred_results.jsonl per dataset (or per part, `<name>_<part>`)
  become {dataset: {language: {qid: outcome}}}; a later run's languages replace the file's, the rest
  stays; a result without an outcome is one line naming the file and line, exit 2."""
  import sys
  sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench"))
  import babelcode_parity

  def run_dir(name: str, results: list[dict]):
    (tmp_path / "eval" / name).mkdir(parents=True)
    (tmp_path / "eval" / name / "pred_results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in results))

  run_dir("transcoder_python", [{"qid": "2", "language": "Python", "outcome": "Passed"},
                                {"qid": "10", "language": "Python", "outcome": "Failed Tests"}])
  run_dir("mbpp", [{"qid": "7", "language": "Python", "outcome": "Passed"}])
  verdicts = tmp_path / "verdicts.json"
  argv = ["--from_babelcode_eval", str(tmp_path / "eval"), "--write_verdicts", str(verdicts)]
  assert babelcode_parity.main(argv) == 0
  first = json.loads(verdicts.read_text())
  assert first["datasets"] == {"mbpp": {"Python": {"7": "Passed"}},
                               "transcoder": {"Python": {"2": "Passed", "10": "Failed Tests"}}}
  assert first["missing"] == ["human_eval", "tp3"]
  # A later run of Transcoder's C++ alone, into the same file: Python's verdicts are kept.
  (tmp_path / "eval2").mkdir()
  argv2 = ["--from_babelcode_eval", str(tmp_path / "eval2"), "--write_verdicts", str(verdicts)]
  (tmp_path / "eval2" / "transcoder_cpp").mkdir()
  (tmp_path / "eval2" / "transcoder_cpp" / "pred_results.jsonl").write_text(
      json.dumps({"qid": "2", "language": "C++", "outcome": "Had Error"}) + "\n")
  assert babelcode_parity.main(argv2) == 0
  merged = json.loads(verdicts.read_text())
  assert merged["datasets"]["transcoder"] == {"Python": {"2": "Passed", "10": "Failed Tests"}, "C++": {"2": "Had Error"}}
  assert merged["datasets"]["mbpp"] == first["datasets"]["mbpp"] and merged["missing"] == ["human_eval", "tp3"]
  (tmp_path / "eval2" / "transcoder_cpp" / "pred_results.jsonl").write_text(json.dumps({"qid": "2", "language": "C++"}) + "\n")
  capsys.readouterr()
  assert babelcode_parity.main(argv2) == 2
  assert "transcoder_cpp/pred_results.jsonl:1: a result needs qid, language and outcome" in capsys.readouterr().err


def test_java_and_csharp_write_a_declared_float_as_a_literal_only_where_the_compiler_keeps_it():
  """1e40f overflows and 1e-50f becomes 0 in javac and mcs: those are cast from the double instead."""
  from sandbox.renderers import csharp, java, literals
  assert [literals.single_literal_keeps(v) for v in (0.5, 0.0, 1e40, 1e-50, 3.4e38)] == [True, True, False, False, True]
  float_type = typed.parse_type("float", typed.DECLARED_SCALARS)
  assert [java.declared_literal(float_type, v) for v in (0.5, 1e40)] == ["0.5f", "(float) 1e+40"]
  assert [csharp.declared_literal(float_type, v) for v in (0.5, 1e-50)] == ["0.5f", "(float) 1e-50"]
