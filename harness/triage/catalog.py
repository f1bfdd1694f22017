"""Distinct bugs: the record of one, and merging what several searches found.

A `Bug` is what one search (one check's, harness/triage/search.py) found and
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

from dataclasses import dataclass, field
from typing import Any

from harness.problem import ConvProblem
from harness.running.calling import CheckFailure
from harness.triage.explain import Condition, Row, matches

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

    @property
    def problem(self) -> ConvProblem:
        return ConvProblem.from_params(self.op, self.params)

    def covers(self, failure: CheckFailure) -> bool:
        """Whether ``failure`` is this bug again: same kind, same function, trigger matched."""
        if failure.check != self.failure or failure.function != self.function:
            return False
        case = failure.case
        return case is None or matches(self.conditions, case.problem, case.layouts)

    def region_holds(self, case) -> bool:
        """Whether ``case``'s problem is in this bug's trigger region."""
        return matches(self.conditions, case.problem, case.layouts)

    def same_as(self, other: "Bug") -> bool:
        if (self.failure, self.function, self.op) != (other.failure, other.function, other.op):
            return False
        shared = ({c.feature for c in self.conditions} & {c.feature for c in other.conditions}
                  & STRUCTURAL)
        return bool(shared) or (matches(self.conditions, other.problem, other.layouts)
                                or matches(other.conditions, self.problem, self.layouts))

    def absorb(self, other: "Bug") -> None:
        """Merge a finding of the same bug into this entry."""
        for name in other.checks or [other.check]:
            if name not in self.checks:
                self.checks.append(name)
        for trigger in [other.trigger, *other.also]:
            if trigger != self.trigger and trigger not in self.also:
                self.also.append(trigger)

    def to_json(self) -> dict[str, Any]:
        return {"check": self.check, "checks": self.checks or [self.check],
                "failure": self.failure, "function": self.function, "op": self.op,
                "params": self.params, "layouts": self.layouts, "trigger": self.trigger,
                "conditions": [c.to_json() for c in self.conditions],
                "explanation": [r.to_json() for r in self.explanation],
                "case_file": self.case_file, "also": self.also, "reproduces_alone": self.alone,
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
                   also=list(raw.get("also", [])), alone=raw.get("reproduces_alone"))


def merge(bugs: list[Bug], order: list[str]) -> list[Bug]:
    """One entry per distinct bug; ``order`` ranks the checks (the first one names it)."""
    rank = {name: i for i, name in enumerate(order)}
    ranked = sorted(bugs, key=lambda b: (rank.get(b.check, len(rank)), _size(b)))
    out: list[Bug] = []
    for bug in ranked:
        for entry in out:
            if entry.same_as(bug):
                entry.absorb(bug)
                break
        else:
            out.append(Bug(**{**bug.__dict__, "checks": list(bug.checks or [bug.check]),
                              "also": list(bug.also)}))
    for entry in out:
        entry.checks.sort(key=lambda name: rank.get(name, len(rank)))
    return out


def _size(bug: Bug) -> int:
    p = bug.params
    sizes = 1
    for n in p.get("input_size", []):
        sizes *= n
    return p.get("batch", 1) * p.get("in_channels", 1) * p.get("out_channels", 1) * sizes
