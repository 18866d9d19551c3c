"""Model size, training FLOPs and parameter bytes per device, computed without allocating anything.

  python -m model.summary --size 1b [--json] [--seq 2048] [--mesh 1,-1,1 --devices 256]

Parameter count from jax.eval_shape of the real model; bytes per device from the logical sharding
rules (model/sharding.py) applied to the parameters on the given mesh. The optimizer state is the
optimizer's business: `python -m training.summary` (same flags) adds the Adafactor state's bytes.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Callable

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
  boxed = sharding.abstract_params(Decoder(config))
  params = nn.unbox(boxed)
  axis_sizes = dict(zip(sharding.MESH_AXES, mesh))
  param_bytes = sharding.bytes_per_device(params, sharding.param_specs(boxed), axis_sizes)
  count = sum(x.size for x in jax.tree.leaves(params))
  return {
      "params": int(count),
      "non_embedding_params": int(count - config.vocab_size * config.d_model),
      "flops_per_token": flops_per_token(config, seq_len),
      "seq_len": seq_len,
      "mesh": dict(axis_sizes),
      "param_bytes_per_device": param_bytes,
      "config": {"layers": config.num_layers, "heads": config.num_heads, "d_model": config.d_model,
                 "d_ff": config.d_ff, "head_dim": config.head_dim, "vocab_size": config.vocab_size},
  }


# (config, the model's summary) -> more byte counts per device by column label, e.g. {"Adafactor": n}.
ExtraBytes = Callable[[ModelConfig, dict], dict[str, int]]


def main(argv: list[str] | None = None, extra: ExtraBytes | None = None, description: str = __doc__) -> None:
  """The CLI; `extra` adds byte counts that model/ cannot know (training/summary.py: the optimizer
  state), each as a `<label>_bytes_per_device` JSON field (label lower-cased) and a GiB/dev column."""
  parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
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
  byte_columns = {"params GiB/dev": "param_bytes_per_device"}  # table header -> JSON field
  for r in results:
    for label, n in (extra(get_config(r["size"]), r) if extra else {}).items():
      byte_columns[f"{label} GiB/dev"] = field = f"{label.lower()}_bytes_per_device"
      r[field] = n

  if args.json:
    print(json.dumps(results[0] if len(results) == 1 else results))
    return
  gib = 2 ** 30
  print(f"mesh data={mesh[0]} fsdp={mesh[1]} tensor={mesh[2]}, seq {args.seq}")
  print(f"{'size':>6} {'params':>15} {'non-embed':>15} {'GFLOP/token':>12}" + "".join(f" {h:>18}" for h in byte_columns))
  for r in results:
    print(f"{r['size']:>6} {r['params']:>15,} {r['non_embedding_params']:>15,} {r['flops_per_token'] / 1e9:>12.2f}"
          + "".join(f" {r[field] / gib:>18.4f}" for field in byte_columns.values()))


if __name__ == "__main__":
  sys.exit(main())
