"""The Go test harness: the source every Go program ends with (sandbox/renderers/go.py).

It encodes each case's result as canonical JSON by reflection over the type tree and runs each case
in its own goroutine; the renderer appends the case calls and the closing brace of `main`.
"""

from __future__ import annotations


# Type-directed conversion of the results to canonical JSON through reflection (the type tree says
# what a map[string]bool is: a set or a map). Records go to the original stdout; the solution's
# os.Stdout is stderr, so its prints cannot break a record line. Each case runs in its own
# goroutine so a panic, or runtime.Goexit, ends only that case.
HARNESS = r"""package main

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
	case "char": // a whole program's rune (BabelCode's character): the string of it
		codelmString(b, string(rune(v.Int())))
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
