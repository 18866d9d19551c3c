"""Export a trained run to Hugging Face format: transformers' CohereForCausalLM, its fast tokenizer,
generation config and model card, loadable by transformers, vLLM and the evaluation harnesses.

  python -m export.hf --checkpoint MODEL_DIR[/checkpoints/STEP] --output DIR [--max_shard_size 5GB]

writes into DIR: config.json, model.safetensors (or model-0000K-of-0000N.safetensors and
model.safetensors.index.json above --max_shard_size), tokenizer.json, tokenizer_config.json,
special_tokens_map.json, generation_config.json and README.md. A LoRA run is exported merged into its
base (sampling/restore.py restores it as sample.py does). A model the Cohere architecture cannot
express exactly is refused with the reason, before anything is written. DIR must not exist or be
empty; everything is written into a temporary folder beside it (a local one for a bucket) and then
renamed (copied, for a bucket, config.json last), so DIR holds a whole export or nothing. The
temporary folder of an export that was killed (named after its host and process) is removed by the
next export to DIR on that host.
Needs the `hf` extra (`pip install -e .[hf]`: transformers, CPU torch, safetensors); codelm's core
does not. Nothing is fetched from the Hugging Face Hub (HF_HUB_OFFLINE).
"""

from __future__ import annotations

import quiet

if __name__ == "__main__":  # before TensorFlow, JAX and Beam are imported
  quiet.setup()

import argparse
import dataclasses
import json
import os
import re
import shutil
import socket
import sys
import tempfile
import time
from typing import Sequence

import numpy as np

import storage
from data.vocab import CODE_TOKEN, EOD_TOKEN
from export import card, cohere, tokenizer
from sampling import restore
from sampling.strategies import DEFAULT_TEMPERATURE, DEFAULT_TOP_K, DEFAULT_TOP_P
from training.checkpoints import CheckpointError
from training.run_info import read_adapters, read_run_info

HF_EXTRA = "pip install -e .[hf]"
DEFAULT_MAX_SHARD_SIZE = "5GB"  # transformers' own default for save_pretrained before 5.0
DEFAULT_MAX_NEW_TOKENS = 256  # sample.py's --max_decode_length default
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(B|KB|MB|GB)?\s*$", re.IGNORECASE)


class ExportRefused(ValueError):
  """The run cannot be exported exactly; the message says why."""


@dataclasses.dataclass(frozen=True)
class Exported:
  output: str
  step: int
  files: tuple[str, ...]
  seconds: float


def parse_size(text: str) -> int:
  """'5GB', '200MB', '1024' (bytes) -> bytes (decimal units, as transformers counts them)."""
  match = _SIZE.match(text)
  if not match or float(match.group(1)) <= 0:
    raise ValueError(f"--max_shard_size must be a positive size like 5GB or 200MB, got {text!r}")
  unit = (match.group(2) or "B").upper()
  return int(float(match.group(1)) * {"B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9}[unit])


def require_hf() -> None:
  """ImportError naming the extra when transformers, torch, safetensors or tokenizers is missing."""
  os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing here may reach the Hub
  try:
    import safetensors  # noqa: F401
    import tokenizers  # noqa: F401
    import torch  # noqa: F401
    import transformers  # noqa: F401
  except ImportError as error:
    raise ImportError(f"export.hf needs the hf extra ({error}): {HF_EXTRA}") from None


def special_ids(vocabulary) -> dict[str, int]:
  """bos, eos and pad of an exported model: [code] (every sample's first token), [eod], <pad>."""
  pieces = vocabulary.tokenizer
  return {"bos": pieces.piece_to_id(CODE_TOKEN), "eos": pieces.piece_to_id(EOD_TOKEN), "pad": vocabulary.pad_id}


def refuse_occupied(path: str, flag: str) -> None:
  """FileExistsError naming `flag` unless `path` is absent or an empty folder: nothing is overwritten."""
  if storage.exists(path) and (not storage.isdir(path) or storage.listdir(path)):
    raise FileExistsError(f"{flag}: {path} exists and is not an empty folder (nothing was written)")


def generation_settings(special: dict[str, int]) -> dict:
  """The paper's sampling (T 0.8, top-p 0.95, no top-k: sampling/strategies.py's defaults)."""
  return {"do_sample": True, "temperature": DEFAULT_TEMPERATURE, "top_p": DEFAULT_TOP_P, "top_k": DEFAULT_TOP_K,
          "max_new_tokens": DEFAULT_MAX_NEW_TOKENS, "bos_token_id": special["bos"],
          "eos_token_id": special["ends"], "pad_token_id": special["pad"]}


def _torch_tensor(array: np.ndarray):
  import torch

  if not array.flags.writeable:  # a host copy jax still owns: torch wants its own
    array = array.copy()
  if array.dtype.name == "bfloat16":  # ml_dtypes' bfloat16: the same bits, as torch's
    return torch.from_numpy(array.view(np.uint16)).view(torch.bfloat16)
  return torch.from_numpy(array)


def write_weights(folder: str, weights: dict[str, np.ndarray], max_shard_bytes: int) -> list[str]:
  """model.safetensors, or shards of at most max_shard_bytes (a larger single tensor alone in its
  shard) and model.safetensors.index.json, as transformers writes them. Returns the file names."""
  from safetensors.torch import save_file

  shards, current, size = [], {}, 0
  for name, array in weights.items():
    if current and size + array.nbytes > max_shard_bytes:
      shards.append(current)
      current, size = {}, 0
    current[name] = array
    size += array.nbytes
  shards.append(current)
  if len(shards) == 1:
    names = ["model.safetensors"]
  else:
    names = [f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors" for i in range(len(shards))]
  for name, shard in zip(names, shards):
    save_file({k: _torch_tensor(v) for k, v in shard.items()}, os.path.join(folder, name), metadata={"format": "pt"})
  if len(shards) == 1:
    return names
  index = {"metadata": {"total_size": sum(w.nbytes for w in weights.values())},
           "weight_map": {k: name for name, shard in zip(names, shards) for k in shard}}
  with open(os.path.join(folder, "model.safetensors.index.json"), "w") as f:
    json.dump(index, f, indent=2, sort_keys=True)
  return names + ["model.safetensors.index.json"]


def _notes(config) -> list[str]:
  notes = []
  if config.attention_dim != config.d_model:
    notes.append(f"Query heads x head_dim ({config.attention_dim}) differ from d_model ({config.d_model}): "
                 "config.json sets head_dim, which transformers honours; vLLM's Cohere implementation, in "
                 "the versions whose source we read, derives head_dim from hidden_size / heads and so "
                 "cannot load this model (untested here).")
  if config.dtype != config.param_dtype:
    notes.append(f"Training computed in {config.dtype} with {config.param_dtype} parameters; the weights are "
                 f"stored in {config.param_dtype}: load with torch_dtype={config.dtype} for training's precision.")
  return notes


def _run_values(model_dir: str) -> dict:
  path = storage.join(model_dir, "config.gin")
  return card.gin_values(storage.read_text(path)) if storage.exists(path) else {}


def build_files(checkpoint: str, folder: str, max_shard_bytes: int) -> tuple[int, list[str]]:
  """Every file of the export written into the local `folder`; (step, file names). Raises
  ExportRefused (why) or FileNotFoundError (the missing checkpoint, named) before writing anything."""
  model_dir, _ = restore.split_checkpoint(checkpoint)
  sampler, step = restore.load_sampler(checkpoint)  # a LoRA run comes back merged
  config, vocabulary = sampler.model.config, sampler.vocabulary
  reasons = cohere.unsupported(config, vocabulary.vocab_size)
  try:
    _, tokenizer_files = tokenizer.build(vocabulary.sp_model, config.max_length)
  except ValueError as error:
    reasons.append(f"the vocabulary: {error}")
  if reasons:
    raise ExportRefused(f"{checkpoint} cannot be exported as CohereForCausalLM exactly: " + "; ".join(reasons))
  special = special_ids(vocabulary)
  special["ends"] = [special["eos"], vocabulary.eos_id]  # [eod] and </s> end a sample, as in the sampler
  fields = cohere.config_fields(config, special)
  weights = cohere.cohere_weights(sampler.params, config)
  mismatches = cohere.shape_mismatches(fields, weights)
  if mismatches:
    raise ExportRefused(f"{checkpoint}: the installed transformers builds other shapes than codelm's "
                        f"(it ignores a config field): {'; '.join(mismatches[:4])}")
  del sampler
  dtype = cohere.DTYPES[str(config.param_dtype)]
  files = write_weights(folder, weights, max_shard_bytes)
  generation = generation_settings(special)
  written = {
      "config.json": json.dumps(cohere.config_json(fields, dtype), indent=2, sort_keys=True) + "\n",
      "generation_config.json": json.dumps(generation, indent=2, sort_keys=True) + "\n",
      **tokenizer_files.files(),
      "README.md": card.model_card(source=storage.resolve(checkpoint), step=step, config=config,
                                   vocab_path=read_run_info(model_dir)[1], run=_run_values(model_dir),
                                   adapters=read_adapters(model_dir), generation=generation, notes=_notes(config),
                                   fim_tokens=tokenizer_files.fim_tokens),
  }
  for name, text in written.items():
    with open(os.path.join(folder, name), "w", encoding="utf-8") as f:
      f.write(text)
  return step, files + list(written)


def _publish(folder: str, output: str, files: list[str]) -> None:
  """The finished export at `output`: a rename beside it (local), or a copy with config.json last."""
  if not storage.is_url(output):
    umask = os.umask(0)
    os.umask(umask)
    for name in files:  # mkdtemp's folder and safetensors' files are private (0700, 0600): as any other output
      os.chmod(os.path.join(folder, name), 0o666 & ~umask)
    os.chmod(folder, 0o777 & ~umask)
    os.replace(folder, output)  # replaces an empty folder; a non-empty one was refused before
    return
  order = sorted(files, key=lambda name: name == "config.json")  # its presence means the rest is there
  written = []
  try:
    for name in order:
      with open(os.path.join(folder, name), "rb") as f:
        storage.write_atomic(storage.join(output, name), f.read())
      written.append(name)
  except BaseException:
    for name in written:
      storage.remove(storage.join(output, name))
    raise


def _temporary_prefix(output: str) -> str:
  """Temporary folders of exports to `output` from this host: `.NAME.tmp-HOST-PID-` and a random part."""
  return f".{os.path.basename(output.rstrip('/'))}.tmp-{socket.gethostname()}-"


def _alive(pid: int) -> bool:
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  except PermissionError:  # another user's live process
    return True
  return True


def _remove_killed_exports(parent: str, output: str) -> None:
  """Removes the temporary folders that exports to `output` from this host left when killed (their
  process is gone); another host's, or a running export's, are left alone."""
  prefix = _temporary_prefix(output)
  for name in os.listdir(parent):
    pid = name[len(prefix):].split("-", 1)[0] if name.startswith(prefix) else ""
    if pid.isdigit() and not _alive(int(pid)):
      shutil.rmtree(os.path.join(parent, name), ignore_errors=True)
      print(f"removed {os.path.join(parent, name)}, left by an export that was killed", flush=True)


def export(checkpoint: str, output: str, max_shard_bytes: int = parse_size(DEFAULT_MAX_SHARD_SIZE)) -> Exported:
  """The run's checkpoint (newest good one, or …/checkpoints/STEP) as a Hugging Face model in `output`."""
  start = time.perf_counter()
  refuse_occupied(output, "--output")
  require_hf()
  local = not storage.is_url(output)
  if local:
    parent = os.path.dirname(os.path.abspath(output))
    os.makedirs(parent, exist_ok=True)
    _remove_killed_exports(parent, output)
  folder = tempfile.mkdtemp(prefix=f"{_temporary_prefix(output)}{os.getpid()}-", dir=parent if local else None)
  try:
    step, files = build_files(checkpoint, folder, max_shard_bytes)
    _publish(folder, output, files)
  finally:
    if os.path.exists(folder):
      shutil.rmtree(folder)
  return Exported(output, step, tuple(sorted(files)), time.perf_counter() - start)


def main(argv: Sequence[str] | None = None) -> int:
  parser = argparse.ArgumentParser(prog="python -m export.hf", description=__doc__.split("\n\n")[0].replace("\n", " "))
  parser.add_argument("--checkpoint", required=True, help="MODEL_DIR of a train.py run, or MODEL_DIR/checkpoints/STEP")
  parser.add_argument("--output", required=True, help="folder to write (must not exist, or be empty); local or gs://")
  parser.add_argument("--max_shard_size", default=DEFAULT_MAX_SHARD_SIZE,
                      help=f"largest safetensors file before the weights are split (default {DEFAULT_MAX_SHARD_SIZE})")
  args = parser.parse_args(argv)
  try:
    max_shard_bytes = parse_size(args.max_shard_size)
  except ValueError as error:
    parser.error(str(error))
  try:
    exported = export(args.checkpoint, args.output, max_shard_bytes)
  except (ImportError, FileExistsError, ExportRefused) as error:
    parser.error(str(error))
  except FileNotFoundError as error:
    parser.error(f"--checkpoint: {error}")
  except CheckpointError as error:  # every checkpoint damaged, each named with its reason (as sample.py)
    parser.error(f"--checkpoint: {error}")
  print(f"exported step {exported.step} of {args.checkpoint} to {exported.output} as CohereForCausalLM "
        f"({len(exported.files)} files, {exported.seconds:.1f} s)", flush=True)
  return 0


if __name__ == "__main__":
  sys.exit(main())
