"""Launch `python train.py TRAIN_ARGS` on several GPU nodes, one process per node driving all its GPUs.

train.py calls jax.distributed.initialize() when JAX_COORDINATOR_ADDRESS (HOST:PORT of process 0),
JAX_NUM_PROCESSES and JAX_PROCESS_ID are set. Everything after `--` goes to train.py unchanged, and
every node runs the same train.py command. Install on each node (or a shared filesystem) with
`pip install -e '.[gpu]'`.

SLURM (--slurm): writes an sbatch script (one task per node, --gpus-per-node GPUs each) that exports
JAX_COORDINATOR_ADDRESS=<first node of $SLURM_JOB_NODELIST>:PORT and JAX_NUM_PROCESSES=$SLURM_NTASKS,
then runs `srun python train.py ...` with JAX_PROCESS_ID=$SLURM_PROCID set per task, and submits it
with sbatch. With --dry_run it prints the same as shell commands that may be pasted as they are:
cat > SCRIPT <<'CODELM_SBATCH_EOF' ... CODELM_SBATCH_EOF, then sbatch SCRIPT.

  python tpu/gpu_launch.py --slurm --nodes 4 --gpus_per_node 8 --partition gpu --time 48:00:00 -- \\
    --gin_file=gin_configs/runs/pretrain.gin --gin_file=gin_configs/models/1b.gin \\
    --gin_file=gin_configs/mixtures/unimax_2.gin --gin.MODEL_DIR="'gs://BUCKET/runs/1b_unimax_2'"

With --gpu h100|h200|a100, the pre-flight (tpu/preflight.py) first compiles the run's training step
here for NODES x GPUS_PER_NODE such GPUs (no GPU needed: `make gpu_compiler`) and nothing is submitted
when it does not fit; --skip_preflight skips it, saying so.

Plain (no scheduler): run this once on every node, with --process_id 0 on the node whose address is
--coordinator and 1 .. N-1 on the others:

  python tpu/gpu_launch.py --coordinator 10.0.0.1:12345 --num_processes 2 --process_id 0 -- TRAIN_ARGS...
"""

from __future__ import annotations

import os
import re
import shlex
import sys
from pathlib import Path

if __package__ in (None, ""):
  sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tpu import common
from tpu.slices import GPUS

REPO_ROOT = Path(__file__).resolve().parent.parent
_PLAIN_FLAGS = ("coordinator", "num_processes", "process_id")
_SLURM_ONLY = ("nodes", "partition", "account", "time", "cpus_per_task", "script", "no_submit", "gpu",
               "skip_preflight")


def preflight_command(train_args: list[str], gpu: str, nodes: int, gpus_per_node: int) -> list[str]:
  """tpu/preflight.py on this machine for the job's GPUs: its exit status 1 (does not fit) stops the submit."""
  return [sys.executable, str(Path(__file__).resolve().parent / "preflight.py"),
          f"--topology={gpu}:{nodes}x{gpus_per_node}", *train_args]


def build_parser():
  p = common.parser(__doc__)
  p.usage = "%(prog)s (--slurm --nodes N | --coordinator HOST:PORT --num_processes N --process_id I) [options] -- TRAIN_ARGS..."
  common.add_dry_run(p)
  p.add_argument("--python", default="python", help="interpreter that runs train.py (default: python)")
  p.add_argument("--env", action="append", default=[], type=common.env_assignment, metavar="NAME=VALUE",
                 help="environment variable for train.py (repeatable)")
  s = p.add_argument_group("SLURM mode")
  s.add_argument("--slurm", action="store_true", help="write and submit an sbatch script")
  s.add_argument("--nodes", type=common.positive_int, help="number of nodes (one train.py process each)")
  s.add_argument("--gpus_per_node", type=common.positive_int, default=8, help="GPUs per node (default: 8)")
  s.add_argument("--gpu", choices=sorted(GPUS), default=None,
                 help="the nodes' GPU: the pre-flight compiles the training step for them before sbatch")
  s.add_argument("--skip_preflight", action="store_true", help="with --gpu: submit without the pre-flight")
  s.add_argument("--port", type=common.positive_int, default=12345,
                 help="coordinator port on the first node (default: 12345)")
  s.add_argument("--job_name", default="codelm", help="SLURM job name (default: codelm)")
  s.add_argument("--partition", help="SLURM partition")
  s.add_argument("--account", help="SLURM account")
  s.add_argument("--time", help="time limit, e.g. 48:00:00")
  s.add_argument("--cpus_per_task", type=common.positive_int, help="CPUs for each node's task")
  s.add_argument("--workdir", default=str(REPO_ROOT),
                 help="codelm checkout on the nodes (shared filesystem); the job runs there "
                      "(default: this checkout)")
  s.add_argument("--venv", default=None,
                 help="virtualenv activated before srun (default: WORKDIR/.venv; 'none' to skip)")
  s.add_argument("--script", default=None, help="where to write the sbatch script (default: JOB_NAME.sbatch)")
  s.add_argument("--no_submit", action="store_true", help="write the script but do not run sbatch")
  g = p.add_argument_group("plain mode (one node per invocation)")
  g.add_argument("--coordinator", type=common.host_port, help="HOST:PORT of process 0")
  g.add_argument("--num_processes", type=common.positive_int, help="number of processes (nodes)")
  g.add_argument("--process_id", type=common.non_negative_int, help="this node's process index, 0 .. N-1")
  return p


def sbatch_script(args, train_args: list[str]) -> str:
  lines = ["#!/bin/bash", f"#SBATCH --job-name={args.job_name}", f"#SBATCH --nodes={args.nodes}",
           "#SBATCH --ntasks-per-node=1", f"#SBATCH --gpus-per-node={args.gpus_per_node}"]
  if args.cpus_per_task:
    lines.append(f"#SBATCH --cpus-per-task={args.cpus_per_task}")
  for flag in ("partition", "account", "time"):
    if getattr(args, flag):
      lines.append(f"#SBATCH --{flag}={getattr(args, flag)}")
  lines += ["#SBATCH --exclusive", f"#SBATCH --chdir={args.workdir}", "#SBATCH --output=%x-%j.out", "",
            "set -euo pipefail"]
  venv = args.venv or f"{args.workdir}/.venv"
  if venv != "none":
    lines.append(f"source {shlex.quote(venv)}/bin/activate")
  lines += [f"export {k}={shlex.quote(v)}" for k, _, v in (e.partition("=") for e in args.env)]
  lines += [
      f'export JAX_COORDINATOR_ADDRESS="$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1):{args.port}"',
      'export JAX_NUM_PROCESSES="$SLURM_NTASKS"',
      'echo "coordinator $JAX_COORDINATOR_ADDRESS, $JAX_NUM_PROCESSES processes"',
    # JAX_PROCESS_ID differs per task, so it is set inside each srun task.
      "srun --kill-on-bad-exit=1 bash -c "
      + shlex.quote(f"export JAX_PROCESS_ID=$SLURM_PROCID; exec {shlex.quote(args.python)} train.py "
                    + shlex.join(train_args)),
  ]
  return "\n".join(lines) + "\n"


def main(argv=None) -> int:
  p = build_parser()
  args, train_args = common.parse_with_train_args(p, argv)
  if args.slurm:
    for f in _PLAIN_FLAGS:
      if getattr(args, f) is not None:
        p.error(f"argument --{f}: not used with --slurm (SLURM sets the coordinator and process ids)")
    if args.nodes is None:
      p.error("argument --nodes: required with --slurm")
    if not re.match(r"^[A-Za-z0-9_.-]+$", args.job_name):
      p.error(f"argument --job_name: {args.job_name!r} may only contain letters, digits, '_', '.', '-'")
    if not 1 <= args.port <= 65535:
      p.error(f"argument --port: {args.port} is not a port number")
    for flag in ("partition", "account", "time", "workdir"):
      v = getattr(args, flag)
      if v is not None and (not v or re.search(r"\s", v)):
        p.error(f"argument --{flag}: {v!r} must be non-empty without spaces")
    script = args.script or f"{args.job_name}.sbatch"
    text = sbatch_script(args, train_args)
    sbatch = ["sbatch", script]
    preflight = []
    if args.gpu and args.skip_preflight:
      print("warning: --skip_preflight: the training step is not compiled for the GPUs before submitting",
            file=sys.stderr)
    elif args.gpu:
      preflight = [preflight_command(train_args, args.gpu, args.nodes, args.gpus_per_node)]
    else:
      print("note: no --gpu, so no pre-flight: --gpu h100|h200|a100 compiles the step for the job's GPUs first",
            file=sys.stderr)
    if args.dry_run:
      for command in preflight:
        print(shlex.join(command))
      print(f"cat > {shlex.quote(script)} <<'CODELM_SBATCH_EOF'\n{text}CODELM_SBATCH_EOF")
      if not args.no_submit:
        print(shlex.join(sbatch))
      return 0
    status = common.run_commands(preflight, dry_run=False)
    if status:
      return status
    Path(script).write_text(text)
    print(f"wrote {script}", file=sys.stderr)
    return 0 if args.no_submit else common.run_commands([sbatch], dry_run=False)

  for f in _SLURM_ONLY:
    if getattr(args, f) not in (None, False):
      p.error(f"argument --{f}: only with --slurm")
  missing = [f"--{f}" for f in _PLAIN_FLAGS if getattr(args, f) is None]
  if missing:
    p.error(f"argument {missing[0]}: required without --slurm (give --coordinator, --num_processes "
            f"and --process_id, or --slurm)")
  if args.process_id >= args.num_processes:
    p.error(f"argument --process_id: {args.process_id} must be below --num_processes {args.num_processes}")
  common.warn_local_model_dir(train_args)
  jax_env = {"JAX_COORDINATOR_ADDRESS": args.coordinator, "JAX_NUM_PROCESSES": str(args.num_processes),
             "JAX_PROCESS_ID": str(args.process_id)}
  extra = dict(e.partition("=")[::2] for e in args.env)
  cmd = [args.python, "train.py", *train_args]
  if args.dry_run:
    prefix = " ".join(f"{k}={shlex.quote(v)}" for k, v in {**extra, **jax_env}.items())
    print(f"{prefix} {shlex.join(cmd)}")
    return 0
  env = {**os.environ, **extra, **jax_env}
  return common.run_commands([cmd], dry_run=False, env=env)


if __name__ == "__main__":
  sys.exit(main())
