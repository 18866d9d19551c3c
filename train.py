"""Train a codelm model from gin configs, the T5X way.

  python train.py --gin_file=gin_configs/runs/pretrain.gin --gin_file=gin_configs/models/1b.gin \
      --gin_file=gin_configs/mixtures/unimax_2.gin --gin.MODEL_DIR="'/tmp/run'" \
      --gin.CORPUS_DIR="'corpus'" [--gin.TRAIN_STEPS=1000 ...]

Every host of a pod runs this same command. Training resumes from the newest checkpoint in MODEL_DIR;
SIGTERM (preemption) saves a checkpoint and exits cleanly. The operative config goes to
MODEL_DIR/config.gin, figures to MODEL_DIR/metrics.jsonl, TensorBoard and MODEL_DIR/loss.png.
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import signal
import sys
import time
from typing import Sequence

import gin
import jax
import numpy as np
from jax.sharding import NamedSharding

import gin_flags
from gin_flags import UsageError, check_float, check_int, check_mesh_shape, check_writable_dir
from model import sharding
from model.config import SIZES, get_config
from model.summary import flops_per_token
from model.transformer import Decoder
from data.languages import LANGUAGES
from data.mixtures import display_name, mixture_name, register_corpus
from objectives.ul2 import UL2Config
from data.vocab import get_vocabulary
from data.batches import train_batches, validation_batches
from training.distributed import maybe_initialize_distributed
from training.checkpoints import CheckpointError, Checkpointer, abstract_with_shardings
from sampling.jsonl import OutputLocked, exclusive_output
from training.metrics import MetricsWriter
from training.run_info import write_run_info
from training.optimizer import adafactor, rsqrt_schedule
from training.step import eval_step, init_state, state_shardings, train_step
from training.throughput import matmul_ceiling

UL2Config = gin.external_configurable(UL2Config, module="codelm")


class Preemption:
  """Turns SIGTERM into a flag the loop checks between steps (a checkpoint, then a clean exit)."""

  def __init__(self):
    self.requested = False
    signal.signal(signal.SIGTERM, self._handle)

  def _handle(self, signum, frame):
    del signum, frame
    self.requested = True


def _global_batch(batch, batch_sharding):
  return {k: jax.make_array_from_process_local_data(batch_sharding, np.asarray(v)) for k, v in batch.items()}


@gin.configurable(denylist=["gin_config_str"])
def train(*, model_dir: str = gin.REQUIRED, model_size: str = gin.REQUIRED, corpus_dir: str = gin.REQUIRED,
          vocab_path: str | None = None, mixture_or_task_name: str = gin.REQUIRED,
          task_feature_lengths: dict = gin.REQUIRED, batch_size: int = gin.REQUIRED, train_steps: int = gin.REQUIRED,
          base_learning_rate: float = 0.01, warmup_fraction: float = 0.1, z_loss: float = 1e-4,
          clip_global_norm: float | None = None, microbatches: int = 1, mesh_shape: Sequence[int] = (-1, 1, 1),
          model_overrides: dict | None = None, ul2_config: UL2Config | None = None, seed: int = 0,
          log_every: int = 50, checkpoint_every: int = 1000, keep_checkpoints: int = 3,
          eval_every: int = 0, eval_batches: int = 4, init_from: str | None = None,
          gin_config_str: str = "") -> dict:
  """Trains until train_steps; returns the last logged metrics. One train.py per MODEL_DIR: the first
  process holds MODEL_DIR/train.lock while it runs, and a second run there refuses at once."""
  arguments = dict(locals())
  check_arguments(arguments)
  os.makedirs(model_dir, exist_ok=True)
  with exclusive_output(os.path.join(model_dir, "train"), "train.py", f"MODEL_DIR {model_dir}") if jax.process_index() == 0 \
      else contextlib.nullcontext():
    return _train(**arguments)


def _train(*, model_dir, model_size, corpus_dir, vocab_path, mixture_or_task_name, task_feature_lengths,
           batch_size, train_steps, base_learning_rate, warmup_fraction, z_loss, clip_global_norm, microbatches,
           mesh_shape, model_overrides, ul2_config, seed, log_every, checkpoint_every, keep_checkpoints,
           eval_every, eval_batches, init_from, gin_config_str) -> dict:
  """train() once its arguments are checked and MODEL_DIR is this run's."""
  sequence_length = max(task_feature_lengths.values())
  vocab_path = vocab_path or os.path.join(corpus_dir, "spm.model")
  primary = jax.process_index() == 0
  if primary and gin_config_str:
    with open(os.path.join(model_dir, "config.gin"), "w") as f:
      f.write(gin_config_str)

  plans = register_corpus(corpus_dir, vocab_path, rows=train_steps * batch_size, sequence_length=sequence_length,
                          ul2_config=ul2_config)
  if primary and mixture_or_task_name in plans:
    plan = plans[mixture_or_task_name]
    print(f"{mixture_or_task_name}: {plan.budget_tokens:,.0f} document tokens in {plan.rows:,} rows; "
          "share % / epochs: " + ", ".join(f"{display_name(t)} {100 * plan.token_shares[t]:.1f} / {plan.epochs[t]:.2f}"
                                           for t in plan.token_shares), flush=True)
  vocabulary = get_vocabulary(vocab_path)
  config = get_config(model_size, vocab_size=vocabulary.vocab_size, max_length=sequence_length,
                      **(model_overrides or {}))
  model = Decoder(config)
  if primary:  # what sample.py needs to rebuild the model without this run's gin files
    write_run_info(model_dir, config, vocab_path)
  schedule = rsqrt_schedule(base_learning_rate, int(warmup_fraction * train_steps))
  optimizer = adafactor(schedule, clip_global_norm)
  mesh = sharding.make_mesh(*mesh_shape)
  batch_sharding = NamedSharding(mesh, sharding.batch_spec())
  abstract, shardings = state_shardings(model, optimizer, mesh)

  checkpointer = Checkpointer(os.path.join(model_dir, "checkpoints"), keep=keep_checkpoints)
  writer = MetricsWriter(model_dir, primary)
  with sharding.activation_sharding(mesh):
    # Damaged newer checkpoints are moved aside, so this run trains past their steps again.
    restored = checkpointer.restore_latest(abstract_with_shardings(abstract, shardings), move_damaged=True)
    if restored:
      state, progress, start = restored
      print(f"resumed from step {start} in {checkpointer.directory}", flush=True)
    else:
      state = jax.jit(lambda: init_state(model, optimizer, jax.random.key(seed)), out_shardings=shardings)()
      progress, start = {"batches": 0}, 0
      if init_from:  # fine-tuning: another run's parameters, a fresh optimizer and step 0
        source = Checkpointer(init_from, async_save=False)
        found = source.restore_latest(abstract_with_shardings(abstract, shardings))
        if found is None:
          raise UsageError(f"train.init_from: no checkpoint in {init_from!r}")
        state = state.replace(params=found[0].params)
        source.close()
        print(f"initialised parameters from {init_from} step {found[2]}", flush=True)

    step_fn = jax.jit(functools.partial(train_step, model=model, optimizer=optimizer, z_loss=z_loss,
                                        microbatches=microbatches),
                      in_shardings=(shardings, batch_sharding), out_shardings=(shardings, None),
                      donate_argnums=0)
    eval_fn = jax.jit(functools.partial(eval_step, model=model), in_shardings=(shardings.params, batch_sharding))
    batches = train_batches(mixture_or_task_name, sequence_length, batch_size, seed, progress["batches"])
    eval_sets = {}
    if eval_every:
      # This corpus's language tasks (not whatever else this process registered under those names).
      in_corpus = set(plans[mixture_name("natural")].token_shares)
      for language in LANGUAGES:  # causal-LM loss on each language's validation split, as the paper compares
        if language.task_name in in_corpus:
          eval_sets[language.name] = validation_batches(language.task_name, sequence_length, batch_size,
                                                             eval_batches)
      eval_sets = {k: v for k, v in eval_sets.items() if v}  # languages with no validation files

    peak = matmul_ceiling(config.dtype) * jax.device_count()
    model_flops = flops_per_token(config, sequence_length)
    preemption = Preemption()
    last, window_start, window_tokens, window_start_step, window_loss = {}, time.perf_counter(), 0, start, 0.0
    run_start, run_start_step = time.perf_counter(), start
    step = start
    try:
      while step < train_steps:
        state, metrics = step_fn(state, _global_batch(next(batches), batch_sharding))
        window_loss = window_loss + metrics["loss"]  # stays on device: no host round trip per step
        progress["batches"] += 1
        step += 1
        window_tokens += batch_size * sequence_length
        stop = preemption.requested  # sampled once: a SIGTERM arriving later is handled next step
        checkpoint_now = step % checkpoint_every == 0 or step == train_steps or stop
        if step % log_every == 0 or checkpoint_now:
          metrics = jax.device_get(metrics)  # the only host round trip: at log and checkpoint steps
          metrics["loss"] = float(window_loss) / (step - window_start_step)  # mean over the window
          loss = metrics["loss"]
          bad = {k: float(metrics[k]) for k in ("loss", "grad_norm", "param_norm") if not math.isfinite(float(metrics[k]))}
          if bad:
            newest = max(checkpointer.steps(), default=None)
            kept = (f"the newest checkpoint, step {newest}, is kept (a rerun verifies it before resuming)"
                    if newest is not None else "no checkpoint had been written yet")
            raise FloatingPointError(f"non-finite {', '.join(f'{k} {v}' for k, v in bad.items())} at step "
                                     f"{step}: stopped without saving; {kept}")
          elapsed = time.perf_counter() - window_start
          tokens_per_s = window_tokens / max(elapsed, 1e-9)
          steps_per_s = (step - run_start_step) / max(time.perf_counter() - run_start, 1e-9)
          last = {"loss": loss, "z_loss": float(metrics["z_loss"]), "grad_norm": float(metrics["grad_norm"]),
                  "learning_rate": float(schedule(step - 1)), "tokens_per_second": tokens_per_s,
                  "param_norm": float(metrics["param_norm"]),
                  "mfu": model_flops * tokens_per_s / peak}
          writer.write(step, last)
          if primary:
            eta = (train_steps - step) / max(steps_per_s, 1e-9)
            print(f"step {step}/{train_steps}  loss {loss:.4f}  lr {last['learning_rate']:.2e}  "
                  f"grad norm {last['grad_norm']:.3f}  {tokens_per_s:,.0f} tokens/s  MFU {100 * last['mfu']:.1f}%  "
                  f"ETA {eta / 60:.1f} min", flush=True)
          window_start, window_tokens, window_start_step, window_loss = time.perf_counter(), 0, step, 0.0
        if eval_sets and (step % eval_every == 0 or step == train_steps):
          losses = {}
          for language, eval_batches_ in eval_sets.items():
            sums = [jax.device_get(eval_fn(state.params, _global_batch(b, batch_sharding))) for b in eval_batches_]
            losses[f"validation/{language}"] = sum(float(s["loss_sum"]) for s in sums) / max(
                sum(float(s["weight"]) for s in sums), 1.0)
          writer.write(step, losses)
          if primary:
            print("  validation " + "  ".join(f"{k.split('/')[1]} {v:.3f}" for k, v in losses.items()), flush=True)
        if checkpoint_now:
          checkpointer.save(step, state, dict(progress, step=step), force=True)
        if stop:
          print(f"SIGTERM: checkpoint at step {step} saved; exiting", flush=True)
          break
    finally:
      checkpointer.close()
      plot = writer.plot()
      writer.close()
  if primary:
    print(f"checkpoints: {checkpointer.directory}\nmetrics: {writer.path}\nloss curve: {plot}", flush=True)
  return last


def check_arguments(arguments: dict) -> None:
  """Every gin value of train() by type and range, before anything is read or written."""
  a = arguments
  for name in ("model_dir", "corpus_dir", "mixture_or_task_name", "model_size"):
    if not isinstance(a[name], str) or not a[name]:
      raise UsageError(f"train.{name} must be a non-empty string, got {a[name]!r}")
  if a["model_size"] not in SIZES:
    raise UsageError(f"train.model_size: unknown size {a['model_size']!r}; choose one of {', '.join(SIZES)}")
  for name in ("vocab_path", "init_from"):
    if a[name] is not None and (not isinstance(a[name], str) or not a[name]):
      raise UsageError(f"train.{name} must be a path or None, got {a[name]!r}")
  lengths = a["task_feature_lengths"]
  if not isinstance(lengths, dict) or not lengths:
    raise UsageError(f"train.task_feature_lengths must be a dict such as {{'inputs': 1024, 'targets': 1024}}, "
                     f"got {lengths!r}")
  for feature, length in lengths.items():
    check_int(f"train.task_feature_lengths[{feature!r}]", length, 1)
  for name in ("batch_size", "train_steps", "microbatches", "log_every", "checkpoint_every", "keep_checkpoints",
               "eval_batches"):
    check_int(f"train.{name}", a[name], 1)
  check_int("train.eval_every", a["eval_every"], 0)
  check_int("train.seed", a["seed"])
  if a["batch_size"] % a["microbatches"]:
    raise UsageError(f"train.batch_size {a['batch_size']} is not a multiple of train.microbatches "
                     f"{a['microbatches']}")
  check_float("train.base_learning_rate", a["base_learning_rate"], above=0)
  check_float("train.warmup_fraction", a["warmup_fraction"], 0, 1)
  check_float("train.z_loss", a["z_loss"], 0)
  if a["clip_global_norm"] is not None:
    check_float("train.clip_global_norm", a["clip_global_norm"], above=0)
  check_mesh_shape("train.mesh_shape", a["mesh_shape"])
  check_writable_dir("train.model_dir", a["model_dir"])


def main(argv: Sequence[str] | None = None) -> dict:
  gin_files, bindings = gin_flags.parse_flags(sys.argv[1:] if argv is None else argv, __doc__)
  maybe_initialize_distributed()
  try:
    gin_flags.parse_gin(gin_files, bindings)
    return train(gin_config_str=gin.config_str())
  except (FloatingPointError, UsageError, CheckpointError, OutputLocked) as error:
    sys.exit(f"train.py: {gin_flags.message(error)}")


if __name__ == "__main__":
  main()
