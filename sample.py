"""Sample n completions per prompt from a trained run, for execution-based benchmarks.

  python sample.py --checkpoint=MODEL_DIR --prompts=prompts.jsonl --output=predictions.jsonl \
      --num_samples=200 [--temperature=0.8 --top_p=0.95 --top_k=0 --max_decode_length=256 \
      --batch_size=256 --seed=0] [--gin_file=gin_configs/sample/humaneval.gin --gin.sample.mesh_shape=(-1,1,1)]

Every flag is also the gin parameter `sample.NAME`; an explicit flag wins over gin files and --gin.
bindings. On several devices or hosts the sample rows are split over the mesh's batch axes and the
parameters keep training's partitioning rules (`sample.mesh_shape`, as train.mesh_shape); every host
runs the same command, as with train.py, and the first writes the output.

Prompts JSONL: `qid`, `language`, `prompt`, optional `stop` (a list of strings; default: the
language's, see sampling/stops.py); other fields pass through. Predictions JSONL: one line per sample
with `qid`, `language`, `sample_id`, `code` (the completion without the prompt, cut at the first stop
sequence), `finish_reason` (stop / eos / length), `num_tokens`, and the passed-through fields: what
BabelCode reads (`qid`, `language`, `code`); `prompt_truncated: true` on the samples of a prompt cut
by --truncate_prompts.

A prompt that does not fit in the model's context minus --max_decode_length is refused before
anything is loaded or written (exit 2, naming how many, the longest, and the --max_decode_length or
context that would fit): a prompt cut at the front loses its instruction and signature, and a score
over it means something else. --truncate_prompts samples them anyway from their last tokens. At the
end the predictions file is counted (prompts, samples, truncated prompts, completions by
finish_reason: `length` ones reached --max_decode_length), printed, and written to OUTPUT.summary.json.

Resumable: rerunning with the same --output skips prompts whose samples are all there; each prompt's
samples are appended in one write as soon as its last sample ends, so a killed run never leaves a
partial prompt. A sample's randomness comes from --seed, its prompt's (qid, language) and its sample_id
only, and a resumed run lays out the whole prompts file (the complete prompts skipped) as the first run
did, so it writes the samples an uninterrupted run writes, bit for bit. Another --batch_size or mesh
draws from the same keys, but its other shapes may round logits differently and so, rarely, change a
draw. Documented edge
cases: an empty prompt samples from `[code]` alone; a (qid, language) pair is one prompt: BabelCode
reuses qids across languages.
"""

from __future__ import annotations

import quiet

if __name__ == "__main__":  # before TensorFlow, JAX and Beam are imported
  quiet.setup()

import argparse
import collections
import contextlib
import dataclasses
import inspect
import json
import sys
import time
import zlib
from typing import Sequence

import gin
import numpy as np

import gin_flags
from gin_flags import UsageError, check_float, check_int, check_mesh_shape, check_writable_file
import storage
from storage import OutputLocked, exclusive_output, parse_line, read_jsonl
from sampling.prompt_fit import EncodedPrompts, PromptsTooLong, check_fit
from sampling.strategies import DEFAULT_TEMPERATURE, DEFAULT_TOP_K, DEFAULT_TOP_P


def read_prompts(path: str) -> list[dict]:
  """Parsed prompt records, all checked before any sampling: a line that is not UTF-8 or JSON, a
  field of the wrong type or a second prompt for one (qid, language) is an error naming file:line."""
  prompts, first_line = [], {}
  for number, record in read_jsonl(path):
    where = f"{path}:{number}"
    missing = [k for k in ("qid", "language", "prompt") if k not in record]
    if missing:
      raise ValueError(f"{where}: a prompt needs qid, language and prompt; missing {missing}")
    if isinstance(record["qid"], bool) or not isinstance(record["qid"], (str, int)):
      raise ValueError(f"{where}: qid must be a string or an integer, got {json.dumps(record['qid'])[:40]}")
    if not isinstance(record["language"], str) or not record["language"]:
      raise ValueError(f"{where}: language must be a non-empty string, got {json.dumps(record['language'])[:40]}")
    if not isinstance(record["prompt"], str):
      raise ValueError(f"{where}: prompt must be a string, got {type(record['prompt']).__name__}")
    if "stop" in record and not (isinstance(record["stop"], list) and all(isinstance(s, str) for s in record["stop"])):
      raise ValueError(f"{where}: stop must be a list of strings")
    key = prompt_key(record)
    if key in first_line:
      raise ValueError(f"{where}: a second prompt for qid {key[0]!r} in {key[1]} (the first is on line "
                       f"{first_line[key]}); each (qid, language) is one prompt")
    first_line[key] = number
    prompts.append(record)
  return prompts


def prompt_key(record: dict) -> tuple[str, str]:
  """What identifies a prompt: BabelCode reuses a qid across languages."""
  return str(record["qid"]), str(record["language"])


def completed_prompts(path: str, num_samples: int) -> set[tuple[str, str]]:
  """(qid, language) pairs with all their samples in `path`. A run killed mid-write can leave a torn
  last line or part of a prompt's samples, and a file written twice over (before runs took a lock)
  holds some samples twice: those lines are dropped (the file rewritten atomically) so that every
  (qid, language, sample_id) appears exactly once and incomplete prompts are redone."""
  if not storage.exists(path):
    return set()
  records, total = [], 0
  data = storage.read_bytes(path)
  for line in storage.jsonl_lines(data):  # the torn last line too: it is dropped below
    total += 1
    try:
      record = parse_line(line, path)
      key = (*prompt_key(record), record["sample_id"])
      hash(key)
    except (ValueError, KeyError, TypeError):
      continue
    records.append((line if line.endswith(b"\n") else line + b"\n", record, key))
  seen, unique = set(), []
  for line, record, key in records:
    if key not in seen:
      seen.add(key)
      unique.append((line, record))
  counts: dict[tuple[str, str], int] = {}
  for _, record in unique:
    counts[prompt_key(record)] = counts.get(prompt_key(record), 0) + 1
  complete = {key for key, n in counts.items() if n >= num_samples}
  kept = [line for line, record in unique if prompt_key(record) in complete]
  if len(kept) != total or not data.endswith(b"\n") and data:
    storage.write_atomic(path, b"".join(kept))
  return complete


def prompt_seed_id(record: dict) -> int:
  """A stable 32-bit id of a prompt's (qid, language): with --seed, what its samples are drawn from."""
  return zlib.crc32(json.dumps(prompt_key(record)).encode())


def check_sampling_arguments(a: dict) -> None:
  """sample()'s values by type and range (each named as its flag), before anything is loaded."""
  for name in ("checkpoint", "prompts", "output"):
    if not isinstance(a[name], str) or not a[name]:
      raise UsageError(f"--{name} must be a path, got {a[name]!r}")
  for name in ("num_samples", "max_decode_length", "batch_size", "chunk_length"):
    check_int(f"--{name}", a[name], 1)
  check_int("--top_k", a["top_k"], 0)
  check_int("--seed", a["seed"])
  check_int("--show", a["show"], 0)
  check_float("--temperature", a["temperature"], 0)
  check_float("--top_p", a["top_p"], maximum=1, above=0)
  check_mesh_shape("sample.mesh_shape", a["mesh_shape"])
  if not isinstance(a["truncate_prompts"], bool):
    raise UsageError(f"--truncate_prompts must be true or false, got {a['truncate_prompts']!r}")
  if not storage.isfile(a["prompts"]):
    raise UsageError(f"--prompts: {a['prompts']} is not a file")


@gin.configurable("sample", module="codelm")
def sample(*, checkpoint: str = gin.REQUIRED, prompts: str = gin.REQUIRED, output: str = gin.REQUIRED,
           num_samples: int = 1, temperature: float = DEFAULT_TEMPERATURE, top_p: float = DEFAULT_TOP_P,
           top_k: int = DEFAULT_TOP_K, max_decode_length: int = 256, batch_size: int = 256, seed: int = 0,
           chunk_length: int = 32, mesh_shape: Sequence[int] = (-1, 1, 1), show: int = 0,
           truncate_prompts: bool = False) -> int:
  """Samples every prompt of `prompts` not yet complete in `output`; returns the samples written."""
  import jax
  from jax.experimental import multihost_utils

  from sampling import restore  # here, not at the top: `sample.py --help` stays quick (no TensorFlow)
  from sampling.sampler import SamplingConfig
  from sampling.stops import default_stops
  from training.run_info import read_run_info

  check_sampling_arguments(locals())
  config = SamplingConfig(temperature, top_p, top_k, max_decode_length, chunk_length, rows=batch_size)
  records = read_prompts(prompts)
  run_config = read_run_info(restore.split_checkpoint(checkpoint)[0])[0]
  if max_decode_length >= run_config.max_length:
    raise UsageError(f"--max_decode_length {max_decode_length} leaves no room for a prompt: the model's "
                     f"context is {run_config.max_length} tokens")
  # Whether the prompts fit is known from run.json and the vocabulary: refused before any parameter
  # is read or a file written, and the sampler is given these ids (not encoding them again).
  encoded = restore.encode_run_prompts(checkpoint, [p["prompt"] for p in records], max_decode_length)
  try:
    check_fit(encoded, truncate_prompts, [f"{p['qid']} ({p['language']})" for p in records],
              length_flag="--max_decode_length", truncate_flag="--truncate_prompts")
  except PromptsTooLong as error:
    raise UsageError(f"--prompts {prompts}: {error}") from None
  primary = jax.process_index() == 0
  if primary:
    check_writable_file("--output", output)
  with contextlib.ExitStack() as stack:
    if primary:  # one writer per output file: a second run refuses at once, naming this one
      stack.enter_context(exclusive_output(output, "sample.py"))
    # The first host decides what is left (other hosts may not see the output file) and tells the rest.
    done = completed_prompts(output, num_samples) if primary else set()
    left = [prompt_key(p) not in done for p in records]
    if jax.process_count() > 1:
      left = multihost_utils.broadcast_one_to_all(np.asarray(left, bool)).tolist()
    todo = [p for p, keep in zip(records, left) if keep]
    if primary:
      print(f"{len(records)} prompts, {len(records) - len(todo)} already complete in {output}", flush=True)
    if not todo:
      if primary:
        report(output, summarize(output), encoded, truncate_prompts)
      return 0
    sampler, step = restore.load_sampler(checkpoint, mesh_shape)
    start, samples, tokens = time.perf_counter(), 0, 0
    from tqdm import tqdm

    with tqdm(total=len(todo) * num_samples, unit="sample", desc=f"sampling (step {step})", disable=not primary) as bar:
      # Every prompt of the file goes to the sampler, those already complete skipped: the padded
      # width and the layout are then the uninterrupted run's, and so is every sample to the bit.
      stops = [p.get("stop", list(default_stops(p["language"]))) for p in records]
      stream = sampler.stream(encoded, num_samples, config, seed=seed, stops=stops,
                              prompt_ids=[prompt_seed_id(p) for p in records], skip=[not keep for keep in left],
                              truncate=truncate_prompts)
      for index, completions in stream:  # each prompt as soon as its samples are all done
        prompt, truncated = records[index], encoded.truncated[index]
        lines = []
        for sample_id, completion in enumerate(completions):
          record = {k: v for k, v in prompt.items() if k not in ("prompt", "stop")}
          record.update(qid=prompt["qid"], language=prompt["language"], sample_id=sample_id,
                        code=completion.text, finish_reason=completion.finish_reason,
                        num_tokens=completion.num_tokens)
          if truncated:
            record["prompt_truncated"] = True
          lines.append(json.dumps(record, ensure_ascii=False) + "\n")
          tokens += completion.num_tokens
        if primary:  # one append per whole prompt
          storage.append_lines(output, lines)
        samples += len(lines)
        elapsed = time.perf_counter() - start
        bar.update(len(lines))
        bar.set_postfix(samples_per_s=f"{samples / elapsed:.1f}", tokens_per_s=f"{tokens / elapsed:.0f}")
    if primary:
      print(f"wrote {samples} samples to {output}", flush=True)
      if show:
        show_samples(output, {prompt_key(p): p["prompt"] for p in todo}, show)
      report(output, summarize(output), encoded, truncate_prompts)
    return samples


@dataclasses.dataclass(frozen=True)
class PredictionsSummary:
  """What a predictions file holds, counted from its records (a resumed run's earlier ones too)."""

  prompts: int
  samples: int
  truncated_prompts: int  # prompts whose records say prompt_truncated
  truncated_samples: int
  finish_reasons: dict[str, int]  # stop / eos / length: samples of each

  def to_json(self) -> dict:
    return dataclasses.asdict(self)


def summarize(output: str) -> PredictionsSummary:
  prompts, truncated, reasons, samples, truncated_samples = set(), set(), collections.Counter(), 0, 0
  for line in storage.jsonl_lines(storage.read_bytes(output)) if storage.exists(output) else []:
    try:
      record = parse_line(line, output)
      key = prompt_key(record)
    except (ValueError, KeyError, TypeError):
      continue  # what completed_prompts drops on a resume
    prompts.add(key)
    samples += 1
    reasons[str(record.get("finish_reason"))] += 1
    if record.get("prompt_truncated"):
      truncated.add(key)
      truncated_samples += 1
  return PredictionsSummary(len(prompts), samples, len(truncated), truncated_samples, dict(sorted(reasons.items())))


def report(output: str, summary: PredictionsSummary, encoded: EncodedPrompts, truncate_prompts: bool) -> None:
  """The counts that change what a score means, printed last and written to OUTPUT.summary.json."""
  path = f"{output}.summary.json"
  storage.write_atomic(path, json.dumps({
      "predictions": output, **summary.to_json(), "context": encoded.context,
      "max_decode_length": encoded.max_decode_length, "prompt_room": encoded.room,
      "truncate_prompts": truncate_prompts}, indent=1) + "\n")
  reasons = ", ".join(f"{reason} {count}" for reason, count in summary.finish_reasons.items()) or "none"
  print(f"{output}: {summary.prompts} prompts, {summary.samples} samples (finish_reason: {reasons})", flush=True)
  if summary.truncated_prompts:
    print(f"warning: {summary.truncated_prompts} of {summary.prompts} prompts were truncated to their last "
          f"{encoded.room} tokens (--truncate_prompts; {summary.truncated_samples} samples, marked "
          "prompt_truncated): their scores are not those of the whole prompts", flush=True)
  length = summary.finish_reasons.get("length", 0)
  if length:
    print(f"warning: {length} of {summary.samples} completions were cut at --max_decode_length "
          f"{encoded.max_decode_length} (finish_reason length)", flush=True)
  print(f"summary: {path}", flush=True)


def _flags_parser() -> argparse.ArgumentParser:
  """sample()'s parameters as flags. Defaults are suppressed so that only flags actually given
  override gin; the help still shows sample()'s defaults."""
  defaults = {name: p.default for name, p in inspect.signature(sample).parameters.items()}
  parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                   argument_default=argparse.SUPPRESS)
  parser.add_argument("--checkpoint", help="a train.py MODEL_DIR, or MODEL_DIR/checkpoints/STEP")
  parser.add_argument("--prompts", help="prompts JSONL")
  parser.add_argument("--output", help="predictions JSONL (appended to; resumable)")
  parser.add_argument("--num_samples", type=int, help="samples per prompt; default: %s" % defaults["num_samples"])
  parser.add_argument("--temperature", type=float, help=f"default: {defaults['temperature']} (0: greedy)")
  parser.add_argument("--top_p", type=float, help=f"nucleus mass; default: {defaults['top_p']}")
  parser.add_argument("--top_k", type=int, help=f"0: off; default: {defaults['top_k']}")
  parser.add_argument("--max_decode_length", type=int, help=f"default: {defaults['max_decode_length']}")
  parser.add_argument("--batch_size", type=int,
                      help="samples decoded at once (decode rows; finished ones are refilled at once); "
                      f"default: {defaults['batch_size']}")
  parser.add_argument("--seed", type=int, help=f"default: {defaults['seed']}")
  parser.add_argument("--chunk_length", type=int,
                      help=f"tokens decoded between host stop checks; default: {defaults['chunk_length']}")
  parser.add_argument("--show", type=int, help="print this many samples per prompt at the end; default: 0")
  parser.add_argument("--truncate_prompts", action="store_true",
                      help="sample a prompt longer than the context minus --max_decode_length from its last tokens "
                      "(marked prompt_truncated, counted at the end); default: refuse such prompts before sampling")
  return parser


def main(argv: Sequence[str] | None = None) -> int:
  from training.distributed import maybe_initialize_distributed

  parser = _flags_parser()
  gin_files, bindings = gin_flags.parse_flags(sys.argv[1:] if argv is None else argv, parser=parser)
  flags = {k: v for k, v in vars(parser.parsed).items() if k not in ("gin_file", "gin_search_path")}
  maybe_initialize_distributed()
  try:
    gin_flags.parse_gin(gin_files, bindings)
  except (ValueError, OSError) as error:
    parser.error(str(error))
  try:
    missing = [n for n in ("checkpoint", "prompts", "output") if n not in flags and not _bound(n)]
    if missing:
      parser.error(f"missing {', '.join('--' + n for n in missing)}")
    return sample(**flags)
  except FileNotFoundError as error:
    text = gin_flags.message(error)
    parser.error(f"--checkpoint: {text}" if "checkpoint" in text or "run.json" in text else text)
  except (ValueError, OutputLocked) as error:  # UsageError, a malformed prompts line, a held output
    parser.error(gin_flags.message(error))
  except RuntimeError as error:
    from training.checkpoints import CheckpointError

    if not isinstance(error, CheckpointError):
      raise
    parser.error(f"--checkpoint: {gin_flags.message(error)}")
  finally:
    gin.clear_config()


def _bound(name: str) -> bool:
  try:
    gin.query_parameter(f"codelm.sample.{name}")
    return True
  except ValueError:
    return False


def show_samples(predictions: str, prompts: dict, per_prompt: int) -> None:
  shown: dict = {}
  for _, record in read_jsonl(predictions):
    key = prompt_key(record)
    if key in prompts and shown.get(key, 0) < per_prompt:
      shown[key] = shown.get(key, 0) + 1
      print(f"\n=== {key[0]} ({key[1]}) sample {record['sample_id']} ({record['finish_reason']}, "
            f"{record['num_tokens']} tokens)")
      print(prompts[key] + record["code"])


if __name__ == "__main__":
  main()
