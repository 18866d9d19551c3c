"""evaluation/multiple/score.py and cli.py, end to end on hand-made MultiPL-E problems: prompts for
sample.py, predictions scored MultiPL-E's way (correct, wrong, crashing, looping), a malformed record
reported and the rest scored, MultiPL-E's results files as its pass_k.py reads them, resumption,
MultiPL-E completions and harness generations scored alike, and the Beam runner."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from evaluation import prompts as prompts_cli
from evaluation import score as scoring
from evaluation.multiple import cli
from evaluation.multiple import execution as multiple_execution
from sandbox import execution

LANGUAGES = ("python", "javascript", "lua")
needs_sandbox = pytest.mark.skipif(
    any(execution.missing(multiple_execution.toolchain(n)) for n in LANGUAGES),
    reason="no sandbox or toolchain here; run `make toolchains`")

PROBLEMS = [
    {"name": "HumanEval_53_add", "language": "py",
     "prompt": 'def add(x: int, y: int) -> int:\n    """Add two numbers x and y\n    >>> add(2, 3)\n    5\n    """\n',
     "doctests": "transform", "original": "HumanEval_53_add.py", "prompt_terminology": "reworded",
     "tests": "def check(candidate):\n    assert candidate(2, 3) == 5\n    assert candidate(5, 7) == 12\n\n"
              "def test_check():\n    check(add)\n\ntest_check()\n",
     "stop_tokens": ["\ndef", "\n#", "\nif", "\nclass"]},
    {"name": "HumanEval_53_add", "language": "js",
     "prompt": "//Add two numbers x and y\nfunction add(x, y){\n",
     "doctests": "transform", "original": "HumanEval_53_add.py", "prompt_terminology": "reworded",
     "tests": "const assert = require('node:assert');\n\n\nfunction test() {\n  let candidate = add;\n"
              "  assert.deepEqual(candidate(2, 3),5);\n  assert.deepEqual(candidate(5, 7),12);\n}\n\ntest();",
     "stop_tokens": ["\nfunction ", "\n/*", "\n//", "\nconsole.log"]},
    {"name": "HumanEval_53_add", "language": "lua",
     "prompt": "-- Add two numbers x and y\nlocal function add(x, y)\n",
     "doctests": "transform", "original": "HumanEval_53_add.py", "prompt_terminology": "reworded",
     "tests": "lu = require('luaunit')\n\nfunction test_humaneval()\nlocal candidate = add\n"
              "    lu.assertEquals(candidate(2, 3), 5)\n    lu.assertEquals(candidate(5, 7), 12)\nend\n\n"
              "os.exit(lu.LuaUnit.run())",
     "stop_tokens": ["\nlocal", "\nfunction", "\n--", "\n\n"]},
    {"name": "HumanEval_53_add", "language": "rb",  # a MultiPL-E language codelm has no toolchain for
     "prompt": "def add(x, y)\n", "tests": "", "stop_tokens": ["\nend"]},
]
# correct, wrong, crashing, looping, and the correct one again (one execution for both)
COMPLETIONS = {
    "py": ["    return x + y\n", "    return x - y\n", "    raise ValueError('no')\n", "    while True:\n        pass\n"],
    "js": ["  return x + y;\n}", "  return x - y;\n}", "  throw new Error('no');\n}", "  while (true) {}\n}"],
    "lua": ["  return x + y\nend", "  return x - y\nend", "  error('no')\nend", "  while true do end\nend"],
    "rb": ["  x + y\nend"] * 4,
}
# MultiPL-E's statuses: its JavaScript evaluator names a failed assert AssertionError.
EXPECTED = {"python": ["OK", "Exception", "Exception", "Timeout", "OK"],
            "javascript": ["OK", "AssertionError", "Exception", "Timeout", "OK"],
            "lua": ["OK", "Exception", "Exception", "Timeout", "OK"]}
TIMEOUT = ["--timeout", "2"]


def write_jsonl(path, records) -> str:
  path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records))
  return str(path)


def read_jsonl(path) -> list[dict]:
  return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def multiple_pass_k(directory) -> tuple[float, int, int]:
  """MultiPL-E's pass_k.py on a folder of results files (its for_file rule: status OK and exit code
  0), restated: (mean pass@1, problems, completions of the first)."""
  values, counts = [], []
  for path in sorted(directory.glob("*.results.json.gz")):
    data = json.loads(gzip.open(path, "rt").read())
    n = len(data["results"])
    c = len([True for r in data["results"] if r["status"] == "OK" and r["exit_code"] == 0])
    values.append(1.0 if n - c < 1 else 1.0 - float(np.prod(1.0 - 1 / np.arange(n - c + 1, n + 1))))
    counts.append(n)
  return float(np.mean(values)), len(values), counts[0]


@pytest.fixture
def dataset(tmp_path):
  return write_jsonl(tmp_path / "humaneval-mini.jsonl",
                     PROBLEMS + ['{"name": "HumanEval_0_broken", "language": "py", "prompt": 3}'])


def sample_predictions(tmp_path, prompts_path) -> str:
  """What sample.py writes for the prompts: five samples of each, plus a line that is not JSON."""
  lines = []
  for prompt in read_jsonl(prompts_path):
    for sample_id, code in enumerate(COMPLETIONS[prompt["language"]] + COMPLETIONS[prompt["language"]][:1]):
      lines.append({"qid": prompt["qid"], "language": prompt["language"], "sample_id": sample_id, "code": code,
                    "finish_reason": "stop", "num_tokens": 5})
  return write_jsonl(tmp_path / "predictions.jsonl", lines[:3] + ["{not json"] + lines[3:])


def test_prompts_carry_multiple_stops_cut_before_and_report_the_malformed_record(dataset, tmp_path, capsys):
  output = tmp_path / "prompts.jsonl"
  assert prompts_cli.main(["multiple", "--dataset", dataset, "--output", str(output)]) == 0
  printed = capsys.readouterr().out
  assert "humaneval-mini.jsonl:5" in printed and "skipped 1 malformed records" in printed
  prompts = read_jsonl(output)
  assert [(p["qid"], p["language"]) for p in prompts] == [(r["name"], r["language"]) for r in PROBLEMS]
  assert prompts[0] == {"qid": "HumanEval_53_add", "language": "py", "prompt": PROBLEMS[0]["prompt"],
                        "stop": PROBLEMS[0]["stop_tokens"], "stop_cut": "before"}
  assert prompts_cli.main(["multiple", "--dataset", dataset, "--output", str(output), "--languages", "lua,Python",
                           "--strip_prompt"]) == 0
  stripped = read_jsonl(output)
  assert [p["language"] for p in stripped] == ["py", "lua"]
  assert prompts_cli.main(["multiple", "--dataset", dataset, "--output", str(output), "--languages", "cpp,lua"]) == 0
  assert f"note: {dataset} has no problem in cpp" in capsys.readouterr().out
  assert stripped[1]["prompt"] == PROBLEMS[2]["prompt"].strip() and stripped[1]["prompt_stripped"] is True


@needs_sandbox
def test_predictions_are_scored_multiple_s_way_with_results_files_pass_k_reads(dataset, tmp_path, capsys):
  prompts_path = tmp_path / "prompts.jsonl"
  assert prompts_cli.main(["multiple", "--dataset", dataset, "--output", str(prompts_path)]) == 0
  predictions = sample_predictions(tmp_path, prompts_path)
  output = tmp_path / "scores"
  argv = ["score", "--dataset", dataset, "--predictions", predictions, "--output", str(output), "--k", "1,2,10",
          "--workers", "2", *TIMEOUT]
  capsys.readouterr()
  assert cli.main(argv) == 0
  printed = capsys.readouterr().out
  metrics = json.loads((output / "metrics.json").read_text())
  assert metrics["languages"] == ["python", "javascript", "lua"]
  assert "rb" in metrics["not_evaluated"] and "| rb | not evaluated" in printed
  assert any("predictions.jsonl:4" in m for m in metrics["invalid_predictions"])
  assert "invalid prediction:" in printed and "predictions.jsonl:4" in printed
  # 5 samples per problem: pass@10 is not computable, shown as such in its column and said.
  assert metrics["python"]["not_computable"] == {"pass@10": "1 of 1 problems have fewer than 10 samples (fewest 5)"}
  assert "| n < k |" in printed
  assert "note: Python: pass@10 not computable: 1 of 1 problems have fewer than 10 samples (fewest 5)" in printed
  results = {(r["language"], r["sample_id"]): r for r in read_jsonl(output / "results.jsonl")}
  for language in LANGUAGES:
    got = [results[(language, i)]["status"] for i in range(5)]
    assert got == EXPECTED[language], (language, [results[(language, i)] for i in range(5)])
    assert [results[(language, i)]["passed"] for i in range(5)] == [True, False, False, False, True]
    m = metrics[language]
    assert m["pass@1"] == pytest.approx(0.4) and m["percent_passed"] == 40.0 and m["percent_timeout"] == 20.0
    assert m["percent_exception"] == 40.0 and m["num_problems"] == 1
  assert metrics["scoring"]["programs_executed"] == 12 and metrics["scoring"]["duplicates_reused"] == 3
  # MultiPL-E's results files: one folder per language; its pass_k rule gives the same pass@1.
  assert metrics["results_files"] == 3 and metrics["results_files_held_back"] == 0
  for code in ("py", "js", "lua"):
    mean, problems, n = multiple_pass_k(output / "multiple" / code)
    assert (problems, n) == (1, 5) and mean == pytest.approx(0.4)
  record = json.loads(gzip.open(output / "multiple" / "py" / "HumanEval_53_add.results.json.gz", "rt").read())
  assert record["results"][0]["program"] == PROBLEMS[0]["prompt"] + COMPLETIONS["py"][0] + "\n" + PROBLEMS[0]["tests"]
  assert record["temperature"] == 0.8 and list(record["results"][0]) == [  # MultiPL-E's main.py's order
      "program", "timestamp", "stdout", "stderr", "exit_code", "status"]
  # A rerun resumes: every verdict is in results.jsonl.
  assert cli.main(argv) == 0
  again = json.loads((output / "metrics.json").read_text())
  assert again["scoring"]["programs_executed"] == 0 and again["python"] == metrics["python"]


@needs_sandbox
def test_multiple_completions_and_harness_generations_score_as_the_predictions_do(dataset, tmp_path, capsys):
  prompts_path = tmp_path / "prompts.jsonl"
  assert prompts_cli.main(["multiple", "--dataset", dataset, "--output", str(prompts_path),
                           "--languages", "py,lua"]) == 0
  predictions = sample_predictions(tmp_path, prompts_path)
  completions, generations = tmp_path / "completions", tmp_path / "generations_multiple-lua.json"
  assert cli.main(["export", "--dataset", dataset, "--predictions", predictions, "--completions", str(completions),
                   "--temperature", "0.2"]) == 0
  assert cli.main(["export", "--dataset", dataset, "--predictions", predictions, "--generations", str(generations),
                   "--languages", "lua"]) == 0
  written = json.loads(generations.read_text())
  assert len(written) == 1 and len(written[0]) == 5
  assert written[0][0] == PROBLEMS[2]["prompt"].strip() + "\n" + COMPLETIONS["lua"][0]
  record = json.loads(gzip.open(completions / "lua" / "HumanEval_53_add.json.gz", "rt").read())
  assert record["temperature"] == 0.2 and record["completions"] == COMPLETIONS["lua"] + COMPLETIONS["lua"][:1]

  verdicts = {}
  for name, argv in (("completions", ["--completions", str(completions / "lua")]),
                     ("generations", ["--dataset", dataset, "--generations", str(generations), "--languages", "lua"])):
    output = tmp_path / f"scores_{name}"
    assert cli.main(["score", *argv, "--output", str(output), "--k", "1", *TIMEOUT]) == 0, capsys.readouterr()
    verdicts[name] = {(r["language"], r["sample_id"]): r["status"] for r in read_jsonl(output / "results.jsonl")}
  assert [verdicts["generations"][("lua", i)] for i in range(5)] == EXPECTED["lua"]
  assert verdicts["completions"] == verdicts["generations"]
  # export's whole folder (one folder per language) is read too; an empty one is refused.
  assert cli.main(["score", "--completions", str(completions), "--output", str(tmp_path / "both"), "--k", "1",
                   *TIMEOUT]) == 0
  both = json.loads((tmp_path / "both" / "metrics.json").read_text())
  assert both["languages"] == ["python", "lua"] and both["scoring"]["duplicates_reused_from_earlier_runs"] == 0
  (tmp_path / "empty").mkdir()
  assert cli.main(["score", "--completions", str(tmp_path / "empty"), "--output", str(tmp_path / "none")]) == 2
  assert "no MultiPL-E completions file" in capsys.readouterr().err
  # The completions files' own temperature goes into the results files.
  assert json.loads(gzip.open(tmp_path / "scores_completions" / "multiple" / "lua" / "HumanEval_53_add.results.json.gz",
                              "rt").read())["temperature"] == 0.2


@needs_sandbox
def test_the_beam_runner_gives_the_local_verdicts(dataset, tmp_path):
  prompts_path = tmp_path / "prompts.jsonl"
  assert prompts_cli.main(["multiple", "--dataset", dataset, "--output", str(prompts_path), "--languages", "py"]) == 0
  predictions = sample_predictions(tmp_path, prompts_path)
  runs = {}
  for name, extra in (("local", []), ("beam", ["--runner", "DirectRunner"])):
    output = tmp_path / name
    assert cli.main(["score", "--dataset", dataset, "--predictions", predictions, "--output", str(output),
                     "--k", "1", *TIMEOUT, *extra]) == 0
    runs[name] = {(r["qid"], r["sample_id"]): r["status"] for r in read_jsonl(output / "results.jsonl")}
  assert runs["beam"] == runs["local"] and [runs["local"][("HumanEval_53_add", i)] for i in range(5)] == EXPECTED["python"]


def test_bad_input_is_refused_with_its_flag(dataset, tmp_path, capsys):
  path = write_jsonl(tmp_path / "p.jsonl", [])
  assert cli.main(["score", "--predictions", path, "--output", str(tmp_path / "o")]) == 2
  assert "--predictions needs --dataset" in capsys.readouterr().err
  assert cli.main(["score", "--dataset", dataset, "--predictions", path, "--completions", path,
                   "--output", str(tmp_path / "o")]) == 2
  assert "give one of --predictions, --completions or --generations" in capsys.readouterr().err
  assert cli.main(["score", "--dataset", dataset, "--predictions", path, "--output", str(tmp_path / "o"),
                   "--k", "0"]) == 2
  assert "--k values must be positive" in capsys.readouterr().err
  assert cli.main(["score", "--dataset", dataset, "--predictions", path, "--output", str(tmp_path / "o"),
                   "--timeout", "cpp=soon"]) == 2
  assert "--timeout: cpp: 'soon' is not a number of seconds" in capsys.readouterr().err
  timeouts = scoring.parse_timeouts("c++=30", multiple_execution.TIMEOUT_S)  # over MultiPL-E's, not the paper's
  assert timeouts["cpp"] == 30 and timeouts["go"] == multiple_execution.TIMEOUT_S["go"] == 30 and timeouts["lua"] == 5
  assert cli.main(["score", "--dataset", dataset, "--generations", path, "--output", str(tmp_path / "o")]) == 2
  assert "one language at a time" in capsys.readouterr().err


@needs_sandbox
def test_the_ablation_grid_scores_multiple_problems_and_the_paper_tables_read_them(dataset, tmp_path, capsys):
  from experiments import score_grid

  (tmp_path / "tiny_natural").mkdir()
  (tmp_path / "tiny_natural" / "done.json").write_text("{}")
  grid = score_grid.parse_datasets(f"mpl={dataset}:multiple")
  assert grid == [score_grid.Dataset("mpl", dataset, "multiple")]
  assert score_grid.main(["--grid", str(tmp_path), "--datasets", f"mpl={dataset}:multiple", "--dry_run"]) == 0
  assert f"python -m evaluation.multiple score --dataset {dataset}" in capsys.readouterr().out

  def fake_sample(command):  # sample.py, faked: the correct and the wrong completion of each prompt
    flag = lambda name: next(a for a in command if a.startswith(f"--{name}="))[len(name) + 3:]  # noqa: E731
    lines = [{"qid": p["qid"], "language": p["language"], "sample_id": i, "code": COMPLETIONS[p["language"]][i],
              "finish_reason": "stop", "num_tokens": 5}
             for p in read_jsonl(Path(flag("prompts"))) for i in (0, 1)]
    write_jsonl(Path(flag("output")), lines)
    return 0

  assert score_grid.run(str(tmp_path), grid, ["tiny"], ["natural"], languages=["python", "lua"], num_samples=2,
                        runner=fake_sample) == 0
  metrics = json.loads((tmp_path / "tiny_natural" / "scores" / "mpl" / "metrics.json").read_text())
  assert metrics["languages"] == ["python", "lua"] and metrics["python"]["pass@1"] == 0.5
  assert "2 OK" in capsys.readouterr().out
  assert "mpl" in (tmp_path / "paper_tables.md").read_text()
