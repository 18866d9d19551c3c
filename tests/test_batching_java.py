"""Java's batched compilation (sandbox/renderers/java.py, java_batch.java): each member is a javac
compilation of its own inside one JVM, reported exactly as javac reports it alone.

`batchable` accepts every completion once the driver exists (only text that cannot be written as
UTF-8 is refused); the builds below check what makes that safe: a member sees no other member's
classes (same-named classes, a class only another member declares, classes a failed compilation
wrote), its diagnostics are byte for byte javac's alone, and a member whose outcome could depend on
the shared JVM (nested deep enough to near javac's stack, outputs that would outgrow the box alone)
gets no report and is compiled alone.
"""

from __future__ import annotations

import json
import os

import pytest

from sandbox import batching, execution, typed
from sandbox.judge import Status, judge
from sandbox.renderers import get, java
import toolchains

HERE = os.path.dirname(os.path.abspath(__file__))
QUESTIONS = {q.qid: q for q in typed.read_questions(os.path.join(HERE, "data", "typed_questions.jsonl"))}
LIMITS = execution.Limits(timeout_s=5, compile_timeout_s=60)
GCD = QUESTIONS["HumanEval/13"]  # greatest_common_divisor(long a, long b) -> long


def renderer_or_skip():
  renderer = toolchains.renderer_or_skip("java")
  if java.batch_dir() is None:
    pytest.skip("java: the batch driver could not be built")
  return renderer


def batched_and_alone(renderer, jobs):
  """execute_all over `jobs` in one build and one by one: (batched, alone, batching stats)."""
  stats = batching.Stats()
  together = batching.execute_all(renderer, jobs, LIMITS, batch_size=len(jobs), stats=stats)
  alone = batching.execute_all(renderer, jobs, LIMITS, batch_size=1)
  return together, alone, stats


def returns(value: str) -> str:
  return f"        return {value};\n    }}\n}}"


def test_java_batchable_accepts_ordinary_completions():
  renderer = get("java")
  question = QUESTIONS["HumanEval/0"]
  with open(os.path.join(HERE, "solutions", "java.json"), encoding="utf-8") as f:
    solutions = json.load(f)
  fine = [renderer.stub(question), *solutions["correct"].values(), *solutions["compile_error"].values(),
          '        String s = "} \\" /* {";  // } {\n        return s.isEmpty();\n    }\n}',
          "        char c = '}';\n        /* } */\n        return c == '{';\n    }\n}",
          "        return helper();\n    }\n    static boolean helper() { return true; }\n}\nclass Other {}\n",
          "        return \"caf\u00e9 \u2603 \U0001f600\".isEmpty();\n    }\n}"]
  if java.batch_dir() is None:
    pytest.skip("java: the batch driver could not be built")
  for code in fine:
    assert renderer.batchable(question, code), code


def test_java_refuses_what_cannot_share_a_build(monkeypatch):
  renderer = get("java")
  question = QUESTIONS["HumanEval/0"]
  # A lone surrogate cannot be written as UTF-8 (alone, only its own execution fails).
  assert not renderer.batchable(question, "        String s = \"\ud800\";\n        return true;\n    }\n}")
  # Without the driver (or the precompiled runtime it compiles against) every program compiles alone.
  monkeypatch.setattr(java, "batch_dir", lambda: None)
  assert not renderer.batchable(question, renderer.stub(question))


def test_java_members_see_only_their_own_classes():
  renderer = renderer_or_skip()
  helper = "    }}\n}}\nclass Helper {{ static long value() {{ return {}; }} }}"
  leaky = ("        return a;\n    }\n}\nclass Leaked { static long value() { return 7; } }\n"
           "class Broken { int f() { return \"not an int\"; } }")
  jobs = [
      (GCD, "        return Helper.value();\n" + helper.format(1)),  # same class name, other content
      (GCD, "        return Helper.value();\n" + helper.format(2)),
      (GCD, leaky),                                                    # fails, after writing Leaked.class
      (GCD, returns("Leaked.value()")),                                # so this must fail too, as alone
      (GCD, returns('undefinedName("caf\u00e9 \u2603")')),             # diagnostics quote non-ASCII
      (GCD, returns("b")),                                             # right after a compile error
  ]
  together, alone, stats = batched_and_alone(renderer, jobs)
  assert stats.builds == 1 and stats.built == len(jobs) and stats.alone == 0, stats
  for (_, code), a, b in zip(jobs, together, alone):
    batched, single = judge(GCD, a), judge(GCD, b)
    assert (batched.status, batched.cases) == (single.status, single.cases), (code, batched, single)
    if single.status is Status.COMPILE_ERROR:
      assert a.stderr == b.stderr and "Main.java:" in a.stderr, (a.stderr, b.stderr)  # javac's own words
  statuses = [judge(GCD, r).status for r in together]
  assert statuses[2:5] == [Status.COMPILE_ERROR] * 3 and Status.COMPILE_ERROR not in statuses[:2] + statuses[5:]
  assert judge(GCD, together[0]).cases != judge(GCD, together[1]).cases  # each ran its own Helper


def compiled_by_the_driver(result: execution.Execution) -> bool:
  """Whether a member's compile step was the build's (the driver) rather than its own javac."""
  return java.DRIVER_CLASS in result.compile[0].argv


@pytest.mark.parametrize("why", ["deep", "big"])
def test_java_members_that_could_depend_on_the_shared_jvm_compile_alone(why):
  renderer = renderer_or_skip()
  if why == "deep":
    # 600 nested additions: javac alone accepts about 1200 on its 1 MB stack, the driver's thread
    # about 350. It overflows there and the driver stops: the member after it compiles alone too.
    code = "        return a" + " + a" * 600 + ";\n    }\n}"
  else:
    # 300 classes, each holding a 32 KB string constant: 9.7 MB of classes, over the driver's cap
    # (8 MB; alone they fit the 64 MB box). The driver stops if it sees them while javac runs.
    code = ('        final String s0 = "' + "x" * 1000 + '";\n'
            + "".join(f"        final String s{i} = s{i - 1} + s{i - 1};\n" for i in range(1, 6))
            + "        Object[] all = {\n" + "            new Object() { String s = s5; },\n" * 300
            + "        };\n        return a + all.length - all.length;\n    }\n}")
  jobs = [(GCD, returns("a")), (GCD, code), (GCD, returns("a % b"))]
  together, alone, stats = batched_and_alone(renderer, jobs)
  for (_, completion), a, b in zip(jobs, together, alone):
    batched, single = judge(GCD, a), judge(GCD, b)
    assert (batched.status, batched.cases) == (single.status, single.cases), (completion[:80], batched, single)
    assert single.status is not Status.COMPILE_ERROR
  assert [compiled_by_the_driver(r) for r in together[:2]] == [True, False], stats
  assert not compiled_by_the_driver(alone[0])
