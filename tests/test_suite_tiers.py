"""The suite's two tiers: `make test` leaves out the tests marked e2e (on one device, then the
tests marked multidevice on 8), `make test-e2e` runs exactly those, `.ci/run` runs both, and docs/demo.md names every e2e test (read from the test files' source,
so that nothing is imported or collected)."""

import ast
import json
import os
import re
import shlex

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TESTS = os.path.join(ROOT, "tests")


def _read(*path) -> str:
  with open(os.path.join(ROOT, *path), encoding="utf-8") as f:
    return f.read()


def _is_e2e_mark(decorator: ast.expr) -> bool:
  return ast.unparse(decorator) == "pytest.mark.e2e"


def e2e_tests(folder: str = TESTS) -> set[str]:
  """module::function of every test in `folder` marked e2e, itself or through its module's `pytestmark`."""
  found = set()
  for name in sorted(os.listdir(folder)):
    if not (name.startswith("test_") and name.endswith(".py")):
      continue
    with open(os.path.join(folder, name), encoding="utf-8") as f:
      tree = ast.parse(f.read())
    module_marked = any(isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "pytestmark" for t in node.targets)
                        and "pytest.mark.e2e" in ast.unparse(node.value) for node in tree.body)
    for node in tree.body:
      if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
        if module_marked or any(_is_e2e_mark(d) for d in node.decorator_list):
          found.add(f"{name[:-3]}::{node.name}")
  return found


def _pytest_runs(target: str) -> list[tuple[dict[str, str], str, str]]:
  """A Makefile target's pytest runs, each as (the environment set on its command line, the expression
  pytest's own -m is given, the last argument), with $(PYTEST) expanded."""
  makefile = _read("Makefile").replace("\\\n", " ")
  variables = dict(re.findall(r"^([A-Z_]+) :?= (.*)$", makefile, re.M))
  match = re.search(rf"^{re.escape(target)}:[^\n]*\n((?:\t[^\n]*\n)+)", makefile, re.M)
  assert match, f"no target {target} in the Makefile"
  words = shlex.split(match.group(1).replace("$(PYTEST)", variables.get("PYTEST", "")))
  runs = []
  for at in [i for i, word in enumerate(words) if word == "pytest"]:
    python = at - 2  # `$(BIN)/python -m pytest`
    start = python
    while start > 0 and re.fullmatch(r"[A-Z_]+=\S*", words[start - 1]):
      start -= 1
    environment = dict(word.split("=", 1) for word in words[start:python])
    arguments = words[at + 1:]
    end = next((i for i, word in enumerate(arguments) if word == "||" or word.endswith(";")), len(arguments))
    arguments = arguments[:end]
    runs.append((environment, arguments[arguments.index("-m") + 1], arguments[-1]))
  return runs


def test_make_test_runs_each_non_e2e_test_once_on_its_devices_and_make_test_e2e_only_the_e2e_tier():
  test, e2e = _pytest_runs("test"), _pytest_runs("test-e2e")
  # The unmarked tests on one device, then the multidevice ones on 8: together, every test not e2e.
  assert [(env["CODELM_TEST_DEVICES"], marks, folder) for env, marks, folder in test] == [
      ("1", "not e2e and not multidevice", "tests"), ("8", "not e2e and multidevice", "tests")]
  assert [(env["CODELM_TEST_DEVICES"], marks, folder) for env, marks, folder in e2e] == [("1", "e2e", "tests")]
  assert all(env["CODELM_REQUIRE_TPU_COMPILER"] == "1" for env, _, _ in test + e2e)


def test_a_multidevice_test_on_fewer_devices_stops_with_the_reason_and_a_bad_count_is_a_usage_error():
  import subprocess
  import sys

  def pytest_(devices: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "tests/test_sharding.py::test_mesh_has_auto_axes"], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, env=dict(os.environ, CODELM_TEST_DEVICES=devices, XLA_FLAGS=""))

  one = pytest_("1")
  assert one.returncode == 1 and "is marked multidevice and needs 8 devices; this process has 1" in one.stdout
  assert "Traceback" not in one.stdout
  bad = pytest_("eight")
  assert bad.returncode == 4 and "CODELM_TEST_DEVICES='eight': expected a positive whole number" in bad.stderr


def test_ci_runs_both_tiers():
  commands = [line.strip() for line in _read(".ci", "run").splitlines() if line.strip().startswith("make ")]
  assert "make test" in commands and "make test-e2e" in commands
  assert commands.index("make toolchains") < commands.index("make test") < commands.index("make test-e2e")


def test_the_e2e_mark_is_registered_and_unknown_marks_are_errors():
  pyproject = _read("pyproject.toml")
  assert "--strict-markers" in pyproject and re.search(r'^\s*"e2e: ', pyproject, re.M)


def test_docs_name_every_e2e_test_and_no_other():
  marked = e2e_tests()
  assert len(marked) >= 5
  demo = _read("docs", "demo.md")
  section = demo[demo.index("### The e2e tier"):]
  section = section[:section.index("\n#", 1)] if "\n#" in section[1:] else section
  named = set(re.findall(r"`(test_\w+::test_\w+)`", section))
  assert named == marked, (sorted(marked - named), sorted(named - marked))


def test_the_e2e_marks_are_found_on_functions_and_modules(tmp_path):
  (tmp_path / "test_one.py").write_text("import pytest\n\n@pytest.mark.e2e\ndef test_a():\n  pass\n\n"
                                        "def test_b():\n  pass\n")
  (tmp_path / "test_two.py").write_text("import pytest\npytestmark = [pytest.mark.e2e]\n\ndef test_c():\n  pass\n")
  (tmp_path / "helper.py").write_text("import pytest\n\n@pytest.mark.e2e\ndef test_d():\n  pass\n")
  assert e2e_tests(str(tmp_path)) == {"test_one::test_a", "test_two::test_c"}


def test_suite_profile_groups_a_junit_file_by_module_and_kind(tmp_path, capsys):
  import importlib.util

  spec = importlib.util.spec_from_file_location("suite_profile", os.path.join(ROOT, "bench", "suite_profile.py"))
  suite_profile = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(suite_profile)
  junit = tmp_path / "suite.xml"
  junit.write_text('<testsuites><testsuite name="pytest">'
                   '<testcase classname="tests.test_train" name="test_a" time="3.5"/>'
                   '<testcase classname="tests.test_train" name="test_b" time="0.5"/>'
                   '<testcase classname="tests.test_renderers.TestX" name="test_c" time="2"/>'
                   '<testcase classname="tests.test_new_module" name="test_d" time="1"/>'
                   '</testsuite></testsuites>')
  out = tmp_path / "out" / "profile.json"
  assert suite_profile.main([str(junit), "--wall", "4", "--json", str(out)]) == 0
  result = json.loads(out.read_text())
  assert result["tests"] == 4 and result["test_seconds"] == 7.0
  assert result["by_module"]["test_train"] == {"tests": 2, "seconds": 4.0, "kind": "compile"}
  assert result["by_module"]["test_renderers"]["kind"] == "sandbox"
  assert result["by_kind"] == {"compile": {"tests": 2, "seconds": 4.0}, "sandbox": {"tests": 1, "seconds": 2.0},
                               "other": {"tests": 1, "seconds": 1.0}}
  assert result["longest"][0] == {"test": "test_train::test_a", "seconds": 3.5}
  assert "4 tests, 7 s of test time, 4 s wall (1.75 workers busy on average)" in capsys.readouterr().out
  assert suite_profile.main([str(tmp_path / "missing.xml")]) == 2
  assert "no such file" in capsys.readouterr().err
  (tmp_path / "torn.xml").write_text("<testsuites>\n<testcase name=")
  assert suite_profile.main([str(tmp_path / "torn.xml")]) == 2
  assert "torn.xml:2: not JUnit XML" in capsys.readouterr().err


def test_a_killed_worker_s_scratch_folder_is_removed_by_the_next_and_a_live_one_kept(tmp_path, monkeypatch):
  import subprocess
  import sys
  import tempfile

  import scratch

  monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
  dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
  stale = tmp_path / f"codelm-test-kind-{int(dead.stdout)}-abc"  # its process is gone (as after SIGKILL)
  live = tmp_path / f"codelm-test-kind-{os.getpid()}-def"
  other_kind = tmp_path / f"codelm-test-other-kind-{int(dead.stdout)}-ghi"  # swept whatever its kind
  not_ours = tmp_path / "codelm-test-build-jkl"  # no PID in its name: some test's own folder, left alone
  for path in (stale, live, other_kind, not_ours):
    path.mkdir()
  made = scratch.folder("kind")
  assert os.path.isdir(made) and os.path.basename(made).startswith(f"codelm-test-kind-{os.getpid()}-")
  assert not stale.exists() and not other_kind.exists() and live.exists() and not_ours.exists()
