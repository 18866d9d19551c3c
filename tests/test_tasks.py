"""SeqIO language tasks, their Beam caching pass, and the mixtures built from its counts."""

import collections
import os

import numpy as np
import pytest
import seqio

import code_corpus
from code_corpus import GO, LONG_PY, PY
from data import mixtures, records, tasks, vocab


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


def test_beam_caching_counts_files_tokens_and_document_lengths(corpus, tmp_path):
  root, vocab_path, _, names = corpus
  sizes = tasks.cache_tasks(root, vocab_path, cache_dir=str(tmp_path / "cache"))
  assert sizes["code_go"].documents == len(GO)
  assert sizes["code_python"].documents == len(PY) + 1
  for name in names:
    documents = _targets(name, 100_000)
    assert sizes[name].tokens == sum(len(t) for t in documents)
    assert sizes[name].lengths == tuple(sorted(collections.Counter(len(t) for t in documents).items()))
  assert os.path.exists(tmp_path / "cache" / "code_go" / "COMPLETED")

  # A training run registers tasks and mixtures from the corpus and reads the cache.
  plans = mixtures.register_corpus(root, vocab_path, rows=100, sequence_length=64, cache_dir=str(tmp_path / "cache"))
  assert set(plans) == {mixtures.mixture_name(k, suffix) for k in mixtures.MIXTURE_KINDS for suffix in ("", "_ul2")}
  natural, natural_ul2 = plans["code_natural"], plans["code_natural_ul2"]
  go_share = sizes["code_go"].tokens / (sizes["code_go"].tokens + sizes["code_python"].tokens)
  assert natural.token_shares["code_go"] == pytest.approx(go_share)
  assert natural_ul2.token_shares["code_go_ul2"] == pytest.approx(go_share)  # one declared distribution
  # Natural example rates are proportional to the examples each task makes (64-token chunks here).
  chunks = {name: sum(-(-len(t) // 64) for t in _targets(name, 100_000)) for name in names}
  assert natural.example_rates["code_go"] == pytest.approx(chunks["code_go"] / sum(chunks.values()))
  mixture = seqio.get_mixture_or_task("code_unimax_2_ul2")
  assert mixture.get_rate(seqio.get_mixture_or_task("code_go_ul2")) == pytest.approx(
      plans["code_unimax_2_ul2"].example_rates["code_go_ul2"])
  cached = seqio.get_mixture_or_task("code_go").get_dataset({"targets": 100_000}, split="train", shuffle=False,
                                                              use_cached=True)
  assert sorted(ex["targets"].tolist() for ex in cached.as_numpy_iterator()) == sorted(_targets("code_go", 100_000))


def test_paper_table3_from_the_cache_counts():
  sizes = {"code_go": tasks.CachedSizes(30, 900, ((30, 30),)), "code_python": tasks.CachedSizes(10, 100, ((10, 10),))}
  table = tasks.paper_table3(sizes).splitlines()
  assert table[0].startswith("| language | extensions | examples | share (%)")
  # In the paper's language order (Python before Go), its share beside ours.
  assert table[2] == "| Python | .py .py3 .pyi .pyw .pxi | 10 | 25.00 | 16.80 |"
  assert table[3] == "| Go | .go | 30 | 75.00 | 3.09 |"
  assert table[4] == "| total | | 40 | 100.00 | |"


def test_missing_length_histogram_is_an_error_that_says_what_to_run(corpus, tmp_path):
  root, vocab_path, _, _ = corpus
  cache = tmp_path / "cache"
  tasks.cache_tasks(root, vocab_path, cache_dir=str(cache))
  os.remove(tasks.lengths_path(str(cache / "code_go"), "train"))
  with pytest.raises(FileNotFoundError, match=r"lengths\.train\.json.*python -m data\.tasks"):
    tasks.load_sizes(str(cache), ["code_go"])


def _uniform_corpus(tokens, tokens_per_example, sequence_length):
  """A TaskStats whose examples of task t all have tokens_per_example[t] tokens (exact packing arithmetic)."""
  return mixtures.TaskStats(dict(tokens), {t: tokens[t] / tokens_per_example[t] for t in tokens},
                         {t: np.full(100, tokens_per_example[t]) for t in tokens}, sequence_length)


def test_plans_turn_token_shares_into_example_rates_and_epochs(tmp_path):
  # Every example fills a row: the budget is exactly rows x sequence length, as UniMax's arithmetic wants.
  corpus = _uniform_corpus({"code_python": 9000, "code_go": 1000}, {"code_python": 10, "code_go": 10}, 10)
  plans = mixtures.register_mixtures(corpus, rows=500)
  assert plans["code_natural"].budget_tokens == pytest.approx(5000)
  assert plans["code_natural"].token_shares == pytest.approx({"code_python": 0.9, "code_go": 0.1})
  assert plans["code_unimax_1"].token_shares == pytest.approx({"code_python": 0.8, "code_go": 0.2})
  assert plans["code_unimax_1"].epochs["code_go"] == pytest.approx(1.0)  # capped at N = 1
  assert plans["code_unimax_4"].token_shares == pytest.approx({"code_python": 0.5, "code_go": 0.5})
  mixture = seqio.get_mixture_or_task("code_unimax_1")
  assert sorted(t.name for t in mixture.tasks) == ["code_go", "code_python"]
  assert np.isclose(mixture.get_rate(seqio.get_mixture_or_task("code_go")), 0.2)

  # Go examples carry half the tokens: to deliver the same token shares SeqIO must pick Go twice as often.
  short_go = _uniform_corpus({"code_python": 9000, "code_go": 1000}, {"code_python": 10, "code_go": 5}, 10)
  plan = mixtures.plan_mixture("natural", short_go, rows=500)
  assert plan.token_shares == pytest.approx({"code_python": 0.9, "code_go": 0.1})
  assert plan.example_rates["code_go"] == pytest.approx(0.2 / 1.1)  # 0.1 / 5 against 0.9 / 10
  # Two 5-token Go examples share a row, so rows carry fewer examples' worth of Python tokens: fill < 1.
  assert plan.examples_per_row > 1 and plan.tokens_per_row <= 10

  table = mixtures.rates_table(corpus, plans)
  assert "| Python | 9,000 | 900 | 90.00 |" in table and "| Go | 1,000 | 100 | 10.00 |" in table
  mixtures.plot_rates(plans, str(tmp_path / "m.png"))
  assert (tmp_path / "m.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
  with pytest.raises(ValueError, match="unknown mixture kind"):
    mixtures.token_shares("unimax", corpus.tokens, 10)


def test_special_piece_text_survives_the_task_pipeline(corpus, tmp_path):
  _, _, vocabulary, _ = corpus
  root = str(tmp_path / "special")
  text = "-- x = '[eod]' .. \"[code]\" [S2S][NLU] [NLG] <extra_id_0> <extra_id_7>\nreturn '[eod]'\n"
  records.write_shard(os.path.join(root, records.shard_name("lua", "train", 0, 1)), [records.encode(text, "a.lua")])
  names = tasks.register_tasks(root, vocabulary)
  assert names == ["code_lua"]
  special = set(vocab.special_token_ids(vocabulary).values())
  special |= set(range(vocabulary.vocab_size - vocabulary.extra_ids, vocabulary.vocab_size))
  (tokens,) = _targets("code_lua", 4096)
  code_id, eod_id = (vocabulary.tokenizer.piece_to_id(p) for p in (tasks.CODE_TOKEN, tasks.EOD_TOKEN))
  assert tokens[0] == code_id and tokens[-1] == eod_id and not special & set(tokens[1:-1])
  assert vocabulary.decode(tokens[1:-1]) == text
  # Through the UL2 objectives too: the one [code] and [eod] are the pipeline's.
  (ul2_name,) = tasks.register_ul2_tasks(names)
  ds = seqio.get_mixture_or_task(ul2_name).get_dataset({"inputs": 32, "targets": 32}, split="train", shuffle=False,
                                                         use_cached=False, seed=3)
  ids = [i for ex in ds.as_numpy_iterator() for key in ("inputs", "targets") for i in ex[key].tolist()]
  assert ids.count(code_id) == 1 and ids.count(eod_id) == 1
  for name in names + [ul2_name]:  # registries are global: leave no Lua task of this corpus to later tests
    seqio.TaskRegistry.remove(name)


def test_validation_batches_of_an_empty_cached_split_are_empty(tmp_path):
  from data import batches

  root = str(tmp_path / "corpus")
  vocab_path, _ = code_corpus.build(root)
  for shard in range(2):  # go keeps training files but no validation ones
    records.write_shard(os.path.join(root, records.shard_name("go", "validation", shard, 2)), [])
  tasks.cache_tasks(root, vocab_path)
  mixtures.register_corpus(root, vocab_path, rows=100, sequence_length=64)
  assert batches.validation_batches("code_go", 64, 4, max_batches=2) == []
  python = batches.validation_batches("code_python", 64, 4, max_batches=2)
  assert python and python[0]["decoder_input_tokens"].shape == (4, 64)


def test_a_second_corpus_in_one_process_reads_its_own_cache(corpus, tmp_path):
  root, vocab_path, _, _ = corpus
  tasks.cache_tasks(root, vocab_path, cache_dir=str(tmp_path / "first_cache"))
  mixtures.register_corpus(root, vocab_path, rows=10, sequence_length=64, cache_dir=str(tmp_path / "first_cache"))
  other = str(tmp_path / "other")
  texts = [records.encode(text, f"go/{i}") for i, text in enumerate(GO[:3])]
  records.write_shard(os.path.join(other, records.shard_name("go", "train", 0, 1)), texts)
  records.write_shard(os.path.join(other, records.shard_name("go", "validation", 0, 1)), texts[:1])
  tasks.cache_tasks(other, vocab_path)
  mixtures.register_corpus(other, vocab_path, rows=10, sequence_length=64)
  cached = seqio.get_mixture_or_task("code_go").get_dataset({"targets": 100_000}, split="train", shuffle=False,
                                                              use_cached=True)
  assert len(list(cached.as_numpy_iterator())) == 3  # not the first corpus's 25 Go files
