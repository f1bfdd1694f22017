"""A shared database carries what was learned (conv_harness/triage/stored.py, conv_harness/database.py).

Against a real Redis server (tests/harness/test_database.py's fixture): the
first machine's run explains the tutorial's bug and stores the explanation
beside its examples; a second machine, another folder with no local
database and no search of its own, replays the failure, says so bug by bug,
and rebuilds the entry from what was stored (shown by a marker written into
the stored entry: an explanation made again would not carry it), with its
own case file and script, verified again. An edited implementation is
explained afresh.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.harness.test_database import (REPLAY, REPLAY_ONLY, SEARCH, conv_harness,  # noqa: F401
                                         redis_server)

ONE_BUG = ("-k", "test_grad_input and conv2d]", "--conv-max-bugs", "1", "-p", "no:randomly")
MARKER = "STORED BY THE FIRST RUN"
#: a standalone implementation with one bug (grad_input off where padding > 0)
MINE = """
from conv_impl import einsum

conv2d = einsum.conv2d


def conv2d_backward(grad_output, x, weight, bias, **kwargs):
    gx, gw, gb = einsum.conv2d_backward(grad_output, x, weight, bias, **kwargs)
    if any(p > 0 for p in kwargs["padding"]):
        gx = gx.copy()
        gx.flat[0] += 1
    return gx, gw, gb
"""


def _triage_entries(url: str) -> dict[bytes, list[bytes]]:
    import redis
    client = redis.Redis.from_url(url)
    return {key: list(client.smembers(key)) for key in client.keys("hypothesis-example:*")
            if b":triage:" in key}


def _mark_stored_triggers(url: str) -> None:
    """Rewrite every stored explanation's trigger to `MARKER`."""
    import redis
    client = redis.Redis.from_url(url)
    for key, values in _triage_entries(url).items():
        for value in values:
            raw = json.loads(value)
            raw["trigger"] = MARKER
            client.srem(key, value)
            client.sadd(key, json.dumps(raw, sort_keys=True).encode())


def _summary_bugs(folder: Path) -> list[dict]:
    summary = json.loads((folder / ".conv-failures" / "summary.json").read_text())
    return [bug for impl in summary["implementations"] for bug in impl["bugs"]]


def _first_machine(tmp_path: Path, server: str, n: int, *args: str):
    """(database, the first folder, the second) after a run of `MINE` in the first with
    ``args`` against the server's database ``n``, emptied first."""
    import redis

    db = f"{server}/{n}"
    redis.Redis.from_url(db).flushdb()
    first, second = tmp_path / "ci", tmp_path / "laptop"
    first.mkdir()
    (first / "mine.py").write_text(MINE)
    found = conv_harness(first, "--impl", "mine.py", *args, *SEARCH, "--conv-db", db)
    assert found.returncode == 1, found.stdout[-3000:] + found.stderr[-3000:]
    return db, first, second, found


def _second_machine(folder: Path) -> None:
    folder.mkdir()
    (folder / "replay_only.py").write_text(REPLAY_ONLY)


@pytest.mark.long
def test_a_known_failure_is_replayed_said_so_and_rebuilt_from_the_stored_triage(
        tmp_path, redis_server):  # noqa: F811
    import redis
    db = f"{redis_server}/3"
    redis.Redis.from_url(db).flushdb()
    first, second = tmp_path / "ci", tmp_path / "laptop"
    found = conv_harness(first, "--impl", "conv_impl.tutorial", *ONE_BUG, *SEARCH,
                         "--conv-db", db)
    assert found.returncode == 1, found.stdout[-3000:] + found.stderr[-3000:]
    assert "known failure" not in found.stdout  # nothing was stored before it
    assert _triage_entries(db), "the explained bug was not stored"
    (bug,) = _summary_bugs(first)
    _mark_stored_triggers(db)

    _second_machine(second)
    replayed = conv_harness(second, "--impl", "conv_impl.tutorial", *ONE_BUG, *REPLAY,
                            env={"CONV_DB": db})
    out = replayed.stdout
    assert replayed.returncode == 1, out[-3000:] + replayed.stderr[-3000:]
    assert f"replayed 1 known failure of conv_impl.tutorial from {db}" in out, out[-3000:]
    assert f"known failure, replayed from {db}: explained by an earlier run" in out
    (again,) = _summary_bugs(second)
    assert again["trigger"] == MARKER  # rebuilt from the store, not explained again
    assert again["params"] == bug["params"] and again["conditions"] == bug["conditions"]
    assert again["explanation"]["changes"] == bug["explanation"]["changes"]
    case = second / ".conv-failures" / again["case_file"]
    assert case.is_file() and case.with_suffix(".py").is_file()  # its own files
    assert again["reproduces_alone"] is True  # its script was verified again
    assert "verified: its script, run alone in a fresh process, fails" in out


@pytest.mark.long
def test_an_edited_implementation_is_explained_afresh(tmp_path, redis_server):  # noqa: F811
    db, first, second, _ = _first_machine(tmp_path, redis_server, 4, *ONE_BUG)
    _mark_stored_triggers(db)

    _second_machine(second)
    (second / "mine.py").write_text((first / "mine.py").read_text() + "\n# edited\n")
    again = conv_harness(second, "--impl", "mine.py", *ONE_BUG, *REPLAY, env={"CONV_DB": db})
    assert again.returncode == 1, again.stdout[-3000:] + again.stderr[-3000:]
    assert "known failure" not in again.stdout
    (bug,) = _summary_bugs(second)
    assert bug["trigger"] != MARKER and bug["trigger"].startswith("fails when")


@pytest.mark.long
def test_a_follow_up_search_that_found_nothing_is_not_made_again(tmp_path, redis_server):  # noqa: F811
    two = ("-k", "test_grad_input and conv2d]", "--conv-max-bugs", "2", "-p", "no:randomly")
    db, first, second, found = _first_machine(tmp_path, redis_server, 6, *two)
    assert "found nothing else" in found.stdout and "not made again" not in found.stdout

    _second_machine(second)
    (second / "mine.py").write_text(MINE)
    again = conv_harness(second, "--impl", "mine.py", *two, *REPLAY, env={"CONV_DB": db})
    assert again.returncode == 1, again.stdout[-3000:] + again.stderr[-3000:]
    assert ("found nothing else (that search was made by an earlier run of this "
            f"implementation, recorded in {db}: not made again)") in again.stdout
    assert f"replayed 1 known failure of mine.py from {db}" in again.stdout


def test_the_triage_key_covers_all_the_code_that_shapes_a_trigger(tmp_path):
    """Stored explanations are keyed by the harness's version and all of its code and
    the strategies' (not five triage modules: ties.py, boundary.py, the tolerances and
    the strategies shape triggers too), so an older harness's trigger is never recalled."""
    import shutil

    from conv_harness.triage import stored
    assert set(stored._TRIAGE_PACKAGES) == {"conv_harness", "strategies"}
    tree = tmp_path / "conv_harness"
    shutil.copytree(Path(stored.__file__).parents[1], tree,
                    ignore=shutil.ignore_patterns("__pycache__"))
    before = stored.code_digest([tree], "1.0")
    assert stored.code_digest([tree], "1.1") != before
    for module in ("ties.py", "triage/boundary.py", "checks/tolerance.py"):
        path = tree / module
        text = path.read_text()
        path.write_text(text + "\n# changed\n")
        assert stored.code_digest([tree], "1.0") != before, module
        path.write_text(text)
    assert stored.code_digest([tree], "1.0") == before
    assert len(stored.triage_code()) == 8
