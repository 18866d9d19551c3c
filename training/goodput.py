"""Where a run's wall time goes (its goodput, as MaxText's goodput recorder reports it): per logging
window and for the whole run, the seconds of train steps, compilation, input wait, checkpoints,
evaluation, logging, profiling and start-up, and the steps a restart had to redo.

  python -m training.goodput MODEL_DIR [--json]     # a run's breakdown, all its restarts together

The rule. The host does one thing at a time (builds a batch, dispatches a step, runs a hook) and the
device runs the dispatched train steps behind it. A second of wall time is "step" when the device is
running a train step, whatever the host does meanwhile: a batch built while the device works costs
nothing. Otherwise the device is idle and the second belongs to what the host is doing then:
"compile" inside a JAX trace, lowering or compilation, else the phase the host is in ("input",
"checkpoint", "evaluation", ...), else "other". So a window's phases sum to its wall time, and a slow
input pipeline shows as input wait only where it leaves the device idle.

How it is measured without a host round trip in the loop: a watcher thread blocks on each step's loss
(`block_until_ready`: no transfer) and notes when it finished; JAX reports every trace, lowering and
backend compilation as a time span (jax.monitoring, "/jax/core/compile/..."); the loop and the hooks
mark their phases. The breakdown is computed at log steps, from those intervals.
"""

from __future__ import annotations

import argparse
import bisect
import contextlib
import json
import queue
import sys
import threading
import time
from typing import Iterator, Mapping, Sequence

import jax
from jax import monitoring

import storage

PHASES = ("step", "compile", "input", "checkpoint", "evaluation", "logging", "profile", "startup", "other")
COMPILE_EVENTS = frozenset({"/jax/core/compile/jaxpr_trace_duration",
                            "/jax/core/compile/jaxpr_to_mlir_module_duration",
                            "/jax/core/compile/backend_compile_duration"})
PREFIX = "time/"  # metrics.jsonl keys: time/<phase>_s, time/window_s, time/window_steps, time/lost_*

Interval = tuple[float, float]


def _merge(intervals: Sequence[Interval]) -> list[Interval]:
  """Sorted, non-overlapping union of `intervals`."""
  merged: list[list[float]] = []
  for start, end in sorted(intervals):
    if end <= start:
      continue
    if merged and start <= merged[-1][1]:
      merged[-1][1] = max(merged[-1][1], end)
    else:
      merged.append([start, end])
  return [(a, b) for a, b in merged]


def _clip(intervals: Sequence[Interval], start: float, end: float) -> list[Interval]:
  return [(max(a, start), min(b, end)) for a, b in intervals if b > start and a < end]


def _overlap(span: Interval, merged: list[Interval], starts: list[float]) -> float:
  """Seconds of `span` inside the sorted, disjoint `merged` (`starts`: their start times)."""
  a, b = span
  total, i = 0.0, max(bisect.bisect_right(starts, a) - 1, 0)
  while i < len(merged) and merged[i][0] < b:
    total += max(0.0, min(b, merged[i][1]) - max(a, merged[i][0]))
    i += 1
  return total


def _subtract(intervals: list[Interval], remove: list[Interval]) -> list[Interval]:
  """`intervals` minus `remove` (both sorted and disjoint)."""
  out, j = [], 0
  for a, b in intervals:
    while j < len(remove) and remove[j][1] <= a:
      j += 1
    k, cursor = j, a
    while k < len(remove) and remove[k][0] < b:
      if remove[k][0] > cursor:
        out.append((cursor, remove[k][0]))
      cursor = max(cursor, remove[k][1])
      k += 1
    if cursor < b:
      out.append((cursor, b))
  return out


def attribute(start: float, end: float, busy: Sequence[Interval], compiles: Sequence[Interval],
              spans: Sequence[tuple[float, float, str]]) -> dict[str, float]:
  """Seconds per phase of [start, end]: `busy` (the device running train steps) is "step"; of the
  rest, `compiles` is "compile"; of the rest, each host span (disjoint) counts for its phase; what
  no interval covers is "other". The values sum to end - start."""
  busy_m = _merge(_clip(busy, start, end))
  compile_m = _subtract(_merge(_clip(compiles, start, end)), busy_m)
  seconds = dict.fromkeys(PHASES, 0.0)
  seconds["step"] = sum(b - a for a, b in busy_m)
  seconds["compile"] = sum(b - a for a, b in compile_m)
  busy_starts, compile_starts = [a for a, _ in busy_m], [a for a, _ in compile_m]
  for a, b, name in spans:
    a, b = max(a, start), min(b, end)
    if b > a:
      seconds[name] += (b - a) - _overlap((a, b), busy_m, busy_starts) - _overlap((a, b), compile_m, compile_starts)
  seconds["other"] = max(0.0, (end - start) - sum(v for k, v in seconds.items() if k != "other"))
  return seconds


class Timeline:
  """The intervals of one training process: host phases (`phase`), the device's train steps
  (`dispatched`) and JAX's compilations; `window()` turns those since its last call into seconds per
  phase. Times are time.time() seconds, as JAX's compile spans are."""

  def __init__(self, began: float | None = None):
    self._lock = threading.Lock()
    self._window_start = time.time() if began is None else began
    self._spans: list[tuple[float, float, str]] = []  # closed host segments, disjoint
    self._open: list[list] = []  # [name, segment start] of the open phases, innermost last
    self._compiles: list[Interval] = []
    self._busy: list[Interval] = []
    self._last_done = 0.0
    self._watched: queue.Queue = queue.Queue()
    self.totals = dict.fromkeys(PHASES, 0.0)  # every window so far
    self._closed = False
    self._watcher = threading.Thread(target=self._watch, name="goodput-watcher", daemon=True)
    self._watcher.start()
    monitoring.register_event_time_span_listener(self._on_span)

  def _on_span(self, event: str, start: float, end: float, **kwargs) -> None:
    del kwargs
    if event in COMPILE_EVENTS:
      with self._lock:
        self._compiles.append((start, end))

  @contextlib.contextmanager
  def phase(self, name: str) -> Iterator[list]:
    """Marks what the host does inside as `name` (one of PHASES); an inner phase wins over an outer
    one. Yields [name, start]: setting item 0 relabels the phase (e.g. start-up that turned out to be
    a checkpoint restore)."""
    if name not in PHASES:
      raise ValueError(f"unknown phase {name!r}; one of {', '.join(PHASES)}")
    now = time.time()
    with self._lock:
      if self._open:  # the outer phase's segment ends here
        outer = self._open[-1]
        self._spans.append((outer[1], now, outer[0]))
      current = [name, now]
      self._open.append(current)
    try:
      yield current
    finally:
      now = time.time()
      with self._lock:
        self._open.pop()
        self._spans.append((current[1], now, current[0]))
        if self._open:
          self._open[-1][1] = now

  def add_span(self, name: str, start: float, end: float) -> None:
    """A phase that happened before this Timeline existed (train.py's preparation)."""
    with self._lock:
      self._spans.append((start, end, name))

  def dispatched(self, marker: jax.Array) -> None:
    """A train step was dispatched; `marker` (its loss) is ready when the device has run it."""
    self._watched.put((marker, time.time()))

  def _watch(self) -> None:
    while True:
      marker, dispatched_at = self._watched.get()
      try:
        if marker is None:
          return
        try:
          marker.block_until_ready()
        except Exception:  # noqa: BLE001 - the loop's own read of the metrics reports a failed step
          pass
        done = time.time()
        with self._lock:
          begin = max(dispatched_at, self._last_done)  # the device runs the steps one after another
          if done > begin:
            self._busy.append((begin, done))
          self._last_done = done
      finally:
        self._watched.task_done()

  def window(self) -> dict[str, float]:
    """Seconds per phase since the last call (or the start), summing to the wall time between.
    Waits until the watcher has seen every dispatched step finish (quick after the log step's own
    read of the metrics)."""
    self._watched.join()
    now = time.time()
    with self._lock:
      start, self._window_start = self._window_start, now
      open_segments = [(segment[1], now, segment[0]) for segment in self._open[-1:]]
      seconds = attribute(start, now, self._busy, self._compiles, self._spans + open_segments)
      # Keep only what may still reach into the next window.
      self._spans = [s for s in self._spans if s[1] > now]
      self._busy = [b for b in self._busy if b[1] > now]
      self._compiles = [c for c in self._compiles if c[1] > now]
      if self._open:  # the open phase's segment so far is counted: it goes on from here
        self._open[-1][1] = now
    for name, value in seconds.items():
      self.totals[name] += value
    return seconds

  def close(self) -> None:
    """Stops listening and watching (once; a with-block closes it however the run ends)."""
    if self._closed:
      return
    self._closed = True
    monitoring.unregister_event_time_span_listener(self._on_span)
    self._watched.put((None, 0.0))
    self._watcher.join(timeout=5)

  def __enter__(self) -> Timeline:
    return self

  def __exit__(self, *exc) -> None:
    self.close()


def window_record(seconds: Mapping[str, float], steps: int) -> dict[str, float]:
  """A window's metrics.jsonl fields: time/<phase>_s for each phase that took time, the wall time
  and the steps the window covered."""
  record = {f"{PREFIX}{name}_s": value for name, value in seconds.items() if value > 0}
  record[f"{PREFIX}window_s"] = sum(seconds.values())
  record[f"{PREFIX}window_steps"] = steps
  return record


def shares_line(seconds: Mapping[str, float]) -> str:
  """'step 91.2%  compile 6.0%  input 1.1% ...' (phases of at least 0.1%, largest first)."""
  total = sum(seconds.values()) or 1.0
  parts = sorted(((v / total, k) for k, v in seconds.items() if v / total >= 0.001), reverse=True)
  return "  ".join(f"{name} {100 * share:.1f}%" for share, name in parts)


def device_memory() -> dict[str, float]:
  """Bytes in use and the peak on this host's busiest device, where the backend reports them (GPU,
  TPU; XLA:CPU reports nothing)."""
  stats = [s for s in (d.memory_stats() for d in jax.local_devices()) if s]
  if not stats:
    return {}
  return {"memory/bytes_in_use": float(max(s.get("bytes_in_use", 0) for s in stats)),
          "memory/peak_bytes_in_use": float(max(s.get("peak_bytes_in_use", 0) for s in stats))}


def lost_to_restart(records: Sequence[Mapping], step: int) -> dict[str, float] | None:
  """What a run resuming from its checkpoint at `step` redoes: the steps the previous run logged past
  it and their share of those windows' wall time. At least that many: steps done after the last
  logged one are not on record."""
  past = [r for r in records if isinstance(r.get("step"), int) and r["step"] > step
          and f"{PREFIX}window_s" in r and r.get(f"{PREFIX}window_steps")]
  if not past:
    return None
  seconds = 0.0
  for record in past:
    covered = record[f"{PREFIX}window_steps"]
    first = record["step"] - covered  # the window covered steps first+1 .. record["step"]
    seconds += record[f"{PREFIX}window_s"] * (record["step"] - max(first, step)) / covered
  return {f"{PREFIX}lost_steps": float(max(r["step"] for r in past) - step), f"{PREFIX}lost_s": seconds}


def _bad_times(record: Mapping) -> str | None:
  """Why a record's time fields cannot be summed (not a number, negative, not finite), or None."""
  for key, value in record.items():
    if key.startswith(PREFIX) and key.endswith("_s"):
      if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0 or value == float("inf"):
        return f"{key} is {json.dumps(value)[:40]}: a time must be a finite number of seconds, not negative"
  return None


def read_records(path: str) -> tuple[list[dict], list[str]]:
  """The records of a metrics.jsonl, and why each line left out was (not JSON, not an object, a time
  that is no duration): a damaged line costs its window, not the breakdown."""
  records, skipped = [], []
  for number, line in storage.read_jsonl_lines(path):
    where = f"{path}:{number}"
    try:
      record = storage.parse_line(line, where)
    except ValueError as error:
      skipped.append(str(error))
      continue
    why = _bad_times(record)
    if why:
      skipped.append(f"{where}: {why}")
      continue
    records.append(record)
  return records, skipped


def run_breakdown(records: Sequence[Mapping]) -> dict:
  """A run's breakdown from its metrics.jsonl records, every restart included: seconds per phase,
  the total, steps and seconds lost to restarts, goodput (the step share of all of it, lost time
  counted in the total), and the peak device memory where logged."""
  seconds = dict.fromkeys(PHASES, 0.0)
  lost_steps = lost_s = 0.0
  peak = None
  for record in records:
    for name in PHASES:
      seconds[name] += float(record.get(f"{PREFIX}{name}_s", 0.0))
    lost_steps += float(record.get(f"{PREFIX}lost_steps", 0.0))
    lost_s += float(record.get(f"{PREFIX}lost_s", 0.0))
    if "memory/peak_bytes_in_use" in record:
      peak = max(peak or 0.0, float(record["memory/peak_bytes_in_use"]))
  total = sum(seconds.values())
  steps = max((r["step"] for r in records if isinstance(r.get("step"), int)), default=0)
  return {"seconds": seconds, "total_s": total, "steps": steps, "lost_steps": lost_steps, "lost_s": lost_s,
          "goodput": seconds["step"] / (total + lost_s) if total + lost_s else 0.0, "peak_bytes_in_use": peak}


def table(breakdown: Mapping) -> str:
  """The breakdown as a text table (seconds and % of wall time)."""
  total = breakdown["total_s"] or 1.0
  lines = [f"{'phase':<12}{'seconds':>12}{'share':>9}"]
  for name in PHASES:
    value = breakdown["seconds"][name]
    if value:
      lines.append(f"{name:<12}{value:>12.1f}{100 * value / total:>8.1f}%")
  lines.append(f"{'wall time':<12}{breakdown['total_s']:>12.1f}{100.0:>8.1f}%")
  lines.append(f"steps {breakdown['steps']}; goodput (train-step share of wall time and time lost to restarts) "
               f"{100 * breakdown['goodput']:.1f}%")
  if breakdown["lost_steps"]:
    lines.append(f"lost to restarts: {breakdown['lost_steps']:.0f} steps redone, {breakdown['lost_s']:.1f} s "
                 "(at least: steps after a run's last log are not on record)")
  if breakdown["peak_bytes_in_use"]:
    lines.append(f"peak device memory {breakdown['peak_bytes_in_use'] / 2**30:.2f} GiB")
  return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("model_dir", help="a train.py MODEL_DIR (local or gs://)")
  parser.add_argument("--json", action="store_true", help="print the breakdown as JSON")
  args = parser.parse_args(argv)
  path = storage.join(args.model_dir, "metrics.jsonl")
  if not storage.exists(path):
    print(f"error: {path} not found: is {args.model_dir!r} the MODEL_DIR of a train.py run?", file=sys.stderr)
    return 2
  records, skipped = read_records(path)
  if skipped:
    more = f"; and {len(skipped) - 3} more" if len(skipped) > 3 else ""
    print(f"warning: {len(skipped)} line{'s' if len(skipped) > 1 else ''} of {path} left out of the breakdown: "
          + "; ".join(skipped[:3]) + more, file=sys.stderr)
  breakdown = run_breakdown(records)
  if not breakdown["total_s"]:
    print(f"error: {path} has no time breakdown (a run from before training/goodput.py)", file=sys.stderr)
    return 2
  print(json.dumps(breakdown, indent=1) if args.json else table(breakdown))
  return 0


if __name__ == "__main__":
  sys.exit(main())
