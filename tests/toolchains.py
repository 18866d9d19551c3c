"""The renderer of a language whose toolchain is installed, or the test skipped with what to install."""

import pytest

from sandbox import execution
from sandbox.renderers import get


def renderer_or_skip(language: str):
  renderer = get(language)
  lacking = execution.missing(renderer.toolchain)
  if lacking:
    pytest.skip(f"{language}: toolchain missing ({', '.join(lacking)}); run `make toolchains`")
  return renderer
