"""The renderers' host-side caches (a compiled harness, a batch driver, a runtime library), each a
folder under the toolchain cache, built once and published whole."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable


def readable_by_all(top: str) -> None:
  """Folders 0755, files 0444: the sandbox's uid reads them (mkdtemp makes a folder 0700)."""
  for directory, _, names in os.walk(top):
    os.chmod(directory, 0o755)
    for name in names:
      os.chmod(os.path.join(directory, name), 0o444)


def publish(cache_dir: str, final: str, fill: Callable[[str], None]) -> None:
  """Builds the folder `final` whole or not at all: `fill(work)` writes into a fresh folder under
  `cache_dir`, which is made readable by all and renamed to `final` (atomic: a concurrent scorer or a
  sandbox sees the whole folder or none). On any failure the partial folder is removed and the error
  raised; the caller decides whether another scorer's folder, renamed there first, will do."""
  os.makedirs(cache_dir, exist_ok=True)
  work = tempfile.mkdtemp(prefix="build-", dir=cache_dir)
  try:
    fill(work)
    readable_by_all(work)
    os.rename(work, final)
  except BaseException:
    shutil.rmtree(work, ignore_errors=True)
    raise
