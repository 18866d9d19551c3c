"""The Rust test harness (sandbox/renderers/rust.py): the source every program carries, or a shared
build's harness library, with the generic instantiations that library makes for its users (WARM).
"""

from __future__ import annotations


# Encoders are a trait on the exact Rust types (the signature fixes the returned type). Strings
# come out as pure ASCII JSON, so no character of a value can end a record line.
HARNESS = r"""
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

// The narrower types a whole program declares (BabelCode's i32, f32, char), as the wider ones.
impl CodelmJson for i32 {
    fn codelm_put(&self, out: &mut String) {
        (*self as i64).codelm_put(out);
    }
}

impl CodelmJson for f32 {
    fn codelm_put(&self, out: &mut String) {
        (*self as f64).codelm_put(out);
    }
}

impl CodelmJson for char {
    fn codelm_put(&self, out: &mut String) {
        self.to_string().codelm_put(out);
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

fn codelm_panic_text(info: &std::panic::PanicInfo) -> String {
    let text = info.to_string();
    // A shared build compiles member k from m<k>/main.rs (sandbox/renderers/rust.py); its record
    // names main.rs:line:column, as the program compiled alone does (the lines are the same).
    if let Some(place) = info.location() {
        let shown = place.to_string();
        let member = place.file().strip_prefix('m').and_then(|rest| rest.strip_suffix("/main.rs"));
        if let (Some(k), Some(head)) = (member, text.strip_suffix(&shown)) {
            if !k.is_empty() && k.bytes().all(|b| b.is_ascii_digit()) {
                return format!("{}main.rs:{}:{}", head, place.line(), place.column());
            }
        }
    }
    text
}

fn codelm_start() -> std::fs::File {
    let out = codelm_records();
    std::panic::set_hook(Box::new(|info| {
        CODELM_PANIC.with(|p| *p.borrow_mut() = codelm_panic_text(info));
    }));
    out
}
"""


# Instantiations the harness library makes for its users: at opt-level 0 rustc shares generic code
# across crates (-Z share-generics defaults on), so a build reuses these instead of generating its own
# (a build of 29 members on a loaded machine: 0.55 s of CPU instead of 0.67 s without them, and
# 0.86 s without the library).
WARM = r"""
pub fn codelm_warm() {
    use std::collections::{HashMap, HashSet};
    let mut a: Vec<i64> = Vec::new();
    a.push(1);
    a.sort();
    a.dedup();
    a.reverse();
    let _ = (a.iter().sum::<i64>(), a.iter().max().copied(), a.contains(&2), a.clone());
    let mut b: Vec<String> = Vec::new();
    b.push(String::new());
    b.sort();
    let _ = (b.join(","), b.clone());
    let mut f: Vec<f64> = Vec::new();
    f.push(2.0);
    f.sort_by(|x, y| x.partial_cmp(y).unwrap());
    let _ = (f.iter().sum::<f64>(), f.clone());
    let mut c: Vec<char> = "abc".chars().collect();
    c.push('a');
    c.sort();
    let _: String = c.iter().collect();
    let nested: Vec<Vec<i64>> = vec![a.clone()];
    let mut m: HashMap<String, i64> = HashMap::new();
    m.insert(String::new(), 2);
    *m.entry(String::new()).or_insert(0) += 1;
    let _ = (m.get("a"), m.clone());
    let mut n: HashMap<i64, i64> = HashMap::new();
    *n.entry(1).or_insert(0) += 1;
    let _ = (n.get(&1), n.clone());
    let mut k: HashMap<char, i64> = HashMap::new();
    *k.entry('a').or_insert(0) += 1;
    let mut s: HashSet<i64> = HashSet::new();
    s.insert(2);
    let _ = (s.contains(&1), s.clone());
    let mut t: HashSet<String> = HashSet::new();
    t.insert(String::new());
    let mut u: HashSet<char> = HashSet::new();
    u.insert('a');
    let _ = (codelm_ok(a), codelm_ok(b), codelm_ok(f), codelm_ok(nested), codelm_ok(m), codelm_ok(n));
    let _ = (codelm_ok(s), codelm_ok(t), codelm_ok(Some(1i64)), codelm_ok((1i64, 2i64)));
    let _ = (codelm_ok(true), codelm_ok(1i64), codelm_ok(1.0f64), codelm_ok(String::new()));
}
"""
