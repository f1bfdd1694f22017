"""The catalogue sweep (issue 35): each archetype of a test's operation and each of
its one-step neighbours (strategies/catalogue.py), called once, besides the
random draws.

A check's random search reaches an archetype's neighbour by chance; a fast path
whose bug lies one step off its archetype passed in one seed of two. Each archetype
made into each tie between sizes of different arrays (conv_harness/ties.py) is visited
too: the branch code takes where two sizes it compares are equal. When a test's
search has passed, the sweep calls the check once on each visit (checks with
problems of their own, such as finite differences, are not swept). A failure
that a cause known run-wide covers is a sighting, as in a search; any other
starts a search focused on that archetype (every problem drawn from it, the
neighbour's feature from the ordinary draw), which finds and shrinks it as any
search does. Should that search not meet the failure, the visit's own case is
the finding, not shrunk, and its report says so.
"""

from __future__ import annotations

from conv_harness.searching import suite
from conv_harness.checks.registry import REGISTRY
from conv_harness.running.calling import CheckFailure
from conv_harness.running.target import Target
from conv_harness.searching.state import Found, TestState
from conv_harness.triage.catalog import Bug, in_known_region, not_known
from strategies import catalogue
from strategies.archetypes import FEATURES
from strategies.cases import features
from strategies.problems import Focus

#: (the visit, its failure) of a sweep
Missed = tuple[catalogue.Visit, CheckFailure]


def applies(check: str, state: TestState) -> bool:
    """Whether ``check`` is swept: it draws ordinary problems, or problems of its own
    that a visit's problem can be made one of (`Check.visit`: then each archetype
    itself and the declared paths are visited), and the run draws from every problem
    (not only those of ``--conv-problem``)."""
    own = REGISTRY[check]
    return (own.cases is None or own.visit is not None) and state.run.given is None


def planned(state: TestState, target: Target, check: str) -> tuple[catalogue.Visit, ...]:
    """The visits the sweep of ``check`` makes for ``target`` (none where it does not
    apply), before ``--conv-budget``'s choice of sizes leaves some out. The paths the
    implementation declares come first: a sweep that a budget cuts short has made
    those, which nothing else reaches."""
    if not applies(check, state):
        return ()
    caps = suite.check_capabilities(target, check)
    paths = catalogue.path_visits(target.op, caps, target.impl.paths)
    if REGISTRY[check].cases is None:
        return (paths + catalogue.visits(target.op, caps)
                + catalogue.tie_visits(target.op, caps)
                + catalogue.crossing_visits(target.op, caps)
                + catalogue.batch_visits(target.op, caps)
                + catalogue.long_float16_visits(target.op, caps))
    # a check of its own cases: the declared paths, and each archetype itself
    return paths + tuple(v for v in catalogue.visits(target.op, caps) if v.feature is None)


class Sweep:
    """The sweep of one test, planned when the test starts and made (`finish`) after
    its first search passed: under ``--conv-budget`` that search keeps time for the
    planned ``visits``, and ends once only that time is left."""

    def __init__(self, state: TestState, target: Target, check: str,
                 known: list[Bug] | None = None) -> None:
        self._state, self._target, self._check = state, target, check
        self._planned = planned(state, target, check)
        self._known = known or []
        #: how many visits it plans (before --conv-budget's sizes leave some out)
        self.visits = len(self._planned)

    def finish(self) -> list[Missed]:
        """Make the visits: those whose failure no cause known run-wide covers."""
        return _visited(self._state, self._target, self._check, self._planned,
                        self._known)


def _visited(state: TestState, target: Target, check: str,
             visits: tuple[catalogue.Visit, ...], known: list[Bug]) -> list[Missed]:
    """Call ``check`` once on each of the ``visits`` of ``target``'s operation: the
    visits whose failure no cause known run-wide covers. A visit in a ``known``
    bug's trigger region is not made, and a failure a known bug covers does not
    count, as in a follow-up search (conv_harness/searching/suite.py)."""
    missed: list[Missed] = []
    if not visits:
        return missed
    caps = suite.check_capabilities(target, check)
    chosen = state.budget.chosen.bounds if state.budget.chosen is not None else None
    if chosen is not None:
        kept = tuple(v for v in visits if catalogue.within(v.problem, chosen))
        if len(kept) < len(visits):
            state.tally.note(f"catalogue sweep of {target.op} {check}: "
                             f"{len(visits) - len(kept)} visits beyond the sizes "
                             "--conv-budget chose not made")
        visits = kept
    for done, visit in enumerate(visits):
        if state.budget.spent():
            state.tally.note(f"catalogue sweep of {target.op} {check} cut short by "
                             f"--conv-budget: {done} of {len(visits)} visits made")
            break
        case = REGISTRY[check].visit_case(visit.case())
        if case is None or caps.excludes(case):
            continue  # the check's own cases cannot hold this problem
        if in_known_region(case, known):
            continue
        state.tally.record_visit(features(case))
        state.budget.examples += 1
        failures = suite.examined(state, check, target, case)
        suite.implementation_events(target, state.tally)
        fresh = not_known(failures, known)
        fresh = [f for f in fresh if not suite.sighted(state, target, check, f, case)]
        if fresh:
            missed.append((visit, fresh[0]))
    return missed


def sweep(state: TestState, target: Target, check: str) -> list[Missed]:
    """Call ``check`` once on each visit of ``target``'s operation; the visits whose
    failure no cause known run-wide covers."""
    return Sweep(state, target, check).finish()


def focus(visit: catalogue.Visit) -> Focus | None:
    """The strategies' focus for a search of ``visit``'s failure: its archetype, and
    the feature its neighbour changes where that is one an archetype fixes; None for
    a declared path's problem (no archetype to draw from) and a long float16 sum
    (not drawn). A tie's visit is searched from its archetype: a failure of its
    sizes alone (98 out channels) is met there and shrunk; one that needs the tie
    rarely is, and its visit's case is the finding, which its explanation shrinks
    along the tie."""
    if visit.archetype is None or visit.feature == catalogue.LONG_FLOAT16:
        return None
    return visit.archetype, visit.feature if visit.feature in FEATURES else None


def focus_label(focus: Focus) -> str:
    """``resnet 7x7 s2 p3 stem``, ``... | padding``: a focused search's name."""
    archetype, feature = focus
    return archetype.label + (f" | {feature}" if feature else "")


def unshrunk(target: Target, check: str, visit: catalogue.Visit, failure: CheckFailure,
             calls: list) -> Found:
    """The visit's failure as a finding, where a focused search did not meet it: its
    case file and script written, its report saying it was not shrunk."""
    case = visit.case()
    text = suite.failure_text(target.impl, case, failure, check)
    path = suite.save_failure(target, failure, check, text, case)
    unmet = ("a search focused on its archetype did not meet the failure, so Hypothesis "
             "did not shrink it; ")
    why = ("a declared path's problem is not searched: not shrunk" if visit.archetype is None
           else "float16 sums this long are not drawn, so not searched: not shrunk"
           if visit.feature == catalogue.LONG_FLOAT16
           else unmet + "its explanation shrinks it along the tie where it can"
           if visit.tie is not None
           else unmet + "its explanation names the crossing where the bug follows it"
           if visit.crossing is not None
           else "a search focused on it did not meet the failure: not shrunk")
    lines = text.split("\n")
    text = "\n".join(lines[:3] + [f"found on:   {visit.label} (the catalogue sweep; {why})"]
                     + lines[3:])
    return Found(target, check, failure, case, text, path, calls, found_on=visit.label)
