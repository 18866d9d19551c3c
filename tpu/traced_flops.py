"""The FLOPs of a traced JAX program, counted on its jaxpr: every matrix product, each scan body times
its length.

Why not XLA's cost analysis alone: it counts a while loop's body once, and the model's layers are one
scanned body (model/transformer.py), so the compiled step's figure is roughly the embedding plus one
layer. Counting on the jaxpr sees the loop lengths and everything the step really computes (the
backward pass, rematerialised forwards, attention's products), where the model's formula
(model/summary.py: 6N + 12LHKT per token) is what MFU is defined against. Only dot_general is
counted: elementwise work is a few percent of a transformer's and bound by memory, not the MXU.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import jax
from jax.extend import core


def _dot_flops(equation) -> float:
  lhs, rhs = (v.aval.shape for v in equation.invars[:2])
  (_, rhs_contracting), (_, rhs_batch) = equation.params["dimension_numbers"]
  rhs_free = [size for axis, size in enumerate(rhs) if axis not in rhs_contracting and axis not in rhs_batch]
  return 2.0 * math.prod(lhs) * math.prod(rhs_free)


def _sub_jaxprs(value: Any):
  if isinstance(value, core.ClosedJaxpr):
    yield value.jaxpr
  elif isinstance(value, core.Jaxpr):
    yield value
  elif isinstance(value, (tuple, list)):
    for item in value:
      yield from _sub_jaxprs(item)


def jaxpr_flops(jaxpr: core.Jaxpr) -> float:
  total = 0.0
  for equation in jaxpr.eqns:
    name = equation.primitive.name
    if name == "dot_general":
      total += _dot_flops(equation)
    elif name == "cond":  # one branch runs: the costliest
      total += max((jaxpr_flops(b.jaxpr) for b in equation.params["branches"]), default=0.0)
    else:
      inner = sum(jaxpr_flops(sub) for value in equation.params.values() for sub in _sub_jaxprs(value))
      total += inner * (equation.params["length"] if name == "scan" else 1)  # a while loop: once
  return total


def traced_flops(function: Callable, *abstract_args) -> float:
  """FLOPs of one call of `function` on arguments of these shapes (jax.ShapeDtypeStructs), over the
  whole global batch (divide by the devices for a per-device figure)."""
  return jaxpr_flops(jax.make_jaxpr(function)(*abstract_args).jaxpr)
