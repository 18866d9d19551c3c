"""The JSONL files sample.py and the evaluation tools exchange (prompts, predictions, results):
reading them line by line with errors that name the line, and one writer per output file."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import time
from collections.abc import Iterator


def parse_line(data: bytes, where: str) -> dict:
  """One JSONL line (bytes, so that non-UTF-8 is reported rather than replaced) as a JSON object;
  anything else is a ValueError that starts with `where` (file:line)."""
  try:
    text = data.decode("utf-8")
  except UnicodeDecodeError as error:
    raise ValueError(f"{where}: not UTF-8 (byte {error.start})") from None
  try:
    record = json.loads(text)
  except json.JSONDecodeError as error:
    raise ValueError(f"{where}: not valid JSON ({error.msg})") from None
  except (ValueError, RecursionError) as error:  # an integer of > 4300 digits, nesting too deep
    raise ValueError(f"{where}: not readable JSON ({type(error).__name__}: {str(error)[:80]})") from None
  if not isinstance(record, dict):
    raise ValueError(f"{where}: expected a JSON object, got {type(record).__name__}")
  return record


def read_jsonl(path: str) -> Iterator[tuple[int, dict]]:
  """(line number, record) for each non-blank line; a malformed line is a ValueError naming it."""
  with open(path, "rb") as f:
    for number, line in enumerate(f, 1):
      if not line.strip():
        continue
      yield number, parse_line(line, f"{path}:{number}")


class OutputLocked(RuntimeError):
  """Another process holds the output: the message names it (pid, host, command, since when)."""


@contextlib.contextmanager
def exclusive_output(path: str, command: str, what: str | None = None) -> Iterator[None]:
  """Held while this process is the one writer of `path`: an flock on `path`.lock, which records who
  holds it. A second writer fails at once with OutputLocked naming the holder. The lock dies with its
  process (a killed run leaves a stale file, not a stale lock). URLs (gs://) are not locked: object
  stores have no advisory locks. `what` names the output in the message (default: `path`)."""
  if "://" in path:
    yield
    return
  lock_path = path + ".lock"
  while True:
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
      fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
      holder = ""
      # The holder writes its name just after locking: give it a moment before calling it unknown.
      deadline = time.monotonic() + 2.0
      while True:
        with contextlib.suppress(OSError):
          holder = os.pread(fd, 1000, 0).decode("utf-8", "replace").strip()
        if holder or time.monotonic() > deadline:
          break
        time.sleep(0.02)
      os.close(fd)
      raise OutputLocked(f"{what or path} is being written by another run ({holder or 'unknown holder'}); wait for it "
                         "to finish or choose another output") from None
    # The holder removes the lock file when done: if this file was removed between our open and our
    # lock, it is not the lock any more; try again on the current one.
    try:
      same = os.path.samestat(os.fstat(fd), os.stat(lock_path))
    except FileNotFoundError:
      same = False
    if same:
      break
    os.close(fd)
  try:
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{command}, pid {os.getpid()} on {socket.gethostname()}, since "
                  f"{time.strftime('%Y-%m-%d %H:%M:%S')}\n".encode(), 0)
    yield
  finally:
    with contextlib.suppress(OSError):
      os.unlink(lock_path)
    os.close(fd)
