"""Licence filter for the corpus: The Stack's permissive list, applied per repository and per directory.

What: a verdict (permissive / non_permissive / no_license) and the SPDX expression to store in each corpus
record, from (a) a shard's licence column (The Stack v1's `max_stars_repo_licenses` list, an SPDX expression,
The Stack v2's `license_type`), or (b) for source trees, the licences that ScanCode's licensedcode detects in
each directory's LICENSE / COPYING / README files, applied by directory prefix.

Why this way (Kocetkov et al. 2022, The Stack; bigcode-project/the-stack-v2
`the_stack/3_file_dataset/get_license_types.py`): a file is permissive only if every licence on its path is
on the permissive list; a file with no licence found is `no_license`, which BigCode keeps
(`preprocessing/filtering.py` drops only non_permissive): hence NO_LICENSE_POLICIES' default "keep".
SPDX expressions are parsed by `license-expression` (AboutCode), never by regexes. Plain and picklable: the
detector's index (413 MB on disk) is a per-process global loaded on first use, never held by an object.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import posixpath
import warnings
from typing import Any, Mapping, Sequence

import license_expression

PERMISSIVE, NON_PERMISSIVE, NO_LICENSE = "permissive", "non_permissive", "no_license"
NO_LICENSE_POLICIES = ("keep", "drop")  # The Stack keeps files with no licence found: "keep" is the default

# The Stack v1's permissive list (Kocetkov et al. 2022), from JetBrains/KStack `licenses.json` (KStack filters
# as The Stack v1.2 does: GitHub's licence, else go-license-detector's), the same ids in the same frequency
# order as dataunitylab/json-schema `permissive_licenses.json`: its 113 most frequent entries, the part readable
# here. The Stack v2's longer list (bigcode-data/license_list `permissive_licenses.txt`, which
# get_license_types.py fetches at run time) adds rarer ids. Copyleft, weak copyleft too, is not on it: no GPL,
# LGPL, AGPL, MPL, EPL, CDDL, CC-BY-SA.
PERMISSIVE_LICENSES: frozenset[str] = frozenset("""
  0BSD AAL ADSL AFL-1.1 AFL-2.0 AFL-2.1 AFL-3.0 AML Adobe-2006 Adobe-Glyph Apache-1.1 Apache-2.0
  Artistic-1.0 Artistic-1.0-Perl Artistic-1.0-cl8 Artistic-2.0 BSD-1-Clause BSD-2-Clause
  BSD-2-Clause-FreeBSD BSD-2-Clause-NetBSD BSD-2-Clause-Patent BSD-3-Clause BSD-3-Clause-Attribution
  BSD-3-Clause-Clear BSD-3-Clause-LBNL BSD-3-Clause-No-Nuclear-License-2014 BSD-3-Clause-No-Nuclear-Warranty
  BSD-3-Clause-Open-MPI BSD-4-Clause BSD-4-Clause-UC BSD-Source-Code BSL-1.0 Beerware BlueOak-1.0.0
  CC-BY-2.0 CC-BY-3.0 CC-BY-4.0 CC0-1.0 CNRI-Python CNRI-Python-GPL-Compatible Condor-1.1 Cube DOC ECL-2.0
  EFL-2.0 FSFAP FSFUL FTL Fair IBM-pibs ICU IJG ISC ImageMagick Info-ZIP Intel JasPer-2.0 LPL-1.02
  LPPL-1.3c Libpng Linux-OpenIB MIT MIT-0 MIT-CMU MIT-advertising MIT-feh MITNFA MS-PL MTLL MulanPSL-1.0
  NASA-1.3 NCSA NLPL Naumen Net-SNMP OLDAP-1.3 OLDAP-1.4 OLDAP-2.2.1 OLDAP-2.3 OLDAP-2.4 OLDAP-2.5
  OLDAP-2.6 OLDAP-2.7 OLDAP-2.8 OML OpenSSL PHP-3.0 PHP-3.01 PSF-2.0 PostgreSQL Python-2.0 RSA-MD Ruby
  TCL TCP-wrappers UPL-1.0 Unlicense Vim W3C W3C-20150513 WTFPL X11 XFree86-1.1 Xnet ZPL-2.1 Zend-2.0
  Zlib blessing bzip2-1.0.6 curl libpng-2.0 libtiff zlib-acknowledgement
""".split())

# ScanCode detections that are no licence and do not change the verdict (get_license_types.py's
# `non_license_whitelist`: CLAs, disclaimers, trademark notes).
_NOT_LICENSES = frozenset("LicenseRef-scancode-" + key for key in (
    "dco-1.1", "generic-cla", "google-cla", "jetty-ccla-1.1", "newton-king-cla", "generic-exception",
    "generic-export-compliance", "generic-tos", "generic-trademark", "warranty-disclaimer"))
# "See LICENSE" in a README: dropped when a permissive licence is also found on the path (as get_license_types.py).
_UNKNOWN_REFERENCE = "LicenseRef-scancode-unknown-license-reference"
_NO_ASSERTION = ("", "NOASSERTION", "NONE")


@dataclasses.dataclass(frozen=True)
class LicenseVerdict:
  verdict: str  # PERMISSIVE / NON_PERMISSIVE / NO_LICENSE
  license: str  # the normalised SPDX expression for the corpus record ("" when none found)
  reason: str  # one short human sentence


@functools.lru_cache(maxsize=1)
def _licensing() -> license_expression.Licensing:
  return license_expression.get_spdx_licensing()  # ~0.1 s: the SPDX ids and their aliases


@functools.lru_cache(maxsize=1)
def _permissive_keys() -> frozenset[str]:
  # The list under the names license-expression normalises to, too (deprecated BSD-2-Clause-FreeBSD parses
  # as BSD-2-Clause-Views, Net-SNMP as ScanCode's key), so that a listed id stays permissive after parsing.
  return PERMISSIVE_LICENSES | {str(_licensing().parse(key)) for key in PERMISSIVE_LICENSES}


def _blocking(node: Any) -> list[str]:
  """The ids that keep `node` (a parsed expression) from being permissive; [] when it is."""
  if isinstance(node, license_expression.LicenseWithExceptionSymbol):
    if node.exception_symbol.is_exception:  # a listed exception only adds permissions: judge the licence
      return _blocking(node.license_symbol)
    return _blocking(node.license_symbol) + _blocking(node.exception_symbol)  # "MIT WITH GPL-3.0": both bind
  if isinstance(node, license_expression.LicenseSymbol):
    return [] if node.key in _permissive_keys() else [node.key]
  parts = [_blocking(arg) for arg in node.args]
  if isinstance(node, _licensing().OR):  # the user may choose any one alternative
    return [] if any(not p for p in parts) else [key for p in parts for key in p]
  return [key for p in parts for key in p]  # AND: every operand must be permissive


def _why_not(key: str) -> str:
  if key.startswith("LicenseRef-"):
    return f"{key} is a custom LicenseRef- id, not on the permissive list"
  if key not in _licensing().known_symbols:
    return f"{key!r} is not a known SPDX license id"
  return f"{key} is not on the permissive list"


def verdict_of_expression(expression: str | None) -> LicenseVerdict:
  """The verdict for one SPDX expression; never raises (unparseable text is non_permissive)."""
  text = (expression or "").strip()
  # NOASSERTION asserts nothing: no_license (get_license_types.py calls GitHub's NOASSERTION, "a licence file
  # GitHub could not name", non_permissive when ScanCode finds nothing either; that needs the tree).
  if text.upper() in _NO_ASSERTION:
    return LicenseVerdict(NO_LICENSE, "", f"no license asserted ({text or 'empty'})")
  try:
    parsed = _licensing().parse(text)
  except license_expression.ExpressionError as error:  # ExpressionParseError is one too
    return LicenseVerdict(NON_PERMISSIVE, text, f"unparseable SPDX expression: {error}")
  normalised = str(parsed)
  blocking = _blocking(parsed)
  if blocking:
    return LicenseVerdict(NON_PERMISSIVE, normalised, "; ".join(_why_not(key) for key in dict.fromkeys(blocking)))
  if isinstance(parsed, _licensing().OR):
    return LicenseVerdict(PERMISSIVE, normalised, f"{normalised}: a permissive alternative may be chosen")
  return LicenseVerdict(PERMISSIVE, normalised, f"{normalised} is on the permissive list")


def _verdict_of_all(expressions: Sequence[str], what: str) -> LicenseVerdict:
  """All of `expressions` at once (AND): permissive only if each is; the licence is their sorted AND."""
  verdicts = [verdict_of_expression(e) for e in dict.fromkeys(expressions)]
  found = sorted({v.license for v in verdicts if v.verdict != NO_LICENSE})
  if not found:
    return LicenseVerdict(NO_LICENSE, "", f"no license found {what}")
  license = " AND ".join(f"({e})" if " " in e else e for e in found)
  refused = [v.reason for v in verdicts if v.verdict == NON_PERMISSIVE]
  if refused:
    return LicenseVerdict(NON_PERMISSIVE, license, "; ".join(dict.fromkeys(refused)))
  return LicenseVerdict(PERMISSIVE, license, f"every license {what} is permissive")


def verdict_of_column(value: Any) -> LicenseVerdict:
  """The verdict for a shard's licence column value; never raises.

  A list (The Stack v1's `max_stars_repo_licenses`: every licence found in the repository) is permissive
  only if every entry is, as get_license_types.py combines a repository's detected licences: MIT and
  GPL-3.0 files side by side make the repository non_permissive. A JSON list string is read as that list;
  The Stack v2's `license_type` values are taken as given; any other string is one SPDX expression.
  """
  if value is None:
    return LicenseVerdict(NO_LICENSE, "", "no license column value")
  if isinstance(value, str):
    text = value.strip()
    if text in (PERMISSIVE, NON_PERMISSIVE, NO_LICENSE):
      return LicenseVerdict(text, "", f"The Stack v2 license_type {text!r}, taken as given")
    if not text.startswith("["):
      return verdict_of_expression(text)
    try:
      value = json.loads(text)
    except ValueError as error:
      return LicenseVerdict(NON_PERMISSIVE, text, f"unreadable JSON license list: {error}")
  if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
    return LicenseVerdict(NON_PERMISSIVE, "", f"unsupported license column value {value!r:.80}")
  return _verdict_of_all(value, "in the license column")


# ScanCode's legal-file words (summarycode/classify.py LEGAL_STARTS_ENDS) and its README rule: a name whose
# stem starts or ends with one. The suffix must be a text one or name a licence (COPYING.LESSER, LICENSE.MIT),
# so that source files such as licenses.py or readme_test.go are not read as licences.
_LEGAL_WORDS = ("copying", "copyright", "copyrights", "copyleft", "notice", "license", "licenses", "licence",
                "licences", "licensing", "licencing", "legal", "eula", "agreement", "patent", "patents",
                "readme")
_TEXT_SUFFIXES = ("", "txt", "md", "markdown", "rst", "text", "adoc", "asciidoc", "org", "rdoc", "textile",
                  "html", "htm", "pod")
_LICENSE_SUFFIXES = ("mit", "bsd", "apache", "gpl", "lgpl", "agpl", "mpl", "epl", "lesser", "lib", "isc",
                     "zlib", "boost", "psf", "python", "artistic", "unlicense", "wtfpl", "x11", "ofl")


def is_license_file(name: str) -> bool:
  """Whether a file NAME (not a path) may hold its directory's licence: LICENSE, COPYING, README.md ..."""
  stem, _, rest = name.lower().partition(".")
  if not stem.startswith(_LEGAL_WORDS) and not stem.endswith(_LEGAL_WORDS):
    return False
  text_suffix = rest.rpartition(".")[2] in _TEXT_SUFFIXES
  return text_suffix or (stem in _LEGAL_WORDS and rest.startswith(_LICENSE_SUFFIXES))


@functools.lru_cache(maxsize=1)
def _scancode() -> tuple[Any, Any]:
  """ScanCode's licence index and detection function, loaded once per process.

  Measured (32.5.0, one core): 7.7 s to unpickle the index shipped in the wheel, 1.4 GB resident; then
  0.2-0.5 s per licence file. Nothing is built or fetched (licensedcode/data/cache/license_index).
  """
  # Deferred so that importing this module stays cheap: licensedcode takes 0.7 s and needs libmagic, whose
  # Debian build (libmagic1) typecode finds and warns about; it detects file types alike.
  with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message="System libmagic found")
    from licensedcode import cache
    from licensedcode.detection import detect_licenses as scancode_detect
  return cache.get_index(), scancode_detect


def detect_licenses(text: str) -> tuple[str, ...]:
  """SPDX expressions (mostly single ids) ScanCode detects in one licence/README text, sorted, unique."""
  if not text.strip():
    return ()
  index, scancode_detect = _scancode()
  detections = [d for d in scancode_detect(index=index, query_string=text) if d.license_expression_spdx]
  if any(_is_full_text(m) for d in detections for m in d.matches):
    # Beside a licence's text, a few words ("GPL-compatible", "released under the GPL" in CPython's LICENSE
    # history table) mention another licence, they do not grant it; a notice (Apache's, 70 tokens) does.
    detections = [d for d in detections if any(m.len() >= _MENTION_TOKENS for m in d.matches)]
  found = (_without_non_licenses(d.license_expression_spdx) for d in detections)
  return tuple(sorted({expression for expression in found if expression}))


_FULL_TEXT_TOKENS = 50  # matched tokens of a licence text that make it the file's licence (MIT's text: ~160)
_MENTION_TOKENS = 10  # fewer matched tokens, beside a full text: a mention


def _is_full_text(match: Any) -> bool:
  return bool(match.rule.is_license_text) and match.len() >= _FULL_TEXT_TOKENS


def _without_non_licenses(expression: str) -> str:
  """`expression` less the operands of its ANDs that license nothing (_NOT_LICENSES: a CLA, a disclaimer;
  an unknown-license-reference beside a named licence).

  ScanCode joins what one passage mentions: tokio's README gives "Apache-2.0 WITH LLVM-exception AND
  LicenseRef-scancode-generic-cla", its contributing section, which must not make the crate non-permissive.
  """
  try:
    parsed = _licensing().parse(expression)
  except license_expression.ExpressionError:
    return expression  # verdict_of_expression says why

  def keep(node: Any) -> Any:
    if isinstance(node, license_expression.LicenseSymbol):
      return None if node.key in _NOT_LICENSES else node
    if isinstance(node, _licensing().AND):
      kept = [k for k in (keep(arg) for arg in node.args) if k is not None]
      # "See LICENSE" ANDed to the licence it points at (npm's "Artistic-2.0 AND ...unknown-license-reference").
      named = [k for k in kept if not (isinstance(k, license_expression.LicenseSymbol) and k.key == _UNKNOWN_REFERENCE)]
      kept = named or kept
      return None if not kept else kept[0] if len(kept) == 1 else _licensing().AND(*kept)
    return node

  kept = keep(parsed)
  return "" if kept is None else str(kept)


def _posix_dir(path: str) -> str:
  """'' for the source root, else 'label/sub' (no leading ./, no trailing /)."""
  normal = posixpath.normpath(path) if path else "."
  return "" if normal == "." else normal.strip("/")


class TreeLicenses:
  """Licences found per directory of a source tree, applied by directory prefix as The Stack v2 does.

  A file's licences are those found in its own directory and every ancestor up to the source root: any
  non-permissive one makes it non_permissive, none makes it no_license.
  """

  def __init__(self, found: Mapping[str, Sequence[str]]):
    merged: dict[str, set[str]] = {}
    for directory, ids in found.items():  # "a", "./a" and "a/" are one directory
      merged.setdefault(_posix_dir(directory), set()).update(ids)
    self._found = {d: tuple(sorted(ids)) for d, ids in merged.items() if ids}

  def verdict(self, relpath: str) -> LicenseVerdict:
    parts = _posix_dir(posixpath.dirname(relpath)).split("/")
    prefixes = [""] + ["/".join(parts[:i]) for i in range(1, len(parts) + 1) if parts[0]]
    ids = {i for d in prefixes for i in self._found.get(d, ()) if i not in _NOT_LICENSES}
    if any(verdict_of_expression(i).verdict == PERMISSIVE for i in ids):
      ids.discard(_UNKNOWN_REFERENCE)
    return _verdict_of_all(sorted(ids), "on the path")
