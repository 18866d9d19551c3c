"""The training loop (Flax lm1b / Levanter style): a jitted step over the batches, hooks after each
step (training/hooks.py), SIGTERM as a request to save and stop; and how a run starts: from its newest
good checkpoint with the input pipeline where it was, from another run's parameters, or fresh."""

from __future__ import annotations

import dataclasses
import signal
import sys
import time
from typing import TYPE_CHECKING, Callable, Iterator, Mapping, Sequence

import jax
import numpy as np

from training.checkpoints import CheckpointError, Checkpointer, InputState, abstract_with_shardings, read_params
from training.goodput import Timeline
from training.step import TrainState

if TYPE_CHECKING:
  from data.batches import TrainBatches


class Preemption:
  """Turns SIGTERM into a flag the loop checks between steps (a checkpoint, then a clean exit)."""

  def __init__(self):
    self.requested = False
    signal.signal(signal.SIGTERM, self._handle)

  def _handle(self, signum, frame):
    del signum, frame
    self.requested = True


def global_batch(batch: Mapping[str, np.ndarray], batch_sharding) -> dict[str, jax.Array]:
  """This host's rows as its part of the global batch (every host passes its own share)."""
  return {k: jax.make_array_from_process_local_data(batch_sharding, np.asarray(v)) for k, v in batch.items()}


@dataclasses.dataclass(frozen=True)
class StepEnd:
  """What each hook sees after a step. `state` and `metrics` are still on device: reading them costs a
  host round trip, so hooks do it only at their own steps."""
  step: int  # steps done, this one included
  state: TrainState
  metrics: Mapping[str, jax.Array]
  save: bool  # a checkpoint step (every checkpoint_every, the last, or preempted)
  stop: bool  # SIGTERM: the loop ends after this step


Hook = Callable[[StepEnd], None]  # with a `phase` attribute (training/goodput.PHASES), else "other"


def run(state: TrainState, step_fn, batches: Iterator[Mapping[str, np.ndarray]], batch_sharding, start: int,
        train_steps: int, checkpoint_every: int, hooks: Sequence[Hook], preemption: Preemption,
        timeline: Timeline) -> TrainState:
  """Steps from `start` to `train_steps` (or a SIGTERM); returns the last state. Each hook's time is
  its `phase` in `timeline` (training/goodput.py: what the host did while the device was idle)."""
  step = start
  while step < train_steps:
    with timeline.phase("input"):
      batch = global_batch(next(batches), batch_sharding)
    # The annotation names the step in a profile (training/profiling.py); nothing when not tracing.
    with timeline.phase("step"), jax.profiler.StepTraceAnnotation("train", step_num=step + 1):
      state, metrics = step_fn(state, batch)
    timeline.dispatched(metrics["loss"])
    step += 1
    stop = preemption.requested  # sampled once: a SIGTERM arriving later is handled next step
    end = StepEnd(step, state, metrics, save=step % checkpoint_every == 0 or step == train_steps or stop, stop=stop)
    for hook in hooks:
      with timeline.phase(getattr(hook, "phase", "other")):
        hook(end)
    if stop:
      print(f"SIGTERM: checkpoint at step {step} saved; exiting", flush=True)
      break
  return state


def initial_state(checkpointer: Checkpointer, abstract: TrainState, shardings: TrainState,
                  init: Callable[[], TrainState], init_from: str | None) -> tuple[TrainState, dict, int]:
  """(state, progress, step): the newest good checkpoint's, else `init()` (with the parameters of
  `init_from`'s newest checkpoint when given: fine-tuning) at step 0. Damaged newer checkpoints are
  moved aside, so this run trains past their steps again."""
  restored = checkpointer.restore_latest(abstract_with_shardings(abstract, shardings), move_damaged=True)
  if restored:
    state, progress, start = restored
    print(f"resumed from step {start} in {checkpointer.directory}", flush=True)
    return state, progress, start
  state = init()
  if init_from:  # fine-tuning: another run's parameters, a fresh optimizer and step 0
    # The parameters only: the source's optimizer may differ from this run's.
    found = read_params(init_from, abstract_with_shardings(abstract.params, shardings.params))
    if found is None:
      raise CheckpointError(f"train.init_from: no checkpoint in {init_from!r}")
    state = state.replace(params=found[0])
    print(f"initialised parameters from {init_from} step {found[1]}", flush=True)
  return state, {"batches": 0}, 0


def input_state(batches: TrainBatches, position: int | None = None) -> InputState:
  """The checkpoint item of `batches`' iterator at `position` batches (default: where
  it is now): the iterator and what it must match to be restored."""
  return InputState(batches.iterator, dict(batches.pipeline, batches=batches.position if position is None
                                           else position))


def resume_input(checkpointer: Checkpointer, step: int, batches: TrainBatches, consumed: int) -> bool:
  """`batches` at batch `consumed`: restored from checkpoint `step`'s
  input state (constant time), or, when that is missing or unusable, replayed from the start (time
  grows with `consumed`) after a warning that names the file and says why. True if restored."""
  began = time.perf_counter()
  why = checkpointer.restore_input(step, input_state(batches, consumed))
  if why is None:
    batches.position = consumed
    print(f"input pipeline restored at batch {consumed} ({time.perf_counter() - began:.2f} s)", flush=True)
    return True
  print(f"warning: input pipeline state not restored: {why}; replaying {consumed} batches instead",
        file=sys.stderr, flush=True)
  batches.replay(consumed)
  print(f"input pipeline replayed {consumed} batches ({time.perf_counter() - began:.2f} s)", flush=True)
  return False
