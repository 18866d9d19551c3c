"""Input-pipeline throughput: tokenise + pack into rows of SEQ tokens, for one task, a mixture, and
the mixture's UL2 version (span corruption / prefix LM / causal LM, packed as prefix-LM rows).

  python bench/data_pipeline.py --corpus CORPUS_DIR --vocab CORPUS_DIR/spm.model [--task code_python]
      [--mixture code_natural] [--sequence_length 2048] [--batch_size 8] [--seconds 20]

Reads the corpus shards uncached (tokenising on the fly, the expensive case), packs with SeqIO's
DecoderFeatureConverter (codelm's DecoderOnlyPrefixLMConverter for UL2), and counts target tokens
(non-zero decoder_loss_weights) per second.
Mixture rates come from SeqIO's cache (`python -m data.tasks` first), planned for the paper's
1B budget (38,000 steps x 256 rows). Prints the figures and writes them as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import quiet  # noqa: E402

if __name__ == "__main__":  # before TensorFlow is imported: no start-up lines
  quiet.setup()

import storage  # noqa: E402
from data import mixtures, stream  # noqa: E402


def measure(name: str, sequence_length: int, batch_size: int, seconds: float) -> dict:
  source = stream.resolve(name)
  examples = stream.examples(source, sequence_length, "train", shuffle=True, seed=0, num_epochs=None, use_cached=False)
  dataset = stream.packed_rows(examples, source, sequence_length)
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

  try:
    mixtures.register_corpus(args.corpus, args.vocab, rows=38_000 * 256, sequence_length=args.sequence_length)
  except FileNotFoundError as error:
    parser.error(str(error))
  results = {"task": measure(args.task, args.sequence_length, args.batch_size, args.seconds),
             "mixture": measure(args.mixture, args.sequence_length, args.batch_size, args.seconds),
             "ul2_mixture": measure(args.mixture + "_ul2", args.sequence_length, args.batch_size, args.seconds),
             "sequence_length": args.sequence_length, "batch_size": args.batch_size, "cpus": os.cpu_count()}
  os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
  storage.write_atomic(args.output, json.dumps(results, indent=2))
  print(f"wrote {args.output}")
  return results


if __name__ == "__main__":
  main()
