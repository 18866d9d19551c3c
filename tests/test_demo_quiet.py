"""`make demo` is quiet by default (quiet.py): the demo's entry points on a tiny source tree leave no
third-party warning or log line on stderr, CODELM_VERBOSE=1 and --verbose bring them back, and the
stderr filter passes everything else, in order, even from a process that crashes."""

import json
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_WORDS = [a + b for a in ("get", "set", "load", "parse", "build", "read", "emit", "scan", "sort", "find")
          for b in ("Name", "Value", "Token", "Tree", "Node", "Index", "Count", "Path", "Item", "Block")]
# What a user's shell has: no test-only JAX settings (conftest.py), nothing chosen for TensorFlow's logs.
_USER_ENV = {k: v for k, v in os.environ.items()
             if k not in ("JAX_PLATFORMS", "XLA_FLAGS", "TF_CPP_MIN_LOG_LEVEL", "CODELM_VERBOSE", "COLUMNS")}
# Progress bars are the only stderr a quiet stage may write: the corpus scan, training, sampling.
_PROGRESS = re.compile(r"(scanning \S+|detecting licences|train|sampling \(step \d+\)): ")


def _source_tree(root):
  """Python and Go files different enough to survive near-deduplication."""
  for i in range(60):
    words = [_WORDS[(i * 13 + j * 7) % 100] for j in range(3 + i % 4)]
    python = "".join(f"def {w}_{i}(x, y={j}):\n    return [x * {i + j}, y, '{w}']\n\n" for j, w in enumerate(words))
    go = "package p\n\n" + "".join(f"func {w}{i}(n int) int {{\n\treturn n * {i} + {j}\n}}\n"
                                   for j, w in enumerate(words))
    os.makedirs(os.path.join(root, "pkg", str(i % 5)), exist_ok=True)
    with open(os.path.join(root, "pkg", str(i % 5), f"m{i}.py"), "w") as f:
      f.write(python)
    with open(os.path.join(root, "pkg", str(i % 5), f"m{i}.go"), "w") as f:
      f.write(go)


def _stderr_lines(text):
  return [line for line in re.split(r"[\r\n]", text) if line.strip()]


@pytest.mark.e2e
def test_demo_stages_leave_no_library_noise_on_stderr(tmp_path):
  source, out = str(tmp_path / "src"), str(tmp_path / "demo")
  _source_tree(source)
  done = subprocess.run(
      [sys.executable, "demo.py", "--output", out, f"--source={source}", "--vocab_size=500",
       "--chars_per_language=50000", "--model_size=tiny", "--steps=4", "--num_samples=1", "--max_decode_length=8",
       "--gin.train.log_every=2"],  # the demo's 256-token context: its prompts fit, none is truncated
      cwd=ROOT, env=_USER_ENV, capture_output=True, text=True, timeout=600)
  assert done.returncode == 0, done.stdout + done.stderr
  noise = [line for line in _stderr_lines(done.stderr) if not _PROGRESS.match(line.strip())]
  assert not noise, "\n".join(noise)
  lines = done.stdout.splitlines()
  # One line per stage with its figure, then the outputs and the next commands.
  stages = [line for line in lines if re.match(r"\[\d/7\] ", line)]
  assert [line.split()[1] for line in stages] == ["corpus", "vocabulary", "tasks", "mixtures", "model", "train",
                                                  "sample"], done.stdout
  assert re.search(r"\[1/7\] corpus +[\d,]+ files, [\d.]+ MB, 2 languages: (Python|Go) \d+, (Python|Go) \d+; of 120 "
                   r"read, removed: unreadable or binary 0, licence 0, quality 0, duplicates 0, near duplicates \d+, "
                   r"benchmark text 0  \(\d+ s\)", done.stdout), done.stdout
  assert re.search(r"\[6/7\] train +4 steps: loss [\d.]+ \(steps 1-2\) -> [\d.]+ \(steps 3-4\)", done.stdout)
  assert re.search(r"\[7/7\] sample +\d+ completions of 4 prompts", done.stdout)
  for where in ("corpus/spm.model", "mixtures.png", "run/checkpoints/", "run/metrics.jsonl", "run/tensorboard",
                "predictions.jsonl", "logs/"):
    assert f"{out}/{where}" in done.stdout, where
  assert "evaluation.score" in done.stdout and "experiments.ablation" in done.stdout and "tpu/launch.py" in done.stdout
  assert "experiments.finetune_grid --pretrained" in done.stdout
  # Each stage's whole output is in its log, under the command that made it.
  with open(os.path.join(out, "logs", "train.log")) as f:
    assert f.readline().startswith("$ ") and "step 4/4" in f.read()
  assert len([json.loads(line) for line in open(os.path.join(out, "predictions.jsonl"))]) == 4


@pytest.mark.e2e
def test_verbose_brings_library_messages_back(tmp_path):
  """The same stage, quiet, then verbose by CODELM_VERBOSE=1 and by --verbose (TensorFlow's start-up lines)."""
  script = "import sys, quiet; quiet.setup(); import tensorflow; print(sys.argv[1:])"
  quiet_run = subprocess.run([sys.executable, "-c", script, "--x"], cwd=ROOT, env=_USER_ENV, capture_output=True,
                             text=True, timeout=300)
  assert quiet_run.returncode == 0 and quiet_run.stdout == "['--x']\n" and quiet_run.stderr == "", quiet_run.stderr
  by_env = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=dict(_USER_ENV, CODELM_VERBOSE="1"),
                          capture_output=True, text=True, timeout=300)
  by_flag = subprocess.run([sys.executable, "-c", script, "--verbose", "--x"], cwd=ROOT, env=_USER_ENV,
                           capture_output=True, text=True, timeout=300)
  assert by_flag.stdout == "['--x']\n"  # --verbose is taken out of sys.argv
  for run in (by_env, by_flag):
    assert "absl::InitializeLog" in run.stderr, run.stderr


_FILTERED = r"""
import os, sys, warnings, logging
import quiet
quiet.setup()
os.write(2, b"WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\n")
os.write(2, b"I0000 00:00:1796118291.041820    7105 port.cc:153] oneDNN custom operations are on.\n")
os.write(2, b"W0000 00:00:1796118291.1 7105 xla.cc:1] a warning\nE0000 00:00:1.2 7105 x.cc:9] a real error\n")
for piece in (b"normalizer.cc(51) ", b"LOG(", b"INFO) precompiled_charsmap is empty.", b"\n"):
  os.write(2, piece)  # SentencePiece's C++ stream writes a line in pieces
os.write(2, b"\rbar 1/2")
os.write(2, b"\rbar 2/2\n")
warnings.warn_explicit("from a library", UserWarning, "lib.py", 1, module="apache_beam.transforms.core")
warnings.warn_explicit("from codelm", UserWarning, "corpus.py", 1, module="data.corpus")
logging.getLogger("apache_beam.io.tfrecordio").warning("python-snappy not found")
ours = os.path.join(os.path.dirname(quiet.__file__), "training", "checkpoints.py")
exec(compile("logging.warning('checkpoint damaged')", ours, "exec"))  # as training/checkpoints.py logs it
sys.stderr.write("Traceback: ours\n")
sys.stderr.flush()
if sys.argv[1:] == ["abort"]:
  os.write(2, b"F0000 00:00:1.3 7105 x.cc:9] Check failed\n")
  os.abort()
"""


def test_filter_drops_only_the_noise_and_survives_a_crash(tmp_path):
  env = dict(_USER_ENV, PYTHONPATH=ROOT)
  done = subprocess.run([sys.executable, "-c", _FILTERED], cwd=str(tmp_path), env=env, capture_output=True,
                        timeout=60)
  assert done.returncode == 0, done.stderr
  err = done.stderr.decode()
  for gone in ("InitializeLog", "oneDNN", "a warning", "precompiled_charsmap", "from a library", "python-snappy"):
    assert gone not in err, err
  kept = ["E0000 00:00:1.2 7105 x.cc:9] a real error\n", "\rbar 1/2\rbar 2/2\n", "from codelm", "checkpoint damaged",
          "Traceback: ours\n"]
  positions = [err.index(text) for text in kept]
  assert positions == sorted(positions), err
  crashed = subprocess.run([sys.executable, "-c", _FILTERED, "abort"], cwd=str(tmp_path), env=env, capture_output=True,
                           timeout=60)
  assert crashed.returncode != 0 and crashed.stderr.decode().endswith("Traceback: ours\nF0000 00:00:1.3 7105 x.cc:9] "
                                                                        "Check failed\n"), crashed.stderr
  verbose = subprocess.run([sys.executable, "-c", _FILTERED], cwd=str(tmp_path),
                           env=dict(env, CODELM_VERBOSE="1"), capture_output=True, timeout=60)
  assert b"InitializeLog" in verbose.stderr and b"precompiled_charsmap" in verbose.stderr


def test_a_local_beam_runner_s_workers_log_errors_only_unless_verbose(monkeypatch):
  import quiet

  monkeypatch.delenv(quiet.VERBOSE_ENV, raising=False)
  flag = "--default_sdk_harness_log_level=ERROR"
  assert quiet.beam_worker_args([]) == [flag]  # the direct runner, by default
  assert quiet.beam_worker_args(["--runner", "DirectRunner", "--direct_num_workers", "2"])[-1] == flag
  assert quiet.beam_worker_args(["--runner", "DataflowRunner"]) == ["--runner", "DataflowRunner"]  # not this terminal
  assert quiet.beam_worker_args(["--default_sdk_harness_log_level=INFO"]) == ["--default_sdk_harness_log_level=INFO"]
  monkeypatch.setenv(quiet.VERBOSE_ENV, "1")
  assert quiet.beam_worker_args([]) == []


def test_the_corpus_builder_s_beam_workers_leave_no_log_line(tmp_path):
  _source_tree(str(tmp_path / "src"))
  result = subprocess.run([sys.executable, "-m", "data.corpus", "--source", str(tmp_path / "src"), "--output",
                           str(tmp_path / "out"), "--num_shards", "1", "--no_decontaminate", "--direct_num_workers", "2",
                           "--direct_running_mode", "multi_processing"],
                          cwd=ROOT, env=_USER_ENV, capture_output=True, text=True, timeout=600)
  assert result.returncode == 0, result.stderr[-2000:]
  noise = [line for line in result.stderr.splitlines() if re.match(r"(INFO|WARNING):", line)]
  assert noise == [], noise[:5]
