"""The run summary: per implementation, what ran, what was covered, the verdict.

Workers tally each conformance test's examples and features (harness.coverage)
and attach the tally to the test's report as a user property, which xdist
ships to the controller; the controller gathers them in
``pytest_runtest_logreport`` and prints the summary at the end.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field

import pytest

from harness import coverage, oracle
from harness.checks import REGISTRY
from harness.loader import Implementation
from harness.problem import OPS

PROPERTY = "conv_harness"
_TALLY = pytest.StashKey[Counter]()


@dataclass
class ImplementationRecord:
    outcomes: dict[tuple[str, str], str] = field(default_factory=dict)  # (check, op) -> outcome
    tally: Counter = field(default_factory=Counter)


class Summary:
    """The controller's record of the run, filled from test reports."""

    def __init__(self, implementations: list[Implementation]):
        self.implementations = implementations
        self.records: dict[str, ImplementationRecord] = defaultdict(ImplementationRecord)
        self.torch_missing = False  # as the processes that ran the tests found it

    # -- on the worker --------------------------------------------------------
    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item):
        coverage.start()
        try:
            return (yield)
        finally:
            item.stash[_TALLY] = coverage.stop()

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo):
        report = yield
        marker = item.get_closest_marker("conv_check")
        callspec = getattr(item, "callspec", None)
        target = callspec.params.get("target") if callspec else None
        if marker is not None and target is not None and (
                call.when == "call" or report.skipped):
            report.user_properties.append((PROPERTY, {
                "impl": target.impl.name, "op": target.op, "check": marker.args[0],
                "tally": dict(item.stash.get(_TALLY, Counter())),
                "torch": oracle.torch_available()}))
        return report

    # -- on the controller ----------------------------------------------------
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        for key, value in report.user_properties:
            if key != PROPERTY:
                continue
            record = self.records[value["impl"]]
            outcome = "skipped" if report.skipped else report.outcome
            slot = (value["check"], value["op"])
            if record.outcomes.get(slot) != "failed":
                record.outcomes[slot] = outcome
            record.tally.update(value["tally"])
            self.torch_missing |= value.get("torch") is False

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if not self.records:  # no conformance test ran (a replay, or other tests)
            return
        write = terminalreporter.write_line
        terminalreporter.section("convolution harness summary")
        if self.torch_missing:  # the workers' word: importing torch here costs seconds
            write("oracle checks (forward, grad_*) not run: PyTorch is not importable; "
                  "only the oracle-free checks ran")
        for impl in self.implementations:
            for line in self.describe(impl):
                write(line)

    def describe(self, impl: Implementation) -> list[str]:
        record = self.records.get(impl.name, ImplementationRecord())
        ops = [op for op in OPS if any(o == op for (_, o) in record.outcomes)]
        failed = sorted({f"{check} ({op})" for (check, op), outcome in record.outcomes.items()
                         if outcome == "failed"})
        verdict = ("FAILED: " + ", ".join(failed)) if failed else (
            "passed" if record.outcomes else "nothing ran")
        lines = [f"{impl.name} [{impl.spec}]: {verdict}"]
        if ops:
            width = max(len(c) for c in REGISTRY) + 2
            lines.append("  " + "check".ljust(width) + "".join(op.ljust(18) for op in ops))
            for check in REGISTRY:
                cells = [record.outcomes.get((check, op), "-") for op in ops]
                if any(cell != "-" for cell in cells):
                    lines.append("  " + check.ljust(width)
                                 + "".join(cell.ljust(18) for cell in cells))
        tally = Counter(record.tally)
        examples = tally.pop("examples", 0)
        lines.append(f"  examples tried: {examples}")
        if tally:
            lines.append("  features covered: " + ", ".join(
                f"{name} ({count})" for name, count in sorted(tally.items())))
        excluded = impl.capabilities.not_generated()
        if excluded:
            lines.append("  not generated (its CAPABILITIES): " + ", ".join(excluded))
        missing = impl.missing()
        if missing:
            lines.append("  not run (functions it does not provide): " + ", ".join(missing))
        not_run = sorted(check for check in REGISTRY
                         if not any(c == check for (c, _) in record.outcomes))
        if not_run:
            lines.append("  checks not run: " + ", ".join(not_run))
        return lines
