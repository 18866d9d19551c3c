"""Renderers: one module per language that turns a typed question into a prompt and a test program.

Dart and Julia are not evaluated: no toolchain for either is in any registry this stack can install
from (Debian 12, PyPI, npm), so they are listed with that reason wherever results are shown.
"""

from __future__ import annotations

import importlib

import languages
from languages import BY_NAME, LANGUAGES
from sandbox import typed
from sandbox.renderers.base import Renderer

# codelm language name -> module under sandbox/renderers/ (class named in the module's RENDERER).
MODULES = {
    "python": "python", "javascript": "javascript", "typescript": "typescript", "lua": "lua",
    "php": "php", "cpp": "cpp", "go": "go", "rust": "rust", "java": "java", "csharp": "csharp",
    "r": "r", "haskell": "haskell",
}
NOT_EVALUATED = {
    "dart": "no Dart SDK in Debian 12, PyPI or npm (their packages download it at run time)",
    "julia": "no Julia in Debian 12, PyPI or npm (their packages download it at run time)",
}
EVALUATED = tuple(l.name for l in LANGUAGES if l.name in MODULES)  # the paper's order


def parse_languages(value: str) -> list[str]:
  if value.strip().lower() == "all":
    return list(EVALUATED)
  names = [languages.get(v).name for v in value.split(",") if v.strip()]
  for name in names:
    if name in NOT_EVALUATED:
      raise ValueError(f"--languages: {BY_NAME[name].display_name} is not evaluated: {NOT_EVALUATED[name]}")
  return names


def get(name: str) -> Renderer:
  """The renderer for a language, by any of its names ("cpp", "C++", "csharp", ...)."""
  name = languages.get(name).name
  if name in NOT_EVALUATED:
    raise ValueError(f"{name} is not evaluated: {NOT_EVALUATED[name]}")
  if name not in MODULES:
    raise ValueError(f"no renderer for {name!r}; languages: {', '.join(MODULES)}")
  module = importlib.import_module(f"sandbox.renderers.{MODULES[name]}")
  return module.RENDERER


# A question of the common types (a list of doubles, a double, a bool), rendered to fill the caches:
# HumanEval/0's signature, so that the sandbox needs no benchmark's data.
_WARM_QUESTION = typed.question_from_json({
    "qid": "warm/0", "entry_fn_name": "has_close_elements",
    "params": [{"name": "numbers", "type": "list<float>"}, {"name": "threshold", "type": "float"}],
    "return_type": "bool", "description": "Whether any two numbers are closer than threshold.",
    "test_cases": [{"idx": 0, "inputs": [[1.0, 2.0, 3.9, 4.0, 5.0, 2.2], 0.3], "output": True}]})


def warm_caches(names=None) -> list[str]:
  """Builds what each renderer caches on the host on first use (a precompiled header, a compiled
  runtime or batch driver) by rendering a program and a two-program build of a stub, so that a
  worker image holds them ready (Dockerfile). Needs no sandbox. Returns the languages warmed."""
  question = _WARM_QUESTION
  warmed = []
  for name in names or MODULES:
    renderer = get(name)
    renderer.program(question, renderer.stub(question))
    if type(renderer).build is not Renderer.build:
      renderer.build([(question, renderer.stub(question))] * 2)
    warmed.append(name)
  return warmed
