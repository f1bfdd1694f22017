"""A run of the conformance checks that needs no pytest: `run_checks`.

It runs, in this process, what a pytest run of the suite runs for its conformance
tests: for each implementation x operation x check, the test's searches and their
triage (conv_harness/searching/search.py's `search_in_process`, the function the
plugin's test hook shares), in the plugin's order (the costliest first); then it
merges each implementation's bugs across checks and gives the run summary and the
bug list that the plugin prints and writes to ``DIR/summary.json`` (the same
`Summary`). One process, as ``pytest -p no:xdist``: a crash of the implementation
ends it (the pytest run's ``--isolate`` contains crashes).

    from conv_harness.run import run_checks
    result = run_checks("mine.py", checks=["forward"], ops=["conv2d"])
    result.passed, result.bugs("mine.py"), print(result.text)

Searches draw under Hypothesis's current settings profile (``profile`` loads
another for the run); the regression corpus and ``--replay`` are pytest's.
"""

from __future__ import annotations

import contextlib
import traceback
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

from hypothesis import settings

from conv_harness import profiles
from conv_harness.checks import oracle
from conv_harness.checks.registry import REGISTRY
from conv_harness.options import DEFAULT_FAILURES_DIR, DEFAULT_MAX_BUGS, DEFAULT_TIMEOUT
from conv_harness.problem import OPS, ConvProblem
from conv_harness.records import coverage
from conv_harness.reporting.summary import Summary, record_of
from conv_harness.running.calling import TimeLimit
from conv_harness.running.loader import Implementation, load_implementations
from conv_harness.running.target import Target
from conv_harness.searching.state import RunState
from conv_harness.triage import causes
from conv_harness.searching.search import search_in_process
from strategies import pinned


@dataclass
class RunResult:
    """What a run found: its summary (summary.json's content), the failed tests'
    reports and the summary's lines, as a pytest run prints them."""

    summary: dict[str, Any]
    reports: list[str] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    #: tests that ended in an error of the harness or of Hypothesis, not in a verdict:
    #: (test, traceback)
    errors: list[tuple[str, str]] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        """Every implementation passed (no failed test, no error)."""
        return not self.errors and all(
            entry["verdict"] != "failed" for entry in self.summary["implementations"])

    def entry(self, spec: str | None = None) -> dict[str, Any]:
        """The summary's entry of the implementation ``spec`` (the only one if None)."""
        entries = self.summary["implementations"]
        if spec is None:
            (only,) = entries
            return only
        return next(entry for entry in entries if entry["impl"] == spec)

    def bugs(self, spec: str | None = None) -> list[dict[str, Any]]:
        """The distinct bugs of the implementation ``spec`` (the only one if None), as
        summary.json lists them (contract section 4)."""
        return self.entry(spec)["bugs"]

    @property
    def text(self) -> str:
        """The reports, then the summary, as the end of a pytest run shows them."""
        return "\n".join(self.reports + self.lines)


@contextlib.contextmanager
def profile(name: str | None) -> Iterator[None]:
    """Hypothesis's settings profile ``name`` for the block (None: the current one); the
    project's profiles (conv_harness/profiles.py) are known by name."""
    if name is None:
        yield
        return
    profiles.register()
    before = settings._current_profile
    settings.load_profile(name)
    try:
        yield
    finally:
        settings.load_profile(before)


def planned_tests(impls: Sequence[Implementation], checks: Iterable[str] | None,
                  ops: Iterable[str] | None,
                  given: tuple[ConvProblem, ...] | None = None) -> list[tuple[str, str, str]]:
    """(implementation name, check, op) of each test to run, the costliest first (as
    the plugin orders them for pytest-xdist): the checks that apply to what each
    implementation provides."""
    wanted_checks = list(REGISTRY) if checks is None else list(checks)
    unknown = [check for check in wanted_checks if check not in REGISTRY]
    if unknown:
        raise ValueError(f"unknown checks {unknown}; known: {sorted(REGISTRY)}")
    wanted_ops = list(OPS) if ops is None else list(ops)
    unknown = [op for op in wanted_ops if op not in OPS]
    if unknown:
        raise ValueError(f"unknown operations {unknown}; known: {list(OPS)}")
    given_ops = pinned.ops_of(given) or OPS
    tests = [(impl.name, check, op) for impl in impls for op in OPS
             if op in wanted_ops and op in given_ops for check in REGISTRY
             if check in wanted_checks and REGISTRY[check].applies_to(impl, op)]
    tests.sort(key=lambda t: REGISTRY[t[1]].cost_on(t[2]), reverse=True)
    return tests


def seed_of_test(seed: int | None, check: str, op: str) -> int | None:
    """The first search's seed of the test of ``check`` on ``op`` in a run seeded with
    ``seed``: one of its own (as a default run gives each test a random one)."""
    return None if seed is None else zlib.crc32(f"{seed} {check} {op}".encode())


def run_checks(implementations: str | Implementation | Sequence[str | Implementation],
               checks: Iterable[str] | None = None, ops: Iterable[str] | None = None, *,
               failures_dir: Path | str = DEFAULT_FAILURES_DIR, budget: float | None = None,
               max_bugs: int = DEFAULT_MAX_BUGS, timeout: float | None = DEFAULT_TIMEOUT,
               problems: Sequence[ConvProblem] | None = None, seed: int | None = None,
               print_scripts: bool = False, profile_name: str | None = None) -> RunResult:
    """Run the conformance checks of ``implementations`` (``--impl`` specs, or loaded
    ones) in this process and return what a pytest run of the suite reports.

    ``checks``, ``ops``: which tests (by default every check and operation each
    implementation provides what for; an opt-in check, ``invalid``, only when named); the pytest
    options' counterparts: ``failures_dir`` (``--conv-failures``; summary.json, case
    files and scripts go there), ``budget`` (``--conv-budget``, seconds per test),
    ``max_bugs`` (``--conv-max-bugs``), ``timeout`` (``--conv-timeout``; None: none),
    ``problems`` (``--conv-problem``: the only problems drawn), ``print_scripts``
    (``--conv-print-scripts``); ``seed``: each test's searches draw from a seed of
    their own derived from it (None: Hypothesis's settings decide).
    """
    checks = None if checks is None else tuple(checks)
    given = pinned.given_problems(problems) if problems else None
    listed = ([implementations] if isinstance(implementations, (str, Implementation))
              else list(implementations))
    # a spec given twice is checked once (load_implementations loads each spec once)
    specs = list(dict.fromkeys(impl for impl in listed if isinstance(impl, str)))
    loaded = dict(zip(specs, load_implementations(specs)))
    impls: list[Implementation] = []
    for named in listed:
        impl = loaded[named] if isinstance(named, str) else named
        if all(impl is not other for other in impls):
            impls.append(impl)
    by_name = {impl.name: impl for impl in impls}
    tests = planned_tests(impls, checks, ops, given)
    failures = Path(failures_dir).absolute()
    summary = Summary(impls, failures)
    result = RunResult(summary={})
    time_limit = TimeLimit(timeout)
    run = RunState(given=given)
    run.book.open(failures, causes.new_run(failures))  # the run's book of causes
    try:
        with profile(profile_name):
            for name, check, op in tests:
                target = Target(by_name[name], op, time_limit, failures)
                why = not_run_reason(check, checks)
                if why:
                    summary.add(record_of(name, op, check, coverage.Tally(), [],
                                          oracle.torch_available()), "skipped", why)
                    continue
                _run_test(run, target, check, summary, result, budget=budget,
                          max_bugs=max_bugs, print_scripts=print_scripts,
                          seed=seed_of_test(seed, check, op))
    finally:
        causes.end_run(failures)
    summary.write()
    result.summary = summary.as_json()
    result.lines = summary.lines()
    return result


def not_run_reason(check: str, checks: Iterable[str] | None) -> str:
    """Why a test of ``check`` is skipped, as the pytest run gives it ("" to run it):
    an oracle check without torch; an opt-in check that ``checks`` does not name."""
    registered = REGISTRY[check]
    if registered.oracle and not oracle.torch_available():
        return oracle.not_run_reason(check)
    if registered.opt_in is not None and checks is None:
        return registered.opt_in[1]
    return ""


def _run_test(run: RunState, target: Target, check: str, summary: Summary,
              result: RunResult, **options: Any) -> None:
    """One conformance test: its verdict, report and record in ``summary``."""
    tally = coverage.Tally()
    try:
        verdict = search_in_process(run, target, check, tally=tally, **options)
    except Exception:  # noqa: BLE001 - an error, not a verdict: reported as pytest would
        result.errors.append((f"test_{check}[{target}]", traceback.format_exc()))
        summary.add(record_of(target.impl.name, target.op, check, tally, [], True),
                    "failed")
        return
    bugs = [] if verdict is None else [bug.to_json() for bug in verdict.bugs]
    summary.add(record_of(target.impl.name, target.op, check, tally, bugs,
                            oracle.torch_available()), "passed" if verdict is None else "failed")
    if verdict is not None:
        result.reports.append(verdict.report)
