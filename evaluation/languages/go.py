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

Built with the Go toolchain's own compiler and linker (`go tool compile` + `go tool link` against
the standard library archives Go 1.19 ships in $GOROOT/pkg): about 0.1 s less per program than
`go run` or `go build`, whose start-up and cache bookkeeping dominate a one-file program. Where the
archives are missing (Go >= 1.20) it falls back to `go run`, which was faster than `go build`.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Sequence

from evaluation.languages import base
from evaluation.typed import Question, Type, default_value

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


def type_name(t: Type) -> str:
  scalar = {"bool": "bool", "int": "int", "float": "float64", "string": "string"}
  if t.name in scalar:
    return scalar[t.name]
  if t.name == "list":
    return f"[]{type_name(t.element)}"
  if t.name == "set":
    return f"map[{type_name(t.element)}]bool"
  if t.name == "map":
    return f"map[{type_name(t.args[0])}]{type_name(t.args[1])}"
  if t.name == "optional":
    return f"*{type_name(t.element)}"
  if t.name == "tuple":
    if _homogeneous(t):
      return f"[{len(t.args)}]{type_name(t.args[0])}"
    return "struct{ " + "; ".join(f"F{i} {type_name(a)}" for i, a in enumerate(t.args)) + " }"
  raise AssertionError(t)


def result_types(t: Type) -> str:
  """The function's result list: a tuple return is Go's multiple results."""
  if t.name == "tuple":
    return "(" + ", ".join(type_name(a) for a in t.args) + ")"
  return type_name(t)


def string_literal(text: str) -> str:
  """A Go interpreted string literal in plain ASCII."""
  out = []
  for ch in text:
    code = ord(ch)
    if ch in "\"\\":
      out.append("\\" + ch)
    elif 0x20 <= code < 0x7f:
      out.append(ch)
    elif ch in "\n\t\r":
      out.append({"\n": "\\n", "\t": "\\t", "\r": "\\r"}[ch])
    elif code < 0x80:
      out.append(f"\\x{code:02x}")
    elif 0xD800 <= code <= 0xDFFF:  # a lone surrogate has no UTF-8 form: Go's replacement char
      out.append("\\uFFFD")
    else:
      out.append(f"\\U{code:08x}")
  return '"' + "".join(out) + '"'


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
  if name == "list":
    return f"{type_name(t)}{{{', '.join(literal(t.element, v) for v in value)}}}"
  if name == "set":
    return f"{type_name(t)}{{{', '.join(f'{literal(t.element, v)}: true' for v in sorted(value))}}}"
  if name == "map":
    pairs = ", ".join(f"{literal(t.args[0], k)}: {literal(t.args[1], v)}" for k, v in value.items())
    return f"{type_name(t)}{{{pairs}}}"
  if name == "tuple":
    return f"{type_name(t)}{{{', '.join(literal(a, v) for a, v in zip(t.args, value))}}}"
  raise AssertionError(t)


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


# Type-directed conversion of the results to canonical JSON through reflection (the type tree says
# what a map[string]bool is: a set or a map). Records go to the original stdout; the solution's
# os.Stdout is stderr, so its prints cannot break a record line. Each case runs in its own
# goroutine so a panic, or runtime.Goexit, ends only that case.
_HARNESS = r"""package main

import (
	"fmt"
	"math"
	"os"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf16"
)

var _ = math.Inf

type codelmType struct {
	name string
	args []codelmType
}

func codelmPointer[T any](value T) *T { return &value }

func codelmString(b *strings.Builder, s string) {
	b.WriteByte('"')
	for _, r := range s { // invalid UTF-8 comes out as U+FFFD
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r >= 0x20 && r < 0x7f:
			b.WriteRune(r)
		case r >= 0x10000:
			high, low := utf16.EncodeRune(r)
			fmt.Fprintf(b, "\\u%04x\\u%04x", high, low)
		default:
			fmt.Fprintf(b, "\\u%04x", r)
		}
	}
	b.WriteByte('"')
}

func codelmPut(b *strings.Builder, t codelmType, v reflect.Value) {
	switch t.name {
	case "optional":
		if v.IsNil() {
			b.WriteString("null")
		} else {
			codelmPut(b, t.args[0], v.Elem())
		}
	case "bool":
		b.WriteString(strconv.FormatBool(v.Bool()))
	case "int":
		b.WriteString(strconv.FormatInt(v.Int(), 10))
	case "float":
		f := v.Float()
		switch {
		case math.IsNaN(f):
			b.WriteString("NaN")
		case math.IsInf(f, 1):
			b.WriteString("Infinity")
		case math.IsInf(f, -1):
			b.WriteString("-Infinity")
		default:
			b.WriteString(strconv.FormatFloat(f, 'g', -1, 64))
		}
	case "string":
		codelmString(b, v.String())
	case "list":
		b.WriteByte('[')
		for i := 0; i < v.Len(); i++ {
			if i > 0 {
				b.WriteString(", ")
			}
			codelmPut(b, t.args[0], v.Index(i))
		}
		b.WriteByte(']')
	case "set":
		b.WriteByte('[')
		first := true
		iter := v.MapRange()
		for iter.Next() {
			if !iter.Value().Bool() {
				continue
			}
			if !first {
				b.WriteString(", ")
			}
			first = false
			codelmPut(b, t.args[0], iter.Key())
		}
		b.WriteByte(']')
	case "map":
		b.WriteByte('[')
		first := true
		iter := v.MapRange()
		for iter.Next() {
			if !first {
				b.WriteString(", ")
			}
			first = false
			b.WriteByte('[')
			codelmPut(b, t.args[0], iter.Key())
			b.WriteString(", ")
			codelmPut(b, t.args[1], iter.Value())
			b.WriteByte(']')
		}
		b.WriteByte(']')
	case "tuple":
		b.WriteByte('[')
		for i := range t.args {
			if i > 0 {
				b.WriteString(", ")
			}
			if v.Kind() == reflect.Struct {
				codelmPut(b, t.args[i], v.Field(i))
			} else {
				codelmPut(b, t.args[i], v.Index(i))
			}
		}
		b.WriteByte(']')
	default:
		panic("unknown type " + t.name)
	}
}

// codelmEncode: the function's results (several for a tuple return) as canonical JSON.
func codelmEncode(t codelmType, results ...interface{}) string {
	var b strings.Builder
	if t.name != "tuple" {
		codelmPut(&b, t, reflect.ValueOf(results[0]))
		return b.String()
	}
	b.WriteByte('[')
	for i, result := range results {
		if i > 0 {
			b.WriteString(", ")
		}
		codelmPut(&b, t.args[i], reflect.ValueOf(result))
	}
	b.WriteByte(']')
	return b.String()
}

func codelmOneLine(text string) string {
	text = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || r == 0x85 || r == 0x2028 || r == 0x2029 {
			return ' '
		}
		return r
	}, text)
	if len(text) > 300 {
		text = text[:300]
	}
	return strings.ToValidUTF8(text, "?")
}

func codelmRun(out *os.File, idx int, call func() string) {
	done := make(chan string, 1)
	go func() {
		returned := false
		defer func() {
			if r := recover(); r != nil {
				done <- "exception " + codelmOneLine(fmt.Sprint("panic: ", r))
			} else if !returned {
				done <- "exception runtime.Goexit"
			}
		}()
		value := call()
		returned = true
		done <- "ok " + value
	}()
	record := <-done
	out.WriteString("\n#codelm# " + strconv.Itoa(idx) + " " + record + "\n")
}

func main() {
	out := os.Stdout
	os.Stdout = os.Stderr
"""


def doc_comment(description: str) -> str:
  return "".join(f"// {line}".rstrip() + "\n" for line in base.doc_lines(description))


class Go(base.Renderer):
  name = "go"
  display_name = "Go"
  toolchain = base.Toolchain(binaries=(GO, COMPILE, LINK) if DIRECT else (GO,),
                             version_command=(GO, "version"), read_only=())
  naming = staticmethod(base.camel_case)
  reserved = RESERVED

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
    name, t = self.function_name(question), question.return_type
    results = [f"r{i}" for i in range(len(t.args))] if t.name == "tuple" else ["r0"]
    calls = "".join(
        f"\tcodelmRun(out, {idx}, func() string {{\n\t\t{', '.join(results)} := {name}({args})\n"
        f"\t\treturn codelmEncode(returnType, {', '.join(results)})\n\t}})\n"
        for idx, args in base.render_cases(question, literal))
    harness = _HARNESS + f"\treturnType := {type_tree(t)}\n" + calls + "}\n"
    files = {"main.go": solution, "codelm_harness.go": harness}
    env = {"GOCACHE": "/box/.cache", "GOROOT": GOROOT, "GO111MODULE": "off", "CGO_ENABLED": "0",
           "GOTOOLCHAIN": "local", "GOFLAGS": ""}
    if DIRECT:
      return base.Program(
          files=files, env=env, run=("./main",),
          compile=((COMPILE, "-p", "main", "-complete", "-o", "main.a", "main.go", "codelm_harness.go"),
                   (LINK, "-s", "-w", "-o", "main", "main.a")))
    return base.Program(files=files, env=env, run=(GO, "run", "main.go", "codelm_harness.go"))


RENDERER = Go()
