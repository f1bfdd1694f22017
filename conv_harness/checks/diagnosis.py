"""What exactly is wrong with one call of an implementation.

A property check (adjoint, linearity, finite differences, ...) sees that
something is off, not which result of which call: its failure may come from
a call on a problem it derived from the drawn one (a stacked batch, a split
input). `diagnose` compares every result of every call the check made with
the reference on that call's own problem, so a failure is reported as what
it is (``grad_input`` wrong, say) and on the problem that shows it. The
reference is torch in float64 when it is importable, else the NumPy float64
closed form of conv_harness/checks/closed_form.py, under the same rounding-error bound.
"""

from __future__ import annotations

from typing import Callable

from conv_harness.checks import oracle
from conv_harness.checks.closed_form import closed_forms, magnitudes
from conv_harness.checks.compare import compare
from conv_harness.checks.tolerance import declared_arithmetic, tolerance
from conv_harness.problem import ConvCase
from conv_harness.running.calling import (
    Call, CheckFailure, Observed, Timeout, call_backward, call_forward)
from conv_harness.running.loader import Implementation

#: the results each kind of function returns, named as the checks name them
FORWARD_RESULTS: tuple[str, ...] = ("y",)
BACKWARD_RESULTS: tuple[str, ...] = ("grad_input", "grad_weight", "grad_bias")
#: what a wrong result is called as a failure: the oracle check that compares it
VALUE_KIND = {"y": "forward", "grad_input": "grad_input", "grad_weight": "grad_weight",
              "grad_bias": "grad_bias"}


def reference(case: ConvCase, gradients: bool = True):
    """float64 results and sums of |terms| of ``case``: torch's, else NumPy's closed form;
    without ``gradients``, torch's forward alone (its gradients None)."""
    if oracle.torch_available():
        return oracle.evaluate(case, gradients)
    return closed_forms(case), magnitudes(case)


def value_failures(impl: Implementation, call: Call) -> list[CheckFailure]:
    """Each result of ``call`` that is off the reference by more than its bound (under
    the arithmetic ``impl`` declares for the function called)."""
    if call.results is None:
        return []
    forward = len(call.results) == 1
    expected, magnitude = reference(call.case, gradients=not forward)
    names = FORWARD_RESULTS if forward else BACKWARD_RESULTS
    arithmetic = declared_arithmetic(impl, (call.function,))
    out = []
    for name, actual in zip(names, call.results):
        if actual is None or expected[name] is None:
            continue
        mismatch = compare(name, actual, expected[name],
                           tolerance(call.case, name, magnitude, arithmetic))
        if mismatch is not None:
            out.append(CheckFailure(VALUE_KIND[name], mismatch.report(), function=call.function,
                                    case=call.case))
    return out


def attribute(impl: Implementation, calls: list[Call]) -> list[CheckFailure]:
    """The wrong results among ``impl``'s ``calls``, in the order the calls were made."""
    return [failure for call in calls for failure in value_failures(impl, call)]


def diagnose(impl: Implementation, function: str, case: ConvCase,
             timeout: Timeout) -> list[CheckFailure]:
    """Everything wrong with one call of ``function`` on ``case``: contract and values."""
    caller: Callable = call_backward if function.endswith("_backward") else call_forward
    seen = Observed()
    try:
        caller(impl.function(function), case, timeout, seen)
    except CheckFailure as failure:
        return [failure.on(function, case), *seen.deferred]
    return attribute(impl, seen.calls) + seen.deferred
