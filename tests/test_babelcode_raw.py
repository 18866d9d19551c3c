"""BabelCode's raw question files read as BabelCode reads them (evaluation/humaneval/raw_questions.py):
the assert shapes it accepts and refuses, literal types (long and double by digit count, int/float
widening, nulls, tuples), the schema from annotations, parameter renaming, fixes, the questions its
generator leaves out, and raw -> parsed -> typed through evaluation.humaneval.babelcode.

Every fixture is written here; the real files (../shared/babelcode) are for the validation command."""

from __future__ import annotations

import json

import pytest

from evaluation.humaneval import babelcode, raw_questions


def raw(qid: str, solution: str, testing_code: str, entry: str = "f", **extra) -> dict:
  return {"id": qid, "title": f"question {qid}", "text": f"Does {qid}.", "solution": solution,
          "testing_code": testing_code, "entry_fn_name": entry, **extra}


def write(path, records) -> str:
  with open(path, "w", encoding="utf-8") as f:
    f.writelines((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records)
  return str(path)


def convert(tmp_path, records, fixes=None) -> raw_questions.Conversion:
  return raw_questions.convert(write(tmp_path / "raw.jsonl", records), fixes)


def one(tmp_path, solution: str, testing_code: str, entry: str = "f") -> dict:
  """The parsed record of one question, which must convert."""
  result = convert(tmp_path, [raw("1", solution, testing_code, entry)])
  assert not result.failures, result.failures
  return result.questions[0]


def refusal(tmp_path, solution: str, testing_code: str) -> tuple[str, str, str]:
  """(stage, error, reason) of one question, which must be left out."""
  result = convert(tmp_path, [raw("1", solution, testing_code)])
  assert not result.questions
  (failure,) = result.failures
  return failure.stage, failure.error, failure.reason


def types(record: dict) -> tuple[list[str], str]:
  return [p["type"] for p in record["schema"]["params"]], record["schema"]["return"]["type"]


F1 = "def f(x):\n  return x\n"
F2 = "def f(a, b):\n  return a\n"


def test_the_three_assert_shapes_and_where_asserts_are_read(tmp_path):
  record = one(tmp_path, F2, "\n".join([
      "assert f(1, 'ab') == True",
      "assert f(2, 'cd')",                    # true
      "assert not f(3, 'ef')",                # false
      "assert f(4, 'gh', key=0) == False, 'a message'",   # the keyword argument is dropped
      "if True:\n  assert f(5, 'ij') == True",            # an assert in an if is read...
      "for i in range(3):\n  assert f(i, 'x') == True",   # ...one in a loop or a function is not
      "def check(candidate):\n  assert candidate(1, 'y') == True",
  ]))
  assert [(c["idx"], c["inputs"], c["outputs"]) for c in record["test_list"]] == [
      (0, {"a": 1, "b": "ab"}, True), (1, {"a": 2, "b": "cd"}, True), (2, {"a": 3, "b": "ef"}, False),
      (3, {"a": 4, "b": "gh"}, False), (4, {"a": 5, "b": "ij"}, True)]
  assert types(record) == (["integer", "string"], "boolean")


def test_a_dropped_keyword_argument_can_leave_too_few_inputs(tmp_path):
  assert refusal(tmp_path, F2, "assert f(1, 'ab') == 3\nassert f(4, b='gh') == 5") == \
      ("convert", "IOPairError", "Incorrect number of inputs")


@pytest.mark.parametrize("testing_code, error, reason", [
    ("assert f(1) != 2", "AssertionToSchemaError", "Only == is supported for operators"),
    ("assert 2 == f(1)", "AssertionToSchemaError", "Only calls on the left side are currently supported"),
    ("assert f(1) == 1 == 1", "AssertionToSchemaError", "The right hand side must be a single value"),
    ("assert f(g(1)) == 1", "LiteralParsingError", "Call is not supported"),
    ("assert f(1) == g(1)", "LiteralParsingError", "Call is not supported"),
    ("assert f(1) == y", "LiteralParsingError", "Name is not supported"),
    ("assert f(1) == 1 + 1", "LiteralParsingError", "BinOp is not supported"),
    ("assert f(1) == 2j", "LiteralParsingError", "complex is a constant but not a primitive"),
    ("assert f(1) == ~1", "LiteralParsingError", "Unsupported unary op Invert"),
    ("assert m.f(1) == 1", "AssertionToSchemaError",
     "The calling function must be a name (i.e. not an attribute)"),
    ("assert set(f(1)) == {1}", "AssertionToSchemaError",
     "Multiple non-nested function calls are not yet supported"),
    ("assert f(1) == 1\nprint(f(2))", "AssertionToSchemaError",
     "Multiple non-nested function calls are not yet supported"),
    ("assert f() == 1", "AssertionToSchemaError", "Calls with no arguments are not supported."),
    ("assert f(1) and f(2)", "AssertionToSchemaError", "Unexpected type of BoolOp for test call"),
    ("assert -f(1)", "AssertionToSchemaError", 'Only "not" is supported for unary operators'),
    ("assert not x", "AssertionToSchemaError", 'When using "not", the operand must be a call'),
    ("import math\nassert f(1) == 1", "AssertionToSchemaError", "Imports are not supported"),
    ("assert f([1, 'a']) == 1", "LiteralParsingError", "Expecting one type, got 2"),
    ("assert f({(1, 2): 3}) == 1", "LiteralParsingError", "Dictionary keys cannot be of type list<integer>"),
    ("assert f(1) == 1\nassert f('a') == 1", "IOPairError", "Inconsistent Types found"),
    ("assert f(None) == 1", "IOPairError", "No Non-Null types found"),
    ("x = 1", "QuestionParsingError", "No test cases were found"),
    ("assert f(1 ==", "SyntaxError", "the testing code does not parse"),
])
def test_each_refused_assert_shape_says_why(tmp_path, testing_code, error, reason):
  assert refusal(tmp_path, F1, testing_code) == ("convert", error, reason)


@pytest.mark.parametrize("solution, error, reason", [
    ("def g(x):\n  return x\n", "QuestionValidationError", "Unable to find entry function"),
    ("def f(x=1):\n  return x\n", "QuestionValidationError", "Defaults are not supported yet"),
    ("def f(*x):\n  return x\n", "QuestionValidationError", "Unsupported argument types in the solution"),
    ("def f(x, *, y):\n  return x\n", "QuestionValidationError", "Unsupported argument types in the solution"),
    ("def f():\n  return 1\n", "QuestionParsingError", "No arguments"),
])
def test_signatures_babelcode_refuses(tmp_path, solution, error, reason):
  assert refusal(tmp_path, solution, "assert f(1) == 1") == ("convert", error, reason)


def test_long_and_double_by_digit_count(tmp_path):
  cases = {"999999999": "integer", "1000000000": "long", "-1000000000": "long", "0.123456": "float",
           "0.1234567": "double", "1234567.0": "float", "12345678.0": "double", "'a'": "character",
           "'ab'": "string", "''": "string", "True": "boolean"}
  for literal, expected in cases.items():
    assert types(one(tmp_path, F1, f"assert f({literal}) == 1"))[0] == [expected], literal


def test_int_and_float_widen_and_an_empty_list_takes_the_later_type(tmp_path):
  record = one(tmp_path, F1, "assert f([1, 2.5]) == 1")
  assert types(record)[0] == ["list<float>"] and record["test_list"][0]["inputs"]["x"] == [1.0, 2.5]
  assert types(one(tmp_path, F1, "assert f(1) == 1\nassert f(2.5) == 1"))[0] == ["float"]
  assert types(one(tmp_path, F1, "assert f(1) == 1\nassert f(12345678901) == 1"))[0] == ["long"]
  assert types(one(tmp_path, F1, "assert f(['a', 'bc']) == 1"))[0] == ["list<string>"]
  # A long and a float do not widen to one type: BabelCode refuses the list.
  assert refusal(tmp_path, F1, "assert f([12345678901, 1.5]) == 1")[2] == "Expecting one type, got 2"
  # [[], [1]] is a list of integer lists; [[1], []] is refused (BabelCode's order rule).
  assert types(one(tmp_path, F1, "assert f([[], [1]]) == 1"))[0] == ["list<list<integer>>"]
  assert refusal(tmp_path, F1, "assert f([[1], []]) == 1")[2] == "Expecting one type, got 2"
  # Across tests, the deeper type wins over an empty one.
  assert types(one(tmp_path, F1, "assert f([]) == 1\nassert f([[1]]) == 1"))[0] == ["list<list<integer>>"]
  # {} is an empty set (as an input it is then refused by the generator: test_questions_the_generator_...).
  assert types(one(tmp_path, F1, "assert f(1) == {1}\nassert f(2) == {}"))[1] == "set<integer>"
  # A map's keys and values are typed.
  record = one(tmp_path, F1, "assert f({'a': 1, 'b': 2.5}) == {1: 'x'}")
  assert types(record) == (["map<string;float>"], "map<integer;character>")
  assert record["test_list"][0]["inputs"]["x"] == {"a": 1.0, "b": 2.5}


def test_the_schema_from_annotations(tmp_path):
  solution = "from typing import List\ndef f(x: List[int], y: float, z: str) -> bool:\n  return True\n"
  record = one(tmp_path, solution, "assert f([], 1, 'a')")
  # The annotation types the empty list, widens the int literal to float and the character to string.
  assert types(record) == (["list<integer>", "float", "string"], "boolean")
  assert record["use_type_annotation"] is True
  assert one(tmp_path, F1, "assert f(1) == 1")["use_type_annotation"] is False
  # An annotation BabelCode cannot read (List[List[int]]) counts as none.
  solution = "from typing import List\ndef f(x: List[List[int]]) -> int:\n  return 1\n"
  assert types(one(tmp_path, solution, "assert f([[1]]) == 1")) == (["list<list<integer>>"], "integer")
  assert refusal(tmp_path, "def f(x: int) -> int:\n  return 1\n", "assert f('ab') == 1") == \
      ("convert", "IOPairError", "Non equal and non reconcilable types")


def test_reserved_and_repeated_parameter_names_are_renamed(tmp_path):
  record = one(tmp_path, "def f(string, Map, a, A, b):\n  return 1\n", "assert f('x', {'k': 1}, 1, 2, 3) == 1")
  assert [p["name"] for p in record["schema"]["params"]] == ["string_arg0", "map_arg1", "a0", "a1", "b"]
  assert record["test_list"][0]["inputs"] == {"string_arg0": "x", "map_arg1": {"k": 1}, "a0": 1, "a1": 2, "b": 3}


def test_tabs_and_crlf_in_a_solution_are_read_and_kept(tmp_path):
  solution = "def isPrime(n):\r\n\tif n < 2:\r\n\t\treturn False\r\n\treturn all(n % d for d in range(2, n))\r\n"
  result = convert(tmp_path, [raw("1", solution, "assert isPrime(7)\r\nassert not isPrime(8)\r\n", entry="isPrime",
                                  other_lang_solutions={"C++": "bool isPrime(int n) { return n > 1; }"})])
  (record,) = result.questions
  # The entry name in BabelCode's conventions: snake_case for Python, camelCase for C++.
  assert record["entry_fn_name"] == "is_prime"
  assert record["solutions"] == {"C++": "bool isPrime(int n) { return n > 1; }",
                                 "Python": solution.replace("isPrime", "is_prime")}
  assert [c["outputs"] for c in record["test_list"]] == [True, False]


def test_naming_conventions():
  assert raw_questions.convention_name("remove_Occ", "snake") == "remove_occ"
  assert raw_questions.convention_name("remove_Occ", "camel") == "removeOcc"
  assert raw_questions.convention_name("sumOfSquares2d", "pascal") == "SumOfSquares2D"
  assert raw_questions.convention_name("HTTPServer", "snake") == "http_server"


def test_tuples_one_type_is_a_list_and_mixed_types_are_left_out_by_the_generator(tmp_path):
  record = one(tmp_path, F1, "assert f((1, 2)) == (3, 4)")
  assert types(record) == (["tuple<integer|integer>"], "tuple<integer|integer>")
  assert refusal(tmp_path, F1, "assert f(1) == (1, 'a')") == \
      ("generate", "SchemaTypeError", "a tuple of mixed element types is not supported by any language")


def test_null_inputs_and_outputs(tmp_path):
  # A null list input is kept (the generator reads it as empty); a null int input leaves the question out.
  record = one(tmp_path, F1, "assert f([1]) == 1\nassert f(None) == 0")
  assert record["test_list"][1]["inputs"]["x"] is None
  assert refusal(tmp_path, F1, "assert f((1, 2)) == 1\nassert f((1, None)) == 1") == \
      ("generate", "SchemaTypeError", "integer does not support null")
  # A null boolean output is false; a null int output stays null and is named in the summary.
  result = convert(tmp_path, [raw("b", F1, "assert f(1) == True\nassert f(2) == None"),
                              raw("i", F1, "assert f(1) == 1\nassert f(2) == None"),
                              raw("s", F1, "assert f(1) == 'ab'\nassert f(2) == None")])
  outputs = {q["qid"]: [c["outputs"] for c in q["test_list"]] for q in result.questions}
  assert outputs == {"b": [True, False], "i": [1, None], "s": ["ab", None]}
  assert result.null_outputs == ["i"]


@pytest.mark.parametrize("testing_code, error, reason", [
    ("assert f([1]) == {(1, 2)}", "QuestionValidationError", "Could not convert nested values to set"),
    ("assert f({10}) == 1\nassert f({}) == 2", "SchemaTypeError", "Value is not of type list"),
])
def test_questions_the_generator_leaves_out(tmp_path, testing_code, error, reason):
  assert refusal(tmp_path, F1, testing_code) == ("generate", error, reason)


def test_fixes_replace_fields_the_later_fix_counts_and_bad_records_are_reported(tmp_path):
  records = [raw("1", F1, "assert f(1) == y"), raw("2", F1, "assert f(1) == 1"), raw("2", F1, "assert f(2) == 2"),
             {"id": "3", "title": "no solution", "testing_code": "assert f(1) == 1", "entry_fn_name": "f"}]
  fixes = raw_questions.read_fixes(write(tmp_path / "fixes.jsonl", [
      {"id": "1", "testing_code": "assert f(1) == 0"}, {"id": "1", "testing_code": "assert f(1) == 2"},
      {"id": "9", "text": "unused"}]))
  result = convert(tmp_path, records, fixes)
  assert [(q["qid"], q["test_list"][0]["outputs"]) for q in result.questions] == [("1", 2), ("2", 1)]
  assert [(f.qid, f.line, f.stage, f.reason) for f in result.failures] == [
      ("2", 3, "read", "id repeats line 2"), ("3", 4, "read", "missing solution")]
  assert (result.fixes_applied, result.fixes_unused) == (1, ["9"])


def test_raw_to_parsed_to_typed_end_to_end(tmp_path, capsys):
  solution = "def maxOf(nums, k):\n  return sorted(nums)[-k:]\n"
  records = [raw("7", solution, "assert maxOf([3, 1, 2], 2) == [2, 3]\nassert maxOf([], 0) == []", entry="maxOf"),
             raw("8", "def g(string, x):\n\treturn string * x\r\n", "assert g('ab', 2) == 'abab'", entry="g"),
             raw("9", F1, "assert f(1) == (1, 'a')")]
  parsed, failures = tmp_path / "parsed.jsonl", tmp_path / "failures.jsonl"
  assert raw_questions.main(["--raw", write(tmp_path / "raw.jsonl", records), "--output", str(parsed),
                             "--failures", str(failures)]) == 0
  out = capsys.readouterr().out
  assert "read 3 questions" in out and "wrote 2 parsed questions" in out
  assert "1  generate  SchemaTypeError: a tuple of mixed element types is not supported" in out
  assert [json.loads(line)["qid"] for line in failures.read_text().splitlines()] == ["9"]
  questions, left_out = babelcode.convert(str(parsed))
  assert left_out == []
  by_qid = {q.qid: q for q in questions}
  first = by_qid["7"]
  assert (first.entry_fn_name, [(p.name, str(p.type)) for p in first.params], str(first.return_type)) == \
      ("max_of", [("nums", "list<int>"), ("k", "int")], "list<int>")
  assert [(list(c.inputs), c.output) for c in first.test_cases] == [([[3, 1, 2], 2], [2, 3]), ([[], 0], [])]
  assert dict(first.solutions)["python"] == solution.replace("maxOf", "max_of")
  assert [p.name for p in by_qid["8"].params] == ["string_arg0", "x"]


def test_bad_input_is_a_clear_error_and_exit_2(tmp_path, capsys):
  parsed, failures = str(tmp_path / "p.jsonl"), str(tmp_path / "f.jsonl")
  good = json.dumps(raw("1", F1, "assert f(1) == 1"))
  bad = write(tmp_path / "bad.jsonl", [good, "{not json", good])
  for args, expected in [(["--raw", str(tmp_path / "missing.jsonl")], "missing.jsonl"),
                         (["--raw", bad], f"{bad}:2: not valid JSON"),
                         (["--raw", bad, "--fixes", str(tmp_path / "nofixes.jsonl")], "--fixes: "),
                         (["--raw", bad, "--fixes", bad], f"--fixes: {bad}:2: not valid JSON")]:
    with pytest.raises(SystemExit) as exit_:
      raw_questions.main(args + ["--output", parsed, "--failures", failures])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and expected in err and "Traceback" not in err, err
