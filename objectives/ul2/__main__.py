"""python -m objectives.ul2 --corpus CORPUS_DIR --vocab spm.model [--language python] [--length 128] [--fim_rate R]

Prints one decoded example of each UL2 objective from the real corpus (with --fim_rate, FIM's PSM and
SPM examples too). It registers the corpus's
tasks (data/tasks.py), which use the objective: so this entry point sits above both, apart from the
objective it shows.
"""

from __future__ import annotations

import quiet

if __name__ == "__main__":  # before TensorFlow (seqio) is imported: no start-up lines
  quiet.setup()

import argparse
from typing import Sequence

import seqio

from data.tasks import register_tasks, register_ul2_tasks
from data.vocab import get_vocabulary
from objectives.ul2 import UL2Config, ul2_objectives


def show_examples(task: str, sequence_length: int, seed: int = 0) -> dict[str, dict[str, str]]:
  """The first example of each objective from a registered `_ul2` task, decoded (for people)."""
  registered = seqio.get_mixture_or_task(task)
  vocabulary = registered.output_features["targets"].vocabulary
  config = next(p.keywords["config"] for p in registered.preprocessors if getattr(p, "func", None) is ul2_objectives)
  dataset = registered.get_dataset({"inputs": sequence_length, "targets": sequence_length}, split="train",
                                   shuffle=False, use_cached=False, seed=seed)
  shown = {}
  for example in dataset.as_numpy_iterator():
    name = config.names[int(example["objective"])]
    if name not in shown:
      shown[name] = {key: vocabulary.decode(example[key].tolist()) for key in ("inputs", "targets")}
    if len(shown) == len(config.names):
      break
  return shown


def main(argv: Sequence[str] | None = None) -> None:
  """python -m objectives.ul2 --corpus CORPUS_DIR --vocab spm.model [--language python] [--length 128] [--fim_rate R]"""
  parser = argparse.ArgumentParser(prog="python -m objectives.ul2",
                                   description="Print one decoded example of each UL2 objective.")
  parser.add_argument("--corpus", required=True)
  parser.add_argument("--vocab", required=True)
  parser.add_argument("--language", default="python")
  parser.add_argument("--length", type=int, default=128, help="sequence length (short, to read)")
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--fim_rate", type=float, default=0.0,
                      help="UL2Config.fim_rate: the share of causal-LM examples made fill-in-the-middle")
  args = parser.parse_args(argv)
  try:
    config = UL2Config(fim_rate=args.fim_rate)
    register_ul2_tasks(register_tasks(args.corpus, get_vocabulary(args.vocab)), config)
  except ValueError as error:
    parser.error(str(error))
  for name, example in show_examples(f"code_{args.language}_ul2", args.length, args.seed).items():
    print(f"=== {name}\n--- inputs:\n{example['inputs']}\n--- targets:\n{example['targets']}\n")


if __name__ == "__main__":
  main()
