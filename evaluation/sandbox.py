"""Run one untrusted Python program (a prediction and its benchmark's tests) isolated, per test case.

The parent launches this file as a script in a fresh interpreter, which isolates itself before it
runs the program. Layers, outermost first:

1. Process: a new session (the whole group is SIGKILLed at the wall-clock timeout), a fresh
   temporary working directory, a clean environment, stdin from /dev/null.
2. Identity: a root scorer runs the child as `nobody` where that user can run our interpreter:
   the kernel then refuses it writes to our files and signals to our processes.
3. Namespaces: new user, network and mount namespaces. No network interface is up (no network at
   all), and every mount but the working directory is remounted read-only.
4. rlimits: address space (memory), CPU seconds, file size (and so output), processes, open files,
   no core dumps. In its own user namespace RLIMIT_NPROC counts only the sandbox's processes
   (the kernel exempts root from it; seccomp covers that case).
5. seccomp: no fork or clone of processes (threads are fine), exec, sockets, signals to other
   processes, tracing, or namespace and mount changes, however the program reaches the kernel.
6. A `sys.addaudithook` guard (it cannot be removed once added) that refuses the same from Python,
   plus file writes, renames, removals, chmods and links outside the working directory. Reads stay
   allowed: imports read the stdlib.

Layers 2, 3 and 5 are used where the machine allows them; `Outcome.isolation` records the layers in
force. The audit guard alone stops accidents, not a determined attacker (CPython's docs say audit
hooks are no sandbox); the kernel layers are the containment.

The harness runs the test code the way BabelCode does: `check(candidate)`'s body is split with
`ast`; each top-level statement with an assert that uses the candidate is one test case, the other
statements are setup, run in order. Results go to an inherited file as JSON lines carrying a random
nonce; only a final "done" record written after all test cases counts, so `sys.exit(0)` or
`os._exit(0)` before the tests, or fake records printed to stdout, never pass.
"""

from __future__ import annotations

import ast
import dataclasses
import enum
import errno
import functools
import json
import os
import resource
import secrets
import signal
import struct
import sys
import tempfile
import threading
import time

# Not `import subprocess` here: this file is also the child's entry point, and a subprocess module
# already loaded in the child would hand the untrusted code `_posixsubprocess` past the import guard.

# Linux constants (<sched.h>, <sys/mount.h>, <linux/mount.h>, <linux/prctl.h>, <linux/seccomp.h>).
CLONE_THREAD, CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWNET = 0x10000, 0x20000, 0x10000000, 0x40000000
MS_BIND, MS_REC, MS_PRIVATE = 0x1000, 0x4000, 1 << 18
MOUNT_ATTR_RDONLY, AT_FDCWD, AT_RECURSIVE = 1, -100, 0x8000
SYS_MOUNT_SETATTR = 442  # the same on x86_64 and aarch64
PR_SET_PDEATHSIG, PR_SET_SECCOMP, PR_SET_NO_NEW_PRIVS, SECCOMP_MODE_FILTER = 1, 22, 38, 2
_STDERR_TAIL = 2000  # characters of the child's output kept for an error with no result record


class Status(enum.Enum):
  PASSED = "passed"    # every test case passed
  FAILED = "failed"    # the program ran; a test case failed
  ERROR = "error"      # syntax error, exception outside the test cases, crash, or no result record
  TIMEOUT = "timeout"  # killed at the wall-clock limit


@dataclasses.dataclass(frozen=True)
class Limits:
  timeout_s: float = 10.0
  memory_mb: int = 2048     # RLIMIT_AS: address space, more than resident memory
  max_processes: int = 32   # RLIMIT_NPROC: threads count too
  max_file_mb: int = 32     # RLIMIT_FSIZE: also caps what the program prints
  max_open_files: int = 256


@dataclasses.dataclass(frozen=True)
class Outcome:
  status: Status
  tests_passed: list[bool]  # one per test case, in the order of check()'s body
  detail: str               # why it failed or errored: the first failing test case, or the error
  runtime_s: float          # wall clock, launch to exit
  peak_memory_mb: float     # the program's peak resident memory (see _peak_kb)
  isolation: list[str]      # the layers that were in force


# ---------------------------------------------------------------------------------------------
# Test cases: shared by the parent (to count them) and the child (to run them).


def split_check(test: str) -> tuple[str, list[tuple[bool, ast.stmt]]]:
  """`check`'s parameter name and its body as (is_test_case, statement) pairs, in order.

  A test case is a top-level statement holding an assert that mentions the candidate (an `assert`,
  or a `for` loop of asserts); the rest (imports, assignments, HumanEval's `assert True`) is setup.
  """
  module = ast.parse(test)
  checks = [s for s in module.body if isinstance(s, ast.FunctionDef) and s.name == "check"]
  if not checks or not checks[-1].args.args:
    raise ValueError("the test code defines no check(candidate) function")
  check = checks[-1]
  param = check.args.args[0].arg
  steps = []
  for statement in check.body:
    nodes = list(ast.walk(statement))
    is_test = (any(isinstance(n, ast.Assert) for n in nodes)
               and any(isinstance(n, ast.Name) and n.id == param for n in nodes))
    steps.append((is_test, statement))
  return param, steps


def count_test_cases(test: str) -> int:
  return sum(is_test for is_test, _ in split_check(test)[1])


# ---------------------------------------------------------------------------------------------
# Parent side.


def run_tests(solution: str, test: str, entry_point: str, limits: Limits = Limits()) -> Outcome:
  """Runs `solution`, then `test`'s check(entry_point) one test case at a time, in a sandbox."""
  job = {"solution": solution, "test": test, "entry_point": entry_point}
  return _launch(job, count_test_cases(test), limits, _sandbox_user())


def _launch(job: dict, num_tests: int, limits: Limits, user: tuple[int, int] | None) -> Outcome:
  import subprocess  # see the note at the imports

  nonce = secrets.token_hex(16)
  with tempfile.TemporaryDirectory(prefix="codelm-sandbox-", ignore_cleanup_errors=True) as workdir, \
       tempfile.TemporaryFile() as spec, tempfile.TemporaryFile() as results, \
       tempfile.TemporaryFile() as output:
    if user is not None:
      os.chown(workdir, *user)
    # The spec goes in on stdin (the child reads it, then swaps in /dev/null): nothing about the job,
    # the nonce included, is left on disk for the program to read.
    spec.write(json.dumps({**job, "limits": dataclasses.asdict(limits), "nonce": nonce,
                           "result_fd": results.fileno(), "parent_pid": os.getpid(),
                           "site_packages": _site_packages()}).encode())
    spec.seek(0)
    env = {"PATH": os.defpath, "HOME": workdir, "TMPDIR": workdir, "LANG": "C.UTF-8",
           "PYTHONHASHSEED": "0",  # set iteration order, hence some outputs, reproducible
           "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    identity = {} if user is None else {"user": user[0], "group": user[1], "extra_groups": []}
    start = time.monotonic()
    # -S: no site (its .pth files cost ~50 ms a start; the child adds site-packages itself);
    # -B: no .pyc writes; -P: this file's directory stays off sys.path.
    proc = subprocess.Popen(
        [sys.executable, "-S", "-B", "-P", os.path.abspath(__file__)], stdin=spec, stdout=output,
        stderr=subprocess.STDOUT, cwd=workdir, env=env, start_new_session=True,
        pass_fds=(results.fileno(),), **identity)
    timed_out, wait_status, peak_kb = _wait(proc.pid, limits.timeout_s)
    proc.returncode = os.waitstatus_to_exitcode(wait_status)  # reaped by os.wait4, not by Popen
    runtime = time.monotonic() - start
    results.seek(0)
    records = _parse_records(results.read(), nonce)
    output.seek(0, os.SEEK_END)
    output.seek(max(0, output.tell() - _STDERR_TAIL))
    tail = output.read().decode("utf-8", "replace")
  layers = (["nobody"] if user is not None else []) + next(
      (r["isolation"] for r in records if r["kind"] == "start"), [])
  done = next((r for r in records if r["kind"] == "done"), {})
  peak_kb = done.get("peak_kb") or peak_kb
  return _outcome(records, num_tests, timed_out, wait_status, tail, runtime, peak_kb / 1024, layers)


def _wait(pid: int, timeout_s: float) -> tuple[bool, int, int]:
  """Waits for `pid` up to the timeout, kills its process group, reaps it: (timed out, wait status,
  peak resident KB).

  The exit is observed with WNOWAIT so the pid (and hence the group id) cannot be reused before the
  group is killed; anything the program left behind in its group dies with it.
  """
  deadline = time.monotonic() + timeout_s
  delay = 0.001
  timed_out = False
  while os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None:
    if time.monotonic() >= deadline:
      timed_out = True
      break
    time.sleep(delay)
    delay = min(2 * delay, 0.005)
  peak_kb = _peak_kb(pid) if timed_out else None  # alive still: its own peak, see _peak_kb
  try:
    os.killpg(pid, signal.SIGKILL)
  except ProcessLookupError:
    pass
  _, status, usage = os.wait4(pid, 0)
  return timed_out, status, peak_kb or usage.ru_maxrss


def _peak_kb(pid: int | str) -> int | None:
  """VmHWM: the peak resident memory of the process's own address space.

  Better than wait4's ru_maxrss, which also counts the scorer's memory, copied into the child at
  fork and kept as its high-water mark through exec; that remains the fallback for a child that
  died before it could report.
  """
  try:
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
      return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
  except (OSError, StopIteration, ValueError, IndexError):
    return None


def _parse_records(data: bytes, nonce: str) -> list[dict]:
  """The child's result records: lines of JSON carrying our nonce; anything else is ignored."""
  records = []
  for line in data.splitlines():
    try:
      record = json.loads(line)
    except ValueError:
      continue
    if isinstance(record, dict) and record.get("nonce") == nonce and "kind" in record:
      records.append(record)
  return records


def _outcome(records: list[dict], num_tests: int, timed_out: bool, wait_status: int, tail: str,
             runtime: float, peak_mb: float, isolation: list[str]) -> Outcome:
  passed = [False] * num_tests
  failure = ""
  for record in records:
    if record["kind"] == "test" and 0 <= record.get("index", -1) < num_tests:
      passed[record["index"]] = bool(record["passed"])
      if not record["passed"] and not failure:
        failure = f"test case {record['index']}: {record.get('error', '')}"
  done = next((r for r in records if r["kind"] == "done"), None)
  if timed_out or _killed_by(wait_status, signal.SIGXCPU):
    status, detail = Status.TIMEOUT, "timeout" if timed_out else "CPU time limit (SIGXCPU)"
  elif done is None:
    status, detail = Status.ERROR, f"no result record ({_describe_exit(wait_status)}): {tail[-500:]}"
  elif done.get("error"):
    status, detail = Status.ERROR, str(done["error"])
  else:
    status = Status.PASSED if all(passed) else Status.FAILED
    detail = failure
  return Outcome(status, passed, detail, round(runtime, 4), round(peak_mb, 1), isolation)


def _killed_by(wait_status: int, sig: signal.Signals) -> bool:
  return os.WIFSIGNALED(wait_status) and os.WTERMSIG(wait_status) == sig


def _describe_exit(wait_status: int) -> str:
  if os.WIFSIGNALED(wait_status):
    return f"killed by {signal.Signals(os.WTERMSIG(wait_status)).name}"
  return f"exit code {os.waitstatus_to_exitcode(wait_status)}"


@functools.cache
def _site_packages() -> list[str]:
  """Our interpreter's site-packages, so that the program can import what we can (numpy...)."""
  import site
  return [p for p in site.getsitepackages() if os.path.isdir(p)]


_PROBE_LOCK = threading.Lock()


def _sandbox_user() -> tuple[int, int] | None:
  with _PROBE_LOCK:  # scorer threads start together; probe once
    return _probe_sandbox_user()


@functools.cache
def _probe_sandbox_user() -> tuple[int, int] | None:
  """`nobody`'s (uid, gid) when we are root and a trivial program runs as it; else None."""
  if os.geteuid() != 0:
    return None
  import pwd
  try:
    entry = pwd.getpwnam("nobody")
    user = (entry.pw_uid, entry.pw_gid)
  except KeyError:
    user = (65534, 65534)
  probe = {"solution": "def f():\n  return 1\n", "test": "def check(c):\n  assert c() == 1\n",
           "entry_point": "f"}
  try:  # e.g. an interpreter under a directory `nobody` cannot read
    works = _launch(probe, 1, Limits(), user).status is Status.PASSED
  except OSError:
    works = False
  if not works:
    print(f"sandbox: nobody cannot run {sys.executable}; sandboxes run as root, in their own "
          "user namespace where the kernel allows", file=sys.stderr)
  return user if works else None


# ---------------------------------------------------------------------------------------------
# Child side: runs as this file's __main__, before and then around the untrusted code.


def _child_main() -> None:
  spec = json.loads(sys.stdin.buffer.read())
  null = os.open(os.devnull, os.O_RDONLY)
  os.dup2(null, 0)
  os.close(null)
  _die_with_parent(spec["parent_pid"])
  emit = _record_writer(spec.pop("result_fd"), spec.pop("nonce"))
  sys.path.extend(spec["site_packages"])
  workdir = os.getcwd()
  layers = _enter_namespaces(workdir)  # before the rlimits: NPROC then counts only this namespace
  _set_limits(spec["limits"])
  layers += ["rlimits"] + _install_seccomp(os.getpid())  # last: it forbids unshare and mount
  emit("start", isolation=layers + ["audit"])
  _install_guard(workdir)
  _run_harness(spec["solution"], spec["test"], spec["entry_point"], emit)
  os._exit(0)  # not sys.exit: a thread or atexit hook the program left must not hang us here


def _die_with_parent(parent_pid: int) -> None:
  """SIGKILL when the scorer dies: a killed run must leave no sleeping sandbox behind."""
  import ctypes
  ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
  if os.getppid() != parent_pid:  # it died before the prctl
    os._exit(1)


def _record_writer(fd: int, nonce: str):
  """emit(kind, **fields): one whole JSON line per os.write, which the audit guard does not see.
  The final "done" record carries the process's peak memory."""
  dumps, write = json.dumps, os.write

  def emit(kind: str, **fields) -> None:
    if kind == "done":
      fields["peak_kb"] = _peak_kb("self")
    write(fd, (dumps({"nonce": nonce, "kind": kind, **fields}) + "\n").encode())

  return emit


def _enter_namespaces(workdir: str) -> list[str]:
  """New user, network and mount namespaces, where the kernel allows: no network interface is up,
  and every mount but the working directory is read-only."""
  try:
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
  except OSError:
    return []
  if libc.unshare(CLONE_NEWUSER | CLONE_NEWNET | CLONE_NEWNS) == 0:
    return ["userns", "netns"] + (["readonly-fs"] if _read_only_except(libc, workdir) else [])
  if libc.unshare(CLONE_NEWUSER | CLONE_NEWNET) == 0:
    return ["userns", "netns"]
  if libc.unshare(CLONE_NEWNET) == 0:  # root on a machine with user namespaces off
    return ["netns"]
  return []


def _read_only_except(libc, workdir: str) -> bool:
  """Remounts every mount read-only (mount_setattr, Linux 5.12+) except a bind of `workdir`."""
  import ctypes

  class MountAttr(ctypes.Structure):
    _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64),
                ("propagation", ctypes.c_uint64), ("userns_fd", ctypes.c_uint64)]

  path = workdir.encode()
  # Private first, so that nothing below propagates back to the host's mounts.
  if (libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None) != 0
      or libc.mount(path, path, None, MS_BIND | MS_REC, None) != 0):
    return False
  read_only, writable = MountAttr(attr_set=MOUNT_ATTR_RDONLY), MountAttr(attr_clr=MOUNT_ATTR_RDONLY)
  if libc.syscall(SYS_MOUNT_SETATTR, AT_FDCWD, b"/", AT_RECURSIVE, ctypes.byref(read_only),
                  ctypes.sizeof(MountAttr)) != 0:
    return False
  if libc.syscall(SYS_MOUNT_SETATTR, AT_FDCWD, path, AT_RECURSIVE, ctypes.byref(writable),
                  ctypes.sizeof(MountAttr)) != 0:
    raise OSError(ctypes.get_errno(), "cannot make the sandbox's working directory writable")
  os.chdir(workdir)  # the old cwd is the directory under the bind mount, which is now read-only
  return True


# Classic BPF: load a word of seccomp_data (nr at 0, arch at 4, args from 16), jump, return.
_LD_ABS, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06
_ALLOW, _ERRNO, _KILL = 0x7FFF0000, 0x00050000, 0x80000000
_SECCOMP_ARCHES = {"x86_64": (0xC000003E, 0), "aarch64": (0xC00000B7, 1)}  # AUDIT_ARCH_*, column
# name: (x86_64, aarch64) numbers; aarch64 has no fork or vfork.
_SYSCALLS = {
    "fork": (57, None), "vfork": (58, None), "clone": (56, 220), "clone3": (435, 435),
    "execve": (59, 221), "execveat": (322, 281), "socket": (41, 198), "socketpair": (53, 199),
    "kill": (62, 129), "tkill": (200, 130), "tgkill": (234, 131), "ptrace": (101, 117),
    "process_vm_readv": (310, 270), "process_vm_writev": (311, 271), "pidfd_open": (434, 434),
    "pidfd_send_signal": (424, 424), "pidfd_getfd": (438, 438), "mount": (165, 40),
    "umount2": (166, 39), "mount_setattr": (442, 442), "open_tree": (428, 428),
    "move_mount": (429, 429), "fsopen": (430, 430), "fsconfig": (431, 431), "fsmount": (432, 432),
    "fspick": (433, 433), "pivot_root": (155, 41), "chroot": (161, 51), "unshare": (272, 97),
    "setns": (308, 268), "bpf": (321, 280), "io_uring_setup": (425, 425),
    "io_uring_enter": (426, 426), "io_uring_register": (427, 427), "userfaultfd": (323, 282),
    "perf_event_open": (298, 241), "keyctl": (250, 219), "add_key": (248, 217),
    "request_key": (249, 218), "reboot": (169, 142), "init_module": (175, 105),
    "finit_module": (313, 273), "delete_module": (176, 106), "kexec_load": (246, 104),
    "kexec_file_load": (320, 294)}
_FILTERED_SYSCALLS = ("clone", "clone3", "kill", "tgkill")  # decided on their arguments below
_DENIED_SYSCALLS = tuple(name for name in _SYSCALLS if name not in _FILTERED_SYSCALLS)


def _install_seccomp(pid: int) -> list[str]:
  """A seccomp filter: no new processes (threads are fine), exec, sockets, signals to other
  processes, tracing, or namespace and mount changes, whatever the program reaches (ctypes, cffi)."""
  import platform
  program = _seccomp_program(platform.machine(), pid)
  if program is None:
    return []
  import ctypes

  class SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

  libc = ctypes.CDLL(None, use_errno=True)
  code = ctypes.create_string_buffer(program)
  prog = SockFprog(len(program) // 8, ctypes.addressof(code))
  if (libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
      or libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0):
    return []
  return ["seccomp"]


def _seccomp_program(machine: str, pid: int) -> bytes | None:
  """The classic-BPF filter for `machine`, or None for an architecture we have no table for."""
  if machine not in _SECCOMP_ARCHES:
    return None
  arch, column = _SECCOMP_ARCHES[machine]
  nr = {name: numbers[column] for name, numbers in _SYSCALLS.items() if numbers[column] is not None}

  def op(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("HBBI", code, jt, jf, k)

  deny, load_nr, load_arg0 = op(_RET, _ERRNO | errno.EPERM), op(_LD_ABS, 0), op(_LD_ABS, 16)
  program = [op(_LD_ABS, 4), op(_JEQ, arch, jt=1), op(_RET, _KILL), load_nr]
  if machine == "x86_64":  # the x32 ABI's numbers alias ours with this bit set
    program += [op(_JGE, 0x40000000, jf=1), deny]
  for name in _DENIED_SYSCALLS:
    if name in nr:
      program += [op(_JEQ, nr[name], jf=1), deny]
  # glibc's threads try clone3 first and fall back to clone on ENOSYS; clone3's flags are out of
  # reach of a filter (they sit behind a pointer), clone's are its first argument.
  program += [op(_JEQ, nr["clone3"], jf=1), op(_RET, _ERRNO | errno.ENOSYS)]
  program += [op(_JEQ, nr["clone"], jf=4), load_arg0, op(_JSET, CLONE_THREAD, jf=1),
              op(_RET, _ALLOW), deny]
  for name in ("kill", "tgkill"):  # only to ourselves (raise, pthread_kill)
    program += [op(_JEQ, nr[name], jf=4), load_arg0, op(_JEQ, pid, jf=1), op(_RET, _ALLOW), deny]
  program.append(op(_RET, _ALLOW))
  return b"".join(program)


def _set_limits(limits: dict) -> None:
  mb = 1024 * 1024
  cpu = int(limits["timeout_s"]) + 1  # a backstop for the wall clock
  for name, value in (("RLIMIT_AS", limits["memory_mb"] * mb), ("RLIMIT_CPU", cpu),
                      ("RLIMIT_FSIZE", limits["max_file_mb"] * mb),
                      ("RLIMIT_NPROC", limits["max_processes"]),
                      ("RLIMIT_NOFILE", limits["max_open_files"]), ("RLIMIT_CORE", 0)):
    resource.setrlimit(getattr(resource, name), (value, value))


# Audit events refused outright; event-name prefixes refused; imports refused (`_posixsubprocess`
# forks and execs with no audit event of its own).
_DENIED_EVENTS = frozenset({
    "os.fork", "os.forkpty", "os.exec", "os.spawn", "os.posix_spawn", "os.system", "os.startfile",
    "subprocess.Popen", "os.link", "os.symlink", "os.killpg", "resource.setrlimit",
    "resource.prlimit", "sys.remote_exec"})
_DENIED_PREFIXES = ("socket.", "ctypes.")
_DENIED_IMPORTS = frozenset({"_posixsubprocess", "_ctypes", "ctypes", "_cffi_backend", "cffi"})
# Events that change the file system: the indices of their path and dir_fd arguments.
_PATH_EVENTS = {
    "os.remove": ((0,), (1,)), "os.rmdir": ((0,), (1,)), "os.mkdir": ((0,), (2,)),
    "os.rename": ((0, 1), (2, 3)), "os.chmod": ((0,), (2,)), "os.chown": ((0,), (3,)),
    "os.utime": ((0,), (3,)), "os.truncate": ((0,), ()), "os.chflags": ((0,), ()),
    "os.setxattr": ((0,), ()), "os.removexattr": ((0,), ()), "shutil.rmtree": ((0,), (1,))}
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
# Unaudited ways to reach other processes: pidfds bypass os.kill's audit event.
_REMOVED = (("os", "pidfd_open"), ("posix", "pidfd_open"), ("signal", "pidfd_send_signal"),
            ("_signal", "pidfd_send_signal"))


def _install_guard(workdir: str) -> None:
  """Adds the audit hook; everything it uses is bound now, so later monkeypatching cannot reach it."""
  root = os.path.realpath(workdir)
  me = os.getpid()
  getcwd, fspath, fsdecode, isdir = os.getcwd, os.fspath, os.fsdecode, os.path.isdir
  join, realpath, readlink = os.path.join, os.path.realpath, os.readlink
  sep, devnull = os.sep, os.devnull

  def inside(path, dir_fd=None) -> bool:
    # dir_fd: the *at() calls name a path relative to an open directory, e.g. shutil.rmtree's.
    base = getcwd() if dir_fd in (None, -1) else readlink(f"/proc/self/fd/{dir_fd}")
    real = realpath(join(base, fsdecode(fspath(path))))
    return real == root or real.startswith(root + sep) or real == devnull

  def deny(event: str, args: tuple) -> None:
    raise PermissionError(f"sandbox: {event}{args!r} is not allowed")

  def hook(event: str, args: tuple) -> None:
    if event == "open":
      path, mode, flags = args
      if isinstance(path, int):
        return
      writing = (flags or 0) & _WRITE_FLAGS or any(c in (mode or "") for c in "wax+")
      # No directory fd from outside either: with dir_fd=, os.open could write past this check.
      if (writing or isdir(path)) and not inside(path):
        deny(event, args)
    elif event == "import":
      if args[0] in _DENIED_IMPORTS:
        raise ImportError(f"sandbox: import of {args[0]} is not allowed")
    elif event in _PATH_EVENTS:
      paths, dir_fds = _PATH_EVENTS[event]
      for i, path in enumerate(args[i] for i in paths):
        dir_fd = args[dir_fds[i]] if dir_fds and len(args) > dir_fds[i] else None
        if isinstance(path, int) or not inside(path, dir_fd):  # an int path is an fd: fchmod...
          deny(event, args)
    elif event == "os.kill":
      if args[0] != me:
        deny(event, args)
    elif event in _DENIED_EVENTS or event.startswith(_DENIED_PREFIXES):
      deny(event, args)

  for module_name, attribute in _REMOVED:
    module = sys.modules.get(module_name)
    if module is not None and hasattr(module, attribute):
      delattr(module, attribute)
  sys.addaudithook(hook)


def _run_harness(solution: str, test: str, entry_point: str, emit) -> None:
  """The program is `solution`, then `test`, then check(entry_point), one test case at a time."""
  program = {"__name__": "__main__", "__builtins__": __builtins__}
  try:
    exec(compile(solution, "solution.py", "exec"), program)
  except BaseException as error:  # SystemExit too: exiting before the tests is no pass
    emit("done", error=f"the program raised {_describe(error)}")
    return
  if not callable(program.get(entry_point)):
    emit("done", error=f"the program defines no function {entry_point}")
    return
  try:
    param, steps = split_check(test)
    exec(compile(test, "test.py", "exec"), program)
    # check()'s body runs in a copy of the program's globals, with the candidate bound: names the
    # body defines stay visible to its comprehensions and lambdas, as in the function itself.
    scope = {**program, param: program[entry_point]}
  except BaseException as error:
    emit("done", error=f"setting up the tests raised {_describe(error)}")
    return
  index = 0
  for is_test, statement in steps:
    code = compile(ast.Module(body=[statement], type_ignores=[]), "test.py", "exec")
    try:
      exec(code, scope)
      error = None
    except BaseException as raised:
      error = raised
    if is_test:
      emit("test", index=index, passed=error is None,
           error="" if error is None else _describe(error))
      index += 1
    elif error is not None:
      emit("done", error=f"test setup (line {statement.lineno}) raised {_describe(error)}")
      return
  emit("done", error=None)


def _describe(error: BaseException) -> str:
  try:
    message = str(error)
  except BaseException:  # the program's own exception class may fail to print
    message = ""
  return (f"{type(error).__name__}: {message}" if message else type(error).__name__)[:300]


if __name__ == "__main__":
  _child_main()
