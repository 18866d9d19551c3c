"""Every language: prompts, test programs, hand-written solutions and attacks, run in the sandbox.

Per language, tests/solutions/<language>.json holds (in that language, as completions of the
signature the renderer prints):
  "correct":     {qid: completion} for questions of tests/data/typed_questions.jsonl; all must pass
  "wrong":       {qid: completion} that compile and return wrong values; each must fail
  "throws_once": {qid: completion} that throw/raise on exactly one test case (the one named in
                 "throws_on": {qid: idx}) and are right on the others
  "attacks":     {kind: completion} for HumanEval/0 (has_close_elements); {PORT}, {HOSTDIR} and
                 {SECRET} in a completion are replaced by the test's listening port, a host
                 directory and a root-only host file
A language whose toolchain is missing is skipped, and the run's summary says so (conftest.py).
"""

from __future__ import annotations

import json
import os
import socket
import stat
import tempfile
import threading
import time

import pytest

from sandbox import batching, execution, typed
from sandbox.judge import Case, Status, judge
from sandbox.renderers import MODULES, get
from toolchains import renderer_or_skip

HERE = os.path.dirname(os.path.abspath(__file__))
QUESTIONS = {q.qid: q for q in typed.read_questions(os.path.join(HERE, "data", "typed_questions.jsonl"))}
LIMITS = execution.Limits(timeout_s=5, compile_timeout_s=60)
ATTACK_LIMITS = execution.Limits(timeout_s=3, compile_timeout_s=60)  # attacks that loop run to it
ATTACKS = ("infinite_loop", "fork_bomb", "network", "write_outside", "many_files", "read_root_only",
           "huge_output", "memory_bomb", "background_process")
LANGUAGES = sorted(MODULES)


def solutions(language: str) -> dict:
  path = os.path.join(HERE, "solutions", f"{language}.json")
  if not os.path.exists(path):
    pytest.fail(f"{path} is missing")
  with open(path, encoding="utf-8") as f:
    return json.load(f)


def run(renderer, question, completion, limits=LIMITS):
  program = renderer.program(question, completion)
  return judge(question, execution.execute(program, renderer.toolchain, limits))


def run_all(renderer, jobs):
  """[(question, completion)] -> outcomes, two sandboxes at a time (the suite's CPU budget)."""
  import concurrent.futures
  with concurrent.futures.ThreadPoolExecutor(max(2, os.cpu_count() or 2)) as pool:
    return list(pool.map(lambda job: run(renderer, *job), jobs))


@pytest.mark.parametrize("language", LANGUAGES)
def test_prompt_is_the_papers_template(language):
  renderer = get(language)
  question = QUESTIONS["HumanEval/0"]
  prompt = renderer.prompt(question)
  assert prompt.startswith(f"You are an expert {renderer.display_name} programmer, complete the "
                           f"implementation.\nSolution in {renderer.display_name}:\n\n")
  assert prompt.endswith(renderer.signature_with_docstring(question))
  assert "closer to each other than" in prompt  # the description is the doc comment
  for question in QUESTIONS.values():  # every fixture question renders
    renderer.program(question, renderer.stub(question))


@pytest.mark.parametrize("language", LANGUAGES)
def test_correct_solutions_pass(language):
  renderer = renderer_or_skip(language)
  correct = solutions(language)["correct"]
  assert len(correct) >= 10
  outcomes = run_all(renderer, [(QUESTIONS[qid], code) for qid, code in correct.items()])
  for qid, outcome in zip(correct, outcomes):
    assert outcome.status is Status.PASSED, (qid, outcome)


@pytest.mark.parametrize("language", LANGUAGES)
def test_wrong_fails_and_one_exception_leaves_other_cases(language):
  renderer = renderer_or_skip(language)
  data = solutions(language)
  wrong = run_all(renderer, [(QUESTIONS[qid], code) for qid, code in data["wrong"].items()])
  for qid, outcome in zip(data["wrong"], wrong):
    assert outcome.status is Status.FAILED, (qid, outcome)
  throws = run_all(renderer, [(QUESTIONS[qid], code) for qid, code in data["throws_once"].items()])
  for qid, outcome in zip(data["throws_once"], throws):
    question = QUESTIONS[qid]
    bad = data["throws_on"][qid]
    expected = [Case.EXCEPTION if c.idx == bad else Case.PASSED for c in question.test_cases]
    assert list(outcome.cases) == expected, (qid, outcome)
    assert outcome.status is Status.FAILED


@pytest.mark.parametrize("language", LANGUAGES)
def test_attacks_are_contained(language, tmp_path):
  renderer = renderer_or_skip(language)
  attacks = solutions(language)["attacks"]
  assert set(attacks) == set(ATTACKS)
  question = QUESTIONS["HumanEval/0"]
  server = socket.socket()
  server.bind(("127.0.0.1", 0))
  server.listen(8)
  server.settimeout(0.2)
  connections = []
  stop = threading.Event()

  def accept():
    while not stop.is_set():
      try:
        connections.append(server.accept())
      except OSError:
        pass

  thread = threading.Thread(target=accept, daemon=True)
  thread.start()
  hostdir = tmp_path / "host"
  hostdir.mkdir()
  os.chmod(hostdir, 0o777)
  secret = tmp_path / "secret"
  secret.write_text("TOPSECRET-4711\n")
  os.chmod(secret, 0o600)
  def attack(kind):
    completion = (attacks[kind].replace("{PORT}", str(server.getsockname()[1]))
                  .replace("{HOSTDIR}", str(hostdir)).replace("{SECRET}", str(secret)))
    start = time.monotonic()
    program = renderer.program(question, completion)
    result = execution.execute(program, renderer.toolchain, ATTACK_LIMITS)
    took = time.monotonic() - start
    outcome = judge(question, result)
    budget = ATTACK_LIMITS.timeout_s + ATTACK_LIMITS.compile_timeout_s * len(program.compile) + 15
    assert took < budget, (kind, took)
    assert outcome.status is not Status.COMPILE_ERROR, (kind, outcome)
    # execute() returns only once no process of the program's uid is left (it raises otherwise).
    assert "TOPSECRET" not in result.stdout + result.stderr, kind
    assert "root:" not in result.stdout.replace("root:x:0:0::/:/bin/sh", ""), kind  # /etc/shadow
    assert len(result.stdout) <= ATTACK_LIMITS.max_output_kb << 10
    if kind == "infinite_loop":
      assert outcome.status is Status.TIMEOUT, outcome
    return result.uid

  import concurrent.futures
  try:
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
      uids = list(pool.map(attack, ATTACKS))
    if os.geteuid() == 0:
      assert not [u for u in uids if execution.survivors(u)], "a sandbox process survived"
  finally:
    stop.set()
    thread.join()
    server.close()
  assert not connections, "a sandboxed program reached the host's loopback"
  assert os.listdir(hostdir) == [], "a sandboxed program wrote to the host"
  assert os.stat(secret).st_mode & 0o777 == 0o600


@pytest.mark.parametrize("language", LANGUAGES)
def test_every_typed_humaneval_stub_compiles_and_fails(language):
  """Every typed HumanEval problem (and fixture question) renders in every language, and the stub
  (the return type's default value) compiles and runs: every test case is a wrong value or a right one, never a compile
  error, an exception or a missing record."""
  import concurrent.futures

  from evaluation.score import load_benchmark

  renderer = renderer_or_skip(language)
  # The fixture questions add what HumanEval lacks: set and int-keyed map inputs, list<optional>.
  questions = list(load_benchmark("humaneval").values()) + list(QUESTIONS.values())
  # Compiled as the scorer compiles them: in batches (sandbox/batching.py; tests/test_batching.py
  # holds batched verdicts equal to those of programs compiled alone), one batch per worker at a time.
  chunks = [questions[i:i + 32] for i in range(0, len(questions), 32)]

  def some(chunk):
    results = batching.execute_all(renderer, [(q, renderer.stub(q)) for q in chunk], LIMITS, batch_size=32)
    return [(q.qid, judge(q, r)) for q, r in zip(chunk, results)]

  with concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 2) as pool:
    outcomes = dict(pair for done in pool.map(some, chunks) for pair in done)
  bad = {qid: o for qid, o in outcomes.items()
         if o.status not in (Status.FAILED, Status.PASSED) or Case.EXCEPTION in o.cases
         or Case.MISSING in o.cases}
  assert not bad, f"{len(bad)} of {len(questions)}: {list(bad.items())[:3]}"
  # A default value is right for some test cases, never for a whole problem's tests in most cases.
  assert sum(o.status is Status.FAILED for o in outcomes.values()) >= 0.9 * len(questions)


@pytest.mark.parametrize("language", LANGUAGES)
def test_stops_are_samplings_and_cut_a_stub_after_the_function(language):
  import languages
  from sampling.stops import cut_index

  renderer = get(language)
  assert renderer.stop_sequences and languages.get(renderer.display_name).stops == renderer.stop_sequences
  # A completion that runs on past the function is cut right after the stub's end.
  for question in QUESTIONS.values():
    stub = renderer.stub(question)
    text = stub.rstrip("\n") + "\n\n\n" + renderer.signature_with_docstring(question) + stub
    cut = cut_index(text, renderer.stop_sequences)
    assert cut >= 0 and text[:cut].rstrip() == stub.rstrip(), (question.qid, text[:cut])
