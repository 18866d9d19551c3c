"""C#'s batched compilation (evaluation/languages/csharp.py, csharp_batch.cs): one mono process
compiles each member as a compilation of its own, and member k's report is exactly what mcs prints
for that program alone (diagnostics, summary line, exit status), with the same main.exe, byte for
byte, whatever was compiled before it in the process."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile

import pytest

from evaluation import execution, typed
from evaluation.languages import base, csharp, get

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
  assert set(build.files) == {f"m{k}/main.cs" for k in range(len(jobs))}
  (step,) = build.compile
  assert step[:4] == (csharp.MONO, "/cache/codelm-mcs-batch.exe", csharp.MCS, str(len(jobs)))
  for k, program in enumerate(alone):
    assert build.files[f"m{k}/main.cs"] == program.files["main.cs"]
    assert step[4:] == program.compile[0][2:]  # mcs's options and source, as alone
    run = build.runs[k]
    assert (run.files, run.run, run.compile) == (program.files, program.run, ())
    assert run.artefacts == {"main.exe": f"m{k}/main.exe"}
    assert build.reports[k] == (f"reports/{k}.status", f"reports/{k}.out")


def _alone(directory: str, text: str) -> tuple[int, str, bytes | None]:
  """mcs run on its own, as the sandbox runs it: (exit status, stdout and stderr as written, main.exe)."""
  os.makedirs(directory)
  with open(os.path.join(directory, "main.cs"), "w", encoding="utf-8") as f:
    f.write(text)
  result = subprocess.run([csharp.MONO, csharp.MCS, *csharp.MCS_OPTIONS, "main.cs"], cwd=directory,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"})
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
      text = renderer.program(QUESTION, MEMBERS[name]).files["main.cs"]
      expected[name] = _alone(os.path.join(work, "alone", str(i)), text)
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
    alone = _alone(os.path.join(work, "alone"), renderer.program(QUESTION, deep).files["main.cs"])
    if "error CS0584" not in alone[1]:  # a larger stack than the usual 8 MB
      pytest.skip("mcs does not overflow its stack on this program here")
    reports = _build(renderer, jobs, os.path.join(work, "build"))
    assert reports[0] is not None and reports[0][0] == 0
    assert reports[1:] == [None, None]
  finally:
    shutil.rmtree(work, ignore_errors=True)
