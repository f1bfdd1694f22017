"""Long fuzz campaigns with HypoFuzz: ``python -m harness.fuzz [FUZZ OPTIONS] -- [SUITE OPTIONS]``.

    pip install 'conv-harness[fuzz]'        # in a venv of its own: it pins Hypothesis
    python -m harness.fuzz -n 8 -- --impl my_pkg.conv --conv-db redis://host:6379/0

runs ``hypothesis fuzz`` (HypoFuzz) on the installed conformance suite with
the same protections as ``conv-harness`` (harness/cli.py: the suite's own
pytest.ini, rootdir and confcutdir, whatever folder it runs in). The options
before ``--`` are HypoFuzz's: ``-n N`` processes (default: every core),
``--dashboard/--no-dashboard`` and ``--port`` (the live dashboard, on
http://localhost:9999/ by default), ``-d`` (the dashboard alone, e.g. over a
shared database). Those after it are the suite's: ``--impl``, ``-k``,
``--conv-db`` (several machines fuzz together when they share it, and
HypoFuzz's workers coordinate through it), Hypothesis's profile (``dev``
unless one is given: a derandomised profile such as ``ci`` would make
HypoFuzz skip every test).

A campaign runs until stopped. What it found is in the example database
under the same keys as the pytest runs use (see below), so the follow-up

    conv-harness --impl my_pkg.conv --conv-db redis://host:6379/0

replays those failures first and writes their case files, scripts and
summary.json, as for any failure.

Keys: a pytest run gives each test (implementation x operation x check) its
own example-database key, set at ``pytest_runtest_call``
(harness/triage/search.py). HypoFuzz runs no such hook: it sets
``_hypothesis_internal_add_digest`` to the pytest node id and computes the
key in ``FuzzTarget.from_hypothesis_test``, so its keys would differ (and the
node id even differs between a clone and the installed suite). This module is
also a ``pytest11`` plugin (``conv_harness_fuzz``): in HypoFuzz's pytest
sessions (the campaign's, its workers', the dashboard's) it wraps that
constructor to give each conformance test the harness's own key first. So a
plain ``hypothesis fuzz -- --impl X`` in a clone keys its finds the same way.
"""

from __future__ import annotations

import sys
from typing import Any, Sequence

import pytest

HYPOFUZZ_INSTALL = "pip install 'conv-harness[fuzz]'  (in a venv of its own: it pins Hypothesis)"


def _use_harness_keys() -> None:
    """Make HypoFuzz key each conformance test as a pytest run of the harness does."""
    from hypofuzz.hypofuzz import FuzzTarget

    if getattr(FuzzTarget.from_hypothesis_test, "_conv_harness_keys", False):
        return
    original = FuzzTarget.from_hypothesis_test.__func__

    def from_hypothesis_test(cls, wrapped_test: Any, *, pytest_item: Any = None,
                             **kwargs: Any) -> Any:
        from harness.triage.search import conformance_target, database_key

        target, check = conformance_target(pytest_item) if pytest_item is not None \
            else (None, None)
        if target is not None:
            wrapped_test.hypothesis.inner_test._hypothesis_internal_add_digest = \
                database_key(target, check)
        return original(cls, wrapped_test, pytest_item=pytest_item, **kwargs)

    from_hypothesis_test._conv_harness_keys = True  # type: ignore[attr-defined]
    FuzzTarget.from_hypothesis_test = classmethod(from_hypothesis_test)  # type: ignore


@pytest.hookimpl(tryfirst=True)  # before HypoFuzz's own collector makes its targets
def pytest_collection_finish(session: pytest.Session) -> None:
    """In HypoFuzz's pytest sessions only (its collector is a plugin of theirs)."""
    if any(type(plugin).__module__ == "hypofuzz.collection"
           for plugin in session.config.pluginmanager.get_plugins()):
        _use_harness_keys()


def split_args(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """(HypoFuzz's options, the suite's options): those before and after ``--``."""
    argv = list(argv)
    if "--" in argv:
        i = argv.index("--")
        return argv[:i], argv[i + 1:]
    return [], argv


def command(argv: Sequence[str]) -> list[str]:
    """``hypothesis fuzz FUZZ_OPTIONS -- <the installed suite's pytest arguments>``."""
    from harness.cli import pytest_args

    fuzz_options, suite_options = split_args(argv)
    if not any(a == "--hypothesis-profile" or a.startswith("--hypothesis-profile=")
               for a in suite_options):
        suite_options = ["--hypothesis-profile", "dev", *suite_options]
    # HypoFuzz adds no test path: the suite's folder comes last, as in conv-harness.
    pytest_arguments = pytest_args(suite_options)
    return [sys.executable, "-c", "import sys; from hypothesis.extra.cli import main; "
            "sys.exit(main())", "fuzz", *fuzz_options, "--", *pytest_arguments]


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        import hypofuzz  # noqa: F401
    except ImportError:
        print(f"harness.fuzz: HypoFuzz is not installed: {HYPOFUZZ_INSTALL}", file=sys.stderr)
        return 4
    from harness.cli import run_in_place
    return run_in_place(command(argv))


if __name__ == "__main__":
    sys.exit(main())
