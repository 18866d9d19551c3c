"""Exact match for infilling problems of one's own, in SantaCoder-FIM's shape.

SantaCoder's FIM task (Allal et al. 2023; bigcode-evaluation-harness, tasks/santacoder_fim.py) is a
JSONL of records with `prompt` (the text before the middle), `suffix`, `canonical_solution` (the
middle) and `language` ("py", "js", "java"). Its metric is exact match per language: a generated
middle counts when it equals the canonical one once both are stripped of leading and trailing
whitespace (`g.strip() == reference.strip()`), averaged over every generation of the language (not
per problem first), as the harness does. No code runs.

A record's qid is its `task_id` where it has one, else its index among the file's records (0 for the
first). A malformed line, a record without the four fields as strings, a language codelm does not
know, or a qid that repeats is an error naming file:line: prompts from a file that is half read would
be a benchmark nobody meant.
"""

from __future__ import annotations

import collections
import dataclasses
import json
from collections.abc import Mapping, Sequence

import storage
from evaluation import resumable
from evaluation.infilling import score as infilling_score
from languages import get as language_named

FIELDS = ("prompt", "suffix", "canonical_solution", "language")


@dataclasses.dataclass(frozen=True)
class FimProblem:
  qid: str
  label: str          # the file's language ("py"), as the metric reports it
  language: str       # codelm's name ("python")
  prefix: str
  suffix: str
  middle: str         # canonical_solution


def read_problems(path: str) -> dict[str, FimProblem]:
  """The file's problems by qid, in file order; a ValueError naming file:line for a bad line."""
  problems: dict[str, FimProblem] = {}
  for index, (number, record) in enumerate(storage.read_jsonl(path, warn=_refuse)):
    where = f"{path}:{number}"
    missing = [f for f in FIELDS if not isinstance(record.get(f), str)]
    if missing:
      raise ValueError(f"{where}: a SantaCoder-FIM record needs {', '.join(FIELDS)} as strings; "
                       f"missing or not a string: {', '.join(missing)}")
    try:
      language = language_named(record["language"]).name
    except ValueError as error:
      raise ValueError(f"{where}: {error}") from None
    qid = record.get("task_id", index)
    if not isinstance(qid, (str, int)) or isinstance(qid, bool):
      raise ValueError(f"{where}: task_id must be a string or an integer, got {json.dumps(qid)[:40]}")
    qid = str(qid)
    if qid in problems:
      raise ValueError(f"{where}: qid {qid!r} repeats an earlier record's")
    problems[qid] = FimProblem(qid, record["language"], language, record["prompt"], record["suffix"],
                               record["canonical_solution"])
  return problems


def _refuse(message: str) -> None:
  """A last line without its newline that does not parse: in a file of problems, not a torn write to
  skip (storage's rule for the files codelm appends to) but an error."""
  raise ValueError(message)


def is_exact(middle: str, canonical: str) -> bool:
  """bigcode-evaluation-harness's rule: equal once both are stripped."""
  return middle.strip() == canonical.strip()


def score(problems_path: str, predictions_path: str, output_dir: str) -> dict:
  """Exact match per language (the file's labels) and overall; writes output_dir/exact_match.jsonl
  (one line per prediction) and output_dir/exact_match.json (the metrics)."""
  problems = read_problems(problems_path)
  read = infilling_score.read_predictions(predictions_path, problems, lambda record, problem: problem.language,
                                         "not in the problems file")
  predictions, invalid, unknown = read.predictions, read.invalid, read.unknown_qids
  records = [{"qid": p.qid, "sample_id": p.sample_id, "language": problems[p.qid].label,
              "exact_match": is_exact(p.code, problems[p.qid].middle)} for p in predictions]
  by_label: dict[str, list[bool]] = collections.defaultdict(list)
  for r in records:
    by_label[r["language"]].append(r["exact_match"])
  predicted = {p.qid for p in predictions}
  metrics = {"benchmark": "exact match (SantaCoder-FIM rule: stripped equality)",
             "problems": storage.resolve(problems_path), "predictions": storage.resolve(predictions_path),
             "languages": {label: _share(values) for label, values in sorted(by_label.items())},
             "overall": _share([r["exact_match"] for r in records]),
             "problems_predicted": len(predicted), "problems_in_file": len(problems),
             "sampling": resumable.sampling_counts(predictions),
             "unknown_qids": unknown, "invalid_predictions": invalid}
  storage.makedirs(output_dir)
  storage.write_atomic(storage.join(output_dir, "exact_match.jsonl"),
                       "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))
  storage.write_json(storage.join(output_dir, "exact_match.json"), metrics)
  return metrics


def _share(values: Sequence[bool]) -> dict:
  return {"predictions": len(values), "exact": sum(values),
          "exact_match": round(100 * sum(values) / len(values), 4) if values else None}


def summary(metrics: dict) -> str:
  lines = ["| language | predictions | exact match (%) |", "|---|---|---|"]
  for label, m in [*metrics["languages"].items(), ("overall", metrics["overall"])]:
    value = "–" if m["exact_match"] is None else f"{m['exact_match']:.2f}"
    lines.append(f"| {label} | {m['predictions']} | {value} |")
  lines.append("")
  lines.append(f"problems predicted: {metrics['problems_predicted']} of {metrics['problems_in_file']}")
  if metrics["unknown_qids"]:
    lines.append(f"warning: {metrics['unknown_qids']} predictions name a qid the problems file lacks")
  lines += [f"invalid prediction: {m}" for m in metrics["invalid_predictions"][:20]]
  lines += resumable.sampling_warnings({"overall": metrics["sampling"]})
  return "\n".join(lines)
