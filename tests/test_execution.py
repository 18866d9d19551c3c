"""The sandbox itself: who the program runs as, what it can see, and its caps."""

from __future__ import annotations

import dataclasses
import json
import os
import sys

import pytest

from sandbox import execution
from sandbox.renderers import base, get

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PYTHON = get("python")
pytestmark = pytest.mark.skipif(bool(execution.missing(PYTHON.toolchain)), reason="no bwrap here")


def run_python(source: str, limits: execution.Limits = execution.Limits(timeout_s=10), compile_steps=()):
  interpreter = PYTHON.program.__globals__["_base_interpreter"]()
  program = base.Program(files={"probe.py": source}, run=(interpreter, "-I", "-S", "probe.py"),
                         compile=compile_steps)
  return execution.execute(program, PYTHON.toolchain, limits)


PROBE = """
import json, os
status = dict(line.split(':\\t', 1) for line in open('/proc/self/status').read().splitlines() if ':\\t' in line)
print(json.dumps({
  "uid": os.getuid(), "caps": status['CapEff'].strip(), "no_new_privs": status['NoNewPrivs'].strip(),
  "cwd": os.getcwd(), "visible": {p: os.path.exists(p) for p in PATHS},
  "interfaces": sorted(os.listdir('/sys/class/net')) if os.path.exists('/sys/class/net') else [],
}))
"""


def test_unprivileged_and_only_the_toolchain_visible():
  hidden = [ROOT, sys.prefix, "/root/.bashrc", "/etc/shadow", "/home", "/work"]
  result = run_python(f"PATHS = {hidden + ['/usr/bin']!r}\n" + PROBE)
  assert result.run.exit_code == 0, result.stderr
  seen = json.loads(result.stdout)
  if os.geteuid() == 0:
    assert seen["uid"] >= execution.UID_BASE
  else:
    assert seen["uid"] == os.getuid()
  assert seen["caps"] == "0000000000000000" and seen["no_new_privs"] == "1"
  assert seen["cwd"] == execution.BOX
  assert not any(seen["visible"][p] for p in hidden), seen["visible"]
  assert seen["visible"]["/usr/bin"]


def test_disk_and_output_caps():
  limits = execution.Limits(timeout_s=20, disk_mb=8, max_output_kb=64)
  result = run_python(
      "import sys\n"
      "try:\n"
      "    open('big', 'wb').write(b'x' * (32 << 20))\n"
      "    print('wrote 32 MB')\n"
      "except OSError as e:\n"
      "    print('refused', e.errno)\n"
      "sys.stdout.flush()\n"
      "sys.stdout.write('y' * (1 << 20))\n", limits)
  assert result.stdout.startswith("refused")
  assert result.output_truncated and len(result.stdout.encode()) <= 64 << 10


def test_compile_step_failure_stops_before_the_run():
  result = run_python("print('ran')\n", compile_steps=(("/bin/sh", "-c", "echo nope >&2; exit 3"),))
  assert result.compile_failed and result.run is None
  assert result.compile[0].exit_code == 3 and "nope" in result.stderr
  assert "ran" not in result.stdout


def test_a_missing_toolchain_is_an_error_naming_the_fix():
  toolchain = base.Toolchain(binaries=("/nonexistent/bin/cc",), version_command=("true",))
  assert execution.missing(toolchain) == ["/nonexistent/bin/cc"]
  with pytest.raises(RuntimeError, match="make toolchains"):
    execution.execute(base.Program(files={}, run=("true",)), toolchain)


def test_program_paths_must_stay_in_the_box():
  with pytest.raises(ValueError, match="relative path"):
    execution.execute(base.Program(files={"../escape": "x"}, run=("true",)), PYTHON.toolchain)


def test_toolchain_paths_under_tmp_are_visible(tmp_path):
  """A checkout under /tmp (CI clones there) keeps its .toolchains/ visible despite the /tmp tmpfs."""
  tools = tmp_path / "checkout" / ".toolchains"
  tools.mkdir(parents=True)
  (tools / "tool.txt").write_text("the toolchain\n")
  toolchain = dataclasses.replace(PYTHON.toolchain, read_only=(*PYTHON.toolchain.read_only, str(tools)))
  interpreter = PYTHON.program.__globals__["_base_interpreter"]()
  program = base.Program(files={"p.py": f"print(open({str(tools / 'tool.txt')!r}).read())"},
                         run=(interpreter, "-I", "-S", "p.py"))
  result = execution.execute(program, toolchain)
  assert "the toolchain" in result.stdout, result.stderr


def test_a_build_keeps_its_outputs_for_runs_that_bind_them_read_only(tmp_path):
  """execution.build: the box is a host folder whose outputs stay; execute binds them read-only
  (a folder's files one by one, "." being the box), and refuses a link among them."""
  interpreter = PYTHON.program.__globals__["_base_interpreter"]()
  build = base.Program(files={"src/a.txt": "A"}, run=("true",), compile=(
      ("/bin/sh", "-c", "mkdir -p out/sub && cp src/a.txt out/sub/a.txt && echo B > out/b.txt"),))
  result = execution.build(build, PYTHON.toolchain, execution.Limits(), str(tmp_path))
  assert not result.compile_failed, result.stderr
  assert (tmp_path / "out" / "sub" / "a.txt").read_text() == "A"
  probe = ("print(open('sub/a.txt').read() + open('b.txt').read().strip())\n"
           "try:\n    open('b.txt', 'w')\nexcept OSError as e:\n    print('read-only', e.errno)\n")
  run = base.Program(files={"probe.py": probe}, run=(interpreter, "-I", "-S", "probe.py"),
                     artefacts={".": "out"})
  result = execution.execute(run, PYTHON.toolchain, build_dir=str(tmp_path))
  assert result.stdout.split("\n")[:2] == ["AB", "read-only 30"], result.stderr  # EROFS
  os.symlink("/etc/passwd", tmp_path / "out" / "link")
  with pytest.raises(RuntimeError, match="holds a link"):
    execution.execute(run, PYTHON.toolchain, build_dir=str(tmp_path))
  with pytest.raises(ValueError, match="needs the build_dir"):
    execution.execute(run, PYTHON.toolchain)


def test_check_sandbox_passes_here_and_names_what_is_missing(monkeypatch):
  execution.check_sandbox()
  monkeypatch.setattr(execution, "PRLIMIT", "/nonexistent/prlimit")
  with pytest.raises(RuntimeError, match="cannot run the scoring sandbox: missing /nonexistent/prlimit"):
    execution.check_sandbox()


def test_a_run_that_exceeds_the_file_size_cap_on_stderr_is_reported():
  """A run step (no compile step before it) killed by SIGXFSZ for filling stderr: the driver still
  reports it (bash's own message about the signal goes nowhere, not to the full stderr file)."""
  limits = execution.Limits(timeout_s=20, disk_mb=1, max_output_kb=64)
  program = base.Program(files={}, run=("/bin/sh", "-c", "yes x >&2"))  # yes dies of SIGXFSZ
  result = execution.execute(program, PYTHON.toolchain, limits)
  assert result.run is not None and result.run.exit_code not in (0, None), result
  assert not result.run.timed_out


HOME_PROBE = """
import json, os, sys, sysconfig
import collections, dataclasses, functools, heapq, itertools, math, re, typing  # what programs use
def seen(path):
    try:
        return sorted(os.listdir(path)) if os.path.isdir(path) else open(path, 'rb').read(1) is not None
    except OSError:
        return None
purelib = sysconfig.get_paths()["purelib"]
print(json.dumps({"paths": {p: seen(p) for p in PATHS}, "purelib": seen(purelib),
                  "prefix": sys.base_prefix, "json": json.dumps(heapq.nsmallest(1, [2, 1]))}))
"""


def test_the_python_sandbox_shows_only_the_interpreter_not_home_repo_or_packages():
  """Only the interpreter, its standard library and its shared library are bound, at a path of
  their own: not the home folder the interpreter lives in, nor the interpreter's or the
  virtualenv's site-packages, nor the checkout."""
  home = os.path.expanduser("~")
  site = next(p for p in sys.path if p.endswith("site-packages"))
  paths = {"/root", home, ROOT, sys.prefix, site}
  if not sys.base_prefix.startswith("/usr"):  # (Debian's interpreter is in /usr, which is there)
    paths |= {sys.base_prefix, os.path.dirname(sys.base_prefix)}
  paths = sorted(paths)
  result = run_python(f"PATHS = {paths!r}\n" + HOME_PROBE)
  assert result.run.exit_code == 0, result.stderr
  seen = json.loads(result.stdout)
  assert all(v is None for v in seen["paths"].values()), seen["paths"]
  assert not seen["purelib"], seen  # absent or empty: no third-party package importable
  assert seen["json"] == "[1]" and not seen["prefix"].startswith(home), seen


ZOMBIE_COUNT = r"""
import ctypes, os, sys, time
sys.path.insert(0, {root!r})
ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER: orphans come here
from sandbox import execution
from sandbox.renderers import base, get
python = get("python")
interpreter = python.program.__globals__["_base_interpreter"]()
sources = {{
    "prints": "print(1)",
    "leaves a child": "import os, time\nif os.fork() == 0:\n    time.sleep(30)\nprint(1)",
    "daemonises": "import os, time\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n        time.sleep(30)\n    os._exit(0)\nprint(1)",
    "loops past its timeout": "while True: pass",
}}
for source in sources.values():
    program = base.Program(files={{"p.py": source}}, run=(interpreter, "-I", "-S", "p.py"))
    execution.execute(program, python.toolchain, execution.Limits(timeout_s=1))
# The host's deadline (the driver itself hangs): the box is killed from outside.
execution.DEADLINE_MARGIN_S = 0.5
execution._driver = lambda program, limits, status_fd: "sleep 60"
killed = execution.execute(base.Program(files={{}}, run=("true",)), python.toolchain, execution.Limits(timeout_s=0.5))
time.sleep(0.3)
zombies = []
for task in os.listdir("/proc/self/task"):
    for pid in open(f"/proc/self/task/{{task}}/children").read().split():
        state = open(f"/proc/{{pid}}/stat").read().rsplit(")", 1)[1].split()[0]
        zombies += [pid] if state == "Z" else []
print(len(zombies), killed.run is None or killed.run.exit_code)
"""


def test_no_execution_leaves_a_zombie_behind():
  # The scorer is made a child subreaper, so whatever a box leaves orphaned is reparented to it, where
  # it would stay a zombie: bwrap's own init used to be left that way once per program (under PID 1).
  import subprocess
  out = subprocess.run([sys.executable, "-c", ZOMBIE_COUNT.format(root=ROOT)], capture_output=True,
                       text=True, timeout=120)
  assert out.returncode == 0, out.stderr
  zombies, killed = out.stdout.split()
  assert zombies == "0", out.stdout
  assert killed != "0"  # the hung box was killed, not run to completion
