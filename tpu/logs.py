"""Show the training log of one TPU worker (written by tpu/launch.py under ~/codelm_logs/).

Every worker writes its own log; worker 0 is usually the one to watch.

Examples:
  python tpu/logs.py --name codelm-v4 --zone us-central2-b --follow
  python tpu/logs.py --name codelm-v4 --zone us-central2-b --worker 3 --lines 500
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

if __package__ in (None, ""):
  sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tpu import common


def build_parser():
  p = common.parser(__doc__)
  common.add_tpu_flags(p)
  p.add_argument("--worker", type=common.worker, default="0",
                 help="worker index, or 'all' for every worker's tail (default: 0)")
  p.add_argument("--follow", action="store_true", help="keep following the log (tail -F); Ctrl-C stops")
  p.add_argument("--lines", type=common.positive_int, default=100, help="lines to show (default: 100)")
  p.add_argument("--log", default=None,
                 help=f"log file name under {common.LOG_DIR}/ (default: the latest run, "
                      f"{common.LATEST_LOG})")
  return p


def main(argv=None) -> int:
  p = build_parser()
  args = p.parse_args(argv)
  if args.follow and args.worker == "all":
    p.error("argument --worker: --follow needs a single worker index, not 'all'")
  if args.log is not None and ("/" in args.log or not args.log):
    p.error(f"argument --log: {args.log!r} must be a file name inside {common.LOG_DIR}/")
  path = f"{common.LOG_DIR}/{shlex.quote(args.log)}" if args.log else common.LATEST_LOG
  remote = f"tail -n {args.lines}{' -F' if args.follow else ''} {path}"
  cmd = common.gcloud_ssh(args.name, args.zone, args.project, remote, worker_=args.worker)
  return common.run_commands([cmd], args.dry_run)


if __name__ == "__main__":
  sys.exit(main())
