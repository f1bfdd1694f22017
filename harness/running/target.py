"""What a conformance test runs on: one implementation and one operation.

Below the plugin (which builds the targets from its options) so that the suite
and the triage, which the plugin's hooks call, can take one without importing
the plugin.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from harness.running.loader import Implementation


@dataclass(frozen=True)
class Target:
    """One implementation and one operation: what a conformance test runs on."""

    impl: Implementation
    op: str
    timeout: float | None
    failures_dir: Path

    def __str__(self) -> str:
        return f"{self.impl.name}-{self.op}"

    def __repr__(self) -> str:  # what pytest's tracebacks show
        return f"Target({self.impl.spec!r}, {self.op!r})"

    def _repr_pretty_(self, printer, cycle) -> None:  # how Hypothesis prints it
        printer.text(repr(self))
