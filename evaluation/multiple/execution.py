"""Run a MultiPL-E program (prompt + completion + "\\n" + tests, with its own main or asserts) the way
MultiPL-E's evaluator for its language does (nuprl/MultiPL-E evaluation/src/eval_<lang>.py, the
copies in bigcode-evaluation-harness's multiple_metrics), inside codelm's sandbox with codelm's
toolchains (sandbox/renderers/<lang>.py), and read the outcome with that evaluator's rules.

An evaluator answers {"status", "exit_code", "stdout", "stderr"}; MultiPL-E's pass_k.py counts a
program as passed when status == "OK" and exit_code == 0. Both parts matter: C#'s status reads
stderr, not the exit code (a failed Debug.Assert prints and goes on, exit 0), and Go's reads
`go test`'s stdout. The rules, per codelm language (file, commands, run timeout, status):
- python: `python3 f.py`, 15 s (safe_subprocess). Timeout; exit 0 OK; "SyntaxError" in stderr
  SyntaxError; else Exception. A program that calls sys.exit(0) (or exit()) before its tests is OK.
- javascript: `node f.js`, 5 s. Timeout; exit 0 OK; else in str(CompletedProcess) (stdout and
  stderr) "ERR_ASSERTION" AssertionError, "SyntaxError" SyntaxError, "ReferenceError"
  ReferenceError, else Exception.
- typescript: `tsc --target esnext f.ts` (15 s; failed: SyntaxError), `node f.js`, 15 s; then as
  JavaScript, but reading stderr only.
- lua: `lua f.lua`, 5 s (libeval.run_without_exn). Timeout; exit 0 OK; else Exception.
- php: `php f.php`, 15 s. "PHP Parse error" in stdout SyntaxError; exit != 0 Exception; else OK.
  No Timeout: a timed-out run has exit code -1, so it is an Exception.
- r: `Rscript f.r`, 5 s. Timeout; exit 0 OK; else in str(CompletedProcess) "unexpected"
  SyntaxError, "err=b''" (an empty stderr: the tests' `quit('no', 1)`) AssertionError, else
  Exception.
- cpp: `g++ f.cpp -o f -std=c++17` (15 s; failed or timed out: SyntaxError), `./f`, 15 s. Timeout;
  exit != 0 Exception; else OK.
- go: `go test f_test.go`, 30 s for build and run together. Timeout (exit code None); "[setup
  failed]" or "[build failed]" in stdout SyntaxError; "FAIL" in stdout Exception; else OK.
- rust: `rustc f.rs -o f` (15 s: timed out is Timeout, failed SyntaxError), `./f`, 5 s. Timeout;
  exit 0 OK; else Exception.
- java: `javac -encoding UTF8 -d out f.java` with javatuples-1.2.jar on the classpath (15 s;
  failed: SyntaxError), `java -ea -cp out:javatuples Problem`, 15 s. Timeout; exit 0 OK; else
  Exception.
- csharp: `csc /d:DEBUG -r:System.Numerics.dll f.cs /out:f.exe` (failed: SyntaxError), `mono f.exe`
  with MONO_TRACE_LISTENER=Console.Error, 5 s. Timeout; "System.Diagnostics.DefaultTraceListener.Fail"
  or "Unhandled Exception" in stderr Exception, else OK; exit_code is mono's own either way. An
  empty stderr reads "None".
- haskell: `runghc f.hs`, 15 s. Timeout; exit 0 OK; else Exception (a type error too).
A timed-out step's exit code is -1 (None for Go); a process killed by signal N has -N (Popen's
returncode). A compile failure's exit code is the compiler's. Every stdout has "!!int" removed
(containerized_eval.py). Statuses: STATUSES.

Here, where codelm's toolchain or sandbox differs from MultiPL-E's container (the docs quote this):
- Versions: the machine's, recorded with every result (execution.toolchain_version); here Python
  3.11, node 20, TypeScript 7 (the native tsc), Lua 5.3, PHP 8.2, R 4.2, g++ 12, Go 1.19, OpenJDK 17,
  Mono 6.8's mcs, GHC 9.0.
- TypeScript: tsc 7 changed defaults, so the command restores tsc 5's: `--strict false --module
  es2015` (tsc 5 with --target esnext: not strict, ES2015 modules); the default lib still includes
  the DOM (console). tsc 7 always emits "use strict" (alwaysStrict can no longer be off).
  `--singleThreaded` (and GOMAXPROCS=2) keep the Go compiler under the sandbox's process cap.
- C#: Mono's mcs instead of Roslyn's csc (same flags, `-d:DEBUG -r:System.Numerics.dll`); mcs knows
  C# 7, csc newer versions, so a completion using newer syntax is a SyntaxError here.
- Java: Debian's javatuples-1.2.jar (libjavatuples-java), where MultiPL-E's container has the same
  jar; without it, codelm's minimal org.javatuples stand-in (Unit..Decade with `with`, getValueN,
  equals, hashCode, toString; sandbox/renderers/java_runtime.py), with which a completion using
  other javatuples methods does not compile. The JVM runs with codelm's flags (java.JVM_FLAGS: a
  512 MB heap, C1 only, serial GC), which the 2 GB address-space cap needs; MultiPL-E's JVM takes a
  quarter of the RAM.
- Go: GOPATH is Debian's /usr/share/gocode, so a test importing github.com/stretchr/testify finds
  Debian's (golang-github-stretchr-testify-dev); it is compiled into the box's fresh build cache
  each time (about 5 s more). Modules off, cgo off (go.ENV).
- Lua: luaunit, which the tests require, is Debian's lua-unit.
- C++: when the program includes <bits/stdc++.h>, g++ is also given `-include` of codelm's
  precompiled bits/stdc++.h (sandbox/renderers/cpp.py): the same declarations (the header has
  no guard; everything it includes has, <assert.h> included by it too), in about 0.3 s instead of
  1.4 s.
- Rust: `-C prefer-dynamic` (libstd linked dynamically, a faster link) and codelm's linker path.
- PHP: codelm's ini settings (sandbox/renderers/php.py PHP_FLAGS: no php.ini, errors to stderr,
  ctype/iconv/calendar loaded) instead of the container's php.ini: a parse error's text is on
  stderr, never "PHP Parse error" in stdout, so it is an Exception (exit 255), not a SyntaxError.
- R: the R binary with Rscript's own flags (`--no-echo --no-restore --file=`) and the environment
  Rscript's front end sets (sandbox/renderers/r.py), its default packages included.
- Python: the base interpreter codelm runs on, its third-party site-packages hidden.
- Limits: every step runs under codelm's sandbox limits (2 GB address space, 64 processes, 64 MB
  of disk, no network); MultiPL-E's has none but its timeouts. Compile steps time out at the
  caller's Limits.compile_timeout_s (60 s by default), not MultiPL-E's 15 s; the run at
  Limits.timeout_s (TIMEOUT_S is MultiPL-E's per language).
- Output: MultiPL-E keeps about 2 KiB (1 KiB reads until 2 KiB are in) of stdout and stderr for the
  evaluators that use safe_subprocess (python, php, cpp, java, typescript, haskell), everything for
  the others; here stdout is kept up to Limits.max_output_kb and stderr is the last 4000 bytes (the
  sandbox's), and the rules read those. A compiler's stdout is in stderr.
- A run killed by signal N is seen by the sandbox as exit code 128 + N and reported as -N; a program
  that itself exits with 129..192 would read as a signal (no verdict changes: either is not 0).
Each program is built and run alone (no batched build: a whole program has its own main). The
commands are each language's renderer's (`Renderer.foreign`, sandbox/renderers/), which names the
status rule of STATUS_RULES its evaluator uses; this module has no per-language branch.
"""

from __future__ import annotations

import dataclasses
import functools
import subprocess
from collections.abc import Callable

from sandbox import execution
from sandbox.renderers import MODULES, base, get

STATUSES = ("OK", "Exception", "SyntaxError", "Timeout", "AssertionError", "ReferenceError")

# MultiPL-E's run timeout per codelm language (seconds; Go's covers `go test`'s build too): each
# renderer's foreign_timeout_s, as its `foreign` has the evaluator's commands.
TIMEOUT_S: dict[str, float] = {name: get(name).foreign_timeout_s for name in MODULES}


@dataclasses.dataclass(frozen=True)
class Run:
  """What an evaluator's status rule reads of its run: one subprocess's outcome."""
  exit_code: int | None   # None: it did not report (killed from outside)
  timed_out: bool
  stdout: str
  stderr: str


def _by_exit_code(run: Run) -> str:
  """eval_cpp, eval_java, eval_rust, eval_hs, libeval (Lua)."""
  return "Timeout" if run.timed_out else "OK" if run.exit_code == 0 else "Exception"


def _python(run: Run) -> str:
  if run.timed_out:
    return "Timeout"
  if run.exit_code == 0:
    return "OK"
  return "SyntaxError" if "SyntaxError" in run.stderr else "Exception"


def _php(run: Run) -> str:
  """eval_php: no timeout case (a timed-out run's exit code -1 makes it an Exception)."""
  if "PHP Parse error" in run.stdout:
    return "SyntaxError"
  return "Exception" if run.timed_out or run.exit_code != 0 else "OK"


def _completed(argv: tuple[str, ...], run: Run) -> str:
  """str(subprocess.CompletedProcess), the text eval_javascript and eval_r search."""
  return str(subprocess.CompletedProcess(list(argv), run.exit_code, run.stdout.encode(), run.stderr.encode()))


def _node_errors(text: str) -> str:
  for word, status in (("ERR_ASSERTION", "AssertionError"), ("SyntaxError", "SyntaxError"),
                       ("ReferenceError", "ReferenceError")):
    if word in text:
      return status
  return "Exception"


def _javascript(run: Run) -> str:
  if run.timed_out:
    return "Timeout"
  return "OK" if run.exit_code == 0 else _node_errors(_completed(("node", "main.js"), run))


def _typescript(run: Run) -> str:
  if run.timed_out:
    return "Timeout"
  return "OK" if run.exit_code == 0 else _node_errors(run.stderr)


def _r(run: Run) -> str:
  if run.timed_out:
    return "Timeout"
  if run.exit_code == 0:
    return "OK"
  text = _completed(("Rscript", "main.r"), run)
  return "SyntaxError" if "unexpected" in text else "AssertionError" if "err=b''" in text else "Exception"


def _go(run: Run) -> str:
  if run.timed_out:
    return "Timeout"
  if "[setup failed]" in run.stdout or "[build failed]" in run.stdout:
    return "SyntaxError"
  return "Exception" if "FAIL" in run.stdout else "OK"


def _csharp(run: Run) -> str:
  """eval_cs: mono exits 0 after a failed Debug.Assert, so stderr decides (the exit code stays)."""
  if run.timed_out:
    return "Timeout"
  failed = "System.Diagnostics.DefaultTraceListener.Fail" in run.stderr or "Unhandled Exception" in run.stderr
  return "Exception" if failed else "OK"


# The status rules a renderer's `foreign` names (base.Foreign.status): its evaluator's, by name.
STATUS_RULES: dict[str, Callable[[Run], str]] = {
    "exit_code": _by_exit_code, "python": _python, "php": _php, "javascript": _javascript,
    "typescript": _typescript, "r": _r, "go": _go, "csharp": _csharp}


def _foreign(language: str, text: str) -> base.Foreign:
  if language not in TIMEOUT_S:
    raise ValueError(f"no MultiPL-E evaluator for {language!r}; languages: {', '.join(TIMEOUT_S)}")
  return get(language).foreign(text)


@functools.cache
def toolchain(language: str) -> base.Toolchain:
  """codelm's toolchain for the language (its renderer's), with what MultiPL-E's evaluator runs
  besides (runghc for Haskell)."""
  if language not in TIMEOUT_S:
    raise ValueError(f"no MultiPL-E evaluator for {language!r}; languages: {', '.join(TIMEOUT_S)}")
  renderer = get(language)
  return dataclasses.replace(renderer.toolchain, binaries=(*renderer.foreign_binaries, *renderer.toolchain.binaries))


def program(language: str, text: str) -> base.Program:
  """The sandbox program that runs the whole program `text` as MultiPL-E's evaluator does."""
  foreign = _foreign(language, text)
  return base.Program(files={foreign.source: text, **foreign.files}, run=foreign.run, compile=foreign.compile,
                      env=dict(foreign.env))


def _popen_code(step: execution.Step) -> int | None:
  """The exit code as Popen reports it: -N for a process killed by signal N (128 + N in bash)."""
  code = step.exit_code
  return -(code - 128) if code is not None and 128 < code <= 128 + 64 else code


def run_program(language: str, text: str, limits: execution.Limits) -> dict:
  """{"status", "exit_code", "stdout", "stderr", "run_s"} of the program, by MultiPL-E's rules for
  the language (module docstring); run_s is the run step's wall time, None when it did not run."""
  foreign = _foreign(language, text)
  done = execution.execute(program(language, text), toolchain(language), limits)
  stdout, stderr = done.stdout, done.stderr
  failed = next((s for s in done.compile if s.exit_code != 0), None)
  if failed is not None:
    if failed.timed_out or failed.exit_code is None:
      status, exit_code = foreign.compile_timeout_status, -1
      if status == "Timeout":  # eval_rust's words
        stdout = stderr = "Compiler timeout"
    else:
      status, exit_code = "SyntaxError", _popen_code(failed)
    return _result(status, exit_code, stdout, stderr, None)
  step = done.run
  timed_out = step.timed_out or step.exit_code is None
  exit_code = foreign.timeout_exit_code if timed_out else _popen_code(step)
  status = STATUS_RULES[foreign.status](Run(exit_code, timed_out, stdout, stderr))
  if foreign.empty_output_as_none:  # eval_cs.py writes "None" for an empty or absent output
    stderr = stderr or "None"
    stdout = stdout or ("None" if timed_out else "")
  return _result(status, exit_code, stdout, stderr, step.runtime_s)


def _result(status: str, exit_code: int | None, stdout: str, stderr: str, run_s: float | None) -> dict:
  return {"status": status, "exit_code": exit_code, "stdout": stdout.replace("!!int", ""), "stderr": stderr,
          "run_s": run_s}


def passed(result: dict) -> bool:
  """MultiPL-E's pass_k.py: status OK and exit code 0."""
  return result["status"] == "OK" and result["exit_code"] == 0
