"""Distinct bugs: the record of one, and merging what several searches found.

A `Bug` is what one search (one check's, harness/triage/search.py) found and
explained: the kind of failure and the function that showed it, its minimal
problem, its trigger and explanation, and its case file. The run summary
merges the bugs of one implementation across checks (`merge`): two findings
are one bug when they are the same kind of failure of the same function and
each one's problem matches the other's trigger (six checks tripping over one
padding bug make one entry); a single bug is never split.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harness.calling import CheckFailure
from harness.problem import ConvProblem
from harness.triage.explain import Condition, Row, matches


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

    @property
    def problem(self) -> ConvProblem:
        return ConvProblem.from_params(self.op, self.params)

    def covers(self, failure: CheckFailure) -> bool:
        """Whether ``failure`` is this bug again: same kind, same function, trigger matched."""
        if failure.check != self.failure or failure.function != self.function:
            return False
        case = failure.case
        return case is None or matches(self.conditions, case.problem, case.layouts)

    def same_as(self, other: "Bug") -> bool:
        if (self.failure, self.function, self.op) != (other.failure, other.function, other.op):
            return False
        return (matches(self.conditions, other.problem, other.layouts)
                or matches(other.conditions, self.problem, self.layouts))

    def to_json(self) -> dict[str, Any]:
        return {"check": self.check, "checks": self.checks or [self.check],
                "failure": self.failure, "function": self.function, "op": self.op,
                "params": self.params, "layouts": self.layouts, "trigger": self.trigger,
                "conditions": [c.to_json() for c in self.conditions],
                "explanation": [r.to_json() for r in self.explanation],
                "case_file": self.case_file, "report": self.report}

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> "Bug":
        return cls(check=raw["check"], failure=raw["failure"], function=raw.get("function"),
                   op=raw["op"], params=raw["params"], layouts=raw.get("layouts", {}),
                   trigger=raw["trigger"],
                   conditions=[Condition.from_json(c) for c in raw.get("conditions", [])],
                   explanation=[Row.from_json(r) for r in raw.get("explanation", [])],
                   case_file=raw.get("case_file"), report=raw.get("report", ""),
                   checks=list(raw.get("checks") or [raw["check"]]))


def merge(bugs: list[Bug], order: list[str]) -> list[Bug]:
    """One entry per distinct bug; ``order`` ranks the checks (the first one names it)."""
    rank = {name: i for i, name in enumerate(order)}
    ranked = sorted(bugs, key=lambda b: (rank.get(b.check, len(rank)), _size(b)))
    out: list[Bug] = []
    for bug in ranked:
        for entry in out:
            if entry.same_as(bug):
                for name in bug.checks or [bug.check]:
                    if name not in entry.checks:
                        entry.checks.append(name)
                break
        else:
            out.append(Bug(**{**bug.__dict__, "checks": list(bug.checks or [bug.check])}))
    for entry in out:
        entry.checks.sort(key=lambda name: rank.get(name, len(rank)))
    return out


def _size(bug: Bug) -> int:
    p = bug.params
    sizes = 1
    for n in p.get("input_size", []):
        sizes *= n
    return p.get("batch", 1) * p.get("in_channels", 1) * p.get("out_channels", 1) * sizes
