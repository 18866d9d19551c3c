"""The examples a registered task or mixture gives and the packed rows training reads: one definition,
used by training (data/batches.py) and by the mixture measurement (data/mixture_shares.py)."""

from __future__ import annotations

import dataclasses
import enum
from typing import Sequence

import jax
import seqio
import tensorflow as tf

from objectives.ul2 import DecoderOnlyPrefixLMConverter

# Tasks of prompt -> completion pairs (data/practical_tasks.py): `inputs` and `targets`, read causally.
PROMPT_COMPLETION_TASKS: set[str] = set()


class PromptCompletionConverter(DecoderOnlyPrefixLMConverter):
  """Prompt and completion in one causal row, the loss on the completion only: the form the sampler
  decodes in (a causal prefill of the prompt, then the completion), unlike the UL2 prefix LM's
  bidirectional prefix."""

  def _convert_example(self, features):
    converted = super()._convert_example(features)
    return {**converted, "decoder_causal_attention": tf.zeros_like(converted["decoder_causal_attention"])}


class Objective(enum.Enum):
  """What a task's examples train, which decides how they are packed (packed_rows)."""

  CAUSAL = "causal"  # plain language tasks (code_*): `targets` only, the loss on every token
  UL2 = "ul2"  # UL2 + causal LM (code_*_ul2): `inputs` read bidirectionally, the loss on `targets`
  PROMPT_COMPLETION = "prompt_completion"  # practical tasks: prompt and completion read causally,
  # the loss on the completion only


@dataclasses.dataclass(frozen=True)
class Stream:
  """A registered task or mixture, looked up once: its SeqIO provider, its tasks and its objective."""

  name: str
  provider: seqio.Task | seqio.Mixture
  tasks: tuple[seqio.Task, ...]
  objective: Objective

  @property
  def prefix_lm(self) -> bool:  # `inputs` and `targets`, as DecoderOnlyPrefixLMConverter reads them
    return self.objective is not Objective.CAUSAL


def resolve(name: str) -> Stream:
  """`name` looked up in SeqIO's registries (once per pipeline: the Stream is passed on)."""
  provider = seqio.get_mixture_or_task(name)
  tasks = tuple(provider.tasks) if isinstance(provider, seqio.Mixture) else (provider,)
  if "inputs" not in provider.output_features:  # UL2 tasks emit `inputs` and `targets`; plain ones `targets`
    objective = Objective.CAUSAL
  elif {task.name for task in tasks} <= PROMPT_COMPLETION_TASKS:
    objective = Objective.PROMPT_COMPLETION
  else:
    objective = Objective.UL2
  return Stream(name, provider, tasks, objective)


def feature_lengths(source: Stream, sequence_length: int) -> dict[str, int]:
  """TASK_FEATURE_LENGTHS for rows of `sequence_length` tokens (see DecoderOnlyPrefixLMConverter)."""
  if source.prefix_lm:
    return {"inputs": sequence_length, "targets": sequence_length}
  return {"targets": sequence_length}


def examples(source: Stream, sequence_length: int, split: str, shuffle: bool, seed: int | None,
             num_epochs: int | None, use_cached: bool = True, passthrough_features: Sequence[str] = ()
             ) -> tf.data.Dataset:
  """This host's examples of `source`, mixed at the mixture's rates, before packing (what
  `seqio.get_dataset` does ahead of the feature converter). `passthrough_features` keeps more
  features of a mixture's examples (the measurement keeps `language`)."""
  provider = source.provider
  kwargs = {"passthrough_features": list(passthrough_features)} if passthrough_features else {}
  dataset = provider.get_dataset(
      feature_lengths(source, sequence_length), split=split, shuffle=shuffle, seed=seed,
      use_cached=use_cached and all(task.cache_dir for task in source.tasks),
      shard_info=seqio.ShardInfo(jax.process_index(), jax.process_count()), num_epochs=num_epochs, **kwargs)
  # A mixture keeps only the output features (and any passed through); a task gives its extras too
  # (the language tag), which the packer would drop with a warning. Checked on the spec: no map otherwise.
  keep = set(provider.output_features) | set(passthrough_features)
  if set(dataset.element_spec) <= keep:
    return dataset
  return dataset.map(lambda example: {k: v for k, v in example.items() if k in keep},
                     num_parallel_calls=tf.data.AUTOTUNE)


def packed_rows(dataset: tf.data.Dataset, source: Stream, sequence_length: int) -> tf.data.Dataset:
  """Examples of `source` packed into rows of `sequence_length` tokens by SeqIO's feature converters."""
  converter = {Objective.CAUSAL: seqio.DecoderFeatureConverter, Objective.UL2: DecoderOnlyPrefixLMConverter,
               Objective.PROMPT_COMPLETION: PromptCompletionConverter}[source.objective](pack=True)
  return converter(dataset, feature_lengths(source, sequence_length))
