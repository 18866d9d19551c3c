"""A practical-tasks dataset's statistics by package and by label (Beau & Crabbé 2024, Appendix D,
Tables 10 and 11): per group, the item count and mean ± std of the words of the intent, the code
lines, the AST depth and the unit tests per problem.

  python -m data.practical_stats [--dataset D] [--labels derived|dataset] --output_dir DIR

writes DIR/stats.md and DIR/stats.json. Measures (data/practical_labels.py): words are the intent
split on whitespace; code lines the solution's non-blank lines, imports included; AST depth the
longest root-to-leaf path of its AST; tests the unit-test blocks. The std is the population's
(ddof=0): the rows describe the whole dataset, not a sample of it (the paper does not say which).
The packages are derived from the imports whatever --labels says (pandas, numpy, regex, noimport,
other); the label table shows each label and its complement (Table 11's Builtin / NoBuiltin rows).
A dataset with labels of its own (CodeInsight's .cfg) also gets them beside the derived ones, whatever
--labels says: per label, the problems the dataset gives it, those the rules derive it for, both, and
the share of problems on which the two agree.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence

import storage
from data.practical_labels import LABEL_SOURCES, LABELS, PACKAGES, ast_depth, code_lines, derived_categories, \
    is_package, packages, with_labels
from data.practical_tasks import SMALL_DATASET, Problem, load_problems, skipped_warning

MEASURES = (("words", "words per problem"), ("code_lines", "code lines"), ("ast_depth", "AST depth"),
            ("tests", "unit tests"))
FULL = "full dataset"


def measures(problem: Problem) -> dict[str, int]:
  return {"words": len(problem.intent.split()), "code_lines": code_lines(problem.code),
          "ast_depth": ast_depth(problem.code), "tests": len(problem.tests)}


def _mean_std(values: Sequence[int]) -> dict:
  mean = sum(values) / len(values)
  return {"mean": round(mean, 4), "std": round(math.sqrt(sum((v - mean) ** 2 for v in values) / len(values)), 4)}


def group_stats(rows: Sequence[dict[str, int]]) -> dict:
  """items and mean ± std of each measure over a group's rows (None for an empty group)."""
  return {"items": len(rows), **{m: _mean_std([r[m] for r in rows]) if rows else None for m, _ in MEASURES}}


def _order(names, known: Sequence[str], counts: dict[str, int]) -> list[str]:
  """The paper's order for known names, then the others most frequent first."""
  return sorted(names, key=lambda n: (known.index(n) if n in known else len(known), -counts[n], n))


def dataset_stats(problems: Sequence[Problem]) -> dict:
  """{"by_package": {row: group_stats}, "by_label": {row: group_stats}}; both start with the full
  dataset; the label rows pair each category (packages left out) with its complement "no<label>"."""
  rows = {p.problem_id: measures(p) for p in problems}
  of = lambda group: group_stats([rows[p.problem_id] for p in group])
  found = {p.problem_id: packages(p.code) for p in problems}
  counts = {name: sum(name in found[p.problem_id] for p in problems) for name in PACKAGES}
  by_package = {FULL: of(problems)}
  for name in _order([n for n in PACKAGES if counts[n]], PACKAGES, counts):
    by_package[name] = of([p for p in problems if name in found[p.problem_id]])
  label_counts: dict[str, int] = {}
  for p in problems:
    for label in p.categories:
      if not is_package(label):
        label_counts[label] = label_counts.get(label, 0) + 1
  by_label = {FULL: of(problems)}
  for label in _order(label_counts, LABELS, label_counts):
    by_label[label] = of([p for p in problems if label in p.categories])
    by_label[f"no{label}"] = of([p for p in problems if label not in p.categories])
  return {"by_package": by_package, "by_label": by_label}


# A dataset's name for a derived label: CodeInsight's .cfg writes the paper's >threevars so.
SAME_LABEL = {"more_than_3_vars": ">threevars"}


def labels_side_by_side(problems: Sequence[Problem]) -> dict[str, dict]:
  """label -> {"dataset", "derived", "both": problem counts, "agreement": the share of problems on which
  the dataset's labels and the derived ones agree about it}, packages left out, a dataset's name for a
  derived label read as the derived one (SAME_LABEL); labels in the paper's order, then by the
  dataset's count."""
  derived = {p.problem_id: set(derived_categories(p.code)) for p in problems}
  given_labels = {p.problem_id: {SAME_LABEL.get(c, c) for c in p.categories} for p in problems}
  names = {c for p in problems for c in (*given_labels[p.problem_id], *derived[p.problem_id]) if not is_package(c)}
  out = {}
  for name in names:
    given = {p.problem_id for p in problems if name in given_labels[p.problem_id]}
    made = {p.problem_id for p in problems if name in derived[p.problem_id]}
    out[name] = {"dataset": len(given), "derived": len(made), "both": len(given & made),
                 "agreement": round(1 - len(given ^ made) / len(problems), 4)}
  return {n: out[n] for n in _order(names, LABELS, {n: out[n]["dataset"] for n in names})}


def _cell(stat: dict | None) -> str:
  return "–" if stat is None else f"{stat['mean']:.1f} ± {stat['std']:.1f}"


def markdown(stats: dict) -> str:
  header = "| group | items | " + " | ".join(t for _, t in MEASURES) + " |"
  rule = "|" + "---|" * (len(MEASURES) + 2)
  out = []
  for key, title in (("by_package", "By package (the paper's Table 10)"),
                     ("by_label", "By label (the paper's Table 11)")):
    out += [f"{title}: items, mean ± std (population) per problem", "", header, rule]
    out += [f"| {name} | {g['items']} | " + " | ".join(_cell(g[m]) for m, _ in MEASURES) + " |"
            for name, g in stats[key].items()]
    out.append("")
  if stats.get("labels_side_by_side"):
    out += ["The dataset's labels beside the derived ones (data/practical_labels.py): problems per label", "",
            "| label | dataset | derived | both | agreement |", "|---|---|---|---|---|"]
    out += [f"| {name} | {c['dataset']} | {c['derived']} | {c['both']} | {100 * c['agreement']:.1f}% |"
            for name, c in stats["labels_side_by_side"].items()]
    out.append("")
  return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
  parser = argparse.ArgumentParser(prog="python -m data.practical_stats", description=__doc__.split("\n\n")[0])
  parser.add_argument("--dataset", default=SMALL_DATASET, help="JSON or JSONL (default: the small in-repo set)")
  parser.add_argument("--labels", choices=LABEL_SOURCES, default=None,
                      help="the dataset's labels, or derived ones (default: the dataset's when it has any)")
  parser.add_argument("--output_dir", required=True, help="folder for stats.md and stats.json")
  args = parser.parse_args(argv)
  skipped: list[str] = []
  try:
    loaded = load_problems(args.dataset, skipped)
    problems, source = with_labels(loaded, args.labels)
  except (ValueError, OSError) as error:
    parser.error(f"--dataset {args.dataset}: {error}")
  if skipped:
    print(skipped_warning(args.dataset, skipped), file=sys.stderr)
  stats = {"dataset": storage.resolve(args.dataset), "labels": source, **dataset_stats(problems)}
  if any(p.categories for p in loaded):
    stats["labels_side_by_side"] = labels_side_by_side(loaded)
  text = markdown(stats)
  storage.makedirs(args.output_dir)
  storage.write_json(storage.join(args.output_dir, "stats.json"), stats)
  storage.write_atomic(storage.join(args.output_dir, "stats.md"), text)
  print(text)
  print(f"labels: {source}; wrote {storage.join(args.output_dir, 'stats.md')} and stats.json")
  return 0


if __name__ == "__main__":
  sys.exit(main())
