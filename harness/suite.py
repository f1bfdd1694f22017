"""One conformance example: draw a case, run a check, report a final failure.

The ``@given`` tests in tests/conformance are one line each around `run`.
A falsified check raises `CheckFailure` with the report a person pastes into
a bug report (`failure_report`); for the final (shrunk) example only, the
case is also saved as JSON with its standalone reproduction script beside it,
and the report prints that script and how to replay the case.
"""

from __future__ import annotations

import functools
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from hypothesis import event, reject
from hypothesis import strategies as st
from hypothesis.control import current_build_context

from harness.checks import oracle
from harness.checks.registry import REGISTRY, examine
from harness.plugin import Target
from harness.problem import ConvCase
from harness.reporting import coverage
from harness.reporting.failures import case_path, case_record, save_case, script_path
from harness.reporting.script import render_script
from harness.running.calling import CheckFailure
from harness.running.capabilities import Capabilities
from harness.triage.catalog import Bug
from strategies import conv_cases

VALUE_CHECKS: tuple[str, ...] = ("forward", "grad_input", "grad_weight", "grad_bias")


def failure_text(spec: str, drawn: ConvCase, failure: CheckFailure, ran: str) -> str:
    """What failed, on which problem, and by how much (no script, no paths).

    ``ran`` is the registered check that was running; ``failure.check`` the
    one that failed (the same, or e.g. ``raised``, ``dtype``, or the wrong
    result a property check was traced back to). The problem shown is the
    one of the call that failed, ``failure.case``; when the check derived it
    from the one it drew (``drawn``), both are shown.
    """
    case = failure.case if failure.case is not None else drawn
    assert case is not None
    p = case.problem
    what = REGISTRY[ran].description if ran in REGISTRY else ""
    called = f" ({failure.function})" if failure.function else ""
    if failure.check == ran:
        head = f"check {ran!r} failed" + (f" ({what})" if what else "")
    elif failure.check in VALUE_CHECKS and ran not in VALUE_CHECKS:
        head = (f"{failure.check} is wrong{called}, found by check {ran!r}"
                + (f" ({what})" if what else ""))
    else:  # e.g. `raised` or `dtype`: its one line says it all, so it goes first
        head = (f"check {failure.check!r} failed while running check {ran!r}: "
                f"{failure.message.splitlines()[0]}")
    layouts = {k: v for k, v in case.layouts.items() if v != "C"}
    lines = [f"{spec} {p.op}: {head}", f"parameters: {p.describe()}"]
    if layouts:
        lines.append("layouts: " + ", ".join(f"{k}={v}" for k, v in layouts.items())
                     + " (other inputs C-contiguous)")
    if case is not drawn and drawn.problem != p:
        lines.append(f"(the call that failed is on a problem check {ran!r} derived from the "
                     f"one it drew: {drawn.problem.describe()})")
    return "\n".join(lines + [failure.message])


def shown_path(path: Path) -> str:
    """``path`` relative to the working folder when it is inside it."""
    try:
        return os.path.relpath(path) if Path(path).resolve().is_relative_to(Path.cwd()) \
            else str(path)
    except ValueError:
        return str(path)


def saved_lines(case_file: Path) -> list[str]:
    """Where a case is, how to replay it, and its standalone script."""
    json_path, py_path = shown_path(case_file), shown_path(script_path(case_file))
    return [f"case file: {json_path}",
            f"replay:    pytest --replay {json_path}",
            f"script:    python {py_path}   (standalone: NumPy and torch only)"]


def replay_check(failure: CheckFailure, ran: str, drawn: ConvCase) -> str:
    """The registered check that runs the failing call again on its own problem.

    A wrong result is replayed by the oracle check of that result (without
    torch, by a closed-form check); a call on a
    derived problem by the check that makes just that call (its contract
    failures, a wrong dtype say, show there too); anything else by the check
    that ran.
    """
    derived = failure.case is not None and failure.case is not drawn
    if failure.check in VALUE_CHECKS:
        if oracle.torch_available():
            return failure.check
        # no torch: the closed-form check compares every result of one call
        return "delta_kernel" if derived else ran
    if derived and failure.function is not None:
        return "grad_input" if failure.function.endswith("_backward") else "forward"
    return ran


def save_failure(target: Target, failure: CheckFailure, ran: str, text: str,
                 drawn: ConvCase) -> Path | None:
    """Write the failing call's case file and script; None if the folder is not writable."""
    case = failure.case if failure.case is not None else drawn
    record = case_record(target.impl.spec, case, failure.check, text,
                         run_check=replay_check(failure, ran, drawn))
    try:
        path = case_path(target.failures_dir, record, target.impl.name)
        script = render_script(record, case, name=script_path(path).name)
        return save_case(target.failures_dir, record, target.impl.name, script=script)
    except OSError:
        return None


@dataclass
class Found:
    """A final (shrunk) failure of one search: the failing call, its report, its files."""

    target: Target
    check: str
    failure: CheckFailure
    drawn: ConvCase
    text: str
    case_file: Path | None


#: the final failures of this process's searches, in order; harness/triage/search.py
#: takes them after each search
FOUND: list[Found] = []
#: the last failing example of this process (shrunk or not): what is left to
#: report when Hypothesis's final replay of a failure passes (history dependence)
LAST_FAILING: list[Found] = []


class Budget:
    """The time left for the current test (``--conv-budget``), None: no limit."""

    deadline: float | None = None

    @classmethod
    def start(cls, seconds: float | None) -> None:
        cls.deadline = None if not seconds else time.monotonic() + seconds

    @classmethod
    def spent(cls) -> bool:
        return cls.deadline is not None and time.monotonic() > cls.deadline


@functools.lru_cache(maxsize=256)
def case_strategy(check: str, op: str, caps: Capabilities) -> st.SearchStrategy[ConvCase]:
    """The cases ``check`` draws for ``op``: one strategy object per test, not per
    example (a new one would be validated and labelled again each time)."""
    custom = REGISTRY[check].cases
    return custom(op, caps) if custom else conv_cases(op, capabilities=caps)


def _reach(case: ConvCase) -> None:
    """The sizes this case reached, for the run summary's "largest reached" line."""
    p = case.problem
    coverage.reach(batch=p.batch, channels_per_group=max(p.in_channels, p.out_channels)
                   // p.groups, positions=math.prod(p.output_size),
                   kernel=max(p.kernel_size), K=max(p.forward_terms(), p.grad_input_terms(),
                                                  p.grad_weight_terms()))


def _report_events(target: Target) -> None:
    """The implementation's own labels of what its calls did (``harness_events``), as
    Hypothesis events and features of the run summary."""
    if target.impl.events is None:
        return
    try:
        labels = [str(label) for label in target.impl.events()]
    except Exception:  # noqa: BLE001 - a broken hook must not fail the check
        return
    coverage.count(labels)
    for label in labels:
        event(label)


def check_capabilities(target: Target, check: str) -> Capabilities:
    """What ``check`` may draw for ``target``: what every function it calls supports."""
    return target.impl.capabilities_for(REGISTRY[check].calls(target.op))


def run(target: Target, check: str, data: st.DataObject, known: Sequence[Bug] = ()) -> None:
    """Draw a case for ``target`` and run ``check`` on it.

    In a follow-up search (harness/triage) problems in a ``known`` bug's
    trigger are excluded (rejected, so Hypothesis draws others), and failures
    that a known bug covers (same kind of failure, trigger matched; for a bug
    that needs nothing, every problem) do not count. Only the final (shrunk)
    example writes its case file and script: Hypothesis replays it once more
    after shrinking, with ``is_final`` set.
    """
    __tracebackhide__ = True  # the report says it all; this frame is noise
    strategy = case_strategy(check, target.op, check_capabilities(target, check))
    if Budget.spent() and not current_build_context().is_final:
        # Out of time: the case is still drawn (Hypothesis requires the same
        # choices to draw the same way) but not run nor counted, so the rest of
        # the search costs only drawing; a shrink in progress keeps the
        # smallest failure so far, which the final replay, never skipped, reports.
        with coverage.paused():
            data.draw(strategy, label="case")
        return
    case = data.draw(strategy, label="case")
    _reach(case)
    if any(bug.conditions and bug.region_holds(case) for bug in known):
        reject()  # a follow-up search: that bug's trigger is excluded
    failures = examine(check, target.impl, case, target.timeout)
    _report_events(target)
    fresh = [f for f in failures if not any(bug.covers(f) for bug in known)]
    if not fresh:
        return
    failure = fresh[0]
    text = failure_text(target.impl.spec, case, failure, check)
    LAST_FAILING[:] = [Found(target, check, failure, case, text, None)]
    if current_build_context().is_final:
        path = save_failure(target, failure, check, text, case)
        FOUND.append(Found(target, check, failure, case, text, path))
    raise CheckFailure(failure.check, text) from None
