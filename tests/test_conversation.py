"""Conversations that reuse their KV cache: extend, and ConversationSampler's rounds against full recomputation."""

from typing import Callable

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import code_corpus
from model.config import get_config
from model.decoding import extend, prefill
from model.transformer import Decoder, init_cache, init_params
from sampling.conversation import ConversationSampler
from sampling.sampler import SamplingConfig
from sampling.stops import cut_index

MAX_LENGTH = 128
NEW = 12  # tokens per completion
# One greedy and one sampled config for every test: each config (and sampler) is compiled once.
GREEDY = SamplingConfig(temperature=0.0, max_decode_length=NEW, chunk_length=4)
SAMPLED = SamplingConfig(temperature=1.0, max_decode_length=NEW, chunk_length=4)


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
  root = str(tmp_path_factory.mktemp("conversation_corpus"))
  _, vocabulary = code_corpus.build(root)
  model = Decoder(get_config("tiny", vocab_size=vocabulary.vocab_size, max_length=MAX_LENGTH))
  params = nn.unbox(init_params(model, jax.random.key(0)))
  code_id = vocabulary.tokenizer.piece_to_id("[code]")
  return vocabulary, model, params, code_id


@pytest.fixture(scope="module")
def module_sampler(setup) -> ConversationSampler:
  """One sampler for the module, compiled once (no end token: completions run to their limit or a stop
  string)."""
  vocabulary, model, params, code_id = setup
  return ConversationSampler(model, params, vocabulary, code_id, end_ids=[-1], max_conversations=8)


@pytest.fixture
def sampler(module_sampler):
  """The module's sampler with no conversation open: a failing test leaves none to the next."""
  yield module_sampler
  module_sampler.close(module_sampler.open_conversations())


@pytest.fixture(scope="module")
def logits_of(setup) -> Callable[[list[int]], np.ndarray]:
  """Next-token logits after `ids` by a full forward pass without a cache (one padded length: one
  compilation; causal, so the padding is unseen)."""
  _, model, params, _ = setup

  @jax.jit
  def last_logits(tokens, last):
    logits, _ = model.apply({"params": params}, tokens)
    return logits[0, last]

  return lambda ids: np.asarray(last_logits(jnp.asarray([ids + [0] * (MAX_LENGTH - len(ids))]), len(ids) - 1))


def greedy(logits_of, ids: list[int], steps: int) -> list[int]:
  """`steps` greedy tokens after `ids`, each by recomputing the whole sequence."""
  ids, new = list(ids), []
  for _ in range(steps):
    new.append(int(np.argmax(logits_of(ids + new))))
  return new


def right_padded(rows: list[list[int]], width: int) -> jnp.ndarray:
  batch = np.zeros((len(rows), width), np.int32)
  for index, row in enumerate(rows):
    batch[index, :len(row)] = row
  return jnp.asarray(batch)


def test_extend_continues_cached_rows_with_the_logits_of_a_full_pass(setup):
  _, model, params, _ = setup
  rng = np.random.default_rng(0)
  parts = [[5, 7, 3], [11, 2, 9]]  # per row: prompt, first extension, second extension (lengths)
  rows = [rng.integers(1, model.config.vocab_size, sum(lengths)).tolist() for lengths in parts]
  reference, _ = model.apply({"params": params}, right_padded(rows, 32))
  cache = init_cache(model.config, 2)
  a, b, c = (np.array(lengths) for lengths in zip(*parts))
  _, cache = prefill(model, params, right_padded([row[:n] for row, n in zip(rows, a)], 16), jnp.asarray(a), cache)
  first, cache = extend(model, params, right_padded([row[n:n + m] for row, n, m in zip(rows, a, b)], 8),
                        jnp.asarray(b), jnp.asarray(a), cache)
  second, cache = extend(model, params, right_padded([row[n + m:] for row, n, m in zip(rows, a, b)], 16),
                         jnp.asarray(c), jnp.asarray(a + b), cache)
  for row in range(2):
    np.testing.assert_allclose(first[row], reference[row, a[row] + b[row] - 1], atol=1e-4, rtol=0)
    np.testing.assert_allclose(second[row], reference[row, a[row] + b[row] + c[row] - 1], atol=1e-4, rtol=0)
  # Every padded position must be a cache slot.
  with pytest.raises(ValueError, match=r"row 0 starts at 120 .* need 136 cache slots; the cache has 128"):
    extend(model, params, jnp.zeros((2, 16), jnp.int32), jnp.ones(2, jnp.int32), jnp.asarray([120, 0]), cache)


def test_start_then_reply_equals_greedy_decoding_by_recomputation(setup, sampler, logits_of):
  vocabulary, _, _, code_id = setup
  prompts = ["def get", "package main\n\nfunc F"]  # prompts of different lengths
  started = sampler.start(prompts, 1, GREEDY, seed=0)
  conversations = [conversation for [(conversation, _)] in started]
  for prompt, [(conversation, completion)] in zip(prompts, started):
    ids = [code_id] + list(vocabulary.encode(prompt))
    expected = greedy(logits_of, ids, NEW)
    assert completion.finish_reason == "length" and completion.num_tokens == NEW
    assert completion.text == vocabulary.decode(expected)
    assert sampler.tokens(conversation) == ids + expected
  texts = ["\n    return x\n", "(n int) int {\n\treturn n"]
  before = [sampler.tokens(conversation) for conversation in conversations]
  # The cache after the first round (prompt prefilled, completion decoded) continues as recomputation does.
  np.testing.assert_allclose(sampler.continuation_logits(list(zip(conversations, texts))),
                             [logits_of(old + list(vocabulary.encode(text))) for old, text in zip(before, texts)],
                             atol=1e-4, rtol=0)
  replies = sampler.reply(list(zip(conversations, texts)), GREEDY, seed=0)
  for conversation, text, old, completion in zip(conversations, texts, before, replies):
    context = old + list(vocabulary.encode(text))
    expected = greedy(logits_of, context, NEW)
    assert completion.text == vocabulary.decode(expected)
    assert sampler.tokens(conversation) == context + expected
  assert sampler.last_stats["prefilled_tokens"] == sum(len(vocabulary.encode(text)) for text in texts)
  # ... and so does the cache after the second round (an empty text: the logits after the conversation).
  np.testing.assert_allclose(sampler.continuation_logits([(conversation, "") for conversation in conversations]),
                             [logits_of(sampler.tokens(conversation)) for conversation in conversations],
                             atol=1e-4, rtol=0)
  sampler.close(conversations)


def test_a_completion_cut_at_a_stop_keeps_only_its_kept_tokens(setup, sampler, logits_of):
  vocabulary, _, _, code_id = setup
  [[(conversation, _)]] = sampler.start(["def load"], 1, GREEDY, seed=0)
  text = " = 1\n"
  context = sampler.tokens(conversation) + list(vocabulary.encode(text))
  expected = greedy(logits_of, context, NEW)
  # A stop string that cuts this round's greedy completion about half way.
  whole = vocabulary.decode(expected)
  stop = whole[len(vocabulary.decode(expected[:NEW // 2])):]
  assert stop
  cut = cut_index(whole, [stop])
  kept = next(n for n in range(NEW + 1) if len(vocabulary.decode(expected[:n])) >= cut)
  assert kept < NEW
  [completion] = sampler.reply([(conversation, text)], GREEDY, seed=0, stops=[[stop]])
  assert completion.finish_reason == "stop" and completion.text == whole[:cut] and completion.num_tokens == kept
  assert sampler.tokens(conversation) == context + expected[:kept]
  # The next round overwrites the discarded tokens' cache slots: still what recomputation gives.
  text = "\n\ndef other(y):\n"
  context = sampler.tokens(conversation) + list(vocabulary.encode(text))
  np.testing.assert_allclose(sampler.continuation_logits([(conversation, text)])[0], logits_of(context),
                             atol=1e-4, rtol=0)
  [completion] = sampler.reply([(conversation, text)], GREEDY, seed=0)
  assert sampler.tokens(conversation) == context + greedy(logits_of, context, NEW)
  sampler.close([conversation])


def test_a_reply_reads_the_cached_conversation_and_prefills_only_the_new_tokens(setup, sampler, logits_of):
  vocabulary = setup[0]
  [[(conversation, _)]] = sampler.start(["def parse"], 1, GREEDY, seed=0)
  text = "(x, y):\n    return"
  old = len(sampler.tokens(conversation))
  context = sampler.tokens(conversation) + list(vocabulary.encode(text))
  cached = sampler.continuation_logits([(conversation, text)])[0]
  np.testing.assert_allclose(cached, logits_of(context), atol=1e-4, rtol=0)
  original = sampler.cache

  def overwrite(begin: int, end: int, value: float):
    return {name: tuple(buffer.at[conversation, begin:end].set(value) for buffer in buffers)
            for name, buffers in original.items()}

  try:
    # The old tokens' keys/values are read from the cache, not recomputed: zeroing them changes the logits ...
    sampler.cache = overwrite(0, old, 0.0)
    assert np.abs(sampler.continuation_logits([(conversation, text)])[0] - cached).max() > 1e-2
    # ... while the slots past the conversation are never read.
    sampler.cache = overwrite(old, MAX_LENGTH, 7.0)
    np.testing.assert_allclose(sampler.continuation_logits([(conversation, text)])[0], cached, atol=1e-6, rtol=0)
  finally:
    sampler.cache = original
  assert sampler.tokens(conversation) == context[:old]  # continuation_logits changes nothing
  sampler.reply([(conversation, text)], GREEDY, seed=0)
  assert sampler.last_stats["prefilled_tokens"] == len(context) - old
  sampler.close([conversation])


def test_the_seed_decides_the_samples_whatever_shares_the_batch(sampler):
  texts = lambda completions: [c.text for c in completions]  # noqa: E731
  # start: prompt 0's samples are the same with or without prompt 1 in the batch.
  both = sampler.start(["def load", "package main"], 2, SAMPLED, seed=5)
  alone = sampler.start(["def load"], 2, SAMPLED, seed=5)
  assert texts(c for _, c in both[0]) == texts(c for _, c in alone[0])
  assert both[0][0][1].text != both[0][1][1].text  # a prompt's samples differ
  # reply: a conversation replied alone or with another draws the same completion.
  together = sampler.reply([(both[0][0][0], "\n"), (both[1][1][0], "\n")], SAMPLED, seed=7)
  [by_itself] = sampler.reply([(alone[0][0][0], "\n")], SAMPLED, seed=7)
  assert together[0].text == by_itself.text
  assert sampler.tokens(both[0][0][0]) == sampler.tokens(alone[0][0][0])
  sampler.close([conversation for prompt in both + alone for conversation, _ in prompt])


def test_errors_name_the_conversation_and_the_limit(setup, sampler):
  vocabulary = setup[0]
  with pytest.raises(ValueError, match="conversation 99 is not open"):
    sampler.reply([(99, "x")], GREEDY, seed=0)
  [[(conversation, _)]] = sampler.start(["def f"], 1, GREEDY, seed=0)
  with pytest.raises(ValueError, match="appears twice"):
    sampler.reply([(conversation, "a"), (conversation, "b")], GREEDY, seed=0)
  long_text = "value_1 = 1 * 2  # line 1\n" * 20
  assert len(vocabulary.encode(long_text)) + len(sampler.tokens(conversation)) >= MAX_LENGTH
  # `fits` says beforehand what these calls would refuse (the protocol ends such episodes with it).
  assert not sampler.fits(conversation, long_text) and sampler.fits(conversation, "x")
  assert not sampler.fits(None, long_text) and sampler.fits(None, "def f")
  with pytest.raises(ValueError, match=rf"conversation {conversation}: .* no room .* context of {MAX_LENGTH}"):
    sampler.reply([(conversation, long_text)], GREEDY, seed=0)
  with pytest.raises(ValueError, match=rf"prompt 0 has .* context of {MAX_LENGTH}"):
    sampler.start([long_text], 1, GREEDY, seed=0)
  with pytest.raises(ValueError, match=r"8 new conversations need as many rows; 7 of max_conversations=8"):
    sampler.start(["def f"], 8, GREEDY, seed=0)
  sampler.close([conversation])
  with pytest.raises(ValueError, match=f"conversation {conversation} is not open"):
    sampler.tokens(conversation)
  with pytest.raises(ValueError, match=f"conversation {conversation} is not open"):
    sampler.reply([(conversation, "x")], GREEDY, seed=0)
