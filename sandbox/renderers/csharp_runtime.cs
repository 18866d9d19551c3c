// The fixed part of the C# test harness (sandbox/renderers/csharp.py): the record loop and the
// type-directed JSON encoder, the same for every question. Compiled once on the host into
// CodelmRuntime.dll and ahead-of-time compiled by mono (CodelmRuntime.dll.so), so a test program's
// run neither compiles nor JITs it; a program's main.cs keeps only what depends on its question (the
// return type's tree, the case ids, the `Call` switch) and calls
//
//   CodelmRuntime.Run(new CodelmRuntime.Ty("list", new CodelmRuntime.Ty("int")), ids, cases)
//
// When the library cannot be built, this file is appended to main.cs as it is (the program is then
// self-contained, as before the library): so it has no using directives and names every framework
// type in full (global::), which a completion's own types or namespaces cannot shadow.
//
// What it prints is the record protocol of sandbox/renderers/base.py: per case, the returned
// value in canonical JSON or the exception's one-line text; never a verdict (it never sees an
// expected output). Records go to the process's stdout stream itself (Console.SetOut or a
// half-written line of the solution's own output cannot hide them: each record starts on a fresh
// line); Environment.Exit ends the process even when the solution left foreground threads running.
// Only Run, Ty's constructor and ICases are public: anything a completion could do by calling Run
// itself it can do already by writing to its stdout and exiting; the encoder stays private.

public static class CodelmRuntime {
    public interface ICases {
        object Call(int i);
    }

    // A type of the typed questions (sandbox/typed.py): its name and its arguments.
    public sealed class Ty {
        internal readonly string Name;
        internal readonly Ty[] Args;
        internal readonly int Kind;  // an int switch: a switch on many strings makes mcs build a Dictionary

        public Ty(string name, params Ty[] args) {
            Name = name;
            Args = args;
            Kind = name == "optional" ? 0 : name == "bool" ? 1 : name == "int" ? 2 : name == "float" ? 3
                : name == "string" ? 4 : name == "list" ? 5 : name == "set" ? 6 : name == "map" ? 7
                : name == "tuple" ? 8 : -1;
        }
    }

    public static void Run(Ty returnType, long[] ids, ICases cases) {
        var solutionOut = global::System.Console.Out;
        var records = global::System.Console.OpenStandardOutput();
        for (int i = 0; i < ids.Length; i++) {
            string line;
            try {
                var value = new global::System.Text.StringBuilder();
                Encode(value, returnType, cases.Call(i));
                line = "ok " + value;
            } catch (global::System.Exception e) {
                line = "exception " + OneLine(e);
            }
            solutionOut.Flush();
            global::System.Console.Out.Flush();
            byte[] bytes = global::System.Text.Encoding.UTF8.GetBytes("\nPREFIX" + ids[i] + " " + line + "\n");
            records.Write(bytes, 0, bytes.Length);
            records.Flush();
        }
        global::System.Environment.Exit(0);
    }

    static global::System.Exception WrongType(Ty t, object v) {
        return new global::System.InvalidCastException(
            "expected " + t.Name + ", got " + (v == null ? "null" : v.GetType().FullName));
    }

    static void Encode(global::System.Text.StringBuilder sb, Ty t, object v) {
        var inv = global::System.Globalization.CultureInfo.InvariantCulture;
        if (t.Kind == 0) {
            if (v == null) sb.Append("null");
            else Encode(sb, t.Args[0], v);
            return;
        }
        if (v == null) throw new global::System.NullReferenceException("returned null where a " + t.Name + " is expected");
        switch (t.Kind) {
            case 1:
                if (!(v is bool)) throw WrongType(t, v);
                sb.Append((bool) v ? "true" : "false");
                return;
            case 2:
                if (v is long) sb.Append(((long) v).ToString(inv));
                else if (v is int) sb.Append(((int) v).ToString(inv));
                else throw WrongType(t, v);
                return;
            case 3: {
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
            case 4: {
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
            case 5:
            case 6: {
                if (t.Kind == 5 ? !(v is global::System.Collections.IList)
                    : !(v is global::System.Collections.IEnumerable) || v is string)
                    throw WrongType(t, v);
                sb.Append('[');
                bool first = true;
                foreach (object item in (global::System.Collections.IEnumerable) v) {
                    if (!first) sb.Append(", ");
                    first = false;
                    Encode(sb, t.Args[0], item);
                }
                sb.Append(']');
                return;
            }
            case 7: {
                var map = v as global::System.Collections.IDictionary;
                if (map == null) throw WrongType(t, v);
                sb.Append('[');
                bool first = true;
                foreach (global::System.Collections.DictionaryEntry entry in map) {
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
            case 8: {
                var tuple = v as global::System.Runtime.CompilerServices.ITuple;
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
                throw new global::System.InvalidOperationException("unknown type " + t.Name);
        }
    }

    static string OneLine(global::System.Exception e) {
        string text = (e.GetType().FullName + ": " + e.Message).Replace('\n', ' ').Replace('\r', ' ');
        return text.Length > 300 ? text.Substring(0, 300) : text;
    }
}
