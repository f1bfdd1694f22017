"""What the cases drawn during one test exercised: examples, features and notes.

The search counts each case it runs here, with its features (the strategies
report them to Hypothesis's `event()` as they draw them); each test's state holds
its `Tally`, which the summary plugin ships to the controller with the test's
report, so the run summary can say what was generated, also under xdist.

Notes are what the run observed of the implementation that is worth saying
but is not a failure ("flushes subnormals to zero"). They travel in the same
tally, under keys that start with `NOTE_PREFIX`, so they reach the
controller the same way; `split` separates them again.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Mapping

NOTE_PREFIX = "note: "
#: features that name a layer archetype reached (strategies/archetypes.py):
#: ``archetype NAME`` exactly, ``archetype NAME | FEATURE neighbour`` one step off
ARCHETYPE_PREFIX = "archetype "
NEIGHBOUR_SEPARATOR = " | "

@dataclass
class Tally:
    """What one test's cases exercised: ``features`` (examples under ``"examples"``,
    features, notes) and the ``largest`` sizes reached (`reach`). The test's state
    holds it (conv_harness/searching/state.py's ``TestState.tally``); the search counts
    into it what it runs, and the summary reads it once the test is over."""

    features: Counter = field(default_factory=Counter)
    largest: dict[str, int] = field(default_factory=dict)
    #: how many warnings the implementation raised in the test's checks
    #: (conv_harness/running/calling.py's `silenced`), and the first one's text
    warnings: int = 0
    first_warning: str | None = None

    def record(self, features: list[str]) -> None:
        """Count one example run, and the features of its case."""
        self.features["examples"] += 1
        self.features.update(features)

    def record_visit(self, features: list[str]) -> None:
        """Count one call of the catalogue sweep, and the features of its case."""
        self.features[VISITS] += 1
        self.features.update(features)

    def note(self, text: str, times: int = 1) -> None:
        """Note ``text`` about the implementation under test (counted per call)."""
        self.features[NOTE_PREFIX + text] += times

    def count(self, labels: list[str]) -> None:
        """Count ``labels`` as features of the current example (an implementation's own
        events)."""
        self.features.update(labels)

    def reach(self, **sizes: int) -> None:
        """Note sizes a case reached (batch, channels, positions, kernel, K): the largest
        are kept."""
        for name, value in sizes.items():
            if value > self.largest.get(name, 0):
                self.largest[name] = value

    def warned(self, count: int, first: str | None) -> None:
        """Count ``count`` warnings of the implementation under test (``first``: the
        first's text)."""
        if count:
            self.warnings += count
            self.first_warning = self.first_warning or first


#: the tally's key of the catalogue sweep's calls (conv_harness/searching/sweep.py): counted
#: apart from the examples, which are Hypothesis's (a profile's ``max_examples``)
VISITS = "catalogue sweep visits"


def split(tally: Mapping[str, int]) -> tuple[Counter, Counter]:
    """(features with ``"examples"``, notes without their prefix) of a tally."""
    features, notes = Counter(), Counter()
    for key, count in tally.items():
        if key.startswith(NOTE_PREFIX):
            notes[key[len(NOTE_PREFIX):]] += count
        else:
            features[key] += count
    return features, notes


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
