"""pass@k against hand-computed values."""

from math import comb

import pytest

from evaluation import passk
from evaluation.passk import mean_pass_at_k, pass_at_k


def test_hand_computed_values():
  # n = 10, c = 3: pass@1 = c / n; pass@5 = 1 - C(7,5)/C(10,5) = 1 - 21/252.
  assert pass_at_k(10, 3, 1) == pytest.approx(0.3)
  assert pass_at_k(10, 3, 5) == pytest.approx(1 - 21 / 252)
  assert pass_at_k(10, 0, 1) == 0.0
  assert pass_at_k(10, 0, 5) == 0.0
  assert pass_at_k(10, 10, 1) == 1.0
  assert pass_at_k(10, 10, 10) == 1.0
  # n - c < k: every draw of k contains a correct sample.
  assert pass_at_k(10, 8, 5) == 1.0
  assert pass_at_k(10, 6, 5) == pytest.approx(1 - comb(4, 5) / comb(10, 5))  # C(4,5) = 0


def test_stable_form_matches_binomials_where_they_fit():
  for n in (1, 7, 50):
    for c in range(n + 1):
      for k in range(1, n + 1):
        assert pass_at_k(n, c, k) == pytest.approx(1 - comb(n - c, k) / comb(n, k), abs=1e-12)


def test_large_n_does_not_overflow():
  assert 0.0 < pass_at_k(200, 1, 100) == pytest.approx(0.5)
  assert pass_at_k(200, 3, 1) == pytest.approx(3 / 200)


def test_invalid_arguments_are_rejected():
  with pytest.raises(ValueError):
    pass_at_k(10, 11, 1)
  with pytest.raises(ValueError):
    pass_at_k(10, 3, 11)
  with pytest.raises(ValueError):
    pass_at_k(10, 3, 0)


def test_mean_keeps_only_k_at_most_every_n():
  counts = {"a": (10, 3), "b": (10, 0), "c": (20, 20)}
  result = mean_pass_at_k(counts, ks=(1, 10, 100))
  assert set(result) == {"pass@1", "pass@10"}
  assert result["pass@1"] == pytest.approx((0.3 + 0.0 + 1.0) / 3)
  assert result["pass@10"] == pytest.approx((1.0 + 0.0 + 1.0) / 3)
  assert mean_pass_at_k({}) == {}


def test_a_k_above_some_problems_samples_is_named_not_computable_not_dropped_in_silence():
  counts = {"a": (2, 1), "b": (5, 0), "c": (2, 2)}
  assert set(mean_pass_at_k(counts, ks=(1, 2, 5))) == {"pass@1", "pass@2"}
  why = passk.not_computable(counts, ks=(1, 2, 5))
  assert why == {"pass@5": "2 of 3 problems have fewer than 5 samples (fewest 2)"}
  assert passk.not_computable(counts, ks=(1, 2)) == {} and passk.not_computable({}, ks=(5,)) == {}
  python = {**mean_pass_at_k(counts, ks=(1, 5)), "not_computable": passk.not_computable(counts, ks=(1, 5))}
  lua = {"pass@1": 0.25, "pass@10": 0.5, "not_computable": {}}
  assert passk.columns([python, lua]) == ["pass@1", "pass@5", "pass@10"]
  assert [passk.cell(python, k, 3) for k in ("pass@1", "pass@5", "pass@10")] == ["0.500", "n < k", "–"]
  assert passk.not_computable_lines({"Python": python, "Lua": lua}) == [
      "note: Python: pass@5 not computable: 2 of 3 problems have fewer than 5 samples (fewest 2)"]
