"""What the corpus builder did with every file: the stages, their counts, and the printed tables.

Every file the pipeline reads is counted once under "read" (per language, files and UTF-8 bytes) and
once more under the stage that removed it or under "kept", so for each language
read = sum of the pipeline stages' removals + kept, which tests check. The driver's stages (before
reading: symlinks, names that are not code, undecodable names, the per-language cap) have no bytes.
"pii_redacted" counts files changed, not removed.
"""

from __future__ import annotations

import collections
import json

import languages
from data import records
from data.quality import QUALITY_RULES

# In pipeline order. Driver side: symlink, not_code (no language extension; shard rows of other
# languages), undecodable_name (a path that is not UTF-8), capped (over --max_files_per_language).
DRIVER_STAGES = ("symlink", "not_code", "undecodable_name", "capped")
# Pipeline side: reading (malformed: a shard or row that cannot be read, listed in problems.jsonl),
# licence, quality, exact and near duplicates, benchmark text (listed in decontaminated.jsonl).
PIPELINE_STAGES = ("unreadable", "malformed", "empty", "too_large", "binary", "not_utf8", "license",
                   "no_license", *QUALITY_RULES, "duplicate", "near_duplicate", "decontaminated")
SKIP_REASONS = DRIVER_STAGES + PIPELINE_STAGES
READ, KEPT, PII_REDACTED = "read", "kept", "pii_redacted"
STAGES = (*DRIVER_STAGES, READ, *PIPELINE_STAGES, PII_REDACTED, KEPT)


def empty_stages() -> dict[str, dict]:
  return {stage: {"files": 0, "bytes": 0, "languages": {}} for stage in STAGES}


def add(stages: dict, stage: str, language: str, files: int, num_bytes: int) -> None:
  entry = stages[stage]
  entry["files"] += files
  entry["bytes"] += num_bytes
  per = entry["languages"].setdefault(language or "-", {"files": 0, "bytes": 0})
  per["files"] += files
  per["bytes"] += num_bytes


def read_counts(filename: str, skipped: collections.Counter, stages: dict, pii_items: collections.Counter
                ) -> dict[str, dict[str, dict[str, int]]]:
  """Per language and split sizes from the pipeline's count lines; adds its stage counts to `skipped`
  (files per reason) and `stages`, and redactions per kind to `pii_items`."""
  import storage

  sizes: dict[str, dict[str, dict[str, int]]] = {}
  with storage.open_file(filename, "r") as f:
    for line in f:
      row = json.loads(line)
      if row[0] == "files":
        _, language, split, files, num_bytes, characters = row
        per_split = sizes.setdefault(language, {s: {"files": 0, "bytes": 0, "characters": 0}
                                                for s in records.SPLITS})
        per_split[split] = {"files": files, "bytes": num_bytes, "characters": characters}
        add(stages, KEPT, language, files, num_bytes)
      elif row[0] == "stage":
        _, stage, language, files, num_bytes = row
        add(stages, stage, language, files, num_bytes)
        if stage in SKIP_REASONS:
          skipped[stage] += files
      elif row[0] == "pii":
        _, kind, count = row
        pii_items[kind] += count
  return sizes


def stage_table(stats: dict, unit: str = "files") -> str:
  """Stages as rows, languages as columns: files (unit "files") or MB (unit "bytes")."""
  stages = stats["stages"]
  present = {language for entry in stages.values() for language in entry["languages"]}
  columns = [l.name for l in languages.LANGUAGES if l.name in present] + (["-"] if "-" in present else [])
  width = max(9, *(len(c) + 2 for c in columns)) if columns else 9

  def cell(entry: dict) -> str:
    value = entry["files"] if unit == "files" else entry["bytes"] / 1e6
    return f"{value:>{width},}" if unit == "files" else f"{value:>{width}.2f}"

  header = f"{'stage (' + ('files' if unit == 'files' else 'MB') + ')':<22}" + "".join(
      f"{c:>{width}}" for c in columns) + f"{'total':>{width + 2}}"
  lines = [header, "-" * len(header)]
  for stage in STAGES:
    entry = stages[stage]
    if not entry["files"] and stage not in (READ, KEPT):
      continue
    zero = {"files": 0, "bytes": 0}
    lines.append(f"{stage:<22}" + "".join(cell(entry["languages"].get(c, zero)) for c in columns)
                 + f"  {cell(entry)}")
  return "\n".join(lines)


def format_table(stats: dict) -> str:
  """The per-language summary of the corpus written, then what each stage removed (files and MB)."""
  header = f"{'language':<12}{'train files':>13}{'valid files':>13}{'MB':>10}{'characters':>15}"
  lines = [header, "-" * len(header)]
  totals = [0, 0, 0, 0]
  for language in [l.name for l in languages.LANGUAGES if l.name in stats["languages"]]:
    train, valid = (stats["languages"][language][split] for split in records.SPLITS)
    row = [train["files"], valid["files"], train["bytes"] + valid["bytes"],
           train["characters"] + valid["characters"]]
    totals = [t + r for t, r in zip(totals, row)]
    lines.append(f"{language:<12}{row[0]:>13,}{row[1]:>13,}{row[2] / 1e6:>10.2f}{row[3]:>15,}")
  lines.append("-" * len(header))
  lines.append(f"{'total':<12}{totals[0]:>13,}{totals[1]:>13,}{totals[2] / 1e6:>10.2f}{totals[3]:>15,}")
  skipped = ", ".join(f"{reason} {count:,}" for reason, count in stats["skipped"].items() if count)
  lines.append(f"skipped: {skipped or 'none'}")
  if "stages" in stats:
    lines += ["", "every file by stage (read = the stages below it + kept; '-': no language):",
              stage_table(stats, "files"), "", stage_table(stats, "bytes")]
  pii_items = stats.get("pii", {}).get("items", {})
  if pii_items:
    lines.append("PII replaced: " + ", ".join(f"{kind} {count:,}" for kind, count in sorted(pii_items.items())))
  return "\n".join(lines)
