"""Every distinct bug from one run (conv_harness/triage): attribution, explanations,
triggers, follow-up searches, one entry per bug, database keys.

In-process tests pin the pieces on fixed cases; subprocess runs pin the
whole chain on implementations with two independent bugs each
(tests/harness/two_bugs.py) and on the tutorial: each bug reported on its own
minimal problem, with a case file whose script exits 1.
"""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conv_harness.checks.registry import REGISTRY, examine
from conv_harness.problem import ConvCase, ConvProblem
from conv_harness.running.loader import load_implementation
from conv_harness.triage.catalog import Bug, merge
from conv_harness.triage.explain import explain, failure_probe, matches
from conv_harness.triage.runner import RUNNER
from tests.harness.runs import suite_in_process, triaged

TWO_BUGS = Path(__file__).resolve().parent / "two_bugs.py"


def problem(**changes) -> ConvProblem:
    base = dict(op="conv2d", batch=1, in_channels=1, out_channels=1, input_size=(1, 1),
                kernel_size=(1, 1), stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1,
                bias=True, dtype="float64")
    return ConvProblem(**{**base, **changes})


def constant_case(p: ConvProblem, x=0.0, w=1.0, b=0.0, g=1.0) -> ConvCase:
    shapes = p.shapes()
    return ConvCase(problem=p, x=np.full(shapes["x"], x), weight=np.full(shapes["weight"], w),
                    bias=None if shapes["bias"] is None else np.full(shapes["bias"], b),
                    grad_output=np.full(shapes["grad_output"], g))


PADDING_CASE = lambda: constant_case(problem(padding=(1, 1)))  # noqa: E731
STRIDE_CASE = lambda: constant_case(problem(input_size=(4, 1), stride=(3, 3)))  # noqa: E731


# -------------------------------------------------------------- in process

def test_a_property_failure_is_traced_to_the_wrong_result():
    impl = load_implementation("conv_impl.tutorial")
    (failure,) = examine("adjoint", impl, constant_case(problem(padding=(1, 1)), x=1.0))
    assert (failure.check, failure.function) == ("grad_input", "conv2d_backward")
    assert "largest error" in failure.message


def test_a_failure_of_a_derived_call_is_reported_on_its_problem():
    """finite_difference stacks its perturbations into one batch; a forward wrong
    only for batches over 4 is that call's bug, on that stacked problem."""
    impl = load_implementation(f"{TWO_BUGS}:big_batch_only")
    case = constant_case(problem(input_size=(3, 1), bias=False), x=1.0)
    failures = examine("finite_difference", impl, case)
    assert failures and failures[0].check == "forward" and failures[0].function == "conv2d"
    assert failures[0].case.problem.batch > 4


def test_a_wrong_dtype_does_not_hide_a_wrong_value():
    impl = load_implementation(f"{TWO_BUGS}:dtype_and_grad_bias")
    case = constant_case(problem(batch=2, dtype="float32"))
    assert [f.check for f in examine("grad_bias", impl, case)] == ["grad_bias", "dtype"]
    assert [f.check for f in examine("grad_input", impl, case)] == ["dtype"]


def test_the_explanation_of_the_tutorials_stride_bug():
    impl = load_implementation("conv_impl.tutorial")
    case = STRIDE_CASE()
    (failure,) = examine("grad_input", impl, case)
    explanation = explain(case, failure_probe(impl, failure, None), impl.capabilities)
    rows = {row.feature: row for row in explanation.rows}
    assert sorted(rows["stride"].passes) == [1, 2] and sorted(rows["stride"].fails) == [3, 4]
    assert rows["outputs"].passes == (1,)  # one output along the strided axis: nothing to space
    assert not rows["padding"].fails or 0 in rows["padding"].fails
    for independent in ("batch", "dtype", "layout", "in_channels", "out_channels", "kernel"):
        assert not rows[independent].passes, rows[independent]
    assert [c.text() for c in explanation.trigger] == ["stride >= 3", "outputs >= 2"]
    line = explanation.one_line()
    assert line.startswith("fails when stride >= 3 and outputs >= 2")
    assert "independent of batch, dtype" in line
    # repeatable: a fixed seed, a bounded number of calls
    again = explain(case, failure_probe(impl, failure, None), impl.capabilities)
    assert again == explanation and explanation.calls <= 240


def test_the_trigger_is_a_predicate_on_problems():
    impl = load_implementation("conv_impl.tutorial")
    case = PADDING_CASE()
    (failure,) = examine("grad_input", impl, case)
    explanation = explain(case, failure_probe(impl, failure, None), impl.capabilities)
    assert [c.text() for c in explanation.trigger] == ["padding >= 1"]
    assert matches(list(explanation.trigger), problem(padding=(2, 2), input_size=(3, 3)), {})
    assert not matches(list(explanation.trigger), problem(input_size=(4, 4), stride=(3, 3)), {})


def _bug(check: str, conditions, params: ConvProblem, failure="grad_input") -> Bug:
    from conv_harness.triage.explain import Condition
    return Bug(check=check, failure=failure, function="conv2d_backward", op="conv2d",
               params=params.params(), layouts={}, trigger="",
               conditions=[Condition(*c) for c in conditions], explanation=[], case_file=None)


def test_one_bug_seen_by_six_checks_is_one_entry_and_two_bugs_stay_two():
    padding = [("padding", ">=", 1, None)]
    stride = [("stride", ">=", 3, None), ("outputs", ">=", 2, None)]
    checks = ["grad_input", "adjoint", "linearity", "finite_difference", "pointwise",
              "delta_kernel"]
    found = [_bug(c, padding, problem(padding=(1, 1))) for c in checks]
    found += [_bug(c, stride, problem(input_size=(4, 4), stride=(3, 3))) for c in checks[:3]]
    found.append(_bug("grad_input", [], problem(dtype="float32"), failure="dtype"))
    entries = merge(found, checks)
    assert sorted((e.failure, e.conditions[0].feature if e.conditions else None, e.checks)
                  for e in entries) == [("dtype", None, ["grad_input"]),
                                        ("grad_input", "padding", checks),
                                        ("grad_input", "stride", checks[:3])]


# -------------------------------------------------------------- whole runs

def run_summary(run_pytest, tmp_path, *args: str) -> tuple[dict, Path, str]:
    failures = tmp_path / "failures"
    done = run_pytest(*args, "--conv-failures", failures)
    assert done.returncode == 1, done.stdout[-4000:] + done.stderr[-2000:]
    summary = json.loads((failures / "summary.json").read_text())
    return summary, failures, done.stdout


def in_process(tmp_path, monkeypatch, spec: str, checks: tuple[str, ...],
               budget: float | None = None) -> tuple[list[dict], Path, str]:
    """The bug entries of a run of ``checks`` on conv2d made in this process, as a run
    without xdist makes them (conv_harness/run.py), with the failures folder
    and the output (reports and bug list)."""
    failures = tmp_path / "failures"
    bugs, out = triaged(spec, checks, ("conv2d",), failures, budget=budget)
    return bugs, failures, out


def script_exits_1(script: Path, cwd: Path) -> None:
    """``python script`` from ``cwd`` exits 1. Run by the harness's script server (a fork
    of a process that has imported NumPy and torch: not a torch import per script);
    any other exit fails, shown beside the exit of the script in a fresh interpreter
    and that run's whole output."""
    code, out = RUNNER.run(script, 300, cwd=cwd)
    if code != 1:
        fresh = subprocess.run([sys.executable, str(script)], cwd=cwd, capture_output=True,
                               text=True, timeout=300)
        pytest.fail(f"{script.name}: exit {code} in the script server, {fresh.returncode} "
                    f"in a fresh python\n{fresh.stdout[-3000:]}{fresh.stderr[-3000:]}")


def scripts_exit_1(failures: Path, bugs: list[dict]) -> None:
    for bug in bugs:
        script_exits_1(failures / Path(bug["case_file"]).with_suffix(".py"), failures)


def minimal(bug: dict) -> dict:
    return bug["params"]


@pytest.mark.parametrize("spec, checks, expected", [
    ("two_grad_input_bugs", ("grad_input",),
     [("grad_input", "padding"), ("grad_input", "dilation")]),
    ("dtype_and_grad_bias", ("grad_input", "grad_bias"),
     [("dtype", "dtype"), ("grad_bias", "batch", "bias")]),
    ("two_forward_bugs", ("forward",),
     [("forward", "stride"), ("forward", "groups")]),
])
def test_two_independent_bugs_are_two_minimal_entries(tmp_path, monkeypatch, spec, checks,
                                                     expected):
    bugs, failures, _ = in_process(tmp_path, monkeypatch, f"{TWO_BUGS}:{spec}", checks)
    seen = sorted((b["failure"], *[c["feature"] for c in b["conditions"]]) for b in bugs)
    assert seen == sorted(expected), bugs
    for bug in bugs:
        p = minimal(bug)
        feature = bug["conditions"][0]["feature"]
        # minimal: one channel per group, batch 1 (unless the bug needs more), no extras
        assert p["batch"] == (2 if feature == "batch" else 1)
        assert p["in_channels"] == p["out_channels"] == (2 if feature == "groups" else 1)
        assert p["kernel_size"] == [1, 1]
        assert p["dtype"] == ("float32" if feature == "dtype" else "float64")
        others = {"padding": [0, 0], "dilation": [1, 1], "stride": [1, 1]}
        for name, trivial in others.items():
            if name != feature:
                assert p[name] == trivial, (name, p)
            else:
                assert sorted(p[name]) == sorted([trivial[0], trivial[0] + 1]), (name, p)
    scripts_exit_1(failures, bugs)


@pytest.mark.long
def test_a_single_bug_seen_by_many_checks_is_one_entry(tmp_path, monkeypatch):
    every_check = tuple(check for check in REGISTRY if check != "invalid")  # opt-in
    bugs, failures, _ = in_process(tmp_path, monkeypatch, f"{TWO_BUGS}:one_bug", every_check)
    (bug,) = bugs
    assert bug["failure"] == "grad_input" and len(bug["checks"]) >= 2
    scripts_exit_1(failures, [bug])


def test_a_stacked_batch_failure_is_reported_on_the_stacked_batch(tmp_path, monkeypatch):
    bugs, failures, out = in_process(tmp_path, monkeypatch, f"{TWO_BUGS}:big_batch_only",
                                     ("finite_difference",))
    (bug,) = bugs
    assert (bug["failure"], bug["function"], bug["check"]) == ("forward", "conv2d",
                                                              "finite_difference")
    assert minimal(bug)["batch"] > 4
    assert bug["trigger"].startswith("fails when batch >= 5")
    assert "derived from the one it drew" in out
    record = json.loads((failures / bug["case_file"]).read_text())
    assert record["run_check"] == "forward" and record["params"]["batch"] > 4
    scripts_exit_1(failures, [bug])


@pytest.mark.long
def test_each_implementation_has_its_own_database_entries(run_pytest, tmp_path):
    """Run A (stride 3 bug), then B (stride 2 bug) with the same database: B's case is
    its own minimal one, not A's replayed unshrunk."""
    db = tmp_path / "db"
    for name, spec in (("a", "conv_impl.tutorial:stride_bug_only"),
                       ("b", f"{TWO_BUGS}:stride2_bug")):
        folder = tmp_path / name
        done = run_pytest("--impl", spec, "-k", "test_grad_input and conv2d]",
                          "--conv-db", db, "--conv-failures", folder)
        assert done.returncode == 1, done.stdout[-3000:]
        (bug,) = json.loads((folder / "summary.json").read_text())["implementations"][0]["bugs"]
        p = bug["params"]
        # On the axis that shows the bug: its own stride (A's 3, B's 2) with exactly two
        # outputs and no remainder, the minimum. Input 3 (B) or 4 (A) without padding, or
        # input 1 with padding 1 (B): which of these two minima the shrinker reaches
        # depends on its path, not on the bug.
        stride = 3 if name == "a" else 2
        axes = [i for i, s in enumerate(p["stride"]) if s == stride
                and _outputs(p, i) == 2
                and p["input_size"][i] + 2 * p["padding"][i] == stride + _reach(p, i)]
        assert axes and max(p["stride"]) == stride, p


def _reach(p: dict, axis: int) -> int:
    """The dilated kernel's extent on ``axis``."""
    return p["dilation"][axis] * (p["kernel_size"][axis] - 1) + 1


def _outputs(p: dict, axis: int) -> int:
    return (p["input_size"][axis] + 2 * p["padding"][axis] - _reach(p, axis)) \
        // p["stride"][axis] + 1


def test_max_bugs_and_printing_the_script_are_options(run_pytest, tmp_path):
    summary, failures, out = run_summary(
        run_pytest, tmp_path, "--impl", "conv_impl.tutorial", "-k",
        "test_grad_input and conv2d]", "--conv-max-bugs", "1", "--conv-print-scripts")
    (bug,) = summary["implementations"][0]["bugs"]
    assert "found 1 distinct bug (stopped at --conv-max-bugs 1)" in out
    script = (failures / bug["case_file"]).with_suffix(".py").read_text()
    assert script.rstrip("\n") in out


SLOW = Path(__file__).resolve().parent / "slow.py"


def _examples(summary: dict) -> int:
    return summary["implementations"][0]["examples"]


def test_a_slow_implementation_gets_a_verdict_within_its_budget(tmp_path):
    """0.1 s a call: the profile's 100 examples would take 10 s or more; a 2 s budget
    stops the search early (the summary says how many examples it got)."""
    done = suite_in_process(f"{SLOW}:correct", ("forward",), ("conv2d",), tmp_path / "f",
                            budget=2)
    assert done.passed, done.text[-3000:]
    assert 0 < _examples(done.summary) < 60, done.summary
    assert re.search(r"forward\s+passed \(\d+\)", done.text), done.text[-2000:]


@pytest.mark.long
def test_a_slow_buggy_implementation_still_gets_its_minimal_case(tmp_path, monkeypatch):
    """0.05 s a call: a 10 s budget is some 200 calls, which the search and its shrinking
    fit in (measured: the same case with a 6 s budget, 187 calls in all)."""
    bugs, failures, _ = in_process(tmp_path, monkeypatch, f"{SLOW}:buggy", ("grad_input",),
                                   budget=10)
    (bug,) = bugs
    assert bug["params"]["stride"][0] == 3 or bug["params"]["stride"][1] == 3
    scripts_exit_1(failures, [bug])


def test_results_that_depend_on_earlier_calls_are_reported_as_such(run_pytest, tmp_path,
                                                                    monkeypatch):
    """A cache keyed by shape: a later call gets an earlier call's weight. The failing
    call alone, in a fresh process, passes; the bug is reported as history-dependent,
    with a sequence of calls rebuilt whose script fails in a fresh process."""
    spec = f"{Path(__file__).resolve().parent / 'history.py'}:shape_cache"
    bugs, failures, out = in_process(tmp_path, monkeypatch, spec, ("forward",))
    (bug,) = bugs
    assert bug["failure"] == "history" and bug["reproduces_alone"] is True
    assert bug["trigger"].startswith("depends on earlier calls: wrong after a call on the "
                                     "same problem with other values")
    assert "RESULTS DEPEND ON EARLIER CALLS" in out
    record = json.loads((failures / bug["case_file"]).read_text())
    assert [call["function"] for call in record["before"]] == ["conv2d"]
    scripts_exit_1(failures, [bug])
    # the single-call case file it replaces is gone; a replay makes the calls first
    assert [p.name for p in failures.glob("*.json") if p.name != "summary.json"] == [
        Path(bug["case_file"]).name]
    again = run_pytest("--replay", failures / bug["case_file"])
    assert again.returncode == 1 and "still fails" in again.stdout, again.stdout[-2000:]


def test_a_history_bug_is_rebuilt_on_the_plainest_problem_only_where_that_shows_it(
        tmp_path, monkeypatch):
    """Hypothesis cannot shrink results that depend on earlier calls; the sequence
    rebuilt for them is tried on the plainest problem too. A weight cache on a blocked
    path (two input channels or more) does not show there: its case keeps the
    channels, and its script still fails."""
    spec = f"{Path(__file__).resolve().parent / 'history.py'}:blocked_shape_cache"
    bugs, failures, out = in_process(tmp_path, monkeypatch, spec, ("forward",))
    (bug,) = bugs
    assert bug["failure"] == "history" and bug["reproduces_alone"] is True, bug
    assert bug["params"]["in_channels"] // bug["params"]["groups"] >= 2, bug
    assert "on the plainest problem" not in out
    record = json.loads((failures / bug["case_file"]).read_text())
    assert record["params"] == bug["params"], record
    scripts_exit_1(failures, [bug])


def test_first_call_right_repeated_calls_wrong(tmp_path, monkeypatch):
    spec = f"{Path(__file__).resolve().parent / 'history.py'}:second_call_wrong"
    bugs, failures, out = in_process(tmp_path, monkeypatch, spec, ("forward",))
    (bug,) = bugs
    assert bug["failure"] == "history", bug
    assert bug["trigger"].startswith("depends on earlier calls: wrong after the same call "
                                     "made once before")
    assert "Flaky" not in out and "Unreliable" not in out
    scripts_exit_1(failures, [bug])


def test_every_listed_bug_was_verified_alone(tmp_path, monkeypatch):
    bugs, _, _ = in_process(tmp_path, monkeypatch, "conv_impl.tutorial", ("grad_input",))
    assert [b["reproduces_alone"] for b in bugs] == [True, True]


ORACLE_FREE = ("adjoint", "linearity", "finite_difference", "pointwise", "delta_kernel",
               "repeatable", "batch_consistency")


@pytest.mark.long
def test_batch_consistency_sees_images_mixed_up_where_the_adjoint_does_not(tmp_path,
                                                                           monkeypatch):
    from conv_harness.searching import search

    searches = []  # each follow-up search: its check, exclusions, focus and calls
    made = search.follow_up

    def follow_up(state, target, check, known, focus=None, tries=1):
        searches.append((check, tuple(map(id, known)), focus, tries))
        return made(state, target, check, known, focus, tries)

    monkeypatch.setattr(search, "follow_up", follow_up)
    bugs, failures, out = in_process(tmp_path, monkeypatch, f"{TWO_BUGS}:batch_swap",
                                     ORACLE_FREE)
    # batch_consistency meets linearity's grad_input cause, tied to it by its evidence
    # (the exact gradient of the wrong forward), whose region a further search keeps
    # open: met once, not shrunk to again in every round until --conv-max-bugs
    sightings = [block.split("\n")[:2] for block in out.split("--- a known bug again")[1:]]
    assert len(sightings) == len({tuple(s) for s in sightings}), sightings
    # ... and, the searches derandomised, not searched for again with the same
    # exclusions (the same examples: the same sighting first)
    assert len(searches) == len(set(searches)), searches
    assert "stopped at --conv-max-bugs" not in out, out[-3000:]
    seen = {check for bug in bugs for check in bug["checks"]}
    assert "batch_consistency" in seen
    assert not seen & {"adjoint", "finite_difference", "pointwise", "delta_kernel", "repeatable"}
    found = [b for b in bugs if b["check"] == "batch_consistency"] or \
        [b for b in bugs if "batch_consistency" in b["checks"]]
    assert found[0]["failure"] in ("forward", "grad_input") and found[0]["params"]["batch"] >= 3
    scripts_exit_1(failures, bugs)


def test_a_further_search_that_ends_on_an_error_says_so(monkeypatch, tmp_path):
    """An error that is no finding (every problem excluded, a health check, a harness
    error) is not "found nothing else": the search says what ended it."""
    from hypothesis import settings as hypothesis_settings

    from conv_harness.searching import suite
    from conv_harness.running.target import Target
    from conv_harness.searching.state import TestState
    from conv_harness.searching import search

    def broken(*args, **kwargs):
        raise RuntimeError("the harness broke\nsecond line")

    monkeypatch.setattr(suite, "run", broken)
    target = Target(load_implementation("conv_impl.einsum"), "conv2d", None, tmp_path)
    before = hypothesis_settings._current_profile
    hypothesis_settings.register_profile("follow-up-error", hypothesis_settings.default,
                                         database=None, max_examples=5)
    hypothesis_settings.load_profile("follow-up-error")
    try:
        found, ended = search.follow_up(TestState(), target, "forward", [])
    finally:
        hypothesis_settings.load_profile(before)
    assert found == [] and ended == "RuntimeError: the harness broke"


def test_a_seeded_test_gives_each_follow_up_search_a_seed_of_its_own(monkeypatch, tmp_path):
    """`search_in_process`'s seed reaches its follow-up searches, as a default run's
    random seeds do: each draws from a seed derived from the test's and its own key,
    the same for the same seed; without one, the profile's derandomised draw."""
    from hypothesis import settings as hypothesis_settings
    from hypothesis import strategies as st

    from conv_harness.searching import suite
    from conv_harness.running.target import Target
    from conv_harness.searching.state import TestState
    from conv_harness.searching import search
    from conv_harness.run import profile

    target = Target(load_implementation("conv_impl.einsum"), "conv2d", None, tmp_path)
    drawn: list[int] = []
    monkeypatch.setattr(suite, "run", lambda target, check, data, **kwargs: drawn.append(
        data.draw(st.integers(0, 2**30))))
    hypothesis_settings.register_profile("follow-up-draws", hypothesis_settings.default,
                                         database=None, derandomize=True, max_examples=5)

    def draws(seed: int | None, tries: int = 1) -> list[int]:
        drawn.clear()
        with profile("follow-up-draws"):
            assert search.follow_up(TestState(seed=seed), target, "forward", [],
                                    tries=tries) == ([], None)
        return list(drawn)

    assert draws(1) == draws(1) != draws(2)
    assert draws(1, tries=8) != draws(1)  # another search, another seed
    assert draws(None) == draws(None) not in (draws(1), draws(2))
    # seeds that differ only above their low 32 bits (`hypothesis.seed` takes any int)
    assert draws(2**40 + 1) not in (draws(1), draws(2**41 + 1))
    assert search.follow_up_seed(b"k", 7) != search.follow_up_seed(b"k", 2**32 + 7)


def test_a_search_is_taken_to_draw_again_only_while_the_book_of_causes_is_unchanged(
        tmp_path):
    """A seeded or derandomised triage excludes a sighting met once at once, as the next
    search would draw the same examples and meet it first (`_draws_again`). Not once
    another process (an xdist worker) has published a cause since the last search
    froze the book: the same examples may then be sightings of it, or rejected."""
    from conv_harness.searching.state import RunState, TestState
    from conv_harness.searching import search
    from conv_harness.triage.causes import CauseBook

    run = RunState()
    run.book.open(tmp_path, "one-run")
    state = TestState(run=run, seed=1)
    run.book.freeze()
    assert search._draws_again(state)
    mine = Bug(check="forward", failure="forward", function="conv2d", op="conv2d",
               params=problem().params(), layouts={}, trigger="", conditions=[],
               explanation=[], case_file=None, cause="mine")
    run.book.publish("impl.py", mine)  # what this search found: known to its next one
    assert search._draws_again(state)
    other = CauseBook()  # another worker's view of the same run
    other.open(tmp_path, "one-run")
    other.publish("impl.py", dataclasses.replace(mine, cause="theirs"))
    assert not search._draws_again(state)
    run.book.freeze()  # the next search sees it
    assert search._draws_again(state)
