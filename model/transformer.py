"""The PaLM-style decoder: parallel blocks scanned over layers, shared embedding, KV cache.

Inputs are the features SeqIO's DecoderFeatureConverter produces (decoder_input_tokens,
decoder_positions, decoder_segment_ids, decoder_causal_attention). Shapes: B batch, T length,
S cache slots, L layers, D d_model, K head_dim, V vocab.
"""

from __future__ import annotations

import functools

import flax.linen as nn
import flax.struct
import jax
import jax.numpy as jnp

from model.config import AttentionKernel, ModelConfig, RematPolicy
from model.layers import LayerNorm, MultiQueryAttention, SwiGLU, causal_mask, constrain
from model.lora import LoraConfig

Array = jax.Array
# {"k": (L arrays [B, S, K]), "v": (same)}: one K/V head per layer (MQA). One buffer per layer rather
# than one [L, B, S, K] array: each decode step then writes every layer's slots in place, where slicing
# layers out of a stacked array (and stacking them back) copies the whole cache per token.
KVCache = dict[str, tuple[Array, ...]]


@flax.struct.dataclass
class PrefixSharedCache:
  """A KV cache for many samples of few prompts (decoding only, one token per row and call).

  R rows decode in Q prompt slots of G = R / Q rows each (rows q*G .. q*G+G-1 belong to slot q). Each
  slot holds one prompt's keys/values once (the prefix), shared by its rows; each row holds the keys/
  values of its own generated tokens (the suffix). A call writes each row's new key/value at suffix slot
  `suffix_index` and attends over its slot's prefix (up to `prefix_lengths`) and its suffix slots
  0..suffix_index, reading only the first `window` suffix slots (a static bound on the live length, so
  attention costs what is live, not what is allocated).
  """

  prefix_k: tuple[Array, ...]  # L x [Q, Tp, K]
  prefix_v: tuple[Array, ...]
  prefix_lengths: Array  # [Q]
  suffix_k: tuple[Array, ...]  # L x [R, N, K]
  suffix_v: tuple[Array, ...]
  suffix_index: Array  # [R]
  window: int = flax.struct.field(pytree_node=False, default=0)  # 0: all N suffix slots

  def layer(self, i: int) -> dict:
    """Layer i's part, as plain data for the attention layer."""
    return {"prefix_k": self.prefix_k[i], "prefix_v": self.prefix_v[i], "prefix_lengths": self.prefix_lengths,
            "k": self.suffix_k[i], "v": self.suffix_v[i], "index": self.suffix_index,
            "window": self.window or self.suffix_k[i].shape[1]}


def init_prefix_shared_cache(config: ModelConfig, slots: int, prefix_length: int, rows: int,
                             suffix_length: int) -> PrefixSharedCache:
  """An empty PrefixSharedCache: Q = slots prompts of up to prefix_length tokens, rows x suffix_length."""
  if rows % slots:
    raise ValueError(f"rows ({rows}) must be a multiple of the prompt slots ({slots})")
  zeros = lambda *shape: tuple(jnp.zeros(shape + (config.head_dim,), config.dtype)  # noqa: E731
                               for _ in range(config.num_layers))
  return PrefixSharedCache(prefix_k=zeros(slots, prefix_length), prefix_v=zeros(slots, prefix_length),
                           prefix_lengths=jnp.zeros((slots,), jnp.int32), suffix_k=zeros(rows, suffix_length),
                           suffix_v=zeros(rows, suffix_length), suffix_index=jnp.zeros((rows,), jnp.int32))


def init_cache(config: ModelConfig, batch_size: int, max_length: int | None = None) -> KVCache:
  """An empty KV cache: plain data that decoding functions take and return."""
  shape = (batch_size, max_length or config.max_length, config.head_dim)
  return {name: tuple(jnp.zeros(shape, config.dtype) for _ in range(config.num_layers)) for name in ("k", "v")}


def attention_mask(segment_ids: Array | None, causal_attention: Array | None, length: int) -> Array:
  """[B, T, T] (or [1, T, T]) boolean mask for training and scoring, as T5X's decoder builds it.

  Causal everywhere; positions where `causal_attention` is 1 (the inputs of a prefix-LM example, per
  SeqIO's convention) also see each other bidirectionally; packed segments never see each other.
  """
  mask = causal_mask(length)
  if causal_attention is not None:
    prefix = causal_attention.astype(bool)
    mask = mask | (prefix[:, :, None] & prefix[:, None, :])
  if segment_ids is not None:
    mask = mask & (segment_ids[:, :, None] == segment_ids[:, None, :])
  return mask


def cache_mask(positions: Array, num_slots: int) -> Array:
  """[B, T, S] mask for cached decoding: a query at position p sees cache slots 0..p of its row."""
  return jnp.arange(num_slots)[None, None, :] <= positions[:, :, None]


class ParallelBlock(nn.Module):
  """y = x + Attn(LN(x)) + MLP(LN(x)) with one shared LayerNorm (PaLM §2, parallel layers)."""

  num_heads: int
  head_dim: int
  d_ff: int
  rope_max_wavelength: float
  norm_eps: float
  dtype: jnp.dtype
  param_dtype: jnp.dtype
  attention_kernel: AttentionKernel
  lora: LoraConfig | None = None

  @nn.compact
  def __call__(self, x: Array, positions: Array, mask: Array | None,
               cache: KVCache | None) -> tuple[Array, KVCache | None]:
    h = LayerNorm(self.norm_eps, self.dtype, self.param_dtype, name="norm")(x)
    attn, cache = MultiQueryAttention(self.num_heads, self.head_dim, self.rope_max_wavelength, self.dtype,
                                      self.param_dtype, self.attention_kernel, self.lora, name="attention")(
                                          h, positions, mask, cache)
    mlp = SwiGLU(self.d_ff, self.dtype, self.param_dtype, self.lora, name="mlp")(h)
    x = constrain(x + attn + mlp, ("act_batch", "act_length", "act_embed"))
    return x, cache


_REMAT_POLICIES = {
    RematPolicy.DOTS: jax.checkpoint_policies.dots_with_no_batch_dims_saveable,
    RematPolicy.FULL: jax.checkpoint_policies.nothing_saveable,
}


class Decoder(nn.Module):
  """Token ids in, logits out; optionally reads and writes a KV cache. With `lora`, the layers also read
  adapters from the "lora" collection (model/lora.py; training only: sampling merges them first)."""

  config: ModelConfig
  lora: LoraConfig | None = None

  def setup(self):
    cfg = self.config
    self.embedding = self.param(
        "embedding", nn.with_logical_partitioning(nn.initializers.normal(1.0), ("vocab", "embed")),
        (cfg.vocab_size, cfg.d_model), cfg.param_dtype)  # PaLM: N(0, 1), shared with the output layer
    block = ParallelBlock
    if cfg.remat is not RematPolicy.NONE:
      block = nn.remat(block, policy=_REMAT_POLICIES[cfg.remat], prevent_cse=False)
    # One compiled layer body applied L times: compile time independent of depth.
    self.layers = nn.scan(
        block, variable_axes={"params": 0, "lora": 0}, split_rngs={"params": True, "dropout": True},
        in_axes=(nn.broadcast, nn.broadcast, 0), length=cfg.num_layers,
        metadata_params={nn.PARTITION_NAME: "layers"})(
            cfg.num_heads, cfg.head_dim, cfg.d_ff, cfg.rope_max_wavelength, cfg.norm_eps, cfg.dtype,
            cfg.param_dtype, cfg.attention_kernel, self.lora, name="layers")
    self.final_norm = LayerNorm(cfg.norm_eps, cfg.dtype, cfg.param_dtype)

  def __call__(self, tokens: Array, positions: Array | None = None, segment_ids: Array | None = None,
               causal_attention: Array | None = None,
               cache: KVCache | PrefixSharedCache | None = None) -> tuple[Array, KVCache | PrefixSharedCache | None]:
    """tokens [B, T] -> (logits [B, T, V] in f32, updated cache or None).

    Without a cache: a training / scoring pass over packed rows (positions default to 0..T-1).
    With a cache: `positions` [B, T] are each token's absolute position in its row; keys and values
    are written there and each query sees its row's slots up to its own position (prefill is a call
    with the prompts, right-padded; each decode step is a call with T = 1). With a PrefixSharedCache
    (T = 1), `positions` are only for RoPE; the cache says where keys go and what each row sees.
    """
    cfg = self.config
    batch, length = tokens.shape
    if positions is None:
      positions = jnp.broadcast_to(jnp.arange(length), (batch, length))
    if isinstance(cache, PrefixSharedCache):
      if length != 1:
        raise ValueError(f"a PrefixSharedCache decodes one token per row, got {length}")
      mask = None  # the cache's lengths and indices say what each row sees
    elif cache is not None:
      mask = cache_mask(positions, cache["k"][0].shape[1])
    elif segment_ids is None and causal_attention is None:
      mask = None  # plain causal: built inside attention, or skipped entirely by a fused kernel
    else:
      mask = attention_mask(segment_ids, causal_attention, length)
    x = jnp.take(self.embedding, tokens, axis=0).astype(cfg.dtype)
    x = constrain(x, ("act_batch", "act_length", "act_embed"))
    if cache is None:
      x, _ = self.layers(x, positions, mask, None)
    else:
      x, cache = self._cached_layers(x, positions, mask, cache)
    x = self.final_norm(x)
    # Shared embedding as the output layer, scaled by 1/sqrt(d_model) (PaLM §2).
    # f32 accumulation and output: the softmax over 64k logits needs it even under bf16 compute.
    # As 2-D [B*T, D] rows for the fast XLA:CPU weight-gradient path (see layers.py).
    logits = jnp.einsum("md,vd->mv", x.reshape(batch * length, cfg.d_model), self.embedding.astype(cfg.dtype),
                        preferred_element_type=jnp.float32) * (cfg.d_model ** -0.5)
    logits = constrain(logits.reshape(batch, length, cfg.vocab_size), ("act_batch", "act_length", "act_vocab"))
    return logits, cache

  def _cached_layers(self, x: Array, positions: Array, mask: Array | None, cache: KVCache | PrefixSharedCache
                     ) -> tuple[Array, KVCache | PrefixSharedCache]:
    """The layers unrolled for cached decoding, layer i reading and writing its own cache buffer.

    The scanned layers would slice each layer's cache out of a stacked array and stack the updated
    slices again: two copies of the whole cache per token, which dominated decode time on CPU.
    """
    cfg = self.config
    layer_params = nn.meta.unbox(self.variables["params"]["layers"])  # [L, ...] leaves, as nn.scan made them
    block = ParallelBlock(cfg.num_heads, cfg.head_dim, cfg.d_ff, cfg.rope_max_wavelength, cfg.norm_eps, cfg.dtype,
                          cfg.param_dtype, cfg.attention_kernel, parent=None)
    shared = isinstance(cache, PrefixSharedCache)
    new = {"k": [], "v": []}
    for layer in range(cfg.num_layers):
      layer_cache = cache.layer(layer) if shared else {"k": cache["k"][layer], "v": cache["v"][layer]}
      x, layer_cache = block.apply({"params": jax.tree.map(lambda p: p[layer], layer_params)}, x, positions, mask,
                                   layer_cache)
      for name in new:
        new[name].append(layer_cache[name])
    if shared:
      return x, cache.replace(suffix_k=tuple(new["k"]), suffix_v=tuple(new["v"]))
    return x, {name: tuple(buffers) for name, buffers in new.items()}


@functools.partial(jax.jit, static_argnames=("model", "batch_size", "length"))
def init_params(model: Decoder, rng: Array, batch_size: int = 1, length: int = 8):
  """Boxed (nn.LogicallyPartitioned) parameters; under jax.eval_shape they allocate nothing. Their
  shapes do not depend on the dummy tokens' shape.

  Jitted, keyed on the module's value (Flax modules are dataclasses): one program per model config and
  process, where calling model.init op by op dispatched (and compiled) each of its hundreds of small
  operations, 3-6 s per call on a CPU."""
  return model.init(rng, jnp.zeros((batch_size, length), jnp.int32))["params"]
