"""The 14 programming languages of the paper (Table 3), the one home of "a language": extensions,
natural shares, resource groups, stop sequences and every name a language answers to. The data
pipeline, the sampler, the sandbox's renderers and the benchmarks all read them here.

A file is classified by the longest matching suffix, case-insensitively (`.rs.in` before `.rs`,
`.hs-boot` before `.hs`); a file with no matching suffix is not code for us.

A name is looked up with `get` everywhere ("cpp", "C++", "CSharp", "c-sharp", "js": codelm's names,
the paper's display names, BabelCode's and The Stack's spellings, case-insensitively); an unknown name
raises the same ValueError wherever it is typed. `from_label` is the one lenient lookup, for a dataset's
language column where rows of other languages are expected (None: not ours).
"""

from __future__ import annotations

import dataclasses
import os


@dataclasses.dataclass(frozen=True)
class Language:
  name: str  # identifier used in task names, e.g. "cpp" -> task "code_cpp"
  display_name: str  # as prompts write it: "C++", "C#", "TypeScript"
  extensions: tuple[str, ...]
  natural_share: float  # percent of the paper's training data (Table 3)
  high_resource: bool  # the paper's split: the seven largest are high-resource
  stops: tuple[str, ...]  # where a completion of one function ends (sample.py; the renderers' prompts)

  @property
  def task_name(self) -> str:
    return f"code_{self.name}"


# Stop sequences. Python: the next top-level statement starts a new unit (HumanEval's stop words, and
# the imports that open the next prompt: sandbox/renderers/python.py's head). Brace languages: the
# prompt's function starts at column 0, so a closing brace at column 0 followed by a newline ends it.
PYTHON_STOPS = ("\ndef ", "\nclass ", "\nif ", "\nprint", "\n#", "\nimport ", "\nfrom ")
BRACE_STOPS = ("\n}\n",)
END_STOPS = ("\nend\n",)  # Lua's and Julia's `function f(...)` ... `end` at column 0
BLANK_LINE_STOPS = ("\n\n",)  # Haskell: a top-level definition ends at a blank line
# A stop may keep its first KEEP[stop] characters in the completion: the closing brace or `end`
# belongs to the function.
KEEP = {"\n}\n": 2, "\nend\n": 4, "\n\n": 1}


def _language(name, display_name, extensions, share, high, stops=BRACE_STOPS):
  return Language(name, display_name, tuple(extensions.split()), share, high, stops)


LANGUAGES: tuple[Language, ...] = (
    _language("java", "Java", ".java .jav .jsh", 36.95, True),
    _language("python", "Python", ".py .py3 .pyi .pyw .pxi", 16.80, True, PYTHON_STOPS),
    _language("cpp", "C++", ".cpp .c++ .cc .cp .cxx .h .h++ .hh .hpp .hxx .inl .ino .ipp .ixx .re .tcc .tpp",
              16.68, True),
    _language("php", "PHP", ".php .aw .ctp .fcgi .inc .php3 .php4 .php5 .phps .phpt", 14.05, True),
    _language("typescript", "TypeScript", ".ts .cts .mts", 4.28, True),
    _language("javascript", "JavaScript", ".js .cjs .mjs", 3.31, True),
    _language("go", "Go", ".go", 3.09, True),
    _language("dart", "Dart", ".dart", 1.85, False),
    _language("lua", "Lua", ".lua", 1.39, False, END_STOPS),
    _language("rust", "Rust", ".rs .rs.in", 0.93, False),
    _language("csharp", "C#", ".cs .cake .csx .linq", 0.49, False),
    _language("r", "R", ".r .rd .rsx", 0.11, False),
    _language("julia", "Julia", ".jl", 0.03, False, END_STOPS),
    _language("haskell", "Haskell", ".hs .hs-boot .hsc", 0.02, False, BLANK_LINE_STOPS),
)

BY_NAME: dict[str, Language] = {language.name: language for language in LANGUAGES}
HIGH_RESOURCE: tuple[Language, ...] = tuple(l for l in LANGUAGES if l.high_resource)
LOW_RESOURCE: tuple[Language, ...] = tuple(l for l in LANGUAGES if not l.high_resource)

# Longest suffix first, so ".rs.in" wins over ".rs" (and "x.hs-boot" never reads as ".hs-boot" vs none).
_SUFFIXES: tuple[tuple[str, Language], ...] = tuple(sorted(
    ((ext, language) for language in LANGUAGES for ext in language.extensions),
    key=lambda item: -len(item[0])))
assert len({ext for ext, _ in _SUFFIXES}) == len(_SUFFIXES), "an extension belongs to two languages"


def classify(path: str | os.PathLike) -> Language | None:
  """The language of a file by its name, or None when no extension matches."""
  name = os.path.basename(os.fspath(path)).lower()
  for suffix, language in _SUFFIXES:
    if name.endswith(suffix) and len(name) > len(suffix):
      return language
  return None


def display_name(task: str) -> str:
  """The language's display name for its task (`code_cpp`, `code_cpp_ul2` -> "C++"); other names as given."""
  base = task[:-len("_ul2")] if task.endswith("_ul2") else task
  return next((l.display_name for l in LANGUAGES if l.task_name == base), task)


# Other spellings datasets use in their language columns (The Stack's `lang`: "C++", "C#";
# BigCode's directory names: "c-sharp"; BabelCode's "CSharp", "Javascript"); names and display names
# are matched case-insensitively too.
_ALIASES = {"c-sharp": "csharp", "cs": "csharp", "c++": "cpp", "js": "javascript", "ts": "typescript",
            "golang": "go", "rs": "rust", "py": "python", "hs": "haskell", "jl": "julia"}
_BY_ANY_NAME: dict[str, Language] = {
    **{alias: BY_NAME[name] for alias, name in _ALIASES.items()},
    **{l.display_name.lower(): l for l in LANGUAGES}, **{l.name: l for l in LANGUAGES}}


def get(name: str) -> Language:
  """The language any of its names means ("cpp", "C++", "CSharp", "c-sharp", "js"); ValueError if none."""
  language = _BY_ANY_NAME.get(str(name).strip().lower())
  if language is None:
    raise ValueError(f"unknown language {name!r}; choose one of "
                     f"{', '.join(l.display_name for l in LANGUAGES)} (or codelm's names: {', '.join(BY_NAME)})")
  return language


def from_label(label: str) -> Language | None:
  """The language a dataset's language column names ("Python", "C++", "c-sharp"), or None if not ours."""
  return _BY_ANY_NAME.get(str(label).strip().lower())
