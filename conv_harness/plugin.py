"""The harness's pytest plugin: options, loading implementations, parametrising.

It is registered as a ``pytest11`` entry point (see pyproject.toml), not from
conftest.py, because pytest chooses its rootdir, config file and initial
conftests from the command line *before* it reads any conftest: in
``pytest --impl /elsewhere/mine.py`` it first takes the path for a test path.
An entry-point plugin is loaded early enough to declare the options and put
that right (`_rerun_with_joined_path_options`).
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from conv_harness.checks import oracle
from conv_harness.checks.registry import REGISTRY
from conv_harness.path_options import joined_path_options, path_options_read_as_test_paths
from conv_harness.problem import OPS, ConvProblem
from conv_harness.reporting.failures import DEFAULT_FAILURES_DIR
from conv_harness.running.calling import DEFAULT_TIMEOUT, TimeLimit
from conv_harness.running.loader import (
    DEFAULT_SPEC,
    Implementation,
    SpecError,
    load_implementation,
)
from conv_harness.running.target import Target
from conv_harness.state import RUN

IMPLEMENTATIONS = pytest.StashKey[list[Implementation]]()
#: the run's per-call time limit, shared by all its targets (what a hang taught it)
TIME_LIMIT = pytest.StashKey[TimeLimit]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("conv-harness", "convolution conformance harness")
    group.addoption(
        "--impl", action="append", default=[], metavar="SPEC",
        help="implementation under test: a file path, a dotted module, or either with "
             ":attr (module, class or instance); may be given several times. "
             f"Default: $CONV_IMPL, else {DEFAULT_SPEC}.")
    group.addoption(
        "--conv-failures", default=DEFAULT_FAILURES_DIR, metavar="DIR",
        help=f"folder for the JSON case file of each shrunk failure (default "
             f"{DEFAULT_FAILURES_DIR}/)")
    group.addoption(
        "--conv-timeout", type=float, default=DEFAULT_TIMEOUT, metavar="SECONDS",
        help=f"time limit per call of the implementation (default {DEFAULT_TIMEOUT:g}; "
             "0: none)")
    group.addoption(
        "--conv-budget", type=float, default=0.0, metavar="SECONDS",
        help="time budget of each test (implementation x operation x check): once it is "
             "spent the search stops where it is, after one example at least (a failure "
             "found is still shrunk as far as the budget allows, saved and explained); "
             "a first search that has not failed keeps time for the catalogue sweep "
             "after it; the summary says how many examples "
             "each test got (default 0: none, the profile's example count)")
    group.addoption(
        "--conv-max-bugs", type=int, default=3, metavar="N",
        help="distinct bugs to search for per check (implementation x operation x check): "
             "after a failure is shrunk, the check is searched again with that bug's "
             "trigger excluded, until N bugs or nothing more is found (default 3)")
    group.addoption(
        "--conv-print-scripts", action="store_true", default=False,
        help="print each bug's standalone reproduction script in its report (it is always "
             "saved beside the case file)")
    group.addoption(
        "--conv-problem", action="append", default=[], metavar="DESC",
        help="run every check on exactly this problem, in oneDNN benchdnn's notation "
             "(mb2ic16ih7oc16oh7kh5ph2), optionally after an op and a dtype "
             "('conv_transpose2d float64 mb1ic2ih3oc2kh2sh2'); may be given several times, "
             "or as @FILE of such lines (see docs/fast-paths.md)")
    group.addoption(
        "--conv-invalid", action="store_true", default=False,
        help="also check that the implementation raises on invalid problems exactly "
             "when torch does (opt-in: many implementations do not validate)")


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config, args: list[str]):
    # a wrapper, first: around pytest's capture, which starts in this hook and would
    # hold the replaced process's output
    _join_file_values(args)
    _rerun_with_joined_path_options(early_config)
    return (yield)


def _join_file_values(args: list[str]) -> None:
    """``--conv-problem @FILE`` as one word: pytest's argument parser reads any
    word starting with ``@`` as a file of more arguments, which would make the
    file's first line the value and the others test paths."""
    i = 0
    while i < len(args) - 1:
        if args[i] == "--conv-problem" and args[i + 1].startswith("@"):
            args[i:i + 2] = [f"--conv-problem={args[i + 1]}"]
        i += 1


def same_choice_for_joined_words(config: pytest.Config) -> bool:
    """Whether pytest chose the rootdir and config file it would have chosen for the
    command with its path options as one word: then nothing was misread.

    pytest's choice (`determine_setup`, called as ``Config.parse`` calls it, with
    $PYTEST_ADDOPTS before the arguments) is made again for the free words the
    command has once every option is known. Where that cannot be done (pytest's
    internals moved), False: the caller then makes sure the other way.

    Why: most misread values change nothing. ``pytest --replay
    .conv-failures/x.json``, the command the docs give, starts pytest's search
    for a config file in .conv-failures, which has none, so it finds the
    project's own; replacing the process for it cost a second start.
    """
    try:
        from _pytest.config.findpaths import determine_setup

        params = config.invocation_params
        args = shlex.split(os.environ.get("PYTEST_ADDOPTS", "")) + list(params.args)
        known = config._parser.parse_known_args(args)
        rootpath, inipath, *_ = determine_setup(
            inifile=known.inifilename, override_ini=known.override_ini,
            args=known.file_or_dir, rootdir_cmd_arg=known.rootdir or None,
            invocation_dir=params.dir)
    except Exception:  # noqa: BLE001 - another pytest: not known to be the same
        return False
    return (rootpath, inipath) == (config.rootpath, config.inipath)


def _rerun_with_joined_path_options(config: pytest.Config) -> None:
    """Run pytest again with ``--impl=X`` where ``--impl X`` misled its choice of
    rootdir and config file (see `path_options_read_as_test_paths`; not where the
    choice is the same, `same_choice_for_joined_words`).

    pytest offers no hook before that choice and documents the one-word form as
    the way to give an option's value; so a command-line run becomes the same
    command with the one-word forms (the process is replaced: same exit status,
    same output), and a run inside another program (``pytest.main``), which
    cannot be replaced, is a usage error that says what to write.
    """
    params = config.invocation_params
    given = list(params.args)
    misread = path_options_read_as_test_paths(given, params.dir)
    if not misread or same_choice_for_joined_words(config):
        return
    if sys.argv[1:] != given:
        option, value = misread[0]
        raise pytest.UsageError(
            f"pytest reads {value} as a test path before it knows the option before "
            f"it, and chooses the wrong rootdir and config file: write the option and its "
            f"value as one word ({option}={value}, as for any path option)")
    command = [sys.executable, "-m", "pytest", *joined_path_options(given)]
    sys.stdout.flush()
    sys.stderr.flush()
    if os.name == "posix":
        os.execv(sys.executable, command)
    raise SystemExit(subprocess.call(command, cwd=params.dir))


def requested_specs(config: pytest.Config) -> list[str]:
    specs = list(config.getoption("--impl"))
    if not specs:
        env = os.environ.get("CONV_IMPL", "").strip()
        specs = [env] if env else [DEFAULT_SPEC]
    return list(dict.fromkeys(specs))  # the same spec twice is checked once


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "conv_check(name): a conformance test running the named check")
    impls: list[Implementation] = []
    for spec in requested_specs(config):
        try:
            impls.append(load_implementation(spec))
        except SpecError as exc:
            raise pytest.UsageError(str(exc)) from None
    names = [impl.name for impl in impls]
    for impl in impls:  # two files called mine.py: tell them apart by their spec
        if names.count(impl.name) > 1:
            impl.name = impl.spec
    config.stash[IMPLEMENTATIONS] = impls
    # A failure's report (20-40 lines) is in the failures section already; on CI, or
    # under -vv, pytest's short summary would print it again in full beside each
    # FAILED line. pytest's own option keeps that line to its first line there too.
    config.option.force_short_summary = True
    given = _given_problems(config)
    from conv_harness.reporting.summary import (
        Summary,  # imports the checks, hence numpy and the registry
    )
    from conv_harness.triage.search import BugSearch
    max_bugs = config.getoption("--conv-max-bugs")
    if max_bugs < 1:
        raise pytest.UsageError(f"--conv-max-bugs {max_bugs}: must be at least 1")
    budget = config.getoption("--conv-budget")
    if budget < 0:
        raise pytest.UsageError(f"--conv-budget {budget:g}: must be 0 (none) or more seconds")
    config.pluginmanager.register(Summary(impls, failures_dir(config)), "conv_harness_summary")
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
            reason=f"oracle check {check!r} not run: PyTorch is not importable"))], ids=["no-torch"])
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
        return REGISTRY[marker.args[0]].cost * OPS[target.op].spatial_dims

    items.sort(key=cost, reverse=True)  # stable: equal costs keep their order


def loaded_implementations(config: pytest.Config) -> list[Implementation]:
    return config.stash.get(IMPLEMENTATIONS, [])
