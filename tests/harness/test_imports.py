"""The project's imports flow one way: no module imports, directly or through
others, a module that imports it (tools/import_graph.py reads them, function
bodies included); no module imports another's private name; and
docs/architecture.md's layer list is the current one.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tools.import_graph import (
    FOLDER_LAYERS,
    PACKAGES,
    PAGE,
    ROOT,
    find_cycle,
    group_of,
    import_graph,
    layer_text,
    layers,
    private_imports,
    pytest_importers,
    render,
    upward_imports,
)


def test_imports_run_down_the_folder_layers():
    """Each folder imports only from itself and the folders below it (docs/architecture.md),
    so no two folders import each other; pytest only in the wiring and the suite."""
    graph = import_graph(ROOT, PACKAGES)
    assert all(group_of(name) for name in graph), [n for n in graph if not group_of(n)]
    assert upward_imports(graph) == []
    assert pytest_importers(ROOT, PACKAGES) == []


def test_an_import_up_the_layers_is_named():
    graph = {"conv_harness.records.failures": {"conv_harness.triage.catalog"},
             "conv_harness.triage.catalog": {"conv_harness.problem"},
             "conv_harness.checks.oracle": {"conv_impl.einsum"},
             "conv_harness.problem": set(), "conv_impl.einsum": set()}
    assert upward_imports(graph) == [
        "conv_harness.checks.oracle -> conv_impl.einsum (checks imports conv_impl)",
        "conv_harness.records.failures -> conv_harness.triage.catalog (the problem and its "
        "records imports triage)"]
    assert [group for group, _ in FOLDER_LAYERS][:3] == [
        "settings", "the problem and its records", "running"]


def test_no_import_cycle():
    graph = import_graph(ROOT, PACKAGES)
    assert "conv_harness.plugin" in graph and "conv_impl.einsum" in graph
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


def test_layers_put_every_module_above_what_it_imports(tiny_project: Path):
    (tiny_project / "pkg" / "sub" / "c.py").write_text("def late():\n    import pkg.sub\n")
    graph = import_graph(tiny_project, ("pkg",))
    depth = {name: n for n, names in enumerate(layers(graph)) for name in names}
    assert depth == {"pkg.sub": 0, "pkg.sub.c": 1, "pkg.sub.b": 2, "pkg.a": 3, "pkg": 4}
    for name, imported in graph.items():
        assert all(depth[m] < depth[name] for m in imported)


def test_architecture_page_is_current():
    text = PAGE.read_text(encoding="utf-8")
    assert "<!-- import-layers:begin -->" in text
    assert render(text, layer_text(import_graph(ROOT, PACKAGES))) == text, (
        "docs/architecture.md's import layers are stale: run python tools/import_graph.py")


def test_no_private_name_is_imported_from_another_module():
    """What several modules need is a public name of the module that owns it."""
    found = private_imports(ROOT, PACKAGES)
    assert not found, "private names imported across modules:\n" + "\n".join(found)


def test_a_private_import_is_found_and_a_private_module_is_not(tiny_project: Path):
    (tiny_project / "pkg" / "sub" / "_inner.py").write_text("def _helper():\n    pass\n")
    (tiny_project / "pkg" / "sub" / "d.py").write_text(
        "from pkg.sub import _inner\nfrom pkg.sub._inner import _helper\n")
    assert private_imports(tiny_project, ("pkg",)) == [
        "pkg/sub/d.py:2: from pkg.sub._inner import _helper"]
