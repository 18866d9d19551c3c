"""C#'s batched compilation (sandbox/renderers/csharp.py, csharp_batch.cs): one mono process
compiles each member as a compilation of its own, and member k's report is exactly what mcs prints
for that program alone (diagnostics, summary line, exit status), with the same main.exe, byte for
byte, whatever was compiled before it in the process."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import tempfile

import pytest

from sandbox import batching, execution, typed
from sandbox.judge import Status, judge
from sandbox.renderers import base, csharp, get

HERE = os.path.dirname(os.path.abspath(__file__))
QUESTIONS = {q.qid: q for q in typed.read_questions(os.path.join(HERE, "data", "typed_questions.jsonl"))}
QUESTION = QUESTIONS["HumanEval/0"]  # public bool HasCloseElements(List<double> numbers, double threshold) {
LIMITS = execution.Limits(timeout_s=5, compile_timeout_s=60)
END = "    }\n}"

# Members whose compilations leave state in mcs's statics (LINQ's transparent identifiers, #line's
# file names), or that share names with others, or fail: each must compile as it does alone.
MEMBERS = {
    "foo with an int": "        return new Foo().X == 0;\n    }\n    class Foo { public int X; }\n}",
    "foo with a string": "        return new Foo().Y == null;\n    }\n    class Foo { public string Y; }\n}",
    "foo without X": "        return new Foo().X == 0;\n    }\n    class Foo { public string Y; }\n}",
    "line directive": "#line 1 \"other/main.cs\"\n        return undefined_x;\n" + END,
    "query": ("        var q = from a in numbers from b in numbers let d = Math.Abs(a - b)\n"
              "                where d < threshold && a != b select new { a, b, d };\n"
              "        return q.Any();\n" + END),
    "syntax error": "        return (true;\n" + END,
    "query again": ("        var q = from a in numbers let x = a * 2 let y = x + 1\n"
                    "                where y > threshold select y;\n        return q.Count() > 1;\n" + END),
    "two errors": "        int a = \"s\";\n        return b;\n" + END,
    "after an error": "        return numbers.Count > 1 && threshold > 0;\n" + END,
    "regex (System.dll)": "        return System.Text.RegularExpressions.Regex.IsMatch(\"ab\", \"b$\");\n" + END,
}

# Completions of HumanEval/0 that reach much of C# and the framework without naming System.dll (each
# compiles to the same main.exe, byte for byte, without it), and some that name it (they keep it).
WITHOUT_SYSTEM = {
    "linq": ("        return numbers.Select((x, i) => (x: x, i: i)).Any(p => numbers.Skip(p.i + 1)\n"
             "            .Any(q => Math.Abs(p.x - q) < threshold));\n" + END),
    "query syntax": ("        var q = from a in numbers join b in numbers on Math.Round(a) equals Math.Round(b)\n"
                     "                group b by a into g orderby g.Key descending select g.Count();\n"
                     "        return q.Sum() > numbers.Count;\n" + END),
    "collections": ("        var d = new Dictionary<long, List<string>>(); var s = new Stack<int>();\n"
                    "        var q = new Queue<double>(numbers); s.Push(1); d[1] = new List<string> {\"a\"};\n"
                    "        var l = numbers.ToLookup(x => (long) x); var a = numbers.ToArray(); Array.Sort(a);\n"
                    "        return q.Count > 1 && l.Count > 0 && d.TryGetValue(1, out var v) && v.Count == 1;\n" + END),
    "strings": ("        var sb = new StringBuilder(); foreach (var x in numbers) sb.AppendFormat(\"{0:F2},\", x);\n"
                "        string t = $\"{threshold,8:F3}|{sb}\"; IFormattable f = $\"{threshold}\";\n"
                "        FormattableString g = $\"{t}\"; var parts = t.Split(',').Where(p => p.Length > 0);\n"
                "        return string.Join(\";\", parts).Length > f.ToString().Length + g.ArgumentCount;\n" + END),
    "language": ("        var (a, b) = (numbers.Count, Factorial(3)); object o = a;\n"
                 "        if (o is int n && n < 0) return false;\n"
                 "        switch (a) { case 0: return false; default: break; }\n"
                 "        dynamic ignored = null; Func<int, int> sq = x => x * x; Action act = () => { };\n"
                 "        act(); var anon = new { a, b }; int? m = null; Span<int> sp = stackalloc int[2];\n"
                 "        return Enumerate().Count() >= 0 && (m ?? sq(b)) > 0 && anon.a == a && 1.0.Close(1.1, threshold);\n"
                 "    }\n    static int Factorial(int n) => n <= 1 ? 1 : n * Factorial(n - 1);\n"
                 "    IEnumerable<double> Enumerate() { foreach (var x in numbers0) yield return x; }\n"
                 "    List<double> numbers0 = new List<double>();\n}\n"
                 "static class Ext { public static bool Close(this double a, double b, double t) => Math.Abs(a - b) < t; }\n"),
    "async and tasks": ("        var t = System.Threading.Tasks.Task.Run(() => numbers.Count > 1);\n"
                        "        var lazy = new Lazy<int>(() => 3); System.Threading.Interlocked.Increment(ref counter);\n"
                        "        System.Threading.Tasks.Parallel.For(0, 2, i => { });\n"
                        "        return t.Result && Run().Result && lazy.Value == 3;\n"
                        "    }\n    static int counter;\n"
                        "    async System.Threading.Tasks.Task<bool> Run() {\n"
                        "        await System.Threading.Tasks.Task.Delay(1); return true;\n    }\n}\n"),
    "numerics and expressions": ("        var big = System.Numerics.BigInteger.Pow(2, 70); var c = new System.Numerics.Complex(1, 2);\n"
                                 "        System.Linq.Expressions.Expression<Func<double, bool>> e = x => x < threshold;\n"
                                 "        return e.Compile()(big > 0 ? 0.0 : 1.0) && c.Magnitude > 1;\n" + END),
    "attributes and types": ("        return new Pair<double>(1, 2).Sum() > threshold && Enum.IsDefined(typeof(Color), 1);\n"
                             "    }\n    [Obsolete(\"x\")] void Old() { }\n"
                             "    [System.Diagnostics.Conditional(\"DEBUG\")] void Log() { }\n}\n"
                             "enum Color { Red, Green }\n"
                             "struct Pair<T> where T : IComparable<T> { public T A, B; public Pair(T a, T b) { A = a; B = b; }\n"
                             "    public double Sum() => Convert.ToDouble(A) + Convert.ToDouble(B);\n"
                             "    public static Pair<T> operator +(Pair<T> x, Pair<T> y) => x; }\n"),
    "library": ("        var r = new Random(1); var parsed = int.TryParse(\"12\", out int n) ? n : 0;\n"
                "        var bits = Convert.ToString(parsed, 2); var kv = new KeyValuePair<int, string>(1, bits);\n"
                "        var a = numbers.ToArray(); Array.Sort(a, (x, y) => y.CompareTo(x)); Array.Resize(ref a, 9);\n"
                "        var when = DateTime.Now - TimeSpan.FromSeconds(1); var id = Guid.NewGuid();\n"
                "        var bytes = Encoding.UTF8.GetBytes(bits + Environment.NewLine); var word = BitConverter.ToString(bytes);\n"
                "        lock (numbers) { using (var ms = new System.IO.MemoryStream(bytes)) { checked { n += ms.ReadByte(); } } }\n"
                "        var t = Tuple.Create(1, \"a\"); char c = char.ToUpper(word[0]); var sorted = new List<int>();\n"
                "        try { throw new MyError(\"e\"); } catch (MyError e) when (e.Message == \"e\") { }\n"
                "        return r.Next(2) >= 0 && kv.Key == 1 && t.Item1 == 1 && char.IsLetterOrDigit(c) && id != Guid.Empty\n"
                "            && when < DateTime.MaxValue && sorted.Count == 0 && string.Format(\"{0}\", n).Length > 0;\n"
                "    }\n    public int this[int i] => i;\n    public event EventHandler Changed;\n}\n"
                "class MyError : Exception { public MyError(string m) : base(m) { } }\n"
                "class Ring<T> : IEnumerable<T>, IComparer<T> where T : IComparable<T> {\n"
                "    public IEnumerator<T> GetEnumerator() { yield break; }\n"
                "    System.Collections.IEnumerator System.Collections.IEnumerable.GetEnumerator() => GetEnumerator();\n"
                "    public int Compare(T x, T y) => x.CompareTo(y);\n}\n"),
    "compile error": "        return numbers.Foo(threshold) + undefinedThing;\n" + END,
    "inaccessible": "        return Normalizer.IsOk() && numbers.Distinct().ToHashSett().Count > 0;\n" + END,
}
WITH_SYSTEM = {
    "regex": "        return System.Text.RegularExpressions.Regex.IsMatch(\"a\", \"a\");\n" + END,
    "hash set": "        return new HashSet<double>(numbers).Count < numbers.Count;\n" + END,
    "to hash set": "        return numbers.ToHashSet().Count < numbers.Count;\n" + END,
    "sorted set": "        return new SortedSet<double>(numbers).Count < numbers.Count;\n" + END,
    "escaped name": "        return new Linked\\u004cist<double>(numbers).Count < 0;\n" + END,
    "stopwatch": "        var w = System.Diagnostics.Stopwatch.StartNew(); return w.ElapsedTicks < 0;\n" + END,
    "internal type": "        return StringExtensions.SubstringTrim(\"x\", 0, 1) == \"x\";\n" + END,
    "extension": "        return \"x\".Normalize().IsNormalized();\n" + END,
}


def toolchain_or_skip():
  renderer = get("csharp")
  lacking = execution.missing(renderer.toolchain)
  if lacking:
    pytest.skip(f"csharp: toolchain missing ({', '.join(lacking)}); run `make toolchains`")
  if csharp.driver_path() is None:
    pytest.fail("the C# batch driver did not build (see the log)")
  return renderer


def test_batchable_accepts_all_but_what_reads_its_own_path(monkeypatch):
  # Each member is a compilation of its own, so tricky literals, helper classes, global attributes
  # (ignored after `class Solution {`), unsafe code and even completions that do not compile join.
  renderer = get("csharp")
  monkeypatch.setattr(csharp, "driver_path", lambda: "/driver.exe")
  fine = [
      "        return numbers.Count > 1;\n" + END,
      "        var s = @\"}\"\"{ /* \"; var t = $\"{{ {threshold} }}\"; char c = '}';\n"
      "        // } a comment with a brace, CallerLineNumber\n        return s.Length + t.Length > c;\n" + END,
      "        return Helper();\n    }\n    static bool Helper() => true;\n}\nclass Other { }\n",
      "        return true;\n    }\n}\n[assembly: System.Reflection.AssemblyKeyFile(\"../m0/main.cs\")]\n"
      "class X {\n" + END,
      "        unsafe { int* p = null; return p == null; }\n" + END,
      "        return (true;\n",
  ]
  for code in fine:
    assert renderer.batchable(QUESTION, code), code
  # [CallerFilePath] is the build's path (/box/m<k>/main.cs), not the program's alone (/box/main.cs).
  where = ("        return Where().Length > 0;\n    }\n"
           "    string Where([System.Runtime.CompilerServices.ATTRIBUTE] string p = \"\") => p;\n}")
  refused = {
      "caller file path": where.replace("ATTRIBUTE", "CallerFilePath"),
      "attribute's full name": where.replace("ATTRIBUTE", "CallerFilePathAttribute"),
      "unicode escape": where.replace("ATTRIBUTE", "CallerFile\\u0050ath"),
      "formatting character": where.replace("ATTRIBUTE", "CallerFile\\u00adPath"),
  }
  for why, code in refused.items():
    assert not renderer.batchable(QUESTION, code), why
  monkeypatch.setattr(csharp, "driver_path", lambda: None)  # no driver: everything compiles alone
  assert not renderer.batchable(QUESTION, fine[0])


def test_a_build_compiles_each_program_unchanged_with_its_own_options(monkeypatch):
  renderer = get("csharp")
  monkeypatch.setattr(csharp, "driver_path", lambda: "/cache/codelm-mcs-batch.exe")
  jobs = [(QUESTION, code) for code in MEMBERS.values()]
  build = renderer.build(jobs)
  alone = [renderer.program(q, code) for q, code in jobs]
  assert set(build.files) == {f"m{k}/{name}" for k in range(len(jobs)) for name in ("main.cs", "options")}
  (step,) = build.compile
  assert step == (csharp.MONO, "/cache/codelm-mcs-batch.exe", csharp.MCS, str(len(jobs)))
  for k, program in enumerate(alone):
    assert build.files[f"m{k}/main.cs"] == program.files["main.cs"]
    (argv,) = program.compile
    assert build.files[f"m{k}/options"].split("\n") == list(argv[2:])  # mcs's options and source, as alone
    run = build.runs[k]
    assert (run.files, run.run, run.compile, run.env) == (program.files, program.run, (), program.env)
    assert run.artefacts == {"main.exe": f"m{k}/main.exe"}
    assert build.reports[k] == (f"reports/{k}.status", f"reports/{k}.out")


def _alone(directory: str, program: base.Program) -> tuple[int, str, bytes | None]:
  """The program's mcs step run on its own, as the sandbox runs it: (exit status, stdout and stderr
  as written, main.exe)."""
  os.makedirs(directory)
  with open(os.path.join(directory, "main.cs"), "w", encoding="utf-8") as f:
    f.write(program.files["main.cs"])
  (step,) = program.compile
  result = subprocess.run(step, cwd=directory, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", **program.env})
  return result.returncode, result.stdout.decode(), _read(os.path.join(directory, "main.exe"))


def _read(path: str) -> bytes | None:
  try:
    with open(path, "rb") as f:
      return f.read()
  except FileNotFoundError:
    return None


def _build(renderer, jobs, directory: str) -> list[tuple[int, str, bytes | None] | None]:
  """The batch build in its sandbox; per member (exit status, report, main.exe), None if unreported."""
  os.makedirs(directory, exist_ok=True)
  build = renderer.build(jobs)
  execution.build(base.Program(files=build.files, compile=build.compile, run=("true",), env=build.env),
                  renderer.toolchain, LIMITS, directory)
  out = []
  for k, (status_path, output_path) in enumerate(build.reports):
    status = _read(os.path.join(directory, status_path))
    if status is None:
      out.append(None)
      continue
    out.append((int(status), _read(os.path.join(directory, output_path)).decode(),
                _read(os.path.join(directory, f"m{k}/main.exe"))))
  return out


def test_each_member_gets_exactly_what_mcs_gives_it_alone():
  renderer = toolchain_or_skip()
  names = list(MEMBERS)
  work = tempfile.mkdtemp(prefix="codelm-csharp-test-")
  try:
    expected = {}
    for i, name in enumerate(names):
      expected[name] = _alone(os.path.join(work, "alone", str(i)), renderer.program(QUESTION, MEMBERS[name]))
    assert [name for name in names if expected[name][0] != 0] == ["foo without X", "line directive",
                                                                    "syntax error", "two errors"]
    assert expected["two errors"][1].endswith("Compilation failed: 2 error(s), 0 warnings\n")
    assert expected["line directive"][1].startswith("other/main.cs(1,16): error CS0103")
    for order in (names, names[::-1]):
      directory = os.path.join(work, f"build-{order[0].replace(' ', '-')}")
      reports = _build(renderer, [(QUESTION, MEMBERS[name]) for name in order], directory)
      for name, report in zip(order, reports):
        assert report == expected[name], (name, report and report[:2], expected[name][:2])
  finally:
    shutil.rmtree(work, ignore_errors=True)


def test_an_internal_compiler_error_sends_it_and_the_rest_alone():
  # mcs reports a stack overflow as CS0584; the driver's stack is a few frames deeper than mcs's
  # own, so that member (and, mcs's state being unknown, every later one) gets no report.
  renderer = toolchain_or_skip()
  deep = "        return " + "1 + " * 20000 + "1 > 0;\n" + END
  jobs = [(QUESTION, MEMBERS["after an error"]), (QUESTION, deep), (QUESTION, MEMBERS["query"])]
  work = tempfile.mkdtemp(prefix="codelm-csharp-test-")
  try:
    alone = _alone(os.path.join(work, "alone"), renderer.program(QUESTION, deep))
    if "error CS0584" not in alone[1]:  # a larger stack than the usual 8 MB
      pytest.skip("mcs does not overflow its stack on this program here")
    reports = _build(renderer, jobs, os.path.join(work, "build"))
    assert reports[0] is not None and reports[0][0] == 0
    assert reports[1:] == [None, None]
  finally:
    shutil.rmtree(work, ignore_errors=True)


def _solutions() -> dict:
  with open(os.path.join(HERE, "solutions", "csharp.json"), encoding="utf-8") as f:
    return json.load(f)


def test_programs_call_the_runtime_library_run_ahead_of_time():
  # main.cs keeps what depends on the question (the return type's tree, the case ids, the Call
  # switch); the encoder and the record loop are CodelmRuntime.dll's, found through MONO_PATH in the
  # read-only cache and run from mono's AOT image of it, not JIT-compiled.
  renderer = toolchain_or_skip()
  runtime = csharp.runtime_dir()
  assert runtime is not None, "the C# runtime library did not build (see the log)"
  files = set(os.listdir(runtime))
  assert {csharp.RUNTIME_NAME, csharp.SYSTEM_NAMES} <= files
  aot = csharp.RUNTIME_NAME + ".so" in files
  if shutil.which("as") and shutil.which("ld"):  # what mono --aot needs
    assert aot
  program = renderer.program(QUESTION, _solutions()["correct"]["HumanEval/0"])
  text = program.files["main.cs"]
  assert "CodelmRuntime.Run(new CodelmRuntime.Ty(\"bool\")" in text and "Encode" not in text
  (argv,) = program.compile
  assert argv[-2:] == (f"-r:{os.path.join(runtime, csharp.RUNTIME_NAME)}", "main.cs")
  assert program.env == {"MONO_PATH": runtime} and program.run == (csharp.MONO, "main.exe")
  traced = dataclasses.replace(program, env={**program.env, "MONO_LOG_LEVEL": "debug", "MONO_LOG_MASK": "aot"})
  result = execution.execute(traced, renderer.toolchain, LIMITS)
  assert judge(QUESTION, result).status is Status.PASSED, result.stderr[-2000:]
  log = result.stdout + result.stderr
  if aot:
    assert f"AOT: image '{os.path.join(runtime, csharp.RUNTIME_NAME)}.so' found" in log
    assert "AOT: FOUND method CodelmRuntime:Run " in log and "AOT: FOUND method CodelmRuntime:Encode " in log


def test_without_the_library_programs_carry_the_runtime_and_print_the_same_records(monkeypatch):
  # When the library cannot be built, main.cs carries csharp_runtime.cs itself (and references
  # System.dll, as before the library): alone and batched, every program prints the records it prints
  # with the library.
  renderer = toolchain_or_skip()
  data = _solutions()
  # The correct solutions return every kind of type (bool, int, float, string, list, set, map, tuple,
  # optional); the others fail, throw in one case or do not compile.
  jobs = [(QUESTIONS[qid], code) for kind in ("correct", "wrong", "throws_once", "compile_error")
          for qid, code in data[kind].items()]
  with_library = batching.execute_all(renderer, jobs, LIMITS, batch_size=32)
  alone = renderer.program(QUESTION, MEMBERS["after an error"], runtime=None)
  (argv,) = alone.compile
  assert alone.env == {} and argv[2:] == (*csharp.MCS_OPTIONS, "main.cs")
  assert "public static class CodelmRuntime" in alone.files["main.cs"]
  monkeypatch.setattr(csharp, "runtime_dir", lambda: None)
  assert renderer.program(QUESTION, MEMBERS["after an error"]) == alone
  stats = batching.Stats()
  batched = batching.execute_all(renderer, jobs, LIMITS, batch_size=32, stats=stats)
  assert stats.built == len(jobs)
  for (question, code), a, b in zip(jobs, with_library, batched):
    assert a.compile_failed == b.compile_failed, (question.qid, code)
    assert a.stdout == b.stdout, (question.qid, code)
    assert judge(question, a) == judge(question, b)
  assert sum(not r.compile_failed for r in batched) >= len(jobs) - len(data["compile_error"])
  first = [(question, code) for question, code in jobs[:3]]
  assert [judge(q, execution.execute(renderer.program(q, c), renderer.toolchain, LIMITS)) for q, c in first] \
      == [judge(q, r) for (q, _), r in zip(first, batched)]


def test_a_program_that_names_nothing_of_system_dll_compiles_the_same_without_it(monkeypatch):
  # csharp_names.cs lists the names through which a program can reach System.dll; a program whose
  # text has none of them is compiled without it, to the same report and main.exe, byte for byte, as
  # with it. Compiled both ways in one batch each: the fixture's solutions and stubs, attacks and
  # completions that reach much of the language and the framework.
  renderer = toolchain_or_skip()
  runtime = csharp.runtime_dir()
  assert runtime is not None and csharp._system_names(runtime), "the System.dll names were not listed"
  data = _solutions()
  jobs = [(QUESTIONS.get(qid, QUESTION), code) for kind in ("correct", "wrong", "throws_once", "compile_error", "attacks")
          for qid, code in data[kind].items()]
  jobs = [(q, c.replace("{PORT}", "1").replace("{HOSTDIR}", "/none").replace("{SECRET}", "/none")) for q, c in jobs]
  jobs += [(question, renderer.stub(question)) for question in QUESTIONS.values()]
  jobs += [(QUESTION, code) for code in (*WITHOUT_SYSTEM.values(), *WITH_SYSTEM.values())]

  def uses_system(question, code) -> bool:
    return csharp.SYSTEM_REFERENCE in renderer.program(question, code).compile[0]

  assert not [name for name, code in WITHOUT_SYSTEM.items() if uses_system(QUESTION, code)]
  assert [name for name, code in WITH_SYSTEM.items() if not uses_system(QUESTION, code)] == []
  dropped = [k for k, job in enumerate(jobs) if not uses_system(*job)]
  assert len(dropped) >= 0.7 * len(jobs)
  work = tempfile.mkdtemp(prefix="codelm-csharp-test-")
  try:
    chosen = _build(renderer, jobs, os.path.join(work, "chosen"))
    monkeypatch.setattr(csharp, "needs_system", lambda text, runtime: True)
    assert all(uses_system(*job) for job in jobs)
    referenced = _build(renderer, jobs, os.path.join(work, "referenced"))
    assert all(report is not None for report in chosen + referenced)
    for k in dropped:
      assert chosen[k] == referenced[k], (jobs[k][0].qid, jobs[k][1], chosen[k][:2], referenced[k][:2])
    assert sum(chosen[k][0] == 0 for k in dropped) >= 0.6 * len(dropped)
  finally:
    shutil.rmtree(work, ignore_errors=True)
