"""Go's batched build (sandbox/renderers/go.py): what `batchable` lets share a build and what it
refuses (one case per reason), that each member's report is what its compiler said for it alone,
that a member's run prints what its program alone prints (type names, panic positions, argv), and
that a build which does not link sends its members alone."""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import tempfile

import pytest

from sandbox import batching, execution, typed
from sandbox.judge import Status, judge
from sandbox.renderers import base, get, go

HERE = os.path.dirname(os.path.abspath(__file__))
QUESTIONS = {q.qid: q for q in typed.read_questions(os.path.join(HERE, "data", "typed_questions.jsonl"))}
LIMITS = execution.Limits(timeout_s=5, compile_timeout_s=60)
GO = get("go")
QUESTION = QUESTIONS["HumanEval/0"]  # func hasCloseElements(numbers []float64, threshold float64) bool
FLIP = QUESTIONS["HumanEval/27"]     # func flipCase(string_ string) string

FINE = {
    "plain": "\treturn len(numbers) > 1\n}",
    "braces and quotes in literals": "\ts := \"}{\\\"}\" + `}\"{` + string('}') + string('\\'')\n"
                                     "\treturn len(s) > 0 && threshold > 0\n}",
    "multi-line raw string": "\tpattern := `^\\d+\n}\n\"\\`\n\treturn len(pattern) > 1\n}",
    "comments with braces": "\t// } a comment, and a // in it\n\t/* { a block\n\tcomment } */\n"
                            "\treturn numbers == nil // }\n}",
    "comments that are not directives":
        "\t// go:linkname with a space is prose\n\t//TODO: a note\n\t//fmt.Println(numbers)\n"
        "\treturn false\n}",
    "local types, closures, goroutines, labels":
        "\ttype pair struct{ a, b float64 }\n\tnear := func(p pair) bool { return p.a-p.b < threshold }\n"
        "\tdone := make(chan bool, 1)\n\tgo func() { done <- true }()\n\t<-done\nouter:\n"
        "\tfor i := range numbers {\n\t\tfor j := 0; j < i; j++ {\n"
        "\t\t\tif near(pair{numbers[i], numbers[j]}) {\n\t\t\t\tbreak outer\n\t\t\t}\n"
        "\t\t}\n\t}\n\treturn false\n}",
    "other standard packages": "\tr := regexp.MustCompile(`a+`)\n\tl := list.New()\n\tl.PushBack(1)\n"
                               "\treturn r.MatchString(\"aa\") && l.Len() == 1 && bits.Len(3) == 2\n}",
    "words that hold refused ones":
        "\tmainly, osCount, runtimes := 1, 2, 3\n"
        "\treturn mainly+osCount+runtimes > 0 && strings.Contains(\"main os.\", \"os\")\n}",
    "trailing blank lines": "\treturn false\n}\n\n",
    "a comment after the function": "\treturn false\n}\n// the end\n",
}

REFUSED = {
    "leaves the function": "\treturn helper()\n}\n\nfunc helper() bool { return true }",
    "init after the function": "\treturn false\n}\n\nfunc init() { println(\"every member\") }",
    "variable after the function": "\treturn false\n}\n\nvar x = f()",
    "literal after the function": "\treturn false\n}\n`x`",
    "does not close": "\treturn false\n",
    "closes too often": "\treturn false\n}\n}",
    "unbalanced parentheses": "\treturn (false\n}",
    "go:linkname": "\t//go:linkname f runtime.nanotime\n\treturn false\n}",
    "go:noinline": "\t//go:noinline\n\treturn false\n}",
    "line directive": "\t//line m3/main.go:1\n\treturn false\n}",
    "block line directive": "\t/*line m3/main.go:1:1*/ return false\n}",
    "export": "\t//export malloc\n\treturn false\n}",
    "extern": "\t//extern getpid\n\treturn false\n}",
    "directive-shaped comment": "\t//x:y\n\treturn false\n}",
    "harness name": "\treturn codelmEncode(codelmType{}, true) != \"\"\n}",
    "build name": "\treturn CodelmCases() != nil\n}",
    "main": "\tif len(numbers) > 100 {\n\t\tmain()\n\t}\n\treturn false\n}",
    "os": "\treturn len(os.Args) > 1\n}",
    "syscall": "\treturn syscall.Getpid() > 0\n}",
    "exec": "\treturn exec.Command(\"./main\").Run() == nil\n}",
    "runtime": "\t_, file, _, _ := runtime.Caller(0)\n\treturn file != \"\"\n}",
    "reflect": "\ttype t struct{}\n\treturn reflect.TypeOf(t{}).PkgPath() == \"main\"\n}",
    "unsafe": "\treturn unsafe.Sizeof(threshold) == 8\n}",
    "filepath": "\tfiles, _ := filepath.Glob(\"*\")\n\treturn len(files) == 4\n}",
    "non-ASCII identifier": "\t\u00e9 := 1\n\treturn \u00e9 > 0\n}",
    "unterminated string": "\ts := \"abc;\n\treturn false\n}",
    "unterminated raw string": "\ts := `abc;\n\treturn false\n}",
    "unterminated rune": "\tc := '}\n\treturn false\n}",
    "unterminated comment": "\t/* return false\n}",
    "backslash-newline in a string": "\ts := \"abc\\\n\"\n\treturn s == \"\"\n}",
    "NUL": "\treturn false\x00\n}",
}


def test_batchable_accepts_ordinary_completions():
  for why, code in FINE.items():
    assert GO.batchable(QUESTION, code), why


@pytest.mark.parametrize("why", sorted(REFUSED))
def test_batchable_refuses(why):
  assert not GO.batchable(QUESTION, REFUSED[why]), why


def test_a_function_named_like_the_harness_imports_or_build_is_refused():
  """Alone, a function named `reflect` clashes with the harness file's import; in a build it would not."""
  for name in ("reflect", "utf16", "codelm_run"):
    question = dataclasses.replace(QUESTION, entry_fn_name=name)
    assert not GO.batchable(question, GO.stub(question)), name


def test_without_the_direct_compiler_nothing_is_batched(monkeypatch):
  monkeypatch.setattr(go, "DIRECT", False)
  assert not GO.batchable(QUESTION, FINE["plain"])


def test_a_member_package_runs_nothing_before_the_dispatcher():
  """Every blank use the program adds at package level is a function value or a constant: no call
  runs when the package is initialised."""
  for use in (*go.IMPORTS.values(), *(use for _, use in go.EXTRA_IMPORTS.values())):
    assert re.fullmatch(r"\w+\.\w+|unsafe\.Sizeof\(0\)", use), use


def test_a_build_holds_each_members_program_as_alone():
  jobs = [(QUESTION, FINE["plain"]), (FLIP, "\treturn strings.ToUpper(string_)\n}")]
  build = GO.build(jobs)
  for k, (question, code) in enumerate(jobs):
    alone = GO.program(question, code)
    assert build.files[f"m{k}/main.go"] == alone.files["main.go"]
    assert build.runs[k].files == alone.files and build.runs[k].env == alone.env
    assert build.runs[k].run == ("./main", str(k)) and build.runs[k].artefacts == {"main": "main"}
  assert build.reports == (("m0/status", "m0/diagnostics"), ("m1/status", "m1/diagnostics"))


def _toolchain_or_skip():
  lacking = execution.missing(GO.toolchain)
  if lacking or not go.DIRECT:
    pytest.skip(f"go: direct compiler missing ({', '.join(lacking)})")


def _both_ways(jobs):
  stats = batching.Stats()
  together = batching.execute_all(GO, jobs, LIMITS, batch_size=len(jobs), stats=stats)
  alone = batching.execute_all(GO, jobs, LIMITS, batch_size=1)
  return together, alone, stats


def test_the_ordinary_completions_print_the_same_records_batched():
  _toolchain_or_skip()
  jobs = [(QUESTION, code) for code in FINE.values()]
  together, alone, stats = _both_ways(jobs)
  assert stats.built == len(jobs)
  for a, b in zip(together, alone):
    assert not b.compile_failed, b.stderr
    assert a.stdout == b.stdout


def test_a_member_sees_type_names_and_panic_positions_as_alone():
  """%T, %#v and a failed type assertion name main.T (the package's name, not its path); an
  unrecovered panic's trace has the program's file paths (-trimpath)."""
  _toolchain_or_skip()
  names = ("\ttype T struct{ A int }\n\tvar x interface{} = T{1}\n"
           "\tif len(string_) > 3 {\n\t\t_ = x.(int)\n\t}\n\treturn fmt.Sprintf(\"%T %#v %v\", x, x, x)\n}")
  trace = ("\tdone := make(chan bool)\n\tgo func() {\n\t\tvar m map[int]int\n\t\tm[1] = 2\n"
           "\t\tdone <- true\n\t}()\n\t<-done\n\treturn \"\"\n}")
  jobs = [(FLIP, names), (FLIP, trace), (FLIP, GO.stub(FLIP))]
  assert all(GO.batchable(*job) for job in jobs)
  together, alone, stats = _both_ways(jobs)
  assert stats.built == 3
  assert together[0].stdout == alone[0].stdout
  assert "ok \"main.T main.T{A:1} {1}\"" in together[0].stdout
  assert "interface conversion: interface {} is main.T, not int" in together[0].stdout
  assert together[1].run.exit_code == alone[1].run.exit_code == 2
  assert "/box/main.go:" in together[1].stderr and "/box/m1/" not in together[1].stderr
  verdicts = [[(o.status, o.cases) for o in map(judge, [FLIP] * 3, results)] for results in (together, alone)]
  assert verdicts[0] == verdicts[1]  # the trace (in an error's detail) names codelm/m1.flipCase


def _build(jobs):
  build = GO.build(jobs)
  directory = tempfile.mkdtemp(prefix="codelm-test-build-")
  program = base.Program(files=build.files, compile=build.compile, run=("true",), env=build.env)
  return build, directory, execution.build(program, GO.toolchain, LIMITS, directory)


def test_each_member_reports_what_its_compiler_said_alone():
  _toolchain_or_skip()
  jobs = [(QUESTION, FINE["plain"]), (QUESTION, "\treturn undefinedHelper(numbers)\n}"),
          (FLIP, "\tx := := 1\n\treturn string_\n}"), (FLIP, GO.stub(FLIP))]
  build, directory, result = _build(jobs)
  try:
    reports = [batching._report(directory, paths) for paths in build.reports]
    assert [status == 0 for status, _ in reports] == [True, False, False, True], result.stderr
    for (question, code), (status, diagnostics) in zip(jobs, reports):
      alone = execution.execute(GO.program(question, code), GO.toolchain, LIMITS)
      assert (status == 0) == (not alone.compile_failed)
      assert diagnostics == alone.stderr  # the same file names and messages
    assert "undefined: undefinedHelper" in reports[1][1]
    # The dispatcher runs nothing for an unknown member.
    run = base.Program(files={}, run=("./main", "9"), artefacts={"main": "main"})
    assert execution.execute(run, GO.toolchain, LIMITS, build_dir=directory).run.exit_code == 2
  finally:
    shutil.rmtree(directory, ignore_errors=True)


def test_a_build_that_does_not_link_sends_its_members_alone(monkeypatch):
  """Members that compiled get a status only once the binary is linked: without it each compiles
  alone (and one that failed keeps its own report)."""
  _toolchain_or_skip()
  script = go._build_script
  monkeypatch.setattr(go, "_build_script",
                      lambda size: script(size).replace(f'link="{go.LINK}"', "link=/bin/false"))
  jobs = [(QUESTION, FINE["plain"]), (QUESTION, "\treturn undefinedHelper(numbers)\n}")]
  stats = batching.Stats()
  results = batching.execute_all(GO, jobs, LIMITS, batch_size=2, stats=stats)
  assert stats.builds == 1 and stats.built == 1 and stats.alone == 1
  assert judge(QUESTION, results[1]).status is Status.COMPILE_ERROR
  assert judge(QUESTION, results[0]).status is Status.FAILED  # compiled alone: len(numbers) > 1 is wrong
