"""Weighted next-token cross-entropy with PaLM's z-loss."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp


class LossSums(NamedTuple):
  """Sums over all weighted positions; callers divide by `weight` so that microbatches and hosts
  with different numbers of target tokens still average correctly."""

  loss: jax.Array  # sum of w * (cross-entropy + z-loss)
  z_loss: jax.Array  # sum of w * z_loss_coefficient * log(Z)^2 (already inside `loss`)
  weight: jax.Array  # sum of w


def cross_entropy_with_z_loss(logits: jax.Array, targets: jax.Array, weights: jax.Array,
                              z_loss: float = 1e-4) -> LossSums:
  """logits [B, T, V], targets [B, T] int, weights [B, T] (SeqIO's decoder_loss_weights).

  z-loss = coefficient * log(Z)^2 keeps the softmax normaliser near 1 (PaLM §5, coefficient 1e-4).
  """
  logits = logits.astype(jnp.float32)
  log_z = jax.nn.logsumexp(logits, axis=-1)  # [B, T]
  target_logit = jnp.take_along_axis(logits, targets[..., None], axis=-1)[..., 0]
  weights = weights.astype(jnp.float32)
  z_term = z_loss * jnp.square(log_z)
  per_token = (log_z - target_logit) + z_term
  return LossSums(loss=jnp.sum(per_token * weights), z_loss=jnp.sum(z_term * weights),
                  weight=jnp.sum(weights))
