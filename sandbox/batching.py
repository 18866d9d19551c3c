"""Compile many programs of a language in one sandbox, then run each in a sandbox of its own.

Most of a compiled language's cost per program is the compiler starting (a JVM warming up javac,
g++ loading its precompiled header, ghc reading its package database), not the program. A renderer
that can build many programs at once (`Renderer.build`, sandbox/renderers/base.py) gets them here
`batch_size` at a time:
- the build runs in one sandbox (execution.build: the same sandbox as a program's compile steps);
- each member then runs in a fresh sandbox of its own, as before, with the build's outputs bound
  read-only (execution.execute with `build_dir`); the judge sees the same records either way.
What a program does at compile time cannot reach another program's verdict:
- a completion joins a build only when its renderer's `batchable` says that nothing it can contain
  reaches outside its own part of the build (each renderer's docstring says what it checks);
- a failed shared build is read by the renderer's `blamed`: the members it names are compiled on
  their own, exactly as without batching (their compile errors are the compiler's message for that
  program alone), and the build is retried without them; a build that fails without naming anyone,
  or times out, sends every member to be compiled on its own;
- a build with per-member reports (one compilation per member inside one compiler process) gives each
  member the exit status and diagnostics the compiler printed for it alone.
So a program's verdict does not depend on which others it was batched with (tests/test_batching.py
holds this over every language's solutions, stubs, compile errors and attacks).
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
from collections.abc import Sequence

from sandbox import execution
from sandbox.renderers.base import Build, Program, Renderer
from sandbox.typed import Question

DEFAULT_BATCH_SIZE = 32
# A shared build that fails is retried without the members it blames at most this many times (a
# compiler that stops at the first file with a syntax error names one file per attempt).
MAX_BUILD_ATTEMPTS = 3


@dataclasses.dataclass
class Stats:
  """What batching did, for the scorer's report."""
  built: int = 0           # programs compiled in a shared build or a build with reports
  alone: int = 0           # programs compiled on their own (not batchable, blamed, or a failed build)
  builds: int = 0          # build sandboxes started
  failed_builds: int = 0   # builds that failed as a whole (retried, or their members compiled alone)

  def add(self, other: "Stats") -> None:
    for field in dataclasses.fields(self):
      setattr(self, field.name, getattr(self, field.name) + getattr(other, field.name))


def execute_all(renderer: Renderer, jobs: Sequence[tuple[Question, str]],
                limits: execution.Limits = execution.Limits(), batch_size: int = DEFAULT_BATCH_SIZE,
                stats: Stats | None = None) -> list[execution.Execution]:
  """The execution of every (question, completion), in order. Batchable completions are built
  `batch_size` at a time (batch_size 1: every program compiles on its own, as `execute` does)."""
  stats = stats if stats is not None else Stats()
  results: list[execution.Execution | None] = [None] * len(jobs)
  if batch_size > 1:
    renderer.prepare([question for question, _ in jobs])
    members = [i for i, (question, code) in enumerate(jobs) if renderer.batchable(question, code)]
  else:
    members = []
  alone = sorted(set(range(len(jobs))) - set(members))
  for start in range(0, len(members), batch_size):
    alone += _build_and_run(renderer, jobs, members[start:start + batch_size], limits, results, stats)
  for i in sorted(alone):
    question, code = jobs[i]
    results[i] = execution.execute(renderer.program(question, code), renderer.toolchain, limits)
    stats.alone += 1
  return results  # type: ignore[return-value]


def _build_and_run(renderer: Renderer, jobs, members: list[int], limits: execution.Limits,
                   results: list, stats: Stats) -> list[int]:
  """Builds and runs `members` (indices into jobs), filling `results`; returns the members to
  compile on their own."""
  alone: list[int] = []
  for attempt in range(MAX_BUILD_ATTEMPTS):
    if len(members) < 2:  # a build of one saves nothing
      return alone + members
    build = renderer.build([jobs[i] for i in members])
    directory = tempfile.mkdtemp(prefix="codelm-build-")
    try:
      stats.builds += 1
      result = execution.build(Program(files=build.files, compile=build.compile, run=("true",),
                                       env=build.env), renderer.toolchain, limits, directory)
      seconds = sum(s.runtime_s for s in result.compile)
      step = (build.compile[0] if build.compile else ("true",))
      if _size(directory) > (limits.disk_mb << 20) * len(members):
        # More than the members' boxes would hold alone (the build box is a host folder, not a
        # capped tmpfs): none of it is used, each member compiles in its own capped box.
        stats.failed_builds += 1
        return alone + members
      # A member whose artefacts are more than its own box holds would fail to compile alone (the
      # disk cap): it compiles alone, so a batch never passes what its own box would not.
      oversized = {k for k, run in enumerate(build.runs) if _artefacts_size(directory, run) > limits.disk_mb << 20}
      if build.reports:
        reports = [_report(directory, paths) for paths in build.reports]
        for k, i in enumerate(members):
          if reports[k] is None or k in oversized:  # the build ended before this member, or too big
            alone.append(i)
            continue
          status, diagnostics = reports[k]
          compiled = execution.Step(tuple(step), status, seconds / len(members), False)
          if status != 0:
            results[i] = execution.Execution((compiled,), None, "", diagnostics[-4000:], False)
          else:
            results[i] = _run(renderer, build.runs[k], compiled, diagnostics, limits, directory)
          stats.built += 1
        if result.compile_failed:
          stats.failed_builds += 1
        return alone
      if not result.compile_failed:
        compiled = execution.Step(tuple(step), 0, seconds / len(members), False)
        for k, i in enumerate(members):
          if k in oversized:  # (a shared binary too big for one box: every member, then)
            alone.append(i)
            continue
          results[i] = _run(renderer, build.runs[k], compiled, "", limits, directory)
          stats.built += 1
        return alone
      stats.failed_builds += 1
      timed_out = any(s.timed_out for s in result.compile)
      blamed = set() if timed_out else {k for k in renderer.blamed(result.stderr, len(members))
                                        if 0 <= k < len(members)}
      if not blamed:
        return alone + members
      alone += [members[k] for k in sorted(blamed)]
      members = [i for k, i in enumerate(members) if k not in blamed]
    finally:
      shutil.rmtree(directory, ignore_errors=True)
  return alone + members


def _size(directory: str) -> int:
  """Bytes of the files under `directory`."""
  total = 0
  for folder, _, files in os.walk(directory):
    for name in files:
      try:
        total += os.lstat(os.path.join(folder, name)).st_size
      except OSError:
        pass
  return total


def _artefacts_size(directory: str, program: Program) -> int:
  """Bytes of the build outputs `program` runs from (a file, or a folder's files)."""
  total = 0
  for output in program.artefacts.values():
    path = os.path.join(directory, output)
    if os.path.isdir(path) and not os.path.islink(path):
      total += _size(path)
    elif os.path.isfile(path) and not os.path.islink(path):
      total += os.lstat(path).st_size
  return total


def _report(directory: str, paths: tuple[str, str]) -> tuple[int, str] | None:
  """(exit status, diagnostics) a build wrote for one member, or None if it wrote none."""
  status_path, diagnostics_path = (os.path.join(directory, p) for p in paths)
  try:
    with open(status_path, encoding="utf-8", errors="replace") as f:
      status = int(f.read().strip())
  except (OSError, ValueError):
    return None
  try:
    with open(diagnostics_path, "rb") as f:
      f.seek(max(0, os.path.getsize(diagnostics_path) - 64_000))
      diagnostics = f.read().decode("utf-8", errors="replace")
  except OSError:
    diagnostics = ""
  return status, diagnostics


def _run(renderer: Renderer, program: Program, compiled: execution.Step, diagnostics: str,
         limits: execution.Limits, directory: str) -> execution.Execution:
  """A member's run in its own sandbox, reported as if it had compiled there: its compile step is
  its share of the build, and what the compiler printed for it comes first in stderr, as it would."""
  result = execution.execute(program, renderer.toolchain, limits, build_dir=directory)
  stderr = (diagnostics + result.stderr)[-4000:] if diagnostics else result.stderr
  return dataclasses.replace(result, compile=(compiled,), stderr=stderr)
