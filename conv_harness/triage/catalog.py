"""Distinct bugs: the record of one, and merging what several searches found.

One entry per root cause. Besides the rules below for findings of one
function, findings are one cause on evidence the harness gathered
(`part_of`): the same trigger and failure signature (kind, and for an
exception its type and message) in different functions; a backward whose
failure is its forward's (the forward fails on the same problem and the
backward is the exact gradient of that forward); value errors the size of a
lower precision's rounding under a dtype cause that returns that precision;
non-finite or history-dependent results inside a deterministic cause's
trigger region of the same function; wrong results of other functions or
results with the same trigger at the same minimal problem (`agrees_elsewhere`).

A `Bug` is what one search (one check's, conv_harness/searching/search.py) found and
explained: the kind of failure and the function that showed it, its minimal
problem, its trigger and explanation, and its case file. The run summary
merges the bugs of one implementation across checks (`merge`): two findings
are one bug when they are the same kind of failure of the same function and
either one's problem matches the other's trigger or their triggers need the
same structural feature, stride say (six checks tripping over one padding bug make one entry). The
last clause errs towards merging: a bug that shows in two ways (the last
input row lost when a stride > 1 window reaches it, through a kernel >= 2
or through outputs >= 2) has two minimal problems whose triggers each need
the other's absent feature, and one bug must never be split; the entry
keeps the other trigger under ``also``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from conv_harness.descriptor import format_descriptor
from conv_harness.problem import PER_AXIS_FIELDS, ConvProblem, in_fewer_dimensions
from conv_harness.running.calling import CheckFailure
from conv_harness.triage.explain import Condition, Row, matches

#: the features a shared trigger condition merges on: what the code branches on,
#: not sizes that many bugs need incidentally (outputs >= 2, batch >= 2)
STRUCTURAL = frozenset({"stride", "padding", "kernel", "dilation", "groups", "output_padding",
                        "dtype", "layout", "bias"})


@dataclass
class Bug:
    check: str
    failure: str
    function: str | None
    op: str
    params: dict[str, Any]
    layouts: dict[str, str]
    trigger: str
    conditions: list[Condition]
    explanation: list[Row]
    case_file: str | None
    report: str = ""
    checks: list[str] = field(default_factory=list)
    also: list[str] = field(default_factory=list)  # triggers of findings merged into it
    alone: bool | None = None  # its script, alone in a fresh process, fails (None: not run)
    #: why the script's verdict alone is not "reproduces" (shown in the text)
    alone_reason: str = ""
    #: every function that showed it
    functions: list[str] = field(default_factory=list)
    #: what kind of failure, exactly (`signature`): merges findings across functions
    signature: str = ""
    #: what the harness measured of its minimal case (`conv_harness/triage/evidence.py`)
    evidence: dict[str, Any] = field(default_factory=dict)
    #: the run-wide id of the cause (conv_harness/triage/causes.py); a sighting of a known
    #: cause carries that cause's id and ``sighting`` True
    cause: str = ""
    sighting: bool = False
    #: "" when minimal; else why the case is not
    not_minimal: str = ""
    #: other sightings (function, check, case file) shown under the entry
    sightings: list[dict[str, Any]] = field(default_factory=list)
    #: the archetype (or its neighbour) its search first failed on, "" for none (issue 22)
    found_on: str = ""
    #: the run-wide ids of the causes merged into this one (another region of it, found
    #: and published before a triage knew it was the same bug): their sightings are its
    joined: list[str] = field(default_factory=list)

    @property
    def problem(self) -> ConvProblem:
        return ConvProblem.from_params(self.op, self.params)

    def covers(self, failure: CheckFailure) -> bool:
        """Whether ``failure`` is this bug again: same kind, same function, trigger matched."""
        if failure.check != self.failure or failure.function != self.function:
            return False
        case = failure.case
        return case is None or self.region_holds(case)

    def region_holds(self, case) -> bool:
        """Whether ``case``'s problem is in this bug's trigger region: for a sighting
        whose signature is its kind alone, on the axes of the same name as the cause's
        (as the run-wide book read it: conv_harness/triage/causes.py's `covers`)."""
        return matches(self.conditions, case.problem, case.layouts,
                       same_axes=self.sighting and self.signature in ("", self.failure))

    def same_as(self, other: "Bug") -> bool:
        if (self.failure, self.function, self.op) != (other.failure, other.function, other.op):
            return False
        if self.failure == "history":  # its explanation's conditions are noise: the
            return True                # results depend on the calls before, not on them
        shared = ({c.feature for c in self.conditions} & {c.feature for c in other.conditions}
                  & STRUCTURAL)
        return bool(shared) or (matches(self.conditions, other.problem, other.layouts)
                                or matches(other.conditions, self.problem, self.layouts))

    def seen(self) -> dict[str, Any]:
        """This finding as one of an entry's sightings: where it was seen, and its case."""
        return {"function": self.function, "check": self.check, "failure": self.failure,
                "op": self.op, "case_file": self.case_file, "descriptor": self.descriptor(),
                "alone": self.alone}

    def absorb(self, other: "Bug") -> None:
        """Merge a finding of the same bug into this entry."""
        for name in other.checks or [other.check]:
            if name not in self.checks:
                self.checks.append(name)
        for name in other.functions or [other.function]:
            if name is not None and name not in self.functions:
                self.functions.append(name)
        if not other.sighting and (other.failure, other.function) == (
                self.failure, self.function):
            for trigger in [other.trigger, *other.also]:
                if trigger != self.trigger and trigger not in self.also:
                    self.also.append(trigger)
        elif other.evidence.get("boundary"):  # the other symptom of one wrong size
            also = f"{other.failure} ({other.function}) {other.trigger}"
            if also not in self.also:
                self.also.append(also)
        for cause in (other.cause, *other.joined):
            if cause and cause != self.cause and cause not in self.joined:
                self.joined.append(cause)
        self.sightings += other.sightings
        if other.case_file is None or other.case_file != self.case_file:  # not the one shown
            self.sightings.append(other.seen())
        if self.alone is not True and other.alone is True and other.case_file \
                and other.failure == self.failure:
            self.alone, self.alone_reason = True, ""

    def descriptor(self) -> str:
        return format_descriptor(self.problem)

    def to_json(self) -> dict[str, Any]:
        return {"check": self.check, "checks": self.checks or [self.check],
                "failure": self.failure, "function": self.function,
                "functions": self.functions or ([self.function] if self.function else []),
                "op": self.op, "params": self.params, "descriptor": self.descriptor(),
                "layouts": self.layouts, "trigger": self.trigger,
                "conditions": [c.to_json() for c in self.conditions],
                "explanation": [r.to_json() for r in self.explanation],
                "case_file": self.case_file, "also": self.also, "reproduces_alone": self.alone,
                "reproduces_alone_reason": self.alone_reason, "signature": self.signature,
                "evidence": self.evidence, "cause": self.cause, "sighting": self.sighting,
                "minimal": not self.not_minimal, "not_minimal_because": self.not_minimal,
                "sightings": self.sightings, "found_on": self.found_on or None,
                "joined_causes": self.joined,
                "report": self.report}

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> "Bug":
        return cls(check=raw["check"], failure=raw["failure"], function=raw.get("function"),
                   op=raw["op"], params=raw["params"], layouts=raw.get("layouts", {}),
                   trigger=raw["trigger"],
                   conditions=[Condition.from_json(c) for c in raw.get("conditions", [])],
                   explanation=[Row.from_json(r) for r in raw.get("explanation", [])],
                   case_file=raw.get("case_file"), report=raw.get("report", ""),
                   checks=list(raw.get("checks") or [raw["check"]]),
                   also=list(raw.get("also", [])), alone=raw.get("reproduces_alone"),
                   alone_reason=raw.get("reproduces_alone_reason", ""),
                   functions=list(raw.get("functions") or []),
                   signature=raw.get("signature", ""), evidence=dict(raw.get("evidence") or {}),
                   cause=raw.get("cause", ""), sighting=bool(raw.get("sighting", False)),
                   not_minimal=raw.get("not_minimal_because", ""),
                   sightings=list(raw.get("sightings") or []),
                   found_on=raw.get("found_on") or "",
                   joined=list(raw.get("joined_causes") or []))


#: failures that show a deterministic cause's state rather than a cause of their own
SYMPTOMS = frozenset({"nonfinite", "history"})
#: failures that show a function keeps state between calls: the entry that the
#: symptoms of that state (a call that does not repeat, results that depend on the
#: calls before) belong to
STATEFUL = frozenset({"repeatable", "history"})
VALUE_KINDS = frozenset({"forward", "grad_input", "grad_weight", "grad_bias"})
_FUNCTION = re.compile(r"\bconv(?:_transpose)?[123]d(?:_backward)?\b")


#: a number, or numbers in a row: ``3``, ``2, 3``, ``4x4``, ``(1, 2, 3)``, ``[2, 3]``
_NUMBERS = re.compile(r"[(\[]\s*\d+(?:\s*[,x]\s*\d+)*\s*,?\s*[)\]]|\d+(?:\s*[,x]\s*\d+)*")


def _numbers(text: str) -> str:
    """``text`` with every number, and every tuple or run of numbers, as one ``N``: a
    message that names a call's sizes reads the same in every dimension."""
    return _NUMBERS.sub("N", text)


def signature(kind: str, message: str) -> str:
    """What kind of failure, exactly, in words that do not depend on the function or the
    problem's sizes, nor on its number of dimensions: ``raised ValueError: dilation N
    is not supported`` (for ``dilation 2`` and ``dilation (1, 2)`` alike), ``returns
    float32``."""
    first = message.splitlines()[0] if message else ""
    if kind == "dtype":
        found = re.search(r"has dtype (\w+)", first)
        return f"returns {found.group(1)}" if found else kind
    if kind == "raised":
        text = first.split(" raised ", 1)[-1]
        return "raised " + _numbers(_FUNCTION.sub("F", text))[:160]
    if kind in ("shape", "nonfinite", "result_type"):
        found = re.search(r"'s (grad_input|grad_weight|grad_bias|result)", first)
        return f"{kind} of {found.group(1)}" if found else kind
    return kind


def stateful(bug: Bug) -> bool:
    """Whether ``bug`` shows that its function keeps state between calls: its kind
    says so, or its call did not repeat on the same inputs (evidence)."""
    return bug.failure in STATEFUL or bool(bug.evidence.get("unrepeatable")
                                           or bug.evidence.get("fails_in"))


def in_known_region(case, known: list[Bug]) -> bool:
    """Whether ``case`` lies in an explained ``known`` bug's trigger region: a follow-up
    search and sweep leave it out."""
    return any(bug.conditions and bug.region_holds(case) for bug in known)


def not_known(failures: list[CheckFailure], known: list[Bug]) -> list[CheckFailure]:
    """The ``failures`` no ``known`` bug covers: what a follow-up search and sweep count."""
    return [f for f in failures if not any(bug.covers(f) for bug in known)]


def _same_conditions(a: list[Condition], b: list[Condition]) -> bool:
    def key(c: Condition) -> tuple:
        return (c.feature, c.op, c.value, c.every_axis)
    return sorted(map(key, a), key=repr) == sorted(map(key, b), key=repr)


def part_of(bug: Bug, entry: Bug) -> bool:
    """Whether ``bug`` (a finding, explained or not) is a symptom of ``entry``'s cause,
    on the evidence both carry (see the module's docstring). ``bug``'s own
    conditions may be empty: a finding not explained (yet)."""
    if bug.failure == entry.failure and bug.signature and bug.signature == entry.signature:
        # another function's trigger, where the signature is the kind alone: its axis
        # conditions on the axes of the same name (conv_harness/triage/causes.py's `covers`)
        named = bug.signature == bug.failure
        in_region = matches(entry.conditions, bug.problem, bug.layouts, same_axes=named)
        if bug.function != entry.function or bug.op != entry.op:
            if in_region and (not bug.conditions or _same_conditions(bug.conditions,
                                                                     entry.conditions)
                              or matches(bug.conditions, entry.problem, entry.layouts,
                                         same_axes=named)):
                return True
    evidence = bug.evidence
    if bug.failure in VALUE_KINDS and bug.failure != "forward" and entry.failure == "forward" \
            and evidence.get("forward_fails") and evidence.get("consistent") \
            and matches(entry.conditions, bug.problem, bug.layouts):
        return True
    low = evidence.get("precision")
    if low and bug.failure in VALUE_KINDS and entry.failure == "dtype" \
            and entry.signature == f"returns {low}" \
            and matches(entry.conditions, bug.problem, bug.layouts):
        return True
    if evidence.get("undeclared") and evidence.get("undeclared") == entry.evidence.get(
            "undeclared"):
        return True  # one precision it does not declare, wherever it computes
    if stateful(bug) and stateful(entry) and bug.function in (entry.functions
                                                              or [entry.function]):
        return True  # calls that do not repeat: the state one function keeps
    if bug.failure in SYMPTOMS and entry.failure not in SYMPTOMS and entry.conditions \
            and bug.function in (entry.functions or [entry.function]) \
            and matches(entry.conditions, bug.problem, bug.layouts):
        return True
    return agrees_elsewhere(bug, entry)


def agrees_elsewhere(bug: Bug, entry: Bug) -> bool:
    """Whether ``bug`` is ``entry``'s cause seen in another result or function: both
    wrong results, explained by the same trigger (every condition alike) at the same
    minimal problem (in any number of dimensions, on any axis: `_axes_free`). Code
    that several functions share (a forward that the backward calls, a helper every
    result goes through) shows one cause so: each function shrinks to the same
    plainest problem that needs the same feature. Two causes that agree so in
    everything a black box can see are one entry to its reader too."""
    if not (bug.failure in VALUE_KINDS and entry.failure in VALUE_KINDS
            and (bug.failure, bug.function) != (entry.failure, entry.function)
            and bool(bug.conditions)):
        return False
    (ours, our_params), (theirs, their_params) = _compared(bug, entry), _compared(entry, bug)
    return (bool(ours) and _same_conditions(ours, theirs)
            and _axes_free(our_params) == _axes_free(their_params)
            and {k: v for k, v in bug.layouts.items() if k != "bias"}
            == {k: v for k, v in entry.layouts.items() if k != "bias"})


def _axes_free(params: dict[str, Any]) -> tuple[dict[str, Any], frozenset]:
    """``params`` with its sizes per axis taken as the set of its axes (each axis's
    sizes together): code that the 1, 2 and 3-dimensional functions share shrinks
    in each to the same plainest problem, written with 1, 2 or 3 axes, and a cause
    on any axis shrinks to one of them, not always the same one in each function."""
    spatial = [k for k in PER_AXIS_FIELDS if isinstance(params.get(k), (list, tuple))]
    axes = frozenset(zip(*(params[k] for k in spatial)))
    return {k: v for k, v in params.items() if k not in spatial}, axes


#: the problem's parameter each feature of an explanation's rows sets alone
_PARAM_OF = {"batch": "batch", "in_channels": "in_channels", "out_channels": "out_channels",
             "kernel": "kernel_size", "stride": "stride", "padding": "padding",
             "dilation": "dilation", "groups": "groups", "bias": "bias", "dtype": "dtype"}


def _compared(bug: Bug, other: Bug) -> tuple[list[Condition], dict[str, Any]]:
    """``bug``'s conditions and problem as `agrees_elsewhere` compares them with
    ``other``'s: without what both explanations show the bug independent of (a size
    the search did not shrink away says nothing of the cause), nor the bias where one
    of the two is a grad_bias (that result needs a bias to exist: its "with bias" is
    its kind's, not its cause's)."""
    dropped = {f for f in _PARAM_OF if _independent_of(bug, f) and _independent_of(other, f)}
    if "grad_bias" in (bug.failure, other.failure):
        dropped.add("bias")
    params = {_PARAM_OF[f] for f in dropped}
    return ([c for c in bug.conditions if c.feature not in dropped],
            {k: v for k, v in bug.params.items() if k not in params})


def _independent_of(bug: Bug, feature: str) -> bool:
    """Whether ``bug``'s explanation tried ``feature`` (on each axis it varied) both
    ways and each failed."""
    rows = [row for row in bug.explanation if row.feature == feature]
    return bool(rows) and all(not row.passes and len(row.fails) > 1 for row in rows)


def merge(bugs: list[Bug], order: list[str]) -> list[Bug]:
    """One entry per root cause; ``order`` ranks the checks (the first one names it).

    Sightings of a known cause join the entry of that cause; explained findings
    merge where they are the same bug of one function (`Bug.same_as`) or one
    is a symptom of the other (`part_of`; symptoms last, so that their cause
    is there first). Each entry keeps the simplest case file of its findings
    of its own kind and function.
    """
    rank = {name: i for i, name in enumerate(order)}
    ranked = sorted(bugs, key=lambda b: (b.sighting, b.failure in SYMPTOMS
                                         or bool(b.evidence.get("unrepeatable")),
                                         bool(b.evidence.get("unrepeatable"))
                                         or bool(b.evidence.get("precision"))
                                         or bool(b.evidence.get("consistent")),
                                         rank.get(b.check, len(rank)), _size(b)))
    out: list[Bug] = []
    by_cause: dict[str, Bug] = {}
    for bug in ranked:
        entry = by_cause.get(bug.cause) if bug.cause else None
        if entry is None:
            entry = next((e for e in out if e.same_as(bug) or part_of(bug, e)), None)
        if entry is not None:
            if _simpler(bug, entry):
                if bug.function != entry.function:  # the case shown moves to another function
                    entry.sightings.append(entry.seen())  # the case it showed
                    entry.function, entry.op, entry.found_on = (bug.function, bug.op,
                                                                bug.found_on)
                if bug.explanation:  # the rows of the problem shown, where it has its own
                    entry.explanation = list(bug.explanation)
                entry.case_file, entry.params, entry.layouts = (bug.case_file, bug.params,
                                                                bug.layouts)
                entry.alone, entry.alone_reason = bug.alone, bug.alone_reason
            entry.absorb(bug)
        else:
            entry = Bug(**{**bug.__dict__, "checks": list(bug.checks or [bug.check]),
                           "functions": list(bug.functions or (
                               [bug.function] if bug.function else [])),
                           "also": list(bug.also), "sightings": list(bug.sightings),
                           "joined": list(bug.joined),
                           "sighting": False})
            out.append(entry)
        for cause in (bug.cause, *entry.joined):
            if cause:
                by_cause.setdefault(cause, entry)
    for entry in out:
        entry.checks.sort(key=lambda name: rank.get(name, len(rank)))
    return out


def _simpler(bug: Bug, entry: Bug) -> bool:
    """Whether ``bug``'s case should stand for ``entry``: the same kind, of the same
    function or, explained, of that function in fewer dimensions (one cause of conv1d,
    conv2d and conv3d shows conv1d's case and explanation), a smaller problem, with a
    case file, no worse at reproducing alone, and inside the entry's trigger (a
    finding merged for another region of one bug, "also fails when: stride = 3", must
    not show under "fails when stride = 2")."""
    return (bug.case_file is not None and bug.failure == entry.failure
            and (bug.function == entry.function
                 or (in_fewer_dimensions(bug.function, entry.function)
                     and bool(bug.explanation)))
            and _size(bug) < _size(entry) and (bug.alone is True or entry.alone is not True)
            and not bug.not_minimal
            and matches(entry.conditions, bug.problem, bug.layouts))


def _size(bug: Bug) -> tuple[int, ...]:
    """How big a bug's minimal problem is (`ConvProblem.size_rank`)."""
    return bug.problem.size_rank()
