"""A sampling run: n completions per prompt of a prompts file from a trained run, appended to a
predictions file, resumable; sample.py's flags and gin values arrive here as one `SampleRun`.

Every prompt is checked and encoded once, from run.json and the vocabulary, before a parameter is
read or a file written: one that does not fit in the context minus `max_decode_length` is refused
(UsageError, naming how many, the longest and the settings that would fit) unless `truncate_prompts`.
The sampler is given those ids and the truncation marks come from the same encoding.

Resumable: the prompts whose samples are all in the output are skipped; each prompt's samples are
appended in one write as soon as its last sample ends. A sample's randomness comes from the seed, its
prompt's (qid, language) and its sample_id only, and a resumed run lays out the whole prompts file
(the complete prompts skipped) as the first run did, so it writes what an uninterrupted run writes.
On several hosts every host runs this; the first decides what is left, tells the others, and writes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import time
from typing import Any, Sequence

import numpy as np

import storage
from gin_flags import UsageError, check_float, check_int, check_mesh_shape, check_writable_file
from sampling import predictions
from sampling.prompt_fit import PromptsTooLong, check_fit
from sampling.strategies import DEFAULT_TEMPERATURE, DEFAULT_TOP_K, DEFAULT_TOP_P
from storage import exclusive_output
from training.profiling import Profiler, check_settings


@dataclasses.dataclass(frozen=True)
class SampleRun:
  """What to sample, from what, into where; each field is sample.py's flag of the same name."""

  checkpoint: str  # a train.py MODEL_DIR, or MODEL_DIR/checkpoints/STEP
  prompts: str  # prompts JSONL
  output: str  # predictions JSONL (appended to; resumable)
  num_samples: int = 1
  temperature: float = DEFAULT_TEMPERATURE
  top_p: float = DEFAULT_TOP_P
  top_k: int = DEFAULT_TOP_K
  max_decode_length: int = 256
  batch_size: int = 256  # decode rows: samples decoded at once
  seed: int = 0
  chunk_length: int = 32  # tokens decoded between host stop checks
  mesh_shape: Sequence[int] = (-1, 1, 1)
  show: int = 0  # samples per prompt printed at the end
  truncate_prompts: bool = False
  profile_steps: Sequence[int] | None = None  # (FIRST, COUNT): a jax.profiler trace of those decode chunks


def check(run: SampleRun) -> None:
  """Every field by type and range (each named as its flag), before anything is loaded."""
  for name in ("checkpoint", "prompts", "output"):
    value = getattr(run, name)
    if not isinstance(value, str) or not value:
      raise UsageError(f"--{name} must be a path, got {value!r}")
  for name in ("num_samples", "max_decode_length", "batch_size", "chunk_length"):
    check_int(f"--{name}", getattr(run, name), 1)
  check_int("--top_k", run.top_k, 0)
  check_int("--seed", run.seed)
  check_int("--show", run.show, 0)
  check_float("--temperature", run.temperature, 0)
  check_float("--top_p", run.top_p, maximum=1, above=0)
  check_mesh_shape("sample.mesh_shape", run.mesh_shape)
  if not isinstance(run.truncate_prompts, bool):
    raise UsageError(f"--truncate_prompts must be true or false, got {run.truncate_prompts!r}")
  if run.profile_steps is not None:
    check_profile_steps(run.profile_steps)
  if not storage.isfile(run.prompts):
    raise UsageError(f"--prompts: {run.prompts} is not a file")


def check_profile_steps(value: Any) -> None:
  """--profile_steps as (FIRST, COUNT) decode chunks, FIRST from 1 (chunk 1 includes compiling)."""
  if isinstance(value, str) or not isinstance(value, Sequence) or len(value) != 2:
    raise UsageError(f"--profile_steps must be FIRST,COUNT (decode chunks, e.g. 2,3), got {value!r}")
  try:
    check_settings(value[0], value[1], steps_name="--profile_steps")
  except ValueError as error:
    raise UsageError(str(error)) from None


def profile_dir(output: str) -> str:
  """Where --profile_steps writes: a TensorBoard logdir beside the predictions (OUTPUT's folder/profile)."""
  return storage.join(storage.dirname(output), "profile")


def sample(run: SampleRun) -> int:
  """Samples every prompt of `run.prompts` not yet complete in `run.output`; returns the samples written."""
  import jax
  from jax.experimental import multihost_utils
  from tqdm import tqdm

  from sampling import restore  # here, not at the top: `sample.py --help` stays quick (no TensorFlow)
  from sampling.sampler import SamplingConfig

  check(run)
  config = SamplingConfig(run.temperature, run.top_p, run.top_k, run.max_decode_length, run.chunk_length,
                          rows=run.batch_size)
  records = predictions.read_prompts(run.prompts)
  # Whether the prompts fit (or any prompt at all) is known from run.json and the vocabulary: refused
  # before any parameter is read or a file written, and the sampler is given these ids (not encoding
  # them again).
  encoded = restore.encode_run_prompts(run.checkpoint, [predictions.sampler_prompt(p) for p in records],
                                       run.max_decode_length, length_flag="--max_decode_length")
  try:
    check_fit(encoded, run.truncate_prompts, [f"{p['qid']} ({p['language']})" for p in records],
              length_flag="--max_decode_length", truncate_flag="--truncate_prompts")
  except PromptsTooLong as error:
    raise UsageError(f"--prompts {run.prompts}: {error}") from None
  output = run.output
  primary = jax.process_index() == 0
  if primary:
    check_writable_file("--output", output)
  with contextlib.ExitStack() as stack:
    if primary:  # one writer per output file: a second run refuses at once, naming this one
      stack.enter_context(exclusive_output(output, "sample.py"))
    # The first host decides what is left (other hosts may not see the output file) and tells the rest.
    done = predictions.completed_prompts(output, run.num_samples) if primary else set()
    left = [predictions.prompt_key(p) not in done for p in records]
    if jax.process_count() > 1:
      left = multihost_utils.broadcast_one_to_all(np.asarray(left, bool)).tolist()
    todo = [p for p, keep in zip(records, left) if keep]
    if primary:
      print(f"{len(records)} prompts, {len(records) - len(todo)} already complete in {output}", flush=True)
    if not todo:
      if primary:
        predictions.report(output, predictions.summarize(output), encoded, run.truncate_prompts)
      return 0
    sampler, step = restore.load_sampler(run.checkpoint, run.mesh_shape)
    profiler = None
    if run.profile_steps is not None:  # the first host's decode chunks, in a run folder named after the output
      name = os.path.splitext(output.rstrip("/").rsplit("/", 1)[-1])[0]  # local path or URL
      first, count = run.profile_steps
      profiler = stack.enter_context(contextlib.closing(
          Profiler(profile_dir(output), "decode chunks", f"{name}.chunks", first, count, enabled=primary)))
    start, samples, tokens = time.perf_counter(), 0, 0
    with tqdm(total=len(todo) * run.num_samples, unit="sample", desc=f"sampling (step {step})",
              disable=not primary) as bar:
      # Every prompt of the file goes to the sampler, those already complete skipped: the padded
      # width and the layout are then the uninterrupted run's, and so is every sample to the bit.
      stops = [predictions.stops(p) for p in records]
      stream = sampler.stream(encoded, run.num_samples, config, seed=run.seed, stops=stops,
                              prompt_ids=[predictions.prompt_seed_id(p) for p in records],
                              skip=[not keep for keep in left], truncate=run.truncate_prompts,
                              on_chunk=profiler.after if profiler else None)
      for index, completions in stream:  # each prompt as soon as its samples are all done
        lines = [json.dumps(record, ensure_ascii=False) + "\n" for record in predictions.prediction_records(
            records[index], completions, encoded.truncated[index])]
        tokens += sum(completion.num_tokens for completion in completions)
        if primary:  # one append per whole prompt
          storage.append_lines(output, lines)
        samples += len(lines)
        elapsed = time.perf_counter() - start
        bar.update(len(lines))
        bar.set_postfix(samples_per_s=f"{samples / elapsed:.1f}", tokens_per_s=f"{tokens / elapsed:.0f}")
    if profiler:
      profiler.close()  # the run had fewer chunks than the profile asked for
    if primary:
      print(f"wrote {samples} samples to {output}", flush=True)
      if run.show:
        predictions.show_samples(output, {predictions.prompt_key(p): predictions.shown_prompt(p) for p in todo},
                                 run.show)
      predictions.report(output, predictions.summarize(output), encoded, run.truncate_prompts)
    return samples
