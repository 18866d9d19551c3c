"""A second train.py on a MODEL_DIR another train.py holds is refused as usage (exit 2), as sample.py
and the scorer are, with a message naming the holder; the run that holds it is not disturbed."""
import types

import pytest

import storage
import train


def test_second_train_on_held_model_dir_exits_2(tmp_path, monkeypatch, capsys):
  model_dir = str(tmp_path / "model")
  storage.makedirs(model_dir)
  monkeypatch.setattr(train, "train_config", lambda: types.SimpleNamespace(model_dir=model_dir))
  monkeypatch.setattr(train.run, "train", lambda *a, **k: pytest.fail("ran while MODEL_DIR was held"))
  with storage.exclusive_output(storage.join(model_dir, "train"), "train.py", f"MODEL_DIR {model_dir}"):
    with pytest.raises(SystemExit) as exit_info:
      train.main([])
  assert exit_info.value.code == 2
  err = capsys.readouterr().err
  assert err.startswith("train.py: ") and model_dir in err and "Traceback" not in err
