"""Test-wide setup: how many fake CPU devices this test process has, chosen before JAX initialises
its backend.

CODELM_TEST_DEVICES (default 8) sets the count. With 8, the sharding tests build a (2, 2, 2) mesh
in-process. `make test` runs the suite in two passes: everything on one device, as a user's CPU run
is laid out, and then the tests marked `multidevice` on 8. On 2 cores, training's default data-parallel
layout over 8 fake devices made each in-process run slower: test_train's demo run took 41-44 s on 8
devices and 23-25 s on one.
"""
import os

_DEVICES_SETTING = os.environ.get("CODELM_TEST_DEVICES", "8")
DEVICES = int(_DEVICES_SETTING) if _DEVICES_SETTING.isdigit() and int(_DEVICES_SETTING) > 0 else 8
os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + f" --xla_force_host_platform_device_count={DEVICES}").strip()
os.environ.setdefault("JAX_PLATFORMS", "cpu")


def pytest_configure(config):
  """JAX's persistent compilation cache for this test process (a worker), in a scratch folder of its own:
  the in-process train.py, finetune and sample.py runs of different tests compile the same programs
  (a train step, a state's initialisation, a decode loop: measured 12 s per in-process train.py run
  without, 7 s with). Set here, not in the environment, so the entry points tests start as
  subprocesses compile as a user's would. A size limit turns on the cache's file lock, so that a
  thread's read never meets another's half-written entry."""
  if str(DEVICES) != _DEVICES_SETTING:
    import pytest

    raise pytest.UsageError(f"CODELM_TEST_DEVICES={_DEVICES_SETTING!r}: expected a positive whole number of devices")
  import jax

  import scratch
  jax.config.update("jax_compilation_cache_dir", scratch.folder("jax-cache"))
  jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
  jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
  jax.config.update("jax_compilation_cache_max_size", 4 << 30)


def pytest_runtest_setup(item):
  """A test marked multidevice needs the 8 fake devices: with fewer it would fail on its mesh, or test
  less than it says, so it stops here with the reason."""
  if item.get_closest_marker("multidevice") and DEVICES < 8:
    import pytest

    pytest.fail(f"{item.nodeid} is marked multidevice and needs 8 devices; this process has {DEVICES} "
                f"(CODELM_TEST_DEVICES={DEVICES}): run it without CODELM_TEST_DEVICES, or deselect it with "
                f"-m 'not multidevice'", pytrace=False)


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
