"""The corpus pipeline's filter stages, as Beam DoFns over its records (data/corpus.py says the order).

A record is the plain tuple (digest, relpath, language, text, license): `license` is a
licenses.LicenseVerdict from a tree's licence files or a shard's raw licence-column value until
`LicenseAndQuality` has judged it, and the SPDX expression kept in the corpus record ("" for none)
after. Each stage passes the records it keeps and puts one (reason, language, UTF-8 bytes) on SKIPPED
for each it removes, so stats.json accounts for every file read. The rules live in their own modules:
data/licenses.py, data/quality.py, data/decontamination.py, data/pii.py.
"""

from __future__ import annotations

import dataclasses
from typing import Iterator

import apache_beam as beam

from data import licenses
from data import pii
from data.decontamination import Decontaminator
from data.quality import QualityFilters

SKIPPED = "skipped"  # (reason, language, bytes): the corpus pipeline's skip output
CONTAMINATED = "contaminated"  # (relpath, language, benchmark, item) of each file decontamination removed
REDACTED = "redacted"  # (language, bytes, {kind: count}) of each file PII redaction changed
LICENSE_REASON, NO_LICENSE_REASON, DECONTAMINATED = "license", "no_license", "decontaminated"


@dataclasses.dataclass(frozen=True)
class LicensePolicy:
  enabled: bool = True  # remove files whose licence is not permissive
  no_license: str = "keep"  # files with no licence found: The Stack keeps them ("keep") or "drop"

  def __post_init__(self):
    if self.no_license not in licenses.NO_LICENSE_POLICIES:
      raise ValueError(f"no_license must be one of {', '.join(licenses.NO_LICENSE_POLICIES)}, got {self.no_license!r}")

  def as_dict(self) -> dict:
    return {"license_filter": self.enabled, "no_license": self.no_license}

  def removal_reason(self, verdict: licenses.LicenseVerdict) -> str | None:
    """The skip reason of a file of this verdict, or None when the policy keeps it."""
    if not self.enabled or verdict.verdict == licenses.PERMISSIVE:
      return None
    if verdict.verdict == licenses.NON_PERMISSIVE:
      return LICENSE_REASON
    return NO_LICENSE_REASON if self.no_license == "drop" else None


def text_bytes(record: tuple) -> int:
  return len(record[3].encode("utf-8", "surrogatepass"))


class LicenseAndQuality(beam.DoFn):
  """Judges each record's licence (a verdict, or a shard's column value), then the quality rules."""

  def __init__(self, policy: LicensePolicy, quality: QualityFilters | None):
    self._policy = policy
    self._quality = quality

  def process(self, record: tuple) -> Iterator:
    digest, relpath, language, text, license_value = record
    verdict = (license_value if isinstance(license_value, licenses.LicenseVerdict)
               else licenses.verdict_of_column(license_value))
    reason = self._policy.removal_reason(verdict)
    if reason is None and self._quality is not None:
      reason = self._quality.failed_rule(text, language)
    if reason is not None:
      yield beam.pvalue.TaggedOutput(SKIPPED, (reason, language, text_bytes(record)))
    else:
      yield digest, relpath, language, text, verdict.license


class Decontaminate(beam.DoFn):
  """Removes a record holding benchmark text; lists it with the item it matched on CONTAMINATED."""

  def __init__(self, decontaminator: Decontaminator):
    self._decontaminator = decontaminator

  def process(self, record: tuple) -> Iterator:
    item = self._decontaminator.match(record[3])
    if item is None:
      yield record
      return
    yield beam.pvalue.TaggedOutput(SKIPPED, (DECONTAMINATED, record[2], text_bytes(record)))
    yield beam.pvalue.TaggedOutput(CONTAMINATED, (record[1], record[2], item.benchmark, item.item))


class RedactPII(beam.DoFn):
  """Replaces emails, IP addresses and secrets by placeholders; the digest stays the original's, so a
  file's split and shard do not depend on whether PII redaction was on."""

  def process(self, record: tuple) -> Iterator:
    digest, relpath, language, text, license_ = record
    redacted, counts = pii.redact(text)
    if counts:
      yield beam.pvalue.TaggedOutput(REDACTED, (language, text_bytes(record), dict(counts)))
    yield digest, relpath, language, redacted, license_
