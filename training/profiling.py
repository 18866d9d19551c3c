"""Profiles on demand: a `jax.profiler` trace of chosen training steps or decode chunks, written where
TensorBoard's profile plugin (and xprof) list it: LOGDIR/plugins/profile/RUN/HOST.xplane.pb.

The profiler writes local files only, so a trace goes to a local temporary folder first and is copied
through `storage` when it stops: LOGDIR may be gs://. A run folder is named after the units it holds
(`steps_000005-000007`), the same on every host, so one session shows every traced host; a file name
carries the process index when the run has several processes (two processes on one machine would
otherwise share a host name). A rerun that traces the same steps again replaces their files.

Nothing here runs unless asked: the training hook is only added when train.profile_steps is set, and
the sampler calls its `on_chunk` only when given one. A profile is a diagnostic: a trace that cannot
start (another one is running) or be copied warns, and the run goes on.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from typing import TYPE_CHECKING, Any

import jax

import storage

if TYPE_CHECKING:
  from training.loop import StepEnd


def check_settings(first: Any, count: Any, every: Any = 0, steps_name: str = "train.profile_steps",
                   every_name: str = "train.profile_every") -> None:
  """ValueError naming the setting unless `first` >= 1 (units as logged: step N = N steps done), `count`
  >= 1 and `every` is 0 (once) or at least `count` (traces never overlap: one trace runs at a time)."""
  for name, value, minimum in ((f"{steps_name} FIRST", first, 1), (f"{steps_name} COUNT", count, 1),
                               (every_name, every, 0)):
    if isinstance(value, bool) or not isinstance(value, int):
      raise ValueError(f"{name} must be an integer, got {value!r}")
    if value < minimum:
      raise ValueError(f"{name} must be at least {minimum}, got {value}")
  if 0 < every < count:
    raise ValueError(f"{every_name} {every} is shorter than the {count} steps each profile holds "
                     f"({steps_name}): make it 0 (one profile) or at least {count}")


class Trace:
  """One jax.profiler trace: `start` into a local temporary folder, `stop` after the device work it
  is given, then its files copied to LOGDIR/plugins/profile/RUN."""

  def __init__(self, process: int | None = None):
    self.process = process  # tagged into the file names: several processes of one run; None: jax's names
    self._local: str | None = None

  @property
  def running(self) -> bool:
    return self._local is not None

  def start(self) -> None:
    local = tempfile.mkdtemp(prefix="codelm-profile-")
    try:
      jax.profiler.start_trace(local)
    except BaseException:
      shutil.rmtree(local, ignore_errors=True)
      raise
    self._local = local

  def stop(self, logdir: str, run: str, block_on: Any = None) -> str:
    """Waits for `block_on` (the traced steps' device work ends inside the trace), stops the trace and
    copies its files; returns the run folder."""
    local, self._local = self._local, None
    if local is None:
      raise RuntimeError("no trace is running")
    try:
      try:
        jax.block_until_ready(_live(block_on))
      finally:
        jax.profiler.stop_trace()  # whatever happened: the profiler allows one trace at a time
      return self._copy(local, storage.join(logdir, "plugins", "profile", run))
    finally:
      shutil.rmtree(local, ignore_errors=True)

  def _copy(self, local: str, destination: str) -> str:
    """jax's files (LOCAL/plugins/profile/TIMESTAMP/HOST.xplane.pb, HOST.trace.json.gz) into
    `destination`, HOST tagged with the process when asked."""
    files = [os.path.join(folder, name) for folder, _, names in os.walk(local) for name in names]
    xplanes = [path for path in files if path.endswith(".xplane.pb")]
    if not xplanes:
      raise RuntimeError(f"jax.profiler wrote no .xplane.pb (found {[os.path.basename(f) for f in files]})")
    host = os.path.basename(xplanes[0])[:-len(".xplane.pb")]
    tagged = host if self.process is None else f"{host}-process{self.process}"
    storage.makedirs(destination)
    for path in files:
      name = os.path.basename(path)
      if name.startswith(host + "."):
        name = tagged + name[len(host):]
      with open(path, "rb") as f:
        storage.write_atomic(storage.join(destination, name), f.read())
    return destination


class Profiler:
  """Traces units (training steps, decode chunks) `first`..`first + count - 1` and, when `every` > 0,
  the same number again every `every` units, up to `last` (None: no end). Units are counted as done:
  `after(n)` is called when n units are done (0 before the first), so a trace of unit n + 1 starts
  before that unit runs and stops once it and the rest of its window are done."""

  def __init__(self, logdir: str, what: str, folder: str, first: int, count: int, every: int = 0,
               last: int | None = None, enabled: bool = True, process: int | None = None):
    self.logdir, self.what, self.folder = logdir, what, folder  # folder: the run folder's prefix
    self.first, self.count, self.every, self.last, self.enabled = first, count, every, last, enabled
    self.written: list[str] = []  # the run folders written so far
    self._trace = Trace(process)
    self._window: tuple[int, int] | None = None  # (first unit, planned last unit) of the open trace
    self._done = 0  # units done when last told

  @property
  def running(self) -> bool:
    return self._window is not None

  def traced(self, unit: int) -> bool:
    if unit < self.first or (self.last is not None and unit > self.last):
      return False
    offset = unit - self.first
    return (offset % self.every if self.every else offset) < self.count

  def _window_end(self, unit: int) -> int:
    offset = (unit - self.first) % self.every if self.every else unit - self.first
    end = unit - offset + self.count - 1
    return end if self.last is None else min(end, self.last)

  def after(self, done: int, block_on: Any = None, stopping: bool = False) -> None:
    """`done` units done; `block_on` their device result. Stops the open trace at the end of its
    window (or when `stopping`), then starts one when unit done + 1 is traced."""
    if not self.enabled:
      return
    self._done = done
    if self._window and (done >= self._window[1] or stopping):
      self._stop(done, block_on)
    if not self._window and not stopping and self.traced(done + 1):
      self._start(done + 1)

  def close(self, block_on: Any = None) -> None:
    """Stops an open trace (a run that ended inside a window: the trace holds what ran, and its folder
    is named after the units done)."""
    if self._window:
      self._stop(self._done, block_on)

  def _start(self, unit: int) -> None:
    try:
      self._trace.start()
    except Exception as error:  # noqa: BLE001 - a diagnostic: the run goes on without it
      _warn(f"no profile of {self.what} {unit}-{self._window_end(unit)}: {type(error).__name__}: {error}")
      return
    self._window = (unit, self._window_end(unit))
    print(f"profiling {self.what} {unit}-{self._window[1]} into {storage.join(self.logdir, 'plugins', 'profile')}",
          flush=True)

  def _stop(self, done: int, block_on: Any) -> None:
    """The folder is named after the units traced (fewer than planned when the run stopped early)."""
    (first, end), self._window = self._window, None
    last = max(first, min(done, end))
    run = f"{self.folder}_{first:06d}-{last:06d}"  # zero-padded: TensorBoard lists the folders by name
    try:
      written = self._trace.stop(self.logdir, run, block_on)
    except Exception as error:  # noqa: BLE001 - a diagnostic: the run goes on without it
      _warn(f"the profile of {self.what} {first}-{last} was not written: {type(error).__name__}: {error}")
      return
    self.written.append(written)
    print(f"profile of {self.what} {first}-{last} written to {written}; open with tensorboard --logdir "
          f"{self.logdir}", flush=True)


class ProfileSteps:
  """The training hook: a trace of steps first..first + count - 1 (as logged: step N = N steps done)
  and, when `every` > 0, again every `every` steps, in LOGDIR (MODEL_DIR/tensorboard: the run's
  scalars' logdir, so TensorBoard shows a Profile tab beside them). The hook runs after step N, so a
  trace of step N + 1 starts there; one of the run's first step (start_step + 1) starts here, as the
  hooks are built just before the loop. Only process 0 traces unless `all_hosts`. Reads nothing back
  from the devices except at a trace's last step, whose state it waits for."""

  phase = "profile"

  def __init__(self, logdir: str, first: int, count: int, every: int, all_hosts: bool, start_step: int,
               train_steps: int, process_index: int | None = None):
    check_settings(first, count, every)
    index = jax.process_index() if process_index is None else process_index
    if index == 0 and first > train_steps:
      _warn(f"train.profile_steps ({first}, {count}) starts after the run's last step ({train_steps}): "
            "no step will be profiled")
    elif index == 0 and not every and first + count - 1 <= start_step:
      _warn(f"train.profile_steps ({first}, {count}) ends before this run resumes at step {start_step + 1}: "
            "no step will be profiled")
    self._profiler = Profiler(logdir, "steps", "steps", first, count, every, last=train_steps,
                              enabled=all_hosts or index == 0, process=index if jax.process_count() > 1 else None)
    self._state: Any = None  # the last state seen while a trace is open: what close(wait=True) waits for
    self._profiler.after(start_step)  # the run's first step traced: start now

  @property
  def written(self) -> list[str]:
    return self._profiler.written

  def __call__(self, end: StepEnd) -> None:
    self._profiler.after(end.step, end.state, stopping=end.stop)
    self._state = end.state if self._profiler.running else None

  def close(self, wait: bool) -> None:
    """Stops an open trace (training ended inside a window); `wait`: after the last step's device work."""
    self._profiler.close(self._state if wait else None)
    self._state = None


def _live(tree: Any) -> list:
  """The leaves of `tree` still there to wait for: arrays donated to a later step (a state kept past
  its step, as close() may hold) are deleted, and waiting on them raises."""
  return [x for x in jax.tree.leaves(tree) if not (isinstance(x, jax.Array) and x.is_deleted())]


def _warn(message: str) -> None:
  print(f"warning: {message}", file=sys.stderr, flush=True)
