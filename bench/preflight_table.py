"""The pre-flight table of docs/results.md: the paper's sizes with runs/pretrain.gin (batch 256 x 2048) compiled
by tpu/preflight.py for the slices a user would rent, as the gin files set them (data parallel, no
remat) and with FSDP over every chip and full remat; per chip memory, fits or not, the roofline step
time. Every figure is the compiler's or an estimate from it; nothing runs on a TPU.

  python bench/preflight_table.py [--sizes 1b 2b 4b] [--slices v4-32 ...] [--output bench/results/preflight_table]

Writes OUTPUT.json and OUTPUT.md; about 20 minutes on 2 CPU cores (a compile that does not fit stops
in seconds, one that fits takes 30-90 s).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import storage  # noqa: E402
from tpu.slices import parse_slice  # noqa: E402

SLICES = ["v4-32", "v4-64", "v4-128", "v5e-64", "v5e-256", "v5p-32", "v5p-64"]
SETUPS = {  # name: extra pre-flight flags
    "pretrain.gin as is (data parallel, remat none)": [],
    "FSDP over every chip, remat full": ["--mesh=1,-1,1", "--gin.train.model_overrides={'remat': 'full'}"],
}


def run_one(size: str, slice_name: str, extra: list[str]) -> dict:
  with tempfile.TemporaryDirectory() as folder:
    path = os.path.join(folder, "report.json")
    began = time.perf_counter()
    result = subprocess.run([sys.executable, "-m", "tpu.preflight", "--gin_file=gin_configs/runs/pretrain.gin",
                             f"--gin_file=gin_configs/models/{size}.gin", f"--topology={slice_name}", *extra,
                             f"--json={path}"], cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - began
    if result.returncode not in (0, 1) or not os.path.exists(path):
      return {"error": result.stderr.strip().splitlines()[-1:] or ["?"], "wall_s": wall}
    report = json.load(open(path))["reports"][0]
    return dict(report, wall_s=wall)


def cell(report: dict) -> str:
  if "error" in report and "memory" not in report and "overshoot" not in report:
    return f"error: {report['error'][0][:60]}"
  if "memory" not in report:
    needed, usable = report["overshoot"] or (float("nan"), float("nan"))
    return f"no: needs {needed / 2**30:.1f} of {usable / 2**30:.1f} GiB"
  total = report["total_bytes"] / 2**30
  verdict = "fits" if report["fits"] else "no"
  step = report["traced_flops"] / parse_slice(report["slice"]).chip.peak_bf16_flops  # preflight's estimate
  return f"{verdict}: {total:.1f} GiB, ≥{step:.2f} s/step"


def main() -> int:
  p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  p.add_argument("--sizes", nargs="+", default=["1b", "2b", "4b"])
  p.add_argument("--slices", nargs="+", default=SLICES)
  p.add_argument("--output", default=os.path.join(ROOT, "bench", "results", "preflight_table"))
  args = p.parse_args()
  # A rerun keeps the cells an earlier run of the same output computed (not its errors).
  done = {}
  if storage.exists(args.output + ".json"):
    done = {(r["setup"], r["size"], r["slice"]): r["report"] for r in json.loads(storage.read_text(args.output + ".json"))
            if "memory" in r["report"] or "overshoot" in r["report"]}
  results = []
  total = len(args.sizes) * len(args.slices) * len(SETUPS)
  for setup, extra in SETUPS.items():
    for size in args.sizes:
      for slice_name in args.slices:
        report = done.get((setup, size, slice_name)) or run_one(size, slice_name, extra)
        report["slice"] = slice_name
        results.append({"setup": setup, "size": size, "slice": slice_name, "report": report})
        print(f"[{len(results)}/{total}] {size} on {slice_name}, {setup}: {cell(report)} "
              f"(pre-flight {report['wall_s']:.0f} s)", flush=True)
  lines = []
  for setup in SETUPS:
    lines += [f"**{setup}**", "", "| size | " + " | ".join(args.slices) + " |", "|---|" + "---|" * len(args.slices)]
    for size in args.sizes:
      row = [cell(r["report"]) for r in results if r["setup"] == setup and r["size"] == size]
      lines.append(f"| {size} | " + " | ".join(row) + " |")
    smallest = {}
    for size in args.sizes:
      fitting = [r["slice"] for r in results if r["setup"] == setup and r["size"] == size and r["report"].get("fits")]
      smallest[size] = min(fitting, key=lambda name: parse_slice(name).chips, default="none of these")
    lines += ["", "fewest chips that fit: " + ", ".join(f"{s} {v}" for s, v in smallest.items()), ""]
  table = "\n".join(lines)
  print(table)
  storage.write_atomic(args.output + ".md", table + "\n")
  storage.write_atomic(args.output + ".json", json.dumps(results, indent=1, default=str))
  return 0


if __name__ == "__main__":
  sys.exit(main())
