"""Adafactor with T5X's defaults and the paper's learning-rate schedule."""

from __future__ import annotations

import jax.numpy as jnp
import optax


def rsqrt_schedule(base_learning_rate: float, warmup_steps: int) -> optax.Schedule:
  """lr(step) = base * sqrt(W / max(step, W)): constant for W steps, then inverse square root decay."""
  warmup = max(int(warmup_steps), 1)

  def schedule(step):
    return base_learning_rate * jnp.sqrt(warmup / jnp.maximum(jnp.asarray(step, jnp.float32), warmup))

  return schedule


def adafactor(learning_rate: float | optax.Schedule, clip_global_norm: float | None = None
              ) -> optax.GradientTransformation:
  """Factored second moments, decay 0.8, update clipping 1.0, parameter-scaled steps, no momentum
  (T5X's Adafactor defaults); optional global-norm clipping of the gradients first."""
  opt = optax.adafactor(learning_rate, min_dim_size_to_factor=128, decay_rate=0.8,
                        multiply_by_parameter_scale=True, clipping_threshold=1.0, momentum=None,
                        factored=True)
  if clip_global_norm:
    opt = optax.chain(optax.clip_by_global_norm(clip_global_norm), opt)
  return opt
