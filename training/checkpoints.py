"""Orbax checkpoints: asynchronous saves every N steps, keep the last K, resume from the newest one
that restores and verifies, onto whatever mesh the run has now (restoring with the target shardings).

Integrity: every checkpoint carries a fingerprint of the arrays it holds (per array, two 32-bit sums of
the raw bits, one of them position-weighted), computed on device when the step is saved and stored in
the checkpoint's JSON item, which orbax commits with the arrays. A restore recomputes it from what it
read; a truncated file (the restore fails) or silently altered bytes (the fingerprint differs) make
the checkpoint *damaged*: it is reported by step and reason and the one before it is used. Training
moves a damaged checkpoint aside (to CHECKPOINTS-damaged/STEP, never deleted) so that it trains past
that step again; sampling leaves the run's folder as it is.

Input pipeline: a training checkpoint also holds each host's tf.data iterator state (STEP/data/host_K,
written with TensorFlow, as T5X does), so a resumed run continues its data stream at once instead of
replaying every batch consumed so far. It lives inside orbax's step folder: committed, garbage-collected
and moved aside together with the arrays. It is not part of the fingerprint: a damaged or missing one
only costs the replay (`restore_input` says why), never the run.
"""

from __future__ import annotations

import dataclasses
import logging
import sys
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp
from etils import epath

import storage

FINGERPRINT = "fingerprint"  # the key of the arrays' fingerprint in a checkpoint's progress JSON
INPUT = "data"  # the item of a step's folder that holds each host's input-pipeline state


class CheckpointError(RuntimeError):
  """No checkpoint of a run restores and verifies (each one's step and reason in the message)."""


def _leaf_name(path: tuple) -> str:
  parts = []
  for key in path:
    parts.append(str(getattr(key, "name", getattr(key, "key", getattr(key, "idx", key)))))
  return "/".join(parts)


def _as_uint32(x: jax.Array) -> jax.Array:
  """The raw bits of `x` as uint32 values (64-bit values become two; narrower ones are widened)."""
  if jnp.issubdtype(x.dtype, jax.dtypes.prng_key):
    x = jax.random.key_data(x)
  if x.dtype == jnp.bool_:
    return x.astype(jnp.uint32)
  width = {1: jnp.uint8, 2: jnp.uint16, 4: jnp.uint32, 8: jnp.uint32}[x.dtype.itemsize]
  return jax.lax.bitcast_convert_type(x, width).astype(jnp.uint32)


def _position_weights(shape: tuple[int, ...]) -> jax.Array:
  """An odd, position-dependent uint32 per element (Knuth's multiplicative hash of the flat index),
  built from per-axis iotas so that a sharded array needs no reshape."""
  index = jnp.zeros(shape, jnp.uint32)
  stride = 1
  for axis in reversed(range(len(shape))):
    index = index + jax.lax.broadcasted_iota(jnp.uint32, shape, axis) * jnp.uint32(stride % 2**32)
    stride *= shape[axis]
  return index * jnp.uint32(2654435761) | jnp.uint32(1)


@jax.jit
def _leaf_sums(leaves: list[jax.Array]) -> jax.Array:
  sums = []
  for x in leaves:
    bits = _as_uint32(x)
    weighted = bits * _position_weights(bits.shape)
    sums.append(jnp.stack([jnp.sum(bits, dtype=jnp.uint32), jnp.sum(weighted, dtype=jnp.uint32)]))
  return jnp.stack(sums) if sums else jnp.zeros((0, 2), jnp.uint32)


def fingerprint(tree: Any) -> dict[str, list[int]]:
  """{leaf path: [sum of its bits, position-weighted sum]} (uint32 arithmetic, wrapping).

  Any single changed bit changes the plain sum; moved values change the weighted one. Computed on
  device in one jitted pass over the arrays, whatever their sharding; the result is replicated.
  """
  leaves = jax.tree_util.tree_flatten_with_path(tree)[0]
  if not leaves:
    return {}
  sums = np.asarray(jax.device_get(_leaf_sums([x for _, x in leaves]).addressable_shards[0].data))
  return {_leaf_name(path): [int(a), int(b)] for (path, _), (a, b) in zip(leaves, sums)}


def fingerprint_mismatch(recorded: dict | None, actual: dict[str, list[int]]) -> str | None:
  """Why `actual` does not match the fingerprint a checkpoint recorded, or None when it does. Only
  the leaves in `actual` are compared (a partial restore checks what it restored)."""
  if recorded is None:
    return None  # written before checkpoints carried one: nothing to compare
  for name, sums in actual.items():
    if name not in recorded:
      return f"{name} has no recorded fingerprint"
    if list(recorded[name]) != sums:
      return f"{name} differs from what was saved (fingerprint {recorded[name]}, restored {sums})"
  return None


class InputStateHandler(ocp.CheckpointHandler):
  """This host's tf.data iterator as host_K.index/.data-* (a tf.train.Checkpoint, which reads and
  writes gs:// and other URLs) beside host_K.json, the pipeline and position it belongs to. Every host
  writes its own; orbax commits the folder with the step."""

  def save(self, directory: epath.Path, args: "InputState") -> None:
    import tensorflow as tf

    prefix = storage.join(str(directory), f"host_{jax.process_index()}")
    storage.makedirs(str(directory))
    tf.train.Checkpoint(iterator=args.iterator).write(prefix)
    storage.write_json(prefix + ".json", args.info)  # last: its presence means the state is whole

  def restore(self, directory: epath.Path, args: "InputState") -> None:
    """Restores `args.iterator` in place; a ValueError naming the file when the state is missing or
    belongs to another pipeline or position (the TF error when it does not read)."""
    import tensorflow as tf

    prefix = storage.join(str(directory), f"host_{jax.process_index()}")
    if not storage.exists(prefix + ".json"):
      raise ValueError(f"{prefix}.json does not exist")
    try:
      saved = storage.read_json(prefix + ".json")
    except ValueError as error:
      raise ValueError(f"{prefix}.json: {error}") from error
    if saved != args.info:
      raise ValueError(f"{prefix}.json is the state of {saved}, not of {args.info}")
    try:
      tf.train.Checkpoint(iterator=args.iterator).read(prefix).assert_consumed()
    except Exception as error:  # noqa: BLE001 - TF's messages name no file, or the prefix only
      first_line = (str(error).strip().splitlines() or [""])[0]
      raise ValueError(f"{prefix}.index/.data-*: {type(error).__name__}: {first_line[:300]}") from error


@ocp.args.register_with_handler(InputStateHandler, for_save=True, for_restore=True)
@dataclasses.dataclass
class InputState(ocp.args.CheckpointArgs):
  iterator: Any  # a tf.data.Iterator from iter(dataset) (as_numpy_iterator's cannot be saved)
  info: dict  # the pipeline and the batches consumed: a restore checks it equals what was saved


def _root_cause(error: BaseException) -> str:
  """The innermost error's type and first line: orbax wraps TensorStore's, which names the array and
  the file ("Error reading "params.x/0.0" in OCDBT database at local file ...: byte range ... not
  valid"), in one that prints a repr of the store's spec instead."""
  seen = {id(error)}
  while (inner := error.__cause__ or error.__context__) is not None and id(inner) not in seen:
    error = inner
    seen.add(id(error))
  first_line = (str(error).strip().splitlines() or [""])[0]
  return f"{type(error).__name__}: {first_line[:300]}"


def refuse_unwritable(directory: str) -> None:
  """A ValueError for a checkpoint folder orbax cannot use: TensorFlow's in-memory ram:// (orbax writes
  through TensorStore and etils' epath, neither of which has it; it failed with KeyError: 'ram://')."""
  if str(directory).startswith("ram://"):
    raise ValueError(f"checkpoints cannot be in {directory}: orbax (TensorStore, etils' epath) has no ram:// "
                     "filesystem, only TensorFlow has; use a local folder or gs://")


def _is_abandoned_read(unraisable) -> bool:
  """What orbax leaves behind when one array of a restore fails: the other arrays' reads finish on
  TensorStore's threads after the restore's event loop is closed ("Event loop is closed" from their
  callbacks), and their coroutines are collected holding orbax's read error. The failure itself is
  reported once, as the checkpoint's damage reason. ("Event loop is closed" as an unraisable error
  is only ever such a late callback: nothing could act on it.)"""
  error = unraisable.exc_value
  if isinstance(error, RuntimeError) and str(error) == "Event loop is closed":
    return True
  return (getattr(unraisable.object, "__qualname__", None) == "_read_array_index_and_device_put"
          and str(error).startswith("Encountered error while reading array index"))


class _AbandonedReadTasks(logging.Filter):
  """asyncio's "Task exception was never retrieved" for the orbax read tasks a failed restore left,
  and "Future exception was never retrieved" for their TensorStore reads (`ValueError('OUT_OF_RANGE:
  Error reading "params.w2/0.0" in OCDBT database ...')` on a truncated file): the same damage, already
  reported once."""

  def filter(self, record: logging.LogRecord) -> bool:
    message = record.getMessage()
    abandoned_read = ("Encountered error while reading array index" in message
                      or "exception=ValueError(" in message and 'Error reading "' in message)
    return not ("exception was never retrieved" in message and abandoned_read)


def _silence_abandoned_reads() -> None:
  """Once per process, before restoring: drop the ~70-200 lines of tracebacks its abandoned
  reads print (see `_is_abandoned_read`, `_AbandonedReadTasks`); any other unraisable error goes to
  the hook there was, any other asyncio error is logged."""
  previous = sys.unraisablehook
  if getattr(previous, "codelm_abandoned_reads", False):
    return
  logging.getLogger("asyncio").addFilter(_AbandonedReadTasks())

  def hook(unraisable):
    if not _is_abandoned_read(unraisable):
      previous(unraisable)

  hook.codelm_abandoned_reads = True
  sys.unraisablehook = hook


class Checkpointer:
  """Train state plus a small JSON of the run's progress (steps, batches consumed, the state's
  fingerprint) per step, and in training each host's input-pipeline state."""

  def __init__(self, directory: str, keep: int = 3, async_save: bool = True, create: bool = True,
               before_save: Callable[[], None] | None = None):
    """`create` False: a folder only read (another run's); it must exist, and is not made. TensorFlow's
    in-memory ram:// is refused (a ValueError): orbax writes through TensorStore and etils, neither of
    which has it. `before_save` runs before each step is written and may refuse it by raising: the
    run's hold on MODEL_DIR (storage.Held.verify), so two runs never both write one step."""
    refuse_unwritable(directory)
    directory = storage.resolve(directory)  # orbax refuses relative paths
    options = ocp.CheckpointManagerOptions(max_to_keep=keep, enable_async_checkpointing=async_save,
                                           create=create, cleanup_tmp_directories=create)
    self._manager = ocp.CheckpointManager(directory, options=options)
    self._before_save = before_save
    self.directory = directory
    self.damaged_directory = directory.rstrip("/") + "-damaged"

  def save(self, step: int, state: Any, progress: dict, force: bool = False, input_state: InputState | None = None
           ) -> bool:
    """Saves asynchronously (the arrays); `input_state`, the input pipeline's position, is written
    before this returns, so the iterator may advance right after."""
    if self._before_save is not None:
      self._before_save()
    progress = dict(progress, **{FINGERPRINT: fingerprint(state)})  # before an async save returns
    items = {"state": ocp.args.StandardSave(state), "progress": ocp.args.JsonSave(progress)}
    if input_state is not None:
      items[INPUT] = input_state
    return self._manager.save(step, args=ocp.args.Composite(**items), force=force)

  def restore_input(self, step: int, input_state: InputState) -> str | None:
    """Restores `input_state.iterator` to where it was when `step` was saved. None when it did; else
    why not, naming the file (a missing, damaged or foreign state: the caller replays instead)."""
    where = storage.join(self.directory, str(step), INPUT)
    if not storage.exists(where):
      return f"{where} does not exist (a checkpoint written without its input-pipeline state)"
    try:
      self._manager.restore(step, args=ocp.args.Composite(**{INPUT: input_state}))
    except Exception as error:  # noqa: BLE001 - any failure to read means: replay instead
      first_line = (str(error).strip().splitlines() or [""])[0]
      return first_line[:400] if where in first_line else f"{where}: {type(error).__name__}: {first_line[:300]}"
    return None

  def steps(self) -> list[int]:
    return sorted(self._manager.all_steps())

  def restore_latest(self, abstract_state: Any, step: int | None = None,
                     move_damaged: bool = False) -> tuple[Any, dict, int] | None:
    """(state, progress, step) from the newest checkpoint that restores and verifies, or None when
    there is no checkpoint at all.

    `abstract_state` holds jax.ShapeDtypeStructs with the *current* shardings, so a checkpoint written
    on another mesh or device count lands sharded for this one. A damaged checkpoint (it fails to
    restore, or its arrays differ from its fingerprint) is reported with a warning and the one before
    it is tried; with `move_damaged` (training) the damaged newer ones are moved aside once a good one
    is found, so the run can save those steps again. With `step`, only that checkpoint is tried.
    Checkpoints exist but none is good: CheckpointError, and nothing is moved.
    """

    def restore(step):
      restored = self._manager.restore(step, args=ocp.args.Composite(
          state=ocp.args.StandardRestore(abstract_state), progress=ocp.args.JsonRestore()))
      progress = dict(restored.progress)
      return (restored.state, progress, step), fingerprint_mismatch(progress.pop(FINGERPRINT, None),
                                                                    fingerprint(restored.state))

    return self._first_good(restore, step, move_damaged)

  def restore_params(self, abstract_params: Any, step: int | None = None) -> tuple[Any, int] | None:
    """Only the parameters of the newest good checkpoint (or of `step`): what sampling and
    fine-tuning need, whatever optimizer the run used. Damaged checkpoints are skipped as in
    `restore_latest`, never moved."""

    def restore(step):
      target = {"params": abstract_params}
      restored = self._manager.restore(step, args=ocp.args.Composite(
          state=ocp.args.PyTreeRestore(target, restore_args=ocp.checkpoint_utils.construct_restore_args(target),
                                       partial_restore=True),
          progress=ocp.args.JsonRestore()))
      params = restored.state["params"]
      return (params, step), fingerprint_mismatch(restored.progress.get(FINGERPRINT),
                                                  fingerprint({"params": params}))

    return self._first_good(restore, step, move_damaged=False)

  def _first_good(self, restore, step: int | None, move_damaged: bool):
    candidates = [step] if step is not None else list(reversed(self.steps()))
    damaged: list[tuple[int, str]] = []
    _silence_abandoned_reads()  # before: a failed read's leftovers may print before its error is caught
    for candidate in candidates:
      try:
        result, mismatch = restore(candidate)
      except Exception as error:  # noqa: BLE001 - any failure to read means: damaged
        mismatch = f"it does not restore ({_root_cause(error)})"
      if mismatch is None:
        if move_damaged:
          self._move_aside([s for s, _ in damaged])
        return result
      damaged.append((candidate, mismatch))
      logging.warning("checkpoint %d in %s is damaged: %s; trying the one before", candidate, self.directory,
                      mismatch)
    if damaged:
      raise CheckpointError(f"no checkpoint in {self.directory} is usable: " + "; ".join(
          f"step {s}: {why}" for s, why in damaged))
    return None

  def _move_aside(self, steps: list[int]) -> None:
    """Damaged step folders go to `damaged_directory` (the first process moves them; all wait)."""
    if not steps:
      return
    if jax.process_index() == 0:
      target_root = epath.Path(self.damaged_directory)
      target_root.mkdir(parents=True, exist_ok=True)
      for step in steps:
        source = epath.Path(self.directory) / str(step)
        target, suffix = target_root / str(step), 1
        while target.exists():  # the same step damaged twice: keep both
          target, suffix = target_root / f"{step}.{suffix}", suffix + 1
        if source.exists():
          source.rename(target)
          logging.warning("moved damaged checkpoint %d to %s", step, target)
    if jax.process_count() > 1:
      from jax.experimental import multihost_utils

      multihost_utils.sync_global_devices("codelm: damaged checkpoints moved aside")
    self._manager.reload()

  def wait(self) -> None:
    self._manager.wait_until_finished()

  def close(self) -> None:
    self._manager.wait_until_finished()
    self._manager.close()


def read_params(directory: str, abstract_params: Any, step: int | None = None) -> tuple[Any, int] | None:
  """`Checkpointer.restore_params` of another run's checkpoint folder, opened for this read only
  (fine-tuning's source, a LoRA run's base), never created; None when it holds no checkpoint or does
  not exist; a `step` that is not there is a FileNotFoundError."""
  if not storage.isdir(directory):  # (opening it would create it: an empty folder left behind)
    if step is not None:
      raise FileNotFoundError(f"no checkpoint folder {directory}")
    return None
  source = Checkpointer(directory, async_save=False, create=False)
  try:
    if step is not None and step not in source.steps():
      raise FileNotFoundError(f"no checkpoint {step} in {directory} (have {source.steps()})")
    return source.restore_params(abstract_params, step=step)
  finally:
    source.close()


def abstract_with_shardings(tree: Any, shardings: Any) -> Any:
  return jax.tree.map(lambda x, s: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=s), tree, shardings)
