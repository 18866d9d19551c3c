"""Renderers: one module per language that turns a typed question into a prompt and a test program.

Dart and Julia are not evaluated: no toolchain for either is in any registry this stack can install
from (Debian 12, PyPI, npm), so they are listed with that reason wherever results are shown.
"""

from __future__ import annotations

import importlib

from data.languages import BY_NAME, LANGUAGES, Language
from evaluation import typed
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
EVALUATED = tuple(l.name for l in LANGUAGES if l.name in MODULES)  # the paper's order

# Lowercased names -> language: codelm's ("cpp", "csharp") and the paper's display names ("C++",
# "C#") cover all 14 of BabelCode's spellings of them ("C++", "CSharp", "Javascript", ...).
_BY_ANY_NAME: dict[str, Language] = {
    **{l.name: l for l in LANGUAGES}, **{l.display_name.lower(): l for l in LANGUAGES}}


def resolve_language(name: str) -> Language:
  """The language a BabelCode, codelm or display name means ("Javascript", "cpp", "C#")."""
  language = _BY_ANY_NAME.get(str(name).strip().lower())
  if language is None:
    raise ValueError(f"unknown language {name!r}; choose one of "
                     f"{', '.join(l.display_name for l in LANGUAGES)}")
  return language


def language_name(name: str) -> str:
  """codelm's name for any spelling: "C++", "cpp", "CSharp", "Javascript" -> "cpp", ..."""
  return resolve_language(name).name


def parse_languages(value: str) -> list[str]:
  if value.strip().lower() == "all":
    return list(EVALUATED)
  names = [language_name(v) for v in value.split(",") if v.strip()]
  for name in names:
    if name in NOT_EVALUATED:
      raise ValueError(f"--languages: {BY_NAME[name].display_name} is not evaluated: {NOT_EVALUATED[name]}")
  return names


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
  question = next(iter(typed.read_questions(typed.BENCHMARKS["humaneval"])))
  warmed = []
  for name in names or MODULES:
    renderer = get(name)
    renderer.program(question, renderer.stub(question))
    if type(renderer).build is not Renderer.build:
      renderer.build([(question, renderer.stub(question))] * 2)
    warmed.append(name)
  return warmed
