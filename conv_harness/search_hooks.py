"""The searches' pytest wiring: each conformance test's searches, its verdict and report.

`BugSearch.pytest_runtest_call` runs a conformance test as `search_in_process` does
(conv_harness/searching/search.py: `under_way`, then `conclude`), with pytest running
the first search; the test's bugs go on its item for the summary and database hooks.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from conv_harness.options import DEFAULT_MAX_BUGS
from conv_harness.running.target import Target
from conv_harness.searching.search import (
    set_key,
    conclude,
    database_key,
    under_way,
)
from conv_harness.searching.state import RunState, TestState
from conv_harness.triage import causes

#: where a test's item keeps its state, for the plugins that report on it
STATE = pytest.StashKey[TestState]()
#: where the config keeps the run's state, for the tests that are not conformance tests
#: but find bugs (regression replays)
RUN = pytest.StashKey[RunState]()
#: where a test's item keeps the bugs it found (`Bug.to_json`)
BUGS = pytest.StashKey[list[dict[str, Any]]]()


class BugsFound(AssertionError):
    """A conformance test's verdict: the bugs it found; the message is the whole report."""


def conformance_target(item: pytest.Item) -> tuple[Target, str] | tuple[None, None]:
    marker = item.get_closest_marker("conv_check")
    callspec = getattr(item, "callspec", None)
    target = callspec.params.get("target") if callspec else None
    if marker is None or not isinstance(target, Target):
        return None, None
    return target, marker.args[0]


class BugSearch:
    """The pytest side: database keys, follow-up searches, and the test's report."""

    def __init__(self, max_bugs: int = DEFAULT_MAX_BUGS, print_scripts: bool = False,
                 budget: float | None = None, failures_dir: Path | None = None):
        self.max_bugs = max_bugs
        self.failures_dir = failures_dir  # the run's failures folder (the plugin's option)
        self.print_scripts = print_scripts
        self.budget = budget
        #: this process's share of the run (its book of causes, its record of calls)
        self.run = RunState()
        #: the run's id (conv_harness/triage/causes.py): the controller's, every worker's
        self.run_id = ""

    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_runtest_call(self, item: pytest.Item):
        target, check = conformance_target(item)
        if target is None:
            return (yield)
        set_key(item.obj, database_key(target, check))
        result = None
        with under_way(self.run, target, check, self.budget) as state:
            item.stash[STATE] = state
            try:
                result = yield
            except Exception as exc:  # noqa: BLE001 - concluded below, or raised again
                error: BaseException | None = exc
            else:
                error = None
            verdict = conclude(state, target, check, error, self.max_bugs, self.print_scripts)
        if verdict is None:
            return result
        item.stash[BUGS] = [bug.to_json() for bug in verdict.bugs]
        raise BugsFound(verdict.report) from None

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        folder = self.failures_dir
        if folder is None:
            return  # constructed without a folder (a unit test): no run-wide book
        workerinput = getattr(session.config, "workerinput", None)
        if workerinput is None:  # the controller, before any worker starts
            self.run_id = causes.new_run(folder)
        else:
            self.run_id = workerinput[causes.RUN_INPUT]
        self.run.book.open(folder, self.run_id)

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        """Hand a pytest-xdist worker the run's id (made in pytest_sessionstart, which
        runs before xdist's own starts the workers)."""
        node.workerinput[causes.RUN_INPUT] = self.run_id

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """The controller removes the run's book of causes: it only served the run's
        searches, and the failures folder holds case files, scripts and the summary."""
        if self.failures_dir is not None and not hasattr(session.config, "workerinput"):
            causes.end_run(self.failures_dir)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo):
        report_ = yield
        if call.excinfo is not None and isinstance(call.excinfo.value, BugsFound):
            report_.longrepr = str(call.excinfo.value)
        return report_
