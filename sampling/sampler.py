"""n completions per prompt from a trained decoder: continuous batching over a shared-prompt KV cache.

The work is every (prompt, sample) pair. A fixed number of decode rows runs it in one jitted
`lax.while_loop`, up to `chunk_length` steps per call, each step five phases over the DecodeState
(decode, flush, admit, assign, emit: the functions of those names below):
- Rows sit in prompt slots of G rows. A slot holds one prompt's KV cache, prefilled once and read once
  per step for all its rows (model.transformer.PrefixSharedCache); each row keeps only the keys and
  values of the tokens it generated.
- A row whose sample ends (end-of-document or its length limit) is flushed to an output buffer and
  takes the slot prompt's next pending sample in the same step. A slot whose prompt has nothing left
  and whose rows are all idle is refilled with the next prompt (prefilled inside the loop); when no new
  prompt is left, it takes a second copy of the prompt with the most samples still pending, so the
  tail of a run keeps every row busy.
- Attention reads each row's generated keys only up to a window: the longest live sample in the
  batch plus one chunk, rounded up to `window_bucket` (one compiled loop per window).
- Every sample draws from its own key, fold_in(seed, prompt id, sample index, token index), so the
  keys do not depend on the row, the slot, the batch or the devices a sample ran on. Its logits are
  bit-identical wherever the shapes are: every prompt is prefilled alone (one shape, whenever it is
  admitted), and a resumed run lays out the whole prompt list (the finished prompts skipped), so it
  writes what an uninterrupted run writes. Other rows or devices mean other shapes, whose rounding
  may, rarely, change a draw.
Stop *strings* (which may span token boundaries) are checked on the host between chunks, when the
finished samples are collected: there is no per-token host round trip. (Drawing a token, the stop
check and cutting a completion are sampling/rows.py's, shared with ConversationSampler.)

Data-parallel: given a mesh (model/sharding.py's, as training builds it), rows and prompt slots are
split over the batch axes (data, fsdp) of every device on every host, and the parameters keep the
partitioning rules of training. Every host runs the same program on the same prompts and sees every
row's tokens (gathered once per chunk), so the host-side decisions agree everywhere.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable, Iterator, Sequence

import flax.struct
import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from model.decoding import decode_step, prefill_slots
from model.sharding import BATCH_AXES
from model.transformer import Decoder, PrefixSharedCache, init_prefix_shared_cache
from sampling.prompt_fit import EncodedPrompts, Prompt, check_fit, encode_prompts
from sampling.rows import Completion, completion_of, emit, stopped_rows
from sampling.strategies import DEFAULT_TEMPERATURE, DEFAULT_TOP_K, DEFAULT_TOP_P


_ADMIT_AT_ONCE = 8  # prompts admitted in one step (each prefilled alone) when that many slots are free


@dataclasses.dataclass(frozen=True)
class SamplingConfig:
  temperature: float = DEFAULT_TEMPERATURE
  top_p: float = DEFAULT_TOP_P
  top_k: int = DEFAULT_TOP_K
  max_decode_length: int = 256
  chunk_length: int = 32  # tokens decoded on device between host-side stop-string checks
  rows: int = 256  # samples decoded at once (fewer when the run has fewer); memory ~ rows x max_decode_length
  rows_per_prompt: int = 0  # G, rows sharing one copy of a prompt's cache; 0: automatic (see layout)
  share_prompt_cache: bool = True  # False: one copy of the prompt's cache per row (G = 1)
  window_bucket: int = 64  # generated-token attention window rounded up to this; 0: the whole allocation


def _device_config(config: SamplingConfig) -> SamplingConfig:
  """`config` with the fields only the host reads (the layout, passed on as slots and group, and the
  window's rounding) at their defaults: the jitted programs take the result as a static argument, so
  settings that differ only there share one compiled program."""
  host_only = ("rows", "rows_per_prompt", "share_prompt_cache", "window_bucket")
  return dataclasses.replace(config, **{f: SamplingConfig.__dataclass_fields__[f].default for f in host_only})


@flax.struct.dataclass
class DecodeState:
  """Everything the decode loop carries. P prompts, n samples each, Q slots of G rows (R = Q x G rows),
  N new-token budget, F finished-sample buffer rows. A sample is numbered p * n + s."""

  # The work (constant): prompts right-padded to Tp, per-prompt keys, per-sample token limits, and
  # which prompts to sample (a resumed run skips those already written: P and Tp stay the whole run's).
  prompts: jax.Array  # [P, Tp]
  prompt_lengths: jax.Array  # [P]
  prompt_keys: jax.Array  # [P] PRNG keys: fold_in(seed key, prompt id)
  limits: jax.Array  # [P * n] new tokens allowed per sample (<= N)
  order: jax.Array  # [P] the prompts to sample, in order (the first num_todo entries)
  rank: jax.Array  # [P] a prompt's place in `order`; P: skipped
  num_todo: jax.Array  # ()
  pending: jax.Array  # [P] samples of each prompt handed to rows so far (n for a skipped prompt)
  next_prompt: jax.Array  # () entries of `order` given a slot so far
  # Prompt slots.
  slot_prompt: jax.Array  # [Q] -1: empty
  slot_logits: jax.Array  # [Q, V] next-token logits after the slot's prompt
  cache: PrefixSharedCache
  # Rows.
  sample: jax.Array  # [R] the sample a row runs, -1: idle
  tokens: jax.Array  # [R, N] its generated token ids
  num_generated: jax.Array  # [R]
  last: jax.Array  # [R] the token to feed next
  done: jax.Array  # [R] finished, waiting to be flushed
  # Finished samples since the host last looked.
  out_sample: jax.Array  # [F]
  out_tokens: jax.Array  # [F, N]
  out_generated: jax.Array  # [F]
  out_count: jax.Array  # ()
  steps: jax.Array  # () decode steps run (all calls)


# A decode step's five phases, in the order Sampler._continue runs them inside its one jitted loop.

def _decode(model: Decoder, params: Any, state: DecodeState, group: int, window: int
            ) -> tuple[jax.Array, DecodeState]:
  """1. A decode step of every row from its last token: the next-token logits [R, V]. Idle rows
  compute too (fixed shapes); their logits, and those of rows that end or start now, are not used."""
  row_slot = jnp.arange(state.sample.shape[0]) // group
  index = jnp.maximum(state.num_generated - 1, 0)
  cache = state.cache.replace(suffix_index=index, window=window)
  positions = cache.prefix_lengths[row_slot] + index
  logits, cache = decode_step(model, params, state.last, positions, cache)
  return logits, state.replace(cache=cache.replace(window=0))


def _flush(state: DecodeState) -> DecodeState:
  """2. Finished rows are written to the output buffer (in row order) and become idle."""
  flush = (state.sample >= 0) & state.done
  capacity = state.out_sample.shape[0]

  # The conditional takes and returns only the output buffer: a cache passed through a cond is copied.
  def flush_rows(out):
    out_sample, out_tokens, out_generated, out_count = out
    slot_in_buffer = jnp.where(flush, out_count + jnp.cumsum(flush) - 1, capacity)
    return (out_sample.at[slot_in_buffer].set(state.sample, mode="drop"),
            out_tokens.at[slot_in_buffer].set(state.tokens, mode="drop"),
            out_generated.at[slot_in_buffer].set(state.num_generated, mode="drop"), out_count + jnp.sum(flush))

  out = jax.lax.cond(jnp.any(flush), flush_rows, lambda out: out,
                     (state.out_sample, state.out_tokens, state.out_generated, state.out_count))
  return state.replace(out_sample=out[0], out_tokens=out[1], out_generated=out[2], out_count=out[3],
                       sample=jnp.where(flush, -1, state.sample))


def _admit(model: Decoder, params: Any, state: DecodeState, num_samples: int, group: int) -> DecodeState:
  """3. Free slots take prompts, each prefilled here, inside the loop. A slot is free when its rows are
  all idle and its prompt has no sample left to hand out. It takes the next prompt of `order`; when
  none is left, a second copy of the admitted prompt with the most samples still pending (the tail of
  a run keeps every row busy). Up to _ADMIT_AT_ONCE prompts at once when that many slots are free
  (the start of a run, or several slots freed together), else one: a slot never waits long."""
  n, slots = num_samples, state.slot_prompt.shape[0]
  last_prompt = state.order.shape[0] - 1
  slot_idle = (state.sample < 0).reshape(slots, group).all(axis=1)
  has_pending = state.pending < n
  exhausted = (state.slot_prompt < 0) | ~has_pending[jnp.maximum(state.slot_prompt, 0)]
  free = slot_idle & exhausted
  has_new = state.next_prompt < state.num_todo
  admitted_before = state.rank < state.next_prompt
  copy = jnp.argmax(jnp.where(admitted_before, n - state.pending, 0))  # most samples still pending
  prompt = jnp.where(has_new, state.order[jnp.minimum(state.next_prompt, last_prompt)], copy)
  admit = jnp.any(free) & (has_new | (admitted_before[copy] & has_pending[copy]))

  many = min(_ADMIT_AT_ONCE, slots)
  admit_many = (many > 1) & (jnp.sum(free) >= many) & (state.next_prompt + many <= state.num_todo)
  count = jnp.where(admit_many, many, admit.astype(jnp.int32))
  free_slots = jax.lax.top_k(free.astype(jnp.int32), many)[1]  # the free slots, lowest first
  new_prompts = jnp.where(admit_many, state.order[jnp.minimum(state.next_prompt + jnp.arange(many), last_prompt)],
                          prompt)

  def fill(i, part):
    # One prompt per prefill, whether it comes alone or with others: a prompt's cache and first
    # logits are the same computation (the same shapes) whenever and with whatever it is admitted.
    prefix, slot_prompt, slot_logits = part
    slot, chosen = free_slots[i], new_prompts[i]
    logits, prefix = prefill_slots(model, params, state.prompts[chosen][None], state.prompt_lengths[chosen][None],
                                   slot[None], prefix)
    return prefix, slot_prompt.at[slot].set(chosen), slot_logits.at[slot].set(logits[0])

  cache = state.cache
  prefix = cache.replace(suffix_k=(), suffix_v=())  # the prompt slots' part of the cache
  prefix, slot_prompt, slot_logits = jax.lax.fori_loop(0, count, fill, (prefix, state.slot_prompt, state.slot_logits))
  admitted = jnp.where(admit_many, many, (admit & has_new).astype(jnp.int32))
  return state.replace(cache=prefix.replace(suffix_k=cache.suffix_k, suffix_v=cache.suffix_v),
                       slot_prompt=slot_prompt, slot_logits=slot_logits, next_prompt=state.next_prompt + admitted)


def _assign(state: DecodeState, logits: jax.Array, num_samples: int, group: int
            ) -> tuple[DecodeState, jax.Array]:
  """4. Idle rows take their slot prompt's next samples (numbered by rank among the idle rows of the
  same prompt); a new row's next-token logits [R, V] are its prompt's."""
  n, rows = num_samples, state.sample.shape[0]
  row_slot = jnp.arange(rows) // group
  row_prompt = state.slot_prompt[row_slot]
  eligible = (state.sample < 0) & (row_prompt >= 0)
  before = (row_prompt[:, None] == row_prompt[None, :]) & eligible[None, :] & (
      jnp.arange(rows)[None, :] < jnp.arange(rows)[:, None])
  number = state.pending[jnp.maximum(row_prompt, 0)] + jnp.sum(before, axis=1)
  take = eligible & (number < n)
  state = state.replace(
      pending=state.pending.at[jnp.where(take, row_prompt, state.pending.shape[0])].add(1, mode="drop"),
      sample=jnp.where(take, row_prompt * n + number, state.sample),
      num_generated=jnp.where(take, 0, state.num_generated), done=state.done & ~take)
  logits = jax.lax.cond(jnp.any(take), lambda: jnp.where(take[:, None], state.slot_logits[row_slot], logits),
                        lambda: logits)
  return state, logits


def _emit(state: DecodeState, logits: jax.Array, num_samples: int, end_ids: Sequence[int],
          config: SamplingConfig) -> DecodeState:
  """5. One token for every running row (from its decode step) and every new row (from its prompt),
  drawn from the sample's own key: fold_in(prompt key, sample number, token index)."""
  active = (state.sample >= 0) & ~state.done  # after _assign: the rows running before it and the new ones
  prompt_of, number_of = state.sample // num_samples, state.sample % num_samples
  keys = jax.vmap(lambda k, s, t: jax.random.fold_in(jax.random.fold_in(k, s), t))(
      state.prompt_keys[jnp.maximum(prompt_of, 0)], number_of, state.num_generated)
  limit = state.limits[jnp.maximum(state.sample, 0)]
  token, tokens, generated, done = emit(logits, keys, active, state.tokens, state.num_generated, state.done, limit,
                                        end_ids, config.temperature, config.top_p, config.top_k)
  return state.replace(tokens=tokens, num_generated=generated, last=jnp.where(active, token, state.last), done=done,
                       steps=state.steps + 1)


class Sampler:
  """Samples from `model` with `params`; `vocabulary` is the run's seqio SentencePieceVocabulary.

  `params` are taken as placed: on `mesh`, in training's layout (sampling/restore.py's load_sampler
  restores them onto it, place_params lays out others), or jax.ShapeDtypeStructs for `lower` alone.
  """

  def __init__(self, model: Decoder, params: Any, vocabulary, begin_id: int, end_ids: Sequence[int],
               mesh: Mesh | None = None):
    self.model, self.params, self.vocabulary = model, params, vocabulary
    self.begin_id = int(begin_id)  # [code]: documents start with it, so prompts do too
    self.end_ids = tuple(int(i) for i in end_ids)  # [eod] and eos end a sample
    self.mesh = mesh  # None: wherever jax puts things (one device)
    self.row_shards = 1 if mesh is None else int(np.prod([mesh.shape[a] for a in BATCH_AXES]))
    self.last_stats: dict = {}  # of the last run: rows, slots, decode steps, chunks

  # `self` is a static argument of the jitted programs below, which read only the model, the end ids
  # and the mesh from it (the parameters are an argument): samplers equal in those share the compiled
  # programs, so a pass@k hook or a test that builds a new Sampler for the same model compiles nothing.
  def _program_key(self) -> tuple:
    return (self.model, self.end_ids, self.mesh)

  def __hash__(self) -> int:
    return hash(self._program_key())

  def __eq__(self, other: object) -> bool:
    return type(other) is type(self) and other._program_key() == self._program_key()

  def _shard_rows(self, tree: Any) -> Any:
    """Constrain every [rows or slots, ...] array of `tree` to be split over the mesh's batch axes."""
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
    encoded = encode_prompts(self.vocabulary, self.begin_id, [prompt], max_prompt_tokens, 0)
    return list(encoded.ids[0]), encoded.truncated[0]

  def encode_prompts(self, prompts: Sequence[Prompt], max_decode_length: int) -> EncodedPrompts:
    """The prompts as `stream` feeds them, in this model's context (see sampling/prompt_fit.py)."""
    return encode_prompts(self.vocabulary, self.begin_id, prompts, self.model.config.max_length, max_decode_length)

  def layout(self, num_prompts: int, num_samples: int, config: SamplingConfig) -> tuple[int, int]:
    """(slots Q, rows per slot G): Q x G >= the rows asked for (capped at the work), Q a multiple of
    the row shards."""
    rows = max(1, min(config.rows, num_prompts * num_samples))
    group = 1
    if config.share_prompt_cache:
      # Automatic: every prompt's samples in one slot when the rows hold them all; otherwise about four
      # samples per row and prompt (a slot waits for its prompt's last sample before taking another).
      group = config.rows_per_prompt or max(num_samples // 4, -(-rows // num_prompts))
    group = max(1, min(group, num_samples, rows))
    slots = -(-rows // group)
    return -(-slots // self.row_shards) * self.row_shards, group

  @functools.partial(jax.jit, static_argnames=("self", "num_samples", "slots", "group", "config", "vocab"))
  def _init(self, prompts: jax.Array, lengths: jax.Array, prompt_ids: jax.Array, key_data: jax.Array,
            limits: jax.Array, skip: jax.Array, num_samples: int, slots: int, group: int, config: SamplingConfig,
            vocab: int) -> DecodeState:
    num_prompts, prompt_width = prompts.shape
    rows, new = slots * group, config.max_decode_length
    base = jax.random.wrap_key_data(key_data)
    cache = init_prefix_shared_cache(self.model.config, slots, prompt_width, rows, new)
    rank = jnp.where(skip, num_prompts, jnp.cumsum(~skip) - 1).astype(jnp.int32)
    order = jnp.zeros((num_prompts,), jnp.int32).at[rank].set(jnp.arange(num_prompts, dtype=jnp.int32), mode="drop")
    state = DecodeState(
        prompts=prompts, prompt_lengths=lengths,
        prompt_keys=jax.vmap(lambda i: jax.random.fold_in(base, i))(prompt_ids), limits=limits,
        order=order, rank=rank, num_todo=jnp.sum(~skip).astype(jnp.int32),
        pending=jnp.where(skip, num_samples, 0).astype(jnp.int32), next_prompt=jnp.zeros((), jnp.int32),
        slot_prompt=jnp.full((slots,), -1, jnp.int32), slot_logits=jnp.zeros((slots, vocab), jnp.float32),
        cache=cache,
        sample=jnp.full((rows,), -1, jnp.int32), tokens=jnp.zeros((rows, new), jnp.int32),
        num_generated=jnp.zeros((rows,), jnp.int32), last=jnp.zeros((rows,), jnp.int32),
        done=jnp.zeros((rows,), bool), out_sample=jnp.zeros((2 * rows,), jnp.int32),
        out_tokens=jnp.zeros((2 * rows, new), jnp.int32), out_generated=jnp.zeros((2 * rows,), jnp.int32),
        out_count=jnp.zeros((), jnp.int32), steps=jnp.zeros((), jnp.int32))
    return self._shard_state(state)

  def _shard_state(self, state: DecodeState) -> DecodeState:
    return state.replace(cache=self._shard_rows(state.cache), tokens=self._shard_rows(state.tokens),
                         slot_logits=self._shard_rows(state.slot_logits))

  @functools.partial(jax.jit, static_argnames=("self", "num_samples", "group", "window", "config"),
                     donate_argnames=("state",))
  def _continue(self, params: Any, state: DecodeState, stopped: jax.Array, num_samples: int, group: int,
                window: int, config: SamplingConfig) -> DecodeState:
    """Up to chunk_length decode steps (the five phases above); ends early when the work is done or the
    output buffer may not hold another step's finished samples. The host has collected the output
    buffer before the call and marked in `stopped` [R] the rows that reached a stop string."""
    rows, capacity = state.sample.shape[0], state.out_sample.shape[0]
    state = state.replace(done=state.done | (stopped & (state.sample >= 0)), out_count=jnp.zeros((), jnp.int32))

    def cond(carry):
      state, steps = carry
      work_left = jnp.any(state.sample >= 0) | jnp.any(state.pending < num_samples)
      return (steps < config.chunk_length) & (state.out_count + rows <= capacity) & work_left

    def body(carry):
      state, steps = carry
      logits, state = _decode(self.model, params, state, group, window)
      state = _admit(self.model, params, _flush(state), num_samples, group)
      state, logits = _assign(state, logits, num_samples, group)
      return self._shard_state(_emit(state, logits, num_samples, self.end_ids, config)), steps + 1

    state, _ = jax.lax.while_loop(cond, body, (state, jnp.zeros((), jnp.int32)))
    return state

  def stream(self, prompts: Sequence[Prompt] | EncodedPrompts, num_samples: int, config: SamplingConfig, seed: int,
             stops: Sequence[Sequence[str]] | None = None, prompt_ids: Sequence[int] | None = None,
             max_new_tokens: np.ndarray | None = None, skip: Sequence[bool] | None = None,
             truncate: bool = False, on_chunk: Callable[[int, DecodeState], None] | None = None
             ) -> Iterator[tuple[int, list[Completion]]]:
    """(prompt index, its num_samples completions) for each prompt, as soon as all its samples end.

    prompts: strings or `Infill`s, or `encode_prompts`'s result for config.max_decode_length (a caller that has
    checked or counted them does not encode them twice). A prompt that does not fit in the context
    minus max_decode_length raises PromptsTooLong before anything runs, unless `truncate`: then it
    keeps its last tokens, and `encode_prompts(...).truncated` says which were cut.

    prompt_ids: what a prompt's samples are drawn from together with `seed` (default: its index); give
    stable ids (sample.py hashes the prompt's qid and language). max_new_tokens [prompts, num_samples]:
    per-sample limits below max_decode_length (the benchmark replays measured completion lengths with
    it). skip [prompts]: prompts not to sample (a resumed run's, already written), never yielded.
    on_chunk(chunks done, state): called before the first decode chunk (0) and after each one, its
    stop checks done; sample.py starts and stops a profile there (training/profiling.py). Each chunk
    runs inside jax.profiler.StepTraceAnnotation("decode_chunk", step_num=its number, from 1).

    A prompt's samples depend on the prompts, the settings, the seed and its prompt id, not on which
    prompts are skipped: the skipped prompts still set the padded prompt width and the layout, so a
    resumed run (the whole prompt list, the finished prompts skipped) computes every sample it has
    left with the same programs on the same shapes as the run it resumes, to the bit. (Another
    `rows` or mesh changes the shapes, and rounding may then change a rare draw.)
    """
    new = config.max_decode_length
    if not isinstance(prompts, EncodedPrompts):
      prompts = self.encode_prompts(prompts, new)
    elif (prompts.context, prompts.max_decode_length) != (self.model.config.max_length, new):
      raise ValueError(f"prompts encoded for a context of {prompts.context} with max_decode_length "
                       f"{prompts.max_decode_length}, sampled with {self.model.config.max_length} and {new}")
    check_fit(prompts, truncate)
    encoded = prompts.ids
    skip = np.zeros(len(encoded), bool) if skip is None else np.asarray(skip, bool)
    if skip.shape != (len(encoded),):
      raise ValueError(f"skip: one per prompt ({len(encoded)}), got shape {skip.shape}")
    if skip.all():
      return
    stops = stops or [[] for _ in encoded]
    width = -(-max(len(e) for e in encoded) // 16) * 16
    batch = np.zeros((len(encoded), width), np.int32)
    for i, ids in enumerate(encoded):
      batch[i, :len(ids)] = ids
    lengths = np.array([len(e) for e in encoded], np.int32)
    ids = np.arange(len(encoded)) if prompt_ids is None else np.asarray(prompt_ids)
    if ids.shape != (len(encoded),):
      raise ValueError(f"prompt_ids: one per prompt ({len(encoded)}), got shape {ids.shape}")
    limits = np.full((len(encoded), num_samples), new, np.int32)
    if max_new_tokens is not None:
      limits = np.clip(np.asarray(max_new_tokens, np.int32).reshape(limits.shape), 1, new)
    slots, group = self.layout(len(encoded), num_samples, config)
    key_data = np.asarray(jax.random.key_data(jax.random.key(seed)))  # any Python int seed, as plain data
    device_config = _device_config(config)
    state = self._init(self._global(batch), self._global(lengths), self._global(ids.astype(np.uint32)),
                       self._global(key_data), self._global(limits.reshape(-1)), self._global(skip), num_samples,
                       slots, group, device_config, self.model.config.vocab_size)
    rows = slots * group
    results: dict[int, list[Completion | None]] = {}
    left = [num_samples] * len(encoded)
    finished_prompts, chunks = int(skip.sum()), 0
    stopped, longest = np.zeros(rows, bool), 0
    if on_chunk:
      on_chunk(0, state)
    while finished_prompts < len(encoded):
      window = new
      if config.window_bucket:
        window = min(new, -(-(longest + config.chunk_length) // config.window_bucket) * config.window_bucket)
      with jax.profiler.StepTraceAnnotation("decode_chunk", step_num=chunks + 1):
        state = self._continue(self.params, state, self._global(stopped, rows=True), num_samples, group, window,
                               device_config)
        count = int(self._to_host(state.out_count))  # waits for the chunk: its device time is in the step
      chunks += 1
      if count:
        out_sample, out_tokens, out_generated = (self._to_host(x)[:count] for x in (
            state.out_sample, state.out_tokens, state.out_generated))
        for sample, tokens, generated in zip(out_sample, out_tokens, out_generated):
          prompt, number = divmod(int(sample), num_samples)
          results.setdefault(prompt, [None] * num_samples)[number] = completion_of(
              self.vocabulary, tokens, int(generated), self.end_ids, stops[prompt])
          left[prompt] -= 1
          if not left[prompt]:
            finished_prompts += 1
            yield prompt, results.pop(prompt)
      # Host-side stop strings, once per chunk: decode each running row and look for them.
      sample, tokens, generated, done = (self._to_host(x) for x in (
          state.sample, state.tokens, state.num_generated, state.done))
      running = (sample >= 0) & ~done
      stopped = stopped_rows(self.vocabulary, tokens, generated, running,
                             [stops[s // num_samples] if s >= 0 else () for s in sample])
      longest = int(generated[running].max()) if running.any() else 0
      if on_chunk:
        on_chunk(chunks, state)
    self.last_stats = {"rows": rows, "slots": slots, "rows_per_slot": group, "chunks": chunks,
                       "decode_steps": int(self._to_host(state.steps))}

  def lower(self, num_prompts: int, prompt_width: int, num_samples: int, config: SamplingConfig
            ) -> tuple[jax.stages.Lowered, jax.stages.Lowered]:
    """The two programs `stream` runs (the state's set-up, then each chunk of decode steps), lowered
    for `num_prompts` prompts padded to `prompt_width` tokens and this sampler's parameters (which may
    be jax.ShapeDtypeStructs with shardings), without running them: for compiling ahead of time on
    another platform (tpu/preflight.py)."""
    replicated = None if self.mesh is None else NamedSharding(self.mesh, P())
    rows_split = None if self.mesh is None else NamedSharding(self.mesh, P(BATCH_AXES))
    spec = lambda shape, dtype, where=replicated: jax.ShapeDtypeStruct(shape, dtype, sharding=where)  # noqa: E731
    key_data = jax.eval_shape(lambda: jax.random.key_data(jax.random.key(0)))  # nothing runs
    slots, group = self.layout(num_prompts, num_samples, config)
    init = type(self)._init.lower(
        self, spec((num_prompts, prompt_width), jnp.int32), spec((num_prompts,), jnp.int32),
        spec((num_prompts,), jnp.uint32), spec(key_data.shape, key_data.dtype), spec((num_prompts * num_samples,),
                                                                                     jnp.int32),
        spec((num_prompts,), jnp.bool_), num_samples, slots, group, _device_config(config),
        self.model.config.vocab_size)
    compiled_init = init.compile()  # the layout of the state it makes is the compiler's choice
    state = jax.tree.map(lambda shape, where: jax.ShapeDtypeStruct(shape.shape, shape.dtype, sharding=where),
                         compiled_init.out_info, compiled_init.output_shardings)
    window = config.max_decode_length
    decode = type(self)._continue.lower(self, self.params, state, spec((slots * group,), jnp.bool_, rows_split),
                                        num_samples, group, window, _device_config(config))
    return init, decode

  def sample(self, prompts: Sequence[Prompt] | EncodedPrompts, num_samples: int, config: SamplingConfig, seed: int,
             stops: Sequence[Sequence[str]] | None = None, prompt_ids: Sequence[int] | None = None,
             max_new_tokens: np.ndarray | None = None, skip: Sequence[bool] | None = None,
             truncate: bool = False, on_chunk: Callable[[int, DecodeState], None] | None = None
             ) -> list[list[Completion]]:
    """num_samples completions for each prompt, in prompt order (see `stream`; a skipped prompt's: [])."""
    results: list[list[Completion]] = [[] for _ in range(len(prompts.ids if isinstance(prompts, EncodedPrompts)
                                                              else prompts))]
    for prompt, completions in self.stream(prompts, num_samples, config, seed, stops, prompt_ids, max_new_tokens,
                                           skip, truncate, on_chunk):
      results[prompt] = completions
    return results
