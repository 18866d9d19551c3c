"""TypeScript's batched compilation (sandbox/renderers/typescript.py, typescript_batch.js): one
`tsc -b` builds a project per member, and each member gets the exit status and diagnostics that tsc
prints for its program alone.

`batchable` refuses what could make tsc read a file (imports, exports, reference directives, and the
escapes that could spell those keywords): the build box holds other files than a box alone. The
builds below check that each member's program is its own (its globals, declarations and errors reach
no other member), that it emits the main.js its compile alone emits, byte for byte, and that the
driver gives no report where tsc's output and its build info do not say the same.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile

import pytest

from sandbox import batching, execution, typed
from sandbox.judge import Status, judge
from sandbox.renderers import base, get, javascript, typescript
from toolchains import renderer_or_skip

HERE = os.path.dirname(os.path.abspath(__file__))
QUESTIONS = {q.qid: q for q in typed.read_questions(os.path.join(HERE, "data", "typed_questions.jsonl"))}
LIMITS = execution.Limits(timeout_s=5, compile_timeout_s=60)
CLOSE = QUESTIONS["HumanEval/0"]  # hasCloseElements(numbers: number[], threshold: number): boolean
FLIP = QUESTIONS["HumanEval/27"]  # flipCase(string: string): string


def batched_and_alone(renderer, jobs):
  stats = batching.Stats()
  together = batching.execute_all(renderer, jobs, LIMITS, batch_size=len(jobs), stats=stats)
  alone = batching.execute_all(renderer, jobs, LIMITS, batch_size=1)
  return together, alone, stats


def test_batchable_accepts_ordinary_completions():
  renderer = get("typescript")
  with open(os.path.join(HERE, "solutions", "typescript.json"), encoding="utf-8") as f:
    solutions = json.load(f)
  # (batchable reads the completion's text only, whichever question it answers)
  kinds = ("correct", "wrong", "throws_once", "attacks")
  fine = [renderer.stub(CLOSE), *(c for k in kinds for c in solutions[k].values()),
          '  const s = "}{ /* // `${";  // } \\n\n  return s.length > threshold;\n}\n',
          "  const t = `${numbers.map((n) => `${n}}`).join(\"}\")}`;\n  return /[}{]\\/\\//.test(t);\n}\n",
          # (tsc does not resolve a plain require in a .ts file)
          '  const fs = require("fs");\n  return !!fs;\n}\n',
          "  return helper(numbers) > threshold;\n}\n"
          "function helper(xs: number[]): number { return xs.length; }\n"
          "interface Array<T> { extra?: number }\n",
          '  const s = "caf\u00e9 \u2603 \U0001f600";\n  return s.length > 0;\n}\n',
          "  // a comment /// and // <reference\n  return true;\n}\n"]
  for code in fine:
    assert renderer.batchable(CLOSE, code), code


REFUSED = {
    "import declaration": '  return true;\n}\nimport * as fs from "fs";\n',
    "import require": '  return true;\n}\nimport fs = require("../codelm_build");\n',
    "dynamic import": '  import("./other").then(() => 0);\n  return true;\n}\n',
    "import type": '  let x: typeof import("fs") | null = null;\n  return !x;\n}\n',
    "import meta": "  return !!import.meta;\n}\n",
    "export": "  return true;\n}\nexport {};\n",
    "re-export": '  return true;\n}\nexport * from "../m1/main";\n',
    "jsdoc import": '  /** @import { X } from "./x" */\n  return true;\n}\n',
    "import in any case": "  // IMPORTANT: Import nothing\n  return true;\n}\n",
    "reference directive": '  return true;\n}\n/// <reference path="../m1/main.ts" />\n',
    "unicode escape": '  return true;\n}\n\\u0069mport x = require("../codelm_build");\n',
}


@pytest.mark.parametrize("why", sorted(REFUSED))
def test_batchable_refuses_what_could_name_a_file(why):
  assert not get("typescript").batchable(CLOSE, REFUSED[why]), why


def test_the_projects_options_are_the_command_lines():
  renderer_or_skip("typescript")

  def show(directory: str, argv: list[str]) -> dict:
    result = subprocess.run([typescript.TSC, *argv, "--showConfig"], cwd=directory, capture_output=True,
                            text=True, timeout=60)
    return json.loads(result.stdout)

  with tempfile.TemporaryDirectory() as alone, tempfile.TemporaryDirectory() as project:
    for directory in (alone, project):
      for name in ("main.ts", "globals.d.ts"):
        with open(os.path.join(directory, name), "w", encoding="utf-8") as f:
          f.write("")
    with open(os.path.join(project, "tsconfig.json"), "w", encoding="utf-8") as f:
      json.dump({"compilerOptions": typescript.COMPILER_OPTIONS, "files": ["main.ts", "globals.d.ts"]}, f)
    # (--pretty and --singleThreaded are not compiler options --showConfig prints)
    assert show(alone, [*typescript.TSC_FLAGS, "main.ts", "globals.d.ts"]) == show(project, ["-p", "."])


def test_a_build_runs_each_member_from_its_own_files():
  renderer = get("typescript")
  jobs = [(CLOSE, renderer.stub(CLOSE)), (FLIP, renderer.stub(FLIP))]
  build = renderer.build(jobs)
  assert len(build.runs) == 2 and len(build.reports) == 2
  for (question, code), run, (status, diagnostics) in zip(jobs, build.runs, build.reports):
    alone = renderer.program(question, code)
    assert run.files == alone.files and run.run == alone.run and run.env == alone.env
    (source, target), = run.artefacts.items()
    directory = os.path.dirname(target)
    assert source == "main.js" and target == f"{directory}/main.js"
    assert {status, diagnostics} == {f"{directory}/codelm_status", f"{directory}/codelm_diagnostics"}
    assert all(build.files[f"{directory}/{name}"] == text for name, text in alone.files.items())
  # A token the completions cannot know names the folders: one per build.
  assert os.path.dirname(build.runs[0].artefacts["main.js"]) != \
      os.path.dirname(renderer.build(jobs).runs[0].artefacts["main.js"])


def test_members_emit_what_they_emit_alone():
  renderer = renderer_or_skip("typescript")
  with open(os.path.join(HERE, "solutions", "typescript.json"), encoding="utf-8") as f:
    solutions = json.load(f)
  jobs = [(QUESTIONS[qid], code) for kind in ("correct", "wrong") for qid, code in solutions[kind].items()]
  build = renderer.build(jobs)
  together = tempfile.mkdtemp(prefix="codelm-test-")
  try:
    program = base.Program(files=build.files, compile=build.compile, run=("true",), env=build.env)
    result = execution.build(program, renderer.toolchain, LIMITS, together)
    assert not result.compile_failed, result.stderr
    for (question, code), run in zip(jobs, build.runs):
      alone = tempfile.mkdtemp(prefix="codelm-test-")
      try:
        program = renderer.program(question, code)
        assert not execution.build(program, renderer.toolchain, LIMITS, alone).compile_failed
        with open(os.path.join(alone, "main.js"), "rb") as a, \
             open(os.path.join(together, run.artefacts["main.js"]), "rb") as b:
          assert a.read() == b.read(), question.qid
      finally:
        shutil.rmtree(alone, ignore_errors=True)
  finally:
    shutil.rmtree(together, ignore_errors=True)


def test_each_member_is_a_program_of_its_own():
  renderer = renderer_or_skip("typescript")
  jobs = [
      # Declares globals, a global augmentation and a helper after its function...
      (FLIP, "  return string.codelmShout();\n}\ninterface String { codelmShout(): string }\n"
             "String.prototype.codelmShout = function () { return this.toUpperCase(); };\n"
             "function helper(): number { return 1; }\nvar shared = 1;\n"),
      # ...which another member does not see (alone: two compile errors)...
      (FLIP, "  return string.codelmShout() + shared;\n}\n"),
      # ...and declares the same names again, differently, without a clash.
      (FLIP, '  return helper() + string;\n}\n'
             'function helper(): string { return "h"; }\nvar shared = "s";\n'),
      # The box of its run holds what its box alone holds.
      (FLIP, '  return require("fs").readdirSync(".").sort().join(",");\n}\n'),
      (FLIP, "  let x: number = string;\n  return undefinedName;\n}\n"),
      (FLIP, "  return string\n"),  # never closes: tsc's syntax error at the harness's end
  ]
  together, alone, stats = batched_and_alone(renderer, jobs)
  assert stats.builds == 1 and stats.built == len(jobs) and stats.alone == 0, stats
  for (_, code), a, b in zip(jobs, together, alone):
    batched, single = judge(FLIP, a), judge(FLIP, b)
    assert (batched.status, batched.cases) == (single.status, single.cases), (code, batched, single)
    assert a.compile[0].exit_code == b.compile[0].exit_code and a.stderr == b.stderr and a.stdout == b.stdout
  statuses = [judge(FLIP, r).status for r in together]
  assert statuses[0] is not Status.COMPILE_ERROR and statuses[2] is not Status.COMPILE_ERROR
  assert statuses[1] is Status.COMPILE_ERROR and "codelmShout" in together[1].stderr
  assert statuses[4:] == [Status.COMPILE_ERROR] * 2
  assert together[4].stderr.startswith("main.ts(") and "error TS2322" in together[4].stderr  # paths as alone
  assert '"globals.d.ts,main.js,main.ts"' in together[3].stdout


# ---- the driver (typescript_batch.js), run on tsc -b's output from a stand-in tsc ----

def run_driver(tmp_path, output: str, status: int, members: dict) -> dict:
  """Runs the driver over `members` ({dir: (build info or None, main.js written)}) with a stand-in
  tsc that prints `output` and exits with `status`; returns {dir: (status, diagnostics)} reported."""
  for directory, (info, emitted) in members.items():
    os.makedirs(tmp_path / directory)
    if info is not None:
      (tmp_path / directory / "tsconfig.tsbuildinfo").write_text(json.dumps(info))
    if emitted:
      (tmp_path / directory / "main.js").write_text("")
  (tmp_path / "tsc.out").write_text(output)
  fake = tmp_path / "tsc"
  fake.write_text(f"#!/bin/sh\ncat '{tmp_path}/tsc.out'\nexit {status}\n")
  fake.chmod(0o755)
  shutil.copy(os.path.join(os.path.dirname(typescript.__file__), "typescript_batch.js"), tmp_path / "d.js")
  subprocess.run([javascript.NODE, "d.js", str(fake), *members], cwd=tmp_path, timeout=60)
  reports = {}
  for directory in members:
    if (tmp_path / directory / "codelm_status").exists():
      reports[directory] = (int((tmp_path / directory / "codelm_status").read_text()),
                            (tmp_path / directory / "codelm_diagnostics").read_text())
  return reports


def project(directory: str, diagnostics: str = "") -> str:
  return (f"10:00:00 PM - Project '{directory}/tsconfig.json' is out of date because output file "
          f"'{directory}/tsconfig.tsbuildinfo' does not exist\n\n"
          f"10:00:00 PM - Building project '{directory}/tsconfig.json'...\n\n{diagnostics}")


@pytest.fixture
def node_or_skip():
  if not os.access(javascript.NODE, os.X_OK):
    pytest.skip("node missing")


def test_the_driver_reports_each_members_part_of_the_output(tmp_path, node_or_skip):
  error = "a_t/main.ts(8,3): error TS2322: Type 'string' is not assignable to type 'number'.\n  more\n"
  output = "10:00:00 PM - Projects in this build: \n    * a_t/tsconfig.json\n\n" + project("a_t", error) + \
      project("b_t") + project("c_t", "c_t/main.ts(1,1): error TS1005: '}' expected.\n")
  reports = run_driver(tmp_path, output, 1, {"a_t": ({"semanticErrors": True}, False), "b_t": ({}, True),
                                             "c_t": ({"errors": True}, False)})
  assert reports == {"a_t": (1, error.replace("a_t/", "")), "b_t": (0, ""),
                     "c_t": (1, "main.ts(1,1): error TS1005: '}' expected.\n")}


@pytest.mark.parametrize("why", ["build info disagrees", "no build info", "errors but emitted"])
def test_the_driver_reports_nothing_for_a_member_it_is_unsure_of(tmp_path, node_or_skip, why):
  second = {"build info disagrees": ({"semanticErrors": True}, False), "no build info": (None, True),
            "errors but emitted": ({"errors": True}, True)}[why]
  members = {"a_t": ({}, True), "b_t": second}
  diagnostics = "" if why == "build info disagrees" else "b_t/main.ts(1,1): error TS1: x\n"
  reports = run_driver(tmp_path, project("a_t") + project("b_t", diagnostics), 1, members)
  assert reports == {"a_t": (0, "")}


@pytest.mark.parametrize("why", ["crashed", "out of order", "a project missing"])
def test_the_driver_reports_nothing_when_tsc_did_not_finish_in_order(tmp_path, node_or_skip, why):
  members = {"a_t": ({}, True), "b_t": ({}, True)}
  output, status = {"crashed": (project("a_t") + project("b_t") + "panic: oops\n", 2),
                    "out of order": (project("b_t") + project("a_t"), 0),
                    "a project missing": (project("a_t"), 0)}[why]
  assert run_driver(tmp_path, output, status, members) == {}
