"""pass@k while training (issue 43): every `every` steps and at the last, the run's current parameters
sample a fixed set of HumanEval prompts, and evaluation/score.py scores them in a background process,
so the train steps never wait for a compiler or a sandbox.

What it costs the run: the sampling itself, on the devices, at its steps (the first one also compiles
the decode loop: one Sampler is built once and its programs are reused, since the parameters are an
argument of its jitted functions, not a constant of them); at every step one `poll()` of the running
scorer. Scorers run one at a time (later steps queue), so scoring takes at most `workers` host cores
beside the input pipeline.

Files (through `storage`, so OUTPUT_DIR may be gs://): OUTPUT_DIR/step_<N>/predictions.jsonl in
sample.py's format, and the scorer's results.jsonl, metrics.json and scorer.log beside it. Figures:
`passk/<language>/pass@<k>` at step N in metrics.jsonl and TensorBoard, as the scorer reports them:
a fraction of problems in [0, 1] (the unbiased estimator, evaluation/passk.py), not a percent.

A scorer that fails (a non-zero exit, a kill) is started again: it is resumable (evaluation/resumable.py
keeps the verdicts already in results.jsonl); after RETRIES retries its step is given up with a warning.
On several hosts every host samples (the Sampler is SPMD); only the primary writes and scores.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from typing import Any, Sequence

import languages
import storage
from data.vocab import CODE_TOKEN, EOD_TOKEN
from evaluation.prompts import typed_prompts
from model.transformer import Decoder
from sampling import predictions
from sampling.prompt_fit import encode_prompts
from sampling.sampler import Sampler, SamplingConfig
from sandbox import execution
from sandbox.renderers import EVALUATED, NOT_EVALUATED, get as renderer
from training.loop import StepEnd
from training.metrics import MetricsWriter

NAME = "codelm.PasskConfig"  # how gin names the config, in every error message
RETRIES = 2  # a failed scorer is started again this many times before its step is given up
SCORER = (sys.executable, "-m", "evaluation.score")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # where `-m evaluation.score` resolves


@dataclasses.dataclass(frozen=True)
class PasskConfig:
  """What to sample and how; the prompts are the first `problems` typed HumanEval problems in each
  of `languages` (evaluation/prompts.py). The same seed at every step: the draws differ between steps
  only because the model does. `check()` says what is wrong, naming the field."""
  every: int = 1000  # steps between evaluations; the run's last step is evaluated too
  languages: tuple[str, ...] = ("python", "cpp", "java")
  problems: int = 20
  num_samples: int = 5
  temperature: float = 0.8
  top_p: float = 0.95
  max_decode_length: int = 128
  ks: tuple[int, ...] = (1, 5)
  seed: int = 0
  workers: int = 2  # the scorer's sandboxes at a time
  batch_size: int = 256  # decode rows (sample.py's --batch_size)

  def __post_init__(self):
    for name in ("languages", "ks"):  # gin gives lists
      if isinstance(getattr(self, name), list):
        object.__setattr__(self, name, tuple(getattr(self, name)))

  @property
  def language_names(self) -> tuple[str, ...]:
    """codelm's names of `languages` ("C++" -> "cpp")."""
    return tuple(languages.get(name).name for name in self.languages)

  def check(self) -> None:
    """ValueError naming the field: its type, its range, ks <= num_samples, scoring languages only."""
    for name in ("every", "problems", "num_samples", "max_decode_length", "workers", "batch_size"):
      _check_int(name, getattr(self, name), 1)
    _check_int("seed", self.seed)
    _check_number("temperature", self.temperature, self.temperature >= 0, "at least 0 (0: greedy)")
    _check_number("top_p", self.top_p, 0 < self.top_p <= 1, "in (0, 1]")
    if not isinstance(self.ks, tuple) or not self.ks:
      raise ValueError(f"{NAME}.ks must be a non-empty list of integers, got {self.ks!r}")
    for k in self.ks:
      _check_int("ks", k, 1)
      if k > self.num_samples:
        raise ValueError(f"{NAME}.ks: pass@{k} needs at least {k} samples per problem, but num_samples is "
                         f"{self.num_samples}")
    _check_languages(self.languages)


def _check_int(name: str, value: Any, minimum: int | None = None) -> None:
  if isinstance(value, bool) or not isinstance(value, int):
    raise ValueError(f"{NAME}.{name} must be an integer, got {value!r}")
  if minimum is not None and value < minimum:
    raise ValueError(f"{NAME}.{name} must be at least {minimum}, got {value}")


def _check_number(name: str, value: Any, in_range: bool, range_text: str) -> None:
  if isinstance(value, bool) or not isinstance(value, (int, float)) or not in_range:  # NaN is never in range
    raise ValueError(f"{NAME}.{name} must be a number {range_text}, got {value!r}")


def _check_languages(names: Any) -> None:
  """Every name a scoring language (sandbox/renderers), each once."""
  if not isinstance(names, tuple) or not names:
    raise ValueError(f"{NAME}.languages must be a non-empty list of languages, got {names!r}")
  seen = set()
  for name in names:
    try:
      language = languages.get(name)
    except ValueError as error:
      raise ValueError(f"{NAME}.languages: {error}") from None
    if language.name in NOT_EVALUATED or language.name not in EVALUATED:
      raise ValueError(f"{NAME}.languages: {language.display_name} is not a scoring language: "
                       f"{NOT_EVALUATED.get(language.name, 'no renderer')}; choose from {', '.join(EVALUATED)}")
    if language.name in seen:
      raise ValueError(f"{NAME}.languages names {language.display_name} twice")
    seen.add(language.name)


def passk_figures(metrics: dict, ks: Sequence[int]) -> dict[str, float]:
  """`passk/<language>/pass@<k>` from a scorer's metrics.json (a fraction in [0, 1]); a k larger than
  some problem's samples is absent there (evaluation/passk.py) and here."""
  return {f"passk/{name}/pass@{k}": float(metrics[name][f"pass@{k}"]) for name in metrics.get("languages", [])
          for k in ks if metrics[name].get(f"pass@{k}") is not None}


@dataclasses.dataclass
class _Scoring:
  """One step's background scorer and its attempts so far."""
  step: int
  directory: str  # OUTPUT_DIR/step_<N>: predictions.jsonl in, results.jsonl and metrics.json out
  log: str  # a local file with every attempt's output (a Popen cannot write to gs://)
  process: subprocess.Popen | None = None
  failures: int = 0


class PasskDuringTraining:
  """The hook (training/loop.py): samples at its steps, scores in the background, logs what finished.

  `model` is the run's Decoder (not a LoRA run's: its parameters are adapters, and merging them into
  the frozen base at each evaluation is not supported: ValueError), `mesh` the training mesh, whose
  parameter layout end.state.params has; `output_dir` is MODEL_DIR/passk. `scorer_command` replaces
  `python -m evaluation.score` (tests put a wrapper there); the scorer's flags follow it.
  """
  phase = "evaluation"  # training/goodput.py

  def __init__(self, config: PasskConfig, model: Decoder, vocabulary, mesh, output_dir: str, writer: MetricsWriter,
               train_steps: int, primary: bool, scorer_command: Sequence[str] | None = None):
    config.check()
    if model.lora is not None:
      raise ValueError(f"{NAME}: pass@k during training does not support LoRA runs (their parameters are "
                       "adapters of a frozen base); score their checkpoints with sample.py and evaluation.score")
    self.config, self.output_dir, self.writer = config, output_dir, writer
    self.train_steps, self.primary = train_steps, primary
    self.command = tuple(scorer_command or SCORER)
    self.prompts = typed_prompts("humaneval", languages=config.language_names, limit=config.problems)
    tokenizer = vocabulary.tokenizer
    # Parameters come with each evaluation: the jitted functions take them as an argument, so the
    # programs compiled at the first evaluation serve every later one (`self` is their static key).
    self.sampler = Sampler(model, None, vocabulary, tokenizer.piece_to_id(CODE_TOKEN),
                           [tokenizer.piece_to_id(EOD_TOKEN), vocabulary.eos_id], mesh=mesh)
    # Encoded once, as the sampler feeds them: a ValueError naming max_decode_length if it leaves no room.
    self.encoded = encode_prompts(vocabulary, self.sampler.begin_id, [p["prompt"] for p in self.prompts],
                                  model.config.max_length, config.max_decode_length, f"{NAME}.max_decode_length")
    self.sampling = SamplingConfig(config.temperature, config.top_p, max_decode_length=config.max_decode_length,
                                   rows=config.batch_size)
    self.last_sampling_s: float | None = None  # the last evaluation's sampling time (on this host)
    self._scoring: dict[int, _Scoring] = {}
    if primary:
      self._announce()

  def _announce(self) -> None:
    """Once: the prompts that do not fit and the languages this machine cannot score."""
    encoded = self.encoded
    if encoded.num_truncated:
      print(f"pass@k: {encoded.num_truncated} of {len(self.prompts)} prompts are longer than the context "
            f"({encoded.context}) minus max_decode_length ({encoded.max_decode_length}): each keeps its last "
            f"{encoded.room} tokens (marked prompt_truncated), so its score is not the benchmark's", flush=True)
    for name in self.config.language_names:
      lacking = execution.missing(renderer(name).toolchain)
      if lacking:
        print(f"warning: pass@k: {name} cannot be scored on this machine (missing {', '.join(lacking)}); "
              "no pass@k will be logged for it", file=sys.stderr, flush=True)

  def __call__(self, end: StepEnd) -> None:
    if self._scoring:
      self.poll()
    # A step ended by SIGTERM is not sampled: the grace period is the checkpoint's.
    if not end.stop and (end.step % self.config.every == 0 or end.step == self.train_steps):
      self.evaluate(end.step, end.state.params)

  def evaluate(self, step: int, params: Any) -> None:
    """Samples every prompt with `params` (every host takes part); the primary writes the predictions
    and starts their scorer."""
    config = self.config
    began = time.perf_counter()
    self.sampler.params = params
    try:
      completions = self.sampler.sample(self.encoded, config.num_samples, self.sampling, config.seed,
                                        stops=[predictions.stops(p) for p in self.prompts],
                                        prompt_ids=[predictions.prompt_seed_id(p) for p in self.prompts],
                                        truncate=True)
    finally:
      self.sampler.params = None  # hold no step's parameters past the hook: the next step may donate them
    self.last_sampling_s = time.perf_counter() - began
    if not self.primary:
      return
    directory = storage.join(self.output_dir, f"step_{step}")
    storage.makedirs(directory)
    lines = [json.dumps(record, ensure_ascii=False) + "\n" for prompt, samples, cut in
             zip(self.prompts, completions, self.encoded.truncated)
             for record in predictions.prediction_records(prompt, samples, cut)]
    storage.write_atomic(storage.join(directory, "predictions.jsonl"), "".join(lines))
    print(f"  pass@k: step {step}: {len(lines)} samples in {self.last_sampling_s:.1f} s, scoring in the background",
          flush=True)
    self._start(step)

  def _start(self, step: int) -> None:
    """Queues the scorer of `step` (replacing an older one of the same step). Scorers run one at a
    time, oldest step first: scoring never takes more than `workers` host cores from the run."""
    old = self._scoring.pop(step, None)
    if old is not None:
      _stop(old.process)
      with contextlib.suppress(OSError):
        os.unlink(old.log)
    fd, log = tempfile.mkstemp(prefix=f"passk_step_{step}_", suffix=".log")
    os.close(fd)
    self._scoring[step] = _Scoring(step, storage.join(self.output_dir, f"step_{step}"), log)
    if self._running() is None:
      self._launch_next()

  def _running(self) -> _Scoring | None:
    return next((s for s in self._scoring.values() if s.process is not None), None)

  def _launch_next(self) -> None:
    if self._scoring:
      self._launch(self._scoring[min(self._scoring)])

  def _launch(self, scoring: _Scoring) -> None:
    config = self.config
    command = [*self.command, "--predictions", storage.join(scoring.directory, "predictions.jsonl"),
               "--benchmark", "humaneval", "--output", scoring.directory,
               "--languages", ",".join(config.language_names), "--k", ",".join(map(str, config.ks)),
               "--workers", str(config.workers)]
    # No accelerator for the scorer (the run holds it); its own session, so a signal to the run's
    # process group (Ctrl-C, a scheduler's SIGTERM) reaches the run alone, and close() stops the scorer
    # and its sandboxes together; its output to the log.
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "CUDA_VISIBLE_DEVICES": ""}
    with open(scoring.log, "a", encoding="utf-8") as log:
      log.write(f"$ {' '.join(command)}\n")
      log.flush()
      scoring.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         cwd=ROOT, env=env, start_new_session=True)

  def poll(self) -> None:
    """Collects the running scorer if it has ended (one `poll()`, no device read): logs its pass@k and
    starts the next, or starts it again after a failure, or gives its step up after RETRIES retries."""
    scoring = self._running()
    code = None if scoring is None else scoring.process.poll()
    if code is None:
      return
    if code == 0:
      del self._scoring[scoring.step]
      self._log(scoring)
    else:
      scoring.failures += 1
      how = f"was killed by {signal.Signals(-code).name}" if code < 0 else f"exited with return code {code}"
      if scoring.failures <= RETRIES:
        print(f"warning: pass@k: the scorer of step {scoring.step} {how}; starting it again (retry "
              f"{scoring.failures} of {RETRIES}; it resumes from its results.jsonl)", file=sys.stderr, flush=True)
        self._launch(scoring)
        return
      del self._scoring[scoring.step]
      print(f"warning: pass@k: the scorer of step {scoring.step} {how}; given up after {RETRIES} retries "
            f"(its output: {self._keep_log(scoring)}); training goes on", file=sys.stderr, flush=True)
    self._launch_next()

  def _log(self, scoring: _Scoring) -> None:
    """A finished scorer's pass@k to the writer at the step sampled, and one console line."""
    self._keep_log(scoring)
    path = storage.join(scoring.directory, "metrics.json")
    try:
      metrics = storage.read_json(path)
      figures = passk_figures(metrics, self.config.ks)
    except (OSError, ValueError, KeyError, TypeError) as error:
      print(f"warning: pass@k: step {scoring.step}: the scorer ended but {path} is unreadable ({error})",
            file=sys.stderr, flush=True)
      return
    if figures:
      self.writer.write(scoring.step, figures)
    by_language = {}
    for key, value in figures.items():
      _, name, k = key.split("/")
      by_language.setdefault(name, []).append(f"{k} {value:.3f}")
    shown = "  ".join(f"{name} {' '.join(values)}" for name, values in by_language.items()) or "nothing scored"
    print(f"  pass@k (step {scoring.step}, {self.config.problems} problems x {self.config.num_samples} samples): "
          f"{shown}", flush=True)

  def _keep_log(self, scoring: _Scoring) -> str:
    """The scorer's output (all attempts) as STEP_DIR/scorer.log; the local copy removed."""
    path = storage.join(scoring.directory, "scorer.log")
    try:
      with open(scoring.log, encoding="utf-8", errors="replace") as log:
        storage.write_atomic(path, log.read())
      os.unlink(scoring.log)
    except OSError as error:
      print(f"warning: pass@k: could not keep the scorer's output of step {scoring.step}: {error}",
            file=sys.stderr, flush=True)
      return scoring.log
    return path

  @property
  def pending_steps(self) -> list[int]:
    """The steps whose scores have not arrived: the one being scored and those queued behind it."""
    return sorted(self._scoring)

  def resume_at(self, step: int) -> None:
    """A run resuming from its checkpoint at `step` (after MetricsWriter.resume_at): the steps up to
    there that were sampled but whose pass@k is not in metrics.jsonl (their scorer stopped with the
    run) are scored again in the background; the scorer keeps the verdicts it had written."""
    if not self.primary or not storage.isdir(self.output_dir):
      return
    logged = {r.get("step") for r in self.writer.read() if any(k.startswith("passk/") for k in r)}
    for name in storage.listdir(self.output_dir):
      found = re.fullmatch(r"step_(\d+)", name.rstrip("/"))
      sampled = found and storage.exists(storage.join(self.output_dir, name.rstrip("/"), "predictions.jsonl"))
      if sampled and int(found[1]) <= step and int(found[1]) not in logged:
        print(f"pass@k: scoring step {found[1]} again (its scorer stopped with the previous run)", flush=True)
        self._start(int(found[1]))

  def close(self, wait: bool) -> None:
    """The run ends. wait: the scorers still running finish and are logged (it says it waits);
    else (a preemption) they are stopped, and a resumed run's `resume_at` scores their steps."""
    if not self._scoring:
      return
    if wait:
      print(f"pass@k: waiting for the scorers of steps {', '.join(map(str, self.pending_steps))}", flush=True)
      while self._scoring:
        self.poll()
        time.sleep(0.1)
      return
    for scoring in self._scoring.values():
      if scoring.process is None:  # queued: nothing ran
        with contextlib.suppress(OSError):
          os.unlink(scoring.log)
      else:
        _stop(scoring.process)
        self._keep_log(scoring)
    print(f"pass@k: stopped the scorers of steps {', '.join(map(str, self.pending_steps))} (scored on resume)",
          flush=True)
    self._scoring.clear()


def _stop(process: subprocess.Popen | None) -> None:
  """SIGTERM to the scorer's session (it and its sandboxes), SIGKILL after 10 s."""
  if process is None or process.poll() is not None:
    return
  for sig, patience in ((signal.SIGTERM, 10), (signal.SIGKILL, None)):
    try:
      os.killpg(process.pid, sig)
    except ProcessLookupError:
      return
    try:
      process.wait(timeout=patience)
      return
    except subprocess.TimeoutExpired:
      continue
