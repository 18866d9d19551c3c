"""What every language renderer provides, and the record protocol its test programs print.

A renderer turns a typed `Question` (sandbox/typed.py) into
  (a) the prompt, in the paper's Appendix E generation template, ending with the signature and doc
      comment that the model's completion continues, and
  (b) a `Program`: the signature + the prediction (the completion) + a harness that runs every test
      case in isolation, exceptions caught, and prints one record line per test case.

A renderer that supports whole programs also turns a typed question and a whole solution (BabelCode's
prediction form: the entry function with its imports, helpers and constants, named in BabelCode's
convention for the language) into a `Program` with `whole_program`: the language's head, the code as
given, and the same harness, called with the types the question declares (Question.declared).

Records (stdout, one line each, flushed as written):
  `#codelm# <idx> ok <json>`         the function returned; <json> is its value in typed.py's
                                     canonical JSON for the return type (one line)
  `#codelm# <idx> exception <text>`  the call raised/threw/panicked; <text> is one line
The program gets the test INPUTS only. It never sees the expected outputs and never decides pass or
fail: the scorer parses the records and compares the values outside the sandbox, so nothing the
program does in its own process can turn a wrong answer into a pass. A record for an index that
appears twice, out of order or for an unknown index marks the program as forging records.
"""

from __future__ import annotations

import dataclasses
import keyword
import re
from collections.abc import Callable, Mapping, Sequence

from sandbox.typed import Question, Type, walk_types
import languages

RECORD_PREFIX = "#codelm# "
GENERATION_TEMPLATE = ("You are an expert {language} programmer, complete the implementation.\n"
                       "Solution in {language}:\n\n{signature_with_docstring}")


@dataclasses.dataclass(frozen=True)
class Program:
  """Files and commands; run in a fresh directory inside the sandbox (sandbox/execution.py)."""
  files: Mapping[str, str]                      # relative path -> text
  run: tuple[str, ...]                          # argv; prints the records
  compile: tuple[tuple[str, ...], ...] = ()     # argv of each compile step, run in order first
  env: Mapping[str, str] = dataclasses.field(default_factory=dict)
  # What this program runs from a shared build (Build below): {path in its box: path in the build's
  # box}, bound read-only.
  artefacts: Mapping[str, str] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Build:
  """Many programs of one language compiled in one sandbox (sandbox/batching.py); member k then
  runs in a sandbox of its own as `runs[k]`, whose `artefacts` name the build's outputs it needs.

  Two kinds. A shared build compiles the members together (one translation unit, crate or
  module graph): a failed build is read by the renderer's `blamed`, and the members it names are
  compiled on their own. A build with `reports` compiles each member separately inside one compiler
  process (javac, mcs): member k's exit status and diagnostics are the files reports[k] names, exactly
  what the compiler prints for that program alone."""
  files: Mapping[str, str]                      # the build box's sources
  compile: tuple[tuple[str, ...], ...]          # argv of each step, run in order
  runs: tuple[Program, ...]                     # one per member, in the order given to build()
  env: Mapping[str, str] = dataclasses.field(default_factory=dict)
  reports: tuple[tuple[str, str], ...] = ()     # per member: (exit status file, diagnostics file)


@dataclasses.dataclass(frozen=True)
class Toolchain:
  """What a language needs from the machine, by absolute path (the sandbox sees nothing else)."""
  binaries: tuple[str, ...]                     # must exist, or the language is not available
  version_command: tuple[str, ...]              # its first output line is recorded with results
  read_only: tuple[str, ...] = ()               # extra host paths bound read-only (beyond /usr, /lib..)
  # (host path, path in the sandbox): bound read-only elsewhere than on the host, so that a toolchain
  # living in a home folder does not show that folder. A step whose program is a host path under
  # one of them runs it from its sandbox path.
  mounts: tuple[tuple[str, str], ...] = ()
  hidden: tuple[str, ...] = ()                  # host folders in those shown empty (third-party packages)
  env: tuple[tuple[str, str], ...] = ()         # (name, value) under the program's own env (hashable)
  memory_mb: int | None = None                  # address-space cap override (JVM, GHC reserve a lot)
  install_hint: str = "make toolchains"


@dataclasses.dataclass(frozen=True)
class Foreign:
  """How MultiPL-E's evaluator for this language (its eval_<lang>.py) compiles and runs a whole
  program written to its tests, on codelm's toolchain; evaluation/multiple/execution.py runs it and
  applies the status rule named here."""
  source: str                                          # the program's file in the box
  run: tuple[str, ...]
  status: str                                          # "exit_code", or the rule named for the language
  compile: tuple[tuple[str, ...], ...] = ()            # a failed step: SyntaxError
  env: Mapping[str, str] = dataclasses.field(default_factory=dict)
  files: Mapping[str, str] = dataclasses.field(default_factory=dict)  # besides the source
  timeout_exit_code: int | None = -1                   # a timed-out run's exit code (Go's: None)
  compile_timeout_status: str = "SyntaxError"          # eval_rust's: "Timeout"
  empty_output_as_none: bool = False                   # eval_cs.py writes "None" for an empty output


class Renderer:
  """Base class: one subclass per language, registered in sandbox/renderers/__init__.py."""
  name: str = ""                  # codelm's language name (languages.py): "cpp", "csharp"
  display_name: str = ""          # the paper's: "C++", "C#"
  toolchain: Toolchain
  naming: Callable[[str], str] = staticmethod(lambda name: name)  # the function's name convention
  param_naming: Callable[[str], str] | None = None                  # the parameters' (default: naming)
  reserved: frozenset[str] = frozenset()  # keywords and builtins a name must not take (renamed)
  # BabelCode's naming convention in this language ("snake", "camel", "pascal"): a whole program's
  # entry function is named in it (`convention_name`).
  convention: str = "snake"
  # MultiPL-E's run timeout in this language (seconds), and what its evaluator runs besides the
  # toolchain's binaries (`foreign`).
  foreign_timeout_s: float = 15.0
  foreign_binaries: tuple[str, ...] = ()

  @property
  def stop_sequences(self) -> tuple[str, ...]:
    """Where sample.py cuts a completion: languages.py's stops, the one source."""
    return languages.get(self.name).stops

  @property
  def keep(self) -> Mapping[str, int]:
    """Characters of a stop kept in the completion ("\n}" of "\n}\n")."""
    return {s: languages.KEEP[s] for s in self.stop_sequences if s in languages.KEEP}

  def function_name(self, question: Question) -> str:
    """The entry function's name in this language's convention."""
    return safe_name(self.naming(question.entry_fn_name), self.reserved)

  def params(self, question: Question) -> list[str]:
    """Parameter names in this language's convention."""
    return param_names(question, self.param_naming or self.naming, self.reserved)

  def signature_with_docstring(self, question: Question) -> str:
    """The text the completion continues: doc comment + signature + opening of the body."""
    raise NotImplementedError

  def signature(self, question: Question) -> str:
    """signature_with_docstring without the description (the typed tags of a dynamically typed
    language stay): what a translation prompt gives, as the paper's do. Programs are built from
    signature_with_docstring, which differs from this by comments only (a Python docstring)."""
    return self.signature_with_docstring(dataclasses.replace(question, description=""))

  def prompt(self, question: Question) -> str:
    return GENERATION_TEMPLATE.format(language=self.display_name,
                                      signature_with_docstring=self.signature_with_docstring(question))

  def stub(self, question: Question) -> str:
    """A completion that returns the return type's default value (and closes the function)."""
    raise NotImplementedError

  def program(self, question: Question, completion: str) -> Program:
    """The test program: signature_with_docstring + completion + harness over every test case."""
    raise NotImplementedError

  def entry_name(self, question: Question) -> str:
    """The entry function's name in a whole program: BabelCode's convention for this language (its
    names, not this renderer's, since a whole program is written to BabelCode's harness)."""
    return convention_name(question.entry_fn_name, self.convention)

  @property
  def whole_programs(self) -> bool:
    """Whether this renderer builds whole programs (`whole_program`)."""
    return type(self).whole_program is not Renderer.whole_program

  def whole_program(self, question: Question, code: str) -> Program:
    """The test program of a whole solution: the head BabelCode's test program has in this language
    (its imports), the code as given, then the harness of `program`, calling `entry_name` with
    arguments of the declared types (Question.declared) and printing the same records."""
    raise NotImplementedError(f"{self.display_name}: whole programs are not supported")

  def value_literal(self, t: Type, value) -> str:
    """`value` of type `t` as this language's literal, as its test programs write one (each
    renderer's `literal`)."""
    raise NotImplementedError

  def call(self, name: str, args: Sequence[str]) -> str:
    """A call of `name` on argument texts, as the language writes one."""
    return f"{name}({', '.join(args)})"

  def foreign(self, text: str) -> Foreign:
    """How MultiPL-E's evaluator runs `text`, a whole program with its own tests (Foreign)."""
    raise NotImplementedError(f"{self.display_name}: no MultiPL-E evaluator")

  # ---- batched compilation (sandbox/batching.py); a renderer without it compiles one by one ----

  def prepare(self, questions: Sequence[Question]) -> None:
    """Called with every question of a batch of work before `batchable`: a renderer that asks its
    toolchain something per question (once, cached) asks it for all of them together here."""

  def batchable(self, question: Question, completion: str) -> bool:
    """Whether this completion may be compiled together with others: only when nothing it can
    contain reaches another member of the build (what each renderer checks is in its docstring).
    The others, and any member a failed build blames, are compiled on their own, as `program`."""
    return False

  def build(self, jobs: Sequence[tuple[Question, str]]) -> Build:
    """One build of every (question, completion) given; each passed `batchable`."""
    raise NotImplementedError

  def blamed(self, diagnostics: str, size: int) -> set[int]:
    """The members (indices into the jobs given to `build`) that a failed shared build's compiler
    output names; empty when it names none."""
    return set()


# ---- naming helpers shared by renderers -------------------------------------------------------

def words(name: str) -> list[str]:
  """`has_close_elements` / `hasCloseElements` -> ["has", "close", "elements"]."""
  spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name)
  return [w.lower() for w in re.split(r"[_\W]+", spaced) if w]


def camel_case(name: str) -> str:
  parts = words(name) or [name]
  return parts[0] + "".join(p.capitalize() for p in parts[1:])


def pascal_case(name: str) -> str:
  return "".join(p.capitalize() for p in words(name) or [name])


def snake_case(name: str) -> str:
  return "_".join(words(name) or [name])


UPPER, LOWER, DIGITS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz", "0123456789"


def convention_words(name: str) -> list[str]:
  """BabelCode's naming tokens (utils.naming_convention): a break before an upper-case letter that
  follows a lower-case letter or digit or precedes a lower-case letter, and before a letter or digit
  that follows an underscore; the underscores then dropped. ASCII letters only, as there."""
  text = ""
  for i, char in enumerate(name):
    before, after = name[i - 1] if i else "", name[i + 1:i + 2]
    upper = char in UPPER
    if i and ((upper and (before in LOWER or before in DIGITS)) or (upper and after != "" and after in LOWER)
              or (before == "_" and (upper or char in LOWER or char in DIGITS))):
      text += " "
    text += char
  return [word.replace("_", "") for word in text.split()]


def convention_name(name: str, convention: str) -> str:
  """`name` in BabelCode's naming convention "snake", "camel" or "pascal" (`add_1_to_a` ->
  `add1ToA` in camel case): how BabelCode names a question's entry function in each language."""
  words = convention_words(name)
  if convention == "snake":
    return "_".join(w.lower() for w in words)
  first, rest = (words[1], words[2:]) if len(words) > 1 and not words[0] else (words[0], words[1:])
  head = first.lower() if convention == "camel" else first.title()
  return head + "".join(w.title() for w in rest)


def safe_name(name: str, reserved: frozenset[str] | set[str], suffix: str = "_") -> str:
  """`name`, renamed when it clashes with a keyword or builtin of the target language."""
  while name in reserved:
    name += suffix
  return name


PYTHON_RESERVED = frozenset(keyword.kwlist)


def doc_lines(description: str) -> list[str]:
  """The description's lines, trailing blanks trimmed, common indentation removed."""
  import textwrap
  return textwrap.dedent(description).strip("\n").rstrip().splitlines()


def param_names(question: Question, convert, reserved: frozenset[str]) -> list[str]:
  """Parameter names in the language's convention, keywords renamed, no two alike."""
  out: list[str] = []
  for p in question.params:
    name = safe_name(convert(p.name), reserved | set(out))
    out.append(name)
  return out


def types_in(question: Question) -> set[str]:
  """Names of every type used by the question (to include only the helpers a program needs)."""
  return {t.name for ty in (*question.types, question.return_type) for t in walk_types(ty)}


def render_cases(question: Question, literal, separator: str = ", ") -> list[tuple[int, str]]:
  """(idx, "arg1, arg2") per test case, using the renderer's `literal(type, value)`."""
  return [(case.idx, separator.join(literal(t, v) for t, v in zip(question.types, case.inputs)))
          for case in question.test_cases]


def check_type_support(question: Question, supported: Sequence[str]) -> None:
  """Raise ValueError when the question uses a type name the renderer does not support."""
  missing = types_in(question) - set(supported)
  if missing:
    raise ValueError(f"{question.qid}: types {sorted(missing)} not supported")


__all__ = ["Program", "Build", "Toolchain", "Renderer", "RECORD_PREFIX", "GENERATION_TEMPLATE", "Type"]
