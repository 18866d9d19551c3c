"""Just enough lexing of C-family completions to decide whether one may share a build.

Batched compilation (sandbox/batching.py) puts many completions into one build. A completion may
join only if it stays inside its own function (or class) and uses nothing that acts beyond it
(preprocessor lines, attributes, inline assembly, external linkage...): each renderer's `batchable`
names what it refuses. To check that, comments and string and character literals are blanked out
(`code_only`) and the brackets counted (`closes_body`).

Errors in this lexer must only ever refuse: anything it is not sure of (an unterminated literal, a
line splice, a raw string, a character it does not handle) makes it answer None, and the completion
is compiled on its own, which is always right.
"""

from __future__ import annotations

import re


def code_only(text: str, *, nested_comments: bool = False, char_literal=None) -> str | None:
  """`text` with every comment and string/character literal replaced by one space; None when the
  text holds anything this scanner does not read exactly as a compiler would: a backslash-newline
  (line splice), a NUL, an unterminated comment or literal.

  `char_literal(text, i)` says whether the quote at text[i] starts a character literal (Rust's
  lifetimes and C++'s digit separators also use "'"); by default every "'" does.
  """
  if "\\\n" in text or "\\\r" in text or "\0" in text:
    return None
  out: list[str] = []
  i, n = 0, len(text)
  while i < n:
    c = text[i]
    if text.startswith("//", i):
      end = text.find("\n", i)
      i = n if end < 0 else end
      out.append(" ")
    elif text.startswith("/*", i):
      depth, j = 1, i + 2
      while depth and j < n:
        if nested_comments and text.startswith("/*", j):
          depth, j = depth + 1, j + 2
        elif text.startswith("*/", j):
          depth, j = depth - 1, j + 2
        else:
          j += 1
      if depth:
        return None
      i = j
      out.append(" ")
    elif c == '"' or (c == "'" and (char_literal is None or char_literal(text, i))):
      j = i + 1
      while j < n and text[j] != c:
        if text[j] == "\n":
          return None
        j += 2 if text[j] == "\\" else 1
      if j >= n:
        return None
      i = j + 1
      out.append(" ")
    else:
      out.append(c)
      i += 1
  return "".join(out)


def closes_body(code: str, depth: int = 1) -> bool:
  """Whether `code` (comments and literals blanked) closes the `depth` braces open before it exactly
  at its last character that is not blank, never closing them sooner, with (), [] balanced: so the
  completion is the rest of one function (or class) and nothing after it."""
  parens = 0
  stripped = code.rstrip()
  for i, c in enumerate(stripped):
    if c == "{":
      depth += 1
    elif c == "}":
      depth -= 1
      if depth == 0 and i != len(stripped) - 1:
        return False
    elif c in "([":
      parens += 1
    elif c in ")]":
      parens -= 1
      if parens < 0:
        return False
  return depth == 0 and parens == 0


def has_word(code: str, words) -> bool:
  """Whether any of `words` occurs in `code` as a whole identifier."""
  return re.search(r"(?<![\w$])(?:" + "|".join(map(re.escape, words)) + r")(?![\w$])", code) is not None
