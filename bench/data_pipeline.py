"""Input-pipeline throughput: tokenise + pack into rows of SEQ tokens, for one task, a mixture, and
the mixture's UL2 version (span corruption / prefix LM / causal LM, packed as prefix-LM rows).

  python bench/data_pipeline.py --corpus CORPUS_DIR --vocab CORPUS_DIR/spm.model [--task code_python]
      [--mixture code_natural] [--sequence_length 2048] [--batch_size 8] [--seconds 20]

Reads the corpus shards uncached (tokenising on the fly, the expensive case), packs with SeqIO's
DecoderFeatureConverter (codelm's DecoderOnlyPrefixLMConverter for UL2), and counts target tokens
(non-zero decoder_loss_weights) per second.
Mixture rates come from SeqIO's cache statistics when the corpus has been cached, else from the
corpus's byte counts. Prints the figures and writes them as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import seqio  # noqa: E402

from objectives import mixtures, tasks  # noqa: E402
from objectives.ul2 import DecoderOnlyPrefixLMConverter  # noqa: E402
from objectives.vocab import get_vocabulary  # noqa: E402


def measure(name: str, sequence_length: int, batch_size: int, seconds: float) -> dict:
  if name.endswith("_ul2"):
    lengths = {"inputs": sequence_length, "targets": sequence_length}
    converter = DecoderOnlyPrefixLMConverter(pack=True)
  else:
    lengths, converter = {"targets": sequence_length}, seqio.DecoderFeatureConverter(pack=True)
  dataset = seqio.get_dataset(name, task_feature_lengths=lengths, dataset_split="train", shuffle=True,
                              num_epochs=None, feature_converter=converter, use_cached=False, seed=0)
  iterator = dataset.batch(batch_size).prefetch(2).as_numpy_iterator()
  next(iterator)  # build the graph and fill the shuffle buffer before timing
  tokens = rows = 0
  start = time.perf_counter()
  while time.perf_counter() - start < seconds:
    batch = next(iterator)
    tokens += int((batch["decoder_loss_weights"] > 0).sum())
    rows += batch["decoder_loss_weights"].shape[0]
  elapsed = time.perf_counter() - start
  result = {"name": name, "tokens_per_second": tokens / elapsed, "rows": rows, "target_tokens": tokens,
            "seconds": elapsed, "fill": tokens / (rows * sequence_length)}
  print(f"{name:<20} {result['tokens_per_second']:>12,.0f} target tokens/s  ({rows} rows of {sequence_length}, "
        f"{100 * result['fill']:.1f}% filled)", flush=True)
  return result


def main(argv=None) -> dict:
  parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--corpus", required=True)
  parser.add_argument("--vocab", required=True)
  parser.add_argument("--task", default="code_python")
  parser.add_argument("--mixture", default="code_natural", choices=[mixtures.mixture_name(k) for k in mixtures.MIXTURE_KINDS])
  parser.add_argument("--sequence_length", type=int, default=2048)
  parser.add_argument("--batch_size", type=int, default=8)
  parser.add_argument("--seconds", type=float, default=20.0)
  parser.add_argument("--output", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results",
                                                       "data_pipeline.json"))
  args = parser.parse_args(argv)

  names = tasks.register_tasks(args.corpus, get_vocabulary(args.vocab))
  tasks.register_ul2_tasks(names)
  try:
    counts = {n: c["tokens"] for n, c in tasks.load_counts(tasks.default_cache_dir(args.corpus), names).items()}
    source = "SeqIO cache token counts"
  except FileNotFoundError:
    with open(os.path.join(args.corpus, "stats.json")) as f:
      stats = json.load(f)
    counts = {n: stats["languages"][n[len("code_"):]]["train"]["bytes"] for n in names}
    source = "corpus byte counts (no SeqIO cache)"
  budget = 38_000 * 256 * args.sequence_length
  for suffix in ("", "_ul2"):
    mixtures.register_mixtures(counts, budget, kinds=[args.mixture[len("code_"):]], suffix=suffix)
  print(f"rates from {source}; {len(names)} language tasks")
  results = {"task": measure(args.task, args.sequence_length, args.batch_size, args.seconds),
             "mixture": measure(args.mixture, args.sequence_length, args.batch_size, args.seconds),
             "ul2_mixture": measure(args.mixture + "_ul2", args.sequence_length, args.batch_size, args.seconds),
             "sequence_length": args.sequence_length, "batch_size": args.batch_size, "cpus": os.cpu_count()}
  os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
  with open(args.output, "w") as f:
    json.dump(results, f, indent=2)
  print(f"wrote {args.output}")
  return results


if __name__ == "__main__":
  main()
