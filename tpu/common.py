"""Shared pieces of the launch scripts: flag validators, gcloud command builders, the dry-run runner.

Every script builds a list of commands and hands it to `run_commands`: with `--dry_run` each command
is printed on its own line, in order, exactly as it would run (argv lists are printed with
`shlex.join`, so a printed line pasted into a POSIX shell runs the same argv); without it each one
runs in turn with its output streamed, stopping at the first failure.
"""

from __future__ import annotations

import argparse
import re
import shlex
import subprocess
import sys
from typing import Sequence, Union

# An argv list runs without a shell; a str is a shell line (pipes, `&&`) and runs under `bash -c`.
Command = Union[list[str], str]

REMOTE_DIR = "~/codelm"  # the checkout on every TPU worker (relative to the ssh user's home)
LOG_DIR = "~/codelm_logs"  # per-worker training logs
PID_FILE = f"{LOG_DIR}/train.pid"
LATEST_LOG = f"{LOG_DIR}/latest.log"

# Default runtime (software) version per TPU generation, from Cloud TPU's "TPU software versions".
DEFAULT_VERSIONS = {
    "v2": "tpu-ubuntu2204-base",
    "v3": "tpu-ubuntu2204-base",
    "v4": "tpu-ubuntu2204-base",
    "v5p": "v2-alpha-tpuv5",
    "v5litepod": "v2-alpha-tpuv5-lite",
    "v6e": "v2-alpha-tpuv6e",
}
_ACCEL_RE = re.compile(r"^(v2|v3|v4|v5p|v5litepod|v6e)-([1-9][0-9]*)$")
_NAME_RE = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")
_ZONE_RE = re.compile(r"^[a-z]+-[a-z]+[0-9]+-[a-z]$")
_PROJECT_RE = re.compile(r"^[a-z][-a-z0-9.:]{4,61}[a-z0-9]$")


# ---------------------------------------------------------------------------------------------
# Validators (argparse `type=` functions: argparse names the flag in the error message).


def accelerator_type(value: str) -> str:
  m = _ACCEL_RE.match(value)
  if not m:
    raise argparse.ArgumentTypeError(
        f"{value!r} is not a TPU accelerator type; expected GENERATION-SIZE with GENERATION one of "
        f"{', '.join(DEFAULT_VERSIONS)} and SIZE a positive integer, e.g. v4-64, v5p-128, v5litepod-16"
    )
  size = int(m.group(2))
  if size & (size - 1):
    raise argparse.ArgumentTypeError(f"{value!r}: the size {size} is not a power of two (e.g. v4-64)")
  return value


def tpu_name(value: str) -> str:
  if not _NAME_RE.match(value):
    raise argparse.ArgumentTypeError(
        f"{value!r} is not a valid TPU name: lowercase letters, digits and '-', starting with a letter, "
        "not ending with '-', at most 63 characters"
    )
  return value


def zone(value: str) -> str:
  if not _ZONE_RE.match(value):
    raise argparse.ArgumentTypeError(f"{value!r} is not a zone like us-central2-b")
  return value


def project(value: str) -> str:
  if not _PROJECT_RE.match(value):
    raise argparse.ArgumentTypeError(f"{value!r} is not a Google Cloud project id")
  return value


def worker(value: str) -> str:
  if value == "all" or (value.isdigit() and str(int(value)) == value):
    return value
  raise argparse.ArgumentTypeError(f"{value!r} is not a worker index (0, 1, ...) or 'all'")


def positive_int(value: str) -> int:
  try:
    n = int(value)
  except ValueError:
    n = 0
  if n < 1:
    raise argparse.ArgumentTypeError(f"{value!r} is not a positive integer")
  return n


def non_negative_int(value: str) -> int:
  try:
    n = int(value)
  except ValueError:
    n = -1
  if n < 0:
    raise argparse.ArgumentTypeError(f"{value!r} is not a non-negative integer")
  return n


def host_port(value: str) -> str:
  host, sep, port = value.rpartition(":")
  if not sep or not host or not port.isdigit() or not 1 <= int(port) <= 65535:
    raise argparse.ArgumentTypeError(f"{value!r} is not HOST:PORT (e.g. 10.0.0.1:1234)")
  return value


def env_assignment(value: str) -> str:
  name, sep, _ = value.partition("=")
  if not sep or not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", name):
    raise argparse.ArgumentTypeError(f"{value!r} is not NAME=VALUE")
  return value


# ---------------------------------------------------------------------------------------------
# Parser helpers.


def parser(description: str, epilog: str | None = None) -> argparse.ArgumentParser:
  return argparse.ArgumentParser(
      description=description, epilog=epilog, formatter_class=argparse.RawDescriptionHelpFormatter
  )


def add_tpu_flags(p: argparse.ArgumentParser) -> None:
  """--name, --zone, --project, --dry_run: the flags every TPU script takes."""
  p.add_argument("--name", required=True, type=tpu_name, help="TPU VM (pod slice) name")
  p.add_argument("--zone", required=True, type=zone, help="zone, e.g. us-central2-b (v4)")
  p.add_argument("--project", type=project, default=None,
                 help="Google Cloud project (default: gcloud's configured project)")
  add_dry_run(p)


def add_dry_run(p: argparse.ArgumentParser) -> None:
  p.add_argument("--dry_run", action="store_true",
                 help="print the commands, one per line, in order, instead of running them")


def split_train_args(argv: Sequence[str] | None) -> tuple[list[str], list[str] | None]:
  """Splits argv at the first `--`: (script flags, train.py args), train args None when no `--`."""
  argv = list(sys.argv[1:] if argv is None else argv)
  if "--" not in argv:
    return argv, None
  i = argv.index("--")
  return argv[:i], argv[i + 1:]


def parse_with_train_args(p: argparse.ArgumentParser, argv: Sequence[str] | None):
  """Parses the script's flags before `--`; returns (args, train.py args). Errors when `--` or the
    train args are missing, pointing at `--` when train.py flags were given without it."""
  flags, train_args = split_train_args(argv)
  args, unknown = p.parse_known_args(flags)
  if unknown:
    hint = " (train.py arguments go after `--`)" if train_args is None else ""
    p.error(f"unrecognized arguments: {' '.join(unknown)}{hint}")
  return args, require_train_args(p, train_args)


def require_train_args(p: argparse.ArgumentParser, train_args: list[str] | None) -> list[str]:
  if not train_args:
    p.error("missing train.py arguments: put them after `--`, e.g. "
            "-- --gin_file=gin_configs/runs/pretrain.gin --gin.MODEL_DIR=\"'gs://BUCKET/runs/NAME'\"")
  return train_args


def warn_local_model_dir(train_args: Sequence[str]) -> None:
  """Multi-host checkpoints need storage every host sees; warn when MODEL_DIR is not on GCS."""
  for a in train_args:
    if a.startswith("--gin.MODEL_DIR=") and "gs://" not in a:
      print(f"warning: {a} is not a gs:// path; on a multi-host pod every worker needs the same "
            "checkpoint directory", file=sys.stderr)


# ---------------------------------------------------------------------------------------------
# gcloud command builders.


def _gcloud_common(zone_: str, project_: str | None) -> list[str]:
  return [f"--zone={zone_}"] + ([f"--project={project_}"] if project_ else [])


def gcloud_create(name: str, zone_: str, accel: str, version: str, project_: str | None,
                  spot: bool) -> list[str]:
  cmd = ["gcloud", "compute", "tpus", "tpu-vm", "create", name, *_gcloud_common(zone_, project_),
         f"--accelerator-type={accel}", f"--version={version}"]
  return cmd + (["--spot"] if spot else [])


def gcloud_delete(name: str, zone_: str, project_: str | None, yes: bool) -> list[str]:
  cmd = ["gcloud", "compute", "tpus", "tpu-vm", "delete", name, *_gcloud_common(zone_, project_)]
  return cmd + (["--quiet"] if yes else [])


def gcloud_ssh(name: str, zone_: str, project_: str | None, remote: str, worker_: str = "all") -> list[str]:
  """`gcloud compute tpus tpu-vm ssh`: runs the shell line `remote` on `worker_` (default: all)."""
  return ["gcloud", "compute", "tpus", "tpu-vm", "ssh", name, *_gcloud_common(zone_, project_),
          f"--worker={worker_}", "--command", remote]


def gcloud_scp_recurse(name: str, zone_: str, project_: str | None, local: str, remote: str,
                       worker_: str = "all") -> list[str]:
  return ["gcloud", "compute", "tpus", "tpu-vm", "scp", "--recurse", local, f"{name}:{remote}",
          *_gcloud_common(zone_, project_), f"--worker={worker_}"]


# ---------------------------------------------------------------------------------------------
# The runner.


def format_command(cmd: Command) -> str:
  return cmd if isinstance(cmd, str) else shlex.join(cmd)


def run_commands(cmds: Sequence[Command], dry_run: bool, env: dict[str, str] | None = None) -> int:
  """Prints (dry run) or runs the commands in order; returns the first non-zero exit status, else 0."""
  if dry_run:
    for c in cmds:
      print(format_command(c))
    return 0
  for c in cmds:
    print(f"+ {format_command(c)}", file=sys.stderr, flush=True)
    try:
      if isinstance(c, str):
        rc = subprocess.run(["bash", "-c", c], env=env).returncode
      else:
        rc = subprocess.run(c, env=env).returncode
    except FileNotFoundError as e:
      print(f"error: {e}", file=sys.stderr)
      return 127
    except KeyboardInterrupt:
      return 130
    if rc != 0:
      print(f"error: command exited with status {rc}: {format_command(c)}", file=sys.stderr)
      return rc
  return 0
