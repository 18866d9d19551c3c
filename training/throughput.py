"""Measured ceilings and the arithmetic of MFU, shared by train.py and bench/."""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp


def matmul_ceiling(dtype, n: int | None = None, repeats: int = 10) -> float:
  """FLOP/s of one n x n x n jnp.dot in `dtype` on the default device: the best of `repeats`, so
  that a noisy neighbour lowers the ceiling less often than it lowers a step (MFU errs low)."""
  n = n or (2048 if jax.default_backend() == "cpu" else 8192)
  a = jax.random.normal(jax.random.key(1), (n, n), jnp.float32).astype(dtype)
  b = jax.random.normal(jax.random.key(2), (n, n), jnp.float32).astype(dtype)
  dot = jax.jit(jnp.dot)
  jax.block_until_ready(dot(a, b))
  best = float("inf")
  for _ in range(repeats):
    start = time.perf_counter()
    jax.block_until_ready(dot(a, b))
    best = min(best, time.perf_counter() - start)
  return 2.0 * n ** 3 / best
