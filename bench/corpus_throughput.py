"""Corpus builder throughput: MB/s per core for each stage and for the whole pipeline, on real code
written as The Stack-format Parquet shards, and a projection to the paper's scale.

  ../shared/corpus/fetch_debian_corpus.sh /tmp/debian_corpus      # docs/corpus.md's run: 4,528 files, 32.3 MB
  python bench/corpus_throughput.py --source /tmp/debian_corpus/src [--work /tmp/corpus_bench] [--pii]

Each stage is timed alone in this process (one core) over every file: reading the Parquet rows (the
pipeline's ReadRows), the licence verdict of the licence column, the quality rules, the exact-dedup
hash, the near-dedup MinHash signature, benchmark decontamination and, with --pii, PII redaction.
The whole pipeline is `data.corpus` on the shards with the direct runner and one worker; its fixed
start-up (measured on a one-row shard) is subtracted. MB are 10^6 bytes of UTF-8 source code.
Prints the figures and writes bench/results/corpus_throughput.json.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import quiet  # noqa: E402

quiet.setup()

import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

import languages  # noqa: E402
from data import corpus, decontamination, licenses, pii, shards
from data.near_dedup import NEAR_DUP_NUM_PERM, NEAR_DUP_SHINGLE_SIZE, MinHashBands, lsh_bands  # noqa: E402
from data.quality import QualityFilters  # noqa: E402

GOAL_MB_PER_CORE = 5.0
# The paper-scale input assumed for the projection: The Stack v1's permissively licensed code, 3.1 TB
# in 30 languages (Kocetkov et al. 2022, abstract); the paper's 14 languages are part of it, so the
# projection is an upper bound for one pass over them.
PAPER_SCALE_BYTES = 3.1e12
PAPER_SCALE_SOURCE = "The Stack v1, permissive licences, 30 languages: 3.1 TB (Kocetkov et al. 2022)"
DATAFLOW_CORES_PER_WORKER = 4  # n1-standard-4, Dataflow's default batch worker: 4 vCPUs


def source_rows(root: str) -> list[dict]:
  """The code files under `root` as The Stack rows: repository = the top folder."""
  rows = []
  for folder, subfolders, names in os.walk(root):
    subfolders.sort()
    for name in sorted(names):
      language = languages.classify(name)
      if language is None:
        continue
      path = os.path.join(folder, name)
      with open(path, "rb") as f:
        data = f.read()
      if not data or b"\0" in data or len(data) > 1_000_000:
        continue
      try:
        text = data.decode("utf-8")
      except UnicodeDecodeError:
        continue
      relative = os.path.relpath(path, root).split(os.sep)
      if len(relative) == 1:  # a file directly in the source folder: the folder is its repository
        relative = [os.path.basename(os.path.abspath(root)) or "root", *relative]
      rows.append({"content": text, "max_stars_repo_name": f"debian/{relative[0]}",
                   "max_stars_repo_path": "/".join(relative[1:]), "ext": name.rsplit(".", 1)[-1],
                   "lang": language.display_name, "max_stars_repo_licenses": ["MIT"]})
  return rows


def write_shards(rows: list[dict], directory: str, num_shards: int) -> list[str]:
  os.makedirs(directory, exist_ok=True)
  num_shards = min(num_shards, len(rows))  # an empty shard has no columns: the reader reports it
  paths = []
  for index in range(num_shards):
    path = os.path.join(directory, f"train-{index:05d}-of-{num_shards:05d}.parquet")
    pq.write_table(pa.Table.from_pylist(rows[index::num_shards]), path, row_group_size=500)
    paths.append(path)
  return paths


def timed(function, items) -> float:
  start = time.perf_counter()
  for item in items:
    function(item)
  return time.perf_counter() - start


def stage_seconds(rows: list[dict], shard_paths: list[str], with_pii: bool) -> dict[str, float]:
  """Seconds of each stage over every row, one core."""
  texts = [row["content"] for row in rows]
  reader = shards.ReadRows(shards.Columns(), 1_000_000)
  units = []
  for path in shard_paths:
    units.extend(shards.ExpandShard(shards.Columns()).process(path))
  quality = QualityFilters()
  bands, rows_per_band = lsh_bands(0.7, NEAR_DUP_NUM_PERM)
  minhash = MinHashBands(NEAR_DUP_NUM_PERM, bands, rows_per_band, NEAR_DUP_SHINGLE_SIZE)
  minhash.setup()
  decontaminator = decontamination.Decontaminator(decontamination.project_benchmark_items())
  decontaminator.match("warm up: the automaton is built on first use")
  records = [("d", "p", languages.classify(row["max_stars_repo_path"]).name, row["content"], None) for row in rows]
  seconds = {
      "read Parquet rows": timed(lambda unit: list(reader.process(unit)), units),
      "licence verdict": timed(licenses.verdict_of_column, [row["max_stars_repo_licenses"] for row in rows]),
      "quality rules": timed(lambda r: quality.failed_rule(r[3], r[2]), records),
      "exact dedup hash": timed(lambda text: hashlib.sha256(text.encode("utf-8")).hexdigest(), texts),
      "near dedup MinHash": timed(lambda r: list(minhash.process(r)), records),
      "decontamination": timed(decontaminator.match, texts),
  }
  if with_pii:
    seconds["PII redaction"] = timed(pii.redact, texts)
  return seconds


def pipeline_seconds(shard_paths: list[str], tiny: str, work: str) -> dict[str, float]:
  """Wall and CPU seconds (this process, all its threads) of the whole pipeline on the shards and of its
  start-up on a one-row shard. In-memory runner: the pipeline runs in this process, so CPU time is its."""
  args = ["--direct_num_workers", "1", "--direct_running_mode", "in_memory"]
  seconds = {}
  for name, paths in (("startup", [tiny]), ("full", shard_paths)):
    wall, cpu = time.perf_counter(), time.process_time()
    corpus.build_corpus([], os.path.join(work, f"corpus_{name}"), shard_sources=paths, pipeline_args=args,
                        num_shards=4)
    seconds[f"{name}_wall"] = time.perf_counter() - wall
    seconds[f"{name}_cpu"] = time.process_time() - cpu
  return seconds


def main(argv=None) -> dict:
  parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--source", required=True, help="a source tree, e.g. fetch_debian_corpus.sh's DIR/src")
  parser.add_argument("--work", default=None, help="where the Parquet shards and corpora go (default: a temp dir)")
  parser.add_argument("--num_shards", type=int, default=8)
  parser.add_argument("--pii", action="store_true", help="time PII redaction too (off in the pipeline by default)")
  parser.add_argument("--output", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results",
                                                       "corpus_throughput.json"))
  args = parser.parse_args(argv)
  if not os.path.isdir(args.source):
    parser.error(f"--source {args.source}: not a folder")
  work = args.work or tempfile.mkdtemp(prefix="corpus_bench_")
  rows = source_rows(args.source)
  if not rows:
    parser.error(f"--source {args.source}: no code file of the paper's languages under it")
  total_bytes = sum(len(row["content"].encode("utf-8")) for row in rows)
  print(f"{len(rows):,} files, {total_bytes / 1e6:.1f} MB of code from {args.source}")
  shard_paths = write_shards(rows, os.path.join(work, "shards"), args.num_shards)
  tiny = write_shards(rows[:1], os.path.join(work, "tiny"), 1)[0]

  seconds = stage_seconds(rows, shard_paths, args.pii)
  pipeline = pipeline_seconds(shard_paths, tiny, work)
  cpu_seconds = pipeline["full_cpu"] - pipeline["startup_cpu"]
  wall_seconds = pipeline["full_wall"] - pipeline["startup_wall"]
  if cpu_seconds <= 0 or wall_seconds <= 0 or min(seconds.values()) <= 0:
    # The input is smaller than the pipeline's start-up varies: no rate can be told from it.
    parser.exit(2, f"{parser.prog}: error: --source {args.source}: {total_bytes / 1e6:.3f} MB is too little to "
                   f"measure (the whole pipeline took {pipeline['full_cpu']:.2f} CPU s against "
                   f"{pipeline['startup_cpu']:.2f} s for its one-row start-up); give a larger tree, such as "
                   "fetch_debian_corpus.sh's\n")
  stages = {name: {"seconds": s, "mb_per_s_per_core": total_bytes / 1e6 / s} for name, s in seconds.items()}
  filters_and_dedup = sum(s for name, s in seconds.items() if name != "PII redaction")
  # Per core = per CPU-second: the in-memory runner may overlap stages on threads.
  pipeline_mb_per_s = total_bytes / 1e6 / max(cpu_seconds, 1e-9)
  # The projection takes the slower of the two: the stages timed alone see every file, the pipeline's
  # MinHash only what the filters kept.
  projected_mb_per_s = min(pipeline_mb_per_s, total_bytes / 1e6 / filters_and_dedup)
  core_hours = PAPER_SCALE_BYTES / 1e6 / projected_mb_per_s / 3600
  result = {
      "files": len(rows), "bytes": total_bytes, "source": args.source, "stages": stages,
      "stages_in_sequence_mb_per_s_per_core": total_bytes / 1e6 / filters_and_dedup,
      "pipeline": {**pipeline, "cpu_seconds_without_startup": cpu_seconds, "mb_per_s_per_core": pipeline_mb_per_s,
                   "mb_per_s_wall": total_bytes / 1e6 / wall_seconds,
                   "runner": "DirectRunner, 1 worker, in_memory"},
      "goal_mb_per_s_per_core": GOAL_MB_PER_CORE,
      "projection": {"mb_per_s_per_core": projected_mb_per_s, "bytes": PAPER_SCALE_BYTES, "source": PAPER_SCALE_SOURCE, "core_hours": core_hours,
                     "dataflow_worker_hours": core_hours / DATAFLOW_CORES_PER_WORKER,
                     "dataflow_worker": f"{DATAFLOW_CORES_PER_WORKER} vCPUs (n1-standard-4)"},
  }
  print(f"{'stage':<24}{'seconds':>10}{'MB/s per core':>16}")
  for name, entry in stages.items():
    print(f"{name:<24}{entry['seconds']:>10.2f}{entry['mb_per_s_per_core']:>16.1f}")
  print(f"{'stages in sequence':<24}{filters_and_dedup:>10.2f}{result['stages_in_sequence_mb_per_s_per_core']:>16.1f}"
        "  (without PII)")
  print(f"{'whole pipeline':<24}{cpu_seconds:>10.2f}{pipeline_mb_per_s:>16.1f}"
        f"  (CPU seconds: {pipeline['full_cpu']:.1f} - {pipeline['startup_cpu']:.1f} start-up; "
        f"wall {pipeline['full_wall']:.1f} - {pipeline['startup_wall']:.1f} s; goal >= {GOAL_MB_PER_CORE:.0f})")
  print(f"projection at {projected_mb_per_s:.1f} MB/s per core for {PAPER_SCALE_SOURCE}: {core_hours:,.0f} core-hours, "
        f"{result['projection']['dataflow_worker_hours']:,.0f} Dataflow worker-hours at {DATAFLOW_CORES_PER_WORKER} vCPUs")
  os.makedirs(os.path.dirname(args.output), exist_ok=True)
  with open(args.output, "w") as f:
    json.dump(result, f, indent=2)
  print(f"wrote {args.output}")
  return result


if __name__ == "__main__":
  main()
