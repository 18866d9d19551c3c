"""Natural and UniMax (N = 1..4) mixtures over the language tasks, declared in document tokens.

  python -m data.mixtures --corpus CORPUS_DIR --train_steps 38000 --batch_size 256 \
      --sequence_length 2048 [--plot mixtures.png] [--measure 20000]

The unit. A language's share is its share of **document tokens** (the tokens of `[code]` file
`[eod]`, as SeqIO's cache counts them), the unit that stays fixed whatever the sequence length and
the objective: the paper counts SeqIO examples, but its examples are files truncated to 2048 tokens,
while codelm cuts files into chunks, so an example count would change with the sequence length and
the objective. Natural shares are proportional to each language's document tokens; UniMax
(Chung et al. 2023) allocates the budget in document tokens with at most N epochs per language.

What SeqIO gets. `seqio.Mixture` picks a task per **example** (chunk) with probability proportional to
its rate, so a token share is turned into an example rate with the task's expected document tokens
per example at this sequence length and objective (data/packing.py, exact from the cache's
histogram of document lengths, for plain and `_ul2` tasks alike): rate_l = share_l / (tokens_l /
examples_l). The budget is what the run's rows really hold: train_steps x batch rows x the document
tokens a packed row carries (padding, sentinels and mode tokens excluded), from a seeded simulation of
SeqIO's packing of this mixture; a UniMax budget and its rates are solved together. Epochs are then
what the run consumes, in expectation: SeqIO draws examples independently, so a cap holds in
expectation (measured within a few percent: `--measure`, tests/test_mixtures.py).

`--measure N` draws N examples of each mixture exactly as training does (SeqIO's sampling, SeqIO's
packing) and prints, per language, the declared share, the realized shares of examples, document
tokens and loss (target) tokens, and the realized epochs at the budget (data/mixture_shares.py).
"""

from __future__ import annotations

import quiet

if __name__ == "__main__":  # before TensorFlow, JAX and Beam are imported
  quiet.setup()

import argparse
import dataclasses
import sys
import zlib
from typing import Mapping, Sequence

import numpy as np
import seqio

import storage

from data import mixture_shares, packing
from objectives import ul2
from languages import display_name
from data.tasks import (CachedSizes, default_cache_dir, load_sizes, register_tasks,
                              register_ul2_tasks)
from data.unimax import natural_rates, unimax_rates
from data.vocab import get_vocabulary

UNIMAX_EPOCHS = (1, 2, 3, 4)
MIXTURE_KINDS = ("natural",) + tuple(f"unimax_{n}" for n in UNIMAX_EPOCHS)
OBJECTIVES = ("", "_ul2")  # mixture and task name suffixes: plain chunks, the UL2 + causal-LM mixture


def mixture_name(kind: str, suffix: str = "") -> str:
  return f"code_{kind}{suffix}"


def token_shares(kind: str, tokens: Mapping[str, float], budget_tokens: float) -> dict[str, float]:
  """Declared shares of document tokens for 'natural' or 'unimax_N' (summing to 1)."""
  if kind == "natural":
    return natural_rates(tokens)
  if kind.startswith("unimax_") and kind[len("unimax_"):].isdigit():
    return unimax_rates(tokens, budget_tokens, int(kind[len("unimax_"):]))
  raise ValueError(f"unknown mixture kind {kind!r}; choose one of {', '.join(MIXTURE_KINDS)}")


@dataclasses.dataclass(frozen=True)
class TaskStats:
  """What mixture planning needs of one objective's tasks: per task its document tokens, its expected
  examples per pass, and a sample of its examples' row lengths (for the packing simulation)."""
  tokens: dict[str, int]
  examples: dict[str, float]
  row_lengths: dict[str, np.ndarray]
  sequence_length: int


def describe_tasks(sizes: Mapping[str, CachedSizes], chunking: packing.Chunking, sequence_length: int,
                   seed: int = 0) -> TaskStats:
  """`TaskStats` for tasks with the cached sizes `sizes`, cut into examples as `chunking` says."""
  tokens = {name: s.tokens for name, s in sizes.items()}
  examples = {name: packing.examples_per_pass(s.lengths, chunking) for name, s in sizes.items()}
  # Each task's sample has its own seed (from its name): the same on every host, whatever the order.
  row_lengths = {name: packing.example_lengths(s.lengths, chunking, np.random.default_rng(
      [seed, zlib.crc32(name.encode())])) for name, s in sizes.items() if s.tokens}
  return TaskStats(tokens, examples, row_lengths, sequence_length)


@dataclasses.dataclass(frozen=True)
class MixturePlan:
  """A mixture as declared (token shares) and as SeqIO runs it (example rates), at a budget of rows."""
  kind: str
  token_shares: dict[str, float]  # declared: each task's share of document tokens
  example_rates: dict[str, float]  # given to SeqIO: each task's share of examples
  rows: int  # train_steps x batch_size
  examples_per_row: float  # expected, from the packing simulation
  tokens_per_row: float  # document tokens a packed row carries, expected
  epochs: dict[str, float]  # expected passes over each task's documents at the budget

  @property
  def budget_tokens(self) -> float:
    return self.rows * self.tokens_per_row


def plan_mixture(kind: str, stats: TaskStats, rows: int, max_iterations: int = 20) -> MixturePlan:
  """Token shares, example rates and epochs of `kind` for a run of `rows` packed rows.

  For UniMax the budget depends on the packing (how many document tokens a row holds), which depends
  on the rates, which depend on the budget: iterated from the bound rows x sequence_length until the
  budget moves by less than 0.1% (the packing simulation's own precision).
  """
  if rows < 1:
    raise ValueError(f"a mixture needs a budget of at least one row, got {rows}")
  tokens, examples = stats.tokens, stats.examples
  names = [name for name in tokens if tokens[name] > 0]
  budget = float(rows * stats.sequence_length)
  for _ in range(max_iterations):
    shares = token_shares(kind, tokens, budget)
    weights = {name: shares[name] * examples[name] / tokens[name] if tokens[name] else 0.0 for name in tokens}
    total = sum(weights.values())
    rates = {name: weight / total for name, weight in weights.items()}
    per_row = packing.examples_per_row([stats.row_lengths[n] for n in names], [rates[n] for n in names],
                                       stats.sequence_length)
    tokens_per_example = sum(rates[n] * tokens[n] / examples[n] for n in names)
    planned, budget = budget, rows * per_row * tokens_per_example  # what these rates make the rows hold
    if abs(budget - planned) <= 1e-3 * planned:
      break
  epochs = {name: shares[name] * budget / tokens[name] if tokens[name] else 0.0 for name in tokens}
  return MixturePlan(kind, shares, rates, rows, per_row, budget / rows, epochs)


def register_mixtures(stats: TaskStats, rows: int, suffix: str = "", kinds: Sequence[str] = MIXTURE_KINDS,
                      ) -> dict[str, MixturePlan]:
  """Registers `code_natural{suffix}`, `code_unimax_1{suffix}` … over the (already registered) tasks
  of `stats` at their example rates; returns the plans by mixture name."""
  plans = {}
  for kind in kinds:
    plan = plan_mixture(kind, stats, rows)
    name = mixture_name(kind, suffix)
    seqio.MixtureRegistry.remove(name)
    seqio.MixtureRegistry.add(name, [(task, rate) for task, rate in plan.example_rates.items() if rate > 0])
    plans[name] = plan
  return plans


def register_language_tasks(corpus_dir: str, vocab_path: str, sequence_length: int, cache_dir: str | None = None,
                            ul2_config=None) -> dict[str, TaskStats]:
  """Registers the language tasks (reading SeqIO's cache where it exists) and their UL2 versions;
  returns, per objective suffix ("" and "_ul2"), their `TaskStats` at `sequence_length`."""
  # Absolute: a saved tf.data iterator names the files it reads as the dataset spelled them, so a
  # relative corpus path would not restore from another working directory (the run would replay).
  corpus_dir, cache_dir = storage.resolve(corpus_dir), cache_dir and storage.resolve(cache_dir)
  vocabulary = get_vocabulary(vocab_path)
  names = register_tasks(corpus_dir, vocabulary)
  register_ul2_tasks(names, ul2_config)
  cache_dir = cache_dir or default_cache_dir(corpus_dir)
  # First in SeqIO's search order: another corpus registered earlier in this process (tests, notebooks)
  # may cache tasks of the same names, and SeqIO reads the first cache directory that has the task.
  seqio.set_global_cache_dirs([cache_dir] + [d for d in seqio.get_global_cache_dirs() if d != cache_dir])
  sizes = load_sizes(cache_dir, names)
  ul2_chunking = ul2.chunking(ul2_config or ul2.UL2Config(), sequence_length, vocabulary.extra_ids)
  return {"": describe_tasks(sizes, packing.plain_chunking(sequence_length), sequence_length),
          "_ul2": describe_tasks({f"{n}_ul2": s for n, s in sizes.items()}, ul2_chunking, sequence_length)}


def register_corpus(corpus_dir: str, vocab_path: str, rows: int, sequence_length: int,
                    cache_dir: str | None = None, ul2_config=None) -> dict[str, MixturePlan]:
  """Everything a training run needs from a corpus: the language tasks, their UL2 versions, and the
  natural / UniMax mixtures of both (`code_unimax_2`, `code_unimax_2_ul2`, …) planned for a run of
  `rows` packed rows (train_steps x batch_size) of `sequence_length` tokens."""
  task_stats = register_language_tasks(corpus_dir, vocab_path, sequence_length, cache_dir, ul2_config)
  return {name: plan for suffix, stats in task_stats.items()
          for name, plan in register_mixtures(stats, rows, suffix).items()}


# ---- tables and the plot -------------------------------------------------------------------------


def rates_table(stats: TaskStats, plans: Mapping[str, MixturePlan]) -> str:
  """A Markdown table: per language, document tokens and expected examples, then the declared share %
  and the epochs at the budget for each mixture."""
  header = "| language | tokens | examples | " + " | ".join(f"{p.kind} % | {p.kind} epochs" for p in plans.values()) + " |"
  lines = [header, "|" + "---|" * (3 + 2 * len(plans))]
  for task in stats.tokens:
    cells = " | ".join(f"{100 * p.token_shares[task]:.2f} | {p.epochs[task]:.2f}" for p in plans.values())
    lines.append(f"| {display_name(task)} | {stats.tokens[task]:,} | {stats.examples[task]:,.0f} | {cells} |")
  return "\n".join(lines)


def budget_line(plans: Mapping[str, MixturePlan], sequence_length: int) -> str:
  """The budget in rows and in the document tokens they hold, per mixture."""
  rows = next(iter(plans.values())).rows
  per_mixture = ", ".join(f"{p.kind} {p.budget_tokens:,.0f} ({100 * p.tokens_per_row / sequence_length:.1f}%)"
                          for p in plans.values())
  return f"{rows:,} rows x {sequence_length} = {rows * sequence_length:,} token slots; document tokens: {per_mixture}"


def plot_rates(plans: Mapping[str, MixturePlan], output: str) -> None:
  """Grouped bars: each language's declared share of document tokens under each mixture (log scale)."""
  import matplotlib

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  tasks = list(next(iter(plans.values())).token_shares)
  width = 0.8 / len(plans)
  fig, ax = plt.subplots(figsize=(max(8, 0.9 * len(tasks)), 4.5))
  for i, plan in enumerate(plans.values()):
    ax.bar(np.arange(len(tasks)) + (i - (len(plans) - 1) / 2) * width, [100 * plan.token_shares[t] for t in tasks],
           width, label=plan.kind.replace("_", " N=").replace("unimax", "UniMax").replace("natural", "Natural"))
  ax.set_xticks(np.arange(len(tasks)), [display_name(t) for t in tasks], rotation=30, ha="right")
  ax.set_yscale("log")
  ax.set_ylabel("share of document tokens (%)")
  budget = next(iter(plans.values())).rows
  ax.set_title(f"Language distribution per mixture (budget {budget:,} rows)", pad=28)
  ax.legend(fontsize=8, ncol=len(plans), loc="lower center", bbox_to_anchor=(0.5, 1.0), frameon=False)
  fig.tight_layout()
  storage.makedirs(storage.dirname(output))
  storage.save_figure(fig, output, dpi=120)
  plt.close(fig)


# ---- command line --------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> None:
  parser = argparse.ArgumentParser(prog="python -m data.mixtures", description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--corpus", required=True)
  parser.add_argument("--vocab", default=None, help="default: CORPUS/spm.model")
  parser.add_argument("--cache_dir", default=None, help="default: CORPUS/cache (from `python -m data.tasks`)")
  parser.add_argument("--train_steps", type=int, default=38_000)
  parser.add_argument("--batch_size", type=int, default=256)
  parser.add_argument("--sequence_length", type=int, default=2048)
  parser.add_argument("--plot", default=None, help="PNG path for the bar chart (default: CORPUS/mixtures.png)")
  parser.add_argument("--measure", type=int, default=0, metavar="N",
                      help="draw N examples of each mixture as training does and print what it delivers")
  parser.add_argument("--mixtures", default=",".join(MIXTURE_KINDS),
                      help="kinds to show and measure, comma-separated (default: all)")
  parser.add_argument("--seed", type=int, default=0, help="the sampling seed of --measure")
  parser.add_argument("--fim_rate", type=float, default=0.0,
                      help="UL2Config.fim_rate: the share of causal-LM examples made fill-in-the-middle (default 0)")
  parser.add_argument("--fim_spm_rate", type=float, default=0.5, help="UL2Config.fim_spm_rate: of those, in SPM")
  args = parser.parse_args(argv)
  try:
    ul2_config = ul2.UL2Config(fim_rate=args.fim_rate, fim_spm_rate=args.fim_spm_rate)
  except ValueError as error:
    parser.error(str(error).replace("UL2Config.", "--"))
  for flag in ("train_steps", "batch_size", "sequence_length"):
    if getattr(args, flag) < 1:
      parser.error(f"--{flag} must be positive, got {getattr(args, flag)}")
  if args.measure < 0:
    parser.error(f"--measure must be >= 0, got {args.measure}")
  kinds = [k.strip() for k in args.mixtures.split(",") if k.strip()]
  unknown = [k for k in kinds if k not in MIXTURE_KINDS]
  if unknown or not kinds:
    parser.error(f"--mixtures: unknown kind(s) {unknown}; choose among {', '.join(MIXTURE_KINDS)}")
  cache_dir = args.cache_dir or default_cache_dir(args.corpus)
  vocab = args.vocab or storage.join(args.corpus, "spm.model")
  for flag, path in (("--cache_dir", cache_dir), ("--vocab", vocab)):
    if not storage.exists(path):
      parser.error(f"{flag} {path!r} does not exist: run `python -m data.vocab` and "
                   f"`python -m data.tasks --corpus {args.corpus} --vocab VOCAB` first")
  rows = args.train_steps * args.batch_size
  try:
    task_stats = register_language_tasks(args.corpus, vocab, args.sequence_length, cache_dir, ul2_config)
    plans = {name: plan for suffix, stats in task_stats.items()
             for name, plan in register_mixtures(stats, rows, suffix, kinds).items()}
  except (FileNotFoundError, ValueError) as error:
    parser.error(str(error))
  print(f"budget: {args.train_steps:,} steps x {args.batch_size} rows of {args.sequence_length} tokens")
  for suffix, title in (("", "plain chunks (code_*)"), ("_ul2", "UL2 + causal LM (code_*_ul2)")):
    shown = {mixture_name(k, suffix): plans[mixture_name(k, suffix)] for k in kinds}
    print(f"\n{title}: {budget_line(shown, args.sequence_length)}")
    print(rates_table(task_stats[suffix], shown))
  plot = args.plot or storage.join(args.corpus, "mixtures.png")
  plot_rates({mixture_name(k, "_ul2"): plans[mixture_name(k, "_ul2")] for k in kinds}, plot)
  print(f"wrote {plot}")
  if args.measure:
    for suffix in OBJECTIVES:
      for kind in kinds:
        name = mixture_name(kind, suffix)
        measured = mixture_shares.measure(name, plans[name], task_stats[suffix], args.sequence_length, args.measure,
                                          seed=args.seed)
        print(f"\n{mixture_shares.format_measurement(name, measured, ul2_config if suffix else None)}")


if __name__ == "__main__":
  sys.exit(main())
