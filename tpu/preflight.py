"""Pre-flight: compile a run's training step, and optionally sample.py's decode loop, for a TPU slice or
a GPU cluster on this CPU host, before it is paid for; report per chip what XLA allocates, whether it
fits in HBM, the step's FLOPs and a roofline estimate of its time.

  python -m tpu.preflight --gin_file=gin_configs/runs/pretrain.gin --gin_file=gin_configs/models/1b.gin \\
      --topology=v4-128 [--mesh=1,-1,1] [--gin.train.microbatches=2 ...] [--sample_batch_size=256]

The same gin files and bindings as train.py (MODEL_DIR and CORPUS_DIR may stay unset: nothing is read
or written there; a CORPUS_DIR whose spm.model exists sets the vocabulary size, else --vocab_size or
the size's own). The program compiled is the run's own: its model, mesh and logical-axis rules,
optimizer, gradient accumulation, remat policy, LoRA. Nothing runs: the chips are libtpu's abstract
devices for the named topology (jax.experimental.topologies), so only the compiler's figures are real.
GPUs the same way (--topology=h100-8, h200:2x8, a100-8): jax's CUDA plugin compiles for a GPU described
by its published figures (tpu/slices.py), without a GPU or a driver; a GPU program may hold the share
of memory JAX's allocator takes (XLA_PYTHON_CLIENT_MEM_FRACTION, 0.75 unless set).

Exit status: 0 when everything fits, 1 when a program does not (the overshoot in GiB and the knobs
that would help are printed), 2 for a usage error. Needs libtpu (the compiler): `make tpu_compiler`
puts it in .tpu_compiler/ (found there, or through TPU_LIBRARY_PATH), or `pip install -e '.[tpu]'`;
for GPUs, jax's CUDA plugin: `make gpu_compiler` (.gpu_compiler/) or `pip install -e '.[gpu]'`.
"""

from __future__ import annotations

import os
import sys

if __package__ in (None, ""):  # run as a script (tpu/launch.py does): the repository on the path
  sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

if __name__ == "__main__":  # before TensorFlow and JAX are imported
  import quiet

  quiet.setup()

import argparse
import dataclasses
import json
import re
import time
from typing import Any, Sequence

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LOCAL_LIBTPU = os.path.join(ROOT, ".tpu_compiler", "libtpu", "libtpu.so")
LOCAL_CUDA_PLUGIN = os.path.join(ROOT, ".gpu_compiler")  # jax-cuda12-plugin and -pjrt: `make gpu_compiler`
# libtpu looks for a TPU VM's metadata server and worker list when it loads; on a CPU host there are
# none, and compiling for a named topology needs neither.
_LIBTPU_ENV = {"TPU_SKIP_MDS_QUERY": "1", "TPU_ACCELERATOR_TYPE": "v4-8", "TPU_WORKER_HOSTNAMES": "localhost",
               "TPU_WORKER_ID": "0", "TPU_STDERR_LOG_LEVEL": "3", "TPU_MIN_LOG_LEVEL": "3",
               # No TPU to guard: several pre-flights (parallel tests) may load libtpu at once.
               "ALLOW_MULTIPLE_LIBTPU_LOAD": "1"}


class DoesNotFit(Exception):
  pass


def find_libtpu() -> str | None:
  """TPU_LIBRARY_PATH, the repository's .tpu_compiler/, or the libtpu package: the first that exists."""
  if os.environ.get("TPU_LIBRARY_PATH") and os.path.exists(os.environ["TPU_LIBRARY_PATH"]):
    return os.environ["TPU_LIBRARY_PATH"]
  if os.path.exists(LOCAL_LIBTPU):
    return LOCAL_LIBTPU
  try:
    import libtpu  # the `tpu` extra
  except ImportError:
    return None
  return libtpu.get_library_path()


def find_cuda_plugin() -> str | None:
  """The folder holding jax's CUDA plugin: the repository's .gpu_compiler/ or the installed `gpu` extra."""
  if os.path.exists(os.path.join(LOCAL_CUDA_PLUGIN, "jax_plugins", "xla_cuda12")):
    return LOCAL_CUDA_PLUGIN
  try:
    import jax_plugins.xla_cuda12 as plugin  # the `gpu` extra
  except ImportError:
    return None
  return os.path.dirname(os.path.dirname(plugin.__file__))


def gpu_devices(slice_) -> list:
  """XLA's compile-only CUDA devices for `slice_`, described by its target config: no GPU, no driver."""
  path = find_cuda_plugin()
  if path is None:
    raise RuntimeError("jax's CUDA plugin (the GPU compiler) is not installed: run `make gpu_compiler` (into "
                       ".gpu_compiler/, outside the venv) or `pip install -e '.[gpu]'`")
  if path not in sys.path:
    sys.path.append(path)  # before JAX looks for plugins: main() calls this before anything compiles
  # The plugin checks the CUDA libraries of the GPU it would drive when it registers; there is none here,
  # and compiling needs none of them.
  os.environ.setdefault("JAX_SKIP_CUDA_CONSTRAINTS_CHECK", "1")
  from jax.experimental import topologies

  topology = topologies.get_topology_desc(platform="cuda", topology=slice_.gpu_topology,
                                          target_config=slice_.chip.target_config)
  devices = list(topology.devices)
  if len(devices) != slice_.chips:
    raise RuntimeError(f"the CUDA plugin gives {len(devices)} devices for {slice_.gpu_topology}, expected "
                       f"{slice_.chips}")
  return devices


def usable_bytes(slice_) -> int:
  """What a program may hold per device: XLA's HBM on a TPU; on a GPU, the share of its memory that
  JAX's allocator takes (XLA_PYTHON_CLIENT_MEM_FRACTION, 0.75 unless set)."""
  if slice_.chip.platform != "cuda":
    return slice_.chip.hbm_bytes
  return int(slice_.chip.hbm_bytes * gpu_memory_fraction())


def gpu_memory_fraction() -> float:
  return float(os.environ.get("XLA_PYTHON_CLIENT_MEM_FRACTION", "0.75"))


def topology_devices(slice_) -> list:
  """The abstract devices of `slice_`: libtpu's, one per chip (megacore chips as one device), or the
  CUDA plugin's, one per GPU."""
  if slice_.chip.platform == "cuda":
    return gpu_devices(slice_)
  from jax.experimental import topologies

  path = find_libtpu()
  if path is None:
    raise RuntimeError("the TPU compiler (libtpu) is not installed: run `make tpu_compiler` (libtpu into "
                       ".tpu_compiler/, outside the venv) or `pip install -e '.[tpu]'`, or set TPU_LIBRARY_PATH")
  os.environ["TPU_LIBRARY_PATH"] = path
  for name, value in _LIBTPU_ENV.items():
    os.environ.setdefault(name, value)
  topology = topologies.get_topology_desc(
      platform="tpu", topology_name=slice_.topology_name,
      chip_config_name="megacore" if slice_.chip.megacore else "default",
      chips_per_host_bounds=slice_.chips_per_host, num_slices=1)
  devices = list(topology.devices)
  if len(devices) != slice_.chips:
    raise RuntimeError(f"libtpu gives {len(devices)} devices for {slice_.topology_name}, expected {slice_.chips}")
  return devices


# ---- what a compiled program needs --------------------------------------------------------------


@dataclasses.dataclass
class Memory:
  """Per device, bytes, from the compiled program's memory analysis."""
  arguments: int
  outputs: int
  aliased: int  # outputs written into donated arguments' buffers
  temporaries: int
  generated_code: int

  @property
  def total(self) -> int:
    return self.arguments + self.outputs - self.aliased + self.temporaries + self.generated_code

  @classmethod
  def of(cls, compiled) -> "Memory":
    m = compiled.memory_analysis()
    return cls(m.argument_size_in_bytes, m.output_size_in_bytes, m.alias_size_in_bytes, m.temp_size_in_bytes,
               m.generated_code_size_in_bytes)


_SIZE = r"([0-9.]+)([KMGT]?)i?B?"


def _bytes(number: str, unit: str) -> float:
  return float(number) * {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}[unit]


def overshoot_of(message: str) -> tuple[float, float] | None:
  """(needed, available) bytes from XLA's out-of-memory error, when it states them."""
  for pattern in (rf"Used {_SIZE} of {_SIZE} hbm", rf"\({_SIZE}\) exceeds available HBM \({_SIZE}\)"):
    found = re.search(pattern, message)
    if found:
      return _bytes(*found.group(1, 2)), _bytes(*found.group(3, 4))
  return None


def compile_or_overshoot(lowered) -> Any:
  """The compiled program, or DoesNotFit with XLA's words when it cannot be placed in HBM."""
  try:
    return lowered.compile()
  except Exception as error:  # noqa: BLE001 - XlaRuntimeError; only memory exhaustion is ours to explain
    text = str(error)
    if "RESOURCE_EXHAUSTED" not in text and "exceeds available" not in text and "Ran out of memory" not in text:
      raise
    raise DoesNotFit(text) from None


def compiled_figures(lower, slice_) -> tuple[Any, dict]:
  """(the compiled program or None, its figures): `lower()` compiled, timed from the lowering, and
  either its memory per chip against the chip's HBM and XLA's cost analysis, or XLA's refusal."""
  began = time.perf_counter()
  try:
    compiled = compile_or_overshoot(lower())
  except DoesNotFit as error:
    return None, {"fits": False, "compile_s": time.perf_counter() - began,
                  "error": str(error).strip().splitlines()[0][:600], "overshoot": overshoot_of(str(error))}
  memory = Memory.of(compiled)
  xla = compiled.cost_analysis() or {}  # None for a GPU compiled without one
  xla = xla[0] if isinstance(xla, list) else xla
  usable = usable_bytes(slice_)
  return compiled, {"compile_s": time.perf_counter() - began, "memory": dataclasses.asdict(memory),
                    "total_bytes": memory.total, "hbm_bytes": usable,
                    "fits": memory.total <= usable, "xla_flops": float(xla.get("flops", 0.0)),
                    "xla_bytes_accessed": float(xla.get("bytes accessed", 0.0))}


# ---- the training step ----------------------------------------------------------------------------


def _gib(n: float) -> str:
  return f"{n / 2**30:.2f} GiB" if abs(n) >= 2**30 else f"{n / 2**20:.1f} MiB"


def train_step_report(config, model_config, slice_, devices) -> dict:
  """Compiles `config`'s training step for `devices`; the report of what it needs and costs."""
  import flax.linen as nn
  from jax.sharding import NamedSharding

  from model import sharding
  from model.summary import flops_per_token
  from model.transformer import Decoder
  from tpu.traced_flops import traced_flops
  from training import run
  from training.checkpoints import abstract_with_shardings
  from training.step import Trainable, abstract_batch, jitted_train_step, lora_state_shardings, state_shardings, \
      train_step

  _, optimizer = run.schedule_and_optimizer(config)
  model = Decoder(model_config, lora=config.lora)
  mesh_shape = sharding.mesh_shape(*config.mesh_shape, num_devices=len(devices))
  mesh = sharding.make_mesh(*mesh_shape, devices=devices)
  batch_sharding = NamedSharding(mesh, sharding.batch_spec())
  length = config.sequence_length
  # T5X's convention: feature lengths with `inputs` are a prefix LM's (UL2, prompt -> completion).
  prefix_lm = "inputs" in config.task_feature_lengths or config.practical_tasks is not None
  batch = abstract_batch(config.batch_size, length, batch_sharding, prefix_lm)
  trainable = Trainable(model)
  if config.lora:  # the frozen base, laid out as training restores it (unboxed outside the mesh context)
    base = Decoder(model_config)
    frozen_shardings = sharding.param_shardings(base, mesh)
    trainable = Trainable.lora_adapters(
        model, abstract_with_shardings(nn.unbox(sharding.abstract_params(base)), frozen_shardings), frozen_shardings,
        config.seed)
  with sharding.activation_sharding(mesh):
    if config.lora:
      abstract, shardings = lora_state_shardings(model, optimizer, mesh)
    else:
      abstract, shardings = state_shardings(model, optimizer, mesh, config.optimizer)
    arguments = (abstract_with_shardings(abstract, shardings), batch, trainable.frozen)
    step = jitted_train_step(trainable, optimizer, shardings, batch_sharding, config.z_loss, config.microbatches)
    report = {"program": "train step", "mesh": dict(zip(sharding.MESH_AXES, mesh_shape)),
              "batch": [config.batch_size, length], "microbatches": config.microbatches,
              "remat": model_config.remat.value, "lora": config.lora is not None}
    compiled, figures = compiled_figures(lambda: step.lower(*arguments), slice_)
    report.update(figures)
    if compiled is None:
      return report
    traced = traced_flops(lambda *a: train_step(*a, model=trainable, optimizer=optimizer, z_loss=config.z_loss,
                                                microbatches=config.microbatches), *arguments)
  chips = len(devices)
  # The estimate: the step's FLOPs at the chip's bf16 peak, a lower bound on its time that a
  # compute-bound step (batch 256 x 2048 is) approaches; the MFU it would mean is at most the model's
  # FLOPs over the step's (what rematerialisation costs). No memory-traffic term: XLA's bytes accessed
  # count a loop body once and move with its fusion choices (kept, raw, in the JSON).
  report.update(traced_flops=traced / chips,
                model_flops=flops_per_token(model_config, length) * config.batch_size * length / chips)
  report["estimated_step_s"] = report["traced_flops"] / slice_.chip.peak_bf16_flops
  report["estimated_mfu"] = min(1.0, report["model_flops"] / report["traced_flops"])
  return report


# ---- the sampler ----------------------------------------------------------------------------------


def sampler_report(model_config, slice_, devices, mesh_shape, rows: int, num_prompts: int, num_samples: int,
                   prompt_length: int, max_decode_length: int) -> dict:
  """Compiles sample.py's decode loop (one chunk of decode steps over `rows` rows) for `devices`."""
  import flax.linen as nn

  from model import sharding
  from model.transformer import Decoder
  from sampling.sampler import Sampler, SamplingConfig
  from training.checkpoints import abstract_with_shardings

  model_config = model_config.replace(max_length=max(model_config.max_length, prompt_length + max_decode_length))
  model = Decoder(model_config)
  shape = sharding.mesh_shape(*mesh_shape, num_devices=len(devices))
  mesh = sharding.make_mesh(*shape, devices=devices)
  params = abstract_with_shardings(nn.unbox(sharding.abstract_params(model)), sharding.param_shardings(model, mesh))
  sampler = Sampler(model, params, None, 0, [1], mesh=mesh)
  config = SamplingConfig(max_decode_length=max_decode_length, rows=rows)
  width = -(-prompt_length // 16) * 16
  report = {"program": "decode loop", "mesh": dict(zip(sharding.MESH_AXES, shape)), "rows": rows,
            "prompts": num_prompts, "samples_per_prompt": num_samples, "prompt_length": width,
            "max_decode_length": max_decode_length, "chunk_length": config.chunk_length}
  with sharding.activation_sharding(mesh):
    compiled, figures = compiled_figures(lambda: sampler.lower(num_prompts, width, num_samples, config)[1], slice_)
  report.update(figures)
  if compiled is not None:  # decoding is bound by reading the parameters and the caches once per step
    report["estimated_decode_step_s"] = figures["memory"]["arguments"] / slice_.chip.hbm_bytes_per_s
    report["estimated_tokens_per_s"] = rows / report["estimated_decode_step_s"]
  return report


# ---- the report -----------------------------------------------------------------------------------


def knobs(report: dict, config, slice_=None) -> list[str]:
  """What would make a training step that does not fit smaller, most effective first."""
  hints = []
  if slice_ is not None and slice_.chip.platform == "cuda" and gpu_memory_fraction() < 0.95:
    hints.append("give JAX more of each GPU's memory: XLA_PYTHON_CLIENT_MEM_FRACTION=0.95 (now "
                 f"{gpu_memory_fraction():.2f})")
  if report["remat"] == "none":
    hints.append("recompute activations: --gin.train.model_overrides=\"{'remat': 'full'}\" (or 'dots')")
  elif report["remat"] == "dots":
    hints.append("recompute more: --gin.train.model_overrides=\"{'remat': 'full'}\"")
  rows = config.batch_size // config.microbatches
  if rows > 1:
    hints.append(f"accumulate gradients: --gin.train.microbatches={config.microbatches * 2} "
                 f"(the same update, half the activations)")
  mesh = report["mesh"]
  if mesh["data"] > 1:
    hints.append(f"shard parameters and optimizer state over every chip: --mesh=1,-1,{mesh['tensor']}")
  hints.append(f"a smaller batch (--gin.BATCH_SIZE={config.batch_size // 2}) or a larger slice")
  return hints


def format_report(report: dict, slice_) -> str:
  lines = [f"{report['program']} on {slice_.describe()}"]
  mesh = " ".join(f"{k}={v}" for k, v in report["mesh"].items())
  if report["program"] == "train step":
    lines.append(f"  batch {report['batch'][0]} x {report['batch'][1]} tokens, mesh {mesh}, microbatches "
                 f"{report['microbatches']}, remat {report['remat']}{', LoRA' if report['lora'] else ''}; "
                 f"compiled in {report['compile_s']:.0f} s")
  else:
    lines.append(f"  {report['rows']} rows, {report['prompts']} prompts x {report['samples_per_prompt']} samples, "
                 f"prompts of {report['prompt_length']} tokens, up to {report['max_decode_length']} new, mesh "
                 f"{mesh}; compiled in {report['compile_s']:.0f} s")
  if "memory" not in report:
    needed = report.get("overshoot")
    if needed:
      lines.append(f"  DOES NOT FIT: XLA needs {_gib(needed[0])} per chip of {_gib(needed[1])} usable HBM: "
                   f"{_gib(needed[0] - needed[1])} over")
    else:
      lines.append("  DOES NOT FIT (XLA gives no figure)")
    lines.append(f"  XLA: {report['error']}")
    return "\n".join(lines)
  m = Memory(**report["memory"])
  held = "parameters, optimizer state, batch" if report["program"] == "train step" else "parameters, caches, state"
  lines.append(f"  per chip: arguments {_gib(m.arguments)} ({held}), outputs "
               f"{_gib(m.outputs)} ({_gib(m.aliased)} of them in donated buffers), temporaries {_gib(m.temporaries)}, "
               f"generated code {_gib(m.generated_code)}")
  verdict = "fits" if report["fits"] else "DOES NOT FIT"
  limit = f"{_gib(report['hbm_bytes'])} HBM"
  if slice_.chip.platform == "cuda":
    limit = (f"{_gib(report['hbm_bytes'])} (JAX's allocator takes {gpu_memory_fraction():.0%} of the GPU's "
             f"{_gib(slice_.chip.hbm_bytes)}: XLA_PYTHON_CLIENT_MEM_FRACTION)")
  lines.append(f"  total {_gib(m.total)} of {limit}: {verdict} "
               f"({_gib(abs(report['hbm_bytes'] - m.total))} {'free' if report['fits'] else 'over'})")
  if report["program"] == "train step":
    xla = (f"XLA's cost analysis {report['xla_flops']:.3e} (a scanned layer body counted once)"
           if report["xla_flops"] else "XLA gives no cost analysis for this target")
    lines.append(f"  FLOPs per step per chip: {report['traced_flops']:.3e} counted on the traced step (every "
                 f"layer); the model's 6N + 12LHKT {report['model_flops']:.3e}; {xla}")
    lines.append(f"  estimate (not a measurement): at least {report['estimated_step_s'] * 1e3:.3g} ms per step (its "
                 f"FLOPs at the chip's bf16 peak); MFU at most {100 * report['estimated_mfu']:.0f}% (model FLOPs / "
                 f"step FLOPs)")
  else:
    lines.append(f"  estimate (parameters and caches read once per step, not a measurement): "
                 f"{report['estimated_decode_step_s'] * 1e3:.2f} ms per decode step, "
                 f"{report['estimated_tokens_per_s']:,.0f} tokens/s over the slice")
  return "\n".join(lines)


def _parse_mesh(text: str) -> tuple[int, int, int]:
  try:
    shape = tuple(int(x) for x in text.split(","))
  except ValueError:
    shape = ()
  if len(shape) != 3 or shape.count(-1) > 1 or any(s == 0 or s < -1 for s in shape):
    raise argparse.ArgumentTypeError(f"{text!r} is not DATA,FSDP,TENSOR (positive sizes, at most one -1), "
                                     "e.g. 1,-1,1")
  return shape


def build_parser() -> argparse.ArgumentParser:
  p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  p.add_argument("--topology", required=True,
                 help="the slice: an accelerator type (v4-128, v5p-64, v5e-256 / v5litepod-256, v6e-8), a "
                      "topology (v4:4x4x4, v5e:16x16), or GPUs (h100-8, h200-16, a100-8; h100:NODESxGPUS)")
  p.add_argument("--mesh", type=_parse_mesh, default=None, metavar="DATA,FSDP,TENSOR",
                 help="instead of train.mesh_shape (one entry may be -1: the rest of the chips)")
  p.add_argument("--vocab_size", type=int, default=None,
                 help="vocabulary size (default: CORPUS_DIR/spm.model's when it exists, else the size's own)")
  p.add_argument("--skip_train_step", action="store_true", help="only the sampler")
  p.add_argument("--sample_batch_size", type=int, default=0,
                 help="also compile sample.py's decode loop with this many rows (sample.py --batch_size); 0: not")
  p.add_argument("--num_prompts", type=int, default=164, help="sampler: prompts in the file (HumanEval: 164)")
  p.add_argument("--num_samples", type=int, default=100, help="sampler: samples per prompt")
  p.add_argument("--prompt_length", type=int, default=512, help="sampler: the longest prompt, in tokens")
  p.add_argument("--max_decode_length", type=int, default=256, help="sampler: new tokens per sample at most")
  p.add_argument("--json", default=None, help="also write the reports to this JSON file")
  return p


def _gin_value(name: str) -> Any:
  """A bound gin parameter or %MACRO, macros followed; None when unbound or left %gin.REQUIRED."""
  import gin

  try:
    value = gin.query_parameter(name)
  except ValueError:
    return None
  while isinstance(value, gin.config.ConfigurableReference):  # a macro: str() is "%NAME"
    if str(value) == "%gin.REQUIRED":
      return None
    try:
      value = gin.query_parameter(str(value))
    except ValueError:
      return None
  return value


# The run folders a pre-flight neither reads nor writes: left %gin.REQUIRED by runs/pretrain.gin.
_UNUSED_MACROS = ("MODEL_DIR", "CORPUS_DIR")


def train_config_from_gin(gin_files: Sequence[str], bindings: Sequence[str]):
  """train.py's typed config from the same files and bindings; MODEL_DIR and CORPUS_DIR may be unset."""
  import gin

  import gin_flags
  from gin_train import train_config

  def left_required(macro: str) -> bool:  # defined by a file as %gin.REQUIRED (not merely undefined)
    try:
      value = gin.query_parameter(f"%{macro}")
    except ValueError:
      return False
    return isinstance(value, gin.config.ConfigurableReference) and str(value) == "%gin.REQUIRED"

  try:  # which of the unused macros the files leave unset (gin_flags.parse_gin reports file errors)
    gin.parse_config_files_and_bindings(gin_files, [], finalize_config=False)
    unset = [m for m in _UNUSED_MACROS if left_required(m) and not any(
        b.split("=", 1)[0].strip() == m for b in bindings)]
  except (ValueError, OSError):
    unset = []
  gin.clear_config()
  gin_flags.parse_gin(gin_files, [f"{m} = None" for m in unset] + list(bindings))
  corpus_dir = _gin_value("train.corpus_dir")
  if corpus_dir is None and not _gin_value("train.practical_tasks"):
    corpus_dir = "(not read)"
  return train_config(check_paths=False, model_dir="(the pre-flight writes nothing)", corpus_dir=corpus_dir)


def vocab_size_for(config, requested: int | None) -> int:
  import storage
  from model.config import SIZES

  if requested:
    return requested
  path = storage.join(config.corpus_dir, "spm.model") if config.corpus_dir else None
  if config.vocab_path or (path and storage.exists(path)):
    from data.vocab import get_vocabulary

    return get_vocabulary(config.vocab_path or path).vocab_size
  if config.pretrained and config.pretrained.model_config:
    return config.pretrained.model_config.vocab_size
  return SIZES[config.model_size].vocab_size


def main(argv: Sequence[str] | None = None) -> int:
  import gin_flags
  from gin_flags import UsageError
  from tpu.slices import parse_slice

  parser = build_parser()
  gin_files, bindings = gin_flags.parse_flags(sys.argv[1:] if argv is None else argv, __doc__, parser)
  args = parser.parsed
  try:
    slice_ = parse_slice(args.topology)
    config = train_config_from_gin(gin_files, bindings)
    if args.mesh:
      config = dataclasses.replace(config, mesh_shape=args.mesh)
    from training import run

    model_config = run.model_config_for(config, vocab_size_for(config, args.vocab_size))
  except (UsageError, ValueError) as error:
    print(f"preflight: {gin_flags.message(error)}", file=sys.stderr)
    return 2
  try:
    devices = topology_devices(slice_)
  except RuntimeError as error:
    print(f"preflight: {error}", file=sys.stderr)
    return 2
  compiler = "libtpu" if slice_.chip.platform == "tpu" else "XLA's CUDA compiler, no GPU needed"
  print(f"pre-flight: compiling for {slice_.describe()} on this host's CPU ({compiler}; nothing runs)", flush=True)
  reports, fits = [], True
  if not args.skip_train_step:
    report = train_step_report(config, model_config, slice_, devices)
    reports.append(report)
    print(format_report(report, slice_), flush=True)
    if not report["fits"]:
      fits = False
      print("  would help:\n" + "\n".join(f"    - {hint}" for hint in knobs(report, config, slice_)), flush=True)
  if args.sample_batch_size:
    report = sampler_report(model_config, slice_, devices, config.mesh_shape, args.sample_batch_size,
                            args.num_prompts, args.num_samples, args.prompt_length, args.max_decode_length)
    reports.append(report)
    print(format_report(report, slice_), flush=True)
    if not report["fits"]:
      fits = False
      print(f"  would help: fewer rows (--sample_batch_size={max(1, args.sample_batch_size // 2)}), a shorter "
            "--max_decode_length, or more chips", flush=True)
  if args.json:
    import storage

    storage.write_atomic(args.json, json.dumps({"topology": slice_.topology_name, "slice": args.topology,
                                                "reports": reports}, indent=1, default=str))
  return 0 if fits else 1


if __name__ == "__main__":
  sys.exit(main())
