"""Batched compilation (sandbox/batching.py): the same verdicts as compiling each program alone.

For every language whose renderer builds batches, tests/solutions/<language>.json's programs (correct,
wrong, throwing once, failing to compile) and every fixture question's stub are executed in small
batches and one by one; the judge's verdict (status and every test case) must be the same. A compile
error in one member never changes another's verdict, and every member that compiles ran from a build.
The hostile programs are compared in tests/test_renderers.py::test_attacks_are_contained.
"""

from __future__ import annotations

import concurrent.futures
import json
import os

import pytest

from sandbox import batching, execution, typed
from sandbox.judge import Status, judge
from sandbox.renderers import MODULES, base, get
from toolchains import renderer_or_skip

HERE = os.path.dirname(os.path.abspath(__file__))
QUESTIONS = {q.qid: q for q in typed.read_questions(os.path.join(HERE, "data", "typed_questions.jsonl"))}
LIMITS = execution.Limits(timeout_s=5, compile_timeout_s=60)
BATCHED = sorted(name for name in MODULES if type(get(name)).build is not base.Renderer.build)


def solutions(language: str) -> dict:
  with open(os.path.join(HERE, "solutions", f"{language}.json"), encoding="utf-8") as f:
    return json.load(f)


def in_parallel(renderer, jobs, batch_size):
  """execute_all over two workers (the suite's CPU budget), each given whole batches."""
  stats = batching.Stats()
  step = max(batch_size, 1) * 2
  chunks = [jobs[i:i + step] for i in range(0, len(jobs), step)]

  def one(chunk):
    own = batching.Stats()
    return batching.execute_all(renderer, chunk, LIMITS, batch_size, own), own

  with concurrent.futures.ThreadPoolExecutor(2) as pool:
    done = list(pool.map(one, chunks))
  for _, own in done:
    stats.add(own)
  return [r for results, _ in done for r in results], stats


def test_the_compiled_languages_batch():
  assert set(BATCHED) >= {"cpp"}


@pytest.mark.parametrize("language", BATCHED)
def test_batched_verdicts_equal_verdicts_alone(language):
  renderer = renderer_or_skip(language)
  data = solutions(language)
  assert data.get("compile_error"), f"tests/solutions/{language}.json needs compile_error programs"
  kinds = ("correct", "wrong", "throws_once", "compile_error")
  jobs = [(QUESTIONS[qid], code, kind) for kind in kinds for qid, code in data[kind].items()]
  jobs += [(q, renderer.stub(q), "stub") for q in QUESTIONS.values()]
  # Interleave so that every batch of 6 mixes compile errors with programs that compile.
  jobs = jobs[::2] + jobs[1::2]
  pairs = [(q, code) for q, code, _ in jobs]
  batchable = [renderer.batchable(q, code) for q, code in pairs]
  assert all(b for (_, _, kind), b in zip(jobs, batchable) if kind != "compile_error"), \
      [(q.qid, kind) for (q, _, kind), b in zip(jobs, batchable) if not b]
  assert any(b for (_, _, kind), b in zip(jobs, batchable) if kind == "compile_error")

  together, stats = in_parallel(renderer, pairs, 6)
  alone, _ = in_parallel(renderer, pairs, 1)
  for (question, code, kind), a, b in zip(jobs, together, alone):
    batched, single = judge(question, a), judge(question, b)
    assert (batched.status, batched.cases) == (single.status, single.cases), (question.qid, kind, batched, single)
    assert (single.status is Status.COMPILE_ERROR) == (kind == "compile_error"), (question.qid, kind, single)
  errors = sum(kind == "compile_error" for _, _, kind in jobs)
  # Every program that compiles ran from a build; only (some) compile errors were compiled alone.
  assert stats.built >= len(jobs) - errors and stats.alone <= errors, stats
  assert stats.builds >= len(jobs) // 6


@pytest.mark.parametrize("language", BATCHED)
def test_a_batch_size_of_one_compiles_each_program_alone(language, monkeypatch):
  renderer = get(language)
  monkeypatch.setattr(execution, "build", lambda *a, **k: pytest.fail("no build expected"))
  calls = []
  monkeypatch.setattr(execution, "execute", lambda program, *a, **k: calls.append(program) or None)
  question = QUESTIONS["HumanEval/0"]
  batching.execute_all(renderer, [(question, renderer.stub(question))] * 3, LIMITS, batch_size=1)
  assert calls == [renderer.program(question, renderer.stub(question))] * 3


def test_cpp_refuses_what_could_reach_beyond_its_function():
  cpp = get("cpp")
  question = QUESTIONS["HumanEval/0"]
  fine = ["  return numbers.size() > 1;\n}", "  long n = 1'000'000; char c = '#';\n  return n > 0 && c;\n}",
          "  // a comment with # and }\n  string s = \"}{#\";\n  return s.empty();\n}\n\n",
          "  long helper(long);\n  return helper(1) > 0;\n}"]
  refused = {
      "preprocessor": "  return true;\n}\n#define true false",
      "preprocessor in body": "#define X 1\n  return X;\n}",
      "digraph": "  %:define X 1\n  return true;\n}",
      "leaves the function": "  return codelm_x();\n}\nbool codelm_x() { return true; }",
      "leaves by a brace": "  return true;\n}\nint other() { return 1; }",
      "does not close": "  return true;\n",
      "asm": "  asm(\".globl malloc\");\n  return true;\n}",
      "attribute": "  struct S { __attribute__((constructor)) static void f() {} };\n  return true;\n}",
      "standard attribute": "  [[gnu::constructor]] auto f = 1;\n  return true;\n}",
      "extern": "  extern long count;\n  return count > 0;\n}",
      "pragma operator": "  _Pragma(\"GCC poison x\")\n  return true;\n}",
      "harness name": "  codelm::write_all(1, \"x\");\n  return true;\n}",
      "raw string": "  string s = R\"(\")\";\n  return true;\n}",
      "line splice": "  // comment \\\n  return true;\n}",
      "unterminated string": "  string s = \"abc;\n  return true;\n}",
      "unterminated comment": "  /* return true;\n}",
      "char literal hiding code": "  long x = 1'0; char c = 'a';\n#define Y\n  return true;\n}",
      "the file's name": "  return string(__FILE__) == \"main.cpp\";\n}",
      "the translation unit's name": "  return string(__BASE_FILE__) == \"main.cpp\";\n}",
      "a counter over the unit": "  return __COUNTER__ == 0;\n}",
      "the function's qualified name": "  return string(__PRETTY_FUNCTION__).find(\"::\") == string::npos;\n}",
      "type names": "  struct S {};\n  return string(typeid(S).name()).size() < 20;\n}",
  }
  for code in fine:
    assert cpp.batchable(question, code), code
  for why, code in refused.items():
    assert not cpp.batchable(question, code), why


def test_cpp_refuses_a_function_whose_name_the_prompts_head_declares():
  """Alone, `strlen(s.c_str())` inside `long strlen(string s)` calls the C function (both are in the
  global namespace); in a member's namespace it would find only itself and recurse."""
  from sandbox.renderers import cpp
  from evaluation.score import load_benchmark

  renderer = renderer_or_skip("cpp")
  humaneval = load_benchmark("humaneval")
  names = {renderer.function_name(q) for q in humaneval.values()}
  found = cpp.declared(sorted(names))
  assert {n for n, is_declared in found.items() if is_declared} >= {"strlen", "unique", "search", "max_element"}
  assert not found["has_close_elements"] and not found["median"]
  strlen = humaneval["HumanEval/23"]
  code = "  return strlen(string_.c_str());\n}"
  assert renderer.function_name(strlen) == "strlen" and not renderer.batchable(strlen, code)
  results = batching.execute_all(renderer, [(strlen, code), (strlen, renderer.stub(strlen))], LIMITS, batch_size=2)
  assert judge(strlen, results[0]).status is Status.PASSED  # alone: the C function


def test_cpp_blames_the_members_its_compiler_names():
  cpp = get("cpp")
  diagnostics = ("m3/main.cpp:12:5: error: 'undefined_name' was not declared in this scope\n"
                 "/usr/bin/ld: batch.o: in function `codelm_m7::has_close_elements(std::vector<double>)':\n"
                 "m12/main.cpp: In function 'long int codelm_m12::f()':\n")
  assert cpp.blamed(diagnostics, 20) == {3, 7, 12}
  assert cpp.blamed("collect2: error: ld returned 1 exit status", 20) == set()


def test_a_failed_build_sends_the_members_it_blames_or_else_all_alone(monkeypatch):
  cpp = renderer_or_skip("cpp")
  question = QUESTIONS["HumanEval/0"]
  jobs = [(question, "  return numbers.size() > %d;\n}" % i) for i in range(4)]
  failing = base.Build(files={"x": ""}, compile=(("/bin/sh", "-c", "echo m1/main.cpp: error >&2; exit 1"),),
                       runs=())
  monkeypatch.setattr(type(cpp), "build", lambda self, jobs: failing)
  stats = batching.Stats()
  results = batching.execute_all(cpp, jobs, LIMITS, batch_size=4, stats=stats)
  # Every build blames its member 1: jobs 1, 2 and 3 go alone after three builds
  # (MAX_BUILD_ATTEMPTS), and job 0, left on its own, too.
  assert stats.builds == 3 and stats.failed_builds == 3 and stats.alone == 4 and stats.built == 0
  assert [judge(question, r).status for r in results] == [Status.FAILED] * 4  # compiled alone, as they are
  monkeypatch.setattr(type(cpp), "blamed", lambda self, diagnostics, size: set())
  stats = batching.Stats()
  batching.execute_all(cpp, jobs, LIMITS, batch_size=4, stats=stats)
  assert stats.builds == 1 and stats.failed_builds == 1 and stats.alone == 4


def test_a_build_larger_than_its_members_boxes_is_not_used(monkeypatch):
  cpp = renderer_or_skip("cpp")
  question = QUESTIONS["HumanEval/0"]
  jobs = [(question, "  return numbers.size() > %d;\n}" % i) for i in range(2)]
  sizes = []
  monkeypatch.setattr(batching, "_size", lambda directory: sizes.append(directory) or (LIMITS.disk_mb << 21) + 1)
  stats = batching.Stats()
  results = batching.execute_all(cpp, jobs, LIMITS, batch_size=2, stats=stats)
  assert len(sizes) == 1 and stats.builds == 1 and stats.failed_builds == 1 and stats.alone == 2 and stats.built == 0
  assert [judge(question, r).status for r in results] == [Status.FAILED] * 2  # compiled alone


def test_warm_caches_renders_without_a_sandbox():
  from sandbox.renderers import warm_caches
  assert warm_caches(["cpp", "python"]) == ["cpp", "python"]


@pytest.mark.parametrize("language", ["cpp", "java"])
def test_a_member_whose_artefacts_exceed_its_box_compiles_alone(language, monkeypatch):
  """The whole build fits its members' boxes, but one member's outputs (Java's m1/out) or the shared
  binary (C++'s main, every member's) are more than one box holds: those members compile alone,
  where the disk cap applies, and the verdicts stay those of compiling alone."""
  renderer = renderer_or_skip(language)
  question = QUESTIONS["HumanEval/0"]
  code = solutions(language)["correct"]["HumanEval/0"]
  jobs = [(question, code)] * 3
  expected = [judge(question, r).status for r in batching.execute_all(renderer, jobs, LIMITS, batch_size=1)]
  measured = []
  original = batching._artefacts_size

  def size(directory, program):
    measured.append(dict(program.artefacts))
    big = "m1/out" in program.artefacts.values() or "main" in program.artefacts.values()
    return (LIMITS.disk_mb << 20) + 1 if big else original(directory, program)

  monkeypatch.setattr(batching, "_artefacts_size", size)
  stats = batching.Stats()
  results = batching.execute_all(renderer, jobs, LIMITS, batch_size=3, stats=stats)
  assert len(measured) == 3 and stats.builds == 1
  alone = 1 if language == "java" else 3  # Java: member 1's own classes; C++: the binary all of them run
  assert (stats.alone, stats.built) == (alone, 3 - alone)
  assert [judge(question, r).status for r in results] == expected == [Status.PASSED] * 3
