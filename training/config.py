"""A training run's typed config: every `train.*` gin value with its default, declared once here, and
what follows from them (the sequence length, the vocabulary, the run `init_from` names).

gin_train.py, the entry points' edge, registers this class itself as the gin configurable `train` and
checks what gin gave it; the library below reads only typed fields.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Mapping

import storage
from data.practical_tasks import PracticalTasks
from model.config import ModelConfig
from model.lora import LoraConfig
from training.optimizer import Optimizer, Schedule
from training.run_info import RUN_INFO, read_checkpoint_dir, read_run_info


@dataclasses.dataclass(frozen=True, kw_only=True)
class TrainConfig:
  """The fields without a default are gin.REQUIRED (gin_train.py). Fine-tuning
  (gin_configs/runs/finetune.gin): `init_from` another run's MODEL_DIR (its model and vocabulary;
  model_size and corpus_dir may then be None), `practical_tasks` the task, `lora` to train adapters of
  the frozen base instead of every parameter."""
  model_dir: str
  model_size: str | None  # None: init_from's model (a MODEL_DIR with run.json)
  corpus_dir: str | None  # None: fine-tuning on practical_tasks
  vocab_path: str | None = None  # None: init_from's vocabulary, else CORPUS_DIR/spm.model
  mixture_or_task_name: str
  task_feature_lengths: Mapping[str, int]
  batch_size: int  # global, over all hosts
  train_steps: int
  base_learning_rate: float = 0.01
  warmup_fraction: float = 0.1
  z_loss: float = 1e-4
  clip_global_norm: float | None = None
  microbatches: int = 1
  mesh_shape: tuple[int, ...] = (-1, 1, 1)  # (data, fsdp, tensor)
  model_overrides: Mapping[str, Any] | None = None
  ul2_config: Any = None  # objectives.ul2.UL2Config | None
  seed: int = 0
  log_every: int = 50
  checkpoint_every: int = 1000
  keep_checkpoints: int = 3
  eval_every: int = 0  # 0: no validation
  eval_batches: int = 4
  init_from: str | None = None  # another run's MODEL_DIR or checkpoints: its parameters, then step 0
  checkpoint_dir: str | None = None  # None: MODEL_DIR/checkpoints (as MaxText's); recorded in run.json
  optimizer: Optimizer = Optimizer.ADAFACTOR
  weight_decay: float = 0.0  # adamw only
  lr_schedule: Schedule = Schedule.RSQRT
  lora: LoraConfig | None = None  # train adapters of init_from's frozen parameters instead of them
  practical_tasks: PracticalTasks | None = None  # fine-tune on data/practical_tasks.py's task
  # A jax.profiler trace of steps FIRST..FIRST+COUNT-1, again every profile_every steps (0: once), into
  # MODEL_DIR/tensorboard/plugins/profile (training/profiling.py); None: no profile.
  profile_steps: tuple[int, int] | None = None
  profile_every: int = 0
  profile_all_hosts: bool = False  # False: the first host only
  passk: Any = None  # training.passk_hook.PasskConfig | None: pass@k of a benchmark subset while training

  @property
  def sequence_length(self) -> int:
    return max(self.task_feature_lengths.values())

  @functools.cached_property  # run.json read once
  def pretrained(self) -> Pretrained | None:
    return pretrained_source(self.init_from) if self.init_from else None

  @property
  def vocabulary_path(self) -> str:
    if self.vocab_path:
      return self.vocab_path
    if self.pretrained and self.pretrained.vocab_path:
      return self.pretrained.vocab_path
    if not self.corpus_dir:
      raise ValueError("no vocabulary: set train.vocab_path, train.corpus_dir, or train.init_from to a MODEL_DIR")
    return storage.join(self.corpus_dir, "spm.model")

  @property
  def checkpoints(self) -> str:
    return self.checkpoint_dir or storage.join(self.model_dir, "checkpoints")


@dataclasses.dataclass(frozen=True)
class Pretrained:
  """What train.init_from names: a MODEL_DIR (its run.json gives the model and vocabulary) or a
  checkpoints folder (the model then comes from train.model_size)."""
  checkpoints: str
  model_config: ModelConfig | None
  vocab_path: str | None


def pretrained_source(init_from: str) -> Pretrained:
  if storage.exists(storage.join(init_from, RUN_INFO)):
    model_config, vocab_path = read_run_info(init_from)
    return Pretrained(read_checkpoint_dir(init_from), model_config, vocab_path)
  return Pretrained(init_from, None, None)
