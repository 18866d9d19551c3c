"""Every user-supplied path is read and written here: local paths with the standard library, URLs
(gs://, s3:// with tensorflow-io, hdfs://, ram://) through tf.io.gfile, with the same calls.

JSONL files follow one rule for a torn last line. A file this project appends to (predictions,
results, metrics) can end in half a line when a run is killed mid-write. So: a last line that has no
newline and does not parse as JSON is a torn write; `read_jsonl` skips it (with a warning naming
file:line) and `append_jsonl` cuts it off before appending. Any other malformed line is an error
naming file:line. A last line without a newline that does parse (a hand-written file) is a record.

Object stores have no rename and no append: there `write_atomic` writes a temporary object and
copies it over (readers never see half a file), and an append rewrites the object.

One writer per output (`exclusive_output`): an flock beside a local output; on gs://, a lock object
created only if absent (GCS's ifGenerationMatch=0) and kept by a lease its holder renews, each renewal
conditional on the generation it last wrote. Other object stores (s3://, hdfs://) are not locked.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import posixpath
import socket
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from typing import IO, Any, Callable


def is_url(path: str) -> bool:
  return "://" in str(path)


def _gfile():
  import tensorflow as tf  # only for URLs: local runs (and the GPU bench) need no TensorFlow here

  return tf.io.gfile


def join(directory: str, *names: str) -> str:
  """os.path.join for local paths; for URLs "/"-joined ("gs://b/d/" + "x" -> "gs://b/d/x")."""
  if is_url(directory):
    return posixpath.join(directory, *names)
  return os.path.join(directory, *names)


def dirname(path: str) -> str:
  return posixpath.dirname(path.rstrip("/")) if is_url(path) else os.path.dirname(os.path.abspath(path))


def resolve(path: str) -> str:
  """A local path made absolute (so it means the same from any working directory); a URL as given."""
  return path if is_url(path) else os.path.abspath(path)


def exists(path: str) -> bool:
  return _gfile().exists(path) if is_url(path) else os.path.exists(path)


def isdir(path: str) -> bool:
  return _gfile().isdir(path) if is_url(path) else os.path.isdir(path)


def isfile(path: str) -> bool:
  return exists(path) and not isdir(path)


def makedirs(path: str) -> None:
  if is_url(path):
    _gfile().makedirs(path)
  else:
    os.makedirs(path, exist_ok=True)


def listdir(path: str) -> list[str]:
  """Entry names (no trailing "/", which gfile gives directories of object stores), sorted."""
  names = _gfile().listdir(path) if is_url(path) else os.listdir(path)
  return sorted(name.rstrip("/") for name in names)


def glob(pattern: str) -> list[str]:
  if is_url(pattern):
    return sorted(_gfile().glob(pattern))
  import glob as glob_

  return sorted(glob_.glob(pattern))


def walk(top: str, onerror: Callable[[OSError], None] | None = None
         ) -> Iterator[tuple[str, list[str], list[str]]]:
  """os.walk, top-down: (directory, subdirectory names, file names); prune the subdirectories in place."""
  if is_url(top):
    return _gfile().walk(top, topdown=True, onerror=onerror)
  return os.walk(top, topdown=True, onerror=onerror)


def remove(path: str) -> None:
  if is_url(path):
    _gfile().remove(path)
  else:
    os.remove(path)


def rmtree(path: str) -> None:
  if is_url(path):
    _gfile().rmtree(path)
  else:
    import shutil

    shutil.rmtree(path)


def rename(source: str, target: str) -> None:
  """Replaces `target`. On object stores a copy and a delete: not atomic, but target is whole."""
  if is_url(source) or is_url(target):
    _gfile().rename(source, target, overwrite=True)
  else:
    os.replace(source, target)


def open_file(path: str, mode: str = "r") -> IO:
  """A file object for text ("r", "w", "a") or bytes ("rb", "wb", "ab")."""
  if is_url(path):
    return _gfile().GFile(path, mode)
  return open(path, mode, **({} if "b" in mode else {"encoding": "utf-8"}))


def read_bytes(path: str) -> bytes:
  with open_file(path, "rb") as f:
    return f.read()


def read_text(path: str) -> str:
  return read_bytes(path).decode("utf-8")


GZIP_MAGIC = b"\x1f\x8b"  # no UTF-8 text starts so: 0x8b is never a character's first byte


def read_data(path: str, where: str | None = None) -> bytes:
  """read_bytes, decompressed when the bytes are gzip (told by their magic, whatever the file's name:
  `x.jsonl.gz`, or gzip saved as `x.jsonl`). A damaged gzip named `.gz` is a ValueError starting
  with `where` (default: the path); one named otherwise is returned as the bytes it is, so a reader
  names its lines (the magic is no UTF-8 text: its first line is refused as such)."""
  data = read_bytes(path)
  if data[:2] != GZIP_MAGIC:
    return data
  import gzip
  import zlib

  try:
    return gzip.decompress(data)
  except (OSError, EOFError, zlib.error) as error:
    if not path.endswith(".gz"):
      return data
    raise ValueError(f"{where or path}: gzip that cannot be read ({type(error).__name__}: {str(error)[:120]})") from None


def write_atomic(path: str, data: str | bytes) -> None:
  """Written whole or not at all: a temporary file beside `path`, then a rename over it, so a reader
  (or a killed run) never sees half a file."""
  temporary = f"{path}.tmp-{os.getpid()}"
  try:
    with open_file(temporary, "wb") as f:
      f.write(data.encode("utf-8") if isinstance(data, str) else data)
    rename(temporary, path)
  except BaseException:
    if exists(temporary):
      remove(temporary)
    raise


def write_json(path: str, value) -> None:
  write_atomic(path, json.dumps(value, indent=2, sort_keys=True) + "\n")


def read_json(path: str):
  return json.loads(read_bytes(path))


def save_figure(figure, path: str, dpi: int = 110) -> str:
  """A matplotlib figure as a PNG at `path` (local or URL), written atomically."""
  import io

  buffer = io.BytesIO()
  figure.savefig(buffer, format="png", dpi=dpi)
  write_atomic(path, buffer.getvalue())
  return path


# ---------------------------------------------------------------------------------------------
# JSONL: the torn-last-line rule (module docstring).


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


def jsonl_lines(data: bytes) -> list[bytes]:
  """Lines with their newlines kept (bytes.splitlines would also split at \\r, \\x0b, \\x1c …)."""
  lines = data.split(b"\n")
  return [line + b"\n" for line in lines[:-1]] + ([lines[-1]] if lines[-1] else [])


def torn_tail(data: bytes) -> int:
  """The length of `data` without a torn last line (the whole length when there is none)."""
  end = data.rfind(b"\n") + 1
  if end == len(data):
    return end
  try:
    parse_line(data[end:], "")
    return len(data)  # a complete record that lacks only its newline
  except ValueError:
    return end


def read_jsonl_lines(path: str, warn: Callable[[str], None] | None = None) -> Iterator[tuple[int, bytes]]:
  """(line number, raw line with its newline) of each non-blank line, without a torn last line; gzip
  is read through (read_data)."""
  data = read_data(path, f"{path}:1")  # (a JSONL reader's errors name a line)
  end = torn_tail(data)
  if end < len(data):
    number = data.count(b"\n") + 1
    (warn or _warn)(f"{path}:{number}: skipped a torn last line (a write cut short: {len(data) - end} bytes, "
                    "no newline)")
  for number, line in enumerate(jsonl_lines(data[:end]), 1):
    if line.strip():
      yield number, line


def read_jsonl(path: str, warn: Callable[[str], None] | None = None) -> Iterator[tuple[int, dict]]:
  """(line number, record) for each non-blank line; a malformed line is a ValueError naming
  file:line, except a torn last line, which is skipped with a warning."""
  for number, line in read_jsonl_lines(path, warn):
    yield number, parse_line(line, f"{path}:{number}")


def read_results(path: str, key: Callable[[dict], Any]) -> dict:
  """A resumable results JSONL (one record per finished item) as {key(record): record}, the later of
  two lines winning. A torn last line (a kill mid-write) is cut off; any other unreadable line, or
  one `key` refuses (KeyError, TypeError, ValueError, or None), is ignored: that item is redone."""
  if not exists(path):
    return {}
  repair_torn_tail(path)
  results = {}
  for _, line in read_jsonl_lines(path):
    try:
      record = json.loads(line)
      found = key(record)
      if found is not None:
        results[found] = record  # an unhashable key is a TypeError too
    except (ValueError, KeyError, TypeError):
      continue
  return results


def append_jsonl(path: str, records: Iterable[dict]) -> None:
  """Appends one line per record (see append_lines)."""
  append_lines(path, [json.dumps(record, ensure_ascii=False) + "\n" for record in records])


def append_lines(path: str, lines: list[str]) -> None:
  """Appends whole lines in one write, first cutting off a torn last line so they start on a line of
  their own; a local file is fsync'ed, so what was appended survives a crash of the machine."""
  repair_torn_tail(path)
  if is_url(path):
    with open_file(path, "a") as f:  # object stores: gfile rewrites the object
      f.write("".join(lines))
    return
  with open(path, "a", encoding="utf-8") as f:
    f.write("".join(lines))
    f.flush()
    os.fsync(f.fileno())


class JsonlAppender:
  """An open JSONL file appended to record by record (predictions, results, metrics): a torn last
  line is cut off on opening; each record is flushed as it is written."""

  def __init__(self, path: str):
    self.path = path
    repair_torn_tail(path)
    self._file = open_file(path, "a")

  def write(self, record: dict) -> None:
    self._file.write(json.dumps(record, ensure_ascii=False) + "\n")
    self._file.flush()

  def close(self) -> None:
    self._file.close()

  def __enter__(self) -> "JsonlAppender":
    return self

  def __exit__(self, *exc) -> None:
    self.close()


def repair_torn_tail(path: str) -> bool:
  """Cuts a torn last line off `path` (module docstring); True if there was one."""
  if not exists(path):
    return False
  if not is_url(path):  # the common case costs one byte: a file that ends in a newline is whole
    with open(path, "rb") as f:
      f.seek(0, os.SEEK_END)
      if f.tell() == 0 or (f.seek(-1, os.SEEK_END), f.read(1))[1] == b"\n":
        return False
  data = read_bytes(path)
  end = torn_tail(data)
  if end == len(data):
    return False
  if is_url(path):
    write_atomic(path, data[:end])
  else:
    with open(path, "r+b") as f:
      f.truncate(end)
  return True


# ---------------------------------------------------------------------------------------------
# One writer per output.


class OutputLocked(RuntimeError):
  """Another process holds the output: the message names it (pid, host, command, since when)."""


class Held:
  """What `exclusive_output` yields. `verify()` raises OutputLocked when this process no longer holds
  the output (a gs:// lease taken over while it was stalled): a writer calls it before each commit it
  must not share (a checkpoint step). A local flock cannot be lost: there it does nothing."""

  def verify(self) -> None:
    pass


@contextlib.contextmanager
def exclusive_output(path: str, command: str, what: str | None = None) -> Iterator[Held]:
  """Held while this process is the one writer of `path`: a lock on `path`.lock, which records who
  holds it. A second writer fails at once with OutputLocked naming the holder. Local paths: an flock,
  which dies with its process (a killed run leaves a stale file, not a stale lock). gs://: a leased
  object (`BucketLock`); a killed run's lock expires LOCK_LEASE_S after its last renewal. Other URLs
  are not locked. `what` names the output in the message (default: `path`)."""
  holder = f"{command}, pid {os.getpid()} on {socket.gethostname()}, since {time.strftime('%Y-%m-%d %H:%M:%S')}"
  if path.startswith("gs://"):
    lock = BucketLock(path + ".lock", holder, what or path)
    lock.acquire()
    try:
      yield lock
    finally:
      lock.release()
    return
  if is_url(path):
    yield Held()
    return
  lock_path = path + ".lock"
  while True:
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
      fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
      found = ""
      # The holder writes its name just after locking: give it a moment before calling it unknown.
      deadline = time.monotonic() + 2.0
      while True:
        with contextlib.suppress(OSError):
          found = os.pread(fd, 1000, 0).decode("utf-8", "replace").strip()
        if found or time.monotonic() > deadline:
          break
        time.sleep(0.02)
      os.close(fd)
      raise OutputLocked(f"{what or path} is being written by another run ({found or 'unknown holder'}); wait for it "
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
    os.pwrite(fd, f"{holder}\n".encode(), 0)
    yield Held()
  finally:
    with contextlib.suppress(OSError):
      os.unlink(lock_path)
    os.close(fd)


LOCK_LEASE_S = float(os.environ.get("CODELM_LOCK_LEASE_S", 120))  # a gs:// lock outlives its holder by this


def _machine() -> str:
  """This kernel's boot and pid namespace: where a pid names the same process (a container on one
  host has the host's boot id but its own pids)."""
  try:
    with open("/proc/sys/kernel/random/boot_id") as f:
      return f"{f.read().strip()}:{os.stat('/proc/self/ns/pid').st_ino}"
  except OSError:
    return ""  # no /proc: never judged gone, only expired


def _running(pid) -> bool:
  try:
    os.kill(int(pid), 0)
  except (TypeError, ValueError, ProcessLookupError):
    return False
  except PermissionError:
    return True  # another user's process
  return True


class BucketLock(Held):
  """One writer of a gs:// output. The lock object is created only if absent (ifGenerationMatch=0) and
  holds {"holder", "renewed", "machine", "pid"}; a thread renews it every LOCK_LEASE_S / 6, each write
  conditional on the generation this process wrote last, so a renewal fails (and `verify` raises) once
  another run has taken it over. A 412 on a write of this process's own that landed (the client
  retries a conditional upload after a timeout) finds this holder there and keeps the lock. A run
  finding a lock renewed less than LOCK_LEASE_S ago refuses, unless its holder was a process on this
  machine that is gone (a run killed and resumed at once); an older one (its holder killed or
  preempted elsewhere) it takes over, conditional on the generation it read, with a warning."""

  def __init__(self, url: str, holder: str, what: str):
    from google.cloud import storage as gcs  # only for gs:// locks

    bucket, _, name = url[len("gs://"):].partition("/")
    self.url, self.holder, self.what = url, holder, what
    self._blob = gcs.Client().bucket(bucket).blob(name)
    self._generation: int | None = None
    self._renewed_at = 0.0  # time.monotonic() when the last write that held was sent
    self._lost: str | None = None
    self._mutex = threading.Lock()
    self._stop = threading.Event()
    self._thread: threading.Thread | None = None

  def _write(self, if_generation_match: int) -> None:
    body = json.dumps({"holder": self.holder, "renewed": time.time(), "machine": _machine(), "pid": os.getpid()})
    started = time.monotonic()
    self._blob.upload_from_string(body, content_type="application/json", if_generation_match=if_generation_match)
    self._generation, self._renewed_at = self._blob.generation, started

  def _read(self) -> tuple[dict, int] | None:
    from google.api_core import exceptions

    try:
      data = self._blob.download_as_bytes()
    except exceptions.NotFound:
      return None
    try:
      found = json.loads(data)
    except ValueError:
      found = {}
    return (found if isinstance(found, dict) else {}), int(self._blob.generation)

  def _mine(self, found: dict) -> bool:
    return (found.get("holder"), found.get("pid"), found.get("machine")) == (self.holder, os.getpid(), _machine())

  def _refusal(self, found: dict, age: float) -> OutputLocked:
    return OutputLocked(f"{self.what} is being written by another run ({found.get('holder') or 'unknown holder'}; "
                        f"it renewed {self.url} {age:.0f} s ago); wait for it to finish or choose another output. "
                        f"A run killed on another machine leaves the lock until {LOCK_LEASE_S:.0f} s after its "
                        "last renewal")

  def acquire(self) -> None:
    from google.api_core import exceptions

    while True:
      try:
        self._write(if_generation_match=0)
        break
      except exceptions.PreconditionFailed:
        pass
      read = self._read()
      if read is None:
        continue  # released in between: try to create it again
      found, generation = read
      if self._mine(found):  # our create landed and its retry was refused
        self._generation, self._renewed_at = generation, time.monotonic()
        break
      age = time.time() - float(found.get("renewed") or 0)
      gone = found.get("machine") == _machine() and not _running(found.get("pid"))
      if age < LOCK_LEASE_S and not gone:
        raise self._refusal(found, age)
      try:
        self._write(if_generation_match=generation)
      except exceptions.PreconditionFailed:
        continue  # another run took it over first (or its holder renewed it): look again
      why = ("is no longer running" if gone else
             f"last renewed it {age:.0f} s ago, more than the {LOCK_LEASE_S:.0f} s lease")
      _warn(f"took over {self.url}: its holder ({found.get('holder') or 'unknown'}) {why}")
      break
    self._thread = threading.Thread(target=self._renew_until_released, name="codelm-lock", daemon=True)
    self._thread.start()

  def _renew(self) -> None:
    from google.api_core import exceptions

    with self._mutex:
      if self._lost:
        return
      try:
        self._write(if_generation_match=self._generation)
      except exceptions.PreconditionFailed:
        read = self._read()
        if read is not None and self._mine(read[0]):  # our renewal landed and its retry was refused
          self._generation, self._renewed_at = read[1], time.monotonic()
          return
        holder = (read[0].get("holder") if read else None) or "unknown holder"
        self._lost = f"{self.what}: another run ({holder}) took over {self.url}; this run stopped writing there"

  def _renew_until_released(self) -> None:
    while not self._stop.wait(LOCK_LEASE_S / 6):
      try:
        self._renew()
      except Exception as error:  # noqa: BLE001 - a failed renewal is retried; the lease allows 5 more
        _warn(f"could not renew {self.url} ({type(error).__name__}: {str(error)[:200]}); retrying")

  def verify(self) -> None:
    """A renewal now, synchronously: raises OutputLocked when another run holds the lock, or when no
    renewal has held for a lease (GCS unreachable: another run may have taken it over by now)."""
    try:
      self._renew()
    except Exception as error:  # noqa: BLE001 - unreachable for now: the lease still covers this run
      silent = time.monotonic() - self._renewed_at
      if silent >= LOCK_LEASE_S:
        raise OutputLocked(f"{self.what}: {self.url} could not be renewed for {silent:.0f} s ({type(error).__name__}: "
                           f"{str(error)[:200]}); another run may hold it now") from error
      _warn(f"could not renew {self.url} ({type(error).__name__}); its lease holds for another "
            f"{LOCK_LEASE_S - silent:.0f} s")
    if self._lost:
      raise OutputLocked(self._lost)

  def release(self) -> None:
    self._stop.set()
    if self._thread is not None:
      self._thread.join()
    if self._lost or self._generation is None:
      return
    with contextlib.suppress(Exception):  # a lock left behind expires with its lease
      self._blob.delete(if_generation_match=self._generation)


def _warn(message: str) -> None:
  print(f"warning: {message}", file=sys.stderr, flush=True)
