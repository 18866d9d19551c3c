"""Orbax checkpoints: asynchronous saves every N steps, keep the last K, resume from the newest one
that restores, onto whatever mesh the run has now (restoring with the target shardings)."""

from __future__ import annotations

import logging
import os
from typing import Any

import jax
import orbax.checkpoint as ocp


class Checkpointer:
  """Train state plus a small JSON of the run's progress (steps, batches consumed) per step."""

  def __init__(self, directory: str, keep: int = 3, async_save: bool = True):
    if "://" not in directory:
      directory = os.path.abspath(directory)  # orbax refuses relative paths
    options = ocp.CheckpointManagerOptions(max_to_keep=keep, enable_async_checkpointing=async_save,
                                           create=True, cleanup_tmp_directories=True)
    self._manager = ocp.CheckpointManager(directory, options=options)
    self.directory = directory

  def save(self, step: int, state: Any, progress: dict, force: bool = False) -> bool:
    return self._manager.save(step, args=ocp.args.Composite(state=ocp.args.StandardSave(state),
                                                            progress=ocp.args.JsonSave(progress)), force=force)

  def steps(self) -> list[int]:
    return sorted(self._manager.all_steps())

  def restore_latest(self, abstract_state: Any, step: int | None = None) -> tuple[Any, dict, int] | None:
    """(state, progress, step) from the newest checkpoint that restores, or None when there is none.

    `abstract_state` holds jax.ShapeDtypeStructs with the *current* shardings, so a checkpoint written
    on another mesh or device count lands sharded for this one. A checkpoint that fails to restore
    (written partly, or damaged) is skipped with a warning and the one before it is tried. With
    `step`, only that checkpoint is tried.
    """
    for step in ([step] if step is not None else reversed(self.steps())):
      try:
        restored = self._manager.restore(step, args=ocp.args.Composite(
            state=ocp.args.StandardRestore(abstract_state), progress=ocp.args.JsonRestore()))
        return restored.state, dict(restored.progress), step
      except Exception as error:  # noqa: BLE001 - any failure means: try the previous checkpoint
        logging.warning("checkpoint %d in %s does not restore (%s: %s); trying the one before",
                        step, self.directory, type(error).__name__, error)
    return None

  def restore_params(self, abstract_params: Any, step: int | None = None) -> tuple[Any, int] | None:
    """Only the parameters of the newest restorable checkpoint (or of `step`): what sampling and
    fine-tuning need, whatever optimizer the run used."""
    for step in ([step] if step is not None else reversed(self.steps())):
      try:
        target = {"params": abstract_params}
        restored = self._manager.restore(step, args=ocp.args.Composite(state=ocp.args.PyTreeRestore(
            target, restore_args=ocp.checkpoint_utils.construct_restore_args(target), partial_restore=True)))
        return restored.state["params"], step
      except Exception as error:  # noqa: BLE001 - as in restore_latest
        logging.warning("checkpoint %d in %s does not restore (%s: %s); trying the one before",
                        step, self.directory, type(error).__name__, error)
    return None

  def wait(self) -> None:
    self._manager.wait_until_finished()

  def close(self) -> None:
    self._manager.wait_until_finished()
    self._manager.close()


def abstract_with_shardings(tree: Any, shardings: Any) -> Any:
  return jax.tree.map(lambda x, s: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=s), tree, shardings)
