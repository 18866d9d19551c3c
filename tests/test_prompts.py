"""Benchmark prompts: the paper's templates (Appendix E), HumanEval and BabelCode conversion."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from evaluation import prompts
from evaluation.prompts import (babelcode_prompts, generation_prompt, humaneval_prompts,
                                translation_prompt, write_jsonl)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PYTHON_PREFIX = "You are an expert Python programmer, complete the implementation.\nSolution in Python:\n\n"


def read_lines(path) -> list[dict]:
  with open(path, encoding="utf-8") as f:
    return [json.loads(line) for line in f]


def write_dataset(path, records) -> str:
  with open(path, "w", encoding="utf-8") as f:
    for record in records:
      f.write((record if isinstance(record, str) else json.dumps(record)) + "\n")
  return str(path)


def test_templates_match_the_paper_exactly():
  assert generation_prompt("C++", "int f(int x) {\n") == (
      "You are an expert C++ programmer, complete the implementation.\nSolution in C++:\n\nint f(int x) {\n")
  assert translation_prompt("Python", "Java", "def f(x):\n  return {x}", "public static int f(int x) {") == (
      "Translate the following Python program to Java:\n\ndef f(x):\n  return {x}\n\n"
      "Java Translation:\n\npublic static int f(int x) {")


def test_humaneval_typed_problems_in_python():
  from sandbox.renderers import get
  from evaluation.score import load_benchmark

  questions = load_benchmark("humaneval")
  records = humaneval_prompts()
  assert len(records) == len(questions) >= 155 and len({r["qid"] for r in records}) == len(records)
  python = get("python")
  for record in records:
    question = questions[record["qid"]]
    assert record["language"] == "Python"
    assert record["prompt"] == PYTHON_PREFIX + python.signature_with_docstring(question)
    assert record["entry_fn_name"] == question.entry_fn_name
    assert record["stop"] == list(python.stop_sequences)


def test_humaneval_in_every_language_with_their_stops():
  from sandbox.renderers import get
  from evaluation.score import EVALUATED

  records = humaneval_prompts(limit=2, languages=EVALUATED)
  assert len(records) == 2 * 12
  for record in records:
    renderer = get(record["language"])
    assert record["prompt"].startswith(f"You are an expert {renderer.display_name} programmer")
    assert record["stop"] == list(renderer.stop_sequences)


def test_humaneval_limit_and_no_template():
  records = humaneval_prompts(template=False, limit=3)
  assert [r["qid"] for r in records] == ["HumanEval/0", "HumanEval/1", "HumanEval/2"]
  assert records[0]["prompt"].startswith("import math\n\n\ndef has_close_elements(numbers: list[float], threshold: float) -> bool:")


def test_cli_writes_humaneval_jsonl(tmp_path):
  output = tmp_path / "out" / "prompts.jsonl"
  result = subprocess.run([sys.executable, "-m", "evaluation.prompts", "humaneval", "--output", str(output)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
  assert result.returncode == 0, result.stderr
  lines = read_lines(output)
  assert len(lines) >= 155 and len({l["qid"] for l in lines}) == len(lines)
  assert all(l["language"] == "Python" and l["prompt"].startswith(PYTHON_PREFIX) for l in lines)
  assert os.listdir(output.parent) == ["prompts.jsonl"]  # no temp file left behind

  assert prompts.main(["humaneval", "--output", str(output), "--limit", "2", "--no_template",
                       "--languages", "python,C++"]) == 0
  lines = read_lines(output)
  assert [(l["qid"], l["language"]) for l in lines] == [
      ("HumanEval/0", "Python"), ("HumanEval/1", "Python"), ("HumanEval/0", "C++"), ("HumanEval/1", "C++")]
  assert not lines[0]["prompt"].startswith("You are")
  with pytest.raises(SystemExit):
    prompts.main(["humaneval", "--output", str(output), "--languages", "dart"])


GENERATION = {
    "qid": "7", "language": "Javascript", "title": "t", "text": "Add two numbers.",
    "signature": "function add(a, b) {",
    "signature_with_docstring": "/**\n * Add two numbers.\n */\nfunction add(a, b) {",
    "entry_fn_name": "add", "entry_cls_name": "Solution", "test_code": "PLACEHOLDER_CODE_BODY",
}
TRANSLATION = {
    "qid": "3", "language": "CSharp", "signature": "public int Add(int a, int b) {",
    "entry_fn_name": "Add", "entry_cls_name": "Solution", "source_py": "def add(a, b):\n    return a + b",
}


def test_babelcode_generation_and_translation(tmp_path):
  path = write_dataset(tmp_path / "bc.jsonl", [
      GENERATION, TRANSLATION,
      {**TRANSLATION, "language": "Python", "signature": "def add(a, b):"},  # Python -> Python: skipped
      {**GENERATION, "language": "Kotlin"},  # BabelCode has it, the paper does not: skipped
      {**TRANSLATION, "qid": "4", "language": "Java", "source_py": None,
       "source_code": "int add(int a, int b) { return a + b; }", "source_language": "C++",
       "signature": "public static int add(int a, int b) {"},
  ])
  records, skipped = babelcode_prompts(path)
  assert [(r["qid"], r["language"]) for r in records] == [("7", "Javascript"), ("3", "CSharp"), ("4", "Java")]
  generation, translation, from_cpp = records
  assert generation == {
      "qid": "7", "language": "Javascript", "entry_fn_name": "add", "entry_cls_name": "Solution",
      "prompt": generation_prompt("JavaScript", GENERATION["signature_with_docstring"])}
  assert translation["prompt"] == translation_prompt(
      "Python", "C#", TRANSLATION["source_py"], TRANSLATION["signature"])
  assert from_cpp["prompt"].startswith("Translate the following C++ program to Java:\n\nint add(")
  assert sum(skipped.values()) == 2

  only, _ = babelcode_prompts(path, languages=["C#", "java"])
  assert [r["language"] for r in only] == ["CSharp", "Java"]
  generated, _ = babelcode_prompts(path, task="generation", languages=["JavaScript"], template=False)
  assert generated[0]["prompt"] == GENERATION["signature_with_docstring"]
  with pytest.raises(ValueError, match=r"bc.jsonl:2: the record has no signature_with_docstring"):
    babelcode_prompts(path, task="generation")
  with pytest.raises(ValueError, match=r"bc.jsonl:1: no source program"):
    babelcode_prompts(path, task="translation")


def test_babelcode_cli_and_limit(tmp_path):
  path = write_dataset(tmp_path / "bc.jsonl", [GENERATION, {**GENERATION, "qid": "8"},
                                               {**GENERATION, "language": "Python"}])
  output = tmp_path / "prompts.jsonl"
  assert prompts.main(["babelcode", "--dataset", path, "--output", str(output), "--limit", "1"]) == 0
  assert [(l["qid"], l["language"]) for l in read_lines(output)] == [("7", "Javascript"), ("7", "Python")]


def test_babelcode_errors_name_file_and_line(tmp_path):
  path = write_dataset(tmp_path / "bad.jsonl", [GENERATION, "", {**GENERATION, "language": "Cobol"}])
  with pytest.raises(ValueError, match=r"bad.jsonl:3: unknown language 'Cobol'"):
    babelcode_prompts(path)
  path = write_dataset(tmp_path / "torn.jsonl", [GENERATION, '{"qid": "1", "lang'])
  with pytest.raises(ValueError, match=r"torn.jsonl:2: not valid JSON"):
    babelcode_prompts(path)
  path = write_dataset(tmp_path / "twice.jsonl", [GENERATION, GENERATION])
  with pytest.raises(ValueError, match=r"twice.jsonl:2: qid '7' in Javascript repeats line 1"):
    babelcode_prompts(path)
  with pytest.raises(ValueError, match="unknown language 'Cobol'"):
    babelcode_prompts(str(tmp_path / "twice.jsonl"), languages=["Cobol"])


def test_cli_error_keeps_the_old_output(tmp_path, capsys):
  output = tmp_path / "prompts.jsonl"
  output.write_text("old\n")
  path = write_dataset(tmp_path / "torn.jsonl", ["{"])
  with pytest.raises(SystemExit) as exit_info:
    prompts.main(["babelcode", "--dataset", path, "--output", str(output)])
  assert exit_info.value.code == 2
  assert "torn.jsonl:1: not valid JSON" in capsys.readouterr().err
  assert output.read_text() == "old\n"


def test_write_jsonl_replaces_atomically(tmp_path):
  output = tmp_path / "p.jsonl"
  write_jsonl([{"qid": "a"}], str(output))
  with pytest.raises(TypeError):  # not JSON-serialisable: the old file stays, no temp file remains
    write_jsonl([{"qid": "b"}, {"qid": object()}], str(output))
  assert read_lines(output) == [{"qid": "a"}]
  assert os.listdir(tmp_path) == ["p.jsonl"]
