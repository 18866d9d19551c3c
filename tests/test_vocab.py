"""The code vocabulary: exact round trip, whitespace and digit pieces, special tokens, seqio ids, CLI.

One small vocabulary (600 ids = 500 pieces + 100 extra ids) is trained per module on a generated
corpus of four languages with tabs, CRLF, deep indentation, unicode identifiers and comments.
"""

import os
import random
import re

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from data import records, vocab

VOCAB_SIZE, EXTRA_IDS = 600, 100
LANGUAGES = ("python", "java", "go", "lua")


SYLLABLES = ("get", "set", "val", "idx", "buf", "node", "tree", "item", "list", "map", "key", "user", "data",
             "count", "size", "name", "path", "file", "read", "write", "load", "save", "init", "run", "größe",
             "données", "処理", "ключ", "err", "ctx", "req", "resp", "conf", "log", "tmp", "max", "min")


def _ident(rng: random.Random) -> str:
  return "_".join(rng.choice(SYLLABLES) for _ in range(rng.randint(1, 3)))


def _python_file(rng: random.Random, i: int) -> str:
  name = rng.choice(["compute", "größe", "données", "処理", "value", "parse_line"])
  lines = [f"# módulo {i}: ünïcode comment — λ → ∑", f"def {name}_{i}(x, y={rng.randint(0, 99999)}):"]
  for depth in range(1, rng.randint(2, 6)):
    lines.append("    " * depth + f"if {_ident(rng)}[{rng.randint(0, 9)}] >= {rng.random():.6f}:")
    lines.append("    " * (depth + 1) + f"{_ident(rng)} = self.{_ident(rng)}({_ident(rng)}, {rng.randint(0, 99)})")
  lines.append("    " * 5 + f"return {{'k{i}': [x, y, {rng.randint(100, 10**6)}]}}")
  lines.append("")
  return "\n".join(lines * rng.randint(1, 4))


def _java_file(rng: random.Random, i: int) -> str:
  body = [f"public class Klass{i} {{", f"\tprivate int count = {rng.randint(0, 1 << 20)};",
          "\tpublic void run(String[] args) {"]
  for j in range(rng.randint(3, 10)):
    body.append("\t\t" + f"for (int j = 0; j < {rng.randint(1, 500)}; j++) {{ {_ident(rng)}.{_ident(rng)}(j * {j}); }}")
  body += ["\t\t// fin — «commentaire»", "\t}", "}", ""]
  return "\r\n".join(body)  # Windows line endings


def _go_file(rng: random.Random, i: int) -> str:
  lines = ["package main", "", 'import "fmt"', "", f"func Fn{i}(n int) int {{"]
  lines += ["\t" + f"{_ident(rng)} := n * {rng.randint(0, 9999)} // 计算 {_ident(rng)}" for _ in range(rng.randint(2, 8))]
  lines += ["\tfmt.Println(\"héllo, 世界\", n)", "\treturn n", "}", ""]
  return "\n".join(lines)


def _lua_file(rng: random.Random, i: int) -> str:
  lines = [f"local t{i} = {{}}", f"function t{i}.go(a, b)"]
  lines += [" " * (2 * d) + f"if {_ident(rng)} > {rng.randint(0, 300)} then b = b .. 'ñ{d}' end" for d in range(1, 8)]
  lines += ["            return a + b  -- twelve spaces of indent", "end", ""]
  return "\n".join(lines)


GENERATORS = {"python": _python_file, "java": _java_file, "go": _go_file, "lua": _lua_file}


def write_corpus(corpus_dir: str, files_per_language: int = 250, seed: int = 0) -> None:
  rng = random.Random(seed)
  for language in LANGUAGES:
    texts = [GENERATORS[language](rng, i) for i in range(files_per_language)]
    recs = [records.encode(text, f"src/{language}/f{i}") for i, text in enumerate(texts)]
    for split, part in (("train", recs[:-20]), ("validation", recs[-20:])):
      records.write_shard(os.path.join(corpus_dir, records.shard_name(language, split, 0, 1)), part)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> str:
  corpus_dir = str(tmp_path_factory.mktemp("corpus"))
  write_corpus(corpus_dir)
  return corpus_dir


@pytest.fixture(scope="module")
def model_path(corpus, tmp_path_factory) -> str:
  output = str(tmp_path_factory.mktemp("vocab") / "spm.model")
  return vocab.train_vocabulary(corpus, VOCAB_SIZE, output, extra_ids=EXTRA_IDS, seed=0)


@pytest.fixture(scope="module")
def vocabulary(model_path):
  return vocab.get_vocabulary(model_path, extra_ids=EXTRA_IDS)


def _pieces(path: str) -> list[tuple[str, float]]:
  import sentencepiece as spm

  processor = spm.SentencePieceProcessor(model_file=path)
  return [(processor.id_to_piece(i), processor.get_score(i)) for i in range(processor.get_piece_size())]


# ---- exact round trip -------------------------------------------------------------------------

CODE_CHARS = st.sampled_from(list("abcxyzXYZ_09(){}[]<>;:,.=+-*/\\\"'#@$%&|!?~^`") + [" ", "\t", "\n", "\r"])
CODE_CHUNKS = st.one_of(
    st.text(CODE_CHARS, max_size=20),
    st.integers(0, 20).map(lambda n: " " * n),  # indentation runs, past 12
    st.integers(0, 6).map(lambda n: "\t" * n),
    st.sampled_from(["\r\n", "\n\n", "def ", "return ", "[code]", "[eod]", "[NLU]", "<s>", "</s>", "<unk>"]),
    st.integers(0, 10**12).map(str),
    # Any Unicode scalar except U+2581, which SentencePiece decodes as a space (see the test below).
    st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\u2581"), max_size=8),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(CODE_CHUNKS, max_size=12).map("".join))
def test_round_trip_is_exact(vocabulary, text):
  assert vocabulary.decode(vocabulary.encode(text)) == text


def test_round_trip_of_the_corpus(vocabulary, corpus):
  for language in LANGUAGES:
    for _, text in records.read_texts(corpus, language, "validation"):
      assert vocabulary.decode(vocabulary.encode(text)) == text


def test_literal_escape_character_decodes_as_space(vocabulary):
  # SentencePiece's one known round-trip gap (documented in data/vocab.py).
  assert vocabulary.decode(vocabulary.encode("a\u2581b")) == "a b"


# ---- pieces -----------------------------------------------------------------------------------


def test_twelve_spaces_are_one_piece(vocabulary):
  assert len(vocabulary.encode(" " * 12)) == 1
  assert [len(vocabulary.encode(" " * n)) for n in range(1, 26)] == [-(-n // 12) for n in range(1, 26)]


def test_no_whitespace_piece_longer_than_twelve_spaces(model_path):
  runs = [piece for piece, _ in _pieces(model_path) if piece and set(piece) == {"\u2581"}]
  assert max(map(len, runs)) == 12


def test_learned_whitespace_pieces_are_learned_and_round_trip(corpus, tmp_path):
  options = vocab.trainer_options(VOCAB_SIZE, EXTRA_IDS, whitespace="learned")
  assert options["allow_whitespace_only_pieces"] and "\u2581\u2581" not in options["user_defined_symbols"]
  path = vocab.train_vocabulary(corpus, VOCAB_SIZE, str(tmp_path / "learned.model"), extra_ids=EXTRA_IDS,
                                whitespace="learned")
  from sentencepiece import sentencepiece_model_pb2

  model = sentencepiece_model_pb2.ModelProto.FromString(open(path, "rb").read())
  multi = [p for p in model.pieces if len(p.piece) > 1 and set(p.piece) == {"\u2581"}]
  assert multi and all(p.type == p.NORMAL for p in multi)  # learned pieces, none listed
  learned = vocab.get_vocabulary(path, extra_ids=EXTRA_IDS)
  for language in LANGUAGES:
    for _, text in records.read_texts(corpus, language, "validation"):
      assert learned.decode(learned.encode(text)) == text
  with pytest.raises(ValueError, match="whitespace"):
    vocab.trainer_options(VOCAB_SIZE, EXTRA_IDS, whitespace="both")


def test_tabs_are_pieces_not_bytes(vocabulary):
  assert len(vocabulary.encode("\t")) == 1 and len(vocabulary.encode("\t" * 4)) == 1
  assert vocabulary.tokenizer.id_to_piece(vocabulary.encode("\t")[0]) == "\t"


def test_digits_are_split(vocabulary):
  ids = vocabulary.encode("x = 1234567890")
  pieces = [vocabulary.tokenizer.id_to_piece(i) for i in ids]
  assert pieces[-10:] == list("1234567890")


def test_special_tokens_are_single_control_ids(vocabulary):
  ids = vocab.special_token_ids(vocabulary)
  assert set(ids) == {"[code]", "[eod]", "[NLU]", "[NLG]", "[S2S]"}
  assert len(set(ids.values())) == 5 and all(3 <= i < VOCAB_SIZE - EXTRA_IDS for i in ids.values())
  assert all(vocabulary.tokenizer.IsControl(i) for i in ids.values())


# Text that spells a special piece, as source files and prompts do.
SPECIAL_TEXTS = ["[code]", "[eod]", "[NLU]", "[NLG]", "[S2S]", "x = '[eod]'\n", "s = \"[code]\" + \"[S2S]\"",
                 " <extra_id_5>", "<extra_id_0>", "a <extra_id_99> b", "\t[eod][eod] <extra_id_1>\n",
                 "<fim_prefix>", "<fim_suffix>", "<fim_middle>", "s = '<fim_prefix>x<fim_suffix>y<fim_middle>'\n"]


def _special_ids(vocabulary) -> set[int]:
  sentinels = range(VOCAB_SIZE - EXTRA_IDS, VOCAB_SIZE)
  return set(vocab.special_token_ids(vocabulary).values()) | set(vocab.fim_token_ids(vocabulary).values()) | set(sentinels)


@pytest.mark.parametrize("text", SPECIAL_TEXTS)
def test_special_piece_text_stays_text(vocabulary, text):
  special = _special_ids(vocabulary)
  ids = list(vocabulary.encode(text))
  assert not special & set(ids), [vocabulary.tokenizer.id_to_piece(i) for i in ids]
  assert vocabulary.decode(ids) == text
  tf_ids = vocabulary.encode_tf(text).numpy().tolist()  # the TF tokenizer SeqIO's pipeline uses
  assert tf_ids == ids


def test_special_ids_decode_as_their_markers(vocabulary):
  ids = vocab.special_token_ids(vocabulary)
  encoded = [ids["[code]"]] + list(vocabulary.encode("x = 1")) + [ids["[eod]"], VOCAB_SIZE - 1]
  assert vocabulary.decode(encoded) == "[code]x = 1[eod] <extra_id_0>"


def test_vocabulary_with_user_defined_specials_is_made_text_proof(corpus, tmp_path):
  # A vocabulary trained before the special tokens were control symbols had them as user-defined pieces,
  # which SentencePiece matches in text: loading it through get_vocabulary must make them control pieces.
  import sentencepiece as spm

  options = vocab.trainer_options(VOCAB_SIZE, EXTRA_IDS)
  options["user_defined_symbols"] = list(vocab.SPECIAL_TOKENS) + options["user_defined_symbols"]
  del options["control_symbols"]
  texts = [t for language in LANGUAGES for _, t in records.read_texts(corpus, language, "train")]
  spm.SentencePieceTrainer.train(sentence_iterator=iter(texts), model_prefix=str(tmp_path / "old"), **options)
  raw = spm.SentencePieceProcessor(model_file=str(tmp_path / "old.model"))
  assert raw.encode("[eod]") == [raw.piece_to_id("[eod]")]  # the old behaviour, without the wrapper
  old = vocab.get_vocabulary(str(tmp_path / "old.model"), extra_ids=EXTRA_IDS)
  special = set(vocab.special_token_ids(old).values()) | set(range(VOCAB_SIZE - EXTRA_IDS, VOCAB_SIZE))
  for text in SPECIAL_TEXTS:
    ids = list(old.encode(text))
    assert not special & set(ids) and old.decode(ids) == text
  # It was trained before FIM: it serves everything else, and FIM refuses it naming its file.
  with pytest.raises(ValueError, match=r"old\.model has no <fim_prefix> / <fim_suffix> / <fim_middle> pieces.*"
                     r"python -m data.vocab"):
    vocab.fim_token_ids(old)


def test_fim_sentinels_are_single_control_pieces(vocabulary):
  ids = vocab.fim_token_ids(vocabulary)
  assert len(set(ids.values())) == 3
  assert all(vocabulary.tokenizer.IsControl(i) for i in ids.values())
  assert vocabulary.decode([ids["<fim_prefix>"]] + list(vocabulary.encode("a")) + [ids["<fim_middle>"]]) == \
      "<fim_prefix>a<fim_middle>"


# ---- ids as SeqIO expects them --------------------------------------------------------------


def test_seqio_ids(vocabulary, model_path):
  tokenizer = vocabulary.tokenizer
  assert (vocabulary.pad_id, vocabulary.eos_id, vocabulary.unk_id) == (0, 1, 2)
  assert (tokenizer.pad_id(), tokenizer.eos_id(), tokenizer.unk_id(), tokenizer.bos_id()) == (0, 1, 2, -1)
  assert vocabulary.vocab_size == VOCAB_SIZE
  assert len(_pieces(model_path)) == VOCAB_SIZE - EXTRA_IDS  # the file holds no sentinels


def test_sentinels_are_the_top_ids(vocabulary):
  tokenizer = vocabulary.tokenizer
  sentinels = [tokenizer.piece_to_id(f"\u2581<extra_id_{i}>") for i in range(EXTRA_IDS)]
  assert sentinels == list(range(VOCAB_SIZE - 1, VOCAB_SIZE - EXTRA_IDS - 1, -1))  # sentinel 0 highest
  ordinary = vocabulary.encode("def f(x):\n    return [x, 42]  # ok\n")
  assert max(ordinary) < VOCAB_SIZE - EXTRA_IDS


def test_vocab_file_is_next_to_the_model(model_path):
  assert os.path.exists(model_path[:-len(".model")] + ".vocab")


# ---- how codelm encodes: segments, quantized scores, one answer for every encoder ----------------

BLANKS = " \t\u2581"
# Text where SentencePiece's paths tie: runs of one character with pieces of several lengths (spaces
# past the longest run piece, tabs, newlines, rules of "=" and "-"), indentation before a word.
TIE_CHUNKS = st.one_of(
    CODE_CHUNKS,
    st.integers(1, 40).map(lambda n: " " * n + "x"),
    st.integers(1, 12).map(lambda n: "\t" * n),
    st.integers(2, 9).map(lambda n: "\n" * n),
    st.sampled_from(["=", "-", "*", "/", ")", "}"]).flatmap(lambda c: st.integers(2, 40).map(lambda n: c * n)),
    st.integers(200, 600).map(lambda n: "abc_" * (n // 4)),  # words past SEGMENT_CHARS
)


def _tie_text(rng: random.Random, corpus: str, length: int) -> str:
  """Corpus text with tie-prone runs spliced in at random places, about `length` characters."""
  texts = [t for language in LANGUAGES for _, t in records.read_texts(corpus, language, "validation")]
  parts, size = [], 0
  while size < length:
    text = rng.choice(texts)
    cut = rng.randrange(len(text))
    run = rng.choice([" " * rng.randint(13, 40), "\t" * rng.randint(5, 9), "\n" * rng.randint(3, 7),
                      "=" * rng.randint(5, 30), "    " + rng.choice(SYLLABLES)])
    parts += [text[:cut], run, text[cut:]]
    size += len(text) + len(run)
  return "".join(parts)


@settings(max_examples=100, deadline=None)
@given(st.lists(TIE_CHUNKS, max_size=12).map("".join))
@example("\x00 a\x00")
def test_segments_cover_the_text_and_are_cut_only_before_a_blank_run(text):
  segments = re.findall(vocab.segment_pattern(), text)
  assert "".join(segments) == text
  assert [s.decode("utf-8") for s in vocab.segments_tf(text).numpy().tolist()] == segments  # TensorFlow's
  n = vocab.SEGMENT_CHARS
  for before, segment in zip(segments, segments[1:]):
    blanks = len(before) - len(before.lstrip(BLANKS))
    word = len(before) - blanks
    # A cut is before a blank run that follows a word, or where a part reached SEGMENT_CHARS.
    assert (segment[0] in BLANKS and word > 0) or word == n or (word == 0 and blanks == n), (before, segment)


@settings(max_examples=100, deadline=None)
@given(st.lists(TIE_CHUNKS, max_size=12).map("".join))
@example("\x00")  # tf_text's regex ops stop at a NUL: found by this test
@example("a\x00 b\x00\x00  " + " " * 30 + "c")
def test_python_and_tensorflow_encoders_give_the_same_ids(vocabulary, text):
  ids = list(vocabulary.encode(text))
  assert vocabulary.encode_tf(text).numpy().tolist() == ids
  assert vocabulary.decode(ids) == text.replace("\u2581", " ")


def test_the_training_pipeline_s_ids_are_the_sampler_s_on_long_files(vocabulary, corpus):
  """SeqIO tokenises training data with encode_tf (tf_text's SentencePiece); the sampler and
  fine-tuning data use encode (the Python package's). On long files with ties they disagreed."""
  import tensorflow as tf

  rng = random.Random(0)
  texts = [_tie_text(rng, corpus, 20_000) for _ in range(4)]
  batched = vocabulary.encode_tf(tf.constant(texts))  # any shape: SeqIO maps scalars, this is a batch
  for text, tf_ids in zip(texts, batched.to_list()):
    assert tf_ids == list(vocabulary.encode(text))


def test_a_segment_s_ids_do_not_depend_on_the_text_before_it(vocabulary, corpus):
  """Float32 rounding of a whole-text path score made a tie's winner depend on what came before."""
  rng = random.Random(1)
  prefix = _tie_text(rng, corpus, 30_000).rstrip(BLANKS)
  for suffix in [" " * 30 + "x", "\t" * 7 + "y", " z\n\n\n\n\n" + "=" * 25 + "\n", "    " + "return"]:
    alone = list(vocabulary.encode(suffix))
    for cut in range(1000, len(prefix), 997):
      head = prefix[:cut].rstrip(BLANKS)
      ids = list(vocabulary.encode(head + suffix))
      assert ids[len(ids) - len(alone):] == alone, (suffix, cut)


def test_scores_are_quantized_and_run_pieces_score_tf_text_s_bonus(vocabulary, model_path, tmp_path):
  """The model codelm encodes with: no user-defined pieces (SentencePiece builds score them apart),
  run pieces ordinary with the score tf_text gave them (-0.1), every score a multiple of the quantum."""
  import sentencepiece as spm
  import tensorflow_text as tf_text
  from sentencepiece import sentencepiece_model_pb2

  model = sentencepiece_model_pb2.ModelProto.FromString(vocabulary.sp_model)
  assert not [p for p in model.pieces if p.type == p.USER_DEFINED]
  runs = [p for p in model.pieces if set(p.piece) in ({"\u2581"}, {"\t"}) and len(p.piece) > 1]
  assert len(runs) == 11 + 3 and {p.score for p in runs} == {-51 * vocab.SCORE_QUANTUM}
  assert all(p.score % vocab.SCORE_QUANTUM == 0 for p in model.pieces)
  # Indentation before a word is split as tf_text always split it (the ids every run was trained on):
  # the run keeps its last space when "w" scores better than "▁w". The Python package 0.2 gives the
  # space to "▁w" only when it scores 0.3 better. Words whose "▁w" scores 0.15 better tell them apart.
  trained = sentencepiece_model_pb2.ModelProto.FromString(open(model_path, "rb").read())
  scores = {p.piece: p for p in trained.pieces}
  words = [p.piece for p in trained.pieces if p.piece.isalpha() and "\u2581" + p.piece in scores]
  assert len(words) >= 10
  for word in words[::2]:
    scores["\u2581" + word].score = scores[word].score + 0.15
  path = str(tmp_path / "close.model")
  with open(path, "wb") as f:
    f.write(trained.SerializeToString())
  close = vocab.get_vocabulary(path, extra_ids=EXTRA_IDS)
  python = spm.SentencePieceProcessor(model_file=path)
  tf_tokenizer = tf_text.SentencepieceTokenizer(model=open(path, "rb").read())
  outcomes, python_differs = set(), 0
  for word in words:
    for n in range(3, 13):
      text = " " * n + word
      ids = list(close.encode(text))
      assert ids == tf_tokenizer.tokenize(text).numpy().tolist() == close.encode_tf(text).numpy().tolist(), text
      outcomes.add(close.tokenizer.id_to_piece(ids[-1]).startswith("\u2581"))
      python_differs += ids != python.encode(text)
  assert outcomes == {True, False} and python_differs >= 10 * len(words[::2])


def test_a_vocabulary_with_pieces_across_the_cuts_is_refused(model_path, tmp_path):
  from sentencepiece import sentencepiece_model_pb2

  model = sentencepiece_model_pb2.ModelProto.FromString(open(model_path, "rb").read())
  model.pieces.add(piece="x\u2581y", score=-5.0, type=model.pieces[0].NORMAL)
  (tmp_path / "foreign.model").write_bytes(model.SerializeToString())
  foreign = vocab.get_vocabulary(str(tmp_path / "foreign.model"), extra_ids=EXTRA_IDS)
  with pytest.raises(ValueError, match=f"{tmp_path / 'foreign.model'}: piece 'x\u2581y'"):
    foreign.encode("x y")
  with pytest.raises(ValueError, match="foreign.model: piece"):
    foreign.encode_tf("x y")


# ---- sampling and determinism -----------------------------------------------------------------


def test_a_file_that_is_not_a_sentencepiece_model_is_refused_naming_it(tmp_path):
  path = tmp_path / "prompts.jsonl"
  path.write_text('{"qid": "q1", "prompt": "def f():"}\n')
  with pytest.raises(ValueError, match=f"{path} is not a SentencePiece model"):
    vocab.get_vocabulary(str(path)).encode("x")


def test_sample_is_uniform_capped_and_order_free():
  files = [(f"f{i}", f"line {i}\n" * (i + 1)) for i in range(50)]  # 7..500 characters each
  total = sum(len(text) for _, text in files)
  sample = vocab.sample_language(files, 1000, seed=0)
  assert 1000 - len("line 49\n") < sum(map(len, sample)) <= 1000  # the last file is cut at a line end
  assert all(text.endswith("\n") for text in sample)
  assert vocab.sample_language(list(reversed(files)), 1000, seed=0) == sample  # shard order does not matter
  assert vocab.sample_language(files, 1000, seed=1) != sample
  assert sum(map(len, vocab.sample_language(files, 10**9, seed=0))) == total  # a small language gives all


def test_training_sentences_cover_the_file():
  text = "short line\n" * 300 + "x" * 5000 + "\n" + "é" * 3000
  chunks = list(vocab.training_sentences(text, max_bytes=1024))
  assert "".join(chunks) == text
  assert all(len(chunk.encode("utf-8")) <= 1024 for chunk in chunks)
  assert list(vocab.training_sentences("small\n", max_bytes=1024)) == ["small\n"]


def test_training_is_deterministic(corpus, model_path, tmp_path):
  again = vocab.train_vocabulary(corpus, VOCAB_SIZE, str(tmp_path / "again.model"), extra_ids=EXTRA_IDS, seed=0)
  assert _pieces(again) == _pieces(model_path)


# ---- tokens per byte and the command line -----------------------------------------------------


def test_tokens_per_byte(vocabulary, corpus, tmp_path):
  ratios = vocab.tokens_per_byte(vocabulary, corpus)
  assert set(ratios) == set(LANGUAGES)
  assert all(0 < ratio < 1 for ratio in ratios.values())
  # A corpus without a validation split is measured on train.
  text = "print('hello')\n" * 10
  records.write_shard(os.path.join(str(tmp_path), records.shard_name("python", "train", 0, 1)),
                      [records.encode(text, "a.py")])
  assert vocab.tokens_per_byte(vocabulary, str(tmp_path)) == {
      "python": len(vocabulary.encode(text)) / len(text)}


def test_cli_end_to_end(corpus, tmp_path, capsys):
  output = str(tmp_path / "cli" / "spm.model")
  vocab.main(["--corpus", corpus, "--vocab_size", "520", "--output", output, "--extra_ids", "20",
              "--chars_per_language", "60000", "--seed", "3"])
  printed = capsys.readouterr().out
  assert os.path.exists(output) and os.path.exists(output[:-len(".model")] + ".vocab")
  assert vocab.get_vocabulary(output, extra_ids=20).vocab_size == 520
  assert "tokens/byte" in printed
  for language in LANGUAGES:
    assert any(line.startswith(language) for line in printed.splitlines())


# ---- errors -----------------------------------------------------------------------------------


def test_empty_corpus_is_an_error(tmp_path):
  with pytest.raises(ValueError, match=str(tmp_path)):
    vocab.train_vocabulary(str(tmp_path), VOCAB_SIZE, str(tmp_path / "spm.model"))


def test_too_small_corpus_says_what_to_do(tmp_path):
  corpus_dir = str(tmp_path / "tiny")
  records.write_shard(os.path.join(corpus_dir, records.shard_name("go", "train", 0, 1)),
                      [records.encode("package main\n\nfunc main() {}\n", "main.go")])
  with pytest.raises(ValueError, match="smaller --vocab_size or more data") as error:
    vocab.train_vocabulary(corpus_dir, 2000, str(tmp_path / "spm.model"))
  assert corpus_dir in str(error.value)
