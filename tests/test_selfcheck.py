"""evaluation/selfcheck.py: the README's per-language self-check table."""

import pytest

from evaluation import selfcheck
from sandbox import execution
from sandbox.renderers import get
from evaluation.score import load_benchmark


@pytest.mark.skipif(bool(execution.missing(get("python").toolchain)), reason="no bwrap here")
def test_python_row_counts_stubs_canonical_and_hand_written():
  questions = list(load_benchmark("humaneval").values())[:3]
  row = selfcheck.check_language("python", questions, workers=2)
  assert (row["typed"], row["stub_failed"], row["stub_bad"], row["canonical_passed"]) == (3, 3, [], 3)
  assert row["correct"][0] == row["correct"][1] >= 10
  assert row["wrong_failed"][0] == row["wrong_failed"][1] and row["throws_once_isolated"] == [1, 1]
  text = selfcheck.table([row, {"language": "go", "missing": ["/usr/bin/go"]}])
  assert "| Python | Python 3." in text and "| 3 | 3 | 0 | 0 | 3/3 |" in text
  assert "| Go | missing: /usr/bin/go |" in text and "| Dart | not evaluated" in text
