"""The benchmark script runs end to end and writes its figures (no timing assertions here)."""

import json
import math
import subprocess
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))

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
  import before_after  # what bench/before_after.py compares of this bench's output

  assert before_after.figure(result, "tokens_per_second") == result["tokens_per_second"]


def _has_revision(revision):
  return subprocess.run(["git", "cat-file", "-e", f"{revision}^{{commit}}"], cwd=ROOT, capture_output=True).returncode == 0


def test_sample_throughput_bench_writes_its_figures(tmp_path):
  import sample_throughput as bench_sample

  before = _has_revision(bench_sample.BEFORE_REVISION)  # a shallow clone lacks the previous sampler
  output = tmp_path / "sample.json"
  bench_sample.main(["--size", "tiny", "--prompts", "2", "--samples", "3", "--prompt_tokens", "8",
                     "--new_tokens", "8", "--output", str(output)] + ([] if before else ["--no_before"]))
  result = json.loads(output.read_text())
  assert result["new_tokens"] == 8 and set(result["runs"]) == ({"after", "before"} if before else {"after"})
  for run in result["runs"].values():
    assert run["useful_tokens"] == 2 * 3 * 8  # every sample runs to the limit
    for key in ("useful_tokens_per_second", "fraction_of_bound", "achieved_bytes_per_second", "achieved_flops"):
      assert run[key] > 0 and math.isfinite(run[key])
  assert result["no_cache_tokens_per_second"] > 0 and result["bound_limited_by"] in ("compute", "memory")
  import before_after  # bench/before_after.py compares the current sampler's run

  assert before_after.figure(result, "useful_tokens_per_second") == result["runs"]["after"]["useful_tokens_per_second"]


def test_sample_throughput_bench_replays_humaneval_lengths_and_measures_memory(tmp_path):
  import code_corpus
  import sample_throughput as bench_sample

  vocab_path, _ = code_corpus.build(str(tmp_path / "corpus"))
  before = _has_revision(bench_sample.BEFORE_REVISION)
  flags = [] if before else ["--no_before"]
  output = tmp_path / "sample.json"
  result = bench_sample.main(["--size", "tiny", "--prompts", "3", "--samples", "4", "--prompt_tokens", "8",
                              "--new_tokens", "64", "--lengths", "humaneval", "--vocab", vocab_path, "--rows", "4",
                              "--before_batch_prompts", "1", "--output", str(output)] + flags)
  lengths = result["length_distribution"]
  assert 1 < lengths["median"] <= lengths["max"] and lengths["mean_drawn_capped"] <= 64
  runs = result["runs"]
  # The bench enforces the drawn lengths: both samplers keep the same useful tokens, fewer than the limit.
  assert len({run["useful_tokens"] for run in runs.values()}) == 1 and runs["after"]["useful_tokens"] < 3 * 4 * 64
  assert runs["after"]["rows"] == 4
  if before:
    memory = bench_sample.main(["--size", "tiny", "--memory", "--samples", "16", "--prompt_tokens", "64",
                                "--new_tokens", "16", "--output", str(output)])["decode_memory_bytes"]
    # 16 copies of the prompt's cache against one.
    assert 0 < memory["after"]["arguments"] < memory["before"]["arguments"]


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
  duplicates = tmp_path / "dups.jsonl"
  duplicates.write_text("".join(json.dumps({"qid": q, "language": l, "code": c}) + "\n"
                               for q, l, c in (("HumanEval/0", "C++", "a"), ("0", "cpp", "a"),
                                               ("HumanEval/0", "C++", "b"), ("HumanEval/1", "C++", "a"))))
  assert bench_score.main(["--programs", "8", "--languages", "python,cpp", "--workers", "1", "--batch_size", "4",
                           "--no_before", "--repeats", "1", "--duplicates", str(duplicates), "--output", str(output)]) == 0
  result = json.loads(output.read_text())
  assert result["verdict_mismatches"] == 0 and set(result["languages"]) == {"python", "cpp"}
  cpp = result["languages"]["cpp"]
  assert set(cpp) >= {"alone", "batched", "speedup_batched_vs_alone"} and "before" not in cpp
  assert sum(cpp["statuses"].values()) == 8 and cpp["statuses"]["passed"] >= 1
  assert cpp["batched"]["programs_per_s"] > 0
  projection = result["projection"]
  assert projection["batched"]["ablation_core_hours"] == pytest.approx(15 * projection["batched"]["checkpoint_core_hours"], rel=0.01)
  dedup = projection["batched_with_duplicates_run_once"]
  assert dedup["duplicate_share"] == 0.25  # as the scorer keys them: one of four repeats
  assert dedup["checkpoint_core_hours"] == pytest.approx(projection["batched"]["checkpoint_core_hours"] * 0.75, abs=0.01)


def test_corpus_throughput_bench_reads_a_flat_folder_and_refuses_an_input_too_small_to_time(tmp_path):
  # Files directly in --source (no repository folder), and far too little code for any rate: exit 2
  # with the reason, never a negative time or a traceback.
  (tmp_path / "src").mkdir()
  (tmp_path / "src" / "a.py").write_text("def f():\n    return 1\n")
  (tmp_path / "src" / "b.cpp").write_text("int main() { return 0; }\n")
  result = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "corpus_throughput.py"), "--source",
                           str(tmp_path / "src"), "--work", str(tmp_path / "work"), "--output",
                           str(tmp_path / "out.json")], capture_output=True, text=True, timeout=600)
  assert result.returncode == 2, result.stderr[-2000:]
  assert "2 files, 0.0 MB of code" in result.stdout and "is too little to measure" in result.stderr
  assert "Traceback" not in result.stderr and not (tmp_path / "out.json").exists()
