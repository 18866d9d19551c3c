"""Install codelm on every worker of a TPU VM: a checkout in ~/codelm, a Python 3.11 venv in
~/codelm/.venv, and `pip install -e '.[tpu]'`.

The code comes either from a git repository (--repo URL [--ref REF], cloned on each worker; rerunning
fetches and checks out REF again) or from a local directory (--source_dir DIR: staged locally without
.venv/.git/caches, then copied to every worker with `gcloud compute tpus tpu-vm scp --recurse
--worker=all`). Python 3.11 comes from apt when the image lacks it (Ubuntu 22.04 TPU images ship 3.10).
Every step runs on all workers (--worker=all): a pod slice runs the same code everywhere.

Examples:
  python tpu/install.py --name codelm-v4 --zone us-central2-b --repo https://github.com/ORG/codelm.git --ref main
  python tpu/install.py --name codelm-v4 --zone us-central2-b --source_dir . --check
"""

from __future__ import annotations

import os
import shlex
import sys
import tempfile
from pathlib import Path

if __package__ in (None, ""):
  sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tpu import common

# Never copied with --source_dir (the local venv alone is gigabytes, and built for another machine).
EXCLUDES = (".venv", ".git", "__pycache__", "*.egg-info", ".pytest_cache", ".hypothesis", "demo_out", ".whl")


def build_parser():
  p = common.parser(__doc__)
  common.add_tpu_flags(p)
  src = p.add_mutually_exclusive_group(required=True)
  src.add_argument("--repo", help="git URL to clone on every worker")
  src.add_argument("--source_dir", help="local codelm checkout to copy to every worker")
  p.add_argument("--ref", default=None,
                 help="with --repo: branch, tag or commit to check out (default: the remote's default branch)")
  p.add_argument("--python", default="python3.11", help="interpreter for the venv (default: python3.11)")
  p.add_argument("--extra", default="tpu", choices=["tpu"],
                 help="pip extra to install (default: tpu, i.e. jax[tpu])")
  p.add_argument("--stage_dir", default=None,
                 help="with --source_dir: local staging directory (default: $TMPDIR/codelm_stage_NAME)")
  p.add_argument("--check", action="store_true",
                 help="finally run `import jax; print(jax.device_count())` on all workers "
                      "(v4-64 prints 32 on every worker)")
  return p


def _python_setup(python: str) -> str:
  apt = "sudo DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600"
  return (f"command -v {python} >/dev/null || {{ {apt} update -q && "
          f"{apt} install -y -q {python} {python}-venv; }}")


def _venv_install(python: str, extra: str) -> str:
  return (f"cd {common.REMOTE_DIR}; {python} -m venv .venv; .venv/bin/pip install -q -U pip; "
          f'.venv/bin/pip install -e ".[{extra}]"')


def main(argv=None) -> int:
  p = build_parser()
  args = p.parse_args(argv)
  if not args.python.replace(".", "").replace("-", "").isalnum():
    p.error(f"argument --python: {args.python!r} is not an interpreter name like python3.11")
  cmds: list[common.Command] = []
  steps = ["set -e", _python_setup(args.python)]
  if args.repo is not None:
    if not args.repo or args.repo.startswith("-"):
      p.error(f"argument --repo: {args.repo!r} is not a git URL")
    if args.ref is not None and (not args.ref or args.ref.startswith("-")):
      p.error(f"argument --ref: {args.ref!r} is not a branch, tag or commit")
    d = common.REMOTE_DIR
    steps.append(f"if [ -d {d}/.git ]; then git -C {d} fetch -q origin; "
                 f"else git clone -q {shlex.quote(args.repo)} {d}; fi")
    if args.ref:
      steps.append(f"git -C {d} fetch -q origin {shlex.quote(args.ref)}; "
                   f"git -C {d} checkout -q --detach FETCH_HEAD")
    else:
      steps.append(f"git -C {d} checkout -q --detach origin/HEAD")
  else:
    if args.ref is not None:
      p.error("argument --ref: only with --repo (--source_dir copies the directory as it is)")
    src = Path(args.source_dir).expanduser().resolve()
    if not (src / "pyproject.toml").is_file():
      p.error(f"argument --source_dir: {args.source_dir!r} is not a codelm checkout (no pyproject.toml)")
    stage = Path(args.stage_dir or os.path.join(tempfile.gettempdir(), f"codelm_stage_{args.name}"))
    excludes = " ".join(f"--exclude={shlex.quote(e)}" for e in EXCLUDES)
    s = shlex.quote(str(stage))
    cmds.append(f"rm -rf {s} && mkdir -p {s}/codelm && "
                f"tar -C {shlex.quote(str(src))} {excludes} -cf - . | tar -C {s}/codelm -xf -")
    cmds.append(common.gcloud_scp_recurse(args.name, args.zone, args.project, f"{stage}/codelm", "~/"))
  steps.append(_venv_install(args.python, args.extra))
  cmds.append(common.gcloud_ssh(args.name, args.zone, args.project, "; ".join(steps)))
  if args.check:
    check = f"cd {common.REMOTE_DIR} && .venv/bin/python -c \"import jax; print(jax.device_count(), jax.local_device_count())\""
    cmds.append(common.gcloud_ssh(args.name, args.zone, args.project, check))
  return common.run_commands(cmds, args.dry_run)


if __name__ == "__main__":
  sys.exit(main())
