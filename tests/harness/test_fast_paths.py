"""Fast paths (issue 22): bugs on the paths real layers take are found and shrink
to their minimal case; the archetypes are drawn, counted, and shrink away.

The search test runs the checks that call the forward pass on the six
implementations of fast_paths.py, each wrong on one path only, as a default
run does (every test its own seed), for three runs, in this process
(conv_harness/run.py).
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from conv_harness.checks.registry import run_check
from conv_harness.problem import ConvProblem
from conv_harness.running.calling import CheckFailure
from conv_harness.running.loader import load_implementation
from conv_harness.searching.suite import found_on
from strategies import archetypes
from strategies.cases import noise_case
from tests.harness import fast_paths
from tests.harness.runs import suite_in_process, triaged

HERE = Path(__file__).parent
#: the checks that call the forward pass (the others do not see these bugs)
FORWARD_CHECKS = ("forward", "delta_kernel", "adjoint")
OPS = {"winograd_dilation": "conv2d", "depthwise_channel0": "conv2d",
       "inception_wrap": "conv2d", "unet_no_bias": "conv_transpose2d",
       "wav2vec_frames": "conv1d", "r2plus1d_transposed": "conv3d"}


def _plain(p: ConvProblem, **but) -> bool:
    """batch 1, one channel, groups 1, no dilation, unless ``but`` says otherwise."""
    want = {"batch": 1, "in_channels": 1, "out_channels": 1, "groups": 1,
            "dilation": (1,) * len(p.kernel_size), **but}
    return all(getattr(p, k) == v for k, v in want.items())


#: the minimal case each bug must shrink to
MINIMAL = {
    # the example: 3x3, stride 1, dilation 2 on one axis, one output: input 5
    # on that axis with padding 0 (varying data), or input 3 with padding 1 (then
    # constant data show it: the undilated window reads the padding), input 3 on the other
    "winograd_dilation": lambda p: _plain(p, dilation=p.dilation) and p.kernel_size == (3, 3)
    and p.stride == (1, 1) and sorted(p.dilation) == [1, 2] and p.output_size == (1, 1)
    and p.padding[p.dilation.index(1)] == 0 and p.input_size[p.dilation.index(1)] == 3,
    "depthwise_channel0": lambda p: _plain(p, in_channels=2, out_channels=2, groups=2)
    and p.kernel_size == (3, 3) and p.stride == (1, 1) and p.padding == (0, 0)
    and p.input_size == (3, 3),
    "inception_wrap": lambda p: _plain(p) and sorted(p.kernel_size) == [1, 5]
    and p.stride == (1, 1) and sorted(p.padding) == [0, 1]
    and p.padding.index(1) == p.kernel_size.index(5) and sorted(p.input_size) == [1, 3],
    "unet_no_bias": lambda p: _plain(p) and p.bias and p.kernel_size == (2, 2)
    and p.stride == (2, 2) and p.padding == (0, 0) and p.input_size == (1, 1),
    # kernel 2, stride 2 on an input of 3; or, where the search went by the padding, a
    # single input position under a padded window of kernel = stride = 2 (a finding at
    # kernel = stride = 3 is smaller, but lies outside the entry's trigger, stride = 2:
    # it is listed, not shown)
    "wav2vec_frames": lambda p: _plain(p) and (
        (p.kernel_size, p.stride, p.padding, p.input_size) == ((2,), (2,), (0,), (3,))
        or (p.input_size == (1,) and p.padding == (1,) and p.kernel_size == p.stride == (2,))),
    # the 3x3 taps on a 3x3 input, or, where padding 1 was kept, a smaller one
    "r2plus1d_transposed": lambda p: _plain(p) and p.kernel_size == (1, 3, 3)
    and p.stride == (1, 1, 1) and math.prod(p.input_size) <= 9,
}


def _fails(impl, p: ConvProblem) -> bool:
    try:
        run_check("forward", impl, noise_case(p))
    except CheckFailure:
        return True
    return False


def _problem(op: str, **kw) -> ConvProblem:
    n = {"conv1d": 1, "conv2d": 2, "conv3d": 3, "conv_transpose2d": 2}[op]
    base = dict(batch=1, in_channels=1, out_channels=1, input_size=(3,) * n,
                kernel_size=(1,) * n, stride=(1,) * n, padding=(0,) * n, dilation=(1,) * n,
                groups=1, bias=True, dtype="float64")
    return ConvProblem(op=op, **{**base, **kw})


#: per implementation: a problem on its path that fails, and one-step neighbours
#: off the path that pass (each correct everywhere but its path)
PATHS = {
    "winograd_dilation": (
        dict(input_size=(5, 3), kernel_size=(3, 3), dilation=(2, 1)),
        [dict(input_size=(5, 3), kernel_size=(3, 3)),
         dict(input_size=(5, 5), kernel_size=(3, 3), dilation=(2, 1), stride=(2, 1)),
         dict(input_size=(5, 3), kernel_size=(3, 3), dilation=(2, 1), groups=2,
              in_channels=2, out_channels=2)]),
    "depthwise_channel0": (
        dict(input_size=(3, 3), kernel_size=(3, 3), groups=2, in_channels=2, out_channels=2),
        [dict(input_size=(3, 3), kernel_size=(3, 3), in_channels=2, out_channels=2),
         dict(input_size=(3, 3), kernel_size=(2, 2), groups=2, in_channels=2, out_channels=2),
         dict(input_size=(3, 3), kernel_size=(3, 3), groups=2, in_channels=4,
              out_channels=4)]),
    "inception_wrap": (
        dict(input_size=(1, 3), kernel_size=(1, 5), padding=(0, 1)),
        [dict(input_size=(1, 3), kernel_size=(1, 3), padding=(0, 0)),
         dict(input_size=(1, 5), kernel_size=(1, 5)),
         dict(input_size=(2, 3), kernel_size=(2, 5), padding=(0, 1))]),
    "unet_no_bias": (
        dict(input_size=(1, 1), kernel_size=(2, 2), stride=(2, 2)),
        [dict(input_size=(1, 1), kernel_size=(2, 2), stride=(2, 1)),
         dict(input_size=(1, 1), kernel_size=(2, 2), stride=(2, 2), bias=False),
         dict(input_size=(1, 1), kernel_size=(3, 3), stride=(2, 2))]),
    "wav2vec_frames": (
        dict(input_size=(3,), kernel_size=(2,), stride=(2,)),
        [dict(input_size=(4,), kernel_size=(2,), stride=(2,)),
         dict(input_size=(3,), kernel_size=(3,), stride=(2,)),
         dict(input_size=(3,), kernel_size=(2,), stride=(1,))]),
    "r2plus1d_transposed": (
        dict(input_size=(1, 3, 3), kernel_size=(1, 3, 3)),
        [dict(input_size=(3, 3, 3), kernel_size=(3, 3, 3)),
         dict(input_size=(1, 3, 3), kernel_size=(1, 3, 2)),
         dict(input_size=(1, 3, 3), kernel_size=(1, 2, 3))]),
}


@pytest.mark.parametrize("name", fast_paths.ALL)
def test_each_is_wrong_on_its_path_only(name):
    impl = load_implementation(f"{HERE / 'fast_paths.py'}:{name}")
    on_path, off_path = PATHS[name]
    op = OPS[name]
    assert _fails(impl, _problem(op, **on_path))
    assert MINIMAL[name](_problem(op, **on_path))
    for neighbour in off_path:
        assert not _fails(impl, _problem(op, **neighbour)), neighbour


@pytest.mark.parametrize("run", [1, 2, 3])
@pytest.mark.parametrize("name", fast_paths.ALL)
@pytest.mark.long
def test_a_default_run_finds_each_fast_path_bug_and_shrinks_it(name, run, tmp_path,
                                                               monkeypatch):
    """Each check its own seed, as in a default run; three runs. The checks that call
    the forward pass (the others do not see these bugs), in this process."""
    failures = tmp_path / "failures"
    bugs, out = triaged(f"{HERE / 'fast_paths.py'}:{name}", FORWARD_CHECKS,
                        (OPS[name],), failures, seed=run)
    assert bugs, f"{name}: not found\n{out[-3000:]}"
    # a check that stopped at the bug limit found that many (wav2vec_frames' one cause,
    # met again at each stride, spent the rounds and was said to reach the limit)
    for found, limit in re.findall(r"found (\d+) distinct bugs? \(stopped at --conv-max-bugs "
                                   r"(\d+)\)", out):
        assert int(found) >= int(limit), out[-3000:]
    wrong = []  # every entry's outcome, before any assertion
    for bug in bugs:
        record = json.loads((failures / bug["case_file"]).read_text())
        problem = ConvProblem.from_params(record["op"], record["params"])
        if not MINIMAL[name](problem):
            wrong.append(f"{name}: {record['check']} shrank to {problem.describe()}")
    assert not wrong, "\n".join(wrong)


def _archetype(name: str) -> archetypes.Archetype:
    return next(a for a in archetypes.CATALOGUE if a.name == name)


def test_found_on_names_the_archetype_a_search_first_failed_on():
    """The archetype the draw started from, with what differs; for an ordinary draw
    (or a given problem), the archetype it is or neighbours, if any."""
    deeplab, d4 = _archetype("3x3 d2 p2"), _archetype("3x3 d4 p4")
    exact = _problem("conv2d", input_size=(7, 7), kernel_size=deeplab.kernel,
                     padding=deeplab.padding, dilation=deeplab.dilation)
    neighbour = _problem("conv2d", input_size=(7, 7), kernel_size=(3, 3), padding=(0, 0),
                         dilation=(2, 2))
    shrunk = _problem("conv2d", input_size=(5, 3), kernel_size=(3, 3), dilation=(2, 1))
    assert found_on(exact, None, exact) == "found on:   deeplab 3x3 d2 p2 (this problem)"
    assert found_on(neighbour, None, shrunk) == (
        f"found on:   deeplab 3x3 d2 p2's padding neighbour: {neighbour.describe()} (the "
        f"search's first failing example; shrunk to the problem above)")
    assert found_on(neighbour, d4, neighbour) == (
        "found on:   deeplab 3x3 d4 p4, changed in padding, dilation (this problem)")
    assert found_on(exact, d4, exact).startswith("found on:   deeplab 3x3 d4 p4, changed in")
    assert found_on(shrunk, deeplab, shrunk).startswith(
        "found on:   deeplab 3x3 d2 p2, changed in padding, dilation")
    assert archetypes.classify(shrunk) is None and found_on(shrunk, None, shrunk) is None


@pytest.mark.long
def test_a_bug_found_on_an_archetype_names_it_in_its_report(tmp_path):
    """Issue 22: the Winograd-dilation bug on DeepLab's 3x3 dilation 2 (the only problem
    given): the bug's report, above its trigger and explanation, says where it was found,
    and so do the summary's entry (above its trigger) and summary.json's ``found_on``."""
    deeplab = _archetype("3x3 d2 p2")
    problem = _problem("conv2d", input_size=(6, 7), kernel_size=deeplab.kernel,
                       padding=deeplab.padding, dilation=deeplab.dilation)
    result = suite_in_process(f"{HERE / 'fast_paths.py'}:winograd_dilation", ("forward",),
                              None, tmp_path / "failures", problems=[problem])
    assert not result.passed, result.text[-3000:]
    (report,) = result.reports
    report = report[report.index("found 1 distinct bug"):]
    assert report.index("found on:   deeplab 3x3 d2 p2 (this problem)") < report.index(
        "trigger:")
    summary = "\n".join(result.lines)
    assert summary.index("     found on: deeplab 3x3 d2 p2\n") < summary.index("     trigger:")
    (entry,) = json.loads((tmp_path / "failures" / "summary.json").read_text())["implementations"]
    assert [bug["found_on"] for bug in entry["bugs"]] == ["deeplab 3x3 d2 p2"]
