"""Fill-in-the-middle (Bavarian et al. 2022, as BigCode's Megatron applies it), an option of the
causal-LM share of the UL2 mixture (`UL2Config.fim_rate`, objectives/ul2/).

A FIM example is a chunk of a document cut at two points drawn uniformly over its characters into
prefix / middle / suffix, each part tokenized on its own, and framed

  PSM  <fim_prefix> prefix <fim_suffix> suffix <fim_middle> middle
  SPM  <fim_prefix> <fim_suffix> suffix <fim_middle> prefix middle   (SPM "variant 2", BigCode's)

after the chunk's `[code]` (a document's first chunk) and before its `[eod]` (its last), so that a
middle ends with `[eod]` as a document does: the sampler stops a middle there. The loss covers every
token, as in causal LM.

Text, not ids: the cut points fall between characters, inside a token as often as not, and an editor's
cursor does too. The chunk's ids are decoded and the three parts encoded again (the vocabulary's round
trip is exact, data/vocab.py), as BigCode's Megatron does; cutting ids would train only on cuts at token
boundaries, and a prompt's prefix and suffix, encoded apart, would end and begin in pieces the model
never saw at a cut. Encoding apart can take a few more tokens than the chunk had: a FIM chunk is
FIM_RESERVE tokens shorter than the sequence length, and an example that still does not fit (or whose
chunk ends inside a character's bytes) stays causal LM, counted as such in the objective shares.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

import tensorflow as tf

from data.vocab import FIM_MIDDLE, FIM_PREFIX, FIM_SUFFIX, fim_token_ids

PSM, SPM = "psm", "spm"
FORMATS = (PSM, SPM)
# Three sentinels, and room for the extra tokens encoding the parts apart can take (about one per cut).
FIM_RESERVE = 3 + 8


@dataclasses.dataclass(frozen=True)
class FimIds:
  prefix: int
  suffix: int
  middle: int

  @classmethod
  def of(cls, vocabulary) -> "FimIds":
    """The vocabulary's sentinels; a ValueError naming its file when it has none."""
    ids = fim_token_ids(vocabulary)
    return cls(ids[FIM_PREFIX], ids[FIM_SUFFIX], ids[FIM_MIDDLE])


def split_text(text: str, first: int, second: int) -> tuple[str, str, str]:
  """(prefix, middle, suffix) of `text` cut at character offsets first <= second."""
  if not 0 <= first <= second <= len(text):
    raise ValueError(f"cut points must satisfy 0 <= {first} <= {second} <= {len(text)}")
  return text[:first], text[first:second], text[second:]


def in_order(fim_format: str, ids: FimIds, prefix, suffix, middle, sentinel) -> list:
  """The pieces of a FIM sequence in `fim_format`'s order, each sentinel id as `sentinel(id)` makes it:
  the one definition of PSM and SPM, for lists (frame) and tensors (permute_tf) alike."""
  if fim_format == PSM:
    return [sentinel(ids.prefix), prefix, sentinel(ids.suffix), suffix, sentinel(ids.middle), middle]
  if fim_format == SPM:
    return [sentinel(ids.prefix), sentinel(ids.suffix), suffix, sentinel(ids.middle), prefix, middle]
  raise ValueError(f"unknown FIM format {fim_format!r}; choose one of {', '.join(FORMATS)}")


def frame(prefix: Sequence[int], suffix: Sequence[int], middle: Sequence[int], ids: FimIds,
          fim_format: str = PSM) -> list[int]:
  """The ids of a FIM example (or, with an empty middle, of an infilling prompt) in `fim_format`."""
  pieces = in_order(fim_format, ids, list(prefix), list(suffix), list(middle), lambda i: [i])
  return [i for piece in pieces for i in piece]


def infilling_prompt(vocabulary, prefix: str, suffix: str, fim_format: str = PSM) -> list[int]:
  """An infilling prompt's ids after `[code]`: what the model continues with the middle, then `[eod]`."""
  ids = FimIds.of(vocabulary)  # first: a vocabulary without the sentinels is refused before any encoding
  return frame(vocabulary.encode(prefix), vocabulary.encode(suffix), [], ids, fim_format)


# ---------------------------------------------------------------------------------------------------
# The transform, in TensorFlow graph code (stateless, seeded per example by SeqIO, as objectives/ul2/).


def permute_tf(tokens: tf.Tensor, seed: tf.Tensor, vocabulary, ids: FimIds, document_ids: tuple[int, int],
               spm_rate: float, budget: int) -> tuple[tf.Tensor, tf.Tensor]:
  """(example, format) for a chunk's ids: the FIM example and 1 (PSM) or 2 (SPM), or the chunk unchanged
  and 0 when the example would not fit `budget` tokens or the chunk does not decode to whole characters.

  `document_ids` are ([code], [eod]): a leading [code] and a trailing [eod] stay outside the frame.
  """
  code_id, eod_id = document_ids
  n = tf.size(tokens)
  starts_document = tf.reduce_sum(tf.cast(tokens[:1] == code_id, tf.int32))  # 0 or 1
  ends_document = tf.reduce_sum(tf.cast(tokens[starts_document:][-1:] == eod_id, tf.int32))
  body = tokens[starts_document:n - ends_document]
  text = vocabulary.tf_tokenizer.detokenize(body)
  # A chunk cut inside a character's byte-fallback ids decodes with U+FFFD: not the chunk's text.
  whole = tf.logical_not(tf.strings.regex_full_match(text, "(?s).*\\x{FFFD}.*"))
  chars = tf.strings.length(text, unit="UTF8_CHAR")
  seeds = tf.random.experimental.stateless_split(seed, 2)
  cuts = tf.sort(tf.random.stateless_uniform([2], seeds[0], minval=0, maxval=chars + 1, dtype=tf.int32))
  prefix = tf.strings.substr(text, 0, cuts[0], unit="UTF8_CHAR")
  middle = tf.strings.substr(text, cuts[0], cuts[1] - cuts[0], unit="UTF8_CHAR")
  suffix = tf.strings.substr(text, cuts[1], chars - cuts[1], unit="UTF8_CHAR")
  encode = lambda s: tf.cast(vocabulary.encode_tf(s), tokens.dtype)  # noqa: E731
  prefix, middle, suffix = encode(prefix), encode(middle), encode(suffix)
  marker = lambda i: tf.constant([i], tokens.dtype)  # noqa: E731
  use_spm = tf.random.stateless_uniform([], seeds[1]) < spm_rate
  framed = tf.cond(use_spm, lambda: tf.concat(in_order(SPM, ids, prefix, suffix, middle, marker), 0),
                   lambda: tf.concat(in_order(PSM, ids, prefix, suffix, middle, marker), 0))
  example = tf.concat([tokens[:starts_document], framed, tokens[n - ends_document:]], 0)
  fits = tf.logical_and(whole, tf.size(example) <= budget)
  fim_format = tf.where(fits, tf.where(use_spm, 2, 1), 0)
  return tf.cond(fits, lambda: example, lambda: tokens), fim_format
