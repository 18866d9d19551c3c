"""data/practical_stats.py: the paper's Tables 10 and 11 (by package, by label) on a three-problem
fixture whose every number is computed by hand, and the command's files and errors."""

import json
import math

import pytest

from data import practical_stats as ps
from data.practical_labels import with_labels
from data.practical_tasks import Problem

P1 = Problem("p1", "a b c", "def f(x):\n    return len(x)\n", ("t",), ())
P2 = Problem("p2", "a b c d e", "import re\n\ndef g(str0):\n    y = str0.lower()\n    return y\n", ("t",) * 3, ())
P3 = Problem("p3", "a", "import pandas as pd\n\ndef h(df0):\n    return df0\n", ("t",) * 2, ())
# words 3 5 1; non-blank code lines 2 4 3; AST depth 6 (Module FunctionDef Return Call Name Load),
# 7 (Module FunctionDef Assign Call Attribute Name Load), 5 (Module FunctionDef Return Name Load); tests 1 3 2.
ROWS = {"p1": (3, 2, 6, 1), "p2": (5, 4, 7, 3), "p3": (1, 3, 5, 2)}


def _expected(ids):
  out = {"items": len(ids)}
  for i, (name, _) in enumerate(ps.MEASURES):
    values = [ROWS[p][i] for p in ids]
    mean = sum(values) / len(values)
    out[name] = {"mean": pytest.approx(mean, abs=1e-4),
                 "std": pytest.approx(math.sqrt(sum((v - mean) ** 2 for v in values) / len(values)), abs=1e-4)}
  return out


def test_measures_by_hand():
  assert {p.problem_id: tuple(ps.measures(p).values()) for p in (P1, P2, P3)} == ROWS


def test_tables_10_and_11_on_a_fixture():
  problems, _ = with_labels([P1, P2, P3], "derived")
  assert [p.categories for p in problems] == [("builtin", "noimport"), ("assign", "str", "regex"), ("pandas",)]
  stats = ps.dataset_stats(problems)
  full = stats["by_package"]["full dataset"]
  # By hand: words 3 ± sqrt(8/3), code lines 3 ± sqrt(2/3), depth 6 ± sqrt(2/3), tests 2 ± sqrt(2/3).
  assert full["words"] == {"mean": 3.0, "std": pytest.approx(1.63299, abs=1e-4)}
  assert full["ast_depth"] == {"mean": 6.0, "std": pytest.approx(0.81650, abs=1e-4)}
  assert list(stats["by_package"]) == ["full dataset", "pandas", "regex", "noimport"]
  for name, ids in (("full dataset", ["p1", "p2", "p3"]), ("pandas", ["p3"]), ("regex", ["p2"]),
                    ("noimport", ["p1"])):
    assert stats["by_package"][name] == _expected(ids), name
  assert list(stats["by_label"]) == ["full dataset", "assign", "noassign", "builtin", "nobuiltin", "str", "nostr"]
  for name, ids in (("assign", ["p2"]), ("noassign", ["p1", "p3"]), ("builtin", ["p1"]),
                    ("nobuiltin", ["p2", "p3"]), ("str", ["p2"]), ("nostr", ["p1", "p3"])):
    assert stats["by_label"][name] == _expected(ids), name
  assert stats["by_label"]["nobuiltin"]["words"] == {"mean": 3.0, "std": 2.0}
  text = ps.markdown(stats)
  assert "| pandas | 1 | 1.0 ± 0.0 | 3.0 ± 0.0 | 5.0 ± 0.0 | 2.0 ± 0.0 |" in text
  assert "| noassign | 2 | 2.0 ± 1.0 | 2.5 ± 0.5 | 5.5 ± 0.5 | 1.5 ± 0.5 |" in text
  assert "the paper's Table 10" in text and "the paper's Table 11" in text


def test_dataset_labels_leave_packages_out_of_the_label_table():
  labelled = [Problem("a", "x", "def f(x):\n    return x\n", ("t",), ("pandas", "string")),
              Problem("b", "x y", "def g(x):\n    return x\n", ("t",), ())]
  stats = ps.dataset_stats(with_labels(labelled, "dataset")[0])
  assert list(stats["by_label"]) == ["full dataset", "string", "nostring"]
  assert list(stats["by_package"]) == ["full dataset", "noimport"]  # the packages come from the imports


def test_the_command_writes_markdown_and_json(tmp_path, capsys):
  dataset = tmp_path / "d.jsonl"
  dataset.write_text("".join(json.dumps({"problem_id": p.problem_id, "intent": p.intent, "code": p.code,
                                         "tests": list(p.tests)}) + "\n" for p in (P1, P2, P3)))
  out = tmp_path / "stats"
  assert ps.main(["--dataset", str(dataset), "--output_dir", str(out)]) == 0
  values = json.loads((out / "stats.json").read_text())
  assert values["labels"] == "derived" and values["by_package"]["regex"]["items"] == 1
  assert (out / "stats.md").read_text() in capsys.readouterr().out
  with pytest.raises(SystemExit):
    ps.main(["--dataset", str(dataset), "--output_dir", str(out), "--labels", "dataset"])
  assert "--labels dataset: no problem of the dataset has a category label" in capsys.readouterr().err


def test_a_dataset_s_own_labels_sit_beside_the_derived_ones(tmp_path, capsys):
  # P1 derives builtin; P2 assign and str. The dataset says builtin for P1 and P2, and str for none.
  labelled = [Problem("p1", P1.intent, P1.code, P1.tests, ("builtin",)),
              Problem("p2", P2.intent, P2.code, P2.tests, ("builtin", "math")), P3]
  side = ps.labels_side_by_side(labelled)
  # CodeInsight's name for the paper's >threevars is read as it.
  many = Problem("p4", "x", "def f(a, b, c, d):\n    return a\n", ("t",), ("more_than_3_vars",))
  assert ps.labels_side_by_side([many, P1])[">threevars"] == {"dataset": 1, "derived": 1, "both": 1, "agreement": 1.0}
  assert side["builtin"] == {"dataset": 2, "derived": 1, "both": 1, "agreement": pytest.approx(2 / 3, abs=1e-4)}
  assert side["str"] == {"dataset": 0, "derived": 1, "both": 0, "agreement": pytest.approx(2 / 3, abs=1e-4)}
  assert side["math"] == {"dataset": 1, "derived": 0, "both": 0, "agreement": pytest.approx(2 / 3, abs=1e-4)}
  assert side["assign"]["derived"] == 1 and "regex" not in side and "pandas" not in side  # packages stay apart
  dataset = tmp_path / "labelled.jsonl"
  dataset.write_text("".join(json.dumps({"problem_id": p.problem_id, "intent": p.intent, "code": p.code,
                                         "tests": list(p.tests), "categories": list(p.categories)}) + "\n"
                             for p in labelled))
  # Whichever labels the tables use, the side-by-side table is written.
  for labels in ("dataset", "derived"):
    assert ps.main(["--dataset", str(dataset), "--output_dir", str(tmp_path / labels), "--labels", labels]) == 0
    values = json.loads((tmp_path / labels / "stats.json").read_text())
    assert values["labels_side_by_side"]["builtin"]["dataset"] == 2
    assert "| builtin | 2 | 1 | 1 | 66.7% |" in (tmp_path / labels / "stats.md").read_text()
  capsys.readouterr()
