"""One conformance example: draw a case, run a check, record a final failure.

The ``@given`` tests in tests/conformance are one line each around `run`.
"""

from __future__ import annotations

from hypothesis import strategies as st
from hypothesis.control import current_build_context

from harness.calling import CheckFailure
from harness.checks import REGISTRY, run_check
from harness.failures import case_record, save_case
from harness.plugin import Target
from harness.problem import ConvCase
from strategies import conv_cases


def failure_text(target: Target, case: ConvCase, failure: CheckFailure) -> str:
    return (f"check {failure.check!r} failed for {target.impl.spec} {case.problem.op}\n"
            f"problem: {case.problem.describe()}\n{failure.message}")


def run(target: Target, check: str, data: st.DataObject) -> None:
    """Draw a case for ``target`` and run ``check`` on it.

    Only the final (shrunk) example writes its case file: Hypothesis replays
    it once more after shrinking, with ``is_final`` set.
    """
    custom = REGISTRY[check].cases
    caps = target.impl.capabilities
    strategy = custom(target.op, caps) if custom else conv_cases(target.op, capabilities=caps)
    case = data.draw(strategy, label="case")
    try:
        run_check(check, target.impl, case, target.timeout)
    except CheckFailure as failure:
        text = failure_text(target, case, failure)
        if current_build_context().is_final:
            path = save_case(target.failures_dir,
                             case_record(target.impl.spec, case, failure.check, text),
                             target.impl.name)
            text += f"\ncase saved to {path}"
        raise CheckFailure(failure.check, text) from None
