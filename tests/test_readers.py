"""Property tests of the JSONL readers users feed by hand: any file either loads or is refused with
an error naming its file and line; no reader crashes."""

import json
import os
import re
import tempfile

from hypothesis import given, settings
from hypothesis import strategies as st

from sampling import predictions as predictions_io
from evaluation import score

QUESTIONS = score.load_benchmark("humaneval")

_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6)
_fields = st.sampled_from(["qid", "language", "prompt", "stop", "code", "sample_id", "extra"])
_records = st.dictionaries(_fields, _json_values | st.sampled_from(["Python", "HumanEval/0", "0", "Go", "x"]),
                           max_size=6)
_lines = st.one_of(
    _records.map(lambda r: json.dumps(r).encode()),  # well-formed JSON, fields of any type
    st.fixed_dictionaries({"qid": st.sampled_from(["HumanEval/0", "1", 2]),
                           "language": st.sampled_from(["Python", "python", "Go", "Dart", "klingon"]),
                           "prompt": st.text(max_size=10), "code": st.text(max_size=10),
                           "sample_id": st.integers(0, 2)}).map(lambda r: json.dumps(r).encode()),
    st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"")),  # anything at all, non-UTF-8 included
    st.sampled_from([b"", b"   ", b"[1, 2]", b"{", b'{"qid": 1e999}', b"[" * 5000 + b"]" * 5000, b"9" * 5000]),
)
_files = st.lists(_lines, max_size=6)


def _write(lines: list[bytes]) -> str:
  handle, path = tempfile.mkstemp(suffix=".jsonl")
  with os.fdopen(handle, "wb") as f:
    f.write(b"".join(line + b"\n" for line in lines))
  return path


def _names_a_line(message: str, path: str, lines: list[bytes]) -> bool:
  match = re.match(re.escape(path) + r":(\d+): ", message)
  return bool(match) and 1 <= int(match.group(1)) <= len(lines)


@settings(max_examples=300, deadline=None)
@given(_files)
def test_prompts_either_load_or_the_error_names_the_line(lines):
  path = _write(lines)
  try:
    prompts = predictions_io.read_prompts(path)
  except ValueError as error:
    assert _names_a_line(str(error), path, lines), str(error)
  else:
    assert all(isinstance(p["prompt"], str) and isinstance(p["language"], str) and p["language"] for p in prompts)
    assert len({predictions_io.prompt_key(p) for p in prompts}) == len(prompts)
  finally:
    os.unlink(path)


@settings(max_examples=300, deadline=None)
@given(_files)
def test_predictions_load_and_every_refused_line_is_named(lines):
  path = _write(lines)
  try:
    predictions, invalid = score.read_predictions(path, QUESTIONS)
    assert all(_names_a_line(message, path, lines) for message in invalid), invalid
    assert len(predictions) + len(invalid) == sum(1 for line in lines if line.strip())
    assert len({p.key for p in predictions}) == len(predictions)
  finally:
    os.unlink(path)


@settings(max_examples=200, deadline=None)
@given(_files, st.integers(1, 3))
def test_a_resumed_output_of_any_content_is_read_without_crashing(lines, num_samples):
  path = _write(lines)
  try:
    complete = predictions_io.completed_prompts(path, num_samples)
    kept = [json.loads(line) for line in open(path, "rb")]  # what stays is valid, once each
    assert {predictions_io.prompt_key(r) for r in kept} == complete
    assert len({(*predictions_io.prompt_key(r), json.dumps(r["sample_id"])) for r in kept}) == len(kept)
  finally:
    os.unlink(path)


def test_a_locked_output_names_its_holder_even_when_asked_the_instant_it_was_locked(tmp_path):
  """The holder writes its name just after taking the lock; a second writer asking in between must
  still be told who holds it (CI once saw "unknown holder" here)."""
  import subprocess
  import sys

  import pytest

  from storage import OutputLocked, exclusive_output

  output = str(tmp_path / "predictions.jsonl")
  holder = subprocess.Popen(
      [sys.executable, "-c",
       "import fcntl, os, sys, time\n"
       f"fd = os.open({output + '.lock'!r}, os.O_RDWR | os.O_CREAT, 0o644)\n"
       "fcntl.flock(fd, fcntl.LOCK_EX)\n"
       "print('locked', flush=True)\n"
       "time.sleep(0.5)\n"
       "os.pwrite(fd, b'sample.py, pid 4711 on host\\n', 0)\n"
       "sys.stdin.read()\n"],
      stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
  try:
    assert holder.stdout.readline() == "locked\n"
    with pytest.raises(OutputLocked, match=r"being written by another run \(sample.py, pid 4711 on host\)"):
      with exclusive_output(output, "sample.py"):
        pass
    assert os.path.exists(output + ".lock"), "the refused writer removed the holder's lock file"
  finally:
    holder.stdin.close()
    holder.wait()


def _as_metrics_file(path):
  """A MODEL_DIR holding `path` as its metrics.jsonl."""
  import shutil

  model_dir = path + ".run"
  os.makedirs(model_dir, exist_ok=True)
  shutil.copy(path, os.path.join(model_dir, "metrics.jsonl"))
  return model_dir


def _readers(tmp_path):
  """(name, lines of a valid file, read(path) -> something comparable) for each JSONL file read."""
  from evaluation import prompts as prompts_module
  from sandbox import typed
  from experiments import ablation
  from training.metrics import MetricsWriter

  question_lines = open(score.BENCHMARKS["humaneval"], "rb").read().split(b"\n")[:2]
  prediction = lambda i: json.dumps({"qid": "HumanEval/0", "language": "Python", "code": "  return 1\n",
                                     "sample_id": i}).encode()
  result = lambda i: json.dumps({"language": "python", "qid": "HumanEval/0", "sample_id": i, "status": "passed",
                                 "code_sha1": "x"}).encode()
  prompt = lambda i: json.dumps({"qid": f"q{i}", "language": "Python", "prompt": "def f():\n"}).encode()
  generation = lambda i: json.dumps({"qid": str(i), "language": "Python", "signature": "def f(x):",
                                     "text": "Return x.", "entry_fn_name": "f", "solution_python": "def f(x): return x",
                                     "test_code": "", "signature_with_docstring": "def f(x):\n  '''x'''"}).encode()
  metrics = lambda i: json.dumps({"step": i + 1, "loss": 1.0, "validation/Python": 2.0 - i}).encode()
  return [
      ("prompts", [prompt(0), prompt(1)], lambda p: predictions_io.read_prompts(p)),
      ("predictions (resume)", [json.dumps({**json.loads(prediction(0)), "qid": "q0"}).encode(),
                                json.dumps({**json.loads(prediction(1)), "qid": "q0"}).encode()],
       lambda p: predictions_io.completed_prompts(p, 2)),
      ("predictions (score)", [prediction(0), prediction(1)], lambda p: score.read_predictions(p, QUESTIONS)[0]),
      ("results", [result(0), result(1)], lambda p: score.read_results(p)),
      ("typed questions", question_lines, lambda p: [q.qid for q in typed.read_questions(p)]),
      ("metrics", [metrics(0), metrics(1)], lambda p: MetricsWriter(_as_metrics_file(p), primary=False).read()),
      ("ablation metrics", [metrics(0), metrics(1)], lambda p: ablation.last_validation(p)),
      ("babelcode", [generation(0), generation(1)], lambda p: prompts_module.babelcode_prompts(p)[0]),
  ]


def test_every_jsonl_reader_skips_a_torn_last_line_and_reads_the_rest(tmp_path, capsys):
  """storage.py's one rule: a last line without its newline that does not parse is a write cut short;
  every reader gives what it gives for the file without that line."""
  for name, lines, read in _readers(tmp_path):
    whole, torn = tmp_path / f"{len(name)}-whole.jsonl", tmp_path / f"{len(name)}-torn.jsonl"
    whole.write_bytes(b"\n".join(lines) + b"\n")
    torn.write_bytes(b"\n".join(lines) + b"\n" + lines[-1][:len(lines[-1]) // 2])
    expected = read(str(whole))
    assert expected, name
    got = read(str(torn))
    if name == "predictions (resume)":  # the resume reader also cuts the torn tail off the file
      assert torn.read_bytes() == whole.read_bytes(), name
    assert got == expected, name


def test_a_lone_surrogate_in_a_prompt_prefix_or_stop_is_refused_naming_the_line():
  # JSON's "\ud800" escape is valid JSON and gives Python a str no UTF-8 tokenizer can read.
  lines = [json.dumps({"qid": "a", "language": "Python", "prompt": "def f():\n"}).encode(),
           b'{"qid": "b", "language": "Python", "prompt": "def g():\\ud800\\n"}',
           b'{"qid": "c", "language": "Python", "prefix": "x = \\udfff", "suffix": ""}',
           b'{"qid": "d", "language": "Python", "prompt": "y", "stop": ["\\ud83d"]}']
  for bad, field in ((1, "prompt"), (2, "prefix"), (3, "stop")):
    path = _write([lines[0], lines[bad]])
    try:
      predictions_io.read_prompts(path)
    except ValueError as error:
      assert str(error).startswith(f"{path}:2: {field} holds a lone surrogate"), str(error)
    else:
      raise AssertionError(f"line {bad} was read")
    finally:
      os.unlink(path)


def test_gzip_magic_that_does_not_decompress_is_read_as_the_lines_it_is_unless_named_gz(tmp_path):
  """Found by the property test above: a predictions file starting with gzip's two magic bytes (no
  UTF-8 text does) but no gzip after them. Named .jsonl, it is read as lines, the first refused by
  line number and the rest loaded; named .gz, it is refused whole as a damaged gzip."""
  import storage
  good = json.dumps({"qid": "HumanEval/0", "language": "Python", "sample_id": 0, "code": "    return True\n"})
  plain = tmp_path / "predictions.jsonl"
  plain.write_bytes(b"\x1f\x8b\n" + good.encode() + b"\n")
  predictions, invalid = score.read_predictions(str(plain), QUESTIONS)
  assert [p.qid for p in predictions] == ["HumanEval/0"]
  assert len(invalid) == 1 and invalid[0].startswith(f"{plain}:1:"), invalid
  named_gz = tmp_path / "predictions.jsonl.gz"
  named_gz.write_bytes(plain.read_bytes())
  try:
    storage.read_data(str(named_gz))
  except ValueError as error:
    assert str(error).startswith(f"{named_gz}: gzip that cannot be read"), str(error)
  else:
    raise AssertionError("a damaged .gz was read")
