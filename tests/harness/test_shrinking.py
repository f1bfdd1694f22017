"""The suite's shrunk counterexamples are the smallest problems, end to end.

Each test runs the conformance suite (in process) on a known-buggy implementation and reads
the distinct bugs of the run's summary.json (each with its case file) for the
parameters and data of each bug's minimal case.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from tests.harness.runs import suite_in_process


def run_bugs(tmp_path, spec: str, checks: tuple[str, ...]) -> list[dict]:
    """The run's distinct bugs on conv2d (summary.json), each with its case record
    under "record"."""
    failures = tmp_path / "failures"
    result = suite_in_process(spec, checks, ("conv2d",), failures)
    entry = json.loads((failures / "summary.json").read_text())["implementations"][0]
    assert entry == result.entry(spec)
    assert entry["impl"] == spec and entry["verdict"] == "failed"
    for bug in entry["bugs"]:
        bug["record"] = json.loads(Path(failures / bug["case_file"]).read_text())
    return entry["bugs"]


def test_the_tutorial_shrinks_to_its_padding_bug(tmp_path):
    bugs = run_bugs(tmp_path, "conv_impl.tutorial", ("grad_input",))
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


def test_the_tutorial_with_only_its_stride_bug_shrinks_to_stride_3(tmp_path):
    (bug,) = run_bugs(tmp_path, "conv_impl.tutorial:stride_bug_only", ("grad_input",))
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
