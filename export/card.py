"""The exported model's README.md (a Hugging Face model card): what was trained, on what, how long,
and how to load it. Everything comes from the run's folder: run.json (the model, the vocabulary, a LoRA
run's base), config.gin (the operative gin config train.py writes: corpus, mixture, batch, lengths)
and the checkpoint's step.
"""

from __future__ import annotations

import ast
import re

from model.config import ModelConfig

_BINDING = re.compile(r"^([A-Za-z_][\w.]*)\s*=\s*(.+?)\s*$")


def gin_values(text: str) -> dict[str, object]:
  """`train.NAME` bindings of an operative gin config, macros (`%NAME`) resolved, literals parsed."""
  raw = {}
  for line in text.splitlines():
    match = _BINDING.match(line)
    if match:
      raw[match.group(1)] = match.group(2)

  def value(text: str, depth: int = 0) -> object:
    if text.startswith("%") and depth < 8:
      return value(raw.get(text[1:], text), depth + 1)
    try:
      return ast.literal_eval(text)
    except (ValueError, SyntaxError):
      return text

  return {name[len("train."):]: value(text) for name, text in raw.items() if name.startswith("train.")}


def _training_lines(run: dict[str, object], step: int) -> list[str]:
  if not run:
    return ["- Training settings: not recorded (the run's config.gin is missing)."]
  lines = [f"- Corpus: `{run.get('corpus_dir')}`", f"- Mixture: `{run.get('mixture_or_task_name')}`"]
  batch, lengths = run.get("batch_size"), run.get("task_feature_lengths")
  if isinstance(batch, int) and isinstance(lengths, dict) and lengths:
    row = max(lengths.values())  # inputs and targets share one packed row (training/config.py)
    lines.append(f"- Steps: {step:,} of {run.get('train_steps')} planned; batch {batch} rows of {row} tokens: "
                 f"{step * batch * row:,} tokens seen (packed rows, padding included)")
  else:
    lines.append(f"- Steps: {step:,}")
  if run.get("init_from"):
    lines.append(f"- Initialised from: `{run['init_from']}`")
  return lines


def _fim_lines(fim_tokens: dict[str, str]) -> list[str]:
  if not fim_tokens:
    return []
  prefix, suffix, middle = (fim_tokens[f"fim_{part}_token"] for part in ("prefix", "suffix", "middle"))
  return [
      "", f"Fill-in-the-middle: the vocabulary has `{prefix}`, `{suffix}` and `{middle}` "
      "(`tokenizer.fim_prefix_token_id`, ...). A run trained with FIM (codelm's `UL2Config.fim_rate`) writes the "
      f"middle after `[code] {prefix} PREFIX {suffix} SUFFIX {middle}` (PSM) or "
      f"`[code] {prefix} {suffix} SUFFIX {middle} PREFIX` (SPM) and ends it with `[eod]`. Build the prompt from "
      "ids (the markers' ids, and `tokenizer(text, add_special_tokens=False)` for the prefix and the suffix), "
      "or pass `split_special_tokens=False` with a text that spells the markers (exact unless the prefix or "
      "the suffix spells a special token)."]


def model_card(*, source: str, step: int, config: ModelConfig, vocab_path: str, run: dict[str, object],
               adapters: dict | None, generation: dict, notes: list[str],
               fim_tokens: dict[str, str] | None = None) -> str:
  """README.md text. `run`: config.gin's train.* values ({} when absent); `adapters`: a LoRA run's
  run.json record (merged into the base here); `generation`: generation_config.json's values;
  `fim_tokens`: tokenizer_config.json's FIM keys (export/tokenizer.py), {} for a vocabulary without them."""
  lora = []
  if adapters:
    lora = [f"- LoRA run, exported merged: adapters {adapters['lora']} on the base "
            f"`{adapters['base_checkpoints']}` step {adapters['base_step']}"]
  size = (f"{config.num_layers} layers, d_model {config.d_model}, {config.num_heads} query heads of {config.head_dim} "
          f"and one key/value head (multi-query), d_ff {config.d_ff}, vocabulary {config.vocab_size}, "
          f"context {config.max_length}: {config.num_params:,} parameters")
  sampling = ", ".join(f"{k} {generation[k]}" for k in ("temperature", "top_p", "top_k") if k in generation)
  text = [
      "---", "library_name: transformers", "pipeline_tag: text-generation", "tags: [code, codelm, cohere]", "---",
      "", "# codelm model", "",
      "A PaLM-style decoder-only code model trained with codelm (UL2 + causal-LM objective), exported as "
      "transformers' `CohereForCausalLM`, whose block is the same computation (parallel attention and MLP "
      "from one LayerNorm, SwiGLU, multi-query attention, RoPE, tied embeddings with a logit scale).", "",
      "## Training run", "", f"- Exported from: `{source}` (step {step:,})", f"- Model: {size}",
      f"- Compute dtype in training: {config.dtype}; parameters: {config.param_dtype}",
      *_training_lines(run, step), *lora, f"- Vocabulary: `{vocab_path}` (SentencePiece, as tokenizer.json)", "",
      "## Use", "", "```python",
      "from transformers import AutoModelForCausalLM, AutoTokenizer",
      "tokenizer, model = AutoTokenizer.from_pretrained(PATH), AutoModelForCausalLM.from_pretrained(PATH)",
      "print(tokenizer.decode(model.generate(**tokenizer('def add(a, b):\\n', return_tensors='pt'))[0]))",
      "```", "",
      "The tokenizer prepends `[code]` (every training document starts with it) unless "
      "`add_special_tokens=False`; a completion ends at `[eod]` (or `</s>`). Text that spells `[code]` or "
      "another special token is ordinary text (`split_special_tokens`; with the `tokenizers` library alone, "
      "set `encode_special_tokens = True`).", *_fim_lines(fim_tokens or {}), "",
      "The tokenizer gives codelm's ids (the ids of its training pipeline and sampler): codelm encodes "
      "its SentencePiece vocabulary in segments with scores every encoder sums exactly, and the tokenizer "
      "does the same (export/tokenizer.py). Plain SentencePiece on the vocabulary file gives other ids "
      "where pieces tie (about 0.4-0.7% of ids on real source files).", "",
      f"Sampling defaults (generation_config.json, the paper's): {sampling}.",
  ]
  if notes:
    text += ["", "## Notes", "", *[f"- {note}" for note in notes]]
  return "\n".join(text) + "\n"
