"""The paper's objective (Appendix D): a UL2 variant plus causal LM, in decoder-only (prefix-LM) form.

| objective                                   | rate | mode token |
| span corruption, mean span 3, density 0.15  | 10%  | [NLU]      |
| span corruption, mean span 32, density 0.5  | 10%  | [NLG]      |
| prefix LM (uniform random split)            | 20%  | [S2S]      |
| causal LM (prefix LM with an empty prefix)  | 60%  | none       |

Beyond the paper, `fim_rate` turns that share of the causal-LM examples into fill-in-the-middle
examples (objectives/fim.py; half of them SPM by default): their own objective in the draw, so that
their chunks leave room for the FIM sentinels. The default (0) is the paper's mixture, draw for draw.

Causal LM gets no mode token: its inputs are empty, and it is exactly how the model is used at
sampling time (a prompt continued left to right), so nothing should precede the code. Every function
here is TensorFlow graph code (no py_function), randomness is stateless and seeded per example by
SeqIO, so the same seed gives the same batches.

Each document ([code] + tokens + [eod]) is cut into consecutive raw chunks; each chunk draws its
objective first and takes the raw length that lets that objective's (inputs, targets) fit the
sequence length once concatenated (as t5's random_spans_helper does): nothing is truncated.

`python -m objectives.ul2` (__main__.py) prints one example of each objective from a corpus.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Mapping, Sequence

import numpy as np
import seqio
import tensorflow as tf

from objectives import fim
from objectives.chunking import Chunking
from objectives.fim import FIM_RESERVE


@dataclasses.dataclass(frozen=True)
class SpanCorruption:
  mean_noise_span_length: float
  noise_density: float


@dataclasses.dataclass(frozen=True)
class UL2Config:
  """The objective mixture; the rates follow `objectives` (two denoisers, prefix LM, causal LM)."""

  denoisers: tuple[SpanCorruption, ...] = (SpanCorruption(3.0, 0.15), SpanCorruption(32.0, 0.5))
  rates: tuple[float, ...] = (0.1, 0.1, 0.2, 0.6)  # denoisers..., prefix LM, causal LM
  use_mode_tokens: bool = True
  fim_rate: float = 0.0  # the share of causal-LM examples made fill-in-the-middle (objectives/fim.py)
  fim_spm_rate: float = 0.5  # the share of those in SPM rather than PSM

  def __post_init__(self):
    for name in ("fim_rate", "fim_spm_rate"):
      value = getattr(self, name)
      # A bool is an int to Python: fim_rate=True would train as 1.0 without a word.
      if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
        raise ValueError(f"UL2Config.{name} must be a number within [0, 1], got {value!r}")
    if len(self.rates) != len(self.denoisers) + 2:
      raise ValueError(f"UL2Config.rates needs one rate per denoiser plus prefix LM and causal LM "
                       f"({len(self.denoisers) + 2}), got {len(self.rates)}")
    if any(r < 0 for r in self.rates) or not math.isclose(sum(self.rates), 1.0, abs_tol=1e-6):
      raise ValueError(f"UL2Config.rates must be non-negative and sum to 1, got {self.rates}")

  @property
  def fim(self) -> bool:
    return self.fim_rate > 0

  @property
  def draw_rates(self) -> tuple[float, ...]:
    """The rate of each objective a chunk draws: `rates`, the causal-LM share split with FIM when on."""
    if not self.fim:
      return tuple(self.rates)
    causal = self.rates[-1]
    return tuple(self.rates[:-1]) + (causal * (1 - self.fim_rate), causal * self.fim_rate)

  @property
  def names(self) -> tuple[str, ...]:
    """The name of each value of an example's `objective` feature: the drawn objectives, and FIM's
    two formats (a FIM chunk that does not fit stays causal LM)."""
    names = tuple(f"span_corruption_{d.mean_noise_span_length:g}_{d.noise_density:g}" for d in self.denoisers) + (
        "prefix_lm", "causal_lm")
    return names + (("fim_psm", "fim_spm") if self.fim else ())


# ---------------------------------------------------------------------------------------------------
# t5 span-corruption semantics.


def _random_segmentation(num_items: tf.Tensor, num_segments: tf.Tensor, seed: tf.Tensor) -> tf.Tensor:
  """Lengths of a uniformly random partition of num_items into num_segments non-empty segments."""
  first_in_segment = tf.cast(tf.range(num_items - 1) < num_segments - 1, tf.int32)
  first_in_segment = tf.pad(tf.random.experimental.stateless_shuffle(first_in_segment, seed), [[1, 0]])
  segment_id = tf.cumsum(first_in_segment)
  return tf.math.segment_sum(tf.ones_like(segment_id), segment_id)


def num_noise_tokens_and_spans(length, noise_density: float, mean_noise_span_length: float):
  """t5's counts: noise = round(length * density) clipped to [1, length - 1]; spans = max(1,
  round(noise / mean span)). Works on Python ints, numpy arrays and tensors."""
  if not isinstance(length, tf.Tensor):
    # float32 and round-half-even like the tensor form (and t5): float64 rounds differently at some
    # lengths (190 at density 0.15 gives 28 noise tokens in float64, 29 in float32).
    array = np.maximum(np.asarray(length, np.int64), 2)
    noise = np.clip(np.round(array.astype(np.float32) * np.float32(noise_density)).astype(np.int64), 1, array - 1)
    spans = np.maximum(np.round(noise.astype(np.float32) / np.float32(mean_noise_span_length)).astype(np.int64), 1)
    return (int(noise), int(spans)) if np.ndim(length) == 0 else (noise, spans)
  length = tf.maximum(length, 2)
  noise = tf.cast(tf.round(tf.cast(length, tf.float32) * noise_density), tf.int32)
  noise = tf.minimum(tf.maximum(noise, 1), length - 1)
  spans = tf.maximum(tf.cast(tf.round(tf.cast(noise, tf.float32) / mean_noise_span_length), tf.int32), 1)
  return noise, spans


def random_spans_noise_mask(length, noise_density: float, mean_noise_span_length: float,
                            seed: tf.Tensor) -> tf.Tensor:
  """A boolean [length] mask of noise spans, alternating non-noise / noise (t5 semantics).

  seed: a stateless seed of shape [2]. Lengths below 2 are computed as 2 and cut back.
  """
  original_length = length
  length = tf.maximum(length, 2)
  num_noise, num_spans = num_noise_tokens_and_spans(length, noise_density, mean_noise_span_length)
  seeds = tf.random.experimental.stateless_split(seed, 2)
  noise_lengths = _random_segmentation(num_noise, num_spans, seeds[0])
  nonnoise_lengths = _random_segmentation(length - num_noise, num_spans, seeds[1])
  interleaved = tf.reshape(tf.stack([nonnoise_lengths, noise_lengths], axis=1), [num_spans * 2])
  span_starts = tf.cumsum(interleaved)[:-1]
  span_start_indicator = tf.math.unsorted_segment_sum(tf.ones_like(span_starts), span_starts, length)
  is_noise = tf.equal(tf.cumsum(span_start_indicator) % 2, 1)
  return is_noise[:original_length]


def _spans_to_sentinels(tokens: tf.Tensor, drop_mask: tf.Tensor, vocab_size: int) -> tf.Tensor:
  """Replaces each run of dropped tokens with one sentinel; sentinels count down from vocab_size - 1."""
  previous = tf.pad(drop_mask[:-1], [[1, 0]])
  first_of_span = tf.logical_and(drop_mask, tf.logical_not(previous))
  sentinels = vocab_size - tf.cumsum(tf.cast(first_of_span, tokens.dtype))
  tokens = tf.where(first_of_span, sentinels, tokens)
  return tf.boolean_mask(tokens, tf.logical_or(first_of_span, tf.logical_not(drop_mask)))


def span_corruption(tokens: tf.Tensor, noise_mask: tf.Tensor, vocab_size: int) -> tuple[tf.Tensor, tf.Tensor]:
  """(inputs, targets): inputs keep the non-noise tokens with one sentinel per noise span; targets are
  each sentinel followed by its span (t5's noise_span_to_unique_sentinel and its complement)."""
  inputs = _spans_to_sentinels(tokens, noise_mask, vocab_size)
  targets = _spans_to_sentinels(tokens, tf.logical_not(noise_mask), vocab_size)
  return inputs, targets


def prefix_lm_split(tokens: tf.Tensor, seed: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
  """A split point drawn uniformly from 1..n-1 (both parts non-empty); a 1-token chunk is all target."""
  n = tf.size(tokens)
  split = tf.cond(n > 1,
                  lambda: tf.random.stateless_uniform([], seed, minval=1, maxval=tf.maximum(n, 2), dtype=tf.int32),
                  lambda: tf.constant(0))
  return tokens[:split], tokens[split:]


# ---------------------------------------------------------------------------------------------------
# Raw chunk lengths and the mixture preprocessor.


def raw_lengths(config: UL2Config, sequence_length: int, num_sentinels: int) -> list[int]:
  """For each objective, the longest raw chunk whose (inputs, targets) fit sequence_length together.

  Span corruption adds one sentinel per span to inputs and to targets; a mode token adds one more.
  """
  mode = 1 if config.use_mode_tokens else 0
  lengths = []
  for denoiser in config.denoisers:
    n = sequence_length
    while n > 1:
      _, spans = num_noise_tokens_and_spans(n, denoiser.noise_density, denoiser.mean_noise_span_length)
      if n + 2 * spans + mode <= sequence_length:
        break
      n -= 1
    _, spans = num_noise_tokens_and_spans(n, denoiser.noise_density, denoiser.mean_noise_span_length)
    if spans > num_sentinels:
      raise ValueError(f"span corruption {denoiser} on {n}-token chunks needs {spans} sentinels but the "
                       f"vocabulary has {num_sentinels} extra ids; use a shorter sequence or more extra ids")
    lengths.append(n)
  return lengths + [sequence_length - mode, sequence_length] + ([sequence_length - FIM_RESERVE] if config.fim else [])


def added_tokens(config: UL2Config, objective: int, sizes: np.ndarray) -> np.ndarray:
  """Tokens an example of objective `objective` takes in a row beyond its raw chunk of `sizes` tokens:
  one sentinel per span in inputs and in targets for span corruption, and the mode token. A 1-token
  chunk becomes causal LM (nothing added), as in `ul2_objectives`."""
  sizes = np.asarray(sizes, np.int64)
  mode = 1 if config.use_mode_tokens else 0
  if objective < len(config.denoisers):
    denoiser = config.denoisers[objective]
    _, spans = num_noise_tokens_and_spans(sizes, denoiser.noise_density, denoiser.mean_noise_span_length)
    added = 2 * np.asarray(spans) + mode
  elif objective == len(config.denoisers):  # prefix LM
    added = np.full(sizes.shape, mode)
  elif objective == len(config.denoisers) + 2:  # FIM: the sentinels (encoding the parts apart may add a few)
    added = np.full(sizes.shape, 3)
  else:  # causal LM
    added = np.zeros(sizes.shape, np.int64)
  return np.where(sizes >= 2, added, 0)


def chunking(config: UL2Config, sequence_length: int, num_sentinels: int) -> Chunking:
  """How `ul2_objectives` cuts documents into examples (data/packing.py counts what that makes)."""
  return Chunking(tuple(raw_lengths(config, sequence_length, num_sentinels)), config.draw_rates,
                          functools.partial(added_tokens, config))


def _chunk_starts(length: tf.Tensor, raw: tf.Tensor, rates: tf.Tensor, seed: tf.Tensor):
  """Objectives drawn for enough chunks to cover `length`, and the chunks' start offsets."""
  max_chunks = length // tf.reduce_min(raw) + 1
  logits = tf.math.log(rates)[None, :]
  objectives = tf.random.stateless_categorical(logits, max_chunks, seed, dtype=tf.int32)[0]
  sizes = tf.gather(raw, objectives)
  starts = tf.concat([[0], tf.cumsum(sizes)[:-1]], axis=0)
  keep = starts < length
  return tf.boolean_mask(objectives, keep), tf.boolean_mask(starts, keep), tf.boolean_mask(sizes, keep)


def ul2_objectives(dataset: tf.data.Dataset, sequence_length: Mapping[str, int], output_features,
                   config: UL2Config = UL2Config(), mode_token_ids: Sequence[int] = (),
                   document_ids: Sequence[int] = ()) -> tf.data.Dataset:
  """Documents {"targets": tokens} -> examples {"inputs", "targets", "objective"} (SeqIO preprocessor).

  The total length is sequence_length["targets"] (inputs and targets together, see
  DecoderOnlyPrefixLMFeatureConverter). Mode token ids are those of [NLU], [NLG], [S2S]; document ids
  those of [code] and [eod] (FIM keeps them outside its frame). `objective` indexes `config.names`.
  """
  total = int(sequence_length["targets"])
  vocabulary = output_features["targets"].vocabulary
  vocab_size = vocabulary.vocab_size
  raw = tf.constant(raw_lengths(config, total, vocabulary.extra_ids), tf.int32)
  rates = tf.constant(config.draw_rates, tf.float32)
  num_denoisers = len(config.denoisers)
  causal_index = num_denoisers + 1
  if config.use_mode_tokens and len(mode_token_ids) != num_denoisers + 1:
    raise ValueError(f"need {num_denoisers + 1} mode token ids ([NLU], [NLG], [S2S]), got {mode_token_ids}")
  if config.fim:
    fim_ids = fim.FimIds.of(vocabulary)  # a vocabulary without the sentinels is refused, naming its file
    if len(document_ids) != 2:
      raise ValueError(f"FIM needs the ids of [code] and [eod], got {document_ids}")

  @seqio.map_over_dataset(num_seeds=1)
  def cut(example, seed):
    tokens = example["targets"]
    objectives, starts, sizes = _chunk_starts(tf.size(tokens), raw, rates, seed)
    limits = tf.minimum(starts + sizes, tf.size(tokens))
    chunks = tf.RaggedTensor.from_row_lengths(tokens, limits - starts)
    return {"targets": chunks, "objective": objectives}

  def with_mode(index: int, inputs: tf.Tensor) -> tf.Tensor:
    if not config.use_mode_tokens:
      return inputs
    return tf.concat([tf.constant([mode_token_ids[index]], inputs.dtype), inputs], axis=0)

  @seqio.map_over_dataset(num_seeds=1)
  def corrupt(example, seed):
    tokens, objective = example["targets"], example["objective"]
    # A 1-token chunk (a document's tail) has nothing to corrupt: it becomes a causal-LM example.
    objective = tf.where(tf.size(tokens) < 2, causal_index, objective)

    def denoise(i):
      def branch():
        d = config.denoisers[i]
        mask = random_spans_noise_mask(tf.size(tokens), d.noise_density, d.mean_noise_span_length, seed)
        inputs, targets = span_corruption(tokens, mask, vocab_size)
        return with_mode(i, inputs), targets, tf.constant(i)
      return branch

    def prefix_lm():
      inputs, targets = prefix_lm_split(tokens, seed)
      return with_mode(num_denoisers, inputs), targets, tf.constant(num_denoisers)

    def causal_lm():
      return tokens[:0], tokens, tf.constant(causal_index)

    def fill_in_the_middle():  # PSM is the objective after causal LM, SPM the one after it; 0: stays causal
      targets, fim_format = fim.permute_tf(tokens, seed, vocabulary, fim_ids, tuple(document_ids),
                                           config.fim_spm_rate, total)
      return tokens[:0], targets, causal_index + fim_format

    branches = [denoise(i) for i in range(num_denoisers)] + [prefix_lm, causal_lm]
    if config.fim:
      branches.append(fill_in_the_middle)
    inputs, targets, objective = tf.switch_case(objective, branches)
    return {"inputs": inputs, "targets": targets, "objective": objective}

  examples = corrupt(cut(dataset).unbatch())
  if config.fim:
    # FIM tokenizes inside the pipeline, and the tokenizer is a resource: "external state" to tf.data,
    # which then refuses to checkpoint the iterator (training saves it with every checkpoint). The
    # resource is the vocabulary, read-only and rebuilt with the pipeline, so restoring without it is exact.
    options = tf.data.Options()
    options.experimental_external_state_policy = tf.data.experimental.ExternalStatePolicy.IGNORE
    examples = examples.with_options(options)
  return examples


class DecoderOnlyPrefixLMConverter(seqio.PrefixLMFeatureConverter):
  """SeqIO's PrefixLMFeatureConverter (concatenate inputs and targets, `decoder_causal_attention`
  over the inputs plus one position, loss on targets only, packing) with one difference: the row
  length is task_feature_lengths["targets"], the budget for inputs and targets together, rather than
  the sum of both lengths. Set TASK_FEATURE_LENGTHS = {"inputs": L, "targets": L} for rows of L.
  The UL2 preprocessor guarantees every example fits; the concatenation is checked anyway.
  """

  def _concat_task_feature_lengths(self, task_feature_lengths: Mapping[str, int]) -> Mapping[str, int]:
    length = task_feature_lengths["targets"]
    return {"targets": length, "inputs_width": length, "inputs_width_add_pos": length}

  def get_model_feature_lengths(self, task_feature_lengths: Mapping[str, int]) -> Mapping[str, int]:
    return super().get_model_feature_lengths({"targets": task_feature_lengths["targets"], "inputs": 0})

  def _concat_and_add_masks(self, features):
    total = tf.size(features["inputs"]) + tf.size(features["targets"])
    tf.debugging.assert_less_equal(total, self._row_length,
                                   message="a UL2 example is longer than the sequence length")
    return super()._concat_and_add_masks(features)

  def __call__(self, dataset: tf.data.Dataset, task_feature_lengths: Mapping[str, int]) -> tf.data.Dataset:
    self._row_length = task_feature_lengths["targets"]
    return super().__call__(dataset, task_feature_lengths)
