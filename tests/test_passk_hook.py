"""pass@k while training (training/passk_hook.py): sampling at its steps with the current parameters,
background scoring that the steps do not wait for, retries, no recompilation, the config's errors,
and the loss + pass@k plot (training/metrics.py)."""

import dataclasses
import json
import os
import signal
import sys
import time

import flax.linen as nn
import jax
import pytest
from jax import monitoring

import code_corpus
from model import sharding
from model.config import get_config
from model.lora import LoraConfig
from model.transformer import Decoder, init_params
from sampling.restore import place_params
from sandbox import execution
from sandbox.renderers import get
from training.loop import StepEnd
from training.metrics import MetricsWriter
from training.passk_hook import PasskConfig, PasskDuringTraining
from training.step import TrainState

HERE = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(HERE, "solutions", "python.json"), encoding="utf-8") as f:
  CORRECT = json.load(f)["correct"]

needs_python = pytest.mark.skipif(bool(execution.missing(get("python").toolchain)),
                                  reason="no sandbox (bwrap) on this machine; run `make toolchains`")

# Python only (its toolchain is always there), 3 problems x 2 samples of 16 tokens: seconds per step.
CONFIG = PasskConfig(every=2, languages=("python",), problems=3, num_samples=2, max_decode_length=16, ks=(1, 2),
                     workers=2, batch_size=8)
NEVER = dataclasses.replace(CONFIG, every=1000)  # for steps that only collect scorers

# A scorer that, on its first attempt (the first to find no STARTED file), waits until the test creates
# RELEASE (a condition, not a time: a loaded host changes nothing), then scores.
SLOW_SCORER = """
import os, runpy, sys, time
started, release = sys.argv[1], sys.argv[2]
if not os.path.exists(started):
  open(started, "w").close()
  deadline = time.monotonic() + 300
  while not os.path.exists(release) and time.monotonic() < deadline:
    time.sleep(0.02)
sys.argv = ["evaluation.score"] + sys.argv[3:]
runpy.run_module("evaluation.score", run_name="__main__", alter_sys=True)
"""


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
  root = str(tmp_path_factory.mktemp("passk_corpus"))
  _, vocabulary = code_corpus.build(root)
  model = Decoder(get_config("tiny", vocab_size=vocabulary.vocab_size, max_length=128))
  params = nn.unbox(init_params(model, jax.random.key(0)))
  # A random model writes newlines; with its embedding (the output layer too) shrunk, near-uniform
  # logits write anything: the two sets of parameters sample visibly different completions.
  flat = dict(params, embedding=params["embedding"] * 0.01)
  return vocabulary, model, [params, flat]


def _end(step: int, params) -> StepEnd:
  return StepEnd(step, TrainState(step=step, params=params, opt_state=None), {}, save=False, stop=False)


def _slow_scorer(tmp_path) -> list[str]:
  """The scorer command; its first attempt waits until tmp_path/release exists."""
  path = tmp_path / "slow_scorer.py"
  path.write_text(SLOW_SCORER)
  return [sys.executable, str(path), str(tmp_path / "started"), str(tmp_path / "release")]


def _passk_records(writer: MetricsWriter) -> dict[int, dict]:
  return {r["step"]: {k: v for k, v in r.items() if k.startswith("passk/")} for r in writer.read()
          if any(k.startswith("passk/") for k in r)}


def _write_predictions(directory, step: int) -> None:
  """Step `step`'s predictions as the hook writes them: sample 0 correct, sample 1 wrong (pass@1 0.5)."""
  folder = directory / f"step_{step}"
  folder.mkdir(parents=True)
  with open(folder / "predictions.jsonl", "w", encoding="utf-8") as f:
    for qid in ("HumanEval/0", "HumanEval/1", "HumanEval/2"):
      for sample_id, code in enumerate((CORRECT[qid], "    return None\n")):
        f.write(json.dumps({"qid": qid, "language": "Python", "sample_id": sample_id, "code": code}) + "\n")


def _hook(setup, tmp_path, mesh=None, scorer_command=None, config=CONFIG, train_steps=100):
  vocabulary, model, _ = setup
  mesh = mesh or sharding.make_mesh(1, 1, 1, jax.devices()[:1])
  writer = MetricsWriter(str(tmp_path / "run"))
  hook = PasskDuringTraining(config, model, vocabulary, mesh, str(tmp_path / "run" / "passk"), writer, train_steps,
                             primary=True, scorer_command=scorer_command)
  return hook, writer, mesh


@pytest.mark.multidevice
@needs_python
def test_samples_at_its_steps_with_the_current_parameters_and_logs_the_verdicts(setup, tmp_path, capsys):
  _, model, params = setup
  mesh = sharding.make_mesh(-1, 1, 1)  # the training layout on all 8 devices, inside training's context
  hook, writer, _ = _hook(setup, tmp_path, mesh, train_steps=5)
  compiled = []
  listener = lambda event, seconds, **kw: compiled.append(event)  # noqa: E731
  monitoring.register_event_duration_secs_listener(listener)
  try:
    with sharding.activation_sharding(mesh):
      for step in range(1, 6):  # the parameters change at step 4, as training changes them
        if step == 3:
          compiled_before = len(compiled)
        hook(_end(step, place_params(model, params[step >= 4], mesh)))
        if step == 4:
          compiled_between = compiled[compiled_before:]
  finally:
    monitoring.unregister_event_duration_listener(listener)
  hook.close(wait=True)
  passk = tmp_path / "run" / "passk"
  assert sorted(os.listdir(passk)) == ["step_2", "step_4", "step_5"]  # every 2 steps and the last
  assert not [e for e in compiled_between if e == "/jax/core/compile/backend_compile_duration"]  # no recompiling
  lines = {s: [json.loads(l) for l in open(passk / f"step_{s}" / "predictions.jsonl")] for s in (2, 4, 5)}
  assert [(r["qid"], r["sample_id"]) for r in lines[2]] == [(f"HumanEval/{q}", s) for q in range(3) for s in range(2)]
  first = lines[2][0]
  assert first["language"] == "Python" and first["prompt_truncated"] is True and "prompt" not in first
  assert {"code", "finish_reason", "num_tokens", "entry_fn_name"} <= set(first)
  assert [r["code"] for r in lines[4]] == [r["code"] for r in lines[5]]  # same parameters, same seed
  assert [r["code"] for r in lines[2]] != [r["code"] for r in lines[4]]  # the step's own parameters
  logged = _passk_records(writer)
  assert sorted(logged) == [2, 4, 5]  # at the step sampled
  for step, figures in logged.items():
    scored = json.load(open(passk / f"step_{step}" / "metrics.json"))["python"]
    assert figures == {"passk/python/pass@1": scored["pass@1"], "passk/python/pass@2": scored["pass@2"]}
    assert len(open(passk / f"step_{step}" / "results.jsonl").readlines()) == 6
  out = capsys.readouterr().out
  assert out.count("3 of 3 prompts are longer than the context (128)") == 1
  assert "pass@k (step 4, 3 problems x 2 samples): python pass@1 " in out


@needs_python
def test_train_steps_go_on_while_the_scorer_runs_and_its_verdicts_arrive_later(setup, tmp_path):
  _, model, params = setup
  hook, writer, mesh = _hook(setup, tmp_path, scorer_command=_slow_scorer(tmp_path),
                             config=dataclasses.replace(CONFIG, every=50))
  hook(_end(50, place_params(model, params[0], mesh)))  # samples, then returns with its scorer running
  assert hook.pending_steps == [50]
  hook(StepEnd(60, None, {}, save=True, stop=True))  # SIGTERM: the grace period is the checkpoint's, no sampling
  for step in range(51, 56):  # steps without an evaluation: a poll each, which returns while the scorer waits
    hook(_end(step, None))
    assert hook.pending_steps == [50] and not _passk_records(writer)
  (tmp_path / "release").touch()  # the scorer goes on; its verdicts arrive at a later step
  step, deadline = 56, time.monotonic() + 60
  while hook.pending_steps and time.monotonic() < deadline:
    hook(_end(step, None))
    step += 1
    time.sleep(0.1)
  assert list(_passk_records(writer)) == [50] and step > 56  # arrived at a step after the release


@needs_python
def test_a_killed_scorer_is_started_again_and_its_verdicts_still_arrive(setup, tmp_path, capsys):
  hook, writer, _ = _hook(setup, tmp_path, scorer_command=_slow_scorer(tmp_path), config=NEVER)
  passk = tmp_path / "run" / "passk"
  for step in (1, 3, 4, 7):
    _write_predictions(passk, step)
  writer.write(1, {"passk/python/pass@1": 0.25})  # step 1 was logged before the restart
  hook.resume_at(5)  # a run resuming at step 5: 3 and 4 were sampled but never logged; 7 is redone by training
  assert hook.pending_steps == [3, 4] and hook._scoring[4].process is None  # one scorer at a time
  deadline = time.monotonic() + 10
  while not (tmp_path / "started").exists() and time.monotonic() < deadline:
    time.sleep(0.05)
  hook._scoring[3].process.send_signal(signal.SIGKILL)
  hook._scoring[3].process.wait()
  hook(_end(6, None))
  assert "the scorer of step 3 was killed by SIGKILL; starting it again (retry 1 of 2" in capsys.readouterr().err
  hook.close(wait=True)
  logged = _passk_records(writer)
  assert sorted(logged) == [1, 3, 4]
  assert logged[3] == logged[4] == {"passk/python/pass@1": 0.5, "passk/python/pass@2": 1.0}
  assert open(passk / "step_3" / "scorer.log").read().count("$ ") == 2  # both attempts' output kept


def test_a_scorer_that_always_fails_is_given_up_and_training_goes_on(setup, tmp_path, capsys):
  hook, writer, _ = _hook(setup, tmp_path, scorer_command=[sys.executable, "-c", "import sys; sys.exit(3)"],
                          config=NEVER)
  _write_predictions(tmp_path / "run" / "passk", 3)
  hook.resume_at(3)
  step, deadline = 4, time.monotonic() + 30
  while hook.pending_steps and time.monotonic() < deadline:
    hook(_end(step, None))  # never raises
    step += 1
    time.sleep(0.05)
  err = capsys.readouterr().err
  assert err.count("the scorer of step 3 exited with return code 3; starting it again") == 2
  assert "the scorer of step 3 exited with return code 3; given up after 2 retries" in err
  assert not hook.pending_steps and not _passk_records(writer)


def test_closing_without_waiting_stops_the_scorers(setup, tmp_path, capsys):
  hook, writer, _ = _hook(setup, tmp_path, scorer_command=_slow_scorer(tmp_path), config=NEVER)
  for step in (3, 4):
    _write_predictions(tmp_path / "run" / "passk", step)
  hook.resume_at(4)
  running = hook._scoring[3].process
  hook.close(wait=False)  # a preemption: no waiting for a scorer
  assert running.poll() == -signal.SIGTERM and not hook.pending_steps and not _passk_records(writer)
  assert "stopped the scorers of steps 3, 4" in capsys.readouterr().out
  assert (tmp_path / "run" / "passk" / "step_3" / "scorer.log").exists()


@pytest.mark.parametrize("fields, message", [
    ({"num_samples": 0}, "codelm.PasskConfig.num_samples must be at least 1, got 0"),
    ({"every": 2.5}, "codelm.PasskConfig.every must be an integer, got 2.5"),
    ({"ks": (1, 10)}, "codelm.PasskConfig.ks: pass@10 needs at least 10 samples per problem, but num_samples is 5"),
    ({"ks": ()}, "codelm.PasskConfig.ks must be a non-empty list"),
    ({"top_p": 0.0}, "codelm.PasskConfig.top_p must be a number in (0, 1], got 0.0"),
    ({"temperature": -1}, "codelm.PasskConfig.temperature must be a number at least 0"),
    ({"languages": ["dart"]}, "codelm.PasskConfig.languages: Dart is not a scoring language"),
    ({"languages": ("cobol",)}, "codelm.PasskConfig.languages: unknown language 'cobol'"),
    ({"languages": ("cpp", "C++")}, "codelm.PasskConfig.languages names C++ twice"),
])
def test_config_errors_name_the_field(fields, message):
  with pytest.raises(ValueError) as error:
    PasskConfig(**fields).check()
  assert message in str(error.value)


def test_lora_and_a_decode_length_that_leaves_no_prompt_room_are_refused(setup, tmp_path):
  vocabulary, model, _ = setup
  mesh = sharding.make_mesh(1, 1, 1, jax.devices()[:1])
  writer = MetricsWriter(str(tmp_path))
  with pytest.raises(ValueError, match="does not support LoRA"):
    PasskDuringTraining(CONFIG, Decoder(model.config, lora=LoraConfig()), vocabulary, mesh, str(tmp_path), writer,
                        10, True)
  with pytest.raises(ValueError, match="codelm.PasskConfig.max_decode_length 128 leaves no room"):
    PasskDuringTraining(PasskConfig(max_decode_length=128, ks=(1,)), model, vocabulary, mesh, str(tmp_path), writer,
                        10, True)
  assert PasskConfig(languages=["C++", "python"]).language_names == ("cpp", "python")  # gin's lists, any spelling


def test_the_passk_plot_is_drawn_only_when_passk_was_logged(tmp_path):
  writer = MetricsWriter(str(tmp_path))
  for step in range(1, 5):
    writer.write(step, {"loss": 5.0 / step})
  assert writer.plot_passk() is None and not (tmp_path / "passk.png").exists()
  writer.write(2, {"passk/python/pass@1": 0.1, "passk/python/pass@2": 0.2})
  writer.write(4, {"passk/python/pass@1": 0.3, "passk/cpp/pass@1": 0.05})
  path = writer.plot_passk()
  assert path == str(tmp_path / "passk.png") and open(path, "rb").read(8) == b"\x89PNG\r\n\x1a\n"
  assert writer.plot() == str(tmp_path / "loss.png") and (tmp_path / "loss.png").exists()
  writer.close()
