"""R: `name <- function(params) {` with a roxygen comment (`#'`, `@param`, `@return`) as its doc.

Values, as an R programmer would hold them (R has no 64-bit integer, so int is a double holding a
whole number, printed without a decimal point: exact up to 2^53; 2^63 - 1 reads as 2^63, which is
out of range and so an exception):
- bool: logical; int and float: numeric (a returned R integer is accepted too); string: character.
- list<T> of a scalar (or optional scalar) T: an atomic vector (`c(...)`, NA for a null element,
  `numeric(0)` / `character(0)` / `logical(0)` when empty); of anything else: a list. The harness
  also accepts a list where it gives a vector, and NULL (what `c()` returns) as an empty list.
- set<T>: a vector of the members; map<K,V>: a named list (names are the keys, as text for int
  keys), an environment or a named vector is accepted too; tuple: `list(a, b)`, an atomic vector is
  accepted for a returned tuple; optional: NULL (a returned NA counts as null too, and so does a
  zero-length vector where the value would be a scalar).
A scalar is a length-1 vector; a length-1 list holding one is accepted.

The harness runs in an environment whose parent is the base package, so a completion that defines
or assigns `unique`, `cat` or `paste` in the global environment does not change how records are
written. Only base, utils and stats are attached (see R_ENV).

The harness is compiled once, on the host. As source, R's JIT byte-compiled its closures anew in
every program: a correct solution's run took about 0.14 s in the sandbox, of which about 0.08 s is R
starting and 0.04 s that compiling (turning the JIT off is no way out: a completion's loops would run
uncompiled, and a slow one could time out). `compiled_harness` compiles the harness's body with
compiler::compile (the JIT's optimisation level, so it is the code the JIT would have made) and
saves it with saveRDS as CACHE_DIR/<key>/harness.rds: the key changes with R's build, the harness
and the options, the folder is written by one rename, stale keys are removed, and CACHE_DIR is bound
read-only into the sandbox. Before it is used, the build checks that every closure the harness
defines is bytecode and that a sample program's records are those of the source. main.R then ends
with one line evaluating it in a new environment whose parent is the base package, as `local` did,
calling only `base::` functions (so a completion's global `eval`, `readRDS` or `new.env` does not
take their place either; the source's `local` does look those up in the global environment). Every
closure the harness makes is bytecode and the JIT is left only the completion's functions and the
case closures: a run takes about 0.10 s (0.09 s with the JIT off altogether). Where the cache cannot
be built, programs carry the source as before (`_HARNESS`).
"""

from __future__ import annotations

import hashlib
import logging
import math
import os
import shutil
import subprocess
import threading
import time

from sandbox.renderers import base, cache, literals
from sandbox.typed import Question, Type, default_value, parse_type

RSCRIPT = "/usr/bin/Rscript"
R_HOME = "/usr/lib/R"
R_BINARY = R_HOME + "/bin/exec/R"
# What Rscript's shell front end (/usr/lib/R/bin/R, /etc/R/ldpaths) and /etc/R/Renviron would set.
# The binary runs directly because the sandbox's /etc is mode 0700 (bwrap makes it so; see the
# report) and libblas.so.3 reaches its file through /etc/alternatives; it also saves a shell start.
# Renviron, when readable, only fills variables left unset, so these win either way.
R_ENV = {
    "R_HOME": R_HOME, "R_SHARE_DIR": "/usr/share/R/share", "R_INCLUDE_DIR": "/usr/share/R/include",
    "R_DOC_DIR": "/usr/share/R/doc",
    "LD_LIBRARY_PATH": f"{R_HOME}/lib:/usr/lib/x86_64-linux-gnu/blas:/usr/lib/x86_64-linux-gnu/lapack",
    "R_PLATFORM": "x86_64-pc-linux-gnu", "EDITOR": "vi", "PAGER": "/usr/bin/pager",
    "R_PAPERSIZE": "letter", "R_LIBS_USER": "/box/.R", "R_LIBS_SITE": f"{R_HOME}/site-library",
    # methods, graphics, grDevices and datasets slow every start; typed functions do not need them.
    "R_DEFAULT_PACKAGES": "base,utils,stats",
}

RESERVED_WORDS = frozenset(
    "if else repeat while function for next break TRUE FALSE NULL Inf NaN NA NA_integer_ NA_real_ "
    "NA_character_ NA_complex_ in T F".split())
# Base, utils and stats functions a completion is likely to call: an entry function named `unique`
# or `median` would shadow the builtin its own body wants, so such names get a trailing underscore.
BUILTINS = frozenset(
    "abs all any append apply array c cat ceiling character chartr cumsum decode diff dim duplicated "
    "encode environment exp factorial filter floor format gsub grepl head identical integer "
    "intersect is lapply length list log logical match max mean median min mode names nchar ncol "
    "nrow numeric order paste paste0 print prod range rank rep rev round sample sapply search sd "
    "seq setdiff sign solve sort split sprintf sqrt strsplit strtoi sub substr substring sum switch "
    "t table tail tolower toupper trunc union unique unlist var vapply vector which xor".split())
RESERVED = RESERVED_WORDS | BUILTINS
SCALARS = ("bool", "int", "float", "string")

_TYPE_NAMES = {"bool": "logical", "int": "integer", "float": "numeric", "string": "character"}
_EMPTY_VECTORS = {"bool": "logical(0)", "int": "numeric(0)", "float": "numeric(0)",
                  "string": "character(0)"}
_NA = {"bool": "NA", "int": "NA_real_", "float": "NA_real_", "string": "NA_character_"}


def _scalar_of(t: Type) -> str | None:
  """The scalar a vector element of type `t` holds (optional scalars are NA-able), else None."""
  if t.name in SCALARS:
    return t.name
  if t.name == "optional" and t.element.name in SCALARS:
    return t.element.name
  return None


def type_name(t: Type) -> str:
  """How the roxygen comment describes `t`."""
  if t.name in _TYPE_NAMES:
    return _TYPE_NAMES[t.name]
  if t.name in ("list", "set"):
    scalar = _scalar_of(t.element)
    unique = " of unique values" if t.name == "set" else ""
    if scalar is None:
      return f"list of ({type_name(t.element)})"
    nullable = " (NA for null)" if t.element.name == "optional" else ""
    return f"{_TYPE_NAMES[scalar]} vector{unique}{nullable}"
  if t.name == "map":
    return f"named list of {type_name(t.args[1])}, names are the {type_name(t.args[0])} keys"
  if t.name == "tuple":
    return "list(" + ", ".join(type_name(a) for a in t.args) + ")"
  if t.name == "optional":
    return f"{type_name(t.element)} or NULL"
  raise AssertionError(t)


def string_literal(text: str) -> str:
  return '"' + literals.escape(text, _unicode_escape) + '"'


def _unicode_escape(code: int) -> str:
  # Braces: a following hex digit is not taken as part of it.
  return f"\\u{{{code:04x}}}" if code < 0x10000 else f"\\U{{{code:08x}}}"


def _number(t: Type, value) -> str:
  if t.name == "int":
    return str(value)  # a double: exact up to 2^53
  if math.isnan(value):
    return "NaN"
  if math.isinf(value):
    return "Inf" if value > 0 else "-Inf"
  return repr(value)


def literal(t: Type, value) -> str:
  """An R expression for `value` of type `t`."""
  if value is None:
    return "NULL"
  name = t.name
  if name == "bool":
    return "TRUE" if value else "FALSE"
  if name in ("int", "float"):
    return _number(t, value)
  if name == "string":
    return string_literal(value)
  if name == "optional":
    return literal(t.element, value)
  if name in ("list", "set"):
    items = sorted(value) if name == "set" else list(value)
    scalar = _scalar_of(t.element)
    if scalar is None:
      return "list(" + ", ".join(literal(t.element, v) for v in items) + ")"
    if not items:
      return _EMPTY_VECTORS[scalar]
    return "c(" + ", ".join(_NA[scalar] if v is None else literal(Type(scalar), v)
                            for v in items) + ")"
  if name == "tuple":
    return "list(" + ", ".join(literal(a, v) for a, v in zip(t.args, value)) + ")"
  if name == "map":
    # structure(): `list("" = 1)` is a syntax error, and an empty map still has (no) names.
    values = ", ".join(literal(t.args[1], v) for v in value.values())
    names = ", ".join(string_literal(str(k)) for k in value)
    return f"structure(list({values}), names = {'c(' + names + ')' if value else 'character(0)'})"
  raise AssertionError(t)


def type_tree(t: Type) -> str:
  """The type as nested lists the harness walks: list("list", list("int"))."""
  return "list(" + ", ".join([f'"{t.name}"'] + [type_tree(a) for a in t.args]) + ")"


# The harness's body, run in an environment whose parent is the base package (module docstring):
# compiled once on the host (`compiled_harness`), or carried as source (`_HARNESS`) without that.
_HARNESS_BODY = r'''{
  fail <- function(what, v) {
    got <- if (is.null(v)) "NULL" else if (is.atomic(v) && length(v) == 1L)
      paste(class(v)[1], substr(format(v), 1L, 40L)) else paste(class(v)[1], "of length", length(v))
    stop(paste0("expected ", what, ", got ", got), call. = FALSE)
  }
  cases <- get("codelm_cases", envir = globalenv())
  return_type <- get("codelm_return_type", envir = globalenv())
  prefix <- get("codelm_prefix", envir = globalenv())
  is_na <- function(v) is.na(v) && !(is.double(v) && is.nan(v))  # NA, but a NaN is a float
  is_null <- function(v) is.null(v) || (is.atomic(v) && length(v) == 1L && is_na(v))
  one <- function(v, test, what) {  # a length-1 vector (or a list holding one) that passes `test`
    if (is.list(v) && length(v) == 1L) v <- v[[1L]]
    if (!is.atomic(v) || length(v) != 1L || !test(v)) fail(what, v)
    if (is_na(v)) fail(what, v)
    v
  }
  number <- function(x) {
    if (is.nan(x)) return("NaN")
    if (x == Inf) return("Infinity")
    if (x == -Inf) return("-Infinity")
    for (digits in 15:16) {  # the shortest form that reads back as the same double
      text <- sprintf("%.*g", digits, x)
      if (as.numeric(text) == x) return(text)
    }
    sprintf("%.17g", x)
  }
  whole <- function(x, what) {
    x <- as.double(x)
    if (!is.finite(x) || x != round(x) || x < -2^63 || x >= 2^63) fail(what, x)
    sprintf("%.0f", x)
  }
  text <- function(s) {  # JSON string, ASCII only
    cp <- utf8ToInt(enc2utf8(s))
    if (anyNA(cp)) stop("the string is not valid UTF-8", call. = FALSE)
    out <- character(length(cp))
    plain <- cp >= 32L & cp < 127L & cp != 34L & cp != 92L
    out[plain] <- intToUtf8(cp[plain], multiple = TRUE)
    out[cp == 34L] <- "\\\""
    out[cp == 92L] <- "\\\\"
    bmp <- cp < 32L | (cp >= 127L & cp < 65536L)
    out[bmp] <- sprintf("\\u%04x", cp[bmp])
    astral <- cp >= 65536L
    if (any(astral)) {
      h <- cp[astral] - 65536L
      out[astral] <- sprintf("\\u%04x\\u%04x", 55296L + h %/% 1024L, 56320L + h %% 1024L)
    }
    paste0("\"", paste(out, collapse = ""), "\"")
  }
  is_scalar <- function(t) t[[1L]] %in% c("bool", "int", "float", "string") ||
    (t[[1L]] == "optional" && t[[2L]][[1L]] %in% c("bool", "int", "float", "string"))
  items <- function(t, v, what) {  # the elements of a vector or list, each encoded by type t
    if (is.null(v)) return(character(0))
    if (!(is.list(v) || (is.atomic(v) && is_scalar(t)))) fail(what, v)
    vapply(seq_along(v), function(i) enc(t, v[[i]]), "")
  }
  key <- function(t, k) {
    if (is.na(k)) fail("a named entry for every key", k)
    if (t[[1L]] == "string") return(text(k))
    whole(suppressWarnings(as.numeric(k)), "a whole number as key")
  }
  enc <- function(t, v) {
    name <- t[[1L]]
    if (name == "optional") {
      # character(0) and the like are R's "nothing" too, where the value would be a scalar.
      empty <- is.atomic(v) && length(v) == 0L && is_scalar(t[[2L]])
      return(if (is_null(v) || empty) "null" else enc(t[[2L]], v))
    }
    switch(name,
      bool = if (one(v, is.logical, "logical")) "true" else "false",
      int = whole(one(v, is.numeric, "a whole number"), "a whole number"),
      float = number(as.double(one(v, is.numeric, "numeric"))),
      string = text(one(v, is.character, "character")),
      list = , set = paste0("[", paste(items(t[[2L]], v, "a vector or list"), collapse = ","), "]"),
      tuple = {
        if (!(is.list(v) || is.atomic(v)) || length(v) != length(t) - 1L)
          fail(paste0("a list of ", length(t) - 1L), v)
        parts <- vapply(seq_along(v), function(i) enc(t[[i + 1L]], v[[i]]), "")
        paste0("[", paste(parts, collapse = ","), "]")
      },
      map = {
        if (is.environment(v)) {
          keys <- sort(ls(v, all.names = TRUE))
          v <- mget(keys, envir = v)
        }
        if (is.null(v) || length(v) == 0L) return("[]")
        if (!(is.list(v) || is.atomic(v)) || is.null(names(v))) fail("a named list", v)
        keys <- names(v)
        parts <- vapply(seq_along(v), function(i)
          paste0("[", key(t[[2L]], keys[[i]]), ",", enc(t[[3L]], v[[i]]), "]"), "")
        paste0("[", paste(parts, collapse = ","), "]")
      },
      stop(paste("unknown type", name)))
  }
  one_line <- function(s) substr(gsub("[\r\n]+", " ", paste(s, collapse = " ")), 1L, 300L)
  out <- stdout()
  for (case in cases) {
    line <- tryCatch(paste0("ok ", enc(return_type, case[[2L]]())),
                     error = function(e) paste0("exception ", one_line(conditionMessage(e))))
    cat("\n", prefix, case[[1L]], " ", line, "\n", sep = "", file = out)
    flush(out)
  }
}'''
# Without the cache, as every program carried it before: `local` evaluates the body as source, and
# the JIT compiles its closures as they are called, in every program.
_HARNESS = "\nlocal(envir = new.env(parent = baseenv()), " + _HARNESS_BODY + ")\n"


# ---- the compiled harness (module docstring) ----------------------------------------------------

_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# The directory of the compiled harnesses, one per key (CODELM_TOOLCHAINS overrides <repo root>/.toolchains).
CACHE_DIR = os.path.join(os.environ.get("CODELM_TOOLCHAINS") or os.path.join(_REPO_ROOT, ".toolchains"), "r")
HARNESS_FILE = "harness.rds"
# The options R's JIT compiles a closure with (its default optimisation level): the compiled harness
# is the code the JIT would have made of it.
COMPILE_OPTIONS = "list(optimize = 2L)"
# What the bytecode depends on besides the harness and the options: R's build (the evaluator and its
# bytecode version), the compiler package, and base (whose functions level 2 inlines).
_R_FILES = (R_BINARY, f"{R_HOME}/lib/libR.so", f"{R_HOME}/library/compiler/R/compiler.rdb",
            f"{R_HOME}/library/base/R/base.rdb")
# Run on the host in a fresh folder holding harness.R (the body) and sample.R (globals of a sample
# program). It compiles the body, saves it, and checks the saved code before it is used: it is
# bytecode, every closure it defines is compiled, and the sample's records are those of the body
# evaluated uncompiled (as `local` does it in the inline form).
_BUILD_SCRIPT = f"""
body <- parse(file = "harness.R", keep.source = FALSE)
stopifnot(length(body) == 1L)
body <- body[[1L]]
code <- compiler::compile(body, env = new.env(parent = baseenv()), options = {COMPILE_OPTIONS})
stopifnot(typeof(code) == "bytecode")
saveRDS(code, "{HARNESS_FILE}")
loaded <- readRDS("{HARNESS_FILE}")
stopifnot(typeof(loaded) == "bytecode")
source("sample.R")
records <- function(code, env) paste(capture.output(eval(code, env)), collapse = "\\n")
compiled_env <- new.env(parent = baseenv())
compiled <- records(loaded, compiled_env)
inline <- records(body, new.env(parent = baseenv()))
if (!identical(compiled, inline) || !grepl("ok ", compiled, fixed = TRUE) ||
    !grepl("exception ", compiled, fixed = TRUE))
  stop("the compiled harness's records differ from the harness's: ", compiled, " versus ", inline)
for (f in Filter(is.function, mget(ls(compiled_env, all.names = TRUE), envir = compiled_env)))
  stopifnot(typeof(.Internal(bodyCode(f))) == "bytecode")
"""
_LOG = logging.getLogger(__name__)
_harness_lock = threading.Lock()
_harness_path: list[str] = []  # the compiled harness found or built by this process


def _sample_globals() -> str:
  """codelm_prefix, codelm_return_type and codelm_cases of a sample program: a value of nested
  types (NA, a non-ASCII string, a map with int keys, -Inf), an error and a value of a wrong type."""
  t = parse_type("tuple<list<optional<string>>,map<int,float>,bool>")
  value = literal(t, (["a\u00e9\U0001F600", None], {1: 1.5, -2: float("-inf")}, True))
  return (f"codelm_prefix <- {string_literal(base.RECORD_PREFIX)}\n"
          f"codelm_return_type <- {type_tree(t)}\n"
          f'codelm_cases <- list(list(0, function() {value}), list(1, function() stop("boom")),\n'
          f'                     list(2, function() "x"))\n')


def _cache_key() -> str:
  """Changes with R's build, the harness, the options and the build script: a new key is a new folder."""
  files = []
  for path in _R_FILES:
    try:
      stat = os.stat(path)
      files.append((path, stat.st_size, stat.st_mtime_ns))
    except OSError:
      files.append((path, None, None))
  text = repr((files, COMPILE_OPTIONS, _HARNESS_BODY, _BUILD_SCRIPT, _sample_globals()))
  return hashlib.sha256(text.encode()).hexdigest()[:16]


def compiled_harness() -> str | None:
  """CACHE_DIR/<key>/harness.rds, the harness's body compiled to R bytecode, built on first use
  (and again if it has gone: another scorer of a different harness removes it as stale); None when
  it cannot be, and programs then carry the harness's source (`_HARNESS`)."""
  with _harness_lock:
    if _harness_path and os.path.exists(_harness_path[0]):
      return _harness_path[0]
    _harness_path.clear()
    path = _build_harness()
    if path is not None:
      _harness_path.append(path)
    return path


def _build_harness() -> str | None:
  if not os.access(R_BINARY, os.X_OK):
    return None
  final = os.path.join(CACHE_DIR, _cache_key())
  target = os.path.join(final, HARNESS_FILE)
  # main.R names the file in an R string: a path R might read in another encoding gets the inline form.
  if not all(32 <= ord(c) < 127 for c in target):
    return None
  if os.path.exists(target):
    return target
  started = time.monotonic()
  try:
    # The loser of two concurrent builds drops its own (cache.publish).
    cache.publish(CACHE_DIR, final, _compile_harness)
  except (OSError, subprocess.SubprocessError) as error:
    if os.path.exists(target):  # another scorer's rename came first
      return target
    _LOG.warning("the R harness failed to compile (programs carry its source instead): %s", error)
    return None
  _LOG.info("compiled the R harness into %s in %.1f s", target, time.monotonic() - started)
  _remove_stale(final)
  return target


def _compile_harness(work: str) -> None:
  """harness.rds into `work`: the harness's body compiled to bytecode by R itself."""
  files = {"harness.R": _HARNESS_BODY + "\n", "sample.R": _sample_globals(), "build.R": _BUILD_SCRIPT}
  for name, text in files.items():
    with open(os.path.join(work, name), "w", encoding="utf-8") as f:
      f.write(text)
  done = subprocess.run([R_BINARY, "--vanilla", "--no-echo", "--file=build.R"], cwd=work,
                        env={**R_ENV, "PATH": "/usr/bin:/bin"}, capture_output=True, text=True, timeout=300)
  if done.returncode != 0:
    raise OSError(f"R exited with status {done.returncode}: {done.stderr[-2000:]}")
  for name in ("sample.R", "build.R"):
    os.remove(os.path.join(work, name))


def _remove_stale(current: str) -> None:
  """Harnesses of an earlier R build or harness text (a build- folder may be another scorer's, at work)."""
  try:
    names = os.listdir(CACHE_DIR)
  except OSError:
    return
  for name in names:
    path = os.path.join(CACHE_DIR, name)
    if path != current and len(name) == 16 and os.path.isdir(path):
      shutil.rmtree(path, ignore_errors=True)


# MultiPL-E's Rscript environment: R_ENV with R's own default packages.
FOREIGN_ENV = {k: v for k, v in R_ENV.items() if k != "R_DEFAULT_PACKAGES"}


class R(base.Renderer):
  name = "r"
  display_name = "R"
  value_literal = staticmethod(literal)
  foreign_timeout_s = 5.0
  toolchain = base.Toolchain(binaries=(RSCRIPT, R_BINARY), version_command=(RSCRIPT, "--version"),
                             # R_HOME/etc links to /etc/R: Renviron, ldpaths.
                             read_only=("/etc/R", CACHE_DIR))
  naming = staticmethod(base.snake_case)
  reserved = RESERVED

  def signature_with_docstring(self, question: Question) -> str:
    names = self.params(question)
    doc = [("#' " + line).rstrip() for line in base.doc_lines(question.description)]
    if doc:  # the blank line between the description and the tags
      doc.append("#'")
    doc += [f"#' @param {n} {type_name(p.type)}" for n, p in zip(names, question.params)]
    doc.append(f"#' @return {type_name(question.return_type)}")
    return ("\n".join(doc) + f"\n{self.function_name(question)} <- function"
            f"({', '.join(names)}) {{\n")

  def stub(self, question: Question) -> str:
    value = literal(question.return_type, default_value(question.return_type))
    return f"  return({value})\n}}\n"

  def program(self, question: Question, completion: str, harness: str | None = "") -> base.Program:
    """`harness`: the compiled harness's file ("" looks it up, None: the program carries the source)."""
    return self._program(question, self.signature_with_docstring(question) + completion,
                         self.function_name(question), harness)

  def whole_program(self, question: Question, code: str, harness: str | None = "") -> base.Program:
    return self._program(question, code, self.entry_name(question), harness)  # BabelCode's head is empty

  def _program(self, question: Question, source: str, name: str, harness: str | None) -> base.Program:
    """`source` (it defines `name`), then the harness that calls `name` on every test case."""
    cases = ",\n".join(f"  list({idx}, function() {name}({args}))"
                       for idx, args in base.render_cases(question, literal))
    if harness == "":
      harness = compiled_harness()
    if harness:
      # base:: throughout: a completion's global `eval` or `readRDS` does not run in its place.
      run = (f"base::invisible(base::eval(base::readRDS({string_literal(harness)}), "
             "base::new.env(parent = base::baseenv())))\n")
    else:
      run = _HARNESS
    text = (source + "\n\n"
            f"codelm_prefix <- {string_literal(base.RECORD_PREFIX)}\n"
            f"codelm_return_type <- {type_tree(question.return_type)}\n"
            f"codelm_cases <- list(\n{cases}\n)\n" + run)
    return base.Program(files={"main.R": text}, env=R_ENV,
                        run=(R_BINARY, "--vanilla", "--no-echo", "--file=main.R"))

  def foreign(self, text: str) -> base.Foreign:
    """eval_r: Rscript's flags and environment, with R's default packages as Rscript has them."""
    return base.Foreign("main.r", (R_BINARY, "--no-echo", "--no-restore", "--file=main.r"), "r", env=FOREIGN_ENV)


RENDERER = R()
