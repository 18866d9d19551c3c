"""Java: an instance method of `class Solution` with a Javadoc comment, as BabelCode writes it.

Types: bool -> boolean, int -> long, float -> double, string -> String, list -> List<T>, set ->
Set<T>, map -> Map<K, V>, optional -> Optional<T>, tuple -> org.javatuples' Pair/Triplet/... (as
MultiPL-E's Java prompts use; a minimal copy of those classes comes with the harness). Scalars are
primitives at the top of a signature and boxed inside generics.

The prompt ends after the method's opening brace. A completion is the method body, its closing
brace, any helper methods, and the class's closing brace at column 0, where it is cut
(`stop_sequences`). The test cases follow in a second class, `Main`.

A whole program (`whole_program`) is laid out as BabelCode's: its head's imports, the harness's class,
then the code (so the code's own imports do not compile, as there), in a file named after the code's
public top-level class (BabelCode's `java file.java` takes any); arguments have BabelCode's boxed types.

Time per program is dominated by javac (a JVM loading and warming up the compiler). Three things
cut a compile from about 0.6 to 0.37 CPU seconds (the run takes 0.05): the fixed part of the harness (`CodelmRuntime`: the
JSON encoder and the record loop) and the tuple classes are compiled once on the host, so javac
only sees the solution and the cases; a dynamic class-data-sharing archive of javac's own classes,
dumped on the host at the same time; C1-only JIT and the serial collector. All of it lives in
CACHE_DIR, bound read-only into the sandbox; when it cannot be built the program carries the
runtime's sources instead. String concatenation is compiled inline and the harness has no lambdas
(no invokedynamic bootstraps at run time).

Batched (sandbox/batching.py), a build with per-member reports: warm, javac compiles a program in
about 0.03 s, so a build is one JVM running the batch driver (java_batch.java, compiled once on the
host into CACHE_DIR with a class-data archive of a driver run), which compiles each member as a javac
compilation of its own: a fresh javac context and file manager, the options of the program alone,
its own source and its own output folder m<k>/out as the only paths javac reads or writes besides
the runtime classes. Per member it writes javac's exit status and diagnostics (`Build.reports`),
byte for byte what javac prints for that program alone, and member k runs in its own sandbox with
its own files and run command, m<k>/out's class files bound at the box's root where its own javac
would have written them. Every completion may join (`batchable`): no Java source makes javac run
code (annotation processing is off) or read or write a file but its own, and nothing one member's
compilation leaves in javac's state is seen by the next. What could depend on sharing the JVM
(an abnormal end, nesting near javac's stack limit, a slow compile, classes that would outgrow the
box alone) gets no report and compiles alone (java_batch.java says how each is told). A build of 28
programs: about 0.45 s of JVM start and first compile, then 0.03 to 0.05 s per member; each run then
costs a JVM start (0.04 s) and a sandbox (0.01 s), now the larger part.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import math
import os
import re
import shutil
import subprocess
import tempfile
import threading
import zipfile

from sandbox.renderers import base, cache, java_runtime, lexing, literals
from sandbox.typed import Param, Question, TestCase, Type, default_value, parse_type, walk_types

JAVA_HOME = "/usr/lib/jvm/java-17-openjdk-amd64"
JAVA = f"{JAVA_HOME}/bin/java"
JAVAC = f"{JAVA_HOME}/bin/javac"
# The precompiled runtime and javac's class-data archive (built on the host, bound read-only).
CACHE_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                         ".toolchains", "cache", "java")

_LOG = logging.getLogger(__name__)

# Under RLIMIT_AS 2 GiB the JVM's default reservations (a quarter of RAM as heap, 1 GiB class
# space, 240 MB code cache) do not fit; C1 only and the serial collector start fastest.
JVM_FLAGS = ("-Xmx512m", "-XX:CompressedClassSpaceSize=64m", "-XX:ReservedCodeCacheSize=64m",
             "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-XX:-UsePerfData", "-Xshare:auto")
JAVAC_OPTIONS = ("-encoding", "UTF-8", "-nowarn", "-Xlint:none", "-g:none", "-proc:none",
                 "-implicit:none", "-XDstringConcat=inline")

RESERVED = frozenset("""
abstract assert boolean break byte case catch char class const continue default do double else enum
extends final finally float for goto if implements import instanceof int interface long native new
package private protected public return short static strictfp super switch synchronized this throw
throws transient try void volatile while true false null var yield record sealed permits
""".split()) | {"_"}

_BOXED = {"bool": "Boolean", "int": "Long", "float": "Double", "string": "String"}
_PRIMITIVE = {"bool": "boolean", "int": "long", "float": "double", "string": "String"}
# org.javatuples' class names by arity.
TUPLE_CLASSES = ("Unit", "Pair", "Triplet", "Quartet", "Quintet", "Sextet", "Septet", "Octet",
                 "Ennead", "Decade")
IMPORTS = ("java.util.*", "java.util.function.*", "java.util.stream.*", "java.math.*")


def tuple_class(t: Type) -> str:
  if not 1 <= len(t.args) <= len(TUPLE_CLASSES):
    raise ValueError(f"Java: tuples of {len(t.args)} items are not supported (1 to 10)")
  return TUPLE_CLASSES[len(t.args) - 1]


def type_name(t: Type, boxed: bool = False) -> str:
  """The Java type; `boxed` inside generics (List<Long>), primitive at the top (long)."""
  if t.name in _BOXED:
    return (_BOXED if boxed else _PRIMITIVE)[t.name]
  args = ", ".join(type_name(a, boxed=True) for a in t.args)
  if t.name == "tuple":
    return f"{tuple_class(t)}<{args}>"
  return {"list": f"List<{args}>", "set": f"Set<{args}>", "map": f"Map<{args}>",
          "optional": f"Optional<{args}>"}[t.name]


_NAMED_ESCAPES = {**literals.NEWLINE_TAB_RETURN, "\b": "\\b", "\f": "\\f"}


def string_literal(text: str) -> str:
  """A Java string literal in plain ASCII. Control characters use octal escapes, not \\uXXXX:
  javac translates \\u escapes before lexing, so \\u000a would end the line inside the literal."""
  return '"' + literals.escape(text, _numeric_escape, named=_NAMED_ESCAPES) + '"'


def _numeric_escape(code: int) -> str:
  if code < 0x20 or code == 0x7f:
    return f"\\{code:03o}"
  if code <= 0xFFFF:
    return f"\\u{code:04x}"
  code -= 0x10000  # a UTF-16 surrogate pair
  return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def literal(t: Type, value) -> str:
  """A Java expression of exactly type `type_name(t)` (explicit type arguments everywhere, since
  inference through nested generic calls fails for e.g. a list of empty lists)."""
  name = t.name
  if name == "bool":
    return "true" if value else "false"
  if name == "int":
    return "Long.MIN_VALUE" if value == -(2 ** 63) else f"{value}L"
  if name == "float":
    if math.isnan(value):
      return "Double.NaN"
    if math.isinf(value):
      return "Double.POSITIVE_INFINITY" if value > 0 else "Double.NEGATIVE_INFINITY"
    return repr(float(value))
  if name == "string":
    return string_literal(value)
  if name == "optional":
    element = type_name(t.element, boxed=True)
    return (f"Optional.<{element}>empty()" if value is None
            else f"Optional.<{element}>of({literal(t.element, value)})")
  if name in ("list", "set"):
    element = type_name(t.element, boxed=True)
    items = value if name == "list" else sorted(value)
    concrete = "ArrayList" if name == "list" else "HashSet"
    if not items:
      return f"new {concrete}<{element}>()"
    return (f"new {concrete}<{element}>(Arrays.<{element}>asList("
            + ", ".join(literal(t.element, v) for v in items) + "))")
  if name == "map":
    key, val = (type_name(a, boxed=True) for a in t.args)
    pairs = ", ".join(f"{literal(t.args[0], k)}, {literal(t.args[1], v)}" for k, v in value.items())
    return f"CodelmRuntime.<{key}, {val}>mapOf({pairs})"
  if name == "tuple":
    return (f"new {type_name(t, boxed=True)}("
            + ", ".join(literal(a, v) for a, v in zip(t.args, value)) + ")")
  raise AssertionError(t)


def default_literal(t: Type) -> str:
  """The default value as a Java expression that needs nothing from the harness."""
  if t.name == "map":
    key, val = (type_name(a, boxed=True) for a in t.args)
    return f"new HashMap<{key}, {val}>()"
  if t.name == "tuple":
    return (f"new {type_name(t, boxed=True)}("
            + ", ".join(default_literal(a) for a in t.args) + ")")
  return literal(t, default_value(t))


def type_tree(t: Type) -> str:
  """The type as the runtime's tree: new CodelmRuntime.Ty("list", new CodelmRuntime.Ty("int"))."""
  args = "".join(", " + type_tree(a) for a in t.args)
  return f'new CodelmRuntime.Ty("{t.name}"{args})'


# ---- whole programs (Renderer.whole_program) --------------------------------------------------

# BabelCode's Java head (templates/Java/header.txt).
WHOLE_HEAD = "import static java.util.Map.entry;\nimport java.util.*;\nimport java.lang.*;\n"
# The class BabelCode's driver instantiates: a question's entry_cls_name, which is always BabelCode's
# default (typed questions do not carry one).
ENTRY_CLASS = "Solution"
WHOLE_MAIN = "CodelmMain"
# BabelCode's Java types (its schema_parsing Java spec): every leaf boxed, at the top of a signature too.
DECLARED = {"boolean": "Boolean", "integer": "Integer", "long": "Long", "float": "Float", "double": "Double",
            "character": "Character", "string": "String"}
_PUBLIC_TYPE = re.compile(r"(?<![\w$])public\s+(?:(?:abstract|final|static|strictfp|sealed|non-sealed)\s+)*"
                          r"(?:class|interface|enum|record|@\s*interface)\s+([A-Za-z_$][\w$]*)")


def declared_type(t: Type) -> str:
  """A declared type (leaves named as typed.DECLARED_SCALARS) as BabelCode writes it in Java; a tuple
  (which BabelCode has not in Java) as the completions' org.javatuples class, named in full."""
  if t.name in DECLARED:
    return DECLARED[t.name]
  args = ", ".join(declared_type(a) for a in t.args)
  if t.name == "tuple":
    return f"org.javatuples.{tuple_class(t)}<{args}>"
  return {"list": f"ArrayList<{args}>", "set": f"HashSet<{args}>", "map": f"Map<{args}>"}[t.name]


def declared_literal(t: Type, value) -> str:
  """A Java expression of exactly `declared_type(t)` (or its primitive, boxed where it lands) for a
  typed value of the same shape, written as BabelCode writes its literals (1, 1L, 1.5f, 1.5)."""
  name = t.name
  if name == "integer":  # out of range: wrapped, as C++'s static_cast (BabelCode's would not compile)
    return str(value) if -2 ** 31 <= value < 2 ** 31 else f"(int) {literal(Type('int'), value)}"
  if name == "long":
    return literal(Type("int"), value)
  if name == "float":
    if not math.isfinite(value):
      return "Float.NaN" if math.isnan(value) else f"Float.{'POSITIVE' if value > 0 else 'NEGATIVE'}_INFINITY"
    return f"{value!r}f" if literals.single_literal_keeps(value) else f"(float) {value!r}"
  if name == "double":
    return literal(Type("float"), value)
  if name == "boolean":
    return "true" if value else "false"
  if name == "character":  # its first UTF-16 unit, as a Java char holds
    unit = value.encode("utf-16-le", "surrogatepass")[:2]
    return f"(char) {int.from_bytes(unit, 'little')}"
  if name == "string":
    return string_literal(value)
  if name in ("list", "set"):
    element = declared_type(t.element)
    items = value if name == "list" else sorted(value)
    if not items:
      return f"new {declared_type(t)}()"
    return (f"new {declared_type(t)}(Arrays.<{element}>asList("
            + ", ".join(declared_literal(t.element, v) for v in items) + "))")
  if name == "map":  # read-only, as BabelCode's Map.ofEntries, but in the test's order
    key, val = (declared_type(a) for a in t.args)
    pairs = ", ".join(f"{declared_literal(t.args[0], k)}, {declared_literal(t.args[1], v)}" for k, v in value.items())
    return f"Collections.<{key}, {val}>unmodifiableMap(CodelmRuntime.<{key}, {val}>mapOf({pairs}))"
  if name == "tuple":
    return f"new {declared_type(t)}(" + ", ".join(declared_literal(a, v) for a, v in zip(t.args, value)) + ")"
  raise AssertionError(t)


def declared_tree(typed: Type, declared: Type) -> str:
  """type_tree of a whole program's return: the typed return type (its optional kept), with a
  declared character as the runtime's "char" (a Character, recorded as a string)."""
  if typed.name == "optional":
    return f'new CodelmRuntime.Ty("optional", {declared_tree(typed.element, declared)})'
  if declared.name == "character":
    return 'new CodelmRuntime.Ty("char")'
  args = "".join(", " + declared_tree(a, d) for a, d in zip(typed.args, declared.args))
  return f'new CodelmRuntime.Ty("{typed.name}"{args})'


def public_type(code: str) -> str | None:
  """The name of the code's public top-level type, if any: javac wants it in a file of that name."""
  text = lexing.code_only(code) or code  # unlexable (a text block): the raw text, at worst misread
  depth, done = 0, 0
  for match in _PUBLIC_TYPE.finditer(text):
    depth += text.count("{", done, match.start()) - text.count("}", done, match.start())
    done = match.start()
    if depth == 0:
      return match.group(1)
  return None


def doc_comment(description: str, indent: str = "    ") -> str:
  """The description as a /** ... */ block; none without one (Renderer.signature)."""
  if not base.doc_lines(description):
    return ""
  lines = []
  for line in base.doc_lines(description):
    line = _even_backslashes_before_u(line.replace("*/", "*\\/"))
    lines.append(f"{indent} * {line}".rstrip())
  return f"{indent}/**\n" + "\n".join(lines) + f"\n{indent} */\n"


def _even_backslashes_before_u(text: str) -> str:
  """javac reads `\\u` as a Unicode escape even in comments (an odd run of backslashes before u);
  doubling the run's last backslash keeps a description's text from breaking compilation."""
  return re.sub(r"(\\+)(?=u)", lambda m: m.group(1) + ("\\" if len(m.group(1)) % 2 else ""), text)


def runtime_sources() -> dict[str, str]:
  """CodelmRuntime and org.javatuples' Tuple, Unit, Pair, ..., Decade: path -> Java source. Under
  their package's path: javac looks for an imported class's source there."""
  files = {"CodelmRuntime.java": java_runtime.RUNTIME, "org/javatuples/Tuple.java": java_runtime.TUPLE_BASE}
  for n, cls in enumerate(TUPLE_CLASSES, start=1):
    letters = [f"A{i}" for i in range(n)]
    params = ", ".join(letters)
    formals = ", ".join(f"{a} value{i}" for i, a in enumerate(letters))
    actuals = ", ".join(f"value{i}" for i in range(n))
    getters = "".join(f"  @SuppressWarnings(\"unchecked\")\n"
                      f"  public {a} getValue{i}() {{ return ({a}) getValue({i}); }}\n"
                      for i, a in enumerate(letters))
    files[f"org/javatuples/{cls}.java"] = (
        "package org.javatuples;\n\n"
        f"public final class {cls}<{params}> extends Tuple {{\n"
        f"  public {cls}({formals}) {{ super(new Object[] {{{actuals}}}); }}\n"
        f"  public static <{params}> {cls}<{params}> with({formals}) {{\n"
        f"    return new {cls}<{params}>({actuals});\n  }}\n{getters}}}\n")
  return files


def _cache_key() -> str:
  """Changes with the JDK build, the flags and the runtime's sources (a stale class-data archive
  would be silently ignored by the JVM; stale runtime classes would not)."""
  try:
    modules = os.stat(f"{JAVA_HOME}/lib/modules")
    jdk = f"{modules.st_size}:{modules.st_mtime_ns}"
  except OSError:
    jdk = "missing"
  text = repr((jdk, JVM_FLAGS, JAVAC_OPTIONS, sorted(runtime_sources().items())))
  return hashlib.sha256(text.encode()).hexdigest()[:16]


_runtime_lock = threading.Lock()


@functools.cache
def runtime_dir() -> str | None:
  """CACHE_DIR/<key>: classes/ (CodelmRuntime, org.javatuples) and javac.jsa (javac's class-data
  archive, dumped while compiling a sample program against those classes). Built once on the host;
  None when it cannot be (the programs then compile the runtime themselves, more slowly)."""
  final = os.path.join(CACHE_DIR, _cache_key())
  with _runtime_lock:
    if os.path.exists(os.path.join(final, "javac.jsa")):
      return final
    try:
      cache.publish(CACHE_DIR, final, _build_runtime)
    except (OSError, subprocess.SubprocessError):
      if not os.path.exists(os.path.join(final, "javac.jsa")):  # another scorer may have won
        return None
    return final


def _write(directory: str, files: dict[str, str]) -> None:
  for name, text in files.items():
    path = os.path.join(directory, name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
      f.write(text)


def _build_runtime(work: str) -> None:
  """runtime_dir's contents, into `work`."""
  classes = os.path.join(work, "classes")
  _write(os.path.join(work, "runtime"), runtime_sources())
  _run(os.path.join(work, "runtime"), [JAVAC, *(f"-J{f}" for f in JVM_FLAGS), *JAVAC_OPTIONS,
                                       "-d", classes, *runtime_sources()])
  sample = _sample_program(classes)
  _write(os.path.join(work, "sample"), sample.files)
  javac = sample.compile[0]
  _run(os.path.join(work, "sample"), [javac[0], f"-J-XX:ArchiveClassesAtExit={work}/javac.jsa", *javac[1:]])
  shutil.rmtree(os.path.join(work, "sample"))


def _run(cwd: str, argv: list[str]) -> None:
  subprocess.run(argv, cwd=cwd, check=True, capture_output=True, timeout=300)


def _sample_program(classes: str) -> base.Program:
  """A program using every type, compiled against `classes`, whose javac run the archive records."""
  types = ["list<map<string,float>>", "set<int>", "optional<tuple<bool,string>>"]
  question = Question("sample", "sample", tuple(Param(f"p{i}", parse_type(t)) for i, t in enumerate(types)),
                      parse_type("tuple<int,list<optional<string>>>"), "A sample.",
                      (TestCase(0, ([{"a": 1.5}], frozenset({1, 2}), (True, "x")), (1, ["y", None])),))
  body = ("        Map<String, Long> counts = new HashMap<>();\n"
          "        String joined = p0.stream().map(m -> String.valueOf(m.size())).collect(Collectors.joining(\",\"));\n"
          "        counts.put(joined, (long) p1.size());\n"
          "        return Pair.with(0L, new ArrayList<>());\n    }\n}")
  return RENDERER.program(question, body, runtime=classes)


# ---- batched compilation (sandbox/batching.py; module docstring) ---------------------------

DRIVER_SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "java_batch.java")
DRIVER_CLASS = "CodelmJavacBatch"
DRIVER_JAR = "codelm-javac-batch.jar"
DRIVER_ARCHIVE = "javac-batch.jsa"
# The driver reads javac's own exit status (JavacTaskImpl.doCall: the javax.tools API only says
# whether there were errors, not whether javac ended abnormally), which jdk.compiler does not export.
DRIVER_EXPORTS = ("--add-exports", "jdk.compiler/com.sun.tools.javac.api=ALL-UNNAMED",
                  "--add-exports", "jdk.compiler/com.sun.tools.javac.main=ALL-UNNAMED")

_driver_lock = threading.Lock()


@functools.cache
def batch_dir() -> str | None:
  """CACHE_DIR/batch-<key>/: the batch driver (java_batch.java compiled into a jar: the JVM archives
  application classes from jars only) and the class-data archive of a driver run, javac's classes
  included (a build's JVM start and first compile: 0.7 -> 0.5 CPU seconds). Built once on the host;
  None when it cannot be (every program then compiles on its own)."""
  runtime = runtime_dir()
  if runtime is None:
    return None
  try:
    with open(DRIVER_SOURCE, "rb") as f:
      source = f.read()
  except OSError:
    return None
  key = hashlib.sha256(repr((os.path.basename(runtime), source, DRIVER_EXPORTS)).encode()).hexdigest()[:16]
  final = os.path.join(CACHE_DIR, f"batch-{key}")
  with _driver_lock:
    try:
      if not os.path.exists(os.path.join(final, DRIVER_JAR)):
        try:
          cache.publish(CACHE_DIR, final, _build_driver)
        except OSError:
          if not os.path.exists(os.path.join(final, DRIVER_JAR)):  # unless another scorer's rename came first
            raise
      if not os.path.exists(os.path.join(final, DRIVER_ARCHIVE)):
        _dump_driver_archive(final, os.path.join(runtime, "classes"))
    except (OSError, subprocess.SubprocessError) as error:
      _LOG.warning("the Java batch driver failed to build (programs compile alone): %s %s", error,
                   (getattr(error, "stderr", None) or b"")[-2000:])
      if not os.path.exists(os.path.join(final, DRIVER_JAR)):  # another scorer may have won the rename
        return None
    _remove_stale_drivers(final)
    return final


def _build_driver(work: str) -> None:
  """The driver's jar, into `work` (driver_path publishes it)."""
  classes = os.path.join(work, "classes")
  _run(work, [JAVAC, *(f"-J{f}" for f in JVM_FLAGS), *DRIVER_EXPORTS, "-encoding", "UTF-8", "-nowarn",
              "-d", classes, DRIVER_SOURCE])
  with zipfile.ZipFile(os.path.join(work, DRIVER_JAR), "w") as jar:
    for name in sorted(os.listdir(classes)):
      jar.write(os.path.join(classes, name), name)
  shutil.rmtree(classes)


def _dump_driver_archive(final: str, runtime_classes: str) -> None:
  """The class-data archive of a driver run over sample programs (one compiling, one not), dumped
  at the jar's final path (the archive records it) and renamed into place."""
  sample = tempfile.mkdtemp(prefix="sample-", dir=CACHE_DIR)
  temporary = os.path.join(final, f"{DRIVER_ARCHIVE}.{os.getpid()}.{threading.get_ident()}.tmp")
  try:
    good = _sample_program(runtime_classes).files["Main.java"]
    _write(sample, {"m0/Main.java": good, "m1/Main.java": good.replace("return Pair", "return Triplet")})
    argv = _driver_argv(final, runtime_classes, 2, archive=False)
    _run(sample, [argv[0], f"-XX:ArchiveClassesAtExit={temporary}", *argv[1:]])
    if not os.path.exists(os.path.join(sample, "m1", "status")):
      raise OSError(f"the driver wrote no reports: {os.listdir(sample)}")
    os.chmod(temporary, 0o444)
    os.replace(temporary, os.path.join(final, DRIVER_ARCHIVE))
  finally:
    shutil.rmtree(sample, ignore_errors=True)
    if os.path.exists(temporary):
      os.remove(temporary)


def _driver_argv(directory: str, runtime_classes: str, count: int, archive: bool = True) -> list[str]:
  """The build's one step: the driver over members m0..m<count-1> with the JVM flags and javac
  options program() compiles with (and the driver's class-data archive, if asked and there)."""
  argv = [JAVA, *JVM_FLAGS, *DRIVER_EXPORTS]
  if archive and os.path.exists(os.path.join(directory, DRIVER_ARCHIVE)):
    argv.append(f"-XX:SharedArchiveFile={os.path.join(directory, DRIVER_ARCHIVE)}")
  return [*argv, "-cp", os.path.join(directory, DRIVER_JAR), DRIVER_CLASS, runtime_classes, str(count),
          *JAVAC_OPTIONS]


def _remove_stale_drivers(current: str) -> None:
  """Drivers of an earlier runtime or driver source (each about 12 MB, mostly its archive)."""
  for name in os.listdir(CACHE_DIR):
    path = os.path.join(CACHE_DIR, name)
    if path != current and name.startswith("batch-") and os.path.isdir(path):
      shutil.rmtree(path, ignore_errors=True)


JAVATUPLES = "/usr/share/java/javatuples-1.2.jar"  # Debian's libjavatuples-java (MultiPL-E's tests use it)


def foreign_classpath() -> str | None:
  """javatuples-1.2.jar, else codelm's precompiled stand-in (with CodelmRuntime, which no program
  names); None when neither exists (the stand-in's sources then come with the program)."""
  if os.path.exists(JAVATUPLES):
    return JAVATUPLES
  found = runtime_dir()
  return found and os.path.join(found, "classes")


class Java(base.Renderer):
  name = "java"
  display_name = "Java"
  value_literal = staticmethod(literal)
  toolchain = base.Toolchain(binaries=(JAVA, JAVAC), version_command=(JAVA, "-version"),
                             read_only=("/etc/java-17-openjdk", CACHE_DIR))
  # The class closes at column 0; everything before it (the method and any helpers) is kept.
  naming = staticmethod(base.camel_case)
  reserved = RESERVED
  convention = "camel"

  def signature_with_docstring(self, question: Question) -> str:
    imports = list(IMPORTS)
    if "tuple" in base.types_in(question):
      imports.append("org.javatuples.*")
    params = ", ".join(f"{type_name(p.type)} {n}" for n, p in zip(self.params(question), question.params))
    return ("".join(f"import {i};\n" for i in imports) + "\nclass Solution {\n"
            + doc_comment(question.description)
            + f"    public {type_name(question.return_type)} {self.function_name(question)}({params}) {{\n")

  def stub(self, question: Question) -> str:
    return f"        return {default_literal(question.return_type)};\n    }}\n}}"

  def program(self, question: Question, completion: str, runtime: str | None = "") -> base.Program:
    """`runtime`: the directory of precompiled runtime classes ("" looks it up, None: none)."""
    name = self.function_name(question)
    cases = base.render_cases(question, literal)
    # One method per case: a JVM method holds at most 64 KB of bytecode.
    dispatch = "".join(f"      case {i}: return case{i}();\n" for i in range(len(cases)))
    methods = "".join(f"\n  static Object case{i}() throws Throwable {{\n"
                      f"    return new Solution().{name}({args});\n  }}\n"
                      for i, (_, args) in enumerate(cases))
    main = ("final class Main implements CodelmRuntime.Cases {\n"
            "  public static void main(String[] args) throws Exception {\n"
            f"    CodelmRuntime.run({type_tree(question.return_type)},\n"
            "        new long[] {" + ", ".join(str(idx) for idx, _ in cases) + "}, new Main());\n  }\n\n"
            "  public Object call(int i) throws Throwable {\n    switch (i) {\n" + dispatch
            + "      default: throw new IllegalStateException(\"no case \" + i);\n    }\n  }\n"
            + methods + "}\n")
    files = {"Main.java": self.signature_with_docstring(question) + completion + "\n\n" + main}
    return self._compiled(files, "Main", runtime)

  def whole_program(self, question: Question, code: str, runtime: str | None = "") -> base.Program:
    """BabelCode's head, the harness's class (as BabelCode's test classes, before the code), the code.
    Each case passes variables of the declared (boxed) types to `new Solution().<entry_name>(...)` and
    its value through a parameter of the declared return type, as BabelCode's driver and
    validateSolution do. `runtime` as for `program`."""
    *params, returns = question.declared
    name = self.entry_name(question)
    ids = [case.idx for case in question.test_cases]
    dispatch = "".join(f"      case {i}: return case{i}();\n" for i in range(len(ids)))
    methods = []
    for i, case in enumerate(question.test_cases):
      args = "".join(f"    {declared_type(t)} a{k} = {declared_literal(t, v)};\n"
                     for k, (t, v) in enumerate(zip(params, case.inputs)))
      call = f"new {ENTRY_CLASS}().{name}({', '.join(f'a{k}' for k in range(len(params)))})"
      methods.append(f"\n  static Object case{i}() throws Throwable {{\n{args}    return returned({call});\n  }}\n")
    main = (f"final class {WHOLE_MAIN} implements CodelmRuntime.Cases {{\n"
            "  public static void main(String[] args) throws Exception {\n"
            f"    CodelmRuntime.run({declared_tree(question.return_type, returns)},\n"
            "        new long[] {" + ", ".join(map(str, ids)) + f"}}, new {WHOLE_MAIN}());\n  }}\n\n"
            "  public Object call(int i) throws Throwable {\n    switch (i) {\n" + dispatch
            + "      default: throw new IllegalStateException(\"no case \" + i);\n    }\n  }\n\n"
            "  // BabelCode's validateSolution(actual, expected): the value converts to the declared type.\n"
            f"  static Object returned({declared_type(returns)} value) {{\n    return value;\n  }}\n"
            + "".join(methods) + "}\n")
    head = WHOLE_HEAD + ("import org.javatuples.*;\n" if any(
        x.name == "tuple" for t in question.declared for x in walk_types(t)) else "")
    files = {f"{public_type(code) or 'Main'}.java": f"{head}\n{main}\n{code}\n"}
    return self._compiled(files, WHOLE_MAIN, runtime)

  def _compiled(self, files: dict[str, str], main: str, runtime: str | None) -> base.Program:
    """javac over `files` against the runtime's classes (or with its sources), then `java main`."""
    if runtime == "":
      found = runtime_dir()
      runtime = found and os.path.join(found, "classes")
    javac = [JAVAC, *(f"-J{f}" for f in JVM_FLAGS)]
    if runtime:
      archive = os.path.join(os.path.dirname(runtime), "javac.jsa")
      if os.path.exists(archive):
        javac.append(f"-J-XX:SharedArchiveFile={archive}")
      classpath = f"{runtime}:."
    else:  # no cache: compile the runtime with the program
      files.update(runtime_sources())
      classpath = "."
    javac += [*JAVAC_OPTIONS, "-d", ".", "-cp", classpath, *sorted(files)]
    return base.Program(files=files, compile=(tuple(javac),),
                        run=(JAVA, *JVM_FLAGS, "-cp", classpath, main))

  def batchable(self, question: Question, completion: str) -> bool:
    """Every completion, once the driver and the runtime classes exist: each member is a javac
    compilation of its own (module docstring), and no Java source makes javac run code, or read or
    write a file but its own, with annotation processing off. Text that cannot be written as UTF-8
    (a lone surrogate) fails to be written at all; it does so alone, not taking a build with it."""
    try:
      completion.encode("utf-8")
    except UnicodeEncodeError:
      return False
    return batch_dir() is not None

  def build(self, jobs) -> base.Build:
    """Member k's program, unchanged, as m<k>/Main.java; the driver compiles each into m<k>/out with
    the options it is compiled with alone, and member k runs as alone with m<k>/out's class files
    bound at its box's root, where its own javac would have written them."""
    directory = batch_dir()
    runtime = runtime_dir()
    assert directory is not None and runtime is not None, "build() without batchable()"
    files, runs, reports = {}, [], []
    for k, (question, completion) in enumerate(jobs):
      program = self.program(question, completion)
      files[f"m{k}/Main.java"] = program.files["Main.java"]
      runs.append(base.Program(files=program.files, run=program.run, artefacts={".": f"m{k}/out"}))
      reports.append((f"m{k}/status", f"m{k}/diagnostics"))
    step = _driver_argv(directory, os.path.join(runtime, "classes"), len(jobs))
    return base.Build(files=files, compile=(tuple(step),), runs=tuple(runs), reports=tuple(reports))

  def foreign(self, text: str) -> base.Foreign:
    """eval_java: javac with javatuples on the classpath (Debian's jar, else codelm's stand-in), then
    `java -ea ... Problem`; the file is program.java, so a `public class Problem` fails, as in
    MultiPL-E's tmp file."""
    classpath = foreign_classpath()
    javac = [JAVAC, *(f"-J{f}" for f in JVM_FLAGS)]
    runtime = runtime_dir()  # javac's class-data archive (javac's own classes: any classpath)
    if runtime and os.path.exists(os.path.join(runtime, "javac.jsa")):
      javac.append(f"-J-XX:SharedArchiveFile={os.path.join(runtime, 'javac.jsa')}")
    stand_in = {} if classpath else {k: v for k, v in runtime_sources().items() if k.startswith("org/")}
    javac += ["-encoding", "UTF8", "-d", ".", "-cp", classpath or ".", "program.java", *sorted(stand_in)]
    return base.Foreign("program.java", (JAVA, "-ea", *JVM_FLAGS, "-cp", f".:{classpath or '.'}", "Problem"),
                        "exit_code", compile=(tuple(javac),), files=stand_in)


RENDERER = Java()
