"""Haskell's batched compilation (sandbox/renderers/haskell.py): what may share a `ghc --make`
build, what a build holds, and which members a failed build's diagnostics blame."""

from __future__ import annotations

import json
import os
import shutil
import tempfile

import pytest

from sandbox import execution, typed
from sandbox.renderers import get
from sandbox.renderers.base import Program

HERE = os.path.dirname(os.path.abspath(__file__))
QUESTIONS = {q.qid: q for q in typed.read_questions(os.path.join(HERE, "data", "typed_questions.jsonl"))}
QUESTION = QUESTIONS["HumanEval/0"]  # hasCloseElements :: [Double] -> Double -> Bool
HASKELL = get("haskell")

FINE = [
    "or [abs (a - b) < threshold\n"
    "    | (i, a) <- zip [0 :: Int ..] numbers, (j, b) <- zip [0 ..] numbers, i < j]\n",
    # `#`, `{-` and `--` inside literals and comments, an operator that starts with `--`
    "length (filter (== '#') \"# {- -- \") > 0 && ok\n  where\n    -- # not a directive\n"
    "    {- a {- nested -} comment -}\n    ok = True --> null numbers\n    a --> b = not a || b\n",
    # names that hold refused words without being them
    "important' && imported_ && modules\n  where\n    important' = threshold > 0\n"
    "    imported_ = not (null numbers)\n    modules = Solutions == Solutions\n"
    "data Names = Solutions deriving Eq\n",
    # declarations of its own: instances, classes, fixities, a `main` (nothing imports them)
    "numbers <+> threshold\ninfixl 6 <+>\n(<+>) :: [Double] -> Double -> Bool\nxs <+> t = any (< t) xs\n"
    "class Sized a where\n  size :: a -> Int\ninstance Sized Bool where\n  size _ = 1\n"
    "main :: IO ()\nmain = return ()\n",
    "x'\n  where x' = length numbers > 1\n",
]

REFUSED = {
    "foreign import": "cSystem 0 == 0\nforeign import ccall \"system\" cSystem :: Int -> Int\n",
    "foreign export": "True\nhook :: Int -> Int\nhook = id\nforeign export ccall \"malloc\" hook :: Int -> Int\n",
    "rewrite rule": "True\n{-# RULES \"x\" forall n. length n = 0 #-}\n",
    "language pragma": "True\n{-# LANGUAGE TemplateHaskell #-}\n",
    "options pragma": "True\n{-# OPTIONS_GHC -fplugin=X #-}\n",
    "inline pragma": "go numbers\n  where\n    {-# INLINE go #-}\n    go = null\n",
    "line pragma": "True\n{-# LINE 1 \"m3/Solution.hs\" #-}\nx = y\n",
    "pragma in a comment": "True -- {-# RULES #-}\n",
    "cpp line directive": "True\n# 1 \"m3/Solution.hs\"\nx = y\n",
    "directive after spaces": "True\n  #define X\n",
    "directive after a carriage return": "True\r# 1 \"m3/Solution.hs\"\r",
    "import": "True\nimport System.IO.Unsafe\n",
    "module": "True\nmodule Other where\n",
    "harness name": "True\n  where x = codelmSecret\n",
    "build module name": "CodelmM3.Solution.hasCloseElements numbers threshold\n",
    "own module's name": "Solution.helper numbers\nhelper :: [Double] -> Bool\nhelper = null\n",
}


def test_ordinary_completions_are_batchable():
  for code in FINE:
    assert HASKELL.batchable(QUESTION, code), code
  data = json.load(open(os.path.join(HERE, "solutions", "haskell.json"), encoding="utf-8"))
  for kind in ("correct", "wrong", "throws_once"):
    for qid, code in data[kind].items():
      assert HASKELL.batchable(QUESTIONS[qid], code), (kind, qid)
  for question in QUESTIONS.values():
    assert HASKELL.batchable(question, HASKELL.stub(question)), question.qid


@pytest.mark.parametrize("why", sorted(REFUSED))
def test_what_could_reach_beyond_its_module_is_refused(why):
  assert not HASKELL.batchable(QUESTION, REFUSED[why]), why


def test_a_member_keeps_its_own_program_text():
  """Member k's solution is the program's Solution.hs but for its module's name (the same lines,
  so the same line numbers), and it runs with the program's own files beside the build's binary."""
  jobs = [(QUESTIONS[qid], HASKELL.stub(QUESTIONS[qid])) for qid in ("HumanEval/0", "HumanEval/8")]
  build = HASKELL.build(jobs)
  for k, (question, code) in enumerate(jobs):
    alone = HASKELL.program(question, code)
    assert build.files[f"m{k}/Solution.hs"] == alone.files["Solution.hs"].replace(
        "module Solution where", f"module CodelmM{k}.Solution where", 1)
    assert f"import qualified CodelmM{k}.Solution as Solution\n" in build.files[f"m{k}/Main.hs"]
    assert build.runs[k].files == alone.files and build.runs[k].run == ("./main", str(k))
    assert dict(build.runs[k].artefacts) == {"main": "main"}


def test_blamed_reads_error_lines_only():
  diagnostics = (
      "m3/Solution.hs:14:55: error:\n    • Couldn't match expected type\n"
      "m12/Solution.hs:(14,1)-(15,3): error:\n    parse error\n"
      "m7/Main.hs:20:3-9: error:\n    • Variable not in scope\n"
      "m9/Solution.hs:16:1: warning: [-Wtabs]\n    Tab character found here.\n"
      # a quoted source line and an indented message never blame
      "   |\n14 | x = \"m5/Solution.hs:1:1: error:\"\n    In the expression: m6/Solution.hs:1:1\n")
  assert HASKELL.blamed(diagnostics, 20) == {3, 7, 12}
  assert HASKELL.blamed("ghc: panic! (the 'impossible' happened)\n", 20) == set()


def test_blamed_names_the_members_that_ghc_rejects():
  if execution.missing(HASKELL.toolchain):
    pytest.skip("haskell toolchain missing")
  errors = {1: "length numbers > threshold\n", 3: "(sum numbers, productOf numbers)\n",
            4: "map (\\c -> if isUpper c then toLower c else) string\n"}
  qids = ["HumanEval/0", "HumanEval/0", "HumanEval/8", "HumanEval/8", "HumanEval/27"]
  jobs = [(QUESTIONS[qid], errors.get(k, HASKELL.stub(QUESTIONS[qid]))) for k, qid in enumerate(qids)]
  assert all(HASKELL.batchable(*job) for job in jobs)
  build = HASKELL.build(jobs)
  directory = tempfile.mkdtemp(prefix="codelm-build-")
  try:
    result = execution.build(Program(files=build.files, compile=build.compile, run=("true",)),
                             HASKELL.toolchain, execution.Limits(compile_timeout_s=120), directory)
  finally:
    shutil.rmtree(directory, ignore_errors=True)
  assert result.compile_failed
  assert HASKELL.blamed(result.stderr, len(jobs)) == set(errors), result.stderr
