"""What the cases drawn during one test exercised: examples, features and notes.

The strategies report each case's features here (and to Hypothesis's
`event()`); the summary plugin opens a tally around each test and ships it
to the controller with the test's report, so the run summary can say what
was generated, also under xdist.

Notes are what the run observed of the implementation that is worth saying
but is not a failure ("flushes subnormals to zero"). They travel in the same
tally, under keys that start with `NOTE_PREFIX`, so they reach the
controller the same way; `split` separates them again.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from typing import Iterator, Mapping

NOTE_PREFIX = "note: "

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


def note(text: str) -> None:
    """Note ``text`` about the implementation under test (counted once per call)."""
    if _current is not None:
        _current[NOTE_PREFIX + text] += 1


def split(tally: Mapping[str, int]) -> tuple[Counter, Counter]:
    """(features with ``"examples"``, notes without their prefix) of a tally."""
    features, notes = Counter(), Counter()
    for key, count in tally.items():
        if key.startswith(NOTE_PREFIX):
            notes[key[len(NOTE_PREFIX):]] += count
        else:
            features[key] += count
    return features, notes


@contextlib.contextmanager
def paused() -> Iterator[None]:
    """Draws inside the block are not counted (a case drawn but not run)."""
    global _current
    saved, _current = _current, None
    try:
        yield
    finally:
        _current = saved


#: the largest sizes reached in the current test (see `reach`)
_largest: dict[str, int] | None = None


def start_sizes() -> None:
    global _largest
    _largest = {}


def reach(**sizes: int) -> None:
    """Note sizes a case reached (batch, channels, positions, kernel, K): the largest are kept."""
    if _largest is not None:
        for name, value in sizes.items():
            if value > _largest.get(name, 0):
                _largest[name] = value


def stop_sizes() -> dict[str, int]:
    global _largest
    largest, _largest = _largest or {}, None
    return largest


def count(labels: list[str]) -> None:
    """Count ``labels`` as features of the current example (an implementation's own events)."""
    if _current is not None:
        _current.update(labels)
