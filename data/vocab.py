"""The SentencePiece vocabulary for code: trained on a language-uniform sample, exact round trip.

    python -m data.vocab --corpus CORPUS_DIR --vocab_size 65536 --output spm.model

The SentencePiece model holds `vocab_size - extra_ids` pieces; `get_vocabulary` wraps it in a
`seqio.SentencePieceVocabulary` that appends the `extra_ids` sentinels at the top of the id space
(T5 style: sentinel 0 is the highest id), so the model sees exactly `vocab_size` ids.

Options, and why (REFERENCE.md "Vocabulary"):
- `normalization_rule_name="identity"`, `add_dummy_prefix=False`, `remove_extra_whitespaces=False`:
  the default NFKC rule folds tabs and newlines into spaces and collapses runs of spaces, and the
  dummy prefix would add a leading space; code must come back byte for byte.
- `byte_fallback=True`: a character outside the pieces becomes its UTF-8 bytes, never `<unk>`.
- Whole files are training sentences (long ones cut into chunks of lines), so pieces may contain
  newlines; `max_sentence_length` is raised so SentencePiece does not drop them.
- The special tokens ([code], [eod], the UL2 mode tokens, the FIM sentinels) are `control_symbols`, and
  `get_vocabulary` makes the seqio sentinels (`<extra_id_N>`) control pieces too: SentencePiece never
  produces a control piece from text, so source or prompt text that spells "[eod]" or
  " <extra_id_5>" stays ordinary pieces, and only the pipeline inserts those ids (by `piece_to_id`).
  Vocabularies trained before this (special tokens as user-defined pieces) get the same treatment
  when loaded.
- Runs of 2..12 spaces and 1..4 tabs are `user_defined_symbols`: a run is one piece, so 12 spaces of
  indentation are one id (or 11 and the word's "▁w" piece, where that scores better than "w": see
  "how codelm encodes" below). Spaces are written as U+2581, the form they take after SentencePiece's
  whitespace escaping; a literal " " symbol would never match. Tabs must be symbols because
  SentencePiece 0.2.2 never learns a tab piece (observed: tab is left out of the alphabet even when
  listed in `required_chars`), so without them every tab is a byte-fallback id.
  `--whitespace learned` instead lets SentencePiece learn whitespace-only pieces
  (`allow_whitespace_only_pieces`), as the paper did. Measured on the Debian corpus at 16,384 ids
  (`bench/whitespace_pieces.py`): learned, SentencePiece keeps only 7 space pieces (up to 16 spaces)
  and encodes 7.3% more tokens per byte (mean over 14 languages; +0.8% C# to +15.9% Python), so
  listed runs are the default.
- `split_digits=True`: numbers are read digit by digit (PaLM).
- `pad_id=0, eos_id=1, unk_id=2, bos_id=-1`: the ids SeqIO assumes.

Encoding is SentencePiece's, made the same in every encoder (Python, TensorFlow, the Hugging Face
export): scores rounded to multiples of 2**-9 and the text encoded in segments cut before each blank
run ("how codelm encodes" below says why; bench/hf_tokenizer_agreement.py measures it). SeqIO caches
written before this hold the old split of some ties (the order of run pieces): rerun `python -m
data.tasks` to recache.

Known limits: a literal U+2581 (▁) in the text decodes as a space (SentencePiece's whitespace
escaping); SentencePiece skips training sentences that contain U+2585 (its UNK mark).
"""

from __future__ import annotations

import quiet

if __name__ == "__main__":  # before TensorFlow, JAX and Beam are imported
  quiet.setup()

import argparse
import functools
import hashlib
import heapq
import itertools
import os
import re
import tempfile
from typing import Iterable, Iterator, Sequence

import seqio
from seqio import vocabularies as seqio_vocabularies
import sentencepiece as spm
import tensorflow as tf

import storage
import languages
from data import records

CODE_TOKEN = "[code]"
EOD_TOKEN = "[eod]"
MODE_TOKENS = ("[NLU]", "[NLG]", "[S2S]")  # UL2 mode tokens: regular / extreme denoising, prefix LM
# Fill-in-the-middle sentinels (objectives/fim.py), spelled as StarCoder's so Hugging Face users know them.
FIM_PREFIX, FIM_SUFFIX, FIM_MIDDLE = "<fim_prefix>", "<fim_suffix>", "<fim_middle>"
FIM_TOKENS = (FIM_PREFIX, FIM_SUFFIX, FIM_MIDDLE)
SPECIAL_TOKENS = (CODE_TOKEN, EOD_TOKEN) + MODE_TOKENS
# Every control piece a vocabulary is trained with. FIM's are kept apart from SPECIAL_TOKENS (which
# every vocabulary must have): vocabularies trained before FIM lack them and still serve everything else.
CONTROL_TOKENS = SPECIAL_TOKENS + FIM_TOKENS
DEFAULT_EXTRA_IDS = 100
MAX_SPACE_RUN, MAX_TAB_RUN = 12, 4
_ESCAPED_SPACE = "\u2581"  # how SentencePiece writes " " inside pieces
TAB_RUNS = tuple("\t" * n for n in range(1, MAX_TAB_RUN + 1))
WHITESPACE_RUNS = tuple(_ESCAPED_SPACE * n for n in range(2, MAX_SPACE_RUN + 1)) + TAB_RUNS
# "listed": runs of 2..12 spaces are user-defined pieces; "learned": SentencePiece learns whitespace-only
# pieces itself (allow_whitespace_only_pieces), as the paper did. bench/whitespace_pieces.py compares them.
WHITESPACE_MODES = ("listed", "learned")
DEFAULT_WHITESPACE = "listed"

# 20M characters per language, 280M for all 14: a bound on the trainer's memory (it holds every
# sentence), not a tuned value; raise it with --chars_per_language where memory allows.
DEFAULT_CHARS_PER_LANGUAGE = 20_000_000
# Training sentences are at most this many UTF-8 bytes: whole files up to that, longer files in
# chunks of lines. Sentences over max_sentence_length would be silently skipped by SentencePiece.
MAX_SENTENCE_BYTES = 1 << 15


# ---- the training sample ----------------------------------------------------------------------


def _sample_key(seed: int, path: str, text: str) -> bytes:
  """A pseudo-random, seed-dependent order of files that does not depend on shard order."""
  return hashlib.blake2b(f"{seed}\0{path}\0{text}".encode("utf-8"), digest_size=8).digest()


def _truncate_lines(text: str, max_chars: int) -> str:
  """The longest prefix of whole lines within max_chars (or max_chars characters if one line is longer)."""
  if len(text) <= max_chars:
    return text
  cut = text.rfind("\n", 0, max_chars)
  return text[:cut + 1] if cut >= 0 else text[:max_chars]


def sample_language(texts: Iterable[tuple[str, str]], max_chars: int, seed: int) -> list[str]:
  """Files of one language in a seeded random order, up to max_chars characters in all.

  Equivalent to sorting every file by `_sample_key` and taking files until the budget is reached,
  the last one cut at a line boundary, but in one streaming pass that keeps only about max_chars
  characters in memory (a heap of the smallest keys, the largest on top).
  """
  heap: list[tuple[bytes, str]] = []  # (inverted key, text): heapq is a min-heap, we pop the largest key
  total = 0
  for path, text in texts:
    if not text:
      continue
    inverted = bytes(255 - b for b in _sample_key(seed, path, text))
    heapq.heappush(heap, (inverted, text))
    total += len(text)
    # The file with the largest key is not needed once the others already fill the budget.
    while heap and total - len(heap[0][1]) >= max_chars:
      total -= len(heapq.heappop(heap)[1])
  ordered = [text for _, text in sorted(heap, reverse=True)]  # ascending key
  if ordered and total > max_chars:
    ordered[-1] = _truncate_lines(ordered[-1], len(ordered[-1]) - (total - max_chars))
  return [text for text in ordered if text]


def training_sample(corpus_dir: str, chars_per_language: int, seed: int) -> dict[str, list[str]]:
  """Per language present under corpus_dir, its training sample (see `train_vocabulary`)."""
  return {language.name: sample_language(records.read_texts(corpus_dir, language.name, "train"),
                                         chars_per_language, seed)
          for language in languages.LANGUAGES
          if storage.isdir(storage.join(corpus_dir, language.name))}


def _split_long_line(line: str, max_bytes: int) -> Iterator[str]:
  # A UTF-8 character is at most 4 bytes, so max_bytes // 4 characters always fit.
  step = max(1, max_bytes // 4)
  for start in range(0, len(line), step):
    yield line[start:start + step]


def training_sentences(text: str, max_bytes: int = MAX_SENTENCE_BYTES) -> Iterator[str]:
  """The file as one sentence, or, when longer than max_bytes, consecutive chunks of whole lines."""
  if len(text.encode("utf-8")) <= max_bytes:
    yield text
    return
  chunk: list[str] = []
  size = 0
  for line in text.splitlines(keepends=True):
    pieces = [line] if len(line.encode("utf-8")) <= max_bytes else list(_split_long_line(line, max_bytes))
    for piece in pieces:
      piece_size = len(piece.encode("utf-8"))
      if chunk and size + piece_size > max_bytes:
        yield "".join(chunk)
        chunk, size = [], 0
      chunk.append(piece)
      size += piece_size
  if chunk:
    yield "".join(chunk)


# ---- training ---------------------------------------------------------------------------------


def trainer_options(vocab_size: int, extra_ids: int, whitespace: str = DEFAULT_WHITESPACE) -> dict[str, object]:
  """SentencePieceTrainer options; the module docstring says why each one is set."""
  if whitespace not in WHITESPACE_MODES:
    raise ValueError(f"whitespace must be one of {WHITESPACE_MODES}, got {whitespace!r}")
  learned = whitespace == "learned"
  return dict(
      model_type="unigram",
      vocab_size=vocab_size - extra_ids,  # seqio appends the sentinels on top
      normalization_rule_name="identity",
      add_dummy_prefix=False,
      remove_extra_whitespaces=False,
      byte_fallback=True,
      character_coverage=0.9999,  # rarer characters go to byte fallback instead of eating pieces
      split_digits=True,
      control_symbols=list(CONTROL_TOKENS),  # never produced from text: the pipeline inserts them
      # Tabs are listed either way (SentencePiece never learns them); space runs are listed or learned.
      user_defined_symbols=list(TAB_RUNS if learned else WHITESPACE_RUNS),
      allow_whitespace_only_pieces=learned,
      max_sentence_length=MAX_SENTENCE_BYTES,
      max_sentencepiece_length=16,
      input_sentence_size=0,  # use the whole sample: it is already the size we want
      pad_id=0, eos_id=1, unk_id=2, bos_id=-1,
      hard_vocab_limit=True,  # exactly vocab_size pieces, or an error we turn into advice
      minloglevel=2,  # errors only (they raise anyway): its INFO and .vocab-format warnings bury our output
  )


def _model_prefix(output: str) -> str:
  if not output.endswith(".model"):
    raise ValueError(f"--output must end in .model (the .vocab is written next to it), got {output!r}")
  return output[:-len(".model")]


def _explain(error: RuntimeError, corpus_dir: str, vocab_size: int, extra_ids: int) -> Exception:
  """SentencePiece's size errors as advice; anything else unchanged."""
  sizes = f"vocab_size {vocab_size} ({vocab_size - extra_ids} SentencePiece pieces + {extra_ids} extra ids)"
  if "Vocabulary size too high" in str(error):  # the corpus has fewer distinct pieces than asked
    return ValueError(f"corpus {corpus_dir!r} is too small for {sizes}: use a smaller --vocab_size "
                      f"or more data (SentencePiece: {error})")
  if "Vocabulary size is smaller than required_chars" in str(error):  # alphabet + byte pieces do not fit
    return ValueError(f"{sizes} cannot hold the alphabet of corpus {corpus_dir!r}, the 256 byte pieces "
                      f"and the special symbols: use a larger --vocab_size (SentencePiece: {error})")
  return error


def train_vocabulary(corpus_dir: str, vocab_size: int, output: str, extra_ids: int = DEFAULT_EXTRA_IDS,
                     chars_per_language: int = DEFAULT_CHARS_PER_LANGUAGE, seed: int = 0,
                     whitespace: str = DEFAULT_WHITESPACE) -> str:
  """Trains the code vocabulary on corpus_dir's train split and writes `output` (+ `.vocab`).

  Languages are weighted uniformly, as in the paper: each language present under corpus_dir
  contributes up to `chars_per_language` characters of whole files chosen in a seeded random order,
  and a language with less contributes everything it has (we do not repeat small languages: copies
  would only inflate their counts, not add new strings). The file sample depends only on the seed
  and the corpus; SentencePiece's own randomness is seeded with the same seed.

  Returns `output`. Raises ValueError naming corpus_dir when it has no training text, or when
  SentencePiece cannot reach `vocab_size - extra_ids` pieces on it.
  """
  if not 0 <= extra_ids < vocab_size:
    raise ValueError(f"need 0 <= extra_ids < vocab_size, got extra_ids={extra_ids}, vocab_size={vocab_size}")
  if chars_per_language <= 0:
    raise ValueError(f"chars_per_language must be positive, got {chars_per_language}")
  prefix = _model_prefix(output)
  sample = training_sample(corpus_dir, chars_per_language, seed)
  if not any(sample.values()):
    expected = records.shard_pattern(corpus_dir, "<language>", "train")
    raise ValueError(f"no training text in corpus {corpus_dir!r}: expected shards {expected} for languages "
                     f"among {', '.join(l.name for l in languages.LANGUAGES)}")
  # A generator, so the chunked sentences are not a second copy of the sample in memory.
  sentences = (s for texts in sample.values() for text in texts for s in training_sentences(text))
  storage.makedirs(storage.dirname(output))
  spm.set_random_generator_seed(seed)
  # SentencePiece writes local files only: train into a temporary folder, then copy both files to
  # `output` (local or a bucket) whole.
  with tempfile.TemporaryDirectory() as local:
    local_prefix = os.path.join(local, "spm")
    try:
      spm.SentencePieceTrainer.train(sentence_iterator=sentences, model_prefix=local_prefix,
                                     **trainer_options(vocab_size, extra_ids, whitespace))
    except RuntimeError as error:
      raise _explain(error, corpus_dir, vocab_size, extra_ids) from error
    for suffix in (".vocab", ".model"):  # the .model last: its presence means both are there
      with open(local_prefix + suffix, "rb") as f:
        storage.write_atomic(prefix + suffix, f.read())
  return output


# ---- using the vocabulary ---------------------------------------------------------------------


def _sentinel_pieces(extra_ids: int) -> list[str]:
  return [f"{_ESCAPED_SPACE}<extra_id_{i}>" for i in range(extra_ids)]  # as seqio adds them


# ---- how codelm encodes ------------------------------------------------------------------------
# SentencePiece encodes a text by the best-scoring path of pieces (Viterbi). Where two paths tie, the
# winner is an accident of the implementation, and they tie often in code: runs of one character
# with pieces of several lengths ("\n\n\n" as "\n" + "\n\n" or "\n\n" + "\n"; 30 spaces as 12+12+6
# or 10+10+10), and paths within float32 rounding of the score SentencePiece accumulates over the
# whole text (-30,000 after a few pages: steps of 0.002). And SentencePiece builds disagree on
# user-defined pieces, which get no stored score but a bonus each build computes (tf_text's: -0.1 for
# every one; the Python package 0.2's: 0.1 per UTF-8 byte beyond the first), so "    build" was
# "▁▁▁ ▁build" in training data (SeqIO tokenises with tf_text) but "▁▁▁▁ build" in prompts and
# fine-tuning data (Python). Measured on 582 real files (bench/hf_tokenizer_agreement.py): the two
# gave other ids for 428 files, 0.99% of all ids.
# So codelm's vocabulary is encoded as follows, by every encoder alike (Python, TensorFlow, the
# Hugging Face export):
# - Scores are multiples of SCORE_QUANTUM, user-defined pieces (the whitespace runs) ordinary pieces
#   scoring RUN_PIECE_SCORE, tf_text's bonus, which every run so far was trained on.
# - The text is encoded in segments: a run of blanks (spaces, tabs) and the characters up to the next
#   blank, at most SEGMENT_CHARS of each. No piece crosses from a character into a following blank (a
#   piece holds spaces only at its start, as SentencePiece trains with split_by_whitespace; tab
#   pieces are tab runs), so these cuts change nothing except within a single word or blank run
#   longer than SEGMENT_CHARS; rounding moves a score by at most 2**-10, which changes only paths
#   that nearly tied.
# In a segment every path score is then a sum that float32 holds exactly (a path over its at most 512
# characters scores above -15,000 even in byte fallback, about -27 a character; float32 holds
# multiples of 2**-9 exactly up to 32,768), so ties are exact ties and every encoder breaks them the same way
# (SentencePiece's and tokenizers' Viterbi keep the first of equal candidates: the path whose last
# piece starts first).
SCORE_QUANTUM = 2.0 ** -9
RUN_PIECE_SCORE = -0.1
SEGMENT_CHARS = 256


def _quantized(score: float) -> float:
  return round(score / SCORE_QUANTUM) * SCORE_QUANTUM


@functools.lru_cache(maxsize=None)
def _with_control_specials(sp_model: bytes, extra_ids: int) -> bytes:
  """The serialized model codelm encodes with: the special tokens and sentinels typed CONTROL (never
  matched in text), user-defined pieces NORMAL scoring RUN_PIECE_SCORE, scores multiples of
  SCORE_QUANTUM (above)."""
  from sentencepiece import sentencepiece_model_pb2

  piece_type = sentencepiece_model_pb2.ModelProto.SentencePiece
  model = sentencepiece_model_pb2.ModelProto.FromString(sp_model)
  special = set(CONTROL_TOKENS) | set(_sentinel_pieces(extra_ids))
  for piece in model.pieces:
    if piece.piece in special:
      piece.type = piece_type.CONTROL
    elif piece.type == piece_type.USER_DEFINED:
      piece.type, piece.score = piece_type.NORMAL, _quantized(RUN_PIECE_SCORE)
    else:
      piece.score = _quantized(piece.score)
  return model.SerializeToString()


def check_segment_cuts(sp_model: bytes, name: str = "the vocabulary") -> None:
  """Raises ValueError when a piece would cross a segment cut (a blank after another character, or a
  tab beside another character): a vocabulary not trained by this module, which `segment_pattern`
  would encode otherwise than SentencePiece."""
  from sentencepiece import sentencepiece_model_pb2

  piece_type = sentencepiece_model_pb2.ModelProto.SentencePiece
  for piece in sentencepiece_model_pb2.ModelProto.FromString(sp_model).pieces:
    if piece.type not in (piece_type.NORMAL, piece_type.USER_DEFINED):
      continue  # never matched in text
    text = piece.piece
    if re.search(f"[^{_ESCAPED_SPACE}\t][{_ESCAPED_SPACE}\t]", text) or ("\t" in text and set(text) != {"\t"}):
      raise ValueError(f"{name}: piece {text!r} holds a blank after another character or a tab beside one: codelm "
                       "encodes text in segments cut there (data/vocab.py), so this vocabulary, not trained "
                       "by `python -m data.vocab`, cannot be used")


def segment_pattern(spaces: str = " " + _ESCAPED_SPACE) -> str:
  """A regex whose successive matches are the segments of a text (they cover it): up to SEGMENT_CHARS
  blanks and up to SEGMENT_CHARS other characters after them (at least one of the two). No
  look-ahead: RE2 (TensorFlow), Python's re and Oniguruma (Hugging Face tokenizers, which sees spaces
  as U+2581, `spaces="\u2581"`) find the same segments."""
  blank, n = f"[{spaces}\\t]", SEGMENT_CHARS
  return f"{blank}{{0,{n}}}[^{spaces}\\t]{{1,{n}}}|{blank}{{1,{n}}}"


def segments_tf(text: tf.Tensor) -> tf.Tensor:
  """`segment_pattern`'s segments of a scalar string, as a vector of strings, computed from the
  characters (2.7x faster than tf_text's regex_split, which also stops at a NUL character): a segment
  starts at the text's start, at a blank run after other characters, and every SEGMENT_CHARS
  characters into a run of blanks or of other characters."""
  chars, starts = tf.strings.unicode_decode_with_offsets(text, "UTF-8")
  n = tf.size(chars)
  blank = (chars == ord(" ")) | (chars == ord(_ESCAPED_SPACE)) | (chars == ord("\t"))
  run_start = tf.concat([[True], blank[1:] != blank[:-1]], 0)[:n]
  position = tf.range(n)
  in_run = position - tf.gather(tf.boolean_mask(position, run_start), tf.cumsum(tf.cast(run_start, tf.int32)) - 1)
  cut = (run_start & blank) | ((in_run % SEGMENT_CHARS == 0) & (in_run > 0)) | (position == 0)
  offsets = tf.cast(tf.boolean_mask(starts, cut), tf.int32)
  return tf.strings.substr(text, offsets, tf.concat([offsets[1:], [tf.strings.length(text)]], 0) - offsets)


class CodeVocabulary(seqio.SentencePieceVocabulary):
  """seqio's SentencePiece vocabulary whose special pieces are text-proof (see the module docstring)
  and which encodes segment by segment (above), in Python and in TensorFlow alike; `decode` still
  shows special pieces as their markers."""

  def _model_context(self):
    if self._model is None:
      from google.protobuf.message import DecodeError

      try:
        base = super()._model_context()
        sp_model = _with_control_specials(base.sp_model, self.extra_ids)
      except (DecodeError, RuntimeError) as error:  # protobuf's or SentencePiece's "cannot parse"
        raise ValueError(f"{self._sentencepiece_model_file} is not a SentencePiece model "
                         f"({type(error).__name__}: {error})") from None
      tokenizer = spm.SentencePieceProcessor()
      tokenizer.LoadFromSerializedProto(sp_model)
      self._model = seqio_vocabularies._ModelContext(tokenizer=tokenizer, sp_model=sp_model)
    return self._model

  @functools.cached_property
  def _segment_regex(self) -> re.Pattern:
    check_segment_cuts(self.sp_model, self._sentencepiece_model_file)
    return re.compile(segment_pattern())

  def _encode(self, s):
    segments = self._segment_regex.findall(s)
    return [i for ids in self.tokenizer.EncodeAsIds(segments) for i in ids] if segments else []

  def _encode_tf(self, s):
    """A string's ids (SeqIO maps scalars), or a RaggedTensor of them for a batch of strings."""
    s = tf.convert_to_tensor(s, tf.string)
    self._segment_regex  # noqa: B018 (checks, once, that no piece crosses the cuts)
    if s.shape.rank == 0:
      return self._encode_string_tf(s)
    if s.shape.rank == 1:
      return tf.map_fn(self._encode_string_tf, s, fn_output_signature=tf.RaggedTensorSpec([None], tf.int32))
    raise ValueError(f"encode_tf takes a string or a vector of strings, got shape {s.shape}")

  def _encode_string_tf(self, s):
    return self.tf_tokenizer.tokenize(segments_tf(s)).flat_values

  def _decode(self, ids):
    # Control pieces decode to nothing: show each special id as its marker ("[eod]", " <extra_id_0>").
    # Text never encodes to one, so decode(encode(text)) == text still holds.
    tokenizer = self.tokenizer
    text, run = [], []
    for i in map(int, ids):
      if 0 <= i < tokenizer.GetPieceSize() and tokenizer.IsControl(i) and i not in (self.pad_id, self.eos_id):
        text += [super()._decode(run), tokenizer.IdToPiece(i).replace(_ESCAPED_SPACE, " ")]
        run = []
      else:
        run.append(i)
    return "".join(text + [super()._decode(run)])


def get_vocabulary(path: str, extra_ids: int = DEFAULT_EXTRA_IDS) -> CodeVocabulary:
  """The vocabulary: the model's pieces, then `extra_ids` sentinels (sentinel 0 the highest id)."""
  return CodeVocabulary(path, extra_ids=extra_ids)


def special_token_ids(vocabulary) -> dict[str, int]:
  """The id of each special token ([code], [eod], the UL2 mode tokens); each is one control piece."""
  ids = {}
  for token in SPECIAL_TOKENS:
    token_id = vocabulary.tokenizer.piece_to_id(token)
    if token_id == vocabulary.tokenizer.unk_id():
      raise ValueError(f"{token!r} is not a piece of this vocabulary; train it with `python -m data.vocab`")
    ids[token] = token_id
  return ids


def fim_token_ids(vocabulary) -> dict[str, int]:
  """The id of each FIM sentinel (<fim_prefix>, <fim_suffix>, <fim_middle>); a ValueError naming the
  vocabulary's file when it has none (trained before FIM: retrain it with `python -m data.vocab`)."""
  ids = {token: vocabulary.tokenizer.piece_to_id(token) for token in FIM_TOKENS}
  missing = [token for token, i in ids.items() if i == vocabulary.tokenizer.unk_id()]
  if missing:
    name = getattr(vocabulary, "sentencepiece_model_file", None) or "the vocabulary"
    raise ValueError(f"{name} has no {' / '.join(missing)} piece{'s' if len(missing) > 1 else ''}, so it cannot "
                     "train or sample fill-in-the-middle: it was trained before FIM; train a new one with "
                     "`python -m data.vocab`")
  return ids


def _texts_with_fallback(corpus_dir: str, language: str, split: str) -> tuple[str, Iterator[str]]:
  """The texts of the split, or of train when that split is empty (a corpus without validation).

  Lazy: only the first text is read to decide, so a large split is never held in memory.
  """
  texts = (text for _, text in records.read_texts(corpus_dir, language, split))
  first = next(texts, None)
  if first is None and split != "train":
    return "train", (text for _, text in records.read_texts(corpus_dir, language, "train"))
  return split, itertools.chain([] if first is None else [first], texts)


def measure(vocabulary, corpus_dir: str, split: str = "validation",
            max_bytes_per_language: int = 10_000_000) -> dict[str, tuple[str, int, int]]:
  """Per language: (split measured, UTF-8 bytes, tokens) over up to max_bytes_per_language bytes."""
  stats = {}
  for language in languages.LANGUAGES:
    if not storage.isdir(storage.join(corpus_dir, language.name)):
      continue
    used_split, texts = _texts_with_fallback(corpus_dir, language.name, split)
    num_bytes = num_tokens = 0
    for text in texts:
      if num_bytes >= max_bytes_per_language:
        break
      num_bytes += len(text.encode("utf-8"))
      num_tokens += len(vocabulary.encode(text))
    if num_bytes:
      stats[language.name] = (used_split, num_bytes, num_tokens)
  return stats


def tokens_per_byte(vocabulary, corpus_dir: str, split: str = "validation") -> dict[str, float]:
  """Tokens per UTF-8 byte for each language (of `split`, or of train where `split` is empty)."""
  stats = measure(vocabulary, corpus_dir, split)
  return {name: tokens / num_bytes for name, (_, num_bytes, tokens) in stats.items()}


def format_table(stats: dict[str, tuple[str, int, int]]) -> str:
  lines = [f"{'language':<12} {'split':<10} {'bytes':>12} {'tokens':>12} {'tokens/byte':>12}"]
  for name, (split, num_bytes, tokens) in stats.items():
    lines.append(f"{name:<12} {split:<10} {num_bytes:>12,} {tokens:>12,} {tokens / num_bytes:>12.4f}")
  return "\n".join(lines)


# ---- command line -----------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
  parser = argparse.ArgumentParser(prog="python -m data.vocab", description=__doc__.splitlines()[0])
  parser.add_argument("--corpus", required=True, help="corpus directory (data/records.py format)")
  parser.add_argument("--vocab_size", type=int, required=True, help="ids in all, extra ids included")
  parser.add_argument("--output", required=True, help="path of the .model (the .vocab goes next to it)")
  parser.add_argument("--extra_ids", type=int, default=DEFAULT_EXTRA_IDS, help="sentinels seqio adds on top")
  parser.add_argument("--chars_per_language", type=int, default=DEFAULT_CHARS_PER_LANGUAGE,
                      help="training characters taken from each language at most")
  parser.add_argument("--seed", type=int, default=0, help="chooses the training files")
  parser.add_argument("--whitespace", choices=WHITESPACE_MODES, default=DEFAULT_WHITESPACE,
                      help="space runs as listed pieces (2..12 spaces) or learned by SentencePiece")
  return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
  args = parse_args(argv)
  output = train_vocabulary(args.corpus, args.vocab_size, args.output, extra_ids=args.extra_ids,
                            chars_per_language=args.chars_per_language, seed=args.seed,
                            whitespace=args.whitespace)
  vocabulary = get_vocabulary(output, extra_ids=args.extra_ids)
  print(f"wrote {output} ({vocabulary.vocab_size} ids: {vocabulary.vocab_size - args.extra_ids} pieces "
        f"+ {args.extra_ids} extra ids)")
  print(format_table(measure(vocabulary, args.corpus)))


if __name__ == "__main__":
  main()
