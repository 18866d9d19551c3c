"""Delete a Cloud TPU VM (and stop any training on it).

Example:
  python tpu/delete.py --name codelm-v4 --zone us-central2-b --yes --dry_run
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
  p.add_argument("--yes", action="store_true",
                 help="do not ask for confirmation (passes --quiet to gcloud)")
  return p


def main(argv=None) -> int:
  args = build_parser().parse_args(argv)
  return common.run_commands([common.gcloud_delete(args.name, args.zone, args.project, args.yes)],
                             args.dry_run)


if __name__ == "__main__":
  sys.exit(main())
