"""Two local processes joined by jax.distributed train like one process with the same global batch."""

import json
import os
import socket
import subprocess
import sys

import numpy as np
import pytest

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "multihost_worker.py")


def _free_port():
  with socket.socket() as s:
    s.bind(("localhost", 0))
    return str(s.getsockname()[1])


def _run(num_processes, tmp_path):
  output = str(tmp_path / f"losses_{num_processes}.json")
  env = dict(os.environ, XLA_FLAGS="", JAX_PLATFORMS="cpu")  # one CPU device per process
  port = _free_port()
  processes = [subprocess.Popen([sys.executable, WORKER, str(i), str(num_processes), port, output], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
               for i in range(num_processes)]
  for p in processes:
    out = p.communicate(timeout=300)[0]
    assert p.returncode == 0, out[-3000:]
  with open(output) as f:
    return json.load(f)


@pytest.mark.e2e
def test_two_processes_match_one_process(tmp_path):
  single = _run(1, tmp_path)  # one process, one device, the whole batch
  multi = _run(2, tmp_path)  # two processes, one device each, half the rows each
  assert (single["devices"], multi["devices"], multi["processes"]) == (1, 2, 2)
  np.testing.assert_allclose(multi["losses"], single["losses"], rtol=1e-5)
  assert multi["losses"][-1] < multi["losses"][0]


@pytest.mark.e2e
def test_two_hosts_sample_like_one(tmp_path):
  # sample.py as a two-host job (two processes of two CPU devices, joined by jax.distributed through
  # the same environment variables a GPU cluster sets): the rows are split over all four devices, the
  # first host writes every (qid, sample_id) once, and greedy decoding matches one process.
  import gin

  sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
  import code_corpus
  import test_sampler

  root = str(tmp_path / "corpus")
  code_corpus.build(root)
  model_dir = str(tmp_path / "run")
  test_sampler._trained_run(root, model_dir)
  gin.clear_config()
  prompts = tmp_path / "prompts.jsonl"
  with open(prompts, "w") as f:
    for i in range(3):
      f.write(json.dumps({"qid": f"q{i}", "language": "Python", "prompt": f"def f{i}(x):\n"}) + "\n")
  repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

  def run(num_processes, output):
    port = _free_port()
    processes = []
    for i in range(num_processes):
      env = dict(os.environ, JAX_PLATFORMS="cpu", XLA_FLAGS="--xla_force_host_platform_device_count=2",
                 JAX_CPU_COLLECTIVES_IMPLEMENTATION="gloo")
      if num_processes > 1:
        env.update(JAX_COORDINATOR_ADDRESS=f"localhost:{port}", JAX_NUM_PROCESSES=str(num_processes),
                   JAX_PROCESS_ID=str(i))
      processes.append(subprocess.Popen(
          [sys.executable, "sample.py", f"--checkpoint={model_dir}", f"--prompts={prompts}", f"--output={output}",
           "--num_samples=2", "--max_decode_length=10", "--temperature=0", "--batch_size=3"],
          cwd=repo, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    for p in processes:
      out = p.communicate(timeout=300)[0]
      assert p.returncode == 0, out[-3000:]
    with open(output) as f:
      return sorted((r["qid"], r["sample_id"], r["code"]) for r in map(json.loads, f))

  single = run(1, str(tmp_path / "single.jsonl"))
  multi = run(2, str(tmp_path / "multi.jsonl"))
  assert [(q, s) for q, s, _ in multi] == [(f"q{i}", s) for i in range(3) for s in range(2)]
  assert multi == single
