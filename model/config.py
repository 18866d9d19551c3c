"""Model configuration: one frozen dataclass and the named sizes.

The paper's models follow PaLM (Chowdhery et al. 2022): d_ff = 4 * d_model, head_dim 256, one K/V head
(multi-query attention). Its Table 2 column 8192 / 10240 / 14336 is d_ff, not d_model (see
shared/REFERENCE.md, Models), which gives ~1.09B / ~2.59B / ~5.05B parameters with a 64k vocabulary.
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Any

import jax.numpy as jnp


class RematPolicy(enum.Enum):
  """What the backward pass may keep from each layer's forward pass (jax.checkpoint policies)."""

  NONE = "none"  # keep everything: fastest, most memory
  DOTS = "dots"  # keep matmul outputs without batch dims, recompute the rest
  FULL = "full"  # keep only the layer inputs: least memory, one extra forward pass


class AttentionKernel(enum.Enum):
  """How training-time attention is computed (cached decoding always uses the XLA form)."""

  XLA = "xla"  # portable: materialises [B, T, H, S] scores
  CUDNN = "cudnn"  # fused flash attention via jax.nn.dot_product_attention (NVIDIA GPUs only)


@dataclasses.dataclass(frozen=True)
class ModelConfig:
  """A PaLM-style decoder. All sizes are explicit; nothing is derived from strings at call time."""

  vocab_size: int  # includes special tokens and the span-corruption sentinels
  d_model: int
  num_layers: int
  num_heads: int  # query heads; there is always exactly one K/V head (MQA)
  head_dim: int
  d_ff: int
  max_length: int = 2048  # longest sequence the KV cache is sized for by default
  rope_max_wavelength: float = 10_000.0
  norm_eps: float = 1e-6
  dtype: Any = jnp.float32  # compute dtype (activations, matmul inputs)
  param_dtype: Any = jnp.float32  # storage dtype of the parameters
  remat: RematPolicy = RematPolicy.NONE
  attention_kernel: AttentionKernel = AttentionKernel.XLA

  def __post_init__(self):
    # Normalise dtype spellings ("bfloat16", jnp.bfloat16, np.dtype) so configs compare and hash equal.
    object.__setattr__(self, "dtype", jnp.dtype(self.dtype))
    object.__setattr__(self, "param_dtype", jnp.dtype(self.param_dtype))
    object.__setattr__(self, "remat", RematPolicy(self.remat))
    object.__setattr__(self, "attention_kernel", AttentionKernel(self.attention_kernel))
    for name in ("vocab_size", "d_model", "num_layers", "num_heads", "head_dim", "d_ff", "max_length"):
      if getattr(self, name) <= 0:
        raise ValueError(f"ModelConfig.{name} must be positive, got {getattr(self, name)}")
    if self.head_dim % 2:
      raise ValueError(f"ModelConfig.head_dim must be even for RoPE, got {self.head_dim}")

  @property
  def attention_dim(self) -> int:
    """Width of the concatenated query heads; may differ from d_model (as in PaLM 540B)."""
    return self.num_heads * self.head_dim

  @property
  def num_params(self) -> int:
    """Analytic parameter count; tests check it against jax.eval_shape of the real model."""
    per_layer = (
        self.d_model  # the one LayerNorm scale shared by attention and MLP (parallel block)
        + self.d_model * self.attention_dim * 2  # query and output projections
        + self.d_model * self.head_dim * 2  # the single key and value heads
        + self.d_model * self.d_ff * 3  # SwiGLU: gate, up, down
    )
    return self.vocab_size * self.d_model + self.num_layers * per_layer + self.d_model

  def replace(self, **changes) -> "ModelConfig":
    return dataclasses.replace(self, **changes)


_PALM = dict(head_dim=256)

SIZES: dict[str, ModelConfig] = {
    # Unit tests: about 1M parameters, compiles in seconds.
    "tiny": ModelConfig(vocab_size=4096, d_model=128, num_layers=2, num_heads=4, head_dim=32, d_ff=512),
    # Demo and CPU ablations: a few million parameters, an 8 x 256 step well under a second on 2 cores.
    "mini": ModelConfig(vocab_size=8192, d_model=192, num_layers=4, num_heads=4, head_dim=48, d_ff=768),
    # CPU benchmarks.
    "small": ModelConfig(vocab_size=16384, d_model=512, num_layers=8, num_heads=8, head_dim=64, d_ff=2048),
    # The paper's sizes (REFERENCE.md table): bf16 compute, f32 parameters.
    "1b": ModelConfig(vocab_size=65536, d_model=2048, num_layers=16, num_heads=8, d_ff=8192,
                      dtype=jnp.bfloat16, **_PALM),
    "2b": ModelConfig(vocab_size=65536, d_model=2560, num_layers=24, num_heads=16, d_ff=10240,
                      dtype=jnp.bfloat16, **_PALM),
    "4b": ModelConfig(vocab_size=65536, d_model=3584, num_layers=26, num_heads=16, d_ff=14336,
                      dtype=jnp.bfloat16, **_PALM),
}


def get_config(size: str, **overrides) -> ModelConfig:
  """The named size, with any field overridden (e.g. vocab_size of a trained vocabulary)."""
  if size not in SIZES:
    raise ValueError(f"unknown model size {size!r}; choose one of {', '.join(SIZES)}")
  return SIZES[size].replace(**overrides) if overrides else SIZES[size]
