"""Mixtures deliver the distribution they declare, measured on the stream training reads.

Two languages whose examples differ ~6x in length (many short Python files; long Go files cut into
128-token chunks) make the old failure visible: rates proportional to tokens, applied per example,
would give Python about 4x its declared token share.
"""

import os
import random

import numpy as np
import pytest

from code_corpus import _WORDS
from data import mixture_shares, mixtures, packing, records, tasks
from objectives import ul2
from data.vocab import train_vocabulary

SEQ = 128


def _short_python(rng):
  return "".join(f"def {rng.choice(_WORDS)}(x):\n    return x + {rng.randint(0, 99)}\n"
                 for _ in range(1))


def _long_go(rng):
  funcs = "".join(f"func {rng.choice(_WORDS)}{j}(n int) int {{\n\tif n > {rng.randint(0, 999)} {{\n"
                  f"\t\treturn n * {rng.randint(2, 9)}\n\t}}\n\treturn n - {j}\n}}\n\n"
                  for j in range(rng.randint(12, 30)))
  return "package main\n\n" + funcs


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
  root = str(tmp_path_factory.mktemp("mixture_corpus"))
  rng = random.Random(0)
  for language, make, count in (("python", _short_python, 4000), ("go", _long_go, 600)):
    texts = [records.encode(make(rng), f"{language}/{i}") for i in range(count)]
    for shard in range(2):
      records.write_shard(os.path.join(root, records.shard_name(language, "train", shard, 2)), texts[shard::2])
      records.write_shard(os.path.join(root, records.shard_name(language, "validation", shard, 2)), [])
  vocab_path = train_vocabulary(root, vocab_size=500, output=os.path.join(root, "spm.model"), extra_ids=100)
  tasks.cache_tasks(root, vocab_path)
  corpora = mixtures.register_language_tasks(root, vocab_path, SEQ)
  return root, vocab_path, corpora


def test_fixture_languages_differ_in_example_length(corpus):
  _, _, corpora = corpus
  plain = corpora[""]
  python, go = (plain.tokens[t] / plain.examples[t] for t in ("code_python", "code_go"))
  assert go > 5 * python and plain.tokens["code_go"] > 3 * plain.tokens["code_python"]


@pytest.mark.parametrize("suffix", ["", "_ul2"])
def test_natural_mixture_delivers_its_declared_token_shares(corpus, suffix):
  _, _, corpora = corpus
  corpus_ = corpora[suffix]
  (plan,) = mixtures.register_mixtures(corpus_, rows=5000, suffix=suffix, kinds=("natural",)).values()
  name = mixtures.mixture_name("natural", suffix)
  drawn = mixture_shares.draw(name, SEQ, 20_000, seed=1, progress=False)
  measured = mixture_shares.summarize(drawn, plan, corpus_, SEQ)
  for task, declared in plan.token_shares.items():
    assert abs(measured.document_share[task] - declared) < 0.01, (task, measured.document_share[task], declared)
  # The example shares are far from the token shares: rates per example had to be converted.
  python = "code_python" + suffix
  assert measured.examples_share[python] > plan.token_shares[python] + 0.3
  # SeqIO's packing made the rows the planner simulated, and the planned fill is the realized one.
  assert packing.rows_for(drawn.row_tokens.tolist(), SEQ) == len(drawn.examples_per_row)
  assert measured.document_tokens_per_row == pytest.approx(plan.tokens_per_row, rel=0.02)


@pytest.mark.parametrize("suffix", ["", "_ul2"])
def test_unimax_cap_holds_over_the_budget(corpus, suffix):
  _, _, corpora = corpus
  corpus_ = corpora[suffix]
  python = "code_python" + suffix
  small = corpus_.tokens[python]
  # A budget of ~3.5x Python's tokens: an even split would give Python 1.75 epochs, so N = 1 caps it.
  rows = int(3.5 * small / (0.9 * SEQ))
  (plan,) = mixtures.register_mixtures(corpus_, rows=rows, suffix=suffix, kinds=("unimax_1",)).values()
  assert plan.epochs[python] == pytest.approx(1.0, rel=1e-3)  # the plan's budget settles to 0.1%
  assert plan.token_shares[python] < 0.5
  name = mixtures.mixture_name("unimax_1", suffix)
  drawn = mixture_shares.draw(name, SEQ, int(1.15 * rows * plan.examples_per_row), seed=2, progress=False)
  consumed = mixture_shares.document_tokens_in_rows(drawn, rows)
  assert consumed[python] <= 1.05 * small, consumed[python] / small
  assert consumed[python] >= 0.95 * small, consumed[python] / small  # and the budget model is not just loose


def test_expected_examples_per_pass_match_the_pipeline(corpus):
  # One pass of the UL2 task over Go's documents, at three seeds: the renewal expectation is exact.
  import seqio

  _, _, corpora = corpus
  expected = corpora["_ul2"].examples["code_go_ul2"]
  counts = []
  for seed in range(3):
    ds = seqio.get_mixture_or_task("code_go_ul2").get_dataset(
        {"inputs": SEQ, "targets": SEQ}, split="train", shuffle=False, use_cached=False, seed=seed, num_epochs=1)
    counts.append(sum(1 for _ in ds.as_numpy_iterator()))
  assert np.mean(counts) == pytest.approx(expected, rel=0.01)
  plain = seqio.get_mixture_or_task("code_go").get_dataset({"targets": SEQ}, split="train", shuffle=False,
                                                            use_cached=True, num_epochs=1)
  assert sum(1 for _ in plain.as_numpy_iterator()) == corpora[""].examples["code_go"]  # exact for chunks


def test_a_task_or_mixture_resolves_once_to_its_objective(corpus):
  """The objective is a field of the resolved stream, read from what the tasks emit, not from a name:
  it decides the features and the packing."""
  from data import stream

  plain, ul2, mixture = (stream.resolve(n) for n in ("code_go", "code_go_ul2", mixtures.mixture_name("unimax_1", "_ul2")))
  assert (plain.objective, ul2.objective, mixture.objective) == (
      stream.Objective.CAUSAL, stream.Objective.UL2, stream.Objective.UL2)
  assert [t.name for t in plain.tasks] == ["code_go"] and len(mixture.tasks) > 1
  assert stream.feature_lengths(plain, SEQ) == {"targets": SEQ}
  assert stream.feature_lengths(ul2, SEQ) == {"inputs": SEQ, "targets": SEQ}
  row = next(stream.packed_rows(stream.examples(ul2, SEQ, "train", shuffle=False, seed=0, num_epochs=1,
                                                use_cached=False), ul2, SEQ).as_numpy_iterator())
  assert row["decoder_causal_attention"].any()  # UL2's prefix is read bidirectionally


def test_examples_per_pass_is_exact_for_fixed_chunks():
  lengths = ((1, 3), (64, 2), (65, 1), (200, 4))
  assert packing.examples_per_pass(lengths, packing.plain_chunking(64)) == 3 + 2 + 2 + 4 * 4
  # Two chunk lengths: f(n) = 1 + (f(n - 3) + f(n - 5)) / 2, checked against the recursion by hand.
  chunking = packing.Chunking((3, 5), (0.5, 0.5))
  f = {n: 0.0 for n in range(-5, 1)}
  for n in range(1, 21):
    f[n] = 1 + 0.5 * f[n - 3] + 0.5 * f[n - 5]
  assert packing.examples_per_pass(((20, 1), (7, 2)), chunking) == pytest.approx(f[20] + 2 * f[7])


def test_added_tokens_of_ul2_examples():
  config = ul2.UL2Config()
  sizes = np.array([1, 2, 100, 1861])
  spans = [ul2.num_noise_tokens_and_spans(int(n), 0.15, 3.0)[1] for n in sizes]
  assert ul2.added_tokens(config, 0, sizes).tolist() == [0] + [2 * s + 1 for s in spans[1:]]
  assert ul2.added_tokens(config, 2, sizes).tolist() == [0, 1, 1, 1]  # prefix LM: the mode token
  assert ul2.added_tokens(config, 3, sizes).tolist() == [0, 0, 0, 0]  # causal LM: nothing


def test_rows_for_is_seqio_next_fit_within_batches():
  assert packing.rows_for([5, 5, 5], 10) == 2
  assert packing.rows_for([10, 1, 9], 10) == 2
  assert packing.rows_for([3] * 4, 4) == 4  # one batch of 4 examples, none fits with another
  assert packing.rows_for([1] * 5, 4) == 2  # batches of 4 examples: the first row is flushed at 4


def test_fim_mixture_delivers_its_token_shares_and_objective_rates(corpus):
  root, vocab_path, _ = corpus
  config = ul2.UL2Config(fim_rate=0.5, fim_spm_rate=0.5)
  try:
    corpus_ = mixtures.register_language_tasks(root, vocab_path, SEQ, ul2_config=config)["_ul2"]
    (plan,) = mixtures.register_mixtures(corpus_, rows=5000, suffix="_ul2", kinds=("natural",)).values()
    drawn = mixture_shares.draw("code_natural_ul2", SEQ, 3000, seed=2, progress=False)
    measured = mixture_shares.summarize(drawn, plan, corpus_, SEQ)
    for task, declared in plan.token_shares.items():
      assert abs(measured.document_share[task] - declared) < 0.015, (task, measured.document_share[task], declared)
    configured = mixture_shares.objective_rates(config)
    assert configured == pytest.approx([0.1, 0.1, 0.2, 0.3, 0.15, 0.15])
    for index, rate in enumerate(configured):  # within 4 standard deviations of a binomial share
      assert abs(measured.objective_share.get(index, 0.0) - rate) < 4 * (rate * (1 - rate) / 3000) ** 0.5 + 0.01
    table = mixture_shares.format_measurement("code_natural_ul2", measured, config)
    assert "| fim_spm | 15.00 |" in table and "% of the causal-LM share delivered as FIM (fim_rate 0.5" in table
  finally:  # the module's other tests read the paper's mixture
    mixtures.register_language_tasks(root, vocab_path, SEQ)


def test_fim_flags_out_of_range_are_refused_by_name(tmp_path, capsys):
  with pytest.raises(SystemExit):
    mixtures.main(["--corpus", str(tmp_path), "--fim_rate", "1.5"])
  assert "--fim_rate must be a number within [0, 1], got 1.5" in capsys.readouterr().err
