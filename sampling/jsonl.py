"""Reading the JSONL files sample.py and the evaluation tools exchange (prompts, predictions)."""

from __future__ import annotations

import json
from collections.abc import Iterator


def read_jsonl(path: str) -> Iterator[tuple[int, dict]]:
  """(line number, record) for each non-blank line; a malformed line is an error naming it."""
  with open(path, encoding="utf-8") as f:
    for number, line in enumerate(f, 1):
      if not line.strip():
        continue
      try:
        record = json.loads(line)
      except json.JSONDecodeError as error:
        raise ValueError(f"{path}:{number}: not valid JSON ({error.msg})") from None
      if not isinstance(record, dict):
        raise ValueError(f"{path}:{number}: expected a JSON object, got {type(record).__name__}")
      yield number, record
