"""Rust (edition 2021): a free function after `use std::collections::{HashMap, HashSet};`, with the
description as its `///` doc comment.

Types: bool -> bool, int -> i64, float -> f64, string -> String, list -> Vec<T>, set -> HashSet<T>
(set<float> -> Vec<f64>: f64 is neither Hash nor Ord), map -> HashMap<K, V>, tuple -> (A, B, ...),
optional -> Option<T>. Arguments are owned values, as MultiPL-E's Rust prompts have them. The
prompt ends after the function's opening brace; a completion is the body and the closing brace at
column 0, where it is cut (`stop_sequences`).

Each test case runs under `std::panic::catch_unwind` (a silent panic hook keeps the message for the
record instead of printing it), so a panic ends only its case; an abort (stack overflow) ends the
program and the remaining cases are missing. Records go to a duplicate of the original stdout while
fd 1 points at stderr, so the solution's own `print!` cannot break a record line.

Compiled without optimisation (debug: integer overflow panics, like a checked language) and with
`-C prefer-dynamic`: linking against Debian's libstd .so instead of the static rlibs halves the
link, the larger part of a compile (about 0.2 s instead of 0.35 s).
"""

from __future__ import annotations

import math
import os

from evaluation.languages import base
from evaluation.typed import Question, Type, default_value

RUSTC = "/usr/bin/rustc"
# rustc links through `cc`, an /etc/alternatives link the sandbox's uid may not follow: name gcc.
LINKER = next((p for p in ("/usr/bin/x86_64-linux-gnu-gcc-12", "/usr/bin/gcc") if os.path.exists(p)),
              "/usr/bin/gcc")
RUSTC_FLAGS = ("--edition", "2021", "-C", "opt-level=0", "-C", "debuginfo=0", "-C", "prefer-dynamic",
               "-C", f"linker={LINKER}", "-A", "warnings")

RESERVED = frozenset("""
as break const continue crate else enum extern false fn for if impl in let loop match mod move mut
pub ref return self Self static struct super trait true type unsafe use where while async await dyn
abstract become box do final macro override priv typeof unsized virtual yield try union main
""".split())


def type_name(t: Type) -> str:
  scalar = {"bool": "bool", "int": "i64", "float": "f64", "string": "String"}
  if t.name in scalar:
    return scalar[t.name]
  if t.name == "set" and t.element.name == "float":
    return "Vec<f64>"
  args = ", ".join(type_name(a) for a in t.args)
  if t.name == "tuple":
    return f"({args},)" if len(t.args) == 1 else f"({args})"
  return {"list": f"Vec<{args}>", "set": f"HashSet<{args}>", "map": f"HashMap<{args}>",
          "optional": f"Option<{args}>"}[t.name]


def string_literal(text: str) -> str:
  """The text as a String, in plain ASCII (\\u{..} for anything else)."""
  out = []
  for ch in text:
    code = ord(ch)
    if ch in "\"\\":
      out.append("\\" + ch)
    elif 0x20 <= code < 0x7f:
      out.append(ch)
    elif 0xD800 <= code <= 0xDFFF:  # a lone surrogate has no UTF-8 form
      out.append("\\u{fffd}")
    else:
      out.append(f"\\u{{{code:x}}}")
  return f'String::from("{"".join(out)}")'


def literal(t: Type, value) -> str:
  """A Rust expression of exactly `type_name(t)`."""
  name = t.name
  if name == "bool":
    return "true" if value else "false"
  if name == "int":
    return "i64::MIN" if value == -(2 ** 63) else f"{value}i64"
  if name == "float":
    if math.isnan(value):
      return "f64::NAN"
    if math.isinf(value):
      return "f64::INFINITY" if value > 0 else "f64::NEG_INFINITY"
    return f"{float(value)!r}f64"
  if name == "string":
    return string_literal(value)
  if name == "optional":
    return f"Option::<{type_name(t.element)}>::None" if value is None else f"Some({literal(t.element, value)})"
  if name == "list" or (name == "set" and t.element.name == "float"):
    items = value if name == "list" else sorted(value)
    return f"<{type_name(t)}>::from([{', '.join(literal(t.element, v) for v in items)}])"
  if name == "set":
    return f"<{type_name(t)}>::from([{', '.join(literal(t.element, v) for v in sorted(value))}])"
  if name == "map":
    pairs = ", ".join(f"({literal(t.args[0], k)}, {literal(t.args[1], v)})" for k, v in value.items())
    return f"<{type_name(t)}>::from([{pairs}])"
  if name == "tuple":
    items = ", ".join(literal(a, v) for a, v in zip(t.args, value))
    return f"({items},)" if len(t.args) == 1 else f"({items})"
  raise AssertionError(t)


def default_literal(t: Type) -> str:
  """The default value as the stub returns it (plain constructors, no harness helpers)."""
  if t.name in ("list", "set", "map"):
    return f"{type_name(t).split('<')[0]}::new()"
  if t.name == "optional":
    return "None"
  if t.name == "tuple":
    items = ", ".join(default_literal(a) for a in t.args)
    return f"({items},)" if len(t.args) == 1 else f"({items})"
  return literal(t, default_value(t))


# Encoders are a trait on the exact Rust types (the signature fixes the returned type). Strings
# come out as pure ASCII JSON, so no character of a value can end a record line.
_HARNESS = r"""
trait CodelmJson {
    fn codelm_put(&self, out: &mut String);
}

impl CodelmJson for bool {
    fn codelm_put(&self, out: &mut String) {
        out.push_str(if *self { "true" } else { "false" });
    }
}

impl CodelmJson for i64 {
    fn codelm_put(&self, out: &mut String) {
        out.push_str(&self.to_string());
    }
}

impl CodelmJson for f64 {
    fn codelm_put(&self, out: &mut String) {
        if self.is_nan() {
            out.push_str("NaN");
        } else if self.is_infinite() {
            out.push_str(if *self > 0.0 { "Infinity" } else { "-Infinity" });
        } else {
            out.push_str(&format!("{:?}", self)); // shortest round-trip form
        }
    }
}

impl CodelmJson for String {
    fn codelm_put(&self, out: &mut String) {
        out.push('"');
        for c in self.chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                ' '..='~' => out.push(c),
                _ => {
                    let mut units = [0u16; 2];
                    for unit in c.encode_utf16(&mut units) {
                        out.push_str(&format!("\\u{:04x}", unit));
                    }
                }
            }
        }
        out.push('"');
    }
}

fn codelm_items<'a, T: CodelmJson + 'a>(items: impl Iterator<Item = &'a T>, out: &mut String) {
    out.push('[');
    for (i, item) in items.enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        item.codelm_put(out);
    }
    out.push(']');
}

impl<T: CodelmJson> CodelmJson for Vec<T> {
    fn codelm_put(&self, out: &mut String) {
        codelm_items(self.iter(), out);
    }
}

impl<T: CodelmJson, S> CodelmJson for std::collections::HashSet<T, S> {
    fn codelm_put(&self, out: &mut String) {
        codelm_items(self.iter(), out);
    }
}

impl<K: CodelmJson, V: CodelmJson, S> CodelmJson for std::collections::HashMap<K, V, S> {
    fn codelm_put(&self, out: &mut String) {
        out.push('[');
        for (i, (key, value)) in self.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            out.push('[');
            key.codelm_put(out);
            out.push_str(", ");
            value.codelm_put(out);
            out.push(']');
        }
        out.push(']');
    }
}

impl<T: CodelmJson> CodelmJson for Option<T> {
    fn codelm_put(&self, out: &mut String) {
        match self {
            Some(value) => value.codelm_put(out),
            None => out.push_str("null"),
        }
    }
}

macro_rules! codelm_tuple {
    ($($name:ident $index:tt),+) => {
        impl<$($name: CodelmJson),+> CodelmJson for ($($name,)+) {
            fn codelm_put(&self, out: &mut String) {
                out.push('[');
                $(
                    if $index > 0 {
                        out.push_str(", ");
                    }
                    self.$index.codelm_put(out);
                )+
                out.push(']');
            }
        }
    };
}
codelm_tuple!(A 0);
codelm_tuple!(A 0, B 1);
codelm_tuple!(A 0, B 1, C 2);
codelm_tuple!(A 0, B 1, C 2, D 3);
codelm_tuple!(A 0, B 1, C 2, D 3, E 4);
codelm_tuple!(A 0, B 1, C 2, D 3, E 4, F 5);
codelm_tuple!(A 0, B 1, C 2, D 3, E 4, F 5, G 6);
codelm_tuple!(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7);

thread_local! {
    static CODELM_PANIC: std::cell::RefCell<String> = std::cell::RefCell::new(String::new());
}

fn codelm_one_line(text: &str) -> String {
    let line: String = text.chars().map(|c| if c.is_control() || c == '\u{2028}' || c == '\u{2029}' { ' ' } else { c }).collect();
    line.chars().take(300).collect()
}

fn codelm_ok<T: CodelmJson>(value: T) -> String {
    let mut text = String::from("ok ");
    value.codelm_put(&mut text);
    text
}

// `call` returns codelm_ok(...) of the function's value; a plain fn pointer, so this is compiled once.
fn codelm_run(out: &mut std::fs::File, idx: usize, call: fn() -> String) {
    use std::io::Write;
    let record = match std::panic::catch_unwind(call) {
        Ok(text) => text,
        Err(_) => format!("exception {}", CODELM_PANIC.with(|p| codelm_one_line(&p.borrow()))),
    };
    let _ = std::io::stdout().flush();
    let _ = out.write_all(format!("\n#codelm# {} {}\n", idx, record).as_bytes());
}

extern "C" {
    fn dup(fd: i32) -> i32;
    fn dup2(old: i32, new: i32) -> i32;
}

fn codelm_records() -> std::fs::File {
    use std::os::unix::io::FromRawFd;
    // Records keep the original stdout; fd 1 (print!) becomes stderr.
    unsafe {
        let fd = dup(1);
        dup2(2, 1);
        std::fs::File::from_raw_fd(fd)
    }
}

fn main() {
    let mut codelm_out = codelm_records();
    std::panic::set_hook(Box::new(|info| {
        CODELM_PANIC.with(|p| *p.borrow_mut() = info.to_string());
    }));
"""


def doc_comment(description: str) -> str:
  return "".join(f"/// {line}".rstrip() + "\n" for line in base.doc_lines(description))


class Rust(base.Renderer):
  name = "rust"
  display_name = "Rust"
  toolchain = base.Toolchain(binaries=(RUSTC, LINKER), version_command=(RUSTC, "--version"))
  naming = staticmethod(base.snake_case)
  reserved = RESERVED

  def signature_with_docstring(self, question: Question) -> str:
    params = ", ".join(f"{n}: {type_name(p.type)}" for n, p in zip(self.params(question), question.params))
    return ("use std::collections::{HashMap, HashSet};\n\n" + doc_comment(question.description) +
            f"fn {self.function_name(question)}({params}) -> {type_name(question.return_type)} {{\n")

  def stub(self, question: Question) -> str:
    return f"    return {default_literal(question.return_type)};\n}}"

  def program(self, question: Question, completion: str) -> base.Program:
    name = self.function_name(question)
    calls = "".join(f"    codelm_run(&mut codelm_out, {idx}, || codelm_ok({name}({args})));\n"
                    for idx, args in base.render_cases(question, literal))
    text = self.signature_with_docstring(question) + completion + "\n" + _HARNESS + calls + "}\n"
    return base.Program(files={"main.rs": text}, compile=((RUSTC, *RUSTC_FLAGS, "-o", "main", "main.rs"),),
                        run=("./main",))


RENDERER = Rust()
