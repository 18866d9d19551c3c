"""One training run from its typed config (training/config.py): the data, the model, the sharded state,
the jitted step, the hooks, then the loop (training/loop.py, training/hooks.py). train.py binds the
config with gin and calls `train`."""

from __future__ import annotations

import dataclasses
import functools
import sys
import time
from typing import Callable, Mapping

import flax.linen as nn
import jax
from jax.sharding import NamedSharding

import storage
from data.batches import TrainBatches, validation_batches
from languages import LANGUAGES
from data.mixtures import MixturePlan, display_name, mixture_name, register_corpus
from data.practical_tasks import TASK_NAME, register_task, skipped_warning
from data.vocab import get_vocabulary
from model import sharding
from model.config import ModelConfig, get_config
from model.summary import flops_per_token
from model.transformer import Decoder
from training import goodput, loop
from training.checkpoints import CheckpointError, Checkpointer, abstract_with_shardings, read_params
from training.config import TrainConfig
from training.hooks import Checkpointing, ProgressLog, Validation
from training.metrics import MetricsWriter
from training.optimizer import make_optimizer, make_schedule
from training.passk_hook import PasskDuringTraining
from training.profiling import ProfileSteps
from training.run_info import write_run_info
from training.step import (Trainable, TrainState, init_lora_state, init_sharded_state, jit_eval_step, jit_train_step,
                           lora_state_shardings, state_shardings)
from training.throughput import matmul_ceiling


def model_config_for(config: TrainConfig, vocab_size: int) -> ModelConfig:
  """train.model_size's model, or init_from's (its run.json), with train.model_overrides."""
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
@functools.lru_cache(maxsize=None)
def _peak_flops(dtype) -> float:
  """This process's devices' matmul ceiling, measured once per dtype and process (11 dots of 2048^3 on
  CPU, seconds on 2 cores; a process that trains again, as a grid or a test does, does not measure
  again): the denominator of MFU."""
  return matmul_ceiling(dtype) * jax.device_count()


def check_task_name(name: str, corpus_dir: str | None) -> None:
  """A UsageError naming the registered tasks and mixtures unless `name` is one of them (after
  _register_tasks), before anything is written."""
  import seqio

  from gin_flags import UsageError
  known = sorted(set(seqio.MixtureRegistry.names()) | set(seqio.TaskRegistry.names()))
  if name not in known:
    raise UsageError(f"train.mixture_or_task_name (MIXTURE_OR_TASK_NAME) {name!r} is no task or mixture of "
                     f"{corpus_dir or 'this run'}; registered: {', '.join(known[:40])}"
                     f"{' ...' if len(known) > 40 else ''}")


def check_objective(config: TrainConfig) -> None:
  """A UsageError when the UL2 configuration asks for FIM but the run trains a stream it does not
  apply to (a plain causal-LM task or mixture, practical tasks): FIM would silently not happen."""
  from data import stream
  from gin_flags import UsageError

  ul2_config = config.ul2_config
  if ul2_config is None or not getattr(ul2_config, "fim", False):
    return
  name = config.mixture_or_task_name
  if stream.resolve(name).objective is not stream.Objective.UL2:
    raise UsageError(f"codelm.UL2Config.fim_rate {ul2_config.fim_rate} asks for fill-in-the-middle, but "
                     f"MIXTURE_OR_TASK_NAME {name!r} does not train the UL2 mixture FIM is part of: choose a "
                     f"code_*_ul2 task or mixture (e.g. {name}_ul2), or leave fim_rate at 0")


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
  if primary and fim_line(config.ul2_config):  # check_objective has refused FIM on other streams
    print(fim_line(config.ul2_config), flush=True)
  return plans


def fim_line(ul2_config) -> str | None:
  """The console line saying that fill-in-the-middle is on, and how much of it; None when it is off."""
  if not getattr(ul2_config, "fim", False):
    return None
  share = 100 * ul2_config.rates[-1] * ul2_config.fim_rate
  return (f"fill-in-the-middle on: {100 * ul2_config.fim_rate:g}% of the causal-LM examples "
          f"({100 * ul2_config.fim_spm_rate:g}% of those in SPM), {share:g}% of all examples")


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
    if counts["train"]["skipped_records"]:
      print(skipped_warning(tasks.dataset, counts["train"]["skipped_records"]), file=sys.stderr, flush=True)
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
  found = read_params(checkpoints, abstract_with_shardings(nn.unbox(sharding.abstract_params(model)), shardings))
  if found is None:
    raise CheckpointError(f"train.init_from: no checkpoint in {checkpoints!r}")
  print(f"base parameters from {checkpoints} step {found[1]} (frozen; training LoRA adapters)", flush=True)
  return found


def schedule_and_optimizer(config: TrainConfig):
  """The learning-rate schedule and the optimizer the config names."""
  warmup = int(config.warmup_fraction * config.train_steps)
  schedule = make_schedule(config.lr_schedule, config.base_learning_rate, warmup, config.train_steps)
  return schedule, make_optimizer(config.optimizer, schedule, config.weight_decay, config.clip_global_norm)


def _register_tasks(config: TrainConfig, vocabulary, primary: bool) -> Mapping[str, MixturePlan]:
  """The run's tasks: the corpus's tasks and mixtures (their plans), or the fine-tuning task (none)."""
  if config.practical_tasks:
    _register_practical_tasks(config, vocabulary, primary)
    return {}
  return _register_data(config, primary)


def _trainable(config: TrainConfig, model_config: ModelConfig, mesh) -> tuple[Trainable, dict | None]:
  """What the step trains: every parameter of the model, or (LoRA) adapters over init_from's frozen
  parameters, restored here as init_from saved them (outside the mesh context); and, with LoRA, the
  adapters' record for run.json."""
  model = Decoder(model_config, lora=config.lora)
  if not config.lora:
    return Trainable(model), None
  base = Decoder(model_config)
  frozen_shardings = sharding.param_shardings(base, mesh)
  frozen, base_step = restore_pretrained_params(config.pretrained.checkpoints, base, frozen_shardings)
  adapters = {"lora": dataclasses.asdict(config.lora), "base_checkpoints": storage.resolve(
      config.pretrained.checkpoints), "base_step": base_step}
  return Trainable.lora_adapters(model, frozen, frozen_shardings, config.seed), adapters


def _initial_state(config: TrainConfig, model: Decoder, optimizer, mesh, checkpointer: Checkpointer
                   ) -> tuple[TrainState, TrainState, dict, int]:
  """(the state's shardings, the state, the input pipeline's progress, the step to start from): the
  newest good checkpoint's, else init_from's parameters (full fine-tuning), else fresh. With LoRA the
  state is the adapters and their optimizer."""
  if config.lora:
    abstract, shardings = lora_state_shardings(model, optimizer, mesh)
    init = lambda: jax.jit(lambda: init_lora_state(model, optimizer, jax.random.key(config.seed)),  # noqa: E731
                           out_shardings=shardings)()
    return (shardings, *loop.initial_state(checkpointer, abstract, shardings, init, None))
  abstract, shardings = state_shardings(model, optimizer, mesh, config.optimizer)
  return (shardings, *loop.initial_state(checkpointer, abstract, shardings,
                                         lambda: init_sharded_state(model, optimizer, config.seed, shardings),
                                         config.pretrained.checkpoints if config.pretrained else None))


def _train_batches(config: TrainConfig, checkpointer: Checkpointer, start: int, progress: dict) -> TrainBatches:
  """The training stream; on resume, where the checkpoint at `start` left it."""
  batches = TrainBatches(config.mixture_or_task_name, config.sequence_length, config.batch_size, config.seed)
  if progress["batches"]:
    loop.resume_input(checkpointer, start, batches, progress["batches"])
  return batches


def _progress_log(config: TrainConfig, model_config: ModelConfig, writer: MetricsWriter, schedule,
                  checkpointer: Checkpointer, start: int, primary: bool, timeline: goodput.Timeline) -> ProgressLog:
  return ProgressLog(writer, schedule, config.train_steps, config.log_every,
                     tokens_per_step=config.batch_size * config.sequence_length,
                     flops_per_token=flops_per_token(model_config, config.sequence_length),
                     peak_flops=_peak_flops(model_config.dtype), start_step=start,
                     primary=primary, newest_checkpoint=lambda: max(checkpointer.steps(), default=None),
                     timeline=timeline)


@dataclasses.dataclass(frozen=True)
class Prepared:
  """What a run reads before it writes anything: its vocabulary and its registered tasks' plans, and
  when that began and ended (the run's time breakdown starts there)."""
  vocabulary: object
  plans: Mapping[str, MixturePlan]
  began: float  # time.time()
  ended: float


def prepare(config: TrainConfig, began: float | None = None) -> Prepared:
  """The vocabulary and the tasks, and the task name checked against them (a UsageError): train.py
  calls this before it creates MODEL_DIR, so a run refused for its data writes nothing. `began`: when
  the run's command started (default: now), where its time breakdown starts."""
  began = time.time() if began is None else began
  vocabulary = get_vocabulary(config.vocabulary_path)
  plans = _register_tasks(config, vocabulary, jax.process_index() == 0)
  check_task_name(config.mixture_or_task_name, config.corpus_dir)
  check_objective(config)
  return Prepared(vocabulary, plans, began, time.time())


def _count_lost_steps(writer: MetricsWriter, start: int, primary: bool) -> None:
  """A resumed run: the steps the previous run logged past checkpoint `start` are redone; say how
  many and their wall time, and record it (time/lost_*) before their records go."""
  lost = goodput.lost_to_restart(writer.resume_at(start), start)
  if lost:
    writer.write(start, lost)
    print(f"resuming at step {start}: the previous run had logged {lost['time/lost_steps']:.0f} steps past it "
          f"({lost['time/lost_s']:.1f} s), which are redone", flush=True)


def _close(hooks, timeline: goodput.Timeline, checkpointer: Checkpointer, writer: MetricsWriter, step: int,
           preempted: bool, model_dir: str, primary: bool) -> str | None:
  """The end of a run, finished, preempted or failed: the last checkpoint written, the hooks closed
  (pass@k waits for its scorers unless preempted), the loss curve drawn, and the time since the last
  log step recorded; the run's breakdown printed. Returns the loss curve's path."""
  with timeline.phase("checkpoint"):
    checkpointer.close()
  for hook in hooks:
    if hasattr(hook, "close"):
      with timeline.phase(getattr(hook, "phase", "other")):
        hook.close(wait=not preempted)
  with timeline.phase("logging"):
    plot = writer.plot()
    writer.plot_passk()  # passk.png beside it, where pass@k was logged
  writer.write(step, goodput.window_record(timeline.window(), 0))
  writer.close()
  if primary:
    print(f"time of this run ({sum(timeline.totals.values()) / 60:.1f} min): {goodput.shares_line(timeline.totals)}; "
          f"with every restart: python -m training.goodput {model_dir}", flush=True)
  return plot


def _hooks(config: TrainConfig, log: ProgressLog, validation: Validation, checkpointer: Checkpointer,
           batches: TrainBatches, model: Decoder, vocabulary, mesh, writer: MetricsWriter, start: int,
           timeline: goodput.Timeline, primary: bool) -> list:
  """The hooks in their order: the progress log (its non-finite guard before any save), validation,
  pass@k while training, the checkpoint, and last the profile (built just before the loop: it may
  start tracing step start + 1 at once)."""
  hooks = [log, validation]
  if config.passk:
    with timeline.phase("evaluation"):
      passk = PasskDuringTraining(config.passk, model, vocabulary, mesh, storage.join(config.model_dir, "passk"),
                                  writer, config.train_steps, primary)
      passk.resume_at(start)  # steps a stopped run sampled but never logged are scored again
    hooks.append(passk)
  hooks.append(Checkpointing(checkpointer, batches))
  if config.profile_steps:
    hooks.append(ProfileSteps(storage.join(config.model_dir, "tensorboard"), *config.profile_steps,
                              config.profile_every, config.profile_all_hosts, start, config.train_steps))
  return hooks


def train(config: TrainConfig, gin_config_str: str = "", prepared: Prepared | None = None,
          before_save: Callable[[], None] | None = None) -> dict:
  """Trains until config.train_steps, resuming from the newest good checkpoint; a SIGTERM saves and
  returns early. Returns the last logged metrics. `prepared`: prepare(config), if done already.
  `before_save`: run before each checkpoint is written; raising refuses it (train.py: the hold on
  MODEL_DIR, which another run may have taken over). Where the time goes: training/goodput.py."""
  primary = jax.process_index() == 0
  prepared = prepared or prepare(config)
  with goodput.Timeline(began=prepared.began) as timeline:
    timeline.add_span("startup", prepared.began, prepared.ended)
    with timeline.phase("startup"):
      vocabulary, plans = prepared.vocabulary, prepared.plans
      model_config = model_config_for(config, vocabulary.vocab_size)
      schedule, optimizer = schedule_and_optimizer(config)
      mesh = sharding.make_mesh(*config.mesh_shape)
      if primary and gin_config_str:
        storage.write_atomic(storage.join(config.model_dir, "config.gin"), gin_config_str)
      batch_sharding = NamedSharding(mesh, sharding.batch_spec())
      checkpointer = Checkpointer(config.checkpoints, keep=config.keep_checkpoints, before_save=before_save)
      writer = MetricsWriter(config.model_dir, primary)
      trainable, adapters = _trainable(config, model_config, mesh)
    with sharding.activation_sharding(mesh):
      with timeline.phase("startup") as initialising:
        shardings, state, progress, start = _initial_state(config, trainable.model, optimizer, mesh, checkpointer)
        if start:
          initialising[0] = "checkpoint"  # it was a restore
      with timeline.phase("startup"):
        _count_lost_steps(writer, start, primary)
        if primary:  # what sample.py needs to rebuild the model without this run's gin files
          write_run_info(config.model_dir, model_config, config.vocabulary_path, config.checkpoint_dir, adapters)
        step_fn = jit_train_step(trainable, optimizer, shardings, batch_sharding, config.z_loss, config.microbatches)
        log = _progress_log(config, model_config, writer, schedule, checkpointer, start, primary, timeline)
      with timeline.phase("input"):
        batches = _train_batches(config, checkpointer, start, progress)
      with timeline.phase("evaluation"):
        validation = Validation(jit_eval_step(trainable, shardings.params, batch_sharding),
                                _validation_sets(config, plans), batch_sharding, config.eval_every,
                                config.train_steps, writer, primary)
        if start == 0 and config.init_from:  # fine-tuning: the held-out loss it starts from, as step 0
          validation(loop.StepEnd(0, state, {}, save=False, stop=False))
      hooks = _hooks(config, log, validation, checkpointer, batches, trainable.model, vocabulary, mesh, writer,
                     start, timeline, primary)
      preemption = loop.Preemption()
      try:
        loop.run(state, step_fn, batches, batch_sharding, start, config.train_steps, config.checkpoint_every, hooks,
                 preemption, timeline)
      finally:
        plot = _close(hooks, timeline, checkpointer, writer, log.step, preemption.requested, config.model_dir,
                      primary)
  if primary:
    print(f"checkpoints: {checkpointer.directory}\nmetrics: {writer.path}\nloss curve: {plot}", flush=True)
  return log.last
