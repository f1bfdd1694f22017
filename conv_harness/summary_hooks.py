"""The run summary's pytest wiring: each conformance test's record travels on its report.

A worker tallies each conformance test (conv_harness.records.coverage) and attaches
its `record_of` to the test's report as a user property, which pytest-xdist ships
to the controller; the controller hands each to the run's `Summary` in
``pytest_runtest_logreport``, prints the summary and writes summary.json at the end.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conv_harness.checks import oracle
from conv_harness.checks.registry import REGISTRY
from conv_harness.records import coverage
from conv_harness.records.failures import CRASH_CASE
from conv_harness.reporting.summary import Summary, record_of
from conv_harness.search_hooks import BUGS, STATE

PROPERTY = "conv_harness"
#: (implementation name, op, check) of a test that is not a conformance test but whose
#: failure is that implementation's bug: a regression case replayed (conv_harness/replay.py)
REPLAYED = pytest.StashKey[tuple[str, str, str]]()
_TEST_ID = re.compile(r"::test_(\w+)\[(.+)\]$")


class SummaryHooks:
    """The hooks that fill the run's `Summary` from its tests' reports."""

    def __init__(self, summary: Summary) -> None:
        self.summary = summary

    # -- on the worker --------------------------------------------------------
    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo):
        report = yield
        marker = item.get_closest_marker("conv_check")
        callspec = getattr(item, "callspec", None)
        target = callspec.params.get("target") if callspec else None
        state = item.stash.get(STATE, None)  # a conformance test's (search_hooks.py)
        tally = state.tally if state is not None else coverage.Tally()
        bugs = item.stash.get(BUGS, [])
        if marker is not None and hasattr(target, "impl") and (
                call.when == "call" or report.skipped):
            report.user_properties.append((PROPERTY, record_of(
                target.impl.name, target.op, marker.args[0], tally, bugs,
                oracle.torch_available())))
        elif REPLAYED in item.stash and call.when == "call":  # only a failure sets it
            impl, op, check = item.stash[REPLAYED]
            report.user_properties.append((PROPERTY, record_of(
                impl, op, check, coverage.Tally(warnings=tally.warnings,
                                                first_warning=tally.first_warning),
                bugs, True)))
        return report

    # -- on the controller ----------------------------------------------------
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.failed and not any(key == PROPERTY for key, _ in report.user_properties):
            self._without_record(report)
        for key, value in report.user_properties:
            if key == PROPERTY:
                outcome = "skipped" if report.skipped else report.outcome
                self.summary.add(value, outcome,
                                 _skip_reason(report) if report.skipped else "")

    def _without_record(self, report: pytest.TestReport) -> None:
        """A conformance test that failed without its worker's record: the worker died."""
        match = _TEST_ID.search(report.nodeid)
        if match is None or match.group(1) not in REGISTRY:
            return
        saved = [Path(value) for key, value in report.user_properties if key == CRASH_CASE]
        self.summary.add_crash(match.group(1), match.group(2), saved)

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if not hasattr(session.config, "workerinput"):  # a worker: the controller writes it
            self.summary.write()

    def pytest_terminal_summary(self, terminalreporter) -> None:
        lines = self.summary.lines()
        if lines:
            terminalreporter.section("convolution harness summary")
            for line in lines:
                terminalreporter.write_line(line)


def _skip_reason(report: pytest.TestReport) -> str:
    """The reason pytest gives for a skipped test (``skip(reason=...)``)."""
    longrepr = report.longrepr
    reason = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
    return reason.removeprefix("Skipped: ")
