"""A pytest plugin of benchmarks/time_to_verdict.py: where a run's time went.

Loaded with ``-p conv_verdict_timing`` in every process of the run (xdist's
workers too), under any tree of the project (the benchmark runs the landed
main beside a branch), it appends one JSON line per measurement to the file
``$CONV_VERDICT_TIMING``:

- ``search`` and ``shrink``: each conformance test's own Hypothesis search,
  from Hypothesis's statistics (its generate and reuse phases, its shrink
  phase), the ones pytest's ``--hypothesis-show-statistics`` prints;
- ``explanation``, ``further searches``, ``script verification`` and
  ``history rebuild``: the time spent in the triage's functions of those
  names (conv_harness/triage: ``explain``, ``follow_up``, ``verify_alone``
  less what its ``rebuild`` took, and ``rebuild``/``history_dependent``),
  wrapped here by name, so that no tree needs instrumentation of its own; a
  tree without one of them reports nothing for it;
- ``calls``: the implementation calls the process made (conv_harness/running/
  calling.py's ``_observed``, around every call);
- ``first test``: the wall-clock time the process started its first test
  (the benchmark's start-up is the earliest of these less its launch time).

Times are seconds of each process, summed over tests: with two workers
they add up to about twice the wall time.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import time
from typing import Any, Callable

import pytest

ENV = "CONV_VERDICT_TIMING"
_state = {"calls": 0, "nested": 0, "first": None, "rebuild": 0.0}


def _record(**entry: Any) -> None:
    path = os.environ.get(ENV)
    if not path:
        return
    entry["pid"] = os.getpid()
    with open(path, "a") as log:  # one short line per write: appends do not interleave
        log.write(json.dumps(entry) + "\n")


def _timed(phase: str, fn: Callable, nested: bool = False) -> Callable:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        _state["nested"] += nested
        rebuild_before = _state["rebuild"]
        try:
            return fn(*args, **kwargs)
        finally:
            _state["nested"] -= nested
            took = time.perf_counter() - started
            if phase == "script verification":  # its history rebuilds are their own phase
                took -= _state["rebuild"] - rebuild_before
            if phase == "history rebuild":
                _state["rebuild"] += took
            _record(phase=phase, seconds=took)
    return wrapper


def _patch(module_name: str, name: str, phase: str, nested: bool = False) -> None:
    try:
        module = __import__(module_name, fromlist=[name])
    except ImportError:
        return
    fn = getattr(module, name, None)
    if fn is None or getattr(fn, "_verdict_timed", False):
        return
    timed = _timed(phase, fn, nested)
    timed._verdict_timed = True  # type: ignore[attr-defined]
    setattr(module, name, timed)


def _count_calls() -> None:
    try:
        from conv_harness.running import calling
    except ImportError:
        return
    original = getattr(calling, "_observed", None)
    if original is None or getattr(original, "_verdict_timed", False):
        return

    @contextlib.contextmanager
    def observed(*args: Any, **kwargs: Any):
        _state["calls"] += 1
        with original(*args, **kwargs):
            yield

    observed._verdict_timed = True  # type: ignore[attr-defined]
    calling._observed = observed


def pytest_configure(config: pytest.Config) -> None:
    _patch("conv_harness.searching.search", "explain", "explanation")
    _patch("conv_harness.searching.search", "follow_up", "further searches", nested=True)
    _patch("conv_harness.searching.search", "verify_alone", "script verification")
    _patch("conv_harness.triage.history", "rebuild", "history rebuild")
    _patch("conv_harness.searching.search", "history_dependent", "history rebuild")
    _count_calls()


def _statistics(stats: dict) -> None:
    if _state["nested"]:
        return  # a follow-up search's: counted as "further searches"
    search = sum(stats.get(f"{p}-phase", {}).get("duration-seconds", 0.0)
                 for p in ("explicit", "reuse", "generate", "target"))
    _record(phase="search", seconds=search)
    _record(phase="shrink", seconds=stats.get("shrink-phase", {}).get("duration-seconds", 0.0))


@pytest.hookimpl(wrapper=True, trylast=True)  # inside Hypothesis's own collector
def pytest_runtest_call(item: pytest.Item):
    from hypothesis.statistics import collector

    if _state["first"] is None:
        _state["first"] = time.time()
        _record(phase="first test", at=_state["first"])
    previous = collector.value

    def note(stats: dict) -> None:
        _statistics(stats)
        if previous is not None:
            previous(stats)

    with collector.with_value(note):
        return (yield)


def pytest_unconfigure(config: pytest.Config) -> None:
    _record(phase="calls", count=_state["calls"])
