"""Python: the signature with type hints and the description as its docstring, like HumanEval."""

from __future__ import annotations

import math
import sys

from sandbox.renderers import base
from sandbox.typed import Question, Type, default_value

_TYPE_NAMES = {"bool": "bool", "int": "int", "float": "float", "string": "str"}
# The prompt's head, as the other languages' prompts name their imports: HumanEval's own prompts
# import math where the solution needs it (HumanEval/115), and a typed question does not say where.
IMPORTS = "import math\n\n\n"
# A whole program's head: the modules BabelCode's Python test programs import before the solution
# (its templates/Python/header.txt), which its gold solutions use without importing (TP3's `List`,
# MBPP's `re` and `heapq`).
WHOLE_HEAD = ("import array\nimport bisect\nimport collections\nimport datetime\nimport functools\n"
              "import heapq\nimport itertools\nimport math\nimport queue\nimport re\nimport string\n"
              "import sys\nfrom typing import Any, Dict, List, Optional, Set\n\n")


def type_name(t: Type) -> str:
  if t.name in _TYPE_NAMES:
    return _TYPE_NAMES[t.name]
  args = ", ".join(type_name(a) for a in t.args)
  return {"list": f"list[{args}]", "set": f"set[{args}]", "map": f"dict[{args}]",
          "tuple": f"tuple[{args}]", "optional": f"{args} | None"}[t.name]


def literal(t: Type, value) -> str:
  """A Python expression for `value` of type `t`."""
  if value is None:
    return "None"
  if t.name == "float":
    return repr(value) if math.isfinite(value) else f"float({str(value)!r})"
  if t.name in ("bool", "int", "string"):
    return repr(value)
  if t.name == "optional":
    return literal(t.element, value)
  if t.name == "list":
    return "[" + ", ".join(literal(t.element, v) for v in value) + "]"
  if t.name == "set":
    return "set()" if not value else "{" + ", ".join(literal(t.element, v) for v in sorted(value)) + "}"
  if t.name == "tuple":
    return "(" + "".join(literal(a, v) + ", " for a, v in zip(t.args, value)) + ")"
  if t.name == "map":
    return "{" + ", ".join(f"{literal(t.args[0], k)}: {literal(t.args[1], v)}"
                           for k, v in value.items()) + "}"
  raise AssertionError(t)


def type_tree(t: Type) -> str:
  """The type as nested tuples the harness walks: ("list", ("int",))."""
  return repr(_tree(t))


def _tree(t: Type):
  return (t.name, tuple(_tree(a) for a in t.args))


# Turns a returned value into canonical JSON data, accepting only the exact built-in types: an
# object that merely claims equality (a custom __eq__) or a subclass is refused, not compared. Two
# exceptions, as BabelCode's `==` and codelm's other languages read them: a float of integral value is
# an int (240.0 for 240: R, Lua and JavaScript print ints so), and a dict subclass (Counter,
# defaultdict) is read as the dict it is, through dict.items (its own items() is not called).
_HARNESS = '''

def _codelm_main():
    import json, sys
    out = sys.stdout

    def enc(t, v):
        name, args = t
        if name == "optional":
            return None if v is None else enc(args[0], v)
        if name == "bool":
            if type(v) is not bool: raise TypeError("expected bool, got " + type(v).__name__)
            return v
        if name == "int":
            if type(v) is float and v.is_integer():
                v = int(v)
            if type(v) is not int: raise TypeError("expected int, got " + type(v).__name__)
            return v
        if name == "float":
            if type(v) not in (int, float): raise TypeError("expected float, got " + type(v).__name__)
            return float(v)
        if name == "string":
            if type(v) is not str: raise TypeError("expected str, got " + type(v).__name__)
            return v
        if name == "list":
            if type(v) is not list: raise TypeError("expected list, got " + type(v).__name__)
            return [enc(args[0], x) for x in v]
        if name == "set":
            if type(v) not in (set, frozenset): raise TypeError("expected set, got " + type(v).__name__)
            return [enc(args[0], x) for x in v]
        if name == "tuple":
            if type(v) not in (tuple, list) or len(v) != len(args):
                raise TypeError("expected a tuple of %d, got %s" % (len(args), type(v).__name__))
            return [enc(a, x) for a, x in zip(args, v)]
        if name == "map":
            if not isinstance(v, dict): raise TypeError("expected dict, got " + type(v).__name__)
            return [[enc(args[0], k), enc(args[1], x)] for k, x in dict.items(v)]
        raise TypeError(name)

    for idx, call in CASES:
        try:
            line = "ok " + json.dumps(enc(RETURN_TYPE, call()))
        except BaseException as e:  # SystemExit and KeyboardInterrupt too: the case failed
            line = "exception " + (type(e).__name__ + ": " + str(e)).replace("\\n", " ")[:300]
        out.write(PREFIX + str(idx) + " " + line + "\\n")
        out.flush()

'''


def _base_interpreter() -> str:
  """The base installation's python3 (a virtualenv's python is a link into it)."""
  import os
  for candidate in (os.path.join(sys.base_prefix, "bin", f"python{sys.version_info[0]}.{sys.version_info[1]}"),
                    os.path.join(sys.base_prefix, "bin", "python3")):
    if os.path.exists(candidate):
      return candidate
  return os.path.realpath(sys.executable)


def _third_party_folders() -> tuple[str, ...]:
  """The base installation's site-packages and the distribution's dist-packages: bound along with
  the standard library (or /usr), but nothing a program needs (it runs -I -S)."""
  import glob
  import sysconfig
  paths = sysconfig.get_paths(vars={"base": sys.base_prefix, "platbase": sys.base_prefix})
  folders = {paths["purelib"], paths["platlib"], *glob.glob("/usr/lib/python3*/dist-packages"),
             *glob.glob("/usr/lib/python3*/site-packages"), *glob.glob("/usr/local/lib/python3*/*-packages")}
  return tuple(sorted(folders))


# Where the sandbox sees an interpreter installed outside /usr (pyenv's in /root/.pyenv): a path
# that names no home folder.
SANDBOX_PREFIX = "/opt/python"


def _interpreter_mounts() -> tuple[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]]:
  """(mounts, env) that show the sandbox the base interpreter and nothing else of its prefix: the
  executable, the standard library (lib-dynload included; its site-packages is hidden) and the
  shared libpython, under SANDBOX_PREFIX, where the interpreter finds its standard library from its
  own location. The executable's RUNPATH names the host prefix, so LD_LIBRARY_PATH names the new
  one. An interpreter under /usr (Debian's) is already there: nothing to mount."""
  import os
  import sysconfig
  prefix = os.path.normpath(sys.base_prefix)
  if prefix == "/usr" or prefix.startswith("/usr/"):
    return (), ()
  inside = lambda path: SANDBOX_PREFIX + os.path.normpath(path)[len(prefix):]
  stdlib = sysconfig.get_paths(vars={"installed_base": prefix, "base": prefix})["stdlib"]
  mounts = [(_base_interpreter(), inside(_base_interpreter())), (stdlib, inside(stdlib))]
  env: tuple[tuple[str, str], ...] = ()
  library = os.path.join(sysconfig.get_config_var("LIBDIR") or "", sysconfig.get_config_var("INSTSONAME") or "")
  if sysconfig.get_config_var("Py_ENABLE_SHARED") and os.path.isfile(library):
    mounts.append((library, inside(library)))
    env = (("LD_LIBRARY_PATH", os.path.dirname(inside(library))),)
  return tuple(mounts), env


_MOUNTS, _ENV = _interpreter_mounts()


class Python(base.Renderer):
  name = "python"
  display_name = "Python"
  value_literal = staticmethod(literal)
  # The interpreter that runs codelm (not its virtualenv): `-I -S` keeps site-packages out.
  toolchain = base.Toolchain(binaries=(_base_interpreter(),),
                             version_command=(_base_interpreter(), "--version"),
                             mounts=_MOUNTS, env=_ENV,
                             hidden=_third_party_folders())
  # Python keeps the benchmark's own names (HumanEval's `N`, `S`): its docstrings refer to them.
  reserved = base.PYTHON_RESERVED

  def signature_with_docstring(self, question: Question) -> str:
    params = ", ".join(f"{n}: {type_name(p.type)}" for n, p in zip(self.params(question), question.params))
    doc = "\n".join(("    " + line).rstrip() for line in base.doc_lines(question.description))
    head = IMPORTS + f"def {self.function_name(question)}({params}) -> {type_name(question.return_type)}:\n"
    return head + (f'    """\n{doc}\n    """\n' if doc else "")

  def stub(self, question: Question) -> str:
    return f"    return {literal(question.return_type, default_value(question.return_type))}\n"

  def program(self, question: Question, completion: str) -> base.Program:
    return self._program(question, self.signature_with_docstring(question) + completion, self.function_name(question))

  def whole_program(self, question: Question, code: str) -> base.Program:
    return self._program(question, WHOLE_HEAD + code, self.entry_name(question))

  def code_program(self, question: Question, code: str, name: str) -> base.Program:
    """The test program of `code` exactly as given (no head: it imports what it uses), calling the
    function `name` it defines: HumanEval-infilling's programs (evaluation/infilling/program.py)."""
    return self._program(question, code, name)

  def _program(self, question: Question, source: str, name: str) -> base.Program:
    """`source` (it defines `name`), then the harness that calls `name` on every test case."""
    cases = ",\n".join(f"    ({idx}, lambda: {name}({args}))"
                       for idx, args in base.render_cases(question, literal))
    text = (source + "\n" + _HARNESS +
            f"PREFIX = {base.RECORD_PREFIX!r}\nRETURN_TYPE = {type_tree(question.return_type)}\n"
            f"CASES = [\n{cases},\n]\n_codelm_main()\n")
    return base.Program(files={"main.py": text},
                        run=(_base_interpreter(), "-I", "-S", "-B", "main.py"))

  def foreign(self, text: str) -> base.Foreign:
    """eval_python: `python3 f.py`; a SyntaxError in stderr is its own status."""
    return base.Foreign("main.py", (self.toolchain.binaries[0], "main.py"), "python")


RENDERER = Python()
