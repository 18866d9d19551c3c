"""Default stop sequences per language: where a completion of one function ends."""

from __future__ import annotations

from typing import Sequence

# Python: the next top-level statement starts a new unit (HumanEval's stop words).
PYTHON_STOPS = ("\ndef ", "\nclass ", "\nif ", "\nprint", "\n#")
# Brace languages: a closing brace at column 0 followed by a newline ends the function. The brace is
# part of the function, so these stops keep their first KEEP characters ("\n}") in the completion.
BRACE_STOPS = ("\n}\n",)
KEEP = {"\n}\n": 2}

_BRACE_LANGUAGES = {"java", "c++", "cpp", "php", "typescript", "javascript", "go", "dart", "rust", "c#", "csharp"}


def default_stops(language: str) -> tuple[str, ...]:
  name = language.strip().lower()
  if name == "python":
    return PYTHON_STOPS
  if name in _BRACE_LANGUAGES:
    return BRACE_STOPS
  return ()  # R, Julia, Lua, Haskell: end-of-document or the length limit


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
