"""Lua 5.3: a `local function` with LuaLS annotations (`---@param`, `---@return`) as its doc comment.

Values: int is Lua's 64-bit integer subtype and float its float subtype; list and tuple are 1-based
tables (a list may carry `n`, as `table.pack` does, to keep trailing nils of list<optional<T>>;
without it a list's length is its largest positive integer key); set is a table mapping each member
to true; map is a table from key to value (a nil value cannot be stored, so map<K,optional<V>> loses
absent values); optional is nil. The harness accepts a float with an integral value where an int is
expected (Lua's arithmetic turns integers into floats easily) and an integer where a float is.
"""

from __future__ import annotations

import math

from sandbox.renderers import base, literals
from sandbox.typed import Question, Type, default_value, walk_types

LUA = "/usr/bin/lua5.3"
LUAC = "/usr/bin/luac5.3"

KEYWORDS = frozenset(
    "and break do else elseif end false for function goto if in local nil not or repeat return then "
    "true until while".split())
# Globals a parameter must not shadow: `string` as a parameter would hide string.format & co.
BUILTINS = frozenset(
    "assert collectgarbage coroutine debug dofile error getmetatable io ipairs load loadfile math "
    "next os package pairs pcall print rawequal rawget rawlen rawset require select setmetatable "
    "string table tonumber tostring type utf8 xpcall".split())
RESERVED = KEYWORDS | BUILTINS

_TYPE_NAMES = {"bool": "boolean", "int": "integer", "float": "number", "string": "string"}


def type_name(t: Type) -> str:
  """The LuaLS annotation of `t`."""
  if t.name in _TYPE_NAMES:
    return _TYPE_NAMES[t.name]
  if t.name == "list":
    inner = type_name(t.element)
    return f"({inner})[]" if "|" in inner else f"{inner}[]"
  if t.name == "set":
    return f"table<{type_name(t.element)}, true>"
  if t.name == "map":
    return f"table<{type_name(t.args[0])}, {type_name(t.args[1])}>"
  if t.name == "tuple":
    return "[" + ", ".join(type_name(a) for a in t.args) + "]"
  if t.name == "optional":
    return f"{type_name(t.element)}|nil"
  raise AssertionError(t)


def string_literal(text: str) -> str:
  """A Lua string literal of `text`'s UTF-8 bytes; every byte outside printable ASCII as \\ddd."""
  # Three digits, so a following digit is never swallowed.
  return '"' + literals.escape(text.encode("utf-8"), lambda byte: f"\\{byte:03d}") + '"'


def float_literal(value: float) -> str:
  if math.isnan(value):
    return "(0/0)"
  if math.isinf(value):
    return "math.huge" if value > 0 else "(-math.huge)"
  text = repr(value)
  return text if any(c in text for c in ".en") else text + ".0"  # a float, never an integer


def literal(t: Type, value) -> str:
  """A Lua expression for `value` of type `t`."""
  if value is None:
    return "nil"
  name = t.name
  if name == "bool":
    return "true" if value else "false"
  if name == "int":
    # -2^63 written out would be read as a float (2^63 overflows before the minus applies).
    return "math.mininteger" if value == -(2 ** 63) else str(value)
  if name == "float":
    return float_literal(value)
  if name == "string":
    return string_literal(value)
  if name == "optional":
    return literal(t.element, value)
  if name == "list":
    items = [literal(t.element, v) for v in value]
    if any(v is None for v in value):  # `n` keeps the length a border of nils would hide
      items.append(f"n = {len(value)}")
    return "{" + ", ".join(items) + "}"
  if name == "set":
    return "{" + ", ".join(f"[{literal(t.element, v)}] = true" for v in sorted(value)) + "}"
  if name == "tuple":
    return "{" + ", ".join(literal(a, v) for a, v in zip(t.args, value)) + "}"
  if name == "map":
    return "{" + ", ".join(f"[{literal(t.args[0], k)}] = {literal(t.args[1], v)}"
                           for k, v in value.items() if v is not None) + "}"
  raise AssertionError(t)


def type_tree(t: Type) -> str:
  """The type as nested tables the harness walks: {"list", {"int"}}."""
  return "{" + ", ".join([f'"{t.name}"'] + [type_tree(a) for a in t.args]) + "}"


# Builtins are captured in locals first, so a completion that reassigns globals while it runs cannot
# change how later records are written. Records start on a fresh line in case the function printed
# text without a newline.
_HARNESS = r'''
do
  local format, write, stdout, type, mtype, tointeger, tonumber, tostring, concat, next, rawget,
    pcall, ipairs, gsub, sub, byte, huge, error =
    string.format, io.write, io.stdout, type, math.type, math.tointeger, tonumber, tostring,
    table.concat, next, rawget, pcall, ipairs, string.gsub, string.sub, string.byte, math.huge, error
  local CASES, RETURN_TYPE, PREFIX = CODELM_CASES, CODELM_RETURN_TYPE, CODELM_PREFIX
  local ESCAPES = {['"'] = '\\"', ["\\"] = "\\\\", ["\n"] = "\\n", ["\r"] = "\\r", ["\t"] = "\\t"}

  local function fail(what, v)
    error("expected " .. what .. ", got " .. (mtype(v) or type(v)), 0)
  end

  local function float(v)
    if v ~= v then return "NaN" end
    if v == huge then return "Infinity" end
    if v == -huge then return "-Infinity" end
    if mtype(v) == "integer" then return format("%d", v) end
    for digits = 15, 16 do  -- the shortest form that reads back as the same double
      local text = format("%." .. digits .. "g", v)
      if tonumber(text) == v then return text end
    end
    return format("%.17g", v)
  end

  local function escape(c)
    return ESCAPES[c] or format("\\u%04x", byte(c))
  end

  local function length(v)
    local n = rawget(v, "n")  -- table.pack's convention, for lists that end in nils
    if mtype(n) == "integer" and n >= 0 then return n end
    local largest = 0
    for k in next, v do
      if mtype(k) == "integer" and k > largest then largest = k end
    end
    return largest
  end

  local enc
  enc = function(t, v)
    local name = t[1]
    if name == "optional" then
      if v == nil then return "null" end
      return enc(t[2], v)
    end
    if v == nil then error("expected " .. name .. ", got nil", 0) end
    if name == "bool" then
      if type(v) ~= "boolean" then fail("boolean", v) end
      return tostring(v)
    elseif name == "int" then
      if mtype(v) == "float" then v = tointeger(v) or fail("an integral number", v) end
      if mtype(v) ~= "integer" then fail("integer", v) end
      return format("%d", v)
    elseif name == "float" then
      if type(v) ~= "number" then fail("number", v) end
      return float(v)
    elseif name == "string" then
      if type(v) ~= "string" then fail("string", v) end
      return '"' .. gsub(v, '[%c"\\]', escape) .. '"'
    end
    if type(v) ~= "table" then fail("table", v) end
    local parts = {}
    if name == "list" then
      for i = 1, length(v) do parts[i] = enc(t[2], rawget(v, i)) end
    elseif name == "tuple" then
      for i = 2, #t do parts[i - 1] = enc(t[i], rawget(v, i - 1)) end
    elseif name == "set" then
      for k, member in next, v do
        if member then parts[#parts + 1] = enc(t[2], k) end
      end
    elseif name == "map" then
      for k, x in next, v do
        parts[#parts + 1] = "[" .. enc(t[2], k) .. "," .. enc(t[3], x) .. "]"
      end
    else
      error("unknown type " .. name, 0)
    end
    return "[" .. concat(parts, ",") .. "]"
  end

  for _, case in ipairs(CASES) do
    local ok, line = pcall(function() return "ok " .. enc(RETURN_TYPE, case[2]()) end)
    if not ok then
      local printed, text = pcall(tostring, line)
      line = "exception " .. (gsub(sub(printed and text or "error", 1, 300), "[\r\n]", " "))
    end
    write("\n" .. PREFIX .. case[1] .. " " .. line .. "\n")
    stdout:flush()
  end
end
'''


def _nil_note(t: Type) -> str:
  """How to return a list that ends in nils, when the return type has list<optional<T>>."""
  if any(x.name == "list" and x.element.name == "optional" for x in walk_types(t)):
    return " # a list ending in nil sets field n to its length, as table.pack does"
  return ""


class Lua(base.Renderer):
  name = "lua"
  display_name = "Lua"
  value_literal = staticmethod(literal)
  foreign_timeout_s = 5.0
  toolchain = base.Toolchain(binaries=(LUA, LUAC), version_command=(LUA, "-v"))
  # The function's `end` at column 0 closes it; the completion keeps "\nend".
  naming = staticmethod(base.snake_case)
  reserved = RESERVED

  def signature_with_docstring(self, question: Question) -> str:
    names = self.params(question)
    doc = [("--- " + line).rstrip() for line in base.doc_lines(question.description)]
    doc += [f"---@param {n} {type_name(p.type)}" for n, p in zip(names, question.params)]
    doc.append(f"---@return {type_name(question.return_type)}" + _nil_note(question.return_type))
    return ("\n".join(doc) + f"\nlocal function {self.function_name(question)}"
            f"({', '.join(names)})\n")

  def stub(self, question: Question) -> str:
    value = literal(question.return_type, default_value(question.return_type))
    return f"  return {value}\nend\n"

  def program(self, question: Question, completion: str) -> base.Program:
    return self._program(question, self.signature_with_docstring(question) + completion, self.function_name(question))

  def whole_program(self, question: Question, code: str) -> base.Program:
    return self._program(question, code, self.entry_name(question))  # BabelCode's head is empty

  def _program(self, question: Question, source: str, name: str) -> base.Program:
    """`source` (it defines `name`), then the harness that calls `name` on every test case."""
    cases = "\n".join(f"  {{{idx}, function() return {name}({args}) end}},"
                      for idx, args in base.render_cases(question, literal))
    # Globals, so the chunk's 200-local limit stays with the completion; the harness copies them
    # into locals before the first call.
    text = (source + "\n\n"
            f"CODELM_PREFIX = {string_literal(base.RECORD_PREFIX)}\n"
            f"CODELM_RETURN_TYPE = {type_tree(question.return_type)}\n"
            f"CODELM_CASES = {{\n{cases}\n}}\n" + _HARNESS)
    return base.Program(files={"main.lua": text}, compile=((LUAC, "-p", "main.lua"),),
                        run=(LUA, "main.lua"))

  def foreign(self, text: str) -> base.Foreign:
    """libeval's run_without_exn: `lua f.lua`, judged by its exit code."""
    return base.Foreign("main.lua", (LUA, "main.lua"), "exit_code")


RENDERER = Lua()
