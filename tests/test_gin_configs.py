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
