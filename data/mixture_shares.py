"""What a mixture really delivers: examples drawn and packed exactly as training does, per language.

`measure` takes N examples of a registered mixture from the stream training reads
(data/stream.py: SeqIO's sampling at the mixture's rates, shuffled, seeded; the language tag
passed through), packs the same examples with SeqIO's feature converter, and counts per language:
examples, document tokens (every non-padding token but sentinels and mode tokens: the declared unit),
loss tokens (targets) and the realized epochs at the budget; for the UL2 mixtures also the share of
examples of each objective (span corruption, prefix LM, causal LM, FIM's PSM and SPM) against the
configured rates. `python -m data.mixtures --measure N` prints it for every mixture.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import numpy as np
import tensorflow as tf
import tqdm

from data import stream
from languages import LANGUAGES, display_name
from data.tasks import LANGUAGE_FEATURE
from data.vocab import MODE_TOKENS, fim_token_ids, special_token_ids

OBJECTIVE_FEATURE = "objective"  # objectives/ul2/: the index of an example's objective in UL2Config.names

if TYPE_CHECKING:  # for annotations only: data.mixtures plans, this module measures, its main() prints both
  from data.mixtures import MixturePlan, TaskStats


@dataclasses.dataclass(frozen=True)
class Draw:
  """N examples in stream order, and the rows SeqIO packs them into."""
  task: list[str]  # the example's task (e.g. code_go_ul2)
  row_tokens: np.ndarray  # tokens the example takes in a row (inputs + targets)
  document_tokens: np.ndarray  # of which document tokens (no sentinels, no mode token)
  loss_tokens: np.ndarray  # of which targets (loss-weighted)
  examples_per_row: np.ndarray  # per packed row, how many examples it holds, in order
  objective: np.ndarray | None = None  # per example, its objective's index in UL2Config.names (UL2 mixtures)


def draw(mixture: str, sequence_length: int, num_examples: int, seed: int = 0, progress: bool = True) -> Draw:
  """`num_examples` examples of `mixture` as training draws them (split train, shuffled, `seed`)."""
  source = stream.resolve(mixture)
  ul2 = source.objective is stream.Objective.UL2
  examples = stream.examples(source, sequence_length, "train", shuffle=True, seed=seed, num_epochs=None,
                             passthrough_features=[LANGUAGE_FEATURE] + ([OBJECTIVE_FEATURE] if ul2 else []))
  provider = source.tasks[0]
  vocabulary = provider.output_features["targets"].vocabulary
  special = np.zeros(vocabulary.vocab_size, bool)
  special[vocabulary.vocab_size - vocabulary.extra_ids:] = True  # sentinels
  special[[special_token_ids(vocabulary)[t] for t in MODE_TOKENS]] = True
  try:  # FIM's sentinels are no document tokens either (a vocabulary trained before FIM has none)
    special[list(fim_token_ids(vocabulary).values())] = True
  except ValueError:
    pass
  suffix = "_ul2" if ul2 else ""  # the tasks' names (data/tasks.py)
  task, inputs_list, targets_list, objective = [], [], [], []
  for example in tqdm.tqdm(examples.take(num_examples).as_numpy_iterator(), total=num_examples,
                           desc=f"drawing {mixture}", unit=" examples", disable=not progress, leave=False):
    task.append(LANGUAGES[int(example[LANGUAGE_FEATURE])].task_name + suffix)
    inputs_list.append(example.get("inputs", np.zeros(0, np.int32)))
    targets_list.append(example["targets"])
    objective.append(int(example.get(OBJECTIVE_FEATURE, -1)))
  row_tokens = np.array([len(i) + len(t) for i, t in zip(inputs_list, targets_list)])
  document_tokens = np.array([int((~special[i]).sum() + (~special[t]).sum()) for i, t in zip(inputs_list, targets_list)])
  loss_tokens = np.array([len(t) for t in targets_list])
  return Draw(task, row_tokens, document_tokens, loss_tokens,
              _pack(inputs_list, targets_list, source, sequence_length), np.array(objective) if ul2 else None)


def _pack(inputs_list, targets_list, source: stream.Stream, sequence_length: int) -> np.ndarray:
  """The same examples, in the same order, through the feature converter training uses."""

  def generate():
    for inputs, targets in zip(inputs_list, targets_list):
      yield ({"inputs": inputs, "targets": targets} if source.prefix_lm else {"targets": targets})

  keys = ("inputs", "targets") if source.prefix_lm else ("targets",)
  dataset = tf.data.Dataset.from_generator(
      generate, output_signature={k: tf.TensorSpec([None], tf.int32) for k in keys})
  segments = [int(row["decoder_segment_ids"].max())
              for row in stream.packed_rows(dataset, source, sequence_length).as_numpy_iterator()]
  return np.array(segments)


@dataclasses.dataclass(frozen=True)
class Measurement:
  plan: MixturePlan
  sequence_length: int
  num_examples: int
  rows: int  # rows the drawn examples packed into
  examples_share: dict[str, float]
  document_share: dict[str, float]
  loss_share: dict[str, float]
  document_tokens_per_row: float
  epochs: dict[str, float]  # realized: the run's rows x realized document tokens per row x share / corpus
  objective_share: dict[int, float] = dataclasses.field(default_factory=dict)  # UL2: objective index -> share


def summarize(drawn: Draw, plan: MixturePlan, stats: TaskStats, sequence_length: int) -> Measurement:
  tasks = np.array(drawn.task)

  def share(values: np.ndarray) -> dict[str, float]:
    total = values.sum()
    return {name: float(values[tasks == name].sum() / total) for name in stats.tokens}

  rows = len(drawn.examples_per_row)
  per_row = float(drawn.document_tokens.sum() / rows)
  document_share = share(drawn.document_tokens)
  epochs = {name: plan.rows * per_row * document_share[name] / stats.tokens[name] if stats.tokens[name] else 0.0
            for name in stats.tokens}
  objective_share = {}
  if drawn.objective is not None and len(drawn.objective):
    objective_share = {int(i): float(np.mean(drawn.objective == i)) for i in np.unique(drawn.objective)}
  return Measurement(plan, sequence_length, len(tasks), rows, share(np.ones(len(tasks))), document_share,
                     share(drawn.loss_tokens), per_row, epochs, objective_share)


def measure(mixture: str, plan: MixturePlan, stats: TaskStats, sequence_length: int, num_examples: int,
            seed: int = 0) -> Measurement:
  return summarize(draw(mixture, sequence_length, num_examples, seed), plan, stats, sequence_length)


def document_tokens_in_rows(drawn: Draw, rows: int) -> dict[str, int]:
  """Per task, the document tokens of the examples in the first `rows` packed rows."""
  if rows > len(drawn.examples_per_row):
    raise ValueError(f"only {len(drawn.examples_per_row)} rows were drawn, {rows} asked")
  count = int(drawn.examples_per_row[:rows].sum())
  tasks = np.array(drawn.task[:count])
  return {name: int(drawn.document_tokens[:count][tasks == name].sum()) for name in set(drawn.task)}


def format_measurement(name: str, m: Measurement, ul2_config=None) -> str:
  """A Markdown table of declared against realized, per language, with the row figures above it."""
  plan = m.plan
  lines = [f"{name}: {m.num_examples:,} examples drawn as training draws them, packed into {m.rows:,} rows of "
           f"{m.sequence_length}; examples per row {m.num_examples / m.rows:.2f} (planned {plan.examples_per_row:.2f}), "
           f"document tokens per row {m.document_tokens_per_row:,.1f} (planned {plan.tokens_per_row:,.1f}); "
           f"epochs at the budget of {plan.rows:,} rows",
           "",
           "| language | declared % | examples % | document tokens % | loss tokens % | planned epochs | realized epochs |",
           "|---|---|---|---|---|---|---|"]
  for task in plan.token_shares:
    lines.append(f"| {display_name(task)} | {100 * plan.token_shares[task]:.2f} | {100 * m.examples_share[task]:.2f} | "
                 f"{100 * m.document_share[task]:.2f} | {100 * m.loss_share[task]:.2f} | {plan.epochs[task]:.3f} | "
                 f"{m.epochs[task]:.3f} |")
  gap = max(abs(m.document_share[t] - plan.token_shares[t]) for t in plan.token_shares)
  lines.append(f"\nlargest gap between declared and realized document-token share: {100 * gap:.2f} points")
  if m.objective_share and ul2_config is not None:
    lines += ["", "| objective | configured % of examples | delivered % |", "|---|---|---|"]
    configured = objective_rates(ul2_config)
    for index, name in enumerate(ul2_config.names):
      lines.append(f"| {name} | {100 * configured[index]:.2f} | {100 * m.objective_share.get(index, 0.0):.2f} |")
    if ul2_config.fim:
      fim_share = sum(m.objective_share.get(i, 0.0) for i in (len(configured) - 2, len(configured) - 1))
      causal = fim_share + m.objective_share.get(len(configured) - 3, 0.0)
      spm = m.objective_share.get(len(configured) - 1, 0.0)
      lines.append(f"\nFIM: {100 * fim_share / causal if causal else 0:.1f}% of the causal-LM share delivered as FIM "
                   f"(fim_rate {ul2_config.fim_rate:g}; a chunk whose FIM example does not fit stays causal), "
                   f"{100 * spm / fim_share if fim_share else 0:.1f}% of those SPM (fim_spm_rate {ul2_config.fim_spm_rate:g})")
  return "\n".join(lines)


def objective_rates(config) -> list[float]:
  """The configured share of examples of each objective of `config.names` (UL2Config): the drawn rates,
  with FIM's split into PSM and SPM."""
  rates = list(config.draw_rates)
  if config.fim:
    fim = rates.pop()
    rates += [fim * (1 - config.fim_spm_rate), fim * config.fim_spm_rate]
  return rates

