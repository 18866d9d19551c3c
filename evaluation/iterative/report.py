"""The results of evaluation/iterative/run.py's episodes, as seed 001 reports them.

An execution is one problem x start set (natural prompt: one problem); it holds n episodes (samples).
  Overall    per language and prompt kind: pass@1 / pass@k after round 1 and after round R, samples
             solved by round, the share of executions with pass@k = 0 after round R (its Tables 3-4).
  O1         seed 001's RQ1 (Tables 1-2 and the text after them): round 1 judged against the GIVEN
             examples only. Per execution, n = its episodes, c = those whose round-1 code passed
             every given example (record field given_passed; a prompt longer than the context
             gave no code and fails); pass@k = passk.pass_at_k(n, c, k), averaged over executions
             with n >= k, per language and m (the examples given in round 1; a run has one m,
             its --examples, so comparing m as Table 1 does takes one run per m).
             "without input matching": a round-1 code flagged as input matching counts as failing
             (n unchanged), Table 2's filter. share pass@k=0: executions with c = 0 (the same for
             every k). Records from before given_passed was written: c comes from the verdict
             (success, distinguished, not_converged, or a conversation that ended for want of context
             after its code was distinguished), so a round-1 code that passed its given examples but
             crashed or timed out on a pool input counts as failing there; the table says so.
  Figure 6   seed 001's RQ2: executions solved after each round (cumulative): an execution counts
             once one of its episodes has succeeded (pass@n > 0), not once per episode.
  RQ3        per language, problems and the share implemented from examples (any start set, any
             sample, by round R; seed 001 Figures 7-9 as tables), grouped by
               difficulty  NL-Succeed: a natural-prompt episode of the same run (same model and
                           language) succeeded in round 1, i.e. from the description alone, in at
                           least 1 of its n samples (the paper: 1 of 10); else NL-Fail. Needs the
                           natural episodes (not --no_natural); without them the table is left out
                           with a note.
               I/O type    from the signature (io_types): a problem is in every category of its
                           parameters and return type.
               label       a user's knowledge labels (read_labels); problems without one: "(none)".
"""

from __future__ import annotations

import collections
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import storage
from evaluation.iterative.protocol import DISTINGUISHED, EXAMPLES, NATURAL, SUCCESS
from evaluation.passk import pass_at_k
from sandbox.typed import Question, Type

SUBSETS = ("all", "without_flagged")
NL_SUCCEED, NL_FAIL, NL_UNKNOWN = "NL-Succeed", "NL-Fail", "no natural episodes"
NO_LABEL = "(none)"
NO_QUESTION = "(no typed question)"  # records of a problem the questions given do not hold
# Verdicts of a round-1 record whose code passed every given example (old records: no given_passed).
_CONFORMING = (SUCCESS, DISTINGUISHED, "not_converged")


def episode_key(record: Mapping[str, Any]) -> tuple:
  return record["kind"], record["language"], record["qid"], record["start_set"], record["sample"]


def round1_passes_given(record: Mapping[str, Any]) -> tuple[bool, bool]:
  """(whether the round-1 code passed every given example, whether that came from the verdict)."""
  if "given_passed" in record:
    return bool(record["given_passed"]), False
  exhausted_after_check = record["verdict"] == "context_exhausted" and record.get("num_distinguishing", 0) > 0
  return record["verdict"] in _CONFORMING or exhausted_after_check, True


def episode_outcomes(records: Sequence[dict]) -> dict[tuple, dict]:
  """Per episode: the round it succeeded in (None: never), whether any of its code was flagged, its
  rounds, and round 1's examples given (m), flag and pass on the given examples."""
  out: dict[tuple, dict] = {}
  for r in sorted(records, key=lambda r: r["round"]):
    entry = out.setdefault(episode_key(r), {"success_round": None, "flagged": False, "rounds": 0})
    entry["flagged"] |= r["flagged"]
    entry["rounds"] = r["round"]
    if r["verdict"] == SUCCESS:
      entry["success_round"] = r["round"]
    if r["round"] == 1:
      entry["m"] = len(r["examples_given"])
      entry["flagged_r1"] = r["flagged"]
      entry["given_passed"], entry["from_verdict"] = round1_passes_given(r)
  return out


def _succeeded(o: dict, by: int, subset: str) -> bool:
  """Solved by round `by`; "without_flagged" counts a flagged episode as a failure."""
  return o["success_round"] is not None and o["success_round"] <= by and not (
      subset == "without_flagged" and o["flagged"])


def _mean_pass(executions: Iterable[list[dict]], k: int, solved) -> float:
  values = [pass_at_k(len(v), sum(map(solved, v)), k) for v in executions if len(v) >= k]
  return sum(values) / len(values) if values else math.nan


def summarize(records: Sequence[dict], *, rounds: int, num_samples: int,
              questions: Mapping[str, Question] | None = None,
              labels: Mapping[str, Sequence[str]] | None = None) -> dict:
  """The metrics of the module docstring. `questions` (qid -> typed question) gives the I/O types,
  `labels` the knowledge labels; either absent: that RQ3 table is left out with a note."""
  outcomes = episode_outcomes(records)
  k_big = min(10, num_samples)
  groups: dict[tuple, dict[tuple, list[dict]]] = collections.defaultdict(lambda: collections.defaultdict(list))
  for (kind, language, qid, start_set, _), o in outcomes.items():
    groups[(language, kind)][(qid, start_set)].append(o)
  metrics: dict = {"rows": [], "k": k_big, "rounds": rounds, "num_samples": num_samples, "notes": []}
  for (language, kind), executions in sorted(groups.items()):
    for subset in SUBSETS:
      row = {"language": language, "kind": kind, "subset": subset, "executions": len(executions),
             "episodes": sum(len(v) for v in executions.values()),
             "flagged": sum(o["flagged"] for v in executions.values() for o in v)}
      for by, name in ((1, "round1"), (rounds, "final")):
        for k in (1, k_big):
          row[f"pass@{k}_{name}"] = _mean_pass(executions.values(), k, lambda o: _succeeded(o, by, subset))
      row["successes_by_round"] = [sum(_succeeded(o, r, subset) for v in executions.values() for o in v)
                                   for r in range(1, rounds + 1)]
      row["executions_by_round"] = [sum(any(_succeeded(o, r, subset) for o in v) for v in executions.values())
                                    for r in range(1, rounds + 1)]
      row["share_pass0"] = sum(not any(_succeeded(o, rounds, subset) for o in v)
                               for v in executions.values()) / len(executions)
      metrics["rows"].append(row)
  metrics["o1"] = _o1(groups, k_big, metrics["notes"])
  metrics["rq3"] = _rq3(outcomes, questions, labels, metrics["notes"])
  return metrics


def _o1(groups: Mapping[tuple, Mapping[tuple, list[dict]]], k: int, notes: list[str]) -> list[dict]:
  """RQ1's rows: per language, m and subset (module docstring)."""
  rows = []
  from_verdict = False
  for (language, kind), executions in sorted(groups.items()):
    if kind != EXAMPLES:
      continue
    by_m: dict[int, list[list[dict]]] = collections.defaultdict(list)
    for v in executions.values():
      by_m[v[0]["m"]].append(v)
      from_verdict |= any(o["from_verdict"] for o in v)
    for m, chosen in sorted(by_m.items()):
      for subset in ("all", "without_input_matching"):
        def conforming(o: dict) -> bool:
          return o["given_passed"] and not (subset == "without_input_matching" and o["flagged_r1"])

        rows.append({"language": language, "m": m, "subset": subset, "executions": len(chosen),
                     "samples": sum(map(len, chosen)), "flagged": sum(o["flagged_r1"] for v in chosen for o in v),
                     "pass@1": _mean_pass(chosen, 1, conforming), f"pass@{k}": _mean_pass(chosen, k, conforming),
                     "share_pass0": sum(not any(map(conforming, v)) for v in chosen) / len(chosen)})
  if from_verdict:
    notes.append("O1: some records predate the given_passed field; their pass on the given examples comes "
                 "from the verdict, so a round-1 code that crashed or timed out on a pool input counts as failing.")
  return rows


# ---- RQ3 ------------------------------------------------------------------------------------------

def io_types(question: Question) -> list[str]:
  """Seed 001's I/O type categories of a signature (parameters and return type), sorted: int,
  string, double (float), boolean, array (a list or set of any element type, and a tuple: a fixed-
  length array in the paper's Java); an optional counts as its element type; a map, not among the
  paper's five, is "map" so that no problem falls outside every category."""
  names = {"int": "int", "string": "string", "float": "double", "bool": "boolean", "list": "array",
           "set": "array", "tuple": "array", "map": "map"}

  def category(t: Type) -> str:
    return category(t.element) if t.name == "optional" else names[t.name]

  return sorted({category(t) for t in (*question.types, question.return_type)})


def _rq3(outcomes: Mapping[tuple, dict], questions: Mapping[str, Question] | None,
         labels: Mapping[str, Sequence[str]] | None, notes: list[str]) -> list[dict]:
  """Per language, dimension and category: problems, and those implemented from examples (module docstring)."""
  implemented: dict[str, dict[str, dict[str, bool]]] = collections.defaultdict(dict)  # language -> qid -> subset
  nl: dict[str, dict[str, bool]] = collections.defaultdict(dict)                       # language -> qid -> NL-Succeed
  for (kind, language, qid, _, _), o in outcomes.items():
    if kind == EXAMPLES:
      entry = implemented[language].setdefault(qid, dict.fromkeys(SUBSETS, False))
      for subset in SUBSETS:
        entry[subset] |= _succeeded(o, math.inf, subset)
    elif kind == NATURAL:
      nl[language][qid] = nl[language].get(qid, False) or o["success_round"] == 1
  rows = []
  for language, problems in sorted(implemented.items()):
    dimensions: list[tuple[str, Any]] = []
    if nl.get(language):
      dimensions.append(("difficulty", lambda q: [
          NL_UNKNOWN if q not in nl[language] else NL_SUCCEED if nl[language][q] else NL_FAIL]))
    if questions is not None:
      dimensions.append(("io_type", lambda q: io_types(questions[q]) if q in questions else [NO_QUESTION]))
    if labels is not None:
      dimensions.append(("label", lambda q: list(labels.get(q) or [NO_LABEL])))
    for dimension, categories_of in dimensions:
      members: dict[str, list[str]] = collections.defaultdict(list)
      for qid in sorted(problems):
        for category in categories_of(qid):
          members[category].append(qid)
      for category, qids in sorted(members.items()):
        row = {"language": language, "dimension": dimension, "category": category, "problems": len(qids)}
        for subset in SUBSETS:
          done = sum(problems[q][subset] for q in qids)
          suffix = "" if subset == "all" else "_without_flagged"
          row["implemented" + suffix], row["share" + suffix] = done, done / len(qids)
        rows.append(row)
  if implemented and not any(nl.get(language) for language in implemented):
    notes.append("RQ3 by difficulty left out: NL-Succeed/NL-Fail needs the natural-prompt episodes of the same "
                 "run (run without --no_natural).")
  if implemented and questions is None:
    notes.append("RQ3 by I/O type left out: no typed questions given.")
  if implemented and labels is None:
    notes.append("RQ3 by knowledge label left out: no labels file (--labels FILE: a JSON object of problem -> "
                 "list of labels).")
  return rows


def read_labels(path: str, known: Iterable[str]) -> dict[str, list[str]]:
  """A knowledge-labels file: a JSON object of qid -> list of label strings (keys starting with "_"
  are comments). Errors name the file: missing, not JSON, not that shape, a qid not in `known`."""
  if not storage.exists(path):
    raise ValueError(f"--labels {path}: no such file")
  try:
    data = storage.read_json(path)
  except ValueError as error:
    raise ValueError(f"--labels {path}: not valid JSON ({error})") from None
  if not isinstance(data, dict):
    raise ValueError(f"--labels {path}: expected a JSON object of problem -> list of labels")
  out = {}
  for qid, value in data.items():
    if qid.startswith("_"):
      continue
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
      raise ValueError(f"--labels {path}: {qid!r} must map to a list of label strings, got {value!r}")
    out[qid] = sorted(set(value))
  unknown = sorted(set(out) - set(known))
  if unknown:
    raise ValueError(f"--labels {path}: unknown problems {unknown[:10]}" + (" ..." if len(unknown) > 10 else ""))
  return out


# ---- results.md and the plots -------------------------------------------------------------------

def _number(value: float) -> str:
  return "–" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.3f}"


def _table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
  lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
  return "\n".join([*lines, *("| " + " | ".join(cells) + " |" for cells in rows)]) + "\n"


def _label(row: dict) -> str:
  return row["kind"] + (" (without flagged)" if row["subset"] == "without_flagged" else "")


def markdown(metrics: dict, preamble: str) -> str:
  """results.md: `preamble` (the run's settings), then each table with the paper's counterpart."""
  k, rounds = metrics["k"], metrics["rounds"]
  ks = sorted({1, k})
  overall = _table(
      ["language", "prompt", "episodes", "executions", "flagged", *(f"pass@{j} r1" for j in ks),
       *(f"pass@{j} r{rounds}" for j in ks), "successes by round (cumulative)", f"share pass@{k}=0"],
      ([row["language"], _label(row), str(row["episodes"]), str(row["executions"]), str(row["flagged"]),
        *(_number(row[f"pass@{j}_round1"]) for j in ks), *(_number(row[f"pass@{j}_final"]) for j in ks),
        " ".join(map(str, row["successes_by_round"])), _number(row["share_pass0"])] for row in metrics["rows"]))
  parts = ["# Iterative example-based generation\n\n" + preamble + "\n\n" + overall]
  parts.append(
      "## Round 1 against the given examples only (seed 001 RQ1, O1: Tables 1 and 2)\n\n"
      "pass@k with c = round-1 codes that pass every given example; \"without input matching\": a flagged "
      "code counts as failing. share pass@k=0: executions where no sample passes.\n\n" + _table(
          ["language", "m", "code", "executions", "samples", "flagged r1", *(f"pass@{j}" for j in ks),
           f"share pass@{k}=0"],
          ([row["language"], str(row["m"]), row["subset"].replace("_", " "), str(row["executions"]),
            str(row["samples"]), str(row["flagged"]), *(_number(row[f"pass@{j}"]) for j in ks),
            _number(row["share_pass0"])] for row in metrics["o1"])))
  parts.append(
      "## Executions solved by round (seed 001 RQ2, Figure 6)\n\n"
      "An execution (problem x start set) counts from the round in which one of its samples succeeds.\n\n" +
      _table(["language", "prompt", "executions", *(f"after r{r}" for r in range(1, rounds + 1))],
             ([row["language"], _label(row), str(row["executions"]), *map(str, row["executions_by_round"])]
              for row in metrics["rows"])))
  parts.append(
      "## Problems implemented from examples, by kind of problem (seed 001 RQ3: Figures 7, 8 and 9)\n\n"
      "A problem is implemented when an episode from any start set succeeds by the last round; difficulty: "
      "NL-Succeed when a natural-prompt sample succeeded in round 1.\n\n" + _table(
          ["language", "by", "category", "problems", "implemented", "share", "implemented (without flagged)",
           "share (without flagged)"],
          ([row["language"], row["dimension"], row["category"], str(row["problems"]), str(row["implemented"]),
            _number(row["share"]), str(row["implemented_without_flagged"]),
            _number(row["share_without_flagged"])] for row in metrics["rq3"])))
  notes = "".join(f"- {note}\n" for note in metrics.get("notes", []))
  return "\n".join(parts) + (f"\nNotes:\n{notes}" if notes else "")


def o1_across_runs(runs: Mapping[str, dict]) -> str:
  """Table 1's shape over several runs (run folder -> its metrics.json): one run has one m (its
  --examples), so m varies across runs of the same model and languages. Rows by language, then m."""
  rows, seen = [], {}
  for folder, metrics in runs.items():
    for row in metrics.get("o1", []):
      key = (row["language"], row["m"], row["subset"])
      if key in seen:
        raise ValueError(f"{folder} and {seen[key]} both hold O1 rows for {row['language']} with m = {row['m']}: "
                         "give one run per m")
      seen[key] = folder
      rows.append(row)
  if not rows:
    raise ValueError(f"no O1 rows in {', '.join(runs)} (runs of the examples prompt write them)")
  ks = sorted({int(key[len("pass@"):]) for row in rows for key in row if key.startswith("pass@")})
  rows.sort(key=lambda row: (row["language"], row["m"], row["subset"] != "all"))
  return _table(["language", "m", "code", "executions", "samples", *(f"pass@{j}" for j in ks), "share pass@k=0"],
                ([row["language"], str(row["m"]), row["subset"].replace("_", " "), str(row["executions"]),
                  str(row["samples"]), *(_number(row[f"pass@{j}"]) if f"pass@{j}" in row else "" for j in ks),
                  _number(row["share_pass0"])] for row in rows))


def main(argv: Sequence[str] | None = None) -> int:
  """python -m evaluation.iterative.report --runs DIR [DIR ...] [--output FILE]: seed 001's Table 1 (O1
  by m) from several runs of python -m evaluation.iterative, one per --examples."""
  import argparse
  import json

  parser = argparse.ArgumentParser(prog="python -m evaluation.iterative.report", description=main.__doc__)
  parser.add_argument("--runs", nargs="+", required=True, help="output folders of evaluation.iterative runs")
  parser.add_argument("--output", default=None, help="also write the table (markdown) to this file")
  args = parser.parse_args(argv)
  runs = {}
  for folder in args.runs:
    path = storage.join(folder, "metrics.json")
    if not storage.exists(path):
      parser.error(f"--runs: {path} not found (has `python -m evaluation.iterative --output {folder}` finished?)")
    try:
      runs[folder] = json.loads(storage.read_text(path))
    except json.JSONDecodeError as error:
      parser.error(f"--runs: {path} is not JSON: {error}")
  try:
    table = o1_across_runs(runs)
  except ValueError as error:
    parser.error(f"--runs: {error}")
  text = "Round 1 against the given examples only, by m (seed 001 RQ1, O1: Table 1)\n\n" + table + "\n"
  print(text, end="")
  if args.output:
    storage.write_atomic(args.output, text)
  return 0


def _plot_rounds(rows: Sequence[dict], path: str, values, ylabel: str, title: str, ylim=None) -> None:
  """A line per language and prompt kind over rounds (dashed: without flagged episodes)."""
  import matplotlib

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt
  from matplotlib.ticker import MaxNLocator

  fig, ax = plt.subplots(figsize=(6, 4))
  colors: dict[tuple, str] = {}
  for row in rows:
    key = (row["language"], row["kind"])
    colors.setdefault(key, f"C{len(colors) % 10}")
    ys = values(row)
    ax.plot(range(1, len(ys) + 1), ys, marker="o", color=colors[key],
            linestyle="--" if row["subset"] == "without_flagged" else "-", label=f"{key[0]} {_label(row)}")
  rounds = max((len(row["successes_by_round"]) for row in rows), default=1)
  ax.set_xticks(range(1, rounds + 1))
  if ylim is None:  # counts: whole numbers on the axis
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
  ax.set_ylim(*(ylim or (0, max([1, *(max(values(row), default=0) for row in rows)]) * 1.05)))
  ax.set_xlabel("round")
  ax.set_ylabel(ylabel)
  ax.set_title(title)
  ax.grid(alpha=0.3)
  if rows:
    ax.legend(fontsize=7)
  fig.tight_layout()
  storage.save_figure(fig, path, dpi=110)
  plt.close(fig)


def plot_samples(metrics: dict, path: str) -> None:
  """Cumulative share of episodes (samples) solved by round."""
  share = lambda row: [100 * s / max(row["episodes"], 1) for s in row["successes_by_round"]]  # noqa: E731
  _plot_rounds(metrics["rows"], path, share, "episodes solved (%, cumulative)", "Successes by round", (0, 100))


def plot_executions(metrics: dict, path: str) -> None:
  """Seed 001's Figure 6: executions (problem x start set) solved after each round, as counts."""
  _plot_rounds(metrics["rows"], path, lambda row: row["executions_by_round"],
               "executions solved (cumulative)", "Executions solved by round (seed 001, Figure 6)")


if __name__ == "__main__":
  import sys

  sys.exit(main())
