"""A codelm decoder as transformers' CohereForCausalLM: its config and its weights, exactly.

Each part of model/layers.py and model/transformer.py and its counterpart in transformers'
models/cohere/modeling_cohere.py:
- ParallelBlock, x + Attn(LN(x)) + MLP(LN(x)) with one LayerNorm: CohereDecoderLayer (input_layernorm
  only, attention and MLP added to the residual together).
- LayerNorm (mean subtracted, a scale and no bias, f32 statistics, eps): CohereLayerNorm, the same
  arithmetic; `layer_norm_eps`.
- MultiQueryAttention (H query heads, one key/value head, scores scaled by head_dim^-0.5, no biases):
  `num_key_value_heads=1`, `head_dim`, `attention_bias=False`, `use_qk_norm=False`.
- RoPE: codelm rotates halves (channel i with channel i + K/2, at frequency base^(-2i/K)); Cohere rotates
  interleaved pairs (2i, 2i + 1) at that same frequency. Reordering the query and key projections'
  output channels (new 2i = old i, new 2i + 1 = old i + K/2) turns one into the other; a query-key
  product is unchanged when both are reordered alike, and values are not rotated, so only q and k move.
- SwiGLU, silu(x W_gate) * (x W_up) W_down: gate_proj, up_proj, down_proj, `hidden_act="silu"`.
- The embedding (not scaled on input) shared with the output layer, logits scaled by d_model^-0.5
  (PaLM): `tie_word_embeddings=True`, `logit_scale`.
- The final LayerNorm: model.norm.
Flax kernels are [in, out]; torch Linear weights are [out, in].
"""

from __future__ import annotations

from typing import Any

import numpy as np

from model.config import ModelConfig

# Parameter dtypes the export writes as they are (safetensors and torch both have them).
DTYPES = {"float32": "float32", "bfloat16": "bfloat16", "float16": "float16"}


def unsupported(config: ModelConfig, vocabulary_size: int) -> list[str]:
  """Why `config` (with a vocabulary of `vocabulary_size` ids) cannot be exported exactly; empty if it
  can. (Shapes the installed transformers builds are checked too, by `shape_mismatches`.)"""
  reasons = []
  if str(config.param_dtype) not in DTYPES:
    reasons.append(f"parameters are {config.param_dtype}; Cohere checkpoints hold {', '.join(DTYPES)}")
  if config.vocab_size < vocabulary_size:
    reasons.append(f"the model has {config.vocab_size} embedding rows but its vocabulary {vocabulary_size} "
                   "ids: the tokenizer would produce ids the model has no row for")
  return reasons


def config_fields(config: ModelConfig, special_ids: dict[str, int]) -> dict[str, Any]:
  """CohereConfig's fields for `config`; `special_ids` holds bos, eos and pad ids."""
  return dict(
      vocab_size=config.vocab_size, hidden_size=config.d_model, intermediate_size=config.d_ff,
      num_hidden_layers=config.num_layers, num_attention_heads=config.num_heads,
      num_key_value_heads=1,  # multi-query attention
      head_dim=config.head_dim,  # may differ from hidden_size / heads (PaLM: 256 always)
      hidden_act="silu", max_position_embeddings=config.max_length,
      layer_norm_eps=config.norm_eps, logit_scale=config.d_model ** -0.5, tie_word_embeddings=True,
      rope_parameters={"rope_type": "default", "rope_theta": float(config.rope_max_wavelength)},
      attention_bias=False, attention_dropout=0.0, use_qk_norm=False, use_cache=True,
      bos_token_id=special_ids["bos"], eos_token_id=special_ids["eos"], pad_token_id=special_ids["pad"])


def config_json(fields: dict[str, Any], dtype: str) -> dict[str, Any]:
  """config.json for transformers 5 and 4 alike: 4.x reads `rope_theta` and `torch_dtype` where 5
  writes `rope_parameters` and `dtype`, and would silently take its defaults without them."""
  from transformers import CohereConfig

  written = CohereConfig(**fields).to_dict()
  written.update(architectures=["CohereForCausalLM"], model_type="cohere", head_dim=fields["head_dim"],
                 rope_theta=fields["rope_parameters"]["rope_theta"], dtype=dtype, torch_dtype=dtype)
  return written


def rope_permutation(head_dim: int) -> np.ndarray:
  """perm such that x[..., perm] puts codelm's rotate-half pairs (i, i + K/2) at Cohere's (2i, 2i + 1)."""
  half = head_dim // 2
  return np.stack([np.arange(half), np.arange(half) + half], axis=1).reshape(-1)


def cohere_weights(params: Any, config: ModelConfig) -> dict[str, np.ndarray]:
  """Hugging Face parameter name -> array (the parameters' own dtype), from codelm's parameter tree
  (layers stacked on a leading [L] axis, as nn.scan makes them)."""
  perm = rope_permutation(config.head_dim)
  d, h, k = config.d_model, config.num_heads, config.head_dim
  layers = params["layers"]
  attention, mlp = layers["attention"], layers["mlp"]
  get = lambda x: np.asarray(x)  # noqa: E731 - one device-to-host copy per stacked leaf
  query, key, value, out = (get(attention[n]) for n in ("query", "key", "value", "out"))
  gate, up, down, norm = get(mlp["gate"]), get(mlp["up"]), get(mlp["down"]), get(layers["norm"]["scale"])
  weights = {"model.embed_tokens.weight": get(params["embedding"]),  # [V, D]; lm_head is tied to it
             "model.norm.weight": get(params["final_norm"]["scale"])}
  for i in range(config.num_layers):
    prefix = f"model.layers.{i}."
    weights.update({
        prefix + "input_layernorm.weight": norm[i],
        prefix + "self_attn.q_proj.weight": query[i][:, :, perm].reshape(d, h * k).T,  # [D, H, K] -> [H*K, D]
        prefix + "self_attn.k_proj.weight": key[i][:, perm].T,  # [D, K] -> [K, D]
        prefix + "self_attn.v_proj.weight": value[i].T,
        prefix + "self_attn.o_proj.weight": out[i].reshape(h * k, d).T,  # [H, K, D] -> [D, H*K]
        prefix + "mlp.gate_proj.weight": gate[i].T,
        prefix + "mlp.up_proj.weight": up[i].T,
        prefix + "mlp.down_proj.weight": down[i].T,
    })
  return {name: np.ascontiguousarray(w) for name, w in weights.items()}


def codelm_params(weights: dict[str, np.ndarray], config: ModelConfig) -> dict[str, Any]:
  """`cohere_weights` inverted: codelm's parameter tree (layers stacked on [L])."""
  inverse = np.argsort(rope_permutation(config.head_dim))
  d, h, k = config.d_model, config.num_heads, config.head_dim
  layer = lambda i, name: weights[f"model.layers.{i}.{name}.weight"]  # noqa: E731
  stack = lambda f: np.stack([f(i) for i in range(config.num_layers)])  # noqa: E731
  return {
      "embedding": weights["model.embed_tokens.weight"],
      "final_norm": {"scale": weights["model.norm.weight"]},
      "layers": {
          "norm": {"scale": stack(lambda i: layer(i, "input_layernorm"))},
          "attention": {
              "query": stack(lambda i: layer(i, "self_attn.q_proj").T.reshape(d, h, k)[:, :, inverse]),
              "key": stack(lambda i: layer(i, "self_attn.k_proj").T[:, inverse]),
              "value": stack(lambda i: layer(i, "self_attn.v_proj").T),
              "out": stack(lambda i: layer(i, "self_attn.o_proj").T.reshape(h, k, d)),
          },
          "mlp": {name: stack(lambda i, name=name: layer(i, f"mlp.{name}_proj").T) for name in ("gate", "up", "down")},
      },
  }


def expected_shapes(config: ModelConfig) -> dict[str, tuple[int, ...]]:
  """The Hugging Face tensors of `config`'s model and their shapes (`cohere_weights`' names)."""
  d, f, q, k = config.d_model, config.d_ff, config.attention_dim, config.head_dim
  shapes = {"model.embed_tokens.weight": (config.vocab_size, d), "model.norm.weight": (d,)}
  for i in range(config.num_layers):
    shapes.update({f"model.layers.{i}.{name}.weight": shape for name, shape in (
        ("input_layernorm", (d,)), ("self_attn.q_proj", (q, d)), ("self_attn.k_proj", (k, d)),
        ("self_attn.v_proj", (k, d)), ("self_attn.o_proj", (d, q)), ("mlp.gate_proj", (f, d)),
        ("mlp.up_proj", (f, d)), ("mlp.down_proj", (d, f)))})
  return shapes


def shape_mismatches(fields: dict[str, Any], weights: dict[str, np.ndarray]) -> list[str]:
  """Where the installed transformers' CohereForCausalLM (built on the meta device: no memory) has
  other parameters than `weights`: a config field it does not honour (an older one without head_dim)."""
  import torch
  from transformers import CohereConfig, CohereForCausalLM

  with torch.device("meta"):
    model = CohereForCausalLM(CohereConfig(**fields))
  expected = {n: tuple(p.shape) for n, p in model.state_dict().items() if n != "lm_head.weight"}
  found = {n: tuple(w.shape) for n, w in weights.items()}
  problems = [f"{n}: transformers builds {expected.get(n)}, codelm has {found.get(n)}"
              for n in sorted(set(expected) | set(found)) if expected.get(n) != found.get(n)]
  return problems
