"""A trained run restored for sampling: its run.json, a checkpoint, a LoRA run's adapters merged into
their base, the parameters laid out on a mesh by training's rules.

sample.py and evaluation/iterative/run.py sample from a run through `load_sampler`. The parameter layout
is computed once, here: checkpoints restore straight onto it, and Sampler takes its parameters as they
come (placed). `place_params` lays out parameters made elsewhere (random ones in tests) the same way.
"""

from __future__ import annotations

from typing import Any, Sequence

import flax.linen as nn
import jax
from jax.sharding import Mesh, NamedSharding, PartitionSpec

import storage
from data.vocab import CODE_TOKEN, EOD_TOKEN, get_vocabulary
from model import lora, sharding
from model.transformer import Decoder
from sampling.prompt_fit import EncodedPrompts, Prompt, encode_prompts
from sampling.sampler import Sampler
from training.checkpoints import Checkpointer, abstract_with_shardings, read_params
from training.run_info import read_adapters, read_checkpoint_dir, read_run_info


def split_checkpoint(checkpoint: str) -> tuple[str, int | None]:
  """(MODEL_DIR, step) of --checkpoint: a train.py MODEL_DIR (step None: the newest good one), or
  MODEL_DIR/checkpoints/STEP."""
  parts = checkpoint.rstrip("/").rsplit("/", 2)  # "/" for local paths and URLs alike
  if len(parts) == 3 and parts[2].isdigit():
    return parts[0] or "/", int(parts[2])
  return checkpoint, None


def encode_run_prompts(checkpoint: str, prompts: Sequence[Prompt], max_decode_length: int,
                       length_flag: str = "max_decode_length") -> EncodedPrompts:
  """The prompts as a run's sampler will feed them (its vocabulary, its context), from run.json and
  the vocabulary alone: whether they fit is known before a parameter is read."""
  config, vocab_path = read_run_info(split_checkpoint(checkpoint)[0])
  vocabulary = get_vocabulary(vocab_path)
  return encode_prompts(vocabulary, vocabulary.tokenizer.piece_to_id(CODE_TOKEN), prompts, config.max_length,
                        max_decode_length, length_flag)


def place_params(model: Decoder, params: Any, mesh: Mesh) -> Any:
  """`params` laid out on `mesh` as training lays them out (model/sharding.py's rules)."""
  return jax.device_put(params, sharding.param_shardings(model, mesh))


def load_sampler(checkpoint: str, mesh_shape: Sequence[int] = (-1, 1, 1)) -> tuple[Sampler, int]:
  """(a Sampler, its step) for the newest good checkpoint of a run (or a specific
  `…/checkpoints/STEP` folder), its parameters laid out on a (data, fsdp, tensor) mesh of every device
  by training's rules. A damaged checkpoint is skipped with a warning naming its step and why (and left
  where it is)."""
  model_dir, step = split_checkpoint(checkpoint)
  config, vocab_path = read_run_info(model_dir)
  directory = read_checkpoint_dir(model_dir)  # MODEL_DIR/checkpoints unless train.checkpoint_dir moved them
  if not storage.isdir(directory):
    raise FileNotFoundError(f"no checkpoint in {model_dir}: {directory} does not exist (has the run saved one?)")
  model, vocabulary = Decoder(config), get_vocabulary(vocab_path)
  mesh = sharding.make_mesh(*mesh_shape)
  # Training's parameter layout from the model and the mesh alone; the optimizer state is not restored.
  layout = sharding.param_shardings(model, mesh)
  base = abstract_with_shardings(nn.unbox(sharding.abstract_params(model)), layout)
  adapters = read_adapters(model_dir)  # a LoRA run: its checkpoints hold adapters of a frozen base
  abstract = _abstract_adapters(model, adapters, mesh) if adapters else base
  checkpointer = Checkpointer(directory, async_save=False)
  try:
    if step is not None and step not in checkpointer.steps():
      raise FileNotFoundError(f"no checkpoint {step} in {directory} (have {checkpointer.steps()})")
    restored = checkpointer.restore_params(abstract, step=step)
  finally:
    checkpointer.close()
  if restored is None:
    raise FileNotFoundError(f"no checkpoint in {directory} (has the run saved one?)")
  params, step = restored
  if adapters:  # sample the merged model, laid out as the base (the merge's own layout is the compiler's)
    params = jax.device_put(merge_adapters(model, base, params, adapters), layout)
  end_ids = [vocabulary.tokenizer.piece_to_id(EOD_TOKEN), vocabulary.eos_id]
  return Sampler(model, params, vocabulary, vocabulary.tokenizer.piece_to_id(CODE_TOKEN), end_ids, mesh=mesh), step


def _lora_model(model: Decoder, adapters: dict) -> Decoder:
  return Decoder(model.config, lora=lora.LoraConfig(**adapters["lora"]))


def _abstract_adapters(model: Decoder, adapters: dict, mesh: Mesh) -> Any:
  """The adapters' tree as a LoRA run's checkpoints hold it, replicated (training/step.py)."""
  shapes = jax.eval_shape(lambda: lora.init_adapters(_lora_model(model, adapters), jax.random.key(0)))
  replicated = NamedSharding(mesh, PartitionSpec())
  return jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=replicated), shapes)


def merge_adapters(model: Decoder, base_abstract: Any, adapters_params: Any, adapters: dict) -> Any:
  """The base checkpoint a LoRA run trained on (its recorded step, laid out as `base_abstract`) with
  the adapters merged in."""
  try:
    restored = read_params(adapters["base_checkpoints"], base_abstract, step=adapters["base_step"])
  except FileNotFoundError as error:
    raise FileNotFoundError(f"the LoRA run's base checkpoint is gone: {error}") from None
  if restored is None:
    raise FileNotFoundError(f"the LoRA run's base checkpoint {adapters['base_step']} in "
                            f"{adapters['base_checkpoints']} does not restore")
  return lora.merge(restored[0], adapters_params, _lora_model(model, adapters).lora)
