"""Every distinct bug of a check from one run: explain, exclude, search again.

Hypothesis shrinks the first failure a conformance test finds; this plugin
then explains it (conv_harness/triage/explain.py: which single changes keep it
failing, and its trigger) and runs the same check again as a new Hypothesis
search in which failures that bug covers (same kind, same function, trigger
matched) do not count. Each further bug is shrunk, saved and explained the
same way, until ``--conv-max-bugs`` bugs (default 3) or a search finds
nothing more in its examples.

Why follow-up searches, not only Hypothesis's ``report_multiple_bugs``:
Hypothesis tells bugs apart by where the exception is raised, and every
failure of a check is raised at one place; two grad_input bugs with
different triggers are one origin to it. Excluding a bug by its trigger is
what separates them, and each follow-up is an ordinary Hypothesis search
(its own example-database entry, shrinking, final replay).

Search once per cause: every new cause is published run-wide
(conv_harness/triage/causes.py); every other search, of any check, function or
xdist worker, meets its failures as sightings (not shrunk, explained nor
saved), and a shrunk finding that evidence attributes to a known cause
(conv_harness/triage/catalog.py, `part_of`) is a sighting too. A test that meets
only known causes still fails, with one line per cause it met.

Each test (implementation x operation x check) gets its own example-database
key, derived from what the implementation spec resolves to (a file's path,
a module's name), so one implementation never replays another's examples.
"""

from __future__ import annotations

import hashlib
import json
import contextlib
import dataclasses
import os
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import hypothesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.errors import FlakyFailure, Unsatisfiable

from conv_harness.searching import suite
from conv_harness.checks.diagnosis import diagnose
from conv_harness.checks.registry import examine
from conv_harness.options import DEFAULT_MAX_BUGS
from conv_harness.records.coverage import Tally
from conv_harness.records.failures import script_path
from conv_harness.problem import ConvCase, in_fewer_dimensions
from conv_harness.running.calling import CheckFailure
from conv_harness.specs import is_path, split_spec
from conv_harness.running.target import Target
from conv_harness.searching.state import (
    Budget,
    BudgetSpent,
    Found,
    RunState,
    SearchState,
    SweepUnderWay,
    TestState,
    running,
)
from conv_harness.triage import boundary, causes, evidence
from conv_harness.triage.catalog import Bug, part_of, signature
from conv_harness.triage.causes import CauseBook
from conv_harness.triage.explain import Explanation, explain, failure_probe
from conv_harness.searching import sweep
from conv_harness.triage import stored
from conv_harness.triage.history import HISTORY, history_dependent, verify_alone
from strategies.problems import Focus


def identity(spec: str) -> str:
    """What a spec resolves to: a file's path (relative to the working folder when inside
    it, so that clones on two machines agree), or a module's dotted name; with ``:attr``."""
    module, attr = split_spec(spec)
    if is_path(module):
        path = Path(module).expanduser().resolve()
        try:
            module = path.relative_to(Path.cwd()).as_posix()
        except ValueError:
            module = path.as_posix()
    return module + (f":{attr}" if attr else "")


def database_key(target: Target, check: str, known: list[Bug] = ()) -> bytes:
    """The example-database key of one search: implementation, operation, check, and
    for a follow-up search the bugs it excludes."""
    key = f"conv-harness:{identity(target.impl.spec)}:{target.op}:{check}"
    if known:
        excluded = json.dumps([[b.failure, b.function, [c.to_json() for c in b.conditions]]
                               for b in known], sort_keys=True)
        key += ":excluding:" + hashlib.sha256(excluded.encode()).hexdigest()[:16]
    return key.encode()


def set_key(test: Any, key: bytes) -> None:
    """Give a @given test its own database key, as Hypothesis's pytest plugin does for
    @pytest.mark.parametrize (its ``_hypothesis_internal_add_digest``)."""
    inner = getattr(getattr(test, "hypothesis", None), "inner_test", None)
    if inner is not None:
        inner._hypothesis_internal_add_digest = key


def follow_up(state: TestState, target: Target, check: str, known: list[Bug],
              focus: Focus | None = None, tries: int = 1) -> tuple[list[Found], str | None]:
    """One more Hypothesis search of ``check`` in which the ``known`` bugs do not count:
    what it found, and, where it ended on an error without a finding (every problem
    excluded, a health check, an error of the harness), that error in one line.
    ``focus``: every problem drawn from that archetype (a failure of the catalogue
    sweep, conv_harness/searching/sweep.py). ``tries``: calls per example, any failing counts
    (a failure that comes and goes on the same inputs, `_bug_of`)."""
    excluded = tuple(known)
    state.searched = (0, 0)

    # Most problems may lie in an excluded trigger (stride > 1 is most of them):
    # rejecting them is what excluding means, not a slow strategy.
    @settings(suppress_health_check=[*settings.default.suppress_health_check,
                                     HealthCheck.filter_too_much])
    @given(data=st.data())
    def search(data: st.DataObject) -> None:
        suite.run(target, check, data, known=excluded, state=state)

    key = database_key(target, check, known)
    if focus is not None:
        key += b":focus:" + sweep.focus_label(focus).encode()
    if tries > 1:
        key += b":tries:%d" % tries
    source = stored.searched_before(key, target.impl.target)
    if source is not None:
        state.skipped.append(source)
        return [], None  # an earlier run sharing the database found nothing here
    set_key(search, key)
    if state.seed is not None:
        search = hypothesis.seed(follow_up_seed(key, state.seed))(search)
    this = state.search = SearchState(focus=focus, tries=tries)
    ran_before = state.budget.examples
    state.run.book.freeze()  # what other searches found by now is excluded from this one
    try:
        search()
    except BudgetSpent:
        pass  # it found nothing before --conv-budget ran out
    except Exception as error:  # noqa: BLE001 - a finding is in this.found; else say what ended it
        found = this.take_found()
        if found:
            return found, None
        last = this.last_failing
        if isinstance(error, FlakyFailure) and last is not None and last.target is target:
            # it failed, then passed when Hypothesis replayed it: a result that does not
            # repeat, a finding (triage's `_bug_of`), not the end of the search
            return [dataclasses.replace(last, repeats=False, tries=tries)], None
        if isinstance(error, Unsatisfiable) and this.excluded:
            # Hypothesis's advice on filters names nothing the user wrote
            return [], (f"no draw could be run: {this.excluded} of them lay in the "
                        "regions of the bugs above")
        first = (str(error).strip().splitlines() or [""])[0]
        return [], f"{type(error).__name__}: {first}".rstrip(": ")
    state.searched = (state.budget.examples - ran_before, this.excluded)
    if not state.budget.spent():  # every example was run
        stored.remember_searched(key, target.impl.target)
    return [], None


#: how many times one finding's case may be replaced by a smaller one its explanation
#: found failing (each strictly smaller, so this only bounds the calls). A sweep
#: visit Hypothesis never shrank can take four: a batch bug met at 9 images on a 7x7
#: stem, stride 2, padding 3 goes to a 2x2 input, then 1x2, then 1x1, and only the
#: last explanation's plainest problem drops the padding and the extra images.
MAX_RESHRINKS = 6


def describe(found: Found, state: TestState, print_script: bool = False,
             reshrunk: int = 0) -> Bug:
    """Make a shrunk failure a `Bug`: a sighting of a cause known run-wide when the
    evidence says it is one (no explanation), else a new cause, explained and published.
    A bug rebuilt from stored triage is kept in ``state.recalled``. Where the explanation
    met a smaller problem failing the same way, that is the bug's case (`_reshrunk`),
    described again."""
    target, failure = found.target, found.failure
    case = found.case
    case_file = None
    if found.case_file is not None:
        case_file = os.path.relpath(found.case_file, target.failures_dir)
    bug = Bug(check=found.check, failure=failure.check, function=failure.function,
              op=case.problem.op, params=case.problem.params(), layouts=dict(case.layouts),
              trigger="", conditions=[], explanation=[], case_file=case_file,
              signature=signature(failure.check, failure.message),
              evidence=evidence.gather(target.impl, failure, case, target.timeout,
                                       found.tries),
              found_on=found.found_on)
    comes_and_goes = bool(bug.evidence.get("fails_in"))  # searched with several calls
    book = state.run.book
    known = attribute(book, target, bug, failure, case)
    if known is not None:
        if in_fewer_dimensions(failure.function, known.function) and not comes_and_goes \
                and not bug.evidence.get("unrepeatable"):
            # its case may stand for the cause's entry (catalog.merge): with the
            # explanation of its own problem, which the entry then shows (what the
            # other causes cover masked, not what this one does)
            others = [r for r in book.known(target.impl.spec, fresh=True)
                      if r.cause != known.cause]
            bug.explanation = list(_explanation(found, bug, others).rows)
        return _as_sighting(book, found, bug, known)
    key = database_key(target, found.check)
    recalled = stored.recall(key, target.impl.target, failure.check, failure.function,
                             case.problem.op, case.problem.params(), dict(case.layouts),
                             found.check)
    note = ""
    explanation = None
    # a call that does not repeat: mapped with each changed problem called as often as
    # its case was, any failing; its explanation is not stored (it is noise to recall)
    unrepeatable = bug.evidence.get("unrepeatable")
    if bug.evidence.get("undeclared"):  # a precision, not a region to map
        bug.trigger = evidence.undeclared_trigger(bug.evidence["undeclared"])
    elif recalled is not None and not unrepeatable:  # explained by an earlier run
        old, explanation, raw, source = recalled
        state.recalled.append((raw, source))
        bug.trigger, bug.conditions = old.trigger, list(old.conditions)
        bug.explanation = list(old.explanation)
        note = "\n" + stored.note(source)
    else:
        explanation = _explanation(found, bug, book.known(target.impl.spec, fresh=True),
                                   tries=evidence.REPEATS + 1 if unrepeatable else None)
        smaller = (_reshrunk(found, explanation.smaller)
                   if explanation.smaller is not None and not comes_and_goes
                   and not unrepeatable and reshrunk < MAX_RESHRINKS else None)
        if smaller is not None:
            return describe(smaller, state, print_script, reshrunk + 1)
        bug.trigger, bug.conditions = explanation.one_line(), list(explanation.trigger)
        bug.explanation = list(explanation.rows)
        if comes_and_goes:
            bug.trigger += "; " + evidence.fails_in_text(bug.evidence, found.tries)
        if unrepeatable:
            bug.trigger += (f"; does not repeat: {unrepeatable} further calls on the same "
                            "inputs gave other results (state kept between calls, or "
                            "memory read before it is written)")
    if bug.conditions and bug.explanation and failure.function:
        other = boundary.across(target.impl, bug, case, bug.explanation,
                                book.known(target.impl.spec, fresh=True),
                                target.impl.capabilities_for((failure.function,)),
                                target.timeout)
        if other is not None:  # one wrong size, another symptom across its boundary
            bug.evidence["boundary"] = f"{other.failure} across its boundary"
            return _as_sighting(book, found, bug, other, own_region=True)
    bug.cause = causes.new_id()
    if recalled is None and explanation is not None and not unrepeatable:
        stored.remember(key, target.impl.target, bug, explanation)
    bug.report = _bug_text(found, bug.trigger, explanation, print_script) + note
    book.publish(target.impl.spec, bug)
    return bug


def _explanation(found: Found, bug: Bug, known: list[Bug], tries: int | None = None
                 ) -> Explanation:
    """The explanation of ``found``'s failure on its case: single changes, each called
    as the search called it (``found.tries`` times for one that comes and goes;
    ``tries`` times, any failing, for one that did not repeat on the same inputs), a
    wrong value counted where it is beyond rounding (unless its evidence is a
    precision), a failure that one of the ``known`` causes covers masked, as a
    search does not count it."""
    target, failure = found.target, found.failure
    caps = (target.impl.capabilities_for((failure.function,)) if failure.function
            else suite.check_capabilities(target, found.check))

    def covered(other: CheckFailure, case: ConvCase) -> bool:
        return causes.covering(known, other, case, target.impl, target.timeout) is not None
    probe = failure_probe(target.impl, failure, target.timeout, covered if known else None)
    if bug.evidence.get("fails_in") or tries:  # mapped where it can happen, each problem
        probe = evidence.Repeated(probe, tries or found.tries)  # called as often
    elif failure.check in evidence.VALUE_KINDS and failure.function and not \
            bug.evidence.get("precision"):
        probe = evidence.beyond_rounding(probe, target.impl, failure.function, target.timeout)
    return explain(found.case, probe, caps)


def _reshrunk(found: Found, smaller: ConvCase) -> Found | None:
    """``found`` on the smaller case its explanation met failing the same way: called
    again, reported and saved as a search's final failure is, the larger case's file
    removed (no entry names it). None where the call does not fail so again."""
    target, failure = found.target, found.failure
    if failure.function is not None:
        failures = diagnose(target.impl, failure.function, smaller, target.timeout)
    else:
        failures = examine(found.check, target.impl, smaller, target.timeout)
    same = [f for f in failures if f.check == failure.check]
    if not same:
        return None
    again = same[0]
    case = again.case if again.case is not None else smaller
    text = suite.failure_text(target.impl, case, again, found.check)
    lines = text.split("\n")
    first = found.case.problem
    context = [line for line in found.text.split("\n")  # from an earlier reshrink too
               if line.startswith(("found on:", "(the call that failed first"))]
    if first != found.drawn.problem:  # a check's derived call: say where that came from
        context.append(f"(the call that failed first was on a problem check {found.check!r} "
                       f"derived from the one it drew: {found.drawn.problem.describe()})")
    text = "\n".join(lines[:3] + context + [
        f"shrunk further: its explanation found this smaller problem failing the same "
        f"way (Hypothesis's shrinking had stopped at {first.describe()})"] + lines[3:])
    path = suite.save_failure(target, again, found.check, text, case)
    if found.case_file is not None and path != found.case_file:
        for old in (found.case_file, script_path(found.case_file)):
            old.unlink(missing_ok=True)
    return Found(target, found.check, again, case, text, path, calls=found.calls,
                 found_on=found.found_on)


def describe_and_verify(found: Found, state: TestState,
                        print_script: bool = False) -> Bug:
    """`describe` a shrunk failure and, when it is a new cause, run its saved script
    alone in a fresh process (conv_harness/triage/history.py's `verify_alone`: a script
    that passes there makes it a ``history`` bug). A sighting with a case file
    (shrunk before another worker published its cause) has its script run too:
    its case may be smaller than the cause's, and stands for the entry
    (conv_harness/triage/catalog.py's `merge`) only once its script reproduces it.
    The one step from a failure to a bug, for searches (`triage`) and regression
    replays (conv_harness/replay.py) alike."""
    bug = describe(found, state, print_script)
    run = state.run
    if not bug.sighting:
        verify_alone(found.target, [bug], run.calls, run.verified)
    elif bug.case_file is not None:
        verify_alone(found.target, [bug], run.calls, run.verified, rebuild_history=False)
    return bug


def attribute(book: CauseBook, target: Target, bug: Bug, failure, case) -> Bug | None:
    """The known cause ``bug`` is a symptom of, if any (conv_harness/triage/catalog.py's rules)."""
    for record in book.known(target.impl.spec, fresh=True):
        if causes.covers(record, failure, case, target.impl, target.timeout) \
                or (not record.sighting and part_of(bug, record)):
            return record
    return None


def _as_sighting(book: CauseBook, found: Found, bug: Bug, known: Bug,
                 own_region: bool = False) -> Bug:
    """``bug`` as a sighting of ``known``'s cause, published; with ``own_region`` (an
    explained symptom on the other side of its boundary) it keeps its trigger, which
    a further search then excludes too."""
    bug.cause, bug.sighting = known.cause, True
    if not own_region:
        bug.conditions, bug.trigger = list(known.conditions), known.trigger
    why = _why(bug, known)
    bug.report = "\n".join([found.text.splitlines()[0],
                            f"parameters: {bug.problem.describe()}",
                            f"the known bug {known.failure} ({known.function}), {known.trigger}"
                            f" [{why}]: not explained again"]
                           + (suite.saved_lines(found.case_file)[:1] if found.case_file else []))
    book.publish(found.target.impl.spec, bug)
    return bug


def _why(bug: Bug, known: Bug) -> str:
    if bug.evidence.get("boundary"):
        return (f"the other side of its boundary: this bug, {bug.trigger.split(';')[0]}; one "
                f"step across it, the problem fails as that bug")
    if bug.evidence.get("precision") and known.failure == "dtype":
        return (f"its errors are the size of {bug.evidence['precision']} rounding: the "
                f"dtype bug's precision")
    if bug.evidence.get("consistent") and known.failure == "forward":
        return "the forward fails on it too and this backward is its exact gradient"
    if bug.failure == known.failure and bug.function != known.function:
        return "the same failure and trigger in another function"
    return "inside its trigger region"


def _bug_text(found: Found, trigger: str, explanation, print_script: bool = False) -> str:
    lines = [found.text, f"trigger:   {trigger}"]
    if explanation is not None and explanation.rows:
        counted = any(row.counts for row in explanation.rows)
        lines.append("explanation: single changes to this problem, with fresh data "
                     f"(* its own value; {explanation.calls} calls"
                     + ("; k/n: each change called n times, k failed" if counted else "")
                     + "):")
        lines.append(explanation.table())
    if found.case_file is not None:
        lines += suite.saved_lines(found.case_file)
        script = script_path(found.case_file)
        if print_script and script.is_file():
            lines += ["---- reproduction script " + "-" * 45, script.read_text().rstrip("\n"),
                      "---- end of script " + "-" * 51]
    else:
        lines.append(f"(could not save the case file in {found.target.failures_dir})")
    return "\n".join(lines)


def triage(state: TestState, target: Target, check: str, first: list[Found],
           max_bugs: int, print_script: bool = False) -> tuple[list[Bug], str]:
    """The bugs of one check: the first found, then follow-up searches; and why it stopped.

    Each finding is described and, a new cause, verified alone as it comes
    (`describe_and_verify`), before the next search. Once a follow-up search finds
    nothing, the catalogue sweep runs outside the known bugs' regions, as after a
    search that passed (`swept`), and again after each bug it finds (a visit failing
    by another cause beside that bug's). Findings attributed to a
    cause known run-wide are kept (listed under that cause's entry) but do not
    count towards ``max_bugs``; they enter the follow-ups' exclusions as a new
    cause would (`_excludes`), so that a further search spends its examples
    outside their region, unless evidence attributed them: such a region stays
    open until a further search meets it again, at once where that search would
    draw the same examples (`_draws_again`).
    """
    bugs = [_bug_of(found, state, print_script, []) for found in first[:1]]
    known = [b for b in bugs if _excludes(b)]
    stop = f"stopped at --conv-max-bugs {max_bugs}"
    beyond = False  # whether the catalogue sweep has run outside the known bugs' regions
    rounds = max_bugs + 3  # a duplicate costs a round, never an endless loop
    for _ in range(rounds):
        if _causes_counted(bugs) >= max_bugs:
            break
        if state.budget.spent():
            stop = "stopped: --conv-budget spent"
            break
        found, ended = follow_up(state, target, check, known)
        if ended is not None:
            stop = (f"a further search, with the bugs above not counted, ended without a "
                    f"verdict ({ended}): other bugs may remain")
            break
        if not found and not beyond and not state.budget.spent():
            # the random draws rarely reach an archetype's neighbours, where a fast
            # path's bug beside the ones found shows: the sweep, outside their regions;
            # made again once a further search finds nothing after the bug it found,
            # since its other failing visits may be of other causes
            found = swept(state, target, check, known=known)
            beyond = not found
        if not found:
            stop = ("a further search, with the bugs above not counted, found nothing else"
                    if all(_excludes(b) for b in bugs) else "no further distinct bug found")
            stop += (" before --conv-budget ran out: other bugs may remain"
                     if state.budget.spent() else _cut_short(*state.searched))
            stop += stored.skipped_note(state.skipped[-1] if state.skipped else None)
            break
        bug = _bug_of(found[0], state, print_script, known)
        same = [] if bug.sighting else [old for old in bugs
                                        if not old.sighting and old.same_as(bug)]
        if bug.sighting and not _excludes(bug) and any(_met_again(bug, old) for old in bugs):
            # a sighting whose region stays open (`_excludes`) met again: every further
            # search would shrink to it once more, so its region is excluded from now on
            known.append(bug)
        elif bug.sighting:
            bugs.append(bug)
            known += [bug] if _excludes(bug) or _draws_again(state) else []
        elif same:
            known.append(bug)
            same[0].absorb(bug)
            same[0].report += f"\nalso fails when: {bug.trigger}"
        else:
            known.append(bug)
            bugs.append(bug)
        if bug.failure == HISTORY and (bug.sighting or same):
            # results that depend on earlier calls have no region to exclude (what their
            # explanation names is noise) and their symptoms are ordinary failures
            # anywhere: every further search would meet them again
            stop = (f"a further search met {bug.function}'s results that depend on earlier "
                    "calls again, which no search can exclude: other bugs may remain")
            break
    else:
        if _causes_counted(bugs) < max_bugs:
            # every round spent, some on bugs met again (a cause whose region is stated
            # piecewise, one stride at a time, is met at each piece): not the bug limit
            stop = (f"stopped after {rounds} further searches, those that met the bugs "
                    "above again among them: other bugs may remain")
    return bugs, stop


def _causes_counted(bugs: list[Bug]) -> int:
    """The bugs that count towards --conv-max-bugs: new causes, not sightings."""
    return sum(not b.sighting for b in bugs)


def _cut_short(ran: int, excluded: int) -> str:
    """What a further search that found nothing did not see: where nearly all its draws
    lay in the known bugs' regions, Hypothesis gives it up (too few of its draws can
    be run) with fewer examples run than its setting asks for."""
    wanted = settings.default.max_examples
    if not excluded or ran >= wanted:
        return ""
    return (f", but ran only {ran} of its {wanted} examples ({excluded} of its "
            f"{ran + excluded} draws lay in the regions of the bugs above): other bugs may "
            "remain")


#: calls per example of a search for a failure that comes and goes on the same inputs
#: (memory not initialised, a race): one that fails on half of the calls is missed
#: by all of them once in 256 examples
TRIES = 8


def _bug_of(found: Found, state: TestState, print_script: bool, known: list[Bug]) -> Bug:
    """The bug a search's finding is: described and verified.

    A failure that comes and goes on the same inputs (it passed when Hypothesis
    replayed it, or some of a few further calls pass) is searched for again with
    `TRIES` calls per example, any failing counting (with the ``known`` bugs
    excluded, as in the search that found it): then it repeats, so Hypothesis
    shrinks it and the explanation maps its region, calling each changed
    problem as often. That search may find another cause first, one that fails
    on every call: its evidence says so (`evidence.gather`), and it is described
    as any other. Where it finds nothing,
    the finding is what `_history_bug` makes of it (a symptom of a known cause,
    else a bug of results that depend on earlier calls)."""
    target = found.target
    if found.tries == 1 and (not found.repeats or evidence.comes_and_goes(
            target.impl, found.failure, found.case, target.timeout)):
        again, _ = follow_up(state, target, found.check, known, tries=TRIES)
        if again and again[0].repeats:
            found = again[0]
    if not found.repeats:
        return _history_bug(state.run, found)
    return describe_and_verify(found, state, print_script)


def _met_again(bug: Bug, old: Bug) -> bool:
    """Whether sighting ``bug`` is ``old`` again: the same cause, kind and function."""
    return old.sighting and (old.cause, old.failure, old.function) == (
        bug.cause, bug.failure, bug.function)


def _draws_again(state: TestState) -> bool:
    """Whether a further search with the same exclusions would draw the same examples
    as the last (derandomised settings, or a given seed: its seed comes from its key),
    and so meet the same finding first: a sighting whose region stays open is then
    excluded at once, where a random search would be given the chance to find
    something else before it meets it again (`triage`). Not where the run's book of
    causes has grown since the last search began (another xdist worker published a
    cause): the same examples may then be counted otherwise."""
    return (state.seed is not None or settings.default.derandomize) \
        and not state.run.book.grown()


def _excludes(bug: Bug) -> bool:
    """Whether a further search excludes ``bug``'s region (rejects its problems).

    A new cause, and a sighting attributed to a known cause by its region and
    kind of failure: had the book not known that cause, this search would have
    explained the finding and excluded its trigger; a sighting must not do
    less, or the search draws from that region again (under xdist, where
    another worker found the cause first, a conv3d search drew problems with
    dilation, met the known "raised" cause on most of them and never reached
    the forward's own failure). Not a sighting that its evidence attributed
    (its errors the size of a lower precision's rounding, or a backward that is
    its forward's exact gradient): the cause's region holds other failures of
    its kind (a grad_bias taken as a mean), which the book tells apart with
    that evidence.
    """
    return not bug.sighting or not (bug.evidence.get("precision")
                                    or bug.evidence.get("consistent"))


def report(book: CauseBook, target: Target, check: str, bugs: list[Bug], stop: str,
           notes: list[str], met: list[Bug] = ()) -> str:
    own = [b for b in bugs if not b.sighting]
    n = len(own)
    head = (f"{target.impl.spec} {target.op}: check {check!r} found {n} distinct "
            f"bug{'s' if n != 1 else ''} ({stop})")
    parts = [head]
    for i, bug in enumerate(own, 1):
        parts.append(f"--- bug {i} of {n} " + "-" * 50)
        parts.append(bug.report)
    for bug in [b for b in bugs if b.sighting]:
        parts.append("--- a known bug again " + "-" * 46)
        parts.append(bug.report)
    parts += _met_lines(book, met, target)
    parts += notes
    return "\n".join(parts)


def _met_lines(book: CauseBook, met: list[Bug], target: Target) -> list[str]:
    """One line per run-wide cause the search met (covered, not counted as failures),
    with the case file of that cause: the search wrote none of its own for it."""
    files = {b.cause: b.case_file for b in book.known(target.impl.spec)
             if not b.sighting and b.case_file}
    lines = []
    for b in met:
        where = (f", case file {suite.shown_path(target.failures_dir / files[b.cause])}"
                 if b.cause in files else "")
        lines.append(f"also met known bug: {b.failure} ({b.function}) on "
                     f"{b.problem.describe()}, {b.trigger.split(';')[0]}{where} ({b.report})")
    return lines


def _hypothesis_notes(exc: BaseException) -> list[str]:
    """Hypothesis's own reproduction lines (a ``@reproduce_failure`` blob, a seed), if any."""
    notes = getattr(exc, "__notes__", None) or []
    return [n for n in notes if "reproduce_failure" in n or "hypothesis-seed" in n]


def _history_bug(run: RunState, last: Found) -> Bug:
    """A failure that did not repeat: a symptom of a known deterministic cause when it
    lies in that cause's trigger region (no rebuild), else a history bug of its own."""
    failure = last.failure
    book = run.book
    case = last.case
    # found and published by another search while this one replayed it: not history
    record = causes.covering(book.known(last.target.impl.spec, fresh=True), failure, case,
                             last.target.impl, last.target.timeout)
    if record is not None:
        bug = Bug(check=last.check, failure=failure.check, function=failure.function,
                  op=case.problem.op, params=case.problem.params(),
                  layouts=dict(case.layouts), trigger="", conditions=[], explanation=[],
                  case_file=None, signature=signature(failure.check, failure.message))
        return _as_sighting(book, last, bug, record)
    probe = Bug(check=last.check, failure=HISTORY, function=failure.function,
                op=case.problem.op, params=case.problem.params(), layouts=dict(case.layouts),
                trigger="", conditions=[], explanation=[], case_file=None, signature=HISTORY)
    known = attribute(book, last.target, probe, CheckFailure(
        HISTORY, "", function=failure.function, case=case), case)
    if known is not None:
        return _as_sighting(book, last, probe, known)
    bug = history_dependent(last, suite.save_failure, suite.saved_lines, run.calls)
    bug.cause, bug.signature = causes.new_id(), HISTORY
    book.publish(last.target.impl.spec, bug)
    return bug


@dataclass
class Verdict:
    """What one failed conformance test found: its bugs (new causes, sightings, and the
    causes other searches found that it met) and its report."""

    bugs: list[Bug]
    report: str


def conclude(state: TestState, target: Target, check: str, error: BaseException | None,
             max_bugs: int = DEFAULT_MAX_BUGS, print_scripts: bool = False) -> Verdict | None:
    """A conformance test's verdict from what its first search left in ``state`` and
    how it ended (``error``, None: it passed): None when it passed and met no known
    cause; the triaged bugs otherwise. An error that left no finding is no verdict of
    ours: it is raised again."""
    if isinstance(error, BudgetSpent):
        error = None  # it passed every example it had the time to run
    # the first search has ended: its sweep is made now or not at all
    planned, state.search.sweep = state.search.sweep, None
    if error is None:
        first = swept(state, target, check, planned)
        if not first:
            met = state.take_sightings()
            if not met:
                return None
            # every failure it met is a bug another search found: still a failure
            return Verdict(met, "\n".join([
                f"{target.impl.spec} {target.op}: check {check!r} failed only by bugs "
                "found by other searches (not shrunk nor explained again; see their "
                "entries in the summary):", *_met_lines(state.run.book, met, target)]))
    else:
        first = state.search.take_found()
        last = state.search.last_failing
        if not first and isinstance(error, FlakyFailure) and last is not None \
                and last.target is target:
            # it failed, then passed when Hypothesis replayed it: a finding that does not
            # repeat, which the triage searches for again (`_bug_of`)
            first = [dataclasses.replace(last, repeats=False)]
        if not first:
            raise error
    bugs, stop = triage(state, target, check, first, max_bugs, print_scripts)
    met = state.take_sightings()
    return Verdict(bugs + met, report(state.run.book, target, check, bugs, stop,
                                      _hypothesis_notes(error) if error else [], met))


def swept(state: TestState, target: Target, check: str,
          planned: SweepUnderWay | None = None, known: list[Bug] = ()) -> list[Found]:
    """After a search that passed: the catalogue sweep (conv_harness/searching/sweep.py),
    the one ``planned`` when the test started where given, and for its first failure a
    search focused on that archetype; what that found, else the visit's own case, not
    shrunk. Empty where the sweep passed. ``known``: bugs whose regions the sweep
    leaves out and whose failures do not count (after a follow-up search that passed)."""
    missed = (planned or sweep.Sweep(state, target, check, list(known))).finish()
    if not missed:
        return []
    visit, failure = missed[0]
    focus = sweep.focus(visit)
    found = follow_up(state, target, check, list(known), focus=focus)[0] if focus else []
    return found or [sweep.unshrunk(target, check, visit, failure, state.run.calls.snapshot())]


@contextlib.contextmanager
def under_way(run: RunState, target: Target, check: str, budget: float | None,
              tally: Tally | None = None) -> Iterator[TestState]:
    """A conformance test of ``target`` x ``check`` under way, in the plugin's hook and
    in `search_in_process` alike: the causes known so far frozen for its searches, its
    own state current (with the catalogue sweep's visits to come, for which a budget
    keeps time), and its calls recorded (its triage's too) in the run's record. Its
    coverage goes to ``tally`` where given (the caller's, for the summary)."""
    run.book.freeze()
    state = TestState(run=run, budget=Budget.starting_now(budget),
                      tally=tally if tally is not None else Tally())
    if state.budget.deadline is not None:
        state.search.sweep = sweep.Sweep(state, target, check)
    with running(state):
        run.calls.spec = target.impl.spec
        try:
            yield state
        finally:
            run.calls.spec = None


def follow_up_seed(key: bytes, seed: int) -> int:
    """The seed of the follow-up search ``key`` of a test seeded with ``seed``: its low
    32 bits mixed with the key (crc32, which is one-to-one in its start value), the
    rest kept, so that two seeds give two draws however far apart they are."""
    low = seed & 0xFFFFFFFF
    return (seed - low) | zlib.crc32(key, low)


def search_in_process(run: RunState, target: Target, check: str,
                      max_bugs: int = DEFAULT_MAX_BUGS, budget: float | None = None,
                      print_scripts: bool = False, seed: int | None = None,
                      tally: Tally | None = None) -> Verdict | None:
    """One conformance test (``target`` x ``check``) as the plugin runs it, called
    directly: its first search under Hypothesis's current settings, then `conclude`.
    For the harness's own tests of the triage, and for any program that wants a
    verdict without a pytest run. ``seed``: the first search's Hypothesis seed, as
    ``@seed`` (or pytest's ``--hypothesis-seed``) gives it; each follow-up search
    draws from a seed derived from it and its own key, as each search of a default
    run draws from a random one. ``tally``: where its coverage is counted."""
    @given(data=st.data())
    def first_search(data: st.DataObject) -> None:
        suite.run(target, check, data, state=state)

    set_key(first_search, database_key(target, check))
    if seed is not None:
        first_search = hypothesis.seed(seed)(first_search)
    error: BaseException | None = None
    with under_way(run, target, check, budget, tally) as state:
        state.seed = seed
        try:
            first_search()
        except Exception as exc:  # noqa: BLE001 - what the search found, or not ours
            error = exc
        return conclude(state, target, check, error, max_bugs, print_scripts)
