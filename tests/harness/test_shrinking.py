"""The suite's shrunk counterexamples are the smallest problems, end to end.

Each test runs the conformance suite on a known-buggy implementation and reads
the distinct bugs of the run's summary.json (each with its case file) for the
parameters and data of each bug's minimal case.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np


def run_bugs(run_pytest, tmp_path, spec: str, selection: str, *extra: str) -> list[dict]:
    """The run's distinct bugs (summary.json), each with its case record under "record"."""
    result = run_pytest("--impl", spec, "-k", selection, *extra)
    assert result.returncode == 1, result.stdout[-4000:] + result.stderr[-2000:]
    failures = tmp_path / "failures"
    summary = json.loads((failures / "summary.json").read_text())
    (entry,) = summary["implementations"]
    assert entry["impl"] == spec and entry["verdict"] == "failed"
    for bug in entry["bugs"]:
        bug["record"] = json.loads(Path(failures / bug["case_file"]).read_text())
    return entry["bugs"]


def test_the_tutorial_shrinks_to_its_padding_bug(run_pytest, tmp_path):
    bugs = run_bugs(run_pytest, tmp_path, "conv_impl.tutorial", "test_grad_input and conv2d]")
    # the one entry with padding (the entries come smallest first, `ConvProblem.size_rank`:
    # the stride bug's unpadded 1x4 before this padded 3x3)
    (record,) = [bug["record"] for bug in bugs if any(bug["record"]["params"]["padding"])]
    assert record["check"] == "grad_input" and record["op"] == "conv2d"
    assert record["params"] == {
        "batch": 1, "in_channels": 1, "out_channels": 1, "input_size": [1, 1],
        "kernel_size": [1, 1], "stride": [1, 1], "padding": [1, 1], "dilation": [1, 1],
        "groups": 1, "bias": True, "dtype": "float64",
    }
    # and the simplest data that shows it: constants, zero where they can be
    assert record["inputs"] == {"x": [[[[0.0]]]], "weight": [[[[1.0]]]], "bias": [0.0],
                                "grad_output": [[[[1.0] * 3] * 3]]}


def test_the_tutorial_with_only_its_stride_bug_shrinks_to_stride_3(run_pytest, tmp_path):
    (bug,) = run_bugs(run_pytest, tmp_path, "conv_impl.tutorial:stride_bug_only",
                      "test_grad_input and conv2d]")
    params = bug["record"]["params"]
    strided = params["stride"].index(3)  # either axis may carry it; the other has stride 1
    assert sorted(params["stride"]) == [1, 3]
    assert params["input_size"][strided] == 4 and params["input_size"][1 - strided] == 1
    assert {k: v for k, v in params.items() if k not in ("stride", "input_size")} == {
        "batch": 1, "in_channels": 1, "out_channels": 1, "kernel_size": [1, 1],
        "padding": [0, 0], "dilation": [1, 1], "groups": 1, "bias": True, "dtype": "float64",
    }
    values = {name: set(np.ravel(array).tolist()) for name, array in bug["record"]["inputs"].items()}
    assert values == {"x": {0.0}, "weight": {1.0}, "bias": {0.0}, "grad_output": {1.0}}
