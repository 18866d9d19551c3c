"""Whether prompts fit a model's context: the one place that computes a prompt's room and cuts it.

A prompt is `[code]` + its tokens and must leave `max_decode_length` positions of the context for the
completion. One that does not fit is refused by default (PromptsTooLong, naming how many, the longest
and the settings that would fit): a left-truncated prompt loses its instruction and signature, and a
score over such prompts silently means something else (issue 40: pass@1 0.030 instead of 0.052).
Truncation (keeping the last `room` tokens, as documents end at the completion) is the caller's
explicit choice, and every truncated prompt is marked. An infilling prompt (`Infill`: a prefix and a
suffix, framed by objectives/fim.py) is cut around the middle instead, as an editor windows a file
around its cursor: the end of the prefix and the start of the suffix are kept, half the room each
where both are long, the frame whole.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence, Union

from objectives import fim


@dataclasses.dataclass(frozen=True)
class Infill:
  """An infilling prompt: the model writes what goes between `prefix` and `suffix` (the middle)."""

  prefix: str
  suffix: str
  format: str = fim.PSM  # objectives/fim.py: psm or spm


Prompt = Union[str, Infill]


def prompt_room(context: int, max_decode_length: int) -> int:
  """Tokens a prompt ([code] included) may have in a context of `context` with `max_decode_length` new."""
  return context - max_decode_length


@dataclasses.dataclass(frozen=True)
class EncodedPrompts:
  """Prompts as the sampler feeds them: ids [prompts][<= room], each prompt's full length before any
  cut, and the room they were cut to (or checked against)."""

  ids: tuple[tuple[int, ...], ...]
  lengths: tuple[int, ...]  # [code] + tokens, before truncation
  context: int
  max_decode_length: int
  infilling: tuple[bool, ...] = ()  # which prompts are `Infill`s (cut around the middle); () for none

  @property
  def room(self) -> int:
    return prompt_room(self.context, self.max_decode_length)

  @property
  def truncated(self) -> tuple[bool, ...]:
    return tuple(n > self.room for n in self.lengths)

  @property
  def num_truncated(self) -> int:
    return sum(self.truncated)

  @property
  def longest(self) -> int:
    """The index of the longest prompt."""
    return max(range(len(self.lengths)), key=self.lengths.__getitem__)


def encode_prompts(vocabulary, begin_id: int, prompts: Sequence[Prompt], context: int,
                   max_decode_length: int, length_flag: str = "max_decode_length") -> EncodedPrompts:
  """[code] + tokens of each prompt (an `Infill` framed for fill-in-the-middle); one longer than the
  room keeps its last `room` tokens (and is counted in `truncated`). Whether that is allowed is the
  caller's: see `check_fit`. A ValueError naming `length_flag` when `max_decode_length` leaves no room
  at all, or naming the vocabulary's file when an `Infill` meets a vocabulary without FIM sentinels."""
  room = prompt_room(context, max_decode_length)
  if room < 1:
    raise ValueError(f"{length_flag} {max_decode_length} leaves no room for a prompt in the model's context "
                     f"of {context} tokens")

  # A vocabulary without the FIM sentinels is refused before any encoding.
  ids = fim.FimIds.of(vocabulary) if any(isinstance(p, Infill) for p in prompts) else None
  full, kept = [], []
  for prompt in prompts:
    if isinstance(prompt, Infill):
      prefix, suffix = [int(i) for i in vocabulary.encode(prompt.prefix)], [int(i) for i in vocabulary.encode(prompt.suffix)]
      full.append([int(begin_id)] + fim.frame(prefix, suffix, [], ids, prompt.format))
      prefix, suffix = _window(prefix, suffix, room - (len(full[-1]) - len(prefix) - len(suffix)), length_flag)
      kept.append(tuple([int(begin_id)] + fim.frame(prefix, suffix, [], ids, prompt.format)))
    else:
      full.append([int(begin_id)] + [int(i) for i in vocabulary.encode(prompt)])
      kept.append(tuple(full[-1][-room:]))
  infilling = tuple(isinstance(p, Infill) for p in prompts)
  return EncodedPrompts(ids=tuple(kept), lengths=tuple(len(ids) for ids in full), context=context,
                        max_decode_length=max_decode_length, infilling=infilling if any(infilling) else ())


def _window(prefix: list[int], suffix: list[int], budget: int, length_flag: str) -> tuple[list[int], list[int]]:
  """The end of `prefix` and the start of `suffix` in `budget` tokens: half each where both are longer,
  what one leaves to the other."""
  if budget < 0:
    raise ValueError(f"{length_flag} leaves no room for an infilling prompt's [code] and FIM sentinels")
  if len(prefix) + len(suffix) <= budget:
    return prefix, suffix
  keep_suffix = min(len(suffix), max(budget // 2, budget - len(prefix)))
  keep_prefix = budget - keep_suffix
  return (prefix[len(prefix) - keep_prefix:] if keep_prefix else []), suffix[:keep_suffix]


class PromptsTooLong(ValueError):
  """Some prompts do not fit and truncation was not asked for; `encoded` says which."""

  def __init__(self, message: str, encoded: EncodedPrompts):
    super().__init__(message)
    self.encoded = encoded


def too_long_message(encoded: EncodedPrompts, names: Sequence[str] | None = None,
                     length_flag: str = "max_decode_length", truncate_flag: str = "truncate=True") -> str:
  """What does not fit and what would: the count, the longest (by `names`, default its index), the
  largest max_decode_length that fits every prompt, the context they need, and the way to truncate."""
  longest = encoded.longest
  name = names[longest] if names is not None else f"prompt {longest}"
  most = encoded.lengths[longest]
  largest = encoded.context - most
  fits = (f"{length_flag} {largest} or less fits every prompt" if largest >= 1 else
          f"no {length_flag} fits the longest in this context")
  return (f"{encoded.num_truncated} of {len(encoded.lengths)} prompts do not fit in the model's context of "
          f"{encoded.context} tokens with {length_flag} {encoded.max_decode_length} (room for {encoded.room} "
          f"prompt tokens, [code] included); the longest, {name}, has {most} tokens. {fits[0].upper() + fits[1:]}, "
          f"or a model with a context of {most + encoded.max_decode_length} tokens; or pass {truncate_flag} to "
          f"keep the last {encoded.room} tokens of each prompt too long (its instruction and signature may be "
          f"lost, which changes what a score means)"
          + ("; an infilling prompt keeps the end of its prefix and the start of its suffix, its frame whole"
             if any(cut and infill for cut, infill in zip(encoded.truncated, encoded.infilling)) else ""))


def check_fit(encoded: EncodedPrompts, truncate: bool, names: Sequence[str] | None = None, **flags: str) -> None:
  """Raises PromptsTooLong (with too_long_message) when a prompt does not fit and `truncate` is False."""
  if encoded.num_truncated and not truncate:
    raise PromptsTooLong(too_long_message(encoded, names, **flags), encoded)
