"""train -> sample -> score with every path on a non-local filesystem: TensorFlow's ram:// (in-memory,
one process), standing in for gs://. Every artifact must land under that prefix and nothing under the
working directory (a `./ram:/...` folder would mean some code used open() or os.makedirs on a URL).

Two writers cannot reach ram:// and get a local folder outside the working directory instead: the
SeqIO cache pass (Apache Beam has gs:// but no ram:// filesystem; the cache is then copied to
ram://, where training reads it through tf.data) and the checkpoints (TensorStore, under orbax, has a
gs:// driver but no ram:// one). On gs:// both write to the bucket themselves.
"""

import os

import gin
import pytest
import tensorflow as tf

import storage
from data import tasks
import code_corpus

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _copy_tree(source: str, target: str) -> None:
  for directory, _, files in tf.io.gfile.walk(source):
    relative = os.path.relpath(directory, source)
    storage.makedirs(storage.join(target, relative) if relative != "." else target)
    for name in files:
      tf.io.gfile.copy(os.path.join(directory, name), storage.join(target, relative, name) if relative != "."
                       else storage.join(target, name), overwrite=True)


@pytest.mark.e2e
def test_train_sample_score_with_every_path_remote(tmp_path, monkeypatch, capsys):
  import sample as sample_entry
  import train as train_entry
  from evaluation import prompts as prompts_entry
  from evaluation import score as score_entry

  cwd = tmp_path / "cwd"
  cwd.mkdir()
  monkeypatch.chdir(cwd)  # gin files resolve through the search paths, not the working directory
  remote = "ram://remote"
  corpus = f"{remote}/corpus"
  vocab_path, _ = code_corpus.build(corpus)  # shards and the vocabulary written to ram://
  local_cache = str(tmp_path / "cache")
  tasks.cache_tasks(corpus, vocab_path, local_cache)
  _copy_tree(local_cache, tasks.default_cache_dir(corpus))

  model_dir, checkpoints = f"{remote}/run", str(tmp_path / "checkpoints")
  gin.clear_config()
  try:
    train_entry.main(["--gin_file=gin_configs/runs/demo.gin", f"--gin.MODEL_DIR='{model_dir}'",
                      f"--gin.CORPUS_DIR='{corpus}'", "--gin.MODEL_SIZE='tiny'", "--gin.TRAIN_STEPS=2",
                      "--gin.TASK_FEATURE_LENGTHS={'inputs': 64, 'targets': 64}", "--gin.train.eval_every=2",
                      "--gin.train.log_every=1", f"--gin.train.checkpoint_dir='{checkpoints}'"])
  finally:
    gin.clear_config()

  prompts, predictions, scores = f"{remote}/prompts.jsonl", f"{remote}/predictions.jsonl", f"{remote}/scores"
  assert prompts_entry.main(["humaneval", "--languages", "python", "--limit", "3", "--output", prompts]) == 0
  assert sample_entry.main([f"--checkpoint={model_dir}", f"--prompts={prompts}", f"--output={predictions}",
                            "--num_samples=2", "--max_decode_length=8", "--batch_size=3",
                            "--truncate_prompts"]) == 6  # HumanEval prompts in a 64-token context
  assert score_entry.main(["--predictions", predictions, "--output", scores, "--languages", "python",
                           "--workers", "2", "--k", "1"]) == 0

  for artifact in ("corpus/spm.model", "corpus/python", "corpus/cache", "run/config.gin", "run/run.json",
                   "run/metrics.jsonl", "run/loss.png", "run/tensorboard", "prompts.jsonl", "predictions.jsonl",
                   "scores/results.jsonl", "scores/metrics.json"):
    assert storage.exists(f"{remote}/{artifact}"), artifact
  assert len(list(storage.read_jsonl(predictions))) == 6
  assert len(list(storage.read_jsonl(f"{scores}/results.jsonl"))) == 6
  assert any("validation/" in key for _, record in storage.read_jsonl(f"{model_dir}/metrics.jsonl") for key in record)
  assert storage.listdir(checkpoints) and "2" in storage.listdir(checkpoints)
  assert os.listdir(cwd) == [], os.listdir(cwd)
  assert not os.path.exists(os.path.join(ROOT, "ram:")), "something wrote ./ram:/ in the repository"
