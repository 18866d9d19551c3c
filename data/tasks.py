"""One SeqIO Task per language over the corpus shards, and SeqIO's Beam caching pass that counts them.

Each file becomes `[code]` + tokens(text) + `[eod]` (the ids are prepended and appended, so a file
that literally contains the string "[code]" is not mistaken for the marker). Files longer than the
sequence length are split into consecutive chunks, never truncated; the chunking runs after the
cache placeholder, so the cache (and its token counts) holds whole files and any sequence length
can read it.

  python -m data.tasks --corpus CORPUS_DIR --vocab spm.model [--cache_dir DIR] [--runner ...]

caches every language's train and validation split with SeqIO's own Beam transforms (DirectRunner by
default; other Beam pipeline options pass through unchanged) and prints the per-task counts.
"""

from __future__ import annotations

import quiet

if __name__ == "__main__":  # before TensorFlow, JAX and Beam are imported
  quiet.setup()

import argparse
import dataclasses
import functools
import sys
from typing import Mapping, Sequence

import seqio
import tensorflow as tf

import storage
from data import records
from languages import LANGUAGES, Language
from data.vocab import CODE_TOKEN, DEFAULT_EXTRA_IDS, EOD_TOKEN, MODE_TOKENS, get_vocabulary, special_token_ids
from objectives.ul2 import UL2Config, ul2_objectives

CACHE_SUBDIR = "cache"


def default_cache_dir(corpus_dir: str) -> str:
  return storage.join(corpus_dir, CACHE_SUBDIR)


def wrap_code_and_eod(dataset: tf.data.Dataset, code_id: int, eod_id: int) -> tf.data.Dataset:
  """targets -> [code] + targets + [eod], on token ids."""

  def wrap(example):
    targets = example["targets"]
    marker = lambda i: tf.constant([i], dtype=targets.dtype)  # noqa: E731
    return {**example, "targets": tf.concat([marker(code_id), targets, marker(eod_id)], axis=0)}

  return dataset.map(wrap, num_parallel_calls=tf.data.AUTOTUNE)


def split_into_chunks(dataset: tf.data.Dataset, sequence_length: Mapping[str, int] | None = None,
                      output_features=None, feature: str = "targets") -> tf.data.Dataset:
  """Consecutive chunks of at most sequence_length[feature] tokens: every token kept exactly once.

  (SeqIO would otherwise truncate a long file to the sequence length and drop the rest.)
  """
  del output_features
  if not sequence_length or sequence_length.get(feature) is None:
    return dataset
  length = int(sequence_length[feature])

  def chunk(example):
    tokens = example[feature]
    starts = tf.range(0, tf.size(tokens), length)
    rows = tf.RaggedTensor.from_row_lengths(tokens, tf.minimum(length, tf.size(tokens) - starts))
    return {feature: rows}

  return dataset.map(chunk, num_parallel_calls=tf.data.AUTOTUNE).unbatch()


LANGUAGE_FEATURE = "language"


def tag_language(dataset: tf.data.Dataset, language_index: int) -> tf.data.Dataset:
  """Adds `language`, the index of the example's language in LANGUAGES. Mixtures drop it (it is not an
  output feature) unless asked to pass it through: the mixture measurement attributes examples by it."""
  return dataset.map(lambda example: {**example, LANGUAGE_FEATURE: tf.constant(language_index, tf.int32)},
                     num_parallel_calls=tf.data.AUTOTUNE)


def _is_tag(preprocessor) -> bool:
  return getattr(preprocessor, "func", None) is tag_language


def task_name(language: Language) -> str:
  return language.task_name


def register_tasks(corpus_dir: str, vocabulary: seqio.Vocabulary, languages: Sequence[Language] = LANGUAGES,
                   ) -> list[str]:
  """Registers `code_{language}` for every language with shards in corpus_dir; returns the names.

  Re-registering replaces earlier definitions, so workers and tests may call this repeatedly.
  """
  code_id = vocabulary.tokenizer.piece_to_id(CODE_TOKEN)
  eod_id = vocabulary.tokenizer.piece_to_id(EOD_TOKEN)
  if code_id in (0, vocabulary.tokenizer.unk_id()) or eod_id in (0, vocabulary.tokenizer.unk_id()):
    raise ValueError(f"vocabulary {getattr(vocabulary, 'sentencepiece_model_file', '')!r} has no "
                     f"{CODE_TOKEN} / {EOD_TOKEN} pieces; train it with `python -m data.vocab`")
  output_features = {"targets": seqio.Feature(vocabulary, add_eos=False, dtype=tf.int32)}
  names = []
  for language in languages:
    if not records.shard_files(corpus_dir, language.name, "train"):
      continue
    source = seqio.TFExampleDataSource(
        split_to_filepattern={split: records.shard_pattern(corpus_dir, language.name, split)
                              for split in records.SPLITS},
        feature_description={records.TEXT: tf.io.FixedLenFeature([], tf.string)})
    seqio.TaskRegistry.remove(language.task_name)
    seqio.TaskRegistry.add(
        language.task_name, source=source, output_features=output_features,
        preprocessors=[
            functools.partial(seqio.preprocessors.rekey, key_map={"targets": records.TEXT}),
            seqio.preprocessors.tokenize,
            functools.partial(wrap_code_and_eod, code_id=code_id, eod_id=eod_id),
            seqio.CacheDatasetPlaceholder(),
            split_into_chunks,
            functools.partial(tag_language, language_index=LANGUAGES.index(language)),
        ])
    names.append(language.task_name)
  if not names:
    raise ValueError(f"no language has training shards under {corpus_dir!r}; build it with "
                     "`python -m data.corpus`")
  return names


def register_ul2_tasks(names: Sequence[str], config=None) -> list[str]:
  """`{name}_ul2` for each registered language task: the same documents through the UL2 + causal-LM
  mixture (objectives/ul2/) instead of plain chunking; features `inputs` and `targets`. With
  `config.fim_rate` the vocabulary must have the FIM sentinels (a ValueError naming its file)."""
  config = config or UL2Config()
  ul2_names = []
  for name in names:
    base = seqio.get_mixture_or_task(name)
    vocabulary = base.output_features["targets"].vocabulary
    special = special_token_ids(vocabulary)
    mode_ids = [special[token] for token in MODE_TOKENS]
    features = {key: seqio.Feature(vocabulary, add_eos=False, dtype=tf.int32) for key in ("inputs", "targets")}
    objectives = functools.partial(ul2_objectives, config=config, mode_token_ids=mode_ids,
                                   document_ids=(special[CODE_TOKEN], special[EOD_TOKEN]))
    tag = next(p for p in base.preprocessors if _is_tag(p))
    preprocessors = [p for p in base.preprocessors if p is not split_into_chunks and not _is_tag(p)] + [objectives, tag]
    seqio.TaskRegistry.remove(f"{name}_ul2")
    seqio.TaskRegistry.add(f"{name}_ul2", source=base.source, output_features=features, preprocessors=preprocessors)
    ul2_names.append(f"{name}_ul2")
  return ul2_names


@dataclasses.dataclass(frozen=True)
class CachedSizes:
  """One task split as SeqIO's cache holds it: whole documents ([code] file [eod]) before chunking."""
  documents: int
  tokens: int  # incl. [code] and [eod]
  lengths: tuple[tuple[int, int], ...]  # (document length in tokens, documents of that length), ascending


def lengths_path(task_cache_dir: str, split: str) -> str:
  """The histogram of document lengths `cache_tasks` writes beside SeqIO's stats.{split}.json."""
  return storage.join(task_cache_dir, f"lengths.{split}.json")


def load_sizes(cache_dir: str, names: Sequence[str], split: str = "train") -> dict[str, CachedSizes]:
  """Per task: documents, tokens and the document-length histogram, from the cache pass's files."""
  rerun = "run `python -m data.tasks --corpus CORPUS_DIR --vocab VOCAB` to cache and count the tasks"
  sizes = {}
  for name in names:
    task_dir = storage.join(cache_dir, seqio.get_task_dir_from_name(name))
    paths = (seqio.get_cached_stats_path(task_dir, split), lengths_path(task_dir, split))
    for path in paths:
      if not storage.exists(path):
        raise FileNotFoundError(f"no SeqIO cache statistics at {path}; {rerun}")
    stats = storage.read_json(paths[0])
    lengths = tuple((int(n), int(c)) for n, c in storage.read_json(paths[1])["targets"])
    size = CachedSizes(int(stats["examples"]), int(stats.get("targets_tokens", 0)), lengths)
    if sum(c for _, c in lengths) != size.documents or sum(n * c for n, c in lengths) != size.tokens:
      raise ValueError(f"{paths[1]} does not match {paths[0]} (a cache pass was interrupted?); {rerun}")
    sizes[name] = size
  return sizes


def _document_length(example) -> int:
  return len(example["targets"])


def _length_histogram(pairs: Sequence[tuple[int, int]]) -> dict:
  return {"targets": sorted(pairs)}


def _register_from_paths(corpus_dir: str, vocab_path: str, extra_ids: int) -> list[str]:
  """Picklable set-up for Beam workers: load the vocabulary and register the tasks there too."""
  return register_tasks(corpus_dir, get_vocabulary(vocab_path, extra_ids=extra_ids))


def cache_tasks(corpus_dir: str, vocab_path: str, cache_dir: str | None = None,
                pipeline_args: Sequence[str] | None = None, extra_ids: int = DEFAULT_EXTRA_IDS
                ) -> dict[str, CachedSizes]:
  """Runs SeqIO's caching transforms (PreprocessTask -> tfrecords + info + stats) for every language
  task and split as one Beam pipeline; returns the train-split counts."""
  import apache_beam as beam
  from apache_beam.options.pipeline_options import PipelineOptions
  from seqio import beam_utils

  cache_dir = cache_dir or default_cache_dir(corpus_dir)
  setup = functools.partial(_register_from_paths, corpus_dir, vocab_path, extra_ids)
  names = setup()
  with beam.Pipeline(options=PipelineOptions(quiet.beam_worker_args(pipeline_args or []))) as pipeline:
    for name in names:
      task = seqio.get_mixture_or_task(name)
      output_dir = storage.join(cache_dir, seqio.get_task_dir_from_name(name))
      storage.makedirs(output_dir)
      written = []
      for split in task.splits:
        label = f"{name}_{split}"
        transform = beam_utils.PreprocessTask(task, split, setup_fn=setup)
        examples = pipeline | f"{label}_preprocess" >> transform
        num_shards = len(transform.shards)
        written.append(examples | f"{label}_tfrecord" >> beam_utils.WriteExampleTfRecord(
            seqio.get_cached_tfrecord_prefix(output_dir, split), num_shards=num_shards))
        written.append(examples | f"{label}_info" >> beam_utils.GetInfo(num_shards)
                       | f"{label}_write_info" >> beam_utils.WriteJson(seqio.get_cached_info_path(output_dir, split)))
        written.append(examples | f"{label}_stats" >> beam_utils.GetStats(task.output_features)
                       | f"{label}_write_stats" >> beam_utils.WriteJson(seqio.get_cached_stats_path(output_dir, split)))
        # Document lengths: mixtures need how many chunks (examples) a task makes at any sequence length.
        written.append(examples | f"{label}_length" >> beam.Map(_document_length)
                       | f"{label}_count_lengths" >> beam.combiners.Count.PerElement()
                       | f"{label}_all_lengths" >> beam.combiners.ToList()
                       | f"{label}_histogram" >> beam.Map(_length_histogram)
                       | f"{label}_write_lengths" >> beam_utils.WriteJson(lengths_path(output_dir, split)))
      # SeqIO reads a task's cache only once COMPLETED exists: write it after every split's outputs.
      _ = (written | f"{name}_flatten" >> beam.Flatten() | f"{name}_nothing" >> beam.Filter(lambda _: False)
           | f"{name}_completed" >> beam.io.textio.WriteToText(
               storage.join(output_dir, "COMPLETED"), num_shards=1, shard_name_template=""))
  return load_sizes(cache_dir, names)


TABLE3_FILE = "table3.md"


def paper_table3(sizes: Mapping[str, CachedSizes]) -> str:
  """The paper's Table 3 for this corpus: each language's extensions and share of the examples in SeqIO's
  cache (train split), beside the paper's share (000_..., Appendix C), as Markdown."""
  total = sum(size.documents for size in sizes.values())
  lines = ["| language | extensions | examples | share (%) | paper's share (%) |", "|---|---|---|---|---|"]
  for language in LANGUAGES:
    size = sizes.get(task_name(language))
    if size is None:
      continue
    share = 100.0 * size.documents / total if total else 0.0
    lines.append(f"| {language.display_name} | {' '.join(language.extensions)} | {size.documents:,} | "
                 f"{share:.2f} | {language.natural_share:.2f} |")
  lines.append(f"| total | | {total:,} | 100.00 | |")
  return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> None:
  parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--corpus", required=True, help="corpus directory from `python -m data.corpus`")
  parser.add_argument("--vocab", required=True, help="SentencePiece model from `python -m data.vocab`")
  parser.add_argument("--cache_dir", default=None, help="default: CORPUS/cache")
  parser.add_argument("--extra_ids", type=int, default=DEFAULT_EXTRA_IDS)
  args, pipeline_args = parser.parse_known_args(argv)
  for flag, path in (("--corpus", args.corpus), ("--vocab", args.vocab)):
    if not storage.exists(path):
      parser.error(f"{flag} {path!r} does not exist")
  try:
    counts = cache_tasks(args.corpus, args.vocab, args.cache_dir, pipeline_args, args.extra_ids)
  except (ValueError, FileNotFoundError) as e:
    parser.error(str(e))
  print(f"{'task':<20} {'files':>10} {'tokens':>14}")
  for name, c in counts.items():
    print(f"{name:<20} {c.documents:>10,} {c.tokens:>14,}")
  print(f"cached in {args.cache_dir or default_cache_dir(args.corpus)}")
  table = storage.join(args.corpus, TABLE3_FILE)
  storage.write_atomic(table, paper_table3(counts))
  print(f"the paper's Table 3 for this corpus (shares of the cached train examples): {table}")


if __name__ == "__main__":
  sys.exit(main())
