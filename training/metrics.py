"""Where a run's figures go: the console, MODEL_DIR/metrics.jsonl, TensorBoard, and a loss-curve PNG.
Every file goes through `storage`, so MODEL_DIR may be a gs:// URL."""

from __future__ import annotations

import json
from typing import Mapping

import storage


class MetricsWriter:
  """Only the primary host writes; every host may call it."""

  def __init__(self, model_dir: str, primary: bool = True):
    self.primary = primary
    self.path = storage.join(model_dir, "metrics.jsonl")
    self._tensorboard = None
    self._jsonl = None
    if primary:
      import tensorflow as tf

      storage.makedirs(model_dir)
      # A killed run may have left half a line: cut off here, so the next record starts a line.
      self._jsonl = storage.JsonlAppender(self.path)
      self._tensorboard = tf.summary.create_file_writer(storage.join(model_dir, "tensorboard"))

  def write(self, step: int, metrics: Mapping[str, float]) -> None:
    if not self.primary:
      return
    import tensorflow as tf

    self._jsonl.write({"step": int(step), **{k: float(v) for k, v in metrics.items()}})
    with self._tensorboard.as_default(step=int(step)):
      for key, value in metrics.items():
        tf.summary.scalar(key, float(value))
    self._tensorboard.flush()

  def resume_at(self, step: int) -> list[dict]:
    """A run resuming from its checkpoint at `step` logs the steps after it again: the records of
    those steps from before the kill go, so each step is in metrics.jsonl once. Returns them (what
    the restart redoes: training/goodput.py counts it)."""
    if not self.primary or not storage.exists(self.path):
      return []
    records = self.read()
    kept = [r for r in records if not isinstance(r.get("step"), int) or r["step"] <= step]
    if len(kept) < len(records):
      self._jsonl.close()
      storage.write_atomic(self.path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in kept))
      self._jsonl = storage.JsonlAppender(self.path)
    return [r for r in records if isinstance(r.get("step"), int) and r["step"] > step]

  def read(self) -> list[dict]:
    """The records so far (a torn last line is skipped with a warning, storage's rule)."""
    if not storage.exists(self.path):
      return []
    return [record for _, record in storage.read_jsonl(self.path)]

  def plot(self, output: str | None = None) -> str | None:
    """Training loss (and validation losses, where logged) against step: loss.png beside metrics.jsonl."""
    records = self.read() if self.primary else []
    if not records:
      return None
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.5))
    _loss_axis(ax, records)
    for key in sorted({k for r in records for k in r if k.startswith("validation/")}):
      points = [(r["step"], r[key]) for r in records if key in r]
      ax.plot(*zip(*points), marker="o", markersize=3, linewidth=1, label=key.split("/", 1)[1])
    ax.legend(fontsize=7, ncol=2)
    return _save(plt, fig, output or self._beside("loss.png"))

  def plot_passk(self, output: str | None = None) -> str | None:
    """Training loss (left axis) and each language's pass@1 (right axis, a fraction of problems)
    against step: passk.png beside metrics.jsonl, only when pass@k was logged (training/passk_hook.py)."""
    records = self.read() if self.primary else []
    keys = sorted({k for r in records for k in r if k.startswith("passk/") and k.endswith("/pass@1")})
    if not keys:
      return None
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.5))
    _loss_axis(ax, records)
    right = ax.twinx()
    for key in keys:
      points = sorted((r["step"], r[key]) for r in records if key in r)
      right.plot(*zip(*points), marker="o", markersize=4, linewidth=1.5, label=f"{key.split('/')[1]} pass@1")
    right.set_ylabel("pass@1 (fraction of problems)")
    right.set_ylim(bottom=0)
    lines = ax.get_legend_handles_labels(), right.get_legend_handles_labels()
    right.legend(lines[0][0] + lines[1][0], lines[0][1] + lines[1][1], fontsize=7, ncol=2, loc="upper center")
    return _save(plt, fig, output or self._beside("passk.png"))

  def _beside(self, name: str) -> str:
    return storage.join(storage.dirname(self.path), name)

  def close(self) -> None:
    if self._jsonl is not None:
      self._jsonl.close()
    if self._tensorboard is not None:
      self._tensorboard.close()


def _pyplot():
  import matplotlib

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  return plt


def _loss_axis(ax, records: list[dict]) -> None:
  """The training loss against step on `ax`, with its labels and grid."""
  train = [(r["step"], r["loss"]) for r in records if "loss" in r]
  if train:
    ax.plot(*zip(*train), label="train loss", color="black")
  ax.set_xlabel("step")
  ax.set_ylabel("loss (nats / target token)")
  ax.grid(alpha=0.3)


def _save(plt, fig, output: str) -> str:
  """The figure as a PNG through storage (matplotlib writes local files only), then closed."""
  fig.tight_layout()
  try:
    return storage.save_figure(fig, output)
  finally:
    plt.close(fig)
