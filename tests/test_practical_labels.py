"""data/practical_labels.py: each of Table 9's rules on small positive and negative snippets (the
issue's edge cases among them: a comprehension is a loop, a method call on a str is a string
operation, an f-string is not), the package, the measures of the statistics, and --labels'
choice between the dataset's labels and the derived ones."""

import pytest

from data import practical_labels as pl
from data.practical_tasks import SMALL_DATASET, Problem, load_problems


def _code(body: str, params: str = "x", imports: str = "") -> str:
  lines = "".join(f"    {line}\n" for line in body.splitlines())
  return f"{imports}def f({params}):\n{lines}"


def _has(label: str, body: str, **kw) -> bool:
  return label in pl.labels(_code(body, **kw))


@pytest.mark.parametrize("label, body, kw", [
    ("assign", "y = x\nreturn y", {}),
    ("assign", "x += 1\nreturn x", {}),
    ("assign", "y: int = x\nreturn y", {}),
    ("assign", "return (y := x)", {}),
    ("assign", "x['a'] = 1\nreturn x", {}),
    ("builtin", "return len(x)", {}),
    ("builtin", "return sorted(x, key=abs)", {}),
    ("cond", "if x:\n    return 1\nreturn 2", {}),
    ("cond", "return 1 if x else 2", {}),
    ("cond", "return [v for v in x if v]", {}),
    ("loop", "for v in x:\n    pass\nreturn x", {}),
    ("loop", "while x:\n    x = x[1:]\nreturn x", {}),
    ("loop", "return [v for v in x]", {}),  # a comprehension is a loop
    ("loop", "return {v: 1 for v in x}", {}),
    ("loop", "return any(v for v in x)", {}),
    ("str", "return x.lower()", {}),  # a str-only method on any receiver
    ("str", "return ', '.join(x)", {}),  # a method call on a str literal
    ("str", "return str0.count('a')", {"params": "str0"}),  # CodeInsight's normalised str name
    ("str", "return x.count('a')", {"params": "x: str"}),  # annotated str
    ("str", "return str(x).zfill(3)", {}),
    ("str", "return f'{x}'.upper()", {}),  # a method call on an f-string
    ("str", "return df0['a'].str.len()", {"params": "df0"}),  # pandas' .str accessor
    ("str", "return 'a' + x", {}),
    ("str", "return '%d' % x", {}),
    ("list", "x.append(1)\nreturn x", {}),
    ("list", "return x.sort()", {}),
    ("list", "return lst0.pop()", {"params": "lst0"}),
    ("list", "return x.index(1)", {"params": "x: list"}),
    ("list", "return [1, 2].count(x)", {}),
    ("multiline", "y = x\nz = y\nreturn z", {}),
    (">threevars", "return a", {"params": "a, b, c, d"}),
    (">threevars", "return a", {"params": "a, b, c, *rest"}),
    ("complextask", "return 1", {"imports": "import os\nimport sys\n\n"}),
    ("complextask", "return 1", {"imports": "import os, sys\n\n"}),
    ("multipletask", "y = len(x)\nfor v in x:\n    pass\nreturn y", {}),  # assign, builtin, loop
])
def test_each_rule_on_a_positive_snippet(label, body, kw):
  assert _has(label, body, **kw), pl.labels(_code(body, **kw))


@pytest.mark.parametrize("label, body, kw", [
    ("assign", "return x", {}),
    ("assign", "for v in x:\n    pass\nreturn [w for w in x]", {}),  # loop variables are not assignments
    ("assign", "y: int\nreturn x", {}),  # an annotation without a value
    ("builtin", "return x.sum()", {}),
    ("builtin", "return math.sqrt(x)", {"imports": "import math\n\n"}),
    ("builtin", "return len", {"params": "len"}),  # a parameter shadows the builtin
    ("builtin", "raise ValueError(x)", {}),  # an exception class is not a built-in function
    ("cond", "return x and 1", {}),
    ("cond", "while x:\n    x = x[1:]\nreturn x", {}),
    ("loop", "return x", {}),
    ("loop", "return map(abs, x)", {}),
    ("str", "return f'{x}!'", {}),  # an f-string alone is not a string operation
    ("str", "return re.split(',', x)", {"imports": "import re\n\n"}),  # a module's split
    ("str", "return df0.replace(1, 2)", {"params": "df0"}),  # a method of a normalised DataFrame name
    ("str", "return x.count(1)", {}),  # count: not only a str method, and x has no type
    ("str", "return str(x)", {}),  # a conversion: builtin, not a string operation
    ("str", "return x + 1", {}),
    ("list", "return np.append(x, 1)", {"imports": "import numpy as np\n\n"}),
    ("list", "return x.pop()", {}),  # pop: dicts and sets have it too, and x has no type
    ("list", "return arr0.sort()", {"params": "arr0"}),  # a normalised array name
    ("list", "return [v for v in x]", {}),  # a list, no list method
    ("multiline", "y = x\nreturn y", {}),
    ("multiline", "y = x\n\n# a comment\nreturn y", {}),  # blank and comment lines do not count
    (">threevars", "return a", {"params": "a, b, c"}),
    ("complextask", "return 1", {"imports": "from collections import Counter, defaultdict\n\n"}),
    ("complextask", "return 1", {"imports": "import os\nimport os.path\n\n"}),
    ("multipletask", "y = len(x)\nreturn y", {}),  # two labels
])
def test_each_rule_on_a_negative_snippet(label, body, kw):
  assert not _has(label, body, **kw), pl.labels(_code(body, **kw))


def test_multipletask_counts_the_other_labels_only():
  code = _code("y = len(x)\nif y:\n    return y\nreturn 0")  # assign builtin cond multiline
  assert pl.labels(code) == ("assign", "builtin", "cond", "multiline", "multipletask")
  # Three labels but one of them a package: no multipletask.
  pandas = _code("y = len(x)\nreturn y", imports="import pandas as pd\n\n")
  assert pl.derived_categories(pandas) == ("assign", "builtin", "pandas")


def test_a_docstring_in_the_reference_is_not_a_body_line():
  assert pl.body_lines(_code('"""Doc."""\ny = x\nreturn y')) == 2


@pytest.mark.parametrize("imports, expected", [
    ("", ("noimport",)), ("import pandas as pd\n", ("pandas",)), ("import numpy as np\nimport re\n", ("numpy", "regex")),
    ("import regex\n", ("regex",)), ("from itertools import groupby\n", ("other",)),
    ("import pandas as pd\nimport json\n", ("pandas",)), ("from numpy.linalg import norm\n", ("numpy",))])
def test_the_package_of_the_imports(imports, expected):
  assert pl.packages(_code("return x", imports=imports)) == expected


def test_measures_ast_depth_and_code_lines():
  # The deepest path: Module > FunctionDef > Return > Call int > Call join > Call map > Name lst0 > Load.
  code = "def test(lst0):\n    return int(''.join(map(str, lst0)))\n"
  assert pl.ast_depth(code) == 8
  assert pl.ast_depth("x") == 4  # Module > Expr > Name > Load
  assert pl.code_lines("import re\n\ndef f(x):\n\n    return x\n") == 3


def test_the_in_repo_dataset_s_hand_labels_and_the_derived_ones_differ_where_documented():
  renamed = {"string": "str"}
  differences = {}
  for problem in load_problems(SMALL_DATASET):
    derived = set(pl.labels(problem.code)) - {"multipletask"}  # the hand labels have no multipletask
    given = {renamed.get(c, c) for c in problem.categories if not pl.is_package(c)}
    if derived != given:
      differences[problem.problem_id] = (sorted(derived - given), sorted(given - derived))
  assert differences == {"pandas_007": (["builtin"], []), "numpy_010": (["builtin"], []),
                         "string_009": ([], ["str"]), "string_010": ([], ["str"])}


def _problem(pid: str, categories=()) -> Problem:
  return Problem(pid, "Return x.", "import re\n\ndef f(x):\n    return x.lower()\n", ("assert f('A') == 'a'",),
                 tuple(categories))


def test_with_labels_dataset_derived_and_the_default():
  labelled = [_problem("a", ["hand"]), _problem("b")]
  assert pl.with_labels(labelled, None) == (labelled, "dataset")
  problems, source = pl.with_labels(labelled, "derived")
  assert source == "derived" and [p.categories for p in problems] == [("str", "regex")] * 2
  bare = [_problem("a"), _problem("b")]
  assert pl.with_labels(bare, None)[1] == "derived"
  with pytest.raises(ValueError, match="--labels dataset: no problem of the dataset has a category label"):
    pl.with_labels(bare, "dataset")
  with pytest.raises(ValueError, match="--labels: 'mine' is not one of derived, dataset"):
    pl.with_labels(bare, "mine")
