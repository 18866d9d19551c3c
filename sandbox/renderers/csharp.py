"""C#: a PascalCase instance method of `class Solution` with an XML doc comment, as BabelCode writes
it, compiled by mono's mcs (C# 7.2 at most) and run by the mono runtime.

Types: bool -> bool, int -> long, float -> double, string -> string, list -> List<T>, set ->
HashSet<T>, map -> Dictionary<K, V>, tuple -> a C# 7 tuple `(long, string)` (System.ValueTuple,
which mono's mscorlib has), optional -> `T?` for value types and plain T for reference types
(string and the collections, which may be null anyway).

The prompt ends after the method's opening brace; a completion is the body, the method's closing
brace, any helpers and the class's closing brace at column 0, where it is cut (`stop_sequences`).
The harness is a second class after it, named as the entry point with `-main:` so a `Main` the
model writes inside Solution does not collide with it.

A whole program (`whole_program`) is BabelCode's head (its using directives, less System.Web's two:
mono here has no System.Web assemblies), the code, then the harness, called with BabelCode's declared
types (a double is a decimal there); the value is turned into the typed one (decimal -> double, char
-> string) in main.cs, so the runtime library is the completions' own.

mcs itself and mscorlib are ahead-of-time compiled by Debian (/usr/lib/mono/aot-cache), so a
program compiles in about 0.15 CPU seconds and runs in about 0.02; `-noconfig` (only the assemblies
named) saves another 10%.

The harness's fixed part (the JSON encoder and the record loop, csharp_runtime.cs) is a library,
CodelmRuntime.dll, compiled once on the host into CACHE_DIR/runtime-<key>/ (keyed by mono, mscorlib,
mcs, the framework assemblies, the sources and the flags) and ahead-of-time compiled there by
`mono --aot` (CodelmRuntime.dll.so, where binutils' as and ld exist): main.cs keeps what depends on
the question (the return type's tree, the case ids, the `Call` switch) and compiles against the
library, and the run finds it through MONO_PATH, read-only outside the box. Where the library cannot
be built, main.cs carries the runtime's source instead (the same records; tested).

Importing System.dll is about a third of a warm compilation, and most programs never reach it.
csharp_names.cs, run on the host when the library is built, lists every name through which a
program can reach System.dll: its top-level types and extension methods, the namespace segments only
it brings, and the types and members of the other referenced assemblies whose signatures hold one
of its types, to a fixed point (HashSet<T> implements its ISet<T>). A program whose text, escapes
and formatting characters decoded, holds none of those names is compiled without -r:System.dll;
listing too much only costs speed. The tests compile the fixture's programs, the attacks and
completions that reach much of the language and the framework both ways and compare the reports and
main.exe, byte for byte.

Batched (sandbox/batching.py), with per-member reports: of those 0.15 s, about 0.1 is mono and
mcs warming up, paid once per process. A small driver (csharp_batch.cs, compiled once on the host
into CACHE_DIR against mcs.exe, keyed by the mono build, mcs.exe and the driver's source) runs in the
build sandbox as one mono process and calls mcs's own compiler once per member: member k's program,
unchanged, is m<k>/main.cs, compiled with m<k>/ as the current directory and exactly the options it
is compiled with alone, so its diagnostics, its "Compilation failed: N error(s)" line, its exit
status and even its main.exe (byte for byte) are what mcs gives it alone; member k then runs
`mono main.exe` in its own sandbox with m<k>/main.exe bound in. What keeps members apart:
- each is a compilation of its own: mcs sees one source file, builds a fresh compiler context,
  imports the references anew, and its static state is reset after every member (without the reset
  LINQ's transparent identifiers and #line's file names carried over; with it, tests compare every
  member's report and main.exe with mcs's alone, in several orders);
- no C# source makes mcs read or write another file: there is no include, `-out:` is fixed, and a
  global attribute that names a key file is ignored after `class Solution {` opens (CS0657);
- what could depend on the shared process rather than the source (an internal compiler error such
  as a stack overflow, a failed write, running out of memory, an exception, a compilation slower than
  a few seconds) gets no report, and the member is compiled alone (csharp_batch.cs).
The one thing a source can observe that differs is its own path, through [CallerFilePath]
(/box/m3/main.cs instead of /box/main.cs): `batchable` refuses a completion that names it, escapes
and formatting characters decoded. Everything else joins.

Where the time goes (bench/score_throughput.py --languages csharp --programs 64 --repeats 2, 2
workers, CPU seconds a program, sandboxes included): before this batching 0.23, alone 0.17, batched
0.06. Of the batched, the driver's warm compilation is most (mscorlib, System.Core and System.Numerics
are read again by each compilation, since mcs ties them to its compiler context), then the run and
its sandbox. A shared build (one compilation for all members) would save more, but it puts each
member's types in a namespace of its own, which changes what their default ToString(), GetType() and
stack traces say.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import math
import os
import re
import shutil
import subprocess
import threading
import unicodedata

from sandbox.renderers import base, cache, literals
from sandbox.typed import Question, Type, default_value, walk_types

MONO = "/usr/bin/mono-sgen"  # /usr/bin/mono links to it; /usr/bin/mcs is a shell wrapper around it
MCS = "/usr/lib/mono/4.5/mcs.exe"
HARNESS_CLASS = "CodelmHarness"
# -noconfig: no default references beyond the ones named (fewer assemblies to load); System has
# Stack, Queue, Regex, System.Core LINQ and HashSet, System.Numerics BigInteger.
SYSTEM_REFERENCE = "-r:System.dll"
MCS_REFERENCES = (SYSTEM_REFERENCE, "-r:System.Core.dll", "-r:System.Numerics.dll")
MCS_FLAGS = ("-langversion:7.2", "-warn:0", f"-main:{HARNESS_CLASS}", "-out:main.exe")
MCS_OPTIONS = ("-noconfig", *MCS_REFERENCES, *MCS_FLAGS)  # a self-contained program's (no runtime library)

_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# The batch driver and the runtime library, each compiled once per mono build and source
# (CODELM_TOOLCHAINS overrides <repo root>/.toolchains, as for C++'s precompiled header).
CACHE_DIR = os.path.join(os.environ.get("CODELM_TOOLCHAINS") or os.path.join(_REPO_ROOT, ".toolchains"),
                         "csharp")
DRIVER_SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "csharp_batch.cs")
DRIVER_NAME = "codelm-mcs-batch.exe"
# How the driver is compiled: against mcs.exe itself, whose compiler classes it calls.
DRIVER_FLAGS = ("-noconfig", "-r:System.dll", f"-r:{MCS}", "-warn:0")
# The fixed part of the harness (csharp_runtime.cs), compiled once per mono build and source into
# CACHE_DIR/runtime-<key>/ and ahead-of-time compiled there (module docstring).
RUNTIME_SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "csharp_runtime.cs")
RUNTIME_CLASS = "CodelmRuntime"
RUNTIME_NAME = "CodelmRuntime.dll"
RUNTIME_PREFIX = "runtime-"  # its key directory's prefix (the driver's is the bare key)
# mscorlib only (-noconfig; the runtime needs nothing else), so a run loads no other assembly for it.
RUNTIME_FLAGS = ("-noconfig", "-target:library", "-optimize+", "-warn:0")
# mono's default AOT (not --aot=full, which needs a full-AOT mscorlib): native code for every
# method, loaded from CodelmRuntime.dll.so next to the library; the JIT still compiles the program.
AOT_OPTIONS = ("--aot",)
MSCORLIB = "/usr/lib/mono/4.5/mscorlib.dll"  # an AOT image is only valid with the mscorlib it was made against
# Which names lead to System.dll (module docstring): csharp_names.cs, run on the host when the
# runtime is built, over System.dll and the other assemblies a program references.
NAMES_SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "csharp_names.cs")
NAMES_TOOL = "codelm-csharp-names.exe"
SYSTEM_NAMES = "system-names.txt"
FRAMEWORK = tuple(os.path.join(os.path.dirname(MCS), name)
                  for name in ("System.dll", "System.Core.dll", "System.Numerics.dll"))
_WORD = re.compile(r"\w+")
# The batch's compiler process only (mcs's outputs do not depend on it): a 64 MB nursery (mono's
# default is 4 MB) collects less often; 12% fewer instructions over 6 members (callgrind: 2.01G ->
# 1.76G; 256 MB gains nothing more), ~280 MB resident.
BUILD_ENV = {"MONO_GC_PARAMS": "nursery-size=64m"}

# What a batchable completion may not contain, in any case, after `_unescaped` (module docstring).
REFUSED_TEXT = ("callerfilepath",)
_UNICODE_ESCAPE = re.compile(r"\\u([0-9a-fA-F]{4})|\\U([0-9a-fA-F]{8})")

_LOG = logging.getLogger(__name__)

RESERVED = frozenset("""
abstract as base bool break byte case catch char checked class const continue decimal default
delegate do double else enum event explicit extern false finally fixed float for foreach goto if
implicit in int interface internal is lock long namespace new null object operator out override
params private protected public readonly ref return sbyte sealed short sizeof stackalloc static
string struct switch this throw true try typeof uint ulong unchecked unsafe ushort using virtual
void volatile while
""".split())  # C#'s keywords; contextual ones (var, value, ...) are valid names

_SCALARS = {"bool": "bool", "int": "long", "float": "double", "string": "string"}
_VALUE_TYPES = ("bool", "int", "float", "tuple")
USINGS = ("System", "System.Collections.Generic", "System.Linq", "System.Text")
MAX_TUPLE = 7  # ValueTuple`8 nests the rest in a TRest field


def type_name(t: Type) -> str:
  if t.name in _SCALARS:
    return _SCALARS[t.name]
  args = [type_name(a) for a in t.args]
  if t.name == "optional":
    return args[0] + ("?" if t.element.name in _VALUE_TYPES else "")
  if t.name == "tuple":
    if not 1 <= len(args) <= MAX_TUPLE:
      raise ValueError(f"C#: tuples of {len(args)} items are not supported (1 to {MAX_TUPLE})")
    return f"ValueTuple<{args[0]}>" if len(args) == 1 else "(" + ", ".join(args) + ")"
  if t.name == "map":
    return f"Dictionary<{args[0]}, {args[1]}>"
  return {"list": f"List<{args[0]}>", "set": f"HashSet<{args[0]}>"}[t.name]


def string_literal(text: str) -> str:
  return '"' + literals.escape(text, _unicode_escape, named=literals.NEWLINE_TAB_RETURN) + '"'


def _unicode_escape(code: int) -> str:
  return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def literal(t: Type, value) -> str:
  """A C# expression of exactly type `type_name(t)`."""
  name = t.name
  if value is None:
    return f"({type_name(t)})null"
  if name == "bool":
    return "true" if value else "false"
  if name == "int":
    return "long.MinValue" if value == -(2 ** 63) else f"{value}L"
  if name == "float":
    if math.isnan(value):
      return "double.NaN"
    if math.isinf(value):
      return "double.PositiveInfinity" if value > 0 else "double.NegativeInfinity"
    return repr(float(value))
  if name == "string":
    return string_literal(value)
  if name == "optional":
    return literal(t.element, value)
  if name in ("list", "set"):
    items = value if name == "list" else sorted(value)
    return f"new {type_name(t)} {{" + ", ".join(literal(t.element, v) for v in items) + "}"
  if name == "map":
    entries = ", ".join(f"{{{literal(t.args[0], k)}, {literal(t.args[1], v)}}}" for k, v in value.items())
    return f"new {type_name(t)} {{{entries}}}"
  if name == "tuple":
    items = ", ".join(literal(a, v) for a, v in zip(t.args, value))
    return f"ValueTuple.Create({items})" if len(t.args) == 1 else f"({items})"
  raise AssertionError(t)


# ---- whole programs (Renderer.whole_program) --------------------------------------------------

# BabelCode's C# head (templates/CSharp/header.txt) less `using System.Web.UI;` and `using
# System.Web.Script.Serialization;`: mono here has no System.Web.dll or System.Web.Extensions.dll
# (BabelCode references both), and mcs refuses a using directive whose namespace it cannot find.
WHOLE_USINGS = ("System", "System.Numerics", "System.Diagnostics", "System.Collections.Generic", "System.Linq",
                "System.Text", "System.Security.Cryptography")
# The class BabelCode's driver instantiates: a question's entry_cls_name, which is always BabelCode's
# default (typed questions do not carry one).
ENTRY_CLASS = "Solution"
# BabelCode's C# types (its schema_parsing C# spec): a double is a decimal.
DECLARED = {"boolean": "bool", "integer": "int", "long": "long", "float": "float", "double": "decimal",
            "character": "char", "string": "string"}
MAX_DECIMAL = 7.9e28  # about decimal.MaxValue: a larger decimal literal does not compile
_GENERIC = "global::System.Collections.Generic."
# The harness's conversions of a returned container whose elements are decimals or chars.
WHOLE_HELPERS = f"""
    static {_GENERIC}List<object> Items<T>({_GENERIC}IEnumerable<T> items, global::System.Func<T, object> typed) {{
        if (items == null) return null;
        var list = new {_GENERIC}List<object>();
        foreach (T item in items) list.Add(typed(item));
        return list;
    }}

    static {_GENERIC}Dictionary<object, object> Pairs<K, V>({_GENERIC}IDictionary<K, V> map,
            global::System.Func<K, object> key, global::System.Func<V, object> value) {{
        if (map == null) return null;
        var pairs = new {_GENERIC}Dictionary<object, object>();
        foreach (var entry in map) pairs.Add(key(entry.Key), value(entry.Value));
        return pairs;
    }}
"""


def declared_type(t: Type) -> str:
  """A declared type (leaves named as typed.DECLARED_SCALARS) as BabelCode writes it in C#; a tuple
  (which BabelCode has not in C#) as the completions' ValueTuple."""
  if t.name in DECLARED:
    return DECLARED[t.name]
  args = [declared_type(a) for a in t.args]
  if t.name == "tuple":
    if not 1 <= len(args) <= MAX_TUPLE:
      raise ValueError(f"C#: tuples of {len(args)} items are not supported (1 to {MAX_TUPLE})")
    return f"ValueTuple<{', '.join(args)}>"  # mcs does not parse `(long, char) a0 = ...;` as a statement
  return {"list": f"List<{args[0]}>", "set": f"HashSet<{args[0]}>",
          "map": f"Dictionary<{', '.join(args)}>"}[t.name]


def declared_literal(t: Type, value) -> str:
  """A C# expression of exactly `declared_type(t)` for a typed value of the same shape, written as
  BabelCode writes its literals (1, 1.5f, 1.5m)."""
  name = t.name
  if name == "integer":  # out of range: wrapped, as C++'s static_cast (BabelCode's would not compile)
    return str(value) if -2 ** 31 <= value < 2 ** 31 else f"unchecked((int) {literal(Type('int'), value)})"
  if name == "long":
    return literal(Type("int"), value)
  if name == "float":
    if not math.isfinite(value):
      return "float.NaN" if math.isnan(value) else f"float.{'Positive' if value > 0 else 'Negative'}Infinity"
    return f"{value!r}f" if literals.single_literal_keeps(value) else f"(float) {value!r}"
  if name == "double":
    if math.isfinite(value) and abs(value) < MAX_DECIMAL:
      return f"{value!r}m"
    # No decimal holds it: the case throws (an OverflowException), where BabelCode's would not compile.
    return f"global::System.Convert.ToDecimal({literal(Type('float'), value)})"
  if name == "boolean":
    return "true" if value else "false"
  if name == "character":  # its first UTF-16 unit, as a C# char holds
    unit = value.encode("utf-16-le", "surrogatepass")[:2]
    return f"(char) {int.from_bytes(unit, 'little')}"
  if name == "string":
    return string_literal(value)
  if name in ("list", "set"):
    items = value if name == "list" else sorted(value)
    return f"new {declared_type(t)} {{" + ", ".join(declared_literal(t.element, v) for v in items) + "}"
  if name == "map":
    entries = ", ".join(f"{{{declared_literal(t.args[0], k)}, {declared_literal(t.args[1], v)}}}"
                        for k, v in value.items())
    return f"new {declared_type(t)} {{{entries}}}"
  if name == "tuple":
    items = ", ".join(declared_literal(a, v) for a, v in zip(t.args, value))
    return f"ValueTuple.Create({items})" if len(t.args) == 1 else f"({items})"
  raise AssertionError(t)


def _converts(t: Type) -> bool:
  return any(x.name in ("double", "character") for x in walk_types(t))


def typed_value(t: Type, expr: str, depth: int = 0) -> str:
  """A C# expression turning `expr`, of declared_type(t), into a value the runtime encodes as the
  typed type: a decimal as a double, a char as a string; a container rebuilt (as objects) only where
  one of its elements is turned."""
  if not _converts(t):
    return expr
  if t.name == "double":
    return f"(double) {expr}"
  if t.name == "character":
    return f"{expr}.ToString()"
  x = f"codelmX{depth}"  # nested lambdas' parameters must differ
  if t.name in ("list", "set"):
    return f"Items({expr}, ({x}) => {typed_value(t.element, x, depth + 1)})"
  if t.name == "map":
    return (f"Pairs({expr}, ({x}) => {typed_value(t.args[0], x, depth + 1)}, "
            f"({x}) => {typed_value(t.args[1], x, depth + 1)})")
  if t.name == "tuple":
    items = [typed_value(a, f"{expr}.Item{i + 1}", depth) for i, a in enumerate(t.args)]
    return f"new global::System.ValueTuple<{', '.join(['object'] * len(items))}>({', '.join(items)})"
  raise AssertionError(t)


def param_name(name: str) -> str:
  """camelCase; a keyword gets C#'s verbatim prefix (`@string`), as C# code writes it."""
  name = base.camel_case(name)
  return "@" + name if name in RESERVED else name


def type_tree(t: Type) -> str:
  """The type as the runtime's tree: new CodelmRuntime.Ty("list", new CodelmRuntime.Ty("int"))."""
  args = "".join(", " + type_tree(a) for a in t.args)
  return f'new {RUNTIME_CLASS}.Ty("{t.name}"{args})'


def doc_comment(description: str, indent: str = "    ") -> str:
  """The description as an XML <summary>; none without one (Renderer.signature)."""
  lines = [f"{indent}/// {line}".rstrip() for line in base.doc_lines(description)]
  if not lines:
    return ""
  return (f"{indent}/// <summary>\n" + "".join(line + "\n" for line in lines)
          + f"{indent}/// </summary>\n")


@functools.cache
def runtime_source() -> str:
  """csharp_runtime.cs with the record prefix filled in."""
  with open(RUNTIME_SOURCE, encoding="utf-8") as f:
    return f.read().replace("PREFIX", base.RECORD_PREFIX)


def _runtime_key() -> str:
  """Changes with the mono build, mscorlib, mcs, the framework assemblies, the runtime's and the
  names tool's sources, the flags and the AOT options (mono ignores an AOT image made by another
  runtime or against another mscorlib: it would JIT the library again, silently)."""
  try:
    stats = [os.stat(os.path.realpath(path)) for path in (MONO, MSCORLIB, MCS, *FRAMEWORK)]
    with open(NAMES_SOURCE, "rb") as f:
      names = f.read()
    source = runtime_source()
  except OSError:
    return ""
  toolchain = ":".join(f"{s.st_size}:{s.st_mtime_ns}" for s in stats)
  return hashlib.sha256(repr((toolchain, RUNTIME_FLAGS, AOT_OPTIONS, source, names)).encode()).hexdigest()[:16]


_runtime_lock = threading.Lock()


@functools.cache
def runtime_dir() -> str | None:
  """CACHE_DIR/runtime-<key>/: CodelmRuntime.dll and, where mono can ahead-of-time compile it
  (it needs binutils' as and ld on the host), CodelmRuntime.dll.so. Built once on the host; None
  when the library cannot be (each program then carries the runtime's source in its main.cs)."""
  key = _runtime_key()
  if not key:
    return None
  final = os.path.join(CACHE_DIR, RUNTIME_PREFIX + key)
  library = os.path.join(final, RUNTIME_NAME)
  with _runtime_lock:
    if os.path.exists(library):
      return final
    try:
      cache.publish(CACHE_DIR, final, _build_runtime)
    except (OSError, subprocess.SubprocessError) as error:
      if not os.path.exists(library):  # another scorer may have won the rename
        _LOG.warning("the C# runtime library failed to build (programs carry its source): %s %s", error,
                     (getattr(error, "stdout", None) or b"")[-2000:])
        return None
    # Earlier runtimes stay (60 KB each): a scorer of another checkout sharing the cache may be
    # running programs against one right now, and a run whose library vanished would fail.
    return final


def _build_runtime(work: str) -> None:
  """runtime_dir's contents, into `work`."""
  source = os.path.join(work, "CodelmRuntime.cs")
  with open(source, "w", encoding="utf-8") as f:
    f.write(runtime_source())
  subprocess.run([MONO, MCS, *RUNTIME_FLAGS, f"-out:{os.path.join(work, RUNTIME_NAME)}", source],
                 check=True, capture_output=True, timeout=300)
  try:
    subprocess.run([MONO, *AOT_OPTIONS, RUNTIME_NAME], cwd=work, check=True, capture_output=True,
                   timeout=300, env={**os.environ, "TMPDIR": work})
  except (OSError, subprocess.SubprocessError) as error:  # the library works without: JIT'd
    _LOG.warning("mono could not AOT-compile the C# runtime (runs JIT it): %s %s", error,
                 (getattr(error, "stdout", None) or b"")[-2000:])
  try:
    _list_system_names(work)
  except (OSError, subprocess.SubprocessError) as error:  # every program then references it
    _LOG.warning("the names that lead to System.dll were not listed (every program references "
                 "it): %s %s", error, (getattr(error, "stderr", None) or b"")[-2000:])
  keep = (RUNTIME_NAME, RUNTIME_NAME + ".so", SYSTEM_NAMES)
  for name in os.listdir(work):  # MONO_PATH points here: nothing but these
    if name not in keep:
      os.remove(os.path.join(work, name))


def _list_system_names(work: str) -> None:
  """work/system-names.txt: csharp_names.cs's list, over System.dll and the other assemblies a
  program compiled against work/CodelmRuntime.dll references."""
  tool = os.path.join(work, NAMES_TOOL)
  subprocess.run([MONO, MCS, "-noconfig", "-r:System.dll", "-r:System.Core.dll", "-warn:0", f"-out:{tool}",
                  NAMES_SOURCE], check=True, capture_output=True, timeout=300)
  listed = subprocess.run([MONO, tool, FRAMEWORK[0], MSCORLIB, *FRAMEWORK[1:], os.path.join(work, RUNTIME_NAME)],
                          check=True, capture_output=True, timeout=300).stdout.decode()
  names = listed.split()
  if len(names) < 100 or not {"LinkedList", "SortedSet", "Regex", "HashSet", "ToHashSet"} <= set(names):
    raise OSError(f"the System.dll names look wrong ({len(names)} names)")
  with open(os.path.join(work, SYSTEM_NAMES), "w", encoding="utf-8") as f:
    f.write("\n".join(names) + "\n")


@functools.cache
def _system_names(runtime: str) -> frozenset[str] | None:
  try:
    with open(os.path.join(runtime, SYSTEM_NAMES), encoding="utf-8") as f:
      return frozenset(f.read().split())
  except OSError:
    return None


def needs_system(text: str, runtime: str | None) -> bool:
  """Whether a program must reference System.dll: unless the runtime's list of the names that lead
  there (csharp_names.cs) exists and not one word of the program's text, escapes and formatting
  characters decoded as C# decodes identifiers, is on it (module docstring)."""
  names = _system_names(runtime) if runtime else None
  if names is None:
    return True
  text = "".join(c for c in _unescaped(text) if unicodedata.category(c) != "Cf")
  return not names.isdisjoint(_WORD.findall(text))


def _driver_key() -> str:
  """Changes with the mono build, mcs.exe (the driver binds to its internals), the driver's source
  and flags: a new key is a new directory."""
  try:
    stats = [os.stat(os.path.realpath(path)) for path in (MONO, MCS)]
    toolchain = ":".join(f"{s.st_size}:{s.st_mtime_ns}" for s in stats)
    with open(DRIVER_SOURCE, "rb") as f:
      source = f.read()
  except OSError:
    return ""
  return hashlib.sha256(repr((toolchain, DRIVER_FLAGS, source)).encode()).hexdigest()[:16]


_driver_lock = threading.Lock()


@functools.cache
def driver_path() -> str | None:
  """CACHE_DIR/<key>/codelm-mcs-batch.exe (csharp_batch.cs compiled against mcs.exe), built once
  on the host; None when it cannot be (every program then compiles on its own)."""
  key = _driver_key()
  if not key:
    return None
  final = os.path.join(CACHE_DIR, key)
  target = os.path.join(final, DRIVER_NAME)
  with _driver_lock:
    if os.path.exists(target):
      return target
    try:
      cache.publish(CACHE_DIR, final, lambda work: subprocess.run(
          [MONO, MCS, *DRIVER_FLAGS, f"-out:{os.path.join(work, DRIVER_NAME)}", DRIVER_SOURCE],
          check=True, capture_output=True, timeout=300))
    except (OSError, subprocess.SubprocessError) as error:
      if not os.path.exists(target):  # another scorer may have won the rename
        _LOG.warning("the C# batch driver failed to build (programs compile alone): %s %s", error,
                     (getattr(error, "stdout", None) or b"")[-2000:])
        return None
    _remove_stale(final)
    return target


def _remove_stale(current: str) -> None:
  """Drivers of an earlier mono or driver source (not runtime-<key>/: see runtime_dir)."""
  for name in os.listdir(CACHE_DIR):
    path = os.path.join(CACHE_DIR, name)
    if path != current and os.path.isdir(path) and len(name) == 16:
      shutil.rmtree(path, ignore_errors=True)


def _unescaped(text: str) -> str:
  """`text` with C#'s \\uXXXX and \\UXXXXXXXX escapes decoded (they may spell an identifier)."""
  def one(match: re.Match) -> str:
    code = int(match.group(1) or match.group(2), 16)
    return chr(code) if code <= 0x10FFFF else ""
  return _UNICODE_ESCAPE.sub(one, text)


class CSharp(base.Renderer):
  name = "csharp"
  display_name = "C#"
  value_literal = staticmethod(literal)
  foreign_timeout_s = 5.0
  convention = "pascal"
  toolchain = base.Toolchain(binaries=(MONO, MCS), version_command=(MONO, "--version"),
                             read_only=("/etc/mono", CACHE_DIR))
  # The class closes at column 0; everything before it (the method and any helpers) is kept.

  def function_name(self, question: Question) -> str:
    return base.safe_name(base.pascal_case(question.entry_fn_name), RESERVED | {"Solution", HARNESS_CLASS})

  def params(self, question: Question) -> list[str]:
    return base.param_names(question, param_name, frozenset())

  def signature_with_docstring(self, question: Question) -> str:
    params = ", ".join(f"{type_name(p.type)} {n}" for n, p in zip(self.params(question), question.params))
    return ("".join(f"using {u};\n" for u in USINGS) + "\nclass Solution {\n"
            + doc_comment(question.description)
            + f"    public {type_name(question.return_type)} {self.function_name(question)}({params}) {{\n")

  def stub(self, question: Question) -> str:
    value = literal(question.return_type, default_value(question.return_type))
    return f"        return {value};\n    }}\n}}"

  def program(self, question: Question, completion: str, runtime: str | None = "") -> base.Program:
    """main.cs: the solution, then the harness's part that depends on the question (the return type's
    tree, the case ids, the `Call` switch), which hands them to CodelmRuntime.Run. `runtime`: the
    library's directory ("" looks it up, None: none, and main.cs carries the runtime's source)."""
    name = self.function_name(question)
    cases = base.render_cases(question, literal)
    calls = "".join(f"            case {i}: return new Solution().{name}({args});\n"
                    for i, (_, args) in enumerate(cases))
    harness = (f"sealed class {HARNESS_CLASS} : {RUNTIME_CLASS}.ICases {{\n"
               "    static void Main() {\n"
               f"        {RUNTIME_CLASS}.Run({type_tree(question.return_type)},\n"
               "            new long[] {" + ", ".join(str(idx) for idx, _ in cases) + "}, "
               f"new {HARNESS_CLASS}());\n    }}\n\n"
               "    public object Call(int i) {\n        switch (i) {\n" + calls
               + "            default: throw new InvalidOperationException(\"no case \" + i);\n"
               "        }\n    }\n}\n")
    return self._compiled(self.signature_with_docstring(question) + completion + "\n\n" + harness, runtime)

  def whole_program(self, question: Question, code: str, runtime: str | None = "") -> base.Program:
    """BabelCode's head (WHOLE_USINGS), the code, then the harness: each case assigns
    `new Solution().<entry_name>(...)`, called with variables of the declared types, to a variable of
    the declared return type (as BabelCode's driver does) and hands `typed_value` of it to the
    runtime. `runtime` as for `program`."""
    *params, returns = question.declared
    name = self.entry_name(question)
    calls = []
    for i, case in enumerate(question.test_cases):
      args = "".join(f"{declared_type(t)} a{k} = {declared_literal(t, v)}; "
                     for k, (t, v) in enumerate(zip(params, case.inputs)))
      call = f"new {ENTRY_CLASS}().{name}({', '.join(f'a{k}' for k in range(len(params)))})"
      calls.append(f"            case {i}: {{ {args}{declared_type(returns)} codelmResult = {call}; "
                   f"return {typed_value(returns, 'codelmResult')}; }}\n")
    harness = (f"sealed class {HARNESS_CLASS} : {RUNTIME_CLASS}.ICases {{\n"
               "    static void Main() {\n"
               f"        {RUNTIME_CLASS}.Run({type_tree(question.return_type)},\n"
               "            new long[] {" + ", ".join(str(case.idx) for case in question.test_cases) + "}, "
               f"new {HARNESS_CLASS}());\n    }}\n\n"
               "    public object Call(int i) {\n        switch (i) {\n" + "".join(calls)
               + "            default: throw new global::System.InvalidOperationException(\"no case \" + i);\n"
               "        }\n    }\n" + (WHOLE_HELPERS if _converts(returns) else "") + "}\n")
    head = "".join(f"using {u};\n" for u in WHOLE_USINGS)
    return self._compiled(f"{head}\n{code}\n\n{harness}", runtime)

  def _compiled(self, text: str, runtime: str | None) -> base.Program:
    """main.cs (`text`) compiled against the runtime library (module docstring), or carrying its
    source; run by mono."""
    if runtime == "":
      runtime = runtime_dir()
    if runtime:
      # The run finds the library through MONO_PATH (module docstring): the box holds main.cs and
      # main.exe only, as before. Without System.dll when nothing in the text can reach it.
      references = tuple(r for r in MCS_REFERENCES if r != SYSTEM_REFERENCE or needs_system(text, runtime))
      options = ("-noconfig", *references, *MCS_FLAGS, f"-r:{os.path.join(runtime, RUNTIME_NAME)}")
      env = {"MONO_PATH": runtime}
    else:
      text, options, env = text + "\n" + runtime_source(), MCS_OPTIONS, {}
    return base.Program(files={"main.cs": text}, compile=((MONO, MCS, *options, "main.cs"),),
                        run=(MONO, "main.exe"), env=env)

  def batchable(self, question: Question, completion: str) -> bool:
    """Each member is a compilation of its own (module docstring): only a completion that could
    read its own source path (the one thing that differs in the build) is refused."""
    if driver_path() is None:
      return False
    text = "".join(c for c in _unescaped(completion) if unicodedata.category(c) != "Cf").lower()
    return not any(word in text for word in REFUSED_TEXT)

  def build(self, jobs) -> base.Build:
    """Member k's program, unchanged, as m<k>/main.cs; the driver compiles each in m<k>/ with the
    options it is compiled with alone, and member k runs `mono main.exe` with m<k>/main.exe bound."""
    driver = driver_path()
    assert driver is not None, "build() without batchable()"
    files, runs, reports = {}, [], []
    for k, (question, completion) in enumerate(jobs):
      program = self.program(question, completion)
      (argv,) = program.compile
      options = argv[2:]  # mcs's options and source, as program() compiles it alone
      assert not any("\n" in option for option in options), options
      files[f"m{k}/main.cs"] = program.files["main.cs"]
      files[f"m{k}/options"] = "\n".join(options)
      runs.append(base.Program(files=program.files, run=program.run, env=program.env,
                               artefacts={"main.exe": f"m{k}/main.exe"}))
      reports.append((f"reports/{k}.status", f"reports/{k}.out"))
    step = (MONO, driver, MCS, str(len(jobs)))
    return base.Build(files=files, compile=(step,), runs=tuple(runs), env=BUILD_ENV,
                      reports=tuple(reports))

  def foreign(self, text: str) -> base.Foreign:
    """eval_cs: `csc /d:DEBUG -r:System.Numerics.dll` (mcs here), `mono f.exe` with Debug.Assert's
    failures on stderr, which its status reads."""
    mcs = (MONO, MCS, "-d:DEBUG", "-r:System.Numerics.dll", "main.cs", "-out:main.exe")
    return base.Foreign("main.cs", (MONO, "main.exe"), "csharp", compile=(mcs,),
                        env={"MONO_TRACE_LISTENER": "Console.Error"}, empty_output_as_none=True)


RENDERER = CSharp()
