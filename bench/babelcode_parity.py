"""BabelCode's four benchmarks built from its raw files, their gold solutions scored as whole programs,
and codelm's verdicts beside BabelCode's own evaluator's, question by question.

  python bench/babelcode_parity.py [--data ../shared/babelcode] [--output DIR] [--workers N]
      [--babelcode_verdicts bench/data/babelcode_gold_verdicts.json]
  python bench/babelcode_parity.py --from_babelcode_eval EVAL_DIR --write_verdicts bench/data/babelcode_gold_verdicts.json

--data is the folder with raw_datasets/<name>_questions.jsonl and dataset_fixes/ (../shared/babelcode,
or a clone of google-research/babelcode's data/). For each of human_eval, mbpp, tp3 and transcoder:
the raw file becomes BabelCode's parsed format (evaluation/humaneval/raw_questions.py; fixes where
dataset_fixes/<name>.jsonl exists), then typed questions (evaluation/humaneval/babelcode.py); the gold
solutions (the parsed `solutions`: Python for all four, C++ for Transcoder) are scored as whole-program
predictions by evaluation/score.py (--whole_programs) into DIR/<name>/. Printed and written to
DIR/parity.md and DIR/parity.json: per dataset, the questions read, built and left out by reason
(BabelCode's converter and generator; the typed converter), the gold passes in codelm, and, with
--babelcode_verdicts, BabelCode's passes and every question where the two verdicts differ.

The verdicts file is made once from a run of BabelCode's evaluate_predictions.py on the same gold
predictions (DIR/<name>/gold.jsonl) and its generate_test_code.py output: --from_babelcode_eval reads
EVAL_DIR/<name>/pred_results.jsonl (or <name>_<part>/ for a dataset run in parts) and writes {dataset:
{language: {qid: outcome}}}, with the datasets it lacks under "missing" (how that run was made is in
the file's "how" field); where the verdicts file exists, a run's languages replace its own and the
rest is kept (runs made at different times). A bad argument or file is reported in one line, exit 2.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys
from collections.abc import Mapping, Sequence

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from evaluation import score  # noqa: E402
from evaluation.humaneval import babelcode, raw_questions  # noqa: E402
from sandbox import execution, typed  # noqa: E402
import languages  # noqa: E402
import storage  # noqa: E402

DATASETS = ("human_eval", "mbpp", "tp3", "transcoder")
GOLD_LANGUAGES = {"human_eval": ("Python",), "mbpp": ("Python",), "tp3": ("Python",),
                  "transcoder": ("Python", "C++")}
DEFAULT_DATA = os.path.join(ROOT, "..", "shared", "babelcode")
DEFAULT_VERDICTS = os.path.join(ROOT, "bench", "data", "babelcode_gold_verdicts.json")
HOW = ("BabelCode commit e8314f6 (google-research/babelcode), Python 3.11, g++ 12: generate_test_code.py "
       "--gin_file=configs/generate_code.gin --debug_lang=<Python|C++> on the parsed files this script writes, "
       "then evaluate_predictions.py --gin_file=configs/validation.gin --allow_execution --validation "
       "--cpu_count=1 on DIR/<name>/gold.jsonl (Transcoder's Python and C++ solutions as two runs, "
       "transcoder_python and transcoder_cpp), on a 2-core machine; outcomes from pred_results.jsonl. "
       "For C++, g++'s compile limit in that copy's cpp.py was raised from 10 s to 60 s: BabelCode compiles "
       "each program with <bits/stdc++.h> and no precompiled header, which took over 10 s on the loaded machine")


def build(data: str, name: str, directory: str) -> dict:
  """Raw -> parsed -> typed for one dataset, written under `directory`; what was built and left out."""
  raw = os.path.join(data, "raw_datasets", f"{name}_questions.jsonl")
  if not os.path.isfile(raw):
    raise ValueError(f"{raw}: no such file (--data is the folder holding raw_datasets/)")
  fixes_path = os.path.join(data, "dataset_fixes", f"{name}.jsonl")
  fixes = raw_questions.read_fixes(fixes_path) if os.path.isfile(fixes_path) else {}
  conversion = raw_questions.convert(raw, fixes)
  storage.makedirs(directory)
  parsed = os.path.join(directory, "parsed.jsonl")
  storage.write_atomic(parsed, "".join(json.dumps(q) + "\n" for q in conversion.questions))
  questions, typed_failures = babelcode.convert(parsed)
  typed.write_questions(questions, os.path.join(directory, "typed.jsonl"))
  gold = [{"qid": str(q["qid"]), "language": language, "code": q["solutions"][language]}
          for language in GOLD_LANGUAGES[name] for q in conversion.questions]
  storage.write_atomic(os.path.join(directory, "gold.jsonl"), "".join(json.dumps(g) + "\n" for g in gold))
  left_out = collections.Counter(f"{f.stage}: {f.error}: {f.reason}" for f in conversion.failures)
  return {"read": conversion.read, "fixes_applied": conversion.fixes_applied, "parsed": len(conversion.questions),
          "left_out": dict(left_out.most_common()), "typed": len(questions),
          "typed_left_out": [f.split(" ", 1)[-1] for f in typed_failures]}  # "(qid): why", the path dropped


def codelm_verdicts(name: str, directory: str, workers: int) -> dict[str, dict[str, dict]]:
  """Scores DIR/<name>/gold.jsonl as whole programs (resumable); {language: {qid: result record}}."""
  output = os.path.join(directory, "scores")
  score.score(os.path.join(directory, "gold.jsonl"), os.path.join(directory, "typed.jsonl"), output,
              [languages.from_label(label).name for label in GOLD_LANGUAGES[name]], workers,
              execution.Limits(timeout_s=score.PAPER_TIMEOUT_S), ks=(1,), progress=False,
              timeouts=score.paper_timeouts(), whole=True)
  out: dict[str, dict[str, dict]] = collections.defaultdict(dict)
  labels = {languages.from_label(label).name: label for label in GOLD_LANGUAGES[name]}
  for record in score.read_results(os.path.join(output, "results.jsonl")).values():
    out[labels[record["language"]]][record["qid"]] = record
  return out


def compare(name: str, built: dict, mine: Mapping[str, Mapping[str, dict]],
            theirs: Mapping[str, Mapping[str, str]] | None) -> list[dict]:
  """One row per gold language: passes in codelm and, where `theirs` has the language, in BabelCode,
  and each question that differs."""
  rows = []
  for language in GOLD_LANGUAGES[name]:
    records = mine.get(language, {})
    row = {"dataset": name, "language": language, "questions": built["parsed"], "scored": len(records),
           "codelm_passed": sum(r["status"] == "passed" for r in records.values())}
    outcomes = None if theirs is None else theirs.get(language)
    if outcomes is not None:  # BabelCode's verdicts on this dataset's gold in this language
      row["babelcode_passed"] = sum(o == "Passed" for o in outcomes.values())
      differ = []
      for qid in sorted(set(outcomes) | set(records), key=lambda q: (len(q), q)):
        ours = records.get(qid, {}).get("status", "not scored")
        if (ours == "passed") != (outcomes.get(qid) == "Passed"):
          differ.append({"qid": qid, "codelm": ours, "babelcode": outcomes.get(qid, "not run"),
                         "detail": records.get(qid, {}).get("detail", "")[:200]})
      row["differ"] = differ
    rows.append(row)
  return rows


def table(built: Mapping[str, dict], rows: Sequence[dict]) -> str:
  lines = ["| dataset | read | built (BabelCode's set) | left out | typed | gold | codelm passes | BabelCode passes | differ |",
           "|---|---|---|---|---|---|---|---|---|"]
  for row in rows:
    b = built[row["dataset"]]
    theirs = "–" if "babelcode_passed" not in row else f"{row['babelcode_passed']}/{row['questions']}"
    differ = "–" if "differ" not in row else str(len(row["differ"]))
    lines.append(f"| {row['dataset']} | {b['read']} | {b['parsed']} | {sum(b['left_out'].values())} | {b['typed']} | "
                 f"{row['language']} | {row['codelm_passed']}/{row['questions']} | {theirs} | {differ} |")
  compared = [row for row in rows if "differ" in row]
  if compared:
    total = sum(row["questions"] for row in compared)
    agree = total - sum(len(row["differ"]) for row in compared)
    lines += ["", f"gold verdicts agreeing with BabelCode's: {agree} of {total} ({100 * agree / total:.1f}%)"]
  lines.append("")
  for name, b in built.items():
    for reason, count in b["left_out"].items():
      lines.append(f"- {name}: left out {count}: {reason}")
    for reason in b["typed_left_out"]:
      lines.append(f"- {name}: not typed: {reason}")
  for row in rows:
    for d in row.get("differ", []):
      lines.append(f"- differs: {row['dataset']} {row['language']} {d['qid']}: codelm {d['codelm']}, "
                   f"BabelCode {d['babelcode']}: {d['detail'][:120]}")
  return "\n".join(lines)


def verdicts_from_eval(directory: str) -> dict:
  """{dataset: {language: {qid: outcome}}} from BabelCode's evaluator outputs under `directory`: each
  <name>/pred_results.jsonl and <name>_<part>/pred_results.jsonl (a dataset run in parts); a dataset
  with none is listed under "missing"."""
  out: dict = {"how": HOW, "datasets": {}, "missing": []}
  for name in DATASETS:
    parts = sorted(p for p in os.listdir(directory) if p == name or p.startswith(f"{name}_"))
    paths = [os.path.join(directory, p, "pred_results.jsonl") for p in parts]
    paths = [p for p in paths if os.path.isfile(p)]
    if not paths:
      out["missing"].append(name)
      continue
    by_language: dict = collections.defaultdict(dict)
    for path in paths:
      for number, record in storage.read_jsonl(path):
        if not {"qid", "language", "outcome"} <= set(record):
          raise ValueError(f"{path}:{number}: a result needs qid, language and outcome")
        by_language[record["language"]][str(record["qid"])] = record["outcome"]
    out["datasets"][name] = {language: dict(sorted(v.items(), key=lambda kv: (len(kv[0]), kv[0])))
                             for language, v in sorted(by_language.items())}
  return out


def merged(earlier: Mapping[str, Mapping[str, dict]], run: dict) -> dict:
  """A verdicts file from an earlier one's datasets and a new run's: the run's (dataset, language)
  verdicts replace the earlier ones, the others are kept."""
  datasets = {name: dict(languages) for name, languages in earlier.items()}
  for name, languages in run["datasets"].items():
    datasets.setdefault(name, {}).update(languages)
  ordered = {name: datasets[name] for name in DATASETS if name in datasets}
  return {"how": run["how"], "datasets": ordered, "missing": [n for n in DATASETS if n not in ordered]}


def read_verdicts(path: str) -> dict:
  try:
    with open(path, encoding="utf-8") as f:
      data = json.load(f)
  except json.JSONDecodeError as error:
    raise ValueError(f"{path}:{error.lineno}: not JSON: {error.msg}") from None
  if not isinstance(data, dict) or not isinstance(data.get("datasets"), dict):
    raise ValueError(f"{path}: expected {{\"datasets\": {{name: {{language: {{qid: outcome}}}}}}}}")
  return data["datasets"]


def main(argv: Sequence[str] | None = None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--data", default=DEFAULT_DATA, help="BabelCode's data folder (raw_datasets/, dataset_fixes/)")
  parser.add_argument("--output", default=os.path.join(ROOT, "bench", "results", "babelcode_parity"),
                      help="folder for the built benchmarks, the scores and parity.md / parity.json")
  parser.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="sandboxes at a time")
  parser.add_argument("--babelcode_verdicts", default=None,
                      help=f"BabelCode's verdicts on the same gold solutions (e.g. {os.path.relpath(DEFAULT_VERDICTS, ROOT)})")
  parser.add_argument("--from_babelcode_eval", default=None,
                      help="a BabelCode evaluation folder (<dataset>/pred_results.jsonl) to turn into a verdicts file")
  parser.add_argument("--write_verdicts", default=None, help="where --from_babelcode_eval writes the verdicts JSON")
  args = parser.parse_args(argv)
  try:
    if args.from_babelcode_eval:
      if not args.write_verdicts:
        raise ValueError("--from_babelcode_eval needs --write_verdicts")
      verdicts = verdicts_from_eval(args.from_babelcode_eval)
      if os.path.isfile(args.write_verdicts):  # runs made at different times: each language's newest
        verdicts = merged(read_verdicts(args.write_verdicts), verdicts)
      storage.makedirs(storage.dirname(args.write_verdicts))
      storage.write_atomic(args.write_verdicts, json.dumps(verdicts, indent=1) + "\n")
      print(f"wrote {args.write_verdicts}")
      return 0
    if args.workers < 1:
      raise ValueError(f"--workers must be at least 1, got {args.workers}")
    theirs = read_verdicts(args.babelcode_verdicts) if args.babelcode_verdicts else None
    built, rows = {}, []
    for name in DATASETS:
      directory = os.path.join(args.output, name)
      built[name] = build(args.data, name, directory)
      mine = codelm_verdicts(name, directory, args.workers)
      rows += compare(name, built[name], mine, None if theirs is None else theirs.get(name, {}))
  except (ValueError, OSError) as error:
    print(f"error: {error}", file=sys.stderr)
    return 2
  text = table(built, rows)
  storage.write_atomic(os.path.join(args.output, "parity.md"), text + "\n")
  storage.write_atomic(os.path.join(args.output, "parity.json"),
                       json.dumps({"built": built, "rows": rows}, indent=1) + "\n")
  print(text)
  return 0


if __name__ == "__main__":
  sys.exit(main())
