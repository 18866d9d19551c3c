"""Two local processes joined by jax.distributed train like one process with the same global batch."""

import json
import os
import socket
import subprocess
import sys

import numpy as np

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


def test_two_processes_match_one_process(tmp_path):
  single = _run(1, tmp_path)  # one process, one device, the whole batch
  multi = _run(2, tmp_path)  # two processes, one device each, half the rows each
  assert (single["devices"], multi["devices"], multi["processes"]) == (1, 2, 2)
  np.testing.assert_allclose(multi["losses"], single["losses"], rtol=1e-5)
  assert multi["losses"][-1] < multi["losses"][0]
