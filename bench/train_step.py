"""Training-step throughput and MFU for a model size and batch shape.

  python bench/train_step.py --size small --seq 512 --batch 8

Times the jitted forward + backward + Adafactor update (the real train_step) and, in the same run,
the matmul ceiling of this machine: a large jnp.dot in the compute dtype. MFU is model FLOP/s (PaLM's
6N + 12LHKT per token, model/summary.py) over that measured ceiling. Prints the figures and writes
them as JSON (bench/results/ by default).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import NamedSharding  # noqa: E402

import storage  # noqa: E402
from model import sharding  # noqa: E402
from model.config import AttentionKernel, RematPolicy, SIZES, get_config  # noqa: E402
from model.summary import flops_per_token  # noqa: E402
from model.transformer import Decoder  # noqa: E402
from training.optimizer import adafactor  # noqa: E402
from training.step import init_sharded_state, jit_train_step, state_shardings  # noqa: E402
from training.throughput import matmul_ceiling  # noqa: E402


def synthetic_batch(batch: int, seq: int, vocab: int, documents_per_row: int = 4) -> dict[str, np.ndarray]:
  """A packed batch shaped like SeqIO's DecoderFeatureConverter output: several documents a row."""
  rng = np.random.default_rng(0)
  tokens = rng.integers(3, vocab, (batch, seq), dtype=np.int32)
  features = {"decoder_input_tokens": tokens, "decoder_target_tokens": np.roll(tokens, -1, 1),
              "decoder_loss_weights": np.ones((batch, seq), np.float32)}
  if documents_per_row > 1:
    doc_len = -(-seq // documents_per_row)
    index = np.arange(seq)
    features["decoder_segment_ids"] = np.broadcast_to(index // doc_len + 1, (batch, seq)).astype(np.int32)
    features["decoder_positions"] = np.broadcast_to(index % doc_len, (batch, seq)).astype(np.int32)
  return features


def main(argv=None) -> dict:
  parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--size", default="small", choices=list(SIZES))
  parser.add_argument("--seq", type=int, default=512)
  parser.add_argument("--batch", type=int, default=8)
  parser.add_argument("--steps", type=int, default=5, help="timed steps after two warm-up steps")
  parser.add_argument("--dtype", default=None, help="compute dtype (default: the size's, e.g. bf16 for 1b)")
  parser.add_argument("--remat", default=None, choices=[p.value for p in RematPolicy])
  parser.add_argument("--attention", default=None, choices=[k.value for k in AttentionKernel],
                      help="training attention kernel (cudnn: NVIDIA GPUs only)")
  parser.add_argument("--documents_per_row", type=int, default=4,
                      help="packed documents per row; 1 gives unpacked rows (plain causal mask)")
  parser.add_argument("--mesh", default="-1,1,1", help="data,fsdp,tensor over all local devices")
  parser.add_argument("--matmul_n", type=int, default=None, help="ceiling matmul size (default 2048 CPU, 8192 GPU)")
  parser.add_argument("--output", default=None, help="JSON path (default bench/results/train_step_SIZE_PLATFORM.json)")
  args = parser.parse_args(argv)

  overrides = {}
  if args.dtype:
    overrides["dtype"] = args.dtype
  if args.remat:
    overrides["remat"] = args.remat
  if args.attention:
    overrides["attention_kernel"] = args.attention
  config = get_config(args.size, max_length=args.seq, **overrides)
  backend = jax.default_backend()
  matmul_n = args.matmul_n or (2048 if backend == "cpu" else 8192)
  ceiling = matmul_ceiling(config.dtype, matmul_n) * jax.device_count()
  print(f"{backend}: {jax.device_count()} device(s) [{jax.devices()[0].device_kind}]; "
        f"{config.dtype} matmul ceiling {ceiling / 1e12:.3f} TFLOP/s ({matmul_n}^3 dot)", flush=True)

  model, optimizer = Decoder(config), adafactor(1e-2)
  mesh = sharding.make_mesh(*[int(x) for x in args.mesh.split(",")])
  _, state_shardings_ = state_shardings(model, optimizer, mesh)
  batch_sharding = NamedSharding(mesh, sharding.batch_spec())

  with sharding.activation_sharding(mesh):
    state = init_sharded_state(model, optimizer, 0, state_shardings_)
    batch = jax.device_put(synthetic_batch(args.batch, args.seq, config.vocab_size, args.documents_per_row), batch_sharding)
    step = jit_train_step(model, optimizer, state_shardings_, batch_sharding)  # train.py's step, as jitted there
    start = time.perf_counter()
    state, metrics = step(state, batch)
    jax.block_until_ready(metrics)
    compile_s = time.perf_counter() - start
    state, metrics = step(state, batch)
    jax.block_until_ready(metrics)
    times = []
    for i in range(args.steps):
      start = time.perf_counter()
      state, metrics = step(state, batch)
      jax.block_until_ready(metrics)
      times.append(time.perf_counter() - start)
      print(f"  step {i + 1}/{args.steps}: {times[-1]:.3f} s, loss {float(metrics['loss']):.3f}", flush=True)

  step_s = statistics.median(times)
  tokens_per_s = args.batch * args.seq / step_s
  model_flops = flops_per_token(config, args.seq) * tokens_per_s
  result = {
      "size": args.size, "seq": args.seq, "batch": args.batch, "dtype": str(config.dtype),
      "remat": config.remat.value, "attention_kernel": config.attention_kernel.value,
      "documents_per_row": args.documents_per_row, "params": config.num_params, "backend": backend,
      "device_kind": jax.devices()[0].device_kind, "devices": jax.device_count(),
      "host": platform.node(), "step_seconds": step_s, "step_seconds_all": times,
      "first_step_seconds_incl_compile": compile_s, "tokens_per_second": tokens_per_s,
      "model_tflops_per_second": model_flops / 1e12, "matmul_ceiling_tflops_per_second": ceiling / 1e12,
      "mfu": model_flops / ceiling, "final_loss": float(metrics["loss"]),
  }
  print(f"{args.size} {args.batch}x{args.seq} {config.dtype}: {step_s:.3f} s/step, {tokens_per_s:,.0f} tokens/s, "
        f"{model_flops / 1e12:.3f} model TFLOP/s, MFU {100 * result['mfu']:.1f}% of the measured "
        f"{ceiling / 1e12:.3f} TFLOP/s ceiling")
  output = args.output or os.path.join(os.path.dirname(os.path.abspath(__file__)), "results",
                                       f"train_step_{args.size}_{backend}.json")
  storage.makedirs(storage.dirname(output))
  storage.write_json(output, result)
  print(f"wrote {output}")
  return result


if __name__ == "__main__":
  main()
