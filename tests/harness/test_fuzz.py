"""Fuzz campaigns with HypoFuzz (conv_harness/fuzz.py): a short campaign finds the tutorial's
bug, and the follow-up ``conv-harness --conv-db`` replays it and writes its case file.

Opt-in: it needs a Python with the ``[fuzz]`` extra, which pins Hypothesis below
6.157.1 (HypoFuzz 25.11.1 does not run on later ones), so it lives in a venv
of its own, and ``[redis]`` for the campaign on Redis. Give its interpreter in
$CONV_FUZZ_PYTHON, e.g.

    python -m venv --system-site-packages .venv-fuzz
    .venv-fuzz/bin/pip install -e ".[fuzz,redis]"
    CONV_FUZZ_PYTHON=.venv-fuzz/bin/python python -m pytest tests/harness/test_fuzz.py

(or run the tests with that interpreter). Without one it is skipped, saying so.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.harness.conftest import PROJECT_ROOT
from tests.harness.test_database import redis_server  # noqa: F401  (a fixture)

SELECT = ("--impl", "conv_impl.tutorial", "-k", "test_grad_input and conv2d]")
#: the follow-up's profile: the database's examples, shrunk, and no search of its own
REPLAY_ONLY = """
from hypothesis import Phase, settings
from conv_harness.profiles import register
register()
settings.register_profile("replay-only", settings.get_profile("dev"),
                          phases=[Phase.explicit, Phase.reuse, Phase.shrink])
"""
CAMPAIGN_LIMIT = 150  # seconds: the bug is found within seconds of the worker starting


def _fuzz_python() -> str:
    """The interpreter with HypoFuzz: $CONV_FUZZ_PYTHON, else this one; skipped without
    one. Probed from outside the checkout (the campaigns run in other folders), it
    must import this checkout's harness: a venv installed from another clone, or from
    one since removed, would fuzz other code or fail for a reason that is not the
    test's."""
    given = os.environ.get("CONV_FUZZ_PYTHON", "").strip()
    python = given or sys.executable
    python = str(Path(python).absolute()) if os.sep in python else python
    probe = subprocess.run([python, "-c", "import hypofuzz, conv_harness; print(conv_harness.__file__)"],
                           capture_output=True, text=True, cwd=Path(os.sep))
    if probe.returncode != 0 and "hypofuzz" in probe.stderr:
        pytest.skip("needs HypoFuzz: a Python with conv-harness[fuzz] in $CONV_FUZZ_PYTHON "
                    "(see this module's docstring)")
    found = Path(probe.stdout.strip() or os.devnull).resolve().parent.parent
    if probe.returncode != 0 or found != PROJECT_ROOT.resolve():
        why = (f"imports the harness from {found}, not from this checkout ({PROJECT_ROOT})"
               if probe.returncode == 0 else
               f"cannot import the harness outside this checkout ({PROJECT_ROOT}): "
               + (probe.stderr.strip().splitlines() or ["?"])[-1])
        pytest.fail(f"$CONV_FUZZ_PYTHON ({python}) {why}; install this checkout in it with "
                    "pip install -e \".[fuzz,redis]\" (.ci/run does)", pytrace=False)
    return python


def _key_dir(python: str, cwd: Path) -> str:
    """The example-database folder of the pytest run's key for the selected test, as the
    directory database names it (computed by the fuzz venv's own Hypothesis)."""
    code = """
import hashlib, sys
from pathlib import Path
from hypothesis.internal.reflection import function_digest
from conv_harness.running.loader import load_implementation
from conv_harness.running.target import Target
from conv_harness.searching.search import database_key
import conv_harness.conformance.test_conformance as tests
inner = tests.test_grad_input.hypothesis.inner_test
target = Target(load_implementation("conv_impl.tutorial"), "conv2d", None, Path("."))
inner._hypothesis_internal_add_digest = database_key(target, "grad_input")
print(hashlib.sha384(function_digest(inner)).hexdigest()[:16])
"""
    done = subprocess.run([python, "-c", code], cwd=cwd, capture_output=True, text=True,
                          check=True)
    return done.stdout.strip()


def _free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _dashboard_up(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2) as page:
            return page.status == 200
    except OSError:
        return False


def _stop(process: subprocess.Popen) -> None:
    """Stop the campaign: ^C to its process group, then kill what is left."""
    for sig, wait in ((signal.SIGINT, 10), (signal.SIGKILL, 10)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=wait)
            if sig == signal.SIGKILL:
                return
        except subprocess.TimeoutExpired:
            continue
    try:  # the group may outlive its leader
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def test_the_fuzz_command_runs_the_installed_suite_with_the_harness_keys():
    """What ``python -m conv_harness.fuzz`` runs (no HypoFuzz needed to check that)."""
    from conv_harness import cli, fuzz

    args = fuzz.command(["-n", "4", "--no-dashboard", "--", "--impl", "x.py", "-k", "forward"])
    i = args.index("fuzz")
    assert args[i + 1:i + 4] == ["-n", "4", "--no-dashboard"] and args[i + 4] == "--"
    suite = args[i + 5:]
    assert suite[:2] == ["-c", str(cli.INI)] and suite[-1] == str(cli.SUITE_DIR)
    assert suite[suite.index("--hypothesis-profile") + 1] == "dev"  # not a derandomised one
    assert "--impl=x.py" in suite  # one word: HypoFuzz runs pytest.main in its process
    own = fuzz.command(["--", "--hypothesis-profile=thorough"])
    assert "--hypothesis-profile=thorough" in own and "dev" not in own
    assert fuzz.split_args(["--impl", "x"]) == ([], ["--impl", "x"])


def test_a_short_campaign_finds_the_tutorials_bug_and_the_follow_up_writes_its_case(tmp_path):
    python = _fuzz_python()
    campaign, follow_up = tmp_path / "fuzz-machine", tmp_path / "follow-up"
    campaign.mkdir()
    follow_up.mkdir()
    db = tmp_path / "shared-db"
    key = _key_dir(python, tmp_path)
    port = _free_port()
    env = {k: v for k, v in os.environ.items()
           if k not in ("CONV_IMPL", "CONV_DB", "HYPOTHESIS_PROFILE", "PYTEST_ADDOPTS")}
    log = (tmp_path / "campaign.log").open("w")
    process = subprocess.Popen(
        [python, "-m", "conv_harness.fuzz", "-n", "1", "--dashboard", "--host", "127.0.0.1",
         "--port", str(port), "--", *SELECT, "--conv-db", str(db)],
        cwd=campaign, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    start = time.monotonic()
    found = dashboard = False
    try:
        while time.monotonic() - start < CAMPAIGN_LIMIT and process.poll() is None:
            dashboard = dashboard or _dashboard_up(port)
            found = (db / key).is_dir() and any((db / key).iterdir())
            if found and dashboard:
                break
            time.sleep(1)
    finally:
        _stop(process)
        log.close()
    took = time.monotonic() - start
    output = (tmp_path / "campaign.log").read_text()
    assert found, f"no failure under the harness's key after {took:.0f}s:\n{output[-4000:]}"
    assert dashboard, f"the dashboard did not answer on port {port}:\n{output[-4000:]}"
    assert "AttributeError" not in output, output[-4000:]
    print(f"campaign: found the bug and served the dashboard in {took:.1f}s")

    # The follow-up, on another folder with no local database and no search of its
    # own: it can only fail on what the campaign saved, which it shrinks to the minimum.
    (follow_up / "replay_only.py").write_text(REPLAY_ONLY)
    done = subprocess.run(
        [python, "-m", "conv_harness.cli", "-q", *SELECT, "--conv-db", str(db), "--conv-max-bugs",
         "1", "-p", "replay_only", "--hypothesis-profile", "replay-only"],
        cwd=follow_up, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    cases = sorted((follow_up / ".conv-failures").glob("conv_impl.tutorial-conv2d-grad_input-*.json"))
    assert cases and all(case.with_suffix(".py").is_file() for case in cases)
    record = json.loads(cases[0].read_text())
    # whichever of the tutorial's two bugs the campaign met first, shrunk to its minimum
    # (tests/harness/test_triage.py pins both): padding (input 1x1, padding 1) or
    # stride (input 1x4, stride 3)
    p = record["params"]
    padding_bug = p["input_size"] == [1, 1] and p["kernel_size"] == [1, 1]
    stride_bug = (sorted(p["input_size"]) == [1, 4] and p["kernel_size"] == [1, 1]
                  and p["stride"] == [3, 3] and p["padding"] == [0, 0])
    assert padding_bug or stride_bug, p
    summary = json.loads((follow_up / ".conv-failures" / "summary.json").read_text())
    (impl,) = summary["implementations"]
    assert impl["verdict"] == "failed" and impl["bugs"]


# -- campaigns on a Redis database, ^C, nothing to fuzz (conv_harness/fuzz.py's supervisor) ------

def test_the_supervisor_drops_hypofuzzs_claim_and_notes_when_nothing_was_collected():
    """No HypoFuzz needed: the relay of the campaign's output."""
    import io

    from conv_harness import fuzz

    out = io.StringIO()
    relay = fuzz.Relay(io.StringIO("using 1 process to fuzz 1 test\n"
                                   f"{fuzz.HYPOFUZZ_CLAIM}\n"), out)
    relay.run()
    assert out.getvalue() == "using 1 process to fuzz 1 test\n" and not relay.nothing.is_set()
    out = io.StringIO()
    relay = fuzz.Relay(io.StringIO(
        f"collecting tests... {fuzz.NOTHING_COLLECTED}\n= test session starts =\n"
        "t.py::test_a[x] (because: {'status_reason': 'sets_derandomize'})\n"
        "t.py::test_b[x] (because: {'status_reason': 'sets_derandomize'})\n"
        "Traceback (most recent call last):\nIndexError: list index out of range\n"
        f"{fuzz.HYPOFUZZ_CLAIM}\n"), out)
    relay.run()
    assert relay.nothing.is_set() and out.getvalue() == "collecting tests...\n"
    line = fuzz.nothing_to_fuzz_line(relay.reasons)
    assert "\n" not in line and "sets_derandomize: 2" in line
    assert "--hypothesis-profile dev or thorough" in line


def _campaign(python: str, folder: Path, *suite: str) -> subprocess.Popen:
    folder.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items()
           if k not in ("CONV_IMPL", "CONV_DB", "HYPOTHESIS_PROFILE", "PYTEST_ADDOPTS")}
    return subprocess.Popen([python, "-m", "conv_harness.fuzz", "-n", "1", "--no-dashboard", "--",
                             *SELECT, *suite], cwd=folder, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)


def _output(process: subprocess.Popen, limit: float = 120) -> str:
    try:
        out, _ = process.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        _stop(process)
        out, _ = process.communicate()
        pytest.fail(f"the campaign did not end within {limit:.0f}s:\n{out[-4000:]}")
    return out


def test_a_campaign_on_redis_fuzzes_finds_the_bug_and_ctrl_c_ends_it_with_a_summary(
        tmp_path, redis_server):  # noqa: F811
    import redis

    python = _fuzz_python()
    url = f"{redis_server}/5"
    client = redis.Redis.from_url(url)
    client.flushdb()
    process = _campaign(python, tmp_path / "fuzz-machine", "--conv-db", url)
    start = time.monotonic()
    found = False
    while time.monotonic() - start < CAMPAIGN_LIMIT and process.poll() is None:
        found = any(b"hypofuzz.failures" in key for key in client.keys("hypothesis-example:*"))
        if found:
            break
        time.sleep(1)
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGINT)  # ^C, as a terminal sends it to the group
    output = _output(process)
    assert found, f"no failure in {url} after {time.monotonic() - start:.0f}s:\n{output[-4000:]}"
    assert "differing_database" not in output and "no Hypothesis tests found" not in output
    for noise in ("Traceback", "KeyboardInterrupt", "Aborted!", "Found a failing input"):
        assert noise not in output, output[-4000:]
    assert (f"conv_harness.fuzz: campaign stopped: 1 of 1 fuzzed tests have a failing input, "
            f"saved in {url}") in output, output[-4000:]
    assert "test_grad_input[conv_impl.tutorial-conv2d]: " in output
    assert process.returncode == 1


def test_a_campaign_with_nothing_to_fuzz_says_what_to_use_instead(tmp_path):
    python = _fuzz_python()
    # a derandomised profile: HypoFuzz skips every test
    process = _campaign(python, tmp_path / "fuzz-machine", "--hypothesis-profile", "ci")
    output = _output(process)
    assert process.returncode == 4, output[-4000:]
    lines = [line for line in output.splitlines() if line.startswith("conv_harness.fuzz:")]
    assert len(lines) == 1 and "nothing to fuzz" in lines[0], output[-4000:]
    assert "--hypothesis-profile dev or thorough" in lines[0]
    for noise in ("Traceback", "Found a failing input", "no Hypothesis tests found"):
        assert noise not in output, output[-4000:]
