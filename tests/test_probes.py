"""Hostile records through every scorer: one table of probes, one row per scorer.

A probe is a record no harness prints (a float of 401 digits, an index of 5,000 digits, garbage, a
second record, JSON nested 5,000 deep) or, for the practical tasks, a way of getting one printed
(`__main__.encode` replaced, a frame walk to `record()`, a form feed before module-level code). Each
scorer scores every probe of the table together with a correct prediction in ONE call (the call a
scoring unit makes): no probe may pass, none may raise, and the correct prediction still passes.
A new scorer inherits the probes by adding a row to SCORERS (BabelCode's whole programs have rows: the
records printed at file scope, before the harness runs).
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable, Sequence

import pytest

from data.practical_tasks import Problem
from evaluation import score
from evaluation.iterative import protocol as iterative_protocol
from evaluation.infilling import score as infilling
from evaluation.practical import score as practical
from sandbox import batching, execution, typed
from evaluation.iterative.tasks import Example
from sandbox.renderers import MODULES, get
from evaluation.resumable import Prediction
import test_infilling

HERE = os.path.dirname(os.path.abspath(__file__))
QUESTIONS = {q.qid: q for q in typed.read_questions(os.path.join(HERE, "data", "typed_questions.jsonl"))}
FLOAT_QID = "HumanEval/2"  # truncate_number: float -> float; test case 0 is 3.5 -> 0.5
LIMITS = execution.Limits(timeout_s=10, compile_timeout_s=120)
STRING = typed.parse_type("string")


# ---- the probes: records as a program could print them ---------------------------------------------

def _line(index: str, payload: str) -> str:
  return f"\n#codelm# {index} ok {payload}\n"


# name -> (the record line, given the index the forged record is to carry)
RECORD_PROBES: dict[str, Callable[[int], str]] = {
    "huge integer for a float": lambda i: _line(str(i), "1" + "0" * 400),
    "index of 5,000 digits": lambda i: _line("1" * 5000, "0.5"),
    "unicode digit index": lambda i: _line("\u00b2", "0.5"),
    "garbled": lambda i: f"\n#codelm# {i} maybe 0.5\n",
    "second record": lambda i: _line(str(i), "0.5") + _line(str(i), "0.5"),
    "nested 4,000 deep": lambda i: _line(str(i), "[" * 4000 + "]" * 4000),  # (R: literals < 10,000 chars)
    "NaN": lambda i: _line(str(i), "NaN"),
    "int of 5,000 digits": lambda i: _line(str(i), "9" * 5000),
}


# ---- typed HumanEval: one row per language ---------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Forger:
  """How a language's completion of truncate_number prints `text` on its records' channel."""
  statements: str          # {TEXT}: the text as the language's string literal
  tail: str = ""           # after the correct body (a top-level declaration the statements use)
  index: int = 0           # the test case the forged records claim
  prefix: str = ""         # written before them (C++: its case's own "ok" line, see below)


FORGERS = {
    "python": Forger("    print({TEXT}, end='', flush=True)\n"),
    # A case runs in a forked child whose stdout is stderr; its record is what it writes to the pipe
    # (fd 4), printed by the parent as is when it starts with "ok ": so the record of case 0 first.
    "cpp": Forger("  { std::string s = {TEXT}; FILE *f = fdopen(4, \"w\"); fputs(s.c_str(), f); fflush(f); }\n",
                  index=1,
                  prefix="ok 0.5"),
    "go": Forger("\tos.NewFile(1, \"stdout\").WriteString({TEXT})\n"),
    "java": Forger("        System.out.print({TEXT}); System.out.flush();\n"),
    "csharp": Forger("        global::System.Console.Out.Write({TEXT}); global::System.Console.Out.Flush();\n"),
    "rust": Forger("    { use std::io::Write; use std::os::unix::io::FromRawFd;\n"
                   "      let mut f = unsafe { std::fs::File::from_raw_fd(3) };\n"
                   "      let _ = f.write_all({TEXT}.as_bytes()); std::mem::forget(f); }\n"),
    "javascript": Forger("  process.stdout.write({TEXT});\n"),
    "typescript": Forger("  (globalThis as any).process.stdout.write({TEXT});\n"),
    "php": Forger("  fwrite(STDOUT, {TEXT}); fflush(STDOUT);\n"),
    "lua": Forger("  io.write({TEXT}) io.flush()\n"),
    "r": Forger("  cat({TEXT})\n"),
    # Pure code: C's write(2) through the FFI, forced by seq before the result.
    "haskell": Forger("codelmForge `seq` ", tail=(
        "\ncodelmForge :: Int\n"
        "codelmForge = cWrite 1 buffer (length text)\n"
        "  where\n"
        "    text = {TEXT}\n"
        "    buffer = foldr (\\(i, c) rest -> cMemset (rest + i) (fromEnum c) 1 `seq` rest) "
        "(cMalloc (length text + 1)) (zip [0 ..] text)\n"
        "foreign import ccall unsafe \"malloc\" cMalloc :: Int -> Int\n"
        "foreign import ccall unsafe \"memset\" cMemset :: Int -> Int -> Int -> Int\n"
        "foreign import ccall unsafe \"write\" cWrite :: Int -> Int -> Int -> Int\n")),
}


def _string_literal(language: str, text: str) -> str:
  return iterative_protocol.literal_of(language, STRING, text)


def correct_completion(language: str) -> str:
  with open(os.path.join(HERE, "solutions", f"{language}.json"), encoding="utf-8") as f:
    return json.load(f)["correct"][FLOAT_QID]


def forged_completion(language: str, probe: str) -> str:
  forger = FORGERS[language]
  text = (forger.prefix + RECORD_PROBES[probe](forger.index)).lstrip("\n") if forger.prefix else \
      RECORD_PROBES[probe](forger.index)
  literal = _string_literal(language, text)
  correct = correct_completion(language)
  return (forger.statements.replace("{TEXT}", literal) + correct +
          forger.tail.replace("{TEXT}", literal))


def score_typed(language: str, completions: Sequence[str]) -> list[tuple[bool, str]]:
  """TypedBenchmark.run: the call evaluation.score makes for one unit."""
  benchmark = score.TypedBenchmark(QUESTIONS, LIMITS)
  unit = [Prediction(FLOAT_QID, i, language, code, i) for i, code in enumerate(completions)]
  return [(r["status"] == "passed", f"{r['status']}: {r['detail'][:200]}")
          for r in benchmark.run(unit, batching.Stats())]


# ---- whole programs (BabelCode's predictions): the probes printed at file scope, before the harness ----

# language -> (statements that print {TEXT} at file scope, a correct whole truncate_number)
WHOLE_FORGERS = {
    "python": ("import sys\nsys.stdout.write({TEXT})\nsys.stdout.flush()\n",
               "def truncate_number(number):\n    return number % 1.0\n"),
    "javascript": ("process.stdout.write({TEXT});\n", "function truncateNumber(number) {\n  return number % 1.0;\n}\n"),
    "lua": ("io.write({TEXT}) io.flush()\n", "function truncate_number(number)\n  return number % 1.0\nend\n"),
    "php": ("fwrite(STDOUT, {TEXT}); fflush(STDOUT);\n", "function truncateNumber($number) {\n  return fmod($number, 1.0);\n}\n"),
    "r": ("cat({TEXT})\n", "truncate_number <- function(number) {\n  return(number %% 1)\n}\n"),
}


def score_whole(language: str, programs: Sequence[str]) -> list[tuple[bool, str]]:
  """TypedBenchmark.run with whole programs: the call `evaluation.score --whole_programs` makes."""
  benchmark = score.TypedBenchmark(QUESTIONS, LIMITS, whole=True)
  unit = [Prediction(FLOAT_QID, i, language, code, i) for i, code in enumerate(programs)]
  return [(r["status"] == "passed", f"{r['status']}: {r['detail'][:200]}")
          for r in benchmark.run(unit, batching.Stats())]


def _whole_row(language: str) -> "Scorer":
  statements, correct = WHOLE_FORGERS[language]
  probes = {p: statements.replace("{TEXT}", _string_literal(language, RECORD_PROBES[p](0))) + correct
            for p in RECORD_PROBES}
  return Scorer(f"whole programs {language}", get(language).toolchain, correct, probes,
                lambda programs: score_whole(language, programs), "error: forged")


# ---- practical tasks ---------------------------------------------------------------------------------

PRACTICAL = Problem(problem_id="probe_001", intent="Return the sum of a and b.",
                    code="def f_probe_001(a, b):\n    return a + b\n",
                    tests=("assert f_probe_001(1, 2) == 3\n", "assert f_probe_001(2, 2) == 4\n",
                           "assert f_probe_001(0, 0) == 0\n"), categories=())
PRACTICAL_CORRECT = "    return a + b\n"


def _encode_replaced(value: str) -> str:
  # check() looks `encode` up in main.py's globals at each call: the completion's encode claims `value`.
  return ("    import __main__\n"
          f"    __main__.encode = lambda v: {value}\n"
          "    return a + b\n")


def _record_walk(text: str) -> str:
  # Calls the harness's own record() (which knows the nonce) with a check record of its choosing.
  return ("    import sys\n"
          "    frame = sys._getframe()\n"
          "    while 'record' not in frame.f_locals:\n"
          "        frame = frame.f_back\n"
          f"    frame.f_locals['record'](frame.f_locals['current'][0], 'check', {text!r})\n"
          "    return a + b\n")


PRACTICAL_PROBES = {
    "encode replaced: a bare True": _encode_replaced("True"),
    "encode replaced: a huge float": _encode_replaced("['float', '1' + '0' * 400]"),
    "encode replaced: an int as text": _encode_replaced("['int', 'x' * 400]"),
    "encode replaced: Fraction over 0": _encode_replaced("['Fraction', 1, 0]"),
    "encode replaced: nested 450 deep": _encode_replaced("__import__('functools').reduce(lambda a, _: ['list', [a]], range(450), ['none'])"),
    "encode replaced: a 10 GB array": _encode_replaced("['ndarray', '<U1000000', [2500], [['str', '']] * 2500]"),
    "encode replaced: an unknown tag": _encode_replaced("['lambda', 1]"),
    "frame walk: [0, [true]]": _record_walk("[0, [true]]"),
    "frame walk: index 1e400": _record_walk("[1e400, [['bool', true]]]"),
    "frame walk: not a list": _record_walk('{"a": 1, "b": 2}'),
    "frame walk: nested 5,000 deep": _record_walk("[0, " + "[" * 5000 + "]" * 5000 + "]"),
    "form feed": "    return 0\n\x0cf_probe_001 = lambda a, b: a + b\n",
    "form feed after indentation": "    return 0\n    \x0cf_probe_001 = lambda a, b: a + b\n",
}


def score_practical(completions: Sequence[str]) -> list[tuple[bool, str]]:
  """PracticalBenchmark.run: the call evaluation.practical makes for one unit."""
  benchmark = practical.PracticalBenchmark({PRACTICAL.problem_id: PRACTICAL}, LIMITS)
  unit = [Prediction(PRACTICAL.problem_id, i, "python", code, i) for i, code in enumerate(completions)]
  return [(r["passed"], f"{r['error']}") for r in benchmark.run(unit, batching.Stats())]


# ---- the iterative protocol ----------------------------------------------------------------------------

def score_iterative(completions: Sequence[str]) -> list[tuple[bool, str]]:
  """check_all: one round of the iterative protocol for every completion (Python)."""
  question = QUESTIONS[FLOAT_QID]
  given = [Example(c.inputs, c.output) for c in question.test_cases[:2]]
  pool = [Example(c.inputs, c.output) for c in question.test_cases[2:]]
  checks = iterative_protocol.check_all("python", [(question, code, given, pool) for code in completions],
                                        final_round=True, limits=LIMITS)
  return [(c.verdict == iterative_protocol.SUCCESS, f"{c.verdict}: {c.detail[:200]}") for c in checks]


# ---- HumanEval-infilling: the middles that forge an in-process verdict (tests/test_infilling.py) ---------

def score_infilling(middles: Sequence[str]) -> list[tuple[bool, str]]:
  """InfillingBenchmark.run: the call evaluation.infilling makes for one unit, on HumanEval/0's last
  line (judged by values: typed HumanEval has the problem)."""
  problem = test_infilling.l7()
  benchmark = infilling.InfillingBenchmark({problem.task_id: problem}, infilling.LIMITS)
  unit = [Prediction(problem.task_id, i, "python", middle, i) for i, middle in enumerate(middles)]
  return [(r["passed"], f"{r['status']}: {r['detail'][:200]}") for r in benchmark.run(unit, batching.Stats())]


# ---- the table -----------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Scorer:
  name: str
  toolchain: object                                   # execution.missing(...) says what is lacking
  correct: str
  probes: dict[str, str]                              # probe name -> completion
  score: Callable[[Sequence[str]], list[tuple[bool, str]]]
  reached: str = ""  # how every probe's verdict starts: its records reached the judge (not a compile error)


def _typed_row(language: str) -> Scorer:
  return Scorer(f"typed {language}", get(language).toolchain, correct_completion(language),
                {p: forged_completion(language, p) for p in RECORD_PROBES},
                lambda completions: score_typed(language, completions), "error: forged")


SCORERS = [*(_typed_row(language) for language in sorted(MODULES)),
           *(_whole_row(language) for language in sorted(WHOLE_FORGERS)),
           Scorer("practical", practical.toolchain(), PRACTICAL_CORRECT, PRACTICAL_PROBES, score_practical),
           Scorer("infilling", get("python").toolchain, "    return False\n", test_infilling.FORGERIES, score_infilling),
           Scorer("iterative python", get("python").toolchain, correct_completion("python"),
                  {p: forged_completion("python", p) for p in RECORD_PROBES}, score_iterative, "error: forged")]


def test_every_language_has_a_row():
  assert set(FORGERS) == set(MODULES)
  assert {s.name for s in SCORERS} >= {f"typed {language}" for language in MODULES}


@pytest.mark.parametrize("scorer", SCORERS, ids=lambda s: s.name)
def test_no_probe_passes_and_the_correct_prediction_beside_them_does(scorer):
  lacking = execution.missing(scorer.toolchain)
  if lacking:
    pytest.skip(f"{scorer.name}: toolchain missing ({', '.join(lacking)}); run `make toolchains`")
  names = list(scorer.probes)
  # The correct one first and last: a unit's members around the hostile ones.
  verdicts = scorer.score([scorer.correct, *scorer.probes.values(), scorer.correct])
  assert verdicts[0][0] and verdicts[-1][0], (scorer.name, verdicts[0], verdicts[-1])
  passed = [name for name, (ok, _) in zip(names, verdicts[1:-1]) if ok]
  assert not passed, (scorer.name, passed)
  unreached = [(name, why) for name, (_, why) in zip(names, verdicts[1:-1]) if not why.startswith(scorer.reached)]
  assert not unreached, (scorer.name, unreached)


# ---- the judges alone: any record is a verdict, never an exception ------------------------------------

def _printed(stdout: str) -> execution.Execution:
  return execution.Execution(compile=(), run=execution.Step(("run",), 0, 0.1, False), stdout=stdout,
                             stderr="", output_truncated=False)


RIGHT = "".join(_line(str(c.idx), json.dumps(c.output)) for c in QUESTIONS[FLOAT_QID].test_cases)


@pytest.mark.parametrize("probe", sorted(RECORD_PROBES))
def test_the_judge_reads_every_record_probe_as_a_verdict(probe):
  from sandbox.judge import Status, judge
  question = QUESTIONS[FLOAT_QID]
  assert judge(question, _printed(RIGHT)).status is Status.PASSED
  for stdout in (RECORD_PROBES[probe](0) + RIGHT, RIGHT + RECORD_PROBES[probe](1)):
    outcome = judge(question, _printed(stdout))
    assert outcome.status is not Status.PASSED and outcome.detail, (probe, outcome)


def test_malformed_records_are_named_as_such():
  from sandbox.judge import MALFORMED, Status, judge
  question = QUESTIONS[FLOAT_QID]
  # (An int past a double for a float: each harness converts to a double first, so none prints it.)
  for payload in ("[" * 5000 + "]" * 5000, "9" * 5000, "{not json", "1" + "0" * 400):
    outcome = judge(question, _printed(_line("0", payload)))
    assert outcome.status is Status.ERROR and outcome.detail.startswith(MALFORMED), outcome
  # A value of another type is what the function returned: that case threw, nothing is forged.
  wrong_type = judge(question, _printed(_line("0", '"0.5"') + RIGHT.split("\n", 2)[2]))
  assert wrong_type.status is Status.FAILED and "expected float, got '0.5'" in wrong_type.detail, wrong_type
  # Records split at "\n" only: a string value may hold "\x1c" or "\u2028" (str.splitlines breaks there).
  text = typed.question_from_json({"qid": "s", "entry_fn_name": "f", "params": [], "return_type": "string",
                                   "test_cases": [{"idx": 0, "inputs": [], "output": "a\x1cb\u2028c"}]})
  assert judge(text, _printed(_line("0", json.dumps("a\x1cb\u2028c", ensure_ascii=False)))).status is Status.PASSED


def test_typed_decode_refuses_what_float_and_repr_cannot_take():
  float_type = typed.parse_type("float")
  for value in (10 ** 400, -(10 ** 400)):
    with pytest.raises(ValueError, match="an int of about 401 digits"):
      typed.decode(float_type, value)
  with pytest.raises(ValueError, match="expected a 64-bit int, got int"):
    typed.decode(typed.parse_type("int"), 10 ** 5000)  # repr() of it raises
  assert typed.decode(float_type, 10 ** 300) == 1e300
  with pytest.raises(ValueError, match="test case 0 output"):  # a question file of one's own
    typed.question_from_json({"qid": "q", "entry_fn_name": "f", "params": [], "return_type": "float",
                              "test_cases": [{"idx": 0, "inputs": [], "output": 10 ** 400}]})


@pytest.mark.parametrize("data", [True, [], [7], ["int", "1"], ["float", 1.5], ["Fraction", 1, 0],
                                  ["timedelta", 10 ** 30, 0, 0], ["list", 5], ["dict", [[1]]],
                                  ["ndarray", "<U1000000", [300], [["str", ""]] * 300],
                                  ["ndarray", "V8", [1], [["int", 1]]], ["none", 1], ["lambda", 1]])
def test_recorded_values_decode_is_total(data):
  from sandbox import recorded_values
  with pytest.raises(recorded_values.MalformedRecord):
    recorded_values.decode(data)
  assert isinstance(recorded_values.loads(json.dumps(data)), recorded_values.Unrecorded)


def test_recorded_values_decode_survives_deep_nesting():
  from sandbox import recorded_values
  deep = ["none"]
  for _ in range(5000):
    deep = ["list", [deep]]
  with pytest.raises(recorded_values.MalformedRecord, match="RecursionError"):
    recorded_values.decode(deep)


# ---- the practical cut: what runs is the function, whatever control character the completion holds --

CONTROL = [chr(c) for c in (*range(0x20), 0x7F, 0x85, 0x2028, 0x2029)]
SMUGGLED = "f_probe_001 = lambda a, b: a + b"
PLACES = ("    return 0\n{c}" + SMUGGLED + "\n",          # at a line start
          "    return 0\n    {c}" + SMUGGLED + "\n",      # after indentation
          "    return 0\n{c}    " + SMUGGLED + "\n",      # before indentation
          "    return 0{c}" + SMUGGLED + "\n",            # mid-line
          "    x = 0\n{c}\n" + SMUGGLED + "\n",           # a line of its own
          "    return 0 {c}\n" + SMUGGLED + "\n",         # at a line end
          "    x = [\n{c}]\n" + SMUGGLED + "\n")          # inside brackets


def test_the_cut_never_leaves_module_level_code_whatever_the_control_characters():
  import ast
  for c in CONTROL:
    for place in PLACES:
      completion = place.replace("{c}", c)
      source = practical.program(PRACTICAL, PRACTICAL.prompt + practical.completion_code(PRACTICAL, completion)
                                 ).files["solution.py"]  # exactly what the sandbox compiles
      try:
        tree = ast.parse(source)  # compile()'s parser
      except (SyntaxError, ValueError):  # it does not compile in the sandbox either: nothing runs
        continue
      module_level = [type(node).__name__ for node in tree.body if not isinstance(node, (ast.Import, ast.ImportFrom))]
      assert module_level == ["FunctionDef"], (repr(c), completion, source)


def test_a_form_feed_in_the_indentation_resets_the_column_as_python_does():
  # Python counts the indentation from the last form feed: "  \f    return x" is indented 4.
  cut = practical.completion_code(PRACTICAL, "    x = 1\n  \x0c    return x\n\x0c" + SMUGGLED + "\n")
  assert cut == "    x = 1\n    return x\n"


def test_python_s_parser_cuts_where_tokenize_was_fooled(monkeypatch):
  from evaluation.practical import program as practical_program
  # As if the tokenize cut missed the column-0 statement (the next character it reads otherwise).
  monkeypatch.setattr(practical_program, "_end_line", lambda completion: len(practical_program._lines(completion)))
  cut = practical.completion_code(PRACTICAL, "    return 0\n\n@staticmethod\ndef g():\n    pass\n" + SMUGGLED + "\n")
  assert cut == "    return 0\n"
