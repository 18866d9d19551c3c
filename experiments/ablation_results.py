"""The ablation's results: each cell's last validation losses and pass@k, as tables and figures.

Reads what the cells of experiments/ablation.py logged (<cell>/metrics.jsonl, <cell>/scores/metrics.json)
and writes results.csv, results.md and the validation-loss figures in the layout of the paper's Figures
5 and 6; experiments/paper_results.py adds the paper's own where cells were scored.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import math
from typing import Callable, Mapping, Sequence

import storage
from languages import BY_NAME, HIGH_RESOURCE, LANGUAGES, LOW_RESOURCE, Language
from sandbox.renderers import NOT_EVALUATED
from experiments import paper_results
from experiments.ablation_grid import FIM, NATURAL, PAPER, Cell, available


# ---------------------------------------------------------------------------------------------
# Collecting results.


def read_json_or_none(path: str) -> dict | None:
  """A JSON file's value, or None where it is missing or unreadable (a run killed mid-write)."""
  if not storage.exists(path):
    return None
  try:
    return storage.read_json(path)
  except json.JSONDecodeError:
    return None


def last_validation(metrics_path: str) -> tuple[int | None, dict[str, float]]:
  """(step, {language: loss}) of the last record with validation losses in a metrics.jsonl."""
  step, losses = None, {}
  if not storage.exists(metrics_path):
    return step, losses
  for _, record in storage.read_jsonl(metrics_path, warn=lambda message: None):  # a torn last line: a killed run
    found = {k.split("/", 1)[1]: float(v) for k, v in record.items() if k.startswith("validation/")}
    if found:
      step, losses = int(record["step"]), found
  return step, losses


def pass_at_k(scores_path: str) -> dict[str, float]:
  """pass@k from evaluation.score's metrics.json: top-level `pass@K` keys, and `OUTER/pass@K` for one
  level of nesting (per language or per dataset)."""
  scores = read_json_or_none(scores_path) or {}
  found = {}
  for key, value in scores.items():
    if key.startswith("pass@") and isinstance(value, (int, float)):
      found[key] = float(value)
    elif isinstance(value, dict):
      found.update({f"{key}/{k}": float(v) for k, v in value.items()
                    if k.startswith("pass@") and isinstance(v, (int, float))})
  return found


@dataclasses.dataclass(frozen=True)
class Result:
  cell: Cell
  step: int
  losses: dict[str, float]  # language name -> validation loss (nats per target token)
  passk: dict[str, float]
  humaneval: dict[str, float] = dataclasses.field(default_factory=dict)  # LANGUAGE/pass@K, scores/humaneval/
  infilling: dict[str, float] = dataclasses.field(default_factory=dict)  # SUBSET/pass@K, scores/infilling/


def collect(output: str, cells: Sequence[Cell]) -> tuple[list[Result], list[Cell]]:
  """The results of the cells that have a validation record, and the cells that have none."""
  results, missing = [], []
  for cell in cells:
    step, losses = last_validation(storage.join(output, cell.name, "metrics.jsonl"))
    if step is None:
      missing.append(cell)
    else:
      scores = storage.join(output, cell.name, "scores")
      results.append(Result(cell, step, losses, pass_at_k(storage.join(scores, "metrics.json")),
                            pass_at_k(storage.join(scores, "humaneval", "metrics.json")),
                            pass_at_k(storage.join(scores, "infilling", "metrics.json"))))
  return results, missing


def mean_pass_at(values: Mapping[str, float], k: int = 1) -> float:
  """The mean over languages (or subsets) of OUTER/pass@k; nan when none was scored."""
  found = [v for key, v in values.items() if key.endswith(f"/pass@{k}")]
  return sum(found) / len(found) if found else math.nan


def objective_pairs(results: Sequence[Result]) -> list[tuple[Result, Result]]:
  """(paper, + FIM) results of the same size, mixture and seed, in grid order."""
  fim = {(r.cell.size, r.cell.mixture, r.cell.seed): r for r in results if r.cell.objective == FIM}
  return [(r, fim[key]) for r in results if r.cell.objective == PAPER
          and (key := (r.cell.size, r.cell.mixture, r.cell.seed)) in fim]


def group_mean(values: Mapping[str, float], group: Sequence[Language]) -> float:
  """Mean over the languages of the group that have a value (nan when none)."""
  present = [values[l.name] for l in group if l.name in values and not math.isnan(values[l.name])]
  return sum(present) / len(present) if present else math.nan


def languages_of(results: Sequence[Result]) -> list[Language]:
  """Languages with a validation loss in any cell, in the paper's order (high- to low-resource)."""
  return [l for l in LANGUAGES if any(l.name in r.losses for r in results)]


def _against_natural(results: Sequence[Result], change: Callable[[Result, Result], dict[str, float]],
                     keep_empty: bool = True) -> dict[str, dict[str, dict[str, float]]]:
  """size -> mixture -> `change(cell, natural)` for each first-copy cell with a Natural cell of its size
  (repeats measure noise)."""
  base = {(r.cell.size, r.cell.mixture): r for r in results if not r.cell.repeat}
  changes: dict[str, dict[str, dict[str, float]]] = {}
  for (size, mixture), result in base.items():
    natural = base.get((size, NATURAL))
    if mixture == NATURAL or natural is None:
      continue
    values = change(result, natural)
    if values or keep_empty:
      changes.setdefault(size, {})[mixture] = values
  return changes


def change_vs_natural(results: Sequence[Result]) -> dict[str, dict[str, dict[str, float]]]:
  """size -> mixture -> language -> % change of validation loss against the same size's Natural cell
  (negative: lower loss than Natural)."""
  return _against_natural(results, lambda result, natural: {
      language: 100 * (loss - natural.losses[language]) / natural.losses[language]
      for language, loss in result.losses.items() if language in natural.losses})


def passk_change_vs_natural(results: Sequence[Result], k: str = "pass@1"
                            ) -> dict[str, dict[str, dict[str, float]]]:
  """size -> mixture -> language -> change of the language's pass@k against the same size's Natural
  cell, in percentage points (positive: more problems solved), from evaluation.score's per-language
  metrics ("LANGUAGE/pass@K"). Languages scored in both cells only."""
  def change(result: Result, natural: Result) -> dict[str, float]:
    keys = {language.name: f"{language.name}/{k}" for language in LANGUAGES}
    return {name: 100 * (result.passk[key] - natural.passk[key]) for name, key in keys.items()
            if key in result.passk and key in natural.passk}

  return _against_natural(results, change, keep_empty=False)


def seed_spread(results: Sequence[Result]) -> dict[str, dict[str, float]]:
  """Repeated cell -> language -> |loss(repeat) - loss(first)|, with "high_resource_mean" and
  "low_resource_mean" (the difference of the group means) and "mean" (mean over languages)."""
  first = {(r.cell.size, r.cell.mixture): r for r in results if not r.cell.repeat}
  spread = {}
  for result in results:
    other = first.get((result.cell.size, result.cell.mixture))
    if not result.cell.repeat or other is None:
      continue
    diffs = {k: abs(v - other.losses[k]) for k, v in result.losses.items() if k in other.losses}
    spread[result.cell.name] = {
        **diffs, "mean": sum(diffs.values()) / len(diffs) if diffs else math.nan,
        "high_resource_mean": abs(group_mean(result.losses, HIGH_RESOURCE) - group_mean(other.losses, HIGH_RESOURCE)),
        "low_resource_mean": abs(group_mean(result.losses, LOW_RESOURCE) - group_mean(other.losses, LOW_RESOURCE))}
  return spread


# ---------------------------------------------------------------------------------------------
# Tables.


def table_rows(results: Sequence[Result]) -> tuple[list[str], list[dict]]:
  """(columns, rows) of results.csv: one row per cell."""
  languages = languages_of(results)
  passk = sorted({k for r in results for k in r.passk})
  columns = (["cell", "size", "mixture", "seed", "step"] + [f"validation/{l.name}" for l in languages]
             + ["validation/high_resource_mean", "validation/low_resource_mean"] + passk)
  rows = []
  for r in results:
    row = {"cell": r.cell.name, "size": r.cell.size, "mixture": r.cell.mixture, "seed": r.cell.seed, "step": r.step}
    row.update({f"validation/{l.name}": r.losses.get(l.name, math.nan) for l in languages})
    row["validation/high_resource_mean"] = group_mean(r.losses, HIGH_RESOURCE)
    row["validation/low_resource_mean"] = group_mean(r.losses, LOW_RESOURCE)
    row.update({k: r.passk.get(k, math.nan) for k in passk})
    rows.append(row)
  return columns, rows


def write_csv(path: str, columns: Sequence[str], rows: Sequence[Mapping]) -> None:
  """Missing values are empty fields."""
  text = io.StringIO(newline="")
  writer = csv.DictWriter(text, columns)
  writer.writeheader()
  for row in rows:
    writer.writerow({k: "" if isinstance(v, float) and math.isnan(v) else v for k, v in row.items()})
  storage.write_atomic(path, text.getvalue())


def _markdown_table(header: Sequence[str], lines: Sequence[Sequence[str]]) -> list[str]:
  return (["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
          + ["| " + " | ".join(line) + " |" for line in lines])


def _number(value: float, fmt: str = "{:.3f}") -> str:
  return "–" if value is None or math.isnan(value) else fmt.format(value)


def markdown(results: Sequence[Result], missing: Sequence[Cell]) -> str:
  """results.md: the per-cell table, % change against Natural per size, the seed spread, and notes."""
  languages = languages_of(results)
  names = [l.display_name for l in languages]
  columns, rows = table_rows(results)
  passk = [c for c in columns if c.startswith("pass@") or "/pass@" in c]
  out = ["# Ablation: validation loss per language", "",
         "Mean cross-entropy (nats per target token) on each language's validation split, from the last "
         "eval record of each cell (lower is better): the CPU-scale proxy for the paper's pass@k, which "
         "models this small barely move. HR / LR: mean over the high- / low-resource languages present. "
         "LANGUAGE/pass@K columns: execution results where a cell's predictions were scored.", ""]
  out += _markdown_table(
      ["cell", "step", *names, "HR mean", "LR mean", *passk],
      [[row["cell"], str(row["step"]), *(_number(row[f"validation/{l.name}"]) for l in languages),
        _number(row["validation/high_resource_mean"]), _number(row["validation/low_resource_mean"]),
        *(_number(row[k]) for k in passk)] for row in rows])
  absent = [l.display_name for l in LANGUAGES if l not in languages]
  if absent:
    out += ["", f"No validation data in the corpus (left out): {', '.join(absent)}."]
  if missing:
    out += ["", f"No validation record yet (left out): {', '.join(c.name for c in missing)}."]

  fim_pairs = objective_pairs(results)
  results = [r for r in results if r.cell.objective == PAPER]  # the mixture comparisons: paper objective only
  changes = change_vs_natural(results)
  if changes:
    out += ["", "## % change of validation loss against Natural", "",
            "100 · (loss − Natural) / Natural per language, same size; negative: lower loss than Natural. "
            "HR / LR: mean of the languages' changes (as the paper's Figure 6).", ""]
    for size, per_mixture in changes.items():
      out += [f"### {size}", ""]
      percent = "{:+.1f}%"
      out += _markdown_table(["mixture", *names, "HR mean", "LR mean"], [
          [mixture, *(_number(change.get(l.name, math.nan), percent) for l in languages),
           _number(group_mean(change, HIGH_RESOURCE), percent), _number(group_mean(change, LOW_RESOURCE), percent)]
          for mixture, change in per_mixture.items()])
      out.append("")
  passk_changes = passk_change_vs_natural(results)
  if passk_changes:
    scored = [l for l in LANGUAGES if any(l.name in c for m in passk_changes.values() for c in m.values())]
    out += ["", "## Change of pass@1 against Natural (execution, per language)", "",
            "pass@1(mixture) − pass@1(Natural) in percentage points per language, from `python -m "
            "evaluation.score` on each cell's predictions (`scores/metrics.json`); positive: more "
            "problems solved (points, not the paper's relative change: see paper_tables.md). Not evaluated: "
            + "; ".join(f"{BY_NAME[n].display_name} ({why})" for n, why in NOT_EVALUATED.items()) + ".", ""]
    for size, per_mixture in passk_changes.items():
      out += [f"### {size}", ""]
      out += _markdown_table(["mixture", *(l.display_name for l in scored)], [
          [mixture, *(_number(change.get(l.name, math.nan), "{:+.1f}") for l in scored)]
          for mixture, change in per_mixture.items()])
      out.append("")
  spread = seed_spread(results)
  if spread:
    seeds = {r.cell.name: f"{r.cell.seed - 1} vs {r.cell.seed}" for r in results if r.cell.repeat}
    out += ["## Seed spread", "",
            "Absolute difference of validation loss between the two seeds of a repeated cell: differences "
            "between mixtures no larger than this are within seed noise.", ""]
    out += _markdown_table(["cell", "seeds", *names, "HR mean", "LR mean", "mean over languages"], [
        [cell, seeds[cell], *(_number(diffs.get(l.name, math.nan), "{:.4f}") for l in languages),
         _number(diffs["high_resource_mean"], "{:.4f}"), _number(diffs["low_resource_mean"], "{:.4f}"),
         _number(diffs["mean"], "{:.4f}")] for cell, diffs in spread.items()])
  if fim_pairs:
    out += ["", "## Objective: the paper's mixture against + fill-in-the-middle", "",
            "Each pair trained alike but for gin_configs/objectives/fim.gin (FIM on half the causal-LM share). "
            "HumanEval pass@1: mean over the languages scored in `scores/humaneval/` (typed HumanEval, "
            "left to right); infilling pass@1: HumanEval-infilling's single-line subset in `scores/infilling/` "
            "(a model never trained to infill is expected near 0). Mean loss: over the languages' validation "
            "splits (the FIM cell's validation rows hold FIM examples too). \"FIM for free\" holds where "
            "the + FIM column of HumanEval pass@1 and of loss is within seed noise of the paper's.", ""]
    out += _markdown_table(
        ["size", "mixture", "HumanEval pass@1", "+ FIM", "infilling pass@1", "+ FIM", "mean loss", "+ FIM"],
        [[paper.cell.size, paper.cell.mixture,
          *(_number(mean_pass_at(r.humaneval)) for r in (paper, fim)),
          *(_number(r.infilling.get("single-line/pass@1", math.nan)) for r in (paper, fim)),
          *(_number(_mean(r.losses.values())) for r in (paper, fim))] for paper, fim in fim_pairs])
  return "\n".join(out).rstrip() + "\n"


def _mean(values) -> float:
  values = list(values)
  return sum(values) / len(values) if values else math.nan


# ---------------------------------------------------------------------------------------------
# Figures in the layout of the paper's Figures 5 and 6, with validation loss (paper_results.py has the paper's).


def _label(mixture: str) -> str:
  return "Natural" if mixture == NATURAL else mixture.replace("unimax_", "UniMax N=")


def _color(mixture: str) -> str:
  """One colour per mixture in both figures (Natural first: C0)."""
  return f"C{available('mixtures').index(mixture) % 10}"


def plot_mean_loss(results: Sequence[Result], sizes: Sequence[str], mixtures: Sequence[str], path: str) -> None:
  """Figure 5: mean validation loss over the high- and the low-resource languages, x = size, a line per
  mixture; repeats as crosses."""
  import matplotlib

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  fig, axes = plt.subplots(1, 2, figsize=(10, 4))
  for ax, (title, group) in zip(axes, (("High-resource languages", HIGH_RESOURCE),
                                       ("Low-resource languages", LOW_RESOURCE))):
    drawn = False
    for mixture in mixtures:
      for repeat in (False, True):
        points = [(sizes.index(r.cell.size), group_mean(r.losses, group)) for r in results
                  if r.cell.mixture == mixture and r.cell.repeat == repeat and r.cell.size in sizes]
        points = sorted(p for p in points if not math.isnan(p[1]))
        if not points:
          continue
        drawn = True
        if repeat:
          ax.scatter(*zip(*points), marker="x", color=_color(mixture), label=f"{_label(mixture)}, second seed")
        else:
          ax.plot(*zip(*points), marker="o", color=_color(mixture), label=_label(mixture))
    if not drawn:
      ax.text(0.5, 0.5, "no validation data", transform=ax.transAxes, ha="center", va="center")
    ax.set_xticks(range(len(sizes)), sizes)
    ax.set_xlim(-0.5, len(sizes) - 0.5)
    ax.set_xlabel("model size")
    ax.set_ylabel("mean validation loss (nats / token)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
  handles, labels = axes[0].get_legend_handles_labels()
  if not handles:
    handles, labels = axes[1].get_legend_handles_labels()
  fig.legend(handles, labels, loc="lower center", ncol=min(len(labels), 5) or 1, fontsize=8, frameon=False)
  fig.tight_layout(rect=(0, 0.1, 1, 1))
  storage.save_figure(fig, path, dpi=120)
  plt.close(fig)


def plot_change(results: Sequence[Result], sizes: Sequence[str], path: str) -> bool:
  """Figure 6: % change of validation loss against Natural per language (high- to low-resource), a bar
  per mixture, a panel per size; grey: ± the seed spread where a cell of that size was repeated.
  Returns False (and draws nothing) when no size has Natural and another mixture."""
  fim_pairs = objective_pairs(results)
  results = [r for r in results if r.cell.objective == PAPER]  # the mixture comparisons: paper objective only
  changes = change_vs_natural(results)
  panels = [s for s in sizes if s in changes]
  if not panels:
    return False
  import matplotlib

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  languages = languages_of(results)
  first = {(r.cell.size, r.cell.mixture): r for r in results if not r.cell.repeat}
  spreads = seed_spread(results)
  fig, axes = plt.subplots(len(panels), 1, figsize=(max(7.0, 0.8 * len(languages) + 2), 3.2 * len(panels)),
                           squeeze=False)
  for ax, size in zip(axes[:, 0], panels):
    mixtures = list(changes[size])
    repeated = [r.cell for r in results if r.cell.repeat and r.cell.size == size and r.cell.name in spreads]
    if repeated:  # the spread of this size's first repeated cell, relative to its loss
      diffs, base = spreads[repeated[0].name], first[(size, repeated[0].mixture)].losses
      band = [100 * diffs[l.name] / base[l.name] if l.name in diffs else 0.0 for l in languages]
      ax.bar(range(len(languages)), [2 * b for b in band], 0.9, bottom=[-b for b in band], color="0.85",
             label="± seed spread")
    _bars_per_mixture(ax, changes[size], mixtures, languages)
    high = sum(1 for l in languages if l.high_resource)
    if 0 < high < len(languages):
      ax.axvline(high - 0.5, color="0.5", linestyle="--", linewidth=0.8)
    ax.set_xticks(range(len(languages)), [l.display_name for l in languages], rotation=30, ha="right")
    ax.set_ylabel("% change vs Natural")
    ax.set_title(f"{size}: validation loss against Natural (negative is better)")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=7, ncol=len(mixtures) + 1)
  fig.tight_layout()
  storage.save_figure(fig, path, dpi=120)
  plt.close(fig)
  return True


def _bars_per_mixture(ax, changes: Mapping[str, Mapping[str, float]], mixtures: Sequence[str],
                      languages: Sequence[Language]) -> None:
  """Figure 6's grouped bars: per language, one bar per mixture of its change against Natural."""
  width = 0.8 / len(mixtures)
  for j, mixture in enumerate(mixtures):
    offset = (j - (len(mixtures) - 1) / 2) * width
    ax.bar([i + offset for i in range(len(languages))], [changes[mixture].get(l.name, 0.0) for l in languages],
           width, color=_color(mixture), label=_label(mixture))
  ax.axhline(0, color="black", linewidth=0.8)


def plot_objective(results: Sequence[Result], path: str) -> bool:
  """Paper mixture against + FIM per (size, mixture): HumanEval pass@1 and infilling pass@1 side by
  side, as bars; False (nothing written) when the grid has no pair."""
  pairs = objective_pairs(results)
  if not pairs:
    return False
  import matplotlib
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  labels = [f"{p.cell.size}\n{_label(p.cell.mixture)}" for p, _ in pairs]
  measures = (("HumanEval pass@1 (left to right)", lambda r: mean_pass_at(r.humaneval)),
              ("HumanEval-infilling pass@1\n(single-line)", lambda r: r.infilling.get("single-line/pass@1", math.nan)))
  figure, axes = plt.subplots(1, 2, figsize=(max(8.0, 3 + 1.6 * len(pairs)), 3.8))
  for ax, (title, value) in zip(axes, measures):
    top = 0.0
    for offset, name, index in ((-0.2, "paper's mixture", 0), (0.2, "+ FIM", 1)):
      heights = [value(pair[index]) for pair in pairs]
      xs = [i + offset for i in range(len(pairs))]
      ax.bar(xs, [0 if math.isnan(h) else h for h in heights], 0.4, label=name, color=f"C{index}")
      for x, h in zip(xs, heights):  # the value on each bar: a 0 and an unscored cell look alike otherwise
        ax.annotate("–" if math.isnan(h) else f"{h:.3f}", (x, 0 if math.isnan(h) else h), ha="center",
                    va="bottom", fontsize=7)
      top = max([top] + [h for h in heights if not math.isnan(h)])
    ax.set_ylim(0, max(0.05, 1.2 * top))
    ax.set_xticks(range(len(pairs)), labels)
    ax.set_title(title, fontsize=9)
    ax.set_ylabel("pass@1")
  axes[0].legend(fontsize=8)
  figure.tight_layout()
  storage.save_figure(figure, path, dpi=120)
  plt.close(figure)
  return True


def report(output: str, cells: Sequence[Cell], sizes: Sequence[str], mixtures: Sequence[str],
           k_overrides: Mapping[str, int] | None = None) -> list[str]:
  """Writes results.csv, results.md and the figures into output (and the paper's figures and tables
  where cells were scored, experiments/paper_results.py); returns the paths written."""
  results, missing = collect(output, cells)
  if not results:
    raise FileNotFoundError(f"no cell under {output} has a validation record (train.eval_every > 0?)")
  columns, rows = table_rows(results)
  paths = [storage.join(output, name) for name in
           ("results.csv", "results.md", "fig5_mean_loss.png", "fig6_change_vs_natural.png")]
  write_csv(paths[0], columns, rows)
  storage.write_atomic(paths[1], markdown(results, missing))
  paper = [r for r in results if r.cell.objective == PAPER]  # the mixture figures: paper objective only
  plot_mean_loss(paper, sizes, mixtures, paths[2])
  if not plot_change(paper, sizes, paths[3]):
    paths.pop()
  if plot_objective(results, storage.join(output, "fig_objective.png")):
    paths.append(storage.join(output, "fig_objective.png"))
  paths += paper_results.write(output, sizes, mixtures, k_overrides=k_overrides)
  return paths
