"""corpus -> vocabulary -> SeqIO cache (Beam) -> train.py (checkpoints) -> kill -9 and resume ->
sample.py -> score, every path on gs://, against a local GCS emulator (tests/gcs_emulator.py: which
setting points each library at it). Every artifact must be in the bucket and nothing under the working
directory (a `./gs:/...` folder would mean some code used open() or os.makedirs on a URL).
"""

import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid

import gin
import pytest

import gcs_emulator
import storage
from training import checkpoints

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _timed(timings: dict, name: str, start: float) -> float:
  now = time.monotonic()
  timings[name] = round(now - start, 1)
  return now


@pytest.mark.e2e
def test_corpus_to_scores_with_every_path_on_gcs(tmp_path, monkeypatch, capsys):
  pytest.importorskip("gcp_storage_emulator", reason="gcp-storage-emulator is not installed (pip install "
                      "gcp-storage-emulator, in the test extra): the gs:// pipeline test needs it")
  import code_corpus
  import sample as sample_entry
  import train as train_entry
  from data import tasks
  from evaluation import prompts as prompts_entry
  from evaluation import score as score_entry

  from apache_beam.internal.gcp import auth

  cwd = tmp_path / "cwd"
  cwd.mkdir()
  monkeypatch.chdir(cwd)
  # The emulator takes anyone. Beam would first look for Application Default Credentials, 5 tries with
  # backoff (22 s here, where there are none) before connecting anonymously: it connects anonymously now.
  monkeypatch.setattr(auth._Credentials, "_get_service_credentials", staticmethod(lambda options: None))
  bucket = f"codelm-{uuid.uuid4().hex[:12]}"  # a fresh name: clients cache buckets by name
  remote = f"gs://{bucket}"
  timings = {}
  with gcs_emulator.gcs(bucket, str(tmp_path)) as emulator:
    t = time.monotonic()
    corpus = f"{remote}/corpus"
    vocab_path, _ = code_corpus.build(corpus)  # shards and the vocabulary: tf.io.gfile
    t = _timed(timings, "corpus+vocab", t)
    tasks.cache_tasks(corpus, vocab_path)  # Beam's GCS IO writes CORPUS/cache in the bucket
    t = _timed(timings, "cache", t)

    # train.py in a subprocess, killed (SIGKILL) once its step-2 checkpoint is committed to the bucket and
    # before it ends; the same command in this process then resumes from that checkpoint.
    model_dir = f"{remote}/run"
    checkpoints = f"{model_dir}/checkpoints"
    flags = ["--gin_file=gin_configs/runs/demo.gin", f"--gin.MODEL_DIR='{model_dir}'", f"--gin.CORPUS_DIR='{corpus}'",
             "--gin.MODEL_SIZE='tiny'", "--gin.TRAIN_STEPS=6", "--gin.TASK_FEATURE_LENGTHS={'inputs': 64, 'targets': 64}",
             "--gin.train.eval_every=6", "--gin.train.log_every=1", "--gin.train.checkpoint_every=2"]
    env = dict(os.environ, XLA_FLAGS="", PYTHONUNBUFFERED="1")  # the emulator's settings included
    process = subprocess.Popen([sys.executable, "train.py", *flags], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 180
    while not storage.exists(f"{checkpoints}/2/commit_success.txt"):
      assert process.poll() is None and time.monotonic() < deadline, process.communicate()[0][-3000:]
      time.sleep(0.2)
    assert process.poll() is None, "train.py finished before it could be killed"
    process.send_signal(signal.SIGKILL)
    output = process.communicate(timeout=60)[0]
    assert process.returncode == -signal.SIGKILL, output[-3000:]
    t = _timed(timings, "train (killed)", t)
    committed = sorted(int(step) for step in storage.listdir(checkpoints) if step.isdigit()
                       and storage.exists(f"{checkpoints}/{step}/commit_success.txt"))
    assert 2 in committed and 6 not in committed, committed
    capsys.readouterr()
    gin.clear_config()
    try:
      train_entry.main(flags)
    finally:
      gin.clear_config()
    resumed, warnings = capsys.readouterr()
    assert f"resumed from step {committed[-1]} in {checkpoints}" in resumed, resumed[-3000:]
    # the killed run's lock object is still there: taken over at once, its process being gone
    assert re.search(rf"took over gs://{bucket}/run/train.lock: its holder \(train.py, pid \d+ .*\) is no longer "
                     "running", warnings), warnings[-3000:]
    t = _timed(timings, "train (resumed)", t)
    train_steps = [r["step"] for _, r in storage.read_jsonl(f"{model_dir}/metrics.jsonl", warn=lambda _: None)
                   if "loss" in r]
    assert sorted(set(train_steps)) == list(range(1, 7)), train_steps
    assert any("validation/" in key for _, r in storage.read_jsonl(f"{model_dir}/metrics.jsonl") for key in r)
    assert "6" in storage.listdir(checkpoints)

    prompts, predictions, scores = f"{remote}/prompts.jsonl", f"{remote}/predictions.jsonl", f"{remote}/scores"
    assert prompts_entry.main(["humaneval", "--languages", "python", "--limit", "3", "--output", prompts]) == 0
    assert sample_entry.main([f"--checkpoint={model_dir}", f"--prompts={prompts}", f"--output={predictions}",
                              "--num_samples=2", "--max_decode_length=8", "--batch_size=3",
                            "--truncate_prompts"]) == 6  # HumanEval prompts in a 64-token context
    t = _timed(timings, "sample", t)
    assert score_entry.main(["--predictions", predictions, "--output", scores, "--languages", "python",
                             "--workers", "2", "--k", "1"]) == 0
    t = _timed(timings, "score", t)
    with capsys.disabled():
      print("timings", timings, "tunnels", len(emulator.lines("proxy tunnel")))

    for artifact in ("corpus/spm.model", "corpus/python", "corpus/cache", "run/config.gin", "run/run.json",
                     "run/metrics.jsonl", "run/loss.png", "run/tensorboard", "prompts.jsonl",
                     "predictions.jsonl", "scores/results.jsonl", "scores/metrics.json"):
      assert storage.exists(f"{remote}/{artifact}"), artifact
    assert len(storage.glob(f"{corpus}/cache/*/COMPLETED")) == 2  # python and go, each task's cache done
    assert len(list(storage.read_jsonl(predictions))) == 6
    assert len(list(storage.read_jsonl(f"{scores}/results.jsonl"))) == 6
    assert emulator.lines("proxy tunnel") and not emulator.lines("proxy error"), emulator.lines("proxy error")
  assert os.listdir(cwd) == [], os.listdir(cwd)
  assert not os.path.exists(os.path.join(ROOT, "gs:")), "something wrote ./gs:/ in the repository"


def test_a_read_object_can_be_rewritten_on_the_generation_read(tmp_path):
  """OCDBT (orbax's checkpoints) rewrites its manifest on the generation it last read. The emulator's
  downloads carried none, TensorStore read generation 0 and refused the rewrite ("Malformed
  StorageGeneration"): a resumed run on gs:// failed on a slower machine. tests/gcs_emulator.py now
  sends it, as GCS does."""
  pytest.importorskip("gcp_storage_emulator", reason="gcp-storage-emulator is not installed")
  import tensorstore as ts

  bucket = f"codelm-{uuid.uuid4().hex[:12]}"
  with gcs_emulator.gcs(bucket, str(tmp_path)):
    store = ts.KvStore.open({"driver": "gcs", "bucket": bucket}).result()
    written = store.write("run/manifest.ocdbt", b"first").result().generation
    read = store.read("run/manifest.ocdbt").result()
    assert read.value == b"first" and read.stamp.generation == written
    store.write("run/manifest.ocdbt", b"second", if_equal=read.stamp.generation).result()
    assert store.read("run/manifest.ocdbt").result().value == b"second"


@pytest.mark.parametrize("create", [True, False])
def test_checkpoints_on_ram_are_refused_by_name(create):
  """orbax cannot write TensorFlow's ram:// (it failed with KeyError: 'ram://'): a refusal that says so,
  for a run's checkpoints and for one only read (sample.py --checkpoint, fine-tuning's source)."""
  with pytest.raises(ValueError, match=r"checkpoints cannot be in ram://run/checkpoints: orbax .* has no ram:// "
                     r"filesystem.*use a local folder or gs://"):
    checkpoints.Checkpointer("ram://run/checkpoints", create=create)



def test_the_emulator_honours_generation_preconditions(tmp_path):
  """GCS refuses a write or delete whose ifGenerationMatch (0: only if absent) does not hold, with 412,
  and changes nothing. The emulator ignored preconditions, so no conditional write (TensorStore's,
  OCDBT's manifest, the gs:// lock) could ever lose in a test."""
  pytest.importorskip("gcp_storage_emulator", reason="gcp-storage-emulator is not installed")
  import tensorstore as ts
  from google.api_core import exceptions
  from google.cloud import storage as gcs

  bucket = f"codelm-{uuid.uuid4().hex[:12]}"
  with gcs_emulator.gcs(bucket, str(tmp_path)):
    blob = gcs.Client().bucket(bucket).blob("run/train.lock")
    blob.upload_from_string("first", if_generation_match=0)
    first = blob.generation
    with pytest.raises(exceptions.PreconditionFailed):
      blob.upload_from_string("second", if_generation_match=0)  # it exists
    blob.upload_from_string("third", if_generation_match=first)
    third = blob.generation
    with pytest.raises(exceptions.PreconditionFailed):
      blob.upload_from_string("stale", if_generation_match=first)
    with pytest.raises(exceptions.PreconditionFailed):
      blob.delete(if_generation_match=first)
    assert blob.download_as_bytes() == b"third" and blob.generation == third

    store = ts.KvStore.open({"driver": "gcs", "bucket": bucket}).result()
    written = store.write("run/manifest.ocdbt", b"first").result().generation
    assert store.write("run/manifest.ocdbt", b"second", if_equal=written).result().generation
    lost = store.write("run/manifest.ocdbt", b"stale", if_equal=written).result()
    assert lost.generation == b"", "a write on a stale generation must not happen"
    assert store.read("run/manifest.ocdbt").result().value == b"second"


def test_a_client_that_resets_its_proxy_connection_is_not_a_proxy_error(tmp_path):
  """A killed train.py resets its connections wherever they are: mid-CONNECT, mid-TLS handshake or
  inside the tunnel. Each is the client's end ("proxy tunnel reset"), never a "proxy error", which the
  end-to-end test counts as the proxy failing the libraries (CI once failed on a reset before the TLS
  handshake)."""
  pytest.importorskip("gcp_storage_emulator", reason="gcp-storage-emulator is not installed")
  import socket
  import ssl
  import struct

  def reset(connection: socket.socket) -> None:  # SO_LINGER 0: close() sends RST, as a killed process's kernel does
    connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    connection.close()

  def connect(host: str = "www.googleapis.com:443") -> socket.socket:
    connection = socket.create_connection(("127.0.0.1", emulator.proxy_port), timeout=10)
    connection.sendall(f"CONNECT {host} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
    assert connection.recv(4096).startswith(b"HTTP/1.1 200")
    return connection

  with gcs_emulator.gcs(f"codelm-{uuid.uuid4().hex[:12]}", str(tmp_path)) as emulator:
    partial = socket.create_connection(("127.0.0.1", emulator.proxy_port), timeout=10)
    partial.sendall(b"CONNECT www.googleapis")  # mid-CONNECT
    reset(partial)
    reset(connect())  # after the 200, before the TLS handshake (the CI failure)
    context = ssl.create_default_context(cafile=emulator.env["CURL_CA_BUNDLE"])
    tunnelled = context.wrap_socket(connect(), server_hostname="www.googleapis.com")
    tunnelled.sendall(b"GET /storage/v1/b/nothing HTTP/1.1\r\nHost: www.googleapis.com\r\n")  # mid-request
    reset(tunnelled)
    deadline = time.monotonic() + 10
    while len(emulator.lines("proxy tunnel reset")) < 2 and time.monotonic() < deadline:
      time.sleep(0.05)
    assert len(emulator.lines("proxy tunnel reset")) >= 2, open(emulator.log).read()[-2000:]
    assert not emulator.lines("proxy error"), emulator.lines("proxy error")


_WRITER = """
import os, sys, time
import jax.numpy as jnp
import storage
from training import checkpoints
directory, value, gate = sys.argv[1], float(sys.argv[2]), sys.argv[3]
state = {"w": jnp.full((16, 16), value)}


def wait_for(path):
  deadline = time.monotonic() + 300
  while not os.path.exists(path) and time.monotonic() < deadline:
    time.sleep(0.01)


def report(text):  # the result as a file, whole once it exists: the test polls for it
  with open(f"{gate}.{value:g}.tmp", "w") as f:
    f.write(text)
  os.rename(f"{gate}.{value:g}.tmp", f"{gate}.{value:g}.result")


open(f"{gate}.{value:g}.ready", "w").close()  # imported and ready: the test releases both writers at once
wait_for(f"{gate}.go")
try:
  with storage.exclusive_output(directory.rsplit("/", 1)[0] + "/train", f"writer {value:g}") as held:
    checkpointer = checkpoints.Checkpointer(directory, async_save=False, before_save=held.verify)
    checkpointer.save(5, state, {"step": 5})
    checkpointer.close()
    report("saved")
    wait_for(f"{gate}.release")  # the lock is held until the other writer has tried, however slow the host
except storage.OutputLocked as error:
  report(f"refused: {error}")
"""


def _restore_w(directory: str) -> tuple[float, list[int]]:
  import jax
  import jax.numpy as jnp

  checkpointer = checkpoints.Checkpointer(directory, create=False)
  state, _, step = checkpointer.restore_latest({"w": jax.ShapeDtypeStruct((16, 16), jnp.float32)})
  return float(state["w"][0, 0]), checkpointer.steps()


def test_two_writers_of_one_checkpoint_step_cannot_both_succeed(tmp_path):
  """Two runs started on one gs:// MODEL_DIR, released together: one takes the lock object (created
  only if absent) and writes step 5; the other refuses naming it and writes nothing. Without the lock
  both fail mid-write (orbax: "5/progress already exists" and a 404) and step 5 is lost."""
  pytest.importorskip("gcp_storage_emulator", reason="gcp-storage-emulator is not installed")
  bucket = f"codelm-{uuid.uuid4().hex[:12]}"
  script, gate = tmp_path / "writer.py", str(tmp_path / "gate")
  script.write_text(_WRITER)

  def wait_for(suffix):
    """Until each writer has written gate.<value>.<suffix>; fails at once if one exits without it."""
    paths = [f"{gate}.{value}.{suffix}" for value in (1, 2)]
    deadline = time.monotonic() + 240
    while not all(os.path.exists(path) for path in paths):
      for writer, path in zip(writers, paths):
        exited = writer.poll() is not None
        assert not exited or os.path.exists(path), writer.communicate()[0][-2000:]
      assert time.monotonic() < deadline, paths
      time.sleep(0.02)
    return paths

  with gcs_emulator.gcs(bucket, str(tmp_path)):
    directory = f"gs://{bucket}/run/checkpoints"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))
    writers = [subprocess.Popen([sys.executable, str(script), directory, str(value), gate], cwd=str(tmp_path),
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
               for value in (1.0, 2.0)]
    wait_for("ready")
    open(f"{gate}.go", "w").close()
    try:
      results = wait_for("result")  # the winner holds the lock until then: the loser cannot come after its release
    finally:
      open(f"{gate}.release", "w").close()
    outputs = [writer.communicate(timeout=240)[0] for writer in writers]
    reports = [open(path).read() for path in results]
    saved = [i for i, text in enumerate(reports) if text == "saved"]
    refused = [i for i, text in enumerate(reports) if text.startswith("refused:")]
    assert len(saved) == 1 and len(refused) == 1, (reports, outputs)
    winner = saved[0] + 1
    assert re.search(rf"refused: gs://{bucket}/run/train is being written by another run \(writer {winner}, pid \d+",
                     reports[refused[0]]), reports[refused[0]]
    assert _restore_w(directory) == (float(winner), [5])
    assert not storage.exists(f"gs://{bucket}/run/train.lock")  # released by the winner


def test_a_run_whose_gcs_lock_was_taken_over_writes_no_checkpoint(tmp_path, monkeypatch, capsys):
  """A holder that stopped renewing (killed, preempted, stalled) loses its lock once the lease has
  passed: the next run takes it over with a warning, and the old holder's next save refuses, naming
  the new holder, before writing anything. Releasing then leaves the new holder's lock alone."""
  pytest.importorskip("gcp_storage_emulator", reason="gcp-storage-emulator is not installed")
  import jax.numpy as jnp

  # A lease no loaded host outlasts while the old run still counts as live; shortened (below) once it stalls.
  monkeypatch.setattr(storage, "LOCK_LEASE_S", 120.0)
  bucket = f"codelm-{uuid.uuid4().hex[:12]}"
  with gcs_emulator.gcs(bucket, str(tmp_path)):
    output, directory = f"gs://{bucket}/run/train", f"gs://{bucket}/run/checkpoints"
    old = storage.BucketLock(output + ".lock", "train.py (the old run)", output)
    old.acquire()
    # A renewal of its own that landed although the client saw it fail (a conditional upload retried
    # after a timeout then answers 412): the lock is still this run's.
    landed = old._blob.bucket.blob(old._blob.name)
    landed.upload_from_string(old._blob.download_as_bytes(), if_generation_match=old._generation)
    old.verify()
    assert old._generation == landed.generation
    with pytest.raises(storage.OutputLocked, match=r"being written by another run \(train.py \(the old run\); it "
                       r"renewed .* s ago\)"):
      with storage.exclusive_output(output, "train.py (too soon)"):
        pass
    old._stop.set()  # the old run stalls: it renews no more
    old._thread.join()
    monkeypatch.setattr(storage, "LOCK_LEASE_S", 1.0)
    renewed = json.loads(old._blob.download_as_bytes())["renewed"]
    while time.time() - renewed <= storage.LOCK_LEASE_S:  # until its lease has passed
      time.sleep(0.05)
    with storage.exclusive_output(output, "train.py (the new run)") as new:
      assert "took over gs://" in capsys.readouterr().err
      stale = checkpoints.Checkpointer(directory, async_save=False, before_save=old.verify)
      with pytest.raises(storage.OutputLocked, match=r"another run \(train.py \(the new run\), pid \d+ .*\) took over"):
        stale.save(5, {"w": jnp.zeros((16, 16))}, {"step": 5})
      assert stale.steps() == [] and not storage.exists(f"{directory}/5")
      old.release()
      new.verify()  # still held: the old run's release did not delete it
      current = checkpoints.Checkpointer(directory, async_save=False, before_save=new.verify)
      current.save(5, {"w": jnp.full((16, 16), 3.0)}, {"step": 5})
      current.close()
    assert _restore_w(directory) == (3.0, [5])
