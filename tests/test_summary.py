import json
import subprocess
import sys

import pytest

from model import summary
from model.config import get_config
from training import summary as training_summary


@pytest.mark.parametrize("size,low,high", [("1b", 1.05e9, 1.15e9), ("2b", 2.45e9, 2.75e9), ("4b", 4.8e9, 5.3e9)])
def test_paper_sizes_have_the_paper_parameter_counts(size, low, high, capsys):
  summary.main(["--size", size, "--json"])
  result = json.loads(capsys.readouterr().out)
  assert low <= result["params"] <= high
  config = get_config(size)
  assert result["params"] == config.num_params  # eval_shape of the real model agrees with the formula
  assert (config.head_dim, config.d_ff) == (256, 4 * config.d_model)
  assert result["flops_per_token"] == 6 * result["params"] + 12 * config.num_layers * config.num_heads * 256 * 2048


def test_cli_prints_one_json_object():
  out = subprocess.run([sys.executable, "-m", "model.summary", "--size", "1b", "--json"],
                       capture_output=True, text=True, check=True).stdout
  result = json.loads(out)
  assert {"params", "flops_per_token"} <= set(result)


def test_bytes_per_device_shrink_with_fsdp_and_tensor(capsys):
  training_summary.main(["--size", "1b", "--json"])
  one = json.loads(capsys.readouterr().out)
  training_summary.main(["--size", "1b", "--json", "--mesh", "1,-1,2", "--devices", "16"])
  sharded = json.loads(capsys.readouterr().out)
  assert sharded["mesh"] == {"data": 1, "fsdp": 8, "tensor": 2}
  # Every weight matrix is split over both axes; only the tiny LayerNorm scales stay replicated.
  assert one["param_bytes_per_device"] / 16 <= sharded["param_bytes_per_device"] < one["param_bytes_per_device"] / 15
  assert sharded["adafactor_bytes_per_device"] < one["adafactor_bytes_per_device"]
  for r in (one, sharded):
    assert r["state_bytes_per_device"] == r["param_bytes_per_device"] + r["adafactor_bytes_per_device"]
  # Unsharded, 1b's factored statistics are its matrices' row and column sums (float32): far below
  # the parameters' bytes but not zero.
  assert 0 < one["adafactor_bytes_per_device"] < one["param_bytes_per_device"] / 100


def test_model_summary_knows_the_model_only_and_training_summary_adds_the_optimizer(capsys):
  summary.main(["--size", "tiny", "--json", "--mesh", "1,2,2"])
  model_only = json.loads(capsys.readouterr().out)
  assert not any(key.startswith(("adafactor", "state")) for key in model_only)
  training_summary.main(["--size", "tiny", "--json", "--mesh", "1,2,2"])
  with_state = json.loads(capsys.readouterr().out)
  assert {k: v for k, v in with_state.items() if k in model_only} == model_only
  summary.main(["--size", "tiny,1b", "--mesh", "1,2,2"])  # the table, with and without the state columns
  assert "Adafactor" not in capsys.readouterr().out
  training_summary.main(["--size", "tiny,1b", "--mesh", "1,2,2"])
  table = capsys.readouterr().out
  assert "Adafactor GiB/dev" in table and "state GiB/dev" in table and len(table.splitlines()) == 4


def test_bad_mesh_is_an_error_naming_the_flag(capsys):
  with pytest.raises(SystemExit):
    summary.main(["--size", "1b", "--mesh", "2,2"])
  assert "--mesh" in capsys.readouterr().err
  with pytest.raises(SystemExit):
    summary.main(["--size", "nope"])
  assert "unknown model size" in capsys.readouterr().err
