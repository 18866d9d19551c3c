"""JavaScript: a JSDoc comment with the typed signature, camelCase names, run by node.

Types: int and float are `number` (a double: ints beyond 2^53 lose precision, as in BabelCode),
list and tuple are arrays, set is `Set`, map is `Map`, optional is the value or `null`.
The harness here is shared with TypeScript (sandbox/renderers/typescript.py): it is plain
JavaScript that also type-checks as non-strict TypeScript.

Whole programs (BabelCode's solutions; its JavaScript head is empty): the code, then the harness, the
arguments written as BabelCode writes them (`declared_literal`: a map an object literal, a set a
`Set`), and a returned object read back as the map (`FROM_DECLARED`), as BabelCode's JSON.stringify
comparison reads it; a returned `Map`, which BabelCode would see as `{}`, is refused.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable

from sandbox.renderers import base
from sandbox.typed import Question, Type, default_value

NODE = "/usr/bin/node"
# /etc/ssl is not in the sandbox, and node refuses to start when it cannot read openssl.cnf.
NODE_ENV = {"OPENSSL_CONF": "/dev/null"}

# Reserved words, and globals a function or parameter of that name would break or shadow badly.
RESERVED = frozenset("""
  break case catch class const continue debugger default delete do else enum export extends false
  finally for function if import in instanceof new null return super switch this throw true try
  typeof var void while with yield let static implements interface package private protected
  public await async of arguments eval undefined NaN Infinity globalThis Object Array Map Set
  String Number Boolean Math JSON Symbol Error TypeError RangeError Promise BigInt Date RegExp
  parseInt parseFloat isNaN isFinite console process require module exports
""".split())

_JSDOC_NAMES = {"bool": "boolean", "int": "number", "float": "number", "string": "string"}


def jsdoc_type(t: Type) -> str:
  """The type in JSDoc / TypeScript notation: `number[]`, `Map<string, number>`, `[number, number]`."""
  if t.name in _JSDOC_NAMES:
    return _JSDOC_NAMES[t.name]
  if t.name == "list":
    inner = jsdoc_type(t.element)
    return f"({inner})[]" if t.element.name == "optional" else f"{inner}[]"
  if t.name == "set":
    return f"Set<{jsdoc_type(t.element)}>"
  if t.name == "map":
    return f"Map<{jsdoc_type(t.args[0])}, {jsdoc_type(t.args[1])}>"
  if t.name == "tuple":
    return "[" + ", ".join(jsdoc_type(a) for a in t.args) + "]"
  if t.name == "optional":
    return f"{jsdoc_type(t.element)} | null"
  raise AssertionError(t)


def number_literal(t: Type, value) -> str:
  if t.name == "int":
    return str(value)
  if math.isnan(value):
    return "NaN"
  if math.isinf(value):
    return "Infinity" if value > 0 else "-Infinity"
  return repr(float(value))  # shortest round-trip form, a valid JS literal (1e-07, 1e+16)


def literal(t: Type, value, typed_collections: bool = False) -> str:
  """A JavaScript expression for `value` of type `t`; `typed_collections` adds TypeScript's type
  arguments to `new Set`/`new Map` (an empty one would otherwise be Set<unknown>)."""
  if value is None:
    return "null"
  if t.name == "bool":
    return "true" if value else "false"
  if t.name in ("int", "float"):
    return number_literal(t, value)
  if t.name == "string":
    return json.dumps(value)  # ASCII-only JSON string: also a JS string literal
  if t.name == "optional":
    return literal(t.element, value, typed_collections)
  if t.name == "list":
    return "[" + ", ".join(literal(t.element, v, typed_collections) for v in value) + "]"
  if t.name == "tuple":
    return "[" + ", ".join(literal(a, v, typed_collections) for a, v in zip(t.args, value)) + "]"
  if t.name == "set":
    items = ", ".join(literal(t.element, v, typed_collections) for v in sorted(value))
    type_args = f"<{jsdoc_type(t.element)}>" if typed_collections else ""
    return f"new Set{type_args}([{items}])"
  if t.name == "map":
    items = ", ".join(f"[{literal(t.args[0], k, typed_collections)}, "
                      f"{literal(t.args[1], v, typed_collections)}]" for k, v in value.items())
    type_args = (f"<{jsdoc_type(t.args[0])}, {jsdoc_type(t.args[1])}>" if typed_collections else "")
    return f"new Map{type_args}([{items}])"
  raise AssertionError(t)


def type_tree(t: Type) -> str:
  """The type as nested arrays the harness walks: ["list", [["int", []]]]."""
  return json.dumps(_tree(t))


def _tree(t: Type):
  return [t.name, [_tree(a) for a in t.args]]


def doc_comment(question: Question, tags: list[str]) -> str:
  """The description as a /** ... */ block; a `*/` in it would end the comment early."""
  lines = [line.replace("*/", "*\\/") for line in base.doc_lines(question.description)] + tags
  if not lines:  # no description and no tags (TypeScript's Renderer.signature)
    return ""
  return "/**\n" + "".join((" * " + line).rstrip() + "\n" for line in lines) + " */\n"


# Each record starts on a fresh line ("\n" first): output the completion wrote without a newline
# would otherwise swallow the record into its own line.
# Encodes a returned value as canonical JSON text, accepting only the types the signature names
# (number for int/float, boolean, string, Array, Set, Map, null for optional). Every character
# outside printable ASCII is escaped: the scorer splits stdout with str.splitlines, which also
# breaks at U+0085, U+2028 and friends.
HARNESS = r'''
const __codelmWrite = require("fs").writeSync;

function __codelmDescribe(v) {
  if (v === null) return "null";
  if (Array.isArray(v)) return "Array";
  if (typeof v === "object") return (v.constructor && v.constructor.name) || "object";
  return typeof v;
}

function __codelmAscii(text) {
  return text.replace(/[\u007f-\uffff]/g, (c) => "\\u" + c.charCodeAt(0).toString(16).padStart(4, "0"));
}

function __codelmEncode(t, v) {
  const name = t[0], args = t[1];
  const fail = () => { throw new TypeError("expected " + name + ", got " + __codelmDescribe(v)); };
  if (name === "optional") return v === null || v === undefined ? "null" : __codelmEncode(args[0], v);
  if (name === "bool") return typeof v === "boolean" ? (v ? "true" : "false") : fail();
  if (name === "int") {
    if (typeof v === "bigint") return v.toString();
    if (typeof v !== "number" || !Number.isInteger(v)) return fail();
    // Beyond 2^53 String() gives the shortest digits ("1e+21", -2^63 as "-9223372036854776000"),
    // not the double's exact integer value.
    return Math.abs(v) < 9007199254740992 ? String(v) : BigInt(v).toString();
  }
  if (name === "float") {
    if (typeof v !== "number") return fail();
    if (Number.isNaN(v)) return "NaN";
    if (!Number.isFinite(v)) return v > 0 ? "Infinity" : "-Infinity";
    return String(v);  // the shortest text that round-trips
  }
  if (name === "string") return typeof v === "string" ? __codelmAscii(JSON.stringify(v)) : fail();
  const parts = [];
  if (name === "list" || name === "tuple") {
    if (!Array.isArray(v)) return fail();
    if (name === "tuple" && v.length !== args.length) {
      throw new TypeError("expected a tuple of " + args.length + ", got " + v.length + " items");
    }
    for (let i = 0; i < v.length; i++) parts.push(__codelmEncode(name === "list" ? args[0] : args[i], v[i]));
  } else if (name === "set") {
    if (!(v instanceof Set)) return fail();
    for (const x of v) parts.push(__codelmEncode(args[0], x));
  } else if (name === "map") {
    if (!(v instanceof Map)) return fail();
    for (const [k, x] of v) parts.push("[" + __codelmEncode(args[0], k) + ", " + __codelmEncode(args[1], x) + "]");
  } else {
    throw new TypeError("unknown type " + name);
  }
  return "[" + parts.join(", ") + "]";
}

function __codelmMessage(e) {
  let text;
  try {
    text = e instanceof Error ? e.name + ": " + e.message : "thrown: " + String(e);
  } catch (_) {
    text = "an exception that cannot be printed";
  }
  return text.replace(/[\u0000-\u001f\u007f-\u009f\u2028\u2029]/g, " ").slice(0, 300);
}

function __codelmMain(returnType, cases) {
  for (const [idx, call] of cases) {
    let line;
    try {
      line = "ok " + __codelmEncode(returnType, call());
    } catch (e) {
      line = "exception " + __codelmMessage(e);
    }
    __codelmWrite(1, "\n" + __codelmPrefix + idx + " " + line + "\n");
  }
}
'''


# BabelCode's leaf types in its JavaScript and TypeScript programs: every number a number, a character a
# one-character string.
DECLARED_LEAVES = {"boolean": "bool", "integer": "int", "long": "int", "float": "float", "double": "float",
                   "string": "string"}


def declared_literal(t: Type, value, set_type_args: Callable[[Type], str] = lambda element: "") -> str:
  """An expression for a typed value of the declared type `t` as BabelCode's JavaScript and TypeScript
  write it (their literal translators): a map is an object literal, a set `new Set<set_type_args>([...])`."""
  name = t.name
  if name in DECLARED_LEAVES:
    return literal(Type(DECLARED_LEAVES[name]), value)
  if name == "character":  # BabelCode's character data holds one
    return json.dumps(value[:1])
  if name in ("list", "tuple"):
    types = [t.element] * len(value) if name == "list" else t.args
    return "[" + ", ".join(declared_literal(a, v, set_type_args) for a, v in zip(types, value)) + "]"
  if name == "set":
    items = ", ".join(declared_literal(t.element, v, set_type_args) for v in sorted(value))
    return f"new Set{set_type_args(t.element)}([{items}])"
  if name == "map":
    return "{" + ", ".join(f"{_property(t.args[0], k)}: {declared_literal(t.args[1], v, set_type_args)}"
                           for k, v in value.items()) + "}"
  raise AssertionError(t)


def _property(t: Type, key) -> str:
  """A property name: computed where a plain one cannot say it (a negative number) or would set the
  prototype (`__proto__`)."""
  text = declared_literal(t, key)
  return f"[{text}]" if text.startswith("-") or key == "__proto__" else text


# A whole program's returned value into the harness's shapes: BabelCode's maps are objects (its
# JavaScript and TypeScript compare JSON.stringify texts, which show a Map as `{}`), read back as Maps:
# an integer key from its property name; one that is no integer's text stays a string, and the
# encoder refuses it.
FROM_DECLARED = r'''
function __codelmFromDeclared(t, v) {
  const name = t[0], args = t[1];
  if (v === null || v === undefined) return v;
  if (name === "optional") return __codelmFromDeclared(args[0], v);
  if ((name === "list" || name === "tuple") && Array.isArray(v)) {
    return v.map((x, i) => __codelmFromDeclared(name === "list" ? args[0] : args[i], x));
  }
  if (name !== "map") return v;
  if (typeof v !== "object" || Array.isArray(v) || v instanceof Map || v instanceof Set) {
    throw new TypeError("expected an object for a map, got " + __codelmDescribe(v));
  }
  const out = new Map();
  for (const key of Object.keys(v)) {
    const number = Number(key);
    out.set(args[0][0] === "int" && String(number) === key ? number : key, __codelmFromDeclared(args[1], v[key]));
  }
  return out;
}
'''


def harness_call(question: Question, function_name: str, typed_collections: bool) -> str:
  """The record prefix, the test cases as closures (inputs built fresh per call) and the run."""
  cases = ",\n".join(
      f"  [{idx}, () => {function_name}({args})]"
      for idx, args in base.render_cases(
          question, lambda t, v: literal(t, v, typed_collections)))
  return (f"const __codelmPrefix = {json.dumps(base.RECORD_PREFIX)};\n"
          f"__codelmMain({type_tree(question.return_type)}, [\n{cases},\n]);\n")


class JavaScript(base.Renderer):
  name = "javascript"
  display_name = "JavaScript"
  value_literal = staticmethod(literal)
  foreign_timeout_s = 5.0
  toolchain = base.Toolchain(binaries=(NODE,), version_command=(NODE, "--version"))
  convention = "camel"
  # The function's closing brace is at column 0: keep "\n}" and drop the newline after it.

  def function_name(self, question: Question) -> str:
    return base.safe_name(base.camel_case(question.entry_fn_name), RESERVED)

  def params(self, question: Question) -> list[str]:
    return base.param_names(question, base.camel_case, RESERVED | {self.function_name(question)})

  def signature_with_docstring(self, question: Question) -> str:
    names = self.params(question)
    tags = [f"@param {{{jsdoc_type(p.type)}}} {n}" for n, p in zip(names, question.params)]
    tags.append(f"@returns {{{jsdoc_type(question.return_type)}}}")
    return (doc_comment(question, tags) +
            f"function {self.function_name(question)}({', '.join(names)}) {{\n")

  def stub(self, question: Question) -> str:
    value = default_value(question.return_type)
    return f"  return {literal(question.return_type, value)};\n}}\n"

  def program(self, question: Question, completion: str) -> base.Program:
    return self._program(self.signature_with_docstring(question) + completion + "\n" + HARNESS + "\n" +
                         harness_call(question, self.function_name(question), typed_collections=False))

  def whole_program(self, question: Question, code: str) -> base.Program:
    """The code (BabelCode's head is empty), then the harness; each case passes BabelCode's literals
    (a map an object) and reads the value back into the typed shapes (FROM_DECLARED)."""
    *params, _ = question.declared
    tree, name = type_tree(question.return_type), self.entry_name(question)
    cases = "".join(f"  [{case.idx}, () => __codelmFromDeclared({tree}, {name}("
                    f"{', '.join(declared_literal(t, v) for t, v in zip(params, case.inputs))}))],\n"
                    for case in question.test_cases)
    return self._program(code + "\n" + HARNESS + FROM_DECLARED +
                         f"\nconst __codelmPrefix = {json.dumps(base.RECORD_PREFIX)};\n__codelmMain({tree}, [\n{cases}]);\n")

  def _program(self, text: str) -> base.Program:
    # main.cjs: CommonJS whatever package.json might be above /box. `node --check` first, so that a
    # syntax error is reported as a compile error, not as a run without records.
    return base.Program(files={"main.cjs": text}, compile=((NODE, "--check", "main.cjs"),),
                        run=(NODE, "main.cjs"), env=NODE_ENV)

  def foreign(self, text: str) -> base.Foreign:
    """eval_javascript: `node f.js`, its error read from str(CompletedProcess)."""
    return base.Foreign("main.js", (NODE, "main.js"), "javascript", env=NODE_ENV)


RENDERER = JavaScript()
