"""TypeScript: a typed signature under a doc comment, checked and compiled by the native TypeScript
7 compiler (tsc, a static Go binary), then run by node.

Types as in JavaScript (evaluation/languages/javascript.py): `number`, `boolean`, `string`, `T[]`,
`Set<T>`, `Map<K, V>`, `[A, B]`, `T | null`. A type error is a compile error, as in BabelCode. The
check is not strict (`--strict false`), so an untyped `let xs = []` or a `null` returned through a
non-null type compiles; the harness still reports a null where the type is not optional.
"""

from __future__ import annotations

import os

from evaluation.languages import base, javascript
from evaluation.typed import Question, default_value


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
# tsc is a Go program: on a many-core host it would start a thread per core, and the sandbox caps a
# program's processes and threads at Limits.max_processes.
TSC_ENV = {**javascript.NODE_ENV, "GOMAXPROCS": "2"}


class TypeScript(base.Renderer):
  name = "typescript"
  display_name = "TypeScript"
  toolchain = base.Toolchain(binaries=(TSC, javascript.NODE), version_command=(TSC, "--version"),
                             read_only=(NODE_MODULES,))

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


RENDERER = TypeScript()
