"""`make demo`: the whole pipeline on source code already on this machine, one line per stage.

  python demo.py [--output demo_out] [--vocab_size 8192] [--steps 200] [--verbose]

Each stage is an entry point run as its own process, as a user would run it; its full output (tables,
per-step losses, samples) goes to OUTPUT/logs/STAGE.log, which starts with the command, and the
terminal gets one line of what it did with its key figure, then where everything is and what to run
next. --verbose (or CODELM_VERBOSE=1) shows every stage's whole output and the libraries' messages
(quiet.py). The stages: corpus (data.corpus --preset local), vocabulary (data.vocab), SeqIO tasks
(data.tasks), mixtures (data.mixtures), model size (model.summary), training with the UL2 + causal-LM
mixture (train.py, gin_configs/runs/demo.gin), sampling (sample.py).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time

import tqdm

import quiet
from languages import LANGUAGES

ROOT = os.path.dirname(os.path.abspath(__file__))
DISPLAY = {language.name: language.display_name for language in LANGUAGES}
_STEP = re.compile(r"step (\d+)/(\d+)\s+loss ([\d.]+)")


def _seconds(seconds: float) -> str:
  return f"{seconds:.0f} s" if seconds < 100 else f"{seconds / 60:.1f} min"


def _millions(count: float) -> str:
  return f"{count / 1e6:.1f}M" if count >= 1e5 else f"{count:,.0f}"


class Stages:
  """Runs the stages in order: each one's stdout to its log (and the terminal when verbose), its
  stderr (progress bars, errors) to the terminal; a failed stage ends the demo with its log's tail."""

  def __init__(self, logs: str, count: int):
    self.logs, self.count, self.done, self.times = logs, count, 0, {}
    self.live = sys.stdout.isatty() and not quiet.verbose()  # "corpus ..." while it runs, then its line

  def run(self, name: str, argv: list[str], on_line=None) -> None:
    self.done += 1
    log_path = os.path.join(self.logs, f"{name}.log")
    if self.live:
      print(f"[{self.done}/{self.count}] {name} ...", end="", flush=True)
    began = time.perf_counter()
    with open(log_path, "w") as log:
      log.write(f"$ {shlex.join(argv)}\n")
      log.flush()
      process = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, env=dict(os.environ, PYTHONUNBUFFERED="1"))
      for line in process.stdout:
        log.write(line)
        if quiet.verbose():
          sys.stdout.write(line)
        if on_line:
          on_line(line)
      code = process.wait()
    self.times[name] = time.perf_counter() - began
    if code:
      with open(log_path) as log:
        tail = "".join(log.readlines()[-15:])
      sys.stdout.write(self._start_line())
      sys.stdout.flush()
      sys.stderr.write(f"[{self.done}/{self.count}] {name} failed (exit status {code}); the end of its output "
                       f"({log_path}):\n{tail}")
      sys.exit(code)

  def report(self, name: str, text: str) -> None:
    print(f"{self._start_line()}[{self.done}/{self.count}] {name:<10} {text}  ({_seconds(self.times[name])})",
          flush=True)

  def _start_line(self) -> str:
    """Back to the start of the terminal line, cleared: the stage's "..." and any progress bar go."""
    return "\r\033[K" if self.live else ""


def corpus_line(corpus: str) -> str:
  with open(os.path.join(corpus, "stats.json")) as f:
    stats = json.load(f)
  files = {name: sum(split["files"] for split in splits.values()) for name, splits in stats["languages"].items()}
  size = sum(split["bytes"] for splits in stats["languages"].values() for split in splits.values())
  ranked = sorted(files, key=files.get, reverse=True)
  shown = ", ".join(f"{DISPLAY.get(name, name)} {files[name]:,}" for name in ranked[:4])
  more = f", {len(ranked) - 4} more" if len(ranked) > 4 else ""
  return (f"{sum(files.values()):,} files, {size / 1e6:.1f} MB, {len(files)} languages: {shown}{more}"
          f"; {removed_line(stats)}")


def removed_line(stats: dict) -> str:
  """What the corpus stages removed of the files read, grouped as the corpus builder runs them."""
  skipped = stats["skipped"]
  groups = {"unreadable or binary": ("unreadable", "malformed", "empty", "too_large", "binary", "not_utf8"),
            "licence": ("license", "no_license"),
            "quality": ("max_line_length", "mean_line_length", "alphanum_fraction", "auto_generated", "data_like"),
            "duplicates": ("duplicate",), "near duplicates": ("near_duplicate",), "benchmark text": ("decontaminated",)}
  parts = ", ".join(f"{name} {sum(skipped.get(r, 0) for r in reasons):,}" for name, reasons in groups.items())
  return f"of {stats['stages']['read']['files']:,} read, removed: {parts}"


def vocab_line(corpus: str, vocab_size: int, extra_ids: int, chars_per_language: int) -> str:
  with open(os.path.join(corpus, "stats.json")) as f:
    languages = json.load(f)["languages"]
  chars = sum(min(splits["train"]["characters"], chars_per_language) for splits in languages.values())
  return (f"{vocab_size:,} ids ({extra_ids} of them sentinels) trained on {_millions(chars)} characters, "
          f"at most {_millions(chars_per_language)} per language")


def tasks_line(corpus: str) -> str:
  examples, tokens, tasks = {"train": 0, "validation": 0}, 0, glob.glob(os.path.join(corpus, "cache", "*", "COMPLETED"))
  for split in examples:
    for path in glob.glob(os.path.join(corpus, "cache", "*", f"stats.{split}.json")):
      with open(path) as f:
        stats = json.load(f)
      examples[split] += stats["examples"]
      tokens += stats["targets_tokens"] if split == "train" else 0
  return (f"{len(tasks)} SeqIO tasks cached: {examples['train']:,} train + {examples['validation']:,} validation "
          f"files, {_millions(tokens)} train tokens")


def train_line(model_dir: str) -> str:
  with open(os.path.join(model_dir, "metrics.jsonl")) as f:
    records = [json.loads(line) for line in f if line.strip()]
  losses = [r for r in records if "loss" in r]
  first, last = losses[0]["step"], losses[-1]["step"]
  previous = losses[-2]["step"] if len(losses) > 1 else 0
  return (f"{last} steps: loss {losses[0]['loss']:.2f} (steps 1-{first}) -> {losses[-1]['loss']:.2f} "
          f"(steps {previous + 1}-{last})")


def sample_line(predictions: str) -> str:
  with open(predictions) as f:
    records = [json.loads(line) for line in f if line.strip()]
  prompts = {(r["qid"], r["language"]) for r in records}
  return (f"{len(records)} completions of {len(prompts)} prompts ({sum(r['num_tokens'] for r in records):,} tokens) "
          f"in {predictions}")


def summary(out: str, corpus: str, run: str, predictions: str, total: float) -> str:
  python = os.path.relpath(sys.executable) if sys.executable.startswith(ROOT + os.sep) else "python"
  rows = [
      ("corpus", f"{corpus}/  (shards per language and split, stats.json)"),
      ("vocabulary", f"{corpus}/spm.model"),
      ("SeqIO cache", f"{corpus}/cache/"),
      ("mixture plot", f"{out}/mixtures.png"),
      ("checkpoints", f"{run}/checkpoints/"),
      ("metrics", f"{run}/metrics.jsonl, loss curve {run}/loss.png"),
      ("TensorBoard", f"{os.path.join(os.path.dirname(python), 'tensorboard')} --logdir {run}/tensorboard"),
      ("time spent", f"{python} -m training.goodput {run}  (train steps, compilation, input, checkpoints)"),
      ("predictions", predictions),
      ("logs", f"{out}/logs/  (each stage's command and full output)"),
  ]
  lines = [f"demo done in {_seconds(total)}; outputs:"] + [f"  {name:<13} {where}" for name, where in rows]
  lines += [
      "next:",
      "  score the demo model on typed HumanEval in 12 languages (compilers: make toolchains); its context",
      "  (256 tokens) holds few HumanEval prompts: --truncate_prompts keeps their last tokens, counted at the end:",
      f"    {python} -m evaluation.prompts humaneval --languages all --limit 40 --output {out}/prompts.jsonl",
      f"    {python} sample.py --checkpoint={run} --prompts={out}/prompts.jsonl \\",
      f"        --output={out}/humaneval.jsonl --num_samples=2 --max_decode_length=128 --truncate_prompts",
      f"    {python} -m evaluation.score --predictions {out}/humaneval.jsonl --benchmark humaneval \\",
      f"        --languages all --output {out}/scores",
      "  translate each problem's Python solution into the 11 other languages (pass@1, pass@25):",
      f"    {python} -m evaluation.prompts humaneval --task translation --limit 40 --output {out}/translation_prompts.jsonl",
      f"    {python} sample.py --checkpoint={run} --prompts={out}/translation_prompts.jsonl \\",
      f"        --output={out}/translation.jsonl --num_samples=2 --max_decode_length=128 --truncate_prompts",
      f"    {python} -m evaluation.score --predictions {out}/translation.jsonl --benchmark humaneval \\",
      f"        --languages all --k 1,25 --output {out}/translation_scores",
      "  fine-tune on practical Python tasks and score pass@1 per category (LoRA: add",
      "  --run_gin gin_configs/runs/finetune_lora.gin; docs/finetune.md):",
      f"    {python} -m experiments.finetune_grid --pretrained {run} --output {out}/finetune \\",
      "        --fractions 0.4 --seeds 0 --steps 40",
      "  the scaling ablation (sizes x Natural / UniMax) on this corpus:",
      f"    {python} -m experiments.ablation --sizes tiny,mini --mixtures natural,unimax_1,unimax_2 \\",
      f"        --corpus {corpus} --steps 600 --output {out}/ablation",
      "  a real run on a TPU pod (docs/training.md, tpu/README.md):",
      f"    {python} tpu/launch.py --name NAME --zone ZONE --run_name 1b_unimax_2 -- \\",
      "        --gin_file=gin_configs/runs/pretrain.gin --gin_file=gin_configs/models/1b.gin ...",
  ]
  return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
  parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--output", default="demo_out", help="where everything goes")
  parser.add_argument("--source", action="append", default=[],
                      help="a source tree for the corpus (repeatable; default: --preset local, code on this machine)")
  # The defaults keep `make demo` within 10 minutes of a fresh clone on 2 cores, install included.
  parser.add_argument("--max_files_per_language", type=int, default=1000, help="the corpus's cap per language")
  parser.add_argument("--vocab_size", type=int, default=8192)
  parser.add_argument("--chars_per_language", type=int, default=1_000_000, help="vocabulary training sample")
  parser.add_argument("--model_size", default="mini")
  parser.add_argument("--steps", type=int, default=200)
  parser.add_argument("--num_samples", type=int, default=4, help="completions per demo prompt")
  parser.add_argument("--max_decode_length", type=int, default=96)
  parser.add_argument("--verbose", action="store_true", help="every stage's whole output and the libraries' messages")
  args, gin_bindings = parser.parse_known_args(argv)
  for flag in gin_bindings:
    if not flag.startswith("--gin."):
      parser.error(f"unrecognised flag {flag!r} (--gin.NAME=VALUE bindings go to train.py)")
  if args.verbose:
    os.environ[quiet.VERBOSE_ENV] = "1"

  out = args.output.rstrip("/")
  corpus, run, predictions, logs = f"{out}/corpus", f"{out}/run", f"{out}/predictions.jsonl", f"{out}/logs"
  os.makedirs(logs, exist_ok=True)
  python, extra_ids = sys.executable, 100
  began = time.perf_counter()
  print(f"codelm demo -> {out}/ (each stage's whole output: {logs}/; CODELM_VERBOSE=1 shows it all here)", flush=True)
  stages = Stages(logs, 7)

  sources = [f"--source={s}" for s in args.source] or ["--preset", "local"]
  stages.run("corpus", [python, "-m", "data.corpus", *sources,
                        f"--max_files_per_language={args.max_files_per_language}", "--output", corpus])
  stages.report("corpus", corpus_line(corpus))

  stages.run("vocabulary", [python, "-m", "data.vocab", "--corpus", corpus, "--vocab_size", str(args.vocab_size),
                            "--extra_ids", str(extra_ids), "--chars_per_language", str(args.chars_per_language),
                            "--output", f"{corpus}/spm.model"])
  stages.report("vocabulary", vocab_line(corpus, args.vocab_size, extra_ids, args.chars_per_language))

  stages.run("tasks", [python, "-m", "data.tasks", "--corpus", corpus, "--vocab", f"{corpus}/spm.model",
                       "--extra_ids", str(extra_ids)])
  stages.report("tasks", tasks_line(corpus))

  stages.run("mixtures", [python, "-m", "data.mixtures", "--corpus", corpus, "--train_steps", str(args.steps),
                          "--batch_size", "8", "--sequence_length", "256", "--plot", f"{out}/mixtures.png"])
  stages.report("mixtures", f"language shares of natural and UniMax 1-4 for {args.steps} steps x 8 rows: "
                            f"{out}/mixtures.png")

  model = []
  stages.run("model", [python, "-m", "model.summary", "--size", args.model_size, "--json"], model.append)
  figures = json.loads("".join(model))
  stages.report("model", f"{args.model_size}: {figures['params']:,} parameters "
                         f"({figures['non_embedding_params']:,} without the embedding)")

  shutil.rmtree(run, ignore_errors=True)  # a fresh run: train.py would resume, sample.py skip finished prompts
  if os.path.exists(predictions):
    os.remove(predictions)
  bars = []  # the training progress bar, from the first step train.py logs

  def progress(line: str) -> None:
    found = _STEP.match(line)
    if found and not quiet.verbose():
      if not bars:
        bars.append(tqdm.tqdm(total=int(found[2]), desc="train", unit="step", leave=False))
      bars[0].update(int(found[1]) - bars[0].n)
      bars[0].set_postfix_str(f"loss {float(found[3]):.2f}")

  stages.run("train", [python, os.path.join(ROOT, "train.py"), "--gin_file=gin_configs/runs/demo.gin",
                       f"--gin.MODEL_DIR='{run}'", f"--gin.CORPUS_DIR='{corpus}'", f"--gin.TRAIN_STEPS={args.steps}",
                       f"--gin.MODEL_SIZE='{args.model_size}'", *gin_bindings], progress)
  for bar in bars:
    bar.close()
  stages.report("train", train_line(run))

  stages.run("sample", [python, os.path.join(ROOT, "sample.py"), f"--checkpoint={run}",
                        f"--prompts={os.path.join(ROOT, 'sampling', 'demo_prompts.jsonl')}", f"--output={predictions}",
                        f"--num_samples={args.num_samples}", f"--max_decode_length={args.max_decode_length}",
                        "--show=1"])
  stages.report("sample", sample_line(predictions))
  print(summary(out, corpus, run, predictions, time.perf_counter() - began), flush=True)


if __name__ == "__main__":
  main()
