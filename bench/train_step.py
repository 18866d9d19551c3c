"""Training-step throughput and MFU for a model size and batch shape.

  python bench/train_step.py --size small --seq 512 --batch 8

Times the jitted forward + backward + Adafactor update (the real train_step) and, in the same run,
the matmul ceiling of this machine: a large jnp.dot in the compute dtype. MFU is model FLOP/s (PaLM's
6N + 12LHKT per token, model/summary.py) over that measured ceiling. Prints the figures and writes
them as JSON (bench/results/ by default).

`--hook_steps N` also measures what training.loop.run adds around the same step (the time breakdown's
timeline and watcher thread, the progress log every --log_every steps; profiling and pass@k off, as
by default): rounds of N steps through a bare dispatch loop and through loop.run, alternated, so the
overhead can be read against the spread of the bare rounds (the noise).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import NamedSharding  # noqa: E402

import storage  # noqa: E402
from training import goodput, loop  # noqa: E402
from training.hooks import ProgressLog  # noqa: E402
from training.metrics import MetricsWriter  # noqa: E402
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


def hooks_overhead(step, state, host_batch, batch_sharding, steps: int, rounds: int, log_every: int,
                   flops_per_token_: float, ceiling: float) -> dict:
  """Seconds per step of `rounds` x `steps` steps dispatched back to back (the batch transferred each
  step, as the loop does), and through loop.run with its timeline and progress log, alternated."""
  def bare(state):
    for _ in range(steps):
      state, metrics = step(state, loop.global_batch(host_batch, batch_sharding))
    jax.block_until_ready(metrics)
    return state

  def with_hooks(state, start: int, model_dir: str):
    timeline = goodput.Timeline()
    writer = MetricsWriter(model_dir)
    log = ProgressLog(writer, lambda s: 0.01, start + steps, log_every, tokens_per_step=host_batch[
        "decoder_input_tokens"].size, flops_per_token=flops_per_token_, peak_flops=ceiling, start_step=start,
        primary=False, newest_checkpoint=lambda: None, timeline=timeline)  # primary=False: no console lines
    batches = iter(lambda: host_batch, None)
    state = loop.run(state, step, batches, batch_sharding, start, start + steps, checkpoint_every=10**9, hooks=[log],
                     preemption=loop.Preemption(), timeline=timeline)
    jax.block_until_ready(state)
    timeline.close()
    writer.close()
    return state

  times: dict[str, list[float]] = {"bare": [], "hooks": []}
  with tempfile.TemporaryDirectory() as model_dir:
    for r in range(rounds):
      for name in ("bare", "hooks"):
        began = time.perf_counter()
        state = bare(state) if name == "bare" else with_hooks(state, 2 * r * steps, model_dir)
        times[name].append((time.perf_counter() - began) / steps)
  bare_s, hooks_s = statistics.median(times["bare"]), statistics.median(times["hooks"])
  return {"hook_steps": steps, "rounds": rounds, "log_every": log_every, "bare_step_seconds": times["bare"],
          "hooks_step_seconds": times["hooks"], "hooks_overhead": hooks_s / bare_s - 1,
          "bare_spread": (max(times["bare"]) - min(times["bare"])) / bare_s}


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
  parser.add_argument("--hook_steps", type=int, default=0,
                      help="also time rounds of this many steps bare and through training.loop.run (0: not)")
  parser.add_argument("--hook_rounds", type=int, default=3)
  parser.add_argument("--log_every", type=int, default=10, help="the progress log's interval in the hooks rounds")
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
    overhead = {}
    if args.hook_steps:
      host_batch = synthetic_batch(args.batch, args.seq, config.vocab_size, args.documents_per_row)
      overhead = hooks_overhead(step, state, host_batch, batch_sharding, args.hook_steps, args.hook_rounds,
                                args.log_every, flops_per_token(config, args.seq), ceiling)

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
      "mfu": model_flops / ceiling, "final_loss": float(metrics["loss"]), **overhead,
  }
  print(f"{args.size} {args.batch}x{args.seq} {config.dtype}: {step_s:.3f} s/step, {tokens_per_s:,.0f} tokens/s, "
        f"{model_flops / 1e12:.3f} model TFLOP/s, MFU {100 * result['mfu']:.1f}% of the measured "
        f"{ceiling / 1e12:.3f} TFLOP/s ceiling")
  if overhead:
    print(f"training.loop.run with its hooks (log every {args.log_every}): "
          f"{1e3 * statistics.median(overhead['hooks_step_seconds']):.2f} ms/step against "
          f"{1e3 * statistics.median(overhead['bare_step_seconds']):.2f} ms bare: {100 * overhead['hooks_overhead']:+.1f}% "
          f"(bare rounds spread {100 * overhead['bare_spread']:.1f}%; {args.hook_rounds} rounds of {args.hook_steps} steps)")
  output = args.output or os.path.join(os.path.dirname(os.path.abspath(__file__)), "results",
                                       f"train_step_{args.size}_{backend}.json")
  storage.makedirs(storage.dirname(output))
  storage.write_json(output, result)
  print(f"wrote {output}")
  return result


if __name__ == "__main__":
  main()
