"""Whether codelm's encoders and the exported Hugging Face tokenizer (export/tokenizer.py) give the
same ids, on real source files.

  python bench/hf_tokenizer_agreement.py --vocab CORPUS_DIR/spm.model --files 'GLOB' ['GLOB' ...] \\
      [--per_glob 200] [--max_chars 30000] [--output bench/results/hf_tokenizer_agreement.json]

Encodes each file (its first --max_chars characters) with codelm's vocabulary in Python (what the
sampler and fine-tuning data use), in TensorFlow (SeqIO's training pipeline), with the exported
tokenizer, and with plain SentencePiece (Python and tf_text) over the whole text, as codelm did before
it encoded in segments (data/vocab.py, "how codelm encodes"). Prints, for each against codelm's Python
ids, the files whose ids are equal and the share of ids that differ (aligned with difflib, so one
changed split counts its pieces, not the rest of the file), and the time each took; and the two plain
encoders against each other (before segments: the training pipeline's ids against the sampler's).
"""

from __future__ import annotations

import argparse
import difflib
import glob
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import quiet  # noqa: E402

quiet.setup()

import sentencepiece as spm  # noqa: E402
import tensorflow as tf  # noqa: E402
import tensorflow_text as tf_text  # noqa: E402

import storage  # noqa: E402
from data import vocab  # noqa: E402
from export.tokenizer import build  # noqa: E402


def _differing(ours: list[int], theirs: list[int]) -> int:
  opcodes = difflib.SequenceMatcher(None, ours, theirs, autojunk=False).get_opcodes()
  return sum(max(i2 - i1, j2 - j1) for op, i1, i2, j1, j2 in opcodes if op != "equal")


def agreement(vocab_path: str, texts: list[str]) -> dict:
  vocabulary = vocab.get_vocabulary(vocab_path)
  hf, _ = build(vocabulary.sp_model, 2048)
  hf.encode_special_tokens = True  # text spelling "[code]" is text, as transformers' split_special_tokens
  # Plain SentencePiece over the whole text, on the model as codelm loaded it before segments.
  as_trained = trained_scores(vocab_path, vocabulary)
  plain = spm.SentencePieceProcessor(model_proto=as_trained)
  plain_tf = tf_text.SentencepieceTokenizer(model=as_trained)
  encoders = {
      "codelm_tensorflow": lambda ts: [x.numpy().tolist() for x in tf.data.Dataset.from_tensor_slices(ts).map(vocabulary.encode_tf)],
      "exported_tokenizer": lambda ts: [e.ids for e in hf.encode_batch(ts, add_special_tokens=False)],
      "plain_sentencepiece_python": lambda ts: [plain.encode(t) for t in ts],
      "plain_sentencepiece_tf_text": lambda ts: [plain_tf.tokenize(t).numpy().tolist() for t in ts],
  }
  nbytes = sum(len(t.encode("utf-8")) for t in texts)
  start = time.perf_counter()
  ours = [list(vocabulary.encode(t)) for t in texts]
  figures = {"files": len(texts), "bytes": nbytes, "ids": sum(map(len, ours)),
             "codelm_python": {"mb_per_second": nbytes / (time.perf_counter() - start) / 1e6}}
  ids = {}
  for name, encode in encoders.items():
    start = time.perf_counter()
    ids[name] = encode(texts)
    seconds = time.perf_counter() - start
    figures[name] = dict(_compare(ours, ids[name]), mb_per_second=nbytes / seconds / 1e6)
  # What codelm did before segments: training data from tf_text, prompts from the Python package.
  figures["plain_python_against_plain_tf_text"] = _compare(ids["plain_sentencepiece_tf_text"],
                                                           ids["plain_sentencepiece_python"])
  return figures


def _compare(ours: list[list[int]], theirs: list[list[int]]) -> dict:
  differing = sum(_differing(a, b) for a, b in zip(ours, theirs) if a != b)
  total = sum(map(len, ours))
  return {"files_equal": sum(a == b for a, b in zip(ours, theirs)), "ids_differing": differing,
          "ids_differing_percent": 100 * differing / max(total, 1)}


def trained_scores(vocab_path: str, vocabulary) -> bytes:
  """The vocabulary's model (seqio's sentinels, special pieces as control pieces) with the trained
  scores and user-defined run pieces: what codelm encoded with before data/vocab.py's segments."""
  from sentencepiece import sentencepiece_model_pb2
  piece_type = sentencepiece_model_pb2.ModelProto.SentencePiece
  trained = {p.piece: p for p in sentencepiece_model_pb2.ModelProto.FromString(storage.read_bytes(vocab_path)).pieces}
  model = sentencepiece_model_pb2.ModelProto.FromString(vocabulary.sp_model)
  for piece in model.pieces:
    if piece.piece in trained and piece.type != piece_type.CONTROL:
      piece.type, piece.score = trained[piece.piece].type, trained[piece.piece].score
  return model.SerializeToString()


def main() -> int:
  p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  p.add_argument("--vocab", required=True, help="a codelm SentencePiece model (CORPUS_DIR/spm.model)")
  p.add_argument("--files", nargs="+", required=True, help="glob patterns of source files ('**' recurses)")
  p.add_argument("--per_glob", type=int, default=200, help="files per pattern, in sorted order")
  p.add_argument("--max_chars", type=int, default=30000)
  p.add_argument("--output", default=None, help="also write the figures to this JSON file")
  args = p.parse_args()
  paths = [path for pattern in args.files
           for path in sorted(f for f in glob.glob(pattern, recursive=True) if os.path.isfile(f))[:args.per_glob]]
  texts = []
  for path in paths:
    try:
      with open(path, encoding="utf-8") as f:
        texts.append(f.read()[:args.max_chars])
    except (UnicodeDecodeError, OSError):
      continue
  if not texts:
    p.error("--files: no UTF-8 file matches")
  figures = agreement(args.vocab, texts)
  print(f"{figures['files']} files, {figures['bytes']:,} bytes, {figures['ids']:,} ids (codelm, Python: "
        f"{figures['codelm_python']['mb_per_second']:.1f} MB/s)")
  for name in ("codelm_tensorflow", "exported_tokenizer", "plain_sentencepiece_python", "plain_sentencepiece_tf_text"):
    f = figures[name]
    print(f"  {name:28s} {f['files_equal']:4d} files equal, {f['ids_differing']:6d} ids differ "
          f"({f['ids_differing_percent']:.3f}%), {f['mb_per_second']:.1f} MB/s")
  f = figures["plain_python_against_plain_tf_text"]
  print(f"before segments, plain Python against plain tf_text (sampler against training data): "
        f"{f['files_equal']} files equal, {f['ids_differing']} ids differ ({f['ids_differing_percent']:.3f}%)")
  if args.output:
    storage.write_atomic(args.output, json.dumps(dict(figures, patterns=args.files, vocab=args.vocab), indent=1))
  return 0


if __name__ == "__main__":
  sys.exit(main())
