"""The sandbox: per-assert results, results that cannot be faked, and each isolation layer on its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from evaluation import sandbox
from evaluation.sandbox import Limits, Status, run_tests

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TEST = textwrap.dedent("""\
    import math

    def check(candidate):
        assert True
        assert candidate(1) == 2
        limit = 3
        for x in range(limit):
            assert candidate(x) == x + 1
        assert candidate(-1) == 0
    """)
GOOD = "def inc(x):\n    return x + 1\n"
FAST = Limits(timeout_s=5)


def run(solution: str, test: str = TEST, limits: Limits = FAST) -> sandbox.Outcome:
  return run_tests(solution, test, "inc", limits)


def test_split_check_counts_asserts_on_the_candidate():
  param, steps = sandbox.split_check(TEST)
  assert param == "candidate"
  # `assert True` and `limit = 3` are setup; the for loop of asserts is one test case.
  assert [is_test for is_test, _ in steps] == [False, True, False, True, True]
  assert sandbox.count_test_cases(TEST) == 3
  with pytest.raises(ValueError, match="check"):
    sandbox.split_check("def test():\n  assert 1\n")


def test_passing_program_and_where_it_ran():
  outcome = run(GOOD)
  assert outcome.status is Status.PASSED
  assert outcome.tests_passed == [True, True, True]
  assert outcome.runtime_s > 0 and outcome.peak_memory_mb > 1
  assert {"rlimits", "audit"} <= set(outcome.isolation)


def test_each_test_case_is_reported_on_its_own():
  # Right for x >= 0 only: the first two test cases pass, the last fails.
  outcome = run("def inc(x):\n    return abs(x) + 1\n")
  assert outcome.status is Status.FAILED
  assert outcome.tests_passed == [True, True, False]
  assert outcome.detail.startswith("test case 2: AssertionError")
  # An exception inside a test case fails that case only.
  outcome = run("def inc(x):\n    if x == 2: raise KeyError(x)\n    return x + 1\n")
  assert outcome.tests_passed == [True, False, True] and "test case 1: KeyError" in outcome.detail


@pytest.mark.parametrize("solution, detail", [
    ("def inc(x)\n    return x\n", "SyntaxError"),
    ("import sys\nsys.exit(0)\n" + GOOD, "SystemExit"),
    ("import os\nos._exit(0)\n" + GOOD, "no result record (exit code 0)"),
    ("def other(x):\n    return x\n", "defines no function inc"),
], ids=["syntax error", "sys.exit", "os._exit", "no entry point"])
def test_errors_before_the_tests_never_pass(solution, detail):
  outcome = run(solution)
  assert outcome.status is Status.ERROR
  assert outcome.tests_passed == [False, False, False]
  assert detail in outcome.detail


def test_fake_result_records_do_not_count():
  # Records printed to stdout, or written to the result fd without the nonce, are ignored.
  fake = json.dumps({"kind": "done", "error": None})
  solution = textwrap.dedent(f"""\
      import os
      print({fake!r})
      for fd in range(3, 20):
          try:
              os.write(fd, b'{fake}\\n')
          except OSError:
              pass
      os._exit(0)
      """)
  outcome = run(solution)
  assert outcome.status is Status.ERROR and outcome.tests_passed == [False, False, False]


def test_timeout_kills_and_keeps_the_tests_that_ran():
  # The first test case passes, then the program hangs in the second.
  solution = "def inc(x):\n    while x == 0:\n        pass\n    return x + 1\n"
  outcome = run(solution, limits=Limits(timeout_s=2))
  assert outcome.status is Status.TIMEOUT
  assert outcome.tests_passed == [True, False, False]
  assert outcome.runtime_s < 5


def test_output_and_memory_are_capped():
  outcome = run("while True:\n    print('x' * 10000)\n", limits=Limits(timeout_s=5, max_file_mb=1))
  assert outcome.status is Status.ERROR and "File too large" in outcome.detail
  outcome = run("x = bytearray(50 * 2**30)\n" + GOOD)
  assert outcome.status is Status.ERROR and "MemoryError" in outcome.detail


def test_peak_memory_is_the_programs_own():
  # Not the scorer's: wait4's ru_maxrss would count what the parent had resident when it forked.
  ballast = bytearray(300 * 2**20)
  ballast[::4096] = b"x" * len(ballast[::4096])
  assert run(GOOD).peak_memory_mb < 150
  touch = "y = bytearray(200 * 2**20)\ny[::4096] = b'x' * len(y[::4096])\n"
  assert 200 <= run(touch + GOOD).peak_memory_mb < 400
  del ballast


def test_guard_lets_ordinary_programs_work():
  # Writes, renames, removals and temporary files inside the working directory; threads; imports.
  solution = textwrap.dedent("""\
      import collections, hashlib, json, os, re, shutil, tempfile, threading
      with open("notes.txt", "w") as f:
          f.write("x")
      os.mkdir("sub")
      os.rename("notes.txt", "sub/notes.txt")
      shutil.rmtree("sub")
      with tempfile.TemporaryDirectory() as d:
          open(os.path.join(d, "y"), "w").close()
      done = []
      t = threading.Thread(target=done.append, args=(1,))
      t.start(); t.join()
      def inc(x):
          return x + done[0]
      """)
  assert run(solution).status is Status.PASSED


REFUSED = {
    "fork": "import os\nos.fork()\n",
    "subprocess": "import subprocess\nsubprocess.run(['true'])\n",
    "ctypes": "import ctypes\nctypes.CDLL(None).fork()\n",
    "socket": "import socket\nsocket.socket()\n",
    "kill": "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\n",
    "write outside": "open({outside!r}, 'w')\n",
}


@pytest.mark.parametrize("name", list(REFUSED))
def test_guard_refuses(name, tmp_path):
  outside = str(tmp_path / "outside.txt")
  outcome = run(REFUSED[name].format(outside=outside) + GOOD)
  assert outcome.status is Status.ERROR
  assert "sandbox:" in outcome.detail, name
  assert not os.path.exists(outside)


def test_kernel_layers_hold_without_the_audit_guard(tmp_path):
  """Namespaces, read-only mounts and seccomp, entered as the child does, refuse on their own."""
  workdir = tmp_path / "work"
  workdir.mkdir()
  outside = tmp_path / "outside.txt"
  script = textwrap.dedent(f"""\
      import json, os, signal, socket, sys
      sys.path.insert(0, {ROOT!r})
      from evaluation import sandbox
      layers = sandbox._enter_namespaces(os.getcwd()) + sandbox._install_seccomp(os.getpid())
      refused = {{}}
      def attempt(name, action):
          try:
              action()
              refused[name] = False
          except OSError:
              refused[name] = True
      def fork():
          if os.fork() == 0:
              os._exit(0)  # if the fork went through, leave at once
      attempt("fork", fork)
      attempt("socket", socket.socket)
      attempt("exec", lambda: os.execv("/bin/true", ["true"]))
      attempt("kill", lambda: os.kill(os.getppid(), 0))
      attempt("write outside", lambda: open({str(outside)!r}, "w"))
      with open("inside.txt", "w") as f:  # the working directory stays writable
          f.write("ok")
      print(json.dumps({{"layers": layers, "refused": refused}}))
      """)
  done = subprocess.run([sys.executable, "-c", script], cwd=workdir, capture_output=True,
                        text=True, timeout=30, start_new_session=True)
  assert done.returncode == 0, done.stderr
  report = json.loads(done.stdout)
  layers, refused = set(report["layers"]), report["refused"]
  if "seccomp" not in layers and "netns" not in layers:
    pytest.skip(f"no kernel layers on this machine: {layers}")
  if "seccomp" in layers:
    assert refused["fork"] and refused["exec"] and refused["kill"] and refused["socket"]
  if "readonly-fs" in layers:
    assert refused["write outside"] and not outside.exists()
  assert (workdir / "inside.txt").read_text() == "ok"


def test_seccomp_program_shape():
  program = sandbox._seccomp_program("x86_64", 1234)
  assert program is not None and len(program) % 8 == 0 and len(program) // 8 < 4096
  assert sandbox._seccomp_program("riscv64", 1234) is None  # no table: the layer is left out
