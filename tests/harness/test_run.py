"""`conv_harness.run.run_checks`: a run without pytest gives what the pytest run gives."""

from __future__ import annotations

import json

import pytest

from conv_harness.run import planned_tests, run_checks
from conv_harness.running.loader import load_implementation
from tests.harness.runs import suite_in_process

#: the summary.json fields that do not depend on what a search happened to draw
STABLE = ("impl", "verdict", "operations_not_run", "checks_not_run", "arrays", "crashed")


@pytest.mark.long
def test_the_in_process_run_summarises_as_the_pytest_run_does(run_pytest, tmp_path):
    """The same selection of the tutorial, as a pytest run and in process: the same
    verdict, tests, not-run list and causes (a search's draws differ between the two
    processes: the pytest run's keeps the constants of its modules,
    conv_harness/profiles.py)."""
    done = run_pytest("--impl", "conv_impl.tutorial", "-k",
                      "(test_forward or test_grad_input) and conv2d]")
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    (by_pytest,) = json.loads((tmp_path / "failures" / "summary.json").read_text())[
        "implementations"]
    result = suite_in_process("conv_impl.tutorial", ("forward", "grad_input"), ("conv2d",),
                              tmp_path / "in-process")
    in_process = result.entry("conv_impl.tutorial")
    assert {key: in_process[key] for key in STABLE} == {key: by_pytest[key] for key in STABLE}
    assert set(in_process["examples_per_test"]) == set(by_pytest["examples_per_test"])

    def causes(entry):
        return sorted((bug["failure"], bug["function"], bug["trigger"].split(";")[0])
                      for bug in entry["bugs"])

    assert causes(in_process) == causes(by_pytest)
    # the summary's verdict line, as the pytest run prints it
    assert result.lines[0] == "conv_impl.tutorial [conv_impl.tutorial]: FAILED: grad_input " \
                              "(conv2d)"
    assert f"\n{result.lines[0]}\n" in done.stdout
    assert json.loads((tmp_path / "in-process" / "summary.json").read_text()) == result.summary
    assert not result.passed and result.bugs() == in_process["bugs"]


def test_a_passing_run_and_its_not_run_tests(tmp_path):
    """An opt-in check runs only when named; without it, it is listed as not run with
    the pytest run's reason."""
    result = run_checks("conv_impl.einsum", None, ("conv1d",), failures_dir=tmp_path,
                        budget=0.01, profile_name="harness-test")
    assert result.passed and not result.errors and not result.reports, result.text
    entry = result.entry()
    assert entry["verdict"] == "passed" and entry["bugs"] == []
    not_run = {(e["check"], e["op"]): e["reason"] for e in entry["checks_not_run"]}
    assert not_run[("invalid", "conv1d")] == "invalid problems are opt-in: --conv-invalid"
    assert entry["examples_per_test"].get("invalid conv1d", 0) == 0
    named = run_checks("conv_impl.einsum", ("invalid",), ("conv1d",), failures_dir=tmp_path,
                       budget=0.01, profile_name="harness-test")
    assert named.passed and set(named.entry()["examples_per_test"]) == {"invalid conv1d"}


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match=r"unknown checks \['forwards'\]"):
        planned_tests([load_implementation("conv_impl.einsum")], ["forwards"], None)
    with pytest.raises(ValueError, match=r"unknown operations \['conv4d'\]"):
        planned_tests([load_implementation("conv_impl.einsum")], None, ["conv4d"])


def test_a_spec_given_twice_is_checked_once(tmp_path):
    result = run_checks(["conv_impl.einsum", "conv_impl.einsum"], ("forward",), ("conv1d",),
                        failures_dir=tmp_path, budget=0.01, profile_name="harness-test")
    assert [entry["impl"] for entry in result.summary["implementations"]] == [
        "conv_impl.einsum"]
