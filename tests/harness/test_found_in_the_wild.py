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
import json
import subprocess
import sys

import pytest

from tests.harness.conftest import PROJECT_ROOT
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
    if finding.cpu_dependent and result.returncode == 0:
        pytest.skip(f"{finding.module}'s bug does not show on this CPU: {result.stdout[-500:]}")
    assert fw.outcome(result) in finding.shows.split(" or "), (
        result.returncode, result.stdout[-2000:], result.stderr[-2000:])


#: the suite's own minimal cases of the MLX and OpenVINO findings, as its runs saved them
CASES = sorted((fw.SCRIPTS / "cases").glob("*.json"))
ADAPTER_NEEDS = {"examples/mlx_conv.py": "mlx", "examples/openvino_conv.py": "openvino"}


def _replay(case, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           f"--replay={case}", *args], cwd=PROJECT_ROOT,
                          capture_output=True, text=True, timeout=600)


def test_every_case_has_its_adapter():
    assert CASES
    for case in CASES:
        assert json.loads(case.read_text())["impl"] in ADAPTER_NEEDS, case.name


@pytest.mark.parametrize("case", CASES, ids=lambda p: p.stem)
def test_harness_still_finds_it_through_the_adapter(case, tmp_path):
    """``pytest --replay`` of the suite's minimal case fails against the library's adapter
    and passes against conv_impl.einsum (the case itself is sound)."""
    needs = ADAPTER_NEEDS[json.loads(case.read_text())["impl"]]
    if importlib.util.find_spec(needs) is None:
        pytest.skip(f"{needs} is not installed (not a dependency of the project)")
    failures = ("--conv-failures", str(tmp_path))
    still = _replay(case, *failures)
    assert still.returncode == 1, still.stdout[-3000:]
    right = _replay(case, "--impl", "conv_impl.einsum", *failures)
    assert right.returncode == 0, right.stdout[-3000:]
