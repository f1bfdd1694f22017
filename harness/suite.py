"""One conformance example: draw a case, run a check, report a final failure.

The ``@given`` tests in tests/conformance are one line each around `run`.
A falsified check raises `CheckFailure` with the report a person pastes into
a bug report (`failure_report`); for the final (shrunk) example only, the
case is also saved as JSON with its standalone reproduction script beside it,
and the report prints that script and how to replay the case.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

from hypothesis import strategies as st
from hypothesis.control import current_build_context

from harness.calling import CheckFailure
from harness.capabilities import Capabilities
from harness.checks import REGISTRY, run_check
from harness.failures import case_path, case_record, save_case, script_path
from harness.plugin import Target
from harness.problem import ConvCase
from harness.script import render_script
from strategies import conv_cases


def failure_text(spec: str, case: ConvCase, failure: CheckFailure, ran: str) -> str:
    """What failed, on which problem, and by how much (no script, no paths).

    ``ran`` is the registered check that was running; ``failure.check`` the
    one that failed (the same, or e.g. ``raised``, ``shape``, ``dtype``).
    """
    p = case.problem
    what = REGISTRY[ran].description if ran in REGISTRY else ""
    if failure.check == ran:
        head = f"check {ran!r} failed" + (f" ({what})" if what else "")
    else:  # e.g. `raised` or `dtype`: its one line says it all, so it goes first
        head = (f"check {failure.check!r} failed while running check {ran!r}: "
                f"{failure.message.splitlines()[0]}")
    layouts = {k: v for k, v in case.layouts.items() if v != "C"}
    lines = [f"{spec} {p.op}: {head}", f"parameters: {p.describe()}"]
    if layouts:
        lines.append("layouts: " + ", ".join(f"{k}={v}" for k, v in layouts.items())
                     + " (other inputs C-contiguous)")
    return "\n".join(lines + [failure.message])


def shown_path(path: Path) -> str:
    """``path`` relative to the working folder when it is inside it."""
    try:
        return os.path.relpath(path) if Path(path).resolve().is_relative_to(Path.cwd()) \
            else str(path)
    except ValueError:
        return str(path)


def saved_text(case_file: Path, script: str) -> str:
    """The report's tail: where the case is, how to replay it, and the script."""
    json_path, py_path = shown_path(case_file), shown_path(script_path(case_file))
    return "\n".join([
        f"case file: {json_path}",
        f"replay:    pytest --replay {json_path}",
        f"script:    python {py_path}   (standalone: NumPy and torch only)",
        "---- reproduction script " + "-" * 45,
        script.rstrip("\n"),
        "---- end of script " + "-" * 51,
    ])


def failure_report(target: Target, case: ConvCase, failure: CheckFailure, ran: str) -> str:
    """The full report of a final failure: text, saved case, replay line and script."""
    text = failure_text(target.impl.spec, case, failure, ran)
    record = case_record(target.impl.spec, case, failure.check, text, run_check=ran)
    try:
        path = case_path(target.failures_dir, record, target.impl.name)
        script = render_script(record, case, name=script_path(path).name)
        save_case(target.failures_dir, record, target.impl.name, script=script)
    except OSError as exc:
        return f"{text}\n(could not save the case file in {target.failures_dir}: {exc})"
    return f"{text}\n{saved_text(path, script)}"


@functools.lru_cache(maxsize=256)
def case_strategy(check: str, op: str, caps: Capabilities) -> st.SearchStrategy[ConvCase]:
    """The cases ``check`` draws for ``op``: one strategy object per test, not per
    example (a new one would be validated and labelled again each time)."""
    custom = REGISTRY[check].cases
    return custom(op, caps) if custom else conv_cases(op, capabilities=caps)


def run(target: Target, check: str, data: st.DataObject) -> None:
    """Draw a case for ``target`` and run ``check`` on it.

    Only the final (shrunk) example writes its case file and script:
    Hypothesis replays it once more after shrinking, with ``is_final`` set.
    """
    __tracebackhide__ = True  # the report says it all; this frame is noise
    case = data.draw(case_strategy(check, target.op, target.impl.capabilities), label="case")
    try:
        run_check(check, target.impl, case, target.timeout)
    except CheckFailure as failure:
        if current_build_context().is_final:
            text = failure_report(target, case, failure, check)
        else:
            text = failure_text(target.impl.spec, case, failure, check)
        raise CheckFailure(failure.check, text) from None
