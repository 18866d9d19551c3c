"""Train a codelm model from gin configs, the T5X way.

  python train.py --gin_file=gin_configs/runs/pretrain.gin --gin_file=gin_configs/models/1b.gin \
      --gin_file=gin_configs/mixtures/unimax_2.gin --gin.MODEL_DIR="'/tmp/run'" \
      --gin.CORPUS_DIR="'corpus'" [--gin.TRAIN_STEPS=1000 ...]

Every host of a pod runs this same command. Training resumes from the newest checkpoint in MODEL_DIR
(or train.checkpoint_dir), its input pipeline restored to where it was; SIGTERM (preemption) saves a
checkpoint and exits cleanly. The operative config goes to MODEL_DIR/config.gin, figures to
MODEL_DIR/metrics.jsonl, TensorBoard and MODEL_DIR/loss.png. MODEL_DIR may be a URL (gs://).
The run itself is training/run.py, its config training/config.py, bound as gin's `train` by
gin_train.py; this file parses the flags and holds MODEL_DIR's lock.
"""

from __future__ import annotations

import quiet

if __name__ == "__main__":  # before TensorFlow, JAX and Beam are imported
  quiet.setup()

import contextlib
import sys
import time
from typing import Sequence

import gin
import jax

import gin_flags
import storage
from gin_flags import UsageError
from gin_train import train_config
from storage import OutputLocked, exclusive_output
from training import run
from training.checkpoints import CheckpointError
from training.distributed import maybe_initialize_distributed


def train(gin_config_str: str = "", began: float | None = None) -> dict:
  """Trains until train_steps; returns the last logged metrics. One train.py per MODEL_DIR: the first
  process holds MODEL_DIR/train.lock while it runs, and a second run there refuses at once. `began`:
  when the command started (the run's time breakdown counts from there)."""
  config = train_config()  # every value checked, the mesh against the devices
  prepared = run.prepare(config, began)  # the data, and the task name against it: before MODEL_DIR exists
  storage.makedirs(config.model_dir)
  with exclusive_output(storage.join(config.model_dir, "train"), "train.py", f"MODEL_DIR {config.model_dir}") \
      if jax.process_index() == 0 else contextlib.nullcontext() as held:
    return run.train(config, gin_config_str, prepared, before_save=held.verify if held else None)


def main(argv: Sequence[str] | None = None) -> dict:
  began = time.time()
  gin_files, bindings = gin_flags.parse_flags(sys.argv[1:] if argv is None else argv, __doc__)
  maybe_initialize_distributed()
  try:
    gin_flags.parse_gin(gin_files, bindings)
    return train(gin_config_str=gin.config_str(), began=began)
  except (UsageError, OutputLocked) as error:  # the user's flags/input, or a MODEL_DIR another run
    # holds: status 2, as argparse's and as sample.py and the scorer answer a held output
    print(f"train.py: {gin_flags.message(error)}", file=sys.stderr)
    sys.exit(2)
  except (FloatingPointError, CheckpointError) as error:
    sys.exit(f"train.py: {gin_flags.message(error)}")


if __name__ == "__main__":
  main()
