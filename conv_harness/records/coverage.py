"""What the cases drawn during one test exercised: examples, features and notes.

The strategies report each case's features here (and to Hypothesis's
`event()`); the summary plugin makes a `Tally` current for each test and ships it
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
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Iterator, Mapping

NOTE_PREFIX = "note: "
#: features that name a layer archetype reached (strategies/archetypes.py):
#: ``archetype NAME`` exactly, ``archetype NAME | FEATURE neighbour`` one step off
ARCHETYPE_PREFIX = "archetype "
NEIGHBOUR_SEPARATOR = " | "

@dataclass
class Tally:
    """What one test's cases exercised: ``features`` (examples under ``"examples"``,
    features, notes) and the ``largest`` sizes reached (`reach`)."""

    features: Counter = field(default_factory=Counter)
    largest: dict[str, int] = field(default_factory=dict)
    #: while set, draws are not counted (`paused`)
    paused: bool = False
    #: how many warnings the implementation raised (conv_harness/running/calling.py's
    #: `silenced`), and the first one's text
    warnings: int = 0
    first_warning: str | None = None


#: the running test's tally (the summary plugin makes one current per test,
#: `tallying`); None outside a test: nothing is counted
_TALLY: ContextVar[Tally | None] = ContextVar("conv_harness_tally", default=None)


@contextlib.contextmanager
def tallying(tally: Tally) -> Iterator[Tally]:
    """Count what the block's draws and calls exercise into ``tally``."""
    token = _TALLY.set(tally)
    try:
        yield tally
    finally:
        _TALLY.reset(token)


def _counting() -> Tally | None:
    tally = _TALLY.get()
    return None if tally is None or tally.paused else tally


def record(features: list[str]) -> None:
    tally = _counting()
    if tally is not None:
        tally.features["examples"] += 1
        tally.features.update(features)


#: the tally's key of the catalogue sweep's calls (conv_harness/searching/sweep.py): counted
#: apart from the examples, which are Hypothesis's (a profile's ``max_examples``)
VISITS = "catalogue sweep visits"


def record_visit(features: list[str]) -> None:
    """Count one call of the catalogue sweep, and the features of its case."""
    tally = _counting()
    if tally is not None:
        tally.features[VISITS] += 1
        tally.features.update(features)


def note(text: str) -> None:
    """Note ``text`` about the implementation under test (counted once per call)."""
    tally = _counting()
    if tally is not None:
        tally.features[NOTE_PREFIX + text] += 1


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
    tally = _TALLY.get()
    if tally is None:
        yield
        return
    before, tally.paused = tally.paused, True
    try:
        yield
    finally:
        tally.paused = before


@contextlib.contextmanager
def held() -> Iterator[Tally]:
    """Count the block's draws apart, in the tally it gives, for `add` to count once the
    case is run (a follow-up search draws cases it excludes and never runs)."""
    apart = Tally(paused=_counting() is None)
    token = _TALLY.set(apart)
    try:
        yield apart
    finally:
        _TALLY.reset(token)


def add(apart: Tally) -> None:
    """Count what `held` counted apart."""
    tally = _counting()
    if tally is not None:
        tally.features.update(apart.features)
        reach(**apart.largest)


def reach(**sizes: int) -> None:
    """Note sizes a case reached (batch, channels, positions, kernel, K): the largest are kept."""
    tally = _TALLY.get()
    if tally is not None:
        for name, value in sizes.items():
            if value > tally.largest.get(name, 0):
                tally.largest[name] = value


def warned(count: int, first: str) -> None:
    """Count ``count`` warnings of the implementation under test (``first``: the first's
    text); also while draws are paused: a warning is the implementation's, drawn or not."""
    tally = _TALLY.get()
    if tally is not None and count:
        tally.warnings += count
        tally.first_warning = tally.first_warning or first


def count(labels: list[str]) -> None:
    """Count ``labels`` as features of the current example (an implementation's own events)."""
    tally = _counting()
    if tally is not None:
        tally.features.update(labels)


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
