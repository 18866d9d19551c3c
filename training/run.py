"""One training run from a typed config: the data, the model, the sharded state, the jitted step,
then the loop with its hooks (training/loop.py, training/hooks.py). train.py binds the config with gin
and calls `train`."""

from __future__ import annotations

import dataclasses
import functools
import sys
from typing import Any, Mapping

import jax
from jax.sharding import NamedSharding

import storage
from data.batches import TrainBatches, validation_batches
from data.languages import LANGUAGES
from data.mixtures import MixturePlan, display_name, mixture_name, register_corpus
from data.practical_tasks import TASK_NAME, PracticalTasks, register_task
from data.vocab import get_vocabulary
from model import sharding
from model.config import ModelConfig, get_config
from model.lora import LoraConfig
from model.summary import flops_per_token
from model.transformer import Decoder
from training import loop
from training.checkpoints import CheckpointError, Checkpointer, abstract_with_shardings, read_params
from training.hooks import Checkpointing, ProgressLog, Validation
from training.metrics import MetricsWriter
from training.optimizer import adafactor, adamw, rsqrt_schedule, warmup_linear_decay_schedule
from training.run_info import RUN_INFO, read_checkpoint_dir, read_run_info, write_run_info
from training.step import (init_lora_state, init_sharded_state, jit_eval_step, jit_train_step, lora_state_shardings,
                           state_shardings)
from training.throughput import matmul_ceiling


@dataclasses.dataclass(frozen=True)
class TrainConfig:
  """train.py's gin values once checked (its check_arguments); the defaults live there, at the edge."""
  model_dir: str
  checkpoint_dir: str | None  # None: MODEL_DIR/checkpoints
  model_size: str | None  # None: init_from's model (a MODEL_DIR with run.json)
  corpus_dir: str | None  # None: fine-tuning on practical_tasks
  vocab_path: str | None  # None: init_from's vocabulary, else CORPUS_DIR/spm.model
  mixture_or_task_name: str
  task_feature_lengths: Mapping[str, int]
  batch_size: int  # global, over all hosts
  train_steps: int
  base_learning_rate: float
  warmup_fraction: float
  z_loss: float
  clip_global_norm: float | None
  microbatches: int
  mesh_shape: tuple[int, ...]  # (data, fsdp, tensor)
  model_overrides: Mapping[str, Any] | None
  ul2_config: Any  # objectives.ul2.UL2Config | None
  seed: int
  log_every: int
  checkpoint_every: int
  keep_checkpoints: int
  eval_every: int  # 0: no validation
  eval_batches: int
  init_from: str | None  # another run's MODEL_DIR or checkpoints: its parameters, then step 0
  optimizer: str = "adafactor"  # or "adamw"
  weight_decay: float = 0.0  # adamw only
  lr_schedule: str = "rsqrt"  # or "linear": linear warmup, then linear decay to 0
  lora: LoraConfig | None = None  # train adapters of init_from's frozen parameters instead of them
  practical_tasks: PracticalTasks | None = None  # fine-tune on data/practical_tasks.py's task

  @property
  def sequence_length(self) -> int:
    return max(self.task_feature_lengths.values())

  @functools.cached_property  # run.json read once
  def pretrained(self) -> "Pretrained | None":
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


def model_config_for(config: TrainConfig, vocab_size: int) -> ModelConfig:
  overrides = dict(config.model_overrides or {})
  if config.model_size:
    return get_config(config.model_size, vocab_size=vocab_size, max_length=config.sequence_length, **overrides)
  pretrained = config.pretrained
  if pretrained is None or pretrained.model_config is None:
    raise ValueError("no model: set train.model_size, or train.init_from to a MODEL_DIR with run.json")
  if pretrained.model_config.vocab_size != vocab_size:
    raise ValueError(f"the vocabulary {config.vocabulary_path} has {vocab_size} pieces but the model of "
                     f"{config.init_from} was trained with {pretrained.model_config.vocab_size}")
  return pretrained.model_config.replace(max_length=max(pretrained.model_config.max_length, config.sequence_length),
                                         **overrides)


@functools.lru_cache(maxsize=None)
def _peak_flops(dtype) -> float:
  """This process's devices' matmul ceiling, measured once per dtype (10 s of 2048^3 dots on CPU):
  the denominator of MFU."""
  return matmul_ceiling(dtype) * jax.device_count()


def _register_data(config: TrainConfig, primary: bool) -> Mapping[str, MixturePlan]:
  """The corpus's tasks and mixtures, planned for this run's rows; the first host states the plan."""
  plans = register_corpus(config.corpus_dir, config.vocabulary_path, rows=config.train_steps * config.batch_size,
                          sequence_length=config.sequence_length, ul2_config=config.ul2_config)
  name = config.mixture_or_task_name
  if primary and name in plans:
    plan = plans[name]
    print(f"{name}: {plan.budget_tokens:,.0f} document tokens in {plan.rows:,} rows; "
          "share % / epochs: " + ", ".join(f"{display_name(t)} {100 * plan.token_shares[t]:.1f} / {plan.epochs[t]:.2f}"
                                           for t in plan.token_shares), flush=True)
  return plans


def _register_practical_tasks(config: TrainConfig, vocabulary, primary: bool) -> None:
  if config.mixture_or_task_name != TASK_NAME:
    raise ValueError(f"train.practical_tasks registers task {TASK_NAME!r}; set MIXTURE_OR_TASK_NAME to it, "
                     f"not {config.mixture_or_task_name!r}")
  counts = register_task(config.practical_tasks, vocabulary, config.sequence_length)
  if primary:
    tasks = config.practical_tasks
    print(f"{TASK_NAME}: {tasks.dataset}, train fraction {tasks.train_fraction}, split seed {tasks.seed}: "
          + ", ".join(f"{split} {c['examples']} of {c['problems']} problems" for split, c in counts.items()
                      if split != "validation") + " (validation = test)", flush=True)
    train = counts["train"]
    per_row = config.sequence_length * train["examples"] / max(train["tokens"], 1)
    print(f"{TASK_NAME}: train examples average {train['tokens'] / max(train['examples'], 1):.0f} tokens: about "
          f"{per_row:.1f} per row of {config.sequence_length}, so a batch of {config.batch_size} rows holds about "
          f"{per_row * config.batch_size:.0f} examples", flush=True)
    for split, c in counts.items():
      if c["too_long"] and split != "validation":
        print(f"warning: {len(c['too_long'])} {split} problems do not fit in {config.sequence_length} tokens and "
              f"are left out: {', '.join(c['too_long'][:10])}", file=sys.stderr, flush=True)


def _validation_sets(config: TrainConfig, plans: Mapping[str, MixturePlan]) -> dict[str, list]:
  """Per language of this corpus (not whatever else this process registered under those names), its
  validation batches; languages with no validation files are left out. Fine-tuning: the task's."""
  if not config.eval_every:
    return {}
  if config.practical_tasks:
    return {TASK_NAME: validation_batches(TASK_NAME, config.sequence_length, config.batch_size, config.eval_batches)}
  in_corpus = set(plans[mixture_name("natural")].token_shares)
  sets = {language.name: validation_batches(language.task_name, config.sequence_length, config.batch_size,
                                            config.eval_batches)
          for language in LANGUAGES if language.task_name in in_corpus}
  return {name: batches for name, batches in sets.items() if batches}


def restore_pretrained_params(checkpoints: str, model: Decoder, shardings) -> tuple[object, int]:
  """The newest good checkpoint's parameters in `checkpoints`, laid out as `shardings`, and its step."""
  import flax.linen as nn

  found = read_params(checkpoints, abstract_with_shardings(nn.unbox(sharding.abstract_params(model)), shardings))
  if found is None:
    raise CheckpointError(f"train.init_from: no checkpoint in {checkpoints!r}")
  print(f"base parameters from {checkpoints} step {found[1]} (frozen; training LoRA adapters)", flush=True)
  return found


def schedule_and_optimizer(config: TrainConfig):
  """The learning-rate schedule and the optimizer the config names."""
  warmup = int(config.warmup_fraction * config.train_steps)
  schedule = (rsqrt_schedule(config.base_learning_rate, warmup) if config.lr_schedule == "rsqrt"
              else warmup_linear_decay_schedule(config.base_learning_rate, warmup, config.train_steps))
  optimizer = (adafactor(schedule, config.clip_global_norm) if config.optimizer == "adafactor"
               else adamw(schedule, config.weight_decay, config.clip_global_norm))
  return schedule, optimizer


def train(config: TrainConfig, gin_config_str: str = "") -> dict:
  """Trains until config.train_steps, resuming from the newest good checkpoint; a SIGTERM saves and
  returns early. Returns the last logged metrics."""
  primary = jax.process_index() == 0
  if primary and gin_config_str:
    storage.write_atomic(storage.join(config.model_dir, "config.gin"), gin_config_str)
  vocabulary = get_vocabulary(config.vocabulary_path)
  if config.practical_tasks:
    plans = {}
    _register_practical_tasks(config, vocabulary, primary)
  else:
    plans = _register_data(config, primary)
  model_config = model_config_for(config, vocabulary.vocab_size)
  base_model = Decoder(model_config)
  model = Decoder(model_config, lora=config.lora)
  schedule, optimizer = schedule_and_optimizer(config)
  mesh = sharding.make_mesh(*config.mesh_shape)
  batch_sharding = NamedSharding(mesh, sharding.batch_spec())

  checkpointer = Checkpointer(config.checkpoints, keep=config.keep_checkpoints)
  writer = MetricsWriter(config.model_dir, primary)
  frozen = frozen_shardings = adapters = None
  if config.lora:  # the base stays as init_from saved it; the state is the adapters and their optimizer
    frozen_shardings = sharding.param_shardings(base_model, mesh)
    frozen, base_step = restore_pretrained_params(config.pretrained.checkpoints, base_model, frozen_shardings)
    adapters = {"lora": dataclasses.asdict(config.lora), "base_checkpoints": storage.resolve(
        config.pretrained.checkpoints), "base_step": base_step}
  with sharding.activation_sharding(mesh):
    if config.lora:
      abstract, shardings = lora_state_shardings(model, optimizer, mesh)
      init = lambda: jax.jit(lambda: init_lora_state(model, optimizer, jax.random.key(config.seed)),  # noqa: E731
                             out_shardings=shardings)()
      state, progress, start = loop.initial_state(checkpointer, abstract, shardings, init, None)
    else:
      abstract, shardings = state_shardings(model, optimizer, mesh, config.optimizer)
      state, progress, start = loop.initial_state(
          checkpointer, abstract, shardings, lambda: init_sharded_state(model, optimizer, config.seed, shardings),
          config.pretrained.checkpoints if config.pretrained else None)
    writer.resume_at(start)
    if primary:  # what sample.py needs to rebuild the model without this run's gin files
      write_run_info(config.model_dir, model_config, config.vocabulary_path, config.checkpoint_dir, adapters)
    dropout_seed = config.seed if config.lora and config.lora.dropout > 0 else None
    step_fn = jit_train_step(model, optimizer, shardings, batch_sharding, config.z_loss, config.microbatches,
                             frozen, frozen_shardings, dropout_seed)
    eval_fn = jit_eval_step(model, shardings.params, batch_sharding, frozen, frozen_shardings)
    batches = TrainBatches(config.mixture_or_task_name, config.sequence_length, config.batch_size, config.seed)
    if progress["batches"]:
      loop.resume_input(checkpointer, start, batches, progress["batches"])
    validation = Validation(eval_fn, _validation_sets(config, plans), batch_sharding, config.eval_every,
                            config.train_steps, writer, primary)
    log = ProgressLog(writer, schedule, config.train_steps, config.log_every,
                      tokens_per_step=config.batch_size * config.sequence_length,
                      flops_per_token=flops_per_token(model_config, config.sequence_length),
                      peak_flops=_peak_flops(model_config.dtype), start_step=start,
                      primary=primary, newest_checkpoint=lambda: max(checkpointer.steps(), default=None))
    hooks = [log, validation, Checkpointing(checkpointer, batches)]  # the non-finite guard before any save
    if start == 0 and config.init_from:  # fine-tuning: the held-out loss it starts from, as step 0
      validation(loop.StepEnd(0, state, {}, save=False, stop=False))
    try:
      loop.run(state, step_fn, batches, batch_sharding, start, config.train_steps, config.checkpoint_every, hooks,
               loop.Preemption())
    finally:
      checkpointer.close()
      plot = writer.plot()
      writer.close()
  if primary:
    print(f"checkpoints: {checkpointer.directory}\nmetrics: {writer.path}\nloss curve: {plot}", flush=True)
  return log.last
