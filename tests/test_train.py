"""train.py end to end on a fixture corpus: gin, losses, metrics, checkpoints, resume (with the input
pipeline restored, in constant time), preemption."""

import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import gin
import jax
import numpy as np
import pytest
from jax.sharding import NamedSharding

import storage
import train as train_entry
from model import sharding
from model.config import get_config
from model.transformer import Decoder
from data import records, tasks
from data.vocab import train_vocabulary
from training.checkpoints import Checkpointer, abstract_with_shardings
from training.optimizer import adafactor
from training.step import init_state, state_shardings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_WORDS = [a + b for a in ("get", "set", "load", "parse", "build", "read", "emit", "scan", "sort", "find")
          for b in ("Name", "Value", "Token", "Tree", "Node", "Index", "Count", "Path", "Item", "Block")]


def _python_file(i):
  return "".join(f"def {_WORDS[(i * 7 + j) % 100]}(x, y):\n    return x * {j} + y  # {_WORDS[j]}\n\n"
                 for j in range(2 + i % 6))


def _go_file(i):
  return "package main\n\n" + "".join(f"func {_WORDS[(i * 3 + j) % 100]}{j}(n int) int {{\n\treturn n + {j}\n}}\n"
                                      for j in range(2 + i % 4))


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
  root = str(tmp_path_factory.mktemp("train_corpus"))
  for language, make in (("python", _python_file), ("go", _go_file)):
    texts = [records.encode(make(i), f"{language}/{i}") for i in range(120)]
    records.write_shard(os.path.join(root, records.shard_name(language, "train", 0, 1)), texts[:100])
    records.write_shard(os.path.join(root, records.shard_name(language, "validation", 0, 1)), texts[100:])
  vocab = train_vocabulary(root, vocab_size=500, output=os.path.join(root, "spm.model"), extra_ids=100)
  tasks.cache_tasks(root, vocab)
  return root


def _flags(corpus, model_dir, steps, *extra):
  return ["--gin_file=gin_configs/runs/demo.gin", f"--gin.MODEL_DIR='{model_dir}'", f"--gin.CORPUS_DIR='{corpus}'",
          "--gin.MODEL_SIZE='tiny'", f"--gin.TRAIN_STEPS={steps}",
          "--gin.TASK_FEATURE_LENGTHS={'inputs': 64, 'targets': 64}", "--gin.train.log_every=1",
          "--gin.train.eval_every=0", *extra]


def _run_in_process(argv):
  gin.clear_config()
  cwd = os.getcwd()
  os.chdir(ROOT)
  try:
    return train_entry.main(argv)
  finally:
    os.chdir(cwd)
    gin.clear_config()


def _losses(model_dir):
  """step -> loss, the last record of each step (a resumed run logs the replayed steps again)."""
  records = storage.read_jsonl(os.path.join(model_dir, "metrics.jsonl"), warn=lambda _: None)  # a torn line: skipped
  return {r["step"]: r["loss"] for _, r in records if "loss" in r}


def _subprocess(argv):
  env = dict(os.environ, XLA_FLAGS="", PYTHONUNBUFFERED="1")  # one CPU device, as a user would run it
  return subprocess.Popen([sys.executable, "train.py", *argv], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)


def test_demo_config_trains_and_loss_falls(corpus, tmp_path, capsys):
  model_dir = str(tmp_path / "run")
  _run_in_process(_flags(corpus, model_dir, 80, "--gin.train.eval_every=40", "--gin.train.checkpoint_every=40"))
  # The run states its mixture's plan: document tokens in its 80 x 8 rows, each language's share and epochs.
  assert re.search(r"code_unimax_2_ul2: [\d,]+ document tokens in 640 rows; share % / epochs: "
                   r"Python \d+\.\d / \d+\.\d\d, Go \d+\.\d / \d+\.\d\d", capsys.readouterr().out)
  losses = _losses(model_dir)
  assert sorted(losses) == list(range(1, 81))
  assert losses[80] <= 0.7 * losses[1], (losses[1], losses[80])
  # What a run leaves in MODEL_DIR.
  assert "train.mixture_or_task_name = %MIXTURE_OR_TASK_NAME" in open(os.path.join(model_dir, "config.gin")).read()
  records_ = [json.loads(line) for line in open(os.path.join(model_dir, "metrics.jsonl"))]
  assert {"step", "loss", "learning_rate", "grad_norm", "tokens_per_second", "mfu"} <= set(records_[0])
  assert any("validation/python" in r for r in records_) and any("validation/go" in r for r in records_)
  assert open(os.path.join(model_dir, "loss.png"), "rb").read(4) == b"\x89PNG"
  assert os.listdir(os.path.join(model_dir, "tensorboard"))
  assert Checkpointer(os.path.join(model_dir, "checkpoints")).steps() == [40, 80]


def test_unknown_flags_are_errors_that_name_them(corpus, tmp_path, capsys):
  with pytest.raises(SystemExit) as exit_:
    _run_in_process(_flags(corpus, str(tmp_path / "c"), 2, "--steps=3"))
  assert exit_.value.code == 2 and "'--steps=3'" in capsys.readouterr().err


@pytest.mark.e2e
def test_resume_after_sigkill_replays_the_same_losses(corpus, tmp_path):
  steps, every = 24, 6
  straight = str(tmp_path / "straight")
  assert _subprocess(_flags(corpus, straight, steps, f"--gin.train.checkpoint_every={every}")).wait(300) == 0

  killed = str(tmp_path / "killed")
  process = _subprocess(_flags(corpus, killed, steps, f"--gin.train.checkpoint_every={every}"))
  checkpoint = os.path.join(killed, "checkpoints", str(every))
  deadline = time.time() + 240

  def logged_past_checkpoint() -> bool:  # killed after logging steps the checkpoint does not hold
    return os.path.isdir(checkpoint) and any(s > every for s in _losses(killed))

  while not logged_past_checkpoint() and time.time() < deadline and process.poll() is None:
    time.sleep(0.05)
  process.send_signal(signal.SIGKILL)
  process.wait(60)
  assert os.path.isdir(checkpoint)
  reached = max(_losses(killed))
  assert every < reached
  resumed = _subprocess(_flags(corpus, killed, steps, f"--gin.train.checkpoint_every={every}"))
  output = resumed.communicate(timeout=300)[0]
  assert resumed.returncode == 0, output
  assert "resumed from step" in output
  # The steps the killed run had logged past its checkpoint are counted as lost (training/goodput.py).
  resumed_at = int(re.search(r"resumed from step (\d+)", output).group(1))
  lost = [r for _, r in storage.read_jsonl(os.path.join(killed, "metrics.jsonl")) if "time/lost_steps" in r]
  assert [(r["step"], r["time/lost_steps"]) for r in lost] == [(resumed_at, reached - resumed_at)]
  assert lost[0]["time/lost_s"] > 0
  assert f"the previous run had logged {reached - resumed_at} steps past it" in output
  with open(os.path.join(killed, "metrics.jsonl")) as f:
    train_steps = [r["step"] for r in map(json.loads, f) if "loss" in r]
  assert train_steps == list(range(1, steps + 1))  # each step once: the replayed ones replace the killed run's
  expected, got = _losses(straight), _losses(killed)
  assert sorted(got) == sorted(expected) == list(range(1, steps + 1))
  assert [got[s] for s in range(every + 1, steps + 1)] == [expected[s] for s in range(every + 1, steps + 1)]


@pytest.mark.e2e
def test_sigterm_saves_a_checkpoint_and_exits_cleanly(corpus, tmp_path):
  model_dir = str(tmp_path / "preempted")
  process = _subprocess(_flags(corpus, model_dir, 100_000, "--gin.train.checkpoint_every=100000"))
  deadline = time.time() + 240
  metrics = os.path.join(model_dir, "metrics.jsonl")
  while not (os.path.exists(metrics) and os.path.getsize(metrics) > 0) and time.time() < deadline:
    time.sleep(0.1)
  process.send_signal(signal.SIGTERM)
  output = process.communicate(timeout=120)[0]
  assert process.returncode == 0, output
  assert "SIGTERM: checkpoint at step" in output
  steps = Checkpointer(os.path.join(model_dir, "checkpoints")).steps()
  assert len(steps) == 1 and 0 < steps[0] < 100_000


def _state_on(mesh, model, optimizer):
  abstract, shardings = state_shardings(model, optimizer, mesh)
  return abstract, shardings


@pytest.mark.multidevice
def test_checkpoint_from_8_devices_restores_on_4_and_training_continues(tmp_path):
  assert jax.device_count() == 8
  model, optimizer = Decoder(get_config("tiny")), adafactor(1e-2)
  mesh8 = sharding.make_mesh(2, 2, 2)
  abstract, shardings8 = _state_on(mesh8, model, optimizer)
  state = jax.jit(lambda: init_state(model, optimizer, jax.random.key(0)), out_shardings=shardings8)()
  checkpointer = Checkpointer(str(tmp_path / "ckpt"), async_save=False)
  checkpointer.save(5, state, {"batches": 5}, force=True)
  checkpointer.wait()

  mesh4 = sharding.make_mesh(1, 2, 2, devices=jax.devices()[:4])
  _, shardings4 = _state_on(mesh4, model, optimizer)
  restored, progress, step = Checkpointer(str(tmp_path / "ckpt")).restore_latest(
      abstract_with_shardings(abstract, shardings4))
  assert (step, progress["batches"]) == (5, 5)
  assert len(restored.params["embedding"].sharding.device_set) == 4
  for a, b in zip(jax.tree.leaves(state), jax.tree.leaves(restored)):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
  import functools
  from training.step import train_step
  batch = {"decoder_input_tokens": np.ones((4, 16), np.int32), "decoder_target_tokens": np.ones((4, 16), np.int32),
           "decoder_loss_weights": np.ones((4, 16), np.float32)}
  with sharding.activation_sharding(mesh4):
    batch = jax.device_put(batch, NamedSharding(mesh4, sharding.batch_spec()))
    new_state, metrics = jax.jit(functools.partial(train_step, model=model, optimizer=optimizer))(restored, batch)
  assert int(new_state.step) == 1 and np.isfinite(float(metrics["loss"]))


def test_a_damaged_latest_checkpoint_falls_back_to_the_previous(tmp_path):
  model, optimizer = Decoder(get_config("tiny")), adafactor(1e-2)
  mesh = sharding.make_mesh(1, 1, 1, devices=jax.devices()[:1])
  abstract, shardings = _state_on(mesh, model, optimizer)
  state = jax.jit(lambda: init_state(model, optimizer, jax.random.key(0)), out_shardings=shardings)()
  checkpointer = Checkpointer(str(tmp_path / "ckpt"), async_save=False)
  for step in (1, 2):
    checkpointer.save(step, state, {"batches": step}, force=True)
  checkpointer.close()
  # Damage step 2: truncate every file of its state.
  for folder, _, files in os.walk(tmp_path / "ckpt" / "2" / "state"):
    for name in files:
      open(os.path.join(folder, name), "wb").close()
  restored = Checkpointer(str(tmp_path / "ckpt")).restore_latest(abstract_with_shardings(abstract, shardings))
  assert restored is not None and restored[2] == 1


def test_a_non_finite_update_stops_the_run_and_keeps_the_last_good_checkpoint(corpus, tmp_path):
  model_dir = str(tmp_path / "nan")
  # At the first step, before any checkpoint: says so (not "step None").
  with pytest.raises(SystemExit, match=r"non-finite .* at step 1: stopped without saving; no checkpoint had "
                                       r"been written yet"):
    _run_in_process(_flags(corpus, model_dir, 2, "--gin.train.base_learning_rate=1e999"))
  _run_in_process(_flags(corpus, model_dir, 2, "--gin.train.checkpoint_every=2"))
  with pytest.raises(SystemExit, match=r"non-finite .* at step 3: stopped without saving; the newest checkpoint, "
                                       r"step 2, is kept"):
    _run_in_process(_flags(corpus, model_dir, 4, "--gin.train.checkpoint_every=1",
                           "--gin.train.base_learning_rate=1e999"))  # an infinite learning rate
  assert Checkpointer(os.path.join(model_dir, "checkpoints")).steps() == [2]


def _data_files(step_dir):
  files = [os.path.join(folder, name) for folder, _, names in os.walk(os.path.join(step_dir, "state"))
           for name in names]
  return sorted(files, key=os.path.getsize, reverse=True)


def _flip_bytes(path, count=64):
  """`count` bytes in the middle of the file inverted, its size unchanged."""
  data = bytearray(open(path, "rb").read())
  middle = len(data) // 2
  data[middle:middle + count] = bytes(b ^ 0xFF for b in data[middle:middle + count])
  open(path, "wb").write(bytes(data))


def _silently_corrupt(step_dir, other_step_dir):
  """Silent corruption: `step_dir`'s arrays replaced by another step's, a store that reads without an
  error but holds other values. (Inverting bytes of a data file is not silent: TensorStore's zstd
  chunks then often fail to decompress, depending on where the bytes fall, i.e. on the values.)"""
  shutil.rmtree(os.path.join(step_dir, "state"))
  shutil.copytree(os.path.join(other_step_dir, "state"), os.path.join(step_dir, "state"))


def test_damaged_newest_checkpoints_are_reported_skipped_moved_aside_and_trained_past(corpus, tmp_path, capsys,
                                                                                     caplog):
  """Step 6 silently corrupted, step 4 truncated: sampling uses step 2 and says why; training moves 6
  and 4 aside (kept, not deleted), resumes from 2, saves 4, 6 and 8 again and its losses equal the
  first run's."""
  from sampling.restore import load_sampler

  model_dir = str(tmp_path / "run")
  _run_in_process(_flags(corpus, model_dir, 6, "--gin.train.checkpoint_every=2"))
  first = _losses(model_dir)
  checkpoints = os.path.join(model_dir, "checkpoints")
  _silently_corrupt(os.path.join(checkpoints, "6"), os.path.join(checkpoints, "2"))
  truncated = _data_files(os.path.join(checkpoints, "4"))[0]
  with open(truncated, "r+b") as f:
    f.truncate(os.path.getsize(truncated) // 2)
  caplog.clear()

  _, step = load_sampler(model_dir)
  err = caplog.text
  assert step == 2
  assert re.search(r"checkpoint 6 in \S+ is damaged: \S+ differs from what was saved", err), err
  assert re.search(r"checkpoint 4 in \S+ is damaged", err), err
  assert sorted(os.listdir(checkpoints)) == ["2", "4", "6"]  # sampling moves nothing

  caplog.clear()
  capsys.readouterr()
  _run_in_process(_flags(corpus, model_dir, 8, "--gin.train.checkpoint_every=2"))
  assert "resumed from step 2" in capsys.readouterr().out
  assert "checkpoint 6" in caplog.text and "checkpoint 4" in caplog.text
  assert "moved damaged checkpoint 6" in caplog.text
  assert Checkpointer(checkpoints).steps() == [4, 6, 8]
  assert sorted(os.listdir(checkpoints + "-damaged")) == ["4", "6"]
  resumed = _losses(model_dir)
  assert [resumed[s] for s in (3, 4, 5, 6)] == [first[s] for s in (3, 4, 5, 6)]
  caplog.clear()
  assert load_sampler(model_dir)[1] == 8
  assert "damaged" not in caplog.text


def test_when_no_checkpoint_is_usable_training_stops_and_moves_nothing(corpus, tmp_path):
  model_dir = str(tmp_path / "run")
  _run_in_process(_flags(corpus, model_dir, 2, "--gin.train.checkpoint_every=2"))
  open(_data_files(os.path.join(model_dir, "checkpoints", "2"))[0], "wb").close()
  # The reason is TensorStore's, naming the array and the step's folder (not orbax's repr of a spec).
  with pytest.raises(SystemExit, match=r"no checkpoint in \S+ is usable: step 2: it does not restore \(\w+: "
                                       r"[^)]*\S+/checkpoints/2/state/"):
    _run_in_process(_flags(corpus, model_dir, 4, "--gin.train.checkpoint_every=2"))
  assert os.listdir(os.path.join(model_dir, "checkpoints")) == ["2"]


@pytest.mark.parametrize("binding, message", [
    ("--gin.BATCH_SIZE='eight'", "train.batch_size must be an integer, got 'eight'"),
    ("--gin.train.checkpoint_every=2.5", "train.checkpoint_every must be an integer, got 2.5"),
    ("--gin.TRAIN_STEPS=0", "train.train_steps must be at least 1, got 0"),
    ("--gin.train.warmup_fraction=1.5", "train.warmup_fraction must be at most 1, got 1.5"),
    ("--gin.train.base_learning_rate=-1.0", "train.base_learning_rate must be greater than 0"),
    ("--gin.MODEL_SIZE='huge'", "train.model_size: unknown size 'huge'"),
    ("--gin.train.init_from='/nonexistent/run'", "train.init_from: '/nonexistent/run' does not exist"),
    ("--gin.train.checkpoint_dir='ram://ckpt'", r"train.checkpoint_dir: checkpoints cannot be in ram://ckpt: "
                                                r"orbax \(TensorStore, etils' epath\) has no ram:// filesystem"),
    ("--gin.MODEL_DIR='ram://run'", "train.model_dir: checkpoints cannot be in ram://run/checkpoints: orbax"),
    ("--gin.train.mesh_shape=(0, 1, 1)", "train.mesh_shape data must be positive or -1"),
    ("--gin.train.mesh_shape=(3, 1, 1)", r"train.mesh_shape: mesh data=3 fsdp=1 tensor=1 needs 3 devices, but \d "
                                         "are available"),
    ("--gin.MIXTURE_OR_TASK_NAME='code_unimax_9'", r"train.mixture_or_task_name \(MIXTURE_OR_TASK_NAME\) "
                                                   r"'code_unimax_9' is no task or mixture of \S+; registered: "
                                                   r".*code_unimax_2_ul2"),
    ("--gin.TASK_FEATURE_LENGTHS={'inputs': 64, 'targets': -1}", r"task_feature_lengths\['targets'\] must be at least 1"),
    ("--gin.train.checkpoint_dir=3", "train.checkpoint_dir must be a path or None, got 3"),
    ("--gin.train.nonexistent=3", "nonexistent"),
    ("--gin.TRAIN_STEPZ=3", "no gin file defines the macro TRAIN_STEPZ"),
    ("--gin.train.vocab_path=corpus/spm.model", r"^train.py: --gin.train.vocab_path=corpus/spm.model: a gin value is a "
                                                r"Python literal, and a string needs quotes: "
                                                r"--gin.train.vocab_path=\"'corpus/spm.model'\"\n$"),
])
def test_bad_gin_values_are_refused_by_name_before_anything_is_written(corpus, tmp_path, binding, message, capsys):
  model_dir = tmp_path / "run"
  with pytest.raises(SystemExit) as exit_:
    _run_in_process(_flags(corpus, str(model_dir), 2, binding))
  assert exit_.value.code == 2  # a usage error, as argparse's
  assert re.search(message, capsys.readouterr().err)
  assert not model_dir.exists()


def test_fim_on_a_stream_it_does_not_apply_to_is_refused_before_anything_is_written(corpus, tmp_path, capsys):
  model_dir = tmp_path / "run"
  with pytest.raises(SystemExit) as exit_:
    _run_in_process(_flags(corpus, str(model_dir), 2, "--gin_file=gin_configs/objectives/fim.gin",
                           "--gin.MIXTURE_OR_TASK_NAME='code_unimax_2'"))
  assert exit_.value.code == 2
  assert ("codelm.UL2Config.fim_rate 0.5 asks for fill-in-the-middle, but MIXTURE_OR_TASK_NAME 'code_unimax_2' "
          "does not train the UL2 mixture FIM is part of: choose a code_*_ul2 task or mixture (e.g. "
          "code_unimax_2_ul2)") in capsys.readouterr().err
  assert not model_dir.exists()


def test_gin_binds_the_typed_config_itself_with_its_defaults_and_required_fields():
  """`train` is training.config.TrainConfig: unbound fields keep the class's defaults, gin's strings
  become the enums, and the fields without a default are gin.REQUIRED, all named at once."""
  import dataclasses

  import gin_flags
  from gin_train import train_config
  from training.config import TrainConfig
  from training.optimizer import Optimizer, Schedule

  gin.clear_config()
  try:
    gin_flags.parse_gin(*gin_flags.parse_flags([
        "--gin_file=gin_configs/runs/demo.gin", "--gin.MODEL_DIR='/tmp/m'", "--gin.CORPUS_DIR='/tmp/c'",
        "--gin.train.optimizer='adamw'", "--gin.train.mesh_shape=[1, -1, 1]"]))
    config = train_config(check_paths=False)
    assert type(config) is TrainConfig and config.batch_size == 8 and config.mesh_shape == (1, -1, 1)
    assert (config.optimizer, config.lr_schedule) == (Optimizer.ADAMW, Schedule.RSQRT)
    assert config.keep_checkpoints == TrainConfig.__dataclass_fields__["keep_checkpoints"].default == 3
    assert dataclasses.replace(config, seed=1).seed == 1
    gin.clear_config()
    gin_flags.parse_gin([], ["train.model_dir = '/tmp/m'"])
    with pytest.raises(RuntimeError, match=r"Required bindings for `train` not provided in config: \['model_size', "
                                           r"'corpus_dir', 'mixture_or_task_name', 'task_feature_lengths', "
                                           r"'batch_size', 'train_steps'\]"):
      train_config()
  finally:
    gin.clear_config()


def test_an_unwritable_model_dir_is_refused_before_work(corpus, tmp_path, capsys):
  blocked = tmp_path / "file"
  blocked.write_text("not a folder")
  with pytest.raises(SystemExit) as exit_:
    _run_in_process(_flags(corpus, str(blocked), 2))
  assert exit_.value.code == 2
  assert re.search(r"train.model_dir: .*file exists and is not a folder", capsys.readouterr().err)


def test_a_relative_model_dir_works(corpus, tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)
  checkpointer = Checkpointer("relative/checkpoints", async_save=False)
  import jax.numpy as jnp
  checkpointer.save(1, {"a": jnp.ones(2)}, {"batches": 1}, force=True)
  checkpointer.close()
  assert Checkpointer("relative/checkpoints").steps() == [1]


def test_a_second_train_on_the_same_model_dir_refuses_at_once(corpus, tmp_path, capsys):
  from storage import exclusive_output

  model_dir = tmp_path / "run"
  model_dir.mkdir()
  with exclusive_output(str(model_dir / "train"), "train.py (the first run)"):
    with pytest.raises(SystemExit) as exit_:
      _run_in_process(_flags(corpus, str(model_dir), 2))
  assert exit_.value.code == 2  # as sample.py and the scorers answer an output another run holds
  assert re.match(r"train.py: MODEL_DIR \S+run is being written by another run \(train.py \(the first run\), "
                  r"pid \d+ on ", capsys.readouterr().err)
  assert sorted(os.listdir(model_dir)) == []  # the second run wrote nothing; the first's lock is gone


class _TimedLines(io.TextIOBase):
  """A stdout that notes when each line was printed."""

  def __init__(self):
    self.lines, self._partial = [], ""

  def write(self, text):
    now = time.perf_counter()
    lines = (self._partial + text).split("\n")
    self._partial = lines.pop()
    self.lines.extend((now, line) for line in lines)
    return len(text)


def test_resume_at_step_k_and_10k_restores_the_input_pipeline_and_keeps_the_losses(corpus, tmp_path, monkeypatch):
  """A run whose checkpoints live outside MODEL_DIR (train.checkpoint_dir), resumed from step 3 and
  from step 30: both restore each host's tf.data iterator instead of replaying the batches, so the
  time to the first resumed step does not grow with the step; the losses equal the uninterrupted run's."""
  from training.run_info import read_checkpoint_dir

  steps, k = 31, 3
  straight, elsewhere = str(tmp_path / "straight"), str(tmp_path / "elsewhere" / "ckpt")
  _run_in_process(_flags(corpus, straight, steps, "--gin.train.checkpoint_every=3", "--gin.train.keep_checkpoints=11",
                         f"--gin.train.checkpoint_dir='{elsewhere}'"))
  assert not os.path.exists(os.path.join(straight, "checkpoints")) and read_checkpoint_dir(straight) == elsewhere
  saved = Checkpointer(elsewhere).steps()
  assert saved == [3, 6, 9, 12, 15, 18, 21, 24, 27, 30, 31]
  for step in saved:  # each step's folder holds this host's input-pipeline state
    data = os.path.join(elsewhere, str(step), "data")
    assert {"host_0.json", "host_0.index"} <= set(os.listdir(data))
    assert json.load(open(os.path.join(data, "host_0.json")))["batches"] == step
  expected = _losses(straight)

  seconds, restore_lines = {}, {}
  for start in (k, 10 * k):
    model_dir, checkpoints = str(tmp_path / f"from_{start}"), str(tmp_path / f"checkpoints_{start}")
    shutil.copytree(os.path.join(elsewhere, str(start)), os.path.join(checkpoints, str(start)))
    clock = _TimedLines()
    with monkeypatch.context() as patch:
      patch.setattr(sys, "stdout", clock)
      began = time.perf_counter()
      _run_in_process(_flags(corpus, model_dir, steps, "--gin.train.checkpoint_every=1000",
                             "--gin.train.keep_checkpoints=11", f"--gin.train.checkpoint_dir='{checkpoints}'"))
    lines = [line for _, line in clock.lines]
    assert f"resumed from step {start} in {checkpoints}" in lines, lines
    restore_lines[start] = next(line for line in lines if line.startswith("input pipeline "))
    assert restore_lines[start].startswith(f"input pipeline restored at batch {start} ("), lines  # not replayed
    seconds[start] = next(t for t, line in clock.lines if line.startswith(f"step {start + 1}/")) - began
    assert _losses(model_dir) == {s: expected[s] for s in range(start + 1, steps + 1)}
  print(f"\nstart to first resumed step: from step {k} {seconds[k]:.2f} s ({restore_lines[k]}), from step "
        f"{10 * k} {seconds[10 * k]:.2f} s ({restore_lines[10 * k]})")
  assert seconds[10 * k] < 2 * seconds[k] + 10  # generous: the restore, not a replay, is what keeps it flat


def test_a_missing_foreign_or_damaged_input_state_is_replayed_with_a_warning_naming_the_file(corpus, tmp_path,
                                                                                            capsys):
  import jax.numpy as jnp

  from data.batches import TrainBatches
  from data.mixtures import register_corpus
  from training import loop
  from training.checkpoints import InputState

  register_corpus(corpus, os.path.join(corpus, "spm.model"), rows=64, sequence_length=64)
  batches = TrainBatches("code_python", 64, 4, seed=0)
  for _ in range(3):
    next(batches)
  checkpointer = Checkpointer(str(tmp_path / "ckpt"), async_save=False)
  checkpointer.save(3, {"w": jnp.ones(2)}, {"batches": 3}, force=True, input_state=loop.input_state(batches))
  checkpointer.save(4, {"w": jnp.ones(2)}, {"batches": 4}, force=True)  # written without one
  expected = [next(batches) for _ in range(2)]

  # Why a state is not used (nothing is read into the iterator then).
  missing = checkpointer.restore_input(4, loop.input_state(batches))
  assert re.fullmatch(r"\S+/ckpt/4/data does not exist \(.*\)", missing)
  foreign = InputState(batches.iterator, dict(batches.pipeline, seed=1, batches=3))
  assert re.match(r"\S+/ckpt/3/data/host_0.json is the state of .*'seed': 0", checkpointer.restore_input(3, foreign))

  def resumed():
    again = TrainBatches("code_python", 64, 4, seed=0)
    restored = loop.resume_input(checkpointer, 3, again, 3)
    return restored, [next(again) for _ in range(2)], capsys.readouterr().err

  def same(a, b):
    return len(a) == len(b) and all(np.array_equal(x[key], y[key]) for x, y in zip(a, b) for key in x)

  restored, got, err = resumed()
  assert restored and same(got, expected) and not err
  _flip_bytes(os.path.join(str(tmp_path / "ckpt"), "3", "data", "host_0.data-00000-of-00001"))
  restored, got, err = resumed()  # replayed: the same batches, later
  assert not restored and same(got, expected)
  assert re.search(r"warning: input pipeline state not restored: \S+/ckpt/3/data/host_0.index/.data-\*: \w+.*; "
                   r"replaying 3 batches instead", err), err



def test_an_input_state_saved_with_a_relative_corpus_path_restores_from_another_directory(corpus, tmp_path,
                                                                                         monkeypatch):
  """A saved tf.data iterator names the file it is reading; more files than the shuffle buffer holds
  (1,000 examples) keep one open."""
  import shutil

  import jax.numpy as jnp

  from data.batches import TrainBatches
  from data.mixtures import register_corpus
  from training import loop

  root = tmp_path / "big"
  texts = [records.encode(f"x{i} = {i}\n", f"python/{i}") for i in range(1500)]
  records.write_shard(str(root / records.shard_name("python", "train", 0, 1)), texts)
  records.write_shard(str(root / records.shard_name("python", "validation", 0, 1)), texts[:10])
  shutil.copy(os.path.join(corpus, "spm.model"), root / "spm.model")
  tasks.cache_tasks(str(root), str(root / "spm.model"))

  monkeypatch.chdir(tmp_path)
  register_corpus("big", os.path.join("big", "spm.model"), rows=64, sequence_length=64)
  batches = TrainBatches("code_python", 64, 4, seed=0)
  for _ in range(2):
    next(batches)
  checkpointer = Checkpointer(str(tmp_path / "ckpt"), async_save=False)
  checkpointer.save(2, {"w": jnp.ones(2)}, {"batches": 2}, force=True, input_state=loop.input_state(batches))
  expected = next(batches)
  # What the pre-flight compiles the step for (training.step.abstract_batch) is what the stream yields.
  from training.step import abstract_batch
  assert sorted(expected) == sorted(abstract_batch(4, 64, prefix_lm=False))  # code_python: a plain LM task
  assert {v.dtype for v in expected.values()} == {np.dtype(np.int32)}

  monkeypatch.chdir(corpus)  # a copied run resumed from elsewhere, the same corpus named absolutely
  register_corpus(str(root), str(root / "spm.model"), rows=64, sequence_length=64)
  again = TrainBatches("code_python", 64, 4, seed=0)
  assert loop.resume_input(checkpointer, 2, again, 2)
  assert all(np.array_equal(value, expected[key]) for key, value in next(again).items())
  assert sorted(next(TrainBatches("code_python_ul2", 64, 4, seed=0))) == sorted(abstract_batch(4, 64))  # prefix LM


def test_the_matmul_ceiling_is_measured_once_per_dtype_and_process(monkeypatch):
  import jax.numpy as jnp

  from training import run

  measured = []
  monkeypatch.setattr(run, "matmul_ceiling", lambda dtype: measured.append(dtype) or 1e9)
  run._peak_flops.cache_clear()
  try:
    assert run._peak_flops(jnp.float32) == run._peak_flops(jnp.float32) == 1e9 * jax.device_count()
    run._peak_flops(jnp.bfloat16)
    assert measured == [jnp.float32, jnp.bfloat16]
  finally:
    run._peak_flops.cache_clear()  # the fake ceiling is not left for the module's other runs
