"""Test-wide setup: 8 fake CPU devices so sharding tests can build a (2, 2, 2) mesh in-process.

Must run before JAX initialises its backend; other tests simply use the first device.
"""

import os

os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8").strip()
os.environ.setdefault("JAX_PLATFORMS", "cpu")
