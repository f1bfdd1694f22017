"""The registry of conformance checks, complete: importing this module registers
every check (conv_harness/checks/against_torch.py, then conv_harness/checks/properties.py,
in the order the suite lists them), and `examine` / `run_check` run one by name.

Each check is a plain function of (implementation, case) that returns quietly
or raises `CheckFailure`; the pytest suite is generated from the registry
(conv_harness/conformance/generate.py), and the harness's own tests call the checks
directly.
"""

from __future__ import annotations

# They register their checks, in this order (the suite's):
from conv_harness.checks import against_torch, properties  # noqa: F401
from conv_harness.checks import threads
from conv_harness.checks.check import REGISTRY
from conv_harness.checks.diagnosis import attribute
from conv_harness.problem import ConvCase
from conv_harness.running.calling import CheckFailure, Observed, Timeout
from conv_harness.running.loader import Implementation

#: kinds of failure that no check of their own name finds: the check that does
PRODUCED_BY: dict[str, str] = {threads.THREAD_COUNT: "repeatable"}


def examine(name: str, impl: Implementation, case: ConvCase, timeout: Timeout = None,
            seen: Observed | None = None) -> list[CheckFailure]:
    """Every failure the registered check ``name`` sees on ``case``, most telling first.

    The check's own failure comes first, or, for a property check, the wrong
    results it traces back to (`conv_harness.checks.diagnosis.attribute`), each on the
    problem of the call that returned it; then the deferred ones (a wrong
    dtype, an input changed in place), which never hide a value comparison.
    Each failure names the call that failed (``function``, ``case``). ``seen``: where
    to keep what the check saw beside its failures (its calls' warnings, its notes),
    for a caller that counts them.
    """
    try:
        check = REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown check {name!r}; expected one of {sorted(REGISTRY)}") from None
    seen = seen if seen is not None else Observed()
    try:
        check.run(impl, case, timeout, seen)
        failures: list[CheckFailure] = []
    except CheckFailure as failure:
        failures = [failure]
        if check.attribute and failure.check == name:
            failures = attribute(impl, seen.calls) or failures
    failures += [f for f in seen.deferred
                 if not any(f.check == g.check and f.function == g.function for g in failures)]
    for failure in failures:
        if failure.case is None:
            failure.case = case
    return failures


def run_check(name: str, impl: Implementation, case: ConvCase,
              timeout: Timeout = None) -> None:
    """Run the registered check called ``name``; raise its first failure (`examine`)."""
    failures = examine(name, impl, case, timeout)
    if failures:
        raise failures[0]
