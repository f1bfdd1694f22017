"""A whole run's triage of one implementation, in this process: what a pytest run of
the conformance suite computes for its summary.json entries, without starting one.

For the harness's tests of the triage (which bugs, how many entries, which minimal
cases): a fresh pytest process costs start-up (torch, collection, xdist workers)
that only tests of the pytest wiring need to pay.
"""

from __future__ import annotations

import contextlib
import zlib
from pathlib import Path
from typing import Iterator, Sequence

from hypothesis import settings

from conv_harness.checks.registry import REGISTRY
from conv_harness.problem import OPS
from conv_harness.reporting.summary import bug_entry, bug_lines
from conv_harness.running.loader import load_implementation
from conv_harness.running.target import Target
from conv_harness.state import RunState
from conv_harness.triage import causes
from conv_harness.triage.catalog import Bug, merge
from conv_harness.triage.search import search_in_process


@contextlib.contextmanager
def profile(name: str = "harness-test") -> Iterator[None]:
    """Hypothesis's profile ``name`` for the block (the one run_pytest's processes use)."""
    before = settings._current_profile
    settings.load_profile(name)
    try:
        yield
    finally:
        settings.load_profile(before)


def run_entries(spec: str, checks: Sequence[str], ops: Sequence[str], failures: Path,
                monkeypatch, budget: float | None = None,
                seed: int | None = None) -> tuple[list[dict], str]:
    """The summary.json entries, and the output (the failed tests' reports and the
    summary's bug list), of a run of ``checks``
    on ``ops`` of ``spec`` (as ``-k`` would select them) in one process, in the order
    the plugin runs them (the costliest first); ``budget``: ``--conv-budget``;
    ``seed``: each test a seed of its own from it, and each of its follow-up
    searches one derived from that, as a default run gives each search a random one
    (without it, each search's seed is fixed by the profile)."""
    impl = load_implementation(spec)
    run = RunState()
    run.book.open(failures, causes.new_run(failures))  # a run of its own
    tests = [(check, op) for op in OPS if op in ops for check in REGISTRY if check in checks
             and REGISTRY[check].applies_to(impl, op)]
    tests.sort(key=lambda t: REGISTRY[t[0]].cost * OPS[t[1]].spatial_dims, reverse=True)
    bugs, reports = [], []
    with profile():
        for check, op in tests:
            verdict = search_in_process(
                run, Target(impl, op, 20.0, failures), check, budget=budget,
                seed=None if seed is None else zlib.crc32(f"{seed} {check} {op}".encode()))
            if verdict is not None:
                # as the controller gets them from the workers: as JSON
                bugs += [Bug.from_json(bug.to_json()) for bug in verdict.bugs]
                reports.append(verdict.report)
    causes.end_run(failures)
    distinct = merge(bugs, list(REGISTRY))
    # the reports, then the run summary's list of distinct bugs
    return [bug_entry(bug) for bug in distinct], "\n".join(reports + bug_lines(distinct))
