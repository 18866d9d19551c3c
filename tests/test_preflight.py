"""tpu/preflight.py: the run's own training step and decode loop compiled for a TPU slice on this CPU
host (libtpu's abstract devices), memory against HBM, FLOPs that count every layer, and a refusal that
names the overshoot. libtpu comes from `make tpu_compiler` (.tpu_compiler/), which `make test` runs."""

import json
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import pytest

from tpu import preflight
from tpu.slices import parse_slice
from tpu.traced_flops import traced_flops

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = ["--gin_file=gin_configs/runs/pretrain.gin", "--gin_file=gin_configs/models/tiny.gin",
        "--gin.TASK_FEATURE_LENGTHS={'inputs': 256, 'targets': 256}"]

needs_libtpu = pytest.mark.skipif(
    preflight.find_libtpu() is None and not os.environ.get("CODELM_REQUIRE_TPU_COMPILER"),
    reason="libtpu not installed (make tpu_compiler)")


@pytest.mark.parametrize("name, topology, chips", [
    ("v4-8", "v4:2x2x1", 4), ("v4-32", "v4:2x2x4", 16), ("v4-128", "v4:4x4x4", 64), ("v5p-64", "v5p:2x4x4", 32),
    ("v5e-1", "v5e:1x1", 1), ("v5litepod-16", "v5e:4x4", 16), ("v5e-256", "v5e:16x16", 256), ("v6e-8", "v6e:2x4", 8),
    ("v4:4x4x8", "v4:4x4x8", 128), ("v5e:2x2", "v5e:2x2", 4)])
def test_slice_names_become_topologies_with_one_device_per_chip(name, topology, chips):
  slice_ = parse_slice(name)
  assert (slice_.topology_name, slice_.chips) == (topology, chips)


@pytest.mark.parametrize("name, words", [("v9-8", "chips: v4"), ("v4-6", "two per chip"), ("v5e-12", "power of two"),
                                         ("v4:4x4", "3 dimensions"), ("tpu", "accelerator type")])
def test_unknown_slices_are_refused_saying_what_is_accepted(name, words):
  with pytest.raises(ValueError, match=words):
    parse_slice(name)


def test_traced_flops_count_every_scan_iteration_and_the_backward_pass():
  x, w = jax.ShapeDtypeStruct((8, 16), jnp.float32), jax.ShapeDtypeStruct((16, 32), jnp.float32)
  v = jax.ShapeDtypeStruct((32, 16), jnp.float32)

  def loss(x, w, v):
    def layer(carry, _):
      return jnp.tanh(carry @ w) @ v, None
    return jax.lax.scan(layer, x, None, length=5)[0].sum()

  forward = 5 * (2 * 8 * 16 * 32 + 2 * 8 * 32 * 16)
  assert traced_flops(loss, x, w, v) == forward
  assert traced_flops(jax.grad(loss, argnums=(1, 2)), x, w, v) == 3 * forward  # forward + two products back


def _preflight(*args, timeout=600):
  result = subprocess.run([sys.executable, "-m", "tpu.preflight", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=timeout, env=dict(os.environ, XLA_FLAGS=""))
  return result.returncode, result.stdout, result.stderr


@needs_libtpu
def test_the_tiny_run_compiles_for_v5e_2x2_with_memory_flops_and_the_sampler(tmp_path):
  report_path = tmp_path / "report.json"
  code, out, err = _preflight(*TINY, "--gin.BATCH_SIZE=8", "--topology=v5e:2x2", "--sample_batch_size=16",
                              "--num_prompts=8", "--num_samples=4", "--prompt_length=64", "--max_decode_length=64",
                              f"--json={report_path}")
  assert code == 0, err[-3000:]
  assert "4 TPU v5e chips" in out and "fits" in out and "MFU" in out and "decode step" in out
  train, decode = json.loads(report_path.read_text())["reports"]
  assert train["program"] == "train step" and train["mesh"] == {"data": 4, "fsdp": 1, "tensor": 1}
  memory = train["memory"]
  assert memory["arguments"] > 0 and memory["generated_code"] > 0 and train["fits"]
  # Every layer counted: the traced step's FLOPs are the model's 6N + 12LHKT within 10%, where XLA's
  # own figure (the scanned body once) is well below it for two layers.
  assert abs(train["traced_flops"] / train["model_flops"] - 1) < 0.1, train
  assert train["xla_flops"] < 0.9 * train["traced_flops"]
  assert train["estimated_step_s"] > 0 and 0 < train["estimated_mfu"] <= 1
  assert decode["program"] == "decode loop" and decode["fits"] and decode["memory"]["arguments"] > 0


@needs_libtpu
def test_with_one_layer_xla_and_the_traced_count_agree(tmp_path):
  """No loop to undercount: the compiler's FLOPs check the jaxpr count (within 10%)."""
  code, out, err = _preflight(*TINY, "--gin.BATCH_SIZE=8", "--gin.train.model_overrides={'num_layers': 1}",
                              "--topology=v5e-4", f"--json={tmp_path / 'r.json'}")
  assert code == 0, err[-3000:]
  report = json.loads((tmp_path / "r.json").read_text())["reports"][0]
  assert abs(report["xla_flops"] / report["traced_flops"] - 1) < 0.1, report


@needs_libtpu
def test_a_run_that_does_not_fit_exits_1_naming_the_overshoot_and_the_knobs():
  code, out, err = _preflight(*TINY, "--gin.BATCH_SIZE=2048", "--gin.TASK_FEATURE_LENGTHS={'inputs': 2048, "
                              "'targets': 2048}", "--topology=v5e-1")
  assert code == 1, (out, err[-3000:])
  assert "DOES NOT FIT: XLA needs" in out and "GiB over" in out
  assert "remat" in out and "--gin.train.microbatches=2" in out


def test_usage_errors_exit_2_naming_the_flag():
  code, _, err = _preflight(*TINY, "--topology=v9-8", timeout=120)
  assert code == 2 and "--topology 'v9-8'" in err
  code, _, err = _preflight(*TINY, "--topology=v5e-4", "--gin.TRAIN_STEP=3", timeout=120)
  assert code == 2 and "TRAIN_STEP" in err


def test_without_libtpu_the_error_says_how_to_install_it(monkeypatch):
  monkeypatch.setattr(preflight, "find_libtpu", lambda: None)
  with pytest.raises(RuntimeError, match=r"make tpu_compiler.*pip install -e '\.\[tpu\]'"):
    preflight.topology_devices(parse_slice("v5e-4"))


@needs_libtpu
def test_lora_fine_tuning_compiles_from_the_pretrained_runs_model_without_a_corpus(tmp_path):
  """runs/finetune_lora.gin defines no CORPUS_DIR and leaves MODEL_DIR required: the pre-flight needs
  only PRETRAINED_DIR's run.json. The frozen base is not trained, so the step's FLOPs are the
  forward and the activations' backward: about 4N per token where full training is 6N."""
  from model.config import get_config
  from training.run_info import write_run_info

  (tmp_path / "pretrained").mkdir()
  write_run_info(str(tmp_path / "pretrained"), get_config("tiny", max_length=512), str(tmp_path / "spm.model"))
  code, out, err = _preflight("--gin_file=gin_configs/runs/finetune_lora.gin",
                              f"--gin.PRETRAINED_DIR='{tmp_path / 'pretrained'}'", "--topology=v5e-4",
                              f"--json={tmp_path / 'r.json'}")
  assert code == 0, err[-3000:]
  report = json.loads((tmp_path / "r.json").read_text())["reports"][0]
  assert report["lora"] and report["fits"] and report["batch"] == [16, 512] and ", LoRA" in out
  assert 0.55 < report["traced_flops"] / report["model_flops"] < 0.8, report


@needs_libtpu
def test_accumulation_and_remat_are_the_runs_own(tmp_path):
  """microbatches and the remat policy reach the compiled step: full remat recomputes the layers'
  forward, so the step counts more FLOPs than the model's formula."""
  code, out, err = _preflight(*TINY, "--gin.BATCH_SIZE=8", "--gin.train.microbatches=2",
                              "--gin.train.model_overrides={'remat': 'full'}", "--topology=v5e-4",
                              f"--json={tmp_path / 'r.json'}")
  assert code == 0, err[-3000:]
  report = json.loads((tmp_path / "r.json").read_text())["reports"][0]
  assert report["microbatches"] == 2 and report["remat"] == "full" and "microbatches 2, remat full" in out
  assert report["traced_flops"] > 1.1 * report["model_flops"] and report["estimated_mfu"] < 0.95


# ---- GPUs: jax's CUDA plugin compiles for a described GPU without one (make gpu_compiler) ----------

needs_cuda_plugin = pytest.mark.skipif(
    preflight.find_cuda_plugin() is None and not os.environ.get("CODELM_REQUIRE_GPU_COMPILER"),
    reason="jax's CUDA plugin not installed (make gpu_compiler)")


@pytest.mark.parametrize("name, shape, topology", [("h100-8", (1, 8), "1x1x8"), ("h100-1", (1, 1), "1x1x1"),
                                                   ("h200-16", (2, 8), "1x2x8"), ("A100:4x8", (4, 8), "1x4x8")])
def test_gpu_names_become_nodes_of_gpus(name, shape, topology):
  slice_ = parse_slice(name)
  assert slice_.chip.platform == "cuda" and slice_.shape == shape and slice_.gpu_topology == topology
  assert slice_.chips == shape[0] * shape[1] and "GPU" in slice_.describe()


def test_gpu_counts_that_are_not_whole_nodes_are_refused():
  with pytest.raises(ValueError, match="nodes of 8"):
    parse_slice("h100-12")
  with pytest.raises(ValueError, match="h100-8"):
    parse_slice("b300-8")


def test_without_the_cuda_plugin_the_error_says_how_to_install_it(monkeypatch):
  monkeypatch.setattr(preflight, "find_cuda_plugin", lambda: None)
  with pytest.raises(RuntimeError, match=r"make gpu_compiler.*pip install -e '\.\[gpu\]'"):
    preflight.topology_devices(parse_slice("h100-8"))


@needs_cuda_plugin
def test_the_tiny_run_compiles_for_eight_h100s_without_a_gpu(tmp_path):
  """Memory per GPU against the share JAX's allocator takes (XLA_PYTHON_CLIENT_MEM_FRACTION), FLOPs
  counted on the traced step (XLA gives no cost analysis for a GPU it cannot see), and the sampler."""
  report_path = tmp_path / "report.json"
  result = subprocess.run(
      [sys.executable, "-m", "tpu.preflight", *TINY, "--gin.BATCH_SIZE=8", "--topology=h100-8",
       "--sample_batch_size=16", "--num_prompts=8", "--num_samples=4", "--prompt_length=64",
       "--max_decode_length=64", f"--json={report_path}"], capture_output=True, text=True, cwd=ROOT, timeout=600,
      env=dict(os.environ, XLA_FLAGS="", XLA_PYTHON_CLIENT_MEM_FRACTION="0.5"))
  assert result.returncode == 0, result.stderr[-3000:]
  assert "8 H100 GPUs (1 node of 8)" in result.stdout and "no GPU needed" in result.stdout
  train, decode = json.loads(report_path.read_text())["reports"]
  assert train["mesh"] == {"data": 8, "fsdp": 1, "tensor": 1} and train["fits"]
  assert train["hbm_bytes"] == int(parse_slice("h100-8").chip.hbm_bytes * 0.5)
  assert train["memory"]["arguments"] > 0 and train["memory"]["temporaries"] > 0
  assert abs(train["traced_flops"] / train["model_flops"] - 1) < 0.1, train
  assert decode["program"] == "decode loop" and decode["fits"] and decode["memory"]["arguments"] > 0


@needs_cuda_plugin
def test_a_run_that_does_not_fit_one_gpu_exits_1_with_the_memory_fraction_among_the_knobs():
  result = subprocess.run(
      [sys.executable, "-m", "tpu.preflight", *TINY, "--gin.BATCH_SIZE=1024",
       "--gin.TASK_FEATURE_LENGTHS={'inputs': 2048, 'targets': 2048}", "--topology=h100-1"],
      capture_output=True, text=True, cwd=ROOT, timeout=600, env=dict(os.environ, XLA_FLAGS=""))
  assert result.returncode == 1, (result.stdout, result.stderr[-3000:])
  assert "DOES NOT FIT" in result.stdout and "GiB over" in result.stdout
  assert "XLA_PYTHON_CLIENT_MEM_FRACTION=0.95" in result.stdout and "remat" in result.stdout
