"""The project's imports flow one way: no module imports, directly or through
others, a module that imports it.

The walk is static (``ast``), so it also sees the imports inside functions that
only run late: a circle hidden in a function body still ties the modules
together and turns into an ImportError as soon as someone moves the import up.
A package's own ``__init__`` is not counted as imported by its submodules
(Python runs it first, but an ``__init__`` importing its submodules is no
circle).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from graphlib import CycleError, TopologicalSorter

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("harness", "strategies", "conv_impl")


def module_name(path: Path, root: Path) -> str:
    """``harness/checks/registry.py`` -> ``harness.checks.registry``."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported_modules(path: Path, name: str, known: set[str]) -> set[str]:
    """Every module of ``known`` that the file at ``path`` imports, anywhere in it."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()

    def add(target: str) -> None:
        # `import a.b.c` binds a.b.c's innermost known module; so does `from a.b import c`
        # when c is a module; else the name is an attribute of a.b.
        while target and target not in known:
            target = target.rpartition(".")[0]
        if target and target != name:
            found.add(target)

    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            for alias in node.names:
                add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base)
    return found


def import_graph(root: Path, packages: tuple[str, ...]) -> dict[str, set[str]]:
    """Module name -> the project modules it imports."""
    files = {module_name(path, root): path
             for package in packages for path in sorted((root / package).rglob("*.py"))}
    known = set(files)
    return {name: imported_modules(path, name, known) for name, path in files.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle as ``[a, b, ..., a]``, or None."""
    try:
        TopologicalSorter(graph).prepare()
    except CycleError as error:
        cycle = list(error.args[1])
        return cycle[::-1]  # graphlib lists it against the import direction
    return None


def test_no_import_cycle():
    graph = import_graph(ROOT, PACKAGES)
    assert "harness.plugin" in graph and "conv_impl.einsum" in graph
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


@pytest.fixture
def tiny_project(tmp_path: Path) -> Path:
    """A package whose modules import each other in a circle, one of them inside a
    function, one of them relative."""
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("from pkg import a\n")
    (package / "a.py").write_text("from pkg.sub import b\n")
    (package / "sub" / "__init__.py").write_text("")
    (package / "sub" / "b.py").write_text("from . import c\n")
    (package / "sub" / "c.py").write_text("def late():\n    import pkg.a\n")
    return tmp_path


def test_a_cycle_is_found_and_named(tiny_project: Path):
    graph = import_graph(tiny_project, ("pkg",))
    assert graph["pkg.sub.b"] == {"pkg.sub.c"}
    assert graph["pkg.sub.c"] == {"pkg.a"}
    cycle = find_cycle(graph)
    assert cycle is not None
    assert cycle[0] == cycle[-1]
    assert set(cycle) == {"pkg.a", "pkg.sub.b", "pkg.sub.c"}
    for importer, imported in zip(cycle, cycle[1:]):
        assert imported in graph[importer]


def test_no_cycle_once_it_is_cut(tiny_project: Path):
    (tiny_project / "pkg" / "sub" / "c.py").write_text("def late():\n    import pkg.sub\n")
    assert find_cycle(import_graph(tiny_project, ("pkg",))) is None
