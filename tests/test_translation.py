"""HumanEval translated from Python: prompts in the paper's translation template with the target's
signature and no docstring, and hand-written translations that score as HumanEval's."""

from __future__ import annotations

import copy
import json

import pytest

from evaluation import prompts, score
from sandbox import execution, typed
from sandbox.renderers import MODULES, get

QUESTIONS = score.load_benchmark("humaneval")
QUESTION = QUESTIONS["HumanEval/0"]

# HumanEval/0 translated by hand: each continues its language's signature (the prompt's last line).
TRANSLATIONS = {
    "JavaScript": ("  for (let i = 0; i < numbers.length; i++)\n    for (let j = 0; j < numbers.length; j++)\n"
                   "      if (i !== j && Math.abs(numbers[i] - numbers[j]) < threshold) return true;\n"
                   "  return false;\n}\n"),
    "Lua": ("  for i = 1, #numbers do\n    for j = 1, #numbers do\n"
            "      if i ~= j and math.abs(numbers[i] - numbers[j]) < threshold then return true end\n"
            "    end\n  end\n  return false\nend\n"),
    "C++": ("  for (size_t i = 0; i < numbers.size(); i++)\n    for (size_t j = 0; j < numbers.size(); j++)\n"
            "      if (i != j && fabs(numbers[i] - numbers[j]) < threshold) return true;\n  return false;\n}\n"),
    "Go": ("\tfor i := range numbers {\n\t\tfor j := range numbers {\n"
           "\t\t\tif i != j && math.Abs(numbers[i]-numbers[j]) < threshold {\n\t\t\t\treturn true\n\t\t\t}\n"
           "\t\t}\n\t}\n\treturn false\n}\n"),
}
# A wrong one: the pairs compared with > instead of <.
WRONG = {"Lua": TRANSLATIONS["Lua"].replace(") < threshold", ") > threshold")}


def test_a_translation_prompt_per_language_gives_the_python_source_and_the_bare_target_signature():
  records = prompts.translation_prompts(limit=3)
  targets = [get(name) for name in MODULES if name != "python"]
  assert len(records) == 3 * len(targets) == 33
  source = prompts.python_sources([QUESTION])["HumanEval/0"]
  assert source.startswith("import math\n\n\ndef has_close_elements(numbers: list[float], threshold: float) -> bool:\n    for idx")
  for renderer in targets:
    (record,) = [r for r in records if r["qid"] == "HumanEval/0" and r["language"] == renderer.display_name]
    signature = renderer.signature(QUESTION)
    assert record["prompt"] == (f"Translate the following Python program to {renderer.display_name}:\n\n"
                                f"{source.rstrip()}\n\n{renderer.display_name} Translation:\n\n{signature}")
    assert "closer to each other" not in signature  # no docstring, as the paper's translation prompts
    # The completion continues what a generation prompt's completion continues: the scorer's program
    # (signature_with_docstring + completion) differs from the prompt's by comments only.
    last = signature.rstrip("\n").splitlines()[-1]
    assert renderer.signature_with_docstring(QUESTION).rstrip("\n").splitlines()[-1] == last
    assert record["stop"] == list(renderer.stop_sequences) and record["task"] == "translation"
    assert record["entry_fn_name"] == renderer.function_name(QUESTION)


def test_every_source_program_is_whole_and_right():
  # Each problem's Python canonical solution, helpers included, gives the expected output of every
  # test case when run on its own (trusted benchmark code, run here rather than in the sandbox).
  questions = list(QUESTIONS.values())
  sources = prompts.python_sources(questions)
  assert len(sources) == len(questions) == 155
  python = get("python")
  for question in questions:
    namespace: dict = {}
    exec(sources[question.qid], namespace)
    function = namespace[python.function_name(question)]
    for case in question.test_cases:
      value = function(*copy.deepcopy(case.inputs))
      returned = typed.decode(question.return_type, json.loads(json.dumps(typed.encode(question.return_type, value))))
      assert typed.equal(question.return_type, case.output, returned), (question.qid, case.idx)


@pytest.mark.skipif(any(execution.missing(get(n).toolchain) for n in ("javascript", "lua", "cpp", "go")),
                    reason="needs the toolchains of `make toolchains`")
def test_hand_written_translations_score_as_humaneval(tmp_path):
  records = [{"qid": "HumanEval/0", "language": language, "sample_id": 0, "code": code}
             for language, code in TRANSLATIONS.items()]
  records += [{"qid": "HumanEval/0", "language": language, "sample_id": 1, "code": code}
              for language, code in WRONG.items()]
  predictions = tmp_path / "predictions.jsonl"
  predictions.write_text("".join(json.dumps(r) + "\n" for r in records))
  metrics = score.score(str(predictions), "humaneval", str(tmp_path / "scores"), ks=(1, 25), workers=2,
                        progress=False)
  results = {(r["language"], r["sample_id"]): r["status"]
             for r in map(json.loads, (tmp_path / "scores" / "results.jsonl").read_text().splitlines())}
  assert results == {("javascript", 0): "passed", ("lua", 0): "passed", ("cpp", 0): "passed",
                     ("go", 0): "passed", ("lua", 1): "failed"}
  assert [metrics[name]["pass@1"] for name in ("javascript", "cpp", "go")] == [1.0, 1.0, 1.0]
  assert metrics["lua"]["pass@1"] == 0.5


def test_cli_writes_translation_prompts_and_refuses_python_alone(tmp_path, capsys):
  out = tmp_path / "prompts.jsonl"
  assert prompts.main(["humaneval", "--task", "translation", "--languages", "rust,C#", "--limit", "2",
                       "--output", str(out)]) == 0
  written = [json.loads(line) for line in out.read_text().splitlines()]
  assert [(r["language"], r["qid"]) for r in written] == [("Rust", "HumanEval/0"), ("Rust", "HumanEval/1"),
                                                          ("C#", "HumanEval/0"), ("C#", "HumanEval/1")]
  with pytest.raises(SystemExit):
    prompts.main(["humaneval", "--task", "translation", "--languages", "python", "--output", str(out)])
  assert "other than Python" in capsys.readouterr().err


def test_the_demos_closing_lines_give_translation_commands_that_run(tmp_path):
  import shlex

  import demo

  text = demo.summary(str(tmp_path), str(tmp_path / "corpus"), str(tmp_path / "run"), "p.jsonl", 1.0)
  (line,) = [l for l in text.splitlines() if "evaluation.prompts humaneval --task translation" in l]
  args = shlex.split(line)[3:]  # after `python -m evaluation.prompts`
  assert prompts.main(args) == 0
  written = (tmp_path / "translation_prompts.jsonl").read_text().splitlines()
  assert len(written) == 40 * 11
  assert "--k 1,25" in text and f"--predictions {tmp_path}/translation.jsonl" in text
