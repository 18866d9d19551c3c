"""MODEL_DIR/run.json: the model config, vocabulary and checkpoint folder of a run, so sampling needs
no gin files."""

from __future__ import annotations

import dataclasses

import storage
from model.config import ModelConfig

RUN_INFO = "run.json"


def write_run_info(model_dir: str, config: ModelConfig, vocab_path: str, checkpoint_dir: str | None = None,
                   adapters: dict | None = None, imported_from: str | None = None) -> None:
  """`checkpoint_dir` None: MODEL_DIR/checkpoints, recorded as null so that a copied or moved
  MODEL_DIR still finds its own checkpoints. `adapters`: a LoRA run's config and its frozen base
  (base_checkpoints, base_step): its checkpoints hold adapters, which sampling merges into that base.
  `imported_from`: the Hugging Face folder export.from_hf made the run from."""
  fields = {k: (str(v) if k in ("dtype", "param_dtype") else getattr(v, "value", v))
            for k, v in dataclasses.asdict(config).items()}
  info = {"model": fields, "vocab_path": storage.resolve(vocab_path),
          "checkpoint_dir": storage.resolve(checkpoint_dir) if checkpoint_dir else None}
  if adapters:
    info["adapters"] = adapters
  if imported_from:  # export.from_hf: parameters only, a source for init_from, not a run to resume
    info["imported_from"] = storage.resolve(imported_from)
  storage.write_json(storage.join(model_dir, RUN_INFO), info)


def _read(model_dir: str) -> dict:
  path = storage.join(model_dir, RUN_INFO)
  if not storage.exists(path):
    raise FileNotFoundError(f"{path} not found: is {model_dir!r} the MODEL_DIR of a train.py run?")
  return storage.read_json(path)


def read_run_info(model_dir: str) -> tuple[ModelConfig, str]:
  info = _read(model_dir)
  return ModelConfig(**info["model"]), info["vocab_path"]


def read_checkpoint_dir(model_dir: str) -> str:
  """Where the run's checkpoints are: train.checkpoint_dir as recorded, else MODEL_DIR/checkpoints
  (also for runs from before run.json recorded it)."""
  return _read(model_dir).get("checkpoint_dir") or storage.join(model_dir, "checkpoints")


def read_adapters(model_dir: str) -> dict | None:
  """A LoRA run's `adapters` record (lora config, base_checkpoints, base_step), else None."""
  return _read(model_dir).get("adapters")


def read_imported_from(model_dir: str) -> str | None:
  """The Hugging Face folder an export.from_hf MODEL_DIR was made from; None for a train.py run or no run."""
  path = storage.join(model_dir, RUN_INFO)
  return storage.read_json(path).get("imported_from") if storage.exists(path) else None
