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


def prefill_slot(model: Decoder, params: Any, prompt: jax.Array, length: jax.Array, slot: jax.Array,
                 cache: PrefixSharedCache) -> tuple[jax.Array, PrefixSharedCache]:
  """One prompt [Tp] (right-padded, `length` real tokens) into prompt slot `slot` of a PrefixSharedCache
  -> (logits [V] after its last token, cache). The slot's rows then decode from it."""
  logits, own = prefill(model, params, prompt[None], length[None], init_cache(model.config, 1, prompt.shape[0]))
  put = lambda buffers, new: tuple(jax.lax.dynamic_update_slice_in_dim(b, n, slot, axis=0)  # noqa: E731
                                   for b, n in zip(buffers, new))
  cache = cache.replace(prefix_k=put(cache.prefix_k, own["k"]), prefix_v=put(cache.prefix_v, own["v"]),
                        prefix_lengths=cache.prefix_lengths.at[slot].set(length))
  return logits[0], cache


def decode_step(model: Decoder, params: Any, tokens: jax.Array, positions: jax.Array,
                cache: KVCache | PrefixSharedCache) -> tuple[jax.Array, KVCache | PrefixSharedCache]:
  """tokens [B] at positions [B] (each row's own) -> (next-token logits [B, V], cache)."""
  logits, cache = model.apply({"params": params}, tokens[:, None], positions=positions[:, None],
                              cache=cache)
  return logits[:, 0], cache
