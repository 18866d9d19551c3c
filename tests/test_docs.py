"""The docs say what the code does: README.md and docs/**/*.md link only to files that exist, and every
codelm command in their code blocks names an entry point whose --help lists each flag it uses.

Checked commands: `python`, `python3` or `.venv/bin/python` with `-m MODULE` or `PATH.py`, and `make
TARGET`, in fenced blocks that are shell (no language, sh, bash, console). A command may span lines
with `\\`, share a line with others (`&&`, `||`, `;`, ` | `), start with `$ ` or `FOO=bar`, and end in
a `# comment`. Names in CAPITALS are placeholders: a module or script spelt so is not checked. Flags
after a bare `--` belong to the command it launches (tpu/launch.py, tpu/gpu_launch.py) and are not
checked. `--gin.X=...` and `--gin_file` pass where the help names `--gin`; Beam's pipeline options pass
where the help names `--runner`. Other tools' commands (pip, gcloud, docker, vllm, lm_eval, git ...)
are out of scope.

Each entry point's --help runs once per session, in a child forked from one process that has already
imported TensorFlow, JAX and Beam, four at a time: what would cost each --help seconds of imports is
paid once."""

import functools
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PYTHONS = {"python", "python3", ".venv/bin/python", "python3.11"}
SHELL_FENCES = {"", "sh", "bash", "shell", "console"}
PLACEHOLDER = re.compile(r"[A-Z][A-Z0-9_]+")


def markdown_files() -> list[Path]:
  return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


# ---------------------------------------------------------------- markdown structure

FENCE = re.compile(r"^\s*(```|~~~)\s*([\w+-]*)")
LINK = re.compile(r"!?\[[^\]\n]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
INLINE_CODE = re.compile(r"(`+)(?:(?!\1).)+?\1")


def split_fences(text: str) -> tuple[list[tuple[int, str]], list[tuple[str, int, list[str]]]]:
  """(prose lines as (line number, text), fenced blocks as (language, first line number, lines))."""
  prose, blocks, block = [], [], None
  for number, line in enumerate(text.splitlines(), 1):
    fence = FENCE.match(line)
    if block is None and fence:
      block = (fence.group(2).lower(), number + 1, [])
    elif block is not None and fence and not fence.group(2) and line.strip() in ("```", "~~~"):
      blocks.append(block)
      block = None
    elif block is not None:
      block[2].append(line)
    else:
      prose.append((number, line))
  return prose, blocks


def github_slug(heading: str) -> str:
  """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
  text = INLINE_CODE.sub(lambda m: m.group(0).strip("`"), heading.strip())
  text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link keeps its text
  return re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")


def anchors(text: str) -> set[str]:
  found, counts = set(), {}
  for _, line in split_fences(text)[0]:
    match = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
    if match:
      slug = github_slug(match.group(1))
      found.add(slug if slug not in counts else f"{slug}-{counts[slug]}")
      counts[slug] = counts.get(slug, 0) + 1
  return found


def link_problems(text: str, folder: Path) -> list[str]:
  """Each relative link or image of `text` (a markdown file in `folder`) whose file, or whose anchor
  in a markdown file, does not exist."""
  problems = []
  for number, line in split_fences(text)[0]:
    for target in LINK.findall(INLINE_CODE.sub("", line)):
      if re.match(r"[a-z][a-z0-9+.-]*:", target, re.I):  # https:, mailto: ...
        continue
      path, _, anchor = target.partition("#")
      file = (folder / path).resolve() if path else None
      if file is not None and not file.exists():
        problems.append(f"line {number}: {target}: no such file")
      elif anchor and (file is None or file.suffix == ".md"):
        source = file.read_text(encoding="utf-8") if file else text
        if anchor not in anchors(source):
          problems.append(f"line {number}: {target}: no heading with anchor #{anchor}")
  return problems


# ---------------------------------------------------------------- commands in code blocks

def logical_lines(lines: list[str]):
  """(line number offset, text): lines joined across trailing backslashes, a `$ ` prompt dropped."""
  start, parts = None, []
  for offset, line in enumerate(lines):
    start = offset if start is None else start
    if line.rstrip().endswith("\\"):
      parts.append(line.rstrip()[:-1])
      continue
    parts.append(line)
    text = " ".join(p.strip() for p in parts)
    yield start, text[2:] if text.startswith("$ ") else text
    start, parts = None, []
  if parts:
    yield start, " ".join(p.strip() for p in parts)


def split_commands(line: str) -> list[str]:
  """The commands of one shell line: cut at `&&`, `||`, `;` and pipes outside quotes, up to a
  `#` comment. A `|` between two words (`derived|dataset`) is a value, not a pipe."""
  commands, current, quote, i = [], [], None, 0
  while i < len(line):
    char = line[i]
    if quote:
      quote = None if char == quote else quote
    elif char in "'\"":
      quote = char
    elif char == "#" and (i == 0 or line[i - 1].isspace()):
      break
    elif line.startswith(("&&", "||"), i):
      commands.append("".join(current))
      current, i = [], i + 2
      continue
    elif char == ";" or (char == "|" and (i == 0 or line[i - 1].isspace() or line[i + 1:i + 2].isspace())):
      commands.append("".join(current))
      current, i = [], i + 1
      continue
    current.append(char)
    i += 1
  commands.append("".join(current))
  return [c.strip() for c in commands if c.strip()]


def tokens(command: str) -> list[str]:
  try:
    return shlex.split(command)
  except ValueError:  # an unbalanced quote in a shown output line
    return command.split()


def parse_command(command: str):
  """("python", entry, args) for `python -m MODULE` / `python PATH.py`, ("make", targets, []) for
  make, None for anything else (another tool, shown output)."""
  words = tokens(command)
  while words and (re.match(r"[A-Za-z_][A-Za-z0-9_]*=", words[0]) or words[0] in ("time", "sudo", "exec")):
    words = words[1:]  # FOO=bar prefixes
  if not words:
    return None
  if words[0] == "make":
    return ("make", [w for w in words[1:] if not w.startswith("-") and "=" not in w], [])
  if words[0] not in PYTHONS or len(words) < 2:
    return None
  if words[1] == "-m" and len(words) > 2:
    return ("python", ("-m", words[2]), words[3:])
  if words[1].endswith(".py"):
    return ("python", (words[1],), words[2:])
  return None


def flags_of(args: list[str]) -> list[str]:
  """The `--name` flags of a command's arguments, up to a bare `--`; `[--k 1,25]` counts as `--k`."""
  flags = []
  for arg in args:
    if arg == "--":
      break
    arg = arg.lstrip("[(")
    if arg.startswith("--") and len(arg) > 2:
      name = re.split(r"[=\]\)\s]", arg[2:], maxsplit=1)[0]
      if name and not PLACEHOLDER.fullmatch(name):
        flags.append(name)
  return flags


def module_file(module: str) -> Path | None:
  """The file `python -m module` runs, when the module is codelm's (None when it is not there)."""
  base = ROOT.joinpath(*module.split("."))
  for candidate in (base.with_suffix(".py"), base / "__main__.py"):
    if candidate.is_file():
      return candidate
  return None


def is_codelm_module(module: str) -> bool:
  top = module.split(".")[0]
  return (ROOT / f"{top}.py").is_file() or (ROOT / top / "__init__.py").is_file()


@functools.cache
def make_targets() -> frozenset[str]:
  text = (ROOT / "Makefile").read_text()
  return frozenset(m for line in text.splitlines()
                   for m in re.findall(r"^([A-Za-z_][\w.-]*(?:\s+[A-Za-z_][\w.-]*)*)\s*:(?!=)", line)
                   for m in m.split())


@functools.cache
def beam_options() -> frozenset[str]:
  """Every pipeline option Beam's PipelineOptions subclasses declare (--runner, --project, ...)."""
  import argparse

  from apache_beam.options import pipeline_options as beam

  parser, seen, todo = argparse.ArgumentParser(add_help=False, conflict_handler="resolve"), set(), [beam.PipelineOptions]
  while todo:
    cls = todo.pop()
    for sub in cls.__subclasses__():
      if sub not in seen:
        seen.add(sub)
        todo.append(sub)
        try:
          sub._add_argparse_args(parser)
        except Exception:  # noqa: BLE001 - an option class of a missing extra
          pass
  return frozenset(s.lstrip("-").replace("-", "_") for a in parser._actions for s in a.option_strings)


def flag_listed(flag: str, help_text: str) -> bool:
  if flag == "gin_file" or flag.startswith("gin."):
    return "--gin" in help_text
  if re.search(r"(?<![\w-])--" + re.escape(flag) + r"(?![\w-])", help_text):
    return True
  return "--runner" in help_text and flag in beam_options()


def help_key(entry: tuple, args: list[str], help_of) -> tuple:
  """`entry` or, when the first argument is one of its subcommands ({humaneval,typed,...}), both."""
  if args and re.fullmatch(r"[a-z][a-z_]*", args[0]):
    top = help_of(entry)
    if top is not None and re.search(r"\{[\w,]*\b" + args[0] + r"\b[\w,]*\}", top[1]):
      return entry + (args[0],)
  return entry


def checkable(entry: tuple) -> bool:
  """Whether `entry` is codelm's and named, not a placeholder (MODULE, SCRIPT.py): only those are checked."""
  if entry[0] == "-m":
    return not PLACEHOLDER.search(entry[1]) and is_codelm_module(entry[1])
  return not PLACEHOLDER.search(entry[0])


def entry_problem(entry: tuple) -> str | None:
  if not checkable(entry):
    return None
  if entry[0] == "-m":
    return None if module_file(entry[1]) else f"no module {entry[1]} (python -m {entry[1]})"
  return None if (ROOT / entry[0]).is_file() else f"no script {entry[0]}"


def command_problems(text: str, help_of) -> list[str]:
  """Each codelm command in `text`'s shell blocks that names a missing entry point or make target, or
  a flag its --help does not list. `help_of(entry)` gives (return code, help text) or None."""
  problems = []
  for language, first, lines in split_fences(text)[1]:
    if language not in SHELL_FENCES:
      continue
    for offset, line in logical_lines(lines):
      for command in split_commands(line):
        parsed = parse_command(command)
        if parsed is None:
          continue
        where = f"line {first + offset}: {command}"
        kind, entry, args = parsed
        if kind == "make":
          problems += [f"{where}: no make target {t}" for t in entry if t not in make_targets()]
          continue
        if entry_problem(entry):
          problems.append(f"{where}: {entry_problem(entry)}")
          continue
        if not checkable(entry):
          continue
        key = help_key(entry, args, help_of)
        helps = [help_of(k) for k in {entry, key}]
        if any(h is None or h[0] != 0 for h in helps):
          problems.append(f"{where}: --help failed: {next(h for h in helps if h is None or h[0])}")
          continue
        help_text = "\n".join(h[1] for h in helps)
        problems += [f"{where}: --{flag} is not in its --help" for flag in flags_of(args)
                     if not flag_listed(flag, help_text)]
  return problems


def entries_needed(text: str) -> set[tuple]:
  """The entry points (and subcommands) whose --help `command_problems` will ask for."""
  needed = set()
  for language, _, lines in split_fences(text)[1]:
    if language not in SHELL_FENCES:
      continue
    for _, line in logical_lines(lines):
      for command in split_commands(line):
        parsed = parse_command(command)
        if parsed and parsed[0] == "python" and checkable(parsed[1]) and not entry_problem(parsed[1]):
          entry, args = parsed[1], parsed[2]
          needed.add(entry)
          if args and re.fullmatch(r"[a-z][a-z_]*", args[0]):
            needed.add(entry + (args[0],))
  return needed


# One process imports the libraries the entry points share (TensorFlow, JAX, Beam: most of a --help's
# seconds) and forks a child per entry point, which runs it as `python -m` / `python PATH` would with
# --help; CODELM_VERBOSE=1 keeps quiet.py's stderr filter process out of the children.
HELP_SERVER = r"""
import json, os, runpy, sys, tempfile, traceback
root, entries = sys.argv[1], [tuple(e) for e in json.loads(sys.argv[2])]
os.chdir(root)
os.environ["CODELM_VERBOSE"] = "1"
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
for name in ("tensorflow", "jax", "flax.linen", "optax", "gin", "apache_beam", "seqio", "sentencepiece"):
  try:
    __import__(name)
  except Exception:
    pass
results, running = {}, {}

def start(entry):
  out = tempfile.TemporaryFile()
  pid = os.fork()
  if pid == 0:
    os.dup2(out.fileno(), 1)
    os.dup2(out.fileno(), 2)
    code = 0
    try:
      if entry[0] == "-m":
        sys.argv = [entry[1], *entry[2:], "--help"]
        sys.path[0] = root
        runpy.run_module(entry[1], run_name="__main__", alter_sys=True)
      else:
        sys.argv = [entry[0], *entry[1:], "--help"]
        sys.path[0] = os.path.dirname(os.path.join(root, entry[0]))
        runpy.run_path(os.path.join(root, entry[0]), run_name="__main__")
    except SystemExit as stop:
      code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
      if isinstance(stop.code, str):
        print(stop.code, file=sys.stderr)
    except BaseException:
      traceback.print_exc()
      code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
  running[pid] = (entry, out)

todo = list(entries)
while todo or running:
  while todo and len(running) < 4:
    start(todo.pop())
  pid, status = os.wait()
  entry, out = running.pop(pid)
  out.seek(0)
  results[json.dumps(entry)] = (os.waitstatus_to_exitcode(status), out.read().decode("utf-8", "replace"))
print(json.dumps(results))
"""


def run_helps(entries: set[tuple]) -> dict[tuple, tuple[int, str]]:
  """(return code, stdout + stderr) of each entry point's --help, run in children of one process."""
  env = {k: v for k, v in os.environ.items() if k != "CODELM_VERBOSE"}
  done = subprocess.run([sys.executable, "-c", HELP_SERVER, str(ROOT), json.dumps(sorted(entries))],
                        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
  assert done.returncode == 0, done.stderr[-3000:]
  return {tuple(json.loads(k)): tuple(v) for k, v in json.loads(done.stdout.splitlines()[-1]).items()}


@pytest.fixture(scope="session")
def real_help():
  """--help of every entry point the docs name, run once per session."""
  entries = set()
  for path in markdown_files():
    entries |= entries_needed(path.read_text(encoding="utf-8"))
  results = run_helps(entries)

  def help_of(entry):
    if entry not in results:
      results.update(run_helps({entry}))
    return results[entry]

  return help_of


# ---------------------------------------------------------------- the checks on the real docs

@pytest.mark.parametrize("path", markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_and_image_resolves(path):
  assert link_problems(path.read_text(encoding="utf-8"), path.parent) == []


@pytest.mark.parametrize("path", markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_command_names_an_entry_point_and_flags_its_help_lists(path, real_help):
  assert command_problems(path.read_text(encoding="utf-8"), real_help) == []


def test_the_docs_are_checked_at_all():
  """The docs hold commands and links, so the two checks above cannot pass by finding nothing."""
  text = "\n".join(p.read_text(encoding="utf-8") for p in markdown_files())
  entries = entries_needed(text)
  assert ("train.py",) in entries and ("-m", "evaluation.score") in entries and len(entries) > 20
  assert len(LINK.findall(text)) > 20


# ---------------------------------------------------------------- the checks on made-up markdown

FAKE_HELP = {("train.py",): (0, "usage: train.py [--gin_file GIN_FILE] ... --gin.NAME=VALUE"),
             ("-m", "evaluation.score"): (0, "usage: score [--predictions P] [--k K] [--runner RUNNER]"),
             ("-m", "evaluation.prompts"): (0, "usage: prompts {humaneval,typed} ..."),
             ("-m", "evaluation.prompts", "humaneval"): (0, "usage: prompts humaneval [--output O] [--limit N]")}


def fake_help(entry):
  return FAKE_HELP.get(entry, (0, ""))


def test_a_broken_link_an_image_and_an_anchor_are_caught(tmp_path):
  (tmp_path / "there.md").write_text("# A heading, with `code`\n")
  (tmp_path / "img.png").write_bytes(b"")
  text = ("[ok](there.md) ![ok](img.png) [ok](there.md#a-heading-with-code) [web](https://x.org/none)\n"
          "[broken](missing.md) ![gone](fig/none.png) [bad anchor](there.md#nowhere)\n"
          "```\n[not a link](inside-a-code-block.md)\n```\n")
  assert link_problems(text, tmp_path) == ["line 2: missing.md: no such file", "line 2: fig/none.png: no such file",
                                           "line 2: there.md#nowhere: no heading with anchor #nowhere"]


def test_an_unknown_module_script_or_make_target_is_caught():
  text = ("```\n"
          "python -m evaluation.humaneval_typed --output x.jsonl\n"
          "python bench/no_such_bench.py --size small\n"
          "make demo && make no_such_target\n"
          "python -m MODULE --anything   # a placeholder: not checked\n"
          "pip install -e '.[hf]'  # another tool: not checked\n"
          "```\n")
  assert command_problems(text, fake_help) == [
      "line 2: python -m evaluation.humaneval_typed --output x.jsonl: no module evaluation.humaneval_typed "
      "(python -m evaluation.humaneval_typed)",
      "line 3: python bench/no_such_bench.py --size small: no script bench/no_such_bench.py",
      "line 4: make no_such_target: no make target no_such_target"]


def test_an_unknown_flag_is_caught_across_continuations_prefixes_and_joined_commands():
  text = ("```\n"
          "$ CODELM_VERBOSE=1 python -m evaluation.score --predictions p.jsonl \\\n"
          "    [--k 1,25] --no_such_flag && .venv/bin/python train.py --gin_file=x.gin \\\n"
          "    --gin.MODEL_DIR=\"'runs/a b'\" --steps 3 ; python -m evaluation.prompts humaneval --limit 2 --bad\n"
          "python -m evaluation.score --runner DirectRunner --direct_num_workers 2 --nope a|b  # --not_a_flag\n"
          "```\n"
          "```python\npython -m evaluation.score --ignored_in_python_blocks\n```\n")
  assert command_problems(text, fake_help) == [
      "line 2: CODELM_VERBOSE=1 python -m evaluation.score --predictions p.jsonl [--k 1,25] --no_such_flag: "
      "--no_such_flag is not in its --help",
      "line 2: .venv/bin/python train.py --gin_file=x.gin --gin.MODEL_DIR=\"'runs/a b'\" --steps 3: "
      "--steps is not in its --help",
      "line 2: python -m evaluation.prompts humaneval --limit 2 --bad: --bad is not in its --help",
      "line 5: python -m evaluation.score --runner DirectRunner --direct_num_workers 2 --nope a|b: "
      "--nope is not in its --help"]


def test_an_unknown_flag_of_a_real_entry_point_is_caught(real_help):
  text = "```\npython -m evaluation.passk_typo\npython sample.py --no_such_flag\n```\n"
  problems = command_problems(text, real_help)
  assert len(problems) == 2 and "no module evaluation.passk_typo" in problems[0]
  assert problems[1].endswith("--no_such_flag is not in its --help")
