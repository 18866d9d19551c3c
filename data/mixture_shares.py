"""What a mixture really delivers: examples drawn and packed exactly as training does, per language.

`measure` takes N examples of a registered mixture from the stream training reads
(data/stream.py: SeqIO's sampling at the mixture's rates, shuffled, seeded; the language tag
passed through), packs the same examples with SeqIO's feature converter, and counts per language:
examples, document tokens (every non-padding token but sentinels and mode tokens: the declared unit),
loss tokens (targets) and the realized epochs at the budget. `python -m data.mixtures --measure N`
prints it for every mixture.
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
from data.vocab import MODE_TOKENS, special_token_ids

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


def draw(mixture: str, sequence_length: int, num_examples: int, seed: int = 0, progress: bool = True) -> Draw:
  """`num_examples` examples of `mixture` as training draws them (split train, shuffled, `seed`)."""
  source = stream.resolve(mixture)
  examples = stream.examples(source, sequence_length, "train", shuffle=True, seed=seed, num_epochs=None,
                             passthrough_features=[LANGUAGE_FEATURE])
  provider = source.tasks[0]
  vocabulary = provider.output_features["targets"].vocabulary
  special = np.zeros(vocabulary.vocab_size, bool)
  special[vocabulary.vocab_size - vocabulary.extra_ids:] = True  # sentinels
  special[[special_token_ids(vocabulary)[t] for t in MODE_TOKENS]] = True
  suffix = "_ul2" if source.objective is stream.Objective.UL2 else ""  # the tasks' names (data/tasks.py)
  task, inputs_list, targets_list = [], [], []
  for example in tqdm.tqdm(examples.take(num_examples).as_numpy_iterator(), total=num_examples,
                           desc=f"drawing {mixture}", unit=" examples", disable=not progress, leave=False):
    task.append(LANGUAGES[int(example[LANGUAGE_FEATURE])].task_name + suffix)
    inputs_list.append(example.get("inputs", np.zeros(0, np.int32)))
    targets_list.append(example["targets"])
  row_tokens = np.array([len(i) + len(t) for i, t in zip(inputs_list, targets_list)])
  document_tokens = np.array([int((~special[i]).sum() + (~special[t]).sum()) for i, t in zip(inputs_list, targets_list)])
  loss_tokens = np.array([len(t) for t in targets_list])
  return Draw(task, row_tokens, document_tokens, loss_tokens,
              _pack(inputs_list, targets_list, source, sequence_length))


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
  return Measurement(plan, sequence_length, len(tasks), rows, share(np.ones(len(tasks))), document_share,
                     share(drawn.loss_tokens), per_row, epochs)


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


def format_measurement(name: str, m: Measurement) -> str:
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
  return "\n".join(lines)

