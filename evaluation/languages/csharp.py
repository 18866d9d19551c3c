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
"""

from __future__ import annotations

import math

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


class CSharp(base.Renderer):
  name = "csharp"
  display_name = "C#"
  toolchain = base.Toolchain(binaries=(MONO, MCS), version_command=(MONO, "--version"),
                             read_only=("/etc/mono",))
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


RENDERER = CSharp()
