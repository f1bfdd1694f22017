"""The conformance checks: an implementation's results against the oracle's.

Each check is a plain function of (implementation, case) that returns quietly
or raises `CheckFailure`; the pytest suite is a thin loop of ``@given`` tests
around them, and the harness's own tests call them directly.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from harness.checks import oracle, threads
from harness.checks.check import REGISTRY, Check, register
from harness.checks.compare import compare
from harness.checks.diagnosis import attribute
from harness.checks.tolerance import (declared_algorithm, declared_bfloat16_accumulation,
                                      declared_float32_precision, tolerance)
from harness.problem import ConvCase
from harness.running.calling import CheckFailure, call_backward, call_forward, observing
from harness.running.loader import Implementation

GRADIENTS: tuple[str, ...] = ("grad_input", "grad_weight", "grad_bias")
#: kinds of failure that no check of their own name finds: the check that does
PRODUCED_BY: dict[str, str] = {threads.THREAD_COUNT: "repeatable"}


def _against_oracle(check: str, name: str, actual: np.ndarray, case: ConvCase,
                    function: str) -> None:
    expected, magnitude = oracle.evaluate(case)
    mismatch = compare(name, actual, expected[name], tolerance(case, name, magnitude))
    if mismatch is not None:
        raise CheckFailure(check, mismatch.report(), function=function, case=case)


def check_forward(impl: Implementation, case: ConvCase, timeout: float | None = None) -> None:
    y = call_forward(impl.function(case.problem.op), case, timeout)
    _against_oracle("forward", "y", y, case, case.problem.op)


def check_gradient(impl: Implementation, case: ConvCase, which: str,
                   timeout: float | None = None) -> None:
    """Check one gradient (``grad_input``, ``grad_weight`` or ``grad_bias``)."""
    grads = dict(zip(GRADIENTS, call_backward(
        impl.function(case.problem.spec.backward_name), case, timeout)))
    if grads[which] is None:  # no bias: call_backward has checked grad_bias is None
        return
    _against_oracle(which, which, grads[which], case, case.problem.spec.backward_name)


def check_repeatable(impl: Implementation, case: ConvCase, timeout: float | None = None) -> None:
    """The same inputs give bit-identical results on a second call; for an implementation
    on torch, also results within the rounding bound of each other on one thread and on
    several (`threads.compare_thread_counts`)."""
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
                    f"{float(np.max(np.abs(a.astype(np.float64) - b))):.3g})",
                    function=name, case=case)
    if impl.capabilities.function(case.problem.op).arrays == "torch" and oracle.torch_available():
        for name, labels, call in calls:
            threads.compare_thread_counts(name, labels, call, case)


register(Check("forward", check_forward, ("forward",), oracle=True,
               description="the result against torch's"))
for _which in GRADIENTS:
    register(Check(_which, lambda impl, case, timeout, _w=_which: check_gradient(
        impl, case, _w, timeout), ("backward",), oracle=True,
        description=f"{_which} against torch autograd's"))
register(Check("repeatable", check_repeatable, (), oracle=False,
               description="bit-identical results on a second call with the same inputs"))


def examine(name: str, impl: Implementation, case: ConvCase,
            timeout: float | None = None) -> list[CheckFailure]:
    """Every failure the registered check ``name`` sees on ``case``, most telling first.

    The check's own failure comes first, or, for a property check, the wrong
    results it traces back to (`harness.checks.diagnosis.attribute`), each on the
    problem of the call that returned it; then the deferred ones (a wrong
    dtype, an input changed in place), which never hide a value comparison.
    Each failure names the call that failed (``function``, ``case``).
    """
    try:
        check = REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown check {name!r}; expected one of {sorted(REGISTRY)}") from None
    declared = impl.capabilities_for(check.calls(case.problem.op))
    with observing() as seen, declared_algorithm(declared.algorithm), \
            declared_float32_precision(declared.float32_precision), \
            declared_bfloat16_accumulation(declared.bfloat16_accumulation):
        try:
            check.run(impl, case, timeout)
            failures: list[CheckFailure] = []
        except CheckFailure as failure:
            failures = [failure]
            if check.attribute and failure.check == name:
                failures = attribute(seen.calls) or failures
    failures += [f for f in seen.deferred
                 if not any(f.check == g.check and f.function == g.function for g in failures)]
    for failure in failures:
        if failure.case is None:
            failure.case = case
    return failures


def run_check(name: str, impl: Implementation, case: ConvCase,
              timeout: float | None = None) -> None:
    """Run the registered check called ``name``; raise its first failure (`examine`)."""
    failures = examine(name, impl, case, timeout)
    if failures:
        raise failures[0]


# The oracle-free properties register themselves in harness.checks.check's REGISTRY:
# importing this module gives the full registry.
from harness.checks import properties  # noqa: E402,F401
