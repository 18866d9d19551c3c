"""The examples a registered task or mixture gives and the packed rows training reads: one definition,
used by training (data/batches.py) and by the mixture measurement (data/mixture_shares.py)."""

from __future__ import annotations

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


def tasks_of(name: str) -> list[seqio.Task]:
  provider = seqio.get_mixture_or_task(name)
  return provider.tasks if isinstance(provider, seqio.Mixture) else [provider]


def is_prefix_lm(name: str) -> bool:
  """UL2 tasks emit `inputs` and `targets`; plain language tasks only `targets`."""
  return "inputs" in seqio.get_mixture_or_task(name).output_features


def feature_lengths(name: str, sequence_length: int) -> dict[str, int]:
  """TASK_FEATURE_LENGTHS for rows of `sequence_length` tokens (see DecoderOnlyPrefixLMConverter)."""
  if is_prefix_lm(name):
    return {"inputs": sequence_length, "targets": sequence_length}
  return {"targets": sequence_length}


def examples(name: str, sequence_length: int, split: str, shuffle: bool, seed: int | None,
             num_epochs: int | None, use_cached: bool = True, passthrough_features: Sequence[str] = ()
             ) -> tf.data.Dataset:
  """This host's examples of `name`, mixed at the mixture's rates, before packing (what
  `seqio.get_dataset` does ahead of the feature converter). `passthrough_features` keeps more
  features of a mixture's examples (the measurement keeps `language`)."""
  provider = seqio.get_mixture_or_task(name)
  kwargs = {"passthrough_features": list(passthrough_features)} if passthrough_features else {}
  dataset = provider.get_dataset(
      feature_lengths(name, sequence_length), split=split, shuffle=shuffle, seed=seed,
      use_cached=use_cached and all(task.cache_dir for task in tasks_of(name)),
      shard_info=seqio.ShardInfo(jax.process_index(), jax.process_count()), num_epochs=num_epochs, **kwargs)
  # A mixture keeps only the output features (and any passed through); a task gives its extras too
  # (the language tag), which the packer would drop with a warning. Checked on the spec: no map otherwise.
  keep = set(provider.output_features) | set(passthrough_features)
  if set(dataset.element_spec) <= keep:
    return dataset
  return dataset.map(lambda example: {k: v for k, v in example.items() if k in keep},
                     num_parallel_calls=tf.data.AUTOTUNE)


def packed_rows(dataset: tf.data.Dataset, name: str, sequence_length: int) -> tf.data.Dataset:
  """Examples of `name` packed into rows of `sequence_length` tokens by SeqIO's feature converters."""
  if is_prefix_lm(name):
    prompt_completion = {task.name for task in tasks_of(name)} <= PROMPT_COMPLETION_TASKS
    converter = (PromptCompletionConverter if prompt_completion else DecoderOnlyPrefixLMConverter)(pack=True)
  else:
    converter = seqio.DecoderFeatureConverter(pack=True)
  return converter(dataset, feature_lengths(name, sequence_length))
