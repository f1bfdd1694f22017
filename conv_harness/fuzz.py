"""Long fuzz campaigns with HypoFuzz: ``python -m conv_harness.fuzz [FUZZ OPTIONS] -- [SUITE OPTIONS]``.

    pip install 'conv-harness[fuzz]'        # in a venv of its own: it pins Hypothesis
    python -m conv_harness.fuzz -n 8 -- --impl my_pkg.conv --conv-db redis://host:6379/0

runs ``hypothesis fuzz`` (HypoFuzz) on the installed conformance suite with
the same protections as ``conv-harness`` (conv_harness/cli.py: the suite's own
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
(conv_harness/searching/search.py). HypoFuzz runs no such hook: it sets
``_hypothesis_internal_add_digest`` to the pytest node id and computes the
key in ``FuzzTarget.from_hypothesis_test``, so its keys would differ (and the
node id even differs between a clone and the installed suite). This module is
also one of the suite's pytest plugins (conv_harness/pytest_entry.py): in HypoFuzz's pytest
sessions (the campaign's, its workers', the dashboard's) it wraps that
constructor to give each conformance test the harness's own key first. So a
plain ``hypothesis fuzz -- --impl X`` in a clone keys its finds the same way.

The campaign runs under a supervisor (`supervise`), in a process group of
its own, so that:

- Ctrl-C (SIGINT, or SIGTERM) reaches the supervisor alone, which stops
  the campaign's processes and prints a short summary of what they found
  and where (`campaign_summary`, read from the example database), with no
  traceback from HypoFuzz's processes;
- a campaign that has nothing to fuzz (HypoFuzz skipped every selected test:
  a derandomised profile, a profile without the generate phase, a database
  other than the default one) ends at once with one line that says what to
  use instead, exit status 4, never HypoFuzz's "Found a failing input for
  every test!" (which it prints whenever its workers end, also when they
  fuzzed nothing); the supervisor states what was found instead.

Exit status: 1 if the campaign's database holds a failing input of a test it
fuzzed, else 0; 4 when there was nothing to fuzz.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any, Sequence

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
        from conv_harness.search_hooks import conformance_target
        from conv_harness.searching.search import database_key

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
    from conv_harness.cli import pytest_args

    fuzz_options, suite_options = split_args(argv)
    if not any(a == "--hypothesis-profile" or a.startswith("--hypothesis-profile=")
               for a in suite_options):
        suite_options = ["--hypothesis-profile", "dev", *suite_options]
    # HypoFuzz adds no test path: the suite's folder comes last, as in conv-harness.
    pytest_arguments = pytest_args(suite_options)
    return [sys.executable, "-c", "import sys; from hypothesis.extra.cli import main; "
            "sys.exit(main())", "fuzz", *fuzz_options, "--", *pytest_arguments]


#: HypoFuzz's last line when its workers end, whatever they did
HYPOFUZZ_CLAIM = "Found a failing input for every test!"
#: HypoFuzz's line when it collected nothing it can fuzz (the reasons follow it)
NOTHING_COLLECTED = "no Hypothesis tests found:"
_REASON = re.compile(r"\(because: \{'status_reason': '(\w+)'")
#: what to use instead, for each reason HypoFuzz gives for skipping a test
INSTEAD = {
    "sets_derandomize": "a derandomised profile (ci) is not fuzzed: give --hypothesis-profile "
                        "dev or thorough after --",
    "differing_database": "the tests' example database is not the default one: give the "
                          "shared database as --conv-db PATH|redis://HOST:PORT/N after --, "
                          "not in a profile of your own",
    "no_generate_phase": "the profile has no generate phase: give --hypothesis-profile dev "
                         "after --",
}
#: seconds the campaign's processes get to end after SIGTERM, before SIGKILL
STOP_GRACE = 10.0


def nothing_to_fuzz_line(reasons: Sequence[str]) -> str:
    """The one line for a campaign whose selected tests HypoFuzz all skipped."""
    counts: dict[str, int] = {}
    for reason in reasons:
        counts[reason] = counts.get(reason, 0) + 1
    why = ", ".join(f"{reason}: {n}" for reason, n in counts.items()) or "none selected"
    instead = "; ".join(INSTEAD.get(reason, f"HypoFuzz skips tests for {reason!r}")
                        for reason in counts) or "check the -k and --impl options after --"
    return f"conv_harness.fuzz: nothing to fuzz (HypoFuzz skipped every selected test: {why}); " \
           f"{instead}"


class Relay(threading.Thread):
    """Copies the campaign's output to ours, but HypoFuzz's `HYPOFUZZ_CLAIM`; notes when
    HypoFuzz collected nothing (and from then on keeps its output for the reasons only)."""

    def __init__(self, stream: IO[str], out: IO[str]):
        super().__init__(daemon=True)
        self.stream, self.out = stream, out
        self.nothing = threading.Event()
        self.reasons: list[str] = []

    def run(self) -> None:
        for line in self.stream:
            if self.nothing.is_set():
                self.reasons += _REASON.findall(line)
                continue
            if line.strip() == HYPOFUZZ_CLAIM:
                continue
            if NOTHING_COLLECTED in line:  # after "collecting tests... " on the same line
                before = line.split(NOTHING_COLLECTED)[0]
                if before.strip():
                    self.out.write(before.rstrip() + "\n")
                self.nothing.set()
                continue
            self.out.write(line)
            self.out.flush()


def database_spec(suite_options: Sequence[str]) -> str:
    """The database the campaign writes: ``--conv-db`` (or $CONV_DB), else the local one."""
    from conv_harness.options import DATABASE_ENV

    spec = None
    for i, arg in enumerate(suite_options):
        if arg == "--conv-db" and i + 1 < len(suite_options):
            spec = suite_options[i + 1]
        elif arg.startswith("--conv-db="):
            spec = arg.split("=", 1)[1]
    return spec or os.environ.get(DATABASE_ENV, "").strip() or str(Path(".hypothesis") / "examples")


def campaign_summary(spec: str, since: float) -> tuple[list[str], int]:
    """What the campaign found, from its database: per test HypoFuzz reported on since
    ``since`` (a time.time()), its failing inputs, and where they are;
    and how many of those tests have a failing input."""
    from hypofuzz.database import FailureState, HypofuzzDatabase
    from hypofuzz.database.database import test_keys_key

    from conv_harness.database import DatabaseSpecError, open_database

    try:
        db = HypofuzzDatabase(open_database(spec))
        keys = list(db.fetch(test_keys_key))
    except (DatabaseSpecError, Exception) as exc:  # noqa: BLE001 - a summary, not a verdict
        return [f"conv_harness.fuzz: cannot read the campaign's database {spec}: {exc}"], 0
    rows, failing = [], 0
    for key in keys:
        reports = [r for r in db.reports.fetch(key) if r is not None and r.timestamp >= since]
        if not reports:
            continue  # another campaign's test
        found = sum(len(list(db.failures(state=state).fetch(key)))
                    for state in (FailureState.SHRUNK, FailureState.UNSHRUNK))
        failing += bool(found)
        rows.append(f"  {reports[0].nodeid}: "
                    + (f"{found} failing input{'s' if found != 1 else ''}" if found
                       else "no failure"))
    head = (f"conv_harness.fuzz: campaign stopped: {failing} of {len(rows)} fuzzed tests have a "
            f"failing input, saved in {spec}")
    follow = ("  replay them, with case files, scripts and summary.json: conv-harness "
              f"<the options after --> --conv-db {spec}" if failing else "")
    return [head, *sorted(rows), *([follow] if follow else [])], failing


def _end(child: subprocess.Popen) -> None:
    """Stop the campaign's process group: SIGTERM (no tracebacks), then SIGKILL."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(child.pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + STOP_GRACE
        while time.monotonic() < deadline:
            try:
                os.killpg(child.pid, 0)
            except ProcessLookupError:
                child.poll()
                return
            child.poll()  # reap the leader, so that its group can empty
            time.sleep(0.1)


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def supervise(args: list[str], spec: str, out: IO[str] = sys.stdout) -> int:
    """Run the campaign ``args`` in a process group of its own until it ends, has nothing
    to fuzz, or we are interrupted; then stop it and say what it found."""
    since = time.time()
    out.flush()
    child = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True, bufsize=1, start_new_session=True)
    relay = Relay(child.stdout, out)
    relay.start()
    previous = {sig: signal.signal(sig, _interrupt) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        while child.poll() is None and not relay.nothing.is_set():
            time.sleep(0.2)
        if relay.nothing.is_set():  # HypoFuzz is printing why, and then ends
            child.wait(timeout=STOP_GRACE)
    except (KeyboardInterrupt, subprocess.TimeoutExpired):
        pass
    finally:
        for sig in previous:  # a second ^C must not interrupt the clean-up
            signal.signal(sig, signal.SIG_IGN)
        _end(child)
        relay.join(timeout=STOP_GRACE)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if relay.nothing.is_set():
        print(nothing_to_fuzz_line(relay.reasons), file=sys.stderr)
        return 4
    lines, failing = campaign_summary(spec, since)
    print("\n".join(lines), file=out)
    return 1 if failing else 0


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        import hypofuzz  # noqa: F401
    except ImportError:
        print(f"conv_harness.fuzz: HypoFuzz is not installed: {HYPOFUZZ_INSTALL}", file=sys.stderr)
        return 4
    if os.name != "posix" or {"-d", "--dashboard-only"} & set(split_args(argv)[0]):
        # the dashboard alone: nothing to supervise; elsewhere than POSIX, no process groups
        from conv_harness.cli import run_in_place
        return run_in_place(command(argv))
    return supervise(command(argv), database_spec(split_args(argv)[1]))


if __name__ == "__main__":
    sys.exit(main())
