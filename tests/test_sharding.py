"""Sharding rules on a (data 2, fsdp 2, tensor 2) mesh of 8 fake CPU devices (see conftest.py)."""

import ast
import functools
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P
from optax._src import factorized

from model import sharding
from model.config import get_config
from model.transformer import Decoder
from training.optimizer import adafactor, adafactor_state_specs
from model.transformer import init_params
from training.step import init_state, loss_and_grads, state_shardings, train_step

CFG = get_config("tiny")


def _batch(batch_size=8, length=32):
  rng = np.random.default_rng(0)
  tokens = rng.integers(3, CFG.vocab_size, (batch_size, length)).astype(np.int32)
  segments = np.repeat(np.array([[1] * 20 + [2] * 12]), batch_size, 0).astype(np.int32)
  positions = np.concatenate([np.arange(20), np.arange(12)])[None].repeat(batch_size, 0).astype(np.int32)
  return {"decoder_input_tokens": tokens, "decoder_target_tokens": np.roll(tokens, -1, axis=1),
          "decoder_loss_weights": (rng.random((batch_size, length)) > 0.2).astype(np.float32),
          "decoder_segment_ids": segments, "decoder_positions": positions,
          "decoder_causal_attention": (positions < 4).astype(np.int32)}


def test_mesh_shape_fills_minus_one_and_rejects_bad_shapes():
  assert sharding.mesh_shape(-1, 2, 2, num_devices=8) == (2, 2, 2)
  assert sharding.mesh_shape(1, -1, 1, num_devices=8) == (1, 8, 1)
  with pytest.raises(ValueError, match="at most one"):
    sharding.mesh_shape(-1, -1, 1, num_devices=8)
  with pytest.raises(ValueError, match="needs 12 devices"):
    sharding.mesh_shape(3, 2, 2, num_devices=8)


@pytest.mark.multidevice
def test_mesh_has_auto_axes():
  mesh = sharding.make_mesh(2, 2, 2)
  assert mesh.axis_names == sharding.MESH_AXES
  assert all(t == jax.sharding.AxisType.Auto for t in mesh.axis_types)


@pytest.mark.multidevice
def test_sharded_step_matches_single_device_and_follows_the_rules():
  assert jax.device_count() == 8, "conftest.py must fake 8 CPU devices"
  model, optimizer = Decoder(CFG), adafactor(1e-2)
  batch = _batch()
  state = init_state(model, optimizer, jax.random.key(0))

  single = jax.jit(functools.partial(loss_and_grads, model, z_loss=1e-4))
  loss_ref, _, grads_ref = single(state.params, batch)

  mesh = sharding.make_mesh(2, 2, 2)
  boxed = jax.eval_shape(lambda: init_params(model, jax.random.key(0)))
  specs = sharding.param_specs(boxed)
  param_shardings = sharding.shardings(specs, mesh)
  batch_sharding = NamedSharding(mesh, sharding.batch_spec())
  params = jax.device_put(state.params, param_shardings)
  sharded_batch = jax.device_put(batch, batch_sharding)

  with sharding.activation_sharding(mesh):
    sharded = jax.jit(functools.partial(loss_and_grads, model, z_loss=1e-4),
                      out_shardings=(None, None, param_shardings))
    loss, _, grads = sharded(params, sharded_batch)

  np.testing.assert_allclose(loss, loss_ref, rtol=1e-5, atol=1e-5)
  for (path, g), g_ref in zip(jax.tree_util.tree_leaves_with_path(grads), jax.tree.leaves(grads_ref)):
    np.testing.assert_allclose(g, g_ref, rtol=1e-5, atol=1e-5, err_msg=jax.tree_util.keystr(path))

  # What the rules say, written out: vocab and heads/mlp over tensor, d_model over fsdp, layers unsharded.
  expected = {
      "embedding": P("tensor", "fsdp"),
      "final_norm.scale": P(None),
      "layers.norm.scale": P(None, None),
      "layers.attention.query": P(None, "fsdp", "tensor", None),
      "layers.attention.key": P(None, "fsdp", None),
      "layers.attention.value": P(None, "fsdp", None),
      "layers.attention.out": P(None, "tensor", None, "fsdp"),
      "layers.mlp.gate": P(None, "fsdp", "tensor"),
      "layers.mlp.up": P(None, "fsdp", "tensor"),
      "layers.mlp.down": P(None, "tensor", "fsdp"),
  }
  flat = {".".join(k.key for k in path): leaf for path, leaf in jax.tree_util.tree_leaves_with_path(params)}
  assert set(flat) == set(expected)
  for name, spec in expected.items():
    assert flat[name].sharding.is_equivalent_to(NamedSharding(mesh, spec), flat[name].ndim), name


@pytest.mark.multidevice
def test_sharded_train_step_with_adafactor_state_specs():
  model, optimizer = Decoder(CFG), adafactor(1e-2)
  mesh = sharding.make_mesh(2, 2, 2)
  boxed = jax.eval_shape(lambda: init_params(model, jax.random.key(0)))
  specs = sharding.param_specs(boxed)
  abstract_state = jax.eval_shape(lambda: init_state(model, optimizer, jax.random.key(0)))
  opt_specs = adafactor_state_specs(abstract_state.opt_state, abstract_state.params, specs)
  # Every state leaf gets a spec no longer than its rank, and factored statistics inherit fsdp/tensor.
  for leaf, spec in zip(jax.tree.leaves(abstract_state.opt_state),
                        jax.tree.leaves(opt_specs, is_leaf=lambda s: isinstance(s, P))):
    assert len(spec) <= leaf.ndim
  assert any("fsdp" in str(s) for s in jax.tree.leaves(opt_specs, is_leaf=lambda s: isinstance(s, P)))
  state_shardings = type(abstract_state)(
      step=NamedSharding(mesh, P()), params=sharding.shardings(specs, mesh),
      opt_state=sharding.shardings(opt_specs, mesh))

  state = jax.device_put(init_state(model, optimizer, jax.random.key(0)), state_shardings)
  batch = jax.device_put(_batch(), NamedSharding(mesh, sharding.batch_spec()))
  with sharding.activation_sharding(mesh):
    step = jax.jit(functools.partial(train_step, model=model, optimizer=optimizer),
                   in_shardings=(state_shardings, None), out_shardings=(state_shardings, None),
                   donate_argnums=0)
    losses = []
    for _ in range(3):
      state, metrics = step(state, batch)
      losses.append(float(metrics["loss"]))
  assert int(state.step) == 3 and losses[-1] < losses[0]


def test_adafactor_state_specs_drop_the_factored_axis_from_the_parameter_spec():
  # optax keeps a row statistic without the largest dim and a column statistic without the second
  # largest; a matrix whose second largest dim is under 128 (or a vector) keeps a full moment.
  model, optimizer = Decoder(CFG), adafactor(1e-2)
  abstract = jax.eval_shape(lambda: init_state(model, optimizer, jax.random.key(0)))
  specs = sharding.param_specs(sharding.abstract_params(model))
  state = adafactor_state_specs(abstract.opt_state, abstract.params, specs)[0]
  assert isinstance(state, factorized.FactoredState) and state.count == P()
  # embedding [vocab 4096, d_model 128] is P("tensor", "fsdp").
  assert (state.v_row["embedding"], state.v_col["embedding"], state.v["embedding"]) == (P("fsdp"), P("tensor"), P())
  # mlp.up [layers, d_model 128, d_ff 512] and mlp.down [layers, d_ff, d_model].
  for name in ("up", "down"):
    assert (state.v_row["layers"]["mlp"][name], state.v_col["layers"]["mlp"][name]) == (P(None, "fsdp"),
                                                                                         P(None, "tensor"))
  # query [layers, d_model, heads 4, head_dim 32]: its second largest dim is 32, so it is not factored.
  query = state.v_row["layers"]["attention"]["query"], state.v["layers"]["attention"]["query"]
  assert query == (P(), P(None, "fsdp", "tensor", None))
  assert state.v["final_norm"]["scale"] == P(None)


@pytest.mark.multidevice
def test_sampling_and_training_lay_parameters_out_alike_on_four_devices():
  # Sampling's shardings come from the model and the mesh alone; training's parameter part must be
  # the same layout, or restoring a training checkpoint for sampling would reshard (or fail).
  mesh = sharding.make_mesh(1, 2, 2, devices=jax.devices()[:4])
  model = Decoder(CFG)
  for_sampling = sharding.param_shardings(model, mesh)
  for_training = state_shardings(model, adafactor(1e-2), mesh)[1].params
  assert jax.tree.structure(for_sampling) == jax.tree.structure(for_training)
  assert jax.tree.leaves(for_sampling) == jax.tree.leaves(for_training)
  assert {s.mesh.size for s in jax.tree.leaves(for_sampling)} == {4}
  assert any("fsdp" in str(s.spec) and "tensor" in str(s.spec) for s in jax.tree.leaves(for_sampling))


def test_model_package_imports_no_optimizer():
  # model/ knows the network and its layout only: the optimizer (optax) and training/ sit above it.
  model_dir = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "model")
  for name in sorted(os.listdir(model_dir)):
    if not name.endswith(".py"):
      continue
    with open(os.path.join(model_dir, name), encoding="utf-8") as f:
      tree = ast.parse(f.read(), name)
    for node in ast.walk(tree):  # function-level imports too
      if isinstance(node, ast.Import):
        modules = [alias.name for alias in node.names]
      elif isinstance(node, ast.ImportFrom):
        modules = [node.module or ""]
      else:
        continue
      for module in modules:
        assert module.split(".")[0] not in ("optax", "training"), f"model/{name}:{node.lineno} imports {module}"


def test_bytes_per_device_divides_by_the_sharded_axes():
  tree = {"w": jax.ShapeDtypeStruct((1024, 512), jnp.float32)}
  assert sharding.bytes_per_device(tree, {"w": P("tensor", "fsdp")}, {"data": 1, "fsdp": 4, "tensor": 2}) \
      == 1024 * 512 * 4 // 8
  assert sharding.bytes_per_device(tree, {"w": P(None, None)}, {"data": 1, "fsdp": 4, "tensor": 2}) \
      == 1024 * 512 * 4
