"""Every check can fail, each on its own known bug; no check flags a correct algorithm."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import Phase, find, given, settings

from conv_harness.checks.registry import REGISTRY, run_check
from conv_harness.problem import OPS, ConvCase, ConvProblem
from conv_harness.running.loader import load_implementation
from strategies import conv_cases
from tests.harness.conftest import QUIET, fails

HERE = Path(__file__).parent
ORACLE_AND_REPEAT = ("forward", "grad_input", "grad_weight", "grad_bias", "repeatable")
# Finding a failure is the point here, not shrinking it (test_shrinking.py does that).
FIND_ONLY = settings(max_examples=300, phases=[Phase.generate], **QUIET)


def impl(module: str, name: str):
    return load_implementation(f"{HERE / module}:{name}")


CAUGHT_BY = {
    "float32_inside": "forward",
    "float16_accumulation": "forward",
    "wrong_forward": "forward",
    "wrong_grad_weight": "grad_weight",
    "wrong_grad_bias": "grad_bias",
    "not_repeatable": "repeatable",
}


@pytest.mark.parametrize("bug", sorted(CAUGHT_BY))
def test_each_known_bug_is_caught_by_its_check(bug):
    target = impl("known_bugs.py", bug)
    find(conv_cases("conv2d", capabilities=target.capabilities),
         lambda case: fails(CAUGHT_BY[bug], target, case),
         settings=FIND_ONLY)


@pytest.mark.parametrize("bug", sorted(CAUGHT_BY))
def test_each_known_bug_is_caught_by_no_other_check(bug):
    target = impl("known_bugs.py", bug)
    others = [c for c in ORACLE_AND_REPEAT if c != CAUGHT_BY[bug] and REGISTRY[c].applies_to(
        target, "conv2d")]

    @settings(max_examples=25, **QUIET)
    @given(case=conv_cases("conv2d", capabilities=target.capabilities))
    def no_other_check_fails(case):
        for check in others:
            run_check(check, target, case)

    no_other_check_fails()


def test_the_tutorial_is_caught_by_grad_input():
    target = load_implementation("conv_impl.tutorial")
    find(conv_cases("conv2d", capabilities=target.capabilities),
         lambda case: fails("grad_input", target, case), settings=FIND_ONLY)


@pytest.mark.parametrize("name", ["fft", "float16_accumulation", "reversed_order"])
def test_correct_algorithms_that_round_differently_pass(name):
    target = impl("other_algorithms.py", name)

    @settings(max_examples=150, **QUIET)
    @given(case=conv_cases("conv2d", capabilities=target.capabilities))
    def forward_holds(case):
        run_check("forward", target, case)

    forward_holds()


def test_the_normwise_floor_survives_values_whose_squares_underflow():
    """FFT is off by about u*|x|*|w| even where the exact result is 0 (a window
    of padding only); with |w| near 1e-250 the naive norm squares to 0 and the
    floor vanished (a false alarm Hypothesis found)."""
    target = impl("other_algorithms.py", "fft")
    problem = ConvProblem(op="conv2d", batch=1, in_channels=1, out_channels=1, input_size=(1, 1),
                          kernel_size=(1, 1), stride=(1, 1), padding=(0, 1), dilation=(1, 1),
                          groups=1, bias=False, dtype="float64")
    case = ConvCase(problem=problem, x=np.full((1, 1, 1, 1), 2.0),
                    weight=np.full((1, 1, 1, 1), 1.1131828e-250), bias=None,
                    grad_output=np.zeros(problem.output_shape))
    y = target.function("conv2d")(case.x, case.weight, None, **problem.kwargs())
    assert y[0, 0, 0, 2] != 0  # FFT's rounding where the exact result is 0
    run_check("forward", target, case)


def test_every_registered_check_has_its_conformance_test():
    from conv_harness.conformance import test_conformance, test_properties

    generated = {name for module in (test_conformance, test_properties)
                 for name in vars(module) if name.startswith("test_")}
    assert generated == {f"test_{name}" for name in REGISTRY}


def test_a_check_is_added_in_one_place_its_registration(monkeypatch):
    """Registering a check is all it takes: its test is generated, in the module it
    names, with its marker, and skipped unless its opt-in option is given."""
    from conv_harness.checks.check import Check
    from conv_harness.conformance.generate import conformance_tests

    monkeypatch.setitem(REGISTRY, "always_passes", Check(
        "always_passes", lambda impl, case, timeout: None, (), oracle=False,
        test_module="test_new", opt_in=("--conv-new", "new checks are opt-in: --conv-new")))
    (name, test), = conformance_tests("test_new").items()
    assert name == test.__name__ == "test_always_passes"
    marks = {mark.name: mark for mark in test.pytestmark}
    assert marks["conv_check"].args == ("always_passes",)
    assert marks["skipif"].kwargs["reason"] == "new checks are opt-in: --conv-new"
    assert "--conv-new" in marks["skipif"].args[0]
    assert hasattr(test, "hypothesis")  # a @given test of the drawn data


def test_the_forward_oracle_alone_gives_the_same_result_and_magnitude():
    """The forward check asks torch for the forward alone (its backward is most of a
    small problem's torch time); what it gets is what the full call gives."""
    from conv_harness.checks import oracle
    from strategies.cases import noise_case

    for op in ("conv1d", "conv_transpose2d"):
        nd = OPS[op].spatial_dims
        problem = ConvProblem.from_params(op, dict(
            batch=2, in_channels=2, out_channels=4, input_size=[5] * nd, kernel_size=[3] * nd,
            stride=[2] * nd, padding=[1] * nd, dilation=[1] * nd, groups=2, bias=True,
            dtype="float32"))
        case = noise_case(problem)
        (full, full_size), (alone, alone_size) = oracle.evaluate(case), oracle.evaluate(
            case, gradients=False)
        assert np.array_equal(full.y, alone.y) and np.array_equal(full_size.y, alone_size.y)
        assert alone.grad_input is alone.grad_weight is alone.grad_bias is None
