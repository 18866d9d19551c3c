"""The paper's figures and tables from a scored grid, in the paper's measures.

  python -m experiments.paper_results --grid ABL_DIR [--sizes 1b,2b,4b] [--mixtures natural,unimax_1,...] \
      [--k humaneval=100,translation=25] [--output DIR]

A grid is experiments.ablation's output: one directory per cell, <size>_<mixture>, each with the
metrics.json of `python -m evaluation.score` for every dataset scored: <cell>/scores/<dataset>/metrics.json
(e.g. scores/humaneval/, scores/translation/), and <cell>/scores/metrics.json counts as "humaneval".
Written to DIR (default ABL_DIR):
- fig5_passk.png: Figure 5, the mean pass@k of the high- and of the low-resource languages against
  model size, a panel per dataset, a line per mixture;
- fig6_passk_relative_change.png: Figure 6, the mean relative difference (%) of each language's pass@k
  against the same-size Natural model, over the datasets and sizes where it is defined, a bar per
  UniMax mixture, languages from high to low resource;
- paper_tables.md: Tables 8-11 (pass@k per language, a row per size and mixture, per dataset), Tables
  12-13 (the relative change per dataset, size and mixture for the high- and the low-resource languages,
  worst and best of each language per dataset and size marked), and Figure 7 / Tables 18-19 (the
  prediction-level metrics: % passed some tests but failed, mean % of tests passed, % error, % timed out).
k is the paper's per dataset unless --k says otherwise: 100 for generation, 25 for translation (a
dataset whose name holds "translation", "tp3" or "transcoder"). A cell the paper's measure leaves
undefined says why: "n < k" (fewer samples per problem than k), "0 → x" (Natural's pass@k is 0, so no
relative change), "–" (that language was not scored there, e.g. Python as a translation's source).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence

import storage
from languages import HIGH_RESOURCE, LANGUAGES, LOW_RESOURCE, Language

NATURAL = "natural"
GENERATION_K, TRANSLATION_K = 100, 25
TRANSLATION_WORDS = ("translation", "tp3", "transcoder")
# (size, mixture) -> evaluation.score's metrics.json
Grid = Mapping[tuple[str, str], Mapping]


def paper_k(dataset: str) -> int:
  return TRANSLATION_K if any(w in dataset.lower() for w in TRANSLATION_WORDS) else GENERATION_K


def read_grid(root: str, sizes: Sequence[str], mixtures: Sequence[str]) -> dict[str, dict[tuple[str, str], dict]]:
  """dataset -> (size, mixture) -> metrics.json, for the cells of the grid that were scored."""
  datasets: dict[str, dict[tuple[str, str], dict]] = {}
  for size in sizes:
    for mixture in mixtures:
      scores = storage.join(root, f"{size}_{mixture}", "scores")
      found = {}
      if storage.exists(storage.join(scores, "metrics.json")):
        found["humaneval"] = storage.join(scores, "metrics.json")
      if storage.isdir(scores):
        for name in sorted(storage.listdir(scores)):
          path = storage.join(scores, name, "metrics.json")
          if storage.exists(path):
            found[name] = path
      for dataset, path in found.items():
        datasets.setdefault(dataset, {})[(size, mixture)] = json.loads(storage.read_text(path))
  return datasets


def passk(metrics: Mapping, language: str, k: int) -> float | None:
  """The language's pass@k in a metrics.json, or None (not scored, or fewer samples than k)."""
  value = (metrics.get(language) or {}).get(f"pass@{k}") if isinstance(metrics.get(language), Mapping) else None
  return float(value) if isinstance(value, (int, float)) else None


def why_missing(metrics: Mapping | None, language: str, k: int) -> str:
  if metrics is None or not isinstance(metrics.get(language), Mapping):
    return "–"
  return "n < k"


def group_mean(metrics: Mapping, group: Sequence[Language], k: int) -> float | None:
  """Mean pass@k over the group's languages that have one; None when none has."""
  values = [v for v in (passk(metrics, l.name, k) for l in group) if v is not None]
  return sum(values) / len(values) if values else None


def relative_change(value: float | None, natural: float | None) -> float | None:
  """100 * (value - natural) / natural; None where undefined (either missing, or Natural's is 0)."""
  if value is None or natural is None or natural == 0:
    return None
  return 100 * (value - natural) / natural


def figure5(datasets: Mapping[str, Grid], ks: Mapping[str, int]) -> dict:
  """dataset -> mixture -> size -> {"high": mean pass@k or None, "low": ...}."""
  out: dict = {}
  for dataset, grid in datasets.items():
    for (size, mixture), metrics in grid.items():
      out.setdefault(dataset, {}).setdefault(mixture, {})[size] = {
          "high": group_mean(metrics, HIGH_RESOURCE, ks[dataset]),
          "low": group_mean(metrics, LOW_RESOURCE, ks[dataset])}
  return out


def change_rows(datasets: Mapping[str, Grid], ks: Mapping[str, int], sizes: Sequence[str],
                mixtures: Sequence[str]) -> list[dict]:
  """Tables 12-13: a row per (dataset, size, non-Natural mixture) whose size has a Natural cell, with
  each language's relative change of pass@k (None where undefined) and `why` for the undefined ones,
  and `worst` / `best`: per (dataset, size, language), the mixtures with the lowest / highest change."""
  rows = []
  for dataset, grid in datasets.items():
    k = ks[dataset]
    for size in sizes:
      natural = grid.get((size, NATURAL))
      if natural is None:
        continue
      block = []
      for mixture in mixtures:
        if mixture == NATURAL or (size, mixture) not in grid:
          continue
        metrics = grid[(size, mixture)]
        change, why = {}, {}
        for language in LANGUAGES:
          value, base = passk(metrics, language.name, k), passk(natural, language.name, k)
          change[language.name] = relative_change(value, base)
          if change[language.name] is None:
            why[language.name] = (f"0 → {value:.3f}" if base == 0 and value is not None
                                  else why_missing(metrics if value is None else natural, language.name, k))
        block.append({"dataset": dataset, "size": size, "mixture": mixture, "k": k, "change": change, "why": why})
      for language in LANGUAGES:
        defined = [(row["change"][language.name], row["mixture"]) for row in block
                   if row["change"][language.name] is not None]
        if len(defined) > 1:
          worst, best = min(defined)[1], max(defined)[1]
          for row in block:
            row.setdefault("worst", set()).update({language.name} if row["mixture"] == worst else set())
            row.setdefault("best", set()).update({language.name} if row["mixture"] == best else set())
      rows.extend(block)
  for row in rows:
    row.setdefault("worst", set())
    row.setdefault("best", set())
    for group, languages in (("high", HIGH_RESOURCE), ("low", LOW_RESOURCE)):
      values = [row["change"][l.name] for l in languages if row["change"][l.name] is not None]
      row[f"{group}_mean"] = sum(values) / len(values) if values else None
  return rows


def figure6(rows: Sequence[Mapping]) -> dict[str, dict[str, float]]:
  """mixture -> language -> mean relative change over the rows (datasets x sizes) where defined."""
  sums: dict[str, dict[str, list[float]]] = {}
  for row in rows:
    for language, value in row["change"].items():
      if value is not None:
        sums.setdefault(row["mixture"], {}).setdefault(language, []).append(value)
  return {mixture: {language: sum(v) / len(v) for language, v in values.items()} for mixture, values in sums.items()}


# ---- tables --------------------------------------------------------------------------------------

def _cell(value: float | None, why: str = "–", fmt: str = "{:.3f}") -> str:
  return fmt.format(value) if value is not None else why


def _table(header: Sequence[str], lines: Sequence[Sequence[str]]) -> list[str]:
  return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)] + ["| " + " | ".join(l) + " |" for l in lines]


def scored_languages(datasets: Mapping[str, Grid]) -> list[Language]:
  present = {name for grid in datasets.values() for m in grid.values() for name in m.get("languages", [])}
  return [l for l in LANGUAGES if l.name in present]


def markdown(datasets: Mapping[str, Grid], ks: Mapping[str, int], sizes: Sequence[str],
             mixtures: Sequence[str]) -> str:
  languages = scored_languages(datasets)
  names = [l.display_name for l in languages]
  out = ["# The paper's tables from this grid", ""]
  for dataset, grid in datasets.items():
    k = ks[dataset]
    out += [f"## {dataset}: pass@{k} (Tables 8-11)", ""]
    lines = []
    for size in sizes:
      for mixture in mixtures:
        metrics = grid.get((size, mixture))
        if metrics is not None:
          lines.append([size, mixture] + [_cell(passk(metrics, l.name, k), why_missing(metrics, l.name, k))
                                          for l in languages])
    out += _table(["size", "mixture", *names], lines) + [""]
  rows = change_rows(datasets, ks, sizes, mixtures)
  for title, group, key in (("Table 12: high-resource languages", HIGH_RESOURCE, "high_mean"),
                            ("Table 13: low-resource languages", LOW_RESOURCE, "low_mean")):
    group = [l for l in group if l in languages]
    out += [f"## {title}, % change of pass@k against the same-size Natural model", "",
            "**bold**: the best mixture for that language, dataset and size; _italic_: the worst.", ""]
    lines = []
    for row in rows:
      cells = []
      for l in group:
        text = _cell(row["change"][l.name], row["why"].get(l.name, "–"), "{:+.1f}")
        if row["change"][l.name] is not None:
          text = f"**{text}**" if l.name in row["best"] else f"_{text}_" if l.name in row["worst"] else text
        cells.append(text)
      lines.append([row["dataset"], row["size"], row["mixture"], str(row["k"]), *cells,
                    _cell(row[key], "–", "{:+.1f}")])
    out += _table(["dataset", "size", "mixture", "k", *[l.display_name for l in group], "mean"], lines) + [""]
  columns = (("percent_passed_some_tests_but_failed", "% passed some"), ("percent_tests_passed", "% tests passed"),
             ("percent_error", "% error"), ("percent_timeout", "% timed out"))
  out += ["## Figure 7 / Tables 18-19: prediction-level metrics", ""]
  lines = []
  for dataset, grid in datasets.items():
    for size in sizes:
      for mixture in mixtures:
        metrics = grid.get((size, mixture))
        for l in languages:
          if metrics is not None and isinstance(metrics.get(l.name), Mapping):
            m = metrics[l.name]
            lines.append([dataset, size, mixture, l.display_name,
                          *[_cell(m.get(key), "–", "{:.1f}") for key, _ in columns]])
  out += _table(["dataset", "size", "mixture", "language", *[t for _, t in columns]], lines) + [""]
  return "\n".join(out)


# ---- figures -------------------------------------------------------------------------------------

def _label(mixture: str) -> str:
  return "Natural" if mixture == NATURAL else mixture.replace("unimax_", "UniMax ")


def plot_figure5(datasets: Mapping[str, Grid], ks: Mapping[str, int], sizes: Sequence[str],
                 mixtures: Sequence[str], path: str) -> None:
  import matplotlib

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  data = figure5(datasets, ks)
  fig, axes = plt.subplots(1, len(data), figsize=(4.2 * len(data), 3.6), squeeze=False)
  for ax, (dataset, by_mixture) in zip(axes[0], data.items()):
    for i, mixture in enumerate(m for m in mixtures if m in by_mixture):
      color = f"C{i}"
      for group, style in (("high", "-"), ("low", "--")):
        points = [(j, by_mixture[mixture][s][group]) for j, s in enumerate(sizes)
                  if s in by_mixture[mixture] and by_mixture[mixture][s][group] is not None]
        if points:
          ax.plot([p[0] for p in points], [p[1] for p in points], style, marker="o", color=color,
                  label=f"{_label(mixture)} {'HR' if group == 'high' else 'LR'}")
    ax.set_xticks(range(len(sizes)), sizes)
    ax.set_title(f"{dataset}: mean pass@{ks[dataset]}")
    ax.set_xlabel("model size")
    ax.set_ylim(bottom=0)  # a pass rate (all zeros would otherwise centre the axis on 0)
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:  # a panel with no defined mean has no lines
      ax.legend(fontsize=6, ncol=2)
  axes[0][0].set_ylabel("mean pass@k (solid HR, dashed LR)")
  fig.tight_layout()
  storage.save_figure(fig, path, dpi=120)
  plt.close(fig)


def plot_figure6(rows: Sequence[Mapping], path: str) -> bool:
  """False (nothing drawn) when no relative change is defined anywhere."""
  data = figure6(rows)
  if not data:
    return False
  import matplotlib

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  languages = [l for l in LANGUAGES if any(l.name in d for d in data.values())]
  mixtures = list(data)
  width = 0.8 / len(mixtures)
  fig, ax = plt.subplots(figsize=(max(7.0, 0.8 * len(languages) + 2), 3.6))
  for i, mixture in enumerate(mixtures):
    xs = [j + (i - (len(mixtures) - 1) / 2) * width for j, l in enumerate(languages) if l.name in data[mixture]]
    ys = [data[mixture][l.name] for l in languages if l.name in data[mixture]]
    ax.bar(xs, ys, width, color=f"C{i + 1}", label=_label(mixture))
  ax.axhline(0, color="black", linewidth=0.8)
  ax.set_xticks(range(len(languages)), [l.display_name for l in languages], rotation=30, ha="right")
  ax.set_ylabel("mean relative change (%)")
  ax.set_title("Figure 6: pass@k vs the same-size Natural model")
  ax.grid(axis="y", alpha=0.3)
  ax.legend(fontsize=7, ncol=len(mixtures))
  fig.tight_layout()
  storage.save_figure(fig, path, dpi=120)
  plt.close(fig)
  return True


def write(root: str, sizes: Sequence[str], mixtures: Sequence[str], output: str | None = None,
          k_overrides: Mapping[str, int] | None = None) -> list[str]:
  """Reads the grid's scores and writes the figures and tables; returns the paths written ([] when
  no cell was scored)."""
  datasets = read_grid(root, sizes, mixtures)
  if not datasets:
    return []
  output = output or root
  storage.makedirs(output)
  ks = {dataset: (k_overrides or {}).get(dataset, paper_k(dataset)) for dataset in datasets}
  paths = [storage.join(output, "paper_tables.md"), storage.join(output, "fig5_passk.png")]
  storage.write_atomic(paths[0], markdown(datasets, ks, sizes, mixtures))
  plot_figure5(datasets, ks, sizes, mixtures, paths[1])
  fig6 = storage.join(output, "fig6_passk_relative_change.png")
  if plot_figure6(change_rows(datasets, ks, sizes, mixtures), fig6):
    paths.append(fig6)
  elif storage.exists(fig6):  # an earlier run's, at another k
    storage.remove(fig6)
  return paths


def parse_ks(value: str | None) -> dict[str, int]:
  """--k: dataset=k pairs ("humaneval=1,translation=1")."""
  out = {}
  for pair in (value or "").split(","):
    if not pair.strip():
      continue
    name, sep, k = pair.partition("=")
    if not sep or not k.strip().isdigit() or int(k) < 1:
      raise ValueError(f"--k: {pair!r} is not dataset=k with k >= 1")
    out[name.strip()] = int(k)
  return out


def main(argv: Sequence[str] | None = None) -> int:
  parser = argparse.ArgumentParser(prog="python -m experiments.paper_results", description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--grid", required=True, help="experiments.ablation's output directory")
  parser.add_argument("--sizes", default="1b,2b,4b")
  parser.add_argument("--mixtures", default="natural,unimax_1,unimax_2,unimax_3,unimax_4")
  parser.add_argument("--k", default=None, help="dataset=k pairs overriding the paper's k")
  parser.add_argument("--output", default=None, help="default: the grid's directory")
  args = parser.parse_args(argv)
  try:
    paths = write(args.grid, [s for s in args.sizes.split(",") if s], [m for m in args.mixtures.split(",") if m],
                  args.output, parse_ks(args.k))
  except ValueError as error:
    parser.error(str(error))
  if not paths:
    print(f"error: no scored cell under {args.grid} (<size>_<mixture>/scores/[DATASET/]metrics.json)", file=sys.stderr)
    return 2
  print("\n".join(f"wrote {p}" for p in paths))
  return 0


if __name__ == "__main__":
  sys.exit(main())
