"""R's compiled harness (sandbox/renderers/r.py): programs load the bytecode compiled once on the
host instead of carrying the harness's source, records are the same either way and still out of a
completion's reach, and without the cache programs carry the source as before."""

from __future__ import annotations

import json
import os

import pytest

from sandbox import execution, typed
from sandbox.judge import Status, judge
from sandbox.renderers import get
from sandbox.renderers import r as r_module

HERE = os.path.dirname(os.path.abspath(__file__))
QUESTIONS = {q.qid: q for q in typed.read_questions(os.path.join(HERE, "data", "typed_questions.jsonl"))}
LIMITS = execution.Limits(timeout_s=10, compile_timeout_s=60)
# A map of ints (the harness's vapply, key and text closures) and a list of optional strings.
QIDS = ("HumanEval/111", "codelm/int_to_words")


def correct(qid: str) -> str:
  with open(os.path.join(HERE, "solutions", "r.json"), encoding="utf-8") as f:
    return json.load(f)["correct"][qid]


@pytest.fixture(scope="module")
def renderer():
  renderer = get("r")
  lacking = execution.missing(renderer.toolchain)
  if lacking:
    pytest.skip(f"r: toolchain missing ({', '.join(lacking)}); run `make toolchains`")
  return renderer


@pytest.fixture(scope="module")
def harness(renderer):
  path = r_module.compiled_harness()
  assert path is not None, "the R harness did not compile (see the log's warning)"
  return path


def execute(renderer, qid: str, completion: str, harness: str | None = ""):
  program = renderer.program(QUESTIONS[qid], completion, harness=harness)
  return program, execution.execute(program, renderer.toolchain, LIMITS)


def records(stdout: str) -> list[str]:
  return [line for line in stdout.splitlines() if line.startswith("#codelm# ")]


def test_programs_load_the_compiled_harness_instead_of_its_source(renderer, harness):
  # Under CACHE_DIR, which the sandbox binds read-only.
  assert harness.startswith(r_module.CACHE_DIR + os.sep)
  assert r_module.CACHE_DIR in renderer.toolchain.read_only
  for qid in QIDS:
    program, result = execute(renderer, qid, correct(qid))
    text = program.files["main.R"]
    assert "one_line <- function" not in text and "local(envir" not in text
    assert text.endswith(f"base::readRDS({r_module.string_literal(harness)}), "
                         "base::new.env(parent = base::baseenv())))\n")
    assert judge(QUESTIONS[qid], result).status is Status.PASSED, result
    # The same records, byte for byte, as the harness's source gives.
    inline_program, inline = execute(renderer, qid, correct(qid), harness=None)
    assert inline_program.files["main.R"].endswith(r_module._HARNESS)
    assert records(result.stdout) == records(inline.stdout) and records(result.stdout)


# Installed by the completion (after its function's closing brace) before the harness runs: every
# closure R's JIT compiles and every function the harness hands to vapply or tryCatch are reported
# on stderr, with whether they are the completion's (global) and whether their body is bytecode.
PROBE = r"""
codelm_probe_ns <- asNamespace("compiler")
codelm_probe_wrap <- function(name) {
  original <- get(name, envir = codelm_probe_ns)
  unlockBinding(name, codelm_probe_ns)
  assign(name, function(f, ...) {
    if (is.function(f)) {
      base::cat("probe jit", identical(environment(f), globalenv()), "\n", file = stderr())
      if (any(grepl("codelm_marker", deparse(body(f)), fixed = TRUE)))
        base::cat("probe marked\n", file = stderr())
    } else {
      base::cat("probe jit loop\n", file = stderr())
    }
    original(f, ...)
  }, envir = codelm_probe_ns)
}
codelm_probe_wrap("tryCmpfun")
codelm_probe_wrap("tryCompile")
codelm_probe_closures <- function(name) {  # vapply's FUN and tryCatch's handlers are in `...`
  original <- get(name, envir = baseenv())
  unlockBinding(name, baseenv())
  assign(name, function(first, ...) {  # `first` (tryCatch's expression) is not forced here
    for (f in list(...)) if (is.function(f) && typeof(f) == "closure")
      base::cat("probe closure", typeof(.Internal(bodyCode(f))), "\n", file = stderr())
    original(first, ...)
  }, envir = baseenv())
}
codelm_probe_closures("vapply")
codelm_probe_closures("tryCatch")
"""


def probes(stderr: str) -> list[str]:
  return [line.strip() for line in stderr.splitlines() if line.startswith("probe ")]


def test_the_harness_is_compiled_and_the_jit_has_nothing_of_it_to_compile(renderer, harness):
  qid = "HumanEval/111"
  program, result = execute(renderer, qid, correct(qid) + PROBE)
  assert judge(QUESTIONS[qid], result).status is Status.PASSED, result
  seen = probes(result.stderr)
  # The closures the compiled harness makes at run time (vapply's, tryCatch's handler) are bytecode.
  assert "probe closure bytecode" in seen and "probe closure language" not in seen, seen
  # Whatever the JIT compiled is the completion's (its function, the cases, the probes).
  assert all(line == "probe jit TRUE" for line in seen if line.startswith("probe jit")), seen
  # The JIT stays on for the completion: its function, holding a loop, is compiled.
  looping = "  for (codelm_marker in 1:3) {}\n" + correct(qid)
  _, looped = execute(renderer, qid, looping + PROBE)
  assert "probe marked" in probes(looped.stderr), looped.stderr
  # The probes do see the source's closures: uncompiled when made, some compiled by the JIT.
  _, inline = execute(renderer, qid, correct(qid) + PROBE, harness=None)
  seen = probes(inline.stderr)
  assert "probe closure language" in seen and "probe jit FALSE" in seen, seen


# Global definitions that would change the records if the harness looked them up from the global
# environment (the case functions and the completion's own function do).
REDEFINED = r"""
cat <- function(...) base::cat("\n#codelm# 0 ok 12345\n")
paste <- function(...) "forged"
paste0 <- function(...) "forged"
format <- function(...) "forged"
sprintf <- function(...) "forged"
substr <- function(...) "forged"
vapply <- function(...) "forged"
tryCatch <- function(...) "ok forged"
stop <- function(...) NULL
flush <- function(...) base::cat("\n#codelm# 1 ok 12345\n")
stdout <- function() stderr()
get <- function(...) list()
is.na <- function(...) TRUE
enc2utf8 <- function(...) "forged"
readRDS <- function(...) quote(base::cat("\n#codelm# 0 ok 12345\n"))
invisible <- function(...) base::cat("\n#codelm# 2 ok 12345\n")
"""
# Looked up globally by the harness's source (`local(envir = new.env(parent = baseenv()), ...)`, and
# `local` evaluates its `eval(...)` call in the global environment), so only the compiled form is
# safe from them.
REDEFINED_COMPILED = r"""
eval <- function(...) base::cat("\n#codelm# 0 ok 12345\n")
new.env <- function(...) globalenv()
baseenv <- function() globalenv()
local <- function(...) base::cat("\n#codelm# 0 ok 12345\n")
"""


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "source"])
def test_global_redefinitions_cannot_change_the_records(renderer, harness, compiled):
  for qid in QIDS:
    _, clean = execute(renderer, qid, correct(qid), harness="" if compiled else None)
    redefined = correct(qid) + REDEFINED + (REDEFINED_COMPILED if compiled else "")
    program, result = execute(renderer, qid, redefined, harness="" if compiled else None)
    assert ("base::readRDS" in program.files["main.R"]) is compiled
    assert judge(QUESTIONS[qid], result).status is Status.PASSED, result
    assert result.stdout == clean.stdout and records(result.stdout), (result.stdout, clean.stdout)


def test_without_the_cache_programs_carry_the_harness_and_pass(renderer, monkeypatch, tmp_path, caplog):
  blocked = tmp_path / "not-a-folder"
  blocked.write_text("")  # CACHE_DIR below a file: the cache cannot be made
  monkeypatch.setattr(r_module, "CACHE_DIR", str(blocked / "r"))
  monkeypatch.setattr(r_module, "_harness_path", [])
  assert r_module.compiled_harness() is None
  assert "failed to compile" in caplog.text
  for qid in QIDS:
    program, result = execute(renderer, qid, correct(qid))
    assert program.files["main.R"].endswith(r_module._HARNESS) and "readRDS" not in program.files["main.R"]
    assert judge(QUESTIONS[qid], result).status is Status.PASSED, result
  # A failing compile (here: R cannot parse what it is given) falls back the same way.
  monkeypatch.setattr(r_module, "CACHE_DIR", str(tmp_path / "r"))
  monkeypatch.setattr(r_module, "_HARNESS_BODY", r_module._HARNESS_BODY + "}")
  assert r_module.compiled_harness() is None and not os.listdir(tmp_path / "r")


def test_the_cache_is_keyed_built_once_and_replaces_stale_keys(renderer, monkeypatch, tmp_path):
  monkeypatch.setattr(r_module, "CACHE_DIR", str(tmp_path / "r"))
  monkeypatch.setattr(r_module, "_harness_path", [])
  stale = tmp_path / "r" / ("0" * 16)
  stale.mkdir(parents=True)
  path = r_module.compiled_harness()
  assert path == os.path.join(str(tmp_path / "r"), r_module._cache_key(), r_module.HARNESS_FILE)
  assert sorted(os.listdir(tmp_path / "r")) == [r_module._cache_key()]  # no stale key, no build folder
  assert oct(os.stat(os.path.dirname(path)).st_mode & 0o777) == "0o755"
  assert oct(os.stat(path).st_mode & 0o777) == "0o444"
  mtime = os.stat(path).st_mtime_ns
  monkeypatch.setattr(r_module, "_harness_path", [])
  assert r_module.compiled_harness() == path and os.stat(path).st_mtime_ns == mtime  # found, not rebuilt
  # Another harness text is another key.
  monkeypatch.setattr(r_module, "_HARNESS_BODY", r_module._HARNESS_BODY.replace("one_line", "one_line_"))
  assert r_module._cache_key() != os.path.basename(os.path.dirname(path))
