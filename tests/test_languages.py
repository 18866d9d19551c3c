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


@pytest.mark.parametrize("spelling", ["cpp", "C++", "c++", " CPP "])
def test_every_spelling_of_a_language_means_it_everywhere(spelling):
  from sandbox.renderers import get, parse_languages

  assert languages.get(spelling).name == "cpp" and languages.get(spelling).stops == ("\n}\n",)
  assert get(spelling) is get("cpp") and parse_languages(spelling) == ["cpp"]
  assert languages.get("CSharp") is languages.get("c-sharp") is languages.get("C#")  # BabelCode's, The Stack's


def test_an_unknown_language_is_refused_the_same_way_everywhere(tmp_path):
  """languages.get's one message, whether the name comes from the library, the renderers, --languages
  or a prompt file without its own stops (sample.py would otherwise sample it with no stop at all)."""
  from sampling.predictions import read_prompts
  from sandbox.renderers import get, parse_languages

  with pytest.raises(ValueError) as expected:
    languages.get("Cobol")
  message = str(expected.value)
  assert message.startswith("unknown language 'Cobol'; choose one of Java, Python, C++")
  for refuse in (lambda: get("Cobol"), lambda: parse_languages("python,Cobol")):
    with pytest.raises(ValueError) as error:
      refuse()
    assert str(error.value) == message
  prompts = tmp_path / "prompts.jsonl"
  prompts.write_text('{"qid": "a", "language": "Python", "prompt": ""}\n'
                     '{"qid": "b", "language": "Cobol", "prompt": "", "stop": ["END"]}\n'  # its own stops: kept
                     '{"qid": "c", "language": "Cobol", "prompt": ""}\n')
  with pytest.raises(ValueError) as error:
    read_prompts(str(prompts))
  assert str(error.value) == f"{prompts}:3: {message}; a prompt in another language needs its own `stop` list"
  prompts.write_text(prompts.read_text().splitlines(keepends=True)[0] + prompts.read_text().splitlines(keepends=True)[1])
  assert [p["qid"] for p in read_prompts(str(prompts))] == ["a", "b"]
