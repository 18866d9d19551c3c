"""The one resumable scorer: predictions in, one result line per prediction out, metrics at the end.

Every benchmark (typed HumanEval in 12 languages: evaluation/score.py; practical Python tasks:
evaluation/practical/score.py; HumanEval-infilling: evaluation/infilling/score.py) is scored by
`score_predictions` here, and supplies only a `Benchmark`: how a prediction becomes the program that
runs, how a batch of programs is run and judged, and how the results are summarised. The loop is the same for all:
- one writer per output folder (storage.exclusive_output);
- DIR/results.jsonl is read back first; a prediction whose (language, qid, sample_id) is there with
  the same code and judged under the same settings (limits, tolerances: Benchmark.settings) is done; every new result is one flushed line, so a killed run loses at most the
  line being written (a torn last line is cut off on reopening) and a rerun does only what is left;
- each distinct program runs once: predictions whose (language, qid, program) agree (the program
  being the completion as the benchmark cuts it) share one execution, and one already judged in an
  earlier run is not run again; metrics.json says how many executions that saved;
- the distinct programs go to a thread pool in units of one language, ordered by problem, so that a
  compiled language's unit is one batched build (sandbox/batching.py);
- one predictions reader and one policy for a bad line: it is reported with file:line and the
  others are scored.
The Beam pipeline (evaluation/beam_scoring.py) runs the same Benchmark's units on many machines and
gives the same results.
"""

from __future__ import annotations

import collections
import concurrent.futures
import dataclasses
import hashlib
import json
import math
import os
import sys
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence

import storage
from evaluation import passk
from sandbox import batching
from storage import OutputLocked, exclusive_output, parse_line


@dataclasses.dataclass(frozen=True)
class Prediction:
  qid: str
  sample_id: int | str
  language: str     # codelm's name ("cpp")
  code: str         # the completion, as sampled
  line: int         # in the predictions file
  # What sample.py says changed its meaning: the prompt was cut to fit (--truncate_prompts), or the
  # completion stopped at --max_decode_length (finish_reason "length"). Counted, never judged on.
  prompt_truncated: bool = False
  cut_by_length: bool = False

  @property
  def key(self) -> tuple[str, str, int | str]:
    return self.language, self.qid, self.sample_id

  @property
  def code_sha1(self) -> str:
    return sha1(self.code)


def sha1(text: str) -> str:
  return hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()


def read_predictions(path: str, resolve: Callable[[dict], tuple[str, str]]
                     ) -> tuple[list[Prediction], list[str]]:
  """The valid predictions of a sample.py output, and one message per line that is not one
  (file:line: why). `resolve(record)` gives the record's (language, qid) in the benchmark's names,
  or raises ValueError saying why it has none. A prediction without a sample_id gets its index among
  its (language, qid) predictions, as BabelCode numbers them."""
  predictions, invalid, seen = [], [], set()
  count: collections.Counter = collections.Counter()
  for number, line in storage.read_jsonl_lines(path, warn=invalid.append):
    where = f"{path}:{number}"
    try:
      record = parse_line(line, where)
    except ValueError as error:
      invalid.append(str(error))
      continue
    try:
      if "qid" not in record or "code" not in record:
        raise ValueError(f"a prediction needs qid and code; missing {[k for k in ('qid', 'code') if k not in record]}")
      if not isinstance(record["code"], str):
        raise ValueError(f"code must be a string, got {type(record['code']).__name__}")
      if not isinstance(record["qid"], (str, int)) or isinstance(record["qid"], bool):
        raise ValueError(f"qid must be a string, got {json.dumps(record['qid'])[:40]}")
      language, qid = resolve(record)
      sample_id = record.get("sample_id", count[(language, qid)])
      if type(sample_id) not in (int, str):
        raise ValueError(f"sample_id must be an int or a string, got {json.dumps(sample_id)[:40]}")
      if (language, qid, sample_id) in seen:
        raise ValueError(f"a second prediction for {language} {qid} sample {sample_id!r}")
      count[(language, qid)] += 1
    except ValueError as error:
      invalid.append(f"{where}: {error}")
      continue
    seen.add((language, qid, sample_id))
    predictions.append(Prediction(qid, sample_id, language, record["code"], number,
                                  prompt_truncated=record.get("prompt_truncated") is True,
                                  cut_by_length=record.get("finish_reason") == "length"))
  return predictions, invalid


def sampling_counts(predictions: Sequence[Prediction]) -> dict:
  """How many of `predictions` (those a metric is computed over) come from a truncated prompt or
  stopped at the length limit, and their share in percent."""
  count = len(predictions)
  truncated = sum(p.prompt_truncated for p in predictions)
  cut = sum(p.cut_by_length for p in predictions)
  percent = lambda n: round(100 * n / count, 2) if count else 0.0  # noqa: E731
  return {"prompt_truncated": truncated, "percent_prompt_truncated": percent(truncated),
          "cut_by_length": cut, "percent_cut_by_length": percent(cut)}


def sampling_warnings(counts: Mapping[str, Mapping], total: int | None = None) -> list[str]:
  """The lines a scorer prints when its scores are over truncated prompts or length-cut completions:
  `counts`, sampling_counts by group name (a language, or "overall")."""
  lines = []
  for name, c in counts.items():
    if c["prompt_truncated"]:
      lines.append(f"warning: {name}: {c['prompt_truncated']} predictions ({c['percent_prompt_truncated']:g}%) "
                   "were sampled from prompts sample.py truncated to fit (--truncate_prompts): their instruction "
                   "or signature may be gone, so pass@k is not the benchmark's")
    if c["cut_by_length"]:
      lines.append(f"note: {name}: {c['cut_by_length']} predictions ({c['percent_cut_by_length']:g}%) stopped at "
                   "--max_decode_length (finish_reason length): a longer limit may pass more")
  return lines


def table(metrics: Mapping, groups: Sequence[str], first: Sequence[tuple[str, Callable[[str, Mapping], str]]],
          columns: Sequence[tuple[str, str]], digits: int) -> list[str]:
  """The markdown table a scorer prints, a row per group (language, subset) of `metrics`: the `first`
  cells (title, cell of (group, its metrics)), every pass@k column (passk.columns: "n < k" where not
  computable) to `digits` places, then the percentage `columns` (key, title) to one place."""
  ks = passk.columns(metrics[g] for g in groups)
  header = [title for title, _ in first] + ks + [title for _, title in columns]
  lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
  for group in groups:
    m = metrics[group]
    cells = [cell(group, m) for _, cell in first] + [passk.cell(m, k, digits) for k in ks]
    cells += [f"{m[key]:.1f}" if m.get(key) is not None else "–" for key, _ in columns]
    lines.append("| " + " | ".join(cells) + " |")
  return lines


def listed_lines(metrics: Mapping, shown: int = 20) -> list[str]:
  """What a scorer prints of metrics' invalid and unscored predictions: the first `shown` of each,
  and how many more metrics.json lists."""
  invalid = metrics["invalid_predictions"]
  lines = [f"invalid prediction: {message}" for message in invalid[:shown]]
  if len(invalid) > shown:
    lines.append(f"... and {len(invalid) - shown} more invalid predictions (metrics.json lists them all)")
  return lines + list(metrics["unscored_predictions"][:shown])


def command_main(parser, argv: Sequence[str] | None, run: Callable[..., int]) -> int:
  """A scorer's subcommand CLI (`score`, `prompts`, ...): Beam's options pass through only to `score
  --runner`; `run(args, beam_options)` does the command; a bad input or a held output is one line
  on stderr and exit status 2."""
  args, unknown = parser.parse_known_args(argv)
  if unknown and (args.command != "score" or args.runner is None):
    parser.error(f"unrecognized arguments: {' '.join(unknown)}"
                 + (" (Beam's options need --runner)" if args.command == "score" else ""))
  try:
    return run(args, unknown)
  except (ValueError, OSError, RuntimeError, OutputLocked) as error:
    print(f"error: {error}", file=sys.stderr)
    return 2


class Benchmark:
  """What a benchmark tells the scorer. Subclasses override `program`, `run` and `summarise`."""
  command = "evaluation"          # names the scorer in the output lock
  metrics_file = "metrics.json"

  def program(self, prediction: Prediction) -> str:
    """The text that decides the verdict: predictions whose (language, qid, program) agree share
    one execution."""
    return prediction.code

  def run(self, unit: Sequence[Prediction], stats: batching.Stats) -> list[dict]:
    """The verdict fields of each prediction of `unit` (one language; all of them distinct programs),
    in order. A unit of a compiled language is built together (sandbox/batching.py)."""
    raise NotImplementedError

  def summarise(self, predictions: Sequence[Prediction], results: Mapping[tuple, dict]) -> dict:
    """The benchmark's metrics over the predictions that have results."""
    raise NotImplementedError

  def result_key(self, record: dict) -> tuple | None:
    """A results.jsonl record's (language, qid, sample_id), or None for a line to ignore."""
    return record["language"], record["qid"], record["sample_id"]

  def settings(self, language: str) -> dict:
    """What decides a verdict besides the program (limits, tolerances, the judge's version): a result
    computed under other settings is not reused."""
    return {}


def program_key(benchmark: Benchmark, prediction: Prediction) -> tuple[str, str, str]:
  """What identifies an execution: (language, qid, sha1 of the benchmark's settings and the program)."""
  settings = benchmark.settings(prediction.language)
  text = benchmark.program(prediction)
  if settings:
    text = json.dumps(settings, sort_keys=True, default=str) + "\0" + text
  return prediction.language, prediction.qid, sha1(text)


def is_done(benchmark: Benchmark, prediction: Prediction, results: Mapping[tuple, dict]) -> bool:
  """The prediction has a result for its current code under the current settings."""
  record = results.get(prediction.key, {})
  return (record.get("code_sha1") == prediction.code_sha1
          and record.get("program_sha1") == program_key(benchmark, prediction)[2])


def units(benchmark: Benchmark, distinct: Iterable[Prediction], size: int, workers: int = 1
          ) -> list[list[Prediction]]:
  """Distinct programs in units of one language, ordered by problem (a batched build then shares
  its problems' harness code), `size` programs at most. A language's units are of equal size and,
  where there are enough programs, a multiple of `workers` in number, so no worker idles while
  another finishes (96 programs on 2 workers: 4 units of 24, not 32 + 32 + 32)."""
  by_language: dict[str, list[Prediction]] = collections.defaultdict(list)
  for p in distinct:
    by_language[p.language].append(p)
  out = []
  for language in sorted(by_language):
    ordered = sorted(by_language[language], key=lambda p: (p.qid, str(p.sample_id)))
    count = math.ceil(len(ordered) / max(size, 1))
    count = min(len(ordered), math.ceil(count / workers) * workers)
    step = math.ceil(len(ordered) / count)
    out += [ordered[i:i + step] for i in range(0, len(ordered), step)]
  return out


def record_of(prediction: Prediction, verdict: dict, program_sha1: str) -> dict:
  """The results.jsonl line: the prediction's identity, its verdict, and what it was computed from."""
  return {"language": prediction.language, "qid": prediction.qid, "sample_id": prediction.sample_id,
          **verdict, "code_sha1": prediction.code_sha1, "program_sha1": program_sha1}


@dataclasses.dataclass
class Report:
  """What one scoring run did (metrics.json's "scoring")."""
  predictions: int = 0         # valid predictions read
  to_score: int = 0            # of them, without a result for their current code
  executed: int = 0            # distinct programs run now
  reused_now: int = 0          # predictions that shared an execution of this run
  reused_earlier: int = 0      # predictions whose program was judged in an earlier run
  unscored: list[str] = dataclasses.field(default_factory=list)
  batching: batching.Stats = dataclasses.field(default_factory=batching.Stats)

  def as_dict(self) -> dict:
    saved = self.reused_now + self.reused_earlier
    return {"predictions": self.predictions, "scored_now": self.to_score - len(self.unscored),
            "programs_executed": self.executed, "duplicates_reused": saved,
            "duplicates_reused_from_earlier_runs": self.reused_earlier,
            "executions_saved_percent": round(100 * saved / self.to_score, 2) if self.to_score else 0.0,
            "batching": dataclasses.asdict(self.batching)}


def run_unit(benchmark: Benchmark, unit: Sequence[Prediction], stats: batching.Stats) -> list[dict | Exception]:
  """The unit's verdicts, in order; where the unit's run raised, each member's alone, so that one
  member's fault (a bug of the scorer's own on one completion) costs that member only, never the
  others it was built with. A member that raises alone has its exception in its place."""
  try:
    return list(benchmark.run(list(unit), stats))
  except Exception as error:  # noqa: BLE001 - narrowed to the members below
    if len(unit) == 1:
      return [error]
  verdicts: list[dict | Exception] = []
  for p in unit:
    try:
      verdicts += benchmark.run([p], stats)
    except Exception as error:  # noqa: BLE001 - this member alone is unscored
      verdicts.append(error)
  return verdicts


def unscored_message(source: str, prediction: Prediction, error: BaseException | str) -> str:
  why = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
  return (f"{source}:{prediction.line}: {prediction.language} {prediction.qid} sample "
          f"{prediction.sample_id!r} could not be scored: {why}")


def unscored_lines(unscored: Sequence[str]) -> list[str]:
  """The end of a scorer's summary when some predictions have no verdict (exit status 1)."""
  if not unscored:
    return []
  more = [f"... and {len(unscored) - 20} more (metrics.json lists them all)"] if len(unscored) > 20 else []
  return more + [f"{len(unscored)} predictions could not be scored: pass@k above leaves them out; "
                 "rerun the same command to try them again (exit status 1)"]


def plan(benchmark: Benchmark, predictions: Sequence[Prediction], results: Mapping[tuple, dict]
         ) -> tuple[dict[tuple, list[Prediction]], list[dict]]:
  """What is left to do: the predictions to score grouped by program (the first of each group runs),
  and the records of those whose program an earlier result already judged."""
  judged = {(r["language"], r["qid"], r["program_sha1"]): r for r in results.values()
            if isinstance(r.get("program_sha1"), str)}
  groups: dict[tuple, list[Prediction]] = collections.defaultdict(list)
  reused = []
  for p in predictions:
    if is_done(benchmark, p, results):
      continue
    program = program_key(benchmark, p)
    if program in judged:
      reused.append(record_of(p, verdict_of(judged[program]), program[2]))
    else:
      groups[program].append(p)
  return groups, reused


IDENTITY = ("language", "qid", "sample_id", "code_sha1", "program_sha1")


def verdict_of(record: dict) -> dict:
  return {k: v for k, v in record.items() if k not in IDENTITY}


def score_predictions(benchmark: Benchmark, predictions: Sequence[Prediction], output_dir: str,
                      workers: int | None = None, batch_size: int = batching.DEFAULT_BATCH_SIZE,
                      progress: bool = False, source: str = "predictions"
                      ) -> tuple[dict[tuple, dict], Report]:
  """Scores the predictions not yet in output_dir/results.jsonl (module docstring); returns every
  result by (language, qid, sample_id) and what this run did. `source` (the predictions file) names
  the line of a prediction that could not be scored."""
  from tqdm import tqdm

  storage.makedirs(output_dir)
  results_path = storage.join(output_dir, "results.jsonl")
  report = Report(predictions=len(predictions))
  with exclusive_output(results_path, benchmark.command):  # one scorer per output folder at a time
    results = storage.read_results(results_path, benchmark.result_key)
    groups, reused = plan(benchmark, predictions, results)
    report.to_score = len(reused) + sum(len(g) for g in groups.values())
    report.reused_earlier = len(reused)
    lock = threading.Lock()

    def run(unit: list[Prediction]) -> list[dict | Exception]:
      stats = batching.Stats()
      verdicts = run_unit(benchmark, unit, stats)
      with lock:
        report.batching.add(stats)
      return verdicts

    first = {program: group[0] for program, group in groups.items()}
    work = units(benchmark, first.values(), batch_size, workers or os.cpu_count() or 1)
    programs = {id(p): program for program, p in first.items()}
    pool = concurrent.futures.ThreadPoolExecutor(workers or os.cpu_count() or 1)
    try:
      with storage.JsonlAppender(results_path) as out, \
           tqdm(total=report.to_score, unit="prediction", desc="scoring", disable=not progress,
                smoothing=0.05) as bar:
        for record in reused:
          out.write(record)  # one write per line: a kill tears at most the last
          results[(record["language"], record["qid"], record["sample_id"])] = record
        bar.update(len(reused))
        futures = {pool.submit(run, unit): unit for unit in work}
        for future in concurrent.futures.as_completed(futures):
          unit = futures[future]
          try:
            verdicts = future.result()
          except Exception as error:  # noqa: BLE001 - one unit never stops the others
            verdicts = [error] * len(unit)
          for p, verdict in zip(unit, verdicts):
            program = programs[id(p)]
            if isinstance(verdict, Exception):  # not written: a rerun tries it again
              report.unscored += [unscored_message(source, q, verdict) for q in groups[program]]
              bar.update(len(groups[program]))
              continue
            for q in groups[program]:
              record = record_of(q, verdict, program[2])
              out.write(record)
              results[q.key] = record
            report.executed += 1
            report.reused_now += len(groups[program]) - 1
            bar.update(len(groups[program]))
          bar.set_postfix(saved=report.reused_now + report.reused_earlier, refresh=False)
    finally:  # on an interrupt, start no more sandboxes
      pool.shutdown(wait=True, cancel_futures=True)
  return results, report
