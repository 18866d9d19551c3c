"""n completions per prompt from a trained decoder: KV-cache decoding in one jitted loop.

Each prompt is prefilled once; its cache is then copied to its n sample rows. Decoding runs on the
device in a `lax.while_loop` for up to `chunk_length` tokens at a time and stops early once every row
has finished (end-of-document or the length limit). Stop *strings* (which may span token boundaries)
are checked on the host between chunks, so there is no per-token host round trip.

Data-parallel: given a mesh (model/sharding.py's, as training builds it), the sample rows and their
caches are split over the batch axes (data, fsdp) of every device on every host, and the parameters
keep the partitioning rules of training (sharded over fsdp / tensor). Every host runs the same
program on the same prompts and sees every row's tokens (gathered once per chunk), so the host-side
stop checks agree everywhere.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Sequence

import flax.struct
import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from model.decoding import decode_step, prefill
from model import sharding
from model.sharding import BATCH_AXES
from model.transformer import Decoder, init_cache
from sampling.stops import cut_index
from sampling.strategies import DEFAULT_TEMPERATURE, DEFAULT_TOP_K, DEFAULT_TOP_P, sample_tokens


@dataclasses.dataclass(frozen=True)
class SamplingConfig:
  temperature: float = DEFAULT_TEMPERATURE
  top_p: float = DEFAULT_TOP_P
  top_k: int = DEFAULT_TOP_K
  max_decode_length: int = 256
  chunk_length: int = 32  # tokens decoded on device between host-side stop-string checks


@dataclasses.dataclass
class Completion:
  text: str  # the completion without the prompt, cut before the first stop string
  finish_reason: str  # "stop", "eos" or "length"
  num_tokens: int  # generated tokens kept (up to the stop string or end-of-document)


@flax.struct.dataclass
class DecodeState:
  """Everything the decode loop carries; rows are samples. Shapes: R rows, N new-token budget."""

  tokens: jax.Array  # [R, N] generated token ids (0 where not yet generated)
  num_generated: jax.Array  # [R] tokens generated so far
  last: jax.Array  # [R] the token to feed next
  positions: jax.Array  # [R] absolute position of `last`
  done: jax.Array  # [R] finished (end-of-document, or stopped by the host)
  cache: Any
  key: jax.Array


class Sampler:
  """Samples from `model` with `params`; `vocabulary` is the run's seqio SentencePieceVocabulary."""

  def __init__(self, model: Decoder, params: Any, vocabulary, begin_id: int, end_ids: Sequence[int],
               mesh: Mesh | None = None):
    self.model, self.params, self.vocabulary = model, params, vocabulary
    self.begin_id = int(begin_id)  # [code]: documents start with it, so prompts do too
    self.end_ids = tuple(int(i) for i in end_ids)  # [eod] and eos end a sample
    self.mesh = mesh  # None: wherever jax puts things (one device)
    self.row_shards = 1 if mesh is None else int(np.prod([mesh.shape[a] for a in BATCH_AXES]))
    if mesh is not None:  # training's layout (a no-op for parameters restored onto it)
      self.params = jax.device_put(params, sharding.param_shardings(model, mesh))

  def _shard_rows(self, tree: Any) -> Any:
    """Constrain every [rows, ...] array of `tree` to be split over the mesh's batch axes."""
    if self.mesh is None:
      return tree

    def constrain(x):
      if x.ndim == 0 or jnp.issubdtype(x.dtype, jax.dtypes.prng_key):
        return x
      return jax.lax.with_sharding_constraint(x, NamedSharding(self.mesh, P(BATCH_AXES, *[None] * (x.ndim - 1))))

    return jax.tree.map(constrain, tree)

  def _global(self, value: np.ndarray, rows: bool = False) -> jax.Array:
    """A host value (the same on every host) as an array on the mesh: replicated, or split by rows."""
    if self.mesh is None:
      return jnp.asarray(value)
    spec = P(BATCH_AXES, *[None] * (value.ndim - 1)) if rows else P()
    return jax.make_array_from_callback(value.shape, NamedSharding(self.mesh, spec), lambda index: value[index])

  @staticmethod
  def _to_host(x: jax.Array) -> np.ndarray:
    """Every row on every host: the stop checks and the output need all of them."""
    return np.asarray(x) if x.is_fully_addressable else np.asarray(multihost_utils.process_allgather(x, tiled=True))

  def encode_prompt(self, prompt: str, max_prompt_tokens: int) -> tuple[list[int], bool]:
    """[code] + tokens; a prompt longer than max_prompt_tokens keeps its last tokens (truncated=True)."""
    ids = [self.begin_id] + list(self.vocabulary.encode(prompt))
    if len(ids) > max_prompt_tokens:
      return ids[-max_prompt_tokens:], True
    return ids, False

  @functools.partial(jax.jit, static_argnames=("self", "config", "num_samples", "rows"))
  def _start(self, params: Any, prompts: jax.Array, lengths: jax.Array, key_data: jax.Array, config: SamplingConfig,
             num_samples: int, rows: int) -> DecodeState:
    """Prefill [P, T] prompts once, copy each cache to its num_samples rows, draw the first tokens.

    `rows` >= P * num_samples: rows past P * num_samples (padding up to a multiple of the row shards)
    repeat the last prompt and are discarded by the caller.
    """
    batch, prompt_len = prompts.shape
    cache = init_cache(self.model.config, batch, prompt_len + config.max_decode_length)
    logits, cache = prefill(self.model, params, prompts, lengths, cache)
    copy = lambda x: jnp.repeat(x, num_samples, axis=0, total_repeat_length=rows)
    cache = self._shard_rows(jax.tree.map(copy, cache))  # each layer [rows, S, K]
    logits, positions = copy(logits), copy(lengths)
    key, draw = jax.random.split(jax.random.wrap_key_data(key_data))
    first = sample_tokens(logits, draw, config.temperature, config.top_p, config.top_k)
    tokens = jnp.zeros((rows, config.max_decode_length), jnp.int32).at[:, 0].set(first)
    done = jnp.isin(first, jnp.asarray(self.end_ids))
    return self._shard_rows(DecodeState(tokens=tokens, num_generated=jnp.ones((rows,), jnp.int32), last=first,
                                        positions=positions, done=done, cache=cache, key=key))

  @functools.partial(jax.jit, static_argnames=("self", "config"), donate_argnames=("state",))
  def _continue(self, params: Any, state: DecodeState, stopped: jax.Array, config: SamplingConfig) -> DecodeState:
    """Up to chunk_length decode steps, ending early once every row is done (or `stopped` by the host)."""
    limit = config.max_decode_length
    state = state.replace(done=state.done | stopped)

    def cond(carry):
      state, steps = carry
      return (steps < config.chunk_length) & ~jnp.all(state.done | (state.num_generated >= limit))

    def body(carry):
      state, steps = carry
      logits, cache = decode_step(self.model, params, state.last, state.positions, state.cache)
      key, draw = jax.random.split(state.key)
      token = sample_tokens(logits, draw, config.temperature, config.top_p, config.top_k)
      active = ~state.done & (state.num_generated < limit)
      index = jnp.minimum(state.num_generated, limit - 1)
      tokens = state.tokens.at[jnp.arange(token.shape[0]), index].set(
          jnp.where(active, token, state.tokens[jnp.arange(token.shape[0]), index]))
      done = state.done | (active & jnp.isin(token, jnp.asarray(self.end_ids)))
      return state.replace(tokens=tokens, num_generated=state.num_generated + active, last=token,
                           positions=state.positions + active, done=done, cache=cache, key=key), steps + 1

    state, _ = jax.lax.while_loop(cond, body, (state, jnp.zeros((), jnp.int32)))
    return self._shard_rows(state)

  def sample(self, prompts: Sequence[str], num_samples: int, config: SamplingConfig, seed: int,
             stops: Sequence[Sequence[str]] | None = None) -> list[list[Completion]]:
    """num_samples completions for each prompt (all prompts in one batch of rows)."""
    stops = stops or [[] for _ in prompts]
    max_prompt = self.model.config.max_length - config.max_decode_length
    if max_prompt < 1:
      raise ValueError(f"max_decode_length {config.max_decode_length} leaves no room for a prompt in the "
                       f"model's context of {self.model.config.max_length} tokens")
    encoded = [self.encode_prompt(p, max_prompt)[0] for p in prompts]
    width = max(len(e) for e in encoded)
    batch = np.zeros((len(encoded), width), np.int32)
    for i, ids in enumerate(encoded):
      batch[i, :len(ids)] = ids
    lengths = np.array([len(e) for e in encoded], np.int32)
    used = len(prompts) * num_samples
    rows = -(-used // self.row_shards) * self.row_shards
    key_data = np.asarray(jax.random.key_data(jax.random.key(seed)))  # any Python int seed, as plain data
    state = self._start(self.params, self._global(batch), self._global(lengths), self._global(key_data), config,
                        num_samples, rows)
    row_stops = [stops[min(r // num_samples, len(prompts) - 1)] for r in range(rows)]
    stopped = np.zeros(rows, bool)
    while True:
      tokens, generated, done = (self._to_host(x) for x in (state.tokens, state.num_generated, state.done))
      # Host-side stop strings, once per chunk: decode each unfinished row and look for them.
      for row in np.flatnonzero(~done & ~stopped):
        if row_stops[row] and cut_index(self.vocabulary.decode(tokens[row, :generated[row]].tolist()),
                                          row_stops[row]) >= 0:
          stopped[row] = True
      finished = done | stopped | (generated >= config.max_decode_length)
      if finished.all():
        break
      state = self._continue(self.params, state, self._global(stopped, rows=True), config)
    return [[self._completion(tokens[r], int(generated[r]), bool(done[r]), row_stops[r])
             for r in range(p * num_samples, (p + 1) * num_samples)] for p in range(len(prompts))]

  def _completion(self, tokens: np.ndarray, generated: int, ended: bool, stops: Sequence[str]) -> Completion:
    ids = tokens[:generated].tolist()
    if ended:
      ids = ids[:-1]  # drop the end-of-document token itself
    text = self.vocabulary.decode(ids)
    cut = cut_index(text, stops)
    if cut >= 0:
      # Count the tokens that the kept text needs: the shortest prefix whose decoding covers it.
      kept = next(n for n in range(len(ids) + 1) if len(self.vocabulary.decode(ids[:n])) >= cut)
      return Completion(text=text[:cut], finish_reason="stop", num_tokens=kept)
    return Completion(text=text, finish_reason="eos" if ended else "length", num_tokens=len(ids))
