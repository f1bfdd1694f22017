"""examples/: the suite run on each shipped example, as a user runs it, and its verdict.

The NumPy layer classes are correct, so the suite passes on them: one run
with all four as ``--impl``, on the four checks against torch (and the
regression corpus), with few examples each (a Hypothesis profile of our own,
tests/harness/layers/_examples_profile.py). Whether the adapter maps each
layout, order and scaling right is pinned in test_adapters.py; these runs
pin that the files work end to end, named as the user named them, and that
the summary reports what their CAPABILITIES leave out.

examples/jax_conv.py runs only where JAX is installed (the optional extra
``.[jax]``). Its verdict is recorded, not forced: results past the harness's
rounding bound are a real precision limit of the library, and the test
asserts that they are reported as exactly that, a tolerance mismatch, never
hidden by a looser tolerance or turned into a crash.
"""

from __future__ import annotations

import json
import os
import re

import pytest

from tests.harness.conftest import PROJECT_ROOT

LAYERS = PROJECT_ROOT / "tests" / "harness" / "layers"
TORCH_CHECKS = ("forward", "grad_input", "grad_weight", "grad_bias")
# The checks against torch (test_conformance.py has one more, "repeatable").
SUITE = ("tests/conformance/test_conformance.py", "-k", "not test_repeatable")

NUMPY_EXAMPLES = {  # file stem -> the op it provides
    "nhwc_layer": "conv2d",
    "torchlike_layer": "conv2d",
    "flipped_kernel_layer": "conv2d",
    "conv1d_layer": "conv1d",
}
# What a plain layer class cannot do, so its adapter declares it not and the
# run says so; the torch-like layer declares (and does) all of it.
NOT_DECLARED = ["dilation > 1", "groups > 1", "bias=None",
                "non-square kernel/stride/padding/dilation"]


def run_examples(run_pytest, *args, examples: int, timeout: float = 300):
    """The suite with ``examples`` Hypothesis examples per test, derandomised."""
    path = os.pathsep.join(p for p in (str(LAYERS), os.environ.get("PYTHONPATH")) if p)
    return run_pytest("-p", "_examples_profile", *args, timeout=timeout, env={
        "PYTHONPATH": path, "HYPOTHESIS_PROFILE": "examples-quick",
        "EXAMPLES_MAX_EXAMPLES": str(examples)})


def summary_block(stdout: str, name: str) -> str:
    """The run summary's lines for implementation ``name`` (conv_harness/reporting/summary.py)."""
    match = re.search(rf"^{re.escape(name)} \[.*?\]: .*?(?=^\S|\Z)", stdout, re.M | re.S)
    assert match, f"no summary for {name}:\n{stdout}"
    return match.group(0)


def test_the_numpy_examples_pass_the_suite(run_pytest, tmp_path):
    impls = [arg for stem in NUMPY_EXAMPLES for arg in ("--impl", f"examples/{stem}.py")]
    result = run_examples(run_pytest, *impls, *SUITE, "tests/conformance/test_regressions.py",
                          "--conv-regressions", "all", "-rA", examples=10)
    out = result.stdout
    assert result.returncode == 0, out + result.stderr
    for stem, op in NUMPY_EXAMPLES.items():
        for check in TORCH_CHECKS:
            assert f"PASSED tests/conformance/test_conformance.py::test_{check}[{stem}-{op}]" \
                in out, (stem, check)
        block = summary_block(out, stem)
        assert block.startswith(f"{stem} [examples/{stem}.py]: passed\n"), block
        examples = int(re.search(r"examples tried: (\d+)", block).group(1))
        assert examples >= 10 * len(TORCH_CHECKS), block
        excluded = re.search(r"not generated \(its CAPABILITIES\): (.*)", block)
        if stem == "torchlike_layer":
            assert excluded is None, block
            for feature in ("dilation > 1", "groups > 1", "bias None", "non-square"):
                assert f"{feature} (" in block, (feature, block)
        else:
            assert excluded and excluded.group(1).split(", ") == NOT_DECLARED, block
    # The 2-D ones also replay the regression corpus (the tutorial's shrunk cases,
    # replayed against them because --conv-regressions all asks for it).
    for stem, op in NUMPY_EXAMPLES.items():
        if op == "conv2d":
            assert re.search(rf"PASSED tests/conformance/test_regressions.py::test_regression\[{stem}-",
                             out), stem
    assert not [p for p in (tmp_path / "failures").glob("**/*.json") if p.name != "summary.json"]


# ------------------------------------------------------------------ JAX

JAX_OPS = ("conv1d", "conv2d", "conv3d")
#: What this test saw, for the record (JAX 0.10.2, CPU, 10 examples per test):
#: every check passed for every op and dtype, float16 included; see the module
#: docstring of examples/jax_conv.py for why float16 stays within the bound.
PRECISION_REPORT = re.compile(
    r"elements off; largest error \S+ at index .*\(allowed \S+\)\n"
    r"tolerance: (?P<dtype>float\d+) \(u=\S+\), reduction length K=\d+")


def test_the_jax_example_verdict(run_pytest, tmp_path, record_property):
    jax = pytest.importorskip(
        "jax", reason="JAX is not installed; examples/jax_conv.py is an optional extra "
                      "(pip install -e '.[jax]')")
    result = run_examples(run_pytest, "--impl", "examples/jax_conv.py", *SUITE, "-rA",
                          examples=10, timeout=900)
    out = result.stdout
    block = summary_block(out, "jax_conv")
    record_property("jax_version", jax.__version__)
    record_property("jax_verdict", block.splitlines()[0])
    print(block)  # the verdict, in this test's captured output (-rA shows it)
    assert result.returncode in (0, 1), out + result.stderr

    # Every check ran on every op: nothing was left out by an error of the example.
    for check in TORCH_CHECKS:
        for op in JAX_OPS:
            assert re.search(rf"(PASSED|FAILED) tests/conformance/test_conformance.py::"
                             rf"test_{check}\[jax_conv-{op}\]", out), (check, op)
    # It declares every feature, and the run generated them.
    assert "not generated (its CAPABILITIES)" not in block, block
    for feature in ("dilation > 1", "groups > 1", "bias None", "non-square", "dtype float16"):
        assert f"{feature} (" in block, (feature, block)

    failures = [json.loads(p.read_text()) for p in sorted((tmp_path / "failures").glob("**/*.json"))
                if p.name != "summary.json"]
    assert (result.returncode == 1) == bool(failures), out
    for record in failures:
        # A failure is a library's precision limit, reported as one: its result
        # exceeded the rounding bound of its dtype, in float16 (float32 and
        # float64 with jax_enable_x64 must be right), and the report says so.
        message = record["message"]
        match = PRECISION_REPORT.search(message)
        assert match, f"not a tolerance mismatch (a broken example?):\n{message}"
        assert record["params"]["dtype"] == match["dtype"] == "float16", message
        assert record["check"] in TORCH_CHECKS, record["check"]
        assert f"FAILED tests/conformance/test_conformance.py::test_{record['check']}" \
               f"[jax_conv-{record['op']}]" in out
    if not failures:
        assert block.startswith("jax_conv [examples/jax_conv.py]: passed\n"), block
