"""MODEL_DIR/run.json: the model config and vocabulary of a run, so sampling needs no gin files."""

from __future__ import annotations

import dataclasses
import json
import os

from model.config import ModelConfig

RUN_INFO = "run.json"


def write_run_info(model_dir: str, config: ModelConfig, vocab_path: str) -> None:
  fields = {k: (str(v) if k in ("dtype", "param_dtype") else getattr(v, "value", v))
            for k, v in dataclasses.asdict(config).items()}
  info = {"model": fields, "vocab_path": os.path.abspath(vocab_path) if "://" not in vocab_path else vocab_path}
  with open(os.path.join(model_dir, RUN_INFO), "w") as f:
    json.dump(info, f, indent=2, sort_keys=True)


def read_run_info(model_dir: str) -> tuple[ModelConfig, str]:
  path = os.path.join(model_dir, RUN_INFO)
  if not os.path.exists(path):
    raise FileNotFoundError(f"{path} not found: is {model_dir!r} the MODEL_DIR of a train.py run?")
  with open(path) as f:
    info = json.load(f)
  return ModelConfig(**info["model"]), info["vocab_path"]
