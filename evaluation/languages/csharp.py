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

mcs itself and mscorlib are ahead-of-time compiled by Debian (/usr/lib/mono/aot-cache), so a
program compiles in about 0.15 CPU seconds and runs in about 0.02; `-noconfig` (only the assemblies
named) saves another 10%. Precompiling the harness into a library would save under 0.02 s.

Batched (evaluation/batching.py), with per-member reports: of those 0.15 s, about 0.1 is mono and
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

Where the time goes, per program of a batch of 28 (tests/solutions/csharp.json's programs and the
fixture's stubs; CPU time, the sandboxes included, on a loaded 2-core machine): alone 175-240 ms a
program, batched 75-100 (2.3-2.5x). Of the batched, the driver takes ~45 ms a member (callgrind:
0.21G instructions a warm compilation, about half reading and importing the references -- mscorlib,
System, System.Core and System.Numerics are read again by each compilation, since mcs ties them to
its compiler context -- and a fifth the harness), the run 15-20 and its sandbox ~10. A shared build
(one compilation, one copy of the harness) would save most of the 45 ms, but it puts each member's
types in a namespace of its own, which changes what their default ToString(), GetType() and stack
traces say.
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
import tempfile
import threading
import unicodedata

from evaluation.languages import base
from evaluation.typed import Question, Type, default_value

MONO = "/usr/bin/mono-sgen"  # /usr/bin/mono links to it; /usr/bin/mcs is a shell wrapper around it
MCS = "/usr/lib/mono/4.5/mcs.exe"
HARNESS_CLASS = "CodelmHarness"
# -noconfig: no default references beyond the ones named (fewer assemblies to load);
# System.Core has LINQ, System.Numerics BigInteger.
MCS_OPTIONS = ("-noconfig", "-r:System.dll", "-r:System.Core.dll", "-r:System.Numerics.dll",
               "-langversion:7.2", "-warn:0",
               f"-main:{HARNESS_CLASS}", "-out:main.exe")

_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# The batch driver, compiled once per mono build and driver source (CODELM_TOOLCHAINS overrides
# <repo root>/.toolchains, as for C++'s precompiled header).
CACHE_DIR = os.path.join(os.environ.get("CODELM_TOOLCHAINS") or os.path.join(_REPO_ROOT, ".toolchains"),
                         "csharp")
DRIVER_SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "csharp_batch.cs")
DRIVER_NAME = "codelm-mcs-batch.exe"
# How the driver is compiled: against mcs.exe itself, whose compiler classes it calls.
DRIVER_FLAGS = ("-noconfig", "-r:System.dll", f"-r:{MCS}", "-warn:0")
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
  out = []
  for ch in text:
    code = ord(ch)
    if ch in "\"\\":
      out.append("\\" + ch)
    elif ch in "\n\t\r":
      out.append({"\n": "\\n", "\t": "\\t", "\r": "\\r"}[ch])
    elif 0x20 <= code < 0x7f:
      out.append(ch)
    elif code <= 0xFFFF:
      out.append(f"\\u{code:04x}")
    else:
      out.append(f"\\U{code:08x}")
  return '"' + "".join(out) + '"'


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


def param_name(name: str) -> str:
  """camelCase; a keyword gets C#'s verbatim prefix (`@string`), as C# code writes it."""
  name = base.camel_case(name)
  return "@" + name if name in RESERVED else name


def type_tree(t: Type) -> str:
  """The type as the harness's `Ty` tree: new Ty("list", new Ty("int"))."""
  args = "".join(", " + type_tree(a) for a in t.args)
  return f'new Ty("{t.name}"{args})'


def doc_comment(description: str, indent: str = "    ") -> str:
  lines = [f"{indent}/// {line}".rstrip() for line in base.doc_lines(description)]
  return (f"{indent}/// <summary>\n" + "".join(line + "\n" for line in lines)
          + f"{indent}/// </summary>\n")


# Type-directed conversion of the returned value to canonical JSON. Records go to the process's
# stdout stream itself (Console.SetOut or a half-written line of the solution's own output cannot
# hide them: each record starts on a fresh line); Environment.Exit ends the process even when the
# solution left foreground threads running.
_HARNESS = r"""
static class CodelmHarness {
    sealed class Ty {
        public readonly string Name;
        public readonly Ty[] Args;
        public Ty(string name, params Ty[] args) { Name = name; Args = args; }
    }

    static Exception WrongType(Ty t, object v) {
        return new InvalidCastException("expected " + t.Name + ", got " + (v == null ? "null" : v.GetType().FullName));
    }

    static void Encode(StringBuilder sb, Ty t, object v) {
        var inv = System.Globalization.CultureInfo.InvariantCulture;
        if (t.Name == "optional") {
            if (v == null) sb.Append("null");
            else Encode(sb, t.Args[0], v);
            return;
        }
        if (v == null) throw new NullReferenceException("returned null where a " + t.Name + " is expected");
        switch (t.Name) {
            case "bool":
                if (!(v is bool)) throw WrongType(t, v);
                sb.Append((bool) v ? "true" : "false");
                return;
            case "int":
                if (v is long) sb.Append(((long) v).ToString(inv));
                else if (v is int) sb.Append(((int) v).ToString(inv));
                else throw WrongType(t, v);
                return;
            case "float": {
                double d;
                if (v is double) d = (double) v;
                else if (v is float) d = (float) v;
                else if (v is long) d = (long) v;
                else if (v is int) d = (int) v;
                else throw WrongType(t, v);
                sb.Append(double.IsNaN(d) ? "NaN" : double.IsPositiveInfinity(d) ? "Infinity"
                          : double.IsNegativeInfinity(d) ? "-Infinity" : d.ToString("R", inv));
                return;
            }
            case "string": {
                var s = v as string;
                if (s == null) throw WrongType(t, v);
                sb.Append('"');
                foreach (char c in s) {
                    if (c == '"' || c == '\\') sb.Append('\\').Append(c);
                    else if (c >= 0x20 && c < 0x7f) sb.Append(c);
                    else if (c == '\n') sb.Append("\\n");
                    else if (c == '\t') sb.Append("\\t");
                    else if (c == '\r') sb.Append("\\r");
                    else sb.Append("\\u").Append(((int) c).ToString("x4", inv));
                }
                sb.Append('"');
                return;
            }
            case "list":
            case "set": {
                if (t.Name == "list" ? !(v is System.Collections.IList) : !(v is System.Collections.IEnumerable) || v is string)
                    throw WrongType(t, v);
                sb.Append('[');
                bool first = true;
                foreach (object item in (System.Collections.IEnumerable) v) {
                    if (!first) sb.Append(", ");
                    first = false;
                    Encode(sb, t.Args[0], item);
                }
                sb.Append(']');
                return;
            }
            case "map": {
                var map = v as System.Collections.IDictionary;
                if (map == null) throw WrongType(t, v);
                sb.Append('[');
                bool first = true;
                foreach (System.Collections.DictionaryEntry entry in map) {
                    if (!first) sb.Append(", ");
                    first = false;
                    sb.Append('[');
                    Encode(sb, t.Args[0], entry.Key);
                    sb.Append(", ");
                    Encode(sb, t.Args[1], entry.Value);
                    sb.Append(']');
                }
                sb.Append(']');
                return;
            }
            case "tuple": {
                var tuple = v as System.Runtime.CompilerServices.ITuple;
                if (tuple == null || tuple.Length != t.Args.Length) throw WrongType(t, v);
                sb.Append('[');
                for (int i = 0; i < t.Args.Length; i++) {
                    if (i > 0) sb.Append(", ");
                    Encode(sb, t.Args[i], tuple[i]);
                }
                sb.Append(']');
                return;
            }
            default:
                throw new InvalidOperationException("unknown type " + t.Name);
        }
    }

    static string OneLine(Exception e) {
        string text = (e.GetType().FullName + ": " + e.Message).Replace('\n', ' ').Replace('\r', ' ');
        return text.Length > 300 ? text.Substring(0, 300) : text;
    }

    static void Main() {
        var solutionOut = Console.Out;
        var records = Console.OpenStandardOutput();
        var returnType = RETURN_TYPE;
        for (int i = 0; i < Ids.Length; i++) {
            string line;
            try {
                var value = new StringBuilder();
                Encode(value, returnType, Call(i));
                line = "ok " + value;
            } catch (Exception e) {
                line = "exception " + OneLine(e);
            }
            solutionOut.Flush();
            Console.Out.Flush();
            byte[] bytes = Encoding.UTF8.GetBytes("\nPREFIX" + Ids[i] + " " + line + "\n");
            records.Write(bytes, 0, bytes.Length);
            records.Flush();
        }
        Environment.Exit(0);
    }
"""


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
      os.makedirs(CACHE_DIR, exist_ok=True)
      work = tempfile.mkdtemp(prefix="build-", dir=CACHE_DIR)
      try:
        subprocess.run([MONO, MCS, *DRIVER_FLAGS, f"-out:{os.path.join(work, DRIVER_NAME)}", DRIVER_SOURCE],
                       check=True, capture_output=True, timeout=300)
        os.chmod(work, 0o755)  # the sandbox's uid reads it (mkdtemp makes it 0700)
        os.chmod(os.path.join(work, DRIVER_NAME), 0o444)
        os.rename(work, final)  # atomic: a sandbox sees the whole directory or none
      except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    except (OSError, subprocess.SubprocessError) as error:
      if not os.path.exists(target):  # another scorer may have won the rename
        _LOG.warning("the C# batch driver failed to build (programs compile alone): %s %s", error,
                     (getattr(error, "stdout", None) or b"")[-2000:])
        return None
    _remove_stale(final)
    return target


def _remove_stale(current: str) -> None:
  """Drivers of an earlier mono or driver source."""
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

  def program(self, question: Question, completion: str) -> base.Program:
    name = self.function_name(question)
    cases = base.render_cases(question, literal)
    calls = "".join(f"            case {i}: return new Solution().{name}({args});\n"
                    for i, (_, args) in enumerate(cases))
    harness = (_HARNESS.replace("RETURN_TYPE", type_tree(question.return_type))
               .replace("PREFIX", base.RECORD_PREFIX)
               + "    static readonly long[] Ids = {" + ", ".join(str(idx) for idx, _ in cases) + "};\n\n"
               "    static object Call(int i) {\n        switch (i) {\n" + calls
               + "            default: throw new InvalidOperationException(\"no case \" + i);\n"
               "        }\n    }\n}\n")
    text = self.signature_with_docstring(question) + completion + "\n\n" + harness
    return base.Program(files={"main.cs": text},
                        compile=((MONO, MCS, *MCS_OPTIONS, "main.cs"),),
                        run=(MONO, "main.exe"))

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
      files[f"m{k}/main.cs"] = program.files["main.cs"]
      runs.append(base.Program(files=program.files, run=program.run,
                               artefacts={"main.exe": f"m{k}/main.exe"}))
      reports.append((f"reports/{k}.status", f"reports/{k}.out"))
    step = (MONO, driver, MCS, str(len(jobs)), *MCS_OPTIONS, "main.cs")  # as program() compiles
    return base.Build(files=files, compile=(step,), runs=tuple(runs), env=BUILD_ENV,
                      reports=tuple(reports))


RENDERER = CSharp()
