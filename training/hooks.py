"""What happens around the steps (training/loop.py calls each hook after every step, in order): the
progress log with its non-finite guard, per-language validation, and checkpoints with the input
pipeline's position. Only log, validation and checkpoint steps read anything back from the devices."""

from __future__ import annotations

import math
import time
from typing import Callable, Mapping, Sequence

import jax
import numpy as np

from data.batches import TrainBatches
from training import goodput
from training.checkpoints import Checkpointer
from training.goodput import Timeline
from training.loop import StepEnd, global_batch, input_state
from training.metrics import MetricsWriter


class ProgressLog:
  """At log steps and at steps that save: the window's mean loss and the step's figures to the
  MetricsWriter and (first host) the console, with tokens/s, MFU, ETA, where the window's wall time
  went (`timeline`, training/goodput.py) and device memory where the backend reports it.

  The guard: a non-finite loss, gradient or parameter norm stops the run with FloatingPointError
  before the checkpoint hook could save the bad state (so it must come before that hook).
  """
  phase = "logging"  # training/goodput.py

  def __init__(self, writer: MetricsWriter, schedule: Callable[[int], float], train_steps: int, log_every: int,
               tokens_per_step: int, flops_per_token: float, peak_flops: float, start_step: int, primary: bool,
               newest_checkpoint: Callable[[], int | None], timeline: Timeline):
    self.writer, self.schedule, self.train_steps, self.log_every = writer, schedule, train_steps, log_every
    self.tokens_per_step, self.flops_per_token, self.peak_flops = tokens_per_step, flops_per_token, peak_flops
    self.primary, self.newest_checkpoint, self.timeline = primary, newest_checkpoint, timeline
    self.last: dict = {}  # the last logged figures: what train() returns
    self.step = start_step  # the last step done
    self._run_start, self._run_start_step = time.perf_counter(), start_step
    self._reset(start_step)

  def _reset(self, step: int) -> None:
    self._window_start, self._window_start_step = time.perf_counter(), step
    self._window_tokens, self._window_loss = 0, 0.0

  def __call__(self, end: StepEnd) -> None:
    self.step = end.step
    self._window_loss = self._window_loss + end.metrics["loss"]  # stays on device: no host round trip per step
    self._window_tokens += self.tokens_per_step
    step = end.step
    if not (step % self.log_every == 0 or end.save):
      return
    metrics = jax.device_get(end.metrics)  # the only host round trip: at log and checkpoint steps
    loss = float(self._window_loss) / (step - self._window_start_step)  # mean over the window
    figures = {"loss": loss, "grad_norm": float(metrics["grad_norm"]), "param_norm": float(metrics["param_norm"])}
    bad = {k: v for k, v in figures.items() if not math.isfinite(v)}
    if bad:
      newest = self.newest_checkpoint()
      kept = (f"the newest checkpoint, step {newest}, is kept (a rerun verifies it before resuming)"
              if newest is not None else "no checkpoint had been written yet")
      raise FloatingPointError(f"non-finite {', '.join(f'{k} {v}' for k, v in bad.items())} at step "
                               f"{step}: stopped without saving; {kept}")
    now = time.perf_counter()
    tokens_per_s = self._window_tokens / max(now - self._window_start, 1e-9)
    steps_per_s = (step - self._run_start_step) / max(now - self._run_start, 1e-9)
    self.last = {"loss": loss, "z_loss": float(metrics["z_loss"]), "grad_norm": figures["grad_norm"],
                 "learning_rate": float(self.schedule(step - 1)), "tokens_per_second": tokens_per_s,
                 "param_norm": figures["param_norm"], "mfu": self.flops_per_token * tokens_per_s / self.peak_flops}
    seconds, memory = self.timeline.window(), goodput.device_memory()
    self.writer.write(step, {**self.last, **goodput.window_record(seconds, step - self._window_start_step), **memory})
    if self.primary:
      eta = (self.train_steps - step) / max(steps_per_s, 1e-9)
      print(f"step {step}/{self.train_steps}  loss {loss:.4f}  lr {self.last['learning_rate']:.2e}  "
            f"grad norm {self.last['grad_norm']:.3f}  {tokens_per_s:,.0f} tokens/s  MFU {100 * self.last['mfu']:.1f}%  "
            f"ETA {eta / 60:.1f} min", flush=True)
      in_use = (f"  device memory {memory['memory/bytes_in_use'] / 2**30:.2f} GiB "
                f"(peak {memory['memory/peak_bytes_in_use'] / 2**30:.2f})" if memory else "")
      print(f"  time: {goodput.shares_line(seconds)}{in_use}", flush=True)
    self._reset(step)


class Validation:
  """Every `every` steps and at the last: the causal-LM loss of each language's validation batches
  (summed over batches and hosts, then divided), as the paper compares languages."""
  phase = "evaluation"  # training/goodput.py

  def __init__(self, eval_fn, eval_sets: Mapping[str, Sequence[Mapping[str, np.ndarray]]], batch_sharding,
               every: int, train_steps: int, writer: MetricsWriter, primary: bool):
    self.eval_fn, self.eval_sets, self.batch_sharding = eval_fn, eval_sets, batch_sharding
    self.every, self.train_steps, self.writer, self.primary = every, train_steps, writer, primary

  def __call__(self, end: StepEnd) -> None:
    if not self.eval_sets or not (end.step % self.every == 0 or end.step == self.train_steps):
      return
    losses = {}
    for language, batches in self.eval_sets.items():
      sums = [jax.device_get(self.eval_fn(end.state.params, global_batch(b, self.batch_sharding))) for b in batches]
      losses[f"validation/{language}"] = sum(float(s["loss_sum"]) for s in sums) / max(
          sum(float(s["weight"]) for s in sums), 1.0)
    self.writer.write(end.step, losses)
    if self.primary:
      print("  validation " + "  ".join(f"{k.split('/')[1]} {v:.3f}" for k, v in losses.items()), flush=True)


class Checkpointing:
  """At steps that save: the state, the progress (batches consumed) and each host's input-pipeline
  state, all under the step's number (the arrays asynchronously, the iterator before it moves on)."""
  phase = "checkpoint"  # training/goodput.py

  def __init__(self, checkpointer: Checkpointer, batches: TrainBatches):
    self.checkpointer, self.batches = checkpointer, batches

  def __call__(self, end: StepEnd) -> None:
    if end.save:
      self.checkpointer.save(end.step, end.state, {"batches": self.batches.position, "step": end.step}, force=True,
                             input_state=input_state(self.batches))
