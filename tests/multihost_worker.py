"""One process of the two-process test in test_multihost.py (run as a script, not collected)."""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402

process_id, num_processes, port, output = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
if num_processes > 1:
  jax.config.update("jax_cpu_collectives_implementation", "gloo")  # CPU collectives across processes
  jax.distributed.initialize(f"localhost:{port}", num_processes, process_id)

import numpy as np  # noqa: E402
from jax.sharding import NamedSharding  # noqa: E402

from model import sharding  # noqa: E402
from model.config import get_config  # noqa: E402
from model.transformer import Decoder  # noqa: E402
from training.loop import global_batch as make_global_batch  # noqa: E402
from training.optimizer import adafactor  # noqa: E402
from training.step import init_sharded_state, jit_train_step, state_shardings  # noqa: E402

model, optimizer = Decoder(get_config("tiny")), adafactor(1e-2)
mesh = sharding.make_mesh(-1, 1, 1)
_, shardings = state_shardings(model, optimizer, mesh)
batch_sharding = NamedSharding(mesh, sharding.batch_spec())
rng = np.random.default_rng(0)
tokens = rng.integers(3, 4096, (8, 32)).astype(np.int32)
global_batch = {"decoder_input_tokens": tokens, "decoder_target_tokens": np.roll(tokens, -1, 1),
                "decoder_loss_weights": (rng.random((8, 32)) > 0.3).astype(np.float32)}
rows = 8 // jax.process_count()  # this host's share of the global batch, as train.py feeds it
local = {k: v[jax.process_index() * rows:(jax.process_index() + 1) * rows] for k, v in global_batch.items()}

with sharding.activation_sharding(mesh):
  state = init_sharded_state(model, optimizer, 0, shardings)
  step = jit_train_step(model, optimizer, shardings, batch_sharding)  # the step train.py compiles
  losses = []
  for _ in range(3):
    state, metrics = step(state, make_global_batch(local, batch_sharding))
    losses.append(float(metrics["loss"]))
if jax.process_index() == 0:
  with open(output, "w") as f:
    json.dump({"losses": losses, "devices": jax.device_count(), "processes": jax.process_count()}, f)
