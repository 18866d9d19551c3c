"""The run's SentencePiece vocabulary as a Hugging Face fast tokenizer: the same ids for every text.

data/vocab.py's vocabulary is a unigram SentencePiece model (identity normalisation, no dummy prefix,
byte fallback, split digits, whitespace runs as pieces, special tokens and sentinels as control
pieces) that codelm encodes in a way every implementation agrees on (data/vocab.py, "how codelm
encodes"): scores that are multiples of 2**-9, the text cut into segments of blanks and the word after
them, each segment a Viterbi whose scores float32 sums exactly, so ties are exact and broken alike.
`tokenizers`' Unigram model does the same Viterbi (in float64, exact here too) over the same scores,
with these differences, each closed here:
- The segments: a Split pre-tokenizer with data/vocab.py's own segment pattern (spaces as U+2581).
- Control, unknown and byte pieces are not in SentencePiece's matcher, so text never produces them
  ("[code]" in a source file stays ordinary pieces); Unigram matches every string of its vocabulary.
  They get a score below any path of ordinary pieces over as many characters, so none is ever chosen
  where ordinary pieces cover the text.
- Where no ordinary piece covers a character (it is outside the alphabet: byte fallback), that
  character is its own pre-token (a Split on the complement of the alphabet), so no control or byte
  piece string can be matched across it either (text "<0x41>" when "<" has no piece). SentencePiece
  puts no piece across such a character, so the split changes nothing else.
- Spaces are written U+2581 in pieces (SentencePiece's whitespace escaping): the normaliser does it,
  the decoder undoes it; byte pieces decode to their bytes (ByteFallback, Fuse).
Measured on 582 source files of this machine (Python's standard library, Go's sources, C++ headers,
JavaScript; the `make demo` vocabulary; bench/hf_tokenizer_agreement.py): every file gives codelm's ids.
Special tokens ([code], [eod], the UL2 mode tokens, the sentinels, <pad>, </s>, <unk>) are registered
as such with `split_special_tokens`, so transformers keeps text that spells them as ordinary pieces
(the `tokenizers` library alone does not store that switch: its users pass encode_special_tokens).
With add_special_tokens (transformers' default), `[code]` is prepended, as codelm's sampler does.
Fill-in-the-middle: a vocabulary trained with FIM's pieces (<fim_prefix>, <fim_suffix>, <fim_middle>,
spelled as StarCoder's) has them among the additional special tokens, as StarCoder's tokenizer does,
and named in tokenizer_config.json (`fim_prefix_token`, `fim_suffix_token`, `fim_middle_token`), which
transformers 5 reads as `tokenizer.fim_prefix_token` and `tokenizer.fim_prefix_token_id`; a vocabulary
trained before FIM exports without them. A FIM prompt is `[code]` + objectives/fim.py's frame of the
prefix's and the suffix's ids, and the middle ends at `[eod]` (docs/export.md).
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np
from sentencepiece import sentencepiece_model_pb2

from data import vocab
from data.vocab import CODE_TOKEN, EOD_TOKEN, FIM_MIDDLE, FIM_PREFIX, FIM_SUFFIX

_PIECE = sentencepiece_model_pb2.ModelProto.SentencePiece
_MATCHED = (_PIECE.NORMAL, _PIECE.USER_DEFINED)  # what SentencePiece can produce from text
_ESCAPED_SPACE = "\u2581"
# tokenizer_config.json's names for the FIM pieces (transformers 5: tokenizer.fim_prefix_token(_id), ...).
FIM_TOKEN_KEYS = {"fim_prefix_token": FIM_PREFIX, "fim_suffix_token": FIM_SUFFIX, "fim_middle_token": FIM_MIDDLE}


@dataclasses.dataclass(frozen=True)
class ExportedTokenizer:
  """tokenizer.json, tokenizer_config.json and special_tokens_map.json, as text."""

  tokenizer_json: str
  tokenizer_config: dict
  special_tokens_map: dict

  def files(self) -> dict[str, str]:
    dump = lambda value: json.dumps(value, indent=2, ensure_ascii=False) + "\n"  # noqa: E731
    return {"tokenizer.json": self.tokenizer_json, "tokenizer_config.json": dump(self.tokenizer_config),
            "special_tokens_map.json": dump(self.special_tokens_map)}

  @property
  def fim_tokens(self) -> dict[str, str]:
    """tokenizer_config.json's FIM keys and pieces: FIM_TOKEN_KEYS, or {} for a vocabulary without them."""
    return {key: self.tokenizer_config[key] for key in FIM_TOKEN_KEYS if key in self.tokenizer_config}


def _encode_time_scores(model) -> list[float]:
  """Each piece's score as codelm encodes with it; the pieces SentencePiece never matches get
  `unmatched` (see the module docstring)."""
  scores = [float(np.float32(piece.score)) for piece in model.pieces]
  for piece, score in zip(model.pieces, scores):
    if piece.type == _PIECE.USER_DEFINED or (piece.type == _PIECE.NORMAL and score % vocab.SCORE_QUANTUM):
      raise ValueError(f"piece {piece.piece!r} is user-defined or scores {score!r}, not a multiple of "
                       f"{vocab.SCORE_QUANTUM}: export the model codelm encodes with (the vocabulary's "
                       "sp_model, data.vocab.get_vocabulary(path).sp_model), not the .model file")
  matched = [s for s, p in zip(scores, model.pieces) if p.type in _MATCHED]
  lowest = min(min(matched, default=0.0), -1.0)
  longest = max((len(p.piece) for p in model.pieces if p.type not in _MATCHED), default=1)
  # Below any path over `longest` characters of ordinary pieces, each scoring at least `lowest`.
  unmatched = float(np.floor((longest + 1) * lowest - 1.0))
  return [s if p.type in _MATCHED else unmatched for s, p in zip(scores, model.pieces)]


def _alphabet(model) -> set[str]:
  """Characters with a piece of their own; the vocabulary is refused if a piece holds any other."""
  alphabet = {p.piece for p in model.pieces if p.type in _MATCHED and len(p.piece) == 1}
  for piece in model.pieces:
    if piece.type in _MATCHED and not set(piece.piece) <= alphabet:
      missing = sorted(set(piece.piece) - alphabet)
      raise ValueError(f"piece {piece.piece!r} holds {missing}, which have no piece of their own: the "
                       "Hugging Face Unigram model would split those characters differently")
    if piece.type not in _MATCHED and len(piece.piece) < 2:
      raise ValueError(f"special piece {piece.piece!r} is a single character: the Hugging Face Unigram "
                       "model would produce it from text")
  return alphabet


def _outside(alphabet: set[str]) -> str:
  """A regex character class of every character not in `alphabet` (code point ranges)."""
  points = sorted(ord(c) for c in alphabet)
  ranges, start = [], None
  for i, point in enumerate(points):
    start = point if start is None else start
    if i + 1 == len(points) or points[i + 1] != point + 1:
      ranges.append(f"\\x{{{start:X}}}" + (f"-\\x{{{point:X}}}" if point != start else ""))
      start = None
  return f"[^{''.join(ranges)}]"


def build(sp_model: bytes, model_max_length: int):
  """The fast tokenizer (a `tokenizers.Tokenizer`) and its transformers files for a serialized
  SentencePiece model holding every id (codelm's vocabulary: `vocabulary.sp_model`)."""
  from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

  model = sentencepiece_model_pb2.ModelProto.FromString(sp_model)
  if model.trainer_spec.model_type != sentencepiece_model_pb2.TrainerSpec.UNIGRAM:
    raise ValueError("only unigram SentencePiece models are exported (data/vocab.py trains them)")
  spec = model.normalizer_spec
  if spec.add_dummy_prefix or spec.remove_extra_whitespaces or spec.precompiled_charsmap:
    raise ValueError("the SentencePiece model normalises text (dummy prefix, whitespace folding or a "
                     "normalisation rule): only data/vocab.py's identity normalisation is exported")
  if not model.trainer_spec.byte_fallback:
    raise ValueError("the SentencePiece model has no byte fallback: only data/vocab.py's vocabularies are exported")
  pieces = [p.piece for p in model.pieces]
  unk_id = next(i for i, p in enumerate(model.pieces) if p.type == _PIECE.UNKNOWN)
  tokenizer = Tokenizer(models.Unigram(list(zip(pieces, _encode_time_scores(model))), unk_id=unk_id,
                                       byte_fallback=True))
  tokenizer.normalizer = normalizers.Replace(" ", _ESCAPED_SPACE)
  vocab.check_segment_cuts(sp_model)
  tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
      pre_tokenizers.Split(Regex(vocab.segment_pattern(spaces=_ESCAPED_SPACE)), behavior="isolated"),
      pre_tokenizers.Split(Regex(_outside(_alphabet(model))), behavior="isolated")])
  tokenizer.decoder = decoders.Sequence([decoders.Replace(_ESCAPED_SPACE, " "), decoders.ByteFallback(),
                                         decoders.Fuse()])
  special = [p.piece for p in model.pieces if p.type in (_PIECE.CONTROL, _PIECE.UNKNOWN)]
  tokenizer.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in special])
  code_id = pieces.index(CODE_TOKEN)
  tokenizer.post_processor = processors.TemplateProcessing(
      single=f"{CODE_TOKEN} $A", pair=f"{CODE_TOKEN} $A $B:1", special_tokens=[(CODE_TOKEN, code_id)])
  named = {"bos_token": CODE_TOKEN, "eos_token": EOD_TOKEN, "pad_token": pieces[model.trainer_spec.pad_id],
           "unk_token": pieces[unk_id]}
  others = [s for s in special if s not in named.values()]
  special_tokens_map = {**named, "additional_special_tokens": others}
  # All three or none: codelm frames FIM prompts only with a vocabulary that has all three (data/vocab.py).
  fim = FIM_TOKEN_KEYS if set(FIM_TOKEN_KEYS.values()) <= set(special) else {}
  config = {
      "tokenizer_class": "PreTrainedTokenizerFast", **special_tokens_map, **fim,
      "split_special_tokens": True,  # text spelling "[code]" is ordinary pieces, as in codelm
      "clean_up_tokenization_spaces": False,  # decoding must return the text byte for byte
      "add_bos_token": True, "add_eos_token": False, "model_max_length": model_max_length,
      "padding_side": "left",  # batched generation pads prompts on the left
  }
  return tokenizer, ExportedTokenizer(tokenizer.to_str(pretty=True), config, special_tokens_map)
