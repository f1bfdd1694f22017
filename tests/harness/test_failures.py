"""Failure case files, the failure report, and what a failing run leaves behind.

The in-process tests pin the case file (exact round trip of values, dtype and
layouts; atomic, no clobbering; clear errors for bad files) and the report
text. One subprocess run under xdist (``-n 2``) pins the whole chain of
contract section 3: one JSON file and one script per falsified check, each
script reproducing the mismatch on its own, and ``--replay`` failing against
the buggy implementation and passing against a correct one.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from conv_harness.descriptor import format_descriptor
from conv_harness.checks.registry import run_check
from conv_harness.problem import ConvCase, ConvProblem
from conv_harness.records.failures import (
    SCHEMA_VERSION,
    CaseFileError,
    case_path,
    case_record,
    dump_record,
    load_case,
    packed_payload,
    save_case,
    script_path,
    unpacked_inputs,
)
from conv_harness.running.calling import CheckFailure
from conv_harness.running.loader import load_implementation
from conv_harness.running.target import Target
from conv_harness.searching.suite import failure_text, save_failure, saved_lines

PROBLEM = dict(op="conv2d", batch=1, in_channels=2, out_channels=2, input_size=(3, 2),
               kernel_size=(2, 1), stride=(1, 1), padding=(0, 1), dilation=(1, 1), groups=1)


def make_case(dtype="float64", bias=True, layouts=None, seed=0) -> ConvCase:
    p = ConvProblem(**PROBLEM, bias=bias, dtype=dtype)
    rng = np.random.default_rng(seed)

    def values(shape):  # thirds and odd floats: values that do not print exactly
        return (rng.standard_normal(shape) / 3).astype(dtype)

    shapes = p.shapes()
    return ConvCase(problem=p, x=values(shapes["x"]), weight=values(shapes["weight"]),
                    bias=values(shapes["bias"]) if bias else None,
                    grad_output=values(shapes["grad_output"]), layouts=layouts or {})


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "bfloat16"])
@pytest.mark.parametrize("bias", [True, False])
def test_case_file_round_trip_is_exact(tmp_path, dtype, bias):
    layouts = {"x": "F", "weight": "strided", "grad_output": "reversed"}
    if bias:
        layouts["bias"] = "C"
    case = make_case(dtype, bias, layouts)
    case.x.flat[0] = -0.0
    record = case_record("conv_impl.einsum", case, "forward", "message", run_check="forward")
    path = save_case(tmp_path, record, "einsum", script="# script\n")
    assert path.name.startswith("einsum-conv2d-forward-") and path.suffix == ".json"
    loaded, back = load_case(path)
    assert back.problem == case.problem
    assert back.layouts == layouts
    for name, original in case.arrays().items():
        again = back.arrays()[name]
        if original is None:
            assert again is None and loaded["inputs"][name] is None
        else:
            assert again.dtype == original.dtype
            assert again.tobytes() == original.tobytes()  # bit for bit, -0.0 included
    assert loaded["schema_version"] == SCHEMA_VERSION
    assert set(loaded["versions"]) == {"numpy", "torch"}
    assert loaded["run_check"] == "forward"
    for key in ("impl", "op", "check", "params", "inputs", "message"):  # the contract's keys
        assert key in loaded
    assert loaded["params"] == {**case.problem.params()}
    assert script_path(path).read_text() == "# script\n"
    mode = stat.S_IMODE(os.stat(path).st_mode)
    assert mode & stat.S_IRUSR and mode & stat.S_IRGRP  # not mkstemp's private 0600
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([path.name,
                                                                 script_path(path).name])


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "bfloat16"])
def test_packed_record_unpacks_to_the_same_inputs_exactly(dtype):
    """The crash record written before every call packs its arrays as raw bytes after
    its JSON; unpacked, they are the case file's inputs, -0.0 and all."""
    case = make_case(dtype, bias=False, layouts={"x": "F"})
    case.x.flat[0] = -0.0
    plain = case_record("conv_impl.einsum", case, "crashed", "message", run_check="forward")
    packed = json.loads(json.dumps(case_record("conv_impl.einsum", case, "crashed", "message",
                                               run_check="forward", packed=True)))
    assert "inputs" not in packed
    unpacked = unpacked_inputs(packed.pop("packed_inputs"), b"".join(packed_payload(case)))
    assert json.dumps(unpacked) == json.dumps(plain.pop("inputs"))  # bit for bit, signs too
    assert packed == json.loads(json.dumps(plain))


def test_same_case_from_many_writers_is_one_file_and_different_cases_never_clobber(tmp_path):
    records = [case_record("x.py", make_case(seed=s), "forward", f"m{s}") for s in (1, 2)]
    errors = []

    def write(record):
        try:
            for _ in range(20):
                save_case(tmp_path, record, "x", script="# s\n")
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(records[i % 2],)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    names = sorted(p.name for p in tmp_path.iterdir())
    assert len(names) == 4, names  # two JSON + two scripts, no temporary files left
    for record in records:
        path = case_path(tmp_path, record, "x")
        assert path.read_text() == dump_record(record)


def test_bad_case_files_are_clear_errors(tmp_path):
    good = case_record("conv_impl.einsum", make_case(), "forward", "m")
    text = dump_record(good)
    cases = {
        "missing.json": None,
        "truncated.json": text[: len(text) // 2],
        "empty.json": "",
        "v2.json": dump_record({**good, "schema_version": 2}),
        "list.json": "[1, 2]",
        "nokeys.json": json.dumps({"impl": "x"}),
        "badop.json": dump_record({**good, "op": "conv9d"}),
        "shape.json": dump_record({**good, "inputs": {**good["inputs"], "x": [[1.0]]}}),
        "layout.json": dump_record({**good, "layouts": {"x": "diagonal"}}),
        "dtype.json": dump_record({**good, "params": {**good["params"], "dtype": "int8"}}),
    }
    expected = {"missing.json": "no such case file", "truncated.json": "truncated",
                "empty.json": "empty", "v2.json": "schema version 2",
                "list.json": "not a case file", "nokeys.json": "missing op, check",
                "badop.json": "unknown op 'conv9d'", "shape.json": "shape",
                "layout.json": "diagonal", "dtype.json": "dtype 'int8' is not one of"}
    for name, content in cases.items():
        path = tmp_path / name
        if content is not None:
            path.write_text(content)
        with pytest.raises(CaseFileError) as info:
            load_case(path)
        assert str(path) in str(info.value) and expected[name] in str(info.value), name


def test_report_names_check_parameters_error_tolerance_and_where_the_script_is(tmp_path):
    """The report of a final failure: everything a bug report needs, in order; the
    script's text stays in its file."""
    impl = load_implementation("conv_impl.tutorial")
    p = ConvProblem(op="conv2d", batch=1, in_channels=1, out_channels=1, input_size=(4, 4),
                    kernel_size=(1, 1), stride=(3, 3), padding=(0, 0), dilation=(1, 1),
                    groups=1, bias=True, dtype="float64")
    case = ConvCase(problem=p, x=np.zeros((1, 1, 4, 4)), weight=np.ones((1, 1, 1, 1)),
                    bias=np.zeros(1), grad_output=np.ones((1, 1, 2, 2)),
                    layouts={"x": "F", "weight": "C", "bias": "C", "grad_output": "C"})
    with pytest.raises(CheckFailure) as info:
        run_check("grad_input", impl, case)
    target = Target(impl, "conv2d", None, tmp_path)
    text = failure_text(impl, case, info.value, "grad_input")
    path = save_failure(target, info.value, "grad_input", text, case)
    report = "\n".join([text, *saved_lines(path)])
    lines = report.splitlines()
    assert lines[0] == ("conv_impl.tutorial conv2d: check 'grad_input' failed "
                        "(grad_input against torch autograd's)")
    assert lines[1] == f"parameters: {p.describe()}"
    assert lines[2] == f"benchdnn:   {format_descriptor(p)}"
    del lines[2]  # the rest as before the benchdnn line
    assert lines[2].startswith("layouts: x=F")
    assert lines[3].startswith("grad_input: ") and " of 16 elements off; largest error " in lines[3]
    assert " at index (0, 0, " in lines[3] and ": got " in lines[3] and ", expected " in lines[3]
    assert lines[4].startswith("tolerance: float64 (u=1.11e-16), reduction length K=1")
    assert "expected grad_input:" in report and "actual grad_input:" in report
    saved = sorted(tmp_path.glob("*.json"))
    assert saved == [path]
    assert f"replay:    pytest --replay {saved[0]}" in report
    assert f"script:    python {script_path(saved[0])}" in report
    script = script_path(saved[0]).read_text()
    assert "def main(impl):" in script and "def main(" not in report  # the script stays in its file
    record, back = load_case(saved[0])
    assert record["message"] == text
    assert back.layouts["x"] == "F"


def case_files(folder: Path) -> list[Path]:
    """The case files of a failures folder (not the run's summary.json)."""
    return sorted(p for p in folder.glob("*.json") if p.name != "summary.json")


@pytest.mark.long
def test_xdist_run_leaves_one_case_and_script_per_failure_that_reproduce(run_pytest, tmp_path):
    """Contract section 3 end to end, under ``-n 2``: two buggy implementations,
    one falsified check each, found on whichever worker ran it."""
    failures = tmp_path / "failures"
    done = run_pytest("tests/conformance/test_conformance.py", "-n", "2", "-k", "grad_input",
                      "--impl", "conv_impl.tutorial",
                      "--impl", "tools/tutorial_variants.py:stride_bug_square",
                      "--conv-failures", failures)
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    assert "2 failed" in done.stdout
    cases = case_files(failures)
    scripts = sorted(failures.glob("*.py"))
    # the tutorial's two bugs (padding, stride), the variant's one (stride); a
    # follow-up search may also save a finding it merged into one of them
    assert len(cases) >= 3 and [s.stem for s in scripts] == [c.stem for c in cases], \
        sorted(p.name for p in failures.iterdir())
    assert not [p for p in failures.iterdir() if p.name.startswith(".")]  # no temporary files
    impls = set()
    for path in cases:
        record, _ = load_case(path)
        impls.add(record["impl"])
        assert record["check"] == "grad_input"
    summary = json.loads((failures / "summary.json").read_text())
    listed = [bug["case_file"] for entry in summary["implementations"] for bug in entry["bugs"]]
    assert len(listed) == 3, summary
    for name in listed:
        assert f"pytest --replay {failures / name}" in done.stdout
        assert f"script:    python {script_path(failures / name)}" in done.stdout
    assert "def main(" not in done.stdout  # scripts stay in their files
    assert impls == {"conv_impl.tutorial", "tools/tutorial_variants.py:stride_bug_square"}

    # Each script on its own, from another folder: exits 1 and shows the mismatch.
    runs = [subprocess.Popen([sys.executable, str(s)], cwd=tmp_path, text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE) for s in scripts]
    for script, proc in zip(scripts, runs):
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 1, (script.name, out, err)
        assert "FAILED" in out and "grad_input: " in out and "largest error" in out, out

    # Replaying the folder: still fails against the tutorial; passes against einsum.
    again = run_pytest("--replay", failures, "--impl", "conv_impl.tutorial")
    assert again.returncode == 1 and f"{len(cases)} failed" in again.stdout, again.stdout[-3000:]
    assert "still fails" in again.stdout
    fixed = run_pytest("--replay", failures, "--impl", "conv_impl.einsum")
    assert fixed.returncode == 0 and f"{len(cases)} passed" in fixed.stdout, fixed.stdout[-3000:]
