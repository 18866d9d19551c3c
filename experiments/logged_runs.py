"""What the grid runners (ablation.py, finetune_grid.py) share: an entry point run as a subprocess with
its console appended to a log and its progress lines echoed, and durations for their ETA lines."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from typing import Callable, Sequence

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_logged(argv: Sequence[str], log_path: str, echo: Callable[[str], None], echoed: Callable[[str], bool],
               unbuffered: bool = True) -> int:
  """`python *argv` from the repository root; its console is appended to `log_path` (a resumed cell
  keeps the history of its earlier attempts) and the lines `echoed` accepts go to `echo`. Returns the
  exit status. `unbuffered=False` for entry points with a tqdm bar on stderr: unbuffered, print's text
  and its newline are two writes and the bar lands between them (their progress lines flush anyway)."""
  env = dict(os.environ, PYTHONUNBUFFERED="1")
  if not unbuffered:
    del env["PYTHONUNBUFFERED"]
  with open(log_path, "a") as log:
    log.write(f"$ {shlex.join(['python', *argv])}\n")
    log.flush()
    process = subprocess.Popen([sys.executable, *argv], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, env=env)
    for line in process.stdout:
      log.write(line)
      log.flush()
      if echoed(line):
        echo(line.rstrip())
    return process.wait()


def duration(seconds: float | None) -> str:
  """45s, 3m07s, 2h05m; "?" for None."""
  if seconds is None:
    return "?"
  seconds = int(round(seconds))
  if seconds >= 3600:
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
  return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"
