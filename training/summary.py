"""The model's summary plus the bytes per device of its Adafactor state: what a training run holds.

  python -m training.summary --size 1b [--json] [--seq 2048] [--mesh 1,-1,1 --devices 256]

The flags and the model's figures are model/summary.py's; the state's layout is the optimizer's
(training/optimizer.py), so its bytes are counted here, where the optimizer is known.
"""

from __future__ import annotations

import sys

import flax.linen as nn
import jax

from model import sharding, summary
from model.config import ModelConfig
from model.transformer import Decoder
from training.optimizer import adafactor, adafactor_state_specs


def adafactor_bytes(config: ModelConfig, model_summary: dict) -> dict[str, int]:
  """{"Adafactor": its state's bytes per device, "state": those plus the parameters'} on the mesh of
  `model_summary` (axis name -> size), from abstract shapes alone."""
  boxed = sharding.abstract_params(Decoder(config))
  params = nn.unbox(boxed)
  opt_state = jax.eval_shape(adafactor(1e-2).init, params)  # the layout does not depend on the rate
  opt_specs = adafactor_state_specs(opt_state, params, sharding.param_specs(boxed))
  opt_bytes = sharding.bytes_per_device(opt_state, opt_specs, model_summary["mesh"])
  return {"Adafactor": opt_bytes, "state": model_summary["param_bytes_per_device"] + opt_bytes}


def main(argv: list[str] | None = None) -> None:
  summary.main(argv, extra=adafactor_bytes, description=__doc__)


if __name__ == "__main__":
  sys.exit(main())
