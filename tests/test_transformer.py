"""The decoder's contracts: cached decoding, packing isolation, prefix-LM masking, parameters."""

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from model.config import RematPolicy, get_config
from model.decoding import decode_step, prefill
from model.transformer import Decoder, init_cache
from model.transformer import init_params

CFG = get_config("tiny")


@pytest.fixture(scope="module")
def model_and_params():
  model = Decoder(CFG)
  return model, nn.unbox(init_params(model, jax.random.key(0)))


@jax.jit
def _logits(params, tokens, features):
  return Decoder(CFG).apply({"params": params}, tokens, **features)[0]


def forward(model, params, tokens, **features):
  assert model.config == CFG
  tokens = jnp.asarray(tokens)[None] if np.ndim(tokens) == 1 else jnp.asarray(tokens)
  return _logits(params, tokens, {k: jnp.asarray(v) for k, v in features.items()})


def test_every_parameter_has_logical_axes():
  boxed = jax.eval_shape(lambda: init_params(Decoder(CFG), jax.random.key(0)))
  leaves = jax.tree.leaves(boxed, is_leaf=lambda x: isinstance(x, nn.LogicallyPartitioned))
  assert leaves and all(isinstance(x, nn.LogicallyPartitioned) for x in leaves)
  for leaf in leaves:
    assert len(leaf.names) == leaf.value.ndim and all(isinstance(n, str) for n in leaf.names)


def test_param_count_matches_analytic_formula():
  boxed = jax.eval_shape(lambda: init_params(Decoder(CFG), jax.random.key(0)))
  assert sum(x.size for x in jax.tree.leaves(nn.unbox(boxed))) == CFG.num_params


def test_palm_initialisation(model_and_params):
  _, params = model_and_params
  assert abs(float(jnp.std(params["embedding"])) - 1.0) < 0.02  # embeddings N(0, 1)
  gate = params["layers"]["mlp"]["gate"]  # [L, D, F]: fan-in D
  assert abs(float(jnp.std(gate)) * np.sqrt(CFG.d_model) - 1.0) < 0.05
  out = params["layers"]["attention"]["out"]  # [L, H, K, D]: fan-in H*K
  assert abs(float(jnp.std(out)) * np.sqrt(CFG.num_heads * CFG.head_dim) - 1.0) < 0.05


def test_cached_decoding_equals_full_forward(model_and_params):
  model, params = model_and_params
  rng = np.random.default_rng(0)
  lengths = np.array([5, 9, 12])
  steps = 16
  rows = [rng.integers(3, CFG.vocab_size, size=n + steps) for n in lengths]
  prompts = np.zeros((3, lengths.max()), np.int32)
  for b, n in enumerate(lengths):
    prompts[b, :n] = rows[b][:n]

  cache = init_cache(CFG, batch_size=3, max_length=32)
  last, cache = jax.jit(lambda p, c: prefill(model, params, p, jnp.asarray(lengths), c))(prompts, cache)
  step = jax.jit(lambda t, pos, c: decode_step(model, params, t, pos, c))
  cached = [np.asarray(last)]
  for i in range(steps):
    tokens = np.array([rows[b][lengths[b] + i] for b in range(3)], np.int32)
    logits, cache = step(tokens, jnp.asarray(lengths + i), cache)
    cached.append(np.asarray(logits))
  cached = np.stack(cached, axis=1)  # [B, steps + 1, V]

  for b, n in enumerate(lengths):
    full = np.asarray(forward(model, params, rows[b]))[0]  # [n + steps, V]
    np.testing.assert_allclose(cached[b, :steps], full[n - 1:n - 1 + steps], atol=1e-4, rtol=0)


def test_decoding_over_a_shared_prompt_cache_equals_full_forward(model_and_params):
  # Two prompt slots of two rows each; the rows of a slot share one copy of its prompt's keys and
  # values and have generated different numbers of tokens; attention reads an 8-slot window of the
  # 16 allocated suffix slots.
  from model.decoding import prefill_slots
  from model.transformer import init_prefix_shared_cache

  model, params = model_and_params
  rng = np.random.default_rng(2)
  prompt_lengths, generated = [5, 9], [[0, 3], [6, 1]]  # per slot; per row: tokens already generated
  cache = init_prefix_shared_cache(CFG, slots=2, prefix_length=12, rows=4, suffix_length=16)
  prompts = [rng.integers(3, CFG.vocab_size, n) for n in prompt_lengths]
  suffixes = [[rng.integers(3, CFG.vocab_size, g + 1) for g in row] for row in generated]
  padded = np.zeros((2, 12), np.int32)
  for slot, prompt in enumerate(prompts):
    padded[slot, :len(prompt)] = prompt
  # Slot 1's prompt first, then slot 0's: a slot is filled wherever it sits.
  for slot in (1, 0):
    _, cache = prefill_slots(model, params, jnp.asarray(padded[slot:slot + 1]), jnp.asarray(prompt_lengths[slot:slot + 1]),
                             jnp.asarray([slot]), cache)
  step = jax.jit(lambda t, pos, c: decode_step(model, params, t, pos, c))
  # Feed each row's suffix token by token (rows that are done re-feed their last token harmlessly).
  for i in range(max(g for row in generated for g in row) + 1):
    tokens, positions, index = [], [], []
    for slot in range(2):
      for row in range(2):
        j = min(i, generated[slot][row])
        tokens.append(suffixes[slot][row][j])
        positions.append(prompt_lengths[slot] + j)
        index.append(j)
    cache = cache.replace(suffix_index=jnp.asarray(index, jnp.int32), window=8)
    logits, cache = step(jnp.asarray(tokens, jnp.int32), jnp.asarray(positions, jnp.int32), cache)
    cache = cache.replace(window=0)
  for slot in range(2):
    for row in range(2):
      full = np.asarray(forward(model, params, np.concatenate([prompts[slot], suffixes[slot][row]])))[0, -1]
      np.testing.assert_allclose(np.asarray(logits)[2 * slot + row], full, atol=1e-4, rtol=0)


def test_packed_documents_do_not_see_each_other(model_and_params):
  model, params = model_and_params
  rng = np.random.default_rng(1)
  doc_a, doc_b = rng.integers(3, CFG.vocab_size, 10), rng.integers(3, CFG.vocab_size, 14)
  pad = 6
  tokens = np.concatenate([doc_a, doc_b, np.zeros(pad, np.int64)])[None]
  segments = np.array([[1] * 10 + [2] * 14 + [0] * pad])
  positions = np.array([list(range(10)) + list(range(14)) + list(range(pad))])
  packed = np.asarray(forward(model, params, tokens, positions=positions, segment_ids=segments))[0]
  alone_a = np.asarray(forward(model, params, doc_a))[0]
  alone_b = np.asarray(forward(model, params, doc_b))[0]
  np.testing.assert_allclose(packed[:10], alone_a, atol=1e-5)
  np.testing.assert_allclose(packed[10:24], alone_b, atol=1e-5)


def _changed_positions(model, params, tokens, position, **features):
  """Which output positions change when the token at `position` changes."""
  other = tokens.copy()
  other[position] = (tokens[position] + 1) % CFG.vocab_size
  a = np.asarray(forward(model, params, tokens, **features))[0]
  b = np.asarray(forward(model, params, other, **features))[0]
  return np.abs(a - b).max(axis=-1) > 1e-6


def test_prefix_lm_attends_bidirectionally_over_the_prefix_only(model_and_params):
  model, params = model_and_params
  length, prefix = 16, 6
  tokens = np.random.default_rng(2).integers(3, CFG.vocab_size, length)
  causal_attention = np.array([[1] * prefix + [0] * (length - prefix)])
  changed = _changed_positions(model, params, tokens, prefix - 1, causal_attention=causal_attention)
  assert changed[:prefix - 1].all(), "a later prefix token must influence earlier prefix outputs"
  for position in range(length):
    changed = _changed_positions(model, params, tokens, position, causal_attention=causal_attention)
    earlier_targets = [i for i in range(prefix, position)]
    assert not changed[earlier_targets].any(), f"token {position} leaked into earlier targets"
    assert changed[max(position, prefix - 1):].all()


def test_without_causal_attention_the_model_is_strictly_causal(model_and_params):
  model, params = model_and_params
  tokens = np.random.default_rng(3).integers(3, CFG.vocab_size, 12)
  for position in range(12):
    changed = _changed_positions(model, params, tokens, position)
    assert not changed[:position].any() and changed[position:].all()


@pytest.mark.parametrize("policy", [RematPolicy.DOTS, RematPolicy.FULL])
def test_remat_policies_change_memory_not_results(model_and_params, policy):
  model, params = model_and_params
  tokens = np.random.default_rng(4).integers(3, CFG.vocab_size, (2, 16))

  def loss(m):
    return jax.grad(lambda p: jnp.mean(m.apply({"params": p}, tokens)[0] ** 2))(params)

  reference = loss(model)
  rematted = loss(Decoder(CFG.replace(remat=policy)))
  for a, b in zip(jax.tree.leaves(reference), jax.tree.leaves(rematted)):
    np.testing.assert_allclose(a, b, atol=1e-6, rtol=1e-5)


def test_bf16_compute_keeps_f32_params_and_f32_logits():
  cfg = CFG.replace(dtype="bfloat16")
  model = Decoder(cfg)
  params = nn.unbox(init_params(model, jax.random.key(0)))
  assert all(x.dtype == jnp.float32 for x in jax.tree.leaves(params))
  logits, _ = model.apply({"params": params}, jnp.ones((1, 8), jnp.int32))
  assert logits.dtype == jnp.float32 and bool(jnp.isfinite(logits).all())
  cache = init_cache(cfg, 1, 16)
  assert len(cache["k"]) == len(cache["v"]) == cfg.num_layers
  assert all(c.dtype == jnp.bfloat16 and c.shape == (1, 16, cfg.head_dim) for c in cache["k"] + cache["v"])
