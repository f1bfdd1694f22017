"""The conformance checks: an implementation's results against the oracle's.

Each check is a plain function of (implementation, case) that returns quietly
or raises `CheckFailure`; the pytest suite is a thin loop of ``@given`` tests
around them, and the harness's own tests call them directly.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from harness import oracle
from harness.calling import CheckFailure, call_backward, call_forward
from harness.compare import compare
from harness.loader import Implementation
from harness.problem import ConvCase
from harness.tolerance import tolerance

GRADIENTS: tuple[str, ...] = ("grad_input", "grad_weight", "grad_bias")
ORACLE_CHECKS: tuple[str, ...] = ("forward", *GRADIENTS)
CHECKS: tuple[str, ...] = (*ORACLE_CHECKS, "repeatable")


def _against_oracle(check: str, name: str, actual: np.ndarray, case: ConvCase) -> None:
    expected = oracle.reference(case)[name]
    mismatch = compare(name, actual, expected, tolerance(case, name, oracle.magnitudes(case)))
    if mismatch is not None:
        raise CheckFailure(check, mismatch.report())


def check_forward(impl: Implementation, case: ConvCase, timeout: float | None = None) -> None:
    y = call_forward(impl.function(case.problem.op), case, timeout)
    _against_oracle("forward", "y", y, case)


def check_gradient(impl: Implementation, case: ConvCase, which: str,
                   timeout: float | None = None) -> None:
    """Check one gradient (``grad_input``, ``grad_weight`` or ``grad_bias``)."""
    grads = dict(zip(GRADIENTS, call_backward(
        impl.function(case.problem.spec.backward_name), case, timeout)))
    if grads[which] is None:  # no bias: call_backward has checked grad_bias is None
        return
    _against_oracle(which, which, grads[which], case)


def check_repeatable(impl: Implementation, case: ConvCase, timeout: float | None = None) -> None:
    """The same inputs give bit-identical results on a second call."""
    op = case.problem.op
    backward = case.problem.spec.backward_name
    calls: list[tuple[str, tuple[str, ...], Callable[[], tuple]]] = []
    if impl.has(op):
        calls.append((op, ("y",), lambda: (call_forward(impl.function(op), case, timeout),)))
    if impl.has(backward):
        calls.append((backward, GRADIENTS,
                      lambda: call_backward(impl.function(backward), case, timeout)))
    for name, labels, call in calls:
        first, second = call(), call()
        for label, a, b in zip(labels, first, second):
            if a is not None and a.tobytes() != b.tobytes():
                differ = int(np.count_nonzero(a != b))
                raise CheckFailure(
                    "repeatable",
                    f"{name} gave a different {label} for the same inputs on a second call "
                    f"({differ} of {a.size} elements differ, largest difference "
                    f"{float(np.max(np.abs(a.astype(np.float64) - b))):.3g})")


def run_check(check: str, impl: Implementation, case: ConvCase,
              timeout: float | None = None) -> None:
    """Run the check called ``check`` (one of `CHECKS`)."""
    if check == "forward":
        check_forward(impl, case, timeout)
    elif check in GRADIENTS:
        check_gradient(impl, case, check, timeout)
    elif check == "repeatable":
        check_repeatable(impl, case, timeout)
    else:
        raise ValueError(f"unknown check {check!r}; expected one of {CHECKS}")


def needed_function(check: str, op: str) -> str | None:
    """The contract function a check calls (None: any of the op's functions)."""
    if check == "forward":
        return op
    if check in GRADIENTS:
        return f"{op}_backward"
    return None
