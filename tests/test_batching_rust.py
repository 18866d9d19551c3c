"""Rust's shared build (sandbox/renderers/rust.py): what `batchable` lets into one crate and what it
refuses (one case per reason), that `blamed` reads rustc's own diagnostics, and that a member's run
cannot tell its build from its program alone (argv, environment, panic locations, memory)."""

from __future__ import annotations

import os
import tempfile

import pytest

from sandbox import batching, execution, typed
from sandbox.judge import Status, judge
from sandbox.renderers import base, get, rust

HERE = os.path.dirname(os.path.abspath(__file__))
QUESTIONS = {q.qid: q for q in typed.read_questions(os.path.join(HERE, "data", "typed_questions.jsonl"))}
LIMITS = execution.Limits(timeout_s=5, compile_timeout_s=60)
RUST = get("rust")
QUESTION = QUESTIONS["HumanEval/0"]  # fn has_close_elements(numbers: Vec<f64>, threshold: f64) -> bool

FINE = {
    "plain": "    numbers.len() > 1\n}",
    "braces and # in literals": "    let s = \"}{#\\\"}\";\n    let c = '}';\n    let d = '#';\n    let b = b'{';\n"
                                "    let e = '\\'';\n    let u = '\\u{7d}';\n"
                                "    s.len() + (c as usize) + (d as usize) > (b as usize) + (e as usize) + (u as usize)\n}",
    "nested comments": "    /* outer /* inner } # */ still a comment { */\n    // a line comment with } and #\n"
                       "    numbers.is_empty()\n}",
    "lifetimes and labels": "    fn first<'a>(v: &'a [f64]) -> Option<&'a f64> { v.first() }\n"
                            "    'outer: for i in 0..numbers.len() {\n        for j in 0..i {\n"
                            "            if (numbers[i] - numbers[j]).abs() < threshold { break 'outer; }\n"
                            "        }\n    }\n    first(&numbers).is_some()\n}",
    "items in the body": "    struct Pair(f64, f64);\n    enum Side { Low, High }\n    type Pairs = Vec<Pair>;\n"
                         "    fn near(p: &Pair, t: f64) -> bool { (p.0 - p.1).abs() < t }\n"
                         "    trait Unused { fn unused(&self) -> bool { false } }\n"
                         "    macro_rules! pair { ($a:expr, $b:expr) => { Pair($a, $b) }; }\n"
                         "    static LIMIT: usize = 2;\n    const SCALE: f64 = 1.0;\n    use std::cmp::Ordering;\n"
                         "    let side = if numbers.len() > LIMIT { Side::High } else { Side::Low };\n"
                         "    let pairs: Pairs = numbers.windows(2).map(|w| pair!(w[0], w[1] * SCALE)).collect();\n"
                         "    matches!(side, Side::High) && 1.cmp(&2) == Ordering::Less\n"
                         "        && pairs.iter().any(|p| near(p, threshold))\n}",
    "std::env paths": "    let home = std::env::var(\"HOME\").is_ok();\n    home && numbers.len() > std::env::args().count()\n}",
    "the words in literals": "    let _ = \"extern crate mod super file!() codelm_run #[no_mangle]\";\n    false\n}",
    "trailing blank lines": "    false\n}\n\n",
}

REFUSED = {
    "raw string": "    let s = r\"\\\";\n    s.is_empty()\n}",
    "raw string with hashes": "    let s = r#\"}\"#;\n    s.is_empty()\n}",
    "byte raw string": "    let s = br\"}\";\n    s.is_empty()\n}",
    "attribute": "    #[no_mangle]\n    pub fn malloc() {}\n    false\n}",
    "export_name": "    #[export_name = \"free\"]\n    fn f() {}\n    false\n}",
    "link_section": "    #[link_section = \".init_array\"]\n    static INIT: fn() = f;\n    fn f() {}\n    false\n}",
    "inner attribute": "    #![allow(unused)]\n    false\n}",
    "raw identifier": "    let r#type = 1;\n    r#type > 0\n}",
    "asm": "    unsafe { std::arch::asm!(\"nop\"); }\n    false\n}",
    "global_asm": "    std::arch::global_asm!(\".globl x\");\n    false\n}",
    "extern block": "    extern \"C\" { fn getpid() -> i32; }\n    unsafe { getpid() > 0 }\n}",
    "extern fn": "    extern \"C\" fn f() {}\n    false\n}",
    "trait impl": "    pub struct Local;\n    impl Default for Local { fn default() -> Local { Local } }\n    false\n}",
    "inherent impl": "    struct Local;\n    impl Local { fn f(&self) -> bool { true } }\n    Local.f()\n}",
    "impl in argument position": "    fn count(it: impl Iterator<Item = f64>) -> usize { it.count() }\n"
                                 "    count(numbers.into_iter()) > 1\n}",
    "impl through a macro": "    macro_rules! m { ($($t:tt)*) => { $($t)* }; }\n    struct L;\n"
                            "    m!(impl Default for L { fn default() -> L { L } });\n    false\n}",
    "crate path": "    crate::main();\n    false\n}",
    "super path": "    super::has_close_elements(numbers, threshold)\n}",
    "mod": "    mod inner { pub fn f() -> bool { true } }\n    inner::f()\n}",
    "include": "    include!(\"../m1/main.rs\");\n    false\n}",
    "include_str": "    include_str!(\"../m1/main.rs\").is_empty()\n}",
    "include_bytes": "    include_bytes!(\"../m1/main.rs\").is_empty()\n}",
    "env macro": "    env!(\"PATH\").is_empty()\n}",
    "env renamed": "    use std::env as e;\n    e!(\"PATH\").is_empty()\n}",
    "option_env": "    option_env!(\"PATH\").is_some()\n}",
    "concat_idents": "    concat_idents!(has, _close_elements)(numbers, threshold)\n}",
    "harness name": "    codelm_ok(true).is_empty()\n}",
    "harness trait": "    let mut s = String::new();\n    CodelmJson::codelm_put(&true, &mut s);\n    false\n}",
    "file!": "    file!().is_empty()\n}",
    "Location": "    std::panic::Location::caller().line() > 0\n}",
    "set_hook": "    std::panic::set_hook(Box::new(|info| println!(\"{}\", info)));\n    false\n}",
    "module_path!": "    module_path!().is_empty()\n}",
    "type_name": "    std::any::type_name::<Vec<f64>>().is_empty()\n}",
    "TypeId": "    struct L;\n    format!(\"{:?}\", std::any::TypeId::of::<L>()).is_empty()\n}",
    "type_id": "    use std::any::Any;\n    struct L;\n    format!(\"{:?}\", L.type_id()).is_empty()\n}",
    "Backtrace": "    std::backtrace::Backtrace::force_capture().to_string().is_empty()\n}",
    "Command": "    std::process::Command::new(\"./main\").status().is_ok()\n}",
    "non-ASCII identifier": "    let \u00e9 = 1;\n    \u00e9 > 0\n}",
    "leaves the function": "    false\n}\nfn other() -> bool { true }",
    "does not close": "    false\n",
    "closes too often": "    false\n}\n}",
    "unbalanced parentheses": "    (false\n}",
    "unterminated string": "    let s = \"abc;\n    false\n}",
    "multi-line string": "    let s = \"abc\n    \";\n    s.is_empty()\n}",
    "string continuation": "    let s = \"abc\\\n    def\";\n    s.is_empty()\n}",
    "unterminated nested comment": "    /* /* */\n    false\n}",
}


def test_batchable_accepts_ordinary_completions():
  for why, code in FINE.items():
    assert RUST.batchable(QUESTION, code), why


@pytest.mark.parametrize("why", sorted(REFUSED))
def test_batchable_refuses(why):
  assert not RUST.batchable(QUESTION, REFUSED[why]), why


def test_a_char_literal_is_told_from_a_lifetime():
  # Were 'a taken for a char, `'a>(x: &'` would be one literal and the `}` after it unseen.
  assert RUST.batchable(QUESTION, "    fn f<'a>(x: &'a str) -> &'a str { x }\n    f(\"\").is_empty()\n}")
  assert not RUST.batchable(QUESTION, "    fn f<'a>(x: &'a str) -> &'a str { x }\n    true\n}\nfn g() {}")
  assert not RUST.batchable(QUESTION, "    let c = '{';\n    true\n}\nfn g() {}")


def test_blamed_reads_the_files_and_symbols_rustc_names():
  diagnostics = ("error[E0425]: cannot find function `undefined_helper` in this scope\n"
                 " --> m3/main.rs:8:5\n  |\n8 |     let s = \"--> m9/main.rs:1:1\";\n"
                 "note: multiple `impl`s satisfying `i64: PartialEq<_>` found\n  --> m12/main.rs:9:5\n"
                 "  ::: m4/main.rs:2:1\n"
                 "/usr/bin/ld: main.main.1234-cgu.0.rcgu.o: undefined reference to\n"
                 "          `_ZN4main9codelm_m716has_close_elements17h0123456789abcdefE'\n"
                 "          in function `main::codelm_m21::codelm_main'\n")
  assert RUST.blamed(diagnostics, 30) == {3, 12, 4, 7, 21}  # not 9: a quoted source line
  assert RUST.blamed("error: linking with `cc` failed: exit status: 1\n", 30) == set()
  assert rust._mangled_members("_ZN4main11codelm_m12310has_close17h0E") == {123}


def _toolchain_or_skip():
  lacking = execution.missing(RUST.toolchain)
  if lacking:
    pytest.skip(f"rust: toolchain missing ({', '.join(lacking)})")


def _build(jobs):
  build = RUST.build(jobs)
  directory = tempfile.mkdtemp(prefix="codelm-test-build-")
  program = base.Program(files=build.files, compile=build.compile, run=("true",), env=build.env)
  return execution.build(program, RUST.toolchain, LIMITS, directory)


def test_blamed_reads_real_diagnostics():
  _toolchain_or_skip()
  jobs = [(QUESTION, "    numbers.len() > 1\n}"),
          (QUESTION, "    undefined_helper(&numbers, threshold)\n}"),
          (QUESTIONS["HumanEval/13"], "    let x: i64 = \"a\";\n    x\n}"),
          (QUESTION, RUST.stub(QUESTION))]
  result = _build(jobs)
  assert result.compile_failed
  assert RUST.blamed(result.stderr, len(jobs)) == {1, 2}, result.stderr


def _records_both_ways(jobs):
  together = batching.execute_all(RUST, jobs, LIMITS, batch_size=len(jobs), stats=(stats := batching.Stats()))
  alone = batching.execute_all(RUST, jobs, LIMITS, batch_size=1)
  return together, alone, stats


def test_the_ordinary_completions_print_the_same_records_batched():
  _toolchain_or_skip()
  jobs = [(QUESTION, code) for code in FINE.values()]
  together, alone, stats = _records_both_ways(jobs)
  assert stats.built == len(jobs)
  for why, a, b in zip(FINE, together, alone):
    assert not b.compile_failed, (why, b.stderr)
    assert a.stdout == b.stdout, why


def test_a_member_sees_the_argv_environment_and_panic_locations_of_its_program_alone():
  _toolchain_or_skip()
  probe = ("    let args: Vec<String> = std::env::args().collect();\n"
           "    let vars: Vec<String> = std::env::vars().map(|(k, _)| k).collect();\n"
           "    if args.len() != 1 || vars.iter().any(|k| k.starts_with(\"CODELM\")) { return true; }\n"
           "    let v: Vec<f64> = Vec::new();\n    v[numbers.len()] > threshold\n}")
  jobs = [(QUESTION, probe), (QUESTIONS["HumanEval/13"], RUST.stub(QUESTIONS["HumanEval/13"]))]
  assert RUST.batchable(*jobs[0])
  together, alone, stats = _records_both_ways(jobs)
  assert stats.built == 2
  assert together[0].stdout == alone[0].stdout  # every case panics at main.rs:<line>:<col>
  assert "exception panicked at 'index out of bounds" in together[0].stdout
  assert ", main.rs:" in together[0].stdout


def test_a_member_that_would_take_the_others_memory_sends_the_build_alone():
  """A thread_local of 64 MiB is zeroes (no build time) but every process of the shared binary
  would map it: the size check fails the build, naming no member, and each compiles alone."""
  _toolchain_or_skip()
  big = ("    thread_local! { static BIG: std::cell::RefCell<Vec<u8>> = std::cell::RefCell::new(Vec::new()); }\n"
         "    thread_local! { static HUGE: std::cell::Cell<[u8; 1 << 26]> = std::cell::Cell::new([0; 1 << 26]); }\n"
         "    if numbers.len() > 100 { HUGE.with(|h| h.set([1; 1 << 26])); }\n"
         "    BIG.with(|b| b.borrow().len() > 0)\n}")
  jobs = [(QUESTION, big), (QUESTION, RUST.stub(QUESTION))]
  assert RUST.batchable(*jobs[0])
  result = _build(jobs)
  assert result.compile_failed and "the shared binary maps" in result.stderr, result.stderr
  assert RUST.blamed(result.stderr, 2) == set()
  together, alone, stats = _records_both_ways(jobs)
  assert stats.built == 0 and stats.alone == 2
  assert [judge(QUESTION, r).status for r in together] == [judge(QUESTION, r).status for r in alone]


def test_without_the_harness_library_a_build_compiles_the_harness(monkeypatch):
  _toolchain_or_skip()
  monkeypatch.setattr(rust, "harness_library", lambda: None)
  jobs = [(QUESTION, "    numbers.len() > 1\n}"), (QUESTION, RUST.stub(QUESTION))]
  assert "--extern" not in RUST.build(jobs).compile[0]
  together, alone, stats = _records_both_ways(jobs)
  assert stats.built == 2
  assert [r.stdout for r in together] == [r.stdout for r in alone]
  assert judge(QUESTION, together[1]).status is Status.FAILED
