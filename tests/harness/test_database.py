"""Contract section 6: a shared example database, ``--conv-db PATH | redis://HOST:PORT/N``.

Against a real Redis server (Debian's ``redis-server``, which .ci/run
installs), started on a free loopback port for this module and stopped
after. Each run is ``conv-harness`` (``python -m conv_harness.cli``) in a folder
of its own, with a local example database of its own (``.hypothesis/`` of
that folder), as two machines would be.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

from conv_harness.cli import pytest_args
from tests.harness.pytest_server import SERVER

BUG = ("--impl", "conv_impl.tutorial", "-k", "test_grad_input and conv2d]",
       "--conv-max-bugs", "1", "-p", "no:randomly")
#: a random search (Hypothesis uses no database when derandomised or seeded)
SEARCH = ("--hypothesis-profile", "dev")
#: a profile of the second machine's own (``-p replay_only``): no search, only the
#: database's examples, so that what it finds can only have come from there
REPLAY_ONLY = """
from hypothesis import Phase, settings
from conv_harness.profiles import register
register()
settings.register_profile("replay-only", settings.get_profile("dev"),
                          phases=[Phase.explicit, Phase.reuse])
"""
REPLAY = ("-p", "replay_only", "--hypothesis-profile", "replay-only")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory):
    """A real redis-server on a free loopback port; yields its ``redis://`` URL."""
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip("redis-server is not installed (apt-get install redis-server; .ci/run "
                    "installs it)")
    pytest.importorskip("redis", reason="redis-py is not installed (pip install redis)")
    import redis

    folder = tmp_path_factory.mktemp("redis")
    for _ in range(5):  # a port found free can be taken before the server binds it
        port = _free_port()
        server = subprocess.Popen(
            [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", str(folder), "--protected-mode", "yes"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        client = redis.Redis(host="127.0.0.1", port=port, socket_connect_timeout=1)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and server.poll() is None:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                time.sleep(0.05)
        if server.poll() is None:
            break
    else:
        pytest.fail("redis-server did not start: " + server.stdout.read().decode()[-2000:])
    try:
        yield f"redis://127.0.0.1:{port}"
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def _redis_keys(url: str) -> list[bytes]:
    import redis
    return redis.Redis.from_url(url).keys("hypothesis-example:*")


def conv_harness(folder: Path, *args: str, env: dict | None = None,
                 timeout: float = 300) -> subprocess.CompletedProcess:
    """``conv-harness ARGS`` run in ``folder``, as on a machine of its own: the pytest
    command the console script runs (`conv_harness.cli.pytest_args`), forked from the
    server. The script itself replaces its process by that command (`run_in_place`),
    a fresh interpreter and torch import for each run; tests/harness/test_installed.py
    runs the installed script."""
    folder.mkdir(parents=True, exist_ok=True)
    full_env = {k: v for k, v in os.environ.items()
                if k not in ("CONV_IMPL", "CONV_DB", "CONV_DB_READ_ONLY", "HYPOTHESIS_PROFILE",
                             "HYPOTHESIS_STORAGE_DIRECTORY", "PYTEST_ADDOPTS")}
    full_env.update(env or {})
    return SERVER.run(pytest_args(["-q", *map(str, args)], folder), folder, full_env, timeout)


def _case_params(folder: Path) -> list[dict]:
    return [json.loads(p.read_text())["params"]
            for p in sorted((folder / ".conv-failures").glob("conv_impl.tutorial-*.json"))]


@pytest.fixture(params=["redis", "directory"])
def shared_db(request, tmp_path) -> str:
    """A fresh shared database: the server's database 1 emptied (the module's tests run one
    at a time on each server: each xdist worker starts its own), or a new folder."""
    if request.param == "directory":
        return str(tmp_path / "shared-db")
    url = request.getfixturevalue("redis_server") + "/1"
    import redis
    redis.Redis.from_url(url).flushdb()
    return url


def test_a_failure_found_by_one_run_is_replayed_first_by_another_machine(tmp_path, shared_db):
    first, second, alone = tmp_path / "ci", tmp_path / "laptop", tmp_path / "laptop-no-db"
    found = conv_harness(first, *BUG, *SEARCH, "--conv-db", shared_db)
    assert found.returncode == 1, found.stdout[-3000:] + found.stderr[-3000:]
    assert (first / ".hypothesis" / "examples").is_dir()  # the local one too
    shared = _redis_keys(shared_db) if shared_db.startswith("redis") else \
        list(Path(shared_db).iterdir())
    assert shared, "nothing was saved to the shared database"

    # Another machine: another folder, no local database, the shared one from
    # $CONV_DB, and no search at all: only the database's examples are run.
    for folder in (second, alone):
        folder.mkdir()
        (folder / "replay_only.py").write_text(REPLAY_ONLY)
    replayed = conv_harness(second, *BUG, *REPLAY, env={"CONV_DB": shared_db})
    assert replayed.returncode == 1, replayed.stdout[-3000:] + replayed.stderr[-3000:]
    assert _case_params(second) and _case_params(second)[0] == _case_params(first)[0]
    # ... which without the shared database finds nothing.
    nothing = conv_harness(alone, *BUG, *REPLAY)
    assert nothing.returncode == 0, nothing.stdout[-3000:] + nothing.stderr[-3000:]


def test_read_only_replays_the_shared_database_and_writes_only_the_local_one(
        tmp_path, redis_server):
    import redis
    shared_db = f"{redis_server}/2"
    redis.Redis.from_url(shared_db).flushdb()
    laptop = tmp_path / "laptop"
    found = conv_harness(laptop, *BUG, *SEARCH, "--conv-db", shared_db, "--conv-db-read-only")
    assert found.returncode == 1, found.stdout[-3000:] + found.stderr[-3000:]
    assert _redis_keys(shared_db) == []
    assert any((laptop / ".hypothesis" / "examples").rglob("*"))


def test_usage_errors(tmp_path, redis_server):
    folder = tmp_path / "run"
    closed = f"redis://127.0.0.1:{_free_port()}/0"
    done = conv_harness(folder, "--conv-db", closed)
    assert done.returncode == 4 and f"--conv-db {closed}: cannot use the Redis server" \
        in done.stderr, done.stderr
    (folder / "a-file").write_text("")
    done = conv_harness(folder, "--conv-db", "a-file")
    assert done.returncode == 4 and "not a directory" in done.stderr, done.stderr
    done = conv_harness(folder, "--conv-db-read-only")
    assert done.returncode == 4 and "needs a database" in done.stderr, done.stderr
    done = conv_harness(folder, "--conv-db", "db", "--hypothesis-seed", "1")
    assert done.returncode == 4 and "seeded run" in done.stderr, done.stderr
    # Without redis-py: a `redis` that cannot be imported, first on the path.
    fake = tmp_path / "no-redis"
    (fake / "redis").mkdir(parents=True)
    (fake / "redis" / "__init__.py").write_text("raise ImportError('no redis-py here')\n")
    done = conv_harness(folder, "--conv-db", f"{redis_server}/0",
                        env={"PYTHONPATH": str(fake)})
    assert done.returncode == 4, done.stdout[-2000:] + done.stderr[-2000:]
    assert "needs redis-py" in done.stderr and "pip install 'conv-harness[redis]'" in done.stderr
    assert "Traceback" not in done.stdout + done.stderr
