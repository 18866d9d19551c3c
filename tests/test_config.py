import jax.numpy as jnp
import pytest

from model.config import AttentionKernel, ModelConfig, RematPolicy, get_config
from training.optimizer import rsqrt_schedule


def test_spellings_normalise_and_configs_are_frozen():
  config = get_config("tiny", dtype="bfloat16", remat="dots", attention_kernel="cudnn")
  assert config.dtype == jnp.bfloat16 and config.remat is RematPolicy.DOTS
  assert config.attention_kernel is AttentionKernel.CUDNN
  assert config == get_config("tiny").replace(dtype=jnp.bfloat16, remat=RematPolicy.DOTS,
                                              attention_kernel=AttentionKernel.CUDNN)
  with pytest.raises(Exception):
    config.d_model = 3


def test_bad_configs_are_rejected():
  with pytest.raises(ValueError, match="unknown model size"):
    get_config("7b")
  with pytest.raises(ValueError, match="head_dim"):
    ModelConfig(vocab_size=8, d_model=8, num_layers=1, num_heads=1, head_dim=3, d_ff=8)
  with pytest.raises(ValueError, match="num_layers"):
    ModelConfig(vocab_size=8, d_model=8, num_layers=0, num_heads=1, head_dim=4, d_ff=8)


def test_rsqrt_schedule_is_constant_through_warmup_then_decays():
  lr = rsqrt_schedule(0.01, warmup_steps=100)
  assert float(lr(0)) == pytest.approx(0.01)
  assert float(lr(99)) == pytest.approx(0.01)
  assert float(lr(100)) == pytest.approx(0.01)
  assert float(lr(400)) == pytest.approx(0.005)
