"""Score the bug list against the zoo's ground truth (issue 59; the zoo: benchmarks/zoo.py).

    python -m benchmarks.triage_zoo --count 100 --seeds 1 2 3

Each generated implementation runs in this process (`conv_harness.run.run_checks`: the
oracle checks on the operations it provides, a seed of its own per test derived from
the seed given, no example database), and its bug list is matched to its causes: an
entry belongs to each cause that, alone in the implementation, fails the entry's case. Per cause: found (some entry belongs to it), exact (one entry belongs to it
and to nothing else), minimal (that entry's problem is the cause's plainest), trigger
(the entry's trigger states the cause's condition). Every miss is listed; the last
line reads ``zoo: N implementations, C causes, found F, exact E, minimal M, triggers T``,
where E counts the implementations whose list has exactly one entry per cause and no
other entry.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import settings

from benchmarks.zoo import Cause, ZooImplementation, alone, generate
from conv_harness.checks.registry import examine
from conv_harness.problem import ConvProblem
from conv_harness.records.failures import CaseFileError, case_from_record
from conv_harness.running.loader import load_implementation
from conv_harness.profiles import COMMON
from conv_harness.run import run_checks

ZOO = Path(__file__).resolve().parent / "zoo.py"
CHECKS = ("forward", "grad_input", "grad_weight", "grad_bias")

#: the harness-test profile's searches, but each test drawing from its own seed
settings.register_profile("zoo", max_examples=100, derandomize=False, database=None,
                          **COMMON)


@dataclass
class Score:
    """One implementation's bug list against its causes."""

    impl: ZooImplementation
    seed: int
    entries: list[dict[str, Any]]
    #: cause name -> the entries that belong to it
    owners: dict[str, list[int]] = field(default_factory=dict)
    #: entries that belong to no cause
    stray: list[int] = field(default_factory=list)
    seconds: float = 0.0

    def found(self, cause: Cause) -> bool:
        return bool(self.owners[cause.name])

    def exact(self, cause: Cause) -> bool:
        mine = self.owners[cause.name]
        return len(mine) == 1 and sum(mine[0] in owned for owned in self.owners.values()) == 1

    def entry(self, cause: Cause) -> dict[str, Any] | None:
        mine = self.owners[cause.name]
        return self.entries[mine[0]] if mine else None

    def minimal(self, cause: Cause) -> bool:
        entry = self.entry(cause)
        return entry is not None and cause.minimal(problem_of(entry))

    def trigger(self, cause: Cause) -> bool:
        entry = self.entry(cause)
        return entry is not None and any(re.search(words, entry["trigger"])
                                         for words in cause.words)

    @property
    def all_exact(self) -> bool:
        return not self.stray and all(self.exact(cause) for cause in self.impl.causes)


def problem_of(entry: dict[str, Any]) -> ConvProblem:
    return ConvProblem.from_params(entry["op"], entry["params"])


def owners(entry: dict[str, Any], singles: dict[str, Any], impl: ZooImplementation,
           folder: Path) -> list[str]:
    """The causes ``entry`` is: those whose implementation alone (``singles``, by cause
    name) fails the entry's case, run by the check that replays it (a garbage cause: in
    one of three calls, as its results change from call to call)."""
    try:
        record = json.loads((folder / entry["case_file"]).read_text())
        case = case_from_record(record)
    except (OSError, ValueError, KeyError, TypeError, CaseFileError):
        return []
    return [cause.name for cause in impl.causes
            if any(examine(record["run_check"], singles[cause.name], case)
                   for _ in range(3 if cause.garbage else 1))]


def score(impl: ZooImplementation, seed: int, folder: Path) -> Score:
    started = time.perf_counter()
    result = run_checks(f"{ZOO}:{impl.name}", CHECKS, impl.ops, failures_dir=folder,
                        seed=seed, profile_name="zoo")
    entries = result.bugs() if not result.errors else []
    out = Score(impl, seed, entries, seconds=time.perf_counter() - started)
    singles = {cause.name: load_implementation(f"{ZOO}:{alone(impl, cause).name}")
               for cause in impl.causes}
    owned = [owners(entry, singles, impl, folder) for entry in entries]
    for cause in impl.causes:
        out.owners[cause.name] = [i for i, names in enumerate(owned) if cause.name in names]
    out.stray = [i for i in range(len(entries))
                 if not any(i in owned for owned in out.owners.values())]
    for _, text in result.errors:
        print(f"  ERROR in {impl.name}: {text.splitlines()[-1]}", file=sys.stderr)
    return out


def misses(s: Score) -> list[str]:
    """What is wrong in ``s``'s list, one line each."""
    lines = []
    for cause in s.impl.causes:
        entry = s.entry(cause)
        what = []
        if entry is None:
            what.append("not found")
        else:
            if not s.exact(cause):
                what.append(f"{len(s.owners[cause.name])} entries" if len(
                    s.owners[cause.name]) > 1 else "merged with another cause")
            if not s.minimal(cause):
                what.append(f"not minimal: {entry['descriptor']}")
            if not s.trigger(cause):
                what.append(f"trigger: {entry['trigger']}")
        if what:
            lines.append(f"{s.impl.name} seed {s.seed} [{cause.name}]: " + "; ".join(what))
    for i in s.stray:
        e = s.entries[i]
        lines.append(f"{s.impl.name} seed {s.seed}: an entry of no cause: {e['failure']} in "
                     f"{e['function']} at {e['descriptor']} ({e['trigger']})")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=100, help="implementations per seed")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1])
    parser.add_argument("--first", type=int, default=0, help="the first index")
    parser.add_argument("--arrays", choices=("numpy", "torch"), default="numpy",
                        help="the array library the implementations take (the same causes)")
    args = parser.parse_args(argv)
    scores = []
    with tempfile.TemporaryDirectory(prefix="zoo-") as scratch:
        for seed in args.seeds:
            for index in range(args.first, args.first + args.count):
                impl = generate(seed, index, args.arrays)
                s = score(impl, seed, Path(scratch) / f"{impl.name}-{seed}")
                scores.append(s)
                print(f"{impl.name} seed {seed}: {len(impl.causes)} causes "
                      f"({', '.join(c.name for c in impl.causes)}), {len(s.entries)} entries, "
                      f"{'exact' if s.all_exact else 'NOT exact'}, {s.seconds:.1f} s",
                      flush=True)
    causes = [(s, c) for s in scores for c in s.impl.causes]
    print("\nmisses:")
    for s in scores:
        for line in misses(s):
            print("  " + line)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"\n{sum(s.seconds for s in scores):.0f} s in all, load {load:.1f}")
    print(f"zoo: {len(scores)} implementations, {len(causes)} causes, "
          f"found {sum(s.found(c) for s, c in causes)}, "
          f"exact {sum(s.all_exact for s in scores)}, "
          f"minimal {sum(s.minimal(c) for s, c in causes)}, "
          f"triggers {sum(s.trigger(c) for s, c in causes)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
