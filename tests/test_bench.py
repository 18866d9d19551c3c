"""The benchmark script runs end to end and writes its figures (no timing assertions here)."""

import json
import math
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "bench"))

import train_step as bench_train_step  # noqa: E402


def test_train_step_bench_writes_its_figures(tmp_path):
  output = tmp_path / "bench.json"
  bench_train_step.main(["--size", "tiny", "--seq", "32", "--batch", "8", "--steps", "2",
                         "--matmul_n", "256", "--output", str(output)])
  result = json.loads(output.read_text())
  for key in ("tokens_per_second", "model_tflops_per_second", "matmul_ceiling_tflops_per_second", "mfu"):
    assert result[key] > 0 and math.isfinite(result[key])
  assert result["size"] == "tiny" and len(result["step_seconds_all"]) == 2
  assert math.isfinite(result["final_loss"])
