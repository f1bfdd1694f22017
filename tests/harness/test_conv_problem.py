"""``--conv-problem``: every check runs on exactly the problems given, in benchdnn's
notation; oneDNN's regression batch (its f32 2-d lines) passes on conv_impl.einsum."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conv_harness.checks.registry import run_check
from conv_harness.descriptor import parse_problem_line
from conv_harness.running.loader import load_implementation
from strategies.archetypes import classify
from strategies.cases import noise_case
from tests.harness.runs import suite_in_process

HERE = Path(__file__).parent
BATCH = HERE / "data" / "benchdnn_regression_f32_2d.txt"


def _problems():
    return [p for p in map(parse_problem_line, BATCH.read_text().splitlines()) if p is not None]


def test_the_regression_batch_file_reads():
    problems = _problems()
    assert len(problems) == 37
    assert {p.op for p in problems} == {"conv2d"} and {p.dtype for p in problems} == {"float32"}


@pytest.mark.parametrize("check", ["forward", "grad_input", "grad_weight", "grad_bias"])
def test_the_regression_batch_passes_on_einsum(check):
    """Every problem once, with dense values, each oracle check (the suite run below
    draws them at random, so it need not reach each one)."""
    impl = load_implementation("conv_impl.einsum")
    for p in _problems():
        run_check(check, impl, noise_case(p))


def _passing_entry(result, tmp_path: Path) -> dict:
    """The one implementation's summary entry of a run that must exit 0."""
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    (entry,) = json.loads((tmp_path / "failures" / "summary.json").read_text())[
        "implementations"]
    return entry


@pytest.mark.long
def test_conv_problem_at_file_runs_every_check_on_those_problems(run_pytest, tmp_path):
    """A batch file of the regression batch's smallest problems, with its comments,
    under xdist. Which of them a check reaches in its budget depends on the
    machine's speed; that only they are drawn, and the archetypes they are, does
    not (every problem of the whole batch meets every oracle check in
    test_the_regression_batch_passes_on_einsum). The problems are the smallest so
    that each test runs several examples in its budget, not one large one."""
    lines = BATCH.read_text().splitlines()
    comments = [line for line in lines if line.startswith("#")]
    parsed = [(line, problem) for line in lines
              if (problem := parse_problem_line(line)) is not None]
    smallest = sorted(parsed, key=lambda pair: pair[1].size_rank())[:9]
    batch = tmp_path / "smallest.txt"
    batch.write_text("\n".join(comments + [line for line, _ in smallest]) + "\n")
    # two words, as the docs write it (the plugin joins an @file value itself)
    result = run_pytest("--conv-problem", f"@{batch}", "--conv-budget", "1", "-n", "2",
                        timeout=1800, words_as_given=True)
    entry = _passing_entry(result, tmp_path)
    assert entry["verdict"] == "passed"
    assert {test.split()[1] for test in entry["examples_per_test"]} == {"conv2d"}
    in_the_file = {found[0].label for found in (classify(problem) for _, problem in smallest)
                   if found}
    assert set(entry["archetypes"]) <= in_the_file, entry["archetypes"]


def test_a_given_stem_is_counted_as_its_archetype(tmp_path):
    """The batch's regression_oc-channel line, a ResNet stem with 51 output channels."""
    result = suite_in_process("conv_impl.einsum", ("forward",), None, tmp_path / "failures",
                              problems=[parse_problem_line("mb1ic3ih320oc51oh160kh7sh2ph3")],
                              budget=0.01)
    assert result.passed, result.text[-3000:]
    entry = result.entry()
    assert entry["archetypes"]["resnet 7x7 s2 p3 stem"]["exact"] >= 1


def test_given_problems_only(tmp_path):
    result = suite_in_process("conv_impl.einsum", ("forward",), None, tmp_path / "failures",
                              problems=[parse_problem_line(line) for line in (
                                  "mb1ic2ih4oc3kh3ph1",
                                  "conv_transpose1d float64 mb1ic2iw3oc2kw2sw2")])
    assert result.passed, result.text[-3000:]
    entry = result.entry()
    assert set(entry["examples_per_test"]) == {"forward conv2d", "forward conv_transpose1d"}
    assert "resnet 3x3 s1 p1" in entry["archetypes"]


def test_a_bad_descriptor_is_a_usage_error(run_pytest, tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_text("# a comment\nmb1ic4ih5oc4kh3\nmb2_g1ic32oc32_ih7oh11kh3ph2\n")
    result = run_pytest("--conv-problem", f"@{bad}", words_as_given=True)
    assert result.returncode == 4
    assert "line 3" in result.stderr and "asymmetric padding" in result.stderr
    assert "Traceback" not in result.stderr
