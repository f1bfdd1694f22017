"""Two symptoms of one wrong size: the two sides of one boundary.

A size computed wrongly can show as a wrong value on one side of a boundary
and as a raise on the other: a gradient cropped from the offset ``k - 1 - p``
instead of ``p`` is right where ``k - 1 = 2p``, reads a shifted window (wrong
values) where that offset stays inside the padded gradient, and raises an
IndexError where it does not. Its two findings are two kinds of failure of one
function, each explained with its own trigger: they are not symptoms of one
another by any rule of conv_harness/triage/catalog.py, and would be two entries.

The evidence that they are one cause (`across`): the two findings are of the
same function, of different kinds; they depend on a feature in common (each
one's explanation has a change of it that passes); and a change of one bug's
problem that makes it pass, in such a feature, fails as the other bug. That
is, stepping across one bug's boundary lands in the other's failure: no
problem between them passes. (A bug everywhere, as a wrong dtype is, depends
on no size: its neighbours failing as it proves nothing, and it shares no
feature with a bug that has a boundary.) Two causes with regions that merely
touch would show the same; a black-box test cannot tell those apart, and one
entry with both symptoms, listed, is the reading the evidence supports.
"""

from __future__ import annotations

from conv_harness.problem import ConvCase
from conv_harness.running.calling import CheckFailure, Timeout
from conv_harness.running.capabilities import Capabilities
from conv_harness.running.loader import Implementation
from conv_harness.triage.catalog import Bug
from conv_harness.triage.explain import Row, explain, failure_probe, values_for


def sensitive(rows: list[Row]) -> set[str]:
    """The features some change of which makes the bug pass."""
    return {row.feature for row in rows if row.passes}


def across(impl: Implementation, bug: Bug, case: ConvCase, rows: list[Row],
           known: list[Bug], caps: Capabilities, timeout: Timeout) -> Bug | None:
    """The known bug (a new cause of the same function, of another kind) whose failure
    lies one step across ``bug``'s boundary, or across whose boundary ``bug``'s does;
    None if none. ``rows``: ``bug``'s explanation, of ``case``."""
    mine = sensitive(rows)
    for other in known:
        if (other.sighting or other.function != bug.function or other.failure == bug.failure
                or not other.conditions or not bug.conditions):
            continue
        shared = mine & sensitive(other.explanation)
        if not shared:
            continue
        if _steps_into(impl, case, rows, other, shared, caps, timeout):
            return other
        theirs = values_for(case, other.problem, dict(other.layouts), False, seed=2718)
        if _steps_into(impl, theirs, other.explanation, bug, shared, caps, timeout):
            return other
    return None


def _steps_into(impl: Implementation, case: ConvCase, rows: list[Row], other: Bug,
                shared: set[str], caps: Capabilities, timeout: Timeout) -> bool:
    """Whether a change of ``case`` in a ``shared`` feature that passed (``rows``) fails
    as ``other`` does: the same changes, explained again with ``other``'s probe."""
    probe = failure_probe(impl, CheckFailure(other.failure, "", function=other.function),
                          timeout)
    theirs = {(r.feature, r.axis): r for r in explain(case, probe, caps).rows}
    for row in rows:
        seen = theirs.get((row.feature, row.axis))
        if row.feature in shared and seen is not None \
                and set(row.passes) & set(seen.fails):
            return True
    return False
