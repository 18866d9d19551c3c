"""data/decontamination.py: BigCode's case-insensitive substring rule over every benchmark the project
scores, the optional n-gram rule, user benchmark files, pickling and determinism."""

from __future__ import annotations

import collections
import json
import pickle
import random

import pytest

from data import decontamination, practical_tasks
from data.decontamination import BenchmarkItem, Decontaminator, file_benchmark_items
from evaluation.humaneval.questions import load_problems
from sandbox.renderers import MODULES


@pytest.fixture(scope="module")
def items() -> list[BenchmarkItem]:
  return decontamination.project_benchmark_items()


@pytest.fixture(scope="module")
def decontaminator(items) -> Decontaminator:
  return Decontaminator(items)


@pytest.fixture(scope="module")
def problems() -> dict[str, dict]:
  return load_problems()


def in_a_file(code: str) -> str:
  return (f"import os\nimport sys\n\n\ndef main():\n    print(sys.argv)\n\n\n{code}\n\n"
          "if __name__ == '__main__':\n    main()\n")


def test_every_benchmark_the_project_scores_contributes_items(items):
  counts = collections.Counter(item.benchmark for item in items)
  assert set(counts) == {"humaneval", "humaneval_typed", "translation", "practical", "iterative"}
  assert all(n > 0 for n in counts.values()), counts
  assert counts["humaneval"] == 2 * 164  # a docstring and a canonical solution per problem
  ids = {item.item for item in items}
  assert {f"HumanEval/0 prompt {name}" for name in MODULES} <= ids  # every language's prompt body
  assert {"HumanEval/0 docstring", "HumanEval/0 source python", "HumanEval/0 target", "pandas_001 intent",
          "pandas_001 solution", "pandas_001 test 0"} <= ids
  assert items == decontamination.project_benchmark_items()  # a fixed order


def test_a_file_holding_a_canonical_solution_is_matched_with_it(decontaminator, problems):
  solution = problems["HumanEval/0"]["canonical_solution"]
  found = decontaminator.match(in_a_file("def close(numbers, threshold):\n" + solution))
  assert (found.benchmark, found.item) == ("humaneval", "HumanEval/0 canonical_solution")
  assert found.text == solution


def test_a_file_holding_a_practical_solution_is_matched_with_it(decontaminator):
  problem = practical_tasks.load_problems(practical_tasks.SMALL_DATASET)[0]
  assert problem.problem_id == "pandas_001"
  found = decontaminator.match(in_a_file(problem.code))
  assert (found.benchmark, found.item) == ("practical", "pandas_001 solution")


def test_case_differences_still_match(decontaminator, problems):
  # HumanEval's prompt upper-cased: its docstring (as written, indented lines and all) still matches.
  found = decontaminator.match(in_a_file(problems["HumanEval/12"]["prompt"].upper()))
  assert (found.benchmark, found.item) == ("humaneval", "HumanEval/12 docstring")
  crlf = problems["HumanEval/0"]["canonical_solution"].replace("\n", "\r\n").swapcase()
  assert decontaminator.match(crlf).item == "HumanEval/0 canonical_solution"


def test_a_near_miss_does_not_match(decontaminator, problems):
  solution = problems["HumanEval/0"]["canonical_solution"]
  assert decontaminator.match(solution) is not None
  changed = solution.replace("distance < threshold", "distance <= threshold")
  assert changed != solution and decontaminator.match(in_a_file(changed)) is None


def test_short_generic_code_is_not_matched(items, problems):
  generic = in_a_file("def add(x, y):\n    return x + y\n\ndef size(string):\n    return len(string)\n")
  assert problems["HumanEval/53"]["canonical_solution"].strip() in generic
  assert Decontaminator(items).match(generic) is None
  assert Decontaminator(items, min_chars=0).match(generic) is not None  # what MIN_CHARS prevents
  decontaminator = Decontaminator(items)
  short = [i for i in items if len(decontamination.normalise(i.text).strip()) < decontamination.MIN_CHARS]
  assert decontaminator.skipped_short == len(short) > 0
  assert Decontaminator(items, min_chars=0).skipped_short == 0


def test_the_fast_search_finds_what_a_plain_substring_test_finds(items):
  """_Substrings (8-byte anchors, a bit table, numpy) against `key in text` over every key, on texts
  made of pieces of items (whole, cut, case-changed) and filler, keys under 8 bytes included."""
  rng = random.Random(0)
  chosen = rng.sample(items, 300) + [BenchmarkItem("file:x", "tiny", "ab"), BenchmarkItem("file:x", "seven", "abcdefg")]
  decontaminator = Decontaminator(chosen, min_chars=1)
  keys = [key for key, _ in decontaminator._items]
  for _ in range(300):
    parts = []
    for _ in range(rng.randint(1, 4)):
      text = rng.choice(chosen).text
      start, end = sorted(rng.sample(range(len(text) + 1), 2)) if rng.random() < 0.5 else (0, len(text))
      piece = text[start:end]
      parts += [piece.upper() if rng.random() < 0.3 else piece, rng.choice(["\n", " x = 1\n", "ab", "é"])]
    text = "".join(parts)
    lowered = decontamination.normalise(text)
    expected = min((i for i, key in enumerate(keys) if key in lowered), default=None)
    found = decontaminator.match(text)
    assert found == (None if expected is None else decontaminator._items[expected][1])


def test_user_prompts_jsonl_gives_an_item_per_text_field(tmp_path):
  path = tmp_path / "prompts.jsonl"
  prompt = "def frobnicate_widgets(widgets: list) -> int:\n    \"\"\"Count the widgets that frobnicate twice.\"\"\"\n"
  records = [{"qid": "Mine/0", "language": "Python", "prompt": prompt,
              "canonical_solution": "    return sum(1 for w in widgets if w.frobs == 2)\n", "stop": ["\ndef"]},
             {"qid": "Mine/1", "prompt": "x" * 60}]
  path.write_text("".join(json.dumps(r) + "\n" for r in records))
  found = file_benchmark_items(str(path))
  assert [(i.benchmark, i.item) for i in found] == [
      ("file:prompts.jsonl", "Mine/0 Python prompt"), ("file:prompts.jsonl", "Mine/0 Python canonical_solution"),
      ("file:prompts.jsonl", "Mine/1 prompt")]
  assert found[0].text == prompt
  assert Decontaminator(found).match(in_a_file(prompt)).item == "Mine/0 Python prompt"


def test_babelcode_questions_give_their_text_and_solutions(tmp_path):
  path = tmp_path / "tp3_questions.jsonl"
  record = {"qid": "3", "title": "Binary search", "entry_fn_name": "binary_search", "entry_cls_name": "Solution",
            "text": "Given a sorted array arr and a value x, return the index of x in arr or -1 when absent.",
            "schema": {"params": [{"name": "arr", "type": "list<integer>"}, {"name": "x", "type": "integer"}],
                       "return": {"type": "integer"}},
            "test_list": [{"idx": 0, "inputs": {"arr": [1, 2], "x": 2}, "outputs": 1}],
            "solutions": {"Python": "def binary_search(arr, x):\n    return arr.index(x) if x in arr else -1\n",
                          "C++": "int binary_search(vector<int> arr, int x) { return -1; }"}}
  path.write_text(json.dumps(record))  # no newline after the last line: still read
  found = file_benchmark_items(str(path))
  assert [i.item for i in found] == ["3 solutions[Python]", "3 solutions[C++]", "3 text"]
  assert found[2].text == record["text"]
  file = "// Given a sorted array ARR and a value x, return the index of x in arr or -1 when absent.\n"
  assert Decontaminator(found).match(file).item == "3 text"


def test_plain_text_gives_one_item_per_block(tmp_path):
  path = tmp_path / "questions.txt"
  path.write_text("Write a function that reverses the words of a sentence, keeping the punctuation.\n\n\n"
                  "Write a function that returns the n-th Fibonacci number modulo one million seven.\n"
                  "It must run in linear time.\n")
  found = file_benchmark_items(str(path))
  assert [(i.benchmark, i.item) for i in found] == [("file:questions.txt", "line-1 block"),
                                                     ("file:questions.txt", "line-4 block")]
  assert found[1].text.endswith("modulo one million seven.\nIt must run in linear time.")


@pytest.mark.parametrize("name, content, where", [
    ("bad.jsonl", '{"prompt": "' + "x" * 60 + '"}\n{"prompt": \n', "bad.jsonl:2"),
    ("bad.jsonl", '\n{"prompt": "' + "x" * 60 + '"}\n[1, 2]\n', "bad.jsonl:3"),
    ("bad.jsonl", '{"qid": "1", "schema": {}}\n', "bad.jsonl:1"),
    ("bad.jsonl", '{"prompt": "ok"}\n{"prompt": ', "bad.jsonl:2"),  # a torn last line is an error here
    ("bad.txt", b"fine\nstill fine\n\xff\xfe broken\n", "bad.txt:3"),
    ("bad.csv", "a,b\n", "bad.csv"),
])
def test_a_malformed_user_file_names_the_file_and_line(tmp_path, name, content, where):
  path = tmp_path / name
  path.write_bytes(content if isinstance(content, bytes) else content.encode())
  with pytest.raises(ValueError, match=f"{path.parent}/{where}"):
    file_benchmark_items(str(path))


def test_the_ngram_rule_catches_a_reformatted_copy_only_when_enabled(items, problems):
  solution = problems["HumanEval/0"]["canonical_solution"]
  reformatted = in_a_file("def close(numbers, threshold):\n" + solution.replace("    ", "\t").replace(" < ", "<")
                          .replace(", ", ","))
  assert Decontaminator(items).match(reformatted) is None
  found = Decontaminator(items, ngram=13).match(reformatted)
  assert (found.benchmark, found.item) == ("humaneval", "HumanEval/0 canonical_solution")
  assert Decontaminator(items, ngram=13).match(in_a_file("for i in range(10):\n    print(i)\n")) is None
  # A user's copy of HumanEval under other ids (MultiPL-E's) is another benchmark: it keeps the rule.
  copy = BenchmarkItem("file:multipl-e.jsonl", "HumanEval_0_has_close_elements prompt", solution)
  assert Decontaminator(items + [copy], ngram=13).match(reformatted) == copy  # the smallest item holding it


def test_the_ngram_rule_ignores_boilerplate_and_bare_runs_of_numbers(items):
  """The Java import block and class opening are in all 155 typed Java prompts: no one problem's. The
  hexadecimal digits that HumanEval/78's docstring lists are any hex table's."""
  table = "HEX_DIGITS = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 'A', 'B', 'C', 'D', 'E', 'F']\n"
  assert "0, 1, 2, 3, 4, 5, 6, 7, 8, 9, A, B, C, D, E, F" in decontamination._docstring(load_problems()["HumanEval/78"])
  assert Decontaminator(items, ngram=13).match(table) is None
  java = ("import java.util.*;\nimport java.util.function.*;\nimport java.util.stream.*;\nimport java.math.*;\n\n"
          "class Solution {\n    /**\n     * Given a list of integers, return the sum of the even ones.\n     */\n"
          "    public int evens(List<Integer> xs) { return 0; }\n}\n")
  assert Decontaminator(items, ngram=13).match(java) is None
  assert Decontaminator(items[:1] + [i for i in items if i.item == "HumanEval/0 prompt java"], ngram=13).match(java) \
      is not None  # with a single problem's items nothing is shared, and the block matches


def test_a_pickled_decontaminator_matches_in_the_copy(items, problems):
  original = Decontaminator(items, ngram=13)
  small = len(pickle.dumps(original))
  solution = problems["HumanEval/2"]["prompt"]
  expected = original.match(solution)  # builds the tables
  assert expected is not None
  assert len(pickle.dumps(original)) == small  # the tables are not pickled: workers get the items only
  copy = pickle.loads(pickle.dumps(original))
  assert copy._substrings is None and copy.match(solution) == expected and copy.skipped_short == original.skipped_short


def test_the_match_does_not_depend_on_item_order(items, problems):
  text = problems["HumanEval/3"]["prompt"] + problems["HumanEval/3"]["canonical_solution"] \
      + problems["HumanEval/5"]["canonical_solution"]
  twin = BenchmarkItem("file:mine.jsonl", "A/1 prompt", problems["HumanEval/3"]["canonical_solution"].upper())
  expected = Decontaminator(items + [twin]).match(text)
  assert (expected.benchmark, expected.item) == ("file:mine.jsonl", "A/1 prompt")  # the smallest of all it holds
  shuffled = items + [twin]
  for seed in range(3):
    random.Random(seed).shuffle(shuffled)
    assert Decontaminator(shuffled).match(text) == expected
  reformatted = text.replace("    ", "\t")
  found = Decontaminator(items + [twin], ngram=13).match(reformatted)
  assert found is not None and Decontaminator(shuffled, ngram=13).match(reformatted) == found
