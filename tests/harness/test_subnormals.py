"""The subnormal policy: flushing subnormals to zero passes, flushing normal numbers fails.

Both sides are pinned with the known implementations of flushing.py, and the
data are pinned to keep reaching the bottom of each dtype's range.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import Phase, find, given, settings

from conv_harness.checks import oracle
from conv_harness.checks.registry import run_check
from conv_harness.checks.tolerance import (
    FLUSH_NOTE,
    Arithmetic,
    flushed,
    note_flushes,
    smallest_normal,
    tolerance,
)
from conv_harness.problem import ConvCase, ConvProblem
from conv_harness.records import coverage
from conv_harness.records.failures import case_record
from conv_harness.records.script import render_script
from conv_harness.running.calling import CheckFailure, Observed
from conv_harness.running.loader import load_implementation
from conv_harness.running.target import Target
from conv_harness.searching import suite
from conv_harness.searching.state import TestState
from strategies import conv_cases
from strategies.cases import NOISE_KINDS, noise
from tests.harness.conftest import QUIET, fails

HERE = Path(__file__).parent
ORACLE_CHECKS = ("forward", "grad_input", "grad_weight", "grad_bias")


def flushing(name: str):
    return load_implementation(f"{HERE / 'flushing.py'}:{name}")


def one_by_one(dtype: str, x: float, w: float = 1.0, op: str = "conv2d") -> ConvCase:
    n = {"conv1d": 1, "conv3d": 3}.get(op, 2)
    problem = ConvProblem(op=op, batch=1, in_channels=1, out_channels=1, input_size=(1,) * n,
                          kernel_size=(1,) * n, stride=(1,) * n, padding=(0,) * n,
                          dilation=(1,) * n, groups=1, bias=False, dtype=dtype)
    full = lambda v: np.full((1,) * (n + 2), v, dtype=dtype)  # noqa: E731
    return ConvCase(problem=problem, x=full(x), weight=full(w), bias=None,
                    grad_output=full(1.0))


# -- the bound ------------------------------------------------------------------

@pytest.mark.parametrize("dtype,value", [("float32", 3.9e-39), ("float64", 7.4e-309)])
def test_a_flushed_subnormal_result_is_within_the_bound(dtype, value):
    """Issue 15's false alarms: XLA and oneDNN returned 0 for these 1x1 results."""
    case = one_by_one(dtype, value)
    expected, magnitude = oracle.evaluate(case)
    tol = tolerance(case, "y", magnitude, Arithmetic())
    assert expected.y.item() != 0 and tol.bound.item() >= abs(expected.y.item())
    run_check("forward", flushing("flushes_subnormals"), case)


def test_a_flushed_normal_result_is_not():
    """9e-31 is 1e8 times float32's smallest normal number: flushing it is a bug."""
    case = one_by_one("float32", 9e-31)
    with pytest.raises(CheckFailure, match="got 0.0"):
        run_check("forward", flushing("flushes_below_1e30"), case)
    # and just below 2**10 smallest normals, in every dtype
    for dtype in ("float16", "float32", "float64"):
        just_below = 0.75 * 2**10 * smallest_normal(dtype)
        assert fails("forward", flushing("flushes_normals"), one_by_one(dtype, just_below))


def test_subnormal_operands_read_as_zero_are_allowed_but_no_more():
    """DAZ: x subnormal, w = 4 over 8 terms gives a normal result, and 0 is allowed;
    the allowance for a flushed operand stops at lambda * |other factor| per term."""
    lam = smallest_normal("float32")
    problem = ConvProblem(op="conv2d", batch=1, in_channels=8, out_channels=1,
                          input_size=(1, 1), kernel_size=(1, 1), stride=(1, 1),
                          padding=(0, 0), dilation=(1, 1), groups=1, bias=False,
                          dtype="float32")
    x = np.full((1, 8, 1, 1), 0.75 * lam, dtype=np.float32)
    case = ConvCase(problem=problem, x=x, weight=np.full((1, 8, 1, 1), 4, dtype=np.float32),
                    bias=None, grad_output=np.ones((1, 1, 1, 1), dtype=np.float32))
    expected, magnitude = oracle.evaluate(case)
    assert expected.y.item() > lam  # a normal result, from subnormal inputs
    tol = tolerance(case, "y", magnitude, Arithmetic())
    zero = np.zeros_like(expected.y)
    assert np.all(np.abs(zero - expected.y) <= tol.bound)
    assert flushed(zero, expected.y, tol)
    # with x normal (2 * lambda), the same 0 is far outside the bound
    normal = ConvCase(problem=problem, x=x * 4, weight=case.weight, bias=None,
                      grad_output=case.grad_output)
    expected, magnitude = oracle.evaluate(normal)
    assert np.all(np.abs(expected.y) > tolerance(normal, "y", magnitude, Arithmetic()).bound)


def test_the_bound_is_unchanged_away_from_the_bottom_of_the_range():
    """At ordinary values the flush allowance is 2K smallest normals: nothing."""
    case = one_by_one("float32", 1 / 3, 3.0)
    expected, magnitude = oracle.evaluate(case)
    tol = tolerance(case, "y", magnitude, Arithmetic())
    assert tol.flush == pytest.approx(2 * 2 * smallest_normal("float32"), rel=1e-6)
    assert tol.bound.item() < 1e-6


def test_the_scripts_bound_is_the_harness_bound():
    """conv_harness/records/script.py restates the bound; both give the same number, also with
    subnormal operands."""
    lam = smallest_normal("float32")
    rng = np.random.default_rng(1)
    problem = ConvProblem(op="conv2d", batch=2, in_channels=2, out_channels=3,
                          input_size=(4, 3), kernel_size=(2, 2), stride=(1, 1),
                          padding=(1, 0), dilation=(1, 1), groups=1, bias=True, dtype="float32")
    shapes = problem.shapes()
    arrays = {name: (rng.uniform(-4, 4, shapes[name]) * lam).astype(np.float32)
              for name in ("x", "weight", "bias", "grad_output")}
    arrays["weight"] = rng.uniform(-4, 4, shapes["weight"]).astype(np.float32)
    case = ConvCase(problem=problem, **arrays)
    record = case_record("conv_impl.einsum", case, "forward", "message")
    namespace: dict = {"__name__": "not_main"}
    exec(compile(render_script(record, case), "script", "exec"), namespace)
    expected, magnitude = oracle.evaluate(case)
    for name in ("y", "grad_input", "grad_weight", "grad_bias"):
        ours = tolerance(case, name, magnitude, Arithmetic()).bound
        theirs = namespace["allowed"](name, magnitude[name])
        np.testing.assert_allclose(theirs, ours, rtol=1e-12, atol=0)


# -- the data ---------------------------------------------------------------------

def test_tiny_is_the_last_noise_kind():
    """Shrinking heads for the first kinds: tiny values never enter a case that
    does not need them (test_shrinking.py pins the shrunk cases themselves)."""
    assert NOISE_KINDS[0] == "none" and NOISE_KINDS[-1] == "tiny"


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_tiny_values_reach_subnormals_and_small_normal_numbers(dtype):
    lam = smallest_normal(dtype)
    values = np.abs(np.concatenate([noise("tiny", dtype, (64,), seed) for seed in range(200)]))
    assert values.max() <= 4 * 2**(10 if dtype == "float16" else 24) * lam
    assert np.any((values > 0) & (values < lam))  # subnormal
    assert np.any((values > 2**6 * lam) & (values < 2**10 * lam))  # small normal numbers
    if dtype == "float32":
        assert np.any((values > 1e-33) & (values < 1e-31))  # around 1e-32


# -- the suite, both ways ----------------------------------------------------------

@pytest.mark.parametrize("op", ["conv2d", "conv1d", "conv_transpose2d", "conv3d"])
def test_an_implementation_that_flushes_subnormals_passes(op):
    """DAZ and FTZ (also on its partial sums), as XLA and oneDNN do on CPU: every
    check against torch passes on drawn cases, and on a case whose result it flushes,
    which the run notes as flushed."""
    target = flushing("flushes_subnormals")
    subnormal = one_by_one("float32", 3.9e-39, op=op)
    for check in ORACLE_CHECKS:
        run_check(check, target, subnormal)
    expected, magnitude = oracle.evaluate(subnormal)
    y = target.function(op)(subnormal.x, subnormal.weight, None, **subnormal.problem.kwargs())
    assert flushed(y, expected.y, tolerance(subnormal, "y", magnitude, Arithmetic()))

    @settings(max_examples=150, phases=[Phase.generate], **QUIET)
    @given(case=conv_cases(op))
    def every_check_passes(case):
        for check in ORACLE_CHECKS:
            run_check(check, target, case)

    every_check_passes()


@pytest.mark.parametrize("name,check", [("flushes_below_1e30", "forward"),
                                        ("flushes_normals", "forward"),
                                        ("flushes_normals", "grad_input"),
                                        ("flushes_normals", "grad_weight")])
def test_an_implementation_that_flushes_normal_numbers_fails(name, check):
    target = flushing(name)
    find(conv_cases("conv2d", capabilities=target.capabilities),
         lambda case: fails(check, target, case),
         settings=settings(max_examples=300, phases=[Phase.generate], **QUIET))


def test_the_correct_implementation_is_never_noted_as_flushing():
    target = load_implementation("conv_impl.einsum")

    @settings(max_examples=150, phases=[Phase.generate], **QUIET)
    @given(case=conv_cases("conv2d"))
    def never_flushed(case):
        expected, magnitude = oracle.evaluate(case)
        y = target.function("conv2d")(case.x, case.weight, case.bias, **case.problem.kwargs())
        assert not flushed(y, expected.y, tolerance(case, "y", magnitude, Arithmetic()))

    never_flushed()


def test_notes_travel_from_the_check_into_the_tally(tmp_path):
    case = one_by_one("float32", 3.9e-39)
    expected, magnitude = oracle.evaluate(case)
    tol = tolerance(case, "y", magnitude, Arithmetic())
    seen = Observed()
    note_flushes(np.zeros_like(expected.y), expected.y, tol, seen)
    note_flushes(expected.y, expected.y, tol, seen)  # exact: nothing to note
    note_flushes(np.zeros_like(expected.y), expected.y, tol, None)  # no check: not noted
    assert seen.notes == {FLUSH_NOTE: 1}
    # a flushing implementation's check, as the search runs it: its note reaches the tally
    state = TestState()
    target = Target(flushing("flushes_subnormals"), "conv2d", None, tmp_path)
    assert suite.examined(state, "forward", target, case) == []
    state.tally.record(["dtype float32"])
    features, notes = coverage.split(state.tally.features)
    assert features == {"examples": 1, "dtype float32": 1}
    assert notes == {FLUSH_NOTE: 1}
