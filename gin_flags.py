"""T5X's command-line convention for the entry points: --gin_file=F (repeatable) and --gin.NAME=VALUE,
and the checks the entry points run on the values they get, before any work.

Shared by train.py and sample.py; library code never sees gin.
"""

from __future__ import annotations

import argparse
import ast
import math
import os
import tempfile
from typing import Any, Sequence

import gin

import storage


class UsageError(ValueError):
  """A flag, gin value or input file the user gave is wrong: the entry point prints the message and
  exits with status 2, without a traceback (a traceback means a bug)."""


def check_int(name: str, value: Any, minimum: int | None = None) -> int:
  """`value` is an integer (not a bool, not 2.5) of at least `minimum`; the error names `name`."""
  if isinstance(value, bool) or not isinstance(value, int):
    raise UsageError(f"{name} must be an integer, got {value!r}")
  if minimum is not None and value < minimum:
    raise UsageError(f"{name} must be at least {minimum}, got {value}")
  return value


def check_float(name: str, value: Any, minimum: float | None = None, maximum: float | None = None,
                above: float | None = None) -> float:
  """`value` is a number (ints accepted) in [minimum, maximum] and > `above`; NaN is refused."""
  if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
    raise UsageError(f"{name} must be a number, got {value!r}")
  if minimum is not None and value < minimum:
    raise UsageError(f"{name} must be at least {minimum}, got {value}")
  if maximum is not None and value > maximum:
    raise UsageError(f"{name} must be at most {maximum}, got {value}")
  if above is not None and value <= above:
    raise UsageError(f"{name} must be greater than {above}, got {value}")
  return float(value)


def check_mesh_shape(name: str, shape: Any) -> None:
  """(data, fsdp, tensor): three integers, each positive or -1 (the rest of the devices)."""
  if not isinstance(shape, (tuple, list)) or len(shape) != 3:
    raise UsageError(f"{name} must be (data, fsdp, tensor), got {shape!r}")
  for axis, size in zip(("data", "fsdp", "tensor"), shape):
    if check_int(f"{name} {axis}", size, -1) == 0:
      raise UsageError(f"{name} {axis} must be positive or -1 (the rest), got 0")


def check_writable_file(name: str, path: str) -> None:
  """A file `path` can be created or appended to: its folder exists and is writable, and it is not a
  folder itself. Nothing is created. URLs are left to the storage layer."""
  if storage.is_url(path):
    return
  folder = os.path.dirname(os.path.abspath(path))
  if os.path.isdir(path):
    raise UsageError(f"{name}: {path} is a folder, not a file")
  if not os.path.isdir(folder):
    raise UsageError(f"{name}: the folder {folder} does not exist")
  if not os.access(folder, os.W_OK | os.X_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)) \
      or not _can_create_in(folder):
    raise UsageError(f"{name}: {path} is not writable")


def _can_create_in(folder: str) -> bool:
  """Whether a file can be made in `folder`, tried (and removed at once): os.access says yes to root
  everywhere, also in /sys or on a read-only mount."""
  try:
    with tempfile.TemporaryFile(dir=folder):
      return True
  except OSError:
    return False


def check_writable_dir(name: str, path: str) -> None:
  """A folder that exists and is writable, or can be created (its nearest existing parent is)."""
  if storage.is_url(path):
    return
  path = os.path.abspath(path)
  if os.path.exists(path) and not os.path.isdir(path):
    raise UsageError(f"{name}: {path} exists and is not a folder")
  existing = path
  while not os.path.exists(existing):
    existing = os.path.dirname(existing)
  if not os.path.isdir(existing) or not os.access(existing, os.W_OK | os.X_OK) or not _can_create_in(existing):
    raise UsageError(f"{name}: cannot write under {existing}")


def message(error: BaseException) -> str:
  """An error's message without the line gin adds to errors raised inside a configurable."""
  return str(error).split("\n  In call to configurable")[0]


# Where gin files are found from any working directory: the repository root (so the docs'
# `--gin_file=gin_configs/runs/pretrain.gin` and `include 'gin_configs/...'` work anywhere) and
# gin_configs/ itself (`--gin_file=runs/pretrain.gin`, as T5X's search paths allow).
GIN_SEARCH_PATHS = [os.path.dirname(os.path.abspath(__file__)),
                    os.path.join(os.path.dirname(os.path.abspath(__file__)), "gin_configs")]


def parse_flags(argv: Sequence[str], description: str | None = None,
                parser: argparse.ArgumentParser | None = None) -> tuple[list[str], list[str]]:
  """--gin_file=F (repeatable) and --gin.NAME=VALUE bindings (T5X's flags); anything else is an error.

  `parser` may bring an entry point's own flags; they are parsed into `parser.parsed`."""
  parser = parser or argparse.ArgumentParser(description=description,
                                             formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--gin_file", action="append", default=[], help="gin file (repeatable; later wins)")
  parser.add_argument("--gin_search_paths", "--gin_search_path", dest="gin_search_path", action="append",
                      default=[], help="comma-separated folders where --gin_file and include paths are looked "
                      f"up, after the working directory (default: {', '.join(GIN_SEARCH_PATHS)})")
  args, rest = parser.parse_known_args(argv)
  parser.parsed = args
  bindings = []
  for flag in rest:
    if not flag.startswith("--gin.") or "=" not in flag:
      parser.error(f"unrecognised flag {flag!r}: use --gin_file=F or --gin.NAME=VALUE")
    name, value = flag[len("--gin."):].split("=", 1)
    bindings.append(f"{name} = {value}")
  for path in GIN_SEARCH_PATHS + [p for paths in args.gin_search_path for p in paths.split(",") if p]:
    gin.add_config_file_search_path(path)
  return args.gin_file, bindings


def parse_gin(gin_files: Sequence[str], bindings: Sequence[str]) -> None:
  """Files, then flag bindings. gin itself rejects unknown configurables and parameters; a flag that
  sets a MACRO no file defines (a typo such as TRAIN_STEP) is rejected here, naming it."""
  try:
    gin.parse_config_files_and_bindings(gin_files, [], finalize_config=False)
  except (ValueError, OSError) as error:  # gin's unknown configurable / parameter, a missing file
    raise UsageError(f"{', '.join(gin_files)}: {error}") from None
  for binding in bindings:
    name = binding.split("=", 1)[0].strip()
    if "." not in name and "/" not in name:
      try:
        gin.query_parameter(f"%{name}")
      except ValueError:
        raise UsageError(f"--gin.{name}: no gin file defines the macro {name}") from None
  try:
    gin.parse_config_files_and_bindings([], bindings, finalize_config=True)
  except (ValueError, SyntaxError) as error:
    unquoted = next((b for b in bindings if _unquoted_string(b.split("=", 1)[1])), None)
    if unquoted:  # gin's own message here is "malformed node or string: <ast.Name object at 0x...>"
      name, value = (part.strip() for part in unquoted.split("=", 1))
      raise UsageError(f"--gin.{name}={value}: a gin value is a Python literal, and a string needs quotes: "
                       f"--gin.{name}=\"'{value}'\"") from None
    raise UsageError(f"--gin. bindings: {error}") from None


_BARE_WORDS = {"True", "False", "None"}


def _unquoted_string(value: str) -> bool:
  """Whether a binding's value is text gin cannot read as a literal or a reference: a path, a URL, a
  name (`run`, `/tmp/x`, `gs://b/x`)."""
  value = value.strip()
  if not value or value[0] in "@%'\"([{" or value in _BARE_WORDS:
    return False
  try:
    ast.literal_eval(value)
  except (ValueError, SyntaxError):
    return True
  return False


