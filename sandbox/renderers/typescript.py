"""TypeScript: a typed signature under a doc comment, checked and compiled by the native TypeScript
7 compiler (tsc, a static Go binary), then run by node.

Types as in JavaScript (sandbox/renderers/javascript.py): `number`, `boolean`, `string`, `T[]`,
`Set<T>`, `Map<K, V>`, `[A, B]`, `T | null`. A type error is a compile error, as in BabelCode. The
check is not strict (`--strict false`), so an untyped `let xs = []` or a `null` returned through a
non-null type compiles; the harness still reports a null where the type is not optional.

Whole programs (BabelCode's solutions; its TypeScript head is empty): the code, then the same harness,
each case calling the entry function through an arrow function typed as BabelCode's driver is
(`declared_type`: number for every number, string for a character, Array<T>, Set<T>, and
Record<K,V> for a map, whose values are plain objects there, so a returned object is read back as
the map). Compiled alone, with the same flags.

Batched (sandbox/batching.py), a build with per-member reports: most of tsc's time for one
program is starting and reading the standard library's declarations (alone, about 0.03 s of CPU per
program; one `tsc -b` over 30 programs, 0.2 s). So one `tsc -b` (build mode) builds a project per
member: folder `m<k>_<token>/` holds the member's main.ts and globals.d.ts exactly as its box alone,
and a tsconfig.json with exactly TSC_FLAGS' options (`COMPILER_OPTIONS`; files main.ts then
globals.d.ts, as the command line names them). Each project is a program of its own, checked by a
checker of its own: tsc -b shares only parsed declaration files between projects (the lib's,
read-only), so a member's type check sees its own two files and the lib, and it emits the same
main.js, byte for byte, as alone. A small node driver (typescript_batch.js) runs tsc -b and writes
each member's exit status and diagnostics: the output between tsc's "Building project" line for it
and the next project's first line, paths made relative to the member's folder again, as alone prints
them. tsc's build info for the project (errors or not) and that output (diagnostics or not) must
agree, or the member gets no report and compiles alone, as every member does when tsc ends other than
with 0 or 1. Member k runs `node main.js` in its own box: its files alone, main.js bound read-only
from its folder. What remains per program is that run (node's start, ~0.07 s of CPU here) and its
sandbox; the build adds about a hundredth of a second per member.

What keeps one member's compilation from another's (`batchable`): a project's program holds only
the files its tsconfig names, the lib, and what the member's code itself names: an import or
export (`import ... from`, `import x = require(..)`, `import(..)`, `typeof import(..)`, re-exports,
JSDoc `@import`) or a `/// <reference>` directive. Those would resolve differently in the build box
(another member's folder, the driver) than in a box alone, so a completion holding `import` or
`export` anywhere, in any case, a `\\u` escape (which can spell a keyword) or `///<` is refused.
(A plain `require("..")` is not resolved by tsc in a .ts file, and at run time the member's box
holds only its own files.) The folders' random token keeps tsc's lines about one member from being
forged in another's diagnostics. What a member does at compile time otherwise stays in its program;
a compilation that exhausts time or memory ends the whole build, and every member compiles alone.
"""

from __future__ import annotations

import json
import os
import re
import secrets

from sandbox.renderers import base, javascript
from sandbox.typed import Question, Type, default_value


def _toolchains_dir() -> str:
  """The npm prefix `make toolchains` installs into, or $CODELM_TOOLCHAINS/npm."""
  override = os.environ.get("CODELM_TOOLCHAINS")
  if override:
    return os.path.join(os.path.abspath(override), "npm", "node_modules")
  repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
  return os.path.join(repo, ".toolchains", "npm", "node_modules")


NODE_MODULES = _toolchains_dir()
# The native compiler itself (typescript/bin/tsc is a node script that only looks it up and
# execs it; calling it directly saves a node start per program). Its lib.*.d.ts sit beside it.
TSC = os.path.join(NODE_MODULES, "@typescript", "typescript-linux-x64", "lib", "tsc")

# Without @types/node the program has no console/process/require: declare them loosely.
GLOBALS_D_TS = """declare var console: any;
declare var process: any;
declare var module: any;
declare var exports: any;
declare function require(name: string): any;
"""

# --skipLibCheck: the lib .d.ts files are not checked; --types '': no @types lookup;
# no strict mode: a completion is judged on what it returns, not on annotations it left out.
TSC_FLAGS = ("--skipLibCheck", "--types", "", "--target", "es2023", "--lib", "es2023",
             "--module", "commonjs", "--moduleDetection", "legacy", "--strict", "false",
             "--noEmitOnError", "--pretty", "false", "--singleThreaded")
# TSC_FLAGS' compiler options as a tsconfig.json says them (a batched build's projects; `tsc -p
# <project> --showConfig` prints the same as `tsc TSC_FLAGS main.ts globals.d.ts --showConfig`, a
# test checks it). --pretty false and --singleThreaded are given to tsc -b itself (typescript_batch.js).
COMPILER_OPTIONS = {"skipLibCheck": True, "types": [], "target": "es2023", "lib": ["es2023"],
                    "module": "commonjs", "moduleDetection": "legacy", "strict": False,
                    "noEmitOnError": True, "singleThreaded": True}
# tsc is a Go program: on a many-core host it would start a thread per core, and the sandbox caps a
# program's processes and threads at Limits.max_processes.
TSC_ENV = {**javascript.NODE_ENV, "GOMAXPROCS": "2"}

# The batched build's driver (module docstring), written into the build box under DRIVER.
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "typescript_batch.js"),
          encoding="utf-8") as _f:
  DRIVER_SOURCE = _f.read()
DRIVER = "codelm_build.js"
# What makes a completion compile alone (module docstring): anything that could name a file for tsc
# to read (imports, exports, reference directives), and the escapes that could spell those keywords.
REFUSED_TEXT = re.compile(r"import|export|\\u|///\s*<", re.IGNORECASE)


# BabelCode's TypeScript types for the declared leaves (its schema_parsing TypeScript spec).
DECLARED = {"boolean": "boolean", "integer": "number", "long": "number", "float": "number", "double": "number",
            "character": "string", "string": "string"}


def declared_type(t: Type) -> str:
  """A declared type (leaves named as typed.DECLARED_SCALARS) as BabelCode writes it in TypeScript;
  a tuple (not in BabelCode's data: a typed question's) as `[A, B]`."""
  if t.name in DECLARED:
    return DECLARED[t.name]
  args = [declared_type(a) for a in t.args]
  if t.name == "tuple":
    return f"[{', '.join(args)}]"
  return {"list": "Array<{}>", "set": "Set<{}>", "map": "Record<{},{}>"}[t.name].format(*args)


def declared_literal(t: Type, value) -> str:
  """A TypeScript expression for a typed value of the declared type `t`, as BabelCode writes it:
  javascript.declared_literal with a set's element type spelled out (`new Set<number>([...])`)."""
  return javascript.declared_literal(t, value, lambda element: f"<{declared_type(element)}>")


class TypeScript(base.Renderer):
  name = "typescript"
  display_name = "TypeScript"
  value_literal = staticmethod(javascript.literal)
  toolchain = base.Toolchain(binaries=(TSC, javascript.NODE), version_command=(TSC, "--version"),
                             read_only=(NODE_MODULES,))
  convention = "camel"  # BabelCode's (a whole program's entry function)

  def function_name(self, question: Question) -> str:
    return base.safe_name(base.camel_case(question.entry_fn_name), javascript.RESERVED)

  def params(self, question: Question) -> list[str]:
    return base.param_names(question, base.camel_case,
                            javascript.RESERVED | {self.function_name(question)})

  def signature_with_docstring(self, question: Question) -> str:
    params = ", ".join(f"{n}: {javascript.jsdoc_type(p.type)}"
                       for n, p in zip(self.params(question), question.params))
    return_type = javascript.jsdoc_type(question.return_type)
    return (javascript.doc_comment(question, []) +
            f"function {self.function_name(question)}({params}): {return_type} {{\n")

  def stub(self, question: Question) -> str:
    value = default_value(question.return_type)
    return f"  return {javascript.literal(question.return_type, value, typed_collections=True)};\n}}\n"

  def program(self, question: Question, completion: str) -> base.Program:
    text = (self.signature_with_docstring(question) + completion + "\n" + javascript.HARNESS +
            "\n" + javascript.harness_call(question, self.function_name(question),
                                           typed_collections=True))
    return base.Program(
        files={"main.ts": text, "globals.d.ts": GLOBALS_D_TS},
        compile=((TSC, *TSC_FLAGS, "main.ts", "globals.d.ts"),),
        # tsc writes main.js; node would treat it as CommonJS (no package.json says otherwise).
        run=(javascript.NODE, "main.js"), env=TSC_ENV)

  def whole_program(self, question: Question, code: str) -> base.Program:
    """The code, then the harness; each case calls the entry function through an arrow function whose
    parameters and result have the declared types (as BabelCode's `driver` and `validateSolution`),
    and its value is read back into the typed shapes (javascript.FROM_DECLARED) for the encoder."""
    *params, returns = question.declared
    name, tree = self.entry_name(question), javascript.type_tree(question.return_type)
    typed_params = ", ".join(f"a{i}: {declared_type(t)}" for i, t in enumerate(params))
    call = f"(({typed_params}): {declared_type(returns)} => {name}({', '.join(f'a{i}' for i in range(len(params)))}))"
    cases = "".join(f"  [{case.idx}, () => __codelmFromDeclared({tree}, {call}("
                    f"{', '.join(declared_literal(t, v) for t, v in zip(params, case.inputs))}))],\n"
                    for case in question.test_cases)
    text = (code + "\n" + javascript.HARNESS + javascript.FROM_DECLARED +
            f"\nconst __codelmPrefix = {json.dumps(base.RECORD_PREFIX)};\n__codelmMain({tree}, [\n{cases}]);\n")
    return base.Program(files={"main.ts": text, "globals.d.ts": GLOBALS_D_TS},
                        compile=((TSC, *TSC_FLAGS, "main.ts", "globals.d.ts"),),
                        run=(javascript.NODE, "main.js"), env=TSC_ENV)

  def batchable(self, question: Question, completion: str) -> bool:
    return not REFUSED_TEXT.search(completion)

  def build(self, jobs) -> base.Build:
    """A project per member in m<k>_<token>/, built by one tsc -b (module docstring)."""
    token = secrets.token_hex(8)
    dirs = [f"m{k}_{token}" for k in range(len(jobs))]
    config = json.dumps({"compilerOptions": COMPILER_OPTIONS, "files": ["main.ts", "globals.d.ts"]})
    files, runs = {DRIVER: DRIVER_SOURCE}, []
    for directory, (question, completion) in zip(dirs, jobs):
      alone = self.program(question, completion)
      files.update({f"{directory}/{name}": text for name, text in alone.files.items()})
      files[f"{directory}/tsconfig.json"] = config
      runs.append(base.Program(files=alone.files, run=alone.run, env=alone.env,
                               artefacts={"main.js": f"{directory}/main.js"}))
    return base.Build(files=files, compile=((javascript.NODE, DRIVER, TSC, *dirs),), runs=tuple(runs),
                      env=TSC_ENV,
                      reports=tuple((f"{d}/codelm_status", f"{d}/codelm_diagnostics") for d in dirs))

  def foreign(self, text: str) -> base.Foreign:
    """eval_ts: tsc 5's defaults for --target esnext (evaluation/multiple/execution.py), then node."""
    tsc = (TSC, "--target", "esnext", "--strict", "false", "--module", "es2015", "--singleThreaded", "main.ts")
    return base.Foreign("main.ts", (javascript.NODE, "main.js"), "typescript", compile=(tsc,), env=TSC_ENV)


RENDERER = TypeScript()
