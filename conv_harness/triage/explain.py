"""Explaining a bug: which single changes to its minimal problem keep it failing.

For the bug's minimal problem, each feature (conv_harness/triage/features.py) is
set to a few other values, one at a time, and the implementation is called
on the changed problem with fresh data: twice, once with the minimal case's
own constants where its arrays are constant and seeded noise elsewhere, once
with seeded noise everywhere (at most `MAX_CALLS` calls and `MAX_SECONDS`). The changed problem *fails* when either call
shows the same kind of failure from the same function (``grad_input``
wrong, ``dtype`` wrong, ``raised``, ...). A change whose call fails
*differently*, in a way that hides the result (it raises, returns the wrong
shape or non-finite values), is *masked*: shown as that kind, never counted
as a pass, and kept out of the trigger. The minimal problem's own value is
not called again (it is the failing case). The seeds are fixed, so an
explanation is the same on every run, and the number of calls is bounded.

The *trigger* is what the bug needs: the non-trivial features of the minimal
problem whose trivial value makes it pass, each with the values that fail
(``stride >= 3``), and the trivial features that every other value tried
makes pass (``padding = 0``, on every axis). Derived features then say
whether a condition is really on a product (conv_harness/triage/features.py):
where in channels >= 2 fails and so does one channel with a kernel of two
taps, the trigger is ``K >= 2``, the reduction length. It is a predicate on problems: the follow-up searches
(conv_harness/searching/search.py) ignore failures of the same kind on problems it
matches, and the run summary merges two findings into one bug when each
one's problem matches the other's trigger.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import time
import zlib
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from conv_harness import ties
from conv_harness.checks.diagnosis import diagnose
from conv_harness.checks.registry import PRODUCED_BY, REGISTRY, examine
from conv_harness.problem import ConvCase, ConvProblem
from conv_harness.running.calling import CheckFailure, Timeout
from conv_harness.running.capabilities import Capabilities
from conv_harness.running.loader import Implementation
from conv_harness.triage import features as ft
from strategies.cases import noise

#: the most calls of the implementation one explanation makes, and the most
#: time it takes (a bug that is a hang must not make it take 240 time limits)
MAX_CALLS = 240
MAX_SECONDS = 30.0
#: failures that hide what the bug's own kind would look at: a change that ends in one
#: of these is masked (neither fails nor passes)
MASKING = frozenset({"raised", "shape", "result_type", "nonfinite", "timeout", "crashed"})
_CONTRACT_KINDS = frozenset({"forward", "grad_input", "grad_weight", "grad_bias", "dtype",
                             "shape", "raised", "result_type", "nonfinite", "input_changed",
                             "timeout", "crashed"})


#: the `Condition` op of a bug of every other value of a feature from its least one up
EVERY_OTHER = "every 2"
#: the `Condition` op of a bug of a block's tail: above ``value`` and not a multiple of it
#: (a path taking channels in blocks of 8 that mishandles a partial one: 9 to 15 and 17
#: fail, 8 and 16 pass)
TAIL = "tail of"


@dataclass(frozen=True)
class Condition:
    """One feature a bug needs: ``feature op value`` (op: ``>=``, ``<=``, ``in``, or
    ``every 2``: ``value`` and every other value above it, as odd batches of 3 or more)."""

    feature: str
    op: str
    value: Any
    axis: int | None  # the minimal problem's axis, None for a feature of the whole problem
    #: the bug needs this trivial value on every axis (``padding = 0``), not on one
    every_axis: bool = False
    #: how many spatial axes the minimal problem had: ``axis`` names an axis as
    #: benchdnn does, counted from the last (w, h, d), so that the condition can be
    #: read on a problem of another dimensionality (`matches`). None: not recorded,
    #: or the bug showed with the axes swapped too (`_on_any_axis`), so that the axis
    #: names nothing the bug needs and the condition holds on any axis of any problem
    axes: int | None = None

    def holds(self, v: Any) -> bool:
        if self.op == ">=":
            return v >= self.value
        if self.op == "<=":
            return v <= self.value
        if self.op == EVERY_OTHER:
            return v >= self.value and (v - self.value) % 2 == 0
        if self.op == TAIL:
            return v > self.value and v % self.value != 0
        return v in self.value

    def text(self) -> str:
        label = ft.LABELS.get(self.feature, self.feature)
        if self.feature in ties.BY_NAME:  # its text says which sizes; 2 is any tie
            return label if self.value <= TIE_FLOOR else f"{label} >= {self.value}"
        if self.feature in ties.CROSSING_BY_NAME or self.feature in ft.UNEQUAL_NAMES:
            return label  # holds or not: its text says which
        if self.op == "in":
            shown = [_show(v) for v in self.value]
            if self.feature == "bias" and len(shown) == 1:
                return shown[0]
            text = f"{label} {'= ' + shown[0] if len(shown) == 1 else 'in {' + ', '.join(shown) + '}'}"
        elif self.op == EVERY_OTHER:
            text = f"{label} {'odd' if self.value % 2 else 'even'}"
            text += f" >= {self.value}" if self.value > 1 else ""  # from 0 or 1: all of them
        elif self.op == TAIL:
            text = f"{label} > {self.value}, not a multiple of {self.value}"
        elif self.op == "<=" and self.value == 0:
            text = f"{label} = 0"
        else:
            text = f"{label} {self.op} {_show(self.value)}"
        return text + (" on every axis" if self.every_axis else "")

    def to_json(self) -> dict[str, Any]:
        return {"feature": self.feature, "op": self.op,
                "value": list(self.value) if self.op == "in" else self.value, "axis": self.axis,
                "every_axis": self.every_axis, "axes": self.axes}

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> "Condition":
        if raw["feature"] in ties.BY_NAME and raw["op"] == "in":
            raw = {**raw, "op": ">=", "value": TIE_FLOOR}  # stored as "the tie holds"
        value = tuple(raw["value"]) if raw["op"] == "in" else raw["value"]
        return cls(raw["feature"], raw["op"], value, raw.get("axis"),
                   bool(raw.get("every_axis", False)), raw.get("axes"))

    def pinned_axis(self, p: ConvProblem) -> int | None:
        """The axis of ``p`` of the same name as this condition's, counted from the last
        (w, h, d, as benchdnn names them): conv1d's only axis is conv3d's last. None
        where the condition names no axis (or did not record its problem's axes);
        -1 where ``p`` has no axis of that name (a conv2d condition on h, on conv1d).
        """
        n = len(p.input_size)
        if self.axis is None or self.every_axis or self.feature not in ft.PER_AXIS \
                or self.axes is None:
            return None
        mapped = self.axis + n - self.axes
        return mapped if 0 <= mapped < n else -1


def _show(v: Any) -> str:
    if isinstance(v, bool):
        return "with bias" if v else "no bias"
    return str(v)


def matches(conditions: list[Condition], p: ConvProblem, layouts: dict[str, str],
            same_axes: bool = False) -> bool:
    """Whether a problem has everything the trigger needs.

    Conditions of the whole problem must hold. With ``same_axes``, an axis
    condition must hold on the axis of the same name (`Condition.pinned_axis`):
    the reading for another function's trigger, where the trigger is all that
    ties two failures together (a conv1d "stride >= 2" is a stride on w, and a
    conv3d stride on d alone is outside it). Otherwise (a function's own
    trigger, whose explanation varied one axis and could not tell it from the
    others, and one cause must not be split) axis conditions that the minimal
    problem had on one axis must hold together on one axis, others each on
    some axis.
    """
    v = ft.values(p, layouts)
    if not all(all(c.holds(x) for x in v[c.feature]) for c in conditions if c.every_axis):
        return False
    axis_conds = [c for c in conditions if c.feature in ft.PER_AXIS and not c.every_axis]
    if not all(c.holds(v[c.feature]) for c in conditions if c.feature not in ft.PER_AXIS):
        return False
    pinned = [(c, c.pinned_axis(p) if same_axes else None) for c in axis_conds]
    if not all(a >= 0 and c.holds(v[c.feature][a]) for c, a in pinned if a is not None):
        return False
    axis_conds = [c for c, a in pinned if a is None]
    if not axis_conds:
        return True
    same_axis = len({c.axis for c in axis_conds}) == 1
    axes = range(len(p.input_size))
    if same_axis:
        return any(all(c.holds(v[c.feature][a]) for c in axis_conds) for a in axes)
    return all(any(c.holds(v[c.feature][a]) for a in axes) for c in axis_conds)


@dataclass(frozen=True)
class Row:
    """The values tried for one feature and whether the bug showed."""

    feature: str
    axis: int | None
    minimal: Any
    fails: tuple[Any, ...]
    passes: tuple[Any, ...]
    #: (value, kind) of changes whose call failed differently (masked: it raised, ...)
    other: tuple[tuple[Any, str], ...] = ()
    #: (value, failing calls, calls) of each change, for a failure that comes and goes
    #: (each changed problem called several times: `evidence.Repeated`)
    counts: tuple[tuple[Any, int, int], ...] = ()

    def to_json(self) -> dict[str, Any]:
        raw = {"feature": self.feature, "axis": self.axis, "minimal": self.minimal,
               "fails": list(self.fails), "passes": list(self.passes),
               "other": [list(pair) for pair in self.other]}
        if self.counts:
            raw["counts"] = [list(c) for c in self.counts]
        return raw

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> "Row":
        return cls(raw["feature"], raw.get("axis"), raw["minimal"], tuple(raw["fails"]),
                   tuple(raw["passes"]), tuple((v, k) for v, k in raw.get("other", [])),
                   tuple((v, k, n) for v, k, n in raw.get("counts", [])))


@dataclass(frozen=True)
class Explanation:
    rows: tuple[Row, ...]
    trigger: tuple[Condition, ...]
    calls: int
    trivial: tuple[tuple[str, Any], ...] = ()  # each feature's trivial value
    #: a changed case that failed the same way and is plainer than the minimal one
    #: (`_plainer`, by `ConvProblem.size_rank`): Hypothesis's shrinking works on its choices,
    #: and a smaller problem may lie two of them away (in channels 2 and kernel 1 for
    #: in channels 1 and kernel 2x2, where only K matters)
    smaller: ConvCase | None = None

    def one_line(self) -> str:
        return trigger_line(self.rows, self.trigger, dict(self.trivial))

    def table(self) -> str:
        """The rows as text: each value tried, FAIL or pass, the minimal one starred."""
        width = max((len(_row_label(r)) for r in self.rows), default=0) + 2
        lines = []
        for row in self.rows:
            cells = []
            other = dict(row.other)
            counts = {v: f" {k}/{n}" for v, k, n in row.counts}
            for v in sorted(set(row.fails) | set(row.passes) | set(other), key=_sort_key):
                mark = "FAIL" if v in row.fails else "pass" if v in row.passes else other[v]
                mark += counts.get(v, "")
                cells.append(f"{_cell_value(row.feature, v)}{'*' if v == row.minimal else ''}"
                             f":{mark}")
            lines.append("  " + _row_label(row).ljust(width) + "  ".join(cells))
        return "\n".join(lines)


def _sort_key(v: Any) -> tuple:
    return (0, v, "") if isinstance(v, (int, float)) and not isinstance(v, bool) else (1, 0, str(v))


def _cell_value(feature: str, v: Any) -> str:
    """A value of ``feature`` as the explanation's table shows it."""
    if feature in ties.CROSSING_BY_NAME:
        return "held" if v else "broken"
    if feature in ft.UNEQUAL_NAMES:
        return "unequal" if v else "made equal"
    if feature in ties.BY_NAME and not v:
        return "broken"
    return _show(v)


def _row_label(row: Row) -> str:
    label = ft.LABELS.get(row.feature, row.feature)
    return label + (f" (axis {row.axis})" if row.axis is not None else "")


def trigger_line(rows: tuple[Row, ...], trigger: tuple[Condition, ...],
                 trivial: dict[str, Any] | None = None) -> str:
    """One line: what the bug needs, what else makes it pass, what it does not depend on."""
    needed = [c.text() for c in trigger]
    if needed:
        same_axis = len({c.axis for c in trigger if c.axis is not None}) == 1 and sum(
            c.axis is not None for c in trigger) > 1
        head = "fails when " + " and ".join(needed) + (" (on one axis)" if same_axis else "")
    else:
        head = "fails on the simplest problem: no feature is needed"
    # a product's or a relation's components: single changes of them say nothing alone
    # (batch 1 passes at one output position, not at two)
    named = {c.feature for c in trigger}
    in_trigger = named.union(*(ft.DERIVED.get(f, ()) for f in named), *(
        ft.FOLLOWS[size] for size, name in ft.UNEQUAL.items() if name in named))
    passes_also = [f"{ft.LABELS.get(r.feature, r.feature)} {', '.join(map(_show, r.passes))}"
                   for r in rows if r.feature not in in_trigger and r.passes and r.fails]
    trivial = trivial or {}
    independent = sorted({ft.LABELS.get(r.feature, r.feature) for r in rows
                          if r.feature not in in_trigger and not r.passes and len(r.fails) > 1
                          and (r.feature not in trivial or trivial[r.feature] in r.fails)})
    parts = [head]
    if passes_also:
        parts.append("passes with " + "; ".join(passes_also))
    if independent:
        parts.append("independent of " + ", ".join(independent))
    return "; ".join(parts)


#: a probe's verdict on one case: True (the same failure), False (passes), or the kind
#: of a failure that hides it (``raised``, ...: masked)
Probe = Callable[[ConvCase], "bool | str"]


#: the masked verdict of a failure a known cause covers (`failure_probe`'s ``known``)
KNOWN = "known bug"

#: whether a known cause covers a failure on a case (conv_harness/triage/causes.py's `covers`,
#: over the causes known when the explanation began)
Known = Callable[[CheckFailure, ConvCase], bool]


def _verdict(kind: str, failures: list[CheckFailure], case: ConvCase,
             known: Known | None) -> bool | str:
    same = [f for f in failures if f.check == kind]
    if same:
        if known is not None and all(known(f, f.case if f.case is not None else case)
                                     for f in same):
            return KNOWN
        return True
    masked = [f.check for f in failures if f.check in MASKING]
    return masked[0] if masked else False


def failure_probe(impl: Implementation, failure: CheckFailure, timeout: Timeout,
                  known: Known | None = None) -> Probe:
    """Whether a case shows the same kind of failure from the same function (True),
    passes (False), or fails in a way that hides it (the kind of that failure).

    A failure of that kind which ``known`` says a known cause covers is masked too
    (`KNOWN`): inside another cause's region, failing says nothing of what this bug
    needs (a shape bug of every unpadded problem fails any change to padding 0)."""
    kind, function = failure.check, failure.function
    if kind in _CONTRACT_KINDS and function is not None:
        def probe(case: ConvCase) -> bool | str:
            return _verdict(kind, diagnose(impl, function, case, timeout), case, known)
        return probe
    check = PRODUCED_BY.get(kind, kind)
    if check not in REGISTRY:  # nothing to run it again with
        return lambda case: False

    def probe_check(case: ConvCase) -> bool | str:
        return _verdict(kind, examine(check, impl, case, timeout), case, known)
    return probe_check


def _seed(*parts: Any) -> int:
    return int.from_bytes(hashlib.sha256(repr(parts).encode()).digest()[:4], "little")


def values_for(case: ConvCase, p: ConvProblem, layouts: dict[str, str], keep_constants: bool,
          seed: int) -> ConvCase:
    """Values for problem ``p``: the case's constants where it had them, else seeded noise."""
    arrays: dict[str, np.ndarray | None] = {}
    for name, shape in p.shapes().items():
        if shape is None:
            arrays[name] = None
            continue
        old = case.arrays().get(name)
        if keep_constants and old is not None and old.size and np.all(old == old.flat[0]):
            arrays[name] = np.full(shape, old.flat[0], dtype=p.dtype)
        else:
            arrays[name] = noise("floats", p.dtype, shape, seed + zlib.crc32(name.encode()))
    return ConvCase(problem=p, layouts=layouts, **arrays)


class _Trials:
    """The bounded, seeded calls of one explanation: each changed problem tried once."""

    def __init__(self, case: ConvCase, probe: Probe, caps: Capabilities):
        self.case, self.probe, self.caps = case, probe, caps
        self.calls = 0
        self.deadline = time.monotonic() + MAX_SECONDS
        self.seen: dict[tuple, bool | str] = {}
        #: the smallest changed case that failed, where smaller than the minimal one
        self.smaller: ConvCase | None = None
        #: (failing calls, calls) of each problem tried, by key and by the seed it was
        #: asked for with, where the probe counts them (`evidence.Repeated`)
        self.counts: dict[tuple, tuple[int, int]] = {}
        self.counted: dict[tuple, tuple[int, int]] = {}

    def outcome(self, q: ConvProblem, q_layouts: dict[str, str], seed: tuple) -> bool | str | None:
        """True: fails the same way; False: passes; a kind: masked; None: not tried."""
        key = (q, tuple(sorted(q_layouts.items())))
        if key in self.seen:
            if key in self.counts:
                self.counted[seed] = self.counts[key]
            return self.seen[key]
        if self.calls >= MAX_CALLS or time.monotonic() > self.deadline \
                or _excluded(self.caps, q, q_layouts):
            return None
        verdict: bool | str = False
        failing = calls = 0
        for keep in (True, False):
            self.calls += 1
            values = values_for(self.case, q, q_layouts, keep, _seed(*seed, keep))
            result = self.probe(values)
            last = getattr(self.probe, "last", None)
            if last is not None:
                failing, calls = failing + last[0], calls + last[1]
                self.counts[key] = self.counted[seed] = (failing, calls)
            if result is True:
                verdict = True
                best = self.smaller or self.case
                if _plainer(q, best.problem):
                    self.smaller = values
                break
            if verdict is False and result is not False:
                verdict = result  # masked, unless the other data shows the bug
        self.seen[key] = verdict
        return verdict

    def counts_of(self, feature: str, outcome: dict[Any, bool | str]) -> tuple:
        """(value, failing calls, calls) of each value of ``feature`` tried, where counted."""
        return tuple((v, *self.counted[(feature, v)]) for v in outcome
                     if (feature, v) in self.counted)


def _plainer(q: ConvProblem, p: ConvProblem) -> bool:
    """Whether ``q`` is smaller than ``p`` in one part of `ConvProblem.size_rank` and
    larger in none: two input positions with padding 1 are fewer elements than four
    without, but not a plainer problem."""
    a, b = q.size_rank(), p.size_rank()
    return a != b and all(x <= y for x, y in zip(a, b))


def explain(case: ConvCase, probe: Probe, caps: Capabilities) -> Explanation:
    """Try single changes of ``case``'s problem (bounded, seeded) and derive the trigger."""
    p, layouts = case.problem, dict(case.layouts)
    layouts = {name: layouts.get(name, "C") for name, a in case.arrays().items() if a is not None}
    current = ft.values(p, layouts)
    axis = ft.main_axis(p, layouts, caps)
    axes = tuple(range(len(p.input_size))) if caps.square else (axis,)
    trials = _Trials(case, probe, caps)
    own = (p, tuple(sorted(layouts.items())))
    trials.seen[own] = True  # the minimal problem itself: the failing case, not called again
    rows: list[Row] = []
    results: dict[str, dict[Any, bool | str]] = {}
    for feature in ft.FEATURES:
        on_axis = feature in ft.AXIS_FEATURES
        minimal = current[feature][axis] if on_axis else current[feature]
        where = _sharing(current, feature, axis, axes, caps) if on_axis else axes
        outcome: dict[Any, bool | str] = {}

        def tried(value: Any) -> bool | str | None:
            changed = ft.with_feature(p, layouts, feature, value, where)
            verdict = None if changed is None else trials.outcome(*changed, (feature, value))
            if verdict is not None:
                outcome[value] = verdict
            return verdict

        for value in ft.candidates(feature, minimal, caps, p, axis if on_axis else None):
            tried(value)
        if feature in ft.BISECTED:
            _down_to_boundary(outcome, minimal, tried)
            _every_other(outcome, minimal, tried, feature in WHOLE_ITEMS)
            if feature in WHOLE_ITEMS:
                _past_a_block(outcome, minimal, tried)
        if len(outcome) > 1 or (outcome and minimal not in outcome):
            rows.append(_row(feature, axis if on_axis and not caps.square else None, minimal,
                             outcome, trials.counts_of(feature, outcome)))
            results[feature] = outcome
    off_axis = _off_axis_rows(p, layouts, axis, axes, trials, caps)
    trigger = [c for c in (_trigger_condition(row, results[row.feature], caps)
                           for row in rows) if c is not None]
    trigger += [c for c in (_trigger_condition(row, _outcome(row), caps) for row in off_axis)
                if c is not None]
    rows += off_axis
    if not trigger:  # fails on the simplest problem: does it need a trivial value?
        trigger = [c for c in (_needs_trivial(row, results[row.feature], caps)
                               for row in rows) if c is not None]
    else:  # a dtype changes no size: where every other one passes, the bug needs this one
        trigger += [c for c in (_needs_trivial(row, results[row.feature], caps)
                                for row in rows if row.feature == "dtype") if c is not None]
    derived_rows, trigger = _derived(p, layouts, axis, axes, trials, trigger, caps)
    # after a product replaced its factors' conditions: their least values together
    # (in channels >= 42 and kernel >= 5 of a bug of K >= 2049) make a product too small
    _plainest(p, layouts, rows, trigger, trials, caps, axes)
    tie_rows, trigger = _ties(p, layouts, trials, trigger)
    crossing_rows, trigger = _crossings(p, layouts, trials, trigger)
    unequal_rows, trigger = _unequal(p, layouts, trials, trigger)
    derived_rows += tie_rows + crossing_rows + unequal_rows
    if not _on_any_axis(p, layouts, axis, trials, trigger):
        trigger = [dataclasses.replace(c, axes=len(p.input_size)) if c.axis is not None else c
                   for c in trigger]
    return Explanation(rows=tuple(rows + derived_rows), trigger=tuple(trigger),
                       calls=trials.calls, smaller=trials.smaller,
                       trivial=tuple((f, ft.trivial(f, caps)) for f in ft.FEATURES))


def _plainest(p: ConvProblem, layouts: dict[str, str], rows: list[Row],
              trigger: list[Condition], trials: _Trials, caps: Capabilities,
              axes: tuple[int, ...]) -> None:
    """One call more: every feature the rows show the bug independent of (each value
    tried failed, its trivial one among them) set to its trivial value, and each
    feature of a ``>=`` condition to the condition's least value, all at once. Each
    single change failed, so the problem with all of them most likely fails too;
    where it does and is plainer, the trials keep it as the explanation's smaller case
    and the finding is described again there. Single changes alone take a reshrink
    per feature (a sweep visit's case with batch 2, two channels, padding 3 and 98
    out channels, which Hypothesis did not shrink, would need four)."""
    least = {(c.feature, c.axis): c.value for c in trigger if c.op == ">="}
    in_trigger = {c.feature for c in trigger}
    current = ft.values(p, layouts)
    changes = []
    for row in rows:
        value = least.get((row.feature, row.axis), ft.trivial(row.feature, caps))
        if (row.feature, row.axis) in least:
            if value not in row.fails:
                continue
        elif row.feature in in_trigger or row.passes or len(row.fails) < 2 or (
                value not in row.fails and dict(row.other).get(value, KNOWN) == KNOWN):
            # (a trivial value another cause masked, with no value passing: the size
            # check refuses stride 1 at these outputs, not with the others changed too;
            # one in a known bug's region stays there, whatever else changes)
            continue
        if value == row.minimal:
            continue
        # on the axes its single changes were made on (those sharing the main one's value)
        where = (axes if row.axis is None
                 else _sharing(current, row.feature, row.axis, (row.axis,), caps))
        changes.append((row.feature, value, where))
    tries = [_changed(p, layouts, changes, growing=True)]
    if not _plainer(tries[0][0], p):
        # some change grows another size (padding 0 widens an input narrower than its
        # kernel, to keep its outputs): with the outputs at their least instead (the
        # input shrinks to the kernel's span), and the others without it
        every = tuple(range(len(p.input_size)))
        least_outputs = _changed(p, layouts, [*changes, ("outputs", ft.trivial("outputs", caps),
                                                         every)], growing=True)
        tries = [least_outputs] if _plainer(least_outputs[0], p) else []
        tries.append(_changed(p, layouts, changes, growing=False))
    # the first try draws its data from the seed the one plainest try always had
    for i, (q, q_layouts) in enumerate(tries):
        if q != p or q_layouts != layouts:
            trials.outcome(q, q_layouts, ("plainest",) if i == 0 else ("plainest", i))


def _changed(p: ConvProblem, layouts: dict[str, str], changes: list[tuple[str, Any, tuple]],
             growing: bool) -> tuple[ConvProblem, dict[str, str]]:
    """``p`` with each of ``changes`` (feature, value, axes) that is valid, in turn; with
    ``growing`` False, only those that grow no part of its `ConvProblem.size_rank`."""
    q, q_layouts = p, dict(layouts)
    for feature, value, where in changes:
        changed = ft.with_feature(q, q_layouts, feature, value, where)
        if changed is not None and (growing or all(
                a <= b for a, b in zip(changed[0].size_rank(), q.size_rank()))):
            q, q_layouts = changed
    return q, q_layouts


def _off_axis_rows(p: ConvProblem, layouts: dict[str, str], axis: int,
                   axes: tuple[int, ...], trials: _Trials, caps: Capabilities) -> list[Row]:
    """Rows for what the minimal problem has on an axis the explanation does not vary.

    A minimal problem may need a feature on another axis than its main one (a size
    check that refuses any dilation, then finds the kernel too large on another
    axis: dilation 2 on w, kernel 2 on h). Each such non-trivial value is made
    trivial on its axis alone; where that passes, the row says so and the
    trigger needs it (on some axis). One call per such value.
    """
    rows = []
    current = ft.values(p, layouts)
    for feature in ft.AXIS_FEATURES:
        trivial = ft.trivial(feature, caps)
        if current[feature][axis] != trivial:
            continue  # varied on the main axis, and on every axis sharing its value
        for other, value in enumerate(current[feature]):
            if other in axes or value == trivial:
                continue
            changed = ft.with_feature(p, layouts, feature, trivial, (other,))
            if changed is not None and trials.outcome(*changed, (feature, other)) is False:
                counted = trials.counted.get((feature, other))
                rows.append(_row(feature, other, value, {value: True, trivial: False},
                                 ((trivial, *counted),) if counted else ()))
    return rows


def _outcome(row: Row) -> dict[Any, bool | str]:
    """A row's outcome of each value tried: True fails, False passes, a kind masked."""
    return {**{v: True for v in row.fails}, **{v: False for v in row.passes}, **dict(row.other)}


def _sharing(current: dict[str, Any], feature: str, axis: int, axes: tuple[int, ...],
             caps: Capabilities) -> tuple[int, ...]:
    """The axes an axis feature is varied on: ``axes``, and where its value on the main
    axis is not trivial, every axis that has the same value. A minimal problem with a
    stride of 2 on every axis fails with any one of them at 1: only all three at 1
    show that the bug needs a stride (else "no feature is needed")."""
    minimal = current[feature][axis]
    if minimal == ft.trivial(feature, caps):
        return axes
    return tuple(sorted(set(axes) | {a for a, v in enumerate(current[feature]) if v == minimal}))


def _on_any_axis(p: ConvProblem, layouts: dict[str, str], axis: int, trials: _Trials,
                 trigger: list[Condition]) -> bool:
    """Whether the bug shows with its axis swapped with each other axis too (its axis
    conditions then name no axis in particular: a conv3d stride bug on w that also
    shows on h and d is the cause of a conv2d stride bug on h). One call per other
    axis; False where a swap passes, is masked or was not tried."""
    if not any(c.axis is not None and not c.every_axis for c in trigger) \
            or len(p.input_size) < 2:
        return False
    for other in range(len(p.input_size)):
        if other != axis:
            verdict = trials.outcome(ft.swap_axes(p, axis, other), layouts, ("swap", other))
            if verdict is not True:
                return False
    return True


def _row(feature: str, axis: int | None, minimal: Any, outcome: dict[Any, bool | str],
         counts: tuple[tuple[Any, int, int], ...] = ()) -> Row:
    return Row(feature, axis, minimal, tuple(v for v, f in outcome.items() if f is True),
               tuple(v for v, f in outcome.items() if f is False),
               tuple((v, f) for v, f in outcome.items() if isinstance(f, str)), counts)


def _trigger_condition(row: Row, outcome: dict[Any, bool | str],
                       caps: Capabilities) -> Condition | None:
    """The condition of a non-trivial minimal value whose trivial value passes (not
    masked: a change that raises says nothing of what the bug needs); or, for a count
    of whole items (`WHOLE_ITEMS`), every other value from the trivial one (odd
    batches: 1 fails, 2 passes)."""
    trivial = ft.trivial(row.feature, caps)
    if row.minimal == trivial:
        condition = _condition(row, caps) if row.feature in WHOLE_ITEMS else None
        return condition if condition is not None and condition.op == EVERY_OTHER else None
    if outcome.get(trivial) is not False:
        return None
    return _condition(row, caps)


def _needs_trivial(row: Row, outcome: dict[Any, bool | str],
                   caps: Capabilities) -> Condition | None:
    """For a bug on the simplest problem: a trivial value that every other value tried
    makes pass (``padding = 0``, on every axis), so that a further search still sees
    failures of the same kind elsewhere (no cause hidden by another of its kind)."""
    trivial = ft.trivial(row.feature, caps)
    others = [v for v in outcome if v != trivial]
    if row.minimal != trivial or not others or not all(outcome[v] is False for v in others):
        return None
    condition = _condition(row, caps)
    if condition is not None and row.feature in ft.AXIS_FEATURES:
        return dataclasses.replace(condition, every_axis=True)
    return condition


def _derived(p: ConvProblem, layouts: dict[str, str], axis: int, axes: tuple[int, ...],
             trials: _Trials, trigger: list[Condition],
             caps: Capabilities) -> tuple[list[Row], list[Condition]]:
    """Rows of derived features, and the trigger with a product where the bug needs one.

    For each derived feature (`features.DERIVED`: an axis's input size with
    padding, the reduction length K, the output positions) whose components'
    conditions are in the trigger: the minimal value is realised another way
    (one in channel and a kernel of K taps, say). When that fails too and the
    trivial value passes, the bug follows the derived feature, not the component:
    the components' conditions give way to ``K >= minimal``.
    """
    rows: list[Row] = []
    current = ft.values(p, layouts)
    for name, components in ft.DERIVED.items():
        on_axis = name in ft.AXIS_DERIVED
        minimal = current[name][axis] if on_axis else current[name]
        parts = [c for c in trigger if c.feature in components]
        if minimal <= 1 or not parts:
            continue
        outcome: dict[Any, bool | str] = {1: False}

        def tried(value: int, some_way: bool = False) -> bool | str | None:
            verdicts = [trials.outcome(*q, (name, value, i)) for i, q in enumerate(
                ft.realisations(p, layouts, name, value, axis, axes))]
            verdict = _every_way(verdicts)
            if some_way and True in verdicts and False not in verdicts:
                verdict = True
            elif verdict not in (True, False) and True in verdicts:
                # the ways on one axis masked (a backward of square outputs only refuses
                # 1x2 positions): positions alone, on every axis alike, at or above it
                square = ft.square_realisation(p, layouts, name, value)
                if square is not None \
                        and trials.outcome(*square, (name, value, "square")) is True:
                    verdict = True
            if verdict is not None:
                outcome[value] = verdict
            return verdict
        # The product holds where every way fails at the minimal value; at the others a
        # value is below the boundary where some way passes, above it where one fails and
        # the others are masked (2049 channels are another cause's partial block of 8;
        # 2049 taps fail)
        for value in sorted({minimal, minimal + 1} | _smaller(minimal)):
            tried(value, some_way=value != minimal)
        if outcome.get(minimal) is not True:
            continue
        # from a sweep's case far above it (K 2375 of a bug from 2049 on): to the boundary
        _down_to_boundary(outcome, minimal, lambda v: tried(v, some_way=True))
        row = _row(name, axis if on_axis else None, minimal, outcome)
        rows.append(row)
        trigger = [c for c in trigger if c.feature not in components]
        trigger.append(Condition(name, ">=", _lowest_failing(outcome, minimal),
                                 axis if on_axis else None))
    return rows, trigger


def _ties(p: ConvProblem, layouts: dict[str, str], trials: _Trials,
          trigger: list[Condition]) -> tuple[list[Row], list[Condition]]:
    """Rows of ties (conv_harness/ties.py), and the trigger with a tie where the bug follows one.

    For each tie the minimal problem holds whose sizes' conditions are in the
    trigger (a step of one of them passed): the tie is made at other values
    (`ties.retied`: one size a step larger, another to match), and broken by a
    step of one side alone (`ties.broken`). When each of the first fails and each
    of the second passes, the bug needs the two sizes equal, not those values:
    the sizes' conditions give way to the tie (``out channels per group = K``),
    from the least value where it fails (`_tie_threshold`: ``... = K >= 16``).
    A bug of something else the problem has (a padding) fails where the tie is
    broken too."""
    rows: list[Row] = []
    for tie in ties.TIES:
        parts = [c for c in trigger if c.feature in tie.components]
        if not tie.holds(p) or not parts:
            continue
        retied = ties.retied(p, tie.name)
        kept = [trials.outcome(q, layouts, ("tie", tie.name, i)) for i, q in enumerate(retied)]
        if not kept or not all(v is True for v in kept):
            continue
        off = [trials.outcome(q, layouts, ("untied", tie.name, i))
               for i, q in enumerate(ties.broken(p, tie.name))]
        if not off or not all(v is False for v in off):
            continue
        lowered = _lower_tie(p, layouts, trials, tie.name)
        least, below = _tie_threshold(lowered, layouts, trials, tie.name)
        outcome = {0: False, tie.value(p): True, tie.value(lowered): True,
                   **{tie.value(q): True for q in retied}, **below}
        rows.append(_row(tie.name, None, tie.value(p), outcome))
        trigger = [c for c in trigger if c.feature not in tie.components]
        trigger.append(Condition(tie.name, ">=", least, None))
        break  # one tie names the sizes; another holding too is the same sizes again
    return rows, trigger


def _crossings(p: ConvProblem, layouts: dict[str, str], trials: _Trials,
               trigger: list[Condition]) -> tuple[list[Row], list[Condition]]:
    """Rows of crossings (conv_harness/ties.py), and the trigger with one where the bug follows it.

    Where the minimal problem crosses two per-axis sizes (a kernel longer than the
    input on h, shorter on w) and the trigger has a condition on them: crossed at
    another size (`ties.crossed_again`), and with the axes swapped, it must fail, and
    undone both ways (`ties.uncrossed`: the kernel the smaller on every axis, and
    the larger on every axis) it must pass. Then the bug needs the crossing, not
    those sizes: code that picks the larger operand by comparing every axis finds
    neither. A bug of a two-tap kernel alone fails where the kernel covers the
    input on every axis too, and keeps its own conditions."""
    rows: list[Row] = []
    n = len(p.input_size)
    for crossing in ties.CROSSINGS:
        if not crossing.holds(p) or not any(c.feature in crossing.components for c in trigger):
            continue
        again = ties.crossed_again(p, crossing.name) + [
            ft.swap_axes(p, a, b) for a in range(n) for b in range(a + 1, n)]
        kept = [trials.outcome(q, layouts, ("crossed", crossing.name, i))
                for i, q in enumerate(again)]
        if not kept or not all(v is True for v in kept):
            continue
        undone = ties.uncrossed(p, crossing.name)
        off = [trials.outcome(q, layouts, ("uncrossed", crossing.name, i))
               for i, q in enumerate(undone)]
        if len(off) < 2 or not all(v is False for v in off):
            continue
        rows.append(Row(crossing.name, None, True, (True,), (False,)))
        trigger = [c for c in trigger if c.feature not in crossing.components]
        trigger.append(Condition(crossing.name, "in", (True,), None))
    return rows, trigger


#: the most output positions a problem made square may have (`_unequal`)
EVENED_POSITIONS = 64


def _unequal(p: ConvProblem, layouts: dict[str, str], trials: _Trials,
             trigger: list[Condition]) -> tuple[list[Row], list[Condition]]:
    """Rows of sizes the bug needs unequal between axes, and the trigger with them.

    Where a size of the minimal problem differs between its axes (outputs 2x1) and the
    trigger has a condition on it or on what follows from it (the output positions):
    made the same on every axis at each of its values (1x1 and 2x2), the bug must pass;
    made unequal at another size (3x1) and with the axes swapped (1x2), it must fail.
    Then the bug needs the axes to differ, not those sizes (a backward written for
    square outputs only), and the size's conditions give way to that one. Only where
    each evened problem has at most `EVENED_POSITIONS` outputs: on a larger one a
    wrong element can fit a lower precision's normwise floor, which reads as a pass
    (a tail bug of 1x65 outputs, evened to 65x65)."""
    rows: list[Row] = []
    current = ft.values(p, layouts)
    every = tuple(range(len(p.input_size)))
    for size, name in ft.UNEQUAL.items():
        values = current[size]
        follows = ft.FOLLOWS[size]
        if len(set(values)) < 2 or not any(c.feature in follows for c in trigger):
            continue
        evened = [ft.with_feature(p, layouts, size, v, every) for v in sorted(set(values))]
        if any(q is None or math.prod(q[0].output_size) > EVENED_POSITIONS for q in evened):
            continue
        off = [trials.outcome(*q, ("evened", size, i)) for i, q in enumerate(evened)]
        if len(off) < 2 or not all(v is False for v in off):
            continue
        larger = max(every, key=lambda a: values[a])
        again = [ft.with_feature(p, layouts, size, values[larger] + 1, (larger,))] + [
            (ft.swap_axes(p, a, b), layouts) for a in every for b in every
            if a < b and values[a] != values[b]]
        kept = [trials.outcome(*q, ("unequal", size, i)) for i, q in enumerate(again)
                if q is not None]
        if len(kept) < 2 or not all(v is True for v in kept):
            continue
        rows.append(Row(name, None, True, (True,), (False,)))
        trigger = [c for c in trigger if c.feature not in follows]
        trigger.append(Condition(name, "in", (True,), None))
    return rows, trigger


def _lower_tie(p: ConvProblem, layouts: dict[str, str], trials: _Trials,
               name: str) -> ConvProblem:
    """Shrink a bug that follows tie ``name`` along the tie: from ``p``, the plainest
    problem with one size lower and the tie made again that fails, and so on, until
    none does (a square GEMM branch taken at 16 or more, found on a 7x7 stem's
    N = K = 98, ends at 18, one in channel and a 3x6 kernel). Where that reaches a
    plainer problem, the trials keep it as the explanation's smaller case, which the
    triage describes instead. It starts from the smallest failing problem met so far
    where that holds the tie: a smaller case must be plainer than that one too.
    Returns the last problem reached."""
    smaller = trials.smaller.problem if trials.smaller is not None else None
    current = smaller if smaller is not None and ties.BY_NAME[name].holds(smaller) else p
    for step in range(MAX_TIE_STEPS):
        for i, q in enumerate(ties.lowered(current, name)):
            if _plainer(q, current) and \
                    trials.outcome(q, layouts, ("lowered", name, step, i)) is True:
                current = q
                break
        else:
            break
    return current


#: the least value of a tie (both sides 1 is no tie)
TIE_FLOOR = 2


def _tie_threshold(p: ConvProblem, layouts: dict[str, str], trials: _Trials,
                   name: str) -> tuple[int, dict[int, bool | str]]:
    """The least value of tie ``name`` from which the bug shows, and the verdict of each
    value tried below ``p``'s: the tie made there (`ties.at`, every way it can be;
    a value fails where each of them fails, and passes where one passes). First the
    values `_smaller` gives, then a bisection between the highest that passed and
    the least that failed above it: a blocked GEMM's square branch, taken from 16
    on, is met at N = K = 18 and reads ``= K >= 16``, where "any tie" would exclude
    every tie from further searches. `TIE_FLOOR` where nothing below passed."""
    outcome: dict[int, bool | str] = {}

    def tried(value: int) -> bool | str | None:
        verdict = _every_way([trials.outcome(q, layouts, ("tied at", name, value, i))
                              for i, q in enumerate(ties.at(p, name, value))])
        if verdict is not None:
            outcome[value] = verdict
        return verdict

    start = ties.BY_NAME[name].value(p)
    for value in _smaller(start):
        tried(value)
    least = _down_to_boundary({**outcome, start: True}, start, tried)
    return (TIE_FLOOR if least is None else least), outcome


def _every_way(verdicts: list[bool | str | None]) -> bool | str | None:
    """One verdict for a value realised several ways: it fails where each way fails, and
    passes where one passes; else the first masking kind; None where none was tried."""
    tried = [v for v in verdicts if v is not None]
    if not tried:
        return None
    if all(v is True for v in tried):
        return True
    return False if any(v is False for v in tried) else next(
        v for v in tried if v is not True)


def _bisect(passing: int, failing: int, tried: Callable[[int], bool | str | None]) -> int:
    """The least failing value between ``passing`` and ``failing`` (a bug from a size on),
    by bisection; where a value cannot be tried or is masked, the least found so far."""
    while failing - passing > 1:
        middle = (failing + passing) // 2
        verdict = tried(middle)
        if verdict is True:
            failing = middle
        elif verdict is False:
            passing = middle
        else:
            break
    return failing


def _down_to_boundary(outcome: dict[Any, bool | str], minimal: int,
                      tried: Callable[[int], bool | str | None]) -> int | None:
    """Where a numeric feature fails from its minimal value down to some value and passes
    below it with a gap between (98 out channels and 97 fail, 3 passes), the values
    between, by bisection (`_bisect`): the trigger then starts at the bug's boundary
    (``>= 33``), and the explanation's smaller case is the one there. A search that met
    the bug only far from its boundary (a visit of the catalogue sweep, which
    Hypothesis does not shrink) ends at it all the same. Returns that boundary, None
    where no value below the failing ones passed."""
    failing = minimal
    for value in sorted((v for v in outcome if v < minimal), reverse=True):
        if outcome[value] is not True:
            return _bisect(value, failing, tried) if outcome[value] is False else None
        failing = value
    return None


#: steps down a tie at most (each lowers one size to 1, half or one less)
MAX_TIE_STEPS = 12


#: a derived feature's smaller values are each tried up to this one; above, three
SMALLER_TRIED = 8


#: the features whose parity from their trivial value is what a bug needs: counts of
#: whole items a loop takes in blocks, whose odd tail it gets wrong (odd batches, odd
#: channel counts). An axis's parity from its trivial value follows where the stride's
#: windows land (padding even, on one input position under stride 2) and names nothing
#: the code branches on. The numeric features of the whole problem: batch, channels
#: per group, groups.
WHOLE_ITEMS = ft.NUMERIC - frozenset(ft.AXIS_FEATURES)


def _every_other(outcome: dict[Any, bool | str], minimal: int,
                 tried: Callable[[int], bool | str | None], from_least: bool) -> None:
    """Where the minimal value fails and both its neighbours pass (batch 3 fails, 2 and
    4 pass), the next three values up too: a bug of every other value (odd batches
    of 3 or more, an odd-length tail of a vectorised loop) is one region, which
    `_condition` names (``batch odd >= 3``), not one region per value, each a further
    search's finding. ``from_least`` (`WHOLE_ITEMS`): also where no value below the
    minimal one was tried, the next passes and the one after fails (batch 1 and 3
    fail, 2 passes: ``batch odd``)."""
    below = outcome.get(minimal - 1)
    if outcome.get(minimal) is True and outcome.get(minimal + 1) is False and (
            below is False
            or (from_least and below is None and outcome.get(minimal + 2) is True)):
        for value in (minimal + 2, minimal + 3, minimal + 4):
            tried(value)


def _past_a_block(outcome: dict[Any, bool | str], minimal: int,
                  tried: Callable[[int], bool | str | None]) -> None:
    """Where a count fails from a boundary up (9 fails, 8 passes: ``>= 9``), twice the
    value below it and the one after (16 and 17): a path that takes the items in blocks
    of 8 and mishandles a partial block passes at 16 and fails again at 17, which
    `_condition` names (``> 8, not a multiple of 8``); ``>= 9`` would cover every
    failure of a problem of 16, 32 or 96 channels, another cause's among them."""
    least = _lowest_failing(outcome, minimal)
    block = least - 1  # of 2: odd counts, which `_every_other` names
    if block >= 3 and outcome.get(least) is True and outcome.get(block) is False:
        for value in (2 * block, 2 * block + 1):
            tried(value)


def _tail_of(row: Row) -> int | None:
    """The block, where the row fails above it and off its multiples only, a multiple
    passing between failures (8: 9 and 17 fail, 8 and 16 pass)."""
    if not row.fails or row.feature not in WHOLE_ITEMS:
        return None
    block = min(row.fails) - 1
    if block < 3 or block not in row.passes or 2 * block not in row.passes:
        return None
    if any(v % block == 0 for v in row.fails) or max(row.fails) < 2 * block:
        return None
    above = [v for v in row.passes if v > block]
    return block if all(v % block == 0 for v in above) else None


def _every_other_from(row: Row) -> int | None:
    """The least failing value, where the row fails at every other value from it (three
    at least: two would be a pair of values) and passes between them and at every
    value of their parity below."""
    fails = sorted(row.fails)
    if len(fails) < 3 or any((v - fails[0]) % 2 for v in fails):
        return None
    gaps = set(range(fails[0] + 1, fails[-1], 2))
    below = {v for v in row.passes if v < fails[0] and (fails[0] - v) % 2 == 0}
    if not gaps <= set(row.passes) or any(v in row.passes for v in range(
            fails[0], fails[-1] + 1, 2)) or not (below or fails[0] <= 2):
        return None
    return fails[0]


def _smaller(minimal: int) -> set[int]:
    """The values below a derived feature's minimal one that are tried, each realised
    by every component that can carry it: the minimal problem reached its value by
    the components its search shrank, which may not be the ones that give the least
    (four taps of a square kernel, where two channels give K = 2)."""
    if minimal <= SMALLER_TRIED:
        return set(range(2, minimal))
    return {2, minimal // 2, minimal - 1}


def _lowest_failing(outcome: dict[Any, bool | str], minimal: int) -> int:
    """The least value tried from which every value tried up to ``minimal`` fails."""
    lowest = minimal
    for value in sorted((v for v in outcome if v < minimal), reverse=True):
        if outcome[value] is not True:
            break
        lowest = value
    return lowest


def _excluded(caps: Capabilities, p: ConvProblem, layouts: dict[str, str]) -> bool:
    return bool(caps.excludes(ConvCase.bare(p, layouts)))


def _condition(row: Row, caps: Capabilities) -> Condition | None:
    """What the failing values of a trigger feature have in common."""
    if not row.fails:
        return None
    if row.feature in ft.NUMERIC:
        low, high = min(row.fails), max(row.fails)
        block = _tail_of(row)
        if block is not None:
            return Condition(row.feature, TAIL, block, row.axis)
        if all(v < low for v in row.passes):
            return Condition(row.feature, ">=", low, row.axis)
        if all(v > high for v in row.passes):
            return Condition(row.feature, "<=", high, row.axis)
        least = _every_other_from(row)
        if least is not None:
            return Condition(row.feature, EVERY_OTHER, least, row.axis)
    return Condition(row.feature, "in", tuple(sorted(row.fails, key=_sort_key)), row.axis)
