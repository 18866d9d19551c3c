"""Low-rank adapters (Hu et al. 2021) on the decoder's projections, as PEFT's LoRA layers compute them:
y = x W + (alpha / r) * dropout(x) A B, A [in, r] randomly initialised, B [r, out] zero, W frozen.

The adapters live in their own variable collection, "lora", beside "params": the base parameters'
tree, and so their checkpoints, are those of the plain model. Training differentiates the "lora"
collection only; `merge` folds trained adapters into W for sampling, which then runs the plain model.
Dropout on the adapters' input is active when the call has a "dropout" rng (training), off otherwise.

Why not a library: Google's qwix (0.1.8) intercepts the matmuls of a Flax model and adds LoRA
weights, but on this model's `nn.scan` over layers its parameter creation leaks a tracer
(UnexpectedTracerError, with and without dropout), and PEFT is PyTorch only.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

# The adaptable projections: attention (model/layers.py MultiQueryAttention) and MLP (SwiGLU) kernels.
ATTENTION_TARGETS = ("query", "key", "value", "out")
MLP_TARGETS = ("gate", "up", "down")


@dataclasses.dataclass(frozen=True)
class LoraConfig:
  """CodeInsight's recipe by default: r 16, alpha 16, dropout 0.05, no bias (there are none here).
  `targets` default to the query and value projections, PEFT's default for LLaMA-family models."""
  rank: int = 16
  alpha: float = 16.0
  dropout: float = 0.05
  targets: tuple[str, ...] = ("query", "value")

  def __post_init__(self):
    object.__setattr__(self, "targets", tuple(self.targets))
    unknown = set(self.targets) - set(ATTENTION_TARGETS + MLP_TARGETS)
    if unknown or not self.targets:
      raise ValueError(f"LoraConfig.targets: unknown or empty {sorted(unknown) or list(self.targets)}; "
                       f"choose from {', '.join(ATTENTION_TARGETS + MLP_TARGETS)}")
    if self.rank < 1 or self.alpha <= 0 or not 0 <= self.dropout < 1:
      raise ValueError(f"LoraConfig needs rank >= 1, alpha > 0 and 0 <= dropout < 1, got {self}")

  @property
  def scale(self) -> float:
    return self.alpha / self.rank


@functools.partial(jax.jit, static_argnames=("model",))  # one program per model, as init_params
def init_adapters(model: nn.Module, rng: jax.Array) -> Any:
  """Fresh adapters of a Decoder built with `lora` (A random, B zero: the adapted model starts as
  the base); under jax.eval_shape, their tree of shapes."""
  return model.init({"params": rng}, jnp.zeros((1, 8), jnp.int32))["lora"]


def _init_a(key, shape, dtype):
  # PEFT's kaiming_uniform(a=sqrt(5)) on A: U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
  bound = shape[0] ** -0.5
  return jax.random.uniform(key, shape, dtype, -bound, bound)


def adapted_matmul(module: nn.Module, lora: LoraConfig | None, name: str, rows: jax.Array, weight: jax.Array
                   ) -> jax.Array:
  """rows [M, I] @ weight [I, O], plus the adapter of projection `name` when `lora` targets it."""
  out = rows @ weight
  if lora is None or name not in lora.targets:
    return out
  d_in, d_out = weight.shape
  param_dtype = getattr(module, "param_dtype", jnp.float32)
  a = module.variable("lora", f"{name}_a", lambda: _init_a(module.make_rng("params"), (d_in, lora.rank),
                                                           param_dtype)).value
  b = module.variable("lora", f"{name}_b", lambda: jnp.zeros((lora.rank, d_out), param_dtype)).value
  if lora.dropout > 0 and module.has_rng("dropout"):
    keep = jax.random.bernoulli(module.make_rng("dropout"), 1.0 - lora.dropout, rows.shape)
    rows = jnp.where(keep, rows / (1.0 - lora.dropout), 0).astype(rows.dtype)
  return out + ((rows @ a.astype(rows.dtype)) @ b.astype(rows.dtype)) * jnp.asarray(lora.scale, rows.dtype)


def merge(params: Any, adapters: Any, lora: LoraConfig) -> Any:
  """The base parameters with each adapted kernel W replaced by W + (alpha / r) A B (in f32, then the
  kernel's dtype); leaves with no adapter are the same arrays. Layer-stacked leaves ([L, ...]) as
  nn.scan makes them."""
  merged = jax.tree.map(lambda x: x, params)  # a new tree sharing the leaves
  for group, names in (("attention", ATTENTION_TARGETS), ("mlp", MLP_TARGETS)):
    for name in names:
      found = adapters.get("layers", {}).get(group, {})
      if f"{name}_a" not in found:
        continue
      kernel = params["layers"][group][name]
      a, b = found[f"{name}_a"].astype(jnp.float32), found[f"{name}_b"].astype(jnp.float32)
      delta = jnp.einsum("lir,lro->lio", a, b) * lora.scale  # [L, in, out] of the 2-D product
      merged["layers"][group][name] = (kernel.astype(jnp.float32) + delta.reshape(kernel.shape)).astype(kernel.dtype)
  return merged
