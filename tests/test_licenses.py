import json
import os
import pickle
import subprocess
import sys

import pytest

from data import licenses
from data.filters import LicensePolicy
from licence_texts import MIT_TEXT
from data.licenses import (NO_LICENSE, NON_PERMISSIVE, PERMISSIVE, PERMISSIVE_LICENSES, LicenseVerdict,
                           TreeLicenses, detect_licenses, is_license_file, verdict_of_column,
                           verdict_of_expression)


# Apache-2.0's grant notice (its appendix "How to apply the Apache License to your work").
APACHE_NOTICE = """Copyright 2024 Example Author

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
"""

# GPL-3.0's standard header notice ("How to Apply These Terms to Your New Programs"): "or any later version".
GPL3_NOTICE = """Example program
Copyright (C) 2024 Example Author

This program is free software: you can redistribute it and/or modify
it under the terms of the GNU General Public License as published by
the Free Software Foundation, either version 3 of the License, or
(at your option) any later version.

This program is distributed in the hope that it will be useful,
but WITHOUT ANY WARRANTY; without even the implied warranty of
MERCHANTABILITY or FITNESS FOR A PARTICULAR PURPOSE.  See the
GNU General Public License for more details.

You should have received a copy of the GNU General Public License
along with this program.  If not, see <https://www.gnu.org/licenses/>.
"""

README_MIT = "# demo\n\nA small library.\n\n## License\n\nThis project is licensed under the MIT License.\n"
README_PLAIN = "# demo\n\nA small library that adds numbers.\n\n    pip install demo\n"


# -- SPDX expressions ------------------------------------------------------------------------------------

@pytest.mark.parametrize("expression, verdict, license", [
    ("MIT", PERMISSIVE, "MIT"),
    ("mit", PERMISSIVE, "MIT"),  # normalised to the canonical case
    ("Apache-2.0", PERMISSIVE, "Apache-2.0"),
    ("MIT OR GPL-3.0", PERMISSIVE, "MIT OR GPL-3.0-only"),  # the user may take MIT
    ("(Apache-2.0 OR MIT) AND BSD-3-Clause", PERMISSIVE, "(Apache-2.0 OR MIT) AND BSD-3-Clause"),
    ("MIT AND GPL-3.0", NON_PERMISSIVE, "MIT AND GPL-3.0-only"),
    ("GPL-3.0 OR LGPL-2.1", NON_PERMISSIVE, "GPL-3.0-only OR LGPL-2.1-only"),
    ("Apache-2.0 WITH LLVM-exception", PERMISSIVE, "Apache-2.0 WITH LLVM-exception"),
    ("GPL-2.0 WITH Classpath-exception-2.0", NON_PERMISSIVE, "GPL-2.0-only WITH Classpath-exception-2.0"),
    ("MIT WITH GPL-3.0", NON_PERMISSIVE, "MIT WITH GPL-3.0-only"),  # a licence is no exception: both bind
    ("MPL-2.0", NON_PERMISSIVE, "MPL-2.0"),  # weak copyleft: not on The Stack's list
    ("NOASSERTION", NO_LICENSE, ""),
    ("noassertion", NO_LICENSE, ""),
    ("NONE", NO_LICENSE, ""),
    ("", NO_LICENSE, ""),
    ("   ", NO_LICENSE, ""),
    (None, NO_LICENSE, ""),
    ("LicenseRef-foo", NON_PERMISSIVE, "LicenseRef-foo"),
])
def test_verdict_of_expression(expression, verdict, license):
  result = verdict_of_expression(expression)
  assert (result.verdict, result.license) == (verdict, license)
  assert result.reason


def test_reasons_name_the_blocking_ids():
  assert verdict_of_expression("MIT AND GPL-3.0").reason == "GPL-3.0-only is not on the permissive list"
  both = verdict_of_expression("GPL-3.0 OR LGPL-2.1").reason
  assert "GPL-3.0-only" in both and "LGPL-2.1-only" in both
  assert "MIT" not in verdict_of_expression("MIT AND GPL-3.0").reason
  assert "LicenseRef-" in verdict_of_expression("LicenseRef-foo").reason
  assert "alternative" in verdict_of_expression("MIT OR GPL-3.0").reason


@pytest.mark.parametrize("garbage", ["this is not a license", "MIT AND (", "MIT OR", "Apache-2.0 WITH", "\x00"])
def test_garbage_is_non_permissive_with_the_error_and_never_raises(garbage):
  result = verdict_of_expression(garbage)
  assert result.verdict == NON_PERMISSIVE
  assert "unparseable" in result.reason or "not a known SPDX license id" in result.reason


def test_parse_errors_are_in_the_reason():
  assert verdict_of_expression("MIT AND (").reason.startswith("unparseable SPDX expression: ")
  assert "not a known SPDX license id" in verdict_of_expression("this is not a license").reason


# -- the permissive list ---------------------------------------------------------------------------------

def test_the_list_holds_the_stacks_core_ids():
  core = {"MIT", "Apache-2.0", "BSD-2-Clause", "BSD-3-Clause", "ISC", "Unlicense", "CC0-1.0", "Zlib", "0BSD",
          "MIT-0", "BSL-1.0", "Artistic-2.0", "PSF-2.0", "Python-2.0", "WTFPL", "CC-BY-4.0"}
  assert core <= PERMISSIVE_LICENSES
  assert isinstance(PERMISSIVE_LICENSES, frozenset)


def test_the_list_holds_no_copyleft():
  copyleft = ("GPL", "AGPL", "LGPL", "MPL", "EPL", "EUPL", "CDDL", "CC-BY-SA", "CC-BY-NC", "OSL", "SSPL")
  assert not [i for i in PERMISSIVE_LICENSES if i.startswith(copyleft)]


def test_every_listed_id_is_permissive_after_parsing():
  # Deprecated ids (BSD-2-Clause-FreeBSD, Net-SNMP) are renamed by the parser and must stay permissive.
  assert {i for i in PERMISSIVE_LICENSES if verdict_of_expression(i).verdict != PERMISSIVE} == set()


# -- licence columns -------------------------------------------------------------------------------------

def test_a_list_is_permissive_only_if_every_entry_is():
  assert verdict_of_column(["MIT", "Apache-2.0"]) == verdict_of_column(("Apache-2.0", "MIT"))
  both = verdict_of_column(["MIT", "Apache-2.0"])
  assert (both.verdict, both.license) == (PERMISSIVE, "Apache-2.0 AND MIT")
  mixed = verdict_of_column(["MIT", "GPL-3.0"])
  assert (mixed.verdict, mixed.license) == (NON_PERMISSIVE, "GPL-3.0-only AND MIT")
  assert "GPL-3.0-only" in mixed.reason
  compound = verdict_of_column(["Apache-2.0 WITH LLVM-exception", "MIT"])
  assert (compound.verdict, compound.license) == (PERMISSIVE, "(Apache-2.0 WITH LLVM-exception) AND MIT")


def test_json_list_strings_and_empty_values():
  assert verdict_of_column(json.dumps(["MIT", "ISC"])) == verdict_of_column(["MIT", "ISC"])
  assert verdict_of_column('["GPL-2.0"]').verdict == NON_PERMISSIVE
  for empty in (None, [], (), "[]", "", ["NOASSERTION"], ["", "NONE"]):
    assert verdict_of_column(empty) == LicenseVerdict(NO_LICENSE, "", verdict_of_column(empty).reason)
  assert verdict_of_column(["NOASSERTION", "MIT"]).verdict == PERMISSIVE  # unknown entries add nothing


def test_a_string_is_one_expression():
  assert verdict_of_column("MIT OR GPL-3.0") == verdict_of_expression("MIT OR GPL-3.0")
  assert verdict_of_column("GPL-3.0-only").verdict == NON_PERMISSIVE


@pytest.mark.parametrize("license_type", [PERMISSIVE, NON_PERMISSIVE, NO_LICENSE])
def test_the_stack_v2_license_type_is_taken_as_given(license_type):
  result = verdict_of_column(license_type)
  assert (result.verdict, result.license) == (license_type, "")


@pytest.mark.parametrize("bad", ["[MIT", 42, [1, "MIT"], {"license": "MIT"}])
def test_unreadable_columns_are_non_permissive(bad):
  assert verdict_of_column(bad).verdict == NON_PERMISSIVE


# -- policy ----------------------------------------------------------------------------------------------

def test_no_license_policy():
  assert licenses.NO_LICENSE_POLICIES == ("keep", "drop")
  permissive, none, refused = (verdict_of_expression(e) for e in ("MIT", None, "GPL-3.0"))
  keep, drop = LicensePolicy(), LicensePolicy(no_license="drop")
  # The Stack keeps no_license.
  assert [keep.removal_reason(v) for v in (permissive, none, refused)] == [None, None, "license"]
  assert [drop.removal_reason(v) for v in (permissive, none, refused)] == [None, "no_license", "license"]
  assert LicensePolicy(enabled=False).removal_reason(refused) is None
  with pytest.raises(ValueError):
    LicensePolicy(no_license="maybe")


# -- licence file names ----------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["LICENSE", "license.txt", "LICENCE.md", "License.rst", "COPYING", "COPYING.LESSER",
                                  "COPYING.LIB", "COPYRIGHT", "UNLICENSE", "NOTICE", "NOTICE.txt", "README",
                                  "README.md", "readme.rst", "LICENSE-MIT", "LICENSE_APACHE", "MIT-LICENSE.txt",
                                  "LICENSE.APACHE-2.0", "LICENSE.MIT", "PATENTS"])
def test_license_file_names(name):
  assert is_license_file(name)


@pytest.mark.parametrize("name", ["licenses.py", "license_checker.py", "License.java", "license.cc", "readme_test.go",
                                  "main.py", "CHANGELOG.md", "CONTRIBUTING.md", "setup.py", "Makefile", "copy.txt"])
def test_source_files_are_not_license_files(name):
  assert not is_license_file(name)


# -- trees (no detector needed) --------------------------------------------------------------------------

def test_tree_applies_licences_by_directory_prefix():
  tree = TreeLicenses({"a": ["MIT"], "a/gpl": ["GPL-3.0-or-later"], "b": []})
  assert tree.verdict("a/x.py") == LicenseVerdict(PERMISSIVE, "MIT", "every license on the path is permissive")
  assert tree.verdict("a/deep/er/x.py").license == "MIT"
  nested = tree.verdict("a/gpl/x.py")
  assert (nested.verdict, nested.license) == (NON_PERMISSIVE, "GPL-3.0-or-later AND MIT")
  assert tree.verdict("b/x.py") == LicenseVerdict(NO_LICENSE, "", "no license found on the path")
  assert tree.verdict("x.py").verdict == NO_LICENSE
  # Prefixes are whole path components: "ab" is no child of "a", "a/gplx" none of "a/gpl".
  assert tree.verdict("ab/x.py").verdict == NO_LICENSE
  assert tree.verdict("a/gplx/x.py").verdict == PERMISSIVE


def test_tree_root_licence_covers_every_file_and_paths_are_normalised():
  tree = TreeLicenses({"": ["Apache-2.0"], "./a/": ["MIT"], "a": ["ISC"]})
  assert tree.verdict("x.py").license == "Apache-2.0"
  assert tree.verdict("a/x.py").license == "Apache-2.0 AND ISC AND MIT"
  assert tree.verdict("./a/x.py") == tree.verdict("a/x.py")


def test_tree_follows_the_stack_v2_amendments():
  cla = "LicenseRef-scancode-generic-cla"
  unknown = "LicenseRef-scancode-unknown-license-reference"
  tree = TreeLicenses({"a": [cla], "b": ["MIT", unknown, cla], "c": [unknown], "d": ["LicenseRef-scancode-foo"]})
  assert tree.verdict("a/x.py").verdict == NO_LICENSE  # a CLA is no licence
  assert tree.verdict("b/x.py") == TreeLicenses({"b": ["MIT"]}).verdict("b/x.py")  # "see LICENSE" next to MIT
  assert tree.verdict("c/x.py").verdict == NON_PERMISSIVE  # a reference to an unknown licence
  assert tree.verdict("d/x.py").verdict == NON_PERMISSIVE  # other LicenseRef- ids, as The Stack v2


def test_tree_and_verdicts_pickle():
  tree = TreeLicenses({"a": ["MIT"]})
  assert pickle.loads(pickle.dumps(tree)).verdict("a/x.py") == tree.verdict("a/x.py")
  verdict = verdict_of_expression("MIT")
  assert pickle.loads(pickle.dumps(verdict)) == verdict


def test_importing_the_module_does_not_load_the_detector():
  code = "import sys; import data.licenses; print('licensedcode' in sys.modules)"
  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  out = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True)
  assert out.stdout.strip() == "False"


# -- the real detector: one load (~8 s) for the module ---------------------------------------------------

@pytest.fixture(scope="module")
def source_tree(tmp_path_factory):
  """repo_a: MIT at its root, Apache-2.0 in vendor/; repo_b: GPL-3.0 COPYING; repo_c: a README, no licence."""
  root = tmp_path_factory.mktemp("sources")
  files = {
      "repo_a/LICENSE": MIT_TEXT, "repo_a/README.md": README_MIT, "repo_a/src/main.py": "print(1)\n",
      "repo_a/vendor/LICENSE": APACHE_NOTICE, "repo_a/vendor/lib/util.py": "x = 1\n",
      "repo_b/COPYING": GPL3_NOTICE, "repo_b/b.py": "y = 2\n",
      "repo_c/README.md": README_PLAIN, "repo_c/c.py": "z = 3\n",
  }
  for relpath, text in files.items():
    (root / relpath).parent.mkdir(parents=True, exist_ok=True)
    (root / relpath).write_text(text)
  found = {}
  for directory, _, names in os.walk(root):
    ids = set()
    for name in names:
      if is_license_file(name):
        ids.update(detect_licenses((root / directory / name).read_text()))
    found[os.path.relpath(directory, root).replace(os.sep, "/")] = sorted(ids)
  return found


def test_detector_recognises_the_licence_texts(source_tree):
  assert detect_licenses(MIT_TEXT) == ("MIT",)
  assert detect_licenses(APACHE_NOTICE) == ("Apache-2.0",)
  assert detect_licenses(GPL3_NOTICE) == ("GPL-3.0-or-later",)
  assert detect_licenses(README_MIT) == ("MIT",)
  assert detect_licenses(README_PLAIN) == ()
  assert detect_licenses("def f():\n  return 1\n") == ()
  assert detect_licenses("") == ()
  assert detect_licenses(MIT_TEXT + "\n\n" + APACHE_NOTICE) == ("Apache-2.0", "MIT")


README_CONTRIBUTION = (
    "# widget\n\nA small crate.\n\n## License\n\nThis project is licensed under the MIT license.\n\n"
    "### Contribution\n\nUnless you explicitly state otherwise, any contribution intentionally submitted\n"
    "for inclusion in Widget by you, shall be licensed as MIT, without any additional\nterms or conditions.\n")


def test_a_contribution_clause_does_not_make_a_readme_non_permissive(source_tree):
  # ScanCode reads the Rust crates' contribution paragraph as "... AND LicenseRef-scancode-generic-cla"
  # (tokio's README in the Debian corpus: 420 files were dropped for it); a CLA licenses nothing.
  found = detect_licenses(README_CONTRIBUTION)
  assert found and not any("generic-cla" in expression for expression in found)
  assert TreeLicenses({"widget": found}).verdict("widget/src/lib.rs").verdict == PERMISSIVE


def test_a_licence_text_mentioning_another_licence_is_that_licence(source_tree):
  # CPython's LICENSE: its history table says "GPL-compatible" and "released under the GPL"; ScanCode
  # reads both as GPL-1.0-or-later, which dropped the whole stdlib from make demo's corpus.
  history = ("\n\nHISTORY\n\nReleases 0.9 to 1.2 of this library were GPL-compatible; the 0.8 branch was "
             "released under the GPL.\n")
  assert detect_licenses(MIT_TEXT + history) == ("MIT",)
  # The same words without a licence text beside them license the file.
  assert detect_licenses("widget\n\nThis library is released under the GPL.\n") == ("GPL-1.0-or-later",)
  assert detect_licenses(MIT_TEXT + "\n\n" + APACHE_NOTICE) == ("Apache-2.0", "MIT")  # a notice is no mention


def test_detector_index_is_loaded_once(source_tree):
  detect_licenses(MIT_TEXT)
  detect_licenses(GPL3_NOTICE)
  assert licenses._scancode.cache_info().misses == 1


def test_tree_verdicts_from_detected_licences(source_tree):
  assert source_tree["repo_a"] == ["MIT"]
  assert source_tree["repo_a/vendor"] == ["Apache-2.0"]
  assert source_tree["repo_b"] == ["GPL-3.0-or-later"]
  assert source_tree["repo_c"] == []
  tree = TreeLicenses(source_tree)
  assert tree.verdict("repo_a/src/main.py") == LicenseVerdict(PERMISSIVE, "MIT",
                                                              "every license on the path is permissive")
  assert tree.verdict("repo_a/vendor/lib/util.py").license == "Apache-2.0 AND MIT"
  assert tree.verdict("repo_a/vendor/lib/util.py").verdict == PERMISSIVE
  gpl = tree.verdict("repo_b/b.py")
  assert (gpl.verdict, gpl.license) == (NON_PERMISSIVE, "GPL-3.0-or-later")
  assert gpl.reason == "GPL-3.0-or-later is not on the permissive list"
  assert tree.verdict("repo_c/c.py") == LicenseVerdict(NO_LICENSE, "", "no license found on the path")


@pytest.mark.parametrize("detected, kept", [
    ("Apache-2.0 WITH LLVM-exception AND LicenseRef-scancode-generic-cla", "Apache-2.0 WITH LLVM-exception"),
    ("LicenseRef-scancode-generic-cla", ""),
    ("MIT AND (GPL-3.0-only AND LicenseRef-scancode-dco-1.1)", "MIT AND GPL-3.0-only"),
    # npm's LICENSE: the Artistic licence and a "see LICENSE" pointing at it.
    ("Artistic-2.0 AND LicenseRef-scancode-unknown-license-reference", "Artistic-2.0"),
    ("LicenseRef-scancode-unknown-license-reference", "LicenseRef-scancode-unknown-license-reference"),
    ("MIT OR GPL-2.0-only", "MIT OR GPL-2.0-only"),
])
def test_what_licenses_nothing_leaves_a_detection(detected, kept):
  assert licenses._without_non_licenses(detected) == kept
