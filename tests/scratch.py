"""Scratch folders that outlive one test (a worker's corpus templates, tests/code_corpus.py): removed
when the process exits, and, since a process killed with SIGKILL runs no exit handler, removed by the
next test process that finds its owner gone."""

import atexit
import glob
import os
import shutil
import tempfile


def _running(pid: int) -> bool:
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  except PermissionError:  # another user's process: running
    return True
  return True


def folder(kind: str) -> str:
  """A new folder codelm-test-KIND-PID-XXXX in the temporary directory; those of any kind whose PID
  is gone are removed first (mkdtemp's suffix has no "-", so the PID is the second field from the end)."""
  for stale in glob.glob(os.path.join(tempfile.gettempdir(), "codelm-test-*-*-*")):
    pid = os.path.basename(stale).rsplit("-", 2)[1]
    if pid.isdigit() and not _running(int(pid)):
      shutil.rmtree(stale, ignore_errors=True)
  path = tempfile.mkdtemp(prefix=f"codelm-test-{kind}-{os.getpid()}-")
  atexit.register(shutil.rmtree, path, ignore_errors=True)
  return path
