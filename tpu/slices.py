"""TPU slices by the names users rent them under (v4-128, v5litepod-256, v5e-64, v6e-8) or by topology
(v4:4x4x4, v5e:16x16), and each chip's published figures: what the pre-flight compiles for and
compares against.

A v4 or v5p accelerator type counts TensorCores (two per chip, one JAX device per chip in megacore
mode: v4-128 is 64 chips); v5e and v6e count chips (one core each). Chip figures are Google's
published per-chip numbers (bf16 peak, HBM capacity and bandwidth); XLA's own HBM limit, which the
compiler enforces, is a little below the capacity (15.75 GiB of a v5e's 16).
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
  dims: int  # 3: a 3D torus (v4, v5p), 2: a 2D one (v5e, v6e)


CHIPS = {
    "v4": Chip("v4", 275e12, 32 * GIB, 1228e9, megacore=True, dims=3),
    "v5p": Chip("v5p", 459e12, 95 * GIB, 2765e9, megacore=True, dims=3),
    "v5e": Chip("v5e", 197e12, 16 * GIB, 819e9, megacore=False, dims=2),
    "v6e": Chip("v6e", 918e12, 32 * GIB, 1640e9, megacore=False, dims=2),
}
_ALIASES = {"v5litepod": "v5e", "v5lite": "v5e", "v6litepod": "v6e"}


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
  def chips_per_host(self) -> tuple[int, int, int]:
    """A TPU VM host holds up to 4 chips (2x2x1); a single chip or a pair is its own host."""
    return tuple(min(2, n) for n in self.shape[:2]) + (1,)

  def describe(self) -> str:
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


def parse_slice(name: str) -> Slice:
  """`v4-128`, `v5litepod-16`, `v5e-256`, `v6e-8` (accelerator types) or `v4:4x4x4`, `v5e:2x2`
  (topologies). A ValueError says what is accepted."""
  text = name.strip().lower()
  topology = re.fullmatch(r"(v[0-9a-z]+):([0-9]+(?:x[0-9]+){1,2})", text)
  accelerator = re.fullmatch(r"(v[0-9a-z]+)-([1-9][0-9]*)", text)
  generation = (topology or accelerator).group(1) if (topology or accelerator) else None
  chip = CHIPS.get(_ALIASES.get(generation, generation)) if generation else None
  if chip is None:
    raise ValueError(f"--topology {name!r}: expected an accelerator type such as v4-128, v5p-64, v5e-256 "
                     f"(v5litepod-256), v6e-8, or a topology such as v4:4x4x4, v5e:16x16; chips: "
                     f"{', '.join(CHIPS)}")
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
