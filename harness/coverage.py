"""What the cases drawn during one test exercised: examples and features.

The strategies report each case's features here (and to Hypothesis's
`event()`); the summary plugin opens a tally around each test and ships it
to the controller with the test's report, so the run summary can say what
was generated, also under xdist.
"""

from __future__ import annotations

from collections import Counter

_current: Counter | None = None


def start() -> None:
    global _current
    _current = Counter()


def stop() -> Counter:
    """The tally since `start` (examples under the key ``"examples"``)."""
    global _current
    tally, _current = _current or Counter(), None
    return tally


def record(features: list[str]) -> None:
    if _current is not None:
        _current["examples"] += 1
        _current.update(features)
