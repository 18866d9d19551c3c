"""The gin edge of a training run, shared by the entry points that read a run's gin files (train.py and
tpu/preflight.py): training/config.py's TrainConfig registered as the configurable `train`, the
configurables the files bind into it (@codelm.UL2Config(), ...), and the checks of what gin gave.

Library code never sees gin: it receives the TrainConfig this module returns, checked and typed.
"""

from __future__ import annotations

import dataclasses

import gin

import storage
from data import practical_tasks as practical_data
import gin_flags
from gin_flags import UsageError, check_float, check_int, check_mesh_shape, check_writable_dir
from model import lora as lora_adapters
from model import sharding
from model.config import SIZES
from objectives.ul2 import UL2Config
from training import profiling
from training.passk_hook import PasskConfig
from training.checkpoints import refuse_unwritable
from training.config import TrainConfig
from training.optimizer import Optimizer, Schedule
from training.run_info import read_imported_from

gin.external_configurable(UL2Config, module="codelm")
gin.external_configurable(lora_adapters.LoraConfig, module="codelm")
gin.external_configurable(practical_data.PracticalTasks, module="codelm")
gin.external_configurable(PasskConfig, module="codelm")
# The class itself: `train.batch_size = ...` binds TrainConfig's field, and its defaults are gin's.
_Train = gin.external_configurable(TrainConfig, "train")
# A field without a default must be bound, as gin.REQUIRED's: gin names every missing one at once.
REQUIRED = tuple(f.name for f in dataclasses.fields(TrainConfig) if f.default is dataclasses.MISSING)


def train_config(check_paths: bool = True, **given) -> TrainConfig:
  """The `train.*` gin values (`given` overrides them), checked, as the run's typed config.
  `check_paths` False (tpu/preflight.py, which reads and writes no run folder or dataset) leaves out
  the checks of MODEL_DIR, the checkpoints and the dataset."""
  try:
    config = _Train(**{name: gin.REQUIRED for name in REQUIRED if name not in given}, **given)
  except ValueError as error:  # a configurable's own check (UL2Config's fim_rate 1.5): the user's value
    raise UsageError(gin_flags.message(error)) from None
  check(config, check_paths)
  # The enums and the tuple once here, after check() has named a bad value by its gin name.
  return dataclasses.replace(config, optimizer=Optimizer(config.optimizer), lr_schedule=Schedule(config.lr_schedule),
                             mesh_shape=tuple(config.mesh_shape),
                             profile_steps=tuple(config.profile_steps) if config.profile_steps else None)


def check(config: TrainConfig, check_paths: bool = True) -> None:
  """Every field of `config` as gin gave it, by type and range, before anything is read or written."""
  c = config
  for name, value in (("model_dir", c.model_dir), ("mixture_or_task_name", c.mixture_or_task_name)):
    if not isinstance(value, str) or not value:
      raise UsageError(f"train.{name} must be a non-empty string, got {value!r}")
  for name, value, allowed_by, without in (
      ("model_size", c.model_size, c.init_from, "a MODEL_DIR as train.init_from"),
      ("corpus_dir", c.corpus_dir, c.practical_tasks, "train.practical_tasks")):
    if value is None and not allowed_by:
      raise UsageError(f"train.{name} may be None only with {without}")
    if value is not None and (not isinstance(value, str) or not value):
      raise UsageError(f"train.{name} must be a non-empty string or None, got {value!r}")
  if c.model_size is not None and c.model_size not in SIZES:
    raise UsageError(f"train.model_size: unknown size {c.model_size!r}; choose one of {', '.join(SIZES)}")
  for name, value, kind in (("optimizer", c.optimizer, Optimizer), ("lr_schedule", c.lr_schedule, Schedule)):
    choices = [choice.value for choice in kind]
    if value not in choices:
      raise UsageError(f"train.{name}: {value!r} is not one of {', '.join(choices)}")
  check_float("train.weight_decay", c.weight_decay, 0)
  if c.lora is not None and not isinstance(c.lora, lora_adapters.LoraConfig):
    raise UsageError(f"train.lora must be @codelm.LoraConfig() or None, got {c.lora!r}")
  if c.lora is not None and not c.init_from:
    raise UsageError("train.lora trains adapters of a pretrained model: set train.init_from (INIT_FROM)")
  if c.practical_tasks is not None and not isinstance(c.practical_tasks, practical_data.PracticalTasks):
    raise UsageError(f"train.practical_tasks must be @codelm.PracticalTasks() or None, got {c.practical_tasks!r}")
  if c.practical_tasks is not None and check_paths:
    if not storage.exists(c.practical_tasks.dataset):
      raise UsageError(f"train.practical_tasks: no dataset file {c.practical_tasks.dataset!r} (DATASET)")
    try:  # the file and the split, before anything is written
      c.practical_tasks.split()
    except ValueError as error:
      raise UsageError(f"train.practical_tasks: {error}") from None
  for name, value in (("vocab_path", c.vocab_path), ("init_from", c.init_from), ("checkpoint_dir", c.checkpoint_dir)):
    if value is not None and (not isinstance(value, str) or not value):
      raise UsageError(f"train.{name} must be a path or None, got {value!r}")
  if c.init_from is not None and not storage.exists(c.init_from):
    raise UsageError(f"train.init_from: {c.init_from!r} does not exist (a trained run's MODEL_DIR or its "
                     "checkpoints folder; PRETRAINED_DIR in the fine-tuning gins)")
  imported = read_imported_from(c.model_dir) if check_paths else None
  if imported:  # its checkpoint holds parameters only: resuming would find it "damaged"
    raise UsageError(f"train.model_dir: {c.model_dir} was imported from {imported} (python -m export.from_hf) and "
                     f"holds parameters only: train from it in a new MODEL_DIR with --gin.train.init_from={c.model_dir}")
  try:  # before the data pipeline is built (the Checkpointer would refuse it only then)
    if check_paths:
      refuse_unwritable(c.checkpoints)
  except ValueError as error:
    raise UsageError(f"{'train.checkpoint_dir' if c.checkpoint_dir else 'train.model_dir'}: {error}") from None
  lengths = c.task_feature_lengths
  if not isinstance(lengths, dict) or not lengths:
    raise UsageError(f"train.task_feature_lengths must be a dict such as {{'inputs': 1024, 'targets': 1024}}, "
                     f"got {lengths!r}")
  for feature, length in lengths.items():
    check_int(f"train.task_feature_lengths[{feature!r}]", length, 1)
  for name in ("batch_size", "train_steps", "microbatches", "log_every", "checkpoint_every", "keep_checkpoints",
               "eval_batches"):
    check_int(f"train.{name}", getattr(c, name), 1)
  check_int("train.eval_every", c.eval_every, 0)
  check_int("train.seed", c.seed)
  if c.batch_size % c.microbatches:
    raise UsageError(f"train.batch_size {c.batch_size} is not a multiple of train.microbatches "
                     f"{c.microbatches}")
  check_float("train.base_learning_rate", c.base_learning_rate, above=0)
  check_float("train.warmup_fraction", c.warmup_fraction, 0, 1)
  check_float("train.z_loss", c.z_loss, 0)
  if c.clip_global_norm is not None:
    check_float("train.clip_global_norm", c.clip_global_norm, above=0)
  check_mesh_shape("train.mesh_shape", c.mesh_shape)
  if c.profile_steps is not None:
    if not isinstance(c.profile_steps, (tuple, list)) or len(c.profile_steps) != 2:
      raise UsageError(f"train.profile_steps must be (FIRST, COUNT) or None, got {c.profile_steps!r}")
    try:
      profiling.check_settings(*c.profile_steps, c.profile_every)
    except ValueError as error:
      raise UsageError(str(error)) from None
  elif c.profile_every:
    raise UsageError(f"train.profile_every {c.profile_every!r} repeats train.profile_steps, which is not set")
  if c.passk is not None:
    if not isinstance(c.passk, PasskConfig):
      raise UsageError(f"train.passk must be @codelm.PasskConfig() or None, got {c.passk!r}")
    if c.lora is not None:
      raise UsageError("train.passk samples the trained parameters, which are LoRA adapters here: not supported")
    try:
      c.passk.check()
    except ValueError as error:
      raise UsageError(str(error)) from None
  if not isinstance(c.profile_all_hosts, bool):
    raise UsageError(f"train.profile_all_hosts must be True or False, got {c.profile_all_hosts!r}")
  if not check_paths:  # (the pre-flight compiles for another slice's devices)
    return
  try:  # the devices of this run, before MODEL_DIR is written
    sharding.mesh_shape(*c.mesh_shape)
  except ValueError as error:
    raise UsageError(f"train.mesh_shape: {error}") from None
  check_writable_dir("train.model_dir", c.model_dir)
  if c.checkpoint_dir is not None:
    check_writable_dir("train.checkpoint_dir", c.checkpoint_dir)
