"""The paper's Figure 5, Figure 6 and Tables 8-13 / 18-19 from synthetic scored grids, against values
computed by hand."""

from __future__ import annotations

import json

import pytest

from experiments import paper_results as pr

SIZES, MIXTURES = ["1b", "2b"], ["natural", "unimax_1", "unimax_2"]


def metrics(k: int, values: dict[str, float | None]) -> dict:
  """A metrics.json of evaluation.score with pass@k per language (None: fewer samples than k)."""
  out = {"languages": list(values)}
  for name, value in values.items():
    out[name] = {"num_predictions": 10, "percent_error": 10.0, "percent_timeout": 1.0,
                 "percent_passed_some_tests_but_failed": 20.0, "percent_tests_passed": 55.0}
    if value is not None:
      out[name][f"pass@{k}"] = value
  return out


# java and python are high-resource, lua and rust low-resource.
HUMANEVAL = {
    ("1b", "natural"): {"java": 0.5, "python": 0.3, "lua": 0.2, "rust": 0.0},
    ("1b", "unimax_1"): {"java": 0.4, "python": 0.3, "lua": 0.3, "rust": 0.1},
    ("1b", "unimax_2"): {"java": 0.45, "python": 0.33, "lua": 0.1, "rust": 0.2},
    ("2b", "natural"): {"java": 0.8, "python": 0.5, "lua": 0.4, "rust": 0.2},
    ("2b", "unimax_1"): {"java": 0.6, "python": None, "lua": 0.6, "rust": 0.3},
}
TRANSLATION = {  # from Python: no Python predictions
    ("1b", "natural"): {"java": 0.2, "lua": 0.1},
    ("1b", "unimax_1"): {"java": 0.3, "lua": 0.2},
}


def grid(tmp_path):
  for (size, mixture), values in HUMANEVAL.items():
    path = tmp_path / f"{size}_{mixture}" / "scores" / "metrics.json"  # the plain layout: humaneval
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(metrics(100, values)))
  for (size, mixture), values in TRANSLATION.items():
    path = tmp_path / f"{size}_{mixture}" / "scores" / "translation" / "metrics.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(metrics(25, values)))
  return pr.read_grid(str(tmp_path), SIZES, MIXTURES)


def test_the_papers_k_per_dataset():
  assert [pr.paper_k(d) for d in ("humaneval", "translation", "bc_tp3", "transcoder_cpp", "mbpp")] == [100, 25, 25, 25, 100]
  assert pr.parse_ks("humaneval=1,translation=5") == {"humaneval": 1, "translation": 5}
  with pytest.raises(ValueError, match="dataset=k"):
    pr.parse_ks("humaneval=0")


def test_figure5_is_the_mean_passk_of_high_and_low_resource_languages(tmp_path):
  datasets = grid(tmp_path)
  assert set(datasets) == {"humaneval", "translation"}
  data = pr.figure5(datasets, {"humaneval": 100, "translation": 25})
  assert data["humaneval"]["natural"]["1b"] == {"high": pytest.approx(0.4), "low": pytest.approx(0.1)}
  # Python has fewer samples than k in 2b unimax_1: the mean is over the languages that have pass@k.
  assert data["humaneval"]["unimax_1"]["2b"] == {"high": pytest.approx(0.6), "low": pytest.approx(0.45)}
  assert data["translation"]["unimax_1"]["1b"] == {"high": pytest.approx(0.3), "low": pytest.approx(0.2)}


def test_relative_change_against_the_same_size_natural_with_undefined_cells_said(tmp_path):
  datasets = grid(tmp_path)
  rows = pr.change_rows(datasets, {"humaneval": 100, "translation": 25}, SIZES, MIXTURES)
  by = {(r["dataset"], r["size"], r["mixture"]): r for r in rows}
  assert set(by) == {("humaneval", "1b", "unimax_1"), ("humaneval", "1b", "unimax_2"),
                     ("humaneval", "2b", "unimax_1"), ("translation", "1b", "unimax_1")}
  row = by[("humaneval", "1b", "unimax_1")]
  assert row["change"]["java"] == pytest.approx(-20.0)        # (0.4 - 0.5) / 0.5
  assert row["change"]["python"] == pytest.approx(0.0)
  assert row["change"]["lua"] == pytest.approx(50.0)          # (0.3 - 0.2) / 0.2
  assert row["change"]["rust"] is None and row["why"]["rust"] == "0 → 0.100"  # Natural solved nothing
  assert row["high_mean"] == pytest.approx(-10.0) and row["low_mean"] == pytest.approx(50.0)
  assert by[("humaneval", "2b", "unimax_1")]["why"]["python"] == "n < k"
  assert by[("translation", "1b", "unimax_1")]["why"]["python"] == "–"  # the source language
  assert by[("translation", "1b", "unimax_1")]["change"]["java"] == pytest.approx(50.0)
  # Worst and best of each language per dataset and size, over the mixtures.
  other = by[("humaneval", "1b", "unimax_2")]
  assert other["change"]["java"] == pytest.approx(-10.0) and other["change"]["lua"] == pytest.approx(-50.0)
  assert "java" in row["worst"] and "java" in other["best"]
  assert "lua" in row["best"] and "lua" in other["worst"]
  assert "rust" not in row["best"] | row["worst"]  # defined for one mixture only


def test_figure6_averages_the_defined_changes_over_datasets_and_sizes(tmp_path):
  datasets = grid(tmp_path)
  rows = pr.change_rows(datasets, {"humaneval": 100, "translation": 25}, SIZES, MIXTURES)
  data = pr.figure6(rows)
  # java, unimax_1: humaneval 1b -20, humaneval 2b (0.6-0.8)/0.8 = -25, translation 1b +50.
  assert data["unimax_1"]["java"] == pytest.approx((-20 - 25 + 50) / 3)
  assert data["unimax_1"]["python"] == pytest.approx(0.0)  # defined in humaneval 1b only
  assert "rust" not in data["unimax_2"]  # Natural 1b solved no Rust problem


def test_tables_and_figures_written_with_the_undefined_cells_named(tmp_path):
  grid(tmp_path)
  out = tmp_path / "figures"
  assert pr.main(["--grid", str(tmp_path), "--sizes", "1b,2b", "--mixtures", "natural,unimax_1,unimax_2",
                  "--output", str(out)]) == 0
  assert {p.name for p in out.iterdir()} == {"paper_tables.md", "fig5_passk.png", "fig6_passk_relative_change.png"}
  text = (out / "paper_tables.md").read_text()
  assert "## humaneval: pass@100 (Tables 8-11)" in text and "## translation: pass@25 (Tables 8-11)" in text
  assert "| 1b | natural | 0.500 | 0.300 | 0.200 | 0.000 |" in text
  assert "| humaneval | 1b | unimax_1 | 100 | _-20.0_ | _+0.0_ | -10.0 |" in text  # Java, Python (both worst of 1b), mean
  assert "| humaneval | 1b | unimax_2 | 100 | **-10.0** | **+10.0** | +0.0 |" in text
  assert "0 → 0.100" in text and "n < k" in text
  assert "| humaneval | 1b | natural | Java | 20.0 | 55.0 | 10.0 | 1.0 |" in text  # Figure 7 / Tables 18-19
  assert pr.main(["--grid", str(tmp_path / "empty")]) == 2
