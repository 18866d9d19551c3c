"""What every sampler does with its rows of generated tokens, written once for Sampler and
ConversationSampler: draw each running row's next token and append it (`emit`, on device, inside the
jitted decode loop), look for stop strings in the running rows' text (`stopped_rows`, on the host
between chunks), and cut a finished sample into a Completion (`completion_of`).
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from sampling.stops import cut_index
from sampling.strategies import sample_tokens


@dataclasses.dataclass
class Completion:
  text: str  # the completion without the prompt, cut before the first stop string
  finish_reason: str  # "stop", "eos" or "length"
  num_tokens: int  # generated tokens kept (up to the stop string or end-of-document)


def emit(logits: jax.Array, keys: jax.Array, active: jax.Array, tokens: jax.Array, generated: jax.Array,
         done: jax.Array, limit: jax.Array, end_ids: Sequence[int], temperature: float, top_p: float,
         top_k: int) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
  """One token for every `active` row of R rows, drawn from its logits [R, V] with its key [R]:
  (token [R], tokens [R, N] with it written at each active row's `generated` index, generated [R] + 1
  where active, done [R] where an active row drew an end token or reached its `limit` [R])."""
  token = sample_tokens(logits, keys, temperature, top_p, top_k)
  rows = jnp.arange(tokens.shape[0])
  at = jnp.minimum(generated, tokens.shape[1] - 1)
  tokens = tokens.at[rows, at].set(jnp.where(active, token, tokens[rows, at]))
  generated = generated + active
  done = done | (active & (jnp.isin(token, jnp.asarray(end_ids)) | (generated >= limit)))
  return token, tokens, generated, done


def stopped_rows(vocabulary, tokens: np.ndarray, generated: np.ndarray, running: np.ndarray,
                 stops: Sequence[Sequence[str]]) -> np.ndarray:
  """[R] bool: the `running` rows whose text so far (tokens [R, N], the first `generated` of each)
  holds one of their `stops` (one list per row). Stop strings may span token boundaries, so the text
  is decoded; the loop on device ends those rows at the start of its next call."""
  stopped = np.zeros(len(running), bool)
  for row in np.flatnonzero(running):
    if stops[row] and cut_index(vocabulary.decode(tokens[row, :generated[row]].tolist()), stops[row]) >= 0:
      stopped[row] = True
  return stopped


def completion_of(vocabulary, tokens: np.ndarray, generated: int, end_ids: Sequence[int],
                  stops: Sequence[str]) -> Completion:
  """A sample's first `generated` tokens as a Completion: the end token dropped ("eos"), the text cut
  before the first stop string ("stop", counting the tokens the kept text needs), else "length"."""
  ids = tokens[:generated].tolist()
  ended = generated > 0 and int(ids[-1]) in end_ids
  if ended:
    ids = ids[:-1]  # drop the end-of-document token itself
  text = vocabulary.decode(ids)
  cut = cut_index(text, stops)
  if cut >= 0:
    # Count the tokens that the kept text needs: the shortest prefix whose decoding covers it.
    kept = next(n for n in range(len(ids) + 1) if len(vocabulary.decode(ids[:n])) >= cut)
    return Completion(text=text[:cut], finish_reason="stop", num_tokens=kept)
  return Completion(text=text, finish_reason="eos" if ended else "length", num_tokens=len(ids))
