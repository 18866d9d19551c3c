"""The corpus builder's driver side: find the code files under source trees, local or URLs.

A source tree is walked without following symlinks (so a symlink loop is harmless) and a file is kept
when `languages.classify` recognises its name; what is left out is counted by reason (data/corpus.py's
SKIP_REASONS: symlink, not_code, undecodable_name, capped, unreadable). Each file is recorded as a
`SourceFile`, the plain tuple the pipeline carries.
"""

from __future__ import annotations

import collections
import glob
import hashlib
import os
import posixpath
import sysconfig
from typing import Iterable

import tqdm

import storage
import languages
from data import licenses

# A file to read, as the pipeline carries it: plain tuples (picklable, no schema inference).
#   (absolute path or URL, relative path "label/dir/name", language name)
SourceFile = tuple[str, str, str]

LOCAL_PRESET_GLOBS = ("/usr/include", "/usr/lib/node_modules", "/usr/local/lib/node_modules",
                      "/usr/share/javascript", "/usr/lib/go*/src", "/usr/local/go/src", "/usr/share/R",
                      "/usr/lib/R/library", "/usr/share/lua", "~/.cargo/registry/src", "/usr/share/php",
                      "/usr/share/dart", "/usr/share/julia", "/usr/lib/ghc*")
LOCAL_PRESET_MAX_FILES_PER_LANGUAGE = 3000


# ----------------------------------------------------------------------------------------------
# Paths: local, or a URL ("scheme://...") that only tf.io.gfile can reach, both through storage.py.

is_url = storage.is_url


def normalize_path(path: str) -> str:
  """A local path resolved (symlinks too), or a URL without trailing slashes ("gs://b/x/" -> "gs://b/x")."""
  if is_url(path):
    scheme, rest = path.split("://", 1)
    return f"{scheme}://{rest.rstrip('/')}"
  return os.path.realpath(path)


is_dir = storage.isdir
_join = storage.join


# ----------------------------------------------------------------------------------------------
# Find the files.

def local_preset_sources() -> tuple[list[str], list[str]]:
  """(sources, excluded directories) already on this machine: the running Python's stdlib and
  whichever others of LOCAL_PRESET_GLOBS exist. The stdlib's site-packages is third-party code, not
  the standard library, and would outnumber it: excluded."""
  stdlib = sysconfig.get_paths()["stdlib"]
  found = [stdlib]
  for pattern in LOCAL_PRESET_GLOBS:
    found.extend(sorted(path for path in glob.glob(os.path.expanduser(pattern)) if os.path.isdir(path)))
  return unique_roots(found), [os.path.join(stdlib, name) for name in ("site-packages", "dist-packages")]


def unique_roots(roots: Iterable[str]) -> list[str]:
  """Absolute, resolved, de-duplicated roots in first-seen order (a root named twice is read once)."""
  seen: dict[str, None] = {}
  for root in roots:
    seen.setdefault(normalize_path(root), None)
  return list(seen)


def _path_parts(root: str) -> list[str]:
  """The directory names of a root; a URL's scheme is not one ("gs://bucket/crawl" -> bucket, crawl)."""
  if is_url(root):
    return [p for p in root.split("://", 1)[1].split("/") if p]
  return [p for p in root.split(os.sep) if p]


def source_labels(roots: list[str]) -> dict[str, str]:
  """The prefix of each root's relative paths: its basename, lengthened by parents where two clash.

  "/usr/lib/go-1.22/src" and "/usr/local/go/src" become "go-1.22/src" and "go/src", so two
  sources never yield the same relative path. Roots must be unique (see `unique_roots`).
  """
  parts = {root: _path_parts(root) or ["root"] for root in roots}
  depth = dict.fromkeys(roots, 1)
  while True:
    labels = {root: "/".join(parts[root][-depth[root]:]) for root in roots}
    by_label = collections.defaultdict(list)
    for root, label in labels.items():
      by_label[label].append(root)
    clashing = [root for group in by_label.values() if len(group) > 1 for root in group]
    if not clashing:
      return labels
    for root in clashing:  # a root already at full length waits: the other, longer one diverges
      depth[root] = min(depth[root] + 1, len(parts[root]))


def scan_tree(root: str, label: str, skipped: collections.Counter, exclude: frozenset[str] = frozenset(),
              license_files: list[tuple[str, str]] | None = None) -> list[SourceFile]:
  """Code files under `root`, sorted by relative path; symlinks and non-code files only counted.

  Directories whose resolved path (`normalize_path`) is in `exclude` are not entered (and not counted).
  A URL root is walked with tf.io.gfile (object stores have no symlinks). Licence files
  (`licenses.is_license_file`) are appended to `license_files` as (path, relative directory "label/dir").
  """
  if is_url(root):
    return _scan_url_tree(root, label, skipped, exclude, license_files)
  found: list[SourceFile] = []
  stack = [root]
  with tqdm.tqdm(desc=f"scanning {label}", unit=" files", leave=False) as progress:
    while stack:
      directory = stack.pop()
      try:
        entries = sorted(os.scandir(directory), key=lambda entry: entry.name)
      except OSError:
        skipped["unreadable"] += 1
        continue
      for entry in entries:
        # Symlinks are never followed: a link into the tree is a duplicate, one out of it is not ours,
        # and a link to a parent would loop.
        if entry.is_symlink():
          skipped["symlink"] += 1
        elif entry.is_dir(follow_symlinks=False):
          if not exclude or os.path.realpath(entry.path) not in exclude:
            stack.append(entry.path)
        else:
          progress.update(1)
          try:
            entry.path.encode("utf-8")  # os.scandir keeps undecodable bytes as lone surrogates
          except UnicodeEncodeError:
            skipped["undecodable_name"] += 1
            continue
          language = languages.classify(entry.name)
          relpath = posixpath.join(label, os.path.relpath(entry.path, root).replace(os.sep, "/"))
          if language is None or not entry.is_file(follow_symlinks=False):  # sockets, fifos: not code
            skipped["not_code"] += 1
            if license_files is not None and licenses.is_license_file(entry.name) and entry.is_file(
                follow_symlinks=False):
              license_files.append((entry.path, posixpath.dirname(relpath)))
            continue
          found.append((entry.path, relpath, language.name))
  found.sort(key=lambda source: source[1])
  return found


def _scan_url_tree(root: str, label: str, skipped: collections.Counter, exclude: frozenset[str],
                   license_files: list[tuple[str, str]] | None) -> list[SourceFile]:
  """`scan_tree` of a URL root, through storage.walk (top-down, pruned, visited in sorted order)."""
  found: list[SourceFile] = []

  def unreadable(_: Exception) -> None:
    skipped["unreadable"] += 1

  with tqdm.tqdm(desc=f"scanning {label}", unit=" files", leave=False) as progress:
    for directory, subdirs, names in storage.walk(root, onerror=unreadable):
      # Some object stores list a "directory" with a trailing slash: names are compared without it.
      subdirs[:] = sorted(name for name in subdirs
                          if not exclude or normalize_path(_join(directory, name)) not in exclude)
      relative_dir = directory[len(root):].strip("/")
      for name in sorted(names):
        progress.update(1)
        language = languages.classify(name)
        relpath = posixpath.join(label, relative_dir, name) if relative_dir else posixpath.join(label, name)
        if language is None:
          skipped["not_code"] += 1
          if license_files is not None and licenses.is_license_file(name):
            license_files.append((_join(directory, name), posixpath.dirname(relpath)))
          continue
        found.append((_join(directory, name), relpath, language.name))
  found.sort(key=lambda source: source[1])
  return found


def cap_per_language(files: list[SourceFile], max_files: int | None,
                     skipped: collections.Counter) -> list[SourceFile]:
  """At most `max_files` per language, chosen deterministically.

  Ordered by a hash of the relative path rather than the path itself, so a cap samples across all
  sources and directories instead of taking the alphabetically first tree (e.g. only /usr/include/a*).
  """
  if max_files is None:
    return files
  by_language: dict[str, list[SourceFile]] = collections.defaultdict(list)
  for source in files:
    by_language[source[2]].append(source)
  kept: list[SourceFile] = []
  for group in by_language.values():
    group.sort(key=lambda source: (hashlib.sha256(source[1].encode("utf-8")).hexdigest(), source[1]))
    kept.extend(group[:max_files])
    skipped["capped"] += max(0, len(group) - max_files)
  kept.sort(key=lambda source: source[1])
  return kept


def collect_files(roots: list[str], max_files_per_language: int | None, skipped: collections.Counter,
                  exclude: Iterable[str] = (), license_files: list[tuple[str, str]] | None = None
                  ) -> list[SourceFile]:
  """Scans every root, applies the per-language cap, and prints what each root contributed; licence
  files found go to `license_files` (`scan_tree`)."""
  labels = source_labels(roots)
  excluded = frozenset(normalize_path(path) for path in exclude)
  found = {root: scan_tree(root, labels[root], skipped, excluded, license_files) for root in roots}
  files = sorted((source for sources in found.values() for source in sources), key=lambda source: source[1])
  kept = cap_per_language(files, max_files_per_language, skipped)
  origin = {source[1]: root for root in roots for source in found[root]}
  kept_per_root = collections.Counter(origin[source[1]] for source in kept)
  for root in roots:
    per_language = collections.Counter(language for _, _, language in found[root])
    summary = ", ".join(f"{name} {count:,}" for name, count in per_language.most_common())
    capped = f", {kept_per_root[root]:,} kept under the cap" if max_files_per_language is not None else ""
    print(f"{root} -> {labels[root]}/: {len(found[root]):,} code files{capped} ({summary or 'none'})")
  return kept
