"""Test-wide setup: 8 fake CPU devices so sharding tests can build a (2, 2, 2) mesh in-process.

Must run before JAX initialises its backend; other tests simply use the first device.
"""

import os

os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8").strip()
os.environ.setdefault("JAX_PLATFORMS", "cpu")


def pytest_configure(config):
  """JAX's persistent compilation cache for this test process (a worker), in a scratch folder of its own:
  the in-process train.py, finetune and sample.py runs of different tests compile the same programs
  (a train step, a state's initialisation, a decode loop: measured 12 s per in-process train.py run
  without, 7 s with). Set here, not in the environment, so the entry points tests start as
  subprocesses compile as a user's would. A size limit turns on the cache's file lock, so that a
  thread's read never meets another's half-written entry."""
  import jax

  import scratch
  jax.config.update("jax_compilation_cache_dir", scratch.folder("jax-cache"))
  jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
  jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
  jax.config.update("jax_compilation_cache_max_size", 4 << 30)


def pytest_terminal_summary(terminalreporter):
  """Which languages' test programs this run compiled and executed (the others' toolchains are
  missing: `make toolchains` installs them)."""
  from sandbox import execution
  from sandbox.renderers import MODULES, NOT_EVALUATED, get

  ran, missing = [], []
  for name in MODULES:
    try:
      lacking = execution.missing(get(name).toolchain)
    except Exception as error:  # noqa: BLE001 - a broken renderer must not hide the summary
      lacking = [f"renderer does not load: {error}"]
    (missing.append(f"{name} ({', '.join(lacking)})") if lacking else ran.append(name))
  terminalreporter.write_line(f"scoring languages executed: {len(ran)} of {len(MODULES)}: {', '.join(ran)}")
  if missing:
    terminalreporter.write_line(f"scoring languages skipped (toolchain missing): {'; '.join(missing)}")
  terminalreporter.write_line(f"not evaluated: {', '.join(NOT_EVALUATED)} (no toolchain in any reachable registry)")


# The modules holding the longest tests (measured: `pytest --durations=0`, 40-200 s each in a clean
# clone; bench/suite_profile.py) start first, so that the two workers do not end with one of them alone
# on a long test while the other is idle (longest-first scheduling). Whole modules, in their own order,
# so that a module's fixtures are still built once per worker. Order only: every test still runs. One
# list for both tiers: `-m` deselects the other tier's tests after this ordering.
LONGEST_FIRST = ("test_gcs_emulator.py", "test_demo_quiet.py", "test_multihost.py", "test_sampler.py", "test_train.py",
                 "test_ablation.py", "test_beam_scoring.py", "test_export_hf.py", "test_finetune.py",
                 "test_mixtures.py", "test_corpus.py", "test_goodput.py", "test_preflight.py", "test_remote_paths.py")


def pytest_collection_modifyitems(items):
  def rank(item) -> int:
    module = item.nodeid.split("::")[0].split("/")[-1]
    return LONGEST_FIRST.index(module) if module in LONGEST_FIRST else len(LONGEST_FIRST)

  items.sort(key=rank)  # stable: each module's tests keep their order
