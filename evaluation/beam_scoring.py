r"""The scorer as an Apache Beam pipeline: the same results as evaluation/resumable.py's loop, on many
machines.

  python -m evaluation.score --predictions gs://B/predictions.jsonl --output gs://B/scores \
      --runner DataflowRunner --project P --region R --temp_location gs://B/tmp \
      --sdk_container_image IMAGE --experiments use_runner_v2 [--batch_size 32]

(`python -m evaluation.score --help` lists the scorer's own flags; every other flag is Beam's.) The
driver (the machine that launches) does what needs the whole picture, the workers only execute:
1. the driver reads the predictions and DIR/results.jsonl, and plans exactly as the local loop does
   (resumable.plan): what is left, each distinct program once, predictions whose program an earlier
   result judged take its verdict; the distinct programs are grouped by language and problem into
   units of `batch_size` (resumable.units: a compiled language's unit is one batched build);
2. it writes the units to DIR/beam/units.jsonl (a file, not the pipeline graph: 394k programs would
   be far over a runner's graph size) and runs the pipeline: read units -> Reshuffle (spread over
   the workers) -> ScoreUnit (the benchmark's own `run`, in the workers' sandboxes) -> one shard per
   unit, DIR/beam/shards/<unit id>.jsonl, written whole (storage.write_atomic) under a name that is
   the hash of the unit's programs;
3. it merges the shards into DIR/results.jsonl (each prediction once: its own or its twin's verdict)
   and writes metrics.json as the local scorer does, then removes DIR/beam.
A runner that retries a bundle, or runs it twice speculatively, rewrites the same shard whole: one
copy survives. A killed pipeline leaves the shards of the units it finished: the next run reads
them as earlier results and schedules only the rest. Workers need the toolchains, bubblewrap and
codelm: the Dockerfile at the repository root builds such a worker image (docs/scoring.md,
"Scoring on Dataflow"); the direct runner uses this machine's.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from collections.abc import Callable, Sequence

import storage
from evaluation import resumable
from sandbox import batching, execution

WORK_DIR = "beam"
UNSCORED_SUFFIX = ".unscored"  # beside a unit's shard: the members it could not judge, and why


@dataclasses.dataclass(frozen=True)
class Unit:
  """One work item of the pipeline: distinct programs of one language."""
  language: str
  predictions: tuple[resumable.Prediction, ...]
  programs: tuple[str, ...]     # each prediction's program sha1 (resumable.program_key)

  @property
  def name(self) -> str:
    """The shard's name: the same programs, the same name (a retried bundle overwrites its shard)."""
    text = "\n".join(f"{p.language}\t{p.qid}\t{p.sample_id!r}\t{program}"
                     for p, program in zip(self.predictions, self.programs))
    return hashlib.sha1(text.encode()).hexdigest()[:20]

  def to_json(self) -> str:
    return json.dumps({"language": self.language, "programs": list(self.programs),
                       "predictions": [dataclasses.asdict(p) for p in self.predictions]})

  @staticmethod
  def from_json(line: str) -> "Unit":
    value = json.loads(line)
    return Unit(value["language"], tuple(resumable.Prediction(**p) for p in value["predictions"]),
                tuple(value["programs"]))


def _score_unit_fn(make_benchmark: Callable[[], resumable.Benchmark], shards: str):
  """The pipeline's one step with side effects: runs a unit through the benchmark and writes its
  shard whole. Made here so that importing this module needs no Beam."""
  import apache_beam as beam
  from apache_beam.metrics import Metrics

  class _ScoreUnit(beam.DoFn):
    def __init__(self):
      self._make = make_benchmark
      self._shards = shards
      self._counters = {field.name: Metrics.counter("scoring", field.name)
                        for field in dataclasses.fields(batching.Stats)}
      self._executed = Metrics.counter("scoring", "programs_executed")

    def setup(self):
      execution.check_sandbox()  # a worker that cannot sandbox fails here, saying why
      self._benchmark = self._make()

    def process(self, line: str):
      unit = Unit.from_json(line)
      stats = batching.Stats()
      # A member the benchmark cannot judge is left out of the shard (the driver counts it unscored,
      # a rerun tries it again) with its reason beside it: it never fails the bundle, which every
      # retry would fail again, blocking the whole pipeline.
      verdicts = resumable.run_unit(self._benchmark, unit.predictions, stats)
      records = [resumable.record_of(p, verdict, program)
                 for p, verdict, program in zip(unit.predictions, verdicts, unit.programs)
                 if not isinstance(verdict, Exception)]
      errors = [{"language": p.language, "qid": p.qid, "program_sha1": program,
                 "error": f"{type(verdict).__name__}: {verdict}"}
                for p, verdict, program in zip(unit.predictions, verdicts, unit.programs)
                if isinstance(verdict, Exception)]
      if errors:
        storage.write_atomic(storage.join(self._shards, f"{unit.name}{UNSCORED_SUFFIX}"),
                             "".join(json.dumps(e, ensure_ascii=False) + "\n" for e in errors))
      path = storage.join(self._shards, f"{unit.name}.jsonl")
      storage.write_atomic(path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))
      for name, counter in self._counters.items():
        counter.inc(getattr(stats, name))
      self._executed.inc(len(records))
      yield path

  return _ScoreUnit()


def read_shards(directory: str) -> list[dict]:
  """Every record of the shards a (possibly killed) pipeline wrote."""
  shards = storage.join(directory, WORK_DIR, "shards")
  if not storage.isdir(shards):
    return []
  records = []
  for name in storage.listdir(shards):
    if name.endswith(".jsonl"):  # not a temporary of write_atomic
      records += [record for _, record in storage.read_jsonl(storage.join(shards, name))]
  return records


def _read_unscored(directory: str) -> dict[tuple, str]:
  """(language, qid, program sha1) -> why, for the members the workers could not judge."""
  shards = storage.join(directory, WORK_DIR, "shards")
  if not storage.isdir(shards):
    return {}
  return {(e["language"], e["qid"], e["program_sha1"]): e["error"]
          for name in storage.listdir(shards) if name.endswith(UNSCORED_SUFFIX)
          for _, e in storage.read_jsonl(storage.join(shards, name))}


def dispatch(benchmark: resumable.Benchmark, make_benchmark: Callable[[], resumable.Benchmark],
             predictions: Sequence[resumable.Prediction], output_dir: str, pipeline_args: Sequence[str] | None,
             workers: int | None, batch_size: int = batching.DEFAULT_BATCH_SIZE, progress: bool = True,
             source: str = "predictions") -> tuple[dict[tuple, dict], resumable.Report]:
  """Every scorer's one choice: here with `workers` threads (resumable.score_predictions) when
  `pipeline_args` is None, else as a Beam pipeline on that runner (score_predictions)."""
  if pipeline_args is None:
    return resumable.score_predictions(benchmark, predictions, output_dir, workers, batch_size, progress, source=source)
  return score_predictions(benchmark, make_benchmark, predictions, output_dir, pipeline_args, batch_size,
                           source=source, workers=workers or os.cpu_count() or 1)


def score_predictions(benchmark: resumable.Benchmark, make_benchmark: Callable[[], resumable.Benchmark],
                      predictions: Sequence[resumable.Prediction], output_dir: str, pipeline_args: Sequence[str],
                      batch_size: int = batching.DEFAULT_BATCH_SIZE, source: str = "predictions",
                      workers: int = 1) -> tuple[dict[tuple, dict], resumable.Report]:
  """resumable.score_predictions on a Beam runner (module docstring). `make_benchmark` builds the
  benchmark in each worker (it is pickled with the pipeline); `workers`, the workers expected, evens
  out the units (resumable.units)."""
  import apache_beam as beam
  from apache_beam.options.pipeline_options import PipelineOptions

  if not runs_here(pipeline_args) and not storage.is_url(output_dir):
    raise ValueError(f"{_runner(pipeline_args)} runs on workers that cannot see this machine's "
                     f"{output_dir}: give the output as a URL (gs://...)")
  storage.makedirs(output_dir)
  results_path = storage.join(output_dir, "results.jsonl")
  work = storage.join(output_dir, WORK_DIR)
  report = resumable.Report(predictions=len(predictions))
  with storage.exclusive_output(results_path, benchmark.command):
    results = storage.read_results(results_path, benchmark.result_key)
    earlier = _merge(benchmark, predictions, results, read_shards(output_dir), results_path)
    report.reused_earlier += earlier
    groups, reused = resumable.plan(benchmark, predictions, results)
    report.to_score = earlier + len(reused) + sum(len(g) for g in groups.values())
    first = {program: group[0] for program, group in groups.items()}
    programs = {id(p): program[2] for program, p in first.items()}
    units = [Unit(u[0].language, tuple(u), tuple(programs[id(p)] for p in u))
             for u in resumable.units(benchmark, first.values(), batch_size, workers)]
    storage.makedirs(storage.join(work, "shards"))
    units_path = storage.join(work, "units.jsonl")
    storage.write_atomic(units_path, "".join(u.to_json() + "\n" for u in units))
    print(f"scoring {report.to_score} predictions: {len(first)} distinct programs in {len(units)} units "
          f"on {_runner(pipeline_args)}", flush=True)
    if units:
      pipeline = beam.Pipeline(options=PipelineOptions(_quiet_workers(pipeline_args)))
      _ = (pipeline
           | "Units" >> beam.io.ReadFromText(units_path)
           | "Spread" >> beam.Reshuffle()
           | "Score" >> beam.ParDo(_score_unit_fn(make_benchmark, storage.join(work, "shards"))))
      outcome = pipeline.run()
      outcome.wait_until_finish()
      _add_counters(report, outcome)
    shards = read_shards(output_dir)
    report.executed += len(first)
    report.reused_now += sum(len(g) - 1 for g in groups.values())
    _merge(benchmark, predictions, results, shards, results_path)
    missing = [p for p in predictions if not resumable.is_done(benchmark, p, results)]
    errors = _read_unscored(output_dir)
    report.unscored += [resumable.unscored_message(source, p, errors.get(resumable.program_key(benchmark, p),
                                                                         "no result from the pipeline"))
                        for p in missing]
    storage.rmtree(work)
  return results, report


def _merge(benchmark: resumable.Benchmark, predictions: Sequence[resumable.Prediction], results: dict,
           shards: Sequence[dict], results_path: str) -> int:
  """Appends to results.jsonl, in one write, a record for every prediction that results.jsonl lacks
  and a shard judges (its own program's, or a twin's: the same language, problem and program);
  returns how many. What results.jsonl already has is never written again."""
  judged = {(r["language"], r["qid"], r["program_sha1"]): r for r in shards}
  new = {}
  for p in predictions:
    if resumable.is_done(benchmark, p, results):
      continue
    program = resumable.program_key(benchmark, p)
    if program in judged:
      new[p.key] = resumable.record_of(p, resumable.verdict_of(judged[program]), program[2])
  if new:
    storage.append_lines(results_path, [json.dumps(r, ensure_ascii=False) + "\n" for r in new.values()])
    results.update(new)
  return len(new)


def _add_counters(report: resumable.Report, outcome) -> None:
  """The workers' batching counters, where the runner reports metrics."""
  try:
    counters = outcome.metrics().query()["counters"]
  except Exception:  # noqa: BLE001 - a runner without metrics: the report lacks them, nothing else
    return
  for counter in counters:
    name = counter.key.metric.name
    if hasattr(report.batching, name):
      setattr(report.batching, name, getattr(report.batching, name) + counter.committed)


def _quiet_workers(pipeline_args: Sequence[str]) -> list[str]:
  import quiet
  return quiet.beam_worker_args(pipeline_args)


def runs_here(pipeline_args: Sequence[str]) -> bool:
  import quiet
  return quiet.runs_here(pipeline_args)


def _runner(pipeline_args: Sequence[str]) -> str:
  import quiet
  return quiet.runner_name(pipeline_args)
