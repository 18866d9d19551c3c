import pytest

import languages
from languages import classify


@pytest.mark.parametrize("path,expected", [
    ("src/Main.java", "java"), ("a/b/x.PY", "python"), ("lib.rs", "rust"), ("build.rs.in", "rust"),
    ("Foo.hs-boot", "haskell"), ("Foo.hs", "haskell"), ("x.HSC", "haskell"), ("node/x.mjs", "javascript"),
    ("t.d.ts", "typescript"), ("core.h", "cpp"), ("k.C++", "cpp"), ("lexer.re", "cpp"), ("x.inc", "php"),
    ("script.R", "r"), ("man/page.Rd", "r"), ("m.jl", "julia"), ("app.dart", "dart"), ("x.lua", "lua"),
    ("p.cs", "csharp"), ("main.go", "go"),
])
def test_classify_by_longest_suffix_case_insensitively(path, expected):
  assert classify(path).name == expected


@pytest.mark.parametrize("path", ["README.md", "Makefile", "x.c", "x.rsx.bak", "archive.tar.gz", ".py", "x.in"])
def test_unknown_extensions_are_not_code(path):
  assert classify(path) is None


def test_the_fourteen_languages_and_their_groups():
  assert len(languages.LANGUAGES) == 14
  assert [l.display_name for l in languages.HIGH_RESOURCE] == [
      "Java", "Python", "C++", "PHP", "TypeScript", "JavaScript", "Go"]
  assert [l.display_name for l in languages.LOW_RESOURCE] == [
      "Dart", "Lua", "Rust", "C#", "R", "Julia", "Haskell"]
  # Table 3's shares are rounded to two decimals: they sum to 99.98.
  assert sum(l.natural_share for l in languages.LANGUAGES) == pytest.approx(99.98, abs=1e-9)
  assert languages.get("cpp").task_name == "code_cpp"
  with pytest.raises(ValueError, match="unknown language"):
    languages.get("cobol")
