"""Profiles on demand (training/profiling.py): the training hook traces the chosen steps into the
layout TensorBoard's profile plugin lists, and sample.py's --profile_steps traces decode chunks.

The "training" here is a tiny jitted function driven through fake StepEnds; every trace is read back
with jax.profiler.ProfileData and must hold exactly the chosen steps' StepTraceAnnotations."""

import glob
import json
import os

import flax.linen as nn
import jax
import jax.numpy as jnp
import pytest

import code_corpus
import sample as sample_entry
import storage
from gin_flags import UsageError
from model.config import get_config
from model.transformer import Decoder, init_params
from sampling.run import SampleRun, profile_dir, sample
from training.checkpoints import Checkpointer
from training.loop import StepEnd
from training.profiling import ProfileSteps, Trace, check_settings
from training.run_info import write_run_info


@pytest.fixture(autouse=True)
def no_trace_left_running():
  """The profiler is process-wide: a test that fails inside a trace must not break the next one."""
  yield
  try:
    jax.profiler.stop_trace()
  except RuntimeError:
    pass  # none was running: the expected case


@jax.jit
def fake_step(x):
  return x * 2.0 + 1.0


def _train(hook, start: int, end: int, stop_at: int | None = None):
  """Steps start+1..end through `hook`, each inside the annotation the training loop puts around it."""
  state = jnp.ones((8, 8))
  for step in range(start + 1, end + 1):
    with jax.profiler.StepTraceAnnotation("train", step_num=step):
      state = fake_step(state)
    hook(StepEnd(step, state, {}, save=False, stop=step == stop_at))
    if step == stop_at:
      break
  return state


def _runs(logdir) -> list[str]:
  folder = os.path.join(logdir, "plugins", "profile")
  return sorted(os.listdir(folder)) if os.path.isdir(folder) else []


def _annotated(xplane: bytes, name: str) -> list[int]:
  """The step_num of every `name` event in a serialized XSpace."""
  data = jax.profiler.ProfileData.from_serialized_xspace(xplane)
  return sorted(int(dict(event.stats)["step_num"]) for plane in data.planes for line in plane.lines
                for event in line.events if event.name == name)


def _traced_steps(logdir, run: str, name: str = "train") -> list[int]:
  """The steps in RUN's one .xplane.pb, where TensorBoard's profile plugin looks for it."""
  folder = os.path.join(logdir, "plugins", "profile", run)
  xplanes = [f for f in os.listdir(folder) if f.endswith(".xplane.pb")]
  assert len(xplanes) == 1, os.listdir(folder)
  with open(os.path.join(folder, xplanes[0]), "rb") as f:
    return _annotated(f.read(), name)


def test_the_hook_traces_the_chosen_steps_where_tensorboard_lists_them(tmp_path, capsys):
  logdir = str(tmp_path / "tensorboard")
  hook = ProfileSteps(logdir, first=3, count=2, every=0, all_hosts=False, start_step=0, train_steps=6)
  assert hook.phase == "profile" and _runs(logdir) == []  # step 1 is not traced: nothing started yet
  _train(hook, 0, 6)
  assert _runs(logdir) == ["steps_000003-000004"]
  assert _traced_steps(logdir, "steps_000003-000004") == [3, 4]  # started after step 2, stopped after 4
  files = os.listdir(os.path.join(logdir, "plugins", "profile", "steps_000003-000004"))
  host = [f for f in files if f.endswith(".xplane.pb")][0][:-len(".xplane.pb")]
  assert host and all(f.startswith(host + ".") for f in files)  # jax's own file names, one host
  out = capsys.readouterr().out
  folder = os.path.join(logdir, "plugins", "profile", "steps_000003-000004")
  assert f"profile of steps 3-4 written to {folder}; open with tensorboard --logdir {logdir}" in out
  assert out.count("profiling steps") == 1


@jax.jit
def slow_step(x):
  return jax.lax.fori_loop(0, 10, lambda i, y: jnp.tanh(y @ y), x)  # ~10 ms: still running when dispatch returns


def test_a_trace_ends_after_the_device_work_of_its_last_step(tmp_path):
  # XLA:CPU records "ThunkExecutor::Execute (wait for completion)" when an execution finishes. Measured
  # here: 3 of them (steps 1-3) and 29 fusions in the trace; with the wait left out of Trace.stop, none.
  hook = ProfileSteps(str(tmp_path), first=2, count=2, every=0, all_hosts=False, start_step=0, train_steps=3)
  state = jnp.full((256, 256), 0.01)
  for step in range(1, 4):
    state = slow_step(state)
    hook(StepEnd(step, state, {}, save=False, stop=False))
  with open(glob.glob(str(tmp_path / "plugins/profile/steps_000002-000003/*.xplane.pb"))[0], "rb") as f:
    data = jax.profiler.ProfileData.from_serialized_xspace(f.read())
  names = [event.name for plane in data.planes for line in plane.lines for event in line.events]
  assert names.count("ThunkExecutor::Execute (wait for completion)") >= 2  # step 1's may end inside it too


def test_every_writes_one_folder_per_window_and_the_last_stops_at_train_steps(tmp_path):
  logdir = str(tmp_path)
  _train(ProfileSteps(logdir, first=2, count=2, every=3, all_hosts=False, start_step=0, train_steps=8), 0, 8)
  assert _runs(logdir) == ["steps_000002-000003", "steps_000005-000006", "steps_000008-000008"]
  assert [_traced_steps(logdir, run) for run in _runs(logdir)] == [[2, 3], [5, 6], [8]]
  # every == count: back-to-back windows, each stopped before the next starts.
  _train(ProfileSteps(str(tmp_path / "b"), first=1, count=2, every=2, all_hosts=False, start_step=0,
                      train_steps=4), 0, 4)
  assert [_traced_steps(tmp_path / "b", run) for run in _runs(tmp_path / "b")] == [[1, 2], [3, 4]]


def test_a_profile_window_the_run_never_reaches_is_warned_at_start(tmp_path, capsys):
  ProfileSteps(str(tmp_path / "late"), first=500, count=2, every=0, all_hosts=False, start_step=0, train_steps=2)
  assert "warning: train.profile_steps (500, 2) starts after the run's last step (2): no step will be profiled" \
      in capsys.readouterr().err
  ProfileSteps(str(tmp_path / "past"), first=1, count=2, every=0, all_hosts=False, start_step=5, train_steps=9)
  assert "ends before this run resumes at step 6: no step will be profiled" in capsys.readouterr().err
  ProfileSteps(str(tmp_path / "ok"), first=3, count=2, every=0, all_hosts=False, start_step=0, train_steps=9)
  assert capsys.readouterr().err == ""  # a window the run reaches: no word


def test_the_run_s_first_step_is_traced_from_the_constructor(tmp_path):
  fresh = str(tmp_path / "fresh")
  hook = ProfileSteps(fresh, first=1, count=2, every=0, all_hosts=False, start_step=0, train_steps=5)
  with pytest.raises(RuntimeError, match="already been started"):  # the constructor's trace is running
    jax.profiler.start_trace(str(tmp_path / "other"))
  _train(hook, 0, 5)
  assert _runs(fresh) == ["steps_000001-000002"] and _traced_steps(fresh, "steps_000001-000002") == [1, 2]
  # Resumed at step 4 inside the window 3-6: steps 5 and 6 are traced, from the constructor on.
  resumed = str(tmp_path / "resumed")
  _train(ProfileSteps(resumed, first=3, count=4, every=0, all_hosts=False, start_step=4, train_steps=9), 4, 9)
  assert _runs(resumed) == ["steps_000005-000006"] and _traced_steps(resumed, "steps_000005-000006") == [5, 6]


def test_close_and_sigterm_stop_an_open_trace(tmp_path):
  crashed = str(tmp_path / "crashed")
  hook = ProfileSteps(crashed, first=2, count=5, every=0, all_hosts=False, start_step=0, train_steps=10)
  state = _train(hook, 0, 3)  # training ends (an error) after step 3, inside the window 2-6
  assert _runs(crashed) == []
  jax.jit(lambda x: x + 1, donate_argnums=0)(state)  # the failing step 4 took the state the hook holds
  assert state.is_deleted()
  hook.close(wait=True)
  assert _runs(crashed) == ["steps_000002-000003"] and _traced_steps(crashed, "steps_000002-000003") == [2, 3]
  hook.close(wait=True)  # nothing open: nothing more
  assert _runs(crashed) == ["steps_000002-000003"]
  preempted = str(tmp_path / "preempted")
  _train(ProfileSteps(preempted, first=2, count=5, every=5, all_hosts=False, start_step=0, train_steps=10),
         0, 10, stop_at=4)
  assert _runs(preempted) == ["steps_000002-000004"]  # stopped at the SIGTERM step, no next window
  jax.profiler.start_trace(str(tmp_path / "free"))  # the profiler is free again
  jax.profiler.stop_trace()


def test_nothing_is_traced_off_schedule_or_on_other_hosts_unless_all_hosts(tmp_path):
  never = str(tmp_path / "never")
  _train(ProfileSteps(never, first=7, count=2, every=0, all_hosts=False, start_step=0, train_steps=6), 0, 6)
  other = str(tmp_path / "other")
  _train(ProfileSteps(other, first=1, count=2, every=0, all_hosts=False, start_step=0, train_steps=3,
                      process_index=1), 0, 3)
  assert not os.path.exists(never) and not os.path.exists(other)
  every_host = str(tmp_path / "all")
  _train(ProfileSteps(every_host, first=1, count=2, every=0, all_hosts=True, start_step=0, train_steps=3,
                      process_index=1), 0, 3)
  assert _traced_steps(every_host, "steps_000001-000002") == [1, 2]


def test_several_processes_tag_their_files_and_a_bucket_destination_goes_through_storage(tmp_path):
  # ram:// is TensorFlow's in-memory filesystem: a URL, written through storage as gs:// would be.
  logdir = f"ram://{tmp_path}/tensorboard"
  trace = Trace(process=3)
  trace.start()
  with jax.profiler.StepTraceAnnotation("train", step_num=7):
    state = fake_step(jnp.ones((4, 4)))
  written = trace.stop(logdir, "steps_000007-000007", state)
  assert written == f"{logdir}/plugins/profile/steps_000007-000007" and not trace.running
  names = storage.listdir(written)
  xplane = [n for n in names if n.endswith("-process3.xplane.pb")]
  assert len(xplane) == 1 and all("-process3." in n for n in names), names
  assert _annotated(storage.read_bytes(f"{written}/{xplane[0]}"), "train") == [7]
  assert not os.path.exists("ram:")  # nothing went to a local folder named after the URL


def test_a_trace_that_cannot_start_warns_and_training_goes_on(tmp_path, capsys):
  jax.profiler.start_trace(str(tmp_path / "someone_else"))  # only one trace at a time
  try:
    _train(ProfileSteps(str(tmp_path / "tb"), first=2, count=1, every=0, all_hosts=False, start_step=0,
                        train_steps=3), 0, 3)
  finally:
    jax.profiler.stop_trace()
  assert not os.path.exists(tmp_path / "tb")
  assert "warning: no profile of steps 2-2: RuntimeError: Profile has already been started" in capsys.readouterr().err


def test_settings_are_checked_naming_them():
  check_settings(1, 3, 0)
  check_settings(5, 3, 3)
  for args, message in [((0, 3, 0), "train.profile_steps FIRST must be at least 1, got 0"),
                        ((1, 0, 0), "train.profile_steps COUNT must be at least 1, got 0"),
                        ((1, 2, -1), "train.profile_every must be at least 0, got -1"),
                        ((1, 3, 2), "train.profile_every 2 is shorter than the 3 steps"),
                        ((1.5, 3, 0), "train.profile_steps FIRST must be an integer, got 1.5"),
                        ((1, True, 0), "train.profile_steps COUNT must be an integer, got True")]:
    with pytest.raises(ValueError, match=message):
      check_settings(*args)
  with pytest.raises(ValueError, match="train.profile_every"):
    ProfileSteps("unused", first=1, count=4, every=2, all_hosts=False, start_step=0, train_steps=9)


# ---- sample.py --profile_steps ------------------------------------------------------------------


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
  """A run folder as train.py leaves it (run.json, a checkpoint of random tiny parameters): sampling
  needs no trained model to be profiled."""
  root = tmp_path_factory.mktemp("profiled_run")
  vocab_path, vocabulary = code_corpus.build(str(root))
  config = get_config("tiny", vocab_size=vocabulary.vocab_size, max_length=64)
  run = str(root / "run")
  os.makedirs(run)
  write_run_info(run, config, vocab_path)
  checkpointer = Checkpointer(os.path.join(run, "checkpoints"), async_save=False)
  checkpointer.save(1, {"params": nn.unbox(init_params(Decoder(config), jax.random.key(0)))}, {"step": 1})
  checkpointer.close()
  return run


def _prompts(tmp_path) -> str:
  path = tmp_path / "prompts.jsonl"
  path.write_text("".join(json.dumps({"qid": f"q{i}", "language": "Python", "prompt": f"def f{i}(x):\n"}) + "\n"
                          for i in range(2)))
  return str(path)


def test_sample_traces_the_chosen_decode_chunks_beside_the_output(model_dir, tmp_path, capsys):
  output = str(tmp_path / "out" / "predictions.jsonl")
  os.makedirs(os.path.dirname(output))
  run = SampleRun(model_dir, _prompts(tmp_path), output, num_samples=2, max_decode_length=8, batch_size=2,
                  chunk_length=2, profile_steps=(2, 2))
  assert sample(run) == 4
  logdir = profile_dir(output)
  assert logdir == str(tmp_path / "out" / "profile")
  assert _runs(logdir) == ["predictions.chunks_000002-000003"]
  assert _traced_steps(logdir, "predictions.chunks_000002-000003", "decode_chunk") == [2, 3]
  assert f"open with tensorboard --logdir {logdir}" in capsys.readouterr().out
  assert sorted(os.listdir(tmp_path / "out")) == ["predictions.jsonl", "predictions.jsonl.summary.json", "profile"]


def test_a_bad_profile_steps_is_refused_naming_the_flag(model_dir, tmp_path, capsys):
  prompts, output = _prompts(tmp_path), str(tmp_path / "predictions.jsonl")
  for value, message in [((0, 2), "--profile_steps FIRST must be at least 1, got 0"),
                         ((2,), "--profile_steps must be FIRST,COUNT"), ("2,2", "--profile_steps must be FIRST,COUNT")]:
    with pytest.raises(UsageError, match=message):
      sample(SampleRun(model_dir, prompts, output, profile_steps=value))
  with pytest.raises(SystemExit) as exit_:
    sample_entry.main([f"--checkpoint={model_dir}", f"--prompts={prompts}", f"--output={output}",
                       "--profile_steps=two,3"])
  assert exit_.value.code == 2
  assert "--profile_steps must be FIRST,COUNT (decode chunks, e.g. 2,3), got 'two,3'" in capsys.readouterr().err
  assert not os.path.exists(output)  # refused before anything was written
