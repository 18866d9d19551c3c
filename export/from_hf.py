"""The reverse of export.hf, where it is exact: a CohereForCausalLM folder of codelm's shape (a codelm
export, or one fine-tuned with Hugging Face tools since) as a codelm MODEL_DIR, to sample from or to
train further.

  python -m export.from_hf --hf_dir DIR --vocab_path SPM_MODEL --model_dir MODEL_DIR [--dtype bfloat16]

writes MODEL_DIR/run.json and MODEL_DIR/checkpoints/0 (the parameters only, no optimizer state). Then
`sample.py --checkpoint MODEL_DIR`, `python -m export.hf --checkpoint MODEL_DIR`, and training from it
in a new MODEL_DIR with `--gin.train.init_from=MODEL_DIR` (a fresh optimizer at step 0, as fine-tuning
starts; train.py refuses MODEL_DIR itself as a run to resume, since it has no optimizer state).

Only what codelm's model computes exactly is accepted; anything else is refused with the reason before
anything is written: another architecture, more than one key/value head, biases, q/k norms, untied or
different output weights, a logit scale other than d_model^-0.5, RoPE scaling, another activation, a
tokenizer.json that does not give `--vocab_path`'s ids (codelm's vocabulary is a SentencePiece model;
the folder's tokenizer.json must be the one export.hf writes for it: pieces, scores, segments and
special tokens compared), special ids other than [code], [eod] and the pad piece. The inverse of
export/cohere.py's weight mapping, including RoPE's channel order, so an export imported back holds
the very parameters it was exported from (tested bit for bit).
A marker file written first and removed last lets the next import to MODEL_DIR remove what a killed
one left. Needs the `hf` extra (safetensors, torch); nothing is fetched from the Hub.
"""

from __future__ import annotations

import quiet

if __name__ == "__main__":  # before TensorFlow and JAX are imported
  quiet.setup()

import argparse
import json
import math
import sys
from typing import Sequence

import numpy as np

import storage
from data.vocab import get_vocabulary
from export import cohere, hf, tokenizer
from model.config import ModelConfig

IMPORTED_STEP = 0
# Written first and removed last: a MODEL_DIR holding it (and no run.json) is what a killed import left.
IN_PROGRESS = ".import-in-progress"
# tokenizer.json's parts that decide the ids a text gets (formatting and the library's version may differ).
_TOKENIZER_PARTS = ("model", "normalizer", "pre_tokenizer", "added_tokens", "post_processor", "decoder")


class ImportRefused(ValueError):
  """The folder cannot be imported exactly; the message says why."""


def _read_json(path: str) -> dict:
  if not storage.exists(path):
    raise FileNotFoundError(f"{path} does not exist")
  try:
    return json.loads(storage.read_text(path))
  except json.JSONDecodeError as error:
    raise ImportRefused(f"{path} is not JSON ({error})") from None


def model_config(hf_config: dict, path: str) -> ModelConfig:
  """codelm's ModelConfig for config.json's fields (f32; the caller sets the dtypes); ImportRefused
  naming every field codelm's model cannot match."""
  get = hf_config.get
  reasons = []
  if get("model_type") != "cohere":
    reasons.append(f"model_type is {get('model_type')!r}, not 'cohere' (CohereForCausalLM)")
  expected = {"num_key_value_heads": 1, "hidden_act": "silu", "attention_bias": False, "use_qk_norm": False,
              "tie_word_embeddings": True}
  for name, value in expected.items():
    if get(name, value) != value:  # absent: transformers' default, which is codelm's for each
      reasons.append(f"{name} is {get(name)!r}; codelm's model has {value!r}")
  rope = get("rope_parameters") or {}
  rope_type = rope.get("rope_type", rope.get("type", "default"))
  if rope_type != "default" or get("rope_scaling"):
    reasons.append(f"RoPE is scaled ({get('rope_scaling') or rope}); codelm's is not")
  rope_theta = rope.get("rope_theta", get("rope_theta", 10_000.0))
  missing = [n for n in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                         "intermediate_size") if not isinstance(get(n), int)]
  if missing:
    raise ImportRefused(f"{path}: no integer {', '.join(missing)}")
  d_model, heads = get("hidden_size"), get("num_attention_heads")
  head_dim = get("head_dim") or d_model // heads
  logit_scale = get("logit_scale", 0.0625)
  if not math.isclose(logit_scale, d_model ** -0.5, rel_tol=1e-6):
    reasons.append(f"logit_scale is {logit_scale}; codelm scales logits by d_model^-0.5 = {d_model ** -0.5:.8g}")
  if head_dim % 2:
    reasons.append(f"head_dim is {head_dim}, odd: RoPE rotates channel pairs")
  if reasons:
    raise ImportRefused(f"{path}: not codelm's model: " + "; ".join(reasons))
  return ModelConfig(vocab_size=get("vocab_size"), d_model=d_model, num_layers=get("num_hidden_layers"),
                     num_heads=heads, head_dim=head_dim, d_ff=get("intermediate_size"),
                     max_length=get("max_position_embeddings", 2048), rope_max_wavelength=float(rope_theta),
                     norm_eps=float(get("layer_norm_eps", 1e-5)))


def check_tokenizer(hf_dir: str, vocabulary, max_length: int) -> list[str]:
  """Why the folder's tokenizer.json does not give `vocabulary`'s ids (empty when it does)."""
  path = storage.join(hf_dir, "tokenizer.json")
  if not storage.exists(path):
    return [f"{path} does not exist: without it nothing shows which ids the model was trained on "
            "(copy it from the export)"]
  found = _read_json(path)
  ours = json.loads(tokenizer.build(vocabulary.sp_model, max_length)[0].to_str())
  differing = [part for part in _TOKENIZER_PARTS if found.get(part) != ours.get(part)]
  if differing:
    return [f"{path} is not the tokenizer of the vocabulary given (its {', '.join(differing)} differ from "
            "what export.hf writes for it)"]
  return []


def check_special_ids(hf_config: dict, vocabulary) -> list[str]:
  expected = {f"{name}_token_id": value for name, value in hf.special_ids(vocabulary).items()}
  return [f"{name} is {hf_config.get(name)!r}; the vocabulary's is {value}" for name, value in expected.items()
          if hf_config.get(name) != value]


# safetensors' own bound on the JSON header (MAX_HEADER_SIZE): a larger length is not a header.
_MAX_HEADER_BYTES = 100_000_000


def safetensors_problem(path: str) -> str | None:
  """What makes `path` an unreadable safetensors file (a cut-short download or copy, a file of another
  kind), from its header and size alone, or None. A safetensors file is an 8-byte little-endian header
  length, that many bytes of JSON ({name: {dtype, shape, data_offsets: [begin, end]}}), then the data,
  which ends at the largest `end`: so the header says how long the whole file must be."""
  with storage.open_file(path, "rb") as f:
    prefix = f.read(8)
    if len(prefix) < 8:
      return f"{path} is truncated: {len(prefix)} bytes, shorter than a safetensors file's 8-byte header length"
    length = int.from_bytes(prefix, "little")
    if length > _MAX_HEADER_BYTES:
      return f"{path}: header unreadable (its length field says {length:,} bytes): not a safetensors file"
    header = f.read(length)
    f.seek(0, 2)
    size = f.tell()
  if len(header) < length:
    return f"{path} is truncated: expected at least {8 + length:,} bytes (its header alone), got {size:,}"
  try:
    entries = json.loads(header.decode("utf-8"))
    ends = [entry["data_offsets"][1] for name, entry in entries.items() if name != "__metadata__"]
    expected = 8 + length + max(ends, default=0)
  except (ValueError, TypeError, KeyError, IndexError, AttributeError) as error:
    return f"{path}: header unreadable ({type(error).__name__}: {str(error)[:100]}): not a safetensors file"
  if not isinstance(expected, int):
    return f"{path}: header unreadable (a data offset is not an integer): not a safetensors file"
  if size != expected:
    return f"{path} is {'truncated' if size < expected else 'longer than its header says'}: expected " \
           f"{expected:,} bytes, got {size:,}"
  return None


def read_weights(hf_dir: str) -> dict[str, np.ndarray]:
  """Every tensor of model.safetensors, or of the shards model.safetensors.index.json names, as numpy
  (bfloat16 as ml_dtypes' bfloat16: the same bits); ImportRefused naming a file that is truncated or
  not safetensors, before any is read."""
  import ml_dtypes
  import torch
  from safetensors import SafetensorError
  from safetensors.torch import load, load_file

  index = storage.join(hf_dir, "model.safetensors.index.json")
  if storage.exists(index):
    names = sorted(set(_read_json(index)["weight_map"].values()))
  elif storage.exists(storage.join(hf_dir, "model.safetensors")):
    names = ["model.safetensors"]
  else:
    raise FileNotFoundError(f"{hf_dir} holds neither model.safetensors nor model.safetensors.index.json")
  paths = [storage.join(hf_dir, name) for name in names]
  for path in paths:
    if not storage.exists(path):
      raise FileNotFoundError(f"{path} does not exist")
    if problem := safetensors_problem(path):
      raise ImportRefused(problem)
  weights = {}
  for path in paths:
    try:  # a local file is mapped, not read whole
      tensors = load(storage.read_bytes(path)) if storage.is_url(path) else load_file(path)
    except SafetensorError as error:  # what the header check above cannot see
      raise ImportRefused(f"{path} is not a readable safetensors file ({error})") from None
    for key, tensor in tensors.items():
      if tensor.dtype == torch.bfloat16:
        weights[key] = tensor.view(torch.uint16).numpy().view(ml_dtypes.bfloat16)
      else:
        weights[key] = tensor.numpy()
  return weights


def check_weights(weights: dict[str, np.ndarray], config: ModelConfig) -> tuple[str | None, list[str]]:
  """(the weights' one dtype, why they are not codelm's model's tensors)."""
  expected = cohere.expected_shapes(config)
  reasons = []
  head = weights.get("lm_head.weight")
  if head is not None and not np.array_equal(head, weights.get("model.embed_tokens.weight")):
    reasons.append("lm_head.weight differs from model.embed_tokens.weight: codelm's output layer is its embedding")
  found = {n: tuple(w.shape) for n, w in weights.items() if n != "lm_head.weight"}
  for name in sorted(set(expected) | set(found)):
    if expected.get(name) != found.get(name):
      reasons.append(f"{name}: codelm's model has {expected.get(name)}, the folder {found.get(name)}")
  dtypes = sorted({str(w.dtype) for w in weights.values()})
  if len(dtypes) != 1 or dtypes[0] not in cohere.DTYPES:
    reasons.append(f"the weights are {', '.join(dtypes)}; codelm keeps all parameters in one of "
                   f"{', '.join(cohere.DTYPES)}")
  return (dtypes[0] if len(dtypes) == 1 else None), reasons[:6]


def import_hf(hf_dir: str, vocab_path: str, model_dir: str, dtype: str | None = None) -> tuple[ModelConfig, str]:
  """Writes MODEL_DIR/run.json and checkpoints/0 from the Hugging Face folder; (config, checkpoints
  folder). Raises ImportRefused (why), FileNotFoundError or FileExistsError before writing anything."""
  from training.checkpoints import Checkpointer
  from training.run_info import write_run_info

  _remove_killed_import(model_dir)
  hf.refuse_occupied(model_dir, "--model_dir")
  hf.require_hf()
  config_path = storage.join(hf_dir, "config.json")
  hf_config = _read_json(config_path)
  config = model_config(hf_config, config_path)
  if not storage.exists(vocab_path):
    raise FileNotFoundError(f"--vocab_path: {vocab_path} does not exist")
  vocabulary = get_vocabulary(vocab_path)
  try:
    reasons = check_special_ids(hf_config, vocabulary)  # the first use reads the model
  except ValueError as error:
    raise ImportRefused(f"--vocab_path: {error}") from None
  if vocabulary.vocab_size > config.vocab_size:
    reasons.append(f"the vocabulary has {vocabulary.vocab_size} ids, the model {config.vocab_size} embedding rows")
  if not reasons:
    reasons += check_tokenizer(hf_dir, vocabulary, config.max_length)
  if reasons:
    raise ImportRefused(f"{hf_dir} cannot be imported into codelm exactly: " + "; ".join(reasons))
  weights = read_weights(hf_dir)
  weights_dtype, reasons = check_weights(weights, config)
  if reasons:
    raise ImportRefused(f"{hf_dir} cannot be imported into codelm exactly: " + "; ".join(reasons))
  config = config.replace(param_dtype=weights_dtype, dtype=dtype or weights_dtype)
  params = cohere.codelm_params(weights, config)
  del weights
  storage.makedirs(model_dir)
  storage.write_atomic(storage.join(model_dir, IN_PROGRESS), storage.resolve(hf_dir) + "\n")
  checkpoints = storage.join(model_dir, "checkpoints")
  checkpointer = Checkpointer(checkpoints, async_save=False)
  try:
    checkpointer.save(IMPORTED_STEP, {"params": params}, {"imported_from": storage.resolve(hf_dir)}, force=True)
  finally:
    checkpointer.close()
  write_run_info(model_dir, config, vocab_path, imported_from=hf_dir)  # its presence means the rest is there
  storage.remove(storage.join(model_dir, IN_PROGRESS))
  return config, checkpoints


def _remove_killed_import(model_dir: str) -> None:
  """What an import killed before it finished left in `model_dir` (its marker, no run.json) is removed,
  so the import can run again; any other content is left to refuse_occupied."""
  from training.run_info import RUN_INFO

  if storage.exists(storage.join(model_dir, IN_PROGRESS)) and not storage.exists(storage.join(model_dir, RUN_INFO)):
    storage.rmtree(model_dir)
    print(f"removed {model_dir}, left by an import that did not finish", flush=True)


def main(argv: Sequence[str] | None = None) -> int:
  parser = argparse.ArgumentParser(prog="python -m export.from_hf", description=__doc__.split("\n\n")[0].replace("\n", " "))
  parser.add_argument("--hf_dir", required=True, help="a CohereForCausalLM folder (config.json, safetensors, tokenizer.json)")
  parser.add_argument("--vocab_path", required=True, help="the codelm SentencePiece model its tokenizer.json was made from")
  parser.add_argument("--model_dir", required=True, help="the codelm MODEL_DIR to write (must not exist, or be empty)")
  parser.add_argument("--dtype", choices=sorted(cohere.DTYPES), default=None,
                      help="compute dtype recorded in run.json (default: the weights' own)")
  args = parser.parse_args(argv)
  try:
    config, checkpoints = import_hf(args.hf_dir, args.vocab_path, args.model_dir, args.dtype)
  except (ImportError, FileExistsError, ImportRefused) as error:
    parser.error(str(error))
  except FileNotFoundError as error:
    parser.error(f"--hf_dir: {error}" if not str(error).startswith("--") else str(error))
  print(f"imported {args.hf_dir} into {args.model_dir} ({config.num_params:,} parameters, {config.param_dtype}; "
        f"checkpoint {IMPORTED_STEP} in {checkpoints}): sample.py --checkpoint {args.model_dir}, or train from "
        f"it with --gin.train.init_from={args.model_dir}", flush=True)
  return 0


if __name__ == "__main__":
  sys.exit(main())
