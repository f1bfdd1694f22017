"""A process that dies between calls still leaves the problem of the last call made.

A call that corrupts the heap often kills the process later, at an
allocation in the caller's own code: in the harness, while it writes the
next call's in-flight record. The record of the call that did the damage
must survive that (conv_harness/running/isolate.py, `CrashRecorder`): before,
it was removed when the call returned, and such a crash lost its problem.
``dies_later.py`` returns right results, but a call with padding makes the
process abort at its next file write, the next record's.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
IMPL = str(HERE / "dies_later.py")
FORWARD = "conv2d and test_forward"


def _saved(failures: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in failures.glob("dies_later-conv2d-crashed-*.json")
            if "-in-" not in p.name]


def _check_record(record: dict) -> None:
    assert record["check"] == "crashed" and record["function"] == "conv2d"
    assert any(record["params"]["padding"]), record["params"]  # the call that did the damage
    assert "it died after the call returned, before the next call" in record["message"]


@pytest.mark.long
def test_xdist_worker_dying_between_calls_reports_the_last_call(run_pytest, tmp_path):
    failures = tmp_path / "xdist"
    done = run_pytest("-n", "2", "-k", FORWARD, "--impl", IMPL, "--impl", "conv_impl.einsum",
                      "--conv-failures", failures)
    assert done.returncode == 1, done.stdout[-3000:]
    assert re.search(r"^conv2d crashed the test process \(pytest-xdist worker 'gw\d+'\): it "
                     r"died after the call returned, before the next call", done.stdout,
                     re.M), done.stdout[-3000:]
    (record,) = _saved(failures)
    _check_record(record)
    assert not list(failures.glob("*-in-gw*.record"))  # in-flight records consumed or removed


def test_dying_between_calls_without_xdist_is_saved_by_the_next_run(run_pytest, tmp_path):
    failures = tmp_path / "plain"
    done = run_pytest("-k", FORWARD, "--impl", IMPL, "--conv-failures", failures)
    assert done.returncode < 0, (done.returncode, done.stdout[-2000:])
    (left,) = failures.glob("dies_later-conv2d-returned-in-pid*.record")
    later = run_pytest("-k", FORWARD, "--impl", "conv_impl.einsum", "--conv-failures", failures)
    assert later.returncode == 0, later.stdout[-3000:]
    assert not left.exists()
    (record,) = _saved(failures)
    _check_record(record)
    assert "crashes of earlier runs" in later.stdout


def test_a_test_that_is_not_a_conformance_test_drops_the_last_calls_record(tmp_path):
    """A worker of the harness's own suite that died in one of its unit tests was
    reported as a crash of the last conformance call it had made, tests earlier."""
    from types import SimpleNamespace

    from conv_harness import isolate_hooks
    from conv_harness.problem import ConvProblem
    from conv_harness.running import isolate
    from strategies.cases import noise_case

    recorder = isolate.CrashRecorder(tmp_path, "gw0", "run")
    config = SimpleNamespace(stash={isolate_hooks._RECORDER: recorder})  # the run's, as pytest's
    recorder.current = ("conv_impl.einsum", "conv_impl.einsum", "forward")
    case = noise_case(ConvProblem(op="conv2d", batch=1, in_channels=1, out_channels=1,
                                  input_size=(3, 3), kernel_size=(1, 1), stride=(1, 1),
                                  padding=(0, 0), dilation=(1, 1), groups=1, bias=False,
                                  dtype="float64"))
    recorder(case, "conv2d")()  # a call that returned
    recorder.current = None
    assert isolate.inflight_records(tmp_path, "gw0")
    unit_test = isolate_hooks.pytest_runtest_call(SimpleNamespace(name="test_something",
                                                                  config=config))
    next(unit_test)
    assert not isolate.inflight_records(tmp_path, "gw0")


def test_a_record_holds_the_calls_arrays_after_one_line_of_json(tmp_path):
    """Written before every call, so cheap: the arrays' raw bytes follow the JSON line
    (as base64 inside the JSON, a ResNet layer's record cost four times its call); read
    back, they are the case file's ``inputs``, whatever the arrays' layouts."""
    import dataclasses

    import numpy as np

    from conv_harness.problem import ConvProblem
    from conv_harness.running import isolate
    from strategies.cases import noise_case

    p = ConvProblem(op="conv2d", batch=2, in_channels=3, out_channels=2, input_size=(4, 5),
                    kernel_size=(2, 3), stride=(1, 1), padding=(0, 0), dilation=(1, 1),
                    groups=1, bias=False, dtype="float32")
    case = noise_case(p)
    case = dataclasses.replace(case, layouts={"x": "F"}, x=np.asfortranarray(case.x))
    recorder = isolate.CrashRecorder(tmp_path, "gw0", "run")
    recorder.current = ("mine.py", "mine", "forward")
    recorder(case, "conv2d")
    (path, returned), = isolate.inflight_records(tmp_path, "gw0")
    assert path.name == "mine-conv2d-crashed-in-gw0.record" and not returned
    record = isolate.read_record(path)
    assert record["inputs"]["x"] == case.x.tolist() and record["inputs"]["bias"] is None
    assert record["inputs"]["weight"] == case.weight.tolist()
    assert record["layouts"]["x"] == "F" and record["run"] == "run"
