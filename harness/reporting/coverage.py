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
#: features that name a layer archetype reached (strategies/archetypes.py):
#: ``archetype NAME`` exactly, ``archetype NAME | FEATURE neighbour`` one step off
ARCHETYPE_PREFIX = "archetype "
NEIGHBOUR_SEPARATOR = " | "

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


def archetype_label(name: str, feature: str | None) -> str:
    """The tally key of a case on archetype ``name`` (``feature``: the one that differs)."""
    return ARCHETYPE_PREFIX + name + (f"{NEIGHBOUR_SEPARATOR}{feature} neighbour"
                                      if feature else "")


def archetypes(features: Mapping[str, int]) -> dict[str, dict]:
    """The archetypes a tally reached: ``{name: {"exact": n, "neighbours": {feature: n}}}``,
    most reached first (what the summary prints and writes)."""
    out: dict[str, dict] = {}
    for key, count in features.items():
        if not key.startswith(ARCHETYPE_PREFIX):
            continue
        name, _, neighbour = key[len(ARCHETYPE_PREFIX):].partition(NEIGHBOUR_SEPARATOR)
        entry = out.setdefault(name, {"exact": 0, "neighbours": {}})
        if neighbour:
            entry["neighbours"][neighbour.removesuffix(" neighbour")] = count
        else:
            entry["exact"] = count

    def reached(item) -> int:
        return item[1]["exact"] + sum(item[1]["neighbours"].values())
    return {name: {"exact": e["exact"], "neighbours": dict(sorted(
        e["neighbours"].items(), key=lambda kv: -kv[1]))}
        for name, e in sorted(out.items(), key=lambda item: (-reached(item), item[0]))}


def archetype_text(features: Mapping[str, int]) -> str:
    """One line: ``resnet 3x3 s1 p1 140 (dilation neighbour 31, stride neighbour 12), ...``."""
    parts = []
    for name, entry in archetypes(features).items():
        near = ", ".join(f"{f} neighbour {n}" for f, n in entry["neighbours"].items())
        parts.append(f"{name} {entry['exact']}" + (f" ({near})" if near else ""))
    return ", ".join(parts)
