"""Haskell: a type signature and the first equation's head (`f x y = `), under a Haddock comment.

Two modules: Solution.hs holds the prompt (its imports, the doc comment, the signature) and the
completion; Main.hs imports it qualified and runs the cases, so a completion's top-level names
never clash with the harness's. Types: Bool, Int (64-bit), Double, String, [a], Set.Set a,
Map.Map k v, tuples, Maybe a (a 1-tuple is its element: Haskell has none). Every result is turned
into its JSON text by a type-directed encoder and that text is forced completely (deepseq) inside
the case's `try`, so a lazy `error`, a failed pattern match or a division by zero buried in the value
is that case's exception and the next case still runs.

Whole programs (BabelCode's solutions): Solution.hs is `module Solution where`, BabelCode's header
imports, then the code as given (its own imports, first, join the import block); Main.hs is the same
harness, calling `Solution.<entry>` with each argument annotated with BabelCode's declared type and
the result with the declared return type (integer and long are Integer, float and double Double,
character Char, as BabelCode's driver types them).

Compiled with `ghc -O0 -dynamic` (~0.4 CPU s a program; static linking costs ~0.2 s more). runghc
starts ~0.1 s sooner but interprets the completion (slow on compute-heavy cases) and would report a
type error as a crash at run time instead of a compile error.
The heap is capped below the sandbox's address-space limit (-M) so that running out of memory is a
catchable HeapOverflow in the case that did it, not the RTS's fatal "out of memory".

Batched (sandbox/batching.py): most of those 0.4 s are ghc's fixed cost (reading the package
database, loading the interfaces of base, containers and deepseq while typechecking the harness,
linking), so many programs become one `ghc --make`, linked once: member k's Solution.hs is module
CodelmM<k>.Solution in m<k>/Solution.hs (the same text but for the module's name, so the same
lines), its harness is module CodelmM<k>.Main in m<k>/Main.hs (the same imports, Solution imported
qualified `as Solution`, the same calls), the harness's helpers are compiled once (CodelmHarness.hs,
the same text as in Main.hs alone), and a dispatcher Main runs member k's `main` as `./main k` in
member k's own sandbox (28 programs: ~1.3 CPU s for the build, against ~0.45 s each alone).
A Haskell module reaches another only through an import, and member k's modules are imported only
by its own harness (as alone) and by the dispatcher. The completion is the last text of its own
file, so no layout rule or blank line carries it into anyone else's code. It joins a build only when
it holds none of these, anywhere (comments and literals included: refusing too much only costs a
compilation alone), `batchable`:
- `{-#`: pragmas. RULES rewrite the code of importers; LANGUAGE and OPTIONS_GHC (ignored below the
  header, but refused all the same) could turn on Template Haskell, CPP or a plugin, which run code
  at compile time; LINE would make errors name another member's file. Without pragmas no extension
  can be on, and ghc 9.0's default language (Haskell2010) has no Template Haskell, quasi-quotes or
  CPP: nothing of a completion runs while compiling.
- a line starting with `#`: ghc reads cpp's line directives (`# 1 "m3/Solution.hs"`) even without
  CPP.
- `foreign`: a `foreign export ccall "malloc"` would define malloc for the whole binary, and a
  `foreign import` reaches the C library (the attacks in tests/solutions/haskell.json use it).
- `import` and `module` (a parse error there anyway), names starting with `codelm` (the build's own
  modules and helpers) and `Solution.` (its own module's name alone, another in a build: such a
  completion would only fail in the build).
Instances a completion declares (orphans included) are seen only by modules that import its module:
its own harness, as alone, and the dispatcher, which looks up `Monad IO` alone (a string pattern is
compared with eqString). With no overlapping or incoherent instances (pragmas and extensions,
refused) ghc never chooses between two instances that match: an extra instance can only make an
unsolved constraint solvable, or make one ambiguous, an error; a second `Monad IO` is already an error
in the member's own module. At run time only member k's code runs in its sandbox: Haskell has no
module initialisers (foreign exports refused), and a completion's code is pure (no IO without an
import or `foreign`), so it cannot see its argv either. What differs is the text of some exceptions,
which name m<k>/Solution.hs and CodelmM<k>.Solution (a failed pattern match, `error`'s call stack):
the judge reads only that the case threw, and a completion cannot read its own source location.
A build that fails is read by `blamed`: -fkeep-going makes ghc report every module that fails, as
`m<k>/Solution.hs:line:col: error:` at the start of a line.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable

from sandbox.renderers import base, literals
from sandbox.typed import Question, Type, default_value

GHC = "/usr/bin/ghc"
KEYWORDS = frozenset(
    "case class data default deriving do else foreign if import in infix infixl infixr instance let "
    "module newtype of then type where forall mdo proc rec".split())
# Lower-case names the prompt's imports bring into scope (Prelude, Data.Char, Data.List,
# Data.Maybe, from ghc 9.0's :browse): a parameter named `words` would hide the function its body
# wants, and an entry function named `compare` or `maximum` would make every use ambiguous.
IMPORTED = frozenset((
    "abs acos acosh all and any appendFile asTypeOf asin asinh atan atan2 atanh break catMaybes "
    "ceiling chr compare concat concatMap const cos cosh curry cycle decodeFloat delete deleteBy "
    "deleteFirstsBy digitToInt div divMod drop dropWhile dropWhileEnd either elem elemIndex "
    "elemIndices encodeFloat enumFrom enumFromThen enumFromThenTo enumFromTo error "
    "errorWithoutStackTrace even exp expm1 exponent fail filter find findIndex findIndices flip "
    "floatDigits floatRadix floatRange floor fmap fold foldMap foldMap' foldl foldl' foldl1 foldl1' "
    "foldr foldr' foldr1 fromEnum fromInteger fromIntegral fromJust fromMaybe fromRational fst gcd "
    "generalCategory genericDrop genericIndex genericLength genericReplicate genericSplitAt "
    "genericTake getChar getContents getLine group groupBy head id init inits insert insertBy "
    "intToDigit interact intercalate intersect intersectBy intersperse ioError isAlpha isAlphaNum "
    "isAscii isAsciiLower isAsciiUpper isControl isDenormalized isDigit isHexDigit isIEEE "
    "isInfinite isInfixOf isJust isLatin1 isLetter isLower isMark isNaN isNegativeZero isNothing "
    "isNumber isOctDigit isPrefixOf isPrint isPunctuation isSeparator isSpace isSubsequenceOf "
    "isSuffixOf isSymbol isUpper iterate iterate' last lcm length lex lexLitChar liftA2 lines "
    "listToMaybe log log1mexp log1p log1pexp logBase lookup map mapAccumL mapAccumR mapM mapM_ "
    "mapMaybe mappend max maxBound maximum maximumBy maybe maybeToList mconcat mempty min minBound "
    "minimum minimumBy mod negate not notElem nub nubBy null odd or ord otherwise partition "
    "permutations pi pred print product properFraction pure putChar putStr putStrLn quot quotRem "
    "read readFile readIO readList readListPrec readLitChar readLn readParen readPrec reads "
    "readsPrec realToFrac recip rem repeat replicate return reverse round scaleFloat scanl scanl' "
    "scanl1 scanr scanr1 sconcat seq sequence sequenceA sequence_ show showChar showList "
    "showLitChar showParen showString shows showsPrec significand signum sin singleton sinh snd "
    "sort sortBy sortOn span splitAt sqrt stimes stripPrefix subsequences subtract succ sum tail "
    "tails take takeWhile tan tanh toEnum toInteger toList toLower toRational toTitle toUpper "
    "transpose traverse truncate uncons uncurry undefined unfoldr union unionBy unlines until "
    "unwords unzip unzip3 unzip4 unzip5 unzip6 unzip7 userError words writeFile zip zip3 zip4 zip5 "
    "zip6 zip7 zipWith zipWith3 zipWith4 zipWith5 zipWith6 zipWith7 ").split())
RESERVED = KEYWORDS | IMPORTED
IMPORTS = ("import Data.Char\nimport Data.List\nimport Data.Maybe\n"
           "import qualified Data.Map as Map\nimport qualified Data.Set as Set\n")
# Every compilation's flags, alone or in a shared build (-M: the module docstring's heap cap).
GHC_FLAGS = ("-O0", "-v0", "-dynamic", "-fdiagnostics-color=never", "-rtsopts", "-with-rtsopts=-M1g",
             "-outputdir", "build")
# A shared build reports every module that fails (not only the first), so that one build blames
# them all. One module at a time: -j2 took ~25% less wall time when a second core was idle but
# 10-20% more CPU (a build of 28 programs: 1.3 -> 1.5 CPU s), and the scorer keeps every core busy
# with a worker of its own (score.py's --workers).
BUILD_FLAGS = ("-fkeep-going",)
# ghc's own heap: a 64 MB nursery collects less often (a build of 28 programs: 1.45 -> 1.28 CPU s,
# medians of 6; 150 -> 215 MB resident).
BUILD_RTS = ("+RTS", "-A64m", "-RTS")
# What a completion that shares a build may not hold, anywhere (comments and strings included; why:
# the module docstring): pragmas, names of the build's modules, its own module's name, and
# `foreign`, `import`, `module`. `batchable` also refuses lines starting with `#`.
REFUSED_TEXT = re.compile(r"\{-#|(?<![\w'])codelm|(?<![\w'.])Solution\.", re.IGNORECASE)
REFUSED_WORD = re.compile(r"(?<![\w'])(?:foreign|import|module)(?![\w'])")
# ghc's error lines (`m3/Solution.hs:14:55: error:`, `m3/Main.hs:(4,1)-(5,2): error:`); not its warnings.
_BLAMED = re.compile(r"^m(\d+)/(?:Solution|Main)\.hs:\S*\s+error\b", re.MULTILINE)
_SCALAR_TYPES = {"bool": "Bool", "int": "Int", "float": "Double", "string": "String"}
_SCALAR_ENCODERS = {"bool": "encBool", "int": "encInt", "float": "encDouble", "string": "encString"}



def _spelled(t: Type, leaves: dict[str, str], argument: bool = False) -> str:
  """A type in Haskell, `leaves` naming its leaf types; `argument`: it is applied to a type
  constructor, so applications need ()."""
  if t.name in leaves:
    return leaves[t.name]
  if t.name == "list":
    return f"[{_spelled(t.element, leaves)}]"
  if t.name == "tuple":
    if len(t.args) == 1:
      return _spelled(t.args[0], leaves, argument)
    return "(" + ", ".join(_spelled(a, leaves) for a in t.args) + ")"
  if t.name == "set":
    text = f"Set.Set {_spelled(t.element, leaves, True)}"
  elif t.name == "map":
    text = f"Map.Map {_spelled(t.args[0], leaves, True)} {_spelled(t.args[1], leaves, True)}"
  elif t.name == "optional":
    text = f"Maybe {_spelled(t.element, leaves, True)}"
  else:
    raise AssertionError(t)
  return f"({text})" if argument else text


def type_name(t: Type, argument: bool = False) -> str:
  """`t` in Haskell; `argument`: it is applied to a type constructor, so applications need ()."""
  return _spelled(t, _SCALAR_TYPES, argument)


def string_literal(text: str) -> str:
  # \& ends the numeric escape before a following digit.
  return '"' + literals.escape(text, lambda code: f"\\{code}\\&") + '"'


def _number(t: Type, value) -> str:
  if t.name == "int":
    if value == -(2 ** 63):
      return "(minBound :: Int)"
    return f"({value})" if value < 0 else str(value)
  if math.isnan(value):
    return "(0/0)"
  if math.isinf(value):
    return "(1/0)" if value > 0 else "(-1/0)"
  text = repr(value)
  return f"({text})" if text.startswith("-") else text


def literal(t: Type, value) -> str:
  """A Haskell expression for `value` of type `t`, parenthesised where it is an application."""
  name = t.name
  if name == "optional":
    return "Nothing" if value is None else f"(Just {literal(t.element, value)})"
  if name == "bool":
    return "True" if value else "False"
  if name in ("int", "float"):
    return _number(t, value)
  if name == "string":
    return string_literal(value)
  return _composite(t, value, literal)


def _composite(t: Type, value, element: Callable[[Type, object], str]) -> str:
  """A container's Haskell expression, its elements written by `element`."""
  if t.name == "list":
    return "[" + ", ".join(element(t.element, v) for v in value) + "]"
  if t.name == "set":
    return "(Set.fromList [" + ", ".join(element(t.element, v) for v in sorted(value)) + "])"
  if t.name == "map":
    return "(Map.fromList [" + ", ".join(
        f"({element(t.args[0], k)}, {element(t.args[1], v)})" for k, v in value.items()) + "])"
  if t.name == "tuple":
    if len(t.args) == 1:
      return element(t.args[0], value[0])
    return "(" + ", ".join(element(a, v) for a, v in zip(t.args, value)) + ")"
  raise AssertionError(t)


def encoder(t: Type) -> str:
  """A Haskell expression of type `t -> String` giving the canonical JSON of a value."""
  return _encoder(t, _SCALAR_ENCODERS)


def _encoder(t: Type, leaves: dict[str, str]) -> str:
  """`t -> String`, the canonical JSON of a value, `leaves` encoding its leaf types."""
  name = t.name
  if name in leaves:
    return leaves[name]
  if name == "list":
    return f"(encList {_encoder(t.element, leaves)})"
  if name == "set":
    return f"(encList {_encoder(t.element, leaves)} . Set.toList)"
  if name == "map":
    return f"(encMap {_encoder(t.args[0], leaves)} {_encoder(t.args[1], leaves)})"
  if name == "optional":
    return f"(maybe \"null\" {_encoder(t.element, leaves)})"
  if name == "tuple":
    names = [f"x{i}" for i in range(len(t.args))]
    pattern = names[0] if len(names) == 1 else "(" + ", ".join(names) + ")"
    parts = ", ".join(f"{_encoder(a, leaves)} {n}" for a, n in zip(t.args, names))
    return f"(\\{pattern} -> encList id [{parts}])"
  raise AssertionError(t)


def declared_type(t: Type, argument: bool = False) -> str:
  """A declared type (leaves named as typed.DECLARED_SCALARS) as BabelCode writes it in Haskell;
  `argument`: applied to a type constructor, so applications need (). A tuple (not in BabelCode's
  data) is a typed question's, as `type_name` writes it."""
  return _spelled(t, DECLARED, argument)


def declared_literal(t: Type, value) -> str:
  """A Haskell expression for a typed value of the declared type `t` (annotated by the caller)."""
  name = t.name
  if name in ("integer", "long"):  # an Integer: -2^63 needs no minBound
    return f"({value})" if value < 0 else str(value)
  if name in ("float", "double"):
    return _number(Type("float"), value)
  if name == "character":  # the string's first character, as BabelCode's character data holds one
    return "'" + literals.escape(value[:1] or "\0", lambda code: f"\\{code}", specials="'\\") + "'"
  if name == "boolean":
    return "True" if value else "False"
  if name == "string":
    return string_literal(value)
  return _composite(t, value, declared_literal)


def declared_encoder(t: Type) -> str:
  """`encoder` for a declared type: `t -> String`, the canonical JSON of its typed value."""
  return _encoder(t, {"boolean": "encBool", "integer": "encInteger", "long": "encInteger", "float": "encDouble",
                      "double": "encDouble", "character": "encChar", "string": "encString"})


# The harness's imports (Solution's comes after them), its helpers, and the head of `main`.
_HARNESS_IMPORTS = r'''import qualified Control.Exception as E
import Control.DeepSeq (force)
import qualified Data.Char as C
import qualified Data.List as L
import qualified Data.Map as Map
import qualified Data.Set as Set
import qualified Numeric
import System.IO (hFlush, stdout)
'''

_HARNESS_HELPERS = r'''encBool :: Bool -> String
encBool b = if b then "true" else "false"

encInt :: Int -> String
encInt = show

-- show gives the shortest digits that read back as the same Double ("1.0e-2" is valid JSON).
encDouble :: Double -> String
encDouble d
  | isNaN d = "NaN"
  | isInfinite d = if d > 0 then "Infinity" else "-Infinity"
  | otherwise = show d

-- ASCII only: everything else as \u escapes (a surrogate pair above the BMP).
encString :: String -> String
encString s = "\"" ++ concatMap escape s ++ "\""
  where
    escape '"' = "\\\""
    escape '\\' = "\\\\"
    escape c
      | n >= 32 && n < 127 = [c]
      | n < 0x10000 = hex n
      | otherwise = hex (0xD800 + (n - 0x10000) `div` 0x400) ++ hex (0xDC00 + (n - 0x10000) `mod` 0x400)
      where n = C.ord c
    hex n = let digits = Numeric.showHex n "" in "\\u" ++ replicate (4 - length digits) '0' ++ digits

encList :: (a -> String) -> [a] -> String
encList enc xs = "[" ++ L.intercalate "," (map enc xs) ++ "]"

encMap :: (k -> String) -> (v -> String) -> Map.Map k v -> String
encMap encKey encValue m = encList (\(k, v) -> "[" ++ encKey k ++ "," ++ encValue v ++ "]") (Map.toList m)

oneLine :: String -> String
oneLine = take 300 . map (\c -> if c == '\n' || c == '\r' then ' ' else c)

-- The JSON text is forced completely inside `try`: a lazy error anywhere in the value is caught here.
runCase :: Int -> String -> IO ()
runCase idx json = do
  result <- E.try (E.evaluate (force json))
  line <- case result of
    Right text -> return ("ok " ++ text)
    Left err -> do
      described <- E.try (E.evaluate (force (oneLine (show (err :: E.SomeException)))))
      return ("exception " ++ either (\e -> const "an exception that cannot be shown" (e :: E.SomeException)) id described)
  putStr ("\n" ++ PREFIX ++ show idx ++ " " ++ line ++ "\n")
  hFlush stdout

'''
_MAIN_HEAD = "main :: IO ()\nmain = do\n"

# BabelCode's Haskell header (templates/Haskell/header.txt): what a whole solution sees above itself.
BABELCODE_HEADER = ("import Text.Printf\nimport Control.Exception (catch, SomeException)\nimport Data.Typeable\n"
                    "import qualified Data.List as List\nimport qualified Data.Map as Map\n"
                    "import qualified Data.Set as Set\n")
# BabelCode's Haskell types for the declared leaves (its schema_parsing Haskell spec): integer and
# long are both Integer, float and double both Double.
DECLARED = {"boolean": "Bool", "integer": "Integer", "long": "Integer", "float": "Double", "double": "Double",
            "character": "Char", "string": "String"}
# The whole programs' extra encoders (the declared leaves that are not the prompts' types).
_WHOLE_HELPERS = r'''-- An Integer outside 64 bits is no typed int (and a huge one no JSON a reader takes): the case throws.
encInteger :: Integer -> String
encInteger n
  | n < toInteger (minBound :: Int) || n > toInteger (maxBound :: Int) = error "an Integer outside 64 bits"
  | otherwise = show n

encChar :: Char -> String
encChar c = encString [c]

'''


RUNGHC = "/usr/bin/runghc"  # MultiPL-E's evaluator interprets the program


class Haskell(base.Renderer):
  name = "haskell"
  display_name = "Haskell"
  value_literal = staticmethod(literal)
  foreign_binaries = (RUNGHC,)
  # /usr/lib/ghc/package.conf.d links to /var/lib/ghc/package.conf.d (the global package db).
  toolchain = base.Toolchain(binaries=(GHC,), version_command=(GHC, "--version"),
                             read_only=("/var/lib/ghc",))
  # A blank line ends a top-level definition (its `where` block included).
  convention = "camel"  # BabelCode's (a whole program's entry function)

  def function_name(self, question: Question) -> str:
    return base.safe_name(base.camel_case(question.entry_fn_name), RESERVED, "'")

  def params(self, question: Question) -> list[str]:
    out: list[str] = []
    for p in question.params:
      out.append(base.safe_name(base.camel_case(p.name), RESERVED | set(out), "'"))
    return out

  def signature_with_docstring(self, question: Question) -> str:
    lines = base.doc_lines(question.description)
    doc = [("-- | " if i == 0 else "-- ") + line for i, line in enumerate(lines)]
    name = self.function_name(question)
    types = [type_name(t) for t in (*question.types, question.return_type)]
    head = " ".join([name, *self.params(question)])
    return (IMPORTS + "\n" + "".join(line.rstrip() + "\n" for line in doc) +
            f"{name} :: {' -> '.join(types)}\n{head} = ")

  def stub(self, question: Question) -> str:
    return literal(question.return_type, default_value(question.return_type)) + "\n"

  def program(self, question: Question, completion: str) -> base.Program:
    harness = ("module Main (main) where\n\n" + _HARNESS_IMPORTS + "import qualified Solution\n\n" +
               _helpers() + _MAIN_HEAD + self._calls(question))
    return base.Program(files={"Solution.hs": self._solution("Solution", question, completion),
                               "Main.hs": harness},
                        compile=((GHC, *GHC_FLAGS, "-o", "main", "Main.hs"),), run=("./main",))

  def whole_program(self, question: Question, code: str) -> base.Program:
    """Solution.hs: BabelCode's header and the code (module docstring); Main.hs: the harness, each
    argument and the result annotated with its declared type, as BabelCode's `driver` fixes them."""
    *params, returns = question.declared
    name, result = f"Solution.{self.entry_name(question)}", declared_type(returns)
    calls = []
    for case in question.test_cases:
      args = "".join(f" ({declared_literal(t, v)} :: {declared_type(t)})" for t, v in zip(params, case.inputs))
      calls.append(f"  runCase {case.idx} ({declared_encoder(returns)} ({name}{args} :: {result}))\n")
    harness = ("module Main (main) where\n\n" + _HARNESS_IMPORTS + "import qualified Solution\n\n" +
               _helpers() + _WHOLE_HELPERS + _MAIN_HEAD + "".join(calls))
    solution = "module Solution where\n\n" + BABELCODE_HEADER + code + "\n"
    return base.Program(files={"Solution.hs": solution, "Main.hs": harness},
                        compile=((GHC, *GHC_FLAGS, "-o", "main", "Main.hs"),), run=("./main",))

  def _solution(self, module: str, question: Question, completion: str) -> str:
    return f"module {module} where\n\n" + self.signature_with_docstring(question) + completion + "\n"

  def _calls(self, question: Question) -> str:
    """`main`'s body: one runCase per test case."""
    name = self.function_name(question)
    encode = encoder(question.return_type)
    if not question.params:
      return "".join(f"  runCase {case.idx} ({encode} Solution.{name})\n" for case in question.test_cases)
    return "".join(f"  runCase {idx} ({encode} (Solution.{name} {args}))\n"
                   for idx, args in base.render_cases(question, literal, " "))

  # ---- batched compilation (module docstring) ----

  def batchable(self, question: Question, completion: str) -> bool:
    return not (REFUSED_TEXT.search(completion) or REFUSED_WORD.search(completion)
                or any(line.lstrip().startswith("#") for line in completion.splitlines()))

  def build(self, jobs) -> base.Build:
    """One `ghc --make` over every member's two modules (m<k>/Solution.hs as CodelmM<k>.Solution,
    m<k>/Main.hs as CodelmM<k>.Main, its harness importing it qualified as Solution), the helpers
    once (CodelmHarness.hs) and a dispatcher Main, linked once; member k runs as `./main k`."""
    files = {"CodelmHarness.hs": "module CodelmHarness where\n\n" + _HARNESS_IMPORTS + "\n" + _helpers(),
             "Main.hs": _dispatcher(len(jobs))}
    runs = []
    for k, (question, completion) in enumerate(jobs):
      files[f"m{k}/Solution.hs"] = self._solution(f"CodelmM{k}.Solution", question, completion)
      files[f"m{k}/Main.hs"] = (f"module CodelmM{k}.Main (main) where\n\n" + _HARNESS_IMPORTS +
                                f"import qualified CodelmM{k}.Solution as Solution\n"
                                "import CodelmHarness\n\n" + _MAIN_HEAD + self._calls(question))
      runs.append(base.Program(files=self.program(question, completion).files, run=("./main", str(k)),
                               artefacts={"main": "main"}))
    sources = [path for k in range(len(jobs)) for path in (f"m{k}/Solution.hs", f"m{k}/Main.hs")]
    command = (GHC, *BUILD_RTS, *GHC_FLAGS, *BUILD_FLAGS, "-o", "main", "Main.hs", "CodelmHarness.hs",
               *sources)
    return base.Build(files=files, compile=(command,), runs=tuple(runs))

  def blamed(self, diagnostics: str, size: int) -> set[int]:
    return {int(k) for k in _BLAMED.findall(diagnostics)}

  def call(self, name: str, args) -> str:
    return f"{name} {' '.join(f'({a})' for a in args)}"

  def foreign(self, text: str) -> base.Foreign:
    """eval_hs: `runghc f.hs`, judged by its exit code."""
    return base.Foreign("main.hs", (RUNGHC, "main.hs"), "exit_code")


def _helpers() -> str:
  return _HARNESS_HELPERS.replace("PREFIX", string_literal(base.RECORD_PREFIX))


def _dispatcher(size: int) -> str:
  """Main of a shared build: `./main k` runs member k's harness (an unknown argument runs none).
  A string-literal pattern is compared with eqString, so no instance of a member is looked up here."""
  cases = "".join(f'    ["{k}"] -> CodelmM{k}.Main.main\n' for k in range(size))
  imports = "".join(f"import qualified CodelmM{k}.Main\n" for k in range(size))
  return ("module Main (main) where\n\nimport System.Environment (getArgs)\n" + imports +
          "\nmain :: IO ()\nmain = getArgs >>= \\args -> case args of\n" + cases + "    _ -> return ()\n")


RENDERER = Haskell()
