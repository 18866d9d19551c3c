"""Sample n completions per prompt from a trained run, for execution-based benchmarks.

  python sample.py --checkpoint=MODEL_DIR --prompts=prompts.jsonl --output=predictions.jsonl \
      --num_samples=200 [--temperature=0.8 --top_p=0.95 --top_k=0 --max_decode_length=256 \
      --batch_size=256 --seed=0] [--gin_file=gin_configs/sample/humaneval.gin --gin.sample.mesh_shape=(-1,1,1)]

Every flag is also the gin parameter `sample.NAME`; an explicit flag wins over gin files and --gin.
bindings. The run itself is sampling/run.py (its files: sampling/predictions.py); this file parses
the flags. On several devices or hosts the sample rows are split over the mesh's batch axes and the
parameters keep training's partitioning rules (`sample.mesh_shape`, as train.mesh_shape); every host
runs the same command, as with train.py, and the first writes the output.

Prompts JSONL: `qid`, `language`, `prompt`, optional `stop` (a list of strings; default: the
language's, see languages.py) and `stop_cut` ("keep", the default, keeps a stop's closing brace or
`end`; "before" cuts before the whole stop, as MultiPL-E does); other fields pass through. Predictions JSONL: one line per sample
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

--profile_steps=FIRST,COUNT writes a jax.profiler trace of those decode chunks (a chunk: up to
--chunk_length decode steps and the host's stop checks) to OUTPUT's folder/profile, a TensorBoard
logdir: `tensorboard --logdir OUTPUT_FOLDER/profile`, Profile tab (training/profiling.py).
"""

from __future__ import annotations

import quiet

if __name__ == "__main__":  # before TensorFlow, JAX and Beam are imported
  quiet.setup()

import argparse
import dataclasses
import sys
from typing import Sequence

import gin

import gin_flags
from sampling import run
from sampling.run import SampleRun
from storage import OutputLocked

# The dataclass itself: `sample.num_samples = ...` binds SampleRun's field, and its defaults are gin's.
_SampleRun = gin.external_configurable(SampleRun, "sample", module="codelm")


def sample(**given) -> int:
  """Samples with the `sample.*` gin values, `given` (the flags) overriding them; returns the samples
  written."""
  return run.sample(_SampleRun(**given))


def _flags_parser() -> argparse.ArgumentParser:
  """SampleRun's fields as flags. Defaults are suppressed so that only flags actually given
  override gin; the help still shows SampleRun's defaults."""
  defaults = {f.name: f.default for f in dataclasses.fields(SampleRun)}
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
  parser.add_argument("--profile_steps", type=_first_count, metavar="FIRST,COUNT",
                      help="write a jax.profiler trace of decode chunks FIRST..FIRST+COUNT-1 (chunk 1 includes "
                      "compiling) to OUTPUT's folder/profile, a TensorBoard logdir (first host only); default: off")
  return parser


def _first_count(text: str) -> tuple[int, ...] | str:
  """FIRST,COUNT ("5,3") as (5, 3); anything else is kept as given for sampling/run.py's check, which
  names the flag."""
  try:
    return tuple(int(part) for part in text.split(","))
  except ValueError:
    return text


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


if __name__ == "__main__":
  main()
