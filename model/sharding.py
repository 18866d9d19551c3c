"""The one place where logical axis names meet the device mesh.

Layers name logical axes ("embed", "heads", "act_batch", ...) and never see a mesh; the rules below map
those names to the mesh axes ("data", "fsdp", "tensor") in the style of T5X / MaxText. Parameters are
sharded over `fsdp` (ZeRO-3 style, along d_model) and `tensor` (Megatron style, along heads / d_ff /
vocab); batches over `data` and `fsdp` together. The optimizer state's specs are derived from the
parameters' by the optimizer's own module (training/optimizer.py): model/ knows no optimizer.
"""

from __future__ import annotations

import contextlib
import math
from typing import Any, Iterator, Sequence

import flax.linen as nn
import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

MESH_AXES = ("data", "fsdp", "tensor")
BATCH_AXES = ("data", "fsdp")

LOGICAL_AXIS_RULES: tuple[tuple[str, Any], ...] = (
    # Parameters.
    ("vocab", "tensor"),
    ("embed", "fsdp"),
    ("heads", "tensor"),
    ("mlp", "tensor"),
    ("head_dim", None),
    ("norm", None),
    ("layers", None),  # the stacked axis that nn.scan adds
    # Activations.
    ("act_batch", BATCH_AXES),
    ("act_length", None),
    ("act_embed", None),
    ("act_heads", "tensor"),
    ("act_mlp", "tensor"),
    ("act_vocab", "tensor"),
)


def mesh_shape(data: int = -1, fsdp: int = 1, tensor: int = 1, num_devices: int | None = None) -> tuple[int, ...]:
  """Resolve one -1 entry so the product equals the device count (as T5X's `mesh_shape` does)."""
  num_devices = jax.device_count() if num_devices is None else num_devices
  shape = [data, fsdp, tensor]
  if shape.count(-1) > 1:
    raise ValueError(f"at most one mesh axis may be -1, got data={data} fsdp={fsdp} tensor={tensor}")
  if -1 in shape:
    known = math.prod(s for s in shape if s != -1)
    if num_devices % known:
      raise ValueError(f"{num_devices} devices do not divide into mesh data={data} fsdp={fsdp} tensor={tensor}")
    shape[shape.index(-1)] = num_devices // known
  if math.prod(shape) != num_devices:
    raise ValueError(f"mesh data={shape[0]} fsdp={shape[1]} tensor={shape[2]} needs {math.prod(shape)} "
                     f"devices, but {num_devices} are available")
  return tuple(shape)


def make_mesh(data: int = -1, fsdp: int = 1, tensor: int = 1,
              devices: Sequence[jax.Device] | None = None) -> Mesh:
  """A (data, fsdp, tensor) mesh with Auto axes: Flax logical constraints need Auto, not Explicit, axes."""
  devices = list(jax.devices() if devices is None else devices)
  shape = mesh_shape(data, fsdp, tensor, len(devices))
  if devices == list(jax.devices()):
    return jax.make_mesh(shape, MESH_AXES, axis_types=(jax.sharding.AxisType.Auto,) * 3)
  return Mesh(np.asarray(devices).reshape(shape), MESH_AXES)


@contextlib.contextmanager
def activation_sharding(mesh: Mesh) -> Iterator[None]:
  """Inside this context, logical constraints on activations become real sharding constraints."""
  with jax.set_mesh(mesh), nn.logical_axis_rules(LOGICAL_AXIS_RULES):
    yield


def logical_to_spec(logical_axes: tuple[str | None, ...]) -> P:
  return nn.logical_to_mesh_axes(logical_axes, LOGICAL_AXIS_RULES)


def abstract_params(model: nn.Module) -> Any:
  """`model`'s parameters as boxed (nn.LogicallyPartitioned) ShapeDtypeStructs, allocating nothing:
  eval_shape of the init. The boxes carry the logical axes the layers name; shapes do not depend on
  the [1, 8] dummy tokens."""
  from model.transformer import init_params  # the model's one init

  return jax.eval_shape(lambda: init_params(model, jax.random.key(0)))


def param_specs(boxed_params: Any) -> Any:
  """Mesh PartitionSpecs for a tree of nn.LogicallyPartitioned (boxed) parameters, e.g. from eval_shape."""
  return nn.logical_to_mesh(nn.get_partition_spec(boxed_params), LOGICAL_AXIS_RULES)


def param_shardings(model: nn.Module, mesh: Mesh) -> Any:
  """NamedShardings of `model`'s parameters on `mesh`, from the model and the logical rules alone.

  The one layout of the parameters: training's state (training/step.py, whose optimizer state
  follows it) and sampling (sampling/restore.py restores and places parameters by it) both use it.
  """
  return shardings(param_specs(abstract_params(model)), mesh)


def batch_spec() -> P:
  """Every feature is [batch, length]: rows over data and fsdp, the length replicated."""
  return P(BATCH_AXES, None)


def shardings(specs: Any, mesh: Mesh) -> Any:
  return jax.tree.map(lambda s: NamedSharding(mesh, s), specs, is_leaf=lambda s: isinstance(s, P))


def bytes_per_device(tree: Any, specs: Any, axis_sizes: dict[str, int]) -> int:
  """Bytes one device holds of `tree` (arrays or ShapeDtypeStructs) sharded by `specs` on a mesh of
  the given axis sizes; uneven shards round up, as XLA pads them."""
  total = 0
  leaves = jax.tree.leaves(tree)
  spec_leaves = jax.tree.leaves(specs, is_leaf=lambda s: isinstance(s, P))
  assert len(leaves) == len(spec_leaves), (len(leaves), len(spec_leaves))
  for leaf, spec in zip(leaves, spec_leaves):
    shape = list(leaf.shape)
    for dim, axes in enumerate(spec):
      if axes is None:
        continue
      for axis in (axes,) if isinstance(axes, str) else axes:
        shape[dim] = -(-shape[dim] // axis_sizes[axis])
    total += math.prod(shape) * np.dtype(leaf.dtype).itemsize
  return total

