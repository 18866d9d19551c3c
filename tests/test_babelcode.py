"""BabelCode's question format (BC-TP3, BC-Transcoder, BC-MBPP) converted to typed questions: every
type of its type language, nulls, map keys, float or double, malformed questions reported by line;
then prompts (generation, translation from C++) and scoring in every language, right and wrong.

tests/data/babelcode_questions.jsonl is written in BabelCode's format by hand: the BabelCode forms of
tests/data/typed_questions.jsonl's questions that BabelCode's types can state (no optional; a tuple of
one element type is a list there), plus a null input each for a list and a string."""

from __future__ import annotations

import json
import os

import pytest

from evaluation import prompts, score
from evaluation.humaneval import babelcode
from sandbox import execution, typed
from sandbox.judge import Status
from sandbox.renderers import MODULES, get

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURE = os.path.join(HERE, "data", "babelcode_questions.jsonl")
TYPED = {q.qid: q for q in typed.read_questions(os.path.join(HERE, "data", "typed_questions.jsonl"))}
NULL_CASES = {"HumanEval/0": 4, "HumanEval/27": 9}   # the added cases with a null input
LANGUAGES = [name for name in MODULES if not execution.missing(get(name).toolchain)]


def write(path, records) -> str:
  with open(path, "w", encoding="utf-8") as f:
    f.writelines((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records)
  return str(path)


@pytest.mark.parametrize("babel, ours", [
    ("boolean", "bool"), ("integer", "int"), ("long", "int"), ("float", "float"), ("double", "float"),
    ("character", "string"), ("string", "string"),
    ("list<integer>", "list<int>"), ("integer[]", "list<int>"), ("string[][]", "list<list<string>>"),
    ("set<character>", "set<string>"), ("set<long>", "set<int>"),
    ("map<string;list<double>>", "map<string,list<float>>"), ("map<integer;string>", "map<int,string>"),
    ("map<character;map<long;boolean>>", "map<string,map<int,bool>>"),
    ("tuple<integer|string>", "tuple<int,string>"), ("tuple<list<integer>|map<string;boolean>|double>",
                                                     "tuple<list<int>,map<string,bool>,float>"),
    ("tuple<integer|integer>", "list<int>"),       # BabelCode's rule: one element type is a list
    (" list< tuple<string|double> > ", "list<tuple<string,float>>"),
])
def test_each_type_of_babelcodes_type_language_converts(babel, ours):
  assert str(babelcode.parse_type(babel).typed()) == ours


@pytest.mark.parametrize("babel, message", [
    ("int", "unknown type 'int'"), ("map<integer>", "map<KEY;VALUE>"), ("set<list<integer>>", "set elements"),
    ("map<double;integer>", "map keys"), ("list<integer", "does not end with >"), ("tuple<integer|>", "empty type"),
    ("list<integer>[]", "mixes [] and <>"), ("optional<integer>", "unknown type 'optional'"),
])
def test_a_bad_type_says_what_is_wrong(babel, message):
  with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
    babelcode.parse_type(babel)


def test_values_nulls_map_keys_and_float_or_double():
  t = babelcode.parse_type
  assert babelcode.value(t("map<integer;float>"), {"3": 1, "-4": 0.5}, "v") == [[3, 1.0], [-4, 0.5]]
  assert babelcode.value(t("map<character;integer>"), {"a": 2}, "v") == [["a", 2]]
  assert babelcode.value(t("tuple<integer|string>"), [1, "x"], "v") == [1, "x"]
  # A null is the empty value where BabelCode allows one, and refused elsewhere.
  for babel, empty in [("string", ""), ("character", ""), ("list<integer>", []), ("set<string>", []),
                       ("map<string;integer>", []), ("tuple<integer|string>", [0, ""])]:
    assert babelcode.value(t(babel), None, "v") == empty
  for babel, bad, message in [("integer", None, "cannot be null"), ("boolean", 1, "expected boolean"),
                              ("integer", 1.5, "expected integer"), ("integer", True, "expected integer"),
                              ("map<integer;string>", {"x": "y"}, "not an integer"),
                              ("map<string;integer>", [["a", 1]], "JSON object"),
                              ("tuple<integer|string>", [1], "expected 2 items"), ("string", 3, "expected string")]:
    with pytest.raises(ValueError, match=message):
      babelcode.value(t(babel), bad, "v")
  assert [t(b).precision() for b in ("double", "float", "list<tuple<string|double>>", "map<string;float>",
                                     "tuple<float|double>", "integer")] == \
      ["double", "float", "double", "float", "double", None]


def test_the_schema_decides_float_or_double():
  def question(return_type: str) -> typed.Question:
    return babelcode.question({"qid": "q", "title": "t", "entry_fn_name": "f",
                               "schema": {"params": [{"name": "x", "type": "integer"}], "return": {"type": return_type}},
                               "test_list": [{"idx": 0, "inputs": {"x": 1}, "outputs": 0.5}]})

  # 0.5 has no run of 7 digits, so the values alone would say float: the declared type decides.
  assert question("double").float_precision == "double"
  assert typed.Tolerance().of(question("double")) == 1e-9
  assert typed.Tolerance().of(question("float")) == 1e-6
  # And it survives the typed question file.
  again = typed.question_from_json(question("double").to_json())
  assert again.float_precision == "double" and typed.Tolerance().of(again) == 1e-9


def test_the_fixture_converts_to_the_typed_questions(tmp_path):
  questions, failures = babelcode.convert(FIXTURE)
  assert failures == []
  assert [q.qid for q in questions] == ["HumanEval/0", "HumanEval/1", "HumanEval/2", "HumanEval/13",
                                        "HumanEval/16", "HumanEval/27", "HumanEval/111", "codelm/unique_digits"]
  for question in questions:
    want = TYPED[question.qid]
    assert (question.entry_fn_name, question.params, question.return_type) == \
        (want.entry_fn_name, want.params, want.return_type), question.qid
    cases = [c for c in question.test_cases if c.idx != NULL_CASES.get(question.qid)]
    assert cases == list(want.test_cases), question.qid
  by_qid = {q.qid: q for q in questions}
  null_list = next(c for c in by_qid["HumanEval/0"].test_cases if c.idx == 4)
  assert null_list.inputs == ([], 1.0) and null_list.output is False
  assert next(c for c in by_qid["HumanEval/27"].test_cases if c.idx == 9).inputs == ("",)
  assert [by_qid[q].float_precision for q in ("HumanEval/0", "HumanEval/2", "codelm/unique_digits")] == \
      [None, "float", None]
  assert dict(by_qid["HumanEval/13"].solutions).keys() == {"python", "cpp"}   # Kotlin is not the paper's
  assert by_qid["HumanEval/27"].description == ""                            # text null
  # The CLI writes them as a typed question file the scorer reads.
  output = tmp_path / "typed.jsonl"
  assert babelcode.main(["--questions", FIXTURE, "--output", str(output)]) == 0
  assert list(score.load_benchmark(str(output)).values()) == questions


def test_a_question_that_does_not_convert_is_reported_by_line_and_the_others_kept(tmp_path, capsys):
  good = json.loads(open(FIXTURE, encoding="utf-8").readline())
  bad_type = {**good, "qid": "b1", "schema": {"params": [{"name": "numbers", "type": "vector<int>"},
                                                          {"name": "threshold", "type": "double"}],
                                               "return": {"type": "boolean"}}}
  bad_inputs = {**good, "qid": "b2", "test_list": [{"idx": 0, "inputs": {"numbers": [1.0]}, "outputs": True}]}
  bad_idx = {**good, "qid": "b3", "test_list": good["test_list"][:1] * 2}
  no_schema = {k: v for k, v in good.items() if k != "schema"} | {"qid": "b4"}
  path = write(tmp_path / "questions.jsonl", [good, bad_type, bad_inputs, bad_idx, no_schema, good])
  questions, failures = babelcode.convert(path)
  assert [q.qid for q in questions] == ["HumanEval/0"]
  assert failures == [
      f"{path}:2 (b1): parameter numbers: unknown type 'vector' in 'vector<int>'",
      f"{path}:3 (b2): test_list[0]: inputs ['numbers'] do not match the parameters ['numbers', 'threshold']",
      f"{path}:4 (b3): test_list[1]: idx must be an int and unique, got 0",
      f"{path}:5 (b4): missing field 'schema'",
      f"{path}:6 (HumanEval/0): qid repeats line 1"]
  output = tmp_path / "typed.jsonl"
  assert babelcode.main(["--questions", path, "--output", str(output)]) == 0
  assert "left out: " + failures[0] in capsys.readouterr().err
  assert [q.qid for q in typed.read_questions(str(output))] == ["HumanEval/0"]
  none = write(tmp_path / "none.jsonl", [bad_type])
  assert babelcode.main(["--questions", none, "--output", str(tmp_path / "none_typed.jsonl")]) == 1
  assert not (tmp_path / "none_typed.jsonl").exists()


def test_generation_and_translation_prompts_from_a_converted_file(tmp_path):
  converted = tmp_path / "typed.jsonl"
  assert babelcode.main(["--questions", FIXTURE, "--output", str(converted)]) == 0
  generation = prompts.humaneval_prompts(languages=["python", "java"], benchmark=str(converted))
  assert len(generation) == 16 and generation[0]["prompt"].startswith(
      "You are an expert Python programmer, complete the implementation.")
  # Translation takes each question's source program in the source language; a question without one is
  # named, not skipped silently.
  with pytest.raises(ValueError, match=r"no C\+\+ source program for HumanEval/0, HumanEval/1"):
    prompts.translation_prompts(str(converted), "C++")
  only = tmp_path / "gcd.jsonl"
  typed.write_questions([q for q in typed.read_questions(str(converted)) if q.qid == "HumanEval/13"], str(only))
  output = tmp_path / "prompts.jsonl"
  assert prompts.main(["typed", "--benchmark", str(only), "--task", "translation", "--source_language", "C++",
                       "--output", str(output)]) == 0
  records = [json.loads(line) for line in open(output, encoding="utf-8")]
  assert [r["language"] for r in records] == [get(n).display_name for n in MODULES if n != "cpp"]
  question = typed.read_questions(str(only))[0]
  java = next(r for r in records if r["language"] == "Java")
  assert java["prompt"] == prompts.translation_prompt("C++", "Java", question.solution("cpp"),
                                                      get("java").signature(question))
  assert java["source_language"] == "C++" and java["task"] == "translation"
  python = next(r for r in records if r["language"] == "Python")
  assert python["prompt"].startswith("Translate the following C++ program to Python:\n\nlong greatest_common_divisor")


@pytest.mark.skipif(not LANGUAGES, reason="no sandbox here; run `make toolchains`")
def test_converted_questions_score_right_and_wrong_answers_in_every_language(tmp_path):
  converted = tmp_path / "typed.jsonl"
  assert babelcode.main(["--questions", FIXTURE, "--output", str(converted)]) == 0
  qids = {q.qid for q in typed.read_questions(str(converted))}
  predictions, expected = [], {}
  for language in LANGUAGES:
    with open(os.path.join(HERE, "solutions", f"{language}.json"), encoding="utf-8") as f:
      solutions = json.load(f)
    for kind, status in (("correct", Status.PASSED), ("wrong", Status.FAILED)):
      for qid, code in solutions[kind].items():
        if qid in qids:
          predictions.append({"qid": qid, "language": language, "sample_id": kind, "code": code})
          expected[(language, qid, kind)] = status.value
  path = write(tmp_path / "predictions.jsonl", predictions)
  metrics = score.score(path, str(converted), str(tmp_path / "scores"), workers=2, ks=(1,), progress=False)
  with open(tmp_path / "scores" / "results.jsonl", encoding="utf-8") as f:
    got = {(r["language"], r["qid"], r["sample_id"]): r for r in map(json.loads, f)}
  wrong = {key: (got[key]["status"], got[key]["detail"][:300]) for key, status in expected.items()
           if got[key]["status"] != status}
  assert wrong == {}
  for language in LANGUAGES:
    assert metrics[language]["num_problems"] == len(qids), language
  print(f"\n{len(predictions)} programs in {len(LANGUAGES)} languages: {sorted(LANGUAGES)}")


def nested(depth: int, leaf: str = "integer") -> str:
  """A BabelCode type `depth` levels deep: list<list<...<integer>...>> (a leaf alone is depth 0)."""
  return "list<" * depth + leaf + ">" * depth


def test_a_type_nested_too_deep_is_refused_with_a_message_not_a_recursion_error():
  # Real BabelCode types are a few levels deep; the limit is far above them and far below Python's
  # recursion limit, so the converter never depends on RecursionError.
  assert str(babelcode.parse_type(nested(babelcode.MAX_TYPE_DEPTH)).typed()).count("list") == babelcode.MAX_TYPE_DEPTH
  for text in (nested(babelcode.MAX_TYPE_DEPTH + 1), nested(2000), "integer" + "[]" * 2000,
               "tuple<" * 2000 + "integer|string" + ">" * 2000, "map<string;" * 2000 + "integer" + ">" * 2000):
    with pytest.raises(ValueError, match=f"nested deeper than {babelcode.MAX_TYPE_DEPTH} levels"):
      babelcode.parse_type(text)


def test_a_question_with_a_type_nested_2000_deep_is_left_out_and_the_others_written(tmp_path, capsys):
  good = json.loads(open(FIXTURE, encoding="utf-8").readline())
  deep_param = {**good, "qid": "deep1", "schema": {"params": [{"name": "numbers", "type": nested(2000)},
                                                              {"name": "threshold", "type": "double"}],
                                                   "return": {"type": "boolean"}}}
  deep_return = {**good, "qid": "deep2", "schema": {**good["schema"], "return": {"type": nested(2000, "boolean")}}}
  second = {**good, "qid": "HumanEval/0b"}
  path = write(tmp_path / "questions.jsonl", [good, deep_param, deep_return, second])
  output = tmp_path / "typed.jsonl"
  assert babelcode.main(["--questions", path, "--output", str(output)]) == 0
  captured = capsys.readouterr()
  limit = babelcode.MAX_TYPE_DEPTH
  left_out = [line for line in captured.err.splitlines() if line.startswith("left out: ")]
  assert left_out == [f"left out: {path}:2 (deep1): parameter numbers: type 'list<list<list<list<list<list<list<"
                      f"list<list<list<...' is nested deeper than {limit} levels",
                      f"left out: {path}:3 (deep2): return type: type 'list<list<list<list<list<list<list<"
                      f"list<list<list<...' is nested deeper than {limit} levels"]
  assert f"wrote 2 typed questions to {output} (2 left out)" in captured.out
  assert [q.qid for q in typed.read_questions(str(output))] == ["HumanEval/0", "HumanEval/0b"]
