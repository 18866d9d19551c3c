"""Where a run's figures go: the console, MODEL_DIR/metrics.jsonl, TensorBoard, and a loss-curve PNG."""

from __future__ import annotations

import json
import os
from typing import Mapping


class MetricsWriter:
  """Only the primary host writes; every host may call it."""

  def __init__(self, model_dir: str, primary: bool = True):
    self.primary = primary
    self.path = os.path.join(model_dir, "metrics.jsonl")
    self._tensorboard = None
    if primary:
      import tensorflow as tf

      os.makedirs(model_dir, exist_ok=True)
      self._tensorboard = tf.summary.create_file_writer(os.path.join(model_dir, "tensorboard"))

  def write(self, step: int, metrics: Mapping[str, float]) -> None:
    if not self.primary:
      return
    import tensorflow as tf

    record = {"step": int(step), **{k: float(v) for k, v in metrics.items()}}
    with open(self.path, "a") as f:
      f.write(json.dumps(record) + "\n")
    with self._tensorboard.as_default(step=int(step)):
      for key, value in metrics.items():
        tf.summary.scalar(key, float(value))
    self._tensorboard.flush()

  def read(self) -> list[dict]:
    if not os.path.exists(self.path):
      return []
    with open(self.path) as f:
      return [json.loads(line) for line in f if line.strip()]

  def plot(self, output: str | None = None) -> str | None:
    """Training loss (and validation losses, where logged) against step."""
    records = self.read()
    if not self.primary or not records:
      return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    output = output or os.path.join(os.path.dirname(self.path), "loss.png")
    fig, ax = plt.subplots(figsize=(8, 4.5))
    train = [(r["step"], r["loss"]) for r in records if "loss" in r]
    ax.plot(*zip(*train), label="train loss", color="black")
    for key in sorted({k for r in records for k in r if k.startswith("validation/")}):
      points = [(r["step"], r[key]) for r in records if key in r]
      ax.plot(*zip(*points), marker="o", markersize=3, linewidth=1, label=key.split("/", 1)[1])
    ax.set_xlabel("step")
    ax.set_ylabel("loss (nats / target token)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(output, dpi=110)
    plt.close(fig)
    return output

  def close(self) -> None:
    if self._tensorboard is not None:
      self._tensorboard.close()
