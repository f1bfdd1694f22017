"""The project's import graph, read statically, and the layers it makes.

Every import of every module of conv_harness/, strategies/ and conv_impl/ is read
with ``ast``, including the imports inside functions that only run late: a
circle hidden in a function body still ties the modules together and turns into
an ImportError as soon as someone moves the import up. A package's own
``__init__`` is not counted as imported by its submodules (Python runs it
first, but an ``__init__`` importing its submodules is no circle).

    python tools/import_graph.py          # rewrite docs/architecture.md's layer list
    python tools/import_graph.py --print  # print it

tests/harness/test_imports.py fails on a cycle and when the page is not current.
"""

from __future__ import annotations

import ast
import sys
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

try:
    from tools.markers import between
except ImportError:  # run as a script: tools/ is on the path
    from markers import between

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("conv_harness", "strategies", "conv_impl")


def module_name(path: Path, root: Path) -> str:
    """``conv_harness/checks/registry.py`` -> ``conv_harness.checks.registry``."""
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


def private_imports(root: Path, packages: tuple[str, ...]) -> list[str]:
    """``file:line: from M import _name`` for each private name a project module imports
    from another project module (a private module of a package, ``from conv_impl
    import _winograd``, is a module, not a name: it is not listed)."""
    files = {module_name(path, root): path
             for package in packages for path in sorted((root / package).rglob("*.py"))}
    found = []
    for name, path in files.items():
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if not isinstance(node, ast.ImportFrom) or node.level or not node.module \
                    or node.module not in files or node.module == name:
                continue
            for alias in node.names:
                private = alias.name.startswith("_") and not alias.name.startswith("__")
                if private and f"{node.module}.{alias.name}" not in files:
                    found.append(f"{path.relative_to(root)}:{node.lineno}: from "
                                 f"{node.module} import {alias.name}")
    return found


#: The folders (and single modules) of the project, bottom first: each imports only from
#: its own group and the groups below it (docs/architecture.md draws them). A module
#: belongs to the group of its longest listed prefix.
FOLDER_LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    # what both ways of running read: the options' names and defaults, the profiles
    ("settings", ("conv_harness.options", "conv_harness.profiles")),
    ("the problem and its records", ("conv_harness.problem", "conv_harness.descriptor",
                                     "conv_harness.ties", "conv_harness.specs",
                                     "conv_harness.cores", "conv_harness.records")),
    ("running", ("conv_harness.running",)),
    ("strategies", ("strategies",)),
    ("checks", ("conv_harness.checks",)),
    ("triage", ("conv_harness.triage",)),
    ("searching", ("conv_harness.searching",)),
    ("reporting", ("conv_harness.reporting",)),
    ("the in-process run", ("conv_harness.run",)),
    ("the pytest wiring", ("conv_harness",)),
    ("the suite", ("conv_harness.conformance",)),
)
#: the project's own implementation: it imports none of the harness
SEPARATE = ("conv_impl",)
#: the groups whose modules may import pytest
PYTEST_GROUPS = ("the pytest wiring", "the suite")


def group_of(module: str) -> str:
    """The `FOLDER_LAYERS` group (or `SEPARATE` package) ``module`` belongs to."""
    best, length = "", -1
    for group, prefixes in FOLDER_LAYERS + tuple((p, (p,)) for p in SEPARATE):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > length:
                best, length = group, len(prefix)
    return best


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """``a -> b (group A imports group B above it)`` for each import that runs up the
    folder layers, or between `SEPARATE` and the harness."""
    rank = {group: n for n, (group, _) in enumerate(FOLDER_LAYERS)}
    found = []
    for name, imported in sorted(graph.items()):
        for other in sorted(imported):
            mine, theirs = group_of(name), group_of(other)
            if mine == theirs:
                continue
            if mine in SEPARATE or theirs in SEPARATE or rank[theirs] > rank[mine]:
                found.append(f"{name} -> {other} ({mine} imports {theirs})")
    return found


def pytest_importers(root: Path, packages: tuple[str, ...]) -> list[str]:
    """The modules outside `PYTEST_GROUPS` that import pytest (anywhere in them)."""
    found = []
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            name = module_name(path, root)
            if group_of(name) in PYTEST_GROUPS:
                continue
            for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
                names = ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                         else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
                if any(n.split(".")[0] in ("pytest", "_pytest") for n in names):
                    found.append(name)
                    break
    return found


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle as ``[a, b, ..., a]``, or None."""
    try:
        TopologicalSorter(graph).prepare()
    except CycleError as error:
        cycle = list(error.args[1])
        return cycle[::-1]  # graphlib lists it against the import direction
    return None


def layers(graph: dict[str, set[str]]) -> list[list[str]]:
    """The modules by layer: layer 0 imports no project module, layer n only modules of
    layers below n (and at least one of layer n - 1). Needs an acyclic graph."""
    depth: dict[str, int] = {}
    for name in TopologicalSorter(graph).static_order():
        depth[name] = 1 + max((depth[m] for m in graph[name]), default=-1)
    out: list[list[str]] = [[] for _ in range(max(depth.values(), default=-1) + 1)]
    for name in sorted(depth):
        out[depth[name]].append(name)
    return out


PAGE = ROOT / "docs" / "architecture.md"
BEGIN, END = "<!-- import-layers:begin -->", "<!-- import-layers:end -->"


def layer_text(graph: dict[str, set[str]]) -> str:
    """The page's generated block: one line per layer, highest first."""
    rows = []
    for number, names in reversed(list(enumerate(layers(graph)))):
        # packages' own __init__ modules import nothing: leave them out of the picture
        shown = [n for n in names if not (graph[n] == set() and (ROOT / n.replace(".", "/")).is_dir())]
        if shown:
            rows.append(f"{number:>2}  " + ", ".join(shown))
    return "```text\n" + "\n".join(rows) + "\n```"


def render(text: str, block: str) -> str:
    """The page's text with ``block`` as its layer list (unchanged without the markers)."""
    return between(text, BEGIN, END, block) or text


def main(argv: list[str]) -> int:
    graph = import_graph(ROOT, PACKAGES)
    cycle = find_cycle(graph)
    if cycle:
        print("import cycle: " + " -> ".join(cycle), file=sys.stderr)
        return 1
    block = layer_text(graph)
    if "--print" in argv:
        print(block)
        return 0
    PAGE.write_text(render(PAGE.read_text(encoding="utf-8"), block), encoding="utf-8")
    print(f"{PAGE.relative_to(ROOT)}: import layers regenerated")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
