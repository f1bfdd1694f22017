"""What an earlier run learned about a bug, kept in the example database beside its examples.

A run that finds a bug explains it (conv_harness/triage/explain.py: up to 240
calls of the implementation). Another run, in another folder or on another
machine sharing the database (``--conv-db``, conv_harness/database.py), replays
the same failure first and shrinks it to the same minimal case: explaining
it again would only repeat the first run's calls. So each explained bug is
stored in the run's Hypothesis example database, under a key of its own
derived from the test's key (`triage_key`), and a later run that meets the
same failure (same kind, same function, same minimal problem and layouts)
rebuilds its entry from what was stored (`recall`) instead of explaining it.
Its case file and script are this run's own, and its script is verified
again in a fresh process (conv_harness/triage/history.py), as for any bug.

The key also holds a digest of the implementation's source file, so an
edited implementation is explained afresh; an implementation whose code is
spread over several files is only keyed by the file that defines it. It
holds a digest of the harness's version and of all its code and the
strategies' (`triage_code`): a harness that derives triggers differently (a
new derived feature, a tie, a boundary, a tolerance) explains again rather
than show an older version's trigger.

The same holds for a follow-up search (conv_harness/searching/search.py) that found
nothing more: it is recorded under its own key (`remember_searched`, with the
examples it could spend), and a later run of the same implementation that
would spend no more examples on it does not search again
(`searched_before`); its report says so. A run with more examples to
spend (``thorough`` after ``dev``) searches again.

Each bug rebuilt this way is a known failure that came from the database:
the test's state (conv_harness/searching/state.py) keeps what `recall` rebuilt, and
conv_harness/database.py says so at the end of the run, bug by bug ("replayed 3
known failures of mine.py from redis://...").

With no example database (the ``ci`` and ``harness-test`` profiles) nothing
is stored nor recalled.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
from pathlib import Path
from typing import Any, Iterator

from hypothesis import settings
from hypothesis.database import (DirectoryBasedExampleDatabase, ExampleDatabase,
                                 MultiplexedDatabase, ReadOnlyDatabase)

from conv_harness.triage.catalog import Bug
from conv_harness.triage.explain import Explanation

#: how a database is named in messages (conv_harness/database.py names the shared one)
_NAMES: dict[int, str] = {}
#: what a stored entry holds besides the Bug's JSON
_CALLS = "explanation_calls"


def name_database(database: ExampleDatabase, name: str) -> None:
    """Call ``database`` ``name`` in messages (its spec, e.g. ``redis://host:6379/0``)."""
    _NAMES[id(database)] = name


def _leaves(database: ExampleDatabase | None) -> Iterator[tuple[ExampleDatabase, str]]:
    """The databases a run's database reads from, each with its name, shared ones first."""
    if database is None:
        return
    if id(database) in _NAMES:
        yield database, _NAMES[id(database)]
        return
    # Hypothesis's wrappers keep what they wrap in ``_wrapped`` (no public accessor)
    if isinstance(database, MultiplexedDatabase):
        for inner in reversed(database._wrapped):  # (local, shared): the shared one first
            yield from _leaves(inner)
    elif isinstance(database, ReadOnlyDatabase):
        yield from _leaves(database._wrapped)
    elif isinstance(database, DirectoryBasedExampleDatabase):
        yield database, str(database.path)
    else:
        yield database, type(database).__name__


def _save(key: bytes, entry: dict[str, Any]) -> None:
    """Save ``entry`` (JSON) under ``key`` in the run's example database, if it has one."""
    database = settings.default.database
    if database is None:
        return
    try:
        database.save(key, json.dumps(entry, sort_keys=True).encode())
    except Exception:  # noqa: BLE001 - a database that cannot be written only costs time
        pass


def _entries(key: bytes) -> Iterator[tuple[dict[str, Any], str]]:
    """Each JSON entry under ``key``, with the name of the database that holds it (the
    shared one first); unreadable databases and entries are passed over."""
    for database, name in _leaves(settings.default.database):
        try:
            values = list(database.fetch(key))
        except Exception:  # noqa: BLE001 - an unreadable database: work as without it
            continue
        for value in values:
            try:
                entry = json.loads(value)
            except ValueError:
                continue
            if isinstance(entry, dict):
                yield entry, name


def source_digest(target_object: Any) -> str:
    """A digest of the source file that defines an implementation ('' if none is found)."""
    try:
        module = inspect.getmodule(target_object) or inspect.getmodule(type(target_object))
        path = inspect.getsourcefile(module) if module is not None else None
    except TypeError:
        path = None
    if not path:
        return ""
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]
    except OSError:
        return ""


#: the packages whose code shapes a stored entry's trigger and explanation: all of the
#: harness's (its triage, ties, boundaries, checks and tolerances) and the strategies'
#: (the problems, neighbours and values an explanation draws)
_TRIAGE_PACKAGES = ("conv_harness", "strategies")


def code_digest(folders: list[Path], version: str) -> str:
    """A digest of ``version`` and the path and source of every Python module under
    ``folders`` (package folders; paths relative to their parent)."""
    digest = hashlib.sha256(version.encode())
    for root in folders:
        for path in sorted(root.rglob("*.py")):
            digest.update(b"\0" + path.relative_to(root.parent).as_posix().encode() + b"\0")
            digest.update(path.read_bytes())
    return digest.hexdigest()[:8]


@functools.cache
def triage_code() -> str:
    """`code_digest` of the package's version and `_TRIAGE_PACKAGES` (made once, when a
    bug is first stored or recalled, not at every worker's start: about 150 files, a
    few milliseconds)."""
    import importlib.metadata
    import importlib.util

    try:
        version = importlib.metadata.version("conv-harness")
    except importlib.metadata.PackageNotFoundError:
        version = ""
    return code_digest([Path(next(iter(importlib.util.find_spec(p).submodule_search_locations)))
                        for p in _TRIAGE_PACKAGES], version)


def triage_key(test_key: bytes, target_object: Any) -> bytes:
    """Where a test's explained bugs are stored: its database key, ``:triage:``, the
    implementation's source digest and the harness's triage code's."""
    return (test_key + b":triage:" + source_digest(target_object).encode() + b":"
            + triage_code().encode())


def _minimal(failure: str, function: str | None, op: str, params: dict[str, Any],
             layouts: dict[str, str]) -> str:
    """A bug's identity for recall: the kind of failure, where, and its minimal case."""
    return json.dumps([failure, function, op, params, layouts], sort_keys=True, default=list)


def remember(test_key: bytes, target_object: Any, bug: Bug, explanation: Explanation) -> None:
    """Store a freshly explained bug (before its script is verified: a recalled bug is
    verified again) in the run's example database."""
    raw = bug.to_json()
    raw.pop("report", None)
    raw[_CALLS] = explanation.calls
    _save(triage_key(test_key, target_object), raw)


def recall(test_key: bytes, target_object: Any, failure: str, function: str | None, op: str,
           params: dict[str, Any], layouts: dict[str, str],
           check: str) -> tuple[Bug, Explanation, dict[str, Any], str] | None:
    """The stored entry of the bug with this minimal case, rebuilt, or None.

    The rebuilt bug is this run's finding (``check``), with the stored
    trigger, conditions and explanation; its case file is left to the caller.
    Returned with the stored JSON and the name of the database it came from.
    """
    wanted = _minimal(failure, function, op, json.loads(json.dumps(params, default=list)),
                      layouts)
    for raw, name in _entries(triage_key(test_key, target_object)):
        try:
            if _minimal(raw["failure"], raw.get("function"), raw["op"], raw["params"],
                        raw.get("layouts", {})) != wanted:
                continue
            bug = Bug.from_json({**raw, "check": check, "checks": [check], "also": [],
                                 "reproduces_alone": None})
        except (ValueError, KeyError, TypeError):
            continue  # another version's entry: not ours to read
        return bug, Explanation(rows=tuple(bug.explanation), trigger=tuple(bug.conditions),
                                calls=int(raw.get(_CALLS, 0))), raw, name
    return None


def _searched_key(search_key: bytes, target_object: Any) -> bytes:
    return search_key + b":searched:" + source_digest(target_object).encode()


def remember_searched(search_key: bytes, target_object: Any) -> None:
    """Record that the search ``search_key`` (a follow-up's) found nothing in its examples."""
    _save(_searched_key(search_key, target_object),
          {"max_examples": settings.default.max_examples})


def searched_before(search_key: bytes, target_object: Any) -> str | None:
    """Where an earlier run recorded that this search found nothing, spending at least
    as many examples as this run would (the report's `skipped_note`); None: nowhere."""
    for entry, name in _entries(_searched_key(search_key, target_object)):
        spent = entry.get("max_examples")
        if isinstance(spent, int) and spent >= settings.default.max_examples:
            return name
    return None


def skipped_note(source: str | None) -> str:
    """`` (...)`` for a triage whose last follow-up search was skipped (recorded in
    ``source``), else ''."""
    if not source:
        return ""
    return (f" (that search was made by an earlier run of this implementation, recorded in "
            f"{source}: not made again)")


def note(source: str) -> str:
    """The report's line for a recalled bug."""
    return (f"known failure, replayed from {source}: explained by an earlier run (its "
            "trigger and explanation as stored there), not explained again")

