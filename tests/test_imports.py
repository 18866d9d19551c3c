"""Imports go one way: the graph of project modules has no cycle, and no library module imports an
entry point.

The graph is read from the source with `ast` (nothing is imported, so no JAX or TensorFlow start-up):
every `import` and `from ... import` of a project module, at module level and inside functions alike,
since a function-level import only hides a circle until the function runs. Imports under
`if TYPE_CHECKING:` are left out: they never run.
"""

from __future__ import annotations

import ast
import functools
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SKIPPED = {"tests", "docs", "codelm.egg-info"}  # at the root; and every dot-folder (.venv, .toolchains, ...)
# Run, never imported: `python train.py`, `python sample.py`, `python demo.py`, the test corpus builder;
# the scripts of bench/ are run too. (A `python -m` module's own main() is not one of these: its module
# is a library others may import.)
ENTRY_POINTS = ("train", "sample", "demo", "code_corpus")


def project_modules() -> dict[str, str]:
  """Dotted module name -> path, for every .py file of the project."""
  modules = {}
  for folder, subfolders, files in os.walk(ROOT):
    subfolders[:] = sorted(s for s in subfolders if not s.startswith(".") and not (folder == ROOT and s in SKIPPED))
    for file in files:
      if file.endswith(".py"):
        parts = os.path.relpath(os.path.join(folder, file), ROOT)[:-len(".py")].split(os.sep)
        if parts[-1] == "__init__":
          parts = parts[:-1]
        modules[".".join(parts)] = os.path.join(folder, file)
  return modules


def _executed(tree: ast.AST):
  """Every node but those under `if TYPE_CHECKING:`, which never runs (annotations only)."""
  for node in ast.iter_child_nodes(tree):
    if isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
      yield from (n for child in node.orelse for n in [child, *_executed(child)])
      continue
    yield node
    yield from _executed(node)


def imported(name: str, path: str, modules: dict[str, str]) -> set[str]:
  """The project modules `name` imports anywhere in its file."""
  with open(path, encoding="utf-8") as f:
    tree = ast.parse(f.read(), path)
  package = name if path.endswith("__init__.py") else name.rpartition(".")[0]
  found = set()

  def add(dotted: str) -> None:
    if dotted.partition(".")[0] in ENTRY_POINTS:  # code_corpus lives in tests/, outside the graph's nodes
      dotted = dotted.partition(".")[0]
    while dotted and dotted not in modules and dotted not in ENTRY_POINTS:  # `import a.b.c`, c a name in a.b
      dotted = dotted.rpartition(".")[0]
    if dotted and dotted != name:
      found.add(dotted)

  for node in _executed(tree):
    if isinstance(node, ast.Import):
      for alias in node.names:
        add(alias.name)
    elif isinstance(node, ast.ImportFrom):
      base = node.module or ""
      if node.level:  # relative: from the package, up level - 1 packages
        anchor = package.split(".")[:len(package.split(".")) - (node.level - 1)]
        base = ".".join(anchor + ([base] if base else []))
      for alias in node.names:  # `from a import b` imports the module a.b where b is one
        add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base)
  return found


@functools.cache
def import_graph() -> dict[str, set[str]]:
  modules = project_modules()
  return {name: imported(name, path, modules) for name, path in modules.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
  """One cycle of the graph as a path that starts and ends at the same module, or None."""
  state: dict[str, int] = {}  # 1: on the current path, 2: done
  path: list[str] = []

  def visit(node: str) -> list[str] | None:
    state[node] = 1
    path.append(node)
    for target in sorted(graph.get(node, ())):
      if state.get(target) == 1:
        return path[path.index(target):] + [target]
      if target not in state and (cycle := visit(target)):
        return cycle
    state[node] = 2
    path.pop()
    return None

  for node in sorted(graph):
    if node not in state and (cycle := visit(node)):
      return cycle
  return None


def test_the_graph_sees_the_project():
  graph = import_graph()
  assert {"storage", "data.tasks", "objectives.ul2", "evaluation.score", "sandbox.renderers.cpp"} <= set(graph)
  assert "sandbox.renderers.base" in graph["sandbox.renderers.cpp"]
  assert "storage" in graph["data.tasks"]


def test_find_cycle_names_the_circle():
  assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
  assert find_cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


def test_no_import_cycles():
  cycle = find_cycle(import_graph())
  assert cycle is None, ("import cycle: " + " -> ".join(cycle) + " (a function-level import counts too: "
                         "move what both need below both)")


def test_no_library_module_imports_an_entry_point():
  graph = import_graph()
  library = {name for name in graph if name not in ENTRY_POINTS and not name.startswith("bench.")}
  offending = sorted(f"{name} imports {target}" for name in library for target in graph[name]
                     if target in ENTRY_POINTS)
  assert not offending, "entry points are run, not imported: " + "; ".join(offending)


def test_the_built_package_holds_every_module_the_packages_import():
  """A built codelm (what Beam's workers install) holds only pyproject.toml's `packages` and
  `py-modules`: every package folder of the project and every top-level module a package imports must
  be listed (sandbox.renderers was not: a worker would have had no language to score)."""
  import tomllib

  with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
    setuptools = tomllib.load(f)["tool"]["setuptools"]
  packages, top_modules = set(setuptools["packages"]), set(setuptools["py-modules"])
  graph = import_graph()
  packaged = {name for name in graph if name.partition(".")[0] in {p.partition(".")[0] for p in packages}}
  folders = {name if os.path.basename(project_modules()[name]) == "__init__.py" else name.rpartition(".")[0]
             for name in packaged}
  assert not folders - packages, f"package folders missing from pyproject's packages: {sorted(folders - packages)}"
  needed = {target for name in packaged for target in graph[name] if "." not in target and target not in packages}
  assert not needed - top_modules, f"top-level modules the packages import, missing from py-modules: " \
                                   f"{sorted(needed - top_modules)}"


# The two packages of evaluation and execution: the benchmarks (one sub-package of evaluation/ each),
# and the sandbox that runs their programs.
def benchmark_of(module: str) -> str | None:
  """The benchmark sub-package a module belongs to (evaluation.iterative.run -> evaluation.iterative)."""
  parts = module.split(".")
  if parts[0] == "evaluation" and len(parts) >= 2 and os.path.isdir(os.path.join(ROOT, "evaluation", parts[1])) \
      and os.path.exists(os.path.join(ROOT, "evaluation", parts[1], "__init__.py")):
    return ".".join(parts[:2])
  return None


def boundary_violations(graph: dict[str, set[str]]) -> list[str]:
  """Imports across the seams: a benchmark importing another benchmark; the sandbox importing
  sampling/, data/ or evaluation/ (a benchmark or the scoring built on it)."""
  found = []
  for name, targets in sorted(graph.items()):
    for target in sorted(targets):
      mine, theirs = benchmark_of(name), benchmark_of(target)
      if mine and theirs and mine != theirs:
        found.append(f"{name} imports {target}: a benchmark never imports another (share it through "
                     "evaluation/'s shared modules)")
      if name.partition(".")[0] == "sandbox" and target.partition(".")[0] in ("sampling", "data", "evaluation"):
        found.append(f"{name} imports {target}: the sandbox knows nothing of sampling, data or benchmarks")
  return found


def test_the_boundary_check_names_each_kind_of_crossing():
  graph = {"evaluation.iterative.tasks": {"evaluation.humaneval.questions", "evaluation.benchmark_data"},
           "sandbox.renderers.base": {"sampling.stops", "languages"}, "sandbox.judge": {"data.tasks"},
           "sandbox.batching": {"evaluation.iterative.protocol"}, "evaluation.score": {"evaluation.humaneval.questions"}}
  found = boundary_violations(graph)
  assert len(found) == 4, found
  assert any("evaluation.iterative.tasks imports evaluation.humaneval.questions" in f for f in found)
  assert any(f.startswith("sandbox.renderers.base imports sampling.stops") for f in found)
  assert any(f.startswith("sandbox.judge imports data.tasks") for f in found)
  assert any(f.startswith("sandbox.batching imports evaluation.iterative.protocol") for f in found)


def test_benchmarks_and_the_sandbox_stay_on_their_side_of_the_seams():
  graph = import_graph()
  assert {"evaluation.humaneval", "evaluation.iterative", "evaluation.practical"} <= {
      benchmark_of(name) for name in graph}
  violations = boundary_violations(graph)
  assert not violations, "\n".join(violations)


def module_names(path: str) -> set[str] | None:
  """The names a module binds at its top level (definitions, assignments, imports, at any depth of
  if / try / with / for blocks, never inside a function or class); None when it star-imports or
  defines __getattr__ (its names cannot be read from the source)."""
  with open(path, encoding="utf-8") as f:
    tree = ast.parse(f.read(), path)
  names: set[str] = set()

  def bind(target: ast.AST) -> None:
    for node in ast.walk(target):
      if isinstance(node, ast.Name):
        names.add(node.id)

  def visit(body) -> bool:
    for node in body:
      if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        names.add(node.name)
      elif isinstance(node, (ast.Import, ast.ImportFrom)):
        for alias in node.names:
          if alias.name == "*":
            return False
          names.add(alias.asname or alias.name.partition(".")[0])
      elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        for target in getattr(node, "targets", [getattr(node, "target", None)]):
          bind(target)
      elif isinstance(node, (ast.For, ast.With)):
        bind(node.target if isinstance(node, ast.For) else ast.Tuple([i.optional_vars for i in node.items
                                                                       if i.optional_vars], ast.Load()))
      for block in ("body", "orelse", "finalbody", "handlers"):
        if isinstance(node, (ast.If, ast.Try, ast.For, ast.While, ast.With, ast.ExceptHandler)) and \
            hasattr(node, block) and not visit(getattr(node, block)):
          return False
    return True

  return names if visit(tree.body) and "__getattr__" not in names else None


def missing_names(importer: str, path: str, modules: dict[str, str]) -> list[str]:
  """`from PROJECT_MODULE import NAME` lines of `path` whose NAME the module neither binds nor has as a
  submodule (a refactor that moved NAME elsewhere and missed a caller: an ImportError at run time)."""
  with open(path, encoding="utf-8") as f:
    tree = ast.parse(f.read(), path)
  found = []
  for node in _executed(tree):
    if not isinstance(node, ast.ImportFrom) or node.level or node.module not in modules:
      continue
    bound = module_names(modules[node.module])
    if bound is None:
      continue
    for alias in node.names:
      if alias.name not in bound and f"{node.module}.{alias.name}" not in modules:
        found.append(f"{importer}:{node.lineno}: from {node.module} import {alias.name}: "
                     f"{node.module} has no {alias.name}")
  return found


def test_every_name_imported_from_a_project_module_is_there(tmp_path):
  modules = project_modules()
  fixture = tmp_path / "fixture.py"
  fixture.write_text("from sampling import predictions\nfrom sampling.predictions import read_prompts, nothing_here\n"
                     "def f():\n  from evaluation.practical import score_predictions\n")
  assert missing_names("fixture", str(fixture), modules) == [
      "fixture:2: from sampling.predictions import nothing_here: sampling.predictions has no nothing_here",
      "fixture:4: from evaluation.practical import score_predictions: evaluation.practical has no "
      "score_predictions"]
  tests = {f"tests.{name[:-3]}": os.path.join(ROOT, "tests", name) for name in os.listdir(os.path.join(ROOT, "tests"))
           if name.endswith(".py")}
  # The tests import the project's modules (and one another, as top-level names: not checked here).
  missing = [m for name, path in sorted({**modules, **tests}.items()) for m in missing_names(name, path, modules)]
  assert not missing, "\n".join(missing)
