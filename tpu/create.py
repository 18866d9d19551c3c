"""Create a Cloud TPU VM (single host or pod slice).

Example (a v4-64 pod slice: 32 chips on 8 worker hosts):
  python tpu/create.py --name codelm-v4 --zone us-central2-b --accelerator_type v4-64 --dry_run
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):
  sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tpu import common


def build_parser():
  p = common.parser(__doc__)
  common.add_tpu_flags(p)
  p.add_argument("--accelerator_type", required=True, type=common.accelerator_type,
                 help="GENERATION-SIZE: v2-8, v3-32, v4-64, v5p-128, v5litepod-16, v6e-16, ...")
  p.add_argument("--version", default=None,
                 help="TPU runtime version (default by generation: tpu-ubuntu2204-base for v2/v3/v4, "
                      "v2-alpha-tpuv5 for v5p, v2-alpha-tpuv5-lite for v5litepod, v2-alpha-tpuv6e for v6e)")
  p.add_argument("--spot", action="store_true", help="create a Spot TPU (cheaper, can be preempted)")
  return p


def main(argv=None) -> int:
  args = build_parser().parse_args(argv)
  version = args.version or common.DEFAULT_VERSIONS[args.accelerator_type.rsplit("-", 1)[0]]
  cmd = common.gcloud_create(args.name, args.zone, args.accelerator_type, version, args.project, args.spot)
  return common.run_commands([cmd], args.dry_run)


if __name__ == "__main__":
  sys.exit(main())
