"""Go: `package main`, an import block of the packages a solution commonly needs, and a function with
the description as `//` comment lines above it.

Types: bool -> bool, int -> int (64-bit on amd64), float -> float64, string -> string, list -> []T,
set -> map[T]bool (the keys whose value is true), map -> map[K]V, optional -> *T (nil when absent),
tuple -> multiple results when it is the return type, else [N]T when its items share a type and an
anonymous struct otherwise. A nil slice or map is an empty one, as Go code treats it.

Go rejects unused imports, so the solution's file ends with `var _ = fmt.Sprint`-style uses of each
prompt import, and the harness is a second file of the package with its own imports: neither depends
on what the completion uses. A body cannot import, so the program also imports any other standard
package the completion names (`md5.Sum` -> crypto/md5; EXTRA_IMPORTS), with such a use too. The prompt ends after the function's opening brace; a completion is the
body and the closing brace at column 0, where it is cut (`stop_sequences`).

A whole program (`whole_program`) is BabelCode's head and the solution as main.go (its own imports
may follow the head) and the harness as the second file, calling the entry with BabelCode's Go types
(integer -> int, long -> int64, float and double -> float64, character -> rune, set -> map[T]bool).

Built with the Go toolchain's own compiler and linker (`go tool compile` + `go tool link` against
the standard library archives Go 1.19 ships in $GOROOT/pkg): about 0.1 s less per program than
`go run` or `go build`, whose start-up and cache bookkeeping dominate a one-file program. Where the
archives are missing (Go >= 1.20) it falls back to `go run`, which was faster than `go build`.

Batched (sandbox/batching.py; only with the direct compiler, never with `go run`): most of a
program's ~0.15 CPU s is compiling the harness (~0.09 s: reflection, generics) and linking (~0.05
s); its own main.go takes a few ms. So one sandbox runs `build.sh`, which compiles the harness once
as package "codelm", then each member k as a package of its own, import path codelm/m<k>, in its own
compiler process, in m<k>/: its program's main.go, unchanged (`package main`: a package's name
need not match its path, so `%T` still says main.T), and a cases file whose closures make the calls
its harness makes alone; then a dispatcher main that imports them all, linked once. `./main k` runs
member k's closures through the harness's Main, in member k's own sandbox (30 programs: ~0.5 CPU s
for the build, against ~0.15 s each alone). A build with per-member reports: member k's status and
diagnostics (m<k>/status, m<k>/diagnostics) are its own compiler's, which saw only its own files
and the standard library, in the same file names as alone, so the same messages; a member that
compiled gets its status only once the binary is linked (no status: compiled alone).
A Go package reaches another only through an import, which a function body cannot make, and each
member's package holds, at package level, only its prompt's imports, blank uses of them, its
function and its cases, so nothing of a member runs before the dispatcher calls it (no init, no
initialised variable but function values). A completion joins only when (`batchable`, on the code
with comments and literals blanked, raw strings included):
- it is the rest of its function and nothing more (its braces close the function exactly at its
  end): no init(), variable, or method at package level;
- no comment is a compiler directive (//go:linkname would bind a name to any symbol of the binary,
  //line would move positions, //export and //extern are cgo's; anything shaped `//word:x`);
- it names nothing that only one of its two programs declares: `main` (the harness's alone) or a
  name starting with codelm (the harness's alone, CodelmCases in a build), any case; its function
  is not named like a package that only the harness alone imports (fmt, os, reflect, utf16, ...);
- it names none of the packages through which a program could tell its build from itself alone:
  runtime (function names, Caller, stacks, MemStats), reflect (PkgPath is codelm/m<k>), unsafe
  (memory), os, syscall, os/exec and path/filepath (the box's files, /proc/self, argv; the build's
  box has no main.a). Identifiers are ASCII.
What still differs is not a verdict's input: the text of an unrecovered panic's stack trace
(codelm/m3.f instead of main.f; the file paths are the same through -trimpath), goroutine
numbers, and the addresses of code and data, which a completion can print but whose value no
expected output holds. The packages every member imports are initialised in every run: the
standard library's, whose init only fills tables of their own.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Sequence

from sandbox.renderers import base, go_harness, lexing, literals
from sandbox.typed import DECLARED_SCALARS, Question, Type, default_value

GO = next((p for p in ("/usr/lib/go-1.19/bin/go", "/usr/bin/go") if os.path.exists(p)),
          "/usr/lib/go-1.19/bin/go")
GOROOT = os.path.dirname(os.path.dirname(os.path.realpath(GO)))
_TOOLS = os.path.join(GOROOT, "pkg", "tool", "linux_amd64")
COMPILE, LINK = os.path.join(_TOOLS, "compile"), os.path.join(_TOOLS, "link")
# The standard library precompiled for the direct compiler (absent from Go 1.20 on).
DIRECT = os.path.exists(os.path.join(GOROOT, "pkg", "linux_amd64", "fmt.a"))

# The prompt's imports, and one use of each so an unused import does not fail the build.
IMPORTS = {"fmt": "fmt.Sprint", "math": "math.Abs", "sort": "sort.Ints", "strconv": "strconv.Itoa",
           "strings": "strings.Split", "unicode": "unicode.IsUpper"}

# Other standard packages a completion may name (`md5.Sum(...)`): the program imports each one the
# completion mentions, with a use like the prompt's, so a false match (a variable called `list`)
# cannot leave an unused import. The prompt cannot show them, since a body cannot import.
EXTRA_IMPORTS = {
    "big": ("math/big", "big.NewInt"), "bits": ("math/bits", "bits.Len"),
    "cmplx": ("math/cmplx", "cmplx.Abs"), "rand": ("math/rand", "rand.Intn"),
    "bytes": ("bytes", "bytes.Compare"), "regexp": ("regexp", "regexp.MustCompile"),
    "errors": ("errors", "errors.New"), "utf8": ("unicode/utf8", "utf8.RuneLen"),
    "utf16": ("unicode/utf16", "utf16.Encode"), "md5": ("crypto/md5", "md5.Sum"),
    "sha1": ("crypto/sha1", "sha1.Sum"), "sha256": ("crypto/sha256", "sha256.Sum256"),
    "hex": ("encoding/hex", "hex.EncodeToString"), "base64": ("encoding/base64", "base64.NewEncoding"),
    "binary": ("encoding/binary", "binary.Size"), "json": ("encoding/json", "json.Marshal"),
    "heap": ("container/heap", "heap.Init"), "list": ("container/list", "list.New"),
    "ring": ("container/ring", "ring.New"), "reflect": ("reflect", "reflect.TypeOf"),
    "sync": ("sync", "sync.NewCond"), "atomic": ("sync/atomic", "atomic.AddInt64"),
    "time": ("time", "time.Now"), "os": ("os", "os.Exit"), "io": ("io", "io.ReadAll"),
    "bufio": ("bufio", "bufio.NewReader"), "exec": ("os/exec", "exec.Command"),
    "syscall": ("syscall", "syscall.Getpid"), "net": ("net", "net.Dial"),
    "runtime": ("runtime", "runtime.GC"), "path": ("path", "path.Join"),
    "filepath": ("path/filepath", "filepath.Join"), "unsafe": ("unsafe", "unsafe.Sizeof(0)"),
}

# Every program's environment (and a shared build's).
ENV = {"GOCACHE": "/box/.cache", "GOROOT": GOROOT, "GO111MODULE": "off", "CGO_ENABLED": "0",
       "GOTOOLCHAIN": "local", "GOFLAGS": ""}

RESERVED = frozenset("""
break case chan const continue default defer else fallthrough for func go goto if import interface
map package range return select struct switch type var
bool byte complex64 complex128 error float32 float64 int int8 int16 int32 int64 rune string uint
uint8 uint16 uint32 uint64 uintptr true false iota nil any comparable
append cap clear close complex copy delete imag len make max min new panic print println real
recover main init
""".split()) | set(IMPORTS)


def _homogeneous(t: Type) -> bool:
  return all(a == t.args[0] for a in t.args)


def _spelled(t: Type, leaves: dict[str, str]) -> str:
  """A type in Go, `leaves` naming its leaf types: a set is a map to bool, an optional a pointer, a
  tuple an array where its items share a type, else a struct."""
  if t.name in leaves:
    return leaves[t.name]
  if t.name == "list":
    return f"[]{_spelled(t.element, leaves)}"
  if t.name == "set":
    return f"map[{_spelled(t.element, leaves)}]bool"
  if t.name == "map":
    return f"map[{_spelled(t.args[0], leaves)}]{_spelled(t.args[1], leaves)}"
  if t.name == "optional":
    return f"*{_spelled(t.element, leaves)}"
  if t.name == "tuple":
    if _homogeneous(t):
      return f"[{len(t.args)}]{_spelled(t.args[0], leaves)}"
    return "struct{ " + "; ".join(f"F{i} {_spelled(a, leaves)}" for i, a in enumerate(t.args)) + " }"
  raise AssertionError(t)


def type_name(t: Type) -> str:
  return _spelled(t, {"bool": "bool", "int": "int", "float": "float64", "string": "string"})


def _composite(t: Type, value, element: Callable[[Type, object], str], spelled: Callable[[Type], str]) -> str:
  """A container's Go composite literal of exactly `spelled(t)`, its elements written by `element`."""
  if t.name == "list":
    return f"{spelled(t)}{{{', '.join(element(t.element, v) for v in value)}}}"
  if t.name == "set":
    return f"{spelled(t)}{{{', '.join(f'{element(t.element, v)}: true' for v in sorted(value))}}}"
  if t.name == "map":
    pairs = ", ".join(f"{element(t.args[0], k)}: {element(t.args[1], v)}" for k, v in value.items())
    return f"{spelled(t)}{{{pairs}}}"
  if t.name == "tuple":
    return f"{spelled(t)}{{{', '.join(element(a, v) for a, v in zip(t.args, value))}}}"
  raise AssertionError(t)


def result_types(t: Type) -> str:
  """The function's result list: a tuple return is Go's multiple results."""
  if t.name == "tuple":
    return "(" + ", ".join(type_name(a) for a in t.args) + ")"
  return type_name(t)


def string_literal(text: str) -> str:
  """A Go interpreted string literal in plain ASCII."""
  return '"' + literals.escape(text, _numeric_escape, named=literals.NEWLINE_TAB_RETURN) + '"'


def _numeric_escape(code: int) -> str:
  if code < 0x80:
    return f"\\x{code:02x}"
  if 0xD800 <= code <= 0xDFFF:  # a lone surrogate has no UTF-8 form: Go's replacement char
    return "\\uFFFD"
  return f"\\U{code:08x}"


def literal(t: Type, value) -> str:
  """A Go expression of exactly `type_name(t)` (for the harness file, which imports math)."""
  name = t.name
  if name == "bool":
    return "true" if value else "false"
  if name == "int":
    return str(value)
  if name == "float":
    if math.isnan(value):
      return "math.NaN()"
    if math.isinf(value):
      return "math.Inf(1)" if value > 0 else "math.Inf(-1)"
    if value == 0 and math.copysign(1.0, value) < 0:  # Go constants have no negative zero
      return "math.Copysign(0, -1)"
    return f"float64({float(value)!r})"
  if name == "string":
    return string_literal(value)
  if name == "optional":
    return f"(*{type_name(t.element)})(nil)" if value is None else f"codelmPointer({literal(t.element, value)})"
  return _composite(t, value, literal, type_name)


def zero_literal(t: Type) -> str:
  """The return type's default in the solution's file (no harness helpers there)."""
  if t.name == "optional":
    return "nil"
  if t.name == "float":
    return "0.0"
  if t.name == "tuple":
    return type_name(t) + "{}"
  return literal(t, default_value(t))


def type_tree(t: Type) -> str:
  """The type as the harness's codelmType value."""
  args = ", ".join(type_tree(a) for a in t.args)
  return f'codelmType{{"{t.name}", []codelmType{{{args}}}}}'


def doc_comment(description: str) -> str:
  return "".join(f"// {line}".rstrip() + "\n" for line in base.doc_lines(description))


# ---- whole programs (Go.whole_program) ----

# BabelCode's Go head (templates/Go/header.txt), and uses of its imports after the code, which its
# main makes (`var _ = reflect.DeepEqual` ...): a solution need not use them, and may import more.
WHOLE_HEAD = 'package main\n\nimport (\n\t"fmt"\n\t"reflect"\n\t"math"\n\t"sort"\n)\n\n'
WHOLE_USES = "var _ = fmt.Sprint\nvar _ = reflect.DeepEqual\nvar _ = math.Abs\nvar _ = sort.Sort\n"
# BabelCode's Go types for the declared leaves (its schema_parsing Go spec).
DECLARED = {"boolean": "bool", "integer": "int", "long": "int64", "float": "float64", "double": "float64",
            "character": "rune", "string": "string"}
# The harness's packages are imported as codelm_<name>: a package-level name of the solution (a
# variable `strings`) would clash with a plain import of another file of the package.
_ALIAS = "codelm_"


def _aliased_harness() -> str:
  imports, rest = go_harness.HARNESS.split(")\n", 1)
  names = re.findall(r'^\t"(?:[\w/]+/)?(\w+)"$', imports, re.MULTILINE)
  imports = re.sub(r'^\t"(?:[\w/]+/)?(\w+)"$', lambda m: f"\t{_ALIAS}{m[1]} {m[0].strip()}", imports,
                   flags=re.MULTILINE)
  rest = re.sub(rf"(?<![\w.])({'|'.join(names)})\.", rf"{_ALIAS}\1.", rest)
  return imports + ")\n" + rest


WHOLE_HARNESS = _aliased_harness()


def declared_type(t: Type) -> str:
  """A declared type (leaves named as typed.DECLARED_SCALARS) in Go. A tuple, which BabelCode never
  declares (it lists a homogeneous one and refuses others), is what the prompts make of one."""
  return _spelled(t, DECLARED)


def declared_literal(t: Type, value) -> str:
  """A Go expression of exactly `declared_type(t)` (in WHOLE_HARNESS's file): a leaf is a typed
  constant, so an argument binds as BabelCode's driver variable does (an int64 to no int)."""
  name = t.name
  if name in ("float", "double"):
    return literal(Type("float"), value).replace("math.", f"{_ALIAS}math.")
  if name == "character":  # the string's first character (BabelCode's are one long)
    return f"rune({ord(value[0]) if value else 0})"
  if name == "boolean":
    return f"bool({'true' if value else 'false'})"
  if name == "string":
    return f"string({string_literal(value)})"
  if name in ("integer", "long"):
    return f"{DECLARED[name]}({value})"
  return _composite(t, value, declared_literal, declared_type)


def declared_tree(t: Type) -> str:
  """The declared type as the harness's codelmType: typed names, but "char" for a rune."""
  name = "char" if t.name == "character" else DECLARED_SCALARS.get(t.name, t.name)
  return f'codelmType{{"{name}", []codelmType{{{", ".join(declared_tree(a) for a in t.args)}}}}}'


# ---- batched compilation (module docstring) ----

# The harness's helpers and the first lines of its `main` (which the calls follow, alone).
_HELPERS, _, _MAIN_HEAD = go_harness.HARNESS.partition("func main() {\n")
assert _MAIN_HEAD and _HELPERS.startswith("package main\n")
# The packages the harness file imports: alone, a function of one of those names clashes with them.
_HARNESS_PACKAGES = frozenset(path.rsplit("/", 1)[-1] for path in
                              re.findall(r'^\t"([\w/]+)"$', _HELPERS.split(")", 1)[0], re.MULTILINE))
# What a member's code (comments and literals blanked) may not name: `main` (alone, the harness's
# main; not declared in a member's package), and packages through which a program could observe
# its build (module docstring).
REFUSED_WORDS = ("main", "os", "syscall", "exec", "runtime", "reflect", "unsafe", "filepath")
REFUSED_TEXT = re.compile(r"(?<!\w)codelm", re.IGNORECASE)
# Comments the compiler reads: //line and /*line (positions), //go: (pragmas: go:linkname binds a
# name to any symbol of the binary), cgo's //export and //extern, and anything shaped like a
# directive (`//word:x`).
_DIRECTIVE = re.compile(r"(?:line|export|extern)\b|[a-z0-9_]+:\S")


def code_only(text: str) -> str | None:
  """`text` with every comment replaced by one space and every string, rune and raw-string literal
  by "#" (not blank: a literal after the function's closing brace is text outside it, which
  lexing.closes_body then refuses; not a word character either). Go's raw strings are backquoted
  and hold any character but a backquote, newlines included. None when unsure: a NUL, an
  unterminated comment or literal, a newline in an interpreted literal, or a comment that the
  compiler may read as a directive."""
  if "\0" in text:
    return None
  out: list[str] = []
  i, n = 0, len(text)
  while i < n:
    c = text[i]
    if text.startswith("//", i):
      if _DIRECTIVE.match(text, i + 2):
        return None
      end = text.find("\n", i)
      i, blank = (n if end < 0 else end), " "
    elif text.startswith("/*", i):
      end = text.find("*/", i + 2)
      if end < 0 or _DIRECTIVE.match(text, i + 2):
        return None
      i, blank = end + 2, " "
    elif c == "`":
      end = text.find("`", i + 1)
      if end < 0:
        return None
      i, blank = end + 1, "#"
    elif c in "\"'":
      j = i + 1
      while j < n and text[j] != c:
        if text[j] == "\n" or text.startswith("\\\n", j):
          return None
        j += 2 if text[j] == "\\" else 1
      if j >= n:
        return None
      i, blank = j + 1, "#"
    else:
      out.append(c)
      i += 1
      continue
    out.append(blank)
  return "".join(out)


def _harness_package() -> str:
  """The harness's helpers as package codelm (import path "codelm"), compiled once per build, with
  what the dispatcher calls: Tree (a type tree: codelmType's fields are unexported) and Main (the
  harness's main for one member: its cases come as closures from the member's package)."""
  return _HELPERS.replace("package main\n", "package codelm\n", 1) + r"""
// Tree: a type tree, as a program alone writes it (codelmType{name, []codelmType{args...}}).
func Tree(name string, args ...codelmType) codelmType {
	return codelmType{name, args}
}

// Main: main of a program alone, its calls as closures (calls[i] is the case indices[i]: the
// function's results); each runs and is encoded in codelmRun's goroutine, as alone.
func Main(returnType codelmType, indices []int, calls []func() []interface{}) {
""" + _MAIN_HEAD + r"""	for i := range calls {
		call := calls[i]
		codelmRun(out, indices[i], func() string {
			return codelmEncode(returnType, call()...)
		})
	}
}
"""


def _tree(t: Type) -> str:
  """The type's tree as the dispatcher builds it (codelm.Tree)."""
  return f'codelm.Tree("{t.name}"' + "".join(", " + _tree(a) for a in t.args) + ")"


# The harness's codelmPointer, which the literals of a member's cases use (in its own package).
_POINTER = re.search(r"^func codelmPointer\b.*\n", _HELPERS, re.MULTILINE).group()
# The package of a member whose own failed to compile: the dispatcher imports every member's.
_STUB = "package main\n\nfunc CodelmCases() []func() []interface{} { return nil }\n"


def _dispatcher(questions: Sequence[Question]) -> str:
  """The build's main package: `./main k` runs member k's cases through the harness's Main, with
  os.Args as its program alone has them (["./main"]); any other argument runs nothing. Before that
  no code of a member runs: their packages declare only functions and blank variables."""
  imports = "".join(f'\tm{k} "codelm/m{k}"\n' for k in range(len(questions)))
  cases = "".join(f'\tcase "{k}":\n\t\tcodelm.Main({_tree(q.return_type)}, '
                  f'[]int{{{", ".join(str(c.idx) for c in q.test_cases)}}}, m{k}.CodelmCases())\n'
                  for k, q in enumerate(questions))
  return (f'package main\n\nimport (\n\t"codelm"\n\t"os"\n\n{imports})\n\nfunc main() {{\n'
          "\tif len(os.Args) != 2 {\n\t\tos.Exit(2)\n\t}\n\tmember := os.Args[1]\n\tos.Args = os.Args[:1]\n"
          f"\tswitch member {{\n{cases}\tdefault:\n\t\tos.Exit(2)\n\t}}\n}}\n")


# The build's compilers and linker: DWARF is not written (`link -s -w` drops it alone too) and the
# heap is collected only near 512 MiB (a compiler process lives ~10 ms): 30 members' packages,
# 0.58 -> 0.44 CPU s. The heap then peaks near the larger of 512 MiB and what is live, where a
# compile alone (GOGC=100) peaks at twice what is live: under the 2 GiB address-space cap a member's
# compile runs out of memory only where its program's alone would.
BUILD_FLAGS = ("-dwarf=false",)
BUILD_ENV = {**ENV, "GOGC": "off", "GOMEMLIMIT": "512MiB"}


def _build_script(size: int) -> str:
  """The build's one step (module docstring). Member k compiles in m<k>/ as its program alone does
  in the box (the same main.go, so the same diagnostics); its status is written at once when it
  fails, and only once the binary is linked when it compiled (a member with no status is compiled
  alone by sandbox/batching.py)."""
  flags = " ".join(BUILD_FLAGS)
  return f"""compile="{COMPILE}"
link="{LINK}"
mkdir -p pkg/codelm
"$compile" -p codelm -complete {flags} -o pkg/codelm.a codelm_harness.go || exit 1
built=()
for ((k = 0; k < {size}; k++)); do
  if (cd "m$k" && exec "$compile" -p "codelm/m$k" -complete {flags} -trimpath "$PWD=>/box" \\
        -o "/box/pkg/codelm/m$k.a" main.go codelm_cases.go) >"m$k/diagnostics" 2>&1; then
    built+=("$k")
  else
    echo "$?" >"m$k/status"
    "$compile" -p "codelm/m$k" -complete {flags} -o "pkg/codelm/m$k.a" codelm_stub.go || exit 1
  fi
done
"$compile" -p main -complete {flags} -I pkg -o main.a codelm_dispatch.go || exit 1
"$link" -s -w -L pkg -o main main.a || exit 1
for k in "${{built[@]}}"; do echo 0 >"m$k/status"; done
"""


FOREIGN_ENV = {**ENV, "GOPATH": "/usr/share/gocode"}  # MultiPL-E's tests import testify


class Go(base.Renderer):
  name = "go"
  display_name = "Go"
  value_literal = staticmethod(literal)
  foreign_timeout_s = 30.0  # build and run together
  toolchain = base.Toolchain(binaries=(GO, COMPILE, LINK) if DIRECT else (GO,),
                             version_command=(GO, "version"), read_only=())
  naming = staticmethod(base.camel_case)
  reserved = RESERVED
  convention = "camel"

  def signature_with_docstring(self, question: Question) -> str:
    return self._source_head(question, ())

  def _source_head(self, question: Question, extra_imports: Sequence[str]) -> str:
    imports = "".join(f'\t"{path}"\n' for path in (*IMPORTS, *extra_imports))
    params = ", ".join(f"{n} {type_name(p.type)}" for n, p in zip(self.params(question), question.params))
    return (f"package main\n\nimport (\n{imports})\n\n" + doc_comment(question.description) +
            f"func {self.function_name(question)}({params}) {result_types(question.return_type)} {{\n")

  def stub(self, question: Question) -> str:
    t = question.return_type
    values = [zero_literal(a) for a in t.args] if t.name == "tuple" else [zero_literal(t)]
    return f"\treturn {', '.join(values)}\n}}"

  def program(self, question: Question, completion: str) -> base.Program:
    extra = [name for name in EXTRA_IMPORTS if re.search(rf"(?<![\w.]){name}\.", completion)]
    uses = "".join(f"var _ = {use}\n" for use in (*IMPORTS.values(), *(EXTRA_IMPORTS[n][1] for n in extra)))
    solution = (self._source_head(question, [EXTRA_IMPORTS[n][0] for n in extra]) + completion +
                "\n\n" + uses)
    harness = go_harness.HARNESS + self._calls(question) + "}\n"
    return _program({"main.go": solution, "codelm_harness.go": harness})

  def whole_program(self, question: Question, code: str) -> base.Program:
    """main.go: BabelCode's head (package main, imports fmt, reflect, math, sort), the code, then uses
    of those imports (BabelCode's main makes them); codelm_harness.go: the harness, its imports
    aliased (WHOLE_HARNESS), whose main calls `entry_name` with constants of the declared types
    and assigns the value to a variable of the declared return type, as BabelCode's driver does."""
    *params, returns = question.declared
    name, result = self.entry_name(question), declared_type(returns)
    items = ["result"]
    if returns.name == "tuple":  # codelmEncode takes a tuple's items as separate results
      items = [f"result[{i}]" if _homogeneous(returns) else f"result.F{i}" for i in range(len(returns.args))]
    calls = "".join(f"\tcodelmRun(out, {case.idx}, func() string {{\n"
                    f"\t\tvar result {result} = {name}({', '.join(map(declared_literal, params, case.inputs))})\n"
                    f"\t\treturn codelmEncode(returnType, {', '.join(items)})\n\t}})\n"
                    for case in question.test_cases)
    harness = WHOLE_HARNESS + f"\treturnType := {declared_tree(returns)}\n\t_ = returnType\n" + calls + "}\n"
    return _program({"main.go": WHOLE_HEAD + code + "\n\n" + WHOLE_USES, "codelm_harness.go": harness})

  def batchable(self, question: Question, completion: str) -> bool:
    """Module docstring: the rest of its function and nothing more, no directive, nothing named
    that only one of the two programs declares, no package through which it could see its build."""
    name = self.function_name(question)
    if not DIRECT or name in _HARNESS_PACKAGES or REFUSED_TEXT.match(name):
      return False
    code = code_only(completion)
    return (code is not None and code.isascii() and lexing.closes_body(code)
            and not REFUSED_TEXT.search(code) and not lexing.has_word(code, REFUSED_WORDS))

  def build(self, jobs) -> base.Build:
    """One sandbox: the harness package, then each member's package compiled on its own in m<k>/
    (its program's main.go and its cases), then a dispatcher, linked once (module docstring)."""
    files = {"build.sh": _build_script(len(jobs)), "codelm_harness.go": _harness_package(),
             "codelm_stub.go": _STUB, "codelm_dispatch.go": _dispatcher([q for q, _ in jobs])}
    runs = []
    for k, (question, completion) in enumerate(jobs):
      alone = self.program(question, completion)
      files[f"m{k}/main.go"] = alone.files["main.go"]
      files[f"m{k}/codelm_cases.go"] = self._cases(question)
      runs.append(base.Program(files=alone.files, env=alone.env, run=("./main", str(k)),
                               artefacts={"main": "main"}))
    return base.Build(files=files, compile=(("/bin/bash", "build.sh"),), runs=tuple(runs), env=BUILD_ENV,
                      reports=tuple((f"m{k}/status", f"m{k}/diagnostics") for k in range(len(jobs))))

  def _cases(self, question: Question) -> str:
    """A member's second file: its calls, as the harness's `main` makes them alone, as closures that
    return the function's results (the harness's Main runs them), and the harness's codelmPointer,
    which the literals use."""
    name, results = self.function_name(question), self._results(question)
    calls = "".join(f"\t\tfunc() []interface{{}} {{\n\t\t\t{results} := {name}({args})\n"
                    f"\t\t\treturn []interface{{}}{{{results}}}\n\t\t}},\n"
                    for _, args in base.render_cases(question, literal))
    return (f'package main\n\nimport "math"\n\nvar _ = math.Inf\n\n{_POINTER}\n'
            "func CodelmCases() []func() []interface{} {\n"
            f"\treturn []func() []interface{{}}{{\n{calls}\t}}\n}}\n")

  def _results(self, question: Question) -> str:
    t = question.return_type
    return ", ".join(f"r{i}" for i in range(len(t.args))) if t.name == "tuple" else "r0"

  def _calls(self, question: Question) -> str:
    """The harness's `main` after its first lines: the return type's tree, one codelmRun per case."""
    name, results = self.function_name(question), self._results(question)
    return f"\treturnType := {type_tree(question.return_type)}\n" + "".join(
        f"\tcodelmRun(out, {idx}, func() string {{\n\t\t{results} := {name}({args})\n"
        f"\t\treturn codelmEncode(returnType, {results})\n\t}})\n"
        for idx, args in base.render_cases(question, literal))

  def foreign(self, text: str) -> base.Foreign:
    """eval_go: `go test f_test.go` builds and runs; GOPATH is Debian's Go libraries (testify)."""
    return base.Foreign("main_test.go", (GO, "test", "main_test.go"), "go", env=FOREIGN_ENV, timeout_exit_code=None)


def _program(files: dict[str, str]) -> base.Program:
  """main.go and codelm_harness.go compiled as package main (module docstring)."""
  if DIRECT:
    return base.Program(
        files=files, env=dict(ENV), run=("./main",),
        compile=((COMPILE, "-p", "main", "-complete", "-o", "main.a", "main.go", "codelm_harness.go"),
                 (LINK, "-s", "-w", "-o", "main", "main.a")))
  return base.Program(files=files, env=dict(ENV), run=(GO, "run", "main.go", "codelm_harness.go"))


RENDERER = Go()
