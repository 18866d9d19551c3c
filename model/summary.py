"""Model size, training FLOPs and per-device memory, computed without allocating anything.

  python -m model.summary --size 1b [--json] [--seq 2048] [--mesh 1,-1,1 --devices 256]

Parameter count from jax.eval_shape of the real model; bytes per device from the logical sharding
rules (model/sharding.py) applied to the parameters and the Adafactor state on the given mesh.
"""

from __future__ import annotations

import argparse
import json
import sys

import flax.linen as nn
import jax

from model import sharding
from model.config import SIZES, ModelConfig, get_config
from model.transformer import Decoder


def flops_per_token(config: ModelConfig, seq_len: int) -> float:
  """Training FLOPs per token, PaLM's formula (Appendix B): 6N + 12 L H K T.

  N counts every parameter that multiplies an activation, so the shared embedding counts once (as the
  output layer; the input lookup is free); the second term is attention's score and value products.
  """
  return 6.0 * config.num_params + 12.0 * config.num_layers * config.attention_dim * seq_len


def summarize(config: ModelConfig, seq_len: int, mesh: tuple[int, int, int]) -> dict:
  from training.optimizer import adafactor  # the optimizer whose state we size

  model = Decoder(config)
  boxed = jax.eval_shape(lambda: model.init(jax.random.key(0), jax.numpy.zeros((1, 8), "int32"))["params"])
  params = nn.unbox(boxed)
  specs = sharding.param_specs(boxed)
  opt_state = jax.eval_shape(adafactor(1e-2).init, params)
  opt_specs = sharding.adafactor_state_specs(opt_state, params, specs)
  axis_sizes = dict(zip(sharding.MESH_AXES, mesh))
  param_bytes = sharding.bytes_per_device(params, specs, axis_sizes)
  opt_bytes = sharding.bytes_per_device(opt_state, opt_specs, axis_sizes)
  count = sum(x.size for x in jax.tree.leaves(params))
  return {
      "params": int(count),
      "non_embedding_params": int(count - config.vocab_size * config.d_model),
      "flops_per_token": flops_per_token(config, seq_len),
      "seq_len": seq_len,
      "mesh": dict(axis_sizes),
      "param_bytes_per_device": param_bytes,
      "adafactor_bytes_per_device": opt_bytes,
      "state_bytes_per_device": param_bytes + opt_bytes,
      "config": {"layers": config.num_layers, "heads": config.num_heads, "d_model": config.d_model,
                 "d_ff": config.d_ff, "head_dim": config.head_dim, "vocab_size": config.vocab_size},
  }


def main(argv: list[str] | None = None) -> None:
  parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--size", required=True, help=f"one or more of {','.join(SIZES)}, comma-separated, or 'all'")
  parser.add_argument("--seq", type=int, default=2048, help="sequence length for the attention FLOPs")
  parser.add_argument("--mesh", default="1,1,1", help="data,fsdp,tensor; one entry may be -1 (filled from --devices)")
  parser.add_argument("--devices", type=int, default=None, help="device count for a -1 mesh entry")
  parser.add_argument("--json", action="store_true", help="print one JSON object (a list for several sizes)")
  args = parser.parse_args(argv)

  names = list(SIZES) if args.size == "all" else args.size.split(",")
  try:
    mesh_axes = [int(x) for x in args.mesh.split(",")]
    if len(mesh_axes) != 3:
      raise ValueError
  except ValueError:
    parser.error(f"--mesh must be three integers data,fsdp,tensor, got {args.mesh!r}")
  devices = args.devices
  if devices is None:
    devices = 1 if -1 in mesh_axes else mesh_axes[0] * mesh_axes[1] * mesh_axes[2]
  try:
    mesh = sharding.mesh_shape(*mesh_axes, num_devices=devices)
    results = [dict(size=name, **summarize(get_config(name), args.seq, mesh)) for name in names]
  except ValueError as e:
    parser.error(str(e))

  if args.json:
    print(json.dumps(results[0] if len(results) == 1 else results))
    return
  gib = 2 ** 30
  print(f"mesh data={mesh[0]} fsdp={mesh[1]} tensor={mesh[2]}, seq {args.seq}")
  print(f"{'size':>6} {'params':>15} {'non-embed':>15} {'GFLOP/token':>12} {'params GiB/dev':>15} "
        f"{'Adafactor GiB/dev':>18}")
  for r in results:
    print(f"{r['size']:>6} {r['params']:>15,} {r['non_embedding_params']:>15,} {r['flops_per_token'] / 1e9:>12.2f} "
          f"{r['param_bytes_per_device'] / gib:>15.3f} {r['adafactor_bytes_per_device'] / gib:>18.4f}")


if __name__ == "__main__":
  sys.exit(main())
