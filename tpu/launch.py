"""Start `python train.py TRAIN_ARGS` on every worker of a TPU VM, detached from ssh.

Everything after `--` is passed to train.py unchanged (quote gin strings for your local shell as usual:
--gin.MODEL_DIR="'gs://BUCKET/runs/NAME'"). The identical command runs on ALL workers
(`gcloud compute tpus tpu-vm ssh --worker=all`): a multi-host pod slice hangs at backend start unless
every host runs the same program, and train.py calls jax.distributed.initialize() itself.

Each worker runs it under setsid + nohup from ~/codelm (its venv activated), so closing ssh or losing
the connection does not stop training; stdout and stderr go to a log per worker,
~/codelm_logs/RUN_NAME-workerN.log, with ~/codelm_logs/latest.log pointing at it and the process id in
~/codelm_logs/train.pid. A worker whose previous train.py is still running refuses to start a second
one (the TPU is in use) unless --restart is given, which stops the old process group first.
MODEL_DIR must be storage every worker sees (gs://...). Watch with tpu/logs.py.
Before anything reaches the pod, the pre-flight (tpu/preflight.py) compiles the run's training step
for the slice on this machine and refuses a configuration that does not fit in HBM; the slice's
accelerator type comes from --accelerator_type or from `gcloud ... describe`. --skip_preflight skips
it (saying so); it needs libtpu here (`make tpu_compiler`). `--program sample.py`
runs sample.py the same way (--prompts must exist on every worker; worker 0 writes --output on its disk).

Example (v4-64):
  python tpu/launch.py --name codelm-v4 --zone us-central2-b -- \\
    --gin_file=gin_configs/runs/pretrain.gin --gin_file=gin_configs/models/1b.gin \\
    --gin_file=gin_configs/mixtures/unimax_2.gin --gin.MODEL_DIR="'gs://BUCKET/runs/1b_unimax_2'"
"""

from __future__ import annotations

import re
import shlex
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
  sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tpu import common

WORKER_NUMBER_URL = ("http://metadata.google.internal/computeMetadata/v1/instance/attributes/"
                     "agent-worker-number")


def build_parser():
  p = common.parser(__doc__)
  common.add_tpu_flags(p)
  p.add_argument("--run_name", default=None,
                 help="names the log files (default: the local time, YYYYmmdd-HHMMSS, the same on all workers)")
  p.add_argument("--env", action="append", default=[], type=common.env_assignment, metavar="NAME=VALUE",
                 help="environment variable for train.py on every worker (repeatable)")
  p.add_argument("--restart", action="store_true",
                 help="stop a train.py still running from an earlier launch before starting")
  p.add_argument("--program", default="train.py", choices=("train.py", "sample.py"),
                 help="the entry point every worker runs with the args after `--` (default: train.py); "
                      "sample.py splits its rows over the whole pod and worker 0 writes the predictions")
  p.add_argument("--accelerator_type", type=common.accelerator_type, default=None,
                 help="the slice (e.g. v4-64) the pre-flight compiles for (default: asked from gcloud)")
  p.add_argument("--skip_preflight", action="store_true",
                 help="launch without compiling the step for the slice first (tpu/preflight.py)")
  p.usage = "%(prog)s --name NAME --zone ZONE [options] -- TRAIN_ARGS..."
  return p


def remote_command(train_args: list[str], run_name: str, env: list[str], restart: bool,
                   program: str = "train.py") -> str:
  """The shell line every worker runs: start `program` (train.py) detached, log to ~/codelm_logs/."""
  logs, pid = common.LOG_DIR, common.PID_FILE
  old = f'"$(cat {pid})"'
  if restart:
    running = (f"kill -TERM -- -{old} 2>/dev/null || true; "
               f"for i in $(seq 60); do kill -0 {old} 2>/dev/null || break; sleep 1; done; "
               f"kill -KILL -- -{old} 2>/dev/null || true")
  else:
    running = (f'echo "worker $W: an earlier run is still running (pid $(cat {pid})); '
               f'rerun with --restart to stop it" >&2; exit 1')
  exports = "".join(f"export {k}={shlex.quote(v)}; " for k, _, v in (e.partition("=") for e in env))
  return (
      f"set -e; mkdir -p {logs}; cd {common.REMOTE_DIR}; "
      f'W=$(curl -sf -H "Metadata-Flavor: Google" {WORKER_NUMBER_URL} || hostname); '
      f"if [ -f {pid} ] && kill -0 {old} 2>/dev/null; then {running}; fi; "
      f"LOG={logs}/{run_name}-worker$W.log; ln -sfn \"$LOG\" {common.LATEST_LOG}; "
      f". .venv/bin/activate; {exports}"
      f"setsid nohup python {program} {shlex.join(train_args)} > \"$LOG\" 2>&1 < /dev/null & "
      f"echo $! > {pid}; echo \"worker $W: started {program}, pid $!, log $LOG\""
  )


def preflight_command(train_args: list[str], accelerator: str | None, name: str, zone: str,
                      project: str | None) -> common.Command:
  """tpu/preflight.py on this machine for the slice: its exit status 1 (does not fit) stops the launch."""
  script = [sys.executable, str(Path(__file__).resolve().parent / "preflight.py")]
  if accelerator:
    return script + [f"--topology={accelerator}"] + train_args
  describe = ["gcloud", "compute", "tpus", "tpu-vm", "describe", name, f"--zone={zone}",
              *([f"--project={project}"] if project else []), "--format=value(acceleratorType)"]
  return (f'{shlex.join(script)} --topology="$({shlex.join(describe)})" {shlex.join(train_args)}')


def main(argv=None) -> int:
  p = build_parser()
  args, train_args = common.parse_with_train_args(p, argv)
  run_name = args.run_name or time.strftime("%Y%m%d-%H%M%S")
  if not re.match(r"^[A-Za-z0-9_.-]+$", run_name):
    p.error(f"argument --run_name: {run_name!r} may only contain letters, digits, '_', '.', '-'")
  common.warn_local_model_dir(train_args)
  remote = remote_command(train_args, run_name, args.env, args.restart, args.program)
  commands = [common.gcloud_ssh(args.name, args.zone, args.project, remote)]
  if args.program == "train.py":
    if args.skip_preflight:
      print("warning: --skip_preflight: the training step is not compiled for the slice before launch",
            file=sys.stderr)
    else:
      commands.insert(0, preflight_command(train_args, args.accelerator_type, args.name, args.zone, args.project))
  return common.run_commands(commands, args.dry_run)


if __name__ == "__main__":
  sys.exit(main())
