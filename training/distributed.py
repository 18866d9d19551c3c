"""Joining the processes of a multi-host job (jax.distributed), for train.py and sample.py alike."""

from __future__ import annotations

import os

import jax


def maybe_initialize_distributed() -> None:
  """jax.distributed on multi-host TPU (auto-detected) and on GPU clusters given a coordinator."""
  if os.environ.get("JAX_COORDINATOR_ADDRESS"):
    jax.distributed.initialize(os.environ["JAX_COORDINATOR_ADDRESS"],
                               int(os.environ["JAX_NUM_PROCESSES"]), int(os.environ["JAX_PROCESS_ID"]))
  elif os.environ.get("TPU_WORKER_HOSTNAMES", "localhost") not in ("", "localhost"):
    jax.distributed.initialize()
