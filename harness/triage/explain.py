"""Explaining a bug: which single changes to its minimal problem keep it failing.

For the bug's minimal problem, each feature (harness/triage/features.py) is
set to a few other values, one at a time, and the implementation is called
on the changed problem with fresh data: twice, once with the minimal case's
own constants where its arrays are constant and seeded noise elsewhere, once
with seeded noise everywhere (at most `MAX_CALLS` calls and `MAX_SECONDS`). The changed problem *fails* when either call
shows the same kind of failure from the same function (``grad_input``
wrong, ``dtype`` wrong, ``raised``, ...). The seeds are fixed, so an
explanation is the same on every run, and the number of calls is bounded.

The *trigger* is what the bug needs: the non-trivial features of the minimal
problem whose trivial value makes it pass, each with the values that fail
(``stride >= 3``). It is a predicate on problems: the follow-up searches
(harness/triage/search.py) ignore failures of the same kind on problems it
matches, and the run summary merges two findings into one bug when each
one's problem matches the other's trigger.
"""

from __future__ import annotations

import hashlib
import time
import zlib
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from harness.checks.diagnosis import diagnose
from harness.problem import ConvCase, ConvProblem
from harness.running.calling import CheckFailure
from harness.running.capabilities import Capabilities
from harness.running.loader import Implementation
from harness.triage import features as ft

#: the most calls of the implementation one explanation makes, and the most
#: time it takes (a bug that is a hang must not make it take 240 time limits)
MAX_CALLS = 240
MAX_SECONDS = 30.0
_CONTRACT_KINDS = frozenset({"forward", "grad_input", "grad_weight", "grad_bias", "dtype",
                             "shape", "raised", "result_type", "nonfinite", "input_changed",
                             "timeout", "crashed"})


@dataclass(frozen=True)
class Condition:
    """One feature a bug needs: ``feature op value`` (op: ``>=``, ``<=``, ``in``)."""

    feature: str
    op: str
    value: Any
    axis: int | None  # the minimal problem's axis, None for a feature of the whole problem

    def holds(self, v: Any) -> bool:
        if self.op == ">=":
            return v >= self.value
        if self.op == "<=":
            return v <= self.value
        return v in self.value

    def text(self) -> str:
        label = ft.LABELS.get(self.feature, self.feature)
        if self.op == "in":
            shown = [_show(v) for v in self.value]
            if self.feature == "bias" and len(shown) == 1:
                return shown[0]
            return f"{label} {'= ' + shown[0] if len(shown) == 1 else 'in {' + ', '.join(shown) + '}'}"
        return f"{label} {self.op} {_show(self.value)}"

    def to_json(self) -> dict[str, Any]:
        return {"feature": self.feature, "op": self.op,
                "value": list(self.value) if self.op == "in" else self.value, "axis": self.axis}

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> "Condition":
        value = tuple(raw["value"]) if raw["op"] == "in" else raw["value"]
        return cls(raw["feature"], raw["op"], value, raw.get("axis"))


def _show(v: Any) -> str:
    if isinstance(v, bool):
        return "with bias" if v else "no bias"
    return str(v)


def matches(conditions: list[Condition], p: ConvProblem, layouts: dict[str, str]) -> bool:
    """Whether a problem has everything the trigger needs.

    Conditions of the whole problem must hold; axis conditions that the
    minimal problem had on one axis must hold together on one axis, others
    each on some axis.
    """
    v = ft.values(p, layouts)
    axis_conds = [c for c in conditions if c.feature in ft.AXIS_FEATURES]
    if not all(c.holds(v[c.feature]) for c in conditions if c.feature not in ft.AXIS_FEATURES):
        return False
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

    def to_json(self) -> dict[str, Any]:
        return {"feature": self.feature, "axis": self.axis, "minimal": self.minimal,
                "fails": list(self.fails), "passes": list(self.passes)}

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> "Row":
        return cls(raw["feature"], raw.get("axis"), raw["minimal"], tuple(raw["fails"]),
                   tuple(raw["passes"]))


@dataclass(frozen=True)
class Explanation:
    rows: tuple[Row, ...]
    trigger: tuple[Condition, ...]
    calls: int
    trivial: tuple[tuple[str, Any], ...] = ()  # each feature's trivial value

    def one_line(self) -> str:
        return trigger_line(self.rows, self.trigger, dict(self.trivial))

    def table(self) -> str:
        """The rows as text: each value tried, FAIL or pass, the minimal one starred."""
        width = max((len(_row_label(r)) for r in self.rows), default=0) + 2
        lines = []
        for row in self.rows:
            cells = []
            for v in sorted(set(row.fails) | set(row.passes), key=_sort_key):
                mark = "FAIL" if v in row.fails else "pass"
                cells.append(f"{_show(v)}{'*' if v == row.minimal else ''}:{mark}")
            lines.append("  " + _row_label(row).ljust(width) + "  ".join(cells))
        return "\n".join(lines)


def _sort_key(v: Any) -> tuple:
    return (0, v, "") if isinstance(v, (int, float)) and not isinstance(v, bool) else (1, 0, str(v))


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
    in_trigger = {c.feature for c in trigger}
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


Probe = Callable[[ConvCase], bool]


def failure_probe(impl: Implementation, failure: CheckFailure, timeout: float | None) -> Probe:
    """Whether a case shows the same kind of failure from the same function."""
    kind, function = failure.check, failure.function
    if kind in _CONTRACT_KINDS and function is not None:
        def probe(case: ConvCase) -> bool:
            return any(f.check == kind for f in diagnose(impl, function, case, timeout))
        return probe
    from harness.checks.registry import REGISTRY, examine
    if kind not in REGISTRY:  # nothing to run it again with
        return lambda case: False

    def probe_check(case: ConvCase) -> bool:
        return any(f.check == kind for f in examine(kind, impl, case, timeout))
    return probe_check


def _seed(*parts: Any) -> int:
    return int.from_bytes(hashlib.sha256(repr(parts).encode()).digest()[:4], "little")


def _data(case: ConvCase, p: ConvProblem, layouts: dict[str, str], keep_constants: bool,
          seed: int) -> ConvCase:
    """Values for problem ``p``: the case's constants where it had them, else seeded noise."""
    from strategies.cases import noise
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


def explain(case: ConvCase, probe: Probe, caps: Capabilities) -> Explanation:
    """Try single changes of ``case``'s problem (bounded, seeded) and derive the trigger."""
    p, layouts = case.problem, dict(case.layouts)
    layouts = {name: layouts.get(name, "C") for name, a in case.arrays().items() if a is not None}
    current = ft.values(p, layouts)
    axis = ft.main_axis(p, layouts, caps)
    axes = tuple(range(len(p.input_size))) if caps.square else (axis,)
    calls = 0
    deadline = time.monotonic() + MAX_SECONDS
    rows: list[Row] = []
    results: dict[str, dict[Any, bool]] = {}
    for feature in ft.FEATURES:
        on_axis = feature in ft.AXIS_FEATURES
        minimal = current[feature][axis] if on_axis else current[feature]
        outcome: dict[Any, bool] = {}
        for value in ft.candidates(feature, minimal, caps, p, axis if on_axis else None):
            changed = ft.with_feature(p, layouts, feature, value, axes)
            if changed is None or calls >= MAX_CALLS or time.monotonic() > deadline:
                continue
            q, q_layouts = changed
            if _excluded(caps, q, q_layouts):
                continue
            fails = False
            for keep in (True, False):
                calls += 1
                if probe(_data(case, q, q_layouts, keep, _seed(feature, value, keep))):
                    fails = True
                    break
            outcome[value] = fails
        if len(outcome) > 1 or (outcome and minimal not in outcome):
            rows.append(Row(feature, axis if on_axis and not caps.square else None, minimal,
                            tuple(v for v, f in outcome.items() if f),
                            tuple(v for v, f in outcome.items() if not f)))
            results[feature] = outcome
    trigger = tuple(_condition(row, caps) for row in rows
                    if row.minimal != ft.trivial(row.feature, caps)
                    and results[row.feature].get(ft.trivial(row.feature, caps)) is False)
    return Explanation(rows=tuple(rows), trigger=tuple(c for c in trigger if c is not None),
                       calls=calls, trivial=tuple((f, ft.trivial(f, caps)) for f in ft.FEATURES))


def _excluded(caps: Capabilities, p: ConvProblem, layouts: dict[str, str]) -> bool:
    probe_case = ConvCase(problem=p, x=None, weight=None, bias=None,  # type: ignore[arg-type]
                          grad_output=None, layouts=layouts)  # type: ignore[arg-type]
    return bool(caps.excludes(probe_case))


def _condition(row: Row, caps: Capabilities) -> Condition | None:
    """What the failing values of a trigger feature have in common."""
    if not row.fails:
        return None
    if row.feature in ft.NUMERIC:
        low, high = min(row.fails), max(row.fails)
        if all(v < low for v in row.passes):
            return Condition(row.feature, ">=", low, row.axis)
        if all(v > high for v in row.passes):
            return Condition(row.feature, "<=", high, row.axis)
    return Condition(row.feature, "in", tuple(sorted(row.fails, key=_sort_key)), row.axis)
