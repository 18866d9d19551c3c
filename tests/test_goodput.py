"""Where a run's time goes (training/goodput.py): the attribution rule on hand-made intervals, the
Timeline against a real asynchronous device, and a tiny train.py run whose input pipeline is slowed
on purpose: the breakdown sums to the wall time and shows the input wait."""

import os
import time

import gin
import jax
import jax.numpy as jnp
import pytest

import storage
import train as train_entry
import code_corpus
from data.batches import TrainBatches
from training import goodput
from training.metrics import MetricsWriter

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_attribution_device_first_then_compilation_then_the_host_phase():
  # Device busy 0-4; a compilation 3-6 (3-4 overlaps the device: that second is step time); input
  # 0-2 (while the device works: costs nothing); checkpoint 5-8 (5-6 is compilation); nothing 8-10.
  seconds = goodput.attribute(0, 10, busy=[(0, 4)], compiles=[(3, 6)],
                              spans=[(0, 2, "input"), (5, 8, "checkpoint")])
  assert seconds == {**dict.fromkeys(goodput.PHASES, 0.0), "step": 4, "compile": 2, "checkpoint": 2, "other": 2}
  assert sum(seconds.values()) == 10
  # Clipped to the window; overlapping device intervals counted once.
  seconds = goodput.attribute(2, 6, busy=[(0, 3), (1, 5)], compiles=[], spans=[(4, 9, "evaluation")])
  assert (seconds["step"], seconds["evaluation"], seconds["other"]) == (3, 1, 0)


def test_lost_steps_are_the_logged_steps_past_the_checkpoint_and_their_share_of_the_windows():
  window = lambda step, steps, s: {"step": step, "loss": 1.0, "time/window_s": s, "time/window_steps": steps}  # noqa
  previous = [window(4, 4, 8.0), window(8, 4, 4.0), window(12, 4, 6.0), {"step": 12, "validation/python": 2.0}]
  lost = goodput.lost_to_restart(previous, 10)  # steps 11, 12 of the window 9-12, and nothing before
  assert lost == {"time/lost_steps": 2.0, "time/lost_s": 3.0}
  assert goodput.lost_to_restart(previous, 12) is None


def test_the_breakdown_leaves_out_a_damaged_line_or_a_negative_time_and_says_so(tmp_path, capsys):
  lines = ['{"step": 2, "time/step_s": 3.0, "time/input_s": 1.0, "time/window_s": 4.0, "time/window_steps": 2}',
           "{torn mid-file",
           '{"step": 4, "time/step_s": -5.0, "time/window_s": 1.0, "time/window_steps": 2}',
           '{"step": 6, "time/step_s": "fast", "time/window_s": 1.0, "time/window_steps": 2}',
           '{"step": 8, "time/step_s": 1.0, "time/window_s": 1.0, "time/window_steps": 2}']
  (tmp_path / "metrics.jsonl").write_text("\n".join(lines) + "\n")
  records, skipped = goodput.read_records(str(tmp_path / "metrics.jsonl"))
  assert [r["step"] for r in records] == [2, 8] and len(skipped) == 3
  assert skipped[0].startswith(f"{tmp_path}/metrics.jsonl:2: not valid JSON")
  assert skipped[1] == (f"{tmp_path}/metrics.jsonl:3: time/step_s is -5.0: a time must be a finite number of "
                        "seconds, not negative")
  assert goodput.main([str(tmp_path)]) == 0
  captured = capsys.readouterr()
  assert "warning: 3 lines of" in captured.err and "left out of the breakdown" in captured.err
  # Only the two good windows count: 4 s of steps of 5 s, never a share above 100%.
  assert "goodput (train-step share of wall time and time lost to restarts) 80.0%" in captured.out


def test_the_timeline_counts_device_time_as_step_and_idle_host_time_by_phase():
  f = jax.jit(lambda a: jnp.tanh(a @ a @ a @ a).sum())
  x = jnp.ones((700, 700))
  f(x).block_until_ready()
  began = time.perf_counter()
  for _ in range(3):
    f(x).block_until_ready()
  device_s = (time.perf_counter() - began) / 3
  timeline = goodput.Timeline()
  try:
    g = jax.jit(lambda a: jnp.tanh(a @ a @ a @ a).mean())  # new: compiled in the window
    with timeline.phase("step"):
      loss = g(x)
    timeline.dispatched(loss)
    with timeline.phase("logging"):  # the device is busy all along: nothing idle to charge
      time.sleep(device_s / 4)
    input_began = time.time()
    with timeline.phase("input"):  # after the device is done: all of it is input wait
      loss.block_until_ready()
      time.sleep(0.3)
    relabelled_began = input_ended = time.time()
    with timeline.phase("startup") as relabelled:
      time.sleep(0.05)
      relabelled[0] = "checkpoint"
    relabelled_ended = time.time()
    wall_start = timeline._window_start
    seconds = timeline.window()
    wall_after = time.time() - wall_start
  finally:
    timeline.close()
  # Orderings and bounds that a loaded host keeps: the window ends inside window(), so its phases sum to
  # no more than the wall time just after it and no less than the wall time up to the relabelled phase's
  # end; a phase holds at least its sleep and at most its own wall time.
  assert relabelled_ended - wall_start - 1e-6 <= sum(seconds.values()) <= wall_after + 1e-6  # float sums
  assert seconds["compile"] > 0.01
  assert seconds["logging"] < 0.3 * device_s / 4 + 0.01, seconds  # the device was busy all along
  # At least its sleep less the moment the watcher thread takes to see the device finish.
  assert 0.25 < seconds["input"] <= input_ended - input_began + 1e-6, seconds
  assert seconds["step"] > 0.3 * device_s, (seconds, device_s)
  assert 0.05 <= seconds["checkpoint"] <= relabelled_ended - relabelled_began + 1e-6 and seconds["startup"] == 0
  assert timeline.totals == seconds


def test_device_memory_is_the_busiest_local_device_s_where_the_backend_reports_it(monkeypatch):
  class Device:
    def __init__(self, stats):
      self.stats = stats

    def memory_stats(self):
      return self.stats

  monkeypatch.setattr(jax, "local_devices", lambda: [Device({"bytes_in_use": 5, "peak_bytes_in_use": 9}),
                                                     Device({"bytes_in_use": 7, "peak_bytes_in_use": 8})])
  assert goodput.device_memory() == {"memory/bytes_in_use": 7.0, "memory/peak_bytes_in_use": 9.0}
  monkeypatch.setattr(jax, "local_devices", lambda: [Device(None)])  # XLA:CPU
  assert goodput.device_memory() == {}
  breakdown = goodput.run_breakdown([{"step": 2, "time/step_s": 3.0, "time/input_s": 1.0,
                                      "memory/peak_bytes_in_use": 2.0 ** 31},
                                     {"step": 2, "time/lost_steps": 1.0, "time/lost_s": 4.0}])
  assert (breakdown["total_s"], breakdown["goodput"], breakdown["lost_steps"]) == (4.0, 3.0 / 8.0, 1.0)
  assert "peak device memory 2.00 GiB" in goodput.table(breakdown)
  assert goodput.shares_line({"step": 3.0, "input": 1.0, "other": 0.0}) == "step 75.0%  input 25.0%"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
  return code_corpus.build_cached(str(tmp_path_factory.mktemp("goodput_corpus")))


def _train(corpus, model_dir, steps, *extra):
  gin.clear_config()
  cwd = os.getcwd()
  os.chdir(ROOT)
  try:
    return train_entry.main(["--gin_file=gin_configs/runs/demo.gin", f"--gin.MODEL_DIR='{model_dir}'",
                             f"--gin.CORPUS_DIR='{corpus}'", "--gin.MODEL_SIZE='tiny'", f"--gin.TRAIN_STEPS={steps}",
                             "--gin.MIXTURE_OR_TASK_NAME='code_python'", "--gin.BATCH_SIZE=8",
                             "--gin.TASK_FEATURE_LENGTHS={'inputs': 32, 'targets': 32}", "--gin.train.log_every=2",
                             "--gin.train.eval_every=0", *extra])
  finally:
    os.chdir(cwd)
    gin.clear_config()


SLOW_INPUT_S = 0.25


def test_a_slow_input_pipeline_shows_as_input_wait_and_the_breakdown_sums_to_the_wall_time(corpus, tmp_path,
                                                                                             monkeypatch, capsys):
  next_batch = TrainBatches.__next__

  def slow_next(self):
    time.sleep(SLOW_INPUT_S)  # the test hook: an input pipeline slower than the tiny model's step
    return next_batch(self)

  monkeypatch.setattr(TrainBatches, "__next__", slow_next)
  model_dir = str(tmp_path / "run")
  closed = []  # when the writer closes: the run's last record is written just before
  close = MetricsWriter.close
  monkeypatch.setattr(MetricsWriter, "close", lambda self: closed.append(time.time()) or close(self))
  began = time.time()
  _train(corpus, model_dir, 10, "--gin.train.checkpoint_every=10")
  wall = time.time() - began
  output = capsys.readouterr().out
  metrics = [r for _, r in storage.read_jsonl(os.path.join(model_dir, "metrics.jsonl"))]
  windows = [r for r in metrics if "loss" in r]
  assert [r["step"] for r in windows] == [2, 4, 6, 8, 10]
  for record in windows:  # each window's phases add up to its wall time
    phases = sum(v for k, v in record.items() if k.startswith("time/") and k.endswith("_s") and k != "time/window_s")
    assert abs(phases - record["time/window_s"]) < 1e-6 * max(1.0, phases)
    assert record["time/window_steps"] == 2
  later = windows[1:]  # past compilation: the device waits for input
  # The sleeps are a lower bound whatever else the machine runs. Which phase is largest is not: on a
  # CI host at a load average of 8 another phase once outgrew the 0.47 s of input wait in a window.
  assert all(r["time/input_s"] > 0.7 * 2 * SLOW_INPUT_S for r in later), later
  # The console lines name the phases largest first, input among them.
  lines = [line.split("time: ", 1)[1] for line in output.splitlines() if line.startswith("  time: ")]
  assert lines and all("input " in line for line in lines[1:]), lines
  for line in lines:
    percents = [float(part.rsplit(" ", 1)[1].split("%")[0]) for part in line.split("  ") if "%" in part]
    assert percents == sorted(percents, reverse=True), line
  breakdown = goodput.run_breakdown(metrics)
  # The whole run, from train.py's flags to its last record (written just before the writer closes),
  # is the wall time of its main up to there. What follows (closing the TensorBoard writer, releasing
  # MODEL_DIR) is not on record: 55 ms here under ten busy processes, 2 s once on a loaded CI host.
  recorded = closed[-1] - began
  assert recorded - 0.5 < breakdown["total_s"] <= recorded <= wall, (recorded, wall, breakdown)
  assert breakdown["seconds"]["other"] < 0.02 * breakdown["total_s"]
  assert breakdown["seconds"]["input"] >= 10 * SLOW_INPUT_S * 0.8
  assert breakdown["seconds"]["compile"] > 0 and breakdown["seconds"]["checkpoint"] > 0
  assert f"time of this run ({breakdown['total_s'] / 60:.1f} min)" in output

  assert goodput.main([model_dir]) == 0
  table = capsys.readouterr().out
  assert "input" in table and "steps 10; goodput" in table
  assert goodput.main([str(tmp_path / "nothing")]) == 2
  assert not os.path.exists(os.path.join(model_dir, "tensorboard", "plugins"))  # no profile unless asked
  assert "metrics.jsonl not found" in capsys.readouterr().err


def _annotated_steps(xplane: bytes) -> list[int]:
  data = jax.profiler.ProfileData.from_serialized_xspace(xplane)
  return sorted(int(dict(event.stats)["step_num"]) for plane in data.planes for line in plane.lines
                for event in line.events if event.name == "train")


def test_train_py_profiles_chosen_steps_and_logs_pass_at_k_while_training(corpus, tmp_path, capsys):
  model_dir = str(tmp_path / "profiled")
  _train(corpus, model_dir, 6, "--gin.train.profile_steps=(3, 2)", "--gin.train.passk=@codelm.PasskConfig()",
         "--gin.codelm.PasskConfig.every=3", "--gin.codelm.PasskConfig.languages=('python',)",
         "--gin.codelm.PasskConfig.problems=2", "--gin.codelm.PasskConfig.num_samples=2",
         "--gin.codelm.PasskConfig.max_decode_length=16", "--gin.codelm.PasskConfig.ks=(1, 2)",
         "--gin.codelm.PasskConfig.workers=1")
  # pass@k of the run's own parameters at steps 3 and 6, scored in the background, logged at those
  # steps; the run waited for the last scorer before it ended, and drew passk.png.
  metrics = [r for _, r in storage.read_jsonl(os.path.join(model_dir, "metrics.jsonl"))]
  passk = {r["step"]: r for r in metrics if "passk/python/pass@1" in r}
  assert sorted(passk) == [3, 6]
  assert all(0 <= r["passk/python/pass@1"] <= r["passk/python/pass@2"] <= 1 for r in passk.values())
  assert os.path.isfile(os.path.join(model_dir, "passk", "step_6", "predictions.jsonl"))
  assert open(os.path.join(model_dir, "passk.png"), "rb").read(4) == b"\x89PNG"
  assert any(r.get("time/evaluation_s", 0) > 0 for r in metrics)  # sampling is evaluation time
  folder = os.path.join(model_dir, "tensorboard", "plugins", "profile")
  assert os.listdir(folder) == ["steps_000003-000004"]
  xplanes = [f for f in os.listdir(os.path.join(folder, "steps_000003-000004")) if f.endswith(".xplane.pb")]
  assert len(xplanes) == 1
  with open(os.path.join(folder, "steps_000003-000004", xplanes[0]), "rb") as f:
    assert _annotated_steps(f.read()) == [3, 4]  # the loop's step markers, those steps only
  assert "profile of steps 3-4 written to" in capsys.readouterr().out
  profile = [r for _, r in storage.read_jsonl(os.path.join(model_dir, "metrics.jsonl")) if "time/profile_s" in r]
  assert profile and all(r["time/profile_s"] > 0 for r in profile)  # its cost is in the breakdown


def test_profile_settings_are_refused_by_name_before_anything_is_written(corpus, tmp_path, capsys):
  for flag, message in (("--gin.train.profile_steps=(0, 2)", "train.profile_steps FIRST must be at least 1"),
                        ("--gin.train.profile_every=5", "train.profile_every 5 repeats train.profile_steps"),
                        ("--gin.train.profile_steps=3", "train.profile_steps must be (FIRST, COUNT)")):
    with pytest.raises(SystemExit) as exit_:
      _train(corpus, str(tmp_path / "refused"), 4, flag)
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err
  assert not os.path.exists(tmp_path / "refused")
