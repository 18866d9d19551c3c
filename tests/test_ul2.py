"""The UL2 + causal-LM objective mixture (objectives/ul2/) in decoder-only form.

t5 span-corruption semantics and statistics, the prefix-LM split, the mixture's objective rates and
mode tokens, that nothing is truncated, SeqIO packing through DecoderOnlyPrefixLMConverter, seeding,
and that the model trains on a packed UL2 batch.
"""


import numpy as np
import pytest
import seqio
import tensorflow as tf

import code_corpus
from data import tasks
from objectives.ul2 import (DecoderOnlyPrefixLMConverter, SpanCorruption, UL2Config, num_noise_tokens_and_spans,
                            prefix_lm_split, random_spans_noise_mask, raw_lengths, span_corruption, ul2_objectives)
from data.vocab import MODE_TOKENS, special_token_ids

SETTINGS = ((3.0, 0.15), (32.0, 0.5))  # (mean noise span length, noise density), as in UL2Config
EXTRA_IDS = 100
SEQ = 64  # short rows: many chunks per document, fast


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
  root = str(tmp_path_factory.mktemp("ul2_corpus"))
  _, vocabulary = code_corpus.build(root, extra_ids=EXTRA_IDS)
  names = tasks.register_tasks(root, vocabulary)
  ul2_names = tasks.register_ul2_tasks(names)
  seqio.MixtureRegistry.remove("code_natural_ul2")  # a mixture over the uncached tasks, equal rates
  seqio.MixtureRegistry.add("code_natural_ul2", [(name, 1.0) for name in ul2_names])
  return vocabulary, ul2_names


@pytest.fixture(scope="module")
def special(corpus):
  vocabulary, _ = corpus
  return special_token_ids(vocabulary)


# ---- helpers --------------------------------------------------------------------------------------


def _seed(i, salt=0):
  return tf.stack([tf.cast(i, tf.int64), tf.constant(salt, tf.int64)])


def _runs(mask):
  """[(is_noise, length)] of a boolean row."""
  edges = np.flatnonzero(np.diff(mask.astype(np.int8))) + 1
  bounds = np.concatenate([[0], edges, [len(mask)]])
  return [(bool(mask[a]), int(b - a)) for a, b in zip(bounds[:-1], bounds[1:])]


def _t5_counts(length, density, mean_span):
  """t5's counts as t5 computes them (float32 tf.round: half to even)."""
  length = max(length, 2)
  noise = int(np.round(np.float32(length) * np.float32(density)))
  noise = min(max(noise, 1), length - 1)
  spans = max(int(np.round(np.float32(noise) / np.float32(mean_span))), 1)
  return noise, spans


def _reconstruct(inputs, targets, vocab_size):
  """Puts each target span back at its sentinel; checks sentinels count down from vocab_size - 1."""
  inputs, targets = list(inputs), list(targets)
  sentinel_min = vocab_size - EXTRA_IDS
  spans, current = {}, None
  order = [t for t in targets if t >= sentinel_min]
  assert order == [vocab_size - 1 - k for k in range(len(order))]
  assert targets and targets[0] == vocab_size - 1
  for t in targets:
    if t >= sentinel_min:
      current = t
      spans[current] = []
    else:
      spans[current].append(t)
  in_sentinels = [t for t in inputs if t >= sentinel_min]
  assert in_sentinels == order
  out = []
  for t in inputs:
    out.extend(spans[t] if t >= sentinel_min else [t])
  return out


def _documents(vocabulary, special, num_docs, seed=0, min_len=5, max_len=600):
  """Synthetic token documents [code] + tokens + [eod], with no special or sentinel ids inside."""
  rng = np.random.default_rng(seed)
  banned = set(special.values())
  pool = np.array([t for t in range(3, vocabulary.vocab_size - EXTRA_IDS) if t not in banned], np.int32)
  docs = []
  for _ in range(num_docs):
    body = rng.choice(pool, size=int(rng.integers(min_len, max_len)))
    docs.append(np.concatenate([[special["[code]"]], body, [special["[eod]"]]]).astype(np.int32))
  return docs


def _ul2_examples(vocabulary, special, docs, config=UL2Config(), seq=SEQ, seed=0):
  ds = tf.data.Dataset.from_generator(lambda: ({"targets": d} for d in docs),
                                      output_signature={"targets": tf.TensorSpec([None], tf.int32)})
  features = {"targets": seqio.Feature(vocabulary, add_eos=False, dtype=tf.int32)}
  mode_ids = [special[t] for t in MODE_TOKENS] if config.use_mode_tokens else ()
  with seqio.utils.map_seed_manager(seed):
    ds = ul2_objectives(ds, {"inputs": seq, "targets": seq}, features, config=config, mode_token_ids=mode_ids)
  return ds


def _as_lists(ds):
  return [{"inputs": ex["inputs"].tolist(), "targets": ex["targets"].tolist(), "objective": int(ex["objective"])}
          for ex in ds.as_numpy_iterator()]


def _raw_chunk(example, vocab_size, use_mode_tokens=True):
  objective, inputs, targets = example["objective"], example["inputs"], example["targets"]
  if objective == 3:
    return targets
  if use_mode_tokens:
    inputs = inputs[1:]
  if objective == 2:
    return inputs + targets
  return _reconstruct(inputs, targets, vocab_size)


@pytest.fixture(scope="module")
def mixture_examples(corpus, special):
  """≥ 5,000 examples of the full preprocessor at sequence length 64, with their documents."""
  vocabulary, _ = corpus
  docs = _documents(vocabulary, special, num_docs=1100, seed=1)
  examples = _as_lists(_ul2_examples(vocabulary, special, docs, seed=5))
  return docs, examples


# ---- span corruption ------------------------------------------------------------------------------


@pytest.mark.parametrize("mean_span,density", SETTINGS)
def test_noise_mask_statistics_over_2000_examples(mean_span, density):
  n, length = 2000, 512
  ds = tf.data.Dataset.range(n).map(lambda i: random_spans_noise_mask(length, density, mean_span, _seed(i, 11)))
  masks = next(ds.batch(n).as_numpy_iterator())
  assert masks.shape == (n, length)
  assert abs(masks.mean() - density) <= 0.01
  noise_spans = sum(sum(1 for noise, _ in _runs(m) if noise) for m in masks)
  assert abs(masks.sum() / noise_spans / mean_span - 1) <= 0.05
  # Distinct seeds give distinct masks.
  assert len({m.tobytes() for m in masks}) > 0.99 * n


@pytest.mark.parametrize("mean_span,density", SETTINGS)
def test_noise_mask_has_t5_counts_and_alternates_from_non_noise(mean_span, density):
  lengths = list(range(1, 301)) + [511, 512, 1000, 2047, 2048]
  ds = tf.data.Dataset.from_tensor_slices(tf.constant(lengths, tf.int32)).enumerate().map(
      lambda i, n: random_spans_noise_mask(n, density, mean_span, _seed(i, 3)))
  for length, mask in zip(lengths, ds.as_numpy_iterator()):
    assert mask.shape == (length,) and mask.dtype == bool
    if length < 2:
      continue
    noise, spans = _t5_counts(length, density, mean_span)
    runs = _runs(mask)
    assert int(mask.sum()) == noise, length
    assert [r[0] for r in runs] == [False, True] * spans, length  # non-noise first, alternating, ends in noise
    assert not mask[0]


def test_count_helper_int_and_tensor_forms_agree():
  lengths = np.arange(2, 2100)
  for mean_span, density in SETTINGS:
    noise, spans = num_noise_tokens_and_spans(tf.constant(lengths, tf.int32), density, mean_span)
    as_tensor = list(zip(noise.numpy().tolist(), spans.numpy().tolist()))
    as_int = [num_noise_tokens_and_spans(int(n), density, mean_span) for n in lengths]
    assert as_int == as_tensor


@pytest.mark.parametrize("mean_span,density", SETTINGS)
def test_span_corruption_reconstructs_the_tokens(mean_span, density):
  vocab_size, length, n = 500, 200, 500

  def example(i):
    tokens = tf.random.stateless_uniform([length], _seed(i, 1), minval=3, maxval=vocab_size - EXTRA_IDS,
                                         dtype=tf.int32)
    mask = random_spans_noise_mask(length, density, mean_span, _seed(i, 2))
    inputs, targets = span_corruption(tokens, mask, vocab_size)
    return tokens, inputs, targets, mask

  ds = tf.data.Dataset.range(n).map(example)
  for tokens, inputs, targets, mask in ds.as_numpy_iterator():
    _, spans = _t5_counts(length, density, mean_span)
    assert len(inputs) == length - mask.sum() + spans and len(targets) == mask.sum() + spans
    assert inputs[0] == tokens[0]  # the first token is never noise
    assert _reconstruct(inputs, targets, vocab_size) == tokens.tolist()


# ---- prefix LM ------------------------------------------------------------------------------------


def test_prefix_lm_split_is_uniform_over_1_to_n_minus_1():
  for n in (2, 3, 6, 17):
    tokens = tf.range(100, 100 + n)
    ds = tf.data.Dataset.range(300).map(lambda i: prefix_lm_split(tokens, _seed(i, n)))
    splits = []
    for inputs, targets in ds.as_numpy_iterator():
      assert inputs.tolist() + targets.tolist() == list(range(100, 100 + n))
      splits.append(len(inputs))
    assert set(splits) == set(range(1, n)), n
  inputs, targets = prefix_lm_split(tf.constant([7]), _seed(0))
  assert inputs.numpy().tolist() == [] and targets.numpy().tolist() == [7]


# ---- the mixture preprocessor ---------------------------------------------------------------------


def test_objective_frequencies_match_the_rates(mixture_examples):
  _, examples = mixture_examples
  assert len(examples) >= 5000
  counts = np.bincount([ex["objective"] for ex in examples], minlength=4)
  np.testing.assert_allclose(counts / counts.sum(), UL2Config().rates, atol=0.02)


def test_nothing_is_truncated_and_chunks_rejoin_the_documents(corpus, mixture_examples):
  vocabulary, _ = corpus
  docs, examples = mixture_examples
  for ex in examples:
    assert len(ex["inputs"]) + len(ex["targets"]) <= SEQ, ex
  chunks = [_raw_chunk(ex, vocabulary.vocab_size) for ex in examples]
  assert [t for c in chunks for t in c] == [t for d in docs for t in d.tolist()]
  # Every chunk lies within one document (chunk boundaries include every document boundary).
  chunk_ends = set(np.cumsum([len(c) for c in chunks]).tolist())
  assert set(np.cumsum([len(d) for d in docs]).tolist()) <= chunk_ends
  # Full-length chunks use their objective's whole budget where the raw length allows it.
  raw = raw_lengths(UL2Config(), SEQ, EXTRA_IDS)
  for objective in range(4):
    longest = max(len(c) for c, ex in zip(chunks, examples) if ex["objective"] == objective)
    assert longest == raw[objective]
  assert raw[2:] == [SEQ - 1, SEQ]


def test_mode_tokens(corpus, special, mixture_examples):
  _, examples = mixture_examples
  mode = [special[t] for t in MODE_TOKENS]
  for ex in examples:
    objective, inputs, targets = ex["objective"], ex["inputs"], ex["targets"]
    if objective == 3:
      assert inputs == []
    else:
      assert inputs[0] == mode[objective]
    assert not set(mode) & set(inputs[1:] + targets)


def test_without_mode_tokens(corpus, special):
  vocabulary, _ = corpus
  config = UL2Config(use_mode_tokens=False)
  docs = _documents(vocabulary, special, num_docs=150, seed=2)
  examples = _as_lists(_ul2_examples(vocabulary, special, docs, config=config, seed=3))
  assert {ex["objective"] for ex in examples} == {0, 1, 2, 3}
  mode = {special[t] for t in MODE_TOKENS}
  for ex in examples:
    assert not mode & set(ex["inputs"] + ex["targets"])
    assert len(ex["inputs"]) + len(ex["targets"]) <= SEQ
    # Empty inputs: causal LM, or prefix LM on a 1-token chunk (all target).
    assert (ex["inputs"] == []) == (ex["objective"] == 3 or (ex["objective"] == 2 and len(ex["inputs"] + ex["targets"]) == 1))
  chunks = [_raw_chunk(ex, vocabulary.vocab_size, use_mode_tokens=False) for ex in examples]
  assert [t for c in chunks for t in c] == [t for d in docs for t in d.tolist()]
  assert raw_lengths(config, SEQ, EXTRA_IDS)[2:] == [SEQ, SEQ]


def test_nothing_is_truncated_at_sequence_length_210(corpus, special):
  vocabulary, _ = corpus
  config = UL2Config(rates=(1.0, 0.0, 0.0, 0.0))
  docs = _documents(vocabulary, special, num_docs=4, seed=4, min_len=1000, max_len=1001)
  examples = _as_lists(_ul2_examples(vocabulary, special, docs, config=config, seq=210, seed=1))
  assert max(len(ex["inputs"]) + len(ex["targets"]) for ex in examples) <= 210


def test_one_token_denoiser_chunk_has_a_real_target(corpus, special):
  vocabulary, _ = corpus
  config = UL2Config(rates=(0.5, 0.5, 0.0, 0.0))
  raw = raw_lengths(config, SEQ, EXTRA_IDS)
  docs = [np.arange(10, 10 + n, dtype=np.int32) for n in (1, raw[0] + 1, raw[1] + 1)]
  examples = _as_lists(_ul2_examples(vocabulary, special, docs, config=config, seed=2))
  for ex in examples:
    assert any(t < vocabulary.vocab_size - EXTRA_IDS for t in ex["targets"]), ex


# ---- packing --------------------------------------------------------------------------------------


def _pack(examples_ds, seq=SEQ):
  converter = DecoderOnlyPrefixLMConverter(pack=True)
  return converter(examples_ds, {"inputs": seq, "targets": seq})


def test_packed_rows_mask_inputs_and_mark_prefix_attention(corpus, special):
  vocabulary, _ = corpus
  docs = _documents(vocabulary, special, num_docs=60, seed=6)
  ds = _ul2_examples(vocabulary, special, docs, seed=7)
  examples = _as_lists(ds)
  rows = list(_pack(ds).as_numpy_iterator())
  assert DecoderOnlyPrefixLMConverter(pack=True).get_model_feature_lengths(
      {"inputs": SEQ, "targets": SEQ})["decoder_target_tokens"] == SEQ
  segments = []
  for row in rows:
    for key in ("decoder_target_tokens", "decoder_input_tokens", "decoder_loss_weights", "decoder_causal_attention",
                "decoder_segment_ids", "decoder_positions"):
      assert row[key].shape == (SEQ,), key  # rows of L, not 2L
    seg = row["decoder_segment_ids"]
    pad = seg == 0
    assert pad.sum() == 0 or pad[np.argmax(pad):].all()  # padding only at the end
    for key in ("decoder_target_tokens", "decoder_loss_weights", "decoder_causal_attention"):
      assert not row[key][pad].any(), key
    ids = [s for s in np.unique(seg) if s]
    assert ids == list(range(1, len(ids) + 1))
    for s in ids:
      where = np.flatnonzero(seg == s)
      assert (np.diff(where) == 1).all()
      assert row["decoder_positions"][where].tolist() == list(range(len(where)))  # restart per example
      segments.append({k: row[k][where].tolist() for k in row})
  assert len(segments) == len(examples)
  for ex, got in zip(examples, segments):  # packing keeps the order of examples
    n_in, n_tg = len(ex["inputs"]), len(ex["targets"])
    assert got["decoder_target_tokens"] == ex["inputs"] + ex["targets"]
    assert got["decoder_input_tokens"] == [0] + got["decoder_target_tokens"][:-1]
    # No loss on inputs (mode token included), loss on every target token.
    assert got["decoder_loss_weights"] == [0] * n_in + [1] * n_tg
    # SeqIO's PrefixLMFeatureConverter: bidirectional over the inputs plus one position.
    assert got["decoder_causal_attention"] == [1] * (n_in + 1) + [0] * (n_tg - 1)


def test_same_seed_same_batches_different_seed_different(corpus):
  _, ul2_names = corpus

  def batches(name, seed, shuffle=False):
    ds = seqio.get_dataset(name, {"inputs": SEQ, "targets": SEQ}, DecoderOnlyPrefixLMConverter(pack=True),
                           dataset_split="train", shuffle=shuffle, seed=seed, batch_size=4, verbose=False)
    return [{k: v.tolist() for k, v in b.items()} for b in ds.take(6).as_numpy_iterator()]

  for name in ("code_python_ul2", "code_natural_ul2"):
    first = batches(name, 17)
    assert len(first) == 6 and all(len(row) == SEQ for b in first for row in b["decoder_target_tokens"])
    assert first == batches(name, 17)
    assert first != batches(name, 18)
  assert batches("code_go_ul2", 3, shuffle=True) == batches("code_go_ul2", 3, shuffle=True)


def test_model_trains_on_a_packed_ul2_batch(corpus, special):
  import flax.linen as nn
  import jax
  import jax.numpy as jnp

  from model.config import get_config
  from model.transformer import Decoder, init_params
  from training.step import loss_and_grads

  vocabulary, _ = corpus
  docs = _documents(vocabulary, special, num_docs=20, seed=8)
  ds = _pack(_ul2_examples(vocabulary, special, docs, seed=9)).batch(4)
  batch = {k: jnp.asarray(v, jnp.int32) for k, v in next(ds.as_numpy_iterator()).items()}
  assert batch["decoder_target_tokens"].shape == (4, SEQ)
  model = Decoder(get_config("tiny", vocab_size=vocabulary.vocab_size))
  params = nn.unbox(init_params(model, jax.random.PRNGKey(0)))
  loss, sums, grads = loss_and_grads(model, params, batch, z_loss=1e-4)
  assert np.isfinite(float(loss)) and float(loss) > 0
  assert float(sums.weight) == float(batch["decoder_loss_weights"].sum())
  assert all(bool(jnp.isfinite(g).all()) for g in jax.tree_util.tree_leaves(grads))


# ---- configuration errors -------------------------------------------------------------------------


def test_config_rejects_bad_rates():
  with pytest.raises(ValueError, match="sum to 1"):
    UL2Config(rates=(0.1, 0.1, 0.2, 0.5))
  with pytest.raises(ValueError, match="one rate per denoiser"):
    UL2Config(rates=(0.5, 0.5))
  with pytest.raises(ValueError, match="one rate per denoiser"):
    UL2Config(denoisers=(SpanCorruption(3.0, 0.15),), rates=(0.1, 0.1, 0.2, 0.6))
  with pytest.raises(ValueError):
    UL2Config(rates=(-0.1, 0.3, 0.2, 0.6))
  assert UL2Config().names == ("span_corruption_3_0.15", "span_corruption_32_0.5", "prefix_lm", "causal_lm")


def test_raw_lengths_raises_when_sentinels_run_out():
  with pytest.raises(ValueError, match="sentinels"):
    raw_lengths(UL2Config(), 2048, num_sentinels=10)
  raw = raw_lengths(UL2Config(), 2048, num_sentinels=EXTRA_IDS)
  assert raw[2:] == [2047, 2048]
  for n, (mean_span, density) in zip(raw, SETTINGS):
    _, spans = _t5_counts(n, density, mean_span)
    assert n + 2 * spans + 1 <= 2048 < (n + 1) + 2 * _t5_counts(n + 1, density, mean_span)[1] + 1


def test_ul2_objectives_needs_the_mode_token_ids(corpus):
  vocabulary, _ = corpus
  ds = tf.data.Dataset.from_tensors({"targets": tf.range(3, 40)})
  features = {"targets": seqio.Feature(vocabulary, add_eos=False, dtype=tf.int32)}
  with pytest.raises(ValueError, match="mode token ids"):
    ul2_objectives(ds, {"targets": SEQ}, features, mode_token_ids=(1, 2))
