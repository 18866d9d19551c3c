"""Sample n completions per prompt from a trained run, for execution-based benchmarks.

  python sample.py --checkpoint=MODEL_DIR --prompts=prompts.jsonl --output=predictions.jsonl \
      --num_samples=200 [--temperature=0.8 --top_p=0.95 --top_k=0 --max_decode_length=256 \
      --batch_size=8 --seed=0]

Prompts JSONL: `qid`, `language`, `prompt`, optional `stop` (a list of strings; default: the
language's, see sampling/stops.py); other fields pass through. Predictions JSONL: one line per sample
with `qid`, `language`, `sample_id`, `code` (the completion without the prompt, cut at the first stop
sequence), `finish_reason` (stop / eos / length), `num_tokens`, and the passed-through fields: what
BabelCode reads (`qid`, `language`, `code`).

Resumable: rerunning with the same --output skips prompts whose samples are all there; each prompt's
samples are appended in one write, so a killed run never leaves a partial prompt. Documented edge
cases: an empty prompt samples from `[code]` alone; a prompt longer than the model's context minus
max_decode_length keeps its last tokens (`prompt_truncated: true` in its records).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Iterator

from sampling.strategies import DEFAULT_TEMPERATURE, DEFAULT_TOP_K, DEFAULT_TOP_P


def read_prompts(path: str) -> list[dict]:
  """Parsed prompt records; a malformed line is an error naming the file and line."""
  prompts = []
  with open(path, encoding="utf-8") as f:
    for number, line in enumerate(f, 1):
      if not line.strip():
        continue
      try:
        record = json.loads(line)
      except json.JSONDecodeError as error:
        raise ValueError(f"{path}:{number}: not valid JSON ({error.msg})") from None
      missing = [k for k in ("qid", "language", "prompt") if k not in record]
      if not isinstance(record, dict) or missing:
        raise ValueError(f"{path}:{number}: a prompt needs qid, language and prompt; missing {missing}")
      if "stop" in record and not (isinstance(record["stop"], list) and all(isinstance(s, str) for s in record["stop"])):
        raise ValueError(f"{path}:{number}: stop must be a list of strings")
      prompts.append(record)
  return prompts


def completed_qids(path: str, num_samples: int) -> set[str]:
  """qids with all their samples in `path`. A run killed mid-write can leave a torn line or part of a
  prompt's samples: those lines are dropped (the file rewritten atomically) so the prompt is redone
  and every (qid, sample_id) appears exactly once."""
  if not os.path.exists(path):
    return set()
  records = []
  with open(path, encoding="utf-8") as f:
    for line in f:
      try:
        records.append((line if line.endswith("\n") else line + "\n", json.loads(line)))
      except json.JSONDecodeError:
        continue
  counts: dict[str, int] = {}
  for _, record in records:
    counts[str(record["qid"])] = counts.get(str(record["qid"]), 0) + 1
  complete = {qid for qid, n in counts.items() if n >= num_samples}
  kept = [line for line, record in records if str(record["qid"]) in complete]
  if len(kept) != sum(1 for _ in open(path, encoding="utf-8")):
    with open(path + ".tmp", "w", encoding="utf-8") as f:
      f.writelines(kept)
    os.replace(path + ".tmp", path)
  return complete


def batches(items: list, size: int) -> Iterator[list]:
  for start in range(0, len(items), size):
    yield items[start:start + size]


def load_sampler(model_dir: str):
  """A Sampler for the newest checkpoint of a run (or a specific `…/checkpoints/STEP` folder)."""

  from model import sharding
  from model.transformer import Decoder
  from objectives.vocab import CODE_TOKEN, EOD_TOKEN, get_vocabulary
  from sampling.sampler import Sampler
  from training.checkpoints import Checkpointer, abstract_with_shardings
  from training.optimizer import adafactor
  from training.run_info import read_run_info
  from training.step import state_shardings

  step = None
  if os.path.basename(os.path.normpath(model_dir)).isdigit():  # MODEL_DIR/checkpoints/STEP
    step = int(os.path.basename(os.path.normpath(model_dir)))
    model_dir = os.path.dirname(os.path.dirname(os.path.normpath(model_dir)))
  config, vocab_path = read_run_info(model_dir)
  model, vocabulary = Decoder(config), get_vocabulary(vocab_path)
  mesh = sharding.make_mesh(-1, 1, 1)
  abstract, shardings = state_shardings(model, adafactor(0.01), mesh)  # only the params part is used
  checkpointer = Checkpointer(os.path.join(model_dir, "checkpoints"), async_save=False)
  if step is not None and step not in checkpointer.steps():
    raise FileNotFoundError(f"no checkpoint {step} in {model_dir}/checkpoints (have {checkpointer.steps()})")
  restored = checkpointer.restore_params(abstract_with_shardings(abstract.params, shardings.params), step=step)
  checkpointer.close()
  if restored is None:
    raise FileNotFoundError(f"no checkpoint restores from {model_dir}/checkpoints")
  params, step = restored
  end_ids = [vocabulary.tokenizer.piece_to_id(EOD_TOKEN), vocabulary.eos_id]
  return Sampler(model, params, vocabulary, vocabulary.tokenizer.piece_to_id(CODE_TOKEN), end_ids), step


def main(argv=None) -> None:
  parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--checkpoint", required=True, help="a train.py MODEL_DIR, or MODEL_DIR/checkpoints/STEP")
  parser.add_argument("--prompts", required=True, help="prompts JSONL")
  parser.add_argument("--output", required=True, help="predictions JSONL (appended to; resumable)")
  parser.add_argument("--num_samples", type=int, default=1)
  parser.add_argument("--temperature", type=float, default=DEFAULT_TEMPERATURE, help="default: %(default)s (0: greedy)")
  parser.add_argument("--top_p", type=float, default=DEFAULT_TOP_P, help="nucleus mass; default: %(default)s")
  parser.add_argument("--top_k", type=int, default=DEFAULT_TOP_K, help="0: off; default: %(default)s")
  parser.add_argument("--max_decode_length", type=int, default=256)
  parser.add_argument("--batch_size", type=int, default=8, help="prompts per batch (rows = prompts x samples)")
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--show", type=int, default=0, help="print this many samples per prompt at the end")
  args = parser.parse_args(argv)

  from sampling.sampler import SamplingConfig
  from sampling.stops import default_stops

  try:
    prompts = read_prompts(args.prompts)
    config = SamplingConfig(args.temperature, args.top_p, args.top_k, args.max_decode_length)
  except (ValueError, OSError) as error:
    parser.error(str(error))
  done = completed_qids(args.output, args.num_samples)
  todo = [p for p in prompts if str(p["qid"]) not in done]
  print(f"{len(prompts)} prompts, {len(prompts) - len(todo)} already complete in {args.output}", flush=True)
  if not todo:
    return
  try:
    sampler, step = load_sampler(args.checkpoint)
  except FileNotFoundError as error:
    parser.error(f"--checkpoint: {error}")
  max_prompt = sampler.model.config.max_length - args.max_decode_length
  start, samples, tokens = time.perf_counter(), 0, 0
  from tqdm import tqdm

  with tqdm(total=len(todo) * args.num_samples, unit="sample", desc=f"sampling (step {step})") as bar:
    for index, group in enumerate(batches(todo, args.batch_size)):
      stops = [p.get("stop", list(default_stops(p["language"]))) for p in group]
      results = sampler.sample([p["prompt"] for p in group], args.num_samples, config,
                               seed=args.seed * 1_000_003 + index, stops=stops)
      lines = []
      for prompt, completions in zip(group, results):
        truncated = sampler.encode_prompt(prompt["prompt"], max_prompt)[1]
        for sample_id, completion in enumerate(completions):
          record = {k: v for k, v in prompt.items() if k not in ("prompt", "stop")}
          record.update(qid=prompt["qid"], language=prompt["language"], sample_id=sample_id,
                        code=completion.text, finish_reason=completion.finish_reason,
                        num_tokens=completion.num_tokens)
          if truncated:
            record["prompt_truncated"] = True
          lines.append(json.dumps(record, ensure_ascii=False) + "\n")
          tokens += completion.num_tokens
      with open(args.output, "a", encoding="utf-8") as f:  # one write per batch of whole prompts
        f.write("".join(lines))
        f.flush()
        os.fsync(f.fileno())
      samples += len(lines)
      elapsed = time.perf_counter() - start
      bar.update(len(lines))
      bar.set_postfix(samples_per_s=f"{samples / elapsed:.1f}", tokens_per_s=f"{tokens / elapsed:.0f}")
  print(f"wrote {samples} samples to {args.output}", flush=True)
  if args.show:
    show(args.output, {p["qid"]: p["prompt"] for p in todo}, args.show)


def show(predictions: str, prompts: dict, per_prompt: int) -> None:
  shown: dict = {}
  with open(predictions, encoding="utf-8") as f:
    for record in map(json.loads, f):
      qid = record["qid"]
      if qid in prompts and shown.get(qid, 0) < per_prompt:
        shown[qid] = shown.get(qid, 0) + 1
        print(f"\n=== {qid} sample {record['sample_id']} ({record['finish_reason']}, {record['num_tokens']} tokens)")
        print(prompts[qid] + record["code"])


if __name__ == "__main__":
  sys.exit(main())
