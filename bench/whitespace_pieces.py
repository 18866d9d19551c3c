"""Listed or learned whitespace pieces: which vocabulary encodes code in fewer tokens?

  python bench/whitespace_pieces.py --corpus CORPUS_DIR [--vocab_size 16384] [--output_dir DIR]

Trains the code vocabulary twice on the same sample (data/vocab.py): "listed" makes runs of 2..12
spaces user-defined pieces; "learned" lets SentencePiece learn whitespace-only pieces itself
(`allow_whitespace_only_pieces`), as the paper did. Prints tokens per UTF-8 byte per language on the
validation split (train where a language has none), the whitespace-only pieces each vocabulary holds,
and writes the figures as JSON. Lower tokens per byte is better: more code per 2048-token row.
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

import sentencepiece as spm  # noqa: E402

import storage  # noqa: E402
from data import vocab  # noqa: E402


def whitespace_pieces(model_path: str) -> dict[str, int]:
  """How many whitespace-only pieces of spaces the model has, and the longest run one piece holds."""
  processor = spm.SentencePieceProcessor(model_file=model_path)
  runs = [len(p) for p in (processor.id_to_piece(i) for i in range(processor.get_piece_size()))
          if p and set(p) == {"\u2581"}]
  return {"space_pieces": len(runs), "longest_space_run": max(runs, default=0)}


def main(argv=None) -> dict:
  parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--corpus", required=True)
  parser.add_argument("--vocab_size", type=int, default=16_384)
  parser.add_argument("--chars_per_language", type=int, default=vocab.DEFAULT_CHARS_PER_LANGUAGE)
  parser.add_argument("--output_dir", default=None, help="where the two models go (default: CORPUS/whitespace)")
  parser.add_argument("--output", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results",
                                                       "whitespace_pieces.json"))
  args = parser.parse_args(argv)
  output_dir = args.output_dir or os.path.join(args.corpus, "whitespace")
  results = {"vocab_size": args.vocab_size, "corpus": os.path.abspath(args.corpus), "modes": {}}
  for mode in vocab.WHITESPACE_MODES:
    start = time.perf_counter()
    path = vocab.train_vocabulary(args.corpus, args.vocab_size, os.path.join(output_dir, f"{mode}.model"),
                                  chars_per_language=args.chars_per_language, whitespace=mode)
    seconds = time.perf_counter() - start
    stats = vocab.measure(vocab.get_vocabulary(path), args.corpus)
    total_bytes = sum(b for _, b, _ in stats.values())
    total_tokens = sum(t for _, _, t in stats.values())
    per_language = {name: tokens / num_bytes for name, (_, num_bytes, tokens) in stats.items()}
    results["modes"][mode] = {
        "train_seconds": seconds, "tokens_per_byte": per_language,
        "mean_tokens_per_byte": sum(per_language.values()) / len(per_language),
        "total_tokens_per_byte": total_tokens / total_bytes, **whitespace_pieces(path)}
    print(f"{mode}: trained in {seconds:.0f} s, {results['modes'][mode]['space_pieces']} space pieces, "
          f"longest {results['modes'][mode]['longest_space_run']} spaces", flush=True)
  listed, learned = results["modes"]["listed"], results["modes"]["learned"]
  print("\n| language | listed tokens/byte | learned tokens/byte | learned vs listed |\n|---|---|---|---|")
  for name in listed["tokens_per_byte"]:
    a, b = listed["tokens_per_byte"][name], learned["tokens_per_byte"][name]
    print(f"| {name} | {a:.4f} | {b:.4f} | {100 * (b / a - 1):+.1f}% |")
  for key, label in (("mean_tokens_per_byte", "mean of languages"), ("total_tokens_per_byte", "all bytes")):
    a, b = listed[key], learned[key]
    print(f"| {label} | {a:.4f} | {b:.4f} | {100 * (b / a - 1):+.1f}% |")
  results["better"] = min(vocab.WHITESPACE_MODES, key=lambda m: results["modes"][m]["mean_tokens_per_byte"])
  print(f"\nfewer tokens per byte (mean over languages): {results['better']}")
  os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
  storage.write_atomic(args.output, json.dumps(results, indent=2))
  print(f"wrote {args.output}")
  return results


if __name__ == "__main__":
  main()
