"""Quiet entry points: a stage shows its own output, not the libraries' start-up chatter.

Each entry point runs, before TensorFlow, JAX or Beam are imported:

  import quiet
  if __name__ == "__main__":
    quiet.setup()

Unless CODELM_VERBOSE=1 or --verbose is given (setup() takes --verbose out of sys.argv and sets
CODELM_VERBOSE=1, so child processes are verbose too), setup():
- sets TF_CPP_MIN_LOG_LEVEL=2 and GRPC_VERBOSITY=ERROR where they are not set;
- ignores Python warnings raised in third-party modules, and drops their log records below ERROR
  (Beam's "Using yield and return in the process method", "apitools not found", python-snappy);
- passes file descriptor 2 through a filter process that drops the C++ lines no log level reaches,
  because TensorFlow writes them from static initialisers before it reads TF_CPP_MIN_LOG_LEVEL:
  absl's "log messages before absl::InitializeLog()" banner, absl/glog INFO and WARNING lines
  (oneDNN, cudart stub, CPU features: what TF_CPP_MIN_LOG_LEVEL=2 means), SentencePiece's INFO lines
  from tensorflow-text's own copy of it, which ignores every log setting ("precompiled_charsmap is
  empty"), and, on a machine without an NVIDIA device, TensorFlow's "failed call to cuInit" probe.
  Every other byte passes unchanged and in order: errors, fatal lines, tracebacks, progress bars.

Nothing here picks a platform: JAX and TensorFlow find GPUs and TPUs as they would without it. The
filter is a separate process, not a thread, so what a crashing process wrote last still gets out.
"""

from __future__ import annotations

import atexit
import glob
import logging
import os
import subprocess
import sys
import warnings

VERBOSE_ENV = "CODELM_VERBOSE"

# Top-level packages and modules of this repository: their warnings and log records always show.
OURS = ("data", "model", "objectives", "training", "sampling", "evaluation", "experiments", "tpu", "bench",
        "storage", "gin_flags", "quiet", "train", "sample", "demo")

# Whole lines (from their start) the filter drops; see the module docstring.
NOISE = (
    r"WARNING: All log messages before absl::InitializeLog\(\) is called are written to STDERR",
    r"[IW]\d{4} [\d:.]+ +\d+ \S+:\d+\] ",  # absl / glog INFO and WARNING (TF, XLA)
    r"To enable the following instructions: .*rebuild TensorFlow",  # the second line of a CPU-feature INFO
    r"\S+\.(cc|h)\(\d+\) LOG\((INFO|WARNING)\) ",  # SentencePiece
    # Beam's local worker processes, before they read their log level (each worker: one of each)
    r"WARNING:root:apitools not found, and bigquery client libraries are not available",
    r"INFO:__main__:Logging handler created\.",
)
CUINIT = r"E\d{4} [^\]]*\] failed call to cuInit"  # TensorFlow looking for a GPU that is not there

# The filter process: stdin is the entry point's fd 2, stdout the real stderr. Lines end at \n or \r
# (tqdm redraws with \r). A partial line waits up to 50 ms for its end (C++ streams write a line in
# pieces), then passes as it is, and so does the rest of that line (a progress bar between redraws).
_FILTER = r"""
import os, re, select, signal, sys
for number in (signal.SIGINT, signal.SIGTERM):  # Ctrl-C reaches the whole group: outlive the writer
  signal.signal(number, signal.SIG_IGN)
drop = re.compile(sys.argv[1].encode())
end = re.compile(rb"[\r\n]")
broken = False
def write(data):
  global broken
  while data and not broken:  # stderr gone: keep reading, so that the writer never blocks
    try:
      data = data[os.write(1, data):]
    except OSError:
      broken = True
buf, passing = b"", False
while True:
  if buf and not select.select([0], [], [], 0.05)[0]:
    write(buf)
    buf, passing = b"", True
    continue
  chunk = os.read(0, 1 << 16)
  if not chunk:
    break
  buf += chunk
  while (found := end.search(buf)):
    line, buf = buf[:found.end()], buf[found.end():]
    if passing or not drop.match(line):
      write(line)
    passing = False
  if passing and buf:
    write(buf)
    buf = b""
if buf and (passing or not drop.match(buf)):
  write(buf)
"""


def verbose() -> bool:
  return os.environ.get(VERBOSE_ENV, "") not in ("", "0")


def _is_ours(path: str) -> bool:
  """A source file of this repository (in a checkout or installed next to quiet.py)."""
  relative = os.path.relpath(os.path.abspath(path), os.path.dirname(os.path.abspath(__file__)))
  first = relative.split(os.sep)[0]
  return not relative.startswith("..") and (first in OURS or first[:-3] in OURS)


class _ThirdPartyBelowError(logging.Filter):
  def filter(self, record: logging.LogRecord) -> bool:
    return record.levelno >= logging.ERROR or _is_ours(record.pathname)


def _quiet_python() -> None:
  names = "|".join(OURS)
  warnings.filterwarnings("ignore", module=rf"(?!(__main__|({names}))(\.|$))")
  # The root handler Beam's first logging.warning would create, with the third-party filter on it;
  # records of every logger that propagates reach it.
  handler = logging.StreamHandler()
  handler.setFormatter(logging.Formatter(logging.BASIC_FORMAT))
  handler.addFilter(_ThirdPartyBelowError())
  logging.root.addHandler(handler)
  for name in ("apache_beam", "tensorflow"):  # in case either installs its own handler
    logging.getLogger(name).setLevel(logging.ERROR)


def _filter_fd2() -> None:
  """fd 2 into the filter process; at exit, fd 2 back and the filter drained (so a stage's last
  stderr bytes come before whatever runs next)."""
  noise = NOISE + (() if glob.glob("/dev/nvidia*") else (CUINIT,))
  try:
    saved = os.dup(2)
  except OSError:  # no fd 2
    return
  try:
    columns = os.get_terminal_size(saved).columns if os.isatty(saved) else 0
  except OSError:
    columns = 0
  if columns:  # tqdm sizes its bar from COLUMNS when stderr is a pipe
    os.environ.setdefault("COLUMNS", str(columns))
  try:
    process = subprocess.Popen([sys.executable, "-I", "-S", "-c", _FILTER, "|".join(f"(?:{n})" for n in noise)],
                               stdin=subprocess.PIPE, stdout=saved, stderr=saved)
  except OSError:
    os.close(saved)
    return
  sys.stderr.flush()
  os.dup2(process.stdin.fileno(), 2)
  pid = os.getpid()

  def restore() -> None:
    if os.getpid() != pid:  # a forked child exiting through Python
      return
    sys.stderr.flush()
    os.dup2(saved, 2)
    process.stdin.close()
    try:
      process.wait(timeout=5)
    except subprocess.TimeoutExpired:  # a child process still holds the pipe: it drains on its own
      pass

  atexit.register(restore)


def setup() -> None:
  """Quiet unless CODELM_VERBOSE=1 or --verbose; call it before TensorFlow, JAX or Beam are imported."""
  if "--verbose" in sys.argv[1:]:
    sys.argv[1:] = [a for a in sys.argv[1:] if a != "--verbose"]
    os.environ[VERBOSE_ENV] = "1"
  if verbose():
    return
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
  os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
  _quiet_python()
  _filter_fd2()


LOCAL_RUNNERS = ("Direct", "Prism", "InteractiveRunner")  # runners whose workers are this machine


def runner_name(pipeline_args: list[str] | tuple[str, ...]) -> str:
  from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions
  return str(PipelineOptions(list(pipeline_args)).view_as(StandardOptions).runner or "DirectRunner")


def runs_here(pipeline_args: list[str] | tuple[str, ...]) -> bool:
  """Whether a Beam pipeline's workers are this machine (the direct runner and its relatives)."""
  return any(name in runner_name(pipeline_args) for name in LOCAL_RUNNERS)


def beam_worker_args(pipeline_args: list[str] | tuple[str, ...]) -> list[str]:
  """A pipeline's options; a local runner's worker processes, which write to this terminal, log errors
  only (their INFO lines are some 15 a worker, repeated) unless CODELM_VERBOSE=1 or the flag is given.
  Their first few lines come before Beam reads the level, and stay."""
  args = list(pipeline_args)
  if runs_here(args) and not verbose() and not any(a.startswith("--default_sdk_harness_log_level") for a in args):
    args.append("--default_sdk_harness_log_level=ERROR")
  return args
