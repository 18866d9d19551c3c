"""UniMax sampling rates (Chung et al. 2023): as uniform as possible, no language past N epochs.

Sort languages by size, ascending. Walk them with the remaining budget: each takes an equal share of
what is left, capped at N epochs of its own data. Once one language is not capped, no larger one is.
"""

from __future__ import annotations

import math
from typing import Mapping


def unimax_allocation(sizes: Mapping[str, float], budget: float, max_epochs: float) -> dict[str, float]:
  """How much of the budget (in the units of `sizes`: examples, tokens or characters) each language gets.

  A language of size 0 gets 0 and leaves its share to the others. Raises ValueError on an empty
  mapping, negative or non-finite sizes, a non-positive budget or epoch cap, or all sizes 0.
  """
  if not sizes:
    raise ValueError("unimax: no languages given")
  for name, size in sizes.items():
    if not math.isfinite(size) or size < 0:
      raise ValueError(f"unimax: size of {name!r} must be a finite non-negative number, got {size}")
  if not (budget > 0 and math.isfinite(budget)):
    raise ValueError(f"unimax: budget must be positive, got {budget}")
  if not max_epochs > 0:
    raise ValueError(f"unimax: max_epochs must be positive, got {max_epochs}")
  if all(size == 0 for size in sizes.values()):
    raise ValueError("unimax: every language is empty")

  allocation = {name: 0.0 for name in sizes}
  nonempty = sorted((name for name in sizes if sizes[name] > 0), key=lambda name: (sizes[name], name))
  remaining = float(budget)
  for i, name in enumerate(nonempty):
    share = remaining / (len(nonempty) - i)
    allocation[name] = min(share, max_epochs * sizes[name])
    remaining -= allocation[name]
  return allocation


def unimax_rates(sizes: Mapping[str, float], budget: float, max_epochs: float) -> dict[str, float]:
  """Sampling rates p_l = U_l / sum(U) that sum to 1 (see unimax_allocation).

  While budget <= max_epochs * sum(sizes), no language is expected to repeat more than max_epochs
  times. Beyond that every language is capped, the rates equal the natural ones, and no distribution
  can keep every language under the cap: `expected_epochs` then shows the overrun.
  """
  allocation = unimax_allocation(sizes, budget, max_epochs)
  total = sum(allocation.values())
  return {name: value / total for name, value in allocation.items()}


def natural_rates(sizes: Mapping[str, float]) -> dict[str, float]:
  """Rates proportional to size: the paper's Natural distribution."""
  total = sum(sizes.values())
  if not sizes or total <= 0:
    raise ValueError("natural rates need at least one non-empty language")
  return {name: size / total for name, size in sizes.items()}


def expected_epochs(rates: Mapping[str, float], sizes: Mapping[str, float], budget: float) -> dict[str, float]:
  """Epochs over each language's data when `budget` units are drawn at `rates` (0 for empty languages)."""
  return {name: (rates[name] * budget / sizes[name]) if sizes[name] > 0 else 0.0 for name in rates}
