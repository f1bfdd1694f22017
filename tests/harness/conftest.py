"""Shared fixtures for the harness's own tests."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from harness.checks.registry import run_check
from harness.profiles import without_local_constants
from harness.running.calling import CheckFailure
from tests.harness.pytest_server import SERVER

PROJECT_ROOT = Path(__file__).resolve().parents[2]

# The project's own tests draw the same examples in every run, as CI does (its `ci`
# profile, derandomised): a test of the harness that passes or fails by chance gives
# no verdict. Searches of the harness's tests that want other draws say so (a seed,
# run_pytest's harness-test profile); a user's run of the suite stays random (`dev`).
if not os.environ.get("HYPOTHESIS_PROFILE"):
    settings.load_profile("ci")
# ... and whichever modules a worker imported before: the draws leave out the
# constants of local modules (harness/profiles.py says why)
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
               timeout: float = 900) -> subprocess.CompletedProcess:
    """The conformance suite run in a pytest process of its own, as a user would run it
    (forked from this process's `SERVER`, tests/harness/pytest_server.py), with failure
    files in ``failures`` unless ``args`` say otherwise and no example database, so that
    earlier runs cannot change what is found. For a run that several tests read (a
    module-scoped fixture); a test's own run is `run_pytest`'s."""
    # The limit only stops a hung run; it asserts no speed. 300 s was outlasted by a
    # run of about a minute idle (test_history_sequences) at load 8-9.
    options = ["-p", "no:cacheprovider", "-q"]
    if not any(str(a).startswith("--conv-failures") for a in args):
        options += ["--conv-failures", str(failures)]
    full_env = {**os.environ, "HYPOTHESIS_PROFILE": "harness-test", **(env or {})}
    return SERVER.run([*options, *map(str, args)], cwd, full_env, timeout)


@pytest.fixture
def run_pytest(tmp_path):
    """`suite_run` with failure files in ``tmp_path / "failures"``:
    ``run_pytest(*args, cwd=PROJECT_ROOT, env=None, timeout=900)`` returns the
    CompletedProcess (stdout and stderr as text)."""
    def run(*args: str, cwd: Path = PROJECT_ROOT, env: dict | None = None,
            timeout: float = 900) -> subprocess.CompletedProcess:
        return suite_run(*args, failures=tmp_path / "failures", cwd=cwd, env=env,
                          timeout=timeout)
    return run
