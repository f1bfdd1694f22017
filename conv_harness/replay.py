"""Replaying saved failure cases: ``pytest --replay FILE`` and the regression corpus.

``pytest --replay FILE [--replay FILE2 | FOLDER ...] [--impl SPEC]`` runs
exactly the recorded case again (same values, dtype and memory layouts)
through the same registered check, against the implementation named in the
file, or against each ``--impl`` given (``$CONV_IMPL`` does not override the
file: the case names its implementation). When ``--replay`` is given the run
collects only these replays, one test per (case file, implementation): it
passes when the check now holds and fails exactly when it still fails.

Everything that can be wrong with the input (a missing or truncated file, a
folder with no case files, another schema version, an implementation that
cannot be loaded) is found in `pytest_configure`, before collection, and is
one `pytest.UsageError` (exit status 4) naming the file and the problem.

The same machinery replays the committed regression corpus
(tests/regressions/*.json, see conv_harness/conformance/test_regressions.py;
installed, the copy the wheel carries) on every run; those tests are moved
to the front of the run, before any random search. A case belongs to the
implementation that recorded it: by default it is replayed only against
that one (``--conv-regressions own``); ``--conv-regressions all`` replays
every case against every implementation under test, and a failure is then
that implementation's own: reported in its words, with its trigger, saved
as its case file and listed among its bugs in the summary.

This module is one of the suite's plugins, registered by the entry point
(conv_harness/pytest_entry.py) before pytest_configure; `conv_harness.plugin` loads
the implementations first.
"""

from __future__ import annotations

import importlib.util
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import pytest

from conv_harness.searching import suite
from conv_harness.checks import oracle
from conv_harness.checks.registry import REGISTRY, run_check
from conv_harness.plugin import loaded_implementations, timeout_of
from conv_harness.records.failures import CaseFileError, earlier_calls, load_case, script_path
from conv_harness.summary_hooks import REPLAYED
from conv_harness.running.calling import CheckFailure, Timeout, call_backward, call_forward
from conv_harness.isolate_hooks import isolate_for
from conv_harness.running.loader import (
    Implementation,
    SpecError,
    is_path,
    load_implementation,
    split_spec,
)
from conv_harness.running.target import Target
from conv_harness.searching.state import Found, RunState, TestState
from conv_harness.searching.suite import failure_text, shown_path
from conv_harness.search_hooks import BUGS, RUN
from conv_harness.searching.search import describe_and_verify


def _regressions_dir() -> Path:
    """The committed corpus: tests/regressions/ of a clone, else the copy the wheel carries.

    A wheel maps tests/regressions/ to the package folder
    conv_harness/conformance/regressions/ (see pyproject.toml), so the installed
    suite (``conv-harness``) replays the same cases before its search.
    """
    root = Path(__file__).resolve().parents[1]
    clone = root / "tests" / "regressions"
    if (root / "pyproject.toml").is_file() and clone.is_dir():
        return clone
    return Path(__file__).resolve().parent / "conformance" / "regressions"


REGRESSIONS_DIR = _regressions_dir()
REGRESSION_MARKER = "conv_regression"
#: JSON files of a failures folder that are not case files (conv_harness/reporting/summary.py's)
NOT_CASE_FILES = frozenset({"summary.json"})


@dataclass
class ReplayCase:
    """A loaded case file and the implementations it is replayed against."""

    path: Path
    record: dict[str, Any]
    case: Any  # ConvCase
    impls: list[Implementation] = field(default_factory=list)

    @property
    def ran(self) -> str:
        """The registered check to run again."""
        return self.record.get("run_check") or self.record["check"]

    @property
    def tries(self) -> int:
        """Calls to make: more than one for a failure that comes and goes."""
        return int(self.record.get("tries", 1))


REPLAY_CASES = pytest.StashKey[dict[Path, ReplayCase]]()


class ReplayFailure(AssertionError):
    """A replayed case that still fails; its message is the whole report."""


# --- loading ----------------------------------------------------------------

def case_files(paths: list[str], base: Path) -> list[Path]:
    """The case files named by ``paths`` (files, or folders of ``*.json``), in order."""
    out: list[Path] = []
    for raw in paths:
        path = Path(raw).expanduser()
        path = path if path.is_absolute() else base / path
        if path.is_dir():
            found = sorted(p for p in path.glob("*.json")
                           if not p.name.startswith(".") and p.name not in NOT_CASE_FILES)
            if not found:
                raise pytest.UsageError(f"--replay {raw}: the folder holds no case files "
                                        "(*.json)")
            out += found
        elif not path.exists():
            raise pytest.UsageError(f"--replay {raw}: no such case file")
        else:
            out.append(path)
    return list(dict.fromkeys(p.resolve() for p in out))


def recorded_implementation(record: dict[str, Any], path: Path,
                            loaded: dict[str, Implementation]) -> Implementation:
    """The implementation a case file names (also found from another folder if it is a
    file), loaded once per run: ``loaded`` is the run's own (never the process's:
    ``--isolate`` changes an implementation in place, and a later run in the same
    process must not inherit it)."""
    spec = record["impl"]
    if spec in loaded:
        return loaded[spec]
    try:
        impl = load_implementation(spec)
    except SpecError as first:
        impl_file = record.get("impl_file")
        _, attr = split_spec(spec)
        if not (isinstance(impl_file, str) and Path(impl_file).is_file()):
            raise CaseFileError(f"{path}: names an implementation that cannot be loaded: "
                                f"{first} (give another with --impl SPEC)") from None
        try:  # a file spec recorded relative to another folder: its absolute path
            impl = load_implementation(impl_file + (f":{attr}" if attr else ""))
        except SpecError as exc:
            raise CaseFileError(f"{path}: names an implementation that cannot be loaded: "
                                f"{exc} (give another with --impl SPEC)") from None
        impl.loads_from, impl.spec = impl.spec, spec
    loaded[spec] = impl
    return impl


def load_replay(path: Path, impls: list[Implementation] | None,
                loaded: dict[str, Implementation] | None = None) -> ReplayCase:
    """Read one case file and the implementations to run it on; `CaseFileError` if bad.
    ``loaded``: the run's implementations loaded so far, by spec (a fresh one if None)."""

    record, case = load_case(path)
    ran = record.get("run_check") or record["check"]
    if ran not in REGISTRY:
        raise CaseFileError(f"{path}: check {ran!r} is not a check this harness has "
                            f"({', '.join(sorted(REGISTRY))})")
    chosen = impls if impls else [recorded_implementation(record, path,
                                                          {} if loaded is None else loaded)]
    return ReplayCase(path=Path(path), record=record, case=case, impls=list(chosen))


@pytest.hookimpl(trylast=True)  # after conv_harness.plugin has loaded the --impl ones
def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", f"{REGRESSION_MARKER}: a replay of a committed regression case "
                   "(run before the random search)")
    paths = config.getoption("--replay", default=None)
    if not paths:
        return

    explicit = loaded_implementations(config) if config.getoption("--impl") else None
    files = case_files(paths, Path(config.invocation_params.dir))
    cases: dict[Path, ReplayCase] = {}
    loaded: dict[str, Implementation] = {}  # this run's: each recorded spec loaded once
    for path in files:
        try:
            cases[path] = load_replay(path, explicit, loaded)
        except CaseFileError as exc:
            raise pytest.UsageError(f"--replay: {exc}") from None
    config.stash[REPLAY_CASES] = cases
    if config.getoption("--isolate", default=False):  # the recorded ones too, not just --impl's
        isolate_for(config, [impl for case in cases.values() for impl in case.impls])
    # Collect these files, and only these: the test paths become the case files.
    config.args = [str(p) for p in files]


# --- running ----------------------------------------------------------------

def skip_reason(impl: Implementation, ran: str, case: Any) -> str | None:
    """Why ``impl`` cannot run check ``ran`` on ``case`` (None: it can)."""

    check = REGISTRY[ran]
    op = case.problem.op
    if not check.applies_to(impl, op):
        missing = [name for name in check.calls(op) if not impl.has(name)]
        return f"{impl.spec} does not provide {' / '.join(missing)} (check {ran!r})"
    excluded = impl.capabilities.excludes(case, functions=[f for f in check.calls(op)
                                                            if impl.has(f)])
    if excluded:
        return f"{impl.spec}'s CAPABILITIES exclude this case: {', '.join(excluded)}"
    if check.oracle and not oracle.torch_available():
        return f"check {ran!r} needs torch, which is not importable"
    return None


def replay_case(impl: Implementation, replay: ReplayCase, timeout: Timeout) -> None:
    """Run the case's check on ``impl``: skip, return quietly, or raise `ReplayFailure`."""
    __tracebackhide__ = True

    reason = skip_reason(impl, replay.ran, replay.case)
    if reason:
        pytest.skip(reason)
    failure = replayed_failure(impl, replay, timeout)
    if failure is not None:
        record = replay.record
        lines = [f"replay of {shown_path(replay.path)}: still fails",
                 failure_text(impl, replay.case, failure, replay.ran),
                 f"recorded: check {record['check']!r} failed for {record['impl']}"
                 + _versions(record)]
        script = script_path(replay.path)
        if script.is_file():
            lines.append(f"script:   python {shown_path(script)}")
        else:
            lines.append(f"script:   python -m conv_harness.records.script {shown_path(replay.path)} "
                         "-o repro.py && python repro.py")
        raise ReplayFailure("\n".join(lines)) from None


def _call_before(impl: Implementation, replay: ReplayCase, timeout: Timeout) -> None:
    """The calls a history-dependent case makes first (its ``before``), results unchecked."""

    for function, earlier in earlier_calls(replay.record, replay.case):
        if not impl.has(function):
            continue
        caller = call_backward if function.endswith("_backward") else call_forward
        try:
            caller(impl.function(function), earlier, timeout)
        except CheckFailure:
            pass  # what that call returns is not what the case checks


def _versions(record: dict[str, Any]) -> str:
    versions = record.get("versions")
    if isinstance(versions, dict) and versions:
        return " (" + ", ".join(f"{k} {v}" for k, v in versions.items()) + ")"
    return ""


class ReplayItem(pytest.Item):
    """One case file replayed against one implementation."""

    def __init__(self, *, replay: ReplayCase, impl: Implementation, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.replay = replay
        self.impl = impl

    def runtest(self) -> None:
        replay_case(self.impl, self.replay, timeout_of(self.config))

    def repr_failure(self, excinfo, style=None):  # type: ignore[override]
        if isinstance(excinfo.value, (ReplayFailure, CheckFailure)):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self):
        return self.path, None, f"replay {self.path.name} [{self.impl.name}]"


class ReplayFile(pytest.File):
    """A case file given to ``--replay``: one item per implementation."""

    def collect(self) -> Iterator[ReplayItem]:
        replay = self.config.stash[REPLAY_CASES][self.path.resolve()]
        for impl in replay.impls:
            yield ReplayItem.from_parent(self, name=impl.name, replay=replay, impl=impl)


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> ReplayFile | None:
    cases = parent.config.stash.get(REPLAY_CASES, None)
    if cases and file_path.suffix == ".json" and file_path.resolve() in cases:
        # A file outside the rootdir would get an empty node id (and two such
        # files the same ids): name it by its path, relative when inside.
        try:
            nodeid = file_path.relative_to(parent.config.rootpath).as_posix()
        except ValueError:
            nodeid = file_path.as_posix()
        return ReplayFile.from_parent(parent, path=file_path, nodeid=nodeid)
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The regression corpus first: explicit examples run before any random search."""
    first = [item for item in items if item.get_closest_marker(REGRESSION_MARKER)]
    if first:
        rest = [item for item in items if not item.get_closest_marker(REGRESSION_MARKER)]
        items[:] = first + rest


# --- the committed regression corpus ------------------------------------------

def corpus_files(folder: Path = REGRESSIONS_DIR) -> list[Path]:
    return sorted(folder.glob("*.json")) if folder.is_dir() else []


def _module_file(module: str, base: Path) -> Path | None:
    """The file a spec's module part names: a path (relative to ``base``) or a dotted name."""
    if is_path(module):
        path = Path(module).expanduser()
        return (path if path.is_absolute() else base / path).resolve()
    try:
        found = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    origin = getattr(found, "origin", None)
    return Path(origin).resolve() if origin else None


def recorded_for(recorded: str, impl: Implementation, base: Path | None = None) -> bool:
    """Whether the spec a case file recorded (``recorded``) names ``impl``.

    The same spec, or the same file and attribute however each was written
    (``conv_impl.tutorial`` and ``conv_impl/tutorial.py``); a relative path
    is read from ``base``, the folder the corpus was recorded in.
    """
    if recorded == impl.spec or recorded == impl.loads_from:
        return True
    (module, attr), (other, other_attr) = split_spec(recorded), split_spec(impl.spec)
    if attr != other_attr:
        return False
    a, b = _module_file(module, base or Path.cwd()), _module_file(other, Path.cwd())
    return a is not None and a == b


def _recorded_in(folder: Path) -> Path:
    """The folder the corpus's relative specs were recorded in: the clone's root."""
    return folder.parents[1] if folder.name == "regressions" and len(folder.parents) > 1 \
        else Path.cwd()


def corpus_cases(impls: list[Implementation], mode: str,
                 folder: Path = REGRESSIONS_DIR) -> list[tuple[Implementation, Path]]:
    """The (implementation, case file) pairs the regression corpus replays in ``mode``."""
    if mode == "none":
        return []
    base = _recorded_in(folder)
    out = []
    for path in corpus_files(folder):
        try:
            recorded = json.loads(path.read_text()).get("impl")
        except (OSError, ValueError, AttributeError):
            recorded = None  # broken: replayed against every one, where it fails as broken
        for impl in impls:
            if mode == "all" or not isinstance(recorded, str) or \
                    recorded_for(recorded, impl, base):
                out.append((impl, path))
    return out


def run_regression(item: pytest.Item, impl: Implementation, path: Path,
                   timeout: Timeout, failures_dir: Path) -> None:
    """Replay one committed regression case against ``impl`` (for test_regressions.py).

    A failure is ``impl``'s own, whoever recorded the case: the report is the
    one a conformance test gives (its spec, its trigger, its case file and
    script), and the bug goes into its bug list in the summary.
    """
    __tracebackhide__ = True
    try:
        record, case = load_case(path)
    except CaseFileError as exc:
        pytest.fail(f"broken regression case: {exc}", pytrace=False)

    ran = record.get("run_check") or record["check"]
    if ran not in REGISTRY:
        pytest.fail(f"broken regression case: {path}: unknown check {ran!r}", pytrace=False)
    replay = ReplayCase(path=path, record=record, case=case, impls=[impl])
    reason = skip_reason(impl, ran, case)
    if reason:
        pytest.skip(reason)
    failure = replayed_failure(impl, replay, timeout)
    if failure is not None:  # raised here, not in an except block: one report, not two
        pytest.fail(_own_failure(item, impl, replay, failure, timeout, failures_dir),
                    pytrace=False)


def replayed_failure(impl: Implementation, replay: ReplayCase,
                     timeout: Timeout) -> CheckFailure | None:
    """The case's check on ``impl``, after the calls it records first, as often as it
    records (`ReplayCase.tries`): the first failure, else None."""
    _call_before(impl, replay, timeout)
    for _ in range(replay.tries):
        try:
            run_check(replay.ran, impl, replay.case, timeout)
        except CheckFailure as failure:
            return failure
    return None


def _own_failure(item: pytest.Item, impl: Implementation, replay: ReplayCase,
                 failure: CheckFailure, timeout: Timeout, failures_dir: Path) -> str:
    """Save, explain and record a regression failure as ``impl``'s bug; its report."""

    target = Target(impl, replay.case.problem.op, timeout, failures_dir)
    text = suite.failure_text(impl, replay.case, failure, replay.ran)
    case_file = suite.save_failure(target, failure, replay.ran, text, replay.case,
                                   replay.tries)
    bug = describe_and_verify(
        Found(target, replay.ran, failure, replay.case, text, case_file, tries=replay.tries),
        TestState(run=item.config.stash.get(RUN, None) or RunState()))
    item.stash[BUGS] = [bug.to_json()]
    item.stash[REPLAYED] = (impl.name, target.op, replay.ran)
    recorded = replay.record.get("impl")
    whose = ("it recorded" if isinstance(recorded, str) and recorded_for(
        recorded, impl, _recorded_in(replay.path.parent)) else f"recorded for {recorded}")
    return (f"{impl.spec} {target.op}: fails regression case {suite.shown_path(replay.path)} "
            f"({whose})\n{bug.report}")
