"""Shared fixtures for the harness's own tests."""

from __future__ import annotations

import functools
import os
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from conv_harness.checks.registry import run_check
from conv_harness.path_options import joined_path_options
from conv_harness.profiles import without_local_constants
from conv_harness.running.calling import CheckFailure
from tests.harness.pytest_server import SERVER

PROJECT_ROOT = Path(__file__).resolve().parents[2]

# The project's own tests draw the same examples in every run, as CI does (its `ci`
# profile, derandomised): a test of the harness that passes or fails by chance gives
# no verdict. Searches of the harness's tests that want other draws say so (a seed,
# run_pytest's harness-test profile); a user's run of the suite stays random (`dev`).
if not os.environ.get("HYPOTHESIS_PROFILE"):
    settings.load_profile("ci")
# ... and whichever modules a worker imported before: the draws leave out the
# constants of local modules (conv_harness/profiles.py says why)
LOCAL_CONSTANTS_LEFT_OUT = without_local_constants()
#: settings for the harness's own in-process searches: no database, no deadline
QUIET = dict(database=None, deadline=None,
             suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def fails(check: str, implementation, case) -> bool:
    """Whether ``check`` itself fails on ``case`` (not another check, e.g. ``raised``)."""
    try:
        run_check(check, implementation, case)
    except CheckFailure as failure:
        return failure.check == check
    return False


@pytest.fixture(scope="session", autouse=True)
def shared_bytecode(tmp_path_factory):
    """Every process the tests start (pytest runs, scripts, the console script) reads
    and writes one bytecode cache, in the session's temporary folder (both xdist
    workers', under their common parent), never in the sources or the venv.

    Where $PYTHONDONTWRITEBYTECODE is set (this project's machines set it) nothing
    is cached at all: each of those processes compiled the project's modules, and
    pytest rewrote the assertions of Hypothesis's and the harness's (every module of
    a distribution with a pytest plugin: 134 modules, about 0.8 s of each start)."""
    with pytest.MonkeyPatch.context() as env:
        env.setenv("PYTHONPYCACHEPREFIX", str(tmp_path_factory.getbasetemp().parent / "pycache"))
        env.delenv("PYTHONDONTWRITEBYTECODE", raising=False)
        yield


def suite_run(*args: str, failures: Path, cwd: Path = PROJECT_ROOT, env: dict | None = None,
               timeout: float = 900, words_as_given: bool = False) -> subprocess.CompletedProcess:
    """The conformance suite run in a pytest process of its own, as a user would run it
    (forked from this process's `SERVER`, tests/harness/pytest_server.py), with failure
    files in ``failures`` unless ``args`` say otherwise and no example database, so that
    earlier runs cannot change what is found. For a run that several tests read (a
    module-scoped fixture); a test's own run is `run_pytest`'s.

    A path option and its value go as one word (``--impl=X``), the form pytest
    documents: given as two words, with a path that exists outside the folder pytest
    runs in (a module of tests/harness, a case file, a tmp folder), pytest may choose
    another rootdir and config file (a tmp folder's: none), and the plugin then
    replaces the run by a fresh ``python -m pytest`` with the words joined
    (conv_harness/plugin.py's `_rerun_with_joined_path_options`), a torch import and a
    start-up more for each run (about 1.7 s of CPU; the forked server saves them
    otherwise). ``words_as_given``: as written, for the tests of that rerun."""
    # The limit only stops a hung run; it asserts no speed. 300 s was outlasted by a
    # run of about a minute idle (test_history_sequences) at load 8-9.
    options = ["-p", "no:cacheprovider", "-q"]
    if not any(str(a).startswith("--conv-failures") for a in args):
        options += ["--conv-failures", str(failures)]
    words = [*options, *map(str, args)]
    full_env = {**os.environ, "HYPOTHESIS_PROFILE": "harness-test", **(env or {})}
    return SERVER.run(words if words_as_given else joined_path_options(words), cwd, full_env,
                      timeout)


@pytest.fixture
def run_pytest(tmp_path):
    """`suite_run` with failure files in ``tmp_path / "failures"``:
    ``run_pytest(*args, cwd=PROJECT_ROOT, env=None, timeout=900, words_as_given=False)``
    returns the CompletedProcess (stdout and stderr as text)."""
    return functools.partial(suite_run, failures=tmp_path / "failures")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "long: a test that takes ten seconds or more in a full run (a search "
                   "with shrinking, or a pytest run of its own); handed out first")


@pytest.hookimpl(trylast=True)  # after the harness's own orderings, which it keeps
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The long tests first, each group in the order it had.

    pytest-xdist hands tests out in this order, in consecutive chunks: a long
    test handed out last runs alone while the other worker, done, idles (a full
    run ended on test_triage's 22 s batch_consistency search for 16 s so). No
    long test here shares a module-scoped fixture, so none is set up twice.
    """
    items.sort(key=lambda item: item.get_closest_marker("long") is None)
