"""Hypothesis's own reproduction aids work through the suite (README: "Hypothesis's
own reproduction"): the ci profile's blob and ``--hypothesis-seed``."""

from __future__ import annotations

import re
import subprocess
import sys

TUTORIAL_GRAD_INPUT = ("--impl", "conv_impl.tutorial", "-k", "test_grad_input and conv2d]")
EINSUM_FORWARD = ("--impl", "conv_impl.einsum", "-k", "test_forward and conv2d]")


def test_the_ci_profile_prints_a_reproduce_failure_blob(run_pytest):
    done = run_pytest(*TUTORIAL_GRAD_INPUT, env={"HYPOTHESIS_PROFILE": "ci"})
    assert done.returncode == 1, done.stdout[-3000:]
    # "this example ... on your test case" until Hypothesis 6.16x, "this test case ...
    # on your test function" since
    assert re.search(r"You can reproduce this (example|test case) by temporarily adding "
                     r"@reproduce_failure\('[\d.]+', b'[^']+'\)", done.stdout), done.stdout[-3000:]


def _features(run_pytest, tmp_path, seed: int) -> str:
    """The run summary's features line of a random (not derandomised) search."""
    done = run_pytest(*EINSUM_FORWARD, f"--hypothesis-seed={seed}",
                      env={"HYPOTHESIS_PROFILE": "dev",
                           "HYPOTHESIS_STORAGE_DIRECTORY": str(tmp_path / "hypothesis")})
    assert done.returncode == 0, done.stdout[-3000:]
    (line,) = re.findall(r"^\s*features covered: .*$", done.stdout, re.M)
    return line


def test_hypothesis_seed_repeats_the_same_random_search(run_pytest, tmp_path):
    first, again = _features(run_pytest, tmp_path, 7), _features(run_pytest, tmp_path, 7)
    assert first == again
    assert _features(run_pytest, tmp_path, 8) != first


#: a process that imports a local module holding one literal in a range no other
#: constant falls in, then counts how often a derandomised search draws it
_LITERAL_DRAWS = """
import sys
sys.path.insert(0, sys.argv[1])
from hypothesis import given, settings, strategies as st
from conv_harness.profiles import without_local_constants
if sys.argv[2] == "left out":
    assert without_local_constants()
import literal_module
drawn = []
@settings(max_examples=400, derandomize=True, database=None)
@given(st.integers(10**12, 10**12 + 10**9))
def search(n):
    drawn.append(n)
search()
print(drawn.count(literal_module.LITERAL))
"""


def test_the_harness_tests_draw_no_constants_of_local_modules(tmp_path):
    """Hypothesis draws literals of the local modules a process has imported, so a
    derandomised search would find what it finds depending on the modules loaded
    before it and on every literal of the harness's code (conv_harness/profiles.py). The
    harness's in-process tests leave them out: in a process that does as tests/harness/conftest.py,
    a module's literal is never drawn; in one that does not, it is."""
    from tests.harness.conftest import LOCAL_CONSTANTS_LEFT_OUT, PROJECT_ROOT
    assert LOCAL_CONSTANTS_LEFT_OUT, "Hypothesis's internals moved: see conv_harness/profiles.py"
    (tmp_path / "literal_module.py").write_text("LITERAL = 10**12 + 777_777\n"
                                                "VALUE = 1000000777777\n")
    counts = {}
    for mode in ("left out", "kept"):
        done = subprocess.run([sys.executable, "-c", _LITERAL_DRAWS, str(tmp_path), mode],
                              cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        counts[mode] = int(done.stdout.split()[-1])
    assert counts["left out"] == 0 and counts["kept"] > 0, counts
