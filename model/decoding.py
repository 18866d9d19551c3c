"""Incremental decoding with a KV cache: prefill a batch of prompts, then one token per call.

The sampling strategy (temperature, top-p, stopping) lives outside the model; these two functions
are the narrow interface it uses. Rows may sit at different positions: each carries its own.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from model.transformer import Decoder, KVCache, PrefixSharedCache, init_cache


def prefill(model: Decoder, params: Any, prompts: jax.Array, lengths: jax.Array,
            cache: KVCache) -> tuple[jax.Array, KVCache]:
  """prompts [B, P] right-padded, lengths [B] -> (logits [B, V] after each prompt's last token, cache).

  Padding slots beyond a row's length are written too, but a later token at position p only sees
  slots <= p, and the decode step at position `length` overwrites the first of them before use.
  """
  batch, length = prompts.shape
  positions = jnp.broadcast_to(jnp.arange(length), (batch, length))
  logits, cache = model.apply({"params": params}, prompts, positions=positions, cache=cache)
  last = jnp.take_along_axis(logits, (lengths - 1)[:, None, None], axis=1)[:, 0]
  return last, cache


def prefill_slots(model: Decoder, params: Any, prompts: jax.Array, lengths: jax.Array, slots: jax.Array,
                  cache: PrefixSharedCache) -> tuple[jax.Array, PrefixSharedCache]:
  """Prompts [A, Tp] (right-padded, `lengths` [A] real tokens) into prompt slots `slots` [A] of a
  PrefixSharedCache -> (logits [A, V] after each prompt's last token, cache). The slots' rows then
  decode from them."""
  logits, own = prefill(model, params, prompts, lengths, init_cache(model.config, prompts.shape[0], prompts.shape[1]))
  put = lambda buffers, new: tuple(b.at[slots].set(n) for b, n in zip(buffers, new))  # noqa: E731
  cache = cache.replace(prefix_k=put(cache.prefix_k, own["k"]), prefix_v=put(cache.prefix_v, own["v"]),
                        prefix_lengths=cache.prefix_lengths.at[slots].set(lengths))
  return logits, cache


def decode_step(model: Decoder, params: Any, tokens: jax.Array, positions: jax.Array,
                cache: KVCache | PrefixSharedCache) -> tuple[jax.Array, KVCache | PrefixSharedCache]:
  """tokens [B] at positions [B] (each row's own) -> (next-token logits [B, V], cache)."""
  logits, cache = model.apply({"params": params}, tokens[:, None], positions=positions[:, None],
                              cache=cache)
  return logits[:, 0], cache
