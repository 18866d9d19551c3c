"""data/practical_tasks.py's prompt variants (the paper's prompt study): the three prompts as exact
strings, one switch shared by the fine-tuning examples (gin PROMPT_VARIANT -> PracticalTasks ->
register_task -> encode_examples) and the sampling prompts (prompt_records, --prompt_variant), and a
bad variant named where it was given."""

import json

import gin
import pytest

from data import practical_tasks as pt

PROBLEM = pt.Problem("p1", "Remove the rows of dataframe df0 whose column 'a' is negative.",
                     "import pandas as pd\n\ndef f(df0):\n    return df0[df0['a'] >= 0]\n", ("assert True",), ())
PLAIN = ('import pandas as pd\n\ndef f(df0):\n'
         '    """Remove the rows of dataframe df0 whose column \'a\' is negative."""\n')
RETURN = ('import pandas as pd\n\ndef f(df0):\n'
          '    """Remove the rows of dataframe df0 whose column \'a\' is negative. Return the Result."""\n')
PREPROMPT = ("# You are a powerful code generation model. Your job is to convert a given natural language\n"
             "# prompt into Python function code and return the result.\n\n" + PLAIN)


def test_the_three_variants_render_exactly():
  assert PROBLEM.prompt == PROBLEM.render_prompt() == PROBLEM.render_prompt("plain") == PLAIN
  assert PROBLEM.render_prompt("return_the_result") == RETURN
  assert PROBLEM.render_prompt(pt.PromptVariant.PREPROMPT) == PREPROMPT
  assert pt.PROMPT_VARIANTS == ("plain", "return_the_result", "preprompt")
  for variant in pt.PROMPT_VARIANTS:  # every variant plus the body is the solution, runnable
    namespace = {}
    exec(PROBLEM.render_prompt(variant) + PROBLEM.body, namespace)
    assert namespace["f"].__doc__.startswith("Remove the rows")


def test_a_bad_variant_is_named_where_it_was_given():
  with pytest.raises(ValueError, match="prompt variant: 'polite' is not one of plain, return_the_result, preprompt"):
    PROBLEM.render_prompt("polite")
  with pytest.raises(ValueError, match=r"codelm.PracticalTasks.prompt_variant \(PROMPT_VARIANT\): 'polite'"):
    pt.PracticalTasks(prompt_variant="polite")


def test_sampling_prompts_of_a_variant(tmp_path, capsys):
  assert [r["prompt"] for r in pt.prompt_records([PROBLEM], "return_the_result")] == [RETURN]
  assert pt.prompt_records([PROBLEM]) == pt.prompt_records([PROBLEM], "plain")
  out = tmp_path / "prompts.jsonl"
  assert pt.main(["--prompt_variant", "preprompt", "--output", str(out)]) == 0
  records = [json.loads(line) for line in out.read_text().splitlines()]
  problems = {p.problem_id: p for p in pt.load_problems(pt.SMALL_DATASET)}
  assert records and all(r["prompt"] == problems[r["qid"]].render_prompt("preprompt") for r in records)
  assert all(r["prompt"].startswith("# You are a powerful code generation model.") for r in records)
  with pytest.raises(SystemExit):
    pt.main(["--prompt_variant", "polite", "--output", str(out)])
  assert "--prompt_variant: invalid choice: 'polite'" in capsys.readouterr().err


class _Characters:
  """A vocabulary of code points: what encode_examples needs of one."""

  class tokenizer:  # noqa: N801 - sentencepiece's attribute name
    @staticmethod
    def piece_to_id(piece):
      return {"<code>": 1, "<eod>": 2}.get(piece, 0)

  @staticmethod
  def encode(text):
    return [ord(c) for c in text]


def test_fine_tuning_examples_use_the_variant_s_prompt():
  for variant, prompt in (("plain", PLAIN), ("return_the_result", RETURN), ("preprompt", PREPROMPT)):
    (inputs, targets), = pt.encode_examples([PROBLEM], _Characters, 4096, variant)[0]
    assert "".join(map(chr, inputs[1:])) == prompt and "".join(map(chr, targets[:-1])) == PROBLEM.body


def test_register_task_encodes_with_the_config_s_variant(monkeypatch):
  import seqio

  seen = []

  def encode(problems, vocabulary, sequence_length, variant="plain"):
    seen.append(variant)
    return [([1], [2])], []

  monkeypatch.setattr(pt, "encode_examples", encode)
  pt.register_task(pt.PracticalTasks(prompt_variant="preprompt"), seqio.PassThroughVocabulary(8), 64,
                   name="practical_tasks_variant_test")
  seqio.TaskRegistry.remove("practical_tasks_variant_test")
  assert seen == ["preprompt", "preprompt"]  # train and test


def test_the_fine_tuning_gin_binds_the_variant(tmp_path):
  import gin_flags
  import gin_train

  pretrained = tmp_path / "pretrained"
  pretrained.mkdir()
  gin.clear_config()
  try:
    for flags, expected in (([], "plain"), (["--gin.PROMPT_VARIANT='return_the_result'"], "return_the_result")):
      gin.clear_config()
      files, bindings = gin_flags.parse_flags(["--gin_file=gin_configs/runs/finetune.gin",
                                               f"--gin.PRETRAINED_DIR='{pretrained}'",
                                               f"--gin.MODEL_DIR='{tmp_path / 'm'}'", *flags])
      gin_flags.parse_gin(files, bindings)
      assert gin_train.train_config(check_paths=False).practical_tasks.prompt_variant == expected
  finally:
    gin.clear_config()
