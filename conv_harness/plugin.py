"""The suite's pytest plugin: loading implementations, parametrising, the run's summary.

Registered by the entry point (conv_harness/pytest_entry.py) in a run of the suite,
before pytest_configure; the options it reads are declared there
(conv_harness/options.py).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from conv_harness.checks import oracle
from conv_harness.checks.registry import REGISTRY
from conv_harness.options import DEFAULT_SPEC
from conv_harness.problem import OPS, ConvProblem
from conv_harness.running.calling import TimeLimit
from conv_harness.running.loader import (
    Implementation,
    SpecError,
    load_implementations,
)
from conv_harness.running.target import Target
from conv_harness.search_hooks import RUN

IMPLEMENTATIONS = pytest.StashKey[list[Implementation]]()
#: the run's per-call time limit, shared by all its targets (what a hang taught it)
TIME_LIMIT = pytest.StashKey[TimeLimit]()


def requested_specs(config: pytest.Config) -> list[str]:
    specs = list(config.getoption("--impl"))
    if not specs:
        env = os.environ.get("CONV_IMPL", "").strip()
        specs = [env] if env else [DEFAULT_SPEC]
    return specs


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "conv_check(name): a conformance test running the named check")
    try:
        impls = load_implementations(requested_specs(config))
    except SpecError as exc:
        raise pytest.UsageError(str(exc)) from None
    config.stash[IMPLEMENTATIONS] = impls
    # A failure's report (20-40 lines) is in the failures section already; on CI, or
    # under -vv, pytest's short summary would print it again in full beside each
    # FAILED line. pytest's own option keeps that line to its first line there too.
    config.option.force_short_summary = True
    given = _given_problems(config)
    from conv_harness.reporting.summary import (
        Summary,  # imports the checks, hence numpy and the registry
    )
    from conv_harness.summary_hooks import SummaryHooks
    from conv_harness.search_hooks import BugSearch
    max_bugs = config.getoption("--conv-max-bugs")
    if max_bugs < 1:
        raise pytest.UsageError(f"--conv-max-bugs {max_bugs}: must be at least 1")
    budget = config.getoption("--conv-budget")
    if budget < 0:
        raise pytest.UsageError(f"--conv-budget {budget:g}: must be 0 (none) or more seconds")
    config.pluginmanager.register(SummaryHooks(Summary(impls, failures_dir(config))),
                                  "conv_harness_summary")
    bug_search = BugSearch(max_bugs, config.getoption("--conv-print-scripts"), budget or None,
                           failures_dir(config))
    bug_search.run.given = given
    config.stash[RUN] = bug_search.run
    config.pluginmanager.register(bug_search, "conv_harness_bug_search")


def _given_problems(config: pytest.Config) -> tuple[ConvProblem, ...] | None:
    """``--conv-problem``'s problems, the only ones the strategies will draw
    (strategies/pinned.py); None where none are given."""
    from conv_harness.descriptor import DescriptorError, parse_problem_line
    from strategies import pinned

    values = config.getoption("--conv-problem", default=None) or []
    if not values:
        return None
    problems = []
    for value in values:
        where, lines = f"--conv-problem {value}", [value]
        if value.startswith("@"):
            path = Path(config.invocation_params.dir) / value[1:]
            try:
                lines = path.read_text().splitlines()
            except OSError as exc:
                raise pytest.UsageError(f"--conv-problem {value}: {exc.strerror}: {path}") from None
        for number, line in enumerate(lines, 1):
            try:
                problem = parse_problem_line(line)
            except DescriptorError as exc:
                at = f" line {number}" if value.startswith("@") else ""
                raise pytest.UsageError(f"{where}{at}: {exc}") from None
            if problem is not None:
                problems.append(problem)
    if not problems:
        raise pytest.UsageError(f"--conv-problem {' '.join(values)}: no problem given")
    return pinned.given_problems(problems)


def timeout_of(config: pytest.Config) -> float | None:
    """The per-call time limit, None for none (``--conv-timeout 0``)."""
    return config.getoption("--conv-timeout", default=None) or None


def failures_dir(config: pytest.Config) -> Path:
    """The failures folder (``--conv-failures``), absolute."""
    failures = Path(config.getoption("--conv-failures"))
    if not failures.is_absolute():
        failures = Path(config.invocation_params.dir) / failures
    return failures


def targets(config: pytest.Config, check: str) -> list[Target]:
    """Every (implementation, op) that provides what ``check`` calls."""
    out = []
    timeout = config.stash.setdefault(TIME_LIMIT, TimeLimit(timeout_of(config)))
    failures = failures_dir(config)
    from strategies import pinned
    run = config.stash.get(RUN, None)
    ops = pinned.ops_of(run and run.given) or OPS  # --conv-problem: only the ops given
    for impl in config.stash[IMPLEMENTATIONS]:
        for op in (op for op in OPS if op in ops):
            if REGISTRY[check].applies_to(impl, op):
                out.append(Target(impl, op, timeout, failures))
    return out


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    marker = metafunc.definition.get_closest_marker("conv_check")
    if marker is None or "target" not in metafunc.fixturenames:
        return
    check = marker.args[0]
    if check not in REGISTRY:
        raise pytest.UsageError(f"conv_check({check!r}): unknown check; known: {sorted(REGISTRY)}")
    if REGISTRY[check].oracle and not oracle.torch_available():
        metafunc.parametrize("target", [pytest.param(None, marks=pytest.mark.skip(
            reason=oracle.not_run_reason(check)))], ids=["no-torch"])
        return
    found = targets(metafunc.config, check)
    if not found:  # pytest's own empty parameter set would run the test on NOTSET
        metafunc.parametrize("target", [pytest.param(None, marks=pytest.mark.skip(
            reason=not_run_reason(metafunc.config, check)))], ids=["not-run"])
        return
    metafunc.parametrize("target", found, ids=str)


def not_run_reason(config: pytest.Config, check: str) -> str:
    """Why no implementation under test runs ``check``: what it needs, what each provides."""
    provided = "; ".join(f"{impl.name} provides {', '.join(impl.functions)}"
                         for impl in config.stash[IMPLEMENTATIONS])
    return f"check {check!r} not run: it needs {REGISTRY[check].requirement()}; {provided}"


@pytest.hookimpl(tryfirst=True)  # before the replay plugin puts the regression corpus first
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The costliest checks first, each op's 3-D tests before its 1-D ones.

    pytest-xdist hands tests out in this order; with the long ones last, one
    worker would finish alone on them while the other idles.
    """
    def cost(item: pytest.Item) -> float:
        marker = item.get_closest_marker("conv_check")
        callspec = getattr(item, "callspec", None)
        target = callspec.params.get("target") if callspec else None
        if marker is None or marker.args[0] not in REGISTRY or not isinstance(target, Target):
            return 0.0
        return REGISTRY[marker.args[0]].cost_on(target.op)

    items.sort(key=cost, reverse=True)  # stable: equal costs keep their order


def loaded_implementations(config: pytest.Config) -> list[Implementation]:
    return config.stash.get(IMPLEMENTATIONS, [])
