"""The files sample.py reads and writes: the prompts JSONL (checked whole before any sampling), the
predictions JSONL (what a resumed run finds complete), and the end-of-run summary beside it.

Prompts: `qid`, `language`, `prompt`, optional `stop` (a list of strings; default: the language's,
languages.py); other fields pass through. A (qid, language) pair is one prompt: BabelCode reuses qids
across languages. An infilling prompt has `prefix` and `suffix` instead of `prompt`, and optionally
`format` (psm or spm, objectives/fim.py): its completion is the middle, ended by the model's `[eod]`
(default stop list: none, as a middle may hold any line). Predictions: one line per sample with `qid`, `language`, `sample_id`, `code`,
`finish_reason` (stop / eos / length), `num_tokens`, the passed-through fields, and
`prompt_truncated: true` on the samples of a prompt cut by --truncate_prompts.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import zlib
from typing import TYPE_CHECKING, Sequence

import languages
import storage
from objectives import fim
from sampling.prompt_fit import EncodedPrompts, Infill, Prompt
from sampling.stops import Whole
from storage import parse_line, read_jsonl

if TYPE_CHECKING:  # sampling/rows.py imports jax: sample.py --help stays quick without it
  from sampling.rows import Completion


def read_prompts(path: str) -> list[dict]:
  """Parsed prompt records, all checked before any sampling: a line that is not UTF-8 or JSON, a
  field of the wrong type or a second prompt for one (qid, language) is an error naming file:line."""
  prompts, first_line = [], {}
  for number, record in read_jsonl(path):
    where = f"{path}:{number}"
    infill = "prompt" not in record and ("prefix" in record or "suffix" in record)
    missing = [k for k in ("qid", "language") + (("prefix", "suffix") if infill else ("prompt",)) if k not in record]
    if missing:
      raise ValueError(f"{where}: a prompt needs qid, language and prompt (or prefix and suffix, to infill); "
                       f"missing {missing}")
    if "prompt" in record and ("prefix" in record or "suffix" in record):
      raise ValueError(f"{where}: a prompt has either prompt or prefix and suffix (to infill), not both")
    if isinstance(record["qid"], bool) or not isinstance(record["qid"], (str, int)):
      raise ValueError(f"{where}: qid must be a string or an integer, got {json.dumps(record['qid'])[:40]}")
    if not isinstance(record["language"], str) or not record["language"]:
      raise ValueError(f"{where}: language must be a non-empty string, got {json.dumps(record['language'])[:40]}")
    for field in ("prefix", "suffix") if infill else ("prompt",):
      if not isinstance(record[field], str):
        raise ValueError(f"{where}: {field} must be a string, got {type(record[field]).__name__}")
      _refuse_surrogates(record[field], f"{where}: {field}")
    if infill and record.get("format", fim.PSM) not in fim.FORMATS:
      raise ValueError(f"{where}: format must be one of {', '.join(fim.FORMATS)}, got {json.dumps(record['format'])[:40]}")
    if "stop" in record and not (isinstance(record["stop"], list) and all(isinstance(s, str) for s in record["stop"])):
      raise ValueError(f"{where}: stop must be a list of strings")
    for stop in record.get("stop", ()):
      _refuse_surrogates(stop, f"{where}: stop")
    if record.get("stop_cut", "keep") not in STOP_CUTS:
      raise ValueError(f"{where}: stop_cut must be one of {', '.join(STOP_CUTS)}, got {json.dumps(record['stop_cut'])[:40]}")
    if "stop" not in record and not infill:  # its stops are its language's: an unknown name is refused here
      try:
        languages.get(record["language"])
      except ValueError as error:
        raise ValueError(f"{where}: {error}; a prompt in another language needs its own `stop` list") from None
    key = prompt_key(record)
    if key in first_line:
      raise ValueError(f"{where}: a second prompt for qid {key[0]!r} in {key[1]} (the first is on line "
                       f"{first_line[key]}); each (qid, language) is one prompt")
    first_line[key] = number
    prompts.append(record)
  return prompts


def _refuse_surrogates(text: str, where: str) -> None:
  """JSON's "\\ud800" escape gives a str with a lone surrogate, which no UTF-8 tokenizer can read."""
  try:
    text.encode("utf-8")
  except UnicodeEncodeError as error:
    raise ValueError(f"{where} holds a lone surrogate ({text[error.start]!r} at character {error.start}), "
                     "which is not text") from None


def is_infill(record: dict) -> bool:
  return "prompt" not in record


def sampler_prompt(record: dict) -> Prompt:
  """What the sampler is given for a prompt record: its text, or an `Infill`."""
  if is_infill(record):
    return Infill(record["prefix"], record["suffix"], record.get("format", fim.PSM))
  return record["prompt"]


# `stop_cut`: "keep" keeps the part of a stop languages.KEEP names (a closing brace, `end`); "before"
# cuts before every stop in whole, as MultiPL-E and the bigcode harness do (`evaluation.prompts multiple`).
STOP_CUTS = ("keep", "before")


def stops(record: dict) -> list[str]:
  """A prompt's stop sequences: its own, else its language's (none for an infilling prompt)."""
  found = record["stop"] if "stop" in record else (
      [] if is_infill(record) else list(languages.get(record["language"]).stops))
  return [Whole(s) for s in found] if record.get("stop_cut") == "before" else list(found)


def shown_prompt(record: dict) -> str:
  """A prompt as `--show` prints it: an infilling prompt's middle marked where it goes."""
  return f"{record['prefix']}<fim_middle>{record['suffix']}" if is_infill(record) else record["prompt"]


# What a prompt record holds that its predictions do not repeat.
PROMPT_FIELDS = ("prompt", "prefix", "suffix", "stop", "stop_cut")


def prediction_records(prompt: dict, completions: Sequence[Completion], truncated: bool) -> list[dict]:
  """A prompt's predictions lines, one per completion in sample_id order: its passed-through fields,
  then qid, language, sample_id, code, finish_reason, num_tokens, and prompt_truncated where it was cut
  (the one writer of the format: sample.py and pass@k during training)."""
  records = []
  for sample_id, completion in enumerate(completions):
    record = {k: v for k, v in prompt.items() if k not in PROMPT_FIELDS}
    record.update(qid=prompt["qid"], language=prompt["language"], sample_id=sample_id, code=completion.text,
                  finish_reason=completion.finish_reason, num_tokens=completion.num_tokens)
    if truncated:
      record["prompt_truncated"] = True
    records.append(record)
  return records


def prompt_key(record: dict) -> tuple[str, str]:
  """What identifies a prompt: BabelCode reuses a qid across languages."""
  return str(record["qid"]), str(record["language"])


def completed_prompts(path: str, num_samples: int) -> set[tuple[str, str]]:
  """(qid, language) pairs with all their samples in `path`. A run killed mid-write can leave a torn
  last line or part of a prompt's samples, and a file written twice over (before runs took a lock)
  holds some samples twice: those lines are dropped (the file rewritten atomically) so that every
  (qid, language, sample_id) appears exactly once and incomplete prompts are redone."""
  if not storage.exists(path):
    return set()
  records, total = [], 0
  data = storage.read_bytes(path)
  for line in storage.jsonl_lines(data):  # the torn last line too: it is dropped below
    total += 1
    try:
      record = parse_line(line, path)
      key = (*prompt_key(record), record["sample_id"])
      hash(key)
    except (ValueError, KeyError, TypeError):
      continue
    records.append((line if line.endswith(b"\n") else line + b"\n", record, key))
  seen, unique = set(), []
  for line, record, key in records:
    if key not in seen:
      seen.add(key)
      unique.append((line, record))
  counts: dict[tuple[str, str], int] = {}
  for _, record in unique:
    counts[prompt_key(record)] = counts.get(prompt_key(record), 0) + 1
  complete = {key for key, n in counts.items() if n >= num_samples}
  kept = [line for line, record in unique if prompt_key(record) in complete]
  if len(kept) != total or not data.endswith(b"\n") and data:
    storage.write_atomic(path, b"".join(kept))
  return complete


def prompt_seed_id(record: dict) -> int:
  """A stable 32-bit id of a prompt's (qid, language): with --seed, what its samples are drawn from."""
  return zlib.crc32(json.dumps(prompt_key(record)).encode())


@dataclasses.dataclass(frozen=True)
class PredictionsSummary:
  """What a predictions file holds, counted from its records (a resumed run's earlier ones too)."""

  prompts: int
  samples: int
  truncated_prompts: int  # prompts whose records say prompt_truncated
  truncated_samples: int
  finish_reasons: dict[str, int]  # stop / eos / length: samples of each

  def to_json(self) -> dict:
    return dataclasses.asdict(self)


def summarize(output: str) -> PredictionsSummary:
  prompts, truncated, reasons, samples, truncated_samples = set(), set(), collections.Counter(), 0, 0
  for line in storage.jsonl_lines(storage.read_bytes(output)) if storage.exists(output) else []:
    try:
      record = parse_line(line, output)
      key = prompt_key(record)
    except (ValueError, KeyError, TypeError):
      continue  # what completed_prompts drops on a resume
    prompts.add(key)
    samples += 1
    reasons[str(record.get("finish_reason"))] += 1
    if record.get("prompt_truncated"):
      truncated.add(key)
      truncated_samples += 1
  return PredictionsSummary(len(prompts), samples, len(truncated), truncated_samples, dict(sorted(reasons.items())))


def report(output: str, summary: PredictionsSummary, encoded: EncodedPrompts, truncate_prompts: bool) -> None:
  """The counts that change what a score means, printed last and written to OUTPUT.summary.json."""
  path = f"{output}.summary.json"
  storage.write_atomic(path, json.dumps({
      "predictions": output, **summary.to_json(), "context": encoded.context,
      "max_decode_length": encoded.max_decode_length, "prompt_room": encoded.room,
      "truncate_prompts": truncate_prompts}, indent=1) + "\n")
  reasons = ", ".join(f"{reason} {count}" for reason, count in summary.finish_reasons.items()) or "none"
  print(f"{output}: {summary.prompts} prompts, {summary.samples} samples (finish_reason: {reasons})", flush=True)
  if summary.truncated_prompts:
    how = (f"to their last {encoded.room} tokens" if not encoded.infilling else
           f"to {encoded.room} tokens (an infilling prompt around its middle, another to its last tokens)")
    print(f"warning: {summary.truncated_prompts} of {summary.prompts} prompts were truncated {how} "
          f"(--truncate_prompts; {summary.truncated_samples} samples, marked "
          "prompt_truncated): their scores are not those of the whole prompts", flush=True)
  length = summary.finish_reasons.get("length", 0)
  if length:
    print(f"warning: {length} of {summary.samples} completions were cut at --max_decode_length "
          f"{encoded.max_decode_length} (finish_reason length)", flush=True)
  print(f"summary: {path}", flush=True)


def show_samples(predictions: str, prompts: dict, per_prompt: int) -> None:
  shown: dict = {}
  for _, record in read_jsonl(predictions):
    key = prompt_key(record)
    if key in prompts and shown.get(key, 0) < per_prompt:
      shown[key] = shown.get(key, 0) + 1
      print(f"\n=== {key[0]} ({key[1]}) sample {record['sample_id']} ({record['finish_reason']}, "
            f"{record['num_tokens']} tokens)")
      print(prompts[key] + record["code"])
