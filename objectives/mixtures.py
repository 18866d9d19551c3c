"""Natural and UniMax (N = 1..4) mixtures over the language tasks, from SeqIO's cached token counts.

  python -m objectives.mixtures --corpus CORPUS_DIR --train_steps 38000 --batch_size 256 \
      --sequence_length 2048 [--plot mixtures.png]

prints each mixture's rate and expected epochs per language and draws the distributions as bars (in
the manner of the paper's Figure 3). The budget is train_steps x batch_size x sequence_length tokens.
SeqIO samples a mixture's tasks at these rates independently, so the UniMax epoch cap holds in
expectation, not as a hard limit.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Mapping, Sequence

import seqio

from objectives.languages import LANGUAGES
from objectives.unimax import expected_epochs, natural_rates, unimax_rates

UNIMAX_EPOCHS = (1, 2, 3, 4)
MIXTURE_KINDS = ("natural",) + tuple(f"unimax_{n}" for n in UNIMAX_EPOCHS)


def mixture_name(kind: str) -> str:
  return f"code_{kind}"


def mixture_rates(kind: str, token_counts: Mapping[str, int], budget_tokens: float) -> dict[str, float]:
  """Rates per task for 'natural' or 'unimax_N'."""
  if kind == "natural":
    return natural_rates(token_counts)
  if kind.startswith("unimax_") and kind[len("unimax_"):].isdigit():
    return unimax_rates(token_counts, budget_tokens, int(kind[len("unimax_"):]))
  raise ValueError(f"unknown mixture kind {kind!r}; choose one of {', '.join(MIXTURE_KINDS)}")


def register_mixtures(token_counts: Mapping[str, int], budget_tokens: float,
                      kinds: Sequence[str] = MIXTURE_KINDS, suffix: str = "") -> dict[str, dict[str, float]]:
  """Registers `code_natural`, `code_unimax_1` … over the (already registered) language tasks; with
  suffix "_ul2", `code_natural_ul2` … over the `{task}_ul2` tasks at the same rates."""
  all_rates = {}
  for kind in kinds:
    rates = {task + suffix: rate for task, rate in mixture_rates(kind, token_counts, budget_tokens).items()}
    name = mixture_name(kind) + suffix
    seqio.MixtureRegistry.remove(name)
    seqio.MixtureRegistry.add(name, [(task, rate) for task, rate in rates.items() if rate > 0])
    all_rates[name] = rates
  return all_rates


def register_corpus(corpus_dir: str, vocab_path: str, budget_tokens: float, cache_dir: str | None = None,
                    ul2_config=None) -> dict[str, dict[str, float]]:
  """Everything a training run needs from a corpus: the language tasks (reading SeqIO's cache where
  it exists), their UL2 versions, and the natural / UniMax mixtures of both (`code_unimax_2`,
  `code_unimax_2_ul2`, …) with rates from the cached token counts."""
  from objectives.tasks import default_cache_dir, load_counts, register_tasks, register_ul2_tasks
  from objectives.vocab import get_vocabulary

  names = register_tasks(corpus_dir, get_vocabulary(vocab_path))
  register_ul2_tasks(names, ul2_config)
  cache_dir = cache_dir or default_cache_dir(corpus_dir)
  seqio.add_global_cache_dirs([cache_dir])
  counts = {name: c["tokens"] for name, c in load_counts(cache_dir, names).items()}
  return {**register_mixtures(counts, budget_tokens), **register_mixtures(counts, budget_tokens, suffix="_ul2")}


def rates_table(token_counts: Mapping[str, int], budget_tokens: float, kinds: Sequence[str] = MIXTURE_KINDS) -> str:
  """A Markdown table: per language, tokens, then rate % and expected epochs for each mixture."""
  header = "| language | tokens | " + " | ".join(f"{k} % | {k} epochs" for k in kinds) + " |"
  lines = [header, "|" + "---|" * (2 + 2 * len(kinds))]
  per_kind = {k: mixture_rates(k, token_counts, budget_tokens) for k in kinds}
  epochs = {k: expected_epochs(per_kind[k], token_counts, budget_tokens) for k in kinds}
  for task in token_counts:
    display = next((l.display_name for l in LANGUAGES if l.task_name == task), task)
    cells = " | ".join(f"{100 * per_kind[k][task]:.2f} | {epochs[k][task]:.2f}" for k in kinds)
    lines.append(f"| {display} | {token_counts[task]:,} | {cells} |")
  return "\n".join(lines)


def plot_rates(token_counts: Mapping[str, int], budget_tokens: float, output: str,
               kinds: Sequence[str] = MIXTURE_KINDS) -> None:
  """Grouped bars: the share of each language under each mixture (log scale, as small ones vanish)."""
  import matplotlib

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt
  import numpy as np

  tasks = list(token_counts)
  labels = [next((l.display_name for l in LANGUAGES if l.task_name == t), t) for t in tasks]
  width = 0.8 / len(kinds)
  fig, ax = plt.subplots(figsize=(max(8, 0.9 * len(tasks)), 4.5))
  for i, kind in enumerate(kinds):
    rates = mixture_rates(kind, token_counts, budget_tokens)
    ax.bar(np.arange(len(tasks)) + (i - (len(kinds) - 1) / 2) * width, [100 * rates[t] for t in tasks],
           width, label=kind.replace("_", " N=").replace("unimax", "UniMax").replace("natural", "Natural"))
  ax.set_xticks(np.arange(len(tasks)), labels, rotation=30, ha="right")
  ax.set_yscale("log")
  ax.set_ylabel("share of training tokens (%)")
  ax.set_title(f"Language distribution per mixture (budget {budget_tokens:,.0f} tokens)", pad=28)
  ax.legend(fontsize=8, ncol=len(kinds), loc="lower center", bbox_to_anchor=(0.5, 1.0), frameon=False)
  fig.tight_layout()
  os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
  fig.savefig(output, dpi=120)
  plt.close(fig)


def main(argv: Sequence[str] | None = None) -> None:
  from objectives.tasks import default_cache_dir, load_counts

  parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--corpus", required=True)
  parser.add_argument("--cache_dir", default=None, help="default: CORPUS/cache (from `python -m objectives.tasks`)")
  parser.add_argument("--train_steps", type=int, default=38_000)
  parser.add_argument("--batch_size", type=int, default=256)
  parser.add_argument("--sequence_length", type=int, default=2048)
  parser.add_argument("--plot", default=None, help="PNG path for the bar chart (default: CORPUS/mixtures.png)")
  args = parser.parse_args(argv)
  cache_dir = args.cache_dir or default_cache_dir(args.corpus)
  if not os.path.isdir(cache_dir):
    parser.error(f"no SeqIO cache at {cache_dir!r}: run `python -m objectives.tasks --corpus {args.corpus} "
                 f"--vocab VOCAB` first")
  names = sorted(d for d in os.listdir(cache_dir) if os.path.isdir(os.path.join(cache_dir, d)))
  order = [l.task_name for l in LANGUAGES if l.task_name in names]
  try:
    counts = {name: c["tokens"] for name, c in load_counts(cache_dir, order).items()}
  except FileNotFoundError as e:
    parser.error(str(e))
  budget = args.train_steps * args.batch_size * args.sequence_length
  print(f"budget: {args.train_steps:,} steps x {args.batch_size} x {args.sequence_length} = {budget:,} tokens")
  print(rates_table(counts, budget))
  plot = args.plot or os.path.join(args.corpus, "mixtures.png")
  plot_rates(counts, budget, plot)
  print(f"wrote {plot}")


if __name__ == "__main__":
  sys.exit(main())
