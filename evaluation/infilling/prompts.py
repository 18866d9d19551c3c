"""sample.py's infilling prompts: one record per problem with `qid`, `language`, `prefix` and `suffix`.

The sampler writes the middle between them (its predictions' `code`). No `stop` is given: an
infilling prompt's middle ends where the model ends it ([eod]), as the FIM paper samples its
benchmarks; a left-to-right stop such as "\ndef " could cut a correct middle (a random span may hold
the next function's start). Nothing else travels in the prompt: the scorer finds the problem by qid.
"""

from __future__ import annotations

from collections.abc import Sequence

from evaluation.infilling import exact, problems
from languages import BY_NAME


def humaneval_prompts(subsets: Sequence[problems.Subset], limit: int | None = None) -> list[dict]:
  """The prompts of `subsets`, the first `limit` problems of each (all of them: None)."""
  return [{"qid": p.task_id, "language": "Python", "prefix": p.prefix, "suffix": p.suffix}
          for subset in subsets for p in problems.load(subset)[:limit]]


def santacoder_fim_prompts(path: str, limit: int | None = None) -> list[dict]:
  """The prompts of a SantaCoder-FIM-shaped file (exact.read_problems), its first `limit` records."""
  found = list(exact.read_problems(path).values())[:limit]
  return [{"qid": p.qid, "language": BY_NAME[p.language].display_name, "prefix": p.prefix, "suffix": p.suffix}
          for p in found]
