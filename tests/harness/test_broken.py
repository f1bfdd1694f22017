"""Broken implementations: each reported as what it is, in one line, and the run goes on.

The suite runs, as a user would run it, on the known-broken modules in
tests/harness/broken/ (each breaks one thing, conv2d only) together with
conv_impl.einsum in the same run, whose tests must still pass. Three runs,
started at once (most of their time is start-up, waiting and shrinking):

* in-process: raises, wrong results of every kind, changed inputs, not
  repeatable, a Python hang, noise;
* pytest-xdist without --isolate: a segfault and os._exit kill the worker;
* --isolate: a hang in C, a segfault, os._exit, changed inputs and a list
  result across the process boundary, a slow noisy import;
* --isolate under pytest-xdist: a hang in C and a segfault, each worker with
  its own child process;
* neither: a segfault ends the run, and the next run saves its case.
"""

from __future__ import annotations

import json
import os
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from conv_harness.path_options import joined_path_options
from conv_harness.running.isolate import read_record

BROKEN = Path(__file__).resolve().parent / "broken"
FORWARD = "conv2d and test_forward"


def _impls(*names: str) -> list[str]:
    return [arg for name in names for arg in ("--impl", str(BROKEN / f"{name}.py"))]


RUNS = {
    "inprocess": (["-k", f"{FORWARD} or (conv2d and test_repeatable and unrepeatable) "
                         "or (conv2d and test_grad_input and short_tuple)",
                   "--conv-timeout", "1"],
                  ["raises", "returns_list", "returns_none", "wrong_shape", "wrong_dtype",
                   "short_tuple", "nonfinite", "in_place", "unrepeatable", "hangs", "noisy"]),
    "xdist": (["-n", "2", "-k", FORWARD], ["segfault", "exits"]),
    "isolate": (["--isolate", "-k", FORWARD, "--conv-timeout", "1"],
                ["hangs_in_c", "segfault", "exits", "in_place", "returns_list", "noisy"]),
    "isolate_xdist": (["--isolate", "-n", "2", "-k", FORWARD, "--conv-timeout", "1"],
                      ["hangs_in_c", "segfault"]),
    "plain": (["-k", FORWARD], ["segfault"]),
}
ROOT = Path(__file__).resolve().parents[2]


def _pytest(*args: str, timeout: float = 400):
    """pytest as a user runs it from the repository, with the broken modules importable."""
    import subprocess
    import sys

    # path options as one word: two, with a path outside this folder, can make the
    # plugin rerun pytest in a fresh process (tests/harness/conftest.py's `suite_run`)
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "_profile",
               "-q", "-rA", *joined_path_options(list(args))]
    env = {**os.environ, "HYPOTHESIS_PROFILE": "broken-quick",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(BROKEN),
                                                      os.environ.get("PYTHONPATH")]))}
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    # Made here, not in the threads: tmp_path_factory is not thread-safe.
    folders = {name: tmp_path_factory.mktemp(name) for name in RUNS}

    def run(name: str):
        options, broken = RUNS[name]
        failures = folders[name]
        done = _pytest("--conv-failures", str(failures), *options, *_impls(*broken),
                       "--impl", "conv_impl.einsum")
        return done, failures

    with ThreadPoolExecutor(len(RUNS)) as pool:
        futures = {name: pool.submit(run, name) for name in RUNS}
        return {name: future.result() for name, future in futures.items()}


def _outcome(output: str, test: str) -> str:
    """PASSED or FAILED, from the -rA summary, for e.g. ``test_forward[raises-conv2d]``."""
    found = re.findall(rf"^(PASSED|FAILED) \S+::{re.escape(test)}", output, re.M)
    assert len(found) == 1, f"{test}: {found}\n{output[-3000:]}"
    return found[0]


def _case_files(failures: Path, impl: str, check: str) -> list[dict]:
    return [json.loads(p.read_text()) for p in failures.glob(f"{impl}-conv2d-{check}-*.json")]


def _assert_reported(output: str, failures: Path, impl: str, check: str, line: str,
                     test: str = "test_forward") -> None:
    """``impl``'s test failed with ``check``, the one-line message matching ``line``
    (a regex) in the report and in its case file."""
    assert _outcome(output, f"{test}[{impl}-conv2d]") == "FAILED"
    # A test's report is the harness's own text (conv_harness/searching/search.py), whose
    # lines pytest prints as they are; a crash report of xdist's starts them "E   ".
    shown = line.replace(r"^E\s+", r"^(E\s+)?")
    assert re.search(shown, output, re.M), f"{impl}: no line matching {line!r}\n{output[-4000:]}"
    records = _case_files(failures, impl, check)
    assert records, f"{impl}: no case file for check {check!r} in {sorted(failures.iterdir())}"
    in_file = line.replace(r"^E\s+", "^")  # the report's lines start with "E   "
    assert any(re.search(in_file, r["message"], re.M) for r in records), records[0]["message"]


IN_PROCESS = [
    ("raises", "raised", "test_forward",
     r"^E\s+conv2d raised NotImplementedError: stride \(1, 2\) is not supported yet \.\.\. "
     r"\(at .*broken/raises\.py:7\)$"),
    ("returns_list", "dtype", "test_forward",
     r"^E\s+conv2d's result \(a list\) has dtype float64 \(what np\.asarray makes of a list of "
     r"Python floats\); inputs are float32, so the result must be float32$"),
    ("returns_none", "result_type", "test_forward",
     r"^E\s+conv2d's result is None; expected a float64 array of shape \(1, 1, 1, 1\)$"),
    ("wrong_shape", "shape", "test_forward",
     r"^E\s+conv2d's result has shape \(\); torch gives \(1, 1, 1, 1\)$"),
    ("wrong_dtype", "dtype", "test_forward",
     r"^E\s+conv2d's result has dtype float64; inputs are float32, so the result must be float32$"),
    ("short_tuple", "result_type", "test_grad_input",
     r"^E\s+conv2d_backward returned a tuple of length 2; expected a tuple "
     r"\(grad_input, grad_weight, grad_bias\)$"),
    ("nonfinite", "nonfinite", "test_forward",
     r"^E\s+conv2d's result holds 1 NaN or inf value\(s\) for finite inputs "
     r"\(the first is nan at index \(0, 0, 0, 0\)\)$"),
    ("in_place", "input_changed", "test_forward",
     r"^E\s+conv2d changed its input 'x' in place \(1 of 1 elements\); the harness treats "
     r"inputs as read-only$"),
    ("unrepeatable", "repeatable", "test_repeatable",
     r"^E\s+conv2d gave a different y for the same inputs on a second call \(1 of 1 elements "
     r"differ, largest difference 4\.94e-324\)$"),
    ("hangs", "timeout", "test_forward",
     r"^E\s+conv2d did not return within [\d.]+ s \(the shorter limit once a call of it has "
     r"exceeded --conv-timeout 1 s: 10 times its slowest call that returned\)$"),
]


@pytest.mark.parametrize("impl, check, test, line", IN_PROCESS, ids=[c[0] for c in IN_PROCESS])
def test_reported_in_process(results, impl, check, test, line):
    done, failures = results["inprocess"]
    _assert_reported(done.stdout, failures, impl, check, line, test)


def test_raise_is_shrunk(results):
    """The smallest problem that raises: stride 1x2 and nothing else."""
    done, failures = results["inprocess"]
    (record,) = _case_files(failures, "raises", "raised")
    params = record["params"]
    assert params["stride"] in ([1, 2], [2, 1])
    assert (params["batch"], params["in_channels"], params["out_channels"]) == (1, 1, 1)
    assert params["input_size"] == [1, 1] and params["kernel_size"] == [1, 1]


def test_hang_is_shrunk(results):
    done, failures = results["inprocess"]
    (record,) = _case_files(failures, "hangs", "timeout")
    assert record["params"]["stride"] in ([1, 2], [2, 1])
    assert record["params"]["input_size"] == [1, 1]
    # its script stops itself at the recorded limit (exit 1): verified as any other
    summary = json.loads((failures / "summary.json").read_text())
    (hangs,) = [bug for entry in summary["implementations"] for bug in entry["bugs"]
                if bug["failure"] == "timeout"]
    assert hangs["reproduces_alone"] is True, hangs


def test_others_in_process_run_passed_and_quietly(results):
    done, _ = results["inprocess"]
    assert _outcome(done.stdout, "test_forward[conv_impl.einsum-conv2d]") == "PASSED"
    assert _outcome(done.stdout, "test_forward[noisy-conv2d]") == "PASSED"
    assert re.search(r"^10 failed, 3 passed", done.stdout.splitlines()[-1])
    everything = done.stdout + done.stderr
    for noise in ("NOISY-CALL-STDOUT", "NOISY-CALL-STDERR", "NOISY-CALL-WARNING",
                  "NOISY-IMPORT-STDOUT"):
        assert noise not in everything
    # its warnings are counted, and the first shown once, in the summary (issue 20)
    assert everything.count("NOISY-IMPORT-WARNING") == 1
    assert re.search(r"warnings it raised \(on import and in its calls\): \d+; the first: "
                     r"UserWarning: NOISY-IMPORT-WARNING", done.stdout)
    # NOISY-IMPORT-STDERR still shows: conv_harness/running/loader.py's _quiet() redirects
    # stdout only at import (its owner is asked to redirect stderr too).


def test_crash_kills_xdist_worker_and_is_reported(results):
    done, failures = results["xdist"]
    out = done.stdout
    _assert_reported(out, failures, "segfault", "crashed",
                     r"^conv2d crashed the test process \(pytest-xdist worker 'gw\d+'\): it died "
                     r"during the call \(Fatal Python error: Segmentation fault, File \".*broken/"
                     r"segfault\.py\", line 9 in conv2d\); not shrunk \(--isolate contains "
                     r"crashes and shrinks them\)$")
    _assert_reported(out, failures, "exits", "crashed",
                     r"^conv2d crashed the test process \(pytest-xdist worker 'gw\d+'\): it died "
                     r"during the call \(a segfault, os\._exit or another fatal error\); not "
                     r"shrunk")
    for impl in ("segfault", "exits"):  # the last problem it was given, with a bias of None
        (record,) = _case_files(failures, impl, "crashed")
        assert record["impl"].endswith(f"{impl}.py") and record["function"] == "conv2d"
        assert re.search(r"^problem: conv2d batch=", record["message"], re.M)
    (exits,) = _case_files(failures, "exits", "crashed")
    assert exits["params"]["bias"] is False
    (segfault,) = _case_files(failures, "segfault", "crashed")
    assert any(segfault["params"]["padding"])
    assert not list(failures.glob("*-crashed-in-*.record"))  # in-flight records consumed
    assert _outcome(out, "test_forward[conv_impl.einsum-conv2d]") == "PASSED"
    assert done.returncode == 1
    # the run summary's verdict counts the dead workers' tests, and its bug list has each
    # crash as an entry: the case the controller saved, not shrunk, its script (the call
    # in a child process) verified alone
    for impl in ("segfault", "exits"):
        assert re.search(rf"^{impl} \[.*\]: FAILED: forward \(conv2d\)$", out, re.M), out[-3000:]
        assert re.search(r"crashed its process .*: forward \(conv2d\)", out), out[-3000:]
    summary = json.loads((failures / "summary.json").read_text())
    entries = {Path(entry["impl"]).stem: entry["bugs"] for entry in summary["implementations"]}
    for impl in ("segfault", "exits"):
        (bug,) = entries[impl]
        (record,) = _case_files(failures, impl, "crashed")
        assert (bug["failure"], bug["function"], bug["checks"]) == ("crashed", "conv2d",
                                                                    ["forward"]), bug
        assert bug["params"] == record["params"] and bug["minimal"] is False, bug
        assert bug["not_minimal_because"].startswith("the crash took its pytest-xdist worker "
                                                     "down before the search could shrink it")
        assert bug["reproduces_alone"] is True, bug
        assert (failures / bug["case_file"]).with_suffix(".py").is_file()
        assert re.search(rf"^script: +python .*{impl}-conv2d-crashed-\w+\.py +\(standalone",
                         out, re.M), out[-3000:]
    assert [e["bugs"] for e in summary["implementations"] if e["impl"] == "conv_impl.einsum"] \
        == [[]]
    assert re.search(r"^  1\. crashed in conv2d; seen by forward\n     minimal: .* NOT MINIMAL$",
                     out, re.M), out[-3000:]


ISOLATED = [
    ("hangs_in_c", "timeout",
     r"^E\s+conv2d did not return within [\d.]+ s \(the shorter limit once a call of it has "
     r"exceeded --conv-timeout 1 s: 10 times its slowest call that returned\)$"),
    ("segfault", "crashed",
     r"^E\s+conv2d crashed the isolated process: killed by signal 11 \(SIGSEGV\) \(Fatal Python "
     r"error: Segmentation fault, File \".*broken/segfault\.py\", line 9 in conv2d\)$"),
    ("exits", "crashed",
     r"^E\s+conv2d crashed the isolated process: exited with status 3 without returning$"),
    ("in_place", "input_changed",
     r"^E\s+conv2d changed its input 'x' in place \(1 of 1 elements\); the harness treats "
     r"inputs as read-only$"),
    ("returns_list", "dtype",
     r"^E\s+conv2d's result \(a list\) has dtype float64 \(what np\.asarray makes of a list of "
     r"Python floats\); inputs are float32, so the result must be float32$"),
]


@pytest.mark.parametrize("impl, check, line", ISOLATED, ids=[c[0] for c in ISOLATED])
def test_reported_isolated(results, impl, check, line):
    done, failures = results["isolate"]
    _assert_reported(done.stdout, failures, impl, check, line)


@pytest.mark.parametrize("impl, check, line", [c for c in ISOLATED if c[0] in
                                               ("hangs_in_c", "segfault")],
                         ids=["hangs_in_c", "segfault"])
def test_reported_isolated_under_xdist(results, impl, check, line):
    done, failures = results["isolate_xdist"]
    _assert_reported(done.stdout, failures, impl, check, line)
    assert "node down" not in done.stdout and "crashed while running" not in done.stdout
    assert _outcome(done.stdout, "test_forward[conv_impl.einsum-conv2d]") == "PASSED"


def test_isolated_crash_is_shrunk_and_others_pass(results):
    done, failures = results["isolate"]
    (record,) = _case_files(failures, "segfault", "crashed")
    params = record["params"]
    assert params["input_size"] == [1, 1] and sorted(params["padding"]) == [0, 1]
    (record,) = _case_files(failures, "exits", "crashed")
    assert record["params"]["bias"] is False and record["params"]["input_size"] == [1, 1]
    assert _outcome(done.stdout, "test_forward[conv_impl.einsum-conv2d]") == "PASSED"
    assert _outcome(done.stdout, "test_forward[noisy-conv2d]") == "PASSED"  # 2 s import: no time-out
    assert "NOISY-CALL" not in done.stdout + done.stderr
    # a crash's script makes the call in a child process, whose death is its failure
    # (exit 1), and a hang's stops itself at the recorded limit: verified alone
    summary = json.loads((failures / "summary.json").read_text())
    alone = {bug["failure"] + " " + Path(entry["impl"]).stem: bug["reproduces_alone"]
             for entry in summary["implementations"] for bug in entry["bugs"]}
    assert {k: v for k, v in alone.items() if k.startswith(("crashed", "timeout"))} == {
        "crashed segfault": True, "crashed exits": True, "timeout hangs_in_c": True}, alone


def test_crash_without_xdist_ends_the_run_and_the_next_run_saves_its_case(results):
    done, failures = results["plain"]
    assert done.returncode < 0 and "Segmentation fault" in done.stderr, done.stderr[-2000:]
    (inflight,) = failures.glob("segfault-conv2d-crashed-in-pid*.record")
    record = read_record(inflight)
    assert record["check"] == "crashed" and record["run_check"] == "forward"
    assert len(record["inputs"]["x"][0]) == json.loads(  # its arrays, after its JSON line
        inflight.read_bytes().split(b"\n", 1)[0])["params"]["in_channels"]

    later = _pytest("--conv-failures", str(failures), "-k", FORWARD, "--impl", "conv_impl.einsum")
    assert later.returncode == 0, later.stdout[-3000:]
    (saved,) = failures.glob("segfault-conv2d-crashed-*.json")
    assert saved != inflight and not inflight.exists()
    assert re.search(r"^=+ conv-harness: crashes of earlier runs =+\n"
                     r"conv2d of .*broken/segfault\.py crashed an earlier run \(process \d+\); "
                     rf"its case is saved to {re.escape(str(saved))}\n"
                     rf"  replay: +pytest --replay {re.escape(str(saved))} --isolate\n"
                     rf"  script: +python {re.escape(str(saved.with_suffix('.py')))} +\("
                     r"standalone: NumPy and torch only; the call runs in a child process\)$",
                     later.stdout, re.M), later.stdout[-3000:]
    assert "without pytest-xdist or --isolate" in json.loads(saved.read_text())["message"]
    _replays_as_an_isolated_crash(saved)


def test_a_crash_case_saved_under_xdist_replays_with_isolate(results):
    _, failures = results["xdist"]
    (saved,) = failures.glob("segfault-conv2d-crashed-*.json")
    _replays_as_an_isolated_crash(saved)


def _replays_as_an_isolated_crash(case_file: Path) -> None:
    """``--replay`` with ``--isolate`` runs the recorded implementation in the child:
    the crash is reported, not suffered."""
    replay = _pytest("--replay", str(case_file), "--isolate")
    assert replay.returncode == 1, replay.stdout[-3000:] + replay.stderr[-3000:]
    assert re.search(r"check 'crashed' failed while running check 'forward': conv2d crashed "
                     r"the isolated process: killed by signal 11 \(SIGSEGV\)", replay.stdout), \
        replay.stdout[-3000:]
