"""Adafactor with T5X's defaults, AdamW with torch's, the two learning-rate schedules, and the layout of
the optimizer's state.

The state's PartitionSpecs are derived here from the parameters' (model/sharding.py's logical rules),
because only this module knows how optax lays the state out.
"""

from __future__ import annotations

import enum
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import PartitionSpec as P
from optax._src import factorized  # pinned optax: the state layout of its Adafactor

# Matrices with two dims at least this large get factored second moments (T5X's default); the state
# layout below depends on it, so both read this one constant.
MIN_DIM_SIZE_TO_FACTOR = 128


class Optimizer(str, enum.Enum):
  """train.optimizer. A str enum: gin's strings ('adamw') compare equal to their members."""
  ADAFACTOR = "adafactor"
  ADAMW = "adamw"


class Schedule(str, enum.Enum):
  """train.lr_schedule: `rsqrt_schedule` (pretraining) or `warmup_linear_decay_schedule` (fine-tuning)."""
  RSQRT = "rsqrt"
  LINEAR = "linear"


def rsqrt_schedule(base_learning_rate: float, warmup_steps: int) -> optax.Schedule:
  """lr(step) = base * sqrt(W / max(step, W)): constant for W steps, then inverse square root decay."""
  warmup = max(int(warmup_steps), 1)

  def schedule(step):
    return base_learning_rate * jnp.sqrt(warmup / jnp.maximum(jnp.asarray(step, jnp.float32), warmup))

  return schedule


def warmup_linear_decay_schedule(base_learning_rate: float, warmup_steps: int, total_steps: int) -> optax.Schedule:
  """lr rises linearly from 0 to base over W steps, then falls linearly to 0 at the last step: the
  Hugging Face Trainer's default, which fine-tuning recipes such as CodeInsight's were run with."""
  warmup = max(int(warmup_steps), 0)
  return optax.join_schedules([optax.linear_schedule(0.0, base_learning_rate, warmup),
                               optax.linear_schedule(base_learning_rate, 0.0, max(total_steps - warmup, 1))],
                              [warmup])


def adamw(learning_rate: float | optax.Schedule, weight_decay: float = 0.0, clip_global_norm: float | None = None
          ) -> optax.GradientTransformation:
  """AdamW with torch's defaults (b1 0.9, b2 0.999, eps 1e-8); weight decay 0 as the HF Trainer's."""
  opt = optax.adamw(learning_rate, b1=0.9, b2=0.999, eps=1e-8, weight_decay=weight_decay)
  if clip_global_norm:
    opt = optax.chain(optax.clip_by_global_norm(clip_global_norm), opt)
  return opt


def make_schedule(kind: Schedule, base_learning_rate: float, warmup_steps: int, total_steps: int) -> optax.Schedule:
  if kind == Schedule.RSQRT:
    return rsqrt_schedule(base_learning_rate, warmup_steps)
  return warmup_linear_decay_schedule(base_learning_rate, warmup_steps, total_steps)


def make_optimizer(kind: Optimizer, learning_rate: float | optax.Schedule, weight_decay: float = 0.0,
                   clip_global_norm: float | None = None) -> optax.GradientTransformation:
  """`kind` with its defaults; `weight_decay` is AdamW's only (Adafactor's T5X defaults have none)."""
  if kind == Optimizer.ADAFACTOR:
    return adafactor(learning_rate, clip_global_norm)
  return adamw(learning_rate, weight_decay, clip_global_norm)


def state_specs(kind: Optimizer, optimizer: optax.GradientTransformation, opt_state: Any, params: Any,
                param_specs: Any) -> Any:
  """PartitionSpecs of an optimizer state: Adafactor's factored layout below; any other optax state
  (AdamW's moments) has each per-parameter leaf follow its parameter's spec, counters replicated."""
  if kind == Optimizer.ADAFACTOR:
    return adafactor_state_specs(opt_state, params, param_specs)
  return optax.tree_map_params(optimizer, lambda _, spec: spec, opt_state, param_specs,
                               transform_non_params=lambda _: P(), is_leaf=lambda x: isinstance(x, P))


def adafactor(learning_rate: float | optax.Schedule, clip_global_norm: float | None = None
              ) -> optax.GradientTransformation:
  """Factored second moments, decay 0.8, update clipping 1.0, parameter-scaled steps, no momentum
  (T5X's Adafactor defaults); optional global-norm clipping of the gradients first."""
  opt = optax.adafactor(learning_rate, min_dim_size_to_factor=MIN_DIM_SIZE_TO_FACTOR, decay_rate=0.8,
                        multiply_by_parameter_scale=True, clipping_threshold=1.0, momentum=None,
                        factored=True)
  if clip_global_norm:
    opt = optax.chain(optax.clip_by_global_norm(clip_global_norm), opt)
  return opt


def adafactor_state_specs(opt_state: Any, params: Any, param_specs: Any) -> Any:
  """PartitionSpecs for an `adafactor` state (abstract or real), following each parameter's own spec.

  optax's factored second moment keeps, per matrix, a row statistic (the largest dim removed) and a
  column statistic (the second largest removed); each inherits the parameter's spec minus that axis.
  Unfactored moments have the parameter's shape and spec; placeholders and counters are replicated.
  """
  flat_params, treedef = jax.tree.flatten(params)
  flat_specs = treedef.flatten_up_to(param_specs)

  def for_factored(state: factorized.FactoredState) -> factorized.FactoredState:
    v_row, v_col, v = [], [], []
    for param, spec in zip(flat_params, flat_specs):
      spec = tuple(spec) + (None,) * (len(param.shape) - len(spec))
      dims = factorized._factored_dims(param.shape, True, MIN_DIM_SIZE_TO_FACTOR)  # pylint: disable=protected-access
      if dims is None:
        v_row.append(P()), v_col.append(P()), v.append(P(*spec))
      else:
        d1, d0 = dims  # d0 the largest dim, d1 the second largest
        v_row.append(P(*(s for i, s in enumerate(spec) if i != d0)))
        v_col.append(P(*(s for i, s in enumerate(spec) if i != d1)))
        v.append(P())
    unflatten = lambda leaves: jax.tree.unflatten(treedef, leaves)
    return factorized.FactoredState(count=P(), v_row=unflatten(v_row), v_col=unflatten(v_col), v=unflatten(v))

  def visit(node):
    if isinstance(node, factorized.FactoredState):
      return for_factored(node)
    if isinstance(node, (jax.Array, jax.ShapeDtypeStruct, np.ndarray)):
      return P()
    return None

  return jax.tree.map(visit, opt_state,
                      is_leaf=lambda n: isinstance(n, (factorized.FactoredState, jax.Array,
                                                        jax.ShapeDtypeStruct, np.ndarray)))
