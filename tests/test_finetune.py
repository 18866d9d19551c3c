"""Fine-tuning on practical tasks: the dataset loader and splits, the SeqIO task's rows, restoring a
pretrained run, LoRA (base untouched, merged = base + adapters), and short full / LoRA fine-tuning
runs from a tiny pretrained model whose loss on the held-out problems falls; sample.py on a LoRA run."""

import json
import os
import re

import flax.linen as nn
import gin
import jax
import numpy as np
import pytest
import tensorflow as tf

import storage
from data import practical_tasks as pt
from data import records, stream, tasks
from data.vocab import CODE_TOKEN, EOD_TOKEN, get_vocabulary, train_vocabulary
from model import lora, sharding
from model.transformer import Decoder
from training.checkpoints import Checkpointer, abstract_with_shardings, read_params
from training.run_info import read_adapters, read_run_info

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _record(i, category="string", **changes):
  record = {"problem_id": f"p{i:03d}", "intent": f"Return str0 repeated {i} times.",
            "code": f"import re\n\ndef f_{i}(str0):\n    return str0 * {i}\n",
            "tests": [f"assert f_{i}('a') == 'a' * {i}"], "categories": [category]}
  record.update(changes)
  return record


# ---------------------------------------------------------------------------------------------
# Loader, prompt and splits.

def test_the_small_dataset_has_the_issue_s_shape():
  problems = pt.load_problems(pt.SMALL_DATASET)
  assert len(problems) >= 60
  labels = pt.categories(problems)
  assert len(labels) >= 6 and {"numpy", "pandas", "regex"} <= set(labels)
  assert all(p.tests and p.categories for p in problems if p.problem_id != "date_002")


def test_prompt_is_imports_signature_and_intent_docstring_and_prompt_plus_body_is_the_solution():
  problem = pt.problem_from_record(_record(3, intent='Split str0 on "\\t" and """quotes""".'), "x:1")
  assert problem.prompt == ('import re\n\ndef f_3(str0):\n    """Split str0 on "\\\\t" and \\"\\"\\"quotes\\"\\"\\"."""\n')
  assert problem.body == "    return str0 * 3\n" and problem.entry_point == "f_3"
  namespace = {}
  exec(problem.prompt + problem.body, namespace)  # the docstring is valid Python whatever the intent holds
  assert namespace["f_3"]("ab") == "ababab"
  assert namespace["f_3"].__doc__ == 'Split str0 on "\\t" and """quotes""".'
  long = pt.problem_from_record(_record(4, intent="word " * 40), "x:1")
  assert long.prompt.count("\n") > 4 and all(len(line) <= 96 for line in long.prompt.splitlines())


@pytest.mark.parametrize("intent", ['Print the word "hi"', 'Return two quotes ""', 'Ends in a backslash \\',
                                    'Quotes """ then a quote "', "A very " + "long-" * 30 + 'word "x" and \\"" ' * 8,
                                    'Backslash before a quote \\"'])
def test_any_intent_gives_a_prompt_whose_docstring_is_the_intent(intent):
  # CodeInsight intents end in quotes or hold backslashes: the prompt must still parse, or no completion
  # could pass, and its docstring must be the intent (but for its whitespace: lines wrap at spaces and
  # after hyphens).
  for width in (96, 24):
    prompt = "def f(str0):\n" + pt.docstring(intent, width=width)
    namespace = {}
    exec(prompt + "    return str0\n", namespace)
    assert "".join(namespace["f"].__doc__.split()) == "".join(intent.split()), (width, prompt)


def test_helpers_and_constants_before_the_entry_function_are_in_the_prompt_and_the_reference_runs():
  # CodeInsight's references with a helper: the entry function is the last one, and the prompt holds
  # what comes before it, so the reference body (which calls the helper) runs after the prompt.
  code = ("import re\n\nSEP = ','\n\ndef _parts(str0):\n    return re.split(SEP, str0)\n\n"
          "def f_9(str0):\n    return len(_parts(str0))\n")
  problem = pt.problem_from_record(_record(9, code=code, intent="Count the fields of str0"), "x:1")
  assert problem.entry_point == "f_9" and problem.body == "    return len(_parts(str0))\n"
  assert problem.prompt.startswith("import re\n\nSEP = ','\n\ndef _parts(str0):\n    return re.split(SEP, str0)\n\n"
                                   "def f_9(str0):\n    \"\"\"Count the fields of str0\"\"\"\n")
  namespace = {}
  exec(problem.prompt + problem.body, namespace)
  assert namespace["f_9"]("a,b,c") == 3
  for bad, message in [("def f(a):\n    return a\nprint(f(1))\n", "code must end with its entry function"),
                       ("import os\nprint(1)\ndef f(a):\n    return a\n",
                        "before its entry function; line 2 is a Expr statement"),
                       ("import os\n", "code must end with its entry function")]:
    with pytest.raises(ValueError, match=re.escape(message)):
      pt.problem_from_record(_record(9, code=bad), "x:1")


@pytest.mark.parametrize("code, body", [
    ("def f_5(str0):\n\treturn str0 * 5\n", "\treturn str0 * 5\n"),  # tabs
    ("def f_5(str0):\n  x = 5\n  return str0 * x\n", "  x = 5\n  return str0 * x\n"),  # two spaces
    ("import re\r\n\r\ndef f_5(str0):\r\n\treturn str0 * 5\r\n", "\treturn str0 * 5\r\n"),  # CRLF
    ("def f_5(str0):    return str0 * 5\n", "    return str0 * 5\n"),  # the body on the def line
    ("def f_5(str0): return 'é' and str0 * 5\n", "    return 'é' and str0 * 5\n"),  # col_offset in bytes
])
def test_the_prompt_takes_the_reference_s_indentation_so_prompt_and_body_compile(code, body):
  problem = pt.problem_from_record(_record(5, code=code, intent='Repeat str0 "five" times'), "x:1")
  assert problem.body == body
  for variant in pt.PROMPT_VARIANTS:
    namespace = {}
    exec(problem.render_prompt(variant) + problem.body, namespace)
    assert namespace["f_5"]("ab") == "ab" * 5 and namespace["f_5"].__doc__.startswith("Repeat str0")


def test_json_jsonl_id_keyed_and_codeinsight_field_names_load_alike(tmp_path):
  records_ = [_record(i) for i in range(3)]
  (tmp_path / "a.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records_))
  (tmp_path / "b.json").write_text(json.dumps(records_))
  (tmp_path / "c.json").write_text(json.dumps({r.pop("problem_id"): r for r in [dict(r) for r in records_]}))
  renamed = [{"id": r["problem_id"], "nl": r["intent"], "solution": r["code"], "test": r["tests"][0],
              "labels": r["categories"]} for r in records_]
  (tmp_path / "d.json").write_text(json.dumps(renamed))
  loaded = [pt.load_problems(str(tmp_path / name)) for name in ("a.jsonl", "b.json", "c.json", "d.json")]
  assert all(problems == loaded[0] for problems in loaded)
  # A JSONL file of one problem is one record, named .jsonl or not (not an id-keyed object).
  (tmp_path / "one.jsonl").write_text(json.dumps(records_[0]) + "\n")
  (tmp_path / "one.txt").write_text(json.dumps(records_[0]) + "\n")
  assert pt.load_problems(str(tmp_path / "one.jsonl")) == pt.load_problems(str(tmp_path / "one.txt")) == loaded[0][:1]
  url = "ram://practical_test/a.jsonl"  # a non-local filesystem, standing in for gs://
  storage.write_atomic(url, (tmp_path / "a.jsonl").read_text())
  try:
    assert pt.load_problems(url) == loaded[0]
  finally:
    tf.io.gfile.remove(url)


@pytest.mark.parametrize("line, message", [
    ("{not json", r"bad\.jsonl:2: not JSON"),
    (json.dumps(_record(1, tests=[])), r"bad\.jsonl:2: tests must be a non-empty list"),
    (json.dumps(_record(1, code="x = 1\n")), r"bad\.jsonl:2 \(problem p001\): code must end with its entry "
                                             r"function"),
    (json.dumps({k: v for k, v in _record(1).items() if k != "intent"}), r"bad\.jsonl:2: no intent field"),
    (json.dumps(_record(0)), r"bad\.jsonl:2: problem_id 'p000' again \(first at .*bad\.jsonl:1\)"),
])
def test_a_bad_record_is_an_error_naming_file_and_line_or_skipped_and_listed(tmp_path, line, message):
  path = tmp_path / "bad.jsonl"
  path.write_text(json.dumps(_record(0)) + "\n" + line + "\n" + json.dumps(_record(2)) + "\n")
  with pytest.raises(ValueError, match=message):
    pt.load_problems(str(path))
  skipped = []  # a released dataset with a few bad records: they are left out and listed, the rest loaded
  assert [p.problem_id for p in pt.load_problems(str(path), skipped)] == ["p000", "p002"]
  assert len(skipped) == 1 and re.search(message, skipped[0])
  assert pt.skipped_warning(str(path), skipped) == f"warning: 1 bad record of {path} skipped, the rest loaded: {skipped[0]}"


def test_the_commands_that_load_a_dataset_skip_its_bad_records_and_say_so(tmp_path, capsys):
  from data import practical_stats

  path = tmp_path / "some_bad.jsonl"
  lines = [json.dumps(_record(i)) for i in range(6)] + ["{torn", json.dumps(_record(9, tests=[]))]
  path.write_text("\n".join(lines) + "\n")
  assert pt.main(["--dataset", str(path), "--train_fraction", "0.5", "--output", str(tmp_path / "p.jsonl")]) == 0
  captured = capsys.readouterr()
  assert "3 test prompts (3 train / 3 test)" in captured.out
  assert (f"warning: 2 bad records of {path} skipped, the rest loaded: {path}:7: not JSON" in captured.err
          and f"{path}:8: tests must be" in captured.err)
  assert practical_stats.main(["--dataset", str(path), "--output_dir", str(tmp_path / "stats")]) == 0
  assert f"warning: 2 bad records of {path} skipped" in capsys.readouterr().err
  many = [f"{path}:{i}: bad" for i in range(8)]
  assert pt.skipped_warning(str(path), many).endswith(f"{path}:4: bad; and 3 more") and pt.skipped_warning("x", []) is None
  (tmp_path / "all_bad.jsonl").write_text("{torn\n")
  with pytest.raises(ValueError, match=r"all_bad\.jsonl: no problems \(1 bad record skipped\)"):
    pt.load_problems(str(tmp_path / "all_bad.jsonl"), [])


def _codeinsight_folder(root, split, id_, intent, code, tests, labels, cfg=None):
  folder = root / "Codeinsight" / split / str(id_)
  (folder / "unit_tests").mkdir(parents=True)
  (folder / "nl.txt").write_text(intent)
  (folder / "code.txt").write_text(code)
  (folder / "prompt.txt").write_text(f"{intent}\n\n{code.splitlines()[0]}\n\n")
  (folder / ".cfg").write_text(cfg if cfg is not None else
                               f"[library]\nlib = ['NoImport']\n\n[labels]\nlabels = {labels!r}\n\n"
                               f"[test]\ntest_case_cnt = {len(tests)}\n")
  for i, test in enumerate(tests):
    (folder / "unit_tests" / f"test_{i}.py").write_text(test)
  return folder


def test_codeinsight_s_released_folders_load_with_their_labels_tests_and_split(tmp_path, capsys):
  # CodeInsight's repository layout: Codeinsight/{train,test}/<id>/ with nl.txt, code.txt, .cfg and
  # unit_tests/test_N.py; the two splits number their problems alike.
  tests = [f"x = {i}\nassert test(x) == {i} + 1, 'Test failed'" for i in range(11)]
  _codeinsight_folder(tmp_path, "train", 0, "Add one to var0", "def test(var0):\n    return var0 + 1\n", tests[:2],
                      ["math", "builtin"])
  _codeinsight_folder(tmp_path, "test", 0, "Add one to x", "def test(x):\n\treturn x + 1\n", tests, ["math"])
  _codeinsight_folder(tmp_path, "test", 2, "Reverse s", "def test(s):\n  return s[::-1]\n",
                      ["assert test('ab') == 'ba'"], [])
  _codeinsight_folder(tmp_path, "test", 10, "Printing", "def test(a):\n    return a\nprint(test(1))\n",
                      ["assert test(1) == 1"], [])  # a statement after the entry function: skipped
  broken = _codeinsight_folder(tmp_path, "test", 11, "No code", "def test(a):\n    return a\n", ["assert test(1) == 1"], [])
  (broken / "code.txt").unlink()
  (tmp_path / "Codeinsight" / "test" / "README").write_text("not a problem")  # a file, not a folder: ignored
  skipped = []
  problems = pt.load_problems(str(tmp_path), skipped)
  assert [p.problem_id for p in problems] == ["train/0", "test/0", "test/2"]
  assert [p.released_split for p in problems] == ["train", "test", "test"]
  assert {p.harness for p in problems} == {"codeinsight"}  # their tests run as the authors' harness runs them
  assert problems[0].categories == ("math", "builtin") and problems[2].categories == ()
  assert problems[1].tests == tuple(tests)  # test_10 after test_9
  assert problems[1].body == "\treturn x + 1\n" and problems[0].intent == "Add one to var0"
  assert len(skipped) == 2 and any("test/10 (problem test/10): code must end with its entry function" in s
                                   for s in skipped)
  assert any(s.startswith(f"{tmp_path}/Codeinsight/test/11: ") and "code.txt" in s for s in skipped)
  # The Codeinsight folder itself reads the same.
  assert pt.load_problems(str(tmp_path / "Codeinsight"), []) == problems

  # The released split, in fine-tuning and in the prompts command; a seeded split stays the default.
  train, test = pt.PracticalTasks(path=str(tmp_path), released_split=True).split([])
  assert [p.problem_id for p in train] == ["train/0"] and [p.problem_id for p in test] == ["test/0", "test/2"]
  out = tmp_path / "prompts.jsonl"
  assert pt.main(["--dataset", str(tmp_path), "--released_split", "--output", str(out)]) == 0
  assert [json.loads(line)["qid"] for line in out.read_text().splitlines()] == ["test/0", "test/2"]
  assert "2 test prompts (1 train / 2 test)" in capsys.readouterr().out
  with pytest.raises(ValueError, match=r"practical_tasks_small\.jsonl: no released split for \d+ problems"):
    pt.PracticalTasks(released_split=True).split()

  # A folder that is not CodeInsight's layout; a .cfg whose labels are not a list of strings.
  (tmp_path / "other").mkdir()
  with pytest.raises(ValueError, match=r"other: a folder, but not CodeInsight's layout"):
    pt.load_problems(str(tmp_path / "other"))
  _codeinsight_folder(tmp_path / "bad_cfg", "train", 1, "x", "def test(a):\n    return a\n", ["assert test(1) == 1"],
                      [], cfg="[labels]\nlabels = 'math'\n")
  with pytest.raises(ValueError, match=r"train/1: \.cfg: labels must be a list of strings"):
    pt.load_problems(str(tmp_path / "bad_cfg"))


def test_a_split_field_gives_a_jsonl_dataset_a_released_split(tmp_path):
  path = tmp_path / "split.jsonl"
  path.write_text("".join(json.dumps(dict(_record(i), split="train" if i < 2 else "test")) + "\n" for i in range(3)))
  train, test = pt.PracticalTasks(path=str(path), released_split=True).split()
  assert [p.problem_id for p in train] == ["p000", "p001"] and [p.problem_id for p in test] == ["p002"]
  path.write_text(json.dumps(dict(_record(0), split="dev")) + "\n")
  with pytest.raises(ValueError, match=r"split\.jsonl:1: split must be train or test, got 'dev'"):
    pt.load_problems(str(path))
  path.write_text(json.dumps(dict(_record(0), split="train")) + "\n")
  with pytest.raises(ValueError, match=r"the released split leaves test empty"):
    pt.PracticalTasks(path=str(path), released_split=True).split()


def test_a_harness_field_chooses_how_a_problem_s_tests_run(tmp_path):
  path = tmp_path / "harness.jsonl"
  path.write_text(json.dumps(dict(_record(0), harness="codeinsight")) + "\n" + json.dumps(_record(1)) + "\n")
  assert [p.harness for p in pt.load_problems(str(path))] == ["codeinsight", "isolated"]
  path.write_text(json.dumps(dict(_record(0), harness="pytest")) + "\n")
  with pytest.raises(ValueError, match=r"harness\.jsonl:1: harness must be one of isolated, codeinsight, got 'pytest'"):
    pt.load_problems(str(path))


def test_splits_are_disjoint_cover_the_dataset_and_depend_only_on_fraction_seed_and_ids():
  problems = pt.load_problems(pt.SMALL_DATASET)
  for fraction in (0.2, 0.4, 0.6, 0.8):
    for seed in range(5):
      train, test = pt.split_problems(problems, fraction, seed)
      ids_train, ids_test = {p.problem_id for p in train}, {p.problem_id for p in test}
      assert not ids_train & ids_test and ids_train | ids_test == {p.problem_id for p in problems}
      assert len(train) == round(fraction * len(problems))
      again = pt.split_problems(list(reversed(problems)), fraction, seed)  # file order does not matter
      assert ([p.problem_id for p in again[0]], [p.problem_id for p in again[1]]) == \
          ([p.problem_id for p in train], [p.problem_id for p in test])
  assert ({p.problem_id for p in pt.split_problems(problems, 0.4, 0)[0]}
          != {p.problem_id for p in pt.split_problems(problems, 0.4, 1)[0]})
  for fraction in (0.0, 1.0, 0.001):
    with pytest.raises(ValueError, match="train_fraction|leaves a split empty"):
      pt.split_problems(problems, fraction, 0)


# ---------------------------------------------------------------------------------------------
# A tiny pretrained run (module fixture) and the fine-tuning runs from it.

_WORDS = [a + b for a in ("get", "set", "load", "parse", "build", "read", "emit", "scan", "sort", "find")
          for b in ("name", "value", "token", "tree", "node", "index", "count", "path", "item", "block")]


def _python_file(i, codes):
  """Functions in the dataset's style: its reference solutions, renamed, between made-up ones."""
  made_up = "".join(f"def {_WORDS[(i * 7 + j) % 100]}(str0, var0):\n    return str0.split(var0)[{j}]\n\n"
                    for j in range(1 + i % 3))
  return made_up + codes[i % len(codes)].replace("def f_", f"def g{i}_")


@pytest.fixture(scope="module")
def pretrained(tmp_path_factory):
  """MODEL_DIR of a tiny model pretrained 20 steps on a small Python corpus (vocabulary of 500)."""
  root = str(tmp_path_factory.mktemp("ft_corpus"))
  codes = [p.code for p in pt.load_problems(pt.SMALL_DATASET)]
  texts = [records.encode(_python_file(i, codes), f"python/{i}") for i in range(120)]
  records.write_shard(os.path.join(root, records.shard_name("python", "train", 0, 1)), texts[:100])
  records.write_shard(os.path.join(root, records.shard_name("python", "validation", 0, 1)), texts[100:])
  vocab = train_vocabulary(root, vocab_size=500, output=os.path.join(root, "spm.model"), extra_ids=100)
  tasks.cache_tasks(root, vocab)
  model_dir = str(tmp_path_factory.mktemp("pretrained") / "run")
  _train(["--gin_file=gin_configs/runs/demo.gin", f"--gin.MODEL_DIR='{model_dir}'", f"--gin.CORPUS_DIR='{root}'",
          "--gin.MODEL_SIZE='tiny'", "--gin.TRAIN_STEPS=20", "--gin.TASK_FEATURE_LENGTHS={'inputs': 64, 'targets': 64}",
          "--gin.train.eval_every=0", "--gin.train.checkpoint_every=20"])
  return model_dir


def _train(argv):
  from test_train import _run_in_process  # train.py's main in this process, from the repository root

  return _run_in_process(argv)


def _finetune(pretrained, model_dir, *extra, run_gin="finetune.gin", steps=40):
  return _train([f"--gin_file=gin_configs/runs/{run_gin}", f"--gin.PRETRAINED_DIR='{pretrained}'",
                 f"--gin.MODEL_DIR='{model_dir}'", f"--gin.TRAIN_STEPS={steps}", "--gin.BATCH_SIZE=8",
                 "--gin.TRAIN_FRACTION=0.6", "--gin.train.eval_every=5", "--gin.train.eval_batches=4",
                 "--gin.train.log_every=5", f"--gin.train.checkpoint_every={steps}", *extra])


def _validation(model_dir):
  with open(os.path.join(model_dir, "metrics.jsonl")) as f:
    return {r["step"]: r[f"validation/{pt.TASK_NAME}"] for r in map(json.loads, f) if f"validation/{pt.TASK_NAME}" in r}


def _params(checkpoints, model):
  mesh = sharding.make_mesh(-1, 1, 1)
  abstract = abstract_with_shardings(nn.unbox(sharding.abstract_params(model)), sharding.param_shardings(model, mesh))
  source = Checkpointer(checkpoints, async_save=False)
  try:
    return source.restore_params(abstract)[0]
  finally:
    source.close()


def test_the_task_rows_are_causal_with_the_loss_on_the_body_only(pretrained):
  config, vocab_path = read_run_info(pretrained)
  vocabulary = get_vocabulary(vocab_path)
  counts = pt.register_task(pt.PracticalTasks(train_fraction=0.6, seed=1), vocabulary, 512)
  train, test = pt.PracticalTasks(train_fraction=0.6, seed=1).split()
  assert counts["train"]["problems"] == len(train) and counts["test"]["problems"] == len(test)
  assert counts["train"]["examples"] + len(counts["train"]["too_long"]) == len(train)
  code_id, eod_id = (vocabulary.tokenizer.piece_to_id(t) for t in (CODE_TOKEN, EOD_TOKEN))
  source = stream.resolve(pt.TASK_NAME)
  assert source.objective is stream.Objective.PROMPT_COMPLETION
  examples = list(stream.examples(source, 512, "test", shuffle=False, seed=0, num_epochs=1,
                                  use_cached=False).as_numpy_iterator())
  fitting = [p for p in test if p.problem_id not in counts["test"]["too_long"]]
  assert len(examples) == len(fitting)
  for example, problem in zip(examples, fitting):  # in split order, unshuffled
    assert example["inputs"][0] == code_id and example["targets"][-1] == eod_id
    assert vocabulary.decode(example["inputs"][1:].tolist()) == problem.prompt
    assert vocabulary.decode(example["targets"][:-1].tolist()).strip() == problem.body.strip()
  row = next(stream.packed_rows(stream.examples(source, 512, "test", shuffle=False, seed=0, num_epochs=1,
                                                use_cached=False), source, 512).as_numpy_iterator())
  assert not row["decoder_causal_attention"].any()  # the prompt is read causally, as the sampler reads it
  first = examples[0]
  length = len(first["inputs"]) + len(first["targets"])
  np.testing.assert_array_equal(row["decoder_target_tokens"][:length], np.concatenate([first["inputs"], first["targets"]]))
  # Loss on the body and [eod] only, never on the prompt.
  assert list(row["decoder_loss_weights"][:length]) == [0] * len(first["inputs"]) + [1] * len(first["targets"])


def test_fine_tuning_on_a_dataset_with_bad_records_registers_the_rest_and_warns(pretrained, tmp_path, capsys):
  from training.config import TrainConfig
  from training.run import _register_practical_tasks

  _, vocab_path = read_run_info(pretrained)
  path = tmp_path / "some_bad.jsonl"
  path.write_text("".join(json.dumps(_record(i)) + "\n" for i in range(6)) + "{torn\n")
  config = TrainConfig(model_dir=str(tmp_path / "run"), model_size=None, corpus_dir=None,
                       mixture_or_task_name=pt.TASK_NAME, task_feature_lengths={"inputs": 256, "targets": 256},
                       batch_size=2, train_steps=1, practical_tasks=pt.PracticalTasks(path=str(path), train_fraction=0.5))
  _register_practical_tasks(config, get_vocabulary(vocab_path), primary=True)
  captured = capsys.readouterr()
  assert "train 3 of 3 problems, test 3 of 3 problems" in captured.out
  assert f"warning: 1 bad record of {path} skipped, the rest loaded: {path}:7: not JSON" in captured.err


def test_full_fine_tuning_restores_the_pretrained_parameters_and_lowers_the_held_out_loss(pretrained, tmp_path,
                                                                                          capsys):
  from training import loop
  from training.optimizer import Optimizer, adamw
  from training.step import Trainable, init_sharded_state, state_shardings

  config, _ = read_run_info(pretrained)
  model = Decoder(config)
  # Restored through the fine-tuning path (AdamW: another optimizer than the pretraining run's) = saved.
  optimizer = adamw(1e-3)
  mesh = sharding.make_mesh(-1, 1, 1)
  abstract, shardings = state_shardings(model, optimizer, mesh, Optimizer.ADAMW)
  empty = Checkpointer(str(tmp_path / "empty"), async_save=False)
  state, progress, start = loop.initial_state(empty, abstract, shardings,
                                              lambda: init_sharded_state(model, optimizer, 7, shardings),
                                              storage.join(pretrained, "checkpoints"))
  empty.close()
  saved = _params(storage.join(pretrained, "checkpoints"), model)
  tokens = np.random.default_rng(0).integers(0, config.vocab_size, (2, 32)).astype(np.int32)
  batch = {"decoder_input_tokens": tokens}
  assert start == 0 and progress == {"batches": 0}
  logits = Trainable(model).logits
  np.testing.assert_array_equal(logits(state.params, batch), logits(saved, batch))

  model_dir = str(tmp_path / "full")
  _finetune(pretrained, model_dir, "--gin.train.base_learning_rate=1e-3")
  out = capsys.readouterr().out
  assert "initialised parameters from" in out and "step 20" in out
  losses = _validation(model_dir)
  assert sorted(losses) == list(range(0, 41, 5))  # step 0: the pretrained parameters' loss
  assert losses[40] < 0.8 * losses[0], losses
  assert read_adapters(model_dir) is None
  # The pretrained model, from its run.json, its context grown to the fine-tuning rows of 512.
  assert read_run_info(model_dir)[0] == config.replace(max_length=512)


@pytest.mark.multidevice
def test_lora_trains_adapters_only_leaves_the_base_untouched_and_merges_exactly(pretrained, tmp_path):
  config, _ = read_run_info(pretrained)
  base_before = _params(storage.join(pretrained, "checkpoints"), Decoder(config))
  model_dir = str(tmp_path / "lora")
  # FSDP over the 8 test devices: the frozen base sharded as training lays it out, adapters replicated.
  _finetune(pretrained, model_dir, "--gin.codelm.LoraConfig.targets=('query', 'value', 'gate')",
            "--gin.train.base_learning_rate=3e-3", "--gin.train.mesh_shape=(1, -1, 1)", run_gin="finetune_lora.gin")
  losses = _validation(model_dir)
  assert losses[40] < 0.9 * losses[0], losses
  base_after = _params(storage.join(pretrained, "checkpoints"), Decoder(config))
  jax.tree.map(np.testing.assert_array_equal, base_before, base_after)

  adapters = read_adapters(model_dir)
  assert adapters["base_step"] == 20 and adapters["lora"]["rank"] == 16
  lora_config = lora.LoraConfig(**adapters["lora"])
  lora_model = Decoder(config, lora=lora_config)
  abstract = jax.eval_shape(lambda: lora_model.init({"params": jax.random.key(0)}, np.zeros((1, 8), np.int32)))["lora"]
  source = Checkpointer(os.path.join(model_dir, "checkpoints"), async_save=False)
  trained, _ = source.restore_params(abstract)
  source.close()
  # The checkpoint holds the adapters (a and b of the three targeted projections), nothing of the base.
  assert set(trained["layers"]["attention"]) == {"query_a", "query_b", "value_a", "value_b"}
  assert set(trained["layers"]["mlp"]) == {"gate_a", "gate_b"}
  assert all(np.abs(trained["layers"][g][f"{n}_b"]).max() > 0
             for g, n in (("attention", "query"), ("attention", "value"), ("mlp", "gate")))

  tokens = np.random.default_rng(1).integers(0, config.vocab_size, (2, 24)).astype(np.int32)
  with_adapters, _ = lora_model.apply({"params": base_after, "lora": trained}, tokens)
  merged, _ = Decoder(config).apply({"params": lora.merge(base_after, trained, lora_config)}, tokens)
  base_only, _ = Decoder(config).apply({"params": base_after}, tokens)
  np.testing.assert_allclose(merged, with_adapters, atol=2e-5)
  assert np.abs(base_only - with_adapters).max() > 1e-3  # the adapters do change the model

  # sample.py merges them: its sampler's parameters are the merge, and it samples the test prompts.
  import sample as sample_entry
  from sampling.restore import load_sampler

  sampler, step = load_sampler(model_dir)
  assert step == 40
  jax.tree.map(lambda a, b: np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=1e-6),
               sampler.params, lora.merge(base_after, trained, lora_config))
  prompts = tmp_path / "prompts.jsonl"
  assert pt.main(["--train_fraction", "0.6", "--output", str(prompts)]) == 0
  lines = prompts.read_text().splitlines()[:2]
  prompts.write_text("\n".join(lines) + "\n")
  # A base step that is gone is an error naming it (what sampling says when the base was deleted).
  with pytest.raises(FileNotFoundError, match=r"no checkpoint 99 in .*checkpoints \(have \[20\]\)"):
    read_params(storage.join(pretrained, "checkpoints"), base_after, step=99)
  output = tmp_path / "predictions.jsonl"
  sample_entry.main([f"--checkpoint={model_dir}", f"--prompts={prompts}", f"--output={output}",
                     "--num_samples=2", "--max_decode_length=16", "--batch_size=4"])
  assert len(output.read_text().splitlines()) == 4


@pytest.mark.parametrize("bindings, message", [
    (["--gin.train.init_from=None", "--gin.MODEL_SIZE='tiny'"], "train.lora trains adapters of a pretrained model"),
    (["--gin.train.init_from=None"], "train.model_size may be None only with a MODEL_DIR as train.init_from"),
    (["--gin.MIXTURE_OR_TASK_NAME='code_python'"], "set MIXTURE_OR_TASK_NAME to it"),
    (["--gin.train.optimizer='sgd'"], "train.optimizer: 'sgd' is not one of adafactor, adamw"),
    (["--gin.codelm.LoraConfig.targets=('embedding',)"], "LoraConfig.targets: unknown or empty"),
    (["--gin.DATASET='{tmp}/broken.jsonl'"], "train.practical_tasks: {tmp}/broken.jsonl:1: not JSON"),
    (["--gin.DATASET='{tmp}/missing.jsonl'"], "train.practical_tasks: no dataset file '{tmp}/missing.jsonl'"),
    (["--gin.TRAIN_FRACTION=0.999"], "train.practical_tasks: a train fraction of 0.999 of 82 problems leaves"),
])
def test_bad_fine_tuning_settings_are_refused_by_name(pretrained, tmp_path, bindings, message, capsys):
  (tmp_path / "broken.jsonl").write_text("{broken\n")
  bindings, message = [b.replace("{tmp}", str(tmp_path)) for b in bindings], message.replace("{tmp}", str(tmp_path))
  with pytest.raises((SystemExit, ValueError)) as raised:
    _finetune(pretrained, str(tmp_path / "bad"), *bindings, run_gin="finetune_lora.gin", steps=2)
  assert message in str(raised.value) + capsys.readouterr().err
  assert not os.path.exists(tmp_path / "bad" / "checkpoints")


def test_the_codeinsight_recipe_gin_file_binds_the_paper_s_settings():
  import gin_flags
  import train as train_entry  # noqa: F401 - registers train()'s configurables

  gin.clear_config()
  try:
    files, bindings = gin_flags.parse_flags(["--gin_file=gin_configs/runs/codeinsight_lora.gin",
                                             "--gin.PRETRAINED_DIR='/tmp/p'", "--gin.MODEL_DIR='/tmp/m'"])
    gin_flags.parse_gin(files, bindings)
    query = gin.query_parameter
    assert (query("codelm.LoraConfig.rank"), query("codelm.LoraConfig.alpha"), query("codelm.LoraConfig.dropout")) \
        == (16, 16.0, 0.05)
    assert (query("train.optimizer"), query("train.lr_schedule"), query("train.base_learning_rate")) \
        == ("adamw", "linear", 3e-5)
    assert query("%TRAIN_STEPS") == 400 and query("train.warmup_fraction") * 400 == 100
    assert query("%MIXTURE_OR_TASK_NAME") == pt.TASK_NAME and query("%MODEL_SIZE") is None  # the pretrained model
  finally:
    gin.clear_config()


@pytest.mark.parametrize("remat", ["none", "dots", "full"])
def test_lora_adapters_under_every_remat_policy_merge_exactly_and_get_gradients(remat):
  from model.config import get_config

  config = get_config("tiny").replace(remat=remat)
  lora_config = lora.LoraConfig(rank=4, alpha=8.0, dropout=0.1, targets=lora.ATTENTION_TARGETS + lora.MLP_TARGETS)
  model = Decoder(config, lora=lora_config)
  tokens = np.random.default_rng(2).integers(0, config.vocab_size, (2, 16)).astype(np.int32)
  variables = model.init({"params": jax.random.key(0)}, tokens)
  params = nn.unbox(variables["params"])
  adapters = jax.tree.map(lambda x: x + 0.02, variables["lora"])  # B starts at zero: make it count
  assert jax.tree.leaves(jax.tree.map(lambda x: x.shape[0], adapters)) == [config.num_layers] * 14  # stacked by scan

  def loss(a, rng):
    return model.apply({"params": params, "lora": a}, tokens, rngs={"dropout": rng})[0].mean()

  grads = jax.jit(jax.grad(loss))(adapters, jax.random.key(1))
  assert all(np.abs(g).max() > 0 for g in jax.tree.leaves(grads))
  with_adapters, _ = model.apply({"params": params, "lora": adapters}, tokens)  # no dropout rng: no dropout
  merged, _ = Decoder(config).apply({"params": lora.merge(params, adapters, lora_config)}, tokens)
  np.testing.assert_allclose(merged, with_adapters, atol=1e-5)
  dropped, _ = model.apply({"params": params, "lora": adapters}, tokens, rngs={"dropout": jax.random.key(1)})
  assert np.abs(dropped - with_adapters).max() > 1e-4  # dropout acts on the adapters' input in training
