"""How often the exported Hugging Face tokenizer (export/tokenizer.py) gives other ids than codelm's
SentencePiece vocabulary, on real source files.

  python bench/hf_tokenizer_agreement.py --vocab CORPUS_DIR/spm.model --files 'GLOB' ['GLOB' ...] \\
      [--per_glob 200] [--max_chars 30000] [--output bench/results/hf_tokenizer_agreement.json]

Encodes each file (its first --max_chars characters) both ways and prints the files whose ids are
equal, the share of ids that differ (aligned with difflib, so one changed split counts its pieces, not
the rest of the file) and how many differing files have a whitespace run longer than the listed pieces
(12 spaces, 4 tabs), where the split among equally scored pieces is SentencePiece's float rounding.
"""

from __future__ import annotations

import argparse
import difflib
import glob
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import sentencepiece as spm  # noqa: E402

import storage  # noqa: E402
from export.tokenizer import build  # noqa: E402

LONG_RUN = re.compile(r" {13,}|\t{5,}")


def agreement(sp_model: bytes, paths: list[str], max_chars: int) -> dict:
  tokenizer, _ = build(sp_model, 2048)
  processor = spm.SentencePieceProcessor(model_proto=sp_model)
  files = equal = with_long_runs = differ_without_long_run = ids = differing = 0
  for path in paths:
    try:
      text = open(path, encoding="utf-8").read()[:max_chars]
    except (UnicodeDecodeError, OSError):
      continue
    files += 1
    ours = processor.encode(text)
    theirs = tokenizer.encode(text, add_special_tokens=False).ids
    ids += len(ours)
    with_long_runs += bool(LONG_RUN.search(text))
    if ours == theirs:
      equal += 1
      continue
    differ_without_long_run += not LONG_RUN.search(text)
    opcodes = difflib.SequenceMatcher(None, ours, theirs, autojunk=False).get_opcodes()
    differing += sum(max(i2 - i1, j2 - j1) for op, i1, i2, j1, j2 in opcodes if op != "equal")
  return {"files": files, "files_equal": equal, "files_with_long_runs": with_long_runs,
          "files_differing_without_a_long_run": differ_without_long_run, "ids": ids, "ids_differing": differing,
          "ids_differing_percent": 100 * differing / max(ids, 1)}


def main() -> int:
  p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  p.add_argument("--vocab", required=True, help="a codelm SentencePiece model (CORPUS_DIR/spm.model)")
  p.add_argument("--files", nargs="+", required=True, help="glob patterns of source files ('**' recurses)")
  p.add_argument("--per_glob", type=int, default=200, help="files per pattern, in sorted order")
  p.add_argument("--max_chars", type=int, default=30000)
  p.add_argument("--output", default=None, help="also write the figures to this JSON file")
  args = p.parse_args()
  paths = [path for pattern in args.files
           for path in sorted(f for f in glob.glob(pattern, recursive=True) if os.path.isfile(f))[:args.per_glob]]
  if not paths:
    p.error("--files: no file matches")
  figures = agreement(storage.read_bytes(args.vocab), paths, args.max_chars)
  print(f"{figures['files']} files: {figures['files_equal']} give codelm's ids exactly; "
        f"{figures['ids_differing']} of {figures['ids']} ids differ ({figures['ids_differing_percent']:.2f}%); "
        f"{figures['files_with_long_runs']} files have a whitespace run past the listed pieces; "
        f"{figures['files_differing_without_a_long_run']} differing files have none")
  if args.output:
    storage.write_atomic(args.output, json.dumps(dict(figures, patterns=args.files, vocab=args.vocab), indent=1))
  return 0


if __name__ == "__main__":
  sys.exit(main())
