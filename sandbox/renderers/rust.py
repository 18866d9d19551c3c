"""Rust (edition 2021): a free function after `use std::collections::{HashMap, HashSet};`, with the
description as its `///` doc comment.

Types: bool -> bool, int -> i64, float -> f64, string -> String, list -> Vec<T>, set -> HashSet<T>
(set<float> -> Vec<f64>: f64 is neither Hash nor Ord), map -> HashMap<K, V>, tuple -> (A, B, ...),
optional -> Option<T>. Arguments are owned values, as MultiPL-E's Rust prompts have them. The
prompt ends after the function's opening brace; a completion is the body and the closing brace at
column 0, where it is cut (`stop_sequences`).

A whole program (`whole_program`) is BabelCode's head, the solution, the harness in a module of its
own and a main calling the entry with BabelCode's Rust types (integer -> i32, long -> i64, float ->
f32, double -> f64, character -> char), compiled in edition 2015 as BabelCode's `rustc main.rs` is.

Each test case runs under `std::panic::catch_unwind` (a silent panic hook keeps the message for the
record instead of printing it), so a panic ends only its case; an abort (stack overflow) ends the
program and the remaining cases are missing. Records go to a duplicate of the original stdout while
fd 1 points at stderr, so the solution's own `print!` cannot break a record line.

Compiled without optimisation (debug: integer overflow panics, like a checked language) and with
`-C prefer-dynamic`: linking against Debian's libstd .so instead of the static rlibs halves the
link, the larger part of a compile (about 0.2 s instead of 0.35 s).

Batched (sandbox/batching.py): a program's compile is about 0.27 s of CPU, most of it rustc's start,
the harness's code generation and the link, the same for every program, so many programs become one
crate. Its
main.rs links the harness (`harness_library`: compiled once on the host into CACHE_DIR, keyed by the
compiler and flags, with the usual std instantiations, which rustc shares across crates at opt-level 0)
and declares `mod codelm_m<k>` per member from m<k>/main.rs: the prompt, the completion and that
member's cases, line for line as its program alone begins, so rustc's diagnostics name m<k>/main.rs
(`blamed`) and line!() is the same. Member k runs in its own sandbox with its own main.rs, the shared
binary bound as ./main and CODELM_MEMBER=k, which main removes from the environment before any member
code runs (its argv and environment are its program's alone); the panic hook records main.rs:line:col
for m<k>/main.rs. 30 programs (tests/solutions/rust.json and stubs) build in about 0.5 s of CPU
(0.8 s compiling the harness in the crate) instead of 30 x 0.27 s; each then runs in about 10 ms.

A completion joins only when it is the rest of its function and nothing more (`batchable`): its braces
close the function exactly at its end (comments, with nesting, strings and chars blanked; a char is
told from a lifetime or label as rustc does), so all it declares is inside its body. What a body may
declare there is scoped to that body (fn, struct, enum, trait, type, static, const, use; macro_rules!
ends with its block) and unnameable from outside it, so no other member can call, shadow or name it;
and every symbol is mangled with its path. Impls are the exception: they are crate-global. Even with
the orphan rule applied to the whole crate, an impl of a std trait for a body-local type adds a
candidate to every member's trait selection, and rustc infers a type from a sole candidate: member B's
`true + Default::default()`, an error alone, compiles in a build where member A declares `pub struct
Local` with `impl Default for Local` and `impl Add<Local> for bool`, and runs A's code (without `pub`,
rustc's type privacy refuses it). So `impl` is refused altogether (it is rare in a completion, and a
macro cannot assemble the keyword: it must appear in the source), and the impls a member's inference
sees are std's, as alone (the harness's trait is unnameable). Refused, outside comments and literals: any
`#` (attributes: #[no_mangle], #[export_name], #[link_section], #[used], #[global_allocator],
#![...]; raw identifiers), raw strings (their bodies are not lexed), `extern`, `asm!`/`global_asm!`,
`crate`, `super`, `mod` (paths and files beyond its function), include!/include_str!/include_bytes!
(files of the build box: the other members' sources), `env` except as `env::` (env!, a renamed env),
option_env!, concat_idents!, names starting with `codelm` (the harness and the other members'
modules), what would tell a build from its program alone (file!, Location, set_hook/take_hook,
module_path!, type_name, TypeId, type_id, Backtrace), `Command` (it could run the shared binary as
another member), and non-ASCII outside literals (rustc NFC-normalises identifiers). A build whose
binary maps more than MAX_BINARY_BYTES (a member's huge static or thread_local, zeroes that cost no
build time but address space in every member's process) fails as a whole: its members compile alone.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import math
import os
import re
import subprocess
import threading
from collections.abc import Callable

from sandbox.renderers import base, cache, lexing, literals, rust_harness
from sandbox.typed import Question, Type, default_value

RUSTC = "/usr/bin/rustc"
# rustc links through `cc`, an /etc/alternatives link the sandbox's uid may not follow: name gcc.
LINKER = next((p for p in ("/usr/bin/x86_64-linux-gnu-gcc-12", "/usr/bin/gcc") if os.path.exists(p)),
              "/usr/bin/gcc")
SIZE = "/usr/bin/size"  # binutils, which the linker comes with
RUSTC_FLAGS = ("--edition", "2021", "-C", "opt-level=0", "-C", "debuginfo=0", "-C", "prefer-dynamic",
               "-C", f"linker={LINKER}", "-A", "warnings")

_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# The harness library's folder (CODELM_TOOLCHAINS overrides <repo root>/.toolchains).
CACHE_DIR = os.path.join(os.environ.get("CODELM_TOOLCHAINS") or os.path.join(_REPO_ROOT, ".toolchains"),
                         "rust")
LIBRARY = "libcodelm_harness.rlib"

_LOG = logging.getLogger(__name__)

RESERVED = frozenset("""
as break const continue crate else enum extern false fn for if impl in let loop match mod move mut
pub ref return self Self static struct super trait true type unsafe use where while async await dyn
abstract become box do final macro override priv typeof unsized virtual yield try union main
""".split())


def type_name(t: Type) -> str:
  scalar = {"bool": "bool", "int": "i64", "float": "f64", "string": "String"}
  if t.name in scalar:
    return scalar[t.name]
  if t.name == "set" and t.element.name == "float":
    return "Vec<f64>"
  args = ", ".join(type_name(a) for a in t.args)
  if t.name == "tuple":
    return f"({args},)" if len(t.args) == 1 else f"({args})"
  return {"list": f"Vec<{args}>", "set": f"HashSet<{args}>", "map": f"HashMap<{args}>",
          "optional": f"Option<{args}>"}[t.name]


def string_literal(text: str) -> str:
  """The text as a String, in plain ASCII (\\u{..} for anything else)."""
  # A lone surrogate has no UTF-8 form: the replacement character.
  body = literals.escape(text, lambda code: "\\u{fffd}" if 0xD800 <= code <= 0xDFFF else f"\\u{{{code:x}}}")
  return f'String::from("{body}")'


def literal(t: Type, value) -> str:
  """A Rust expression of exactly `type_name(t)`."""
  name = t.name
  if name == "bool":
    return "true" if value else "false"
  if name == "int":
    return "i64::MIN" if value == -(2 ** 63) else f"{value}i64"
  if name == "float":
    if math.isnan(value):
      return "f64::NAN"
    if math.isinf(value):
      return "f64::INFINITY" if value > 0 else "f64::NEG_INFINITY"
    return f"{float(value)!r}f64"
  if name == "string":
    return string_literal(value)
  if name == "optional":
    return f"Option::<{type_name(t.element)}>::None" if value is None else f"Some({literal(t.element, value)})"
  return _composite(t, value, literal, type_name)


def _composite(t: Type, value, element: Callable[[Type, object], str], spelled: Callable[[Type], str]) -> str:
  """A container's Rust expression of exactly `spelled(t)` (a Vec, HashSet or HashMap `from` an
  array, whatever a set of floats is spelled as), its elements written by `element`."""
  if t.name in ("list", "set"):
    items = value if t.name == "list" else sorted(value)
    return f"<{spelled(t)}>::from([{', '.join(element(t.element, v) for v in items)}])"
  if t.name == "map":
    pairs = ", ".join(f"({element(t.args[0], k)}, {element(t.args[1], v)})" for k, v in value.items())
    return f"<{spelled(t)}>::from([{pairs}])"
  if t.name == "tuple":
    items = ", ".join(element(a, v) for a, v in zip(t.args, value))
    return f"({items},)" if len(t.args) == 1 else f"({items})"
  raise AssertionError(t)


def default_literal(t: Type) -> str:
  """The default value as the stub returns it (plain constructors, no harness helpers)."""
  if t.name in ("list", "set", "map"):
    return f"{type_name(t).split('<')[0]}::new()"
  if t.name == "optional":
    return "None"
  if t.name == "tuple":
    items = ", ".join(default_literal(a) for a in t.args)
    return f"({items},)" if len(t.args) == 1 else f"({items})"
  return literal(t, default_value(t))


_MAIN = """
fn main() {
    let mut codelm_out = codelm_start();
"""
# A shared build's main: the member to run is taken out of the environment before any member's code
# runs, so each sees the argv and environment its program alone sees.
MEMBER_VARIABLE = "CODELM_MEMBER"
_BATCH_MAIN = f"""
fn main() {{
    let codelm_member = std::env::var("{MEMBER_VARIABLE}").ok();
    std::env::remove_var("{MEMBER_VARIABLE}");
    let mut codelm_out = codelm_start();
    match codelm_member.as_deref() {{
"""


def doc_comment(description: str) -> str:
  return "".join(f"/// {line}".rstrip() + "\n" for line in base.doc_lines(description))


# What a shared build's members call in the harness library (harness_library).
_EXPORTS = ("codelm_ok", "codelm_run", "codelm_start")


def public_harness() -> str:
  """The harness with what its users call public (a library crate's, a whole program's module)."""
  text = rust_harness.HARNESS.replace("\ntrait CodelmJson", "\npub trait CodelmJson")
  for name in _EXPORTS:
    assert f"\nfn {name}" in text, name
    text = text.replace(f"\nfn {name}", f"\npub fn {name}")
  return text


def library_source() -> str:
  """The harness as a library crate (its items public to the build that uses it), with rust_harness.WARM."""
  return public_harness() + rust_harness.WARM


# ---- whole programs (Rust.whole_program) ----

# BabelCode's Rust head (templates/Rust/header.txt).
WHOLE_HEAD = ("use std::collections::HashMap;\nuse std::collections::HashSet;\nuse std::cmp::*;\n"
              "use std::collections::*;\nuse std::fmt::*;\n\n")
# The harness in a module of its own, so that neither the head's glob imports (fmt's Result) nor the
# solution's names (a helper `dup`) meet it; `use std;` since in edition 2015 a module's own paths
# start from it, and std is only in the crate root.
WHOLE_HARNESS = "\nmod codelm_harness {\nuse std;\n" + public_harness() + "}\n"
# BabelCode runs `rustc main.rs`: rustc's default edition, 2015 (2021's prelude has TryFrom and
# TryInto, 2015's does not; arrays' into_iter yields references in 2015).
WHOLE_FLAGS = tuple("2015" if flag == "2021" else flag for flag in RUSTC_FLAGS)
# BabelCode's Rust types for the declared leaves (its schema_parsing Rust spec).
DECLARED = {"boolean": "bool", "integer": "i32", "long": "i64", "float": "f32", "double": "f64",
            "character": "char", "string": "String"}


def declared_type(t: Type) -> str:
  """A declared type (leaves named as typed.DECLARED_SCALARS) in Rust, collections by full path. A
  set of floats is a Vec, as in the prompts (f32 and f64 are not Hash); a tuple, which BabelCode
  never declares (it lists a homogeneous one and refuses others), is a Rust tuple."""
  if t.name in DECLARED:
    return DECLARED[t.name]
  args = ", ".join(declared_type(a) for a in t.args)
  if t.name == "tuple":
    return f"({args},)" if len(t.args) == 1 else f"({args})"
  if t.name == "set" and t.element.name in ("float", "double"):
    return f"Vec<{args}>"
  return {"list": f"Vec<{args}>", "set": f"std::collections::HashSet<{args}>",
          "map": f"std::collections::HashMap<{args}>"}[t.name]


def declared_literal(t: Type, value) -> str:
  """A Rust expression of exactly `declared_type(t)`. An integer out of i32's range is a compile
  error, as BabelCode's literal is (overflowing_literals denies it)."""
  name = t.name
  if name == "boolean":
    return "true" if value else "false"
  if name == "integer":
    return f"{value}i32"
  if name == "long":
    return literal(Type("int"), value)
  if name == "float":
    if math.isnan(value) or math.isinf(value):
      return literal(Type("float"), value).replace("f64::", "f32::")
    return f"{float(value)!r}f32"
  if name == "double":
    return literal(Type("float"), value)
  if name == "character":  # the string's first character (BabelCode's are one long)
    code = ord(value[0]) if value else 0
    return f"'\\u{{{0xFFFD if 0xD800 <= code <= 0xDFFF else code:x}}}'"
  if name == "string":
    return string_literal(value)
  return _composite(t, value, declared_literal, declared_type)


_library_lock = threading.Lock()


def _library_key() -> str:
  """Changes with the compiler build, the flags and the library's source: a new key, a new folder
  (an rlib is only read by the rustc that wrote it)."""
  try:
    version = subprocess.run([RUSTC, "--version", "--verbose"], capture_output=True, text=True,
                             timeout=60).stdout
    stat = os.stat(os.path.realpath(RUSTC))
    compiler = f"{version}:{stat.st_size}:{stat.st_mtime_ns}"
  except (OSError, subprocess.SubprocessError):
    compiler = "missing"
  return hashlib.sha256(repr((compiler, RUSTC_FLAGS, library_source())).encode()).hexdigest()[:16]


def _build_library(work: str) -> None:
  with open(os.path.join(work, "codelm_harness.rs"), "w", encoding="utf-8") as f:
    f.write(library_source())
  subprocess.run([RUSTC, *RUSTC_FLAGS, "--crate-type", "rlib", "--crate-name", "codelm_harness",
                  "-o", LIBRARY, "codelm_harness.rs"], cwd=work, check=True, capture_output=True, timeout=600)


@functools.cache
def harness_library() -> str | None:
  """CACHE_DIR/<key>/libcodelm_harness.rlib: the harness compiled once on the host, which a shared
  build links instead of compiling it again (0.2 s of CPU per build). None when it cannot be built:
  a build then compiles the harness itself, only slower. Folders of other keys are left alone (2 MB
  each): a scorer process still running an older version may be using one."""
  with _library_lock:
    final = os.path.join(CACHE_DIR, _library_key())
    rlib = os.path.join(final, LIBRARY)
    if os.path.exists(rlib):
      return rlib
    try:
      cache.publish(CACHE_DIR, final, _build_library)
    except (OSError, subprocess.SubprocessError) as error:
      if not os.path.exists(rlib):  # unless another scorer process built it meanwhile
        _LOG.warning("the Rust harness library failed to build (builds compile the harness): %s", error)
        return None
    return rlib


# A shared build (module docstring): what a completion may not hold outside comments and literals.
# Any `#` is an attribute (#[no_mangle], #[export_name], #[link_section], #[used], #![...]) or a raw
# string or identifier; `codelm` starts the harness's names and the other members' modules; `env`
# other than the module path `env::` is the env! macro, maybe renamed (`use std::env as e; e!(..)`).
REFUSED_TEXT = re.compile(r"#|[^\x00-\x7f]|(?<![\w$])codelm|(?<![\w$])env\b(?!\s*::)", re.IGNORECASE)
REFUSED_WORDS = (
    "extern", "asm", "global_asm", "llvm_asm",       # foreign symbols, code placed by hand
    "crate", "super", "mod", "macro_export",         # paths and items beyond its own function
    "impl",                                          # impls are crate-global (module docstring)
    "include", "include_str", "include_bytes",       # read files of the build box (the other members)
    "concat_idents", "option_env",                   # (`env!` is refused by REFUSED_TEXT)
    "file", "Location", "set_hook", "take_hook",     # what tells m<k>/main.rs from main.rs,
    "module_path", "type_name", "type_name_of_val",  # a module path or a type's identity from the
    "TypeId", "type_id", "Backtrace",                # program's alone
    "Command",                                       # could run the shared binary as another member
)
# A raw string (r"..", r#".."#, br"..") is not lexed as a literal by lexing.code_only. In edition 2021
# an identifier right before a quote is an error, so a raw string that compiles starts after no \w.
RAW_STRING = re.compile(r"(?<!\w)b?r#*\"")
# `--> m3/main.rs:5:9` (an error's own or another span), and a linker's `codelm_m3::` or legacy
# mangled `9codelm_m3` (the length prefix says where the index ends).
_SPAN = re.compile(r"^\s*(?:-->|:::) m(\d+)/main\.rs:\d", re.MULTILINE)
_DEMANGLED = re.compile(r"\bcodelm_m(\d+)::")
_MANGLED = re.compile(r"(\d+)codelm_m(\d+)")
# The shared binary's text + data + bss must stay this small: every member's process maps all of it,
# so a member's huge `static` (zeroes in .bss cost no build time) would take memory from the others.
# 30 members map about 0.4 MB; a larger build fails as a whole and its members compile alone.
MAX_BINARY_BYTES = 16 << 20


def _starts_char_literal(text: str, i: int) -> bool:
  """'x', '\\n' and '\\u{..}' are characters; 'a (a lifetime) and 'outer: (a label) are not: rustc's rule
  for every program that compiles (a quote after one character closes it)."""
  return text.startswith("\\", i + 1) or text.startswith("'", i + 2)


def _mangled_members(diagnostics: str) -> set[int]:
  """Members named by legacy-mangled symbols: `9codelm_m3` is 9 characters long, so member 3 (the
  digits before the name are its length, one or two of them; each reading that fits is taken)."""
  found = set()
  for length, digits in _MANGLED.findall(diagnostics):
    for prefix in {length[-1:], length[-2:]}:
      take = int(prefix) - len("codelm_m")
      if 0 < take <= len(digits):
        found.add(int(digits[:take]))
  return found


class Rust(base.Renderer):
  name = "rust"
  display_name = "Rust"
  value_literal = staticmethod(literal)
  foreign_timeout_s = 5.0
  toolchain = base.Toolchain(binaries=(RUSTC, LINKER, SIZE), version_command=(RUSTC, "--version"),
                             read_only=(CACHE_DIR,))
  naming = staticmethod(base.snake_case)
  reserved = RESERVED

  def signature_with_docstring(self, question: Question) -> str:
    params = ", ".join(f"{n}: {type_name(p.type)}" for n, p in zip(self.params(question), question.params))
    return ("use std::collections::{HashMap, HashSet};\n\n" + doc_comment(question.description) +
            f"fn {self.function_name(question)}({params}) -> {type_name(question.return_type)} {{\n")

  def stub(self, question: Question) -> str:
    return f"    return {default_literal(question.return_type)};\n}}"

  def program(self, question: Question, completion: str) -> base.Program:
    text = (self.signature_with_docstring(question) + completion + "\n" + rust_harness.HARNESS + _MAIN +
            self._calls(question, "codelm_", "&mut codelm_out") + "}\n")
    return base.Program(files={"main.rs": text}, compile=(_compile("main.rs"),), run=("./main",))

  def whole_program(self, question: Question, code: str) -> base.Program:
    """BabelCode's head (its `use` lines), the code, the harness as module codelm_harness, and a main
    whose calls pass `entry_name` arguments of the declared types (owned, as BabelCode's driver does)
    and bind the value to the declared return type; compiled in edition 2015, as BabelCode's rustc."""
    *params, returns = question.declared
    name, result = self.entry_name(question), declared_type(returns)
    calls = "".join(f"    codelm_harness::codelm_run(&mut codelm_out, {case.idx}, || {{\n"
                    f"        let codelm_result: {result} = "
                    f"{name}({', '.join(map(declared_literal, params, case.inputs))});\n"
                    f"        codelm_harness::codelm_ok(codelm_result)\n    }});\n"
                    for case in question.test_cases)
    text = (WHOLE_HEAD + code + "\n" + WHOLE_HARNESS +
            "\nfn main() {\n    let mut codelm_out = codelm_harness::codelm_start();\n" + calls + "}\n")
    return base.Program(files={"main.rs": text}, compile=((RUSTC, *WHOLE_FLAGS, "-o", "main", "main.rs"),),
                        run=("./main",))

  def _calls(self, question: Question, harness: str, out: str) -> str:
    name = self.function_name(question)
    return "".join(f"    {harness}run({out}, {idx}, || {harness}ok({name}({args})));\n"
                   for idx, args in base.render_cases(question, literal))

  def batchable(self, question: Question, completion: str) -> bool:
    if RAW_STRING.search(completion):
      return False
    code = lexing.code_only(completion, nested_comments=True, char_literal=_starts_char_literal)
    return (code is not None and lexing.closes_body(code) and not REFUSED_TEXT.search(code)
            and not lexing.has_word(code, REFUSED_WORDS))

  def build(self, jobs) -> base.Build:
    """One crate: main.rs links the harness and declares `mod codelm_m<k>` per member from
    m<k>/main.rs; member k runs as ./main with CODELM_MEMBER=k (module docstring)."""
    library = harness_library()
    files = {f"m{k}/main.rs": self._member(question, completion)
             for k, (question, completion) in enumerate(jobs)}
    files["main.rs"] = _crate_root(len(jobs), library)
    runs = tuple(base.Program(files=self.program(question, completion).files,
                              run=("./main",), env={MEMBER_VARIABLE: str(k)}, artefacts={"main": "main"})
                 for k, (question, completion) in enumerate(jobs))
    extern = ("--extern", f"codelm_harness={library}") if library else ()
    return base.Build(files=files, compile=(_compile("main.rs", extern), _SIZE_CHECK), runs=runs)

  def _member(self, question: Question, completion: str) -> str:
    """The member's module: its program's first lines (prompt and completion) line for line, then
    its cases, which call the harness through the crate root."""
    return (self.signature_with_docstring(question) + completion + "\n" +
            "pub(super) fn codelm_main(codelm_out: &mut std::fs::File) {\n" +
            self._calls(question, "super::codelm_", "codelm_out") + "}\n")

  def blamed(self, diagnostics: str, size: int) -> set[int]:
    found = {int(k) for k in _SPAN.findall(diagnostics)} | {int(k) for k in _DEMANGLED.findall(diagnostics)}
    return found | _mangled_members(diagnostics)

  def foreign(self, text: str) -> base.Foreign:
    """eval_rust: `rustc f.rs -o f` (a compile that times out is a Timeout there), then `./f`."""
    rustc = (RUSTC, "-C", "prefer-dynamic", "-C", f"linker={LINKER}", "main.rs", "-o", "main")
    return base.Foreign("main.rs", ("./main",), "exit_code", compile=(rustc,), compile_timeout_status="Timeout")


def _crate_root(size: int, library: str | None) -> str:
  """The harness (imported from the library, else compiled here), the members' modules, and a main
  that runs the one CODELM_MEMBER names."""
  harness = f"use codelm_harness::{{{', '.join(_EXPORTS)}}};\n" if library else rust_harness.HARNESS
  modules = "".join(f'#[path = "m{k}/main.rs"]\nmod codelm_m{k};\n' for k in range(size))
  dispatch = "".join(f'        Some("{k}") => codelm_m{k}::codelm_main(&mut codelm_out),\n'
                     for k in range(size))
  return harness + modules + _BATCH_MAIN + dispatch + "        _ => std::process::exit(2),\n    }\n}\n"


def _compile(source: str, extra: tuple[str, ...] = ()) -> tuple[str, ...]:
  return (RUSTC, *RUSTC_FLAGS, *extra, "-o", "main", source)


# Fails (naming no member, so each compiles alone) when the binary maps more than MAX_BINARY_BYTES.
_SIZE_CHECK = ("/bin/sh", "-c", f'set -- $({SIZE} -B main | tail -n 1) && [ "$4" -le {MAX_BINARY_BYTES} ] '
               f'|| {{ echo "the shared binary maps $4 bytes, more than {MAX_BINARY_BYTES}" >&2; exit 1; }}')


RENDERER = Rust()
