"""TPU slices by the names users rent them under (v4-128, v5litepod-256, v5e-64, v6e-8) or by topology
(v4:4x4x4, v5e:16x16), NVIDIA GPU clusters by GPU and count (h100-8, h200-16, a100-8; or nodes x GPUs
per node, h100:2x8), and each chip's published figures: what the pre-flight compiles for and compares
against.

A v4 or v5p accelerator type counts TensorCores (two per chip, one JAX device per chip in megacore
mode: v4-128 is 64 chips); v5e and v6e count chips (one core each). Chip figures are Google's
published per-chip numbers (bf16 peak, HBM capacity and bandwidth); XLA's own HBM limit, which the
compiler enforces, is a little below the capacity (15.75 GiB of a v5e's 16).

A GPU is described to XLA by the device description it would read off the card (`target_config`,
XLA's GpuTargetConfig in text form): SM count, clock, shared memory, compute capability, memory. The
figures are NVIDIA's published ones for the SXM parts (H100 80GB HBM3, H200 141GB HBM3e, A100 80GB);
nodes hold 8 GPUs, as the DGX/HGX boards and GCP's A3/A2 machines do.
"""

from __future__ import annotations

import dataclasses
import math
import re

GIB = 2**30


@dataclasses.dataclass(frozen=True)
class Chip:
  name: str  # the topology prefix libtpu knows: v4, v5p, v5e, v6e
  peak_bf16_flops: float  # per chip, per second
  hbm_bytes: int
  hbm_bytes_per_s: float
  megacore: bool  # two TensorCores seen as one device; accelerator types count cores
  dims: int  # 3: a 3D torus (v4, v5p), 2: a 2D one (v5e, v6e); 2 for GPUs: nodes x GPUs per node
  platform: str = "tpu"  # or "cuda"
  target_config: str = ""  # a GPU's device description for XLA (see gpu_target_config)

  @property
  def kind(self) -> str:
    return "TPU" if self.platform == "tpu" else "GPU"


def gpu_target_config(description: str, sm_count: int, clock_ghz: float, memory_bytes: int, bandwidth: float,
                      capability: tuple[int, int], shared_per_sm: int, shared_per_block_optin: int) -> str:
  """XLA's GpuTargetConfig (text proto) for a GPU it cannot see; the limits common to sm_80/sm_90."""
  return f"""gpu_device_info {{
  threads_per_block_limit: 1024 threads_per_warp: 32 shared_memory_per_block: 49152
  shared_memory_per_core: {shared_per_sm} threads_per_core_limit: 2048 core_count: {sm_count}
  fpus_per_core: 128 block_dim_limit_x: 2147483647 block_dim_limit_y: 65535 block_dim_limit_z: 65535
  memory_bandwidth: {int(bandwidth)} l2_cache_size: 52428800 clock_rate_ghz: {clock_ghz}
  device_memory_size: {memory_bytes} shared_memory_per_block_optin: {shared_per_block_optin}
  cuda_compute_capability {{ major: {capability[0]} minor: {capability[1]} }}
  registers_per_core_limit: 65536 registers_per_block_limit: 65536
}}
platform_name: "CUDA"
dnn_version_info {{ major: 9 minor: 8 }}
runtime_version {{ major: 12 minor: 8 }}
device_description_str: "{description}"
"""


CHIPS = {
    "v4": Chip("v4", 275e12, 32 * GIB, 1228e9, megacore=True, dims=3),
    "v5p": Chip("v5p", 459e12, 95 * GIB, 2765e9, megacore=True, dims=3),
    "v5e": Chip("v5e", 197e12, 16 * GIB, 819e9, megacore=False, dims=2),
    "v6e": Chip("v6e", 918e12, 32 * GIB, 1640e9, megacore=False, dims=2),
}
_ALIASES = {"v5litepod": "v5e", "v5lite": "v5e", "v6litepod": "v6e"}
MIB = 2**20
# Memory as the cards report it (nvidia-smi's MiB); bf16 dense peaks (no sparsity).
GPUS = {
    "h100": Chip("h100", 989e12, 81559 * MIB, 3.35e12, megacore=False, dims=2, platform="cuda",
                 target_config=gpu_target_config("NVIDIA H100 80GB HBM3", 132, 1.98, 81559 * MIB, 3.35e12, (9, 0),
                                                 233472, 232448)),
    "h200": Chip("h200", 989e12, 143771 * MIB, 4.8e12, megacore=False, dims=2, platform="cuda",
                 target_config=gpu_target_config("NVIDIA H200", 132, 1.98, 143771 * MIB, 4.8e12, (9, 0), 233472,
                                                 232448)),
    "a100": Chip("a100", 312e12, 81920 * MIB, 2.039e12, megacore=False, dims=2, platform="cuda",
                 target_config=gpu_target_config("NVIDIA A100-SXM4-80GB", 108, 1.41, 81920 * MIB, 2.039e12, (8, 0),
                                                 167936, 166912)),
}
GPUS_PER_NODE = 8


@dataclasses.dataclass(frozen=True)
class Slice:
  chip: Chip
  shape: tuple[int, ...]  # chips per torus dimension
  name: str  # as the user gave it

  @property
  def chips(self) -> int:
    return math.prod(self.shape)

  @property
  def topology_name(self) -> str:
    return f"{self.chip.name}:" + "x".join(map(str, self.shape))

  @property
  def gpu_topology(self) -> str:
    """The CUDA plugin's topology: slices x hosts per slice x devices per host."""
    return f"1x{self.shape[0]}x{self.shape[1]}"

  @property
  def chips_per_host(self) -> tuple[int, int, int]:
    """A TPU VM host holds up to 4 chips (2x2x1); a single chip or a pair is its own host."""
    return tuple(min(2, n) for n in self.shape[:2]) + (1,)

  def describe(self) -> str:
    if self.chip.platform == "cuda":
      nodes = self.shape[0]
      return (f"{self.name}: {self.chips} {self.chip.name.upper()} GPU{'s' * (self.chips > 1)} ({nodes} node"
              f"{'s' * (nodes > 1)} of {self.shape[1]}), {self.chip.hbm_bytes / GIB:.1f} GiB and "
              f"{self.chip.peak_bf16_flops / 1e12:.0f} bf16 TFLOP/s per GPU")
    hosts = self.chips // math.prod(self.chips_per_host)
    return (f"{self.name}: {self.chips} TPU {self.chip.name} chip{'s' * (self.chips > 1)} ({self.topology_name}, "
            f"{hosts} host{'s' * (hosts > 1)}), {self.chip.hbm_bytes / GIB:.0f} GiB HBM and "
            f"{self.chip.peak_bf16_flops / 1e12:.0f} bf16 TFLOP/s per chip")


def _torus(chips: int, dims: int) -> tuple[int, ...]:
  """The usual slice shape of `chips` chips: the most even power-of-two split, smaller sides first
  (v4-32 -> 2x2x4, v4-128 -> 4x4x4, v5e-128 -> 8x16), except that a 3D slice of one host is 2x2x1."""
  if chips & (chips - 1):
    raise ValueError(f"{chips} chips is not a power of two")
  if dims == 3 and chips == 4:
    return (2, 2, 1)
  shape = [1] * dims
  while chips > 1:
    shape[shape.index(min(shape))] *= 2
    chips //= 2
  return tuple(sorted(shape))


def _gpus(name: str, text: str) -> Slice | None:
  """`h100-16` (GPUs, in nodes of 8) or `h100:2x8` (nodes x GPUs per node); None if not a GPU name."""
  found = re.fullmatch(r"([a-z][0-9a-z]*)(?:-([1-9][0-9]*)|:([1-9][0-9]*)x([1-9][0-9]*))", text)
  if not found or found.group(1) not in GPUS:
    return None
  chip = GPUS[found.group(1)]
  if found.group(2):
    count = int(found.group(2))
    if count > GPUS_PER_NODE and count % GPUS_PER_NODE:
      raise ValueError(f"--topology {name!r}: more than {GPUS_PER_NODE} GPUs come in nodes of "
                       f"{GPUS_PER_NODE}; say {chip.name}:NODESxGPUS for another shape")
    shape = (1, count) if count <= GPUS_PER_NODE else (count // GPUS_PER_NODE, GPUS_PER_NODE)
  else:
    shape = (int(found.group(3)), int(found.group(4)))
  return Slice(chip, shape, name)


def parse_slice(name: str) -> Slice:
  """`v4-128`, `v5litepod-16`, `v5e-256`, `v6e-8` (accelerator types), `v4:4x4x4`, `v5e:2x2`
  (topologies), or GPUs: `h100-8`, `h200:2x8`. A ValueError says what is accepted."""
  text = name.strip().lower()
  gpus = _gpus(name, text)
  if gpus:
    return gpus
  topology = re.fullmatch(r"(v[0-9a-z]+):([0-9]+(?:x[0-9]+){1,2})", text)
  accelerator = re.fullmatch(r"(v[0-9a-z]+)-([1-9][0-9]*)", text)
  generation = (topology or accelerator).group(1) if (topology or accelerator) else None
  chip = CHIPS.get(_ALIASES.get(generation, generation)) if generation else None
  if chip is None:
    raise ValueError(f"--topology {name!r}: expected an accelerator type such as v4-128, v5p-64, v5e-256 "
                     f"(v5litepod-256), v6e-8, or a topology such as v4:4x4x4, v5e:16x16; chips: "
                     f"{', '.join(CHIPS)}; or GPUs such as h100-8, h200:2x8 ({', '.join(GPUS)})")
  if topology:
    shape = tuple(int(n) for n in topology.group(2).split("x"))
    if len(shape) != chip.dims or min(shape) < 1:
      raise ValueError(f"--topology {name!r}: a {chip.name} topology has {chip.dims} dimensions")
    return Slice(chip, shape, name)
  count = int(accelerator.group(2))
  chips = count // 2 if chip.megacore else count
  if chip.megacore and (count < 8 or count % 2):
    raise ValueError(f"--topology {name!r}: {chip.name} accelerator types count TensorCores (two per chip), "
                     f"from {chip.name}-8")
  try:
    return Slice(chip, _torus(chips, chip.dims), name)
  except ValueError as error:
    raise ValueError(f"--topology {name!r}: {error}") from None
