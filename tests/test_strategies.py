"""Tests for sampling/strategies.py: exact nucleus boundaries, and statistical checks of the draws.

Each statistical test draws N = 20,000 tokens in one jitted call (a batch of N identical rows, so
each row is an independent draw) with a fixed seed, and compares the counts with the expected
distribution by a chi-square goodness-of-fit test at p > 0.001. The chi-square survival function
comes from jax.scipy.special.gammaincc, since scipy is not a declared dependency.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from sampling import strategies
from sampling.strategies import nucleus_mask, sample_tokens, top_k_mask

NUM_DRAWS = 20_000
MIN_P_VALUE = 1e-3

# 12 tokens with a spread of probabilities, deliberately not in vocabulary order so that mapping the
# sorted mask back to token ids is exercised.
# Sorted: .22 .18 .14 .11 .09 .07 .06 .05 .04 .02 .01 .01
# with cumulative sums .22 .40 .54 .65 .74 .81 .87 .92 .96 .98 .99 1.0.
PROBS = np.array([0.05, 0.22, 0.01, 0.11, 0.07, 0.18, 0.02, 0.09, 0.14, 0.04, 0.06, 0.01])
LOGITS = np.log(PROBS).astype(np.float32)
SORTED_IDS = np.argsort(-PROBS, kind="stable")  # token ids, most likely first


def chi_square_sf(statistic: float, dof: int) -> float:
  """P(X >= statistic), X ~ chi-square(dof): regularized upper incomplete gamma Q(dof/2, x/2)."""
  # float32 is ample here: the tests compare against a 1e-3 threshold.
  return float(jax.scipy.special.gammaincc(dof / 2.0, statistic / 2.0))


def chi_square_p_value(tokens: np.ndarray, expected_probs: np.ndarray) -> float:
  """Goodness of fit of token counts to expected_probs over the tokens with nonzero probability."""
  counts = np.bincount(tokens, minlength=len(expected_probs))
  support = expected_probs > 0
  expected = expected_probs[support] * len(tokens)
  statistic = float(np.sum((counts[support] - expected) ** 2 / expected))
  return chi_square_sf(statistic, int(support.sum()) - 1)


@functools.partial(jax.jit, static_argnames=strategies.STATIC_ARGNAMES)
def draw(logits: jax.Array, key: jax.Array, temperature: float, top_p: float = 1.0,
         top_k: int = 0) -> jax.Array:
  """logits [V] -> NUM_DRAWS tokens, one per row of a batch of identical rows."""
  batch = jnp.broadcast_to(logits, (NUM_DRAWS, logits.shape[-1]))
  return sample_tokens(batch, key, temperature, top_p=top_p, top_k=top_k)


def renormalised(probs: np.ndarray, keep: np.ndarray) -> np.ndarray:
  kept = np.where(keep, probs, 0.0)
  return kept / kept.sum()


def kept_ids(mask: jax.Array) -> set[int]:
  return set(np.flatnonzero(np.asarray(mask)[0]).tolist())


def test_chi_square_sf_matches_known_values():
  # chi-square(1)'s 95th percentile is 3.8415; chi-square(2) has sf exp(-x/2).
  assert chi_square_sf(3.841458820694124, 1) == pytest.approx(0.05, rel=1e-5)
  assert chi_square_sf(5.0, 2) == pytest.approx(np.exp(-2.5), rel=1e-5)
  scipy_stats = pytest.importorskip("scipy.stats")
  for x, dof in [(0.5, 3), (11.0, 8), (30.0, 11)]:
    assert chi_square_sf(x, dof) == pytest.approx(scipy_stats.chi2.sf(x, dof), rel=1e-5)


def test_defaults():
  assert strategies.DEFAULT_TEMPERATURE == 0.8
  assert strategies.DEFAULT_TOP_P == 0.95
  assert strategies.DEFAULT_TOP_K == 0  # off: not t5x's greedy top-k = 1


@pytest.mark.parametrize("top_p, expected_kept", [
    (0.7, 2),   # .5 < .7 <= .8: the second token crosses p and is included
    (0.8, 2),   # .5 + .3 reaches p exactly: the nucleus stops there
    (0.81, 3),  # just past .8: the third token crosses p
    (0.5, 1),   # the top token alone reaches p exactly
    (0.3, 1),   # p below the top token's mass: top-1 is always kept
    (0.96, 4),
    (1.0, 4),   # off
])
def test_nucleus_includes_crossing_token(top_p, expected_kept):
  logits = jnp.log(jnp.array([[0.5, 0.3, 0.15, 0.05]]))
  assert kept_ids(nucleus_mask(logits, top_p)) == set(range(expected_kept))


@pytest.mark.parametrize("probs, shift, top_p, expected", [
    ([0.05, 0.3, 0.15, 0.5], 0.0, 0.8, {1, 3}),
    ([0.05, 0.3, 0.15, 0.5], -40.0, 0.8, {1, 3}),
    # Without the rounding tolerance these two keep a third token: the float32 prefix sum comes
    # out a hair below p although it is exactly p in real arithmetic.
    ([0.5, 0.3, 0.2], 3.1, 0.8, {0, 1}),
    ([0.4, 0.3, 0.3], -20.0, 0.7, {0, 1}),
])
def test_nucleus_exact_boundary_survives_float32_rounding(probs, shift, top_p, expected):
  logits = jnp.asarray(np.log(np.array(probs)) + shift, jnp.float32)[None]
  assert kept_ids(nucleus_mask(logits, top_p)) == expected


def test_nucleus_ties_broken_by_token_id():
  # Four equally likely tokens, p = 0.5: the first two in sorted order (lowest ids) are kept.
  logits = jnp.zeros((1, 4))
  assert kept_ids(nucleus_mask(logits, 0.5)) == {0, 1}
  # p mid-token at 0.6: the third tie is the crossing token and is included.
  assert kept_ids(nucleus_mask(logits, 0.6)) == {0, 1, 2}
  # top-k breaks ties the same way.
  assert kept_ids(top_k_mask(jnp.array([[1.0, 2.0, 2.0, 2.0]]), 2)) == {1, 2}


def test_nucleus_mask_is_per_row():
  logits = jnp.asarray(np.stack([LOGITS, LOGITS[::-1]]))
  mask = np.asarray(nucleus_mask(logits, 0.5))
  assert set(np.flatnonzero(mask[0])) == set(SORTED_IDS[:3].tolist())
  assert set(np.flatnonzero(mask[1])) == set((11 - SORTED_IDS[:3]).tolist())


@pytest.mark.parametrize("top_p, expected_kept", [
    (0.85, 7),   # lands mid-token: .81 < .85 < .87
    (0.95, 9),   # the default, also mid-token: .92 < .95 < .96
    (0.5, 3),    # .40 < .5 < .54
])
def test_nucleus_sampling_distribution(top_p, expected_kept):
  keep = np.asarray(nucleus_mask(jnp.asarray(LOGITS)[None], top_p))[0]
  assert set(np.flatnonzero(keep)) == set(SORTED_IDS[:expected_kept].tolist())

  # temperature 1.0 so that the nucleus is that of PROBS itself.
  tokens = np.asarray(draw(jnp.asarray(LOGITS), jax.random.key(0), 1.0, top_p=top_p))
  assert tokens.dtype == np.int32 and tokens.shape == (NUM_DRAWS,)
  assert keep[tokens].all(), "a token outside the nucleus was drawn"
  assert chi_square_p_value(tokens, renormalised(PROBS, keep)) > MIN_P_VALUE


@pytest.mark.parametrize("top_p", [1e-7, 0.3, 0.5, 0.6, 0.8, 0.85, 0.95, 1.0])
def test_the_mask_and_both_draws_keep_the_same_nucleus(top_p):
  # One keep-rule (_in_nucleus) behind nucleus_mask, the rejection test of a single token and the
  # sorted draw; rows with a spread, with ties, and with a boundary that float32 rounds (see above).
  rows = np.stack([LOGITS, np.zeros(12, np.float32),
                   np.log(np.array([0.5, 0.3, 0.2] + [1e-3] * 9)).astype(np.float32) + 3.1])
  logits = jnp.asarray(rows)
  mask = np.asarray(nucleus_mask(logits, top_p))
  probs = jax.nn.softmax(logits, axis=-1)
  for token in range(12):
    in_nucleus = strategies._token_in_nucleus(logits, probs, jnp.full((3,), token, jnp.int32), top_p)
    np.testing.assert_array_equal(np.asarray(in_nucleus), mask[:, token], err_msg=f"token {token}")
  # The sorted draw over a fine grid of uniforms reaches exactly the kept tokens of each row.
  grid = jnp.linspace(0.0, 1.0, 2001)
  order = jnp.argsort(-logits, axis=-1, stable=True)
  for row in range(3):
    repeat = lambda x: jnp.broadcast_to(x[row], (len(grid),) + x.shape[1:])
    drawn = strategies._draw_from_sorted(repeat(jnp.take_along_axis(logits, order, axis=-1)), repeat(order),
                                         repeat(jax.nn.logsumexp(logits, axis=-1, keepdims=True)), top_p, grid)
    assert set(np.asarray(drawn).tolist()) == set(np.flatnonzero(mask[row]).tolist()), f"row {row}"


def test_greedy_at_temperature_zero():
  logits = jax.random.normal(jax.random.key(1), (8, 50))
  expected = np.asarray(jnp.argmax(logits, axis=-1))
  for seed in range(3):
    tokens = sample_tokens(logits, jax.random.key(seed), 0.0, top_p=0.5, top_k=3)
    assert tokens.dtype == jnp.int32
    np.testing.assert_array_equal(np.asarray(tokens), expected)
  jitted = jax.jit(sample_tokens, static_argnames=strategies.STATIC_ARGNAMES)
  np.testing.assert_array_equal(np.asarray(jitted(logits, jax.random.key(9), temperature=0.0)),
                                expected)


def test_temperature_scales_distribution():
  tokens = np.asarray(draw(jnp.asarray(LOGITS), jax.random.key(2), 0.5))
  expected = PROBS ** (1 / 0.5) / np.sum(PROBS ** (1 / 0.5))  # softmax(log(PROBS) / 0.5)
  assert chi_square_p_value(tokens, expected) > MIN_P_VALUE
  # ...and the unscaled distribution is rejected, so the test has power.
  assert chi_square_p_value(tokens, PROBS) < MIN_P_VALUE


def test_nucleus_is_taken_after_temperature():
  logits = jnp.asarray(LOGITS)[None]
  # At T = 0.5 the distribution sharpens and the 0.85 nucleus shrinks from 7 tokens.
  sharpened = nucleus_mask(logits / 0.5, 0.85)
  assert len(kept_ids(sharpened)) < len(kept_ids(nucleus_mask(logits, 0.85))) == 7
  tokens = np.asarray(draw(jnp.asarray(LOGITS), jax.random.key(3), 0.5, top_p=0.85))
  assert np.asarray(sharpened)[0][tokens].all()


def test_top_k_keeps_exactly_k():
  logits = jax.random.normal(jax.random.key(4), (16, 100))
  for k in [1, 5, 37, 100]:
    mask = np.asarray(top_k_mask(logits, k))
    np.testing.assert_array_equal(mask.sum(axis=-1), k)
    # The kept tokens are the k largest: every kept logit >= every dropped logit.
    if k < 100:
      values = np.asarray(logits)
      smallest_kept = np.where(mask, values, np.inf).min(-1)
      assert (smallest_kept >= np.where(mask, -np.inf, values).max(-1)).all()
  assert np.asarray(top_k_mask(logits, 0)).all()  # off
  assert np.asarray(top_k_mask(logits, 1000)).all()  # k > V keeps everything


def test_top_k_sampling_distribution():
  tokens = np.asarray(draw(jnp.asarray(LOGITS), jax.random.key(5), 1.0, top_k=4))
  keep = np.isin(np.arange(12), SORTED_IDS[:4])
  assert keep[tokens].all()
  assert chi_square_p_value(tokens, renormalised(PROBS, keep)) > MIN_P_VALUE


def test_top_k_then_top_p():
  # top-5 keeps .22 .18 .14 .11 .09 (mass .74), renormalised .297 .243 .189 .149 .122 with
  # cumulative .297 .541 .730 .878: the 0.75 nucleus of that is 4 tokens. Nucleus alone would keep
  # 6 (.74 < .75), and a nucleus over the un-renormalised top-5 mass would keep all 5.
  top_k, top_p = 5, 0.75
  logits = jnp.asarray(LOGITS)[None]
  assert kept_ids(nucleus_mask(logits, top_p)) == set(SORTED_IDS[:6].tolist())
  tokens = np.asarray(draw(jnp.asarray(LOGITS), jax.random.key(6), 1.0, top_p=top_p, top_k=top_k))
  keep = np.isin(np.arange(12), SORTED_IDS[:4])
  assert keep[tokens].all()
  assert chi_square_p_value(tokens, renormalised(PROBS, keep)) > MIN_P_VALUE


def test_low_precision_logits_are_sampled_in_float32():
  logits = jnp.asarray(LOGITS, jnp.bfloat16)[None]
  tokens = sample_tokens(logits, jax.random.key(7), 0.8, top_p=0.95)
  assert tokens.dtype == jnp.int32 and tokens.shape == (1,)
  assert np.asarray(nucleus_mask(logits, 0.5)).sum() == 3


@pytest.mark.parametrize("kwargs, name", [
    (dict(temperature=-0.1), "temperature"),
    (dict(temperature=float("nan")), "temperature"),
    (dict(temperature=float("inf")), "temperature"),
    (dict(temperature=0.8, top_p=0.0), "top_p"),
    (dict(temperature=0.8, top_p=1.5), "top_p"),
    (dict(temperature=0.8, top_p=-0.2), "top_p"),
    (dict(temperature=0.8, top_k=-1), "top_k"),
    (dict(temperature=0.8, top_k=2.5), "top_k"),
])
def test_bad_arguments_raise(kwargs, name):
  logits = jnp.zeros((2, 5))
  with pytest.raises(ValueError, match=name):
    sample_tokens(logits, jax.random.key(0), **kwargs)


def test_bad_mask_arguments_raise():
  logits = jnp.zeros((2, 5))
  with pytest.raises(ValueError, match="top_p"):
    nucleus_mask(logits, 0.0)
  with pytest.raises(ValueError, match="top_k"):
    top_k_mask(logits, -3)
  with pytest.raises(ValueError, match="logits"):
    sample_tokens(jnp.zeros((5,)), jax.random.key(0), 0.8)


def _large_vocab_logits(vocab: int, scale: float, seed: int) -> np.ndarray:
  """A large vocabulary holding LOGITS' 12 tokens plus many far less likely ones, so that the
  distribution (and its nucleus) is known in closed form."""
  logits = np.full(vocab, -np.inf, np.float32)
  rest = np.random.default_rng(seed).normal(size=vocab - 12).astype(np.float32) * scale - 12.0
  logits[12:] = rest
  logits[:12] = LOGITS
  return logits


@pytest.mark.parametrize("vocab, top_p", [(5000, 0.95), (5000, 1.0), (4100, 0.5)])
def test_large_vocabulary_draws_follow_the_masked_distribution(vocab, top_p):
  # The fast paths (rejection sampling for the nucleus, the blocked inverse CDF without it; 4100 is
  # not a multiple of the block) must draw from exactly the distribution the masks define.
  logits = _large_vocab_logits(vocab, 1.0, seed=vocab)
  probs = np.exp(logits.astype(np.float64) - np.logaddexp.reduce(logits.astype(np.float64)))
  keep = np.asarray(nucleus_mask(jnp.asarray(logits)[None], top_p))[0]
  tokens = np.asarray(draw(jnp.asarray(logits), jax.random.key(11), 1.0, top_p=top_p))
  assert keep[tokens].all(), "a token outside the nucleus was drawn"
  expected = renormalised(probs, keep)
  # Pool the rare tail into one bin so every expected count is large enough for chi-square.
  common = expected * NUM_DRAWS >= 5
  counts = np.bincount(tokens, minlength=vocab)
  observed = np.append(counts[common], counts[~common].sum())
  pooled = np.append(expected[common], expected[~common].sum())
  pooled_tokens = np.repeat(np.arange(len(observed)), observed)
  assert chi_square_p_value(pooled_tokens, pooled / pooled.sum()) > MIN_P_VALUE


@pytest.mark.parametrize("top_p", [0.95, 0.002])
def test_flat_rows_draw_inside_the_nucleus(top_p):
  # Flat rows: the 0.95 nucleus holds thousands of tokens; the 0.002 nucleus a handful, which the
  # rejection rounds rarely hit, so most rows end in the sorted fallback.
  logits = jax.random.normal(jax.random.key(3), (64, 3000)) * 0.1
  keep = np.asarray(nucleus_mask(logits, top_p))
  tokens = np.asarray(jax.jit(sample_tokens, static_argnames=strategies.STATIC_ARGNAMES)(
      logits, jax.random.key(4), 1.0, top_p=top_p))
  assert keep[np.arange(64), tokens].all()
  if top_p == 0.95:
    assert keep.sum(axis=-1).min() > 1024  # thousands of tokens: a sort-based nucleus's worst case
    assert len(set(tokens.tolist())) > 50  # spread over the nucleus, not stuck on the top tokens


def test_inverse_cdf_never_draws_masked_tokens():
  # -inf logits (zero probability) at the ends of blocks and of the vocabulary are never drawn, also
  # when the uniform draw rounds up to the total mass.
  logits = np.full((4, 300), -np.inf, np.float32)
  logits[:, [0, 127, 128, 255]] = 0.0
  tokens = np.asarray(strategies._draw_from_vocabulary(jnp.asarray(logits), jnp.array([0.0, 0.5, 0.999999, 1.0])))
  assert set(tokens.tolist()) <= {0, 127, 128, 255}
  assert tokens[0] == 0 and tokens[-1] == 255


def test_retried_rows_gathered_into_a_small_batch_draw_the_nucleus_distribution():
  # 500 rows at top_p 0.9: about 50 rows are rejected in the first round, few enough (<= 64) to be
  # retried as a gathered batch. 40 batches of 500 rows: 20,000 draws from that path.
  assert strategies._RETRY_ROWS == 64
  logits = _large_vocab_logits(3000, 1.0, seed=5)
  probs = np.exp(logits.astype(np.float64) - np.logaddexp.reduce(logits.astype(np.float64)))
  keep = np.asarray(nucleus_mask(jnp.asarray(logits)[None], 0.9))[0]
  batch = jnp.broadcast_to(jnp.asarray(logits), (500, 3000))
  sample = jax.jit(lambda rows, key: sample_tokens(rows, key, 1.0, top_p=0.9))  # rows as an argument, not
  tokens = np.concatenate([np.asarray(sample(batch, jax.random.key(i))) for i in range(40)])  # a folded constant
  assert keep[tokens].all()
  expected = renormalised(probs, keep)
  common = expected * len(tokens) >= 5
  counts = np.bincount(tokens, minlength=3000)
  observed = np.append(counts[common], counts[~common].sum())
  pooled = np.append(expected[common], expected[~common].sum())
  assert chi_square_p_value(np.repeat(np.arange(len(observed)), observed), pooled / pooled.sum()) > MIN_P_VALUE
