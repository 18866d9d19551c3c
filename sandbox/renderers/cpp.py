"""C++17: a free function after `#include <bits/stdc++.h>` and `using namespace std;`, with the
description as `//` comment lines above it (as MultiPL-E's C++ prompts are written).

Types: bool -> bool, int -> long (64-bit on Linux x86-64), float -> double, string -> string,
list -> vector<T>, set -> set<T>, map -> map<K, V>, tuple -> tuple<A, B, ...>, optional ->
optional<T>. The prompt ends after the function's opening brace; a completion is the body and the
closing brace at column 0, where it is cut (`stop_sequences`).

Every test case runs in a forked child process: an exception, a crash (segfault, abort, exit()) or
a stray `cout` of one case cannot touch the others or the record lines. The child's stdout is
redirected to stderr and its record travels back through a pipe; only the parent prints records.

Compiling `<bits/stdc++.h>` costs about a second per program, so a precompiled header of it is
built once on the host (outside the sandbox) into the toolchain cache (`CACHE_DIR`, one directory
per compiler build and flag set) and bound read-only into the sandbox; g++ silently falls back to
the plain header when the PCH is missing or does not match.

Batched (sandbox/batching.py): what is left per program after the header is about a tenth of a
second of code generation and a link, so many programs become one translation unit, each in a
namespace of its own (`codelm_m<k>`, `#line` naming it `m<k>/main.cpp` for the diagnostics), after
one copy of the harness, linked once; member k runs as `./main k` in its own sandbox. A completion
joins only when it is the rest of its function and nothing more (`batchable`): its braces close the
function exactly at its end, so nothing it holds is at namespace scope; no preprocessor (`#`, `%:`),
no raw strings or line splices, no attributes, `asm`, `extern` or `_Pragma` (which could place code or
symbols beyond the function: a constructor, a `malloc` of its own), and no name starting with
`codelm` (the harness's and the other members'). Inside a function body nothing else reaches another
member: no definition there has linkage, and no code but its own runs in its sandbox. Two things would
still differ inside the namespace, so they are refused too: the names the compiler fills in
(`__FILE__`, `__BASE_FILE__`, `__COUNTER__`, `__PRETTY_FUNCTION__`, `typeid`'s names, ...), and a
function whose name the prompt's head already declares (`strlen`, `unique`, `search` ...): alone, a
call inside its body sees both its own function and the library's (`strlen(s.c_str())` is the C
function), in a namespace only its own (a recursive call). Which names are declared is asked of g++
once per name (`declared`, cached for the process).
"""

from __future__ import annotations

import hashlib
import logging
import math
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable

from sandbox.renderers import base, cpp_harness, lexing, literals
from sandbox.typed import Question, Type

GXX = "/usr/bin/g++"
# The flags the PCH is built with and every program is compiled with (g++ only uses a PCH built
# with the same -std, -O and -f options). -O0: the harness's templates take twice as long at -O1,
# and a test case's run time is milliseconds either way.
CXX_FLAGS = ("-std=c++17", "-O0", "-pipe", "-w")
# Exactly what the prompt includes, so a program sees the same declarations with or without it.
PCH_HEADER = "#include <bits/stdc++.h>\n"

_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# The directory that holds cpp/ (CODELM_TOOLCHAINS overrides <repo root>/.toolchains).
CACHE_DIR = os.path.join(os.environ.get("CODELM_TOOLCHAINS") or os.path.join(_REPO_ROOT, ".toolchains"),
                         "cpp")

_LOG = logging.getLogger(__name__)

KEYWORDS = frozenset("""
alignas alignof and and_eq asm auto bitand bitor bool break case catch char char8_t char16_t
char32_t class compl concept const consteval constexpr constinit const_cast continue co_await
co_return co_yield decltype default delete do double dynamic_cast else enum explicit export extern
false float for friend goto if inline int long mutable namespace new noexcept not not_eq nullptr
operator or or_eq private protected public register reinterpret_cast requires return short signed
sizeof static static_assert static_cast struct switch template this thread_local throw true try
typedef typeid typename union unsigned using virtual void volatile wchar_t while xor xor_eq
""".split())
# Under `using namespace std;` a parameter named like a std type or a common algorithm hides it in
# the body (`string string` breaks `string result;`), so those names are renamed as well.
STD_NAMES = frozenset("""
std main string vector map set tuple optional pair array list deque queue stack size_t max min abs
swap sort count find reverse accumulate to_string stoi stol stoll stod begin end sqrt pow floor
ceil round hash greater less function move get make_pair make_tuple nullopt unordered_map
unordered_set multiset priority_queue isdigit isalpha isupper islower toupper tolower
""".split())
RESERVED = KEYWORDS | STD_NAMES


def _spelled(t: Type, leaves: dict[str, str], std: str) -> str:
  """A type in C++: `leaves` for its leaf types, the containers with the `std` prefix ("" or "std::")."""
  if t.name in leaves:
    return leaves[t.name]
  args = ", ".join(_spelled(a, leaves, std) for a in t.args)
  return {"list": f"{std}vector<{args}>", "set": f"{std}set<{args}>", "map": f"{std}map<{args}>",
          "tuple": f"{std}tuple<{args}>", "optional": f"{std}optional<{args}>"}[t.name]


def type_name(t: Type) -> str:
  """The type as the prompt writes it (under `using namespace std;`)."""
  return _spelled(t, {"bool": "bool", "int": "long", "float": "double", "string": "string"}, "")


def qualified_type(t: Type) -> str:
  """The type with std:: spelled out, for the harness (independent of what the completion
  declares)."""
  return _spelled(t, {"bool": "bool", "int": "long", "float": "double", "string": "std::string"}, "std::")


# A whole program's parameter and return types: BabelCode's C++ types for the declared leaves
# (Question.declared; its schema_parsing C++ spec).
DECLARED = {"boolean": "bool", "integer": "int", "long": "long long", "float": "float", "double": "double",
            "character": "char", "string": "std::string"}


def declared_type(t: Type) -> str:
  """A declared type (leaves named as typed.DECLARED_SCALARS) in C++, std:: spelled out."""
  return _spelled(t, DECLARED, "std::")


def _composite(t: Type, value, element: Callable[[Type, object], str], spelled: Callable[[Type], str]) -> str:
  """A container's C++ expression of exactly `spelled(t)`, its elements written by `element`."""
  name = t.name
  if name == "optional":
    return f"{spelled(t)}({'std::nullopt' if value is None else element(t.element, value)})"
  if name == "list":
    return f"{spelled(t)}{{{', '.join(element(t.element, v) for v in value)}}}"
  if name == "set":
    return f"{spelled(t)}{{{', '.join(element(t.element, v) for v in sorted(value))}}}"
  if name == "map":
    pairs = ", ".join(f"{{{element(t.args[0], k)}, {element(t.args[1], v)}}}" for k, v in value.items())
    return f"{spelled(t)}{{{pairs}}}"
  if name == "tuple":
    return f"{spelled(t)}({', '.join(element(a, v) for a, v in zip(t.args, value))})"
  raise AssertionError(t)


def declared_literal(t: Type, value) -> str:
  """A C++ expression of exactly `declared_type(t)` for a typed value of the same shape. A float is
  the double's literal converted, as BabelCode's harness passes a double literal to a float."""
  name = t.name
  if name == "integer":
    return str(value) if -2 ** 31 < value < 2 ** 31 else f"static_cast<int>({literal(Type('int'), value)})"
  if name == "long":
    return f"static_cast<long long>({literal(Type('int'), value)})"
  if name in ("float", "double"):
    text = literal(Type("float"), value)
    return text if name == "double" else f"static_cast<float>({text})"
  if name == "boolean":
    return "true" if value else "false"
  if name == "character":
    data = value.encode("utf-8", "surrogatepass")[:1] or b"\0"
    return f"static_cast<char>({data[0]})"
  if name == "string":
    return string_literal(value)
  return _composite(t, value, declared_literal, declared_type)


def string_literal(text: str) -> str:
  """A std::string of the text's UTF-8 bytes: printable ASCII as is, every other byte as a
  three-digit octal escape (which cannot run into a following digit), length explicit so an
  embedded NUL is kept."""
  data = text.encode("utf-8", "surrogatepass")
  body = literals.escape(data, lambda byte: f"\\{byte:03o}", specials='"\\?')  # ? : no trigraphs
  return f'std::string("{body}", {len(data)})'


def literal(t: Type, value) -> str:
  """A C++ expression of exactly `qualified_type(t)`."""
  name = t.name
  if name == "bool":
    return "true" if value else "false"
  if name == "int":
    # -9223372036854775808L would be the negation of a literal too large for long.
    return "(-9223372036854775807L - 1)" if value == -(2 ** 63) else f"{value}L"
  if name == "float":
    if math.isnan(value):
      return "std::numeric_limits<double>::quiet_NaN()"
    if math.isinf(value):
      return ("" if value > 0 else "-") + "std::numeric_limits<double>::infinity()"
    return repr(float(value))
  if name == "string":
    return string_literal(value)
  return _composite(t, value, literal, qualified_type)


def doc_comment(description: str) -> str:
  # A trailing backslash would splice the next line (the signature) into the comment.
  return "".join(f"// {line}".rstrip().rstrip("\\") + "\n" for line in base.doc_lines(description))


_pch_lock = threading.Lock()
_pch_dir: list[str | None] = []  # [the include directory] once decided for this process


def _pch_key() -> str:
  """Changes with the compiler build and the flags: a new key is a new directory."""
  try:
    version = subprocess.run([GXX, "--version"], capture_output=True, text=True, timeout=30).stdout
    stat = os.stat(os.path.realpath(GXX))
    compiler = f"{version.splitlines()[0] if version else ''}:{stat.st_size}:{stat.st_mtime_ns}"
  except (OSError, subprocess.SubprocessError):
    compiler = "missing"
  return hashlib.sha256(f"{compiler}\n{CXX_FLAGS}\n{PCH_HEADER}".encode()).hexdigest()[:16]


def precompiled_header_dir() -> str | None:
  """The include directory holding bits/stdc++.h.gch, built on first use. The prompt's own
  `#include <bits/stdc++.h>` finds it there through -I (g++ tries NAME.gch before NAME in each
  directory, and passes over one that does not match its flags); None when g++ is missing or the
  build failed, and programs then compile from the plain headers, only slower."""
  with _pch_lock:
    if not _pch_dir:
      _pch_dir.append(_build_pch())
    return _pch_dir[0]


def _build_pch() -> str | None:
  if not os.access(GXX, os.X_OK):
    return None
  directory = os.path.join(CACHE_DIR, _pch_key())
  target = os.path.join(directory, "bits", "stdc++.h.gch")
  if os.path.exists(target):
    return directory
  started = time.monotonic()
  # Concurrent builders (other scorer processes) each write a temporary name and rename it into
  # place, which is atomic: a compiler sees the whole file or none.
  temporary = f"{target}.{os.getpid()}.{threading.get_ident()}.tmp"
  try:
    os.makedirs(os.path.dirname(target), exist_ok=True)
    source = os.path.join(directory, "codelm-pch.h")  # not bits/stdc++.h: it would include itself
    with open(f"{source}.{os.getpid()}.tmp", "w", encoding="utf-8") as f:
      f.write(PCH_HEADER)
    os.replace(f"{source}.{os.getpid()}.tmp", source)
    result = subprocess.run([GXX, *CXX_FLAGS, "-x", "c++-header", source, "-o", temporary],
                            capture_output=True, text=True, timeout=600)
    if result.returncode != 0:
      raise OSError(result.stderr[-2000:])
    os.chmod(temporary, 0o644)
    os.replace(temporary, target)
  except (OSError, subprocess.SubprocessError) as error:
    _LOG.warning("the C++ precompiled header failed to build (programs compile without it): %s", error)
    if os.path.exists(temporary):
      os.remove(temporary)
    return None
  _LOG.info("built the C++ precompiled header %s in %.1f s", target, time.monotonic() - started)
  _remove_stale(directory)
  return directory


def _remove_stale(current: str) -> None:
  """Headers of an earlier compiler or flag set (each is about 100 MB)."""
  for name in os.listdir(CACHE_DIR):
    path = os.path.join(CACHE_DIR, name)
    if path != current and os.path.isdir(path) and len(name) == 16:
      shutil.rmtree(path, ignore_errors=True)


PROMPT_HEAD = "#include <bits/stdc++.h>\nusing namespace std;\n\n"
# What a completion that shares a build may not hold, outside comments and literals (module docstring).
REFUSED_WORDS = ("asm", "__asm", "__asm__", "__attribute__", "_Pragma", "__declspec", "extern",
                 # Filled in by the compiler with what differs in a shared build.
                 "__FILE__", "__BASE_FILE__", "__FILE_NAME__", "__COUNTER__", "__PRETTY_FUNCTION__",
                 "__TIMESTAMP__", "__INCLUDE_LEVEL__", "typeid")
REFUSED_TEXT = re.compile(r"#|%:|<%|%>|<:|:>|\[\[|\?\?|(?<![\w$])codelm", re.IGNORECASE)
_BLAMED = re.compile(r"\bm(\d+)/main\.cpp:|\bcodelm_m(\d+)::")


_declared_lock = threading.Lock()
_declared: dict[str, bool] = {}
_UNDECLARED = re.compile(r"^codelm-probe\.cpp:(\d+):\d+: error: '(\w+)' was not declared in this scope",
                         re.MULTILINE)


def declared(names) -> dict[str, bool]:
  """Whether the prompt's head (<bits/stdc++.h> and `using namespace std;`) already declares each
  name; cached, and asked of g++ for all unknown names in one compile (module docstring). A name
  g++ cannot be asked about counts as declared (its program then compiles alone)."""
  with _declared_lock:
    unknown = sorted({n for n in names if n not in _declared})
    if unknown:
      _declared.update(_probe(unknown))
    return {n: _declared[n] for n in names}


def _probe(names: list[str]) -> dict[str, bool]:
  plain = [n for n in names if re.fullmatch(r"[A-Za-z_]\w*", n)]
  first = PROMPT_HEAD.count("\n") + 1
  text = PROMPT_HEAD + "".join(f"void codelm_probe_{i}() {{ (void) {name}; }}\n" for i, name in enumerate(plain))
  undeclared = set()
  with tempfile.TemporaryDirectory() as work:
    source = os.path.join(work, "codelm-probe.cpp")
    with open(source, "w", encoding="utf-8") as f:
      f.write(text)
    pch = precompiled_header_dir()
    try:
      done = subprocess.run([GXX, *CXX_FLAGS, *(("-I", pch) if pch else ()), "-fsyntax-only", "codelm-probe.cpp"],
                            cwd=work, capture_output=True, text=True, timeout=300,
                            env={**os.environ, "LC_ALL": "C"})  # plain quotes in the messages
    except (OSError, subprocess.SubprocessError):
      return {n: True for n in names}
  for line, name in _UNDECLARED.findall(done.stderr):
    i = int(line) - first
    if 0 <= i < len(plain) and plain[i] == name:
      undeclared.add(name)
  return {n: n not in undeclared for n in names}


def _starts_char_literal(text: str, i: int) -> bool:
  """A quote after the digits of a number is a digit separator (C++14: 1'000'000), not a literal."""
  j = i
  while j > 0 and (text[j - 1].isalnum() or text[j - 1] in "_.'"):
    j -= 1
  return not (j < i and (text[j].isdigit() or (text[j] == "." and j + 1 < i and text[j + 1].isdigit())))


_STDCXX = re.compile(r"^[ \t]*#[ \t]*include[ \t]*<bits/stdc\+\+\.h>", re.MULTILINE)


class Cpp(base.Renderer):
  name = "cpp"
  display_name = "C++"
  value_literal = staticmethod(literal)
  toolchain = base.Toolchain(binaries=(GXX,), version_command=(GXX, "--version"),
                             read_only=(CACHE_DIR,))
  naming = staticmethod(base.snake_case)
  reserved = RESERVED
  convention = "camel"

  def signature_with_docstring(self, question: Question) -> str:
    params = ", ".join(f"{type_name(p.type)} {n}" for n, p in zip(self.params(question), question.params))
    return (PROMPT_HEAD + doc_comment(question.description) +
            f"{type_name(question.return_type)} {self.function_name(question)}({params}) {{\n")

  def stub(self, question: Question) -> str:
    return f"  return {type_name(question.return_type)}{{}};\n}}"

  def program(self, question: Question, completion: str) -> base.Program:
    text = (self.signature_with_docstring(question) + completion + "\n" + cpp_harness.HARNESS +
            f"\nint main() {{\n{self._calls(question)}  return 0;\n}}\n")
    return base.Program(files={"main.cpp": text}, compile=(self._compile("main.cpp"),), run=("./main",))

  def whole_program(self, question: Question, code: str) -> base.Program:
    """BabelCode's head (<bits/stdc++.h>, `using namespace std;`), the code, the harness; each case
    calls `entry_name` with variables of the declared types (so a `T&` parameter binds, as in
    BabelCode's driver) and records the value as the declared return type (the implicit conversion
    BabelCode's `validateSolution` makes)."""
    *params, returns = question.declared
    name, result = self.entry_name(question), declared_type(returns)
    calls = []
    for case in question.test_cases:
      # Named arguments, as BabelCode's driver has them: a `string& s` parameter binds to one.
      args = "".join(f"{declared_type(t)} codelm_a{i} = {declared_literal(t, v)}; "
                     for i, (t, v) in enumerate(zip(params, case.inputs)))
      call = f"{name}({', '.join(f'codelm_a{i}' for i in range(len(params)))})"
      calls.append(f"  codelm::run_case({case.idx}, []() {{ {args}return codelm::ok<{result}>({call}); }});\n")
    text = PROMPT_HEAD + code + "\n" + cpp_harness.HARNESS + f"\nint main() {{\n{''.join(calls)}  return 0;\n}}\n"
    return base.Program(files={"main.cpp": text}, compile=(self._compile("main.cpp"),), run=("./main",))

  def _calls(self, question: Question) -> str:
    name = self.function_name(question)
    result = qualified_type(question.return_type)
    # One captureless lambda per case (a plain function pointer: run_case is compiled once).
    return "".join(f"  codelm::run_case({idx}, []() {{ return codelm::ok<{result}>({name}({args})); }});\n"
                   for idx, args in base.render_cases(question, literal))

  def _compile(self, source: str) -> tuple[str, ...]:
    pch = precompiled_header_dir()
    include = ("-I", pch) if pch else ()
    return (GXX, *CXX_FLAGS, *include, "-o", "main", source)

  def prepare(self, questions) -> None:
    declared([self.function_name(q) for q in questions])

  def batchable(self, question: Question, completion: str) -> bool:
    if "R\"" in completion:  # a raw string's body is not lexed like a literal
      return False
    if declared([self.function_name(question)])[self.function_name(question)]:
      return False
    code = lexing.code_only(completion, char_literal=_starts_char_literal)
    return (code is not None and lexing.closes_body(code) and not REFUSED_TEXT.search(code)
            and not lexing.has_word(code, REFUSED_WORDS))

  def build(self, jobs) -> base.Build:
    """One translation unit: the prompt's head, the harness, then each member's doc comment,
    signature, completion and its cases in namespace codelm_m<k> (module docstring); `main k` runs
    member k's cases."""
    parts = [PROMPT_HEAD, cpp_harness.HARNESS]
    lines = PROMPT_HEAD.count("\n")
    for k, (question, completion) in enumerate(jobs):
      head = self.signature_with_docstring(question)
      assert head.startswith(PROMPT_HEAD)
      parts.append(f"namespace codelm_m{k} {{\n#line {lines + 1} \"m{k}/main.cpp\"\n"
                   f"{head[len(PROMPT_HEAD):]}{completion}\n"
                   f"void codelm_main() {{\n{self._calls(question)}}}\n}}\n")
    dispatch = "".join(f"    case {k}: codelm_m{k}::codelm_main(); return 0;\n" for k in range(len(jobs)))
    parts.append('#line 1 "codelm-batch.cpp"\nint main(int argc, char** argv) {\n'
                 "  switch (argc == 2 ? std::atoi(argv[1]) : -1) {\n" + dispatch +
                 "    default: return 2;\n  }\n}\n")
    runs = tuple(base.Program(files=self.program(question, completion).files, run=("./main", str(k)),
                              artefacts={"main": "main"})
                 for k, (question, completion) in enumerate(jobs))
    return base.Build(files={"batch.cpp": "".join(parts)}, compile=(self._compile("batch.cpp"),), runs=runs)

  def blamed(self, diagnostics: str, size: int) -> set[int]:
    return {int(a or b) for a, b in _BLAMED.findall(diagnostics)}

  def foreign(self, text: str) -> base.Foreign:
    """eval_cpp: `g++ f.cpp -o f -std=c++17`, then `./f`; a program including <bits/stdc++.h> gets
    the precompiled one too (the same declarations, faster)."""
    pch = precompiled_header_dir() if _STDCXX.search(text) else None
    include = ("-include", os.path.join(pch, "bits", "stdc++.h")) if pch else ()
    return base.Foreign("main.cpp", ("./main",), "exit_code",
                        compile=((GXX, *include, "main.cpp", "-o", "main", "-std=c++17"),))


RENDERER = Cpp()
