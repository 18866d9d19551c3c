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


def test_sample_throughput_bench_writes_its_figures(tmp_path):
  import sample_throughput as bench_sample

  output = tmp_path / "sample.json"
  bench_sample.main(["--size", "tiny", "--prompts", "2", "--samples", "3", "--prompt_tokens", "8",
                     "--new_tokens", "8", "--output", str(output)])
  result = json.loads(output.read_text())
  assert result["rows"] == 6 and result["new_tokens"] == 8
  for key in ("tokens_per_second", "no_cache_tokens_per_second", "bound_tokens_per_second", "fraction_of_bound",
              "achieved_bytes_per_second", "achieved_flops"):
    assert result[key] > 0 and math.isfinite(result[key])
  assert result["bound_limited_by"] in ("compute", "memory")


def test_whitespace_pieces_bench_compares_listed_and_learned(tmp_path):
  import test_vocab
  import whitespace_pieces

  corpus = str(tmp_path / "corpus")
  test_vocab.write_corpus(corpus, files_per_language=60)
  output = tmp_path / "ws.json"
  result = whitespace_pieces.main(["--corpus", corpus, "--vocab_size", "600", "--output", str(output)])
  assert json.loads(output.read_text()) == result
  listed, learned = result["modes"]["listed"], result["modes"]["learned"]
  assert listed["longest_space_run"] == 12 and learned["space_pieces"] > 0
  assert set(listed["tokens_per_byte"]) == set(test_vocab.LANGUAGES) == set(learned["tokens_per_byte"])
  assert result["better"] == min(("listed", "learned"), key=lambda m: result["modes"][m]["mean_tokens_per_byte"])


def test_score_throughput_bench_scores_and_writes_its_figures(tmp_path):
  import score_throughput as bench_score

  output = tmp_path / "score.json"
  bench_score.main(["--samples", "2", "--problems", "3", "--languages", "python", "--workers", "1",
                    "--output", str(output)])
  result = json.loads(output.read_text())
  python = result["languages"]["python"]
  assert python["programs"] == 6 and python["counts"]["passed"] == 6  # canonical solutions pass
  assert python["programs_per_s"] > 0 and result["projected_minutes_10_samples_all_problems"] > 0
