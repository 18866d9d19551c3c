"""SeqIO language tasks, their Beam caching pass, and the mixtures built from its counts."""

import os

import numpy as np
import pytest
import seqio

import code_corpus
from code_corpus import GO, LONG_PY, PY
from objectives import mixtures, records, tasks


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
  root = str(tmp_path_factory.mktemp("corpus"))
  vocab_path, vocabulary = code_corpus.build(root, extra_ids=100)
  names = tasks.register_tasks(root, vocabulary)
  return root, vocab_path, vocabulary, names


def _targets(name, length, split="train"):
  ds = seqio.get_mixture_or_task(name).get_dataset({"targets": length}, split=split, shuffle=False,
                                                    use_cached=False)
  return [ex["targets"].tolist() for ex in ds.as_numpy_iterator()]


def test_one_task_per_language_with_shards(corpus):
  _, _, _, names = corpus
  assert names == ["code_python", "code_go"]


def test_files_are_wrapped_in_code_and_eod(corpus):
  _, _, vocabulary, _ = corpus
  code_id, eod_id = (vocabulary.tokenizer.piece_to_id(p) for p in (tasks.CODE_TOKEN, tasks.EOD_TOKEN))
  examples = _targets("code_go", 4096)
  assert len(examples) == len(GO)
  decoded = set()
  for tokens in examples:
    assert tokens[0] == code_id and tokens[-1] == eod_id and code_id not in tokens[1:-1]
    decoded.add(vocabulary.decode(tokens[1:-1]))
  assert decoded == set(GO)


def test_long_files_are_split_into_chunks_and_no_token_is_lost(corpus):
  _, _, vocabulary, _ = corpus
  whole = [t for t in _targets("code_python", 100_000) if vocabulary.decode(t[1:-1]) == LONG_PY]
  assert len(whole) == 1 and len(whole[0]) > 3 * 64
  chunks = _targets("code_python", 64)
  assert max(len(c) for c in chunks) == 64
  # The chunks of the long file are consecutive: find where its first chunk starts and re-join.
  first = next(i for i, c in enumerate(chunks) if c == whole[0][:64])
  needed = -(-len(whole[0]) // 64)
  rejoined = [t for c in chunks[first:first + needed] for t in c]
  assert rejoined == whole[0]
  all_tokens = sum(len(t) for t in _targets("code_python", 100_000))
  assert sum(len(c) for c in chunks) == all_tokens


def test_beam_caching_counts_files_and_tokens(corpus, tmp_path):
  root, vocab_path, _, names = corpus
  counts = tasks.cache_tasks(root, vocab_path, cache_dir=str(tmp_path / "cache"))
  assert counts["code_go"]["examples"] == len(GO)
  assert counts["code_python"]["examples"] == len(PY) + 1
  for name in names:
    assert counts[name]["tokens"] == sum(len(t) for t in _targets(name, 100_000))
  assert os.path.exists(tmp_path / "cache" / "code_go" / "COMPLETED")

  # A training run registers tasks and mixtures from the corpus and reads the cache.
  rates = mixtures.register_corpus(root, vocab_path, budget_tokens=1000, cache_dir=str(tmp_path / "cache"))
  assert set(rates) == {mixtures.mixture_name(k) + suffix for k in mixtures.MIXTURE_KINDS for suffix in ("", "_ul2")}
  assert rates["code_unimax_2_ul2"] == {f"{task}_ul2": rate for task, rate in rates["code_unimax_2"].items()}
  assert seqio.get_mixture_or_task("code_unimax_2_ul2").get_rate(seqio.get_mixture_or_task("code_go_ul2")) > 0
  assert rates["code_natural"]["code_go"] == pytest.approx(
      counts["code_go"]["tokens"] / (counts["code_go"]["tokens"] + counts["code_python"]["tokens"]))
  cached = seqio.get_mixture_or_task("code_go").get_dataset({"targets": 100_000}, split="train", shuffle=False,
                                                              use_cached=True)
  assert sorted(ex["targets"].tolist() for ex in cached.as_numpy_iterator()) == sorted(_targets("code_go", 100_000))


def test_mixtures_register_with_rates_and_draw_a_plot(corpus, tmp_path):
  counts = {"code_python": 9000, "code_go": 1000}
  rates = mixtures.register_mixtures(counts, budget_tokens=5000)
  assert rates["code_natural"] == pytest.approx({"code_python": 0.9, "code_go": 0.1})
  assert rates["code_unimax_1"] == pytest.approx({"code_python": 0.8, "code_go": 0.2})
  assert rates["code_unimax_4"] == pytest.approx({"code_python": 0.5, "code_go": 0.5})
  mixture = seqio.get_mixture_or_task("code_unimax_1")
  assert sorted(t.name for t in mixture.tasks) == ["code_go", "code_python"]
  assert np.isclose(mixture.get_rate(seqio.get_mixture_or_task("code_go")), 0.2)
  table = mixtures.rates_table(counts, 5000)
  assert "| Python | 9,000 |" in table and "| Go | 1,000 |" in table
  mixtures.plot_rates(counts, 5000, str(tmp_path / "m.png"))
  assert (tmp_path / "m.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
  with pytest.raises(ValueError, match="unknown mixture kind"):
    mixtures.mixture_rates("unimax", counts, 10)


def test_validation_batches_of_an_empty_cached_split_are_empty(tmp_path):
  from training import data

  root = str(tmp_path / "corpus")
  vocab_path, _ = code_corpus.build(root)
  for shard in range(2):  # go keeps training files but no validation ones
    records.write_shard(os.path.join(root, records.shard_name("go", "validation", shard, 2)), [])
  tasks.cache_tasks(root, vocab_path)
  mixtures.register_corpus(root, vocab_path, budget_tokens=10_000)
  assert data.validation_batches("code_go", 64, 4, max_batches=2) == []
  python = data.validation_batches("code_python", 64, 4, max_batches=2)
  assert python and python[0]["decoder_input_tokens"].shape == (4, 64)
