"""Multi-round conversations with a decoder: each conversation keeps its KV cache between rounds.

Iterative protocols (a prompt, a completion, feedback, another completion, ...) would otherwise prefill
the whole conversation again every round. Here a conversation is one row of a plain KV cache (one
[C, S, K] buffer per layer, allocated once; S = the model's context): `start` prefills each prompt once
and copies its cache into the rows of its samples, and `reply` prefills only the appended text's tokens
at the end of each row (model.decoding.extend), so a round costs what it adds.

A conversation's tokens are its prompt ([code] + tokens, as Sampler.encode_prompt makes them), then per
round the kept completion tokens (up to the stop string, without the end token; the kept tokens'
decoding may run a little past the cut text, as Sampler's num_tokens does) and the appended text's
tokens. Every generated token's keys/values are written in the round that samples it, so the cache
always covers the conversation; slots past its end hold discarded tokens, never seen (a query at
position p sees slots <= p) and overwritten by the next round before anything could see them.

Each call decodes its conversations together in one jitted lax.while_loop per chunk of
`chunk_length` tokens, stop strings checked on the host between chunks (as sampling/sampler.py does).
A conversation's tokens in a round are drawn from fold_in(seed key, prompt index, sample, round, token
index): they do not depend on which other conversations share the batch.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Sequence

import flax.struct
import jax
import jax.numpy as jnp
import numpy as np

from model.decoding import decode_step, extend, prefill
from model.transformer import Decoder, KVCache, init_cache
from sampling.rows import Completion, completion_of, emit, stopped_rows
from sampling.sampler import SamplingConfig


def _round_up(n: int, multiple: int) -> int:
  return -(-n // multiple) * multiple


def _batch_bucket(n: int) -> int:
  """Batches padded to a power of two: one compiled decode loop per bucket, not per batch size."""
  return 1 << max(n - 1, 0).bit_length()


@dataclasses.dataclass
class _Conversation:
  tokens: list[int]  # everything its cache row holds, in order
  prompt: int  # its prompt's index in its `start` call: part of its random keys
  sample: int  # which of that prompt's samples it is
  rounds: int  # completions sampled so far: the round counter of its keys


@flax.struct.dataclass
class _RoundState:
  """One call's decoding: B rows (the conversations of the call, padded), N = max_decode_length."""

  cache: KVCache  # L x [B, S, K]: the rows' copies of their conversations' cache rows
  logits: jax.Array  # [B, V] next-token logits
  keys: jax.Array  # [B] PRNG keys of this round
  start: jax.Array  # [B] the conversation's length before this completion: its first token's position
  limit: jax.Array  # [B] tokens allowed (<= N, and the context's room)
  tokens: jax.Array  # [B, N] generated token ids
  generated: jax.Array  # [B]
  done: jax.Array  # [B] ended (end token or limit; padding rows from the start)


class ConversationSampler:
  """Conversations with `model` and `params` (one device); `vocabulary` is the run's seqio vocabulary.

  Holds up to `max_conversations` open conversations of up to the model's max_length tokens each; the
  cache costs max_conversations x max_length x head_dim x num_layers x 2 values, allocated here.
  """

  def __init__(self, model: Decoder, params: Any, vocabulary, begin_id: int, end_ids: Sequence[int],
               max_conversations: int = 64):
    if max_conversations < 1:
      raise ValueError(f"max_conversations must be positive, got {max_conversations}")
    self.model, self.params, self.vocabulary = model, params, vocabulary
    self.begin_id = int(begin_id)
    self.end_ids = tuple(int(i) for i in end_ids)
    self.max_length = model.config.max_length
    self.max_conversations = max_conversations
    self.cache = init_cache(model.config, max_conversations)  # row i: conversation i
    self._conversations: dict[int, _Conversation] = {}
    self.last_stats: dict = {}  # of the last call: conversations, batch rows, tokens prefilled, chunks

  # -- bookkeeping -------------------------------------------------------------------------------

  def tokens(self, conversation: int) -> list[int]:
    """The conversation so far: prompt, kept completions and appended texts, as token ids."""
    return list(self._get(conversation).tokens)

  def open_conversations(self) -> list[int]:
    return sorted(self._conversations)

  def close(self, conversations: Sequence[int]) -> None:
    """Frees the conversations' rows for new ones."""
    for conversation in conversations:
      self._get(conversation)
    for conversation in conversations:
      self._conversations.pop(conversation, None)

  def _get(self, conversation: int) -> _Conversation:
    if conversation not in self._conversations:
      raise ValueError(f"conversation {conversation} is not open (unknown or closed; open: "
                       f"{len(self._conversations)} of {self.max_conversations})")
    return self._conversations[conversation]

  def _free_rows(self, count: int) -> list[int]:
    free = [row for row in range(self.max_conversations) if row not in self._conversations]
    if count > len(free):
      raise ValueError(f"{count} new conversations need as many rows; {len(free)} of max_conversations="
                       f"{self.max_conversations} are free (close finished conversations first)")
    return free[:count]

  # -- the API -----------------------------------------------------------------------------------

  def fits(self, conversation: int | None, text: str) -> bool:
    """Whether `text` leaves room for at least one generated token: as a new prompt ([code] + its
    tokens) when `conversation` is None, else appended to that open conversation."""
    if conversation is None:
      return 1 + len(self.vocabulary.encode(text)) < self.max_length
    return len(self._get(conversation).tokens) + len(self.vocabulary.encode(text)) < self.max_length

  def start(self, prompts: Sequence[str], num_samples: int, config: SamplingConfig, seed: int,
            stops: Sequence[Sequence[str]] | None = None) -> list[list[tuple[int, Completion]]]:
    """num_samples new conversations per prompt, each with its first completion: per prompt, in sample
    order, (conversation id, completion). Each prompt is prefilled once for all its samples."""
    stops = self._check_stops(stops, len(prompts))
    if num_samples < 1:
      raise ValueError(f"num_samples must be positive, got {num_samples}")
    if not prompts:
      return []
    encoded = [[self.begin_id] + list(self.vocabulary.encode(prompt)) for prompt in prompts]
    for index, ids in enumerate(encoded):
      if len(ids) >= self.max_length:
        raise ValueError(f"prompt {index} has {len(ids)} tokens ([code] included); the model's context of "
                         f"{self.max_length} tokens leaves no room for a completion")
    rows = self._free_rows(len(prompts) * num_samples)
    width = min(_round_up(max(len(ids) for ids in encoded), 16), self.max_length)
    batch = np.zeros((len(prompts), width), np.int32)
    for index, ids in enumerate(encoded):
      batch[index, :len(ids)] = ids
    lengths = np.array([len(ids) for ids in encoded], np.int32)
    conversations = [_Conversation(list(encoded[p]), p, s, 0) for p in range(len(prompts)) for s in range(num_samples)]
    size = _batch_bucket(len(rows))
    prompt_of_row = np.zeros(size, np.int32)
    prompt_of_row[:len(rows)] = [c.prompt for c in conversations]
    logits, cache = self._prefill_prompts(self.params, jnp.asarray(batch), jnp.asarray(lengths),
                                          jnp.asarray(prompt_of_row))
    row_stops = [stops[c.prompt] for c in conversations]
    completions = self._run_round(rows, conversations, [c.tokens for c in conversations], logits, cache, config,
                                  seed, row_stops, int(lengths.sum()))
    results: list[list[tuple[int, Completion]]] = [[] for _ in prompts]
    for row, conversation, completion in zip(rows, conversations, completions):
      results[conversation.prompt].append((row, completion))
    return results

  def reply(self, items: Sequence[tuple[int, str]], config: SamplingConfig, seed: int,
            stops: Sequence[Sequence[str]] | None = None) -> list[Completion]:
    """For each (conversation id, text): append the text (only its tokens are prefilled) and sample the
    conversation's next completion. Completions in the order of `items`."""
    stops = self._check_stops(stops, len(items))
    if not items:
      return []
    rows, conversations, contexts, logits, cache, prefilled = self._extend_conversations(items)
    return self._run_round(rows, conversations, contexts, logits, cache, config, seed, stops, prefilled)

  def continuation_logits(self, items: Sequence[tuple[int, str]]) -> np.ndarray:
    """[len(items), V] next-token logits after appending each text to its conversation, computed from the
    cache like `reply`; the conversations do not change."""
    if not items:
      return np.zeros((0, self.model.config.vocab_size), np.float32)
    logits = self._extend_conversations(items)[3]
    return np.asarray(logits)[:len(items)]

  # -- internals ---------------------------------------------------------------------------------

  @staticmethod
  def _check_stops(stops: Sequence[Sequence[str]] | None, count: int) -> list[Sequence[str]]:
    stops = [[] for _ in range(count)] if stops is None else list(stops)
    if len(stops) != count:
      raise ValueError(f"stops: one list per prompt or item ({count}), got {len(stops)}")
    return stops

  def _extend_conversations(self, items: Sequence[tuple[int, str]]
                            ) -> tuple[list[int], list[_Conversation], list[list[int]], jax.Array, KVCache, int]:
    """(rows, conversations, their tokens with the texts appended, logits [B, V], the rows' cache
    [B, S, K] per layer, tokens prefilled): each item's text prefilled after its conversation, which
    itself does not change."""
    rows = [int(conversation) for conversation, _ in items]
    if len(set(rows)) != len(rows):
      raise ValueError(f"a conversation appears twice in one call: {rows}")
    conversations = [self._get(row) for row in rows]
    new_tokens, starts = [], []
    for (row, text), conversation in zip(items, conversations):
      ids = list(self.vocabulary.encode(text))
      start = len(conversation.tokens)
      if len(conversation.tokens) + len(ids) >= self.max_length:
        raise ValueError(f"conversation {row}: its {len(conversation.tokens)} tokens and the text's {len(ids)} "
                         f"would leave no room for a completion in the model's context of {self.max_length} tokens")
      if not ids:  # nothing new: feed the last token again (rewriting its keys/values) for its logits
        ids, start = [conversation.tokens[-1]], start - 1
      new_tokens.append(ids)
      starts.append(start)
    size = _batch_bucket(len(rows))
    width = _round_up(max(len(ids) for ids in new_tokens), 16)
    batch = np.zeros((size, width), np.int32)
    lengths, start_array = np.ones(size, np.int32), np.zeros(size, np.int32)  # padding rows: one token at 0
    row_array = np.full(size, self.max_conversations, np.int32)  # out of range: read as zeros, never stored
    for index, (row, ids, start) in enumerate(zip(rows, new_tokens, starts)):
      batch[index, :len(ids)], lengths[index], start_array[index], row_array[index] = ids, len(ids), start, row
    logits, cache = self._extend_rows(self.params, self.cache, jnp.asarray(row_array), jnp.asarray(batch),
                                      jnp.asarray(lengths), jnp.asarray(start_array))
    contexts = [conversation.tokens[:start] + ids
                for conversation, ids, start in zip(conversations, new_tokens, starts)]
    return rows, conversations, contexts, logits, cache, int(lengths[:len(rows)].sum())

  @functools.partial(jax.jit, static_argnames=("self",))
  def _prefill_prompts(self, params: Any, prompts: jax.Array, lengths: jax.Array,
                       prompt_of_row: jax.Array) -> tuple[jax.Array, KVCache]:
    """Prompts [P, W] prefilled once -> (logits [B, V], cache [B, S, K] per layer) of each row's prompt."""
    logits, own = prefill(self.model, params, prompts, lengths, init_cache(self.model.config, *prompts.shape))
    rows = init_cache(self.model.config, prompt_of_row.shape[0])
    width = prompts.shape[1]
    cache = {name: tuple(buffer.at[:, :width].set(prompt_buffer[prompt_of_row])
                         for buffer, prompt_buffer in zip(rows[name], own[name])) for name in rows}
    return logits[prompt_of_row], cache

  @functools.partial(jax.jit, static_argnames=("self",))
  def _extend_rows(self, params: Any, cache: KVCache, rows: jax.Array, tokens: jax.Array, lengths: jax.Array,
                   starts: jax.Array) -> tuple[jax.Array, KVCache]:
    """The rows' cache (rows >= C read as zeros) with the new tokens [B, T] written at `starts`.

    Rows are copied with T spare slots at the end, so every padding position is a slot (extend's
    contract) even for a row near the end of the context; the spare slots hold only padding and are
    dropped after."""
    slots, width = cache["k"][0].shape[1], tokens.shape[1]

    def take(buffer: jax.Array) -> jax.Array:
      return jnp.pad(buffer.at[rows].get(mode="fill", fill_value=0), ((0, 0), (0, width), (0, 0)))

    batch = {name: tuple(take(buffer) for buffer in buffers) for name, buffers in cache.items()}
    logits, batch = extend(self.model, params, tokens, lengths, starts, batch)
    return logits, {name: tuple(buffer[:, :slots] for buffer in buffers) for name, buffers in batch.items()}

  @functools.partial(jax.jit, static_argnames=("self",), donate_argnames=("cache",))
  def _store(self, cache: KVCache, batch: KVCache, rows: jax.Array) -> KVCache:
    """The batch's rows written back to their conversations' rows (rows >= C: padding, dropped)."""
    return {name: tuple(buffer.at[rows].set(new, mode="drop") for buffer, new in zip(cache[name], batch[name]))
            for name in cache}

  @functools.partial(jax.jit, static_argnames=("self", "config"))
  def _new_round(self, logits: jax.Array, cache: KVCache, key_data: jax.Array, key_ids: jax.Array,
                 start: jax.Array, limit: jax.Array, config: SamplingConfig) -> _RoundState:
    """key_ids [B, 3]: (prompt index, sample, round) of each row's conversation."""
    base = jax.random.wrap_key_data(key_data)

    def key(ids: jax.Array) -> jax.Array:
      return jax.random.fold_in(jax.random.fold_in(jax.random.fold_in(base, ids[0]), ids[1]), ids[2])

    size = logits.shape[0]
    return _RoundState(cache=cache, logits=logits, keys=jax.vmap(key)(key_ids), start=start, limit=limit,
                       tokens=jnp.zeros((size, config.max_decode_length), jnp.int32),
                       generated=jnp.zeros((size,), jnp.int32), done=limit <= 0)

  @functools.partial(jax.jit, static_argnames=("self", "config"), donate_argnames=("state",))
  def _continue(self, params: Any, state: _RoundState, stopped: jax.Array, config: SamplingConfig) -> _RoundState:
    """Up to chunk_length tokens for every row not done; rows the host `stopped` are done first."""
    rows = jnp.arange(state.done.shape[0])
    state = state.replace(done=state.done | stopped)

    def cond(carry):
      state, steps = carry
      return (steps < config.chunk_length) & ~jnp.all(state.done)

    def body(carry):
      state, steps = carry
      keys = jax.vmap(jax.random.fold_in)(state.keys, state.generated)
      _, tokens, generated, done = emit(state.logits, keys, ~state.done, state.tokens, state.generated, state.done,
                                        state.limit, self.end_ids, config.temperature, config.top_p, config.top_k)
      # Every row feeds its newest token: a running row's new one (its keys/values join the cache, even
      # if it just ended, and give the next logits); a finished row's again, at its own position, which
      # rewrites the keys/values already there.
      newest = jnp.maximum(generated - 1, 0)
      logits, cache = decode_step(self.model, params, tokens[rows, newest], state.start + newest, state.cache)
      state = state.replace(cache=cache, logits=logits, tokens=tokens, generated=generated, done=done)
      return state, steps + 1

    state, _ = jax.lax.while_loop(cond, body, (state, jnp.zeros((), jnp.int32)))
    return state

  def _run_round(self, rows: list[int], conversations: list[_Conversation], contexts: list[list[int]],
                 logits: jax.Array, cache: KVCache, config: SamplingConfig, seed: int,
                 stops: Sequence[Sequence[str]], prefilled: int) -> list[Completion]:
    """Samples one completion per row from `logits` and the rows' `cache` (holding `contexts`, each
    conversation's tokens so far), stores the cache back and sets each conversation to its context
    plus the kept tokens: nothing changes before the round has run."""
    size = logits.shape[0]
    start, limit = np.zeros(size, np.int32), np.zeros(size, np.int32)  # padding rows: limit 0, done at once
    key_ids = np.zeros((size, 3), np.uint32)
    for index, (conversation, context) in enumerate(zip(conversations, contexts)):
      start[index] = len(context)
      limit[index] = min(config.max_decode_length, self.max_length - start[index])
      key_ids[index] = (conversation.prompt, conversation.sample, conversation.rounds)
    key_data = np.asarray(jax.random.key_data(jax.random.key(seed)))
    state = self._new_round(logits, cache, jnp.asarray(key_data), jnp.asarray(key_ids), jnp.asarray(start),
                            jnp.asarray(limit), config)
    stopped, chunks = np.zeros(size, bool), 0
    while True:
      state = self._continue(self.params, state, jnp.asarray(stopped), config)
      chunks += 1
      tokens, generated, done = (np.asarray(x) for x in (state.tokens, state.generated, state.done))
      running = ~done & (np.arange(size) < len(rows))  # (padding rows are done from the start)
      stopped = stopped_rows(self.vocabulary, tokens, generated, running, stops)
      if (done | stopped).all():
        break
    row_array = np.full(size, self.max_conversations, np.int32)
    row_array[:len(rows)] = rows
    self.cache = self._store(self.cache, state.cache, jnp.asarray(row_array))
    completions = []
    for index, (row, conversation, context) in enumerate(zip(rows, conversations, contexts)):
      count = int(generated[index])
      completion = completion_of(self.vocabulary, tokens[index], count, self.end_ids, stops[index])
      conversation.tokens = list(context) + tokens[index, :completion.num_tokens].tolist()
      conversation.rounds += 1
      self._conversations[row] = conversation
      completions.append(completion)
    self.last_stats = {"conversations": len(rows), "batch_rows": size, "prefilled_tokens": prefilled,
                       "chunks": chunks}
    return completions
