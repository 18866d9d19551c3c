"""PII redaction (optional, off by default): emails, IP addresses and secret keys, BigCode's regex pipeline.

Sources: bigcode-dataset pii/ (utils/emails_ip_addresses_detection.py, utils/keys_detection.py,
pii_redaction.py, ner/pii_redaction/replacements.json), itself adapted from BigScience's PII code.

- email: BigCode's regex, in `re`: a local part and an "@" and a domain ending in "." + a letter + one or more
  word characters, bounded by whitespace, `@,?!;:)('".<>`, a CJK ideograph or the text's ends. `@property`,
  `user@localhost` are not emails (a `q@k.transpose(...)` matrix product is, in BigCode's regex too).
- ip_address: BigCode's IPv4 / IPv6 regexes, bounded the same way (no `)` after). Left alone, as there: a
  candidate without a digit; date-shaped (dd.mm.yy.x, BigCode's year patterns); a version x.x.x.x of single
  digits unless "dns" or "server" is within 100 characters; not an address to `ipaddress`; private, loopback,
  link-local or documentation (`is_private`); a popular public DNS resolver.
- key: the 18 detect-secrets plugins BigCode enables (not Keyword, BasicAuth, PrivateKey) and its 4 filters,
  on each line like its scan_file, but in memory. Every occurrence of a found value goes. Skipped as there:
  a 32/40/64-character value after "sha", "md5", "hash" or "byte" on its line, and all keys of a file that
  says "sha" or "hash" more than int(0.02 * newlines) times. Not ported: BigCode's gibberish-detector check
  (it needs a model trained on a text corpus). Added: a PEM private key block, BEGIN to END, is one key
  (detect-secrets' PrivateKeyDetector, disabled by BigCode, flags only the BEGIN line).

Replacements (BigCode's replacements.json, StarCoder's paper): <EMAIL>, <KEY>, and for an IP address one of 5
synthetic private addresses of its version, picked by crc32 of the address rather than at random, so that a
rerun gives the same corpus and one address the same stand-in everywhere.
"""

from __future__ import annotations

import collections
import ipaddress
import math
import re
import zlib

from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
from detect_secrets.filters import heuristic
from detect_secrets.plugins.high_entropy_strings import HighEntropyStringsPlugin

PII_KINDS = ("email", "ip_address", "key")
EMAIL, KEY = "<EMAIL>", "<KEY>"
SYNTHETIC_IPS = {4: ("172.16.31.10", "172.16.58.3", "172.16.17.32", "192.168.127.12", "192.168.3.11"),
                 6: ("fd00:c2b6:b24b:be67:2827:688d:e6a1:6a3b", "fd00:a516:7c1b:17cd:6d81:2137:bd2a:2c5b",
                     "fc00:e968:6179::de52:7100", "fc00:db20:35b:7399::5", "fdf8:f53e:61e4::18")}
POPULAR_DNS_SERVERS = frozenset((
    "8.8.8.8 8.8.4.4 1.1.1.1 1.0.0.1 76.76.19.19 76.223.122.150 9.9.9.9 149.112.112.112 208.67.222.222 "
    "208.67.220.220 8.26.56.26 8.20.247.20 94.140.14.14 94.140.15.15").split())

_HAN = "\u2e80-\u2fdf\u3005\u3007\u3021-\u3029\u3038-\u303b\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f"
# `(?<![^S])`: at the text's start or after a character of S (re's look-behind needs a fixed width).
_EMAIL = re.compile(rf"""(?<![^\b\s@,?!;:)('".<{_HAN}])[^\b\s@?!;,:)('"<]+@[^\b\s@!?;,/]*[^\b\s@?!;,/:)('">.]"""
                    rf"""\.[^\W\d_]\w+(?![^\b\s@,?!;:)('".>{_HAN}])""")
_OCTET = r"(?:25[0-5]|2[0-4][0-9]|[01]?[0-9][0-9]?)"
_V4 = rf"{_OCTET}(?:\.{_OCTET}){{3}}"
_V4_TAIL = r"(?:(?:25[0-5]|(?:2[0-4]|1?[0-9])?[0-9])\.){3}(?:25[0-5]|(?:2[0-4]|1?[0-9])?[0-9])"
_H = "[0-9a-fA-F]{1,4}"
_V6 = "|".join((  # BigCode's alternatives, in its order
    f"(?:{_H}:){{7}}{_H}", f"(?:{_H}:){{1,7}}:",
    *(f"(?:{_H}:){{1,{k}}}(?::{_H}){{1,{7 - k}}}" for k in range(6, 0, -1)),
    f":(?:(?::{_H}){{1,7}}|:)", "fe80:(?::[0-9a-fA-F]{0,4}){0,4}%[0-9a-zA-Z]+",
    f"::(?:ffff(?::0{{1,4}})?:)?{_V4_TAIL}", f"(?:{_H}:){{1,4}}:{_V4_TAIL}"))
_IP = re.compile(rf"""(?<![^\b\s@?,!;:'")(.{_HAN}])(?:{_V4}|{_V6})(?![^\s@,?!;:'"(.{_HAN}])""")
# Of BigCode's five year patterns only "dd.mm.yy" (then a separator) can match the start of an address.
_DATE_LIKE = re.compile(r"[0-3][0-9]\.[0-3][0-9]\.[0-9]{2}\.")
_PEM_PRIVATE_KEY = re.compile(
    r"-----BEGIN ((?:[A-Z0-9]+ )*)PRIVATE KEY((?: BLOCK)?)-----.*?-----END \1PRIVATE KEY\2-----", re.DOTALL)
_PLUGIN_NAMES = (  # BigCode's keys_detection.py, in its order
    "ArtifactoryDetector AWSKeyDetector Base64HighEntropyString HexHighEntropyString AzureStorageKeyDetector "
    "CloudantDetector DiscordBotTokenDetector GitHubTokenDetector IbmCloudIamDetector IbmCosHmacDetector "
    "JwtTokenDetector MailchimpDetector NpmDetector SendGridDetector SlackDetector SoftlayerDetector "
    "StripeDetector TwilioKeyDetector").split()
_PLUGIN_CLASSES = {cls.__name__: cls for cls in get_mapping_from_secret_type_to_class().values()}
_PLUGINS = tuple(_PLUGIN_CLASSES[name]() for name in _PLUGIN_NAMES)  # default entropy limits: 4.5 base64, 3.0 hex
# Runs of an address's characters that hold a digit, found from their first character only (linear).
_IP_RUN = re.compile(r"(?<![0-9A-Za-z:.%])[A-Za-z:.%]*[0-9][0-9A-Za-z:.%]*")
_LINE_BREAK = re.compile(r"\r\n?|\n")  # universal newlines: the lines BigCode's scan_file read


def _line_finders(plugin) -> tuple[re.Pattern, ...]:
  """Patterns whose matches over the whole text span every line where `plugin` finds something, so that only
  those lines are scanned (0.7 -> 7 MB/s): its own regexes (a line's match is one of the text at the same place:
  where the line ends they see a line break, which their `\\s`, `(?<=\\W)` or optional groups accept; none has
  `$`), or for an entropy plugin a quoted run of its characters, more than 2 ** limit of them (as many
  distinct ones as its entropy needs)."""
  if isinstance(plugin, HighEntropyStringsPlugin):
    least = math.floor(2 ** plugin.entropy_limit) + 1
    return (re.compile(rf"""['"][{re.escape(plugin.charset)}]{{{least},}}['"]"""),)
  return tuple(plugin.denylist)


# Plugins whose own regexes (look-behinds, alternatives, IGNORECASE) scan at 5-130 MB/s: each of their matches
# holds one of these words (True: in the lowercased text, as the plugin ignores case), found at 60-900 MB/s.
_WORD_FINDERS = {"ArtifactoryDetector": ("AKC|AP", False), "MailchimpDetector": ("-us", False),
                 "StripeDetector": ("k_live_", False), "SlackDetector": ("xox|hooks.slack.com", True),
                 "CloudantDetector": ("key|pw|pass|token|cloudant", True), "IbmCosHmacDetector": ("secret", True),
                 "IbmCloudIamDetector": ("key|pw|pass|token", True),
                 "SoftlayerDetector": ("key|pw|pass|token|softlayer", True)}
_SCANS = tuple((plugin, _line_finders(plugin), _WORD_FINDERS.get(type(plugin).__name__)) for plugin in _PLUGINS)
_FOLDS_TO_ASCII = "\u0130\u0131\u017f\u212a"  # İ ı ſ K: IGNORECASE matches them to i, i, s, k; str.lower() does not
# detect-secrets 1.5.0's GitHubTokenDetector captures only a token's prefix ("ghp"): take its whole matches.
_WHOLE_MATCHES = {"GitHubTokenDetector": re.compile(r"(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9_]{36}")}
_TOKEN_WITH_AT = re.compile(r"(?<![^\s\b])[^\s\b]*@[^\s\b]*")  # an email lies in one: no space in it


def _ip_replacement(text: str, match: re.Match) -> str | None:
  """The stand-in for a found IP address, or None where BigCode leaves the candidate alone."""
  value = match.group()
  if not any(c.isdigit() for c in value) or _DATE_LIKE.match(value):
    return None
  if value.count(".") == 3 and len(value) == 7:  # x.x.x.x: a version, unless the context says otherwise
    context = text[max(0, match.start() - 100):match.end() + 100].lower()
    if "dns" not in context and "server" not in context:
      return None
  try:
    address = ipaddress.ip_address(value)
  except ValueError:
    return None
  if address.is_private or value in POPULAR_DNS_SERVERS:
    return None
  choices = SYNTHETIC_IPS[address.version]
  return choices[zlib.crc32(value.encode()) % len(choices)]


def _secret_values(text: str) -> set[str]:
  """The values detect-secrets finds, line by line, through BigCode's filters."""
  lower = text.lower()
  if len(lower) != len(text) or any(c in text for c in _FOLDS_TO_ASCII):
    lower = None  # positions or case folding differ: those plugins scan with their own regexes
  found = set()
  for plugin, finders, words in _SCANS:
    if words and (lower is not None or not words[1]):
      matches = re.finditer(words[0], lower if words[1] else text)
    else:
      matches = (match for finder in finders for match in finder.finditer(text))
    lines = set()
    for match in matches:
      start, end = text.rfind("\n", 0, match.start()) + 1, text.find("\n", match.end())
      lines.update(_LINE_BREAK.split(text[start:end if end >= 0 else len(text)]))
    whole = _WHOLE_MATCHES.get(type(plugin).__name__)
    for line in map(str.rstrip, lines):
      if whole:
        found.update(whole.findall(line))
        continue
      for secret in plugin.analyze_line(filename="adhoc", line=line):
        value = secret.secret_value
        if not (heuristic.is_potential_uuid(value) or heuristic.is_likely_id_string(value, line, plugin)
                or heuristic.is_templated_secret(value) or heuristic.is_sequential_string(value)):
          found.add(value)
  return found


def _is_hash(text: str, value: str) -> bool:
  if len(value) not in (32, 40, 64):
    return False
  at = text.index(value)
  before = text[text.rfind("\n", 0, at) + 1:at].lower()  # the line up to the value
  return any(word in before for word in ("sha", "md5", "hash", "byte"))


def _key_spans(text: str) -> list[tuple[int, int, str, str]]:
  spans = [(m.start(), m.end(), "key", KEY) for m in _PEM_PRIVATE_KEY.finditer(text)] if "-----BEGIN" in text else []
  values = _secret_values(text)
  if values:
    lower, limit = text.lower(), int(0.02 * text.count("\n"))
    if lower.count("sha") > limit or lower.count("hash") > limit:  # BigCode's file_has_hashes
      return spans
  for value in values:
    if not _is_hash(text, value):
      spans += [(m.start(), m.end(), "key", KEY) for m in re.finditer(re.escape(value), text)]
  return spans


def redact(text: str) -> tuple[str, dict[str, int]]:
  """The text with each email, IP address and key replaced, and how many of each kind (only kinds found)."""
  spans = _key_spans(text)
  for token in _TOKEN_WITH_AT.finditer(text) if "@" in text else ():
    spans += [(m.start(), m.end(), "email", EMAIL) for m in _EMAIL.finditer(text, token.start(), token.end())]
  for run in _IP_RUN.finditer(text):  # an address lies inside one run; a match without a digit is dropped
    if "." in run.group() or ":" in run.group():
      for match in _IP.finditer(text, run.start(), run.end() + 1):  # one more: the look-ahead sees it
        replacement = _ip_replacement(text, match)
        if replacement is not None:
          spans.append((match.start(), match.end(), "ip_address", replacement))
  pieces, counts, end = [], collections.Counter(), 0
  for start, stop, kind, replacement in sorted(spans, key=lambda span: (span[0], -span[1])):
    if start >= end:  # the first and longest of overlapping finds wins
      pieces += [text[end:start], replacement]
      counts[kind] += 1
      end = stop
  return "".join(pieces) + text[end:], dict(counts)
