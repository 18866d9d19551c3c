"""Checkpoint fingerprints: any changed bit or moved value is seen, whatever the sharding."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec

from model import sharding
from training.checkpoints import Checkpointer, fingerprint, fingerprint_mismatch, read_params


def _tree():
  return {"w": jnp.arange(48, dtype=jnp.float32).reshape(6, 8) / 7, "b": jnp.linspace(0, 1, 5).astype(jnp.bfloat16),
          "step": jnp.int32(7), "mask": jnp.array([True, False, True]), "key": jax.random.key(3),
          "big": jnp.arange(4, dtype=jnp.int64) if jax.config.jax_enable_x64 else jnp.arange(4, dtype=jnp.uint32)}


def _flip_bit(x, index, bit):
  """`x` with one bit of one element inverted (through its raw bits)."""
  if jnp.issubdtype(x.dtype, jax.dtypes.prng_key):
    data = np.array(jax.random.key_data(x))
    data.reshape(-1)[index] ^= np.uint32(1 << bit)
    return jax.random.wrap_key_data(jnp.asarray(data))
  raw = np.array(x).copy()
  view = raw.reshape(-1).view(np.uint8) if raw.dtype != np.bool_ else raw.reshape(-1)
  if raw.dtype == np.bool_:
    view[index] = not view[index]
  else:
    view[index * raw.itemsize + bit // 8] ^= np.uint8(1 << (bit % 8))
  return jnp.asarray(raw, dtype=x.dtype)


def test_any_flipped_bit_changes_exactly_its_leaf():
  tree = _tree()
  base = fingerprint(tree)
  assert set(base) == set(tree)
  rng = np.random.default_rng(0)
  for name, x in tree.items():
    size = 2 if name == "key" else max(1, int(np.prod(x.shape)))
    for _ in range(5):
      index = int(rng.integers(size))
      bit = 0 if x.dtype == jnp.bool_ else int(rng.integers(8 * (4 if name == "key" else x.dtype.itemsize)))
      changed = dict(tree, **{name: _flip_bit(x, index, bit)})
      after = fingerprint(changed)
      assert [n for n in base if base[n] != after[n]] == [name], (name, index, bit)
      assert fingerprint_mismatch(base, after).startswith(f"{name} differs from what was saved")


def test_moved_values_change_the_weighted_sum():
  tree = _tree()
  swapped = np.array(tree["w"])
  swapped[[0, 5]] = swapped[[5, 0]]
  before, after = fingerprint(tree)["w"], fingerprint(dict(tree, w=jnp.asarray(swapped)))["w"]
  assert before[0] == after[0] and before[1] != after[1]


@pytest.mark.multidevice
def test_the_fingerprint_does_not_depend_on_the_sharding():
  mesh = sharding.make_mesh(2, 2, 2)
  x = jnp.arange(8 * 16 * 4, dtype=jnp.float32).reshape(8, 16, 4) * 1.5
  spread = jax.device_put(x, NamedSharding(mesh, PartitionSpec("data", ("fsdp", "tensor"))))
  assert fingerprint({"x": spread}) == fingerprint({"x": x})


def test_a_partial_restore_checks_only_what_it_restored_and_old_checkpoints_pass():
  recorded = {"params/w": [1, 2], "opt_state/v": [3, 4]}
  assert fingerprint_mismatch(recorded, {"params/w": [1, 2]}) is None
  assert "no recorded fingerprint" in fingerprint_mismatch(recorded, {"params/x": [1, 2]})
  assert fingerprint_mismatch(None, {"params/w": [5, 6]}) is None  # saved before fingerprints existed


def test_a_saved_checkpoint_records_its_fingerprint_and_restores_verified(tmp_path):
  tree = {"params": {"w": jnp.ones((4, 4))}, "opt_state": {"v": jnp.zeros(3)}}
  checkpointer = Checkpointer(str(tmp_path / "ckpt"), async_save=False)
  checkpointer.save(1, tree, {"batches": 1}, force=True)
  checkpointer.close()
  abstract = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=x.sharding), tree)
  state, progress, step = Checkpointer(str(tmp_path / "ckpt")).restore_latest(abstract)
  assert step == 1 and progress == {"batches": 1}  # the fingerprint is checked, not handed on
  assert fingerprint(state) == fingerprint(tree)
  params, step = Checkpointer(str(tmp_path / "ckpt")).restore_params(abstract["params"])
  assert step == 1 and np.array_equal(params["w"], tree["params"]["w"])


def test_reading_another_runs_missing_folder_creates_nothing(tmp_path):
  # A LoRA run's base or a fine-tuning source that is gone: a clear answer, and no empty folder left.
  gone = tmp_path / "base" / "checkpoints"
  abstract = {"w": jax.ShapeDtypeStruct((2,), jnp.float32)}
  assert read_params(str(gone), abstract) is None
  with pytest.raises(FileNotFoundError, match=r"no checkpoint folder \S+base/checkpoints"):
    read_params(str(gone), abstract, step=4)
  assert not (tmp_path / "base").exists()


_TRUNCATED_RESTORE = """
import glob, os, sys
import jax, jax.numpy as jnp
from training.checkpoints import Checkpointer
directory = sys.argv[1]
checkpointer = Checkpointer(directory, async_save=False)
params = {f"w{i}": jax.random.normal(jax.random.key(i), (1024, 1024)) for i in range(16)}
for step in (1, 2):
  checkpointer.save(step, {"params": params}, {"batches": step}, force=True)
for path in glob.glob(os.path.join(directory, "2", "state", "**", "d", "*"), recursive=True):
  if os.path.getsize(path) > 10000:  # the arrays' data, not the metadata
    os.truncate(path, os.path.getsize(path) // 2)
abstract = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=x.sharding), params)
print("restored step", Checkpointer(directory, async_save=False).restore_params(abstract)[1], flush=True)
"""


def test_a_truncated_checkpoint_is_reported_once_without_orbaxs_abandoned_read_tracebacks(tmp_path):
  """Without the filter, the other arrays' reads of the failed restore print 20-45 lines of "Event
  loop is closed" / "Task exception was never retrieved" tracebacks after the one warning."""
  import os
  import subprocess
  import sys

  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  result = subprocess.run([sys.executable, "-c", _TRUNCATED_RESTORE, str(tmp_path / "ckpt")], capture_output=True,
                          text=True, cwd=root, env=dict(os.environ, PYTHONPATH=root), timeout=300)
  assert result.returncode == 0 and "restored step 1" in result.stdout, result.stderr[-2000:]
  assert result.stderr.count("checkpoint 2 in") == 1 and "is damaged: it does not restore" in result.stderr
  for noise in ("Event loop is closed", "Exception ignored", "never retrieved", "Traceback"):
    assert noise not in result.stderr, result.stderr[-3000:]


def test_other_unraisable_errors_still_reach_the_previous_hook(monkeypatch):
  import sys
  import types

  from training import checkpoints

  seen = []
  monkeypatch.setattr(sys, "unraisablehook", seen.append)
  checkpoints._silence_abandoned_reads()
  checkpoints._silence_abandoned_reads()  # once: not wrapped twice
  unraisable = lambda error, obj=None: types.SimpleNamespace(exc_value=error, object=obj)  # noqa: E731
  sys.unraisablehook(unraisable(RuntimeError("Event loop is closed")))
  sys.unraisablehook(unraisable(ValueError("a real bug")))
  sys.unraisablehook(unraisable(RuntimeError("something else")))
  assert [str(u.exc_value) for u in seen] == ["a real bug", "something else"]


def test_abandoned_read_records_are_dropped_and_other_asyncio_errors_kept():
  """The asyncio records a failed restore's other reads leave: orbax's read tasks, and (seen in CI, a
  few runs in many) TensorStore's read futures on the truncated file. Anything else still logs."""
  import logging

  from training import checkpoints

  def record(message):
    return logging.LogRecord("asyncio", logging.ERROR, __file__, 1, message, None, None)

  ocdbt = ('Future exception was never retrieved\nfuture: <Future finished exception=ValueError(\'OUT_OF_RANGE: '
           'Error reading "params.w15/0.0" in OCDBT database at local file "/tmp/ckpt/2/state/": Requested byte '
           'range [31009930, 34886737) is not valid for value of size 19382272\')>')
  orbax = ("Task exception was never retrieved\nfuture: <Task finished name='Task-7' coro=<_read_array_index_and_"
           "device_put() done> exception=ValueError('Encountered error while reading array index: (0, 0)')>")
  other = ("Future exception was never retrieved\nfuture: <Future finished exception=ConnectionResetError("
           "'peer closed')>")
  keep = checkpoints._AbandonedReadTasks().filter
  assert not keep(record(ocdbt)) and not keep(record(orbax))
  assert keep(record(other)) and keep(record("Error reading \"x\" somewhere, logged on purpose"))
