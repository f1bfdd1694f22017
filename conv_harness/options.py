"""The harness's command-line options and their defaults: light, for every pytest run.

Declared by the one ``pytest11`` entry point (conv_harness/pytest_entry.py) in every
pytest run of an environment where conv-harness is installed, so this module imports
nothing but pytest's types and the standard library: an unrelated project's run pays
for no NumPy, torch or Hypothesis import (the modules that act on the options are
loaded only for a run of the suite). The defaults live here, and the modules that
own them import them from here.
"""

from __future__ import annotations

from typing import Any

#: the implementation checked when neither --impl nor $CONV_IMPL names one
DEFAULT_SPEC = "conv_impl.einsum"
#: where case files, scripts and summary.json go
DEFAULT_FAILURES_DIR = ".conv-failures"
#: distinct bugs a test looks for: more than three, as a function with three causes
#: and a fast path's beside them has (the triage zoo draws up to four), one to spare
DEFAULT_MAX_BUGS = 5
DEFAULT_TIMEOUT = 20.0  # seconds per call: generated problems take milliseconds
#: values of --conv-regressions
REGRESSION_MODES = ("own", "all", "none")
#: the shared example database's environment variables
DATABASE_ENV = "CONV_DB"
DATABASE_ENV_READ_ONLY = "CONV_DB_READ_ONLY"
REDIS_INSTALL = "pip install 'conv-harness[redis]'  (or: pip install redis)"
#: the option words (and prefix) that ask for the suite, and the environment variables
ASKING_OPTIONS = ("--impl", "--replay", "--isolate", "--conv-")
ASKING_ENV = ("CONV_IMPL", DATABASE_ENV)


def add_options(parser: Any) -> None:
    """Every option of the harness, in its group of pytest's ``--help``."""
    group = parser.getgroup("conv-harness", "convolution conformance harness")
    for add in (_run_options, _replay_options, _isolate_options, _database_options):
        add(group)


def _run_options(group: Any) -> None:
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
        "--conv-max-bugs", type=int, default=DEFAULT_MAX_BUGS, metavar="N",
        help="distinct bugs to search for per check (implementation x operation x check): "
             "after a failure is shrunk, the check is searched again with that bug's "
             "trigger excluded, until N bugs or nothing more is found "
             f"(default {DEFAULT_MAX_BUGS})")
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


def _replay_options(group: Any) -> None:
    group.addoption(
        "--replay", action="append", default=[], metavar="FILE",
        help="run only the saved failure case FILE (a JSON file from --conv-failures, or a "
             "folder of them) again, against the implementation it names or each --impl; "
             "may be given several times")
    group.addoption(
        "--conv-regressions", choices=REGRESSION_MODES, default="own",
        help="which implementations the committed regression corpus (tests/regressions/) is "
             "replayed against: own (default: each case only against the implementation "
             "that recorded it), all (every case against every implementation under test), "
             "none")


def _isolate_options(group: Any) -> None:
    group.addoption(
        "--isolate", action="store_true", default=False,
        help="run every call of an implementation in a child process, so that a crash "
             "(segfault, os._exit) or a hang inside C code is a failure of that check, "
             "shrunk like any other, instead of a dead or stuck run (slower)")


def _database_options(group: Any) -> None:
    group.addoption(
        "--conv-db", default=None, metavar="PATH|redis://HOST:PORT/N",
        help=f"a Hypothesis example database shared with other runs and machines: a "
             f"directory, or a Redis server (needs redis-py: {REDIS_INSTALL}); failures any "
             f"of them found are replayed first. Default: ${DATABASE_ENV}. Turns "
             f"derandomisation off.")
    group.addoption(
        "--conv-db-read-only", action="store_true", default=False,
        help=f"replay the --conv-db database but write only the local one "
             f"(also ${DATABASE_ENV_READ_ONLY}=1): e.g. CI writes, laptops read")
