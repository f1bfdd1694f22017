"""examples/README.md's "Found in the wild" table is current, lists every script, and
each script still shows its bug where its library is installed.

Opt-in like tests/harness/test_frameworks.py: a script runs only where its library
is importable (none of them is a dependency; CI installs none), and is skipped
with the reason otherwise. When one fails here, the library has changed: if the
bug is fixed upstream, say so in tools/found_in_the_wild.py's row and retire the
script.
"""

from __future__ import annotations

import importlib.util

import pytest

from tools import found_in_the_wild as fw


def test_table_is_current():
    text = fw.README.read_text(encoding="utf-8")
    assert fw.BEGIN in text and fw.END in text
    assert fw.between(text, fw.BEGIN, fw.END, fw.table()) == text, (
        "examples/README.md's table is stale: run python tools/found_in_the_wild.py")


def test_every_script_is_a_row_and_every_row_a_script():
    scripts = {path.name for path in fw.SCRIPTS.glob("*.py")}
    assert scripts == {finding.script for finding in fw.FINDINGS}
    for finding in fw.FINDINGS:  # at least valid Python where the library is absent
        compile(finding.path.read_text(encoding="utf-8"), str(finding.path), "exec")


@pytest.mark.parametrize("finding", fw.FINDINGS, ids=lambda f: f.script.removesuffix(".py"))
def test_script_still_shows_its_bug(finding: fw.Finding):
    if importlib.util.find_spec(finding.module) is None:
        pytest.skip(f"{finding.module} is not installed (not a dependency of the project)")
    result = fw.run(finding)
    assert fw.outcome(result) in finding.shows.split(" or "), (
        result.returncode, result.stdout[-2000:], result.stderr[-2000:])
