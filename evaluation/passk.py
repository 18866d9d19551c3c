"""The unbiased pass@k estimator of Chen et al. (2021), in its numerically stable form.

For one problem with n samples of which c are correct, pass@k = 1 - C(n-c, k) / C(n, k): the
chance that k samples drawn without replacement from the n contain a correct one. The binomials
overflow for n = 200, so we use 1 - prod_{i=n-c+1}^{n} (1 - k / i), which equals it exactly.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np

DEFAULT_KS = (1, 10, 100)


def parse_ks(value: str) -> list[int]:
  """A scorer's --k flag: comma-separated positive integers."""
  try:
    ks = [int(k) for k in value.split(",")]
  except ValueError:
    raise ValueError(f"--k: {value!r} is not a comma-separated list of integers") from None
  if any(k < 1 for k in ks):
    raise ValueError(f"--k values must be positive, got {value}")
  return ks


def pass_at_k(n: int, c: int, k: int) -> float:
  """Unbiased pass@k for one problem: n samples, c correct, k drawn."""
  if not 0 <= c <= n:
    raise ValueError(f"need 0 <= c <= n, got n={n}, c={c}")
  if not 1 <= k <= n:
    raise ValueError(f"need 1 <= k <= n, got k={k}, n={n}")
  if n - c < k:  # every draw of k samples contains a correct one
    return 1.0
  return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


def mean_pass_at_k(counts: Mapping[str, tuple[int, int]],
                   ks: Iterable[int] = DEFAULT_KS) -> dict[str, float]:
  """Mean pass@k over problems, for each k no larger than every problem's n.

  `counts` maps a problem id to (n, c). A k larger than some problem's n is left out, as
  Chen et al. do, rather than reported for a subset of problems.
  """
  if not counts:
    return {}
  min_n = min(n for n, _ in counts.values())
  return {f"pass@{k}": float(np.mean([pass_at_k(n, c, k) for n, c in counts.values()]))
          for k in ks if k <= min_n}


def not_computable(counts: Mapping[str, tuple[int, int]], ks: Iterable[int] = DEFAULT_KS) -> dict[str, str]:
  """Each pass@k that `mean_pass_at_k` leaves out (some problem has fewer than k samples), and why: a
  table shows "n < k" there and the run says so, instead of a silently missing column."""
  if not counts:
    return {}
  ns = [n for n, _ in counts.values()]
  return {f"pass@{k}": f"{sum(n < k for n in ns)} of {len(ns)} problems have fewer than {k} samples (fewest {min(ns)})"
          for k in ks if k > min(ns)}


def columns(groups: Iterable[Mapping]) -> list[str]:
  """The pass@k columns of a table over groups' metrics (languages, subsets): every k computed or
  left out as not computable somewhere, in order of k."""
  names = {k for m in groups for k in (*m, *m.get("not_computable", {})) if k.startswith("pass@")}
  return sorted(names, key=lambda k: int(k[5:]))


def cell(metrics: Mapping, column: str, digits: int) -> str:
  """A table cell for a pass@k column: the value, "n < k" where it is not computable, else "–"."""
  if isinstance(metrics.get(column), float):
    return f"{metrics[column]:.{digits}f}"
  return "n < k" if column in metrics.get("not_computable", {}) else "–"


def not_computable_lines(groups: Mapping[str, Mapping]) -> list[str]:
  """What a run prints for the pass@k its groups (display name -> metrics) could not compute."""
  return [f"note: {name}: {column} not computable: {why}" for name, m in groups.items()
          for column, why in m.get("not_computable", {}).items()]
