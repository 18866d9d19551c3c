"""evaluation/multiple/execution.py: whole MultiPL-E programs, judged by MultiPL-E's rules.

Each language has one hand-made problem in MultiPL-E's shape for it (its prompt's head, the split
between prompt and completion its stop sequences make, its tests' style: C++ `assert` in main, Java
`assert` run with -ea, Go `go test` over a table, luaunit, R's `quit('no', 1)`, ...), and completions
that are correct, wrong (a test fails), crashing, looping and, for compiled languages, not
compiling. The expected (status, exit_code) is what MultiPL-E's eval_<lang>.py answers for that
program: the statuses and exit codes below follow those evaluators' rules (module docstring there).
"""

from __future__ import annotations

import concurrent.futures
import dataclasses

import pytest

from evaluation.multiple import execution as multiple
from sandbox import execution

LOOP_LIMITS = execution.Limits(timeout_s=2.0)


@dataclasses.dataclass(frozen=True)
class Problem:
  prompt: str
  tests: str


@dataclasses.dataclass(frozen=True)
class Case:
  name: str
  completion: str
  status: str
  exit_code: int | None
  loops: bool = False   # run with LOOP_LIMITS' short timeout


PROBLEMS = {
    "python": Problem(
        'def add(x: int, y: int) -> int:\n    """Add two numbers x and y\n    >>> add(2, 3)\n    5\n    """\n',
        "def check(candidate):\n    assert candidate(1, 2) == 3\n    assert candidate(5, 7) == 12\n\n"
        "def test_check():\n    check(add)\n\ntest_check()\n"),
    "javascript": Problem(
        "//Add two numbers x and y\n//>>> add(2, 3)\n//5\nfunction add(x, y){\n",
        "const assert = require('node:assert');\n\n\nfunction test() {\n  let candidate = add;\n"
        "  assert.deepEqual(candidate(1, 2),3);\n  assert.deepEqual(candidate(5, 7),12);\n}\n\ntest();"),
    "typescript": Problem(
        "//Add two numbers x and y\nfunction add(x: number, y: number): number {\n",
        "declare var require: any;\nconst assert = require('node:assert');\n\n\nfunction test() {\n"
        "  let candidate = add;\n  assert.deepEqual(candidate(1, 2),3);\n  assert.deepEqual(candidate(5, 7),12);\n"
        "}\n\ntest();"),
    "lua": Problem(
        "-- Add two numbers x and y\nlocal function add(x, y)\n",
        "lu = require('luaunit')\n\nfunction test_humaneval()\nlocal candidate = add\n"
        "    lu.assertEquals(candidate(1, 2), 3)\n    lu.assertEquals(candidate(5, 7), 12)\nend\n\n"
        "os.exit(lu.LuaUnit.run())"),
    "php": Problem(
        "<?php\n// Add two numbers x and y\nfunction add($x, $y) {\n",
        "function candidate(...$args) {\n    return add(...$args);\n}\n\nfunction test(): void {\n"
        "    if (candidate(1, 2) !== 3) { throw new Exception(\"Test failed!\"); }\n"
        "    if (candidate(5, 7) !== 12) { throw new Exception(\"Test failed!\"); }\n}\n\ntest();"),
    "r": Problem(
        "# Add two numbers x and y\nadd <- function(x, y) {\n",
        "test_humaneval <- function() {\ncandidate <- add\n    if(!identical(candidate(1, 2), 3)){quit('no', 1)}\n"
        "    if(!identical(candidate(5, 7), 12)){quit('no', 1)}\n}\ntest_humaneval()"),
    "cpp": Problem(
        "#include<assert.h>\n#include<bits/stdc++.h>\n// Add two numbers x and y\nlong add(long x, long y) {\n",
        "}\nint main() {\n    auto candidate = add;\n    assert(candidate((1), (2)) == (3));\n"
        "    assert(candidate((5), (7)) == (12));\n}\n"),
    "go": Problem(
        'package add_test\n\nimport (\n    "testing"\n    "fmt"\n)\n\n// Add two numbers x and y\n'
        "func add(x int, y int) int {\n",
        "}\n\nfunc TestAdd(t *testing.T) {\n  candidate := add\n\ttype test struct {\n\t\tactual   interface{}\n"
        "\t\texpected interface{}\n\t}\n   tests := []test{\n     { actual: candidate(1, 2), expected: 3 },\n"
        "     { actual: candidate(5, 7), expected: 12 },\n   }\n\n\tfor i, tc := range tests {\n"
        '\t\tt.Run(fmt.Sprintf("test num % d", i), func(t *testing.T) {\n'
        '\t\t\tif fmt.Sprintf("%v", tc.actual) != fmt.Sprintf("%v", tc.expected) {\n'
        "\t\t\t\tt.Errorf(\"expected '%s', got '%s'\", tc.expected, tc.actual)\n\t\t\t}\n\t\t})\n\t}\n}\n"),
    "rust": Problem(
        "/// Add two numbers x and y\nfn add(x: isize, y: isize) -> isize {\n",
        "}\n\nfn main() {\n    let candidate = add;\n    assert_eq!(candidate(1, 2), 3);\n"
        "    assert_eq!(candidate(5, 7), 12);\n}\n"),
    # A tuple result, as MultiPL-E's Java prompts write them: org.javatuples' Pair.
    "java": Problem(
        "import java.util.*;\nimport java.lang.reflect.*;\nimport org.javatuples.*;\nimport java.security.*;\n"
        "import java.math.*;\nimport java.io.*;\nimport java.util.stream.*;\nclass Problem {\n"
        "    // Return the sum and the difference of x and y\n"
        "    public static Pair<Long, Long> sumDifference(long x, long y) {\n",
        "    }\n    public static void main(String[] args) {\n"
        "    assert(sumDifference((1l), (2l)).equals((Pair.with(3l, -1l))));\n"
        "    assert(sumDifference((7l), (5l)).equals((Pair.with(12l, 2l))));\n    }\n\n}\n"),
    "csharp": Problem(
        "using System;\nusing System.Numerics;\nusing System.Diagnostics;\nusing System.Collections.Generic;\n"
        "using System.Linq;\nusing System.Text;\nusing System.Security.Cryptography;\nclass Problem {\n"
        "    // Add two numbers x and y\n    public static long Add(long x, long y) {\n",
        "    }\n    public static void Main(string[] args) {\n    Debug.Assert(Add((1L), (2L)) == (3L));\n"
        "    Debug.Assert(Add((5L), (7L)) == (12L));\n    }\n\n}\n"),
    "haskell": Problem(
        "-- Add two numbers x and y\nadd :: Int -> Int -> Int\nadd =",
        "main = check add\ncheck candidate = if (True\n   && candidate (1) (2) == 3\n"
        "   && candidate (5) (7) == 12\n  ) then putStrLn \"OK\" else error \"FAIL\"\n"),
}

CASES = {
    "python": [
        Case("correct", "    return x + y\n", "OK", 0),
        Case("wrong", "    return x - y\n", "Exception", 1),
        Case("crash", "    return x // 0\n", "Exception", 1),
        Case("loop", "    while True:\n        pass\n", "Timeout", -1, loops=True),
        Case("syntax", "    return x +\n", "SyntaxError", 1),
        # MultiPL-E's rule: exit code 0 is OK, even when the tests never ran.
        Case("exit_before_tests", "    return x - y\nimport sys\nsys.exit(0)\n", "OK", 0),
    ],
    "javascript": [
        Case("correct", "  return x + y;\n}\n", "OK", 0),
        Case("wrong", "  return x - y;\n}\n", "AssertionError", 1),
        Case("crash", "  return null.x;\n}\n", "Exception", 1),
        Case("loop", "  while (true) {}\n}\n", "Timeout", -1, loops=True),
        Case("syntax", "  return x +;\n}\n", "SyntaxError", 1),
        Case("undefined_name", "  return x + z;\n}\n", "ReferenceError", 1),
    ],
    "typescript": [
        Case("correct", "  return x + y;\n}\n", "OK", 0),
        Case("wrong", "  return x - y;\n}\n", "AssertionError", 1),
        Case("type_error", "  return x + \"y\";\n}\n", "SyntaxError", 2),  # tsc's exit code
        Case("crash", "  throw new Error(\"boom\");\n}\n", "Exception", 1),
        Case("loop", "  while (true) {}\n}\n", "Timeout", -1, loops=True),
    ],
    "lua": [
        Case("correct", "    return x + y\nend\n", "OK", 0),
        Case("wrong", "    return x - y\nend\n", "Exception", 1),
        Case("crash", "    return x + nil\nend\n", "Exception", 1),  # luaunit counts an error too
        Case("loop", "    while true do end\nend\n", "Timeout", -1, loops=True),
    ],
    "php": [
        Case("correct", "    return $x + $y;\n}\n", "OK", 0),
        Case("wrong", "    return $x - $y;\n}\n", "Exception", 255),
        Case("crash", "    return intdiv($x, 0);\n}\n", "Exception", 255),
        # eval_php has no Timeout: a timed-out run (exit code -1) is an Exception.
        Case("loop", "    while (true) {}\n}\n", "Exception", -1, loops=True),
        # Parse errors go to stderr here, so "PHP Parse error" is not in stdout: an Exception.
        Case("syntax", "    return $x +;\n}\n", "Exception", 255),
    ],
    "r": [
        Case("correct", "    x + y\n}\n", "OK", 0),
        Case("wrong", "    x - y\n}\n", "AssertionError", 1),  # quit('no', 1): nothing on stderr
        Case("crash", "    stop('boom')\n}\n", "Exception", 1),
        Case("loop", "    while (TRUE) {}\n}\n", "Timeout", -1, loops=True),
        Case("syntax", "    x +* y\n}\n", "SyntaxError", 1),
    ],
    "cpp": [
        Case("correct", "    return x + y;\n", "OK", 0),
        Case("wrong", "    return x - y;\n", "Exception", -6),  # assert: abort(), SIGABRT
        Case("crash", "    volatile long *p = nullptr;\n    return *p;\n", "Exception", -11),  # SIGSEGV
        Case("loop", "    while (true) {}\n", "Timeout", -1, loops=True),
        Case("syntax", "    return x +;\n", "SyntaxError", 1),
    ],
    "go": [
        Case("correct", "    return x + y\n", "OK", 0),
        Case("wrong", "    return x - y\n", "Exception", 1),
        Case("type_error", "    return x + \"y\"\n", "SyntaxError", 2),  # [build failed]
        Case("crash", "    panic(\"boom\")\n", "Exception", 1),
        Case("loop", "    for {}\n", "Timeout", None, loops=True),  # eval_go: no exit code
    ],
    "rust": [
        Case("correct", "    x + y\n", "OK", 0),
        Case("wrong", "    x - y\n", "Exception", 101),  # a panic
        Case("syntax", "    x +\n", "SyntaxError", 1),
        Case("crash", "    x / (y - y)\n", "Exception", 101),  # division by zero panics
        Case("loop", "    loop {}\n", "Timeout", -1, loops=True),
    ],
    "java": [
        Case("correct", "        return Pair.with(x + y, x - y);\n", "OK", 0),
        Case("wrong", "        return Pair.with(x + y, y - x);\n", "Exception", 1),
        Case("syntax", "        return Pair.with(x + y, x -);\n", "SyntaxError", 1),
        Case("crash", "        throw new RuntimeException(\"boom\");\n", "Exception", 1),
        Case("loop", "        while (true) {}\n", "Timeout", -1, loops=True),
    ],
    "csharp": [
        Case("correct", "        return x + y;\n", "OK", 0),
        # A failed Debug.Assert prints and goes on: mono exits 0, stderr makes it an Exception.
        Case("wrong", "        return x - y;\n", "Exception", 0),
        Case("crash", "        throw new InvalidOperationException(\"boom\");\n", "Exception", 1),
        Case("syntax", "        return x +;\n", "SyntaxError", 1),
        Case("loop", "        while (true) {}\n", "Timeout", -1, loops=True),
    ],
    "haskell": [
        Case("correct", " \\x y -> x + y\n", "OK", 0),
        Case("wrong", " \\x y -> x - y\n", "Exception", 1),
        Case("crash", " \\x y -> error \"boom\"\n", "Exception", 1),
        Case("loop", " \\x y -> let spin n = spin (n + 1) in spin x\n", "Timeout", -1, loops=True),
    ],
}


def _missing(language: str) -> list[str]:
  return execution.missing(multiple.toolchain(language))


def _run(language: str, case: Case) -> dict:
  problem = PROBLEMS[language]
  limits = LOOP_LIMITS if case.loops else execution.Limits(timeout_s=multiple.TIMEOUT_S[language])
  return multiple.run_program(language, problem.prompt + case.completion + "\n" + problem.tests, limits)


@pytest.mark.parametrize("language", sorted(CASES))
def test_verdicts_follow_multiple_rules(language):
  """Every case's (status, exit_code) is MultiPL-E's for that program, and only the correct one passes."""
  if _missing(language):
    pytest.skip(f"{language}: missing {', '.join(_missing(language))} (`make toolchains`)")
  cases = CASES[language]
  with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
    results = list(pool.map(lambda case: _run(language, case), cases))
  wrong = {c.name: (r["status"], r["exit_code"], r["stderr"][-600:]) for c, r in zip(cases, results)
           if (r["status"], r["exit_code"]) != (c.status, c.exit_code)}
  assert not wrong, wrong
  assert all(r["status"] in multiple.STATUSES for r in results)
  assert [multiple.passed(r) for r in results] == [c.status == "OK" and c.exit_code == 0 for c in cases]


def test_the_required_cases_are_covered():
  """Correct, wrong, crashing and looping in every language."""
  for language, cases in CASES.items():
    assert {"correct", "wrong", "crash", "loop"} <= {c.name for c in cases}, language
  assert set(CASES) == set(multiple.TIMEOUT_S) == set(PROBLEMS)


def test_passed_needs_ok_and_exit_code_zero():
  """pass_k.py's rule: C#'s OK with a non-zero exit code and any other status with 0 both fail."""
  assert multiple.passed({"status": "OK", "exit_code": 0})
  assert not multiple.passed({"status": "OK", "exit_code": 1})
  assert not multiple.passed({"status": "Exception", "exit_code": 0})
  assert not multiple.passed({"status": "Timeout", "exit_code": None})


def test_result_shape_and_stdout_rewrite():
  """The evaluator's four fields and the run's time; "!!int" is dropped from stdout (as
  containerized_eval.py does); a compile failure has no run time."""
  if _missing("python"):
    pytest.skip("python toolchain missing")
  result = multiple.run_program("python", "print('!!int5')\n", execution.Limits(timeout_s=15))
  assert result["stdout"] == "5\n" and result["status"] == "OK" and result["exit_code"] == 0
  assert set(result) == {"status", "exit_code", "stdout", "stderr", "run_s"} and result["run_s"] > 0
  if not _missing("cpp"):
    failed = multiple.run_program("cpp", "int main() { return }\n", execution.Limits(timeout_s=15))
    assert failed["status"] == "SyntaxError" and failed["run_s"] is None and "error" in failed["stderr"]


def test_rules_read_the_evaluators_texts():
  """The status rules alone, on outputs the sandbox cannot easily produce."""
  run = lambda code, out="", err="", timed_out=False: multiple.Run(code, timed_out, out, err)
  assert multiple._go(run(1, out="FAIL\tcommand-line-arguments [setup failed]\nFAIL\n")) == "SyntaxError"
  assert multiple._go(run(1, out="ok\n")) == "OK"  # no FAIL in stdout: OK (exit 1 still fails it)
  assert multiple._go(run(None, timed_out=True)) == "Timeout"
  assert multiple._php(run(255, out="PHP Parse error:  syntax error")) == "SyntaxError"
  assert multiple._csharp(run(1, err="Unhandled Exception:\nSystem.Exception")) == "Exception"
  assert multiple._csharp(run(3)) == "OK"  # stderr alone decides; passed() then reads exit code 3
  assert multiple._r(run(1, out="Error: unexpected symbol")) == "SyntaxError"
  assert multiple._javascript(run(1, out="ReferenceError: z")) == "ReferenceError"  # stdout counts
  assert multiple._typescript(run(1, out="ReferenceError: z")) == "Exception"  # stderr only
  assert multiple._python(run(1, err="  File x\nSyntaxError: invalid syntax")) == "SyntaxError"


def test_programs_use_multiple_file_layout():
  """Go runs `go test` on a _test.go file; Java compiles class Problem from a file not named after
  it; C# defines DEBUG; the run's environment routes mono's trace listener to stderr."""
  go = multiple.program("go", "package x_test\n")
  assert list(go.files) == ["main_test.go"] and go.run[1:] == ("test", "main_test.go") and not go.compile
  java = multiple.program("java", "class Problem {}\n")
  assert "program.java" in java.files and java.run[-1] == "Problem" and "-ea" in java.run
  csharp = multiple.program("csharp", "class Problem {}\n")
  assert "-d:DEBUG" in csharp.compile[0] and csharp.env["MONO_TRACE_LISTENER"] == "Console.Error"
  with pytest.raises(ValueError):
    multiple.program("dart", "")


def test_each_renderer_owns_its_evaluators_commands_and_names_a_known_rule():
  """The commands are the renderers' (Renderer.foreign); this module only applies the status rules
  they name, with no branch on the language (issue 55: toolchains behind the renderer interface)."""
  import inspect
  from sandbox.renderers import MODULES, get
  assert set(multiple.TIMEOUT_S) == set(MODULES)
  for name in MODULES:
    foreign = get(name).foreign("int main() {}\n")
    assert foreign.status in multiple.STATUS_RULES, name
    commands = [" ".join(step) for step in (*foreign.compile, foreign.run)]
    assert any(foreign.source in command for command in commands), (name, commands)
    assert multiple.program(name, "x").files[foreign.source] == "x"
  assert multiple.TIMEOUT_S["go"] == 30.0 and multiple.TIMEOUT_S["lua"] == 5.0 and multiple.TIMEOUT_S["java"] == 15.0
  assert "/usr/bin/runghc" in multiple.toolchain("haskell").binaries
  code = inspect.getsource(multiple)
  assert "language ==" not in code and "from sandbox.renderers import MODULES, base, get" in code
