"""What a conformance test runs on: one implementation and one operation.

Below the plugin (which builds the targets from its options) so that the suite
and the triage, which the plugin's hooks call, can take one without importing
the plugin.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from conv_harness.running.calling import TimeLimit, as_time_limit
from conv_harness.running.loader import Implementation


@dataclass(frozen=True)
class Target:
    """One implementation and one operation: what a conformance test runs on.

    ``timeout``: the run's `TimeLimit` (given as seconds: a fresh one)."""

    impl: Implementation
    op: str
    timeout: TimeLimit
    failures_dir: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "timeout", as_time_limit(self.timeout))

    def __str__(self) -> str:
        return f"{self.impl.name}-{self.op}"

    def __repr__(self) -> str:  # what pytest's tracebacks show
        return f"Target({self.impl.spec!r}, {self.op!r})"

    def _repr_pretty_(self, printer, cycle) -> None:  # how Hypothesis prints it
        printer.text(repr(self))
