"""Where a completion stops: the earliest of its stop sequences. The sequences of each language are
languages.py's (`languages.get(name).stops`), the one table; a stop may keep its first KEEP[stop]
characters in the completion (the closing brace or `end` belongs to the function).
"""

from __future__ import annotations

from typing import Sequence

from languages import KEEP


def cut_index(text: str, stops: Sequence[str]) -> int:
  """Where to cut `text`: before the earliest stop string (keeping KEEP[stop] of it), or -1."""
  best = -1
  for stop in stops:
    if not stop:
      continue
    i = text.find(stop)
    if i >= 0 and (best < 0 or i + KEEP.get(stop, 0) < best):
      best = i + KEEP.get(stop, 0)
  return best
