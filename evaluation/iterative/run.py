"""Iterative example-based generation: I/O examples in, code out, distinguishing examples fed back.

  python -m evaluation.iterative --checkpoint MODEL_DIR --languages python,cpp --rounds 5 --examples 3 \
      --num_samples 10 --output DIR [--limit N] [--budget 100] [--seed 0] [--no_natural] [--labels FILE]

Tasks: evaluation/iterative/tasks.py (typed HumanEval; the canonical solution is the target; five
start sets of m examples per problem; a fixed pool of `--budget` inputs for differential testing),
built once into DIR/tasks.jsonl (a rerun reuses them; other settings for the same DIR are refused).

The protocol, per (problem, start set, language), n conversations (`--num_samples`):
  Round 1: the prompt is the language's generation template (sandbox/renderers/base.py) over the
    signature, whose doc comment holds, instead of the description, EXAMPLES_HEADER and one line
    per example, `name(arg, ...) == output` in the language's literals (Haskell: `name arg ... ==
    output`), in that language's doc-comment syntax (the renderer writes it). The completion, cut at
    the language's stops, is the function's body: the code.
  Check (one sandboxed program per attempt and round, sandbox/execution.py; a round's programs
    of a compiled language are built together, sandbox/batching.py): the code runs on
    the examples given so far and on the pool. A compile error, a crash outside the test cases or a
    timeout fails the attempt ("compile_error" / "error" / "timeout"); a wrong (or raising) given
    example fails it ("wrong_on_given"). Pool inputs where it differs from the ground truth are the
    distinguishing inputs; none found: "success".
  Rounds 2..R: the first m distinguishing inputs (pool order) with their outputs join the examples;
    the conversation continues (ConversationSampler.reply: only the new text is prefilled) with
    FEEDBACK_HEADER and every example so far in a fresh doc comment + signature, whose completion is
    the next code. Distinguishing inputs found in round R: "not_converged".
  Input matching: code that contains a distinctive literal of a given example's input (a string of
    2+ characters, a collection of 2+ items, also as its bare comma-separated items, a number of 3+
    characters at the top level; also inside an argument, numbers aside; in the language's literal
    or canonical JSON, whitespace ignored), or compares for equality with two or more of the
    numbers in the given inputs, at any depth (`== 5`, `5 ==`), is
    flagged; results are reported with and without flagged episodes.
  Natural-language comparison ("natural"): the usual prompt with the description (no examples),
    once per problem, then the same checks and feedback rounds.

Output in DIR:
  episodes.jsonl  one line per round of an episode (kind, qid, language, start_set, sample, round,
                  prompt: the text sent that round, code, examples_given, verdict, distinguishing:
                  the inputs found with expected outputs, flagged, given_passed: every given
                  example passed, final); an episode's lines are appended in one write when it
                  ends, under storage's one-writer lock, so a killed run loses only unfinished
                  episodes and a rerun completes each exactly once (a torn last line is cut off,
                  storage.py's rule).
  results.md      seed 001's tables (evaluation/iterative/report.py defines each): per language and
                  prompt kind, pass@1 and pass@k after round 1 and after round R, cumulative
                  successes per round, the share of executions (problem x start set) with pass@k = 0,
                  all episodes and without flagged ones; O1 (round 1 against the given examples only,
                  by m, with and without input-matching code); executions solved by round (Figure 6);
                  problems implemented by NL-Succeed/NL-Fail (from this run's natural episodes), by
                  I/O type and by the knowledge labels of `--labels FILE` (JSON: qid -> [label, ...]).
  metrics.json    the same numbers.
  successes_by_round.png  samples solved by round (%); executions_by_round.png  Figure 6's counts.
"""

from __future__ import annotations

import quiet

if __name__ == "__main__":  # before TensorFlow, JAX and Beam are imported
  quiet.setup()

import argparse
import concurrent.futures
import dataclasses
import json
import sys
import zlib
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import storage
from evaluation import benchmark_data
from evaluation.iterative import report as iterative_report
from sandbox import execution, typed
from evaluation.iterative.protocol import (DISTINGUISHED, EXAMPLES, NATURAL, Check, check_all, extract_code,
                                           feedback_text, first_prompt, input_matching)
from evaluation.iterative.tasks import Example, Task, example_json, task_from_json
from evaluation.iterative.report import episode_key
from sandbox.renderers import get
from sampling.strategies import DEFAULT_TEMPERATURE, DEFAULT_TOP_P

CONTEXT_EXHAUSTED = "context_exhausted"  # the prompt or the conversation outgrew the model's context
_NO_ROOM = "no room for a completion in the model's context"


class ConversationModel(Protocol):
  """sampling/conversation.py's ConversationSampler, or a scripted stand-in in tests."""

  def start(self, prompts: Sequence[str], num_samples: int, config: Any, seed: int,
            stops: Sequence[Sequence[str]] | None = None) -> list[list[tuple[int, Any]]]: ...

  def reply(self, items: Sequence[tuple[int, str]], config: Any, seed: int,
            stops: Sequence[Sequence[str]] | None = None) -> list[Any]: ...

  def close(self, ids: Sequence[int]) -> None: ...

  # Optional: whether `text` (a prompt when conversation is None, else text appended to that
  # conversation) leaves room for a completion in the model's context. Absent: always.
  # def fits(self, conversation: int | None, text: str) -> bool: ...


# ---- episodes -----------------------------------------------------------------------------------

@dataclasses.dataclass
class Episode:
  kind: str
  language: str
  task: Task
  start_set: int | None              # None for the natural-language prompt
  sample: int
  given: list[Example]
  conversation: int = -1
  rounds: list[dict] = dataclasses.field(default_factory=list)

  @property
  def key(self) -> tuple:
    return self.kind, self.language, self.task.qid, self.start_set, self.sample


def round_record(episode: Episode, number: int, prompt: str, code: str, result: Check, flagged: bool,
                 keep: int) -> dict:
  q = episode.task.question
  return {"kind": episode.kind, "qid": q.qid, "language": episode.language, "start_set": episode.start_set,
          "sample": episode.sample, "round": number, "prompt": prompt, "code": code,
          "examples_given": [example_json(q, e) for e in episode.given], "verdict": result.verdict,
          "distinguishing": [example_json(q, e) for e in result.distinguishing[:keep]],
          "num_distinguishing": len(result.distinguishing), "flagged": flagged, "given_passed": result.given_passed,
          "final": result.verdict != DISTINGUISHED, "detail": result.detail[:300]}


@dataclasses.dataclass(frozen=True)
class Settings:
  rounds: int = 5
  examples: int = 3
  num_samples: int = 10
  seed: int = 0
  batch_prompts: int = 16            # prompts whose conversations run together
  workers: int = 4                   # sandboxes at a time
  limits: execution.Limits = execution.Limits(timeout_s=10.0)
  natural: bool = True
  keep_distinguishing: int = 20      # distinguishing inputs written per round record


def done_episodes(path: str) -> set[tuple]:
  """Episodes already in `path` (their lines were written together, so any line means complete)."""
  if not storage.exists(path):
    return set()
  return {episode_key(record) for _, record in storage.read_jsonl(path)}


def plan(tasks: Sequence[Task], languages: Sequence[str], settings: Settings, done: set[tuple]
         ) -> list[tuple[str, str, list[Episode]]]:
  """(language, prompt, its n episodes) for every prompt with an episode not yet done."""
  out = []
  for language in languages:
    for task in tasks:
      starts: list[tuple[str, int | None, tuple[Example, ...]]] = [
          (EXAMPLES, k, s) for k, s in enumerate(task.start_sets)]
      if settings.natural:
        starts.append((NATURAL, None, ()))
      for kind, k, examples in starts:
        episodes = [Episode(kind, language, task, k, s, list(examples)) for s in range(settings.num_samples)]
        if any(e.key not in done for e in episodes):
          out.append((language, first_prompt(kind, language, task.question, examples), episodes))
  return out


def _seed(settings: Settings, *parts: Any) -> int:
  return zlib.crc32(json.dumps([settings.seed, *parts], default=str).encode()) & 0x7FFFFFFF


def run_batch(model: ConversationModel, config: Any, batch: Sequence[tuple[str, str, list[Episode]]],
              settings: Settings, done: set[tuple], write, pool: concurrent.futures.Executor) -> None:
  """Every episode of `batch` (prompts of one language) to its end, round by round; the episodes that
  end in a round are handed to `write` together."""
  language = batch[0][0]
  fits = getattr(model, "fits", lambda conversation, text: True)
  exhausted = [(prompt, episodes) for _, prompt, episodes in batch if not fits(None, prompt)]
  if exhausted:  # a prompt longer than the context: its episodes end at once, recorded as such
    ended = []
    for prompt, episodes in exhausted:
      for episode in episodes:
        if episode.key not in done:
          episode.rounds.append(round_record(episode, 1, prompt, "", Check(CONTEXT_EXHAUSTED, (), _NO_ROOM), False, 0))
          ended.append(episode)
    write(ended)
    batch = [item for item in batch if fits(None, item[1])]
    if not batch:
      return
  stops = [list(get(language).stop_sequences)] * len(batch)
  started = model.start([prompt for _, prompt, _ in batch], settings.num_samples, config,
                        _seed(settings, [e[0].key for _, _, e in batch]), stops)
  active: list[tuple[Episode, str, Any]] = []
  skip: list[int] = []
  for (_, prompt, episodes), pairs in zip(batch, started):
    for episode, (conversation, completion) in zip(episodes, pairs):
      episode.conversation = conversation
      if episode.key in done:
        skip.append(conversation)
      else:
        active.append((episode, prompt, completion))
  if skip:
    model.close(skip)
  for number in range(1, settings.rounds + 1):
    final = number == settings.rounds
    codes = [extract_code(language, completion.text) for _, _, completion in active]
    checks = check_all(language, [(episode.task.question, code, episode.given, episode.task.pool)
                                  for (episode, _, _), code in zip(active, codes)], final, settings.limits, pool)
    going, ended = [], []
    for (episode, prompt, _), code, result in zip(active, codes, checks):
      flagged = bool(episode.given) and input_matching(language, episode.task.question, code, episode.given)
      episode.rounds.append(round_record(episode, number, prompt, code, result, flagged,
                                         settings.keep_distinguishing))
      (going if result.verdict == DISTINGUISHED else ended).append((episode, result))
    if ended:
      write([e for e, _ in ended])
      model.close([e.conversation for e, _ in ended])
    if not going:
      return
    items, kept, exhausted = [], [], []
    for episode, result in going:
      new = list(result.distinguishing[:settings.examples])
      episode.given.extend(new)
      text = feedback_text(language, episode.task.question, episode.given, len(new))
      if fits(episode.conversation, text):
        items.append((episode.conversation, text))
        kept.append((episode, result))
      else:  # the conversation has outgrown the context: it ends, recorded as such
        episode.rounds[-1].update(verdict=CONTEXT_EXHAUSTED, final=True, detail=_NO_ROOM)
        exhausted.append(episode)
    if exhausted:
      write(exhausted)
      model.close([e.conversation for e in exhausted])
    going = kept
    if not going:
      return
    replies = model.reply(items, config, _seed(settings, [e.key for e, _ in going], number), stops[:1] * len(items))
    active = [(episode, text, completion) for (episode, _), (_, text), completion in zip(going, items, replies)]


def run(model: ConversationModel, config: Any, tasks: Sequence[Task], languages: Sequence[str], output: str,
        settings: Settings = Settings(), progress: bool = False, labels: Mapping[str, Sequence[str]] | None = None
        ) -> dict:
  """All episodes not yet in DIR/episodes.jsonl, then results.md, metrics.json and the plots; returns
  the metrics. `labels`: knowledge labels per qid for RQ3 (iterative_report.read_labels)."""
  storage.makedirs(output)
  path = storage.join(output, "episodes.jsonl")
  with storage.exclusive_output(path, "evaluation.iterative"):
    storage.repair_torn_tail(path)
    done = done_episodes(path)
    todo = plan(tasks, languages, settings, done)

    def write(episodes: Sequence[Episode]) -> None:  # one append: no episode is ever half written
      storage.append_lines(path, [json.dumps(r, ensure_ascii=False) + "\n" for e in episodes for r in e.rounds])
      done.update(e.key for e in episodes)

    with concurrent.futures.ThreadPoolExecutor(settings.workers) as pool:
      for language in languages:
        mine = [item for item in todo if item[0] == language]
        for start in range(0, len(mine), settings.batch_prompts):
          if progress:
            print(f"{language}: prompts {start + 1}-{min(start + settings.batch_prompts, len(mine))} of {len(mine)}",
                  flush=True)
          run_batch(model, config, mine[start:start + settings.batch_prompts], settings, done, write, pool)
    records = [r for _, r in storage.read_jsonl(path)]
  metrics = summarize(records, settings, {t.qid: t.question for t in tasks}, labels)
  storage.write_atomic(storage.join(output, "results.md"), markdown(metrics, settings))
  storage.write_json(storage.join(output, "metrics.json"), metrics)
  iterative_report.plot_samples(metrics, storage.join(output, "successes_by_round.png"))
  iterative_report.plot_executions(metrics, storage.join(output, "executions_by_round.png"))
  return metrics


def summarize(records: Sequence[dict], settings: Settings, questions: Mapping[str, typed.Question] | None = None,
              labels: Mapping[str, Sequence[str]] | None = None) -> dict:
  """iterative_report.summarize with this run's rounds and samples per prompt."""
  return iterative_report.summarize(records, rounds=settings.rounds, num_samples=settings.num_samples,
                                    questions=questions, labels=labels)


def markdown(metrics: dict, settings: Settings) -> str:
  return iterative_report.markdown(metrics, (
      f"{settings.rounds} rounds, {settings.examples} examples, {settings.num_samples} samples per prompt, seed "
      f"{settings.seed}. An execution is one problem x start set (natural: one problem)."))




# ---- command line -----------------------------------------------------------------------------

def load_tasks(output: str, *, seed: int, examples: int, budget: int, limit: int | None, constraints: str) -> list[Task]:
  """DIR/tasks.jsonl, built on the first run (DIR/tasks.json records the settings and the skipped
  problems); a rerun with other settings for the same DIR is refused."""
  from evaluation.iterative import tasks as iterative_tasks

  wanted = {"seed": seed, "examples": examples, "budget": budget, "limit": limit}
  info_path, tasks_path = storage.join(output, "tasks.json"), storage.join(output, "tasks.jsonl")
  if storage.exists(info_path):
    info = storage.read_json(info_path)
    if info["settings"] != wanted:
      raise ValueError(f"--output {output} holds tasks made with {info['settings']}, not {wanted}; "
                       "choose another --output")
    return [task_from_json(r, f"{tasks_path}:{n}") for n, r in storage.read_jsonl(tasks_path)]
  result = iterative_tasks.humaneval_tasks(seed=seed, examples=examples, budget=budget, limit=limit,
                                           constraints_path=constraints)
  storage.makedirs(output)
  storage.write_atomic(tasks_path, "".join(json.dumps(t.to_json()) + "\n" for t in result.tasks))
  storage.write_json(info_path, {"settings": wanted, "skipped": result.skipped})
  print(f"{len(result.tasks)} tasks, {len(result.skipped)} problems skipped (reasons in {info_path})", flush=True)
  return result.tasks


def load_model(checkpoint: str, max_conversations: int) -> ConversationModel:
  """A ConversationSampler over the checkpoint sample.py would load, with room for one batch of
  conversations (--batch_prompts x --num_samples are open at once)."""
  from sampling.conversation import ConversationSampler
  from sampling.restore import load_sampler

  sampler, _ = load_sampler(checkpoint)
  return ConversationSampler(sampler.model, sampler.params, sampler.vocabulary, sampler.begin_id, sampler.end_ids,
                             max_conversations=max_conversations)


def main(argv: Sequence[str] | None = None) -> int:
  from evaluation.iterative.tasks import DEFAULT_CONSTRAINTS
  from sandbox.renderers import parse_languages

  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--checkpoint", required=True, help="a train.py MODEL_DIR or MODEL_DIR/checkpoints/STEP")
  parser.add_argument("--languages", default="python", help="comma-separated codelm language names")
  parser.add_argument("--rounds", type=int, default=5)
  parser.add_argument("--examples", type=int, default=3, help="m: examples per start set and per feedback")
  parser.add_argument("--num_samples", type=int, default=10)
  parser.add_argument("--output", required=True)
  parser.add_argument("--limit", type=int, help="the first N typed HumanEval problems only")
  parser.add_argument("--budget", type=int, default=100, help="differential-testing inputs per problem")
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--constraints", default=DEFAULT_CONSTRAINTS)
  parser.add_argument("--temperature", type=float, default=DEFAULT_TEMPERATURE)
  parser.add_argument("--top_p", type=float, default=DEFAULT_TOP_P)
  parser.add_argument("--max_decode_length", type=int, default=256)
  parser.add_argument("--batch_prompts", type=int, default=16,
                      help="prompts whose conversations run together (x --num_samples conversations hold a cache each)")
  parser.add_argument("--workers", type=int, default=4, help="sandboxes at a time")
  parser.add_argument("--timeout", type=float, default=10.0, help="seconds per program run")
  parser.add_argument("--no_natural", action="store_true",
                      help="skip the natural-language comparison (and with it RQ3's NL-Succeed/NL-Fail table)")
  parser.add_argument("--labels", help="knowledge labels for RQ3: a JSON object of problem (qid) -> list of labels")
  args = parser.parse_args(argv)
  for flag in ("rounds", "examples", "num_samples", "budget", "batch_prompts", "workers", "max_decode_length"):
    if getattr(args, flag) < 1:
      parser.error(f"--{flag} must be at least 1, got {getattr(args, flag)}")
  try:
    labels = None
    if args.labels:  # checked first: a bad file fails before tasks or the model are built
      known = [q.qid for q in typed.read_questions(benchmark_data.HUMANEVAL_TYPED)]  # --limit may leave some out
      labels = iterative_report.read_labels(args.labels, known)
    languages = parse_languages(args.languages)
    for language in languages:
      lacking = execution.missing(get(language).toolchain)
      if lacking:
        raise ValueError(f"--languages: {language} cannot run here: missing {', '.join(lacking)}")
    tasks = load_tasks(args.output, seed=args.seed, examples=args.examples, budget=args.budget, limit=args.limit,
                       constraints=args.constraints)
    from sampling.sampler import SamplingConfig

    config = SamplingConfig(temperature=args.temperature, top_p=args.top_p, max_decode_length=args.max_decode_length)
    settings = Settings(rounds=args.rounds, examples=args.examples, num_samples=args.num_samples, seed=args.seed,
                        batch_prompts=args.batch_prompts, workers=args.workers,
                        limits=execution.Limits(timeout_s=args.timeout), natural=not args.no_natural)
    model = load_model(args.checkpoint, args.batch_prompts * args.num_samples)
    metrics = run(model, config, tasks, languages, args.output, settings, progress=True, labels=labels)
  except (ValueError, OSError, storage.OutputLocked) as error:
    print(f"error: {error}", file=sys.stderr)
    return 2
  print(markdown(metrics, settings))
  return 0


if __name__ == "__main__":
  sys.exit(main())
