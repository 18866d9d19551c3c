"""Where a completion stops: the earliest of its stop sequences. The sequences of each language are
languages.py's (`languages.get(name).stops`), the one table; a stop may keep its first KEEP[stop]
characters in the completion (the closing brace or `end` belongs to the function). A `Whole` stop
keeps none of itself, whatever KEEP says: MultiPL-E and the bigcode harness cut before the stop token.
"""

from __future__ import annotations

from typing import Sequence

from languages import KEEP


class Whole(str):
  """A stop string cut before in whole (a prompt's `"stop_cut": "before"`); a str, so it travels
  through every sampler unchanged."""


def kept(stop: str) -> int:
  """How many of the stop's first characters stay in the completion."""
  return 0 if isinstance(stop, Whole) else KEEP.get(stop, 0)


def cut_index(text: str, stops: Sequence[str]) -> int:
  """Where to cut `text`: before the earliest stop string (keeping `kept(stop)` of it), or -1."""
  best = -1
  for stop in stops:
    if not stop:
      continue
    i = text.find(stop)
    if i >= 0 and (best < 0 or i + kept(stop) < best):
      best = i + kept(stop)
  return best
