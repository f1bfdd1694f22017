"""One entry per root cause (issue 21): implementations whose causes show in several
functions, checks and kinds of failure (tests/harness/causes_bugs.py) give exactly
as many entries as they have causes, each minimal, with a script that exits 1.

In-process tests pin the pieces: the evidence, the merge rules, the explanation's
masked changes, its product trigger, a trivial value a bug needs, the run-wide
book of causes, the script runner.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from harness.checks.registry import examine
from harness.descriptor import format_descriptor, parse_descriptor
from harness.problem import ConvProblem
from harness.running.loader import load_implementation
from harness.triage import causes, evidence
from harness.triage.catalog import Bug, merge, part_of, signature
from harness.triage.explain import explain, failure_probe
from harness.triage.runner import ScriptRunner
from tests.harness.test_triage import constant_case, problem, scripts_exit_1

CAUSES = Path(__file__).resolve().parent / "causes_bugs.py"


def spec(name: str) -> str:
    return f"{CAUSES}:{name}"


def first_failure(name: str, check: str, case):
    impl = load_implementation(spec(name))
    (failure, *_) = examine(check, impl, case)
    return impl, failure


# -------------------------------------------------------------- in process

def test_the_descriptor_is_benchdnns():
    # benchdnn's canonical order (ic, its spatial sizes, then oc); the contract's
    # example, written with oc after ic, parses to the same problem
    p = problem(input_size=(4, 1), stride=(3, 1))
    assert format_descriptor(p) == "mb1ic1ih4iw1oc1kh1kw1sh3sw1ph0pw0"
    assert parse_descriptor("mb1ic1oc1ih4iw1kh1kw1sh3sw1ph0pw0", op=p.op, dtype=p.dtype,
                            bias=p.bias) == p
    q = problem(op="conv3d", groups=2, in_channels=2, out_channels=4, input_size=(3, 5, 5),
                kernel_size=(1, 2, 2), stride=(1, 1, 1), padding=(0, 1, 0),
                dilation=(1, 2, 1))
    assert format_descriptor(q) == "g2mb1ic2id3ih5iw5oc4kd1kh2kw2sd1sh1sw1pd0ph1pw0dd0dh1dw0"


def test_a_masked_change_is_shown_as_such_and_stays_out_of_the_trigger():
    """The dtype bug's minimal problem has padding 1: at padding 0 the same call raises
    (another bug). That change is 'raised', not a pass, and padding is not needed."""
    case = constant_case(problem(padding=(1, 1), dtype="float32"))
    impl, failure = first_failure("masking", "grad_input", case)
    assert failure.check == "dtype"
    explanation = explain(case, failure_probe(impl, failure, None), impl.capabilities)
    rows = {row.feature: row for row in explanation.rows}
    assert dict(rows["padding"].other) == {0: "raised"}
    assert 0 not in rows["padding"].passes
    assert "0:raised" in explanation.table()
    assert [c.text() for c in explanation.trigger] == ["dtype in {float16, float32}"]


def test_a_bug_on_the_simplest_problem_names_the_trivial_value_it_needs():
    case = constant_case(problem())
    impl, failure = first_failure("shapes", "grad_input", case)
    explanation = explain(case, failure_probe(impl, failure, None), impl.capabilities)
    (condition,) = explanation.trigger
    assert condition.text() == "padding = 0 on every axis"
    # the other shape bug's problems (padding on one axis) are outside its region
    assert not Bug(check="grad_input", failure="shape", function="conv2d_backward",
                   op="conv2d", params=problem().params(), layouts={}, trigger="",
                   conditions=[condition], explanation=[], case_file=None).region_holds(
        constant_case(problem(padding=(1, 0), input_size=(2, 1), stride=(2, 1))))


@pytest.mark.parametrize("minimal", [dict(in_channels=2), dict(kernel_size=(2, 1),
                                                                input_size=(2, 1))])
def test_a_condition_on_a_product_is_stated_as_k(minimal):
    case = constant_case(problem(**minimal), b=1.0)
    impl, failure = first_failure("product_bias", "forward", case)
    explanation = explain(case, failure_probe(impl, failure, None), impl.capabilities)
    assert [c.text() for c in explanation.trigger] == [
        "with bias", "K (in channels per group x kernel taps) >= 2"]
    assert explanation.one_line().startswith("fails when with bias and K (in channels")


def test_evidence_of_a_lower_precision_and_of_an_inherited_backward():
    case = constant_case(problem(), x=0.1, w=0.3)
    impl, failure = first_failure("float32_compute", "forward", case)
    assert evidence.gather(impl, failure, case, None) == {"precision": "float32"}
    case = constant_case(problem(stride=(2, 2)), x=1.0)
    impl, failure = first_failure("nd_two_causes", "grad_input", case)
    assert evidence.gather(impl, failure, case, None) == {"forward_fails": True,
                                                          "consistent": True}
    # the tutorial's backward is its own bug: the forward is right
    tutorial = load_implementation("conv_impl.tutorial")
    case = constant_case(problem(input_size=(4, 1), stride=(3, 3)), x=1.0)
    (failure,) = examine("grad_input", tutorial, case)
    assert evidence.gather(tutorial, failure, case, None) == {"forward_fails": False,
                                                              "consistent": False}


def _bug(failure, function, p, conditions=(), **kw) -> Bug:
    from harness.triage.explain import Condition
    return Bug(check=kw.pop("check", "forward"), failure=failure, function=function, op=p.op,
               params=p.params(), layouts={}, trigger="t",
               conditions=[Condition(*c) for c in conditions], explanation=[],
               case_file=None, **kw)


def test_symptoms_merge_into_their_cause_and_independent_bugs_stay_apart():
    stride = [("stride", ">=", 2, None)]
    conv1 = problem(op="conv1d", input_size=(1,), kernel_size=(1,), stride=(2,), padding=(0,),
                    dilation=(1,))
    found = [
        _bug("forward", "conv2d", problem(stride=(2, 2)), stride, signature="forward"),
        _bug("forward", "conv1d", conv1, stride, signature="forward"),
        _bug("grad_input", "conv2d_backward", problem(stride=(2, 2)), [("kernel", ">=", 2, None)],
             evidence={"forward_fails": True, "consistent": True}, check="grad_input"),
        _bug("raised", "conv2d", problem(dilation=(2, 1)), [("dilation", ">=", 2, None)],
             signature="raised ValueError: no"),
        _bug("raised", "conv3d_backward", problem(dilation=(2, 1)), [("dilation", ">=", 2, None)],
             signature="raised ValueError: no"),
        _bug("raised", "conv1d", problem(dilation=(2, 1)), [("dilation", ">=", 2, None)],
             signature="raised TypeError: other"),  # another message: another cause
        _bug("nonfinite", "conv2d", problem(stride=(3, 3), input_size=(4, 1))),
        _bug("grad_bias", "conv2d_backward", problem(batch=2), [("batch", ">=", 2, None)]),
    ]
    entries = merge(found, ["forward", "grad_input", "grad_bias"])
    assert sorted((e.failure, tuple(sorted(e.functions))) for e in entries) == [
        ("forward", ("conv1d", "conv2d", "conv2d_backward")),
        ("grad_bias", ("conv2d_backward",)),
        ("raised", ("conv1d",)),
        ("raised", ("conv2d", "conv3d_backward"))]
    forward = next(e for e in entries if e.failure == "forward")
    assert forward.op == "conv1d" or forward.params["stride"] == [2, 2]
    # a dtype cause takes value errors of its precision, not others
    dtype = _bug("dtype", "conv2d", problem(), signature="returns float32")
    assert part_of(_bug("grad_weight", "conv2d_backward", problem(),
                        evidence={"precision": "float32"}), dtype)
    assert not part_of(_bug("grad_bias", "conv2d_backward", problem(batch=2)), dtype)


def test_signatures_do_not_depend_on_the_function_or_sizes():
    assert signature("raised", "conv2d raised ValueError: bad size 3 (at x.py:12)") == \
        signature("raised", "conv3d_backward raised ValueError: bad size 7 (at x.py:12)")
    assert signature("dtype", "conv1d's result has dtype float32; inputs are float64") == \
        signature("dtype", "conv1d_backward's grad_input has dtype float32; inputs are "
                           "float16") == "returns float32"


def test_the_book_of_causes_is_shared_through_the_folder(tmp_path, monkeypatch):
    monkeypatch.delenv(causes.RUN_ENV, raising=False)
    causes.new_run(tmp_path)
    one, two = causes.CauseBook(), causes.CauseBook()  # two workers
    one.open(tmp_path)
    two.open(tmp_path)
    bug = _bug("forward", "conv2d", problem(stride=(2, 2)), [("stride", ">=", 2, None)],
               signature="forward", cause="c1")
    one.publish("mine.py", bug)
    (known,) = two.known("mine.py")
    assert known.cause == "c1" and known.conditions == bug.conditions
    assert two.known("other.py") == []
    # a new run starts with none
    causes.new_run(tmp_path)
    three = causes.CauseBook()
    three.open(tmp_path)
    assert three.known("mine.py") == []


def test_scripts_run_in_forked_children_with_their_own_exit_codes(tmp_path):
    runner = ScriptRunner()
    try:
        for code, text in ((0, "ok"), (1, "FAILED: wrong"), (3, "other")):
            script = tmp_path / f"s{code}.py"
            script.write_text(f"import sys\nprint({text!r})\nsys.exit({code})\n")
            assert runner.run(script, 60) == (code, text + "\n")
        # each child starts from the server's state, not the previous child's
        state = tmp_path / "state.py"
        state.write_text("import sys\nprint(hasattr(sys, 'seen'))\nsys.seen = 1\n")
        assert runner.run(state, 60) == runner.run(state, 60) == (0, "False\n")
        hang = tmp_path / "hang.py"
        hang.write_text("import time\ntime.sleep(60)\n")
        assert runner.run(hang, 0.5)[0] is None
    finally:
        runner.close()


# -------------------------------------------------------------- whole runs

def entries(run_pytest, tmp_path, name: str, selection: str) -> tuple[list[dict], Path, str]:
    failures = tmp_path / "failures"
    done = run_pytest("--impl", spec(name), "-k", selection, "--conv-failures", failures,
                      timeout=900)  # several searches, on a machine that may be loaded
    assert done.returncode == 1, done.stdout[-4000:] + done.stderr[-2000:]
    summary = json.loads((failures / "summary.json").read_text())
    return summary["implementations"][0]["bugs"], failures, done.stdout


def test_one_code_path_many_functions_is_two_entries(run_pytest, tmp_path):
    bugs, failures, out = entries(
        run_pytest, tmp_path, "nd_two_causes",
        "(test_forward or test_grad_input) and (conv1d] or conv3d])")
    assert sorted(b["failure"] for b in bugs) == ["forward", "raised"], bugs
    forward = next(b for b in bugs if b["failure"] == "forward")
    raised = next(b for b in bugs if b["failure"] == "raised")
    assert len(forward["functions"]) >= 3 and len(raised["functions"]) >= 3, bugs
    assert {"conv1d_backward", "conv2d_backward", "conv3d_backward"} & set(forward["functions"])
    assert forward["params"]["stride"][-1] == 2 and 2 in raised["params"]["dilation"], bugs
    for bug in bugs:
        p = bug["params"]
        assert p["batch"] == p["in_channels"] == p["out_channels"] == 1, p
        # benchdnn's canonical order: mb, ic, the input's sizes, then oc
        assert re.fullmatch(r"mb1ic1(i[dhw]\d+)+oc1k.*", bug["descriptor"]), bug
        assert parse_descriptor(bug["descriptor"], op=bug["op"], dtype=p["dtype"],
                                bias=p["bias"]) == ConvProblem.from_params(bug["op"], p)
        assert bug["reproduces_alone"] is True, bug
    scripts_exit_1(failures, bugs)


def test_a_dtype_cause_and_its_value_errors_are_one_entry(run_pytest, tmp_path):
    bugs, failures, _ = entries(run_pytest, tmp_path, "float32_compute",
                                "conv2d] and (test_forward or test_grad_input or "
                                "test_grad_weight)")
    (bug,) = bugs
    assert set(bug["functions"]) == {"conv2d", "conv2d_backward"}, bug
    assert bug["params"]["batch"] == 1 and bug["params"]["in_channels"] == 1
    scripts_exit_1(failures, bugs)


def test_a_cause_hidden_behind_a_lower_precision_is_found(run_pytest, tmp_path):
    """Issue 11's case: float32 whatever the input, and grad_bias the batch mean."""
    bugs, failures, _ = entries(run_pytest, tmp_path, "float32_and_mean",
                                "conv2d] and (test_forward or test_grad_bias)")
    assert len(bugs) == 2, bugs
    mean = [b for b in bugs if b["failure"] == "grad_bias"]
    assert mean and mean[0]["params"]["batch"] == 2, bugs
    assert mean[0]["trigger"].startswith("fails when batch >= 2")
    scripts_exit_1(failures, bugs)


def test_a_product_condition_is_one_entry(run_pytest, tmp_path):
    bugs, failures, _ = entries(run_pytest, tmp_path, "product_bias",
                                "test_forward and conv2d]")
    (bug,) = bugs
    assert bug["trigger"].startswith("fails when with bias and K (in channels per group x "
                                     "kernel taps) >= 2")
    p = bug["params"]
    assert (p["in_channels"], p["kernel_size"]) in ((2, [1, 1]), (1, [2, 1]), (1, [1, 2]))
    scripts_exit_1(failures, bugs)


def test_masking_gives_no_false_condition(run_pytest, tmp_path):
    bugs, failures, _ = entries(run_pytest, tmp_path, "masking", "test_grad_input and conv2d]")
    assert sorted(b["failure"] for b in bugs) == ["dtype", "raised"], bugs
    dtype = next(b for b in bugs if b["failure"] == "dtype")
    assert "padding" not in [c["feature"] for c in dtype["conditions"]], dtype
    scripts_exit_1(failures, bugs)


def test_no_cause_is_hidden_by_another_of_its_kind(run_pytest, tmp_path):
    bugs, failures, _ = entries(run_pytest, tmp_path, "shapes", "test_grad_input and conv2d]")
    assert [b["failure"] for b in bugs] == ["shape", "shape"], bugs
    empty, short = sorted(bugs, key=lambda b: sum(b["params"]["padding"]))
    assert empty["params"]["padding"] == [0, 0] and empty["params"]["input_size"] == [1, 1]
    assert short["params"]["stride"] != [1, 1]
    scripts_exit_1(failures, bugs)


def test_a_read_past_the_buffer_is_one_entry(run_pytest, tmp_path):
    """Wrong, non-finite and history-dependent results of one cause: one entry. Its
    case is minimal, or the entry says it is not and why (a failure that does not
    repeat cannot be shrunk); its script exits 1, or the entry says it does not."""
    bugs, failures, out = entries(run_pytest, tmp_path, "read_past",
                                  "conv2d] and (test_grad_input or test_repeatable)")
    (bug,) = bugs
    assert bug["params"]["stride"][0] >= 2, bug
    if bug["minimal"]:
        assert bug["params"]["kernel_size"] == [1, 1], bug
    else:
        assert bug["failure"] == "history" and "not shrunk" in bug["not_minimal_because"]
        assert "NOT MINIMAL" in out
    if bug["reproduces_alone"] is True:
        scripts_exit_1(failures, bugs)
    else:
        assert bug["reproduces_alone_reason"] and "DOES NOT REPRODUCE ALONE" in out
