"""One training run from a typed config: the data, the model, the sharded state, the jitted step,
then the loop with its hooks (training/loop.py, training/hooks.py). train.py binds the config with gin
and calls `train`."""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Mapping

import jax
from jax.sharding import NamedSharding

import storage
from data.batches import TrainBatches, validation_batches
from data.languages import LANGUAGES
from data.mixtures import MixturePlan, display_name, mixture_name, register_corpus
from data.vocab import get_vocabulary
from model import sharding
from model.config import get_config
from model.summary import flops_per_token
from model.transformer import Decoder
from training import loop
from training.checkpoints import Checkpointer
from training.hooks import Checkpointing, ProgressLog, Validation
from training.metrics import MetricsWriter
from training.optimizer import adafactor, rsqrt_schedule
from training.run_info import write_run_info
from training.step import init_sharded_state, jit_eval_step, jit_train_step, state_shardings
from training.throughput import matmul_ceiling


@dataclasses.dataclass(frozen=True)
class TrainConfig:
  """train.py's gin values once checked (its check_arguments); the defaults live there, at the edge."""
  model_dir: str
  checkpoint_dir: str | None  # None: MODEL_DIR/checkpoints
  model_size: str
  corpus_dir: str
  vocab_path: str | None  # None: CORPUS_DIR/spm.model
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
  init_from: str | None  # another run's checkpoints: its parameters, then step 0

  @property
  def sequence_length(self) -> int:
    return max(self.task_feature_lengths.values())

  @property
  def vocabulary_path(self) -> str:
    return self.vocab_path or storage.join(self.corpus_dir, "spm.model")

  @property
  def checkpoints(self) -> str:
    return self.checkpoint_dir or storage.join(self.model_dir, "checkpoints")


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


def _validation_sets(config: TrainConfig, plans: Mapping[str, MixturePlan]) -> dict[str, list]:
  """Per language of this corpus (not whatever else this process registered under those names), its
  validation batches; languages with no validation files are left out."""
  if not config.eval_every:
    return {}
  in_corpus = set(plans[mixture_name("natural")].token_shares)
  sets = {language.name: validation_batches(language.task_name, config.sequence_length, config.batch_size,
                                            config.eval_batches)
          for language in LANGUAGES if language.task_name in in_corpus}
  return {name: batches for name, batches in sets.items() if batches}


def train(config: TrainConfig, gin_config_str: str = "") -> dict:
  """Trains until config.train_steps, resuming from the newest good checkpoint; a SIGTERM saves and
  returns early. Returns the last logged metrics."""
  primary = jax.process_index() == 0
  if primary and gin_config_str:
    storage.write_atomic(storage.join(config.model_dir, "config.gin"), gin_config_str)
  plans = _register_data(config, primary)
  vocabulary = get_vocabulary(config.vocabulary_path)
  model_config = get_config(config.model_size, vocab_size=vocabulary.vocab_size, max_length=config.sequence_length,
                            **(config.model_overrides or {}))
  model = Decoder(model_config)
  if primary:  # what sample.py needs to rebuild the model without this run's gin files
    write_run_info(config.model_dir, model_config, config.vocabulary_path, config.checkpoint_dir)
  schedule = rsqrt_schedule(config.base_learning_rate, int(config.warmup_fraction * config.train_steps))
  optimizer = adafactor(schedule, config.clip_global_norm)
  mesh = sharding.make_mesh(*config.mesh_shape)
  batch_sharding = NamedSharding(mesh, sharding.batch_spec())
  abstract, shardings = state_shardings(model, optimizer, mesh)

  checkpointer = Checkpointer(config.checkpoints, keep=config.keep_checkpoints)
  writer = MetricsWriter(config.model_dir, primary)
  with sharding.activation_sharding(mesh):
    state, progress, start = loop.initial_state(
        checkpointer, abstract, shardings, lambda: init_sharded_state(model, optimizer, config.seed, shardings),
        config.init_from)
    step_fn = jit_train_step(model, optimizer, shardings, batch_sharding, config.z_loss, config.microbatches)
    eval_fn = jit_eval_step(model, shardings.params, batch_sharding)
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
