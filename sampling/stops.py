"""Stop sequences per language: where a completion of one function ends.

The one table: sample.py uses it for prompts without their own `stop`, and the scorer's renderers
(evaluation/languages/) declare the same stops in the prompts they write. A stop may keep its first
KEEP[stop] characters in the completion: the closing brace or `end` belongs to the function.
"""

from __future__ import annotations

from typing import Sequence

# Python: the next top-level statement starts a new unit (HumanEval's stop words, and the imports that
# open the next prompt: evaluation/languages/python.py's head).
PYTHON_STOPS = ("\ndef ", "\nclass ", "\nif ", "\nprint", "\n#", "\nimport ", "\nfrom ")
# Brace languages: the prompt's function starts at column 0, so a closing brace at column 0 followed
# by a newline ends it.
BRACE_STOPS = ("\n}\n",)
STOPS: dict[str, tuple[str, ...]] = {
    "python": PYTHON_STOPS,
    **{name: BRACE_STOPS for name in ("java", "cpp", "php", "typescript", "javascript", "go", "dart",
                                       "rust", "csharp", "r")},
    "lua": ("\nend\n",),       # `function f(...)` ... `end` at column 0
    "haskell": ("\n\n",),      # a top-level definition ends at a blank line
    "julia": ("\nend\n",),
}
KEEP = {"\n}\n": 2, "\nend\n": 4, "\n\n": 1}

_ALIASES = {"c++": "cpp", "c#": "csharp"}


def default_stops(language: str) -> tuple[str, ...]:
  """The stops of a language given by codelm's or the paper's name ("cpp", "C++"); none if unknown."""
  name = language.strip().lower()
  return STOPS.get(_ALIASES.get(name, name), ())


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
