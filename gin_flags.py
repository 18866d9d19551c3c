"""T5X's command-line convention for the entry points: --gin_file=F (repeatable) and --gin.NAME=VALUE.

Shared by train.py and sample.py; library code never sees gin.
"""

from __future__ import annotations

import argparse
import os
from typing import Sequence

import gin


def parse_flags(argv: Sequence[str], description: str | None = None,
                parser: argparse.ArgumentParser | None = None) -> tuple[list[str], list[str]]:
  """--gin_file=F (repeatable) and --gin.NAME=VALUE bindings (T5X's flags); anything else is an error.

  `parser` may bring an entry point's own flags; they are parsed into `parser.parsed`."""
  parser = parser or argparse.ArgumentParser(description=description,
                                             formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--gin_file", action="append", default=[], help="gin file (repeatable; later wins)")
  parser.add_argument("--gin_search_path", action="append", default=[], help="folders to resolve gin includes")
  args, rest = parser.parse_known_args(argv)
  parser.parsed = args
  bindings = []
  for flag in rest:
    if not flag.startswith("--gin.") or "=" not in flag:
      parser.error(f"unrecognised flag {flag!r}: use --gin_file=F or --gin.NAME=VALUE")
    name, value = flag[len("--gin."):].split("=", 1)
    bindings.append(f"{name} = {value}")
  for path in [os.path.dirname(os.path.abspath(__file__))] + args.gin_search_path:
    gin.add_config_file_search_path(path)
  return args.gin_file, bindings


def parse_gin(gin_files: Sequence[str], bindings: Sequence[str]) -> None:
  """Files, then flag bindings. gin itself rejects unknown configurables and parameters; a flag that
  sets a MACRO no file defines (a typo such as TRAIN_STEP) is rejected here, naming it."""
  gin.parse_config_files_and_bindings(gin_files, [], finalize_config=False)
  for binding in bindings:
    name = binding.split("=", 1)[0].strip()
    if "." not in name and "/" not in name:
      try:
        gin.query_parameter(f"%{name}")
      except ValueError:
        raise ValueError(f"--gin.{name}: no gin file defines the macro {name}") from None
  gin.parse_config_files_and_bindings([], bindings, finalize_config=True)


