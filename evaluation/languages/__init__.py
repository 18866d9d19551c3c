"""Renderers: one module per language that turns a typed question into a prompt and a test program.

Dart and Julia are not evaluated: no toolchain for either is in any registry this stack can install
from (Debian 12, PyPI, npm), so they are listed with that reason wherever results are shown.
"""

from __future__ import annotations

import importlib

from evaluation.languages.base import Renderer

# codelm language name -> module under evaluation/languages/ (class named in the module's RENDERER).
MODULES = {
    "python": "python", "javascript": "javascript", "typescript": "typescript", "lua": "lua",
    "php": "php", "cpp": "cpp", "go": "go", "rust": "rust", "java": "java", "csharp": "csharp",
    "r": "r", "haskell": "haskell",
}
NOT_EVALUATED = {
    "dart": "no Dart SDK in Debian 12, PyPI or npm (their packages download it at run time)",
    "julia": "no Julia in Debian 12, PyPI or npm (their packages download it at run time)",
}


def get(name: str) -> Renderer:
  """The renderer for a codelm language name ("cpp", "csharp", ...)."""
  if name in NOT_EVALUATED:
    raise ValueError(f"{name} is not evaluated: {NOT_EVALUATED[name]}")
  if name not in MODULES:
    raise ValueError(f"no renderer for {name!r}; languages: {', '.join(MODULES)}")
  module = importlib.import_module(f"evaluation.languages.{MODULES[name]}")
  return module.RENDERER


def warm_caches(names=None) -> list[str]:
  """Builds what each renderer caches on the host on first use (a precompiled header, a compiled
  runtime or batch driver) by rendering a program and a two-program build of a stub, so that a
  worker image holds them ready (Dockerfile). Needs no sandbox. Returns the languages warmed."""
  import os

  from evaluation import typed

  humaneval = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data",
                           "humaneval_typed.jsonl")
  question = next(iter(typed.read_questions(humaneval)))
  warmed = []
  for name in names or MODULES:
    renderer = get(name)
    renderer.program(question, renderer.stub(question))
    if type(renderer).build is not Renderer.build:
      renderer.build([(question, renderer.stub(question))] * 2)
    warmed.append(name)
  return warmed
