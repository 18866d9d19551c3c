"""The scorer three ways on one set of predictions: programs compiled one by one, batched, and the Beam
pipeline on the direct runner with two worker processes: the same verdicts, on passes, failures,
compile errors, a timeout and the nine attacks of tests/test_renderers.py in every language (which
stay contained either way). Then a pipeline killed part way and run again, and a bundle retried,
leave each result once."""

from __future__ import annotations

import json
import os
import socket

import pytest

from evaluation import beam_scoring, resumable, score
from sandbox import execution
from sandbox.judge import Status
from sandbox.renderers import MODULES, get

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "data", "typed_questions.jsonl")
LIMITS = execution.Limits(timeout_s=2)
ATTACK_KINDS = ("infinite_loop", "fork_bomb", "network", "write_outside", "many_files", "read_root_only",
                "huge_output", "memory_bomb", "background_process")
DIRECT = ["--runner", "DirectRunner", "--direct_num_workers", "2", "--direct_running_mode", "multi_processing"]
LANGUAGES = [name for name in MODULES if not execution.missing(get(name).toolchain)]


def solutions(language: str) -> dict:
  with open(os.path.join(HERE, "solutions", f"{language}.json"), encoding="utf-8") as f:
    return json.load(f)


def write(path, records) -> str:
  with open(path, "w", encoding="utf-8") as f:
    f.writelines(json.dumps(r) + "\n" for r in records)
  return str(path)


def results(directory) -> dict:
  with open(os.path.join(directory, "results.jsonl"), encoding="utf-8") as f:
    lines = [json.loads(line) for line in f]
  by_key = {(r["language"], r["qid"], r["sample_id"]): r for r in lines}
  assert len(by_key) == len(lines), "a result written twice"
  return by_key


def verdict(record: dict) -> tuple:
  """Status, and each test case unless the run timed out (how many cases end first is timing)."""
  return record["status"], None if record["status"] == Status.TIMEOUT.value else tuple(record["cases"])


# Attacks whose verdict the machine decides as much as the program: how far a memory, process, disk
# or output bomb gets before the runtime gives up (an exception, an abort) or the limit ends it.
EXHAUSTING = ("fork_bomb", "many_files", "huge_output", "memory_bomb", "background_process")


def differences(got: dict, expected: dict) -> list:
  """The keys whose verdicts differ. A timeout's test cases are not compared (how many end first is
  timing); an attack passes in neither; a resource-exhausting attack may end another way, and any
  attack may time out in one run and just not in the other, since the limit is tight."""
  differ = []
  for key, want in expected.items():
    have = got[key]
    if verdict(have) == verdict(want):
      continue
    attack = key[2] in ATTACK_KINDS
    passed = Status.PASSED.value in (have["status"], want["status"])
    timing = Status.TIMEOUT.value in (have["status"], want["status"])
    if not attack or passed or not (key[2] in EXHAUSTING or timing):
      differ.append((key, have["status"], want["status"]))
  return differ


# Three groups of languages, so that the suite's workers share the work.
GROUPS = [LANGUAGES[i::3] for i in range(3)] if LANGUAGES else []


@pytest.mark.e2e
@pytest.mark.skipif(not LANGUAGES, reason="no sandbox here; run `make toolchains`")
@pytest.mark.parametrize("languages", GROUPS, ids=lambda group: "+".join(group))
def test_batched_and_beam_give_the_same_verdicts(tmp_path, languages):
  """The scorer on one machine (programs of a compiled language built in batches) and as a Beam
  pipeline give the same verdicts, attacks included, and no attack gets out. That a batch gives each
  program the verdict it gets alone is tests/test_batching.py's (every batched language)."""
  server = socket.socket()  # the attacks' {PORT}: nothing may reach it
  server.bind(("127.0.0.1", 0))
  server.listen(8)
  server.setblocking(False)
  hostdir = tmp_path / "host"
  hostdir.mkdir()
  os.chmod(hostdir, 0o777)
  secret = tmp_path / "secret"
  secret.write_text("TOPSECRET-4711\n")
  os.chmod(secret, 0o600)
  records = []
  for language in languages:
    data = solutions(language)
    picks = [("correct", qid) for qid in list(data["correct"])[:2]]
    picks += [("wrong", next(iter(data["wrong"])))]
    picks += [("compile_error", qid) for qid in list(data.get("compile_error", {}))[:1]]
    for kind, qid in picks:
      records.append({"qid": qid, "language": language, "sample_id": kind, "code": data[kind][qid]})
    for kind, code in data["attacks"].items():
      code = (code.replace("{PORT}", str(server.getsockname()[1])).replace("{HOSTDIR}", str(hostdir))
              .replace("{SECRET}", str(secret)))
      records.append({"qid": "HumanEval/0", "language": language, "sample_id": kind, "code": code})
  predictions = write(tmp_path / "predictions.jsonl", records)
  run = lambda out, **kw: score.score(predictions, FIXTURES, str(tmp_path / out), limits=LIMITS, workers=2,
                                      progress=False, **kw)
  batched = run("batched")
  beam = run("beam", pipeline_args=DIRECT)
  reference = results(tmp_path / "batched")
  expected = {key: verdict(r) for key, r in reference.items()}
  assert len(expected) == len(records)
  got = results(tmp_path / "beam")
  assert set(got) == set(reference)
  assert differences(got, reference) == []
  for outcome in (reference, got):
    assert not any("TOPSECRET" in r["detail"] for r in outcome.values())
    assert not [key for key, r in outcome.items() if key[2] in ATTACK_KINDS and r["status"] == Status.PASSED.value]
  assert {s for key, (s, _) in expected.items() if key[2] == "infinite_loop"} == {Status.TIMEOUT.value}
  assert {s for key, (s, _) in expected.items() if key[2] == "correct"} == {Status.PASSED.value}
  assert {s for key, (s, _) in expected.items() if key[2] == "wrong"} <= {Status.FAILED.value, Status.ERROR.value}
  assert {s for key, (s, _) in expected.items() if key[2] == "compile_error"} == {Status.COMPILE_ERROR.value}
  for name in languages:
    assert batched[name]["pass@1"] == beam[name]["pass@1"]
  assert batched["scoring"]["batching"]["builds"] > 0
  assert beam["scoring"]["batching"]["builds"] == batched["scoring"]["batching"]["builds"]
  assert not os.path.exists(tmp_path / "beam" / beam_scoring.WORK_DIR)
  with pytest.raises(BlockingIOError):
    server.accept()  # no connection came
  assert os.listdir(hostdir) == []


PYTHON = solutions("python") if "python" in LANGUAGES else {}


def python_predictions(tmp_path) -> tuple[str, list[dict]]:
  records = [{"qid": qid, "language": "Python", "sample_id": i, "code": code}
             for i, (qid, code) in enumerate(PYTHON["correct"].items())]
  records += [{"qid": qid, "language": "Python", "sample_id": 100 + i, "code": code}  # duplicates
              for i, (qid, code) in enumerate(PYTHON["correct"].items())]
  records += [{"qid": qid, "language": "Python", "sample_id": 200 + i, "code": code}
              for i, (qid, code) in enumerate(PYTHON["wrong"].items())]
  return write(tmp_path / "predictions.jsonl", records), records


@pytest.mark.skipif("python" not in LANGUAGES, reason="no sandbox here; run `make toolchains`")
def test_a_killed_pipeline_resumes_and_each_result_is_written_once(tmp_path, monkeypatch):
  predictions, records = python_predictions(tmp_path)
  local = score.score(predictions, FIXTURES, str(tmp_path / "local"), limits=LIMITS, workers=2, progress=False)
  original = score.TypedBenchmark.run
  calls = []

  def dies_on_the_third_unit(self, unit, stats):
    calls.append(len(unit))
    if len(calls) == 3:
      raise KeyboardInterrupt("killed")  # as a worker killed mid-pipeline
    return original(self, unit, stats)

  monkeypatch.setattr(score.TypedBenchmark, "run", dies_on_the_third_unit)
  in_process = ["--runner", "DirectRunner"]  # one process, so the patch reaches the worker
  with pytest.raises(BaseException):
    score.score(predictions, FIXTURES, str(tmp_path / "beam"), limits=LIMITS, progress=False, batch_size=2,
                pipeline_args=in_process)
  done = beam_scoring.read_shards(str(tmp_path / "beam"))
  assert 0 < len(done) < len(records)
  monkeypatch.setattr(score.TypedBenchmark, "run", original)
  again = score.score(predictions, FIXTURES, str(tmp_path / "beam"), limits=LIMITS, progress=False, batch_size=2,
                      pipeline_args=in_process)
  # The units finished before the kill are not run again: their predictions come from the shards.
  assert again["scoring"]["duplicates_reused_from_earlier_runs"] >= len(done)
  assert again["scoring"]["programs_executed"] <= len(records) - len(done)
  got, expected = results(tmp_path / "beam"), results(tmp_path / "local")
  assert {k: verdict(r) for k, r in got.items()} == {k: verdict(r) for k, r in expected.items()}
  assert again["python"] == local["python"]


@pytest.mark.skipif("python" not in LANGUAGES, reason="no sandbox here; run `make toolchains`")
def test_a_retried_bundle_rewrites_its_shard_and_results_stay_once(tmp_path):
  predictions, records = python_predictions(tmp_path)
  questions = score.load_benchmark(FIXTURES)
  benchmark = score.TypedBenchmark(questions, LIMITS)
  mine, _ = score.read_predictions(predictions, questions)
  groups, _ = resumable.plan(benchmark, mine, {})
  first = [g[0] for g in groups.values()]
  unit = beam_scoring.Unit("python", tuple(first[:4]), tuple(resumable.program_key(benchmark, p)[2] for p in first[:4]))
  shards = tmp_path / "out" / beam_scoring.WORK_DIR / "shards"
  shards.mkdir(parents=True)
  fn = beam_scoring._score_unit_fn(lambda: benchmark, str(shards))
  fn.setup()
  paths = [list(fn.process(unit.to_json())) for _ in range(3)]  # the bundle, and two retries of it
  assert paths[0] == paths[1] == paths[2] and os.listdir(shards) == [f"{unit.name}.jsonl"]
  results_path = str(tmp_path / "out" / "results.jsonl")
  found: dict = {}
  for _ in range(2):  # a driver killed after merging merges again on its next run
    beam_scoring._merge(benchmark, mine, found, beam_scoring.read_shards(str(tmp_path / "out")), results_path)
  got = results(tmp_path / "out")  # asserts each key once
  # The four programs' predictions and their duplicates (the same code, another sample).
  assert len(got) == sum(len(groups[resumable.program_key(benchmark, p)]) for p in first[:4])


def test_a_remote_runner_needs_an_output_url(tmp_path):
  predictions = write(tmp_path / "p.jsonl", [])
  with pytest.raises(ValueError, match="give the output as a URL"):
    score.score(predictions, FIXTURES, str(tmp_path / "out"), progress=False,
                pipeline_args=["--runner", "DataflowRunner"])


def test_beam_flags_need_a_runner(tmp_path, capsys):
  predictions = write(tmp_path / "p.jsonl", [])
  with pytest.raises(SystemExit):
    score.main(["--predictions", predictions, "--output", str(tmp_path / "o"), "--direct_num_workers", "2"])
  assert "need --runner" in capsys.readouterr().err


@pytest.mark.skipif("python" not in LANGUAGES, reason="no sandbox here; run `make toolchains`")
def test_a_prediction_the_scorer_cannot_judge_is_unscored_not_a_failed_pipeline(tmp_path, monkeypatch):
  correct = PYTHON["correct"]["HumanEval/0"]
  predictions = write(tmp_path / "predictions.jsonl", [
      {"qid": "HumanEval/0", "language": "Python", "sample_id": i, "code": code}
      for i, code in enumerate([correct, correct + "\n# POISON\n", correct + "\n# another\n"])])
  original = score.TypedBenchmark.run

  def run(self, unit, stats):  # a fault of the scorer's own on one completion, on every retry
    if any("POISON" in p.code for p in unit):
      raise OverflowError("int too large to convert to float")
    return original(self, unit, stats)

  monkeypatch.setattr(score.TypedBenchmark, "run", run)
  in_process = ["--runner", "DirectRunner"]  # one process, so the patch reaches the worker
  out = str(tmp_path / "beam")
  metrics = score.score(predictions, FIXTURES, out, limits=LIMITS, progress=False, batch_size=8,
                        pipeline_args=in_process)
  assert metrics["unscored_predictions"] == [
      f"{predictions}:2: python HumanEval/0 sample 1 could not be scored: OverflowError: int too large to convert "
      "to float"]
  assert {k[2]: r["status"] for k, r in results(out).items()} == {0: "passed", 2: "passed"}
  assert not os.path.exists(os.path.join(out, beam_scoring.WORK_DIR))
  monkeypatch.setattr(score.TypedBenchmark, "run", original)
  again = score.score(predictions, FIXTURES, out, limits=LIMITS, progress=False, pipeline_args=in_process)
  assert not again["unscored_predictions"] and results(out)[("python", "HumanEval/0", 1)]["status"] == "passed"


@pytest.mark.skipif("python" not in LANGUAGES, reason="no sandbox here; run `make toolchains`")
def test_the_beam_scorer_with_worker_processes_prints_no_library_lines_unless_verbose(tmp_path):
  """`python -m evaluation.score --runner DirectRunner` with two worker processes, as a user runs it:
  its stderr is empty (Beam's workers logged about 47 lines a run), CODELM_VERBOSE=1 brings them back."""
  import subprocess
  import sys

  root = os.path.dirname(HERE)
  predictions = write(tmp_path / "p.jsonl", [{"qid": qid, "language": "Python", "code": code}
                                             for qid, code in list(PYTHON["correct"].items())[:2]])
  user = {k: v for k, v in os.environ.items() if k not in ("JAX_PLATFORMS", "XLA_FLAGS", "CODELM_VERBOSE")}
  stderr = {}
  for verbose in ("", "1"):
    done = subprocess.run([sys.executable, "-m", "evaluation.score", "--predictions", predictions, "--benchmark",
                           FIXTURES, "--output", str(tmp_path / f"out{verbose}"), "--languages", "python", *DIRECT],
                          cwd=root, env={**user, **({"CODELM_VERBOSE": "1"} if verbose else {})},
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "| Python | 2 | 1.000 |" in done.stdout
    stderr[verbose] = done.stderr
  assert stderr[""] == ""
  assert "apache_beam" in stderr["1"]
