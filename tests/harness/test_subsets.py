"""Contract section 2: any non-empty subset of the functions runs to a verdict.

Checks that need a function the implementation lacks are listed as not run,
with the reason, in the summary text and in summary.json; never an internal
error (issue 20: a forward-only module ended in INTERNALERROR, exit 3, because
a check with no target was parametrised with pytest's NOTSET: the pytest run under
xdist below; the others run in process).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.harness.runs import suite_in_process

#: each shape of subset: its file's lines, the operations it provides, the checks
#: that run on one of them, and one (check, op) it cannot run with the function it lacks
SUBSETS = {
    "forward_only": ("from conv_impl.einsum import conv2d", ["conv2d"],
                     {"forward", "linearity"}, ("grad_input", "conv2d", "conv2d_backward")),
    "backward_only": ("from conv_impl.einsum import conv2d_backward", ["conv2d"],
                      {"grad_input", "grad_bias"}, ("forward", "conv2d", "conv2d")),
    "transposed_forward_only": ("from conv_impl.einsum import conv_transpose2d",
                                ["conv_transpose2d"], {"forward"},
                                ("adjoint", "conv_transpose2d", "conv_transpose2d_backward")),
    "conv1d_only": ("from conv_impl.einsum import conv1d, conv1d_backward", ["conv1d"],
                    {"forward", "grad_weight", "adjoint"}, None),
}
#: short runs (each test still runs one example): the verdict and its not-run list are
#: what is pinned, not a search
SHORT_BUDGET = 0.01
SHORT = ("--conv-budget", str(SHORT_BUDGET))


def _summary(folder):
    return json.loads((folder / "summary.json").read_text())["implementations"]


@pytest.fixture(scope="module")
def subsets_run(tmp_path_factory):
    """One run of the four subsets together (each test reads its own): the result,
    and each subset's summary.json record and section of the summary text."""
    folder = tmp_path_factory.mktemp("subsets")
    impls = []
    for shape, (source, *_) in SUBSETS.items():
        (folder / f"{shape}.py").write_text(source + "\n")
        impls.append(str(folder / f"{shape}.py"))
    result = suite_in_process(impls, None, None, folder / "f", budget=SHORT_BUDGET)
    records = {Path(record["impl"]).stem: record for record in _summary(folder / "f")}
    assert records == {Path(entry["impl"]).stem: entry
                       for entry in result.summary["implementations"]}
    text = "\n" + "\n".join(result.lines)
    starts = sorted((text.index(f"\n{shape} ["), shape) for shape in SUBSETS)
    ends = [start for start, _ in starts[1:]] + [len(text)]
    sections = {shape: text[start:end] for (start, shape), end in zip(starts, ends)}
    return result, records, sections


@pytest.mark.parametrize("shape", sorted(SUBSETS))
def test_each_subset_runs_to_a_verdict_with_what_did_not_run(subsets_run, shape):
    source, ops, ran, lacking = SUBSETS[shape]
    result, records, sections = subsets_run
    assert result.passed, result.text
    record = records[shape]
    assert record["verdict"] == "passed"
    assert set(record["operations_not_run"]) == {
        op for op in ("conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
                      "conv_transpose3d") if op not in ops}
    ran_checks = {key.split()[0] for key in record["examples_per_test"]}
    assert ran <= ran_checks
    not_run = {(e["check"], e["op"]): e["reason"] for e in record["checks_not_run"]}
    assert not ran_checks & {check for check, _ in not_run if check != "invalid"}
    summary = sections[shape]
    assert "operations not run" in summary
    if lacking is not None:
        check, op, function = lacking
        assert not_run[(check, op)] == f"needs {function}, which it does not provide"
        assert f"not run on {op}: " in summary and f"needs {function}" in summary
    # a check it could run but that is opt-in says so, with pytest's skip reason
    invalid = not_run[("invalid", ops[0])]
    assert "--conv-invalid" in invalid or invalid.endswith("which it does not provide")


def test_subsets_under_xdist_each_with_its_own_not_run_list(run_pytest, tmp_path):
    """Two subsets in one run under xdist: a check that one of them cannot run is
    parametrised for the other only; one that neither can run is skipped with the
    reason, not an internal error."""
    (tmp_path / "fwd.py").write_text("from conv_impl.einsum import conv2d\n")
    (tmp_path / "tfwd.py").write_text("from conv_impl.einsum import conv_transpose1d\n")
    result = run_pytest("--impl", tmp_path / "fwd.py", "--impl", tmp_path / "tfwd.py",
                        "-n", "2", "-rs", *SHORT, "--conv-failures", tmp_path / "f")
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    assert "INTERNALERROR" not in out
    assert "check 'grad_input' not run: it needs a backward (conv2d_backward, ...); " \
           "fwd provides conv2d; tfwd provides conv_transpose1d" in out
    fwd, tfwd = _summary(tmp_path / "f")
    assert fwd["verdict"] == tfwd["verdict"] == "passed"
    assert "forward conv2d" in fwd["examples_per_test"]
    assert "forward conv_transpose1d" in tfwd["examples_per_test"]
    assert {"check": "grad_weight", "op": "conv_transpose1d",
            "reason": "needs conv_transpose1d_backward, which it does not provide"} \
        in tfwd["checks_not_run"]


def test_a_buggy_subset_still_fails(tmp_path):
    """A backward alone with a bug: the verdict is failed, with its bug listed."""
    (tmp_path / "tut_bwd.py").write_text("from conv_impl.tutorial import conv2d_backward\n")
    result = suite_in_process(str(tmp_path / "tut_bwd.py"), ("grad_input",), None,
                              tmp_path / "f")
    assert not result.passed, result.text
    [record] = _summary(tmp_path / "f")
    assert record["verdict"] == "failed" and record["bugs"]
    assert {e["check"] for e in record["checks_not_run"]} >= {"forward", "adjoint"}
