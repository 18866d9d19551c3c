"""String literals for the renderers: one escaping loop, each language's rules passed in as tables.

Every renderer writes a test case's strings as literals in plain ASCII (a program's source encoding is
then never in question): the language's special characters backslash-escaped, its named control
escapes, printable ASCII as is, and everything else through the language's own numeric escape, per
code point or per UTF-8 byte (C++ and Lua, whose strings are bytes).
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable, Mapping

# \n, \t, \r: the named escapes most languages share.
NEWLINE_TAB_RETURN = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}


def escape(text: str | bytes, other: Callable[[int], str], specials: str = '"\\',
           named: Mapping[str, str] = {}) -> str:
  """A literal's body: each character of `text` (each byte, for bytes) in `specials` after a
  backslash, in `named` as its escape, printable ASCII (0x20-0x7e) as is, any other through
  `other(code point or byte)`."""
  out = []
  for code in text if isinstance(text, bytes) else map(ord, text):
    char = chr(code)
    if char in specials:
      out.append("\\" + char)
    elif char in named:
      out.append(named[char])
    elif 0x20 <= code < 0x7f:
      out.append(char)
    else:
      out.append(other(code))
  return "".join(out)


def single_literal_keeps(value: float) -> bool:
  """Whether `<repr>f`, a single-precision literal of a double, is one javac and mcs take and keep:
  they refuse one that overflows and make 0 of one too small (Java's and C#'s declared floats)."""
  single = struct.unpack("f", struct.pack("f", value))[0]  # rounded to the nearest float (inf past it)
  return value == 0 or (single != 0 and math.isfinite(single))
