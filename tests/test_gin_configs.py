"""The gin files name things that exist: each mixture file selects a mixture codelm registers."""

import glob
import os

import gin
import pytest

from data import mixtures

GIN_DIR = os.path.join(os.path.dirname(__file__), "..", "gin_configs")


@pytest.mark.parametrize("kind", mixtures.MIXTURE_KINDS)
def test_each_mixture_file_selects_the_ul2_mixture_of_its_kind(kind):
  gin.clear_config()
  gin.parse_config_file(os.path.join(GIN_DIR, "mixtures", f"{kind}.gin"))
  assert gin.query_parameter("%MIXTURE_OR_TASK_NAME") == mixtures.mixture_name(kind) + "_ul2"
  gin.clear_config()


def test_every_mixture_file_is_a_known_kind():
  files = sorted(os.path.basename(p)[:-len(".gin")] for p in glob.glob(os.path.join(GIN_DIR, "mixtures", "*.gin")))
  assert files == sorted(mixtures.MIXTURE_KINDS)


@pytest.mark.parametrize("run_file", ["gin_configs/runs/demo.gin", "runs/demo.gin"])
def test_gin_files_and_their_includes_resolve_from_any_working_directory(run_file, tmp_path, monkeypatch):
  """The README's `--gin_file=gin_configs/...` and the files' `include 'gin_configs/...'` are found
  through the search paths (the repository root and gin_configs/), not the working directory."""
  import gin_flags
  import train  # noqa: F401 - registers train()'s configurables

  monkeypatch.chdir(tmp_path)
  extra = tmp_path / "mine"
  extra.mkdir()
  (extra / "short.gin").write_text("TRAIN_STEPS = 7\n")
  gin.clear_config()
  try:
    files, bindings = gin_flags.parse_flags([f"--gin_file={run_file}", "--gin_file=short.gin",
                                             f"--gin_search_paths={extra},{tmp_path}",
                                             "--gin.MODEL_DIR='/tmp/x'", "--gin.CORPUS_DIR='/tmp/c'"])
    gin_flags.parse_gin(files, bindings)
    assert gin.query_parameter("%MIXTURE_OR_TASK_NAME") == "code_unimax_2_ul2"  # demo.gin itself
    assert gin.query_parameter("%MODEL_SIZE") == "mini"  # through include 'gin_configs/models/mini.gin'
    assert gin.query_parameter("%TRAIN_STEPS") == 7  # a file found through --gin_search_paths
  finally:
    gin.clear_config()


@pytest.mark.parametrize("flag, expected", [(None, False), ("--gin.codelm.UL2Config.use_mode_tokens=True", True)])
def test_pretraining_takes_the_papers_objective_without_mode_tokens_unless_asked(flag, expected):
  """The paper names no mode tokens (Appendix D): pretrain.gin (so demo.gin) leaves them out; a flag
  puts UL2's back."""
  import gin_flags
  import train  # noqa: F401 - registers train()'s configurables
  from objectives.ul2 import UL2Config

  gin.clear_config()
  try:
    files, bindings = gin_flags.parse_flags(["--gin_file=gin_configs/runs/demo.gin", "--gin.MODEL_DIR='/tmp/x'",
                                             "--gin.CORPUS_DIR='/tmp/c'", *([flag] if flag else [])])
    gin_flags.parse_gin(files, bindings)
    assert gin.query_parameter("codelm.UL2Config.use_mode_tokens") is expected
    with gin.config_scope(None):
      config = gin.get_configurable("codelm.UL2Config")()
    assert isinstance(config, UL2Config) and config.use_mode_tokens is expected
    assert config.rates == (0.1, 0.1, 0.2, 0.6)
  finally:
    gin.clear_config()


@pytest.mark.parametrize("fim_file, rate", [(False, 0.0), (True, 0.5)])
def test_the_fim_file_turns_fill_in_the_middle_on_and_the_paper_s_run_leaves_it_off(fim_file, rate):
  import gin_flags
  import train  # noqa: F401 - registers train()'s configurables

  gin.clear_config()
  try:
    files, bindings = gin_flags.parse_flags(["--gin_file=gin_configs/runs/demo.gin",
                                             *(["--gin_file=gin_configs/objectives/fim.gin"] if fim_file else []),
                                             "--gin.MODEL_DIR='/tmp/x'", "--gin.CORPUS_DIR='/tmp/c'"])
    gin_flags.parse_gin(files, bindings)
    with gin.config_scope(None):
      config = gin.get_configurable("codelm.UL2Config")()
    assert (config.fim_rate, config.rates) == (rate, (0.1, 0.1, 0.2, 0.6))
    assert config.names[-2:] == (("fim_psm", "fim_spm") if fim_file else ("prefix_lm", "causal_lm"))
  finally:
    gin.clear_config()


@pytest.mark.parametrize("binding", ["fim_rate=1.5", "fim_rate=-0.1", "fim_rate='half'", "fim_rate=True",
                                     "fim_spm_rate=2.0"])
def test_a_bad_fim_rate_is_a_usage_error_naming_it(binding, tmp_path, capsys):
  """train.py answers exit 2 and one line, no traceback; True (an int to Python) is refused, not 1.0."""
  import train

  name = binding.split("=")[0]
  with pytest.raises(SystemExit) as exit_:
    train.main(["--gin_file=gin_configs/runs/demo.gin", "--gin_file=gin_configs/objectives/fim.gin",
                f"--gin.MODEL_DIR='{tmp_path / 'run'}'", f"--gin.CORPUS_DIR='{tmp_path}'",
                f"--gin.codelm.UL2Config.{binding}"])
  gin.clear_config()
  assert exit_.value.code == 2
  error = capsys.readouterr().err
  assert f"train.py: UL2Config.{name} must be a number within [0, 1], got " in error and "Traceback" not in error
  assert not (tmp_path / "run").exists()  # nothing written


def test_train_py_says_when_fill_in_the_middle_is_on():
  from objectives.ul2 import UL2Config
  from training.run import fim_line

  assert fim_line(UL2Config(fim_rate=0.5, fim_spm_rate=0.5)) == (
      "fill-in-the-middle on: 50% of the causal-LM examples (50% of those in SPM), 30% of all examples")
  assert fim_line(UL2Config()) is None and fim_line(None) is None
