"""Sampling throughput: KV-cache decoding against a no-cache baseline and this machine's bound.

  python bench/sample_throughput.py --size small --prompts 4 --samples 200 --new_tokens 256

Uses the real Sampler (random parameters: speed does not depend on them; no end token, so every
row decodes all new_tokens). The bound for one decode step is the larger of its compute time at the
measured matmul ceiling and its memory time at the measured copy bandwidth: FLOPs = 2 x (parameters
that multiply activations) x rows + attention over the cache; bytes = the parameters once plus each
row's K/V cache. The no-cache baseline recomputes the whole sequence for every new token (timed at the
final length on 16 rows: an upper bound on its speed). Prints the figures, writes JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import flax.linen as nn  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from model.config import SIZES, get_config  # noqa: E402
from model.transformer import Decoder  # noqa: E402
from sampling.sampler import Sampler, SamplingConfig  # noqa: E402
from model.transformer import init_params  # noqa: E402
from training.throughput import matmul_ceiling  # noqa: E402


class _IdVocabulary:
  """Prompts as token ids: the benchmark measures decoding, not the tokenizer."""

  def __init__(self, vocab_size: int):
    self.vocab_size = vocab_size

  def encode(self, text: str) -> list[int]:
    return [3 + (ord(c) % (self.vocab_size - 3)) for c in text]

  def decode(self, ids) -> str:
    return ""


def copy_bandwidth(megabytes: int = 512) -> float:
  """Bytes/s moved by a device copy (read + write counted), best of five."""
  x = jnp.ones((megabytes * 2 ** 20 // 4,), jnp.float32)
  copy = jax.jit(lambda a: a + 1)
  jax.block_until_ready(copy(x))
  best = min(_timed(lambda: copy(x)) for _ in range(5))
  return 2 * x.nbytes / best


def _timed(fn) -> float:
  start = time.perf_counter()
  jax.block_until_ready(fn())
  return time.perf_counter() - start


def main(argv=None) -> dict:
  parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--size", default="small", choices=list(SIZES))
  parser.add_argument("--prompts", type=int, default=4)
  parser.add_argument("--samples", type=int, default=200)
  parser.add_argument("--prompt_tokens", type=int, default=64)
  parser.add_argument("--new_tokens", type=int, default=256)
  parser.add_argument("--top_p", type=float, default=0.95, help="random parameters give flat distributions, "
                      "whose nucleus needs a full sort of the vocabulary each step (a trained model's rarely does)")
  parser.add_argument("--output", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results",
                                                       "sample_throughput.json"))
  args = parser.parse_args(argv)

  total = args.prompt_tokens + args.new_tokens
  config = get_config(args.size, max_length=total)
  model = Decoder(config)
  params = nn.unbox(init_params(model, jax.random.key(0)))
  sampler = Sampler(model, params, _IdVocabulary(config.vocab_size), begin_id=3, end_ids=[-1])
  prompts = ["x" * (args.prompt_tokens - 1)] * args.prompts
  sampling = SamplingConfig(top_p=args.top_p, max_decode_length=args.new_tokens, chunk_length=64)
  rows = args.prompts * args.samples

  sampler.sample(prompts[:1], 2, SamplingConfig(max_decode_length=4, chunk_length=64), seed=0)  # warm caches
  sampler.sample(prompts, args.samples, SamplingConfig(max_decode_length=2, chunk_length=64), seed=0)
  start = time.perf_counter()
  sampler.sample(prompts, args.samples, sampling, seed=1)  # includes compiling the full-length loop once
  first = time.perf_counter() - start
  start = time.perf_counter()
  sampler.sample(prompts, args.samples, sampling, seed=2)
  elapsed = time.perf_counter() - start
  tokens_per_s = rows * args.new_tokens / elapsed

  # No-cache baseline: a full forward pass at the final length per new token, on 16 rows (its cost
  # is linear in rows, so tokens/s carries over; all rows would take minutes).
  forward = jax.jit(lambda p, t: model.apply({"params": p}, t)[0][:, -1].argmax(-1))
  baseline_rows = min(rows, 16)
  tokens = jnp.ones((baseline_rows, total), jnp.int32)
  jax.block_until_ready(forward(params, tokens))
  baseline_step = min(_timed(lambda: forward(params, tokens)) for _ in range(2))
  baseline_tokens_per_s = baseline_rows / baseline_step

  # The bound for one decode step (average cache length: prompt + half the new tokens).
  ceiling, bandwidth = matmul_ceiling(config.dtype), copy_bandwidth()
  dense = config.num_params  # every weight multiplies once per token (the shared embedding as the output layer)
  cache_len = args.prompt_tokens + args.new_tokens / 2
  flops = 2 * dense * rows + 4 * config.num_layers * config.attention_dim * cache_len * rows
  itemsize = jnp.dtype(config.dtype).itemsize
  bytes_ = config.num_params * 4 + rows * config.num_layers * 2 * cache_len * config.head_dim * itemsize
  bound_step = max(flops / ceiling, bytes_ / bandwidth)
  step_seconds = elapsed / args.new_tokens  # every row decodes every new token (no end token)
  bound_tokens_per_s = rows / bound_step
  result = {
      "size": args.size, "top_p": args.top_p, "prompts": args.prompts, "samples": args.samples, "rows": rows,
      "new_tokens": args.new_tokens, "seconds": elapsed, "first_run_seconds_incl_compile": first,
      "tokens_per_second": tokens_per_s, "samples_per_second": rows / elapsed,
      "no_cache_tokens_per_second": baseline_tokens_per_s, "speedup_over_no_cache": tokens_per_s / baseline_tokens_per_s,
      "matmul_ceiling_flops": ceiling, "copy_bandwidth_bytes_per_second": bandwidth,
      "bound_step_seconds": bound_step, "bound_limited_by": "compute" if flops / ceiling >= bytes_ / bandwidth else "memory",
      "bound_tokens_per_second": bound_tokens_per_s, "fraction_of_bound": tokens_per_s / bound_tokens_per_s,
      "step_seconds": step_seconds, "achieved_bytes_per_second": bytes_ / step_seconds,
      "achieved_flops": flops / step_seconds,
      "backend": jax.default_backend(),
  }
  print(f"{args.size}: {args.prompts} prompts x {args.samples} samples x {args.new_tokens} new tokens in {elapsed:.1f} s: "
        f"{tokens_per_s:,.0f} tokens/s ({rows / elapsed:.1f} samples/s)")
  print(f"no-cache baseline {baseline_tokens_per_s:,.0f} tokens/s: cache speed-up {result['speedup_over_no_cache']:.1f}x")
  print(f"bound {bound_tokens_per_s:,.0f} tokens/s ({result['bound_limited_by']}-bound: {flops / 1e9:.1f} GFLOP and "
        f"{bytes_ / 1e9:.2f} GB per step at {ceiling / 1e9:.0f} GFLOP/s and {bandwidth / 1e9:.1f} GB/s): "
        f"{100 * result['fraction_of_bound']:.0f}% of it")
  print(f"achieved: {bytes_ / step_seconds / 1e9:.1f} GB/s of weights + KV cache, {flops / step_seconds / 1e9:.0f} GFLOP/s "
        f"({1e3 * step_seconds:.0f} ms a step)")
  os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
  with open(args.output, "w") as f:
    json.dump(result, f, indent=2)
  print(f"wrote {args.output}")
  return result


if __name__ == "__main__":
  main()
