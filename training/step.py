"""The pure training step: features in, new state and metrics out. No I/O, no host round trips. Also
the one place where it is jitted with its shardings (train.py and bench/train_step.py use the same)."""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Mapping

import flax.linen as nn
import flax.struct
import jax
import jax.numpy as jnp
import optax
from jax.sharding import NamedSharding, PartitionSpec

from model import lora, sharding
from model.loss import LossSums, cross_entropy_with_z_loss
from model.transformer import Decoder, init_params
from training.optimizer import Optimizer, state_specs

Batch = Mapping[str, jax.Array]  # SeqIO DecoderFeatureConverter features, each [B, T]
# What the packed training stream yields (int32 [B, T] each; data/stream.py), as the step reads it.
BATCH_FEATURES = ("decoder_input_tokens", "decoder_target_tokens", "decoder_loss_weights", "decoder_positions",
                  "decoder_segment_ids", "decoder_causal_attention")


def abstract_batch(batch_size: int, length: int, sharding=None, prefix_lm: bool = True
                   ) -> dict[str, jax.ShapeDtypeStruct]:
  """A training batch's shapes and types without data: for compiling the step ahead of time. A plain
  language-model task has no `decoder_causal_attention` (UL2 and prompt -> completion tasks do)."""
  names = BATCH_FEATURES if prefix_lm else tuple(n for n in BATCH_FEATURES if n != "decoder_causal_attention")
  return {name: jax.ShapeDtypeStruct((batch_size, length), jnp.int32, sharding=sharding) for name in names}


@flax.struct.dataclass
class TrainState:
  step: jax.Array
  params: Any
  opt_state: Any


def init_state(model: Decoder, optimizer: optax.GradientTransformation, rng: jax.Array) -> TrainState:
  params = nn.unbox(init_params(model, rng))
  return TrainState(step=jnp.zeros((), jnp.int32), params=params, opt_state=optimizer.init(params))


def init_lora_state(model: Decoder, optimizer: optax.GradientTransformation, rng: jax.Array) -> TrainState:
  """Fresh adapters (A random, B zero: the adapted model starts as the base) and their optimizer."""
  adapters = lora.init_adapters(model, rng)
  return TrainState(step=jnp.zeros((), jnp.int32), params=adapters, opt_state=optimizer.init(adapters))


def lora_state_shardings(model: Decoder, optimizer: optax.GradientTransformation, mesh
                         ) -> tuple[TrainState, TrainState]:
  """(abstract TrainState of the adapters, its NamedShardings): adapters and their optimizer state are
  replicated (r x d per projection: small next to the base parameters, which keep their layout)."""
  abstract = jax.eval_shape(lambda: init_lora_state(model, optimizer, jax.random.key(0)))
  return abstract, jax.tree.map(lambda _: NamedSharding(mesh, PartitionSpec()), abstract)


def state_shardings(model: Decoder, optimizer: optax.GradientTransformation, mesh,
                    kind: Optimizer = Optimizer.ADAFACTOR) -> tuple[TrainState, TrainState]:
  """(abstract TrainState, its NamedShardings on `mesh`), allocating nothing: the parameters laid out
  as model/sharding.py's `param_shardings` lays them out for sampling, the optimizer state following
  each parameter's spec (training/optimizer.py)."""
  specs = sharding.param_specs(sharding.abstract_params(model))
  abstract = jax.eval_shape(lambda: init_state(model, optimizer, jax.random.key(0)))
  opt_specs = state_specs(kind, optimizer, abstract.opt_state, abstract.params, specs)
  shardings = TrainState(step=NamedSharding(mesh, PartitionSpec()), params=sharding.shardings(specs, mesh),
                         opt_state=sharding.shardings(opt_specs, mesh))
  return abstract, shardings


@dataclasses.dataclass(frozen=True)
class Trainable:
  """The step's one view of what it trains: `model` applied to the parameters the optimizer updates
  (state.params) beside `frozen`, those it reads and never updates (LoRA: the base's, model/lora.py;
  None when every parameter is trained), laid out as `frozen_shardings`; `dropout_seed` keys dropout
  per step (None: none). Whether a run is LoRA is decided where this is built, not in the step.

  A bare Decoder is the view of full training: every function below takes either."""
  model: Decoder
  frozen: Any = None
  frozen_shardings: Any = None
  dropout_seed: int | None = None

  @classmethod
  def lora_adapters(cls, model: Decoder, frozen: Any, frozen_shardings: Any, seed: int) -> Trainable:
    """`model`'s LoRA adapters over its frozen base; dropout keyed from `seed` when the adapters have any."""
    return cls(model, frozen, frozen_shardings, seed if model.lora.dropout > 0 else None)

  def logits(self, params: Any, batch: Batch, dropout_rng: jax.Array | None = None) -> jax.Array:
    """[B, T, V] for the batch's features; `dropout_rng` turns on the adapters' dropout."""
    variables = {"params": params} if self.frozen is None else {"params": self.frozen, "lora": params}
    logits, _ = self.model.apply(variables, batch["decoder_input_tokens"],
                                 positions=batch.get("decoder_positions"),
                                 segment_ids=batch.get("decoder_segment_ids"),
                                 causal_attention=batch.get("decoder_causal_attention"),
                                 rngs=None if dropout_rng is None else {"dropout": dropout_rng})
    return logits

  def dropout_rng(self, step: jax.Array) -> jax.Array | None:
    return None if self.dropout_seed is None else jax.random.fold_in(jax.random.key(self.dropout_seed), step)


def trainable(model: Decoder | Trainable, frozen: Any = None) -> Trainable:
  """`model` as a Trainable; `frozen`, when given, the frozen parameters as the jitted step receives
  them (an argument: closed over, they would be baked into the program as constants)."""
  view = model if isinstance(model, Trainable) else Trainable(model)
  return view if frozen is None else dataclasses.replace(view, frozen=frozen)


def loss_and_grads(model: Decoder | Trainable, params: Any, batch: Batch, z_loss: float,
                   dropout_rng: jax.Array | None = None):
  """Mean loss over weighted target tokens, its gradients, and the raw sums for logging."""
  view = trainable(model)

  def mean_loss(p):
    sums = cross_entropy_with_z_loss(view.logits(p, batch, dropout_rng), batch["decoder_target_tokens"],
                                     batch["decoder_loss_weights"], z_loss)
    return sums.loss / jnp.maximum(sums.weight, 1.0), sums

  (loss, sums), grads = jax.value_and_grad(mean_loss, has_aux=True)(params)
  return loss, sums, grads


def accumulated_grads(model: Decoder | Trainable, params: Any, batch: Batch, z_loss: float, microbatches: int,
                      dropout_rng: jax.Array | None = None):
  """Gradients of the batch's mean loss computed over `microbatches` sequential slices.

  Each slice contributes gradients of its loss *sum*; dividing by the total weight at the end gives
  exactly the full batch's mean-loss gradient, however the target tokens fall across slices.
  """
  if microbatches == 1:
    return loss_and_grads(model, params, batch, z_loss, dropout_rng)
  view = trainable(model)

  def sum_loss(p, micro, rng):
    sums = cross_entropy_with_z_loss(view.logits(p, micro, rng), micro["decoder_target_tokens"],
                                     micro["decoder_loss_weights"], z_loss)
    return sums.loss, sums

  def body(carry, micro):
    grads, loss, z, weight = carry
    micro, index = micro
    rng = None if dropout_rng is None else jax.random.fold_in(dropout_rng, index)
    (_, sums), g = jax.value_and_grad(sum_loss, has_aux=True)(params, micro, rng)
    return (jax.tree.map(jnp.add, grads, g), loss + sums.loss, z + sums.z_loss, weight + sums.weight), None

  # [B, T] -> [microbatches, B / microbatches, T]
  split = jax.tree.map(lambda x: x.reshape((microbatches, -1) + x.shape[1:]), dict(batch))
  zero = jnp.zeros((), jnp.float32)
  (grads, loss, z, weight), _ = jax.lax.scan(body, (jax.tree.map(jnp.zeros_like, params), zero, zero, zero),
                                             (split, jnp.arange(microbatches)))
  norm = jnp.maximum(weight, 1.0)
  return loss / norm, LossSums(loss=loss, z_loss=z, weight=weight), jax.tree.map(lambda g: g / norm, grads)


def train_step(state: TrainState, batch: Batch, frozen: Any = None, *, model: Decoder | Trainable,
               optimizer: optax.GradientTransformation, z_loss: float = 1e-4, microbatches: int = 1
               ) -> tuple[TrainState, dict]:
  """One optimizer step on `state.params` (with LoRA, the adapters of the frozen parameters)."""
  view = trainable(model, frozen)
  loss, sums, grads = accumulated_grads(view, state.params, batch, z_loss, microbatches, view.dropout_rng(state.step))
  updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
  params = optax.apply_updates(state.params, updates)
  metrics = {"loss": loss, "z_loss": sums.z_loss / jnp.maximum(sums.weight, 1.0),
             "target_tokens": sums.weight, "grad_norm": optax.tree.norm(grads),
             "param_norm": optax.tree.norm(params)}  # non-finite: the update itself went bad
  return TrainState(step=state.step + 1, params=params, opt_state=opt_state), metrics


def eval_step(params: Any, batch: Batch, frozen: Any = None, *, model: Decoder | Trainable) -> dict:
  """Loss sums (no z-loss) for validation: summed over hosts and batches, then divided."""
  sums = cross_entropy_with_z_loss(trainable(model, frozen).logits(params, batch), batch["decoder_target_tokens"],
                                   batch["decoder_loss_weights"], z_loss=0.0)
  return {"loss_sum": sums.loss, "weight": sums.weight}


def init_sharded_state(model: Decoder, optimizer: optax.GradientTransformation, seed: int, shardings: TrainState
                       ) -> TrainState:
  """A fresh state created directly in its shardings (no full copy on one device first)."""
  return jax.jit(lambda: init_state(model, optimizer, jax.random.key(seed)), out_shardings=shardings)()


def jit_train_step(model: Decoder | Trainable, optimizer: optax.GradientTransformation, shardings: TrainState,
                   batch_sharding, z_loss: float = 1e-4, microbatches: int = 1):
  """train_step jitted for state laid out as `shardings` and batches as `batch_sharding`; the input
  state's buffers are donated (a step holds one state, not two) and the metrics come back replicated.
  The returned step(state, batch) passes the view's frozen parameters (LoRA's base) to the program."""
  jitted = jitted_train_step(model, optimizer, shardings, batch_sharding, z_loss, microbatches)
  frozen = trainable(model).frozen
  return lambda state, batch: jitted(state, batch, frozen)


def jitted_train_step(model: Decoder | Trainable, optimizer: optax.GradientTransformation, shardings: TrainState,
                      batch_sharding, z_loss: float = 1e-4, microbatches: int = 1):
  """The jax.jit of train_step: step(state, batch, frozen), which can be lowered and compiled ahead of
  time (tpu/preflight.py); `frozen` is None in full training."""
  view = trainable(model)
  step = functools.partial(train_step, model=dataclasses.replace(view, frozen=None), optimizer=optimizer,
                           z_loss=z_loss, microbatches=microbatches)
  return jax.jit(step, in_shardings=(shardings, batch_sharding, view.frozen_shardings),
                 out_shardings=(shardings, None), donate_argnums=0)


def jit_eval_step(model: Decoder | Trainable, param_shardings: Any, batch_sharding):
  """eval_step jitted: eval(params, batch), the view's frozen parameters passed to the program."""
  view = trainable(model)
  jitted = jax.jit(functools.partial(eval_step, model=dataclasses.replace(view, frozen=None)),
                   in_shardings=(param_shardings, batch_sharding, view.frozen_shardings))
  return lambda params, batch: jitted(params, batch, view.frozen)
