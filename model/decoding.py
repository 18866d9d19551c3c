"""Incremental decoding with a KV cache: prefill a batch of prompts, then one token per call.

The sampling strategy (temperature, top-p, stopping) lives outside the model; these functions are
the narrow interface it uses (extend: more tokens after rows already cached, e.g. a conversation's
next round). Rows may sit at different positions: each carries its own.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

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


def extend(model: Decoder, params: Any, tokens: jax.Array, lengths: jax.Array, starts: jax.Array,
           cache: KVCache) -> tuple[jax.Array, KVCache]:
  """New tokens [B, T] (right-padded, `lengths` [B] real ones) after each row's first `starts` [B] cached
  tokens -> (logits [B, V] after each row's last new token, cache).

  Continues rows already in a plain KV cache (a conversation's next round) at the cost of the new tokens
  only: their keys/values go to slots starts..starts+lengths-1 and they attend to every slot before. A
  row's padding (slots starts+lengths .. starts+T-1) is written too, but no real token sees it (a query
  at p sees slots <= p) and the next token fed at starts+lengths overwrites the first of them before
  any later query can see it: the same argument as for prefill. Every one of the T positions must be a
  slot of the cache (the attention layer's scatter assumes in-bounds indices), hence starts + T <= S;
  checked here when `starts` is concrete, the caller's promise under jit.
  """
  batch, length = tokens.shape
  slots = cache["k"][0].shape[1]
  if not isinstance(starts, jax.core.Tracer):
    ends = np.asarray(starts).reshape(-1) + length
    if ends.shape != (batch,):
      raise ValueError(f"extend: starts has shape {np.shape(starts)}, expected ({batch},): one per row")
    if (ends > slots).any():
      row = int(np.argmax(ends))
      raise ValueError(f"extend: row {row} starts at {ends[row] - length} and its {length} new-token positions "
                       f"need {ends[row]} cache slots; the cache has {slots}")
  positions = jnp.asarray(starts)[:, None] + jnp.arange(length)[None, :]
  logits, cache = model.apply({"params": params}, tokens, positions=positions, cache=cache)
  last = jnp.take_along_axis(logits, (jnp.asarray(lengths) - 1)[:, None, None], axis=1)[:, 0]
  return last, cache


def decode_step(model: Decoder, params: Any, tokens: jax.Array, positions: jax.Array,
                cache: KVCache | PrefixSharedCache) -> tuple[jax.Array, KVCache | PrefixSharedCache]:
  """tokens [B] at positions [B] (each row's own) -> (next-token logits [B, V], cache)."""
  logits, cache = model.apply({"params": params}, tokens[:, None], positions=positions[:, None],
                              cache=cache)
  return logits[:, 0], cache
