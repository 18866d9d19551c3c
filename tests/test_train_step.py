import functools

import jax
import numpy as np
import optax

from model.config import get_config
from model.transformer import Decoder
from training.optimizer import adafactor
from training.step import init_state, train_step


def _batch(batch_size=8, length=16, vocab=4096):
  rng = np.random.default_rng(0)
  tokens = rng.integers(3, vocab, (batch_size, length)).astype(np.int32)
  # Uneven target counts per row, so a naive mean of microbatch means would differ.
  weights = (rng.random((batch_size, length)) < np.linspace(0.2, 0.9, batch_size)[:, None]).astype(np.float32)
  return {"decoder_input_tokens": tokens, "decoder_target_tokens": np.roll(tokens, -1, 1),
          "decoder_loss_weights": weights}


def test_adafactor_state_is_factored_for_matrices():
  model, optimizer = Decoder(get_config("tiny")), adafactor(1e-2)
  state = jax.eval_shape(lambda: init_state(model, optimizer, jax.random.key(0)))
  factored = state.opt_state[0]  # optax.adafactor: scale_by_factored_rms first
  embedding = state.params["embedding"].shape  # [V, D]
  # optax keeps row statistics over the largest dim removed, column statistics over the second.
  assert factored.v_row["embedding"].shape == embedding[1:] and factored.v_col["embedding"].shape == embedding[:1]
  assert factored.v["embedding"].shape == (1,)
  norm = state.params["final_norm"]["scale"].shape  # a vector: full second moment
  assert factored.v["final_norm"]["scale"].shape == norm


def test_four_microbatches_of_two_equal_one_batch_of_eight():
  model, optimizer = Decoder(get_config("tiny")), adafactor(1e-2)
  state = init_state(model, optimizer, jax.random.key(0))
  batch = _batch()
  whole, m1 = jax.jit(functools.partial(train_step, model=model, optimizer=optimizer))(state, batch)
  micro, m4 = jax.jit(functools.partial(train_step, model=model, optimizer=optimizer, microbatches=4))(state, batch)
  np.testing.assert_allclose(m1["loss"], m4["loss"], rtol=1e-6)
  np.testing.assert_allclose(m1["grad_norm"], m4["grad_norm"], rtol=1e-5)
  for a, b in zip(jax.tree.leaves(whole.params), jax.tree.leaves(micro.params)):
    np.testing.assert_allclose(a, b, atol=1e-5, rtol=1e-5)
  assert float(optax.tree.norm(jax.tree.map(lambda a, b: a - b, whole.params, state.params))) > 0
