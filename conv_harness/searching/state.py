"""One conformance test's state, in one object passed down, not in module globals.

A conformance test (implementation x operation x check) runs several
Hypothesis searches (the first, then follow-ups that exclude the bugs found:
conv_harness/searching/search.py), each calling `conv_harness.searching.suite.run` once per example.
What those calls leave for the triage, and what the triage reads back, is a
`TestState`, with the search under way's own fields in its `SearchState`: the
plugin creates one per test (`BugSearch.pytest_runtest_call`) and makes it current
for the test with `running`; the ``@given`` bodies, which Hypothesis calls with the
drawn data only, find it with `current`, and every function below them takes it as
an argument.

Outside a test the plugin runs (a regression replay, a HypoFuzz worker, a
unit test calling the search directly) `current` gives a state of its own
for the calling context, so nothing is shared by accident between two tests.
"""

from __future__ import annotations

import contextlib
import time
import unittest
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Protocol


from conv_harness.problem import ConvCase, ConvProblem
from conv_harness.records.coverage import Tally
from conv_harness.running.calling import CheckFailure
from conv_harness.running.target import Target
from conv_harness.triage.catalog import Bug
from conv_harness.triage.causes import CauseBook
from conv_harness.triage.history import CallLog
from strategies.archetypes import Archetype
from strategies.problems import Bounds, Focus


@dataclass
class Found:
    """A final (shrunk) failure of one search: the failing call, its report, its files."""

    target: Target
    check: str
    failure: CheckFailure
    drawn: ConvCase
    text: str
    case_file: Path | None
    #: the run's record of calls when it failed (conv_harness/triage/history.py)
    calls: list = field(default_factory=list)
    #: the archetype its search first failed on (`archetypes.origin`), "" for none
    found_on: str = ""
    #: False: it failed, then passed when Hypothesis replayed it (a result that does
    #: not repeat on the same inputs), so it was not shrunk
    repeats: bool = True
    #: calls of the implementation per example in the search that found it: more than
    #: one for a failure that comes and goes on the same inputs, whose search counts an
    #: example as failing when any of its calls fails (conv_harness/searching/search.py)
    tries: int = 1

    @property
    def case(self) -> ConvCase:
        """The case of the call that failed: a check's derived one, else the drawn one."""
        return self.failure.case if self.failure.case is not None else self.drawn


@dataclass(frozen=True)
class SizeChoice:
    """What ``--conv-budget`` chose for one test, and the costs it chose from."""

    bounds: Bounds | None  # None: the strategies' defaults
    note: str = ""


#: What `Budget.kept_for` keeps per example to come, in examples run so far: a visit of
#: the catalogue sweep is an archetype's problem, larger than most random draws, and
#: the machine's load may change meanwhile.
KEEP_MARGIN = 2.0
#: The most of a budget kept for later: the search before it keeps the rest.
KEEP_SHARE = 0.5


@dataclass
class Budget:
    """The time left for one test (``--conv-budget``), and what it chose for the test.

    ``deadline`` is None without a budget. Once it has passed, a search that has
    found nothing ends (`BudgetSpent`), and one shrinking a failure draws its
    examples but does not run them (conv_harness/searching/suite.py), except that a
    test always runs at least one: a verdict with no example behind it says nothing.
    """

    seconds: float | None = None
    deadline: float | None = None
    #: the sizes chosen for this test (conv_harness/searching/suite.py's `choose_sizes`): unset until
    #: its first example
    chosen: SizeChoice | None = None
    #: examples run so far (drawn and checked, not only drawn)
    examples: int = 0

    @classmethod
    def starting_now(cls, seconds: float | None) -> "Budget":
        return cls(seconds, None if not seconds else time.monotonic() + seconds)

    def spent(self, keep: float = 0.0) -> bool:
        """Whether the time is over, but for ``keep`` seconds kept for later, and the
        test has run an example."""
        return (self.deadline is not None and self.examples > 0
                and time.monotonic() > self.deadline - keep)

    def kept_for(self, examples: int) -> float:
        """Seconds to keep for ``examples`` more: `KEEP_MARGIN` times what an example has
        cost this test so far (its drawing and the budget's own timings included), at
        most `KEEP_SHARE` of the budget; 0 without a budget or an example yet. While
        no example runs it only grows, so a search it stopped stays stopped."""
        if self.deadline is None or not self.seconds or not examples or not self.examples:
            return 0.0
        elapsed = time.monotonic() - (self.deadline - self.seconds)
        return min(KEEP_MARGIN * examples * elapsed / self.examples, KEEP_SHARE * self.seconds)

    def left(self) -> float:
        return 0.0 if self.deadline is None else self.deadline - time.monotonic()


class BudgetSpent(unittest.SkipTest):
    """Raised by a search's example once ``--conv-budget`` is spent and nothing has
    failed: the search ends, and passed (conv_harness/searching/search.py's `conclude`).

    A skip, because Hypothesis re-raises one at once, without shrinking nor trying
    other examples (its ``skip_exceptions_to_reraise``); the examples left, drawn
    and not run, would each cost a draw, up to the profile's ``max_examples``."""

    def __init__(self) -> None:
        super().__init__("--conv-budget spent; nothing failed")


@dataclass
class RunState:
    """What this process's share of one pytest run knows across its tests: the book of
    the run's causes (shared with the other processes through the failures folder),
    the record of calls made of the implementations under test (for results that
    depend on earlier calls), and the bugs whose scripts already failed alone."""

    book: CauseBook = field(default_factory=CauseBook)
    calls: CallLog = field(default_factory=CallLog)
    #: bugs whose script this process has seen fail alone (conv_harness/triage/history.py)
    verified: set[str] = field(default_factory=set)
    #: the problems of ``--conv-problem``, the only ones the run draws (None: draw any)
    given: tuple[ConvProblem, ...] | None = None


class SweepUnderWay(Protocol):
    """The catalogue sweep of a test while its first search runs
    (conv_harness/searching/sweep.py's `Sweep`), as that search sees it."""

    #: how many visits it plans
    visits: int

    def finish(self) -> list:
        """Make the visits: those that failed."""


@dataclass
class SearchState:
    """What one Hypothesis search of a test (its first, or a follow-up) draws with and
    leaves for the triage: `conv_harness.searching.suite.run` reads and writes it on
    each example, and the search's caller reads what it found once it ended."""

    #: while a search is focused on an archetype the catalogue sweep failed on
    #: (conv_harness/searching/sweep.py): that archetype and its neighbour's feature
    focus: Focus | None = None
    #: calls of the implementation per example (`Found.tries`)
    tries: int = 1
    #: under ``--conv-budget``, the first search's catalogue sweep to come, should the
    #: search pass: until it fails, the search keeps time for the sweep's ``visits``
    #: (`Budget.kept_for`) and ends once only that time is left; None for a follow-up,
    #: and without a budget
    sweep: SweepUnderWay | None = None
    #: the final (shrunk) failures, in order (`take_found`)
    found: list[Found] = field(default_factory=list)
    #: the last failing example (shrunk or not): what is left to report when
    #: Hypothesis's final replay of a failure passes (history dependence)
    last_failing: Found | None = None
    #: the problem the search first failed on, before shrinking, and the archetype its
    #: draw started from (`strategies.archetypes.origin`)
    first_failed: tuple[ConvProblem, Archetype | None] | None = None
    #: problems drawn in a known bug's trigger region and skipped unrun
    #: (conv_harness/searching/suite.py)
    excluded: int = 0

    def take_found(self) -> list[Found]:
        found, self.found = self.found, []
        return found


@dataclass
class TestState:
    """What one conformance test's searches found and used, from its start to its report."""

    __test__ = False  # a name pytest would otherwise try to collect as a test class

    #: the run this test belongs to
    run: RunState = field(default_factory=RunState)
    budget: Budget = field(default_factory=Budget)
    #: the search under way (or the last one)
    search: SearchState = field(default_factory=SearchState)
    #: failures that a cause known run-wide covers, by cause id: [its first finding, how
    #: many examples showed it]
    sightings: dict[str, list] = field(default_factory=dict)
    #: bugs rebuilt from stored triage (conv_harness/triage/stored.py): (bug JSON, source)
    recalled: list[tuple[dict[str, Any], str]] = field(default_factory=list)
    #: where the follow-up searches skipped as searched before were recorded
    skipped: list[str] = field(default_factory=list)
    #: the test's Hypothesis seed where one was given (`search_in_process`): each
    #: follow-up search then draws from a seed of its own derived from it, as each
    #: search of a default run draws from a random one; None: Hypothesis's settings decide
    seed: int | None = None
    #: (examples run, problems skipped) of the last search that ended without a finding:
    #: a follow-up whose draws lay almost all in the known bugs' regions runs fewer
    #: examples than its setting before Hypothesis gives it up, and says so
    searched: tuple[int, int] = (0, 0)
    #: what the test's cases and calls exercised, for the run summary
    tally: Tally = field(default_factory=Tally)

    def take_sightings(self) -> list[Bug]:
        """The run-wide causes this test met, each with its count as its report."""
        out = []
        for bug, count in self.sightings.values():
            bug.report = f"{count} example{'s' if count != 1 else ''}"
            out.append(bug)
        self.sightings = {}
        return out


_CURRENT: ContextVar[TestState] = ContextVar("conv_harness_test_state")


def current() -> TestState:
    """The running test's state; outside one, a state of the calling context's own."""
    try:
        return _CURRENT.get()
    except LookupError:
        state = TestState()
        _CURRENT.set(state)
        return state


@contextlib.contextmanager
def running(state: TestState) -> Iterator[TestState]:
    """Make ``state`` the current test's for the duration of the block."""
    token = _CURRENT.set(state)
    try:
        yield state
    finally:
        _CURRENT.reset(token)
