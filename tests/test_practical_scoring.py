"""Practical-task scoring: numpy and pandas in the sandbox and nothing else of the virtualenv, hostile
completions contained, junk after the body cut, the metrics, per-category counting, resume, and the
mean ± std summary over seeds."""

from __future__ import annotations

import json
import os

import pytest

from data.practical_tasks import Problem
from evaluation.practical import score as practical
from sandbox import execution

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIMITS = execution.Limits(timeout_s=10)
needs_sandbox = pytest.mark.skipif(bool(execution.missing(practical.toolchain())),
                                   reason="no sandbox (bwrap) on this machine; run `make toolchains`")

PANDAS = Problem(
    problem_id="p1", intent="Add a column total = a + b to a copy of df and return it.",
    code=("import pandas as pd\n\n"
          "def add_total(df):\n"
          "    out = df.copy()\n"
          "    out['total'] = out['a'] + out['b']\n"
          "    return out\n"),
    tests=("import pandas as pd\ndf = pd.DataFrame({'a': [1, 2], 'b': [3, 4]})\n"
           "assert add_total(df)['total'].tolist() == [4, 6]\n",
           "import pandas as pd\ndf = pd.DataFrame({'a': [0], 'b': [0]})\nadd_total(df)\n"
           "assert list(df.columns) == ['a', 'b']\n"),
    categories=("pandas", "assign"))
NUMPY = Problem(
    problem_id="n1", intent="Return the sum of each row of a matrix as a list.",
    code=("import numpy as np\n\n"
          "def row_sums(matrix):\n"
          "    totals = np.asarray(matrix).sum(axis=1)\n"
          "    return totals.tolist()\n"),
    tests=("assert row_sums([[1, 2], [3, 4]]) == [3, 7]\n",
           "import numpy as np\nassert row_sums(np.eye(3)) == [1.0, 1.0, 1.0]\n",
           "assert row_sums([[-1, 1]]) == [0]\n"),
    categories=("numpy",))
PLAIN = Problem(
    problem_id="s1", intent="Say whether jax can be imported.",
    code=("def jax_available():\n    try:\n        import jax\n        return True\n"
          "    except ImportError:\n        return False\n"),
    tests=("assert jax_available() is False\n",), categories=("builtin",))
PROBLEMS = {p.problem_id: p for p in (PANDAS, NUMPY)}


def write_predictions(path, records) -> str:
  with open(path, "w", encoding="utf-8") as f:
    for record in records:
      f.write(json.dumps({"language": "python", **record}) + "\n")
  return str(path)


def test_completion_code_cuts_where_the_function_ends():
  junk = "    return 1\n\n# Example usage\nprint(f())\ndef g():\n    pass\n"
  assert practical.completion_code(NUMPY, junk) == "    return 1\n"
  for stop in ("if __name__ == '__main__':\n    f()\n", "class A:\n    pass\n", "x = f()\n"):
    assert practical.completion_code(NUMPY, "    return 1\n" + stop) == "    return 1\n"
  # Column 0 inside a string or brackets is still the body; a body without a newline gets one.
  kept = "    s = '''a\ndef b'''\n    x = [1,\n2]\n    return s, x\n"
  assert practical.completion_code(NUMPY, kept + "print(1)\n") == kept
  assert practical.completion_code(NUMPY, "    return 1") == "    return 1\n"
  assert practical.generated_function(NUMPY, NUMPY.body + "print(1)\n") == NUMPY.code


def test_site_entries_are_the_tasks_libraries_and_their_requirements():
  names = {os.path.basename(p) for p in practical.site_entries()}
  assert {"numpy", "pandas", "dateutil", "pytz", "tzdata", "six.py"} <= names
  # CodeInsight's other libraries (dependencies of this project), with their own requirements.
  assert {"scipy", "sklearn", "joblib", "threadpoolctl.py", "bs4", "soupsieve"} <= names
  assert not names & {"jax", "pyarrow", "site-packages"}, names
  assert all(p.startswith(practical.site_packages() + os.sep) for p in practical.site_entries())


def test_an_optional_library_that_is_not_installed_is_left_out(monkeypatch):
  from evaluation.practical import program

  monkeypatch.setattr(program, "OPTIONAL_PACKAGES", ("scipy", "no-such-distribution"))
  assert program.installed_packages() == ("numpy", "pandas", "scipy")


@needs_sandbox
def test_correct_pandas_and_numpy_solutions_pass_and_a_wrong_one_fails():
  for problem in (PANDAS, NUMPY):
    result = practical.run_problem(problem, problem.body + "\nprint(junk(\n", LIMITS)
    assert result["passed"], result
    assert result["tests_passed"] == result["tests"] == len(problem.tests) and result["error"] is None
  # Off by one on negative rows only: the third test fails, the first two pass. Its forged record
  # (no nonce) counts for nothing.
  wrong = ("    print('- 2 pass')\n"
           "    return [sum(abs(x) for x in row) for row in matrix]\n")
  result = practical.run_problem(NUMPY, wrong, LIMITS)
  assert not result["passed"] and result["tests_passed"] == 2 and result["tests"] == 3
  assert result["outcomes"][:2] == ["pass", "pass"] and result["error"].startswith("AssertionError")
  assert "row_sums([[-1, 1]])" in result["error"]  # the failing line is named


@needs_sandbox
def test_the_codeinsight_harness_preloads_and_shares_one_namespace_as_the_authors_harness_does():
  from evaluation.practical import program

  # np without an import, and test 1 reading the `result` test 0 computed (CodeInsight's tests do both).
  doubled = Problem(problem_id="ci/1", intent="Double arr0.", code="def test(arr0):\n    return arr0 * 2\n",
                    tests=("arr0 = np.array([1, 2])\nresult = test(arr0)\nassert (result == np.array([2, 4])).all()\n",
                           "assert result.sum() == 6\n"), categories=(), harness="codeinsight")
  assert program.preloaded(doubled) == {"np": "numpy"}  # only the names the problem reads
  assert practical.run_problem(doubled, doubled.body, LIMITS)["outcomes"] == ["pass", "pass"]
  # The candidate's own `result` is what test 1 judges: tripled fails both tests.
  assert practical.run_problem(doubled, "    return arr0 * 3\n", LIMITS)["tests_passed"] == 0
  isolated = Problem(**{**doubled.__dict__, "problem_id": "ci/1-isolated", "harness": "isolated"})
  with pytest.raises(practical.ReferenceFailure, match="NameError: name 'np' is not defined"):
    practical.reference_records(isolated, LIMITS)
  # The solution runs again before each test, as codeinsight.py runs code + test per file: module
  # state starts afresh.
  counted = Problem(problem_id="ci/2", intent="Count the calls.",
                    code="SEEN = []\n\ndef test(x):\n    SEEN.append(x)\n    return len(SEEN)\n",
                    tests=("assert test(5) == 1\n", "assert test(6) == 1\n"), categories=(), harness="codeinsight")
  assert practical.run_problem(counted, counted.body, LIMITS)["passed"]


@needs_sandbox
def test_scipy_sklearn_and_bs4_import_in_the_sandbox():
  code = ("from bs4 import BeautifulSoup\nfrom scipy.special import factorial\n"
          "from sklearn.preprocessing import MinMaxScaler\n\n"
          "def test(html, values):\n"
          "    scaled = MinMaxScaler().fit_transform([[v] for v in values]).ravel().tolist()\n"
          "    return BeautifulSoup(html, 'html.parser').get_text(), int(factorial(3)), scaled\n")
  problem = Problem(problem_id="libs", intent="Use the libraries.", code=code,
                    tests=("assert test('<b>x</b>', [0, 5, 10]) == ('x', 6, [0.0, 0.5, 1.0])\n",), categories=())
  result = practical.run_problem(problem, problem.body, execution.Limits(timeout_s=60))
  assert result["passed"], result


@needs_sandbox
def test_the_rest_of_the_virtualenv_is_invisible():
  assert "jax" not in practical.site_entries()
  result = practical.run_problem(PLAIN, "    import jax\n    return True\n", LIMITS)
  assert not result["passed"] and "ModuleNotFoundError" in result["error"], result
  assert practical.run_problem(PLAIN, PLAIN.body, LIMITS)["passed"]


@needs_sandbox
def test_the_base_interpreters_third_party_packages_are_hidden():
  from sandbox.renderers import base
  from sandbox.renderers.python import RENDERER as PYTHON

  hidden = PYTHON.toolchain.hidden
  assert any(os.listdir(h) for h in hidden), hidden  # (on this machine they hold packages)
  listing = f"import os\nprint(sorted(n for h in {list(hidden)!r} if os.path.isdir(h) for n in os.listdir(h)))\n"
  for toolchain in (PYTHON.toolchain, practical.toolchain()):
    program = base.Program(files={"main.py": listing}, run=(toolchain.binaries[0], "-I", "-S", "main.py"))
    result = execution.execute(program, toolchain, LIMITS)
    assert result.stdout.strip() == "[]", (result.stdout, result.stderr)


@needs_sandbox
def test_hostile_completions_are_contained(tmp_path):
  loop = practical.run_problem(NUMPY, "    while True:\n        pass\n", execution.Limits(timeout_s=2))
  assert not loop["passed"] and loop["error"] == "timeout" and loop["tests_passed"] == 0
  outside = tmp_path / "escaped.txt"
  targets = [str(outside), os.path.join(practical.site_packages(), "planted.py")]
  secrets = [os.path.join(ROOT, "README.md"), "/etc/shadow", "nonce"]
  body = (f"    done = []\n"
          f"    for path in {targets!r}:\n"
          f"        try:\n"
          f"            open(path, 'w').write('x')\n"
          f"            done.append(path)\n"
          f"        except OSError:\n"
          f"            pass\n"
          f"    for path in {secrets!r}:\n"
          f"        try:\n"
          f"            done.append(open(path).read()[:10])\n"
          f"        except OSError:\n"
          f"            pass\n"
          # PID 1 is the box's init (the driver's bash, bwrap --as-pid-1), of the candidate's uid: the
          # kernel lets kill() return 0 but drops every signal init has no handler for, from inside
          # its namespace. Had init died, the namespace would die with it, and no record would come.
          f"    import os, signal, time\n"
          f"    for number in (signal.SIGKILL, signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGSTOP):\n"
          f"        try:\n"
          f"            os.kill(1, number)\n"
          f"        except OSError:\n"
          f"            pass\n"
          f"    time.sleep(0.2)\n"
          f"    return done\n")
  probe = Problem(problem_id="h1", intent="Try to escape.", code="def escape():\n    return []\n",
                  tests=("assert escape() == []\n",), categories=())
  result = practical.run_problem(probe, body, LIMITS)
  assert result["passed"], result  # every attempt failed inside the sandbox
  assert not outside.exists() and not os.path.exists(targets[1])


@needs_sandbox
def test_metrics_per_category_and_resume(tmp_path):
  identical = [{"qid": p.problem_id, "sample_id": 0, "code": p.body + "\nprint(1)\n"} for p in (PANDAS, NUMPY)]
  path = write_predictions(tmp_path / "right.jsonl", identical)
  values = practical.score_predictions(path, PROBLEMS, str(tmp_path / "right"), workers=2, limits=LIMITS)
  overall = values["overall"]
  assert overall["problems"] == 2 and overall["pass@1"] == 100 and overall["tests_passed"] == 100
  assert overall["bleu"] == pytest.approx(100) and overall["codebleu"] == pytest.approx(100)
  # The pandas problem counts in both of its categories.
  assert set(values["categories"]) == {"pandas", "assign", "numpy"}
  assert values["categories"]["pandas"]["problems"] == values["categories"]["assign"]["problems"] == 1
  with open(tmp_path / "right" / "metrics.json") as f:
    assert json.load(f)["overall"] == overall

  # A second sample per problem: numpy's is wrong (2 of 3 tests), pandas' does not compile.
  extra = [{"qid": "n1", "sample_id": 1, "code": "    return [sum(abs(x) for x in r) for r in matrix]\n"},
           {"qid": "p1", "sample_id": 1, "code": "    return df +\n"}]
  path = write_predictions(tmp_path / "right.jsonl", identical + extra)
  values = practical.score_predictions(path, PROBLEMS, str(tmp_path / "right"), workers=2, limits=LIMITS)
  assert values["scored_now"] == 2  # the first two were already scored
  assert values["overall"]["pass@1"] == 50  # mean over problems of c/n = (1/2 + 1/2) / 2
  assert values["overall"]["tests_passed"] == pytest.approx(100 * (2 + 3 + 0 + 2) / 10)
  assert values["overall"]["bleu"] == pytest.approx(100)  # BLEU and CodeBLEU use sample 0
  assert values["categories"]["numpy"]["pass@1"] == 50
  with open(tmp_path / "right" / "results.jsonl") as f:
    results = [json.loads(line) for line in f]
  assert len(results) == 4 and {r["error"] for r in results if r["qid"] == "p1"} == {None, "compile"}

  again = practical.score_predictions(path, PROBLEMS, str(tmp_path / "right"), workers=2, limits=LIMITS)
  assert again["scored_now"] == 0 and again["overall"] == values["overall"]
  with open(tmp_path / "right" / "results.jsonl") as f:
    assert len(f.readlines()) == 4


@needs_sandbox
def test_wrong_sample_zero_lowers_bleu_and_pass_at_1(tmp_path):
  wrong = [{"qid": "n1", "sample_id": 0, "code": "    return [0 for row in matrix]\n"},
           {"qid": "p1", "sample_id": 0, "code": PANDAS.body}]
  path = write_predictions(tmp_path / "wrong.jsonl", wrong)
  values = practical.score_predictions(path, PROBLEMS, str(tmp_path / "out"), workers=2, limits=LIMITS)
  assert values["overall"]["pass@1"] == 50 and values["categories"]["numpy"]["pass@1"] == 0
  assert values["categories"]["pandas"]["bleu"] == pytest.approx(100)
  assert values["categories"]["numpy"]["bleu"] < 100 and values["overall"]["bleu"] < 100
  assert values["categories"]["numpy"]["codebleu"] < 100


def test_prediction_file_errors_name_the_file(tmp_path):
  only_one = write_predictions(tmp_path / "one.jsonl", [{"qid": "n1", "sample_id": 0, "code": ""}])
  with pytest.raises(ValueError, match=r"one\.jsonl: no prediction for 1 of 2 problems: p1"):
    practical.score_predictions(only_one, PROBLEMS, str(tmp_path / "out"))
  unknown = write_predictions(tmp_path / "unknown.jsonl",
                              [{"qid": "n1", "code": ""}, {"qid": "zz", "code": ""}, {"qid": "p1", "code": 3},
                               {"qid": "p1", "language": "Rust", "code": ""}])
  predictions, invalid = practical.read_predictions(unknown, PROBLEMS)
  assert [p.qid for p in predictions] == ["n1"]
  assert invalid[0].endswith("unknown.jsonl:2: unknown qid 'zz' (not among the problems given)")
  assert "unknown.jsonl:3: code must be a string" in invalid[1] and "unknown.jsonl:4: language 'Rust'" in invalid[2]
  twice = write_predictions(tmp_path / "twice.jsonl", [{"qid": "n1", "sample_id": 0, "code": ""}] * 2)
  predictions, invalid = practical.read_predictions(twice, PROBLEMS)
  assert len(predictions) == 1 and "twice.jsonl:2: a second prediction for python n1 sample 0" in invalid[0]


def test_cli_scores_the_predicted_subset_and_names_an_unknown_qid(tmp_path, capsys):
  dataset = tmp_path / "dataset.jsonl"
  with open(dataset, "w") as f:
    for p in (PANDAS, NUMPY, PLAIN):
      f.write(json.dumps({"problem_id": p.problem_id, "intent": p.intent, "code": p.code,
                          "tests": list(p.tests), "categories": list(p.categories)}) + "\n")
    f.write(json.dumps({"problem_id": "untested", "intent": "x", "code": PLAIN.code, "tests": []}) + "\n")
  flags = ["--dataset", str(dataset), "--output_dir", str(tmp_path / "o")]
  none = write_predictions(tmp_path / "none.jsonl", [{"qid": "nope", "code": ""}])
  assert practical.main(["--predictions", none, *flags]) == 2
  assert "none.jsonl: no valid prediction" in capsys.readouterr().err
  if execution.missing(practical.toolchain()):
    return
  bad = write_predictions(tmp_path / "bad.jsonl", [{"qid": "n1", "code": NUMPY.body}, {"qid": "nope", "code": ""}])
  assert practical.main(["--predictions", bad, *flags, "--workers", "1"]) == 0
  captured = capsys.readouterr()
  assert "bad.jsonl:2: unknown qid 'nope'" in captured.err
  assert "| overall | 1 | 100.0 | 100.0 |" in captured.out and "| numpy | 1 |" in captured.out
  assert "pass@1 over 1 problems: 1 predicted of the 3 loaded from the dataset (1 bad record skipped)\n" in captured.out
  # The dataset's bad record is skipped, and said under the table (it is in no denominator).
  assert f"warning: 1 bad record of {dataset} skipped, the rest loaded: {dataset}:4: tests must be" in captured.out
  assert "pandas" not in captured.out

  # A fault of the scorer's own on one prediction: that one is unscored, named, and the exit is 1.
  original = practical.PracticalBenchmark.run

  def run(self, unit, stats):
    if any("POISON" in p.code for p in unit):
      raise OverflowError("int too large to convert to float")
    return original(self, unit, stats)

  practical.PracticalBenchmark.run = run
  try:
    poisoned = write_predictions(tmp_path / "poisoned.jsonl", [{"qid": "n1", "code": NUMPY.body + "\n# POISON"}])
    assert practical.main(["--predictions", poisoned, "--dataset", str(dataset), "--output_dir",
                           str(tmp_path / "o2"), "--workers", "1"]) == 1
  finally:
    practical.PracticalBenchmark.run = original
  out = capsys.readouterr().out
  assert "poisoned.jsonl:1: python n1 sample 0 could not be scored: OverflowError" in out
  # The problem is out of pass@1's denominator, and the line under the table says so.
  assert ("pass@1 over 0 problems: 1 predicted of the 3 loaded from the dataset (1 bad record skipped); "
          "1 left out, no prediction of them scored: n1\n") in out
  assert json.loads((tmp_path / "o2" / "metrics.json").read_text())["problems_left_out"] == ["n1"]
  assert out.rstrip().endswith("1 predictions could not be scored: pass@k above leaves them out; rerun the same "
                               "command to try them again (exit status 1)")

  # Predictions from a truncated prompt, or stopped at the length limit: counted, shown and warned.
  cut = write_predictions(tmp_path / "cut.jsonl", [{"qid": "n1", "code": NUMPY.body, "prompt_truncated": True,
                                                    "finish_reason": "length"}])
  assert practical.main(["--predictions", cut, "--dataset", str(dataset), "--output_dir", str(tmp_path / "o3"),
                         "--workers", "1"]) == 0
  out = capsys.readouterr().out
  assert "prompt truncated: 100% of the scored predictions; at max length: 100%" in out
  assert "warning: overall: 1 predictions (100%) were sampled from prompts sample.py truncated" in out
  values = json.loads((tmp_path / "o3" / "metrics.json").read_text())
  assert values["sampling"]["prompt_truncated"] == 1 and values["sampling"]["cut_by_length"] == 1


  # A reference solution that fails its own tests: the task is named, none of its predictions is
  # judged against it, and the exit is 1.
  broken = tmp_path / "broken.jsonl"
  broken.write_text(json.dumps({"problem_id": "b1", "intent": "Return one.", "code": "def one():\n    return 1\n",
                                "tests": ["assert one() == 2\n"], "categories": ["builtin"]}) + "\n")
  answer = write_predictions(tmp_path / "answer.jsonl", [{"qid": "b1", "code": "    return 2\n"}])
  assert practical.main(["--predictions", answer, "--dataset", str(broken), "--output_dir", str(tmp_path / "o4"),
                         "--workers", "1"]) == 1
  out = capsys.readouterr().out
  assert ("answer.jsonl:1: python b1 sample 0 could not be scored: ReferenceFailure: b1: the reference solution "
          "fails test 0") in out


def _metrics(pass_at_1: float, categories: dict[str, float], bleu: float = 10.0) -> dict:
  group = lambda value: {"problems": 3, "pass@1": value, "tests_passed": value, "bleu": bleu, "codebleu": 20.0}
  return {"overall": group(pass_at_1), "categories": {c: group(v) for c, v in categories.items()}}


def test_summarise_mean_and_sample_std_over_seeds(tmp_path):
  cells = [(0.4, 0, _metrics(10, {"pandas": 20, "numpy": 0}, bleu=10)),
           (0.4, 1, _metrics(20, {"pandas": 40}, bleu=14)),
           (0.4, 2, _metrics(30, {"pandas": 60, "numpy": 30, "loop": 5}, bleu=12)),
           (0.8, 0, _metrics(50, {"pandas": 70}))]
  summary = practical.write_summary(cells, str(tmp_path))
  assert summary["train_fractions"] == ["0.4", "0.8"] and summary["seeds"]["0.4"] == [0, 1, 2]
  assert summary["overall"]["0.4"]["pass@1"] == {"mean": 20.0, "std": 10.0, "n": 3}  # ddof=1
  assert summary["overall"]["0.4"]["bleu"] == {"mean": 12.0, "std": 2.0, "n": 3}
  assert summary["categories"]["pandas"]["0.4"] == {"mean": 40.0, "std": 20.0, "n": 3}
  # numpy is in two of the three seeds' test splits, and in none at 0.8.
  assert summary["categories"]["numpy"]["0.4"] == {"mean": 15.0, "std": pytest.approx(21.2132), "n": 2}
  assert summary["categories"]["numpy"]["0.8"] is None
  assert summary["overall"]["0.8"]["pass@1"] == {"mean": 50.0, "std": 0.0, "n": 1}
  markdown = (tmp_path / "summary.md").read_text()
  assert "| category | train 0.4 (n=3) | train 0.8 (n=1) |" in markdown
  assert "| pandas | 40.0 ± 20.0 | 70.0 ± 0.0 |" in markdown and "| numpy | 15.0 ± 21.2 | – |" in markdown
  assert "| **overall** | 20.0 ± 10.0 | 50.0 ± 0.0 |" in markdown
  rows = [line.split(" | ")[0].lstrip("| ") for line in markdown.splitlines()[4:10]]
  assert rows == ["*labels*", "loop", "*packages*", "pandas", "numpy", "**overall**"]  # as Table 5
  assert "| loop | 5.0 ± 0.0 | – |" in markdown
  assert json.loads((tmp_path / "summary.json").read_text()) == json.loads(json.dumps(summary))
  assert (tmp_path / "pass_at_1_by_category.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
  with pytest.raises(ValueError, match="two cells for train fraction 0.4, seed 0"):
    practical.summarise(cells + [(0.4, 0, _metrics(1, {}))])


@needs_sandbox
def test_completions_that_are_the_same_once_cut_share_one_run(tmp_path):
  """The shared loop (evaluation/resumable.py): practical tasks run each distinct cut program once."""
  same = [NUMPY.body, NUMPY.body + "\n\nprint(normalize([[1, 2]]))  # example usage\n", NUMPY.body + "\n# done\n"]
  records = [{"qid": "n1", "sample_id": i, "code": code} for i, code in enumerate(same)]
  records.append({"qid": "p1", "sample_id": 0, "code": PANDAS.body})
  path = write_predictions(tmp_path / "p.jsonl", records)
  values = practical.score_predictions(path, PROBLEMS, str(tmp_path / "out"), workers=2, limits=LIMITS)
  assert values["scoring"]["programs_executed"] == 2 and values["scoring"]["duplicates_reused"] == 2
  assert values["overall"]["pass@1"] == 100
  with open(tmp_path / "out" / "results.jsonl") as f:
    results = [json.loads(line) for line in f]
  assert len(results) == 4 and len({r["program_sha1"] for r in results if r["qid"] == "n1"}) == 1


# ---- per label and per package (issue 29): metrics() over hand-made results, no sandbox ----------

LABELLED = [Problem("A", "Count x.", "def a(x):\n    return len(x)\n", ("t",) * 3, ()),
            Problem("B", "Copy df0.", "import pandas as pd\n\ndef b(df0):\n    y = df0.copy()\n    return y\n",
                    ("t",) * 2, ()),
            Problem("C", "Find a.", "import re\n\ndef c(str0):\n    return [m for m in re.findall('a', str0)]\n",
                    ("t",) * 3, ()),
            Problem("D", "Count uniques.", "import numpy as np\nimport pandas as pd\n\n"
                    "def d(arr0):\n    return len(np.unique(arr0))\n", ("t",) * 3, ())]
# (passed, tests passed) of samples 0 and 1 of each problem.
OUTCOMES = {"A": [(True, 3), (False, 1)], "B": [(False, 0), (False, 1)], "C": [(True, 3), (True, 3)],
            "D": [(False, 2), (True, 3)]}


def _labelled_metrics():
  from data.practical_labels import with_labels
  from evaluation.resumable import Prediction

  problems, source = with_labels(LABELLED, None)
  assert source == "derived" and {p.problem_id: p.categories for p in problems} == {
      "A": ("builtin", "noimport"), "B": ("assign", "pandas"), "C": ("loop", "regex"),
      "D": ("builtin", "complextask", "pandas", "numpy")}
  by_id = {p.problem_id: p for p in problems}
  predictions, results = [], {}
  for qid, outcomes in OUTCOMES.items():
    for sample, (passed, tests_passed) in enumerate(outcomes):
      # Sample 0 is the reference body but for D (BLEU and CodeBLEU read sample 0 only).
      code = "    return 0\n" if (qid, sample) == ("D", 0) else by_id[qid].body
      prediction = Prediction(qid, sample, "python", code, 1)
      predictions.append(prediction)
      results[prediction.key] = {"passed": passed, "tests": len(by_id[qid].tests), "tests_passed": tests_passed}
  return practical.metrics(problems, predictions, results)


def test_pass_at_1_and_tests_passed_per_label_and_per_package_by_hand():
  values = _labelled_metrics()
  # pass@1: mean over the group's problems of c/n (A 1/2, B 0, C 1, D 1/2); tests passed: the group's
  # passed tests over its tests, every sample.
  expected = {"builtin": (2, 50.0, 100 * 9 / 12), "assign": (1, 0.0, 25.0), "loop": (1, 100.0, 100.0),
              "complextask": (1, 50.0, 100 * 5 / 6), "pandas": (2, 25.0, 100 * 6 / 10),
              "numpy": (1, 50.0, 100 * 5 / 6), "regex": (1, 100.0, 100.0), "noimport": (1, 50.0, 100 * 4 / 6)}
  assert set(values["categories"]) == set(expected)
  for label, (problems, pass_at_1, tests_passed) in expected.items():
    group = values["categories"][label]
    assert (group["problems"], group["pass@1"], group["tests_passed"]) == (
        problems, pytest.approx(pass_at_1, abs=1e-4), pytest.approx(tests_passed, abs=1e-4)), label
  overall = values["overall"]
  assert (overall["pass@1"], overall["tests_passed"]) == (50.0, pytest.approx(100 * 16 / 22, abs=1e-4))
  # BLEU and CodeBLEU: 100 for groups whose sample 0 is the reference; D's wrong one lowers its groups
  # (the D-only groups alike; corpus BLEU of A and D in between, CodeBLEU's parts are not monotone so).
  for label in ("assign", "loop", "regex", "noimport"):
    assert values["categories"][label]["bleu"] == pytest.approx(100)
    assert values["categories"][label]["codebleu"] == pytest.approx(100)
  d_only = values["categories"]["numpy"]
  assert values["categories"]["complextask"] == d_only and d_only["bleu"] < values["categories"]["builtin"]["bleu"] < 100
  assert d_only["codebleu"] < 100 and values["categories"]["builtin"]["codebleu"] < 100


def test_the_table_lists_labels_then_packages():
  lines = practical.table(_labelled_metrics()).splitlines()
  names = [line.split(" | ")[0].lstrip("| ") for line in lines[2:]]
  assert names == ["overall", "*labels*", "builtin", "assign", "complextask", "loop",
                   "*packages*", "pandas", "noimport", "numpy", "regex"]
  assert lines[4] == "| builtin | 2 | 50.0 | 75.0 | " + " | ".join(
      f"{_labelled_metrics()['categories']['builtin'][k]:.1f}" for k in ("bleu", "codebleu")) + " |"
  assert lines[3] == "| *labels* |" + " |" * len(practical.COLUMNS)


def _write_dataset(path, problems, with_categories=True):
  with open(path, "w") as f:
    for p in problems:
      f.write(json.dumps({"problem_id": p.problem_id, "intent": p.intent, "code": p.code, "tests": list(p.tests),
                          **({"categories": list(p.categories)} if with_categories else {})}) + "\n")
  return str(path)


def test_cli_labels_flag(tmp_path, capsys):
  bare = _write_dataset(tmp_path / "bare.jsonl", (PANDAS, NUMPY), with_categories=False)
  predictions = write_predictions(tmp_path / "p.jsonl", [{"qid": "n1", "code": NUMPY.body}])
  assert practical.main(["--predictions", predictions, "--dataset", bare, "--output_dir", str(tmp_path / "o"),
                         "--labels", "dataset"]) == 2
  assert "--labels dataset: no problem of the dataset has a category label; use --labels derived" in \
      capsys.readouterr().err
  if execution.missing(practical.toolchain()):
    return
  # A dataset without labels is scored with derived ones by default; one with labels with its own.
  for dataset, flags, source, categories in (
      (bare, [], "derived", {"numpy", "assign"}),
      (_write_dataset(tmp_path / "labelled.jsonl", (PANDAS, NUMPY)), [], "dataset", {"numpy"}),
      (_write_dataset(tmp_path / "labelled2.jsonl", (PANDAS, NUMPY)), ["--labels", "derived"], "derived",
       {"numpy", "assign"})):
    out = tmp_path / source / os.path.basename(dataset)
    assert practical.main(["--predictions", predictions, "--dataset", dataset, "--output_dir", str(out),
                           "--workers", "1", *flags]) == 0
    values = json.loads((out / "metrics.json").read_text())
    assert values["labels"] == source and set(values["categories"]) == categories
  assert "| *packages* |" in capsys.readouterr().out


def test_the_prompt_variants_table_compares_overall_metrics(tmp_path):
  summaries = {"plain": practical.summarise([(0.4, 0, _metrics(10, {})), (0.4, 1, _metrics(30, {}, bleu=20))]),
               "preprompt": practical.summarise([(0.4, 0, _metrics(50, {}))])}
  table_ = practical.write_variant_summary(summaries, str(tmp_path))
  assert table_["plain"]["0.4"]["pass@1"] == {"mean": 20.0, "std": pytest.approx(14.1421), "n": 2}
  assert table_["plain"]["0.4"]["bleu"] == {"mean": 15.0, "std": pytest.approx(7.0711), "n": 2}
  assert table_["preprompt"]["0.4"]["tests_passed"] == {"mean": 50.0, "std": 0.0, "n": 1}
  markdown = (tmp_path / "prompt_variants.md").read_text()
  assert "| plain | 0.4 (n=2) | 20.0 ± 14.1 | 20.0 ± 14.1 | 15.0 ± 7.1 | 20.0 ± 0.0 |" in markdown
  assert "| preprompt | 0.4 (n=1) | 50.0 ± 0.0 | 50.0 ± 0.0 | 10.0 ± 0.0 | 20.0 ± 0.0 |" in markdown
  assert json.loads((tmp_path / "prompt_variants.json").read_text()) == json.loads(json.dumps(table_))
