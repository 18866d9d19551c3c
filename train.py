"""Train a codelm model from gin configs, the T5X way.

  python train.py --gin_file=gin_configs/runs/pretrain.gin --gin_file=gin_configs/models/1b.gin \
      --gin_file=gin_configs/mixtures/unimax_2.gin --gin.MODEL_DIR="'/tmp/run'" \
      --gin.CORPUS_DIR="'corpus'" [--gin.TRAIN_STEPS=1000 ...]

Every host of a pod runs this same command. Training resumes from the newest checkpoint in MODEL_DIR
(or train.checkpoint_dir), its input pipeline restored to where it was; SIGTERM (preemption) saves a
checkpoint and exits cleanly. The operative config goes to MODEL_DIR/config.gin, figures to
MODEL_DIR/metrics.jsonl, TensorBoard and MODEL_DIR/loss.png. MODEL_DIR may be a URL (gs://).
The run itself is training/run.py; this file binds its config with gin and holds MODEL_DIR's lock.
"""

from __future__ import annotations

import quiet

if __name__ == "__main__":  # before TensorFlow, JAX and Beam are imported
  quiet.setup()

import contextlib
import sys
from typing import Sequence

import gin
import jax

import gin_flags
import storage
from gin_flags import UsageError, check_float, check_int, check_mesh_shape, check_writable_dir
from data import practical_tasks as practical_data
from model import lora as lora_adapters
from model.config import SIZES
from objectives.ul2 import UL2Config
from storage import OutputLocked, exclusive_output
from training import run
from training.checkpoints import CheckpointError, refuse_unwritable
from training.distributed import maybe_initialize_distributed

UL2Config = gin.external_configurable(UL2Config, module="codelm")
LoraConfig = gin.external_configurable(lora_adapters.LoraConfig, module="codelm")
PracticalTasks = gin.external_configurable(practical_data.PracticalTasks, module="codelm")


@gin.configurable("train", denylist=["check_paths"])
def train_config(*, model_dir: str = gin.REQUIRED, model_size: str | None = gin.REQUIRED, corpus_dir: str | None = gin.REQUIRED,
          vocab_path: str | None = None, mixture_or_task_name: str = gin.REQUIRED,
          task_feature_lengths: dict = gin.REQUIRED, batch_size: int = gin.REQUIRED, train_steps: int = gin.REQUIRED,
          base_learning_rate: float = 0.01, warmup_fraction: float = 0.1, z_loss: float = 1e-4,
          clip_global_norm: float | None = None, microbatches: int = 1, mesh_shape: Sequence[int] = (-1, 1, 1),
          model_overrides: dict | None = None, ul2_config: UL2Config | None = None, seed: int = 0,
          log_every: int = 50, checkpoint_every: int = 1000, keep_checkpoints: int = 3,
          eval_every: int = 0, eval_batches: int = 4, init_from: str | None = None,
          checkpoint_dir: str | None = None, optimizer: str = "adafactor", weight_decay: float = 0.0,
          lr_schedule: str = "rsqrt", lora: lora_adapters.LoraConfig | None = None,
          practical_tasks: practical_data.PracticalTasks | None = None,
          check_paths: bool = True) -> run.TrainConfig:
  """The `train.*` gin values, checked, as the run's typed config. `checkpoint_dir` (default
  MODEL_DIR/checkpoints, as MaxText's) is recorded in MODEL_DIR/run.json. Fine-tuning
  (gin_configs/runs/finetune.gin): `init_from` another run's MODEL_DIR (its model and vocabulary;
  model_size and corpus_dir may then be None), `practical_tasks` the task, `lora` to train adapters of
  the frozen base instead of every parameter. `check_paths` False (tpu/preflight.py, which reads and
  writes no run folder or dataset) leaves out the checks of MODEL_DIR, the checkpoints and the dataset."""
  arguments = dict(locals())
  del arguments["check_paths"]
  check_arguments(arguments, check_paths)
  return run.TrainConfig(**dict(arguments, mesh_shape=tuple(mesh_shape)))


def train(gin_config_str: str = "") -> dict:
  """Trains until train_steps; returns the last logged metrics. One train.py per MODEL_DIR: the first
  process holds MODEL_DIR/train.lock while it runs, and a second run there refuses at once."""
  config = train_config()
  storage.makedirs(config.model_dir)
  with exclusive_output(storage.join(config.model_dir, "train"), "train.py", f"MODEL_DIR {config.model_dir}") \
      if jax.process_index() == 0 else contextlib.nullcontext():
    return run.train(config, gin_config_str)


def check_arguments(arguments: dict, check_paths: bool = True) -> None:
  """Every gin value of train() by type and range, before anything is read or written."""
  a = arguments
  for name in ("model_dir", "mixture_or_task_name"):
    if not isinstance(a[name], str) or not a[name]:
      raise UsageError(f"train.{name} must be a non-empty string, got {a[name]!r}")
  for name, without in (("model_size", "a MODEL_DIR as train.init_from"), ("corpus_dir", "train.practical_tasks")):
    if a[name] is None and not (a["init_from"] if name == "model_size" else a["practical_tasks"]):
      raise UsageError(f"train.{name} may be None only with {without}")
    if a[name] is not None and (not isinstance(a[name], str) or not a[name]):
      raise UsageError(f"train.{name} must be a non-empty string or None, got {a[name]!r}")
  if a["model_size"] is not None and a["model_size"] not in SIZES:
    raise UsageError(f"train.model_size: unknown size {a['model_size']!r}; choose one of {', '.join(SIZES)}")
  for name, choices in (("optimizer", ("adafactor", "adamw")), ("lr_schedule", ("rsqrt", "linear"))):
    if a[name] not in choices:
      raise UsageError(f"train.{name}: {a[name]!r} is not one of {', '.join(choices)}")
  check_float("train.weight_decay", a["weight_decay"], 0)
  if a["lora"] is not None and not isinstance(a["lora"], lora_adapters.LoraConfig):
    raise UsageError(f"train.lora must be @codelm.LoraConfig() or None, got {a['lora']!r}")
  if a["lora"] is not None and not a["init_from"]:
    raise UsageError("train.lora trains adapters of a pretrained model: set train.init_from (INIT_FROM)")
  if a["practical_tasks"] is not None and not isinstance(a["practical_tasks"], practical_data.PracticalTasks):
    raise UsageError(f"train.practical_tasks must be @codelm.PracticalTasks() or None, got {a['practical_tasks']!r}")
  if a["practical_tasks"] is not None and check_paths:
    if not storage.exists(a["practical_tasks"].dataset):
      raise UsageError(f"train.practical_tasks: no dataset file {a['practical_tasks'].dataset!r} (DATASET)")
    try:  # the file and the split, before anything is written
      a["practical_tasks"].split()
    except ValueError as error:
      raise UsageError(f"train.practical_tasks: {error}") from None
  for name in ("vocab_path", "init_from", "checkpoint_dir"):
    if a[name] is not None and (not isinstance(a[name], str) or not a[name]):
      raise UsageError(f"train.{name} must be a path or None, got {a[name]!r}")
  if a["init_from"] is not None and not storage.exists(a["init_from"]):
    raise UsageError(f"train.init_from: {a['init_from']!r} does not exist (a trained run's MODEL_DIR or its "
                     "checkpoints folder; PRETRAINED_DIR in the fine-tuning gins)")
  try:  # before the data pipeline is built (the Checkpointer would refuse it only then)
    if check_paths:
      refuse_unwritable(a["checkpoint_dir"] or storage.join(a["model_dir"], "checkpoints"))
  except ValueError as error:
    raise UsageError(f"{'train.checkpoint_dir' if a['checkpoint_dir'] else 'train.model_dir'}: {error}") from None
  lengths = a["task_feature_lengths"]
  if not isinstance(lengths, dict) or not lengths:
    raise UsageError(f"train.task_feature_lengths must be a dict such as {{'inputs': 1024, 'targets': 1024}}, "
                     f"got {lengths!r}")
  for feature, length in lengths.items():
    check_int(f"train.task_feature_lengths[{feature!r}]", length, 1)
  for name in ("batch_size", "train_steps", "microbatches", "log_every", "checkpoint_every", "keep_checkpoints",
               "eval_batches"):
    check_int(f"train.{name}", a[name], 1)
  check_int("train.eval_every", a["eval_every"], 0)
  check_int("train.seed", a["seed"])
  if a["batch_size"] % a["microbatches"]:
    raise UsageError(f"train.batch_size {a['batch_size']} is not a multiple of train.microbatches "
                     f"{a['microbatches']}")
  check_float("train.base_learning_rate", a["base_learning_rate"], above=0)
  check_float("train.warmup_fraction", a["warmup_fraction"], 0, 1)
  check_float("train.z_loss", a["z_loss"], 0)
  if a["clip_global_norm"] is not None:
    check_float("train.clip_global_norm", a["clip_global_norm"], above=0)
  check_mesh_shape("train.mesh_shape", a["mesh_shape"])
  if not check_paths:
    return
  check_writable_dir("train.model_dir", a["model_dir"])
  if a["checkpoint_dir"] is not None:
    check_writable_dir("train.checkpoint_dir", a["checkpoint_dir"])


def main(argv: Sequence[str] | None = None) -> dict:
  gin_files, bindings = gin_flags.parse_flags(sys.argv[1:] if argv is None else argv, __doc__)
  maybe_initialize_distributed()
  try:
    gin_flags.parse_gin(gin_files, bindings)
    return train(gin_config_str=gin.config_str())
  except UsageError as error:  # a flag, gin value or input the user gave: status 2, as argparse's
    print(f"train.py: {gin_flags.message(error)}", file=sys.stderr)
    sys.exit(2)
  except (FloatingPointError, CheckpointError, OutputLocked) as error:
    sys.exit(f"train.py: {gin_flags.message(error)}")


if __name__ == "__main__":
  main()
