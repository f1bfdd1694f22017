"""A shared example database: ``--conv-db PATH | redis://HOST:PORT/N`` (contract section 6).

Hypothesis saves every failing example (and some interesting passing ones)
in its example database under the test's key, and replays them first on the
next run. Locally that is the folder ``.hypothesis/examples/``; with
``--conv-db`` (or ``$CONV_DB``) the run also reads and writes a database
that other runs, on other machines, share:

- a directory (Hypothesis's `DirectoryBasedExampleDatabase`; a network
  file system, or a folder that CI caches between runs), or
- a Redis server, ``redis://HOST:PORT/N`` (Hypothesis's own
  `hypothesis.extra.redis.RedisExampleDatabase`, with redis-py: ``pip
  install 'conv-harness[redis]'``). Its entries expire 8 days after their
  last write (Hypothesis's default).

The run's database is `MultiplexedDatabase` (the profile's local database,
the shared one): every failure is saved to both, and both are replayed.
``--conv-db-read-only`` (``$CONV_DB_READ_ONLY=1``) wraps the shared one in
`ReadOnlyDatabase`: the run replays what others found but writes only its
local database. The pattern: CI writes (``--conv-db redis://ci-db:6379/0``),
laptops read (``--conv-db redis://ci-db:6379/0 --conv-db-read-only``), so
that a developer's half-finished fix never changes what CI replays.

Keys: each test (implementation x operation x check) has its own key (see
conv_harness/searching/search.py), so a run against one implementation never
replays another's examples as its own.

Hypothesis uses no database in a derandomised run (the ``ci`` profile:
``derandomize=True`` implies ``database=None``) nor in one given
``--hypothesis-seed``. So ``--conv-db`` turns derandomisation off (its run
replays the database, then searches at random), and with a seed it is a
usage error: the seed would silently switch the shared database off.

What a run learned travels with the examples: each explained bug is stored
beside them (conv_harness/triage/stored.py), so a run that replays a known failure
rebuilds its entry instead of explaining it again, and says so at its end,
bug by bug (`known_failure_lines`: "replayed 2 known failures of mine.py
from redis://ci-db:6379/0").

This module is one of the suite's plugins, registered by the entry point
(conv_harness/pytest_entry.py), which declares its options.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings
from hypothesis.database import (DirectoryBasedExampleDatabase, ExampleDatabase,
                                 MultiplexedDatabase, ReadOnlyDatabase)

from conv_harness.options import DATABASE_ENV, DATABASE_ENV_READ_ONLY, REDIS_INSTALL
from conv_harness.checks.registry import REGISTRY
from conv_harness.search_hooks import STATE
from conv_harness.triage import stored
from conv_harness.triage.catalog import Bug, merge

REDIS_SCHEMES = ("redis://", "rediss://", "unix://")
SHARED = pytest.StashKey[str]()
#: the user property a test's recalled bugs travel in, from worker to controller
KNOWN = "conv_harness_known"
_KNOWN = pytest.StashKey[list]()


#: the Redis databases this process opened, by spec: one object per server, because
#: Hypothesis's RedisExampleDatabase compares equal only over the same client, and
#: HypoFuzz fuzzes only tests whose database equals the default one (a session that
#: configures twice in one process would otherwise skip every test, "differing_database")
_REDIS: dict[str, ExampleDatabase] = {}


class DatabaseSpecError(Exception):
    """A ``--conv-db`` value that cannot be used; the message says why."""


def is_redis(spec: str) -> bool:
    return spec.startswith(REDIS_SCHEMES)


def open_database(spec: str, base: Path | None = None) -> ExampleDatabase:
    """The database ``spec`` names: a directory (relative to ``base``) or a Redis URL.

    A Redis server is asked for a PING first, so that a wrong address is an
    error at start-up, not a silent run without its database.
    """
    if is_redis(spec):
        if spec in _REDIS:
            return _REDIS[spec]
        try:
            import redis
            from hypothesis.extra.redis import RedisExampleDatabase
        except ImportError:
            raise DatabaseSpecError(f"--conv-db {spec}: a Redis database needs redis-py, "
                                    f"which is not installed: {REDIS_INSTALL}") from None
        try:
            client = redis.Redis.from_url(spec, socket_connect_timeout=10)
            client.ping()
        except (redis.RedisError, ValueError) as exc:
            raise DatabaseSpecError(f"--conv-db {spec}: cannot use the Redis server: "
                                    f"{exc}") from None
        _REDIS[spec] = RedisExampleDatabase(client)
        return _REDIS[spec]
    path = Path(spec).expanduser()
    if not path.is_absolute() and base is not None:
        path = base / path
    if path.exists() and not path.is_dir():
        raise DatabaseSpecError(f"--conv-db {spec}: not a directory (give a directory or "
                                "redis://HOST:PORT/N)")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise DatabaseSpecError(f"--conv-db {spec}: cannot create the directory: "
                                f"{exc}") from None
    return DirectoryBasedExampleDatabase(path)


def requested(config: pytest.Config) -> tuple[str | None, bool]:
    """(the shared database's spec or None, read-only?) from the options or environment."""
    spec = (config.getoption("--conv-db", default=None)
            or os.environ.get(DATABASE_ENV, "").strip() or None)
    read_only = bool(config.getoption("--conv-db-read-only", default=False)
                     or os.environ.get(DATABASE_ENV_READ_ONLY, "").strip() not in ("", "0"))
    return spec, read_only


def run_database(shared: ExampleDatabase, local: ExampleDatabase | None,
                 read_only: bool) -> ExampleDatabase:
    """The run's database: the local one and the shared one (read-only if asked)."""
    if read_only:
        shared = ReadOnlyDatabase(shared)
    return shared if local is None else MultiplexedDatabase(local, shared)


@pytest.hookimpl(trylast=True)  # after Hypothesis's plugin has loaded --hypothesis-profile
def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(KnownFailures(), "conv_harness_known_failures")
    spec, read_only = requested(config)
    if spec is None:
        if read_only:
            raise pytest.UsageError(f"--conv-db-read-only (or ${DATABASE_ENV_READ_ONLY}) needs "
                                    f"a database: --conv-db PATH|redis://HOST:PORT/N or "
                                    f"${DATABASE_ENV}")
        return
    if config.getoption("hypothesis_seed", default=None) is not None:
        raise pytest.UsageError(f"--conv-db {spec} with --hypothesis-seed: Hypothesis uses "
                                "no example database in a seeded run; give one or the other")
    try:
        shared = open_database(spec, Path(config.invocation_params.dir))
    except DatabaseSpecError as exc:
        raise pytest.UsageError(str(exc)) from None
    stored.name_database(shared, spec)
    current = settings.default
    local = current.database
    if current.derandomize or local is None:
        # A derandomised profile (ci) has no database only because it is
        # derandomised, and on a CI machine Hypothesis's own defaults, which the
        # other profiles inherit, have none either; --conv-db turns derandomising
        # off, and the run keeps a local database, where a dev run elsewhere does.
        local = DirectoryBasedExampleDatabase(Path(".hypothesis") / "examples")
    name = f"{getattr(settings, '_current_profile', None) or 'default'}+conv-db"
    settings.register_profile(name, parent=current, derandomize=False,
                              database=run_database(shared, local, read_only))
    settings.load_profile(name)
    config.stash[SHARED] = spec + (" (read-only)" if read_only else "")


def pytest_report_header(config: pytest.Config) -> str | None:
    shared = config.stash.get(SHARED, None)
    return f"conv-harness shared example database: {shared}" if shared else None


# -- known failures: what the run rebuilt from stored triage, said at its end ---------

class KnownFailures:
    """Gathers the bugs each test rebuilt from stored triage, and names them at the end."""

    def __init__(self) -> None:
        self.entries: list[dict[str, Any]] = []

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo):
        report = yield
        if call.when == "call":
            state = item.stash.get(STATE, None)
            recalled = state.recalled if state is not None else []
            callspec = getattr(item, "callspec", None)
            target = callspec.params.get("target") if callspec else None
            spec = getattr(getattr(target, "impl", None), "spec", None)
            if recalled and spec is not None:
                report.user_properties.append(
                    (KNOWN, [{"impl": spec, "bug": raw, "source": source}
                             for raw, source in recalled]))
        return report

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        for key, value in report.user_properties:
            if key == KNOWN:
                self.entries += value

    @pytest.hookimpl(trylast=True)  # after the run summary
    def pytest_terminal_summary(self, terminalreporter) -> None:
        for line in known_failure_lines(self.entries):
            terminalreporter.write_line(line)


def known_failure_lines(entries: list[dict[str, Any]]) -> list[str]:
    """"replayed N known failures of SPEC from SOURCE ...:", then one line per distinct bug."""

    grouped: dict[tuple[str, str], list[Bug]] = {}
    for entry in entries:
        grouped.setdefault((entry["impl"], entry["source"]), []).append(
            Bug.from_json(entry["bug"]))
    lines = []
    for (spec, source), bugs in grouped.items():
        distinct = merge(bugs, list(REGISTRY))
        n = len(distinct)
        lines.append(f"replayed {n} known failure{'s' if n != 1 else ''} of {spec} from "
                     f"{source} (explained by an earlier run, not explained again; "
                     "scripts verified again):")
        for i, bug in enumerate(distinct, 1):
            where = f" ({bug.function})" if bug.function else ""
            lines.append(f"  {i}. {bug.failure}{where}, seen by {', '.join(bug.checks)}: "
                         f"{bug.problem.describe()}; {bug.trigger}")
    return lines
