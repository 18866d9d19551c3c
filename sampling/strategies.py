"""Sampling strategies: next-token logits [B, V] in, tokens [B] out.

Small pure functions, in the style of Gemma's pluggable sampler strategies: the configuration
(temperature, top_p, top_k) is static Python numbers known at trace time, and nothing branches in
Python on a traced value, so `jax.jit(sample_tokens, static_argnames=STATIC_ARGNAMES)` compiles one
program per configuration.

Order of operations in `sample_tokens`, all in float32:
  1. temperature == 0 -> greedy argmax (no randomness, top-k / top-p ignored);
  2. logits / temperature;
  3. top-k (k = 0 is off): keep the k most likely tokens;
  4. top-p (1.0 is off): nucleus sampling (Holtzman et al. 2019, "The Curious Case of Neural Text
     Degeneration", §3.1) over the distribution left by steps 2-3, renormalised;
  5. one categorical draw per row.

Defaults are T 0.8, top-p 0.95, top-k off. Unlike t5x's temperature_sample (whose top-k defaults to
1, i.e. silently greedy, and which refuses top-k with top-p; shared/REFERENCE.md, "Traps"), top-k
and top-p may be combined.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

DEFAULT_TEMPERATURE = 0.8
DEFAULT_TOP_P = 0.95
DEFAULT_TOP_K = 0  # 0 = off.

# The arguments of `sample_tokens` that must be static under jax.jit.
STATIC_ARGNAMES = ("temperature", "top_p", "top_k")

# A prefix of the sorted distribution whose float32 sum is within this of top_p counts as having
# reached it. Without it, probabilities such as [0.5, 0.3, ...] with top_p = 0.8 would keep 2 or 3
# tokens depending on how softmax happens to round (0.5 + 0.3 may come out as 0.79999995). The mass
# this can move is at most ~1e-6, far below any sampling effect.
_TOP_P_ROUNDING_TOLERANCE = 1e-6
_BLOCK = 128  # tokens per block of the two-level inverse CDF
_MAX_REJECTION_ROUNDS = 32  # then the exact sort, for the rows still unsettled
_RETRY_ROWS = 64  # rows gathered for the rejection rounds after the first


def _check_logits(logits: jax.Array) -> None:
  if logits.ndim != 2:
    raise ValueError(f"logits must be [batch, vocab], got shape {logits.shape}")


def _check_temperature(temperature: float) -> None:
  # `not temperature >= 0` also rejects NaN.
  if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or not (
      temperature >= 0 and math.isfinite(temperature)):
    raise ValueError(f"temperature must be a finite Python number >= 0, got {temperature!r}")


def _check_top_p(top_p: float) -> None:
  if isinstance(top_p, bool) or not isinstance(top_p, (int, float)) or not 0 < top_p <= 1:
    raise ValueError(f"top_p must be a Python number in (0, 1], got {top_p!r}")


def _check_top_k(top_k: int) -> None:
  if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 0:
    raise ValueError(f"top_k must be a Python int >= 0 (0 = off), got {top_k!r}")


def _scatter_to_vocab(order: jax.Array, values: jax.Array, vocab: int) -> jax.Array:
  """order [B, n] token ids, values [B, n] bool -> [B, V] bool, False where order has no entry."""
  rows = jnp.arange(order.shape[0])[:, None]
  return jnp.zeros((order.shape[0], vocab), dtype=bool).at[rows, order].set(values)


def top_k_mask(logits: jax.Array, k: int) -> jax.Array:
  """logits [B, V] -> bool [B, V]: True for the k most likely tokens of each row.

  Exactly min(k, V) tokens are kept per row: among tied logits the lower token id wins (the order
  `jax.lax.top_k` returns). k = 0 means off: everything is kept.
  """
  _check_logits(logits)
  _check_top_k(k)
  vocab = logits.shape[-1]
  if k == 0 or k >= vocab:
    return jnp.ones(logits.shape, dtype=bool)
  _, order = jax.lax.top_k(logits.astype(jnp.float32), k)  # [B, k]
  return _scatter_to_vocab(order, jnp.ones(order.shape, dtype=bool), vocab)


def _in_nucleus(mass_before: jax.Array, is_top: jax.Array, top_p: float) -> jax.Array:
  """The nucleus keep-rule, the one place it is written (nucleus_mask and both draws use it).

  mass_before: the probability mass of the tokens ranked before a token (descending probability,
  ties by lower id); is_top: the token is ranked first. Kept iff that mass is still below top_p, so
  the token whose addition crosses top_p is included; the top token always is. A mass within
  _TOP_P_ROUNDING_TOLERANCE of top_p counts as having reached it. top_p = 1.0 keeps everything: not
  just an optimisation, since a cumulative sum that rounds to 1.0 early would drop tail tokens.
  """
  if top_p == 1.0:
    return jnp.ones(jnp.broadcast_shapes(mass_before.shape, is_top.shape), dtype=bool)
  return is_top | (mass_before < top_p - _TOP_P_ROUNDING_TOLERANCE)


def nucleus_mask(logits: jax.Array, top_p: float) -> jax.Array:
  """logits [B, V] -> bool [B, V]: True for the tokens in each row's top-p nucleus.

  The nucleus is the smallest set of most likely tokens whose cumulative probability reaches top_p
  (Holtzman et al.): with tokens sorted by descending probability, token i is kept iff the mass of
  the tokens before it is still below top_p, so the token whose addition crosses top_p is included.
  The top-1 token is always kept. Probabilities are softmax(logits) in float32, so tokens already
  set to -inf (e.g. by top-k) have zero mass and the nucleus is taken over the renormalised rest.

  Boundaries:
    - a prefix that reaches top_p exactly stops the nucleus there: probabilities
      [0.5, 0.3, 0.15, 0.05] with top_p = 0.8 keep 2 tokens, also when the float32 prefix sum
      rounds a hair below 0.8 (a 1e-6 tolerance, `_TOP_P_ROUNDING_TOLERANCE`);
    - ties are broken by sorted order, which is stable: among equally likely tokens the lower token
      id comes first, so at the boundary the lower ids are kept and the higher ones dropped.
  top_p = 1.0 means off: everything is kept.
  """
  _check_logits(logits)
  _check_top_p(top_p)
  logits = logits.astype(jnp.float32)
  order = jnp.argsort(-logits, axis=-1, stable=True)  # [B, V], most likely first
  sorted_probs = jax.nn.softmax(jnp.take_along_axis(logits, order, axis=-1), axis=-1)
  mass_before = jnp.cumsum(sorted_probs, axis=-1) - sorted_probs  # exclusive cumsum, [B, V]
  keep_sorted = _in_nucleus(mass_before, jnp.arange(logits.shape[-1]) == 0, top_p)
  return _scatter_to_vocab(order, keep_sorted, logits.shape[-1])


def _draw_from_sorted(sorted_logits: jax.Array, ids: jax.Array, log_z: jax.Array, top_p: float,
                      uniform: jax.Array) -> jax.Array:
  """One draw per row from the top_p nucleus of candidates sorted by descending logit.

  sorted_logits, ids [B, n]: candidates and their token ids; log_z [B, 1]: the log-normaliser of the
  distribution they come from (over the whole vocabulary, or over the top-k when top-k is on). The
  nucleus rule is _in_nucleus; the draw is by inverse CDF: the first kept candidate whose
  cumulative probability exceeds uniform x (the nucleus's mass), which samples the renormalised
  nucleus exactly and costs one cumulative sum, where a Gumbel draw over the vocabulary costs two
  logarithms per token.
  """
  probs = jnp.exp(sorted_logits - log_z)
  reached = jnp.cumsum(probs, axis=-1)
  first = jnp.arange(probs.shape[-1]) == 0
  keep = _in_nucleus(reached - probs, first, top_p) & ((probs > 0) | first)  # never a zero-probability tail
  mass = jnp.max(jnp.where(keep, reached, 0.0), axis=-1, keepdims=True)
  index = jnp.sum(keep & (reached <= uniform[:, None] * mass), axis=-1)
  index = jnp.minimum(index, jnp.sum(keep, axis=-1) - 1)  # u x mass can round up to the mass itself
  return jnp.take_along_axis(ids, index[:, None], axis=-1)[:, 0].astype(jnp.int32)


def _block_masses(probs: jax.Array, block: int) -> tuple[jax.Array, jax.Array]:
  """probs [B, V] -> (probs [B, V / block, block] zero-padded, mass of each block [B, V / block])."""
  batch, vocab = probs.shape
  blocks = jnp.pad(probs, ((0, 0), (0, -vocab % block))).reshape(batch, -1, block)
  return blocks, blocks.sum(axis=-1)


def _inverse_cdf(blocks: jax.Array, block_mass: jax.Array, uniform: jax.Array) -> jax.Array:
  """One draw per row from probabilities laid out as _block_masses gives them, by a two-level inverse
  CDF: the block holding uniform x total mass, then the token inside it. No sort and no
  vocabulary-sized cumulative sum (slow on CPU); zero-probability tokens are never drawn."""
  block = blocks.shape[-1]
  reached = jnp.cumsum(block_mass, axis=-1)
  target = uniform * reached[:, -1]
  chosen = jnp.sum(reached <= target[:, None], axis=-1)
  last_nonempty = block_mass.shape[-1] - 1 - jnp.argmax((block_mass > 0)[:, ::-1], axis=-1)
  chosen = jnp.minimum(chosen, last_nonempty)  # uniform x total can round up to the total itself
  inside = jnp.take_along_axis(blocks, chosen[:, None, None], axis=1)[:, 0]  # [B, block]
  before = jnp.take_along_axis(reached - block_mass, chosen[:, None], axis=-1)[:, 0]
  within = jnp.sum(jnp.cumsum(inside, axis=-1) <= (target - before)[:, None], axis=-1)
  last_positive = block - 1 - jnp.argmax((inside > 0)[:, ::-1], axis=-1)
  return (chosen * block + jnp.minimum(within, last_positive)).astype(jnp.int32)


def _draw_from_vocabulary(logits: jax.Array, uniform: jax.Array, block: int = _BLOCK) -> jax.Array:
  """One draw per row from softmax(logits) [B, V] (see _inverse_cdf)."""
  probs = jnp.exp(logits - jax.nn.logsumexp(logits, axis=-1, keepdims=True))
  return _inverse_cdf(*_block_masses(probs, block), uniform)


def _token_in_nucleus(logits: jax.Array, probs: jax.Array, tokens: jax.Array, top_p: float) -> jax.Array:
  """[B] bool: is each row's token in its top_p nucleus? _in_nucleus for one token, without a sort:
  the tokens ranked before it are those with a larger logit, or an equal logit and a lower id."""
  mine = jnp.take_along_axis(logits, tokens[:, None], axis=-1)
  before = (logits > mine) | ((logits == mine) & (jnp.arange(logits.shape[-1]) < tokens[:, None]))
  return _in_nucleus(jnp.sum(jnp.where(before, probs, 0.0), axis=-1), ~jnp.any(before, axis=-1), top_p)


def _uniform(key: jax.Array, rows: int, round_: int | jax.Array | None = None) -> jax.Array:
  """[rows] uniforms from one key, or one uniform per row from per-row keys [rows] (then a row's draw
  depends on its own key only, not on which other rows share the batch). `round_` folds in a retry."""
  if key.ndim == 0:
    return jax.random.uniform(key if round_ is None else jax.random.fold_in(key, round_), (rows,))
  fold = (lambda k: k) if round_ is None else (lambda k: jax.random.fold_in(k, round_))
  return jax.vmap(lambda k: jax.random.uniform(fold(k), ()))(key)


def _rejection_rounds(logits: jax.Array, probs: jax.Array, blocks: jax.Array, block_mass: jax.Array,
                      key: jax.Array, top_p: float, tokens: jax.Array, accepted: jax.Array, first_round: int,
                      last_round: int) -> tuple[jax.Array, jax.Array]:
  """Draw again (rounds first_round..last_round-1) for the rows not yet `accepted`, until all are."""
  rows = logits.shape[0]

  def unsettled(carry):
    _, accepted, round_ = carry
    return ~jnp.all(accepted) & (round_ < last_round)

  def draw_again(carry):
    tokens, accepted, round_ = carry
    draw = _inverse_cdf(blocks, block_mass, _uniform(key, rows, round_))
    take = ~accepted & _token_in_nucleus(logits, probs, draw, top_p)
    return jnp.where(take, draw, tokens), accepted | take, round_ + 1

  tokens, accepted, _ = jax.lax.while_loop(unsettled, draw_again, (tokens, accepted, jnp.int32(first_round)))
  return tokens, accepted


def _draw_from_nucleus(logits: jax.Array, key: jax.Array, top_p: float) -> jax.Array:
  """One draw per row from the renormalised top_p nucleus of softmax(logits) [B, V], by rejection:
  draw from the whole distribution and keep the draw if it lies in the nucleus, else draw again.

  Accepted draws follow the nucleus distribution exactly, and each draw is accepted with probability
  at least top_p (the nucleus's mass), so a few rounds settle every row; each round costs two passes
  over the vocabulary where finding the nucleus itself needs a sort (or ~32 bisection passes). After
  the first round the few rows left (about 1 - top_p of them) are gathered into a batch of
  _RETRY_ROWS, so later rounds cost little. Rows still unsettled after _MAX_REJECTION_ROUNDS
  (vanishingly rare for top_p near 1; possible for small top_p) are drawn from the sorted distribution.
  """
  log_z = jax.nn.logsumexp(logits, axis=-1, keepdims=True)
  probs = jnp.exp(logits - log_z)
  blocks, block_mass = _block_masses(probs, _BLOCK)
  rows = logits.shape[0]
  nothing = (jnp.zeros((rows,), jnp.int32), jnp.zeros((rows,), bool))
  tokens, accepted = _rejection_rounds(logits, probs, blocks, block_mass, key, top_p, *nothing, 0, 1)

  def retry_all():
    return _rejection_rounds(logits, probs, blocks, block_mass, key, top_p, tokens, accepted, 1,
                             _MAX_REJECTION_ROUNDS)

  def retry_few():
    index = jax.lax.top_k((~accepted).astype(jnp.int32), _RETRY_ROWS)[1]  # the unsettled rows, then others
    row_keys = key if key.ndim == 0 else key[index]
    retried = _rejection_rounds(logits[index], probs[index], blocks[index], block_mass[index], row_keys, top_p,
                                tokens[index], accepted[index], 1, _MAX_REJECTION_ROUNDS)
    return tokens.at[index].set(retried[0]), accepted.at[index].set(retried[1])

  if rows > _RETRY_ROWS:
    tokens, accepted = jax.lax.cond(jnp.sum(~accepted) <= _RETRY_ROWS, retry_few, retry_all)
  else:
    tokens, accepted = retry_all()

  def by_sort():
    order = jnp.argsort(-logits, axis=-1, stable=True)
    uniform = _uniform(key, rows, _MAX_REJECTION_ROUNDS)
    return _draw_from_sorted(jnp.take_along_axis(logits, order, axis=-1), order, log_z, top_p, uniform)

  return jax.lax.cond(jnp.all(accepted), lambda: tokens, lambda: jnp.where(accepted, tokens, by_sort()))


def sample_tokens(logits: jax.Array, key: jax.Array, temperature: float,
                  top_p: float = 1.0, top_k: int = 0) -> jax.Array:
  """logits [B, V] (any float dtype), key a PRNG key or one per row ([B]) -> tokens [B] int32.

  temperature == 0 is greedy (argmax; key, top_p and top_k unused). Otherwise the float32 logits are
  divided by temperature, restricted to the top_k most likely tokens (0 = off), then to the top_p
  nucleus of that renormalised distribution (1.0 = off), and one token is drawn per row: the
  distribution is exactly that of masking with top_k_mask and nucleus_mask and drawing from the
  softmax of what is left. Rows are independent draws from the one key; with per-row keys a row's
  token depends only on its logits and its key (the sampler relies on it to make samples independent of
  scheduling). temperature, top_p and
  top_k must be static under jit (`STATIC_ARGNAMES`).
  """
  _check_logits(logits)
  _check_temperature(temperature)
  _check_top_p(top_p)
  _check_top_k(top_k)
  logits = logits.astype(jnp.float32)
  if temperature == 0:
    return jnp.argmax(logits, axis=-1).astype(jnp.int32)
  logits = logits / temperature
  uniform = lambda: _uniform(key, logits.shape[0])
  vocab = logits.shape[-1]
  if 0 < top_k < vocab:
    # The top-k candidates, renormalised among themselves, then their nucleus.
    top_logits, top_ids = jax.lax.top_k(logits, top_k)
    return _draw_from_sorted(top_logits, top_ids, jax.nn.logsumexp(top_logits, axis=-1, keepdims=True),
                             top_p, uniform())
  if top_p == 1.0:
    return _draw_from_vocabulary(logits, uniform())
  return _draw_from_nucleus(logits, key, top_p)
