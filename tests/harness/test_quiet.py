"""Issue 20, item 4: the harness raises no warnings of its own, and the
implementation's are counted per implementation and shown once in the summary
(the first message and the count), in text and summary.json.
"""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

from conv_harness.checks.compare import compare
from conv_harness.checks.tolerance import Tolerance
from conv_harness.running.calling import Heard, Observed, silenced


def test_a_huge_error_over_a_tiny_bound_is_a_mismatch_without_a_warning():
    """error / bound overflowed to inf with a RuntimeWarning in the user's run."""
    expected = np.array([1e-310, 0.0, 1.0])
    actual = np.array([1e300, np.inf, 1.0])
    tol = Tolerance(bound=np.array([0.0, 1e-300, 1e-15]), dtype="float64", terms=1, floor=0.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        mismatch = compare("y", actual, expected, tol)
    assert mismatch is not None and mismatch.count == 2  # still caught: the check can fail
    assert mismatch.index in {(0,), (1,)}


def test_the_implementations_warnings_are_counted_with_the_first_message():
    """Into what a check saw, call after call; another check's start at 0; without
    one they are kept out of the run all the same."""
    heard = Heard()
    for i in range(3):
        with silenced(heard):
            warnings.warn(f"call {i}", UserWarning)
    assert heard.count == 3 and heard.first.startswith("UserWarning: call 0 (test_quiet.py:")
    assert Observed().heard == Heard()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with silenced():
            warnings.warn("outside a test", UserWarning)


@pytest.mark.long
def test_warnings_of_the_code_under_test_are_shown_once_in_the_summary(run_pytest, tmp_path):
    done = run_pytest("--impl", "tests/harness/broken/noisy.py", "-n", "2",
                      "-k", "test_forward and conv2d]", "--conv-budget", "2",
                      "--conv-failures", tmp_path / "f")
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    assert "warnings summary" not in out and "NOISY-CALL-WARNING" not in out.split(
        "convolution harness summary")[0]
    [record] = json.loads((tmp_path / "f" / "summary.json").read_text())["implementations"]
    count, first = record["warnings"]["count"], record["warnings"]["first"]
    # the import's warning first, then one per call
    assert first == "UserWarning: NOISY-IMPORT-WARNING (noisy.py:10)"
    assert count >= 2
    summary = done.stdout.split("convolution harness summary")[1]
    assert summary.count("warnings it raised") == 1
    assert f"warnings it raised (on import and in its calls): {count}; the first: {first}" \
        in summary
