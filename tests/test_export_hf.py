"""export.hf: a run as transformers' CohereForCausalLM. The exported model's logits and greedy samples
are codelm's, fill-in-the-middle prompts and middles too; its tokenizer gives codelm's ids for every
language's files and decodes them back byte for byte; a LoRA run exports merged; what cannot be
exported exactly is refused, and bad input writes nothing.

The runs are written with training's own writers (run.json, orbax checkpoints) around parameters
trained here for a few steps: a train.py run costs about a minute on this machine (SeqIO cache plus
compilation), the whole file's budget.
"""

import json
import os
import random
import re
import sys

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
import torch

import code_corpus
from data import records
from languages import LANGUAGES
from data.vocab import FIM_TOKENS, fim_token_ids, get_vocabulary, train_vocabulary
from export import card, cohere, hf
from export import tokenizer as hf_tokenizer
from model import lora
from model.config import get_config
from model.transformer import Decoder, init_params
from objectives import fim
from sampling.sampler import Sampler, SamplingConfig
from sampling.strategies import DEFAULT_TEMPERATURE, DEFAULT_TOP_K, DEFAULT_TOP_P
from training.checkpoints import Checkpointer
from training.run_info import write_run_info

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOLERANCE = 1e-4  # f32 logits, codelm (XLA) against transformers (torch)

# ---------------------------------------------------------------------------------------------
# A small corpus of the 14 languages: a few files each, with brackets, tabs, space runs, digits and
# some non-ASCII text, so the vocabulary has all of them as pieces (and leaves rarer characters to
# byte fallback).

_NAMES = ["count", "total", "index", "value", "buffer", "result", "parser", "token", "node", "item"]


def _files(language: str) -> list[str]:
  files = []
  for i in range(4):
    a, b = _NAMES[i % 10], _NAMES[(i * 3 + 1) % 10]
    n = 10 * i + 7
    files.append({
        "java": f"import java.util.*;\n\npublic class {a.title()}{i} {{\n    // größe {n}\n    static int[] {a} = new int[{n}];\n"
                f"    public static List<Integer> {b}(Map<String, Integer> m) {{\n        return new ArrayList<>(m.values());\n    }}\n}}\n",
        "python": f"def {a}_{i}({b}: list[int]) -> dict[str, int]:\n    \"\"\"Café {n}.\"\"\"\n    if {b}[0] < {n} and {b}[-1] > 0:\n"
                  f"        return {{'{a}': {b}[{i}] * {n}}}\n    return {{}}\n",
        "cpp": f"#include <vector>\n#include <map>\n\ntemplate <typename T>\nstd::vector<T> {a}{i}(const std::map<int, T>& m) {{\n"
               f"    std::vector<T> out;\n    for (auto& [k, v] : m) out.push_back(v * {n});\n    return out;\n}}\n",
        "php": f"<?php\nfunction {a}_{i}(array ${b}): array {{\n    // naïve {n}\n    return array_map(fn($x) => $x * {n}, ${b});\n}}\n?>\n",
        "typescript": f"export function {a}{i}({b}: Array<number>): Map<string, number> {{\n  const m = new Map<string, number>();\n"
                      f"  m.set('{a}', {b}[{i}] ?? {n});\n  return m;\n}}\n",
        "javascript": f"const {a}{i} = ({b}) => {{\n  // état {n}\n  return {b}.filter((x) => x >= {n}).map((x) => [x, x * 2]);\n}};\n"
                      f"module.exports = {{ {a}{i} }};\n",
        "go": f"package main\n\nimport \"fmt\"\n\nfunc {a}{i}({b} []int) map[string]int {{\n\tm := map[string]int{{}}\n"
              f"\tfor i, v := range {b} {{\n\t\tif v > {n} {{\n\t\t\tm[fmt.Sprint(i)] = v\n\t\t}}\n\t}}\n\treturn m\n}}\n",
        "dart": f"List<int> {a}{i}(Map<String, int> {b}) {{\n  // Übung {n}\n  return {b}.values.where((v) => v > {n}).toList();\n}}\n",
        "lua": f"local function {a}_{i}({b})\n  -- año {n}\n  local t = {{}}\n  for k, v in pairs({b}) do\n    t[#t + 1] = v * {n}\n  end\n"
               f"  return t\nend\nreturn {a}_{i}\n",
        "rust": f"use std::collections::HashMap;\n\npub fn {a}_{i}({b}: &[i64]) -> HashMap<String, i64> {{\n    let mut m = HashMap::new();\n"
                f"    for (k, v) in {b}.iter().enumerate() {{\n        m.insert(format!(\"{{}}\", k), v * {n});\n    }}\n    m\n}}\n",
        "csharp": f"using System.Collections.Generic;\n\npublic static class {a.title()}{i} {{\n    public static List<int> {b.title()}(int[] xs) {{\n"
                  f"        var r = new List<int>();\n        foreach (var x in xs) {{ if (x < {n}) r.Add(x); }}\n        return r;\n    }}\n}}\n",
        "r": f"{a}_{i} <- function({b}) {{\n  # résumé {n}\n  x <- {b}[{b} > {n}]\n  return(list(total = sum(x), items = x[1:{i + 1}]))\n}}\n",
        "julia": f"function {a}_{i}({b}::Vector{{Int}})::Dict{{String,Int}}\n    # π ≈ 3.14 {n}\n    return Dict(\"{a}\" => {b}[{i + 1}] * {n})\nend\n",
        "haskell": f"module {a.title()}{i} where\n\n-- λ {n}\n{a}{i} :: [Int] -> [(Int, Int)]\n{a}{i} xs = [(x, x * {n}) | x <- xs, x > {i}]\n",
    }[language])
  return files


# Text that must stay ordinary pieces (codelm never produces a special id from text) or fall back to
# bytes, in each language's files: the markers spelled literally, byte-piece names, characters outside
# the vocabulary, long numbers; and text where SentencePiece's paths tie (whitespace runs past the
# listed ones, newline runs, rules of "=" and "-", words longer than a segment).
PROBES = ["[code]", "[eod]", "[NLU][S2S]", "<extra_id_0>", " <extra_id_17>", "</s>", "<pad>", "<unk>", "<0x41>",
          "\U0001F980 \u00e6\u2603\x7f\x00", "\t" * 6 + "x" + " " * 30 + "y", "12345678901234567890", "a ▁b",
          "}\n\n\n\n\n", "=" * 37 + "\n" + "-" * 29, " " * 300 + "z", "ab_" * 120, "\t \t  \t" * 9 + "w"]


@pytest.fixture(scope="module")
def vocab(tmp_path_factory):
  root = str(tmp_path_factory.mktemp("export_corpus"))
  texts = {}
  for language in LANGUAGES:
    texts[language.name] = _files(language.name)
    encoded = [records.encode(t, f"{language.name}/{i}") for i, t in enumerate(texts[language.name])]
    records.write_shard(os.path.join(root, records.shard_name(language.name, "train", 0, 1)), encoded)
  path = train_vocabulary(root, vocab_size=640, output=os.path.join(root, "spm.model"))
  return path, get_vocabulary(path), texts


def _train(model, params, vocabulary, texts, steps):
  """`steps` Adam steps of next-token loss on the corpus: parameters with a trained model's structure."""
  ids = np.concatenate([np.asarray(vocabulary.encode(t), np.int32) for files in texts.values() for t in files])
  rows = ids[: (len(ids) // 65) * 65].reshape(-1, 65)[:8]
  optimizer = optax.adam(3e-3)

  @jax.jit
  def step(params, state):
    def loss(p):
      logits, _ = model.apply({"params": p}, rows[:, :-1])
      return optax.softmax_cross_entropy_with_integer_labels(logits, rows[:, 1:]).mean()

    value, grads = jax.value_and_grad(loss)(params)
    updates, state = optimizer.update(grads, state)
    return optax.apply_updates(params, updates), state, value

  state, losses = optimizer.init(params), []
  for _ in range(steps):
    params, state, value = step(params, state)
    losses.append(float(value))
  assert losses[-1] < losses[0] - 1.0, losses  # it did learn
  return params


GIN = """BATCH_SIZE = 8
CORPUS_DIR = '{corpus}'
MIXTURE_OR_TASK_NAME = 'code_unimax_2_ul2'
TASK_FEATURE_LENGTHS = {{'inputs': 256, 'targets': 256}}
TRAIN_STEPS = 300
train.batch_size = %BATCH_SIZE
train.corpus_dir = %CORPUS_DIR
train.mixture_or_task_name = %MIXTURE_OR_TASK_NAME
train.task_feature_lengths = %TASK_FEATURE_LENGTHS
train.train_steps = %TRAIN_STEPS
"""


def _write_run(model_dir, config, vocab_path, tree, step, adapters=None, gin=None):
  """A run folder as train.py leaves it: run.json, config.gin, checkpoints/STEP holding `tree`."""
  os.makedirs(model_dir, exist_ok=True)
  write_run_info(model_dir, config, vocab_path, adapters=adapters)
  if gin:
    with open(os.path.join(model_dir, "config.gin"), "w") as f:
      f.write(gin)
  checkpointer = Checkpointer(os.path.join(model_dir, "checkpoints"), async_save=False)
  checkpointer.save(step, {"params": tree}, {"step": step})
  checkpointer.close()
  return model_dir


def _export(model_dir, output, *flags):
  assert hf.main(["--checkpoint", model_dir, "--output", str(output), *flags]) == 0
  from transformers import AutoModelForCausalLM, AutoTokenizer

  model = AutoModelForCausalLM.from_pretrained(str(output), dtype=torch.float32).eval()
  return model, AutoTokenizer.from_pretrained(str(output))


@pytest.fixture(scope="module")
def runs(vocab, tmp_path_factory):
  """(size, kind) -> (codelm model, params, exported transformers model, its tokenizer, run folder,
  export folder), for tiny and mini, random and trained. The tiny trained run is exported in shards."""
  vocab_path, vocabulary, texts = vocab
  base = tmp_path_factory.mktemp("export_runs")
  found = {}
  for size in ("tiny", "mini"):
    config = get_config(size, vocab_size=vocabulary.vocab_size, max_length=256)
    model = Decoder(config)
    params = nn.unbox(init_params(model, jax.random.key(1)))
    for kind in ("random", "trained"):
      if kind == "trained":
        params = _train(model, params, vocabulary, texts, steps=12)
      step = 20 if kind == "trained" else 1
      gin = GIN.format(corpus=os.path.dirname(vocab_path)) if kind == "trained" else None
      run = _write_run(str(base / f"{size}_{kind}"), config, vocab_path, params, step, gin=gin)
      flags = ["--max_shard_size", "1MB"] if (size, kind) == ("tiny", "trained") else []
      exported, tokenizer = _export(run, base / f"{size}_{kind}_hf", *flags)
      found[size, kind] = (model, params, exported, tokenizer, run, base / f"{size}_{kind}_hf")
  return found


def _sequences(vocabulary, texts, vocab_size):
  """Several rows of 150 tokens (positions well past 64): random ids, and real code."""
  rng = np.random.default_rng(0)
  code = np.concatenate([np.asarray(vocabulary.encode(t)) for t in texts["cpp"] + texts["go"]])[:150]
  return np.stack([rng.integers(0, vocab_size, 150), rng.integers(0, vocab_size, 150), code]).astype(np.int64)


def _logits_match(model, params, exported, tokens):
  ours = np.asarray(model.apply({"params": params}, jnp.asarray(tokens, jnp.int32))[0])
  with torch.no_grad():
    theirs = exported(torch.from_numpy(tokens)).logits.numpy()
  difference = np.abs(ours - theirs).max()
  assert difference <= TOLERANCE, difference
  assert np.abs(ours).max() > 1.0  # not trivially small logits
  return difference


@pytest.mark.parametrize("size", ["tiny", "mini"])
@pytest.mark.parametrize("kind", ["random", "trained"])
def test_transformers_logits_and_greedy_samples_are_codelm_s(runs, vocab, size, kind):
  _, vocabulary, texts = vocab
  model, params, exported, tokenizer, _, _ = runs[size, kind]
  _logits_match(model, params, exported, _sequences(vocabulary, texts, model.config.vocab_size))

  code_id = vocabulary.tokenizer.piece_to_id("[code]")
  sampler = Sampler(model, params, vocabulary, code_id, end_ids=[-1])  # no end token: 32 tokens each
  prompts = ["def count_0(index: list[int]) -> dict[str, int]:\n", "package main\n\nfunc value1("]
  ours = sampler.sample(prompts, 1, SamplingConfig(temperature=0.0, max_decode_length=32, chunk_length=8), seed=0)
  for prompt, (completion,) in zip(prompts, ours):
    ids = tokenizer(prompt, return_tensors="pt").input_ids  # [code] first, as the sampler's prompts
    assert ids[0].tolist() == [code_id] + list(vocabulary.encode(prompt))
    with torch.no_grad():  # eos_token_id -1: no end token here either
      out = exported.generate(ids, do_sample=False, max_new_tokens=32, eos_token_id=-1, pad_token_id=0)
    new = out[0, ids.shape[1]:].tolist()
    assert len(new) == 32 and completion.num_tokens == 32
    assert tokenizer.decode(new) == vocabulary.decode(new) == completion.text


# ---- fill-in-the-middle ----------------------------------------------------------------------------
# A FIM prompt is [code] + objectives/fim.py's frame of the prefix's and the suffix's ids; the model writes
# the middle and ends it with [eod]. The runs above were trained without FIM: `fim_run` teaches the tiny
# trained run a few FIM examples (their middles, then [eod]) so that its greedy middles end at [eod].

def _fim_cases(texts):
  """(prefix, middle, suffix, format): each case's middle the rest of a line, one per language below."""
  cases = []
  for language, at, fim_format in (("python", "return ", fim.PSM), ("go", "m := ", fim.SPM),
                                   ("rust", "let mut ", fim.PSM), ("lua", "local t = ", fim.SPM)):
    text = texts[language][1]
    first = text.index(at) + len(at)
    cases.append((*fim.split_text(text, first, text.index("\n", first)), fim_format))
  return cases


FIM_STEPS = 40  # Adam steps on the four cases: three of their greedy middles then end at [eod]


@pytest.fixture(scope="module")
def fim_run(runs, vocab, tmp_path_factory):
  """The tiny trained run, trained further on its FIM cases ([code] frame [eod]) and exported: (codelm
  model, params, transformers model, tokenizer)."""
  vocab_path, vocabulary, texts = vocab
  model, params, _, _, _, _ = runs["tiny", "trained"]
  ids = fim.FimIds.of(vocabulary)
  special = vocabulary.tokenizer
  code_id, eod_id = special.piece_to_id("[code]"), special.piece_to_id("[eod]")
  rows = [[code_id] + fim.frame(vocabulary.encode(p), vocabulary.encode(s), vocabulary.encode(m), ids, f) + [eod_id]
          for p, m, s, f in _fim_cases(texts)]
  width = max(map(len, rows))
  tokens = np.asarray([r + [0] * (width - len(r)) for r in rows], np.int32)
  weights = np.asarray([[1.0] * (len(r) - 1) + [0.0] * (width - len(r)) for r in rows], np.float32)
  optimizer = optax.adam(3e-3)

  @jax.jit
  def step(params, state):
    def loss(p):
      logits, _ = model.apply({"params": p}, tokens[:, :-1])
      return (optax.softmax_cross_entropy_with_integer_labels(logits, tokens[:, 1:]) * weights).sum() / weights.sum()

    value, grads = jax.value_and_grad(loss)(params)
    updates, state = optimizer.update(grads, state)
    return optax.apply_updates(params, updates), state, value

  state = optimizer.init(params)
  for _ in range(FIM_STEPS):
    params, state, _ = step(params, state)
  base = tmp_path_factory.mktemp("export_fim")
  run = _write_run(str(base / "tiny_fim"), model.config, vocab_path, params, 30)
  exported, tokenizer = _export(run, base / "tiny_fim_hf")
  return model, params, exported, tokenizer


def test_the_fim_pieces_are_special_tokens_where_hugging_face_tools_look_for_them(runs, vocab, tmp_path):
  """<fim_prefix>, <fim_suffix>, <fim_middle>: additional special tokens (as StarCoder's) with codelm's ids,
  and tokenizer_config.json's fim_*_token keys (transformers 5: tokenizer.fim_prefix_token_id); text that
  spells them stays ordinary pieces unless split_special_tokens=False is passed. A vocabulary trained
  before FIM exports without them."""
  from transformers import AutoTokenizer

  vocab_path, vocabulary, _ = vocab
  _, _, _, tokenizer, _, folder = runs["tiny", "trained"]
  ids = fim_token_ids(vocabulary)
  assert tokenizer.convert_tokens_to_ids(list(FIM_TOKENS)) == [ids[t] for t in FIM_TOKENS]
  assert set(FIM_TOKENS) <= set(tokenizer.all_special_tokens)
  assert set(ids.values()) <= set(tokenizer.all_special_ids)
  assert [getattr(tokenizer, f"fim_{part}_token_id") for part in ("prefix", "suffix", "middle")] == \
      [ids[t] for t in FIM_TOKENS]
  config = json.loads((folder / "tokenizer_config.json").read_text())
  assert {k: config[k] for k in hf_tokenizer.FIM_TOKEN_KEYS} == hf_tokenizer.FIM_TOKEN_KEYS
  assert set(FIM_TOKENS) <= set(config["additional_special_tokens"])
  special_tokens_map = json.loads((folder / "special_tokens_map.json").read_text())
  assert set(FIM_TOKENS) <= set(special_tokens_map["additional_special_tokens"])
  text = "s = '<fim_prefix>x<fim_suffix>y<fim_middle>'\n"
  assert tokenizer(text, add_special_tokens=False).input_ids == list(vocabulary.encode(text))
  assert not set(ids.values()) & set(vocabulary.encode(text))
  assert [i for i in tokenizer(text, split_special_tokens=False).input_ids if i in ids.values()] == \
      [ids[t] for t in FIM_TOKENS]
  assert tokenizer(text, add_special_tokens=False).input_ids == list(vocabulary.encode(text))  # per call only
  markers = AutoTokenizer.from_pretrained(str(folder), split_special_tokens=False)  # for tools that spell them
  assert markers(text).input_ids == tokenizer(text, split_special_tokens=False).input_ids
  assert "Fill-in-the-middle: the vocabulary has `<fim_prefix>`" in (folder / "README.md").read_text()

  # Without the pieces (a vocabulary trained before FIM): no FIM tokens, the same ids for everything else.
  from sentencepiece import sentencepiece_model_pb2 as model_pb2

  with open(vocab_path, "rb") as f:  # the .model file as trained, less the three pieces
    proto = model_pb2.ModelProto.FromString(f.read())
  for i in sorted((i for i, p in enumerate(proto.pieces) if p.piece in FIM_TOKENS), reverse=True):
    del proto.pieces[i]
  old_path = tmp_path / "old.model"
  old_path.write_bytes(proto.SerializeToString())
  old = get_vocabulary(str(old_path))
  with pytest.raises(ValueError, match="trained before FIM"):
    fim_token_ids(old)
  _, files = hf_tokenizer.build(old.sp_model, 128)
  assert files.fim_tokens == {} and not set(hf_tokenizer.FIM_TOKEN_KEYS) & set(files.tokenizer_config)
  old_folder = tmp_path / "old_hf"
  old_folder.mkdir()
  for name, written in files.files().items():
    (old_folder / name).write_text(written)
  old_tokenizer = AutoTokenizer.from_pretrained(str(old_folder))
  assert not set(FIM_TOKENS) & set(old_tokenizer.all_special_tokens) and not hasattr(old_tokenizer, "fim_prefix_token")
  assert old_tokenizer(text).input_ids == [old.tokenizer.piece_to_id("[code]")] + list(old.encode(text))
  assert "Fill-in-the-middle" not in card.model_card(
      source="run", step=1, config=get_config("tiny", vocab_size=old.vocab_size), vocab_path=str(old_path), run={},
      adapters=None, generation={}, notes=[], fim_tokens=files.fim_tokens)


def test_transformers_generates_codelm_s_middle_from_a_fim_prompt_of_an_exported_run(fim_run, vocab):
  """The issue's test: a FIM prompt (PSM and SPM) built on the Hugging Face side from the exported
  tokenizer has codelm's ids, and generate()'s greedy middle, ended by eos [eod], is codelm's sampler's."""
  from sampling.prompt_fit import Infill

  _, vocabulary, texts = vocab
  model, params, exported, tokenizer = fim_run
  cases = _fim_cases(texts)
  eod_id = tokenizer.eos_token_id
  assert tokenizer.eos_token == "[eod]"
  new_tokens = 12
  sampler = Sampler(model, params, vocabulary, tokenizer.bos_token_id, end_ids=[eod_id])
  ours = sampler.sample([Infill(p, s, f) for p, _, s, f in cases], 1,
                        SamplingConfig(temperature=0.0, max_decode_length=new_tokens, chunk_length=4), seed=0)
  prefix_id, suffix_id, middle_id = tokenizer.convert_tokens_to_ids(["<fim_prefix>", "<fim_suffix>", "<fim_middle>"])
  reasons = []
  for (prefix, middle, suffix, fim_format), (completion,) in zip(cases, ours):
    # As docs/export.md writes it: the markers' ids, and the prefix and the suffix encoded apart.
    before = tokenizer(prefix, add_special_tokens=False).input_ids
    after = tokenizer(suffix, add_special_tokens=False).input_ids
    if fim_format == fim.PSM:
      ids = [tokenizer.bos_token_id, prefix_id, *before, suffix_id, *after, middle_id]
      text = f"<fim_prefix>{prefix}<fim_suffix>{suffix}<fim_middle>"
    else:
      ids = [tokenizer.bos_token_id, prefix_id, suffix_id, *after, middle_id, *before]
      text = f"<fim_prefix><fim_suffix>{suffix}<fim_middle>{prefix}"
    assert ids == [tokenizer.bos_token_id] + fim.infilling_prompt(vocabulary, prefix, suffix, fim_format)
    assert tokenizer(text, split_special_tokens=False).input_ids == ids  # the markers spelled in text
    with torch.no_grad():
      out = exported.generate(torch.tensor([ids]), do_sample=False, max_new_tokens=new_tokens, eos_token_id=eod_id,
                              pad_token_id=tokenizer.pad_token_id)
    new = out[0, len(ids):].tolist()
    ended = new[-1] == eod_id
    assert eod_id not in new[:-1]
    assert tokenizer.decode(new[:len(new) - ended]) == completion.text, (fim_format, new)
    assert completion.finish_reason == ("eos" if ended else "length") and len(new) == completion.num_tokens + ended
    reasons.append(completion.finish_reason)
    print(f"{fim_format}: {middle!r} -> {completion.text!r} ({completion.finish_reason})")
  assert "eos" in reasons, reasons  # the stop at [eod] is exercised

  # A prefix that spells a marker: the ids way keeps it text, as codelm does; split_special_tokens=False does not.
  prefix, suffix = "s = '<fim_suffix>'\n", "\n"
  expected = [tokenizer.bos_token_id] + fim.infilling_prompt(vocabulary, prefix, suffix, fim.PSM)
  assert [tokenizer.bos_token_id, prefix_id, *tokenizer(prefix, add_special_tokens=False).input_ids, suffix_id,
          *tokenizer(suffix, add_special_tokens=False).input_ids, middle_id] == expected
  assert tokenizer(f"<fim_prefix>{prefix}<fim_suffix>{suffix}<fim_middle>", split_special_tokens=False).input_ids \
      != expected


def test_config_generation_config_and_card_say_what_the_run_is(runs, vocab):
  model, _, _, tokenizer, run, folder = runs["tiny", "trained"]
  _, vocabulary, _ = vocab
  config = model.config
  written = json.loads((folder / "config.json").read_text())
  pieces = vocabulary.tokenizer
  expected = {"architectures": ["CohereForCausalLM"], "model_type": "cohere", "vocab_size": config.vocab_size,
              "hidden_size": config.d_model, "intermediate_size": config.d_ff, "num_hidden_layers": config.num_layers,
              "num_attention_heads": config.num_heads, "num_key_value_heads": 1, "head_dim": config.head_dim,
              "max_position_embeddings": config.max_length, "layer_norm_eps": config.norm_eps,
              "logit_scale": config.d_model ** -0.5, "tie_word_embeddings": True, "hidden_act": "silu",
              "rope_theta": config.rope_max_wavelength, "attention_bias": False, "use_qk_norm": False,
              "bos_token_id": pieces.piece_to_id("[code]"), "eos_token_id": pieces.piece_to_id("[eod]"),
              "pad_token_id": 0, "torch_dtype": "float32", "dtype": "float32"}
  assert {k: written.get(k) for k in expected} == expected
  assert written["rope_parameters"]["rope_theta"] == config.rope_max_wavelength
  generation = json.loads((folder / "generation_config.json").read_text())
  assert (generation["do_sample"], generation["temperature"], generation["top_p"], generation["top_k"]) == (
      True, DEFAULT_TEMPERATURE, DEFAULT_TOP_P, DEFAULT_TOP_K)
  assert generation["eos_token_id"] == [pieces.piece_to_id("[eod]"), vocabulary.eos_id]
  from transformers import GenerationConfig

  loaded = GenerationConfig.from_pretrained(str(folder))
  assert (loaded.temperature, loaded.top_p, loaded.top_k) == (0.8, 0.95, 0)
  # Sharded above --max_shard_size (1MB): several files and their index, which transformers loaded.
  assert all(os.stat(p).st_mode & 0o044 == 0o044 for p in [folder, *folder.iterdir()])  # not private to us
  shards = sorted(p.name for p in folder.glob("model-*.safetensors"))
  assert len(shards) > 1 and (folder / "model.safetensors.index.json").exists()
  assert not (folder / "model.safetensors").exists()
  card = (folder / "README.md").read_text()
  corpus = os.path.dirname(vocab[0])
  assert f"Corpus: `{corpus}`" in card and "Mixture: `code_unimax_2_ul2`" in card
  assert f"Steps: 20 of 300 planned; batch 8 rows of 256 tokens: {20 * 8 * 256:,} tokens seen" in card
  assert f"{config.num_params:,} parameters" in card and "AutoModelForCausalLM.from_pretrained" in card
  # The special tokens, and [code] prepended with add_special_tokens (as codelm's sampler does).
  assert (tokenizer.bos_token, tokenizer.eos_token, tokenizer.pad_token) == ("[code]", "[eod]", "<pad>")
  specials = {"[NLU]", "[NLG]", "[S2S]", "</s>", "<unk>"} | {f"▁<extra_id_{i}>" for i in range(100)}
  assert specials <= set(tokenizer.all_special_tokens)
  assert set(tokenizer.all_special_ids) >= {vocabulary.vocab_size - 1, vocabulary.vocab_size - 100}


def test_every_language_s_files_encode_to_codelm_s_ids_and_decode_byte_for_byte(runs, vocab):
  _, vocabulary, texts = vocab
  tokenizer = runs["mini", "random"][3]
  checked = 0
  for language in LANGUAGES:
    for i, text in enumerate(texts[language.name]):
      # Each probe spliced into the file, inside a comment-like line, and alone.
      samples = [text] + [text[:len(text) // 2] + probe + text[len(text) // 2:] for probe in PROBES[i::4]]
      for sample in samples:
        ids = list(vocabulary.encode(sample))
        assert tokenizer(sample, add_special_tokens=False).input_ids == ids, sample
        decoded = tokenizer.decode(ids)
        assert decoded == vocabulary.decode(ids)
        if "▁" not in sample:  # a literal U+2581 decodes as a space, in codelm too (data/vocab.py)
          assert decoded == sample
        checked += 1
  for probe in PROBES:
    assert tokenizer(probe, add_special_tokens=False).input_ids == list(vocabulary.encode(probe)), probe
  listed = " " * 12 + "\t" * 4  # the longest listed runs: one piece each
  assert tokenizer(listed).input_ids[1:] == list(vocabulary.encode(listed)) and len(vocabulary.encode(listed)) == 2
  specials = set(tokenizer.all_special_ids)
  assert not specials & {i for p in PROBES for i in vocabulary.encode(p) if p != "<0x41>"}
  byte_ids = vocabulary.encode("\U0001F980")  # outside the pieces: its four UTF-8 bytes
  assert [vocabulary.tokenizer.id_to_piece(i) for i in byte_ids] == ["<0xF0>", "<0x9F>", "<0xA6>", "<0x80>"]
  assert checked > 14 * 4


def test_indentation_before_a_word_splits_as_codelm_s_encoders_split_it(runs, vocab):
  """A run of spaces (tabs) before a word: one run piece, or the run less one space and the word's "▁w"
  piece where "▁w" scores better than "w" (data/vocab.py's run piece score). Every word that has both
  pieces, after 1..12 spaces and 1..4 tabs: the same ids as codelm in Python and in TensorFlow (the
  training pipeline), and both outcomes occur."""
  _, vocabulary, _ = vocab
  tokenizer = runs["mini", "random"][3]
  pieces = [vocabulary.tokenizer.id_to_piece(i) for i in range(vocabulary.tokenizer.get_piece_size())]
  words = [p for p in pieces if p.isalpha() and "\u2581" + p in pieces]
  assert len(words) >= 10
  outcomes = set()
  for word in words:
    for run in [" " * n for n in range(1, 13)] + ["\t" * n for n in range(1, 5)]:
      text = run + word + "\n"
      ids = list(vocabulary.encode(text))
      assert tokenizer(text, add_special_tokens=False).input_ids == ids, (text, [pieces[i] for i in ids])
      assert vocabulary.encode_tf(text).numpy().tolist() == ids, text
      if run[0] == " " and len(run) > 1:
        outcomes.add(pieces[ids[-2]].startswith("\u2581"))
  assert outcomes == {True, False}


def test_long_files_with_ties_encode_to_codelm_s_ids(runs, vocab):
  """Every language's files joined into one long text with tie-prone runs between them: where
  SentencePiece's whole-text Viterbi picked a tie's winner by float rounding, codelm's segments and
  quantized scores leave one answer, which the exported tokenizer gives too."""
  _, vocabulary, texts = vocab
  tokenizer = runs["mini", "random"][3]
  rng = random.Random(0)
  joined = []
  for language in LANGUAGES:
    for text in texts[language.name]:
      joined += [text, rng.choice(PROBES[-6:]), " " * rng.randint(13, 40) + "x", "\n" * rng.randint(3, 6)]
  text = "".join(joined * 4)
  assert len(text) > 20_000
  assert tokenizer(text, add_special_tokens=False).input_ids == list(vocabulary.encode(text))


def test_a_vocabulary_lacking_the_characters_of_special_pieces_still_matches(tmp_path):
  """code_corpus's vocabulary (Python and Go) has no piece for '<' or '[': the text "<0x41>" or
  "[code]" is bytes and ordinary pieces in codelm, never the byte piece or the marker."""
  vocab_path, vocabulary = code_corpus.build(str(tmp_path))
  built, _ = hf_tokenizer.build(vocabulary.sp_model, 128)
  built.encode_special_tokens = True
  for text in PROBES + ["x<0x41>y", "[code]<0xFF>", "def getName_0(x, y):\n    return x * 0 + y  # getName\n"]:
    assert built.encode(text, add_special_tokens=False).ids == list(vocabulary.encode(text)), text
  assert "<" not in {vocabulary.tokenizer.id_to_piece(i) for i in range(vocabulary.vocab_size)}


def test_a_lora_run_exports_its_merged_parameters(runs, vocab, tmp_path):
  vocab_path, vocabulary, texts = vocab
  model, base_params, _, _, base_run, _ = runs["tiny", "trained"]
  lora_config = lora.LoraConfig(targets=("query", "key", "value", "out", "gate", "up", "down"))
  adapters = lora.init_adapters(Decoder(model.config, lora=lora_config), jax.random.key(2))
  keys = iter(jax.random.split(jax.random.key(3), 100))
  adapters = jax.tree_util.tree_map_with_path(  # B is zero at init: give it values, as training would
      lambda path, x: 0.05 * jax.random.normal(next(keys), x.shape) if str(path[-1].key).endswith("_b") else x,
      adapters)
  record = {"lora": {**lora_config.__dict__, "targets": list(lora_config.targets)},
            "base_checkpoints": os.path.join(base_run, "checkpoints"), "base_step": 20}
  run = _write_run(str(tmp_path / "lora"), model.config, vocab_path, adapters, 5, adapters=record)
  exported, _ = _export(run, tmp_path / "lora_hf")
  merged = lora.merge(base_params, adapters, lora_config)
  expected = cohere.cohere_weights(merged, model.config)
  state = exported.state_dict()
  for name, array in expected.items():
    np.testing.assert_allclose(state[name].numpy(), array, atol=1e-6, err_msg=name)
  assert np.abs(expected["model.layers.0.self_attn.q_proj.weight"]
                - cohere.cohere_weights(base_params, model.config)["model.layers.0.self_attn.q_proj.weight"]).max() > 1e-3
  _logits_match(model, merged, exported, _sequences(vocabulary, texts, model.config.vocab_size))
  assert "LoRA run, exported merged" in (tmp_path / "lora_hf" / "README.md").read_text()


def test_heads_wider_than_d_model_export_with_head_dim_and_are_refused_where_transformers_ignores_it(
    vocab, tmp_path, monkeypatch, capsys):
  """PaLM's 2b and 4b shapes: heads x 256 != d_model. transformers' Cohere reads config.head_dim; one that
  did not (simulated: the field left out) would build other shapes, and the export refuses."""
  vocab_path, vocabulary, texts = vocab
  config = get_config("tiny", vocab_size=vocabulary.vocab_size, head_dim=64, max_length=256)
  assert config.attention_dim != config.d_model
  model = Decoder(config)
  params = nn.unbox(init_params(model, jax.random.key(4)))
  run = _write_run(str(tmp_path / "wide"), config, vocab_path, params, 1)
  exported, _ = _export(run, tmp_path / "wide_hf")
  _logits_match(model, params, exported, _sequences(vocabulary, texts, config.vocab_size))
  assert "cannot load this model" in (tmp_path / "wide_hf" / "README.md").read_text()

  fields = cohere.config_fields
  monkeypatch.setattr(cohere, "config_fields", lambda *a: {k: v for k, v in fields(*a).items() if k != "head_dim"})
  output = tmp_path / "ignored_hf"
  with pytest.raises(SystemExit) as exit_:
    hf.main(["--checkpoint", run, "--output", str(output)])
  err = capsys.readouterr().err
  assert exit_.value.code == 2 and "the installed transformers builds other shapes" in err and "q_proj" in err, err
  assert not output.exists() and not list(tmp_path.glob(".ignored_hf*"))


def test_a_bucket_output_gets_the_same_files_through_storage(runs, vocab, tmp_path):
  """A URL output (ram:// standing in for gs://) is written through storage.py, file by file; and
  export.from_hf reads it back from there."""
  import storage
  from sampling.restore import load_sampler

  _, params, _, _, run, local = runs["tiny", "trained"]
  url = "ram://export_hf_test/out"
  assert hf.main(["--checkpoint", run, "--output", url, "--max_shard_size", "1MB"]) == 0
  try:
    names = sorted(os.listdir(local))
    assert sorted(storage.listdir(url)) == names
    for name in names:
      assert storage.read_bytes(storage.join(url, name)) == (local / name).read_bytes(), name
    _same_tree(load_sampler(_import(url, vocab[0], tmp_path / "from_bucket"))[0].params, params)
  finally:  # ram:// has files only, no folders to remove
    for name in storage.listdir(url):
      storage.remove(storage.join(url, name))


def _refused(capsys, *argv):
  with pytest.raises(SystemExit) as exit_:
    hf.main(list(argv))
  err = capsys.readouterr().err
  assert exit_.value.code == 2 and "Traceback" not in err, err
  return err


def test_refusals_and_bad_input_name_the_path_and_write_nothing(runs, vocab, tmp_path, capsys, monkeypatch):
  vocab_path, vocabulary, _ = vocab
  # A model with fewer embedding rows than its vocabulary has ids: Cohere cannot express it exactly.
  small = get_config("tiny", vocab_size=vocabulary.vocab_size - 100, max_length=64)
  params = nn.unbox(init_params(Decoder(small), jax.random.key(5)))
  run = _write_run(str(tmp_path / "small"), small, vocab_path, params, 1)
  output = tmp_path / "out"
  err = _refused(capsys, "--checkpoint", run, "--output", str(output))
  assert "cannot be exported as CohereForCausalLM exactly" in err and "embedding rows" in err
  assert not output.exists() and not list(tmp_path.glob(".out*"))

  # No checkpoint: a run folder without one, a step that is not there, a folder that is no run.
  trained = runs["tiny", "trained"][4]
  empty = tmp_path / "empty_run"
  empty.mkdir()
  (empty / "run.json").write_text(open(os.path.join(trained, "run.json")).read())
  err = _refused(capsys, "--checkpoint", str(empty), "--output", str(output))
  assert f"--checkpoint: no checkpoint in {empty}" in err
  err = _refused(capsys, "--checkpoint", os.path.join(trained, "checkpoints", "7"), "--output", str(output))
  assert "--checkpoint: no checkpoint 7 in" in err and "have [20]" in err
  err = _refused(capsys, "--checkpoint", str(tmp_path / "nowhere"), "--output", str(output))
  assert f"--checkpoint: {tmp_path / 'nowhere'}/run.json not found" in err
  assert not output.exists() and sorted(os.listdir(empty)) == ["run.json"]

  # An output that holds something is left as it is.
  output.mkdir()
  (output / "keep.txt").write_text("mine")
  err = _refused(capsys, "--checkpoint", trained, "--output", str(output))
  assert f"--output: {output} exists and is not an empty folder" in err
  assert os.listdir(output) == ["keep.txt"]
  err = _refused(capsys, "--checkpoint", trained, "--output", str(tmp_path / "x"), "--max_shard_size", "lots")
  assert "--max_shard_size must be a positive size" in err

  # Without the hf extra: exit 2 naming it, before anything is read.
  monkeypatch.setitem(sys.modules, "transformers", None)  # `import transformers` raises ImportError
  err = _refused(capsys, "--checkpoint", trained, "--output", str(tmp_path / "y"))
  assert "pip install -e .[hf]" in err and not (tmp_path / "y").exists()


def test_a_killed_export_s_temporary_folder_is_removed_by_the_next_export(runs, tmp_path, capsys):
  """An export killed (-9) leaves its temporary folder beside DIR, named after its host and process:
  the next export there removes it once that process is gone, and leaves a live one's alone."""
  import socket
  import subprocess

  trained = runs["tiny", "trained"][4]
  gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
  prefix = f".out.tmp-{socket.gethostname()}-"
  killed = tmp_path / f"{prefix}{int(gone.stdout)}-abc123"
  running = tmp_path / f"{prefix}{os.getpid()}-def456"  # a live process: an export still writing
  elsewhere = tmp_path / ".out.tmp-otherhost-1-ghi789"  # another host's, on a shared disk
  for folder in (killed, running, elsewhere):
    folder.mkdir()
    (folder / "model.safetensors").write_bytes(b"partial")
  assert hf.main(["--checkpoint", trained, "--output", str(tmp_path / "out")]) == 0
  assert not killed.exists() and running.exists() and elsewhere.exists()
  assert f"removed {killed}, left by an export that was killed" in capsys.readouterr().out
  assert (tmp_path / "out" / "config.json").exists()
  assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["out", running.name, elsewhere.name])


def test_what_a_cohere_checkpoint_cannot_hold_is_refused_and_bf16_weights_keep_their_bits(vocab, tmp_path):
  _, vocabulary, _ = vocab
  config = get_config("tiny", vocab_size=vocabulary.vocab_size)
  assert cohere.unsupported(config, vocabulary.vocab_size) == []
  assert "parameters are float64" in cohere.unsupported(config.replace(param_dtype="float64"), 640)[0]
  assert "embedding rows" in cohere.unsupported(config, config.vocab_size + 1)[0]
  from safetensors.torch import load_file

  weights = {"w": np.asarray(jax.random.normal(jax.random.key(6), (3, 5)), jnp.bfloat16)}
  hf.write_weights(str(tmp_path), weights, 1 << 20)
  loaded = load_file(str(tmp_path / "model.safetensors"))["w"]
  assert loaded.dtype == torch.bfloat16
  np.testing.assert_array_equal(loaded.view(torch.uint16).numpy(), weights["w"].view(np.uint16))


def test_a_vocabulary_of_another_kind_is_refused(vocab):
  """Only data/vocab.py's kind of SentencePiece model has an exact fast tokenizer here."""
  from sentencepiece import sentencepiece_model_pb2 as model_pb2

  _, vocabulary, _ = vocab
  changes = {"normalises text": lambda m: setattr(m.normalizer_spec, "add_dummy_prefix", True),
             "no byte fallback": lambda m: setattr(m.trainer_spec, "byte_fallback", False),
             "only unigram": lambda m: setattr(m.trainer_spec, "model_type", model_pb2.TrainerSpec.BPE),
             "which have no piece of their own": lambda m: setattr(m.pieces[_single(m, "x")], "piece", "\u2603\u2603"),
             # The .model file as trained, not the model codelm encodes with (vocabulary.sp_model).
             "not a multiple": lambda m: setattr(m.pieces[_single(m, "x")], "score", -3.14159),
             "user-defined": lambda m: setattr(m.pieces[_single(m, "\t")], "type", model_pb2.ModelProto.SentencePiece.USER_DEFINED),
             "blank after another character": lambda m: setattr(m.pieces[_single(m, "x")], "piece", "x\u2581")}
  for message, change in changes.items():
    model = model_pb2.ModelProto.FromString(vocabulary.sp_model)
    change(model)
    with pytest.raises(ValueError, match=message):
      hf_tokenizer.build(model.SerializeToString(), 128)


def _single(model, char):
  return next(i for i, p in enumerate(model.pieces) if p.piece == char)


def test_codelm_imports_without_the_hf_extra():
  """No module imports transformers, torch, safetensors or tokenizers at module level: only export's
  functions do, once `python -m export.hf` runs."""
  import ast

  from test_imports import project_modules

  optional = {"transformers", "torch", "safetensors", "tokenizers"}
  for name, path in project_modules().items():
    with open(path, encoding="utf-8") as f:
      tree = ast.parse(f.read())
    for node in tree.body:
      names = ([a.name for a in node.names] if isinstance(node, ast.Import)
               else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
      assert not {n.partition(".")[0] for n in names} & optional, (name, names)


# ---- the reverse: export.from_hf ------------------------------------------------------------------

def _import(hf_dir, vocab_path, model_dir, *flags):
  from export import from_hf

  assert from_hf.main(["--hf_dir", str(hf_dir), "--vocab_path", vocab_path, "--model_dir", str(model_dir),
                       *flags]) == 0
  return str(model_dir)


def _same_tree(a, b):
  flat_a, flat_b = jax.tree_util.tree_leaves_with_path(a), jax.tree_util.tree_leaves_with_path(b)
  assert [p for p, _ in flat_a] == [p for p, _ in flat_b]
  for (path, x), (_, y) in zip(flat_a, flat_b):
    assert x.dtype == y.dtype and np.array_equal(np.asarray(x).view(np.uint8), np.asarray(y).view(np.uint8)), path


@pytest.mark.parametrize("size, kind", [("tiny", "trained"), ("mini", "random")])
def test_an_export_imported_back_is_the_run_s_own_parameters_bit_for_bit(runs, vocab, tmp_path, size, kind, capsys):
  """export.hf then export.from_hf: the parameters (RoPE's channel order undone) are the run's, bit for
  bit, from one safetensors file or shards; sampling restores them; exporting the import again writes
  the same weights; training may start from it (init_from), not resume in it."""
  from safetensors.torch import load_file

  from sampling.restore import load_sampler
  from training.checkpoints import read_params
  from training.config import pretrained_source
  from training.run_info import read_run_info

  vocab_path, vocabulary, texts = vocab
  model, params, _, _, run, exported = runs[size, kind]
  imported = _import(exported, vocab_path, tmp_path / "imported")
  assert "imported" in capsys.readouterr().out
  config, imported_vocab = read_run_info(imported)
  assert config == model.config and imported_vocab == vocab_path
  sampler, step = load_sampler(imported)
  assert step == 0
  _same_tree(sampler.params, params)
  source = pretrained_source(imported)  # what --gin.train.init_from=MODEL_DIR reads
  assert source.model_config == model.config
  _same_tree(read_params(source.checkpoints, jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype),
                                                          params))[0], params)

  again = tmp_path / "again_hf"
  assert hf.main(["--checkpoint", imported, "--output", str(again)]) == 0
  first = {}
  for shard in exported.glob("*.safetensors"):
    first.update(load_file(str(shard)))
  second = load_file(str(again / "model.safetensors"))
  assert sorted(first) == sorted(second)
  assert all(torch.equal(first[name], second[name]) for name in first)
  for name in ("tokenizer.json", "generation_config.json"):
    assert (again / name).read_text() == (exported / name).read_text()

  # Resuming training in the imported folder would find a checkpoint without optimizer state.
  import gin

  import train as train_entry

  gin.clear_config()
  cwd = os.getcwd()
  os.chdir(ROOT)
  try:
    with pytest.raises(SystemExit) as exit_:
      train_entry.main(["--gin_file=gin_configs/runs/demo.gin", f"--gin.MODEL_DIR='{imported}'",
                        f"--gin.CORPUS_DIR='{os.path.dirname(vocab_path)}'", "--gin.MODEL_SIZE='tiny'",
                        "--gin.TRAIN_STEPS=2"])
  finally:
    os.chdir(cwd)
    gin.clear_config()
  err = capsys.readouterr().err
  assert exit_.value.code == 2 and f"--gin.train.init_from={imported}" in err and "holds parameters only" in err, err
  assert sorted(os.listdir(imported)) == ["checkpoints", "run.json"]


def test_bf16_weights_import_with_their_bits_and_the_compute_dtype_asked_for(runs, vocab, tmp_path):
  """Weights saved in bfloat16 (as Hugging Face tools often re-save them) import as bfloat16
  parameters with the same bits; --dtype sets the compute dtype run.json records."""
  from safetensors.torch import load_file, save_file

  from sampling.restore import load_sampler
  from training.run_info import read_run_info

  vocab_path, _, _ = vocab
  model, params, _, _, _, exported = runs["mini", "random"]
  folder = tmp_path / "bf16_hf"
  folder.mkdir()
  for name in ("config.json", "tokenizer.json"):
    (folder / name).write_text((exported / name).read_text())
  weights = load_file(str(exported / "model.safetensors"))
  save_file({k: v.to(torch.bfloat16) for k, v in weights.items()}, str(folder / "model.safetensors"))
  imported = _import(folder, vocab_path, tmp_path / "bf16", "--dtype", "float32")
  config, _ = read_run_info(imported)
  assert (str(config.param_dtype), str(config.dtype)) == ("bfloat16", "float32")
  expected = jax.tree.map(lambda x: np.asarray(x, jnp.bfloat16), params)
  _same_tree(load_sampler(imported)[0].params, expected)


def _one_score_changed(text):
  tokenizer_json = json.loads(text)
  tokenizer_json["model"]["vocab"][300][1] -= 1.0  # another vocabulary's scores: other ids for some text
  return json.dumps(tokenizer_json)


def _refused_import(capsys, hf_dir, vocab_path, model_dir):
  from export import from_hf

  with pytest.raises(SystemExit) as exit_:
    from_hf.main(["--hf_dir", str(hf_dir), "--vocab_path", vocab_path, "--model_dir", str(model_dir)])
  err = capsys.readouterr().err
  assert exit_.value.code == 2 and "Traceback" not in err, err
  assert not os.path.exists(model_dir)
  return err


def test_what_codelm_cannot_compute_exactly_is_refused_on_import_and_nothing_is_written(runs, vocab, tmp_path,
                                                                                        capsys):
  from safetensors.torch import load_file, save_file

  vocab_path, _, _ = vocab
  exported = runs["mini", "random"][5]
  target = tmp_path / "run"

  def variant(name, config=None, drop=(), weights=None, tokenizer=None):
    folder = tmp_path / name
    folder.mkdir()
    written = json.loads((exported / "config.json").read_text())
    written.update(config or {})
    (folder / "config.json").write_text(json.dumps(written))
    for file in ("tokenizer.json", "model.safetensors"):
      if file not in drop:
        (folder / file).write_bytes((exported / file).read_bytes())
    if tokenizer:
      (folder / "tokenizer.json").write_text(tokenizer((exported / "tokenizer.json").read_text()))
    if weights:
      save_file(weights(load_file(str(exported / "model.safetensors"))), str(folder / "model.safetensors"))
    return folder

  cases = {
      "model_type is 'llama'": variant("llama", {"model_type": "llama"}),
      "num_key_value_heads is 2": variant("gqa", {"num_key_value_heads": 2}),
      "logit_scale is 0.0625; codelm scales logits by d_model^-0.5": variant("scale", {"logit_scale": 0.0625}),
      "use_qk_norm is True": variant("qk", {"use_qk_norm": True}),
      "RoPE is scaled": variant("rope", {"rope_scaling": {"rope_type": "linear", "factor": 2.0}}),
      "bos_token_id is 0; the vocabulary's is": variant("bos", {"bos_token_id": 0}),
      "tokenizer.json does not exist": variant("notok", drop=("tokenizer.json",)),
      "is not the tokenizer of the vocabulary given (its model differ": variant(
          "othertok", tokenizer=_one_score_changed),
      "lm_head.weight differs from model.embed_tokens.weight": variant(
          "untied", weights=lambda w: {**w, "lm_head.weight": w["model.embed_tokens.weight"] + 1}),
      "model.layers.0.self_attn.q_norm.weight: codelm's model has None": variant(
          "extra", weights=lambda w: {**w, "model.layers.0.self_attn.q_norm.weight": torch.ones(4, 48)}),
      "the weights are float16, float32": variant(
          "mixed", weights=lambda w: {k: (v.half() if k == "model.norm.weight" else v) for k, v in w.items()}),
      "neither model.safetensors nor": variant("noweights", drop=("model.safetensors",)),
  }
  for message, folder in cases.items():
    err = _refused_import(capsys, folder, vocab_path, target)
    assert message in err and str(folder) in err, (message, err)
  assert "--vocab_path: /nowhere.model does not exist" in _refused_import(capsys, exported, "/nowhere.model", target)
  not_a_model = tmp_path / "config_as_vocab.model"
  not_a_model.write_text((exported / "config.json").read_text())
  assert f"--vocab_path: {not_a_model} is not a SentencePiece model" in _refused_import(
      capsys, exported, str(not_a_model), target)
  assert "config.json does not exist" in _refused_import(capsys, tmp_path / "nothing", vocab_path, target)
  target.mkdir()
  (target / "keep.txt").write_text("mine")
  from export import from_hf

  with pytest.raises(SystemExit):
    from_hf.main(["--hf_dir", str(exported), "--vocab_path", vocab_path, "--model_dir", str(target)])
  assert "exists and is not an empty folder" in capsys.readouterr().err and os.listdir(target) == ["keep.txt"]

  # What an import killed mid-write leaves (its marker, a half-written checkpoint, no run.json) is
  # removed by the next import, which then completes; a finished import is never touched.
  killed = tmp_path / "killed"
  (killed / "checkpoints" / "0.orbax-checkpoint-tmp-1").mkdir(parents=True)
  (killed / from_hf.IN_PROGRESS).write_text(str(exported))
  _import(exported, vocab_path, killed)
  assert f"removed {killed}, left by an import that did not finish" in capsys.readouterr().out
  assert sorted(os.listdir(killed)) == ["checkpoints", "run.json"]
  assert os.listdir(killed / "checkpoints") == ["0"]
  with pytest.raises(SystemExit):
    from_hf.main(["--hf_dir", str(exported), "--vocab_path", vocab_path, "--model_dir", str(killed)])
  assert "exists and is not an empty folder" in capsys.readouterr().err


def test_the_import_expects_exactly_the_tensors_the_export_writes():
  for config in (get_config("tiny", vocab_size=640), get_config("tiny", vocab_size=640, head_dim=64)):
    params = nn.unbox(init_params(Decoder(config), jax.random.key(7)))
    written = {name: w.shape for name, w in cohere.cohere_weights(params, config).items()}
    assert cohere.expected_shapes(config) == written


def test_a_truncated_or_unreadable_safetensors_file_is_refused_naming_it_and_nothing_is_written(runs, vocab, tmp_path,
                                                                                                capsys):
  """A download or copy cut short, or a file that is not safetensors: exit 2, one line naming the file and
  what is wrong, no traceback (it was safetensors' SafetensorError), nothing in MODEL_DIR."""
  import shutil

  vocab_path, _, _ = vocab
  target = tmp_path / "run"

  def damaged(name, source, file, damage):
    folder = tmp_path / name
    shutil.copytree(source, folder)
    path = folder / file
    data = path.read_bytes()
    path.write_bytes(damage(data))
    return folder, path, len(data)

  single = runs["mini", "random"][5]
  sharded = runs["tiny", "trained"][5]  # exported with --max_shard_size 1MB
  shard = sorted(set(json.loads((sharded / "model.safetensors.index.json").read_text())["weight_map"].values()))[-1]
  folder, path, size = damaged("half", single, "model.safetensors", lambda d: d[: len(d) // 2])
  assert _refused_import(capsys, folder, vocab_path, target).endswith(
      f"error: {path} is truncated: expected {size:,} bytes, got {size // 2:,}\n")
  folder, path, size = damaged("shard", sharded, shard, lambda d: d[:-1])
  assert _refused_import(capsys, folder, vocab_path, target).endswith(
      f"error: {path} is truncated: expected {size:,} bytes, got {size - 1:,}\n")
  folder, path, size = damaged("header_cut", single, "model.safetensors", lambda d: d[:100])
  length = int.from_bytes((single / "model.safetensors").read_bytes()[:8], "little")
  assert _refused_import(capsys, folder, vocab_path, target).endswith(
      f"error: {path} is truncated: expected at least {8 + length:,} bytes (its header alone), got 100\n")
  folder, path, _ = damaged("tiny_file", single, "model.safetensors", lambda d: d[:5])
  assert _refused_import(capsys, folder, vocab_path, target).endswith(
      f"error: {path} is truncated: 5 bytes, shorter than a safetensors file's 8-byte header length\n")
  garbage = b"\xa7\x13garbage"
  folder, path, _ = damaged("garbage_length", single, "model.safetensors", lambda d: garbage + d[9:])
  assert _refused_import(capsys, folder, vocab_path, target).endswith(
      f"error: {path}: header unreadable (its length field says {int.from_bytes(garbage[:8], 'little'):,} "
      "bytes): not a safetensors file\n")
  folder, path, _ = damaged("garbage_json", single, "model.safetensors", lambda d: d[:8] + b"garbage!" + d[16:])
  err = _refused_import(capsys, folder, vocab_path, target)
  assert f"error: {path}: header unreadable (JSONDecodeError: Expecting value: line 1 column 1" in err
  assert err.endswith("): not a safetensors file\n")
  # A header of the right length and offsets that safetensors still refuses (a dtype it does not know).
  folder, path, _ = damaged("dtype", single, "model.safetensors", lambda d: d.replace(b'"F32"', b'"Q32"', 1))
  assert f"error: {path} is not a readable safetensors file (" in _refused_import(capsys, folder, vocab_path, target)


# What a user's shell has: no test-only JAX settings (conftest.py), nothing chosen for TensorFlow's logs.
_USER_ENV = {k: v for k, v in os.environ.items()
             if k not in ("JAX_PLATFORMS", "XLA_FLAGS", "TF_CPP_MIN_LOG_LEVEL", "CODELM_VERBOSE", "COLUMNS")}
_THIRD_PARTY = ("absl::InitializeLog", "I0000 ", "W0000 ", "oneDNN", "cudart", "cuInit", "Event loop is closed",
                "never retrieved", "Traceback")


def _entry_point(module, *flags, verbose=False):
  import subprocess

  env = dict(_USER_ENV, CODELM_VERBOSE="1") if verbose else _USER_ENV
  return subprocess.run([sys.executable, "-m", module, *flags], cwd=ROOT, env=env, capture_output=True, text=True,
                        timeout=300)


@pytest.mark.e2e
def test_the_export_entry_points_print_no_third_party_lines_unless_verbose(runs, vocab, tmp_path):
  """As a user runs them: export.hf and export.from_hf print their own line and nothing on stderr (no
  absl / TensorFlow / XLA start-up lines); a damaged checkpoint is one warning and one error, exit 2,
  without orbax's abandoned-read tracebacks or a CheckpointError traceback; CODELM_VERBOSE=1 brings
  the libraries' lines back."""
  import shutil

  vocab_path, _, _ = vocab
  run, exported = runs["tiny", "random"][4], runs["tiny", "random"][5]
  out = tmp_path / "hf"
  done = _entry_point("export.hf", "--checkpoint", run, "--output", str(out))
  assert done.returncode == 0 and done.stderr == "", done.stderr
  assert re.fullmatch(rf"exported step 1 of {re.escape(run)} to {re.escape(str(out))} as CohereForCausalLM "
                      r"\(\d+ files, [\d.]+ s\)\n", done.stdout), done.stdout
  done = _entry_point("export.from_hf", "--hf_dir", str(exported), "--vocab_path", vocab_path,
                      "--model_dir", str(tmp_path / "back"))
  assert done.returncode == 0 and done.stderr == "", done.stderr
  assert done.stdout.startswith(f"imported {exported} into {tmp_path / 'back'} (") and done.stdout.count("\n") == 1
  damaged = tmp_path / "damaged"
  shutil.copytree(run, damaged)
  for path in (damaged / "checkpoints").glob("*/state/**/d/*"):
    if path.stat().st_size > 2000:  # the arrays' data, not the metadata
      os.truncate(path, path.stat().st_size // 2)
  for verbose in (False, True):
    done = _entry_point("export.hf", "--checkpoint", str(damaged), "--output", str(tmp_path / "none"), verbose=verbose)
    assert done.returncode == 2 and not (tmp_path / "none").exists(), done.stderr[-2000:]
    assert f"python -m export.hf: error: --checkpoint: no checkpoint in {damaged}/checkpoints is usable: step 1: " \
           "it does not restore (" in done.stderr
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    if verbose:
      # TensorFlow's start-up lines: oneDNN's only on CPUs with AVX-512 VNNI / AMX, cudart's without a GPU
      assert "absl::InitializeLog" in done.stderr and ("oneDNN" in done.stderr or "cudart" in done.stderr), \
          done.stderr[-3000:]
    else:
      lines = done.stderr.splitlines()
      assert lines[0].startswith(f"WARNING:root:checkpoint 1 in {damaged}/checkpoints is damaged"), done.stderr
      assert lines[1].startswith("usage: python -m export.hf") and len(lines) == 4, done.stderr
      assert not [noise for noise in _THIRD_PARTY if noise in done.stderr], done.stderr[-3000:]
