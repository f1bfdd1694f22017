"""One conformance example: draw a case, run a check, report a final failure.

The ``@given`` tests in tests/conformance are one line each around `run`.
A falsified check raises `CheckFailure` with the report a person pastes into
a bug report (`failure_report`); for the final (shrunk) example only, the
case is also saved as JSON with its standalone reproduction script beside it,
and the report prints that script and how to replay the case.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
import time
from pathlib import Path
from typing import Sequence

from hypothesis import event, reject
from hypothesis import strategies as st
from hypothesis.control import current_build_context

from conv_harness.checks import oracle
from conv_harness.checks.registry import REGISTRY, examine
from conv_harness.descriptor import format_descriptor
from conv_harness.problem import OPS, ConvCase, ConvProblem, in_fewer_dimensions
from conv_harness.records import coverage
from conv_harness.records.failures import case_path, case_record, save_case, script_path
from conv_harness.records.script import render_script
from conv_harness.running.calling import CheckFailure, Observed
from conv_harness.running.capabilities import Capabilities
from conv_harness.running.loader import Implementation
from conv_harness.running.target import Target
from conv_harness.searching.state import Budget, BudgetSpent, Found, SizeChoice, TestState
from conv_harness.searching.state import current as current_state
from conv_harness.triage import causes
from conv_harness.triage.catalog import Bug, in_known_region, not_known
from strategies import archetypes, conv_cases
from strategies.cases import features, noise_case
from strategies.problems import DEFAULT_BOUNDS, Bounds, Focus

VALUE_CHECKS: tuple[str, ...] = ("forward", "grad_input", "grad_weight", "grad_bias")


def failure_text(impl: Implementation, drawn: ConvCase, failure: CheckFailure,
                 ran: str) -> str:
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
    lines = [f"{impl.spec} {p.op}: {head}", f"parameters: {p.describe()}",
             f"benchdnn:   {format_descriptor(p)}"]
    if layouts:
        lines.append("layouts: " + ", ".join(f"{k}={v}" for k, v in layouts.items())
                     + " (other inputs C-contiguous)")
    native = impl.native_record(failure.function or p.op)
    if "arrays" in native:
        made = "".join(f"; {name} from {how} (it provides none)"
                       for name, how in native.get("derived", {}).items()
                       if name == failure.function or failure.function is None)
        lines.append(f"arrays:     {native['arrays']} on {native['device']}{made}")
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
                 drawn: ConvCase, tries: int = 1) -> Path | None:
    """Write the failing call's case file and script; None if the folder is not writable.
    ``tries``: the calls its search made per example (the script makes as many)."""
    case = failure.case if failure.case is not None else drawn
    record = case_record(target.impl.spec, case, failure.check, text,
                         run_check=replay_check(failure, ran, drawn),
                         native=target.impl.native_record(failure.function or target.op))
    if tries > 1:
        record["tries"] = tries
    try:
        path = case_path(target.failures_dir, record, target.impl.name)
        script = render_script(record, case, name=script_path(path).name)
        return save_case(target.failures_dir, record, target.impl.name, script=script)
    except OSError:
        return None


def found_on(first: ConvProblem, drawn_from: archetypes.Archetype | None,
             shrunk: ConvProblem) -> str | None:
    """The report's line naming the archetype a search first failed on: the one its
    draw started from, else the one it is or neighbours (issue 22: a fast path's bug
    is found there and shrinks away from it); None for neither."""
    return _found_on_line(archetypes.origin(first, drawn_from), first, shrunk)


def _found_on_line(where: str | None, first: ConvProblem, shrunk: ConvProblem) -> str | None:
    """`found_on`'s line for the archetype ``where`` (`archetypes.origin`)."""
    if where is None:
        return None
    if first == shrunk:
        return f"found on:   {where} (this problem)"
    return (f"found on:   {where}: {first.describe()} (the search's first failing "
            f"example; shrunk to the problem above)")


def budget_bounds(budget: Budget, target: Target, check: str, caps: Capabilities,
                  tally: coverage.Tally) -> Bounds | None:
    """The bounds a test draws from: None (the strategies' own) without a budget.

    Under ``--conv-budget`` the first example of a test first measures what
    an example of this check costs the implementation (`choose_sizes`) and
    picks the sizes once; the choice then holds for the whole test, its
    shrinking, its final replay and its follow-up searches, so that
    Hypothesis replays every example the same way. What the choice cut is noted in
    ``tally``.
    """
    if budget.deadline is None:
        return None
    if budget.chosen is None:
        budget.chosen = choose_sizes(target, check, caps, budget.left())
        if budget.chosen.note:
            tally.note(budget.chosen.note)
    return budget.chosen.bounds


#: Examples a budget should leave room for; below that, sizes are cut where that helps.
USEFUL_EXAMPLES = 100
#: Share of examples the large tier draws (strategies' ``ODDS``: measured 11-20%).
LARGE_SHARE = 0.2
#: A size is cut only where it costs this many times the smaller one: an
#: implementation whose cost is per call (compiling every new shape) gains
#: nothing from smaller problems and keeps every size.
COSTLIER = 2.0


def _sample_case(op: str, caps: Capabilities, batch: int, channels: int, kernel: int,
                 positions: int) -> ConvCase:
    """A fixed problem of ``op`` (stride 1, padding kernel // 2, no groups, no
    dilation, so any capabilities take it) with seeded values, contiguous."""

    nd = OPS[op].spatial_dims
    flat = caps.for_op(op)
    dtype = "float32" if "float32" in flat.dtypes else flat.dtypes[0]
    problem = ConvProblem(op=op, batch=batch, in_channels=channels, out_channels=channels,
                          input_size=(positions,) * nd, kernel_size=(kernel,) * nd,
                          stride=(1,) * nd, padding=(kernel // 2,) * nd, dilation=(1,) * nd,
                          groups=1, bias=True, dtype=dtype)
    return noise_case(problem)


def _cost(target: Target, check: str, case: ConvCase) -> float:
    """Seconds one example of ``check`` on ``case`` takes (its verdict is not used)."""
    started = time.perf_counter()
    try:
        examine(check, target.impl, case, target.timeout)
    except Exception:  # noqa: BLE001 - a failure is the search's to find, not this
        pass
    if target.impl.events is not None:
        try:
            target.impl.events()  # what these calls did is not the search's
        except Exception:  # noqa: BLE001
            pass
    return time.perf_counter() - started


def choose_sizes(target: Target, check: str, caps: Capabilities,
                 seconds: float) -> SizeChoice:
    """The sizes that leave ``seconds`` room for `USEFUL_EXAMPLES` examples of ``check``.

    Three examples are timed on fixed problems (after one not timed, which
    pays for start-up): a tiny one (the small one's kernel, one of everything else),
    a small one (the tiny tier's sizes) and a large one (the large tier's work
    budget). If the default mix of small and large examples (`LARGE_SHARE`)
    fits `USEFUL_EXAMPLES` in the time left, nothing changes. Otherwise the
    large tier goes, if a large example costs over `COSTLIER` times a small
    one, and if even small ones do not fit, the small sizes are halved too,
    if a small example costs over `COSTLIER` times a tiny one and a large one
    no less than a small one (one timing each: a measurement where the large
    example is the cheaper is noise, a compiler's, not growth). Where cost
    does not grow with size (a per-call compiler) the sizes stay: cutting
    them would cost coverage and gain no examples.
    """

    if REGISTRY[check].cases is not None:  # a check with its own sizes (finite
        return SizeChoice(None)              # differences, pointwise, ...): kept
    nd = OPS[target.op].spatial_dims
    default = DEFAULT_BOUNDS[nd]
    large = default.large
    # not timed: the first example of a process pays for torch's and the
    # implementation's start-up, which no later example does
    _cost(target, check, _sample_case(target.op, caps, 1, 1, 1, 2))
    # the small sizes but what halving them would cut (batch, channels, positions):
    # what cutting them can gain
    tiny = _cost(target, check, _sample_case(target.op, caps, 1, 1, 3, 1))
    small = _cost(target, check, _sample_case(
        target.op, caps, 2, 2, 3, max(2, default.outputs // 2)))
    big = 0.0
    if large is not None:
        batch, channels, kernel = 2, 8, 3
        per_position = batch * channels * channels * kernel ** nd
        positions = max(2, min(int((large.budget / per_position) ** (1 / nd)),
                               large.outputs))
        big = _cost(target, check, _sample_case(target.op, caps, batch, channels, kernel,
                                                positions))
    seconds = max(seconds - tiny - small - big, 0.0)
    costs = f"an example took {tiny:.2g} s tiny, {small:.2g} s small, {big:.2g} s large"
    mixed = small if large is None else (1 - LARGE_SHARE) * small + LARGE_SHARE * big
    if seconds >= USEFUL_EXAMPLES * mixed:
        return SizeChoice(None)
    what = f"{target.op} {check}"
    if large is None or big <= COSTLIER * small:
        if small <= COSTLIER * tiny or big < small:
            return SizeChoice(None, f"--conv-budget kept every size for {what}: cost does "
                                    f"not grow with size ({costs})")
        bounds = default
    else:
        bounds = dataclasses.replace(default, large=None)
    if seconds < USEFUL_EXAMPLES * small and small > COSTLIER * tiny and big >= small:
        bounds = dataclasses.replace(
            bounds, large=None, outputs=max(2, default.outputs // 2),
            batch=min(default.batch, 2), channels_per_group=min(default.channels_per_group, 2))
        return SizeChoice(bounds, f"--conv-budget chose small sizes for {what}: no large "
                                  f"tier, outputs <= {bounds.outputs}, batch <= "
                                  f"{bounds.batch}, channels per group <= "
                                  f"{bounds.channels_per_group} ({costs})")
    if bounds.large is not None:  # only tiny was costlier; nothing to cut that helps
        return SizeChoice(None)
    return SizeChoice(bounds, f"--conv-budget chose no large sizes for {what} ({costs})")


@functools.lru_cache(maxsize=256)
def case_strategy(check: str, op: str, caps: Capabilities, bounds: Bounds | None = None,
                  focus: Focus | None = None,
                  given: tuple[ConvProblem, ...] | None = None) -> st.SearchStrategy[ConvCase]:
    """The cases ``check`` draws for ``op``: one strategy object per test, not per
    example (a new one would be validated and labelled again each time).
    ``bounds`` (what ``--conv-budget`` chose, `budget_bounds`) and ``focus`` (an
    archetype a search is focused on, conv_harness/searching/sweep.py) apply to the
    checks that draw ordinary cases; those with cases of their own keep theirs.
    ``given``: the run's ``--conv-problem`` problems, the only ones drawn."""
    custom = REGISTRY[check].cases
    return custom(op, caps, given) if custom else conv_cases(
        op, capabilities=caps, bounds=bounds, focus=focus, given=given)


def _reach(tally: coverage.Tally, case: ConvCase) -> None:
    """The sizes this case reached, for the run summary's "largest reached" line."""
    p = case.problem
    terms = max(p.forward_terms(), p.grad_input_terms(), p.grad_weight_terms())
    # in a half precision too: its longest sums are bounded apart (strategies/problems.py)
    half = {f"K in {p.dtype}": terms} if p.dtype in ("float16", "bfloat16") else {}
    tally.reach(batch=p.batch, channels_per_group=max(p.in_channels, p.out_channels)
                // p.groups, positions=math.prod(p.output_size),
                kernel=max(p.kernel_size), K=terms, **half)


def implementation_events(target: Target, tally: coverage.Tally) -> list[str]:
    """The implementation's own labels of what its calls did since it was last asked
    (``harness_events``), counted in ``tally`` as features of the run summary; none from
    a broken hook."""
    if target.impl.events is None:
        return []
    try:
        labels = [str(label) for label in target.impl.events()]
    except Exception:  # noqa: BLE001 - a broken hook must not fail the check
        return []
    tally.count(labels)
    return labels


def report_events(target: Target, tally: coverage.Tally) -> None:
    """`implementation_events`, also as Hypothesis events of the running example."""
    for label in implementation_events(target, tally):
        event(label)


def sighted(state: TestState, target: Target, check: str, failure: CheckFailure,
             drawn: ConvCase) -> bool:
    """Whether a cause known run-wide (found by another search, maybe another worker)
    covers ``failure``: then it is a sighting of that cause, not a failure to shrink.

    A cause of the same function in more dimensions (conv3d's, met in conv1d) is not
    asked: a failure only it covers is shrunk and described (a sighting with a case
    file of its own), so that the cause's entry can show its plainer case."""
    case = failure.case if failure.case is not None else drawn
    for record in state.run.book.known(target.impl.spec):
        if in_fewer_dimensions(failure.function, record.function):
            continue
        if causes.covers(record, failure, case, target.impl, target.timeout):
            seen = state.sightings.setdefault(record.cause, [None, 0])
            if seen[0] is None or case.problem.size_rank() < seen[0].problem.size_rank():
                seen[0] = causes.sighting(record, check, failure, case)
            seen[1] += 1
            return True
    return False


def examined(state: TestState, check: str, target: Target, case: ConvCase) -> list[CheckFailure]:
    """``check``'s failures on ``case`` (`examine`), its calls' warnings and its notes
    counted in the test's tally."""
    seen = Observed()
    failures = examine(check, target.impl, case, target.timeout, seen)
    state.tally.warned(seen.heard.count, seen.heard.first)
    for text, times in seen.notes.items():
        state.tally.note(text, times)
    return failures


def check_capabilities(target: Target, check: str) -> Capabilities:
    """What ``check`` may draw for ``target``: what every function it calls supports."""
    return target.impl.capabilities_for(REGISTRY[check].calls(target.op))


def run(target: Target, check: str, data: st.DataObject, known: Sequence[Bug] = (),
        state: TestState | None = None) -> None:
    """Draw a case for ``target`` and run ``check`` on it.

    In a follow-up search (conv_harness/triage) problems in a ``known`` bug's
    trigger are excluded (rejected, so Hypothesis draws others), and failures
    that a known bug covers (same kind of failure, trigger matched; for a bug
    that needs nothing, every problem) do not count. Only the final (shrunk)
    example writes its case file and script: Hypothesis replays it once more
    after shrinking, with ``is_final`` set. What it leaves for the triage goes
    to ``state``, the running test's (`conv_harness.searching.state.current`) unless given.
    """
    __tracebackhide__ = True  # the report says it all; this frame is noise
    state = state if state is not None else current_state()
    search = state.search
    caps = check_capabilities(target, check)
    strategy = case_strategy(check, target.op, caps,
                             budget_bounds(state.budget, target, check, caps, state.tally),
                             search.focus,
                             state.run.given)
    # Until it fails, a test's first search keeps the catalogue sweep's time.
    sweep = search.sweep if search.last_failing is None else None
    keep = state.budget.kept_for(sweep.visits) if sweep is not None else 0.0
    if state.budget.spent(keep) and not current_build_context().is_final:
        # Out of time: the case is still drawn (Hypothesis requires the same
        # choices to draw the same way) but not run nor counted. Where nothing
        # failed, the search ends here; a shrink in progress goes on at the cost of
        # drawing only, keeping the smallest failure so far, which the final
        # replay, never skipped, reports.
        data.draw(strategy, label="case")
        if search.last_failing is None:
            raise BudgetSpent()
        return
    case = data.draw(strategy, label="case")
    if in_known_region(case, known):
        search.excluded += 1
        reject()  # a follow-up search: that bug's trigger is excluded (and not counted)
    if REGISTRY[check].tallied:
        state.tally.record(features(case))
    drawn_from = case.problem.drawn_from
    _reach(state.tally, case)
    state.budget.examples += 1
    for _ in range(search.tries):  # a failure that comes and goes: any call failing counts
        failures = examined(state, check, target, case)
        report_events(target, state.tally)
        fresh = not_known(failures, known)
        fresh = [f for f in fresh if not sighted(state, target, check, f, case)]
        if fresh:
            break
    else:
        return
    failure = fresh[0]
    text = failure_text(target.impl, case, failure, check)
    search.last_failing = Found(target, check, failure, case, text, None,
                               state.run.calls.snapshot())
    failed_on = (failure.case if failure.case is not None else case).problem
    if current_build_context().is_final:
        path = save_failure(target, failure, check, text, case, search.tries)
        state.run.calls.keep(path)  # the calls that led to it, before triage makes its own
        first, first_drawn = search.first_failed or (failed_on, drawn_from)
        search.first_failed = None
        where = archetypes.origin(first, first_drawn)
        origin = _found_on_line(where, first, failed_on)
        if origin is not None:  # in the report, not in the case file (its name is a hash)
            lines = text.split("\n")
            text = "\n".join(lines[:3] + [origin] + lines[3:])
        search.found.append(Found(target, check, failure, case, text, path,
                                  found_on=where or "", tries=search.tries))
    elif search.first_failed is None:
        search.first_failed = (failed_on, drawn_from)
    raise CheckFailure(failure.check, text) from None
