"""The checks of results against torch's, and of repeatability: the conformance
suite's own (conv_harness/conformance/test_conformance.py); the oracle-free properties are
in conv_harness/checks/properties.py. Each registers itself in conv_harness.checks.check's
REGISTRY; conv_harness/checks/registry.py imports both.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from conv_harness.checks import oracle, threads
from conv_harness.checks.check import Check, register
from conv_harness.checks.compare import compare
from conv_harness.checks.tolerance import declared_arithmetic, tolerance
from conv_harness.problem import ConvCase
from conv_harness.running.calling import (CheckFailure, Observed, Timeout, call_backward,
                                          call_forward)
from conv_harness.running.loader import Implementation

GRADIENTS: tuple[str, ...] = ("grad_input", "grad_weight", "grad_bias")


def _against_oracle(check: str, name: str, actual: np.ndarray, case: ConvCase,
                    impl: Implementation, function: str, seen: Observed | None) -> None:
    expected, magnitude = oracle.evaluate(case, gradients=name != "y")
    arithmetic = declared_arithmetic(impl, (function,))
    mismatch = compare(name, actual, expected[name],
                       tolerance(case, name, magnitude, arithmetic), seen)
    if mismatch is not None:
        raise CheckFailure(check, mismatch.report(), function=function, case=case)


def check_forward(impl: Implementation, case: ConvCase, timeout: Timeout = None,
                  seen: Observed | None = None) -> None:
    y = call_forward(impl.function(case.problem.op), case, timeout, seen)
    _against_oracle("forward", "y", y, case, impl, case.problem.op, seen)


def check_gradient(impl: Implementation, case: ConvCase, which: str,
                   timeout: Timeout = None,
                   seen: Observed | None = None) -> None:
    """Check one gradient (``grad_input``, ``grad_weight`` or ``grad_bias``)."""
    grads = dict(zip(GRADIENTS, call_backward(
        impl.function(case.problem.spec.backward_name), case, timeout, seen)))
    if grads[which] is None:  # no bias: call_backward has checked grad_bias is None
        return
    _against_oracle(which, which, grads[which], case, impl,
                    case.problem.spec.backward_name, seen)


def check_repeatable(impl: Implementation, case: ConvCase, timeout: Timeout = None,
                     seen: Observed | None = None) -> None:
    """The same inputs give bit-identical results on a second call; for an implementation
    on torch, also results within the rounding bound of each other on one thread and on
    several (`threads.compare_thread_counts`)."""
    op = case.problem.op
    backward = case.problem.spec.backward_name
    calls: list[tuple[str, tuple[str, ...], Callable[[], tuple]]] = []
    if impl.has(op):
        calls.append((op, ("y",), lambda: (call_forward(impl.function(op), case, timeout, seen),)))
    if impl.has(backward):
        calls.append((backward, GRADIENTS,
                      lambda: call_backward(impl.function(backward), case, timeout, seen)))
    for name, labels, call in calls:
        first, second = call(), call()
        for label, a, b in zip(labels, first, second):
            if a is not None and a.tobytes() != b.tobytes():
                differ = int(np.count_nonzero(a != b))
                raise CheckFailure(
                    "repeatable",
                    f"{name} gave a different {label} for the same inputs on a second call "
                    f"({differ} of {a.size} elements differ, largest difference "
                    f"{float(np.max(np.abs(a.astype(np.float64) - b))):.3g})",
                    function=name, case=case)
    if impl.capabilities.function(case.problem.op).arrays == "torch" and oracle.torch_available():
        for name, labels, call in calls:
            threads.compare_thread_counts(name, labels, call, case,
                                          declared_arithmetic(impl, (name,)))


register(Check("forward", check_forward, ("forward",), oracle=True,
               test_module="test_conformance",
               description="the result against torch's"))
for _which in GRADIENTS:
    register(Check(_which, lambda impl, case, timeout, seen, _w=_which: check_gradient(
        impl, case, _w, timeout, seen), ("backward",), oracle=True, test_module="test_conformance",
        description=f"{_which} against torch autograd's"))
register(Check("repeatable", check_repeatable, (), oracle=False,
               test_module="test_conformance",
               description="bit-identical results on a second call with the same inputs"))
