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

import numpy as np
import pytest

from conv_harness.checks.registry import examine
from conv_harness.descriptor import format_descriptor, parse_descriptor
from conv_harness.problem import ConvCase, ConvProblem, in_fewer_dimensions
from conv_harness.running.loader import load_implementation
from conv_harness.running.capabilities import Capabilities
from conv_harness.triage import boundary, causes, evidence
from conv_harness.triage.catalog import Bug, merge, part_of, signature
from conv_harness.triage.explain import Row, explain, failure_probe
from conv_harness.triage.runner import ScriptRunner
from tests.harness.runs import triaged
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


def _known_empty_grad_input():
    """The shapes module and a `covers` of its first bug (grad_input empty without
    padding), as the run's book holds it once explained."""
    empty = constant_case(problem())
    impl, failure = first_failure("shapes", "grad_input", empty)
    region = explain(empty, failure_probe(impl, failure, None), impl.capabilities)
    record = Bug(check="grad_input", failure="shape", function="conv2d_backward",
                 op="conv2d", params=problem().params(), layouts={}, trigger="",
                 conditions=list(region.trigger), explanation=[], case_file=None,
                 cause="empty")
    return impl, lambda failure, case: causes.covers(record, failure, case, impl, None)


@pytest.mark.parametrize("minimal", [dict(input_size=(1, 2), padding=(0, 1), stride=(1, 2)),
                                     dict(input_size=(1, 1), padding=(0, 1), stride=(1, 3))])
def test_a_change_into_a_known_causes_region_is_masked_and_stays_out_of_the_trigger(minimal):
    """The shapes module's second bug (grad_input short by the stride's remainder), with
    its first (empty without padding) known. A change to padding 0 on every axis fails
    the same way, by the known bug: 'known bug', not a FAIL, and not the smaller case.
    Without that, the input size with padding realised unpadded 'fails' too, and the
    trigger reads 'input size with padding >= 4' where the bug needs a remainder. Both
    minimal problems the searches reach get the one trigger, so their entries merge."""
    impl, known = _known_empty_grad_input()
    case = constant_case(problem(**minimal))
    impl, failure = first_failure("shapes", "grad_input", case)
    assert failure.check == "shape"
    if minimal["stride"] == (1, 2):
        blind = explain(case, failure_probe(impl, failure, None), impl.capabilities)
        assert "extent" in [c.feature for c in blind.trigger]
    seen = explain(case, failure_probe(impl, failure, None, known), impl.capabilities)
    padding = next(row for row in seen.rows if row.feature == "padding")
    assert dict(padding.other) == {0: "known bug"} and 0 not in padding.fails
    assert "0:known bug" in seen.table()
    assert sorted(c.text() for c in seen.trigger) == ["stride >= 2", "stride remainder >= 1"]
    assert seen.smaller is None or not known(failure, seen.smaller)


def test_a_smaller_stride_keeps_the_remainder_with_more_outputs():
    """Stride 3, remainder 2 on one input position padded by 1: stride 2 on the same
    input leaves no remainder, so a remainder bug would pass there and read as a
    'stride >= 3' bug. The change keeps the remainder (1, the most stride 2 leaves)
    with one output more; a remainder of 0 or 1 at stride 3 is made so too."""
    from conv_harness.triage import features as ft
    p = problem(input_size=(1, 1), padding=(0, 1), stride=(1, 3))
    assert ft.values(p, {})["remainder"] == (0, 2)
    for feature, value, remainder in [("stride", 2, 1), ("remainder", 0, 0),
                                      ("remainder", 1, 1)]:
        q, _ = ft.with_feature(p, {}, feature, value, (1,))
        assert ft.values(q, {})["remainder"][1] == remainder, (feature, value, q)
        assert ft.values(q, {})["outputs"][1] == 2 and q.padding == p.padding


def test_each_change_of_a_failure_that_comes_and_goes_says_in_how_many_calls_it_failed():
    """Issue 34: a problem of a failure that comes and goes is called several times
    (`evidence.Repeated`), any failing counting; the table says how many failed, so
    that a pass is seen to be 0 of all its calls, not one lucky call."""
    calls = iter(range(10**6))

    def every_other_call_with_a_stride(case: ConvCase) -> bool:
        return max(case.problem.stride) >= 2 and next(calls) % 2 == 0

    probe = evidence.Repeated(every_other_call_with_a_stride, 8)
    case = constant_case(problem(input_size=(1, 3), stride=(1, 2)))
    explanation = explain(case, probe, Capabilities())
    assert [c.text() for c in explanation.trigger] == ["stride >= 2"]
    (stride,) = [row for row in explanation.rows if row.feature == "stride"]
    counts = {v: (k, n) for v, k, n in stride.counts}
    assert counts[1] == (0, 16)  # both data variants, every call passing
    assert all(n == 8 and k == 4 for v, (k, n) in counts.items() if v >= 2), counts
    assert "1:pass 0/16" in explanation.table() and "3:FAIL 4/8" in explanation.table()
    assert Row.from_json(stride.to_json()) == stride
    assert probe.last is not None


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


@pytest.mark.parametrize("feature, far, boundary", [("out_channels", 98, 33),
                                                     ("batch", 40, 9)])
def test_a_size_met_far_from_its_boundary_is_bisected_to_it(feature, far, boundary):
    """A bug from a size on, met far above it (a sweep's tie visit made 98 out
    channels, and Hypothesis does not shrink a visit): its single changes pass at 3
    and fail at 97, and the values between are bisected, so that the trigger starts
    at the boundary and the smaller case is there."""
    case = constant_case(problem(**{feature: far}))

    def probe(c: ConvCase) -> bool:
        return getattr(c.problem, feature) >= boundary

    explanation = explain(case, probe, Capabilities())
    label = {"out_channels": "out channels per group", "batch": "batch"}[feature]
    assert [c.text() for c in explanation.trigger] == [f"{label} >= {boundary}"]
    assert getattr(explanation.smaller.problem, feature) == boundary
    row = next(r for r in explanation.rows if r.feature == feature)
    assert boundary - 1 in row.passes and boundary in row.fails


@pytest.mark.parametrize("feature, far, block", [("in_channels", 98, 8),
                                                  ("out_channels", 40, 16),
                                                  ("batch", 10, 4)])
def test_a_partial_block_is_a_tail_not_a_threshold(feature, far, block):
    """A path that takes items in blocks and mishandles a partial one fails from a
    block and one up, but not at two blocks: the trigger says so (``> 8, not a multiple
    of 8``), so that its region does not cover a failure of another cause at 96
    channels. A bug from a size on keeps ``>=`` (test above)."""
    case = constant_case(problem(**{feature: far}))

    def probe(c: ConvCase) -> bool:
        per_group = c.problem.groups if feature.endswith("channels") else 1
        value = getattr(c.problem, feature) // per_group
        return value > block and value % block != 0

    explanation = explain(case, probe, Capabilities())
    label = {"in_channels": "in channels per group", "out_channels": "out channels per group",
             "batch": "batch"}[feature]
    (condition,) = explanation.trigger
    assert condition.text() == f"{label} > {block}, not a multiple of {block}"
    assert [condition.holds(v) for v in (block, block + 1, 2 * block, 6 * block + 1)] == [
        False, True, False, True]
    assert getattr(explanation.smaller.problem, feature) == block + 1


def test_a_product_is_bisected_through_values_another_cause_masks():
    """A float16 path wrong past 2048 products, met at a sweep's K of 4704 (96 channels
    of a 7x7 kernel) beside a known partial block of 8 channels, which masks every
    value of K that channels not a multiple of 8 realise: a value where the kernel's
    taps fail and the channels are masked is above the boundary, and the trigger
    starts at it (it stopped at 2352, half the visit's K)."""
    case = constant_case(problem(in_channels=96, kernel_size=(7, 7), input_size=(7, 7),
                                 dtype="float16"))

    def probe(c: ConvCase) -> bool | str:
        per_group = c.problem.in_channels // c.problem.groups
        if per_group > 8 and per_group % 8:
            return "raised"  # what the known cause covers: masked
        return c.problem.dtype == "float16" and c.problem.forward_terms() > 2048

    explanation = explain(case, probe, Capabilities())
    assert "K (in channels per group x kernel taps) >= 2049" in [
        c.text() for c in explanation.trigger], explanation.one_line()


def test_the_smaller_case_is_the_plainest_in_one_explanation():
    """Issue 34: a sweep visit's case, which Hypothesis did not shrink (batch 2, two
    channels, a 7x7 kernel with padding 3, 98 out channels), of a bug from 33 out
    channels on: its explanation's smaller case has every feature it is independent
    of at its trivial value and the out channels at the boundary, at once, where a
    reshrink per feature would take five rounds."""
    far = problem(batch=2, in_channels=2, out_channels=98, input_size=(4, 4),
                  kernel_size=(7, 7), padding=(3, 3), dtype="float32")

    def probe(c: ConvCase) -> bool:
        return c.problem.out_channels >= 33

    smaller = explain(constant_case(far), probe, Capabilities()).smaller.problem
    assert (smaller.batch, smaller.in_channels, smaller.out_channels) == (1, 1, 33), smaller
    assert (smaller.kernel_size, smaller.padding) == ((1, 1), (0, 0)), smaller.describe()


def test_a_product_condition_tries_the_smaller_values_each_component_can_carry():
    """Issue 34: under square-only capabilities the smallest kernel above one tap has
    four, so a minimal problem with a 2x2 kernel read "K >= 4". Two channels and one
    tap make K = 2, which fails too: the trigger says K >= 2."""
    case = constant_case(problem(kernel_size=(2, 2), input_size=(2, 2)), b=1.0)
    impl, failure = first_failure("product_bias_square", "forward", case)
    explanation = explain(case, failure_probe(impl, failure, None), impl.capabilities)
    assert [c.text() for c in explanation.trigger] == [
        "with bias", "K (in channels per group x kernel taps) >= 2"]
    row = next(r for r in explanation.rows if r.feature == "K")
    assert row.minimal == 4 and {2, 3, 4} <= set(row.fails) and 1 in row.passes


@pytest.mark.parametrize("minimal", [dict(), dict(kernel_size=(1, 2)), dict(stride=(1, 2))],
                         ids=["two outputs", "two taps", "a stride's remainder"])
def test_a_condition_on_the_padded_input_is_stated_as_its_size(minimal):
    """A Winograd tile with a wrong transform entry is wrong once it holds two inputs:
    two outputs, a two-tap kernel or a stride's remainder on one axis are one cause,
    the axis's input size with padding (not three, one per component)."""
    case = constant_case(problem(input_size=(1, 2), bias=False, **minimal), x=1.0)
    impl = load_implementation(f"{CAUSES.parent / 'buggy_algorithms.py'}:winograd_wrong_entry")
    (failure, *_) = examine("forward", impl, case)
    explanation = explain(case, failure_probe(impl, failure, None), impl.capabilities)
    assert [c.text() for c in explanation.trigger] == ["input size with padding >= 2"]
    assert [c.axis for c in explanation.trigger] == [1]


def test_an_output_condition_stays_one_where_the_padded_input_passes():
    """The tutorial's stride-3 grad_input needs two outputs at stride 3: the same
    padded input reached with stride 1 passes, so no input-size condition."""
    case = constant_case(problem(input_size=(1, 4), stride=(1, 3)), x=1.0)
    impl = load_implementation("conv_impl.tutorial")
    (failure, *_) = examine("grad_input", impl, case)
    explanation = explain(case, failure_probe(impl, failure, None), impl.capabilities)
    assert "input size with padding" not in explanation.one_line().split(";")[0]


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


def test_evidence_on_tiny_data_is_not_fooled_by_underflow():
    """A delta_kernel finding of nd_two_causes' strided gather (a run's third entry):
    float32 data of 1e-32, whose products (1e-64) underflow to 0. The backward is still
    the exact gradient of the wrong forward (within what underflow may take), and its
    errors are not "float16 rounding" (float16's flush allowance covers anything there:
    the terms lie below its normal range). The tutorial's stride-3 backward shows an
    inconsistent backward on small, normal products is still told apart."""
    p = problem(input_size=(1, 3), stride=(1, 2), bias=False, dtype="float32")
    case = ConvCase(problem=p, x=np.ones((1, 1, 1, 3), np.float32),
                    weight=np.full((1, 1, 1, 1), -1.1350391e-32, np.float32), bias=None,
                    grad_output=np.array([[[[-1.1350391e-32, -2.2631753e-32]]]], np.float32))
    impl, failure = first_failure("nd_two_causes", "grad_weight", case)
    assert evidence.gather(impl, failure, case, None) == {"forward_fails": True,
                                                          "consistent": True}
    tutorial = load_implementation("conv_impl.tutorial")
    case = constant_case(problem(input_size=(4, 1), stride=(3, 3), dtype="float32"), x=1e-10,
                         w=1e-10, g=1e-10)  # products of 1e-20: normal numbers
    assert not evidence.consistent(tutorial, case, None)


def test_the_lower_precision_is_that_of_the_failing_result_only():
    """float32 whatever the input, and grad_bias a batch mean: on batch 2 one backward
    call shows both. Its grad_weight, off by float32's rounding, is the float32 cause's
    (an oracle-free check that saw the call wrong names grad_weight first); the grad_bias
    is not, and the call as a whole is of no lower precision."""
    impl = load_implementation(spec("float32_and_mean"))
    case = constant_case(problem(batch=2), x=0.1, w=0.3, b=0.2, g=0.7)
    assert evidence.precision(impl, "conv2d_backward", case, None, "grad_weight") == "float32"
    assert evidence.precision(impl, "conv2d_backward", case, None, "grad_bias") is None
    assert evidence.precision(impl, "conv2d_backward", case, None) is None


def _bug(failure, function, p, conditions=(), **kw) -> Bug:
    from conv_harness.triage.explain import Condition
    return Bug(check=kw.pop("check", "forward"), failure=failure, function=function, op=p.op,
               params=p.params(), layouts={}, trigger="t",
               conditions=[Condition(*c) for c in conditions],
               explanation=kw.pop("explanation", []),
               case_file=kw.pop("case_file", None), **kw)


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


def test_an_entry_keeps_the_plainer_of_two_cases_of_one_size():
    """Two findings of one cause on problems of the same size (a two-tap kernel at
    stride 2 on three inputs, plain and dilated): the entry's case is the plain one,
    whichever check found which (the fast-path test's wav2vec bug)."""
    conv1 = dict(op="conv1d", input_size=(3,), kernel_size=(2,), stride=(2,), padding=(0,))
    stride = [("stride", ">=", 2, None)]
    dilated = _bug("forward", "conv1d", problem(**conv1, dilation=(2,)), stride, check="forward",
                   case_file="dilated.json", alone=True)
    rows = [Row("stride", 0, 2, (2, 3), (1,))]  # the explanation of the plain problem
    plain = _bug("forward", "conv1d", problem(**conv1, dilation=(1,)), stride,
                 check="delta_kernel", case_file="plain.json", alone=True, explanation=rows)
    (entry,) = merge([dilated, plain], ["forward", "delta_kernel"])
    assert (entry.case_file, entry.params["dilation"], entry.checks) == (
        "plain.json", [1], ["forward", "delta_kernel"])
    assert entry.explanation == rows


def test_an_entry_shows_no_case_outside_its_own_trigger():
    """A finding merged into an entry for another region of the same bug (the wav2vec
    bug at kernel = stride = 3 on one input, beside its entry at stride 2, kernel 2 on
    three) is smaller, but outside the entry's trigger ("stride = 2"): the entry keeps
    its own case, and the other is listed as where it also fails."""
    conv1 = dict(op="conv1d", kernel_size=(2,), stride=(2,), padding=(0,), input_size=(3,),
                 dilation=(1,))
    stride_2 = [("stride", "in", (2,), 0)]
    own = _bug("forward", "conv1d", problem(**conv1), stride_2, case_file="own.json",
               alone=True)
    other = _bug("forward", "conv1d", problem(**{**conv1, "kernel_size": (3,),
                                                 "stride": (3,), "padding": (1,),
                                                 "input_size": (1,)}),
                 [("stride", ">=", 3, 0)], check="delta_kernel", case_file="other.json",
                 alone=True)
    assert other.problem.size_rank() < own.problem.size_rank()
    (entry,) = merge([own, other], ["forward", "delta_kernel"])
    assert (entry.case_file, entry.params["stride"]) == ("own.json", [2])


def test_one_cause_in_three_dimensions_shows_its_case_in_the_fewest():
    """Issue 34: a cause found in conv3d and met, shrunk and verified, in conv1d (a
    sighting with its own case file): the entry's case is conv1d's, the plainer, and
    conv3d's is kept with the sightings. A smaller case of another kind of function
    (conv1d_backward's) or in more dimensions never stands for it."""
    dilation = [("dilation", ">=", 2, None)]
    cause = _bug("raised", "conv3d", _conv("conv3d", dilation=(1, 1, 2)), dilation,
                 case_file="conv3d.json", alone=True, cause="c", signature="raised E")
    rows = [Row("dilation", 0, 2, (2, 3), (1,))]
    conv1 = _bug("raised", "conv1d", _conv("conv1d", dilation=(2,)), dilation,
                 case_file="conv1d.json", alone=True, cause="c", sighting=True,
                 explanation=rows)
    backward = _bug("raised", "conv1d_backward", _conv("conv1d", dilation=(2,)), dilation,
                    case_file="backward.json", alone=True, cause="c", sighting=True,
                    explanation=rows)
    unexplained = _bug("raised", "conv1d", _conv("conv1d", dilation=(2,)), dilation,
                       case_file="unexplained.json", alone=True, cause="c", sighting=True)
    assert merge([cause, unexplained], ["forward"])[0].case_file == "conv3d.json"
    (entry,) = merge([conv1, cause, backward], ["forward"])
    assert (entry.function, entry.op, entry.case_file) == ("conv1d", "conv1d", "conv1d.json")
    assert entry.explanation == rows  # of the case it shows
    shown = {s["case_file"] for s in entry.sightings}
    assert shown >= {"conv3d.json", "backward.json"} and "conv1d.json" not in shown
    # in more dimensions: not plainer, whatever its size
    conv2 = _bug("raised", "conv2d", _conv("conv2d", input_size=(3, 3), dilation=(1, 2)),
                 dilation,
                 case_file="conv2d.json", alone=True, cause="d", signature="raised E")
    (entry,) = merge([conv2, _bug("raised", "conv3d", _conv("conv3d", dilation=(1, 1, 2)),
                                  dilation, case_file="3d.json", alone=True, cause="d",
                                  sighting=True)], ["forward"])
    assert entry.case_file == "conv2d.json"
    assert in_fewer_dimensions("conv_transpose1d_backward", "conv_transpose3d_backward")
    assert not in_fewer_dimensions("conv1d", "conv_transpose2d")
    assert not in_fewer_dimensions("conv2d", "conv2d") and not in_fewer_dimensions(None, "conv2d")


def test_a_sighting_of_a_region_merged_into_a_cause_joins_its_entry():
    """A further search found a second region of one bug, published as a cause of its own
    before the triage merged it ("also fails when"); another function's sighting of
    that region joins the bug's one entry, not an entry of its own."""
    stride, padding = [("stride", ">=", 2, None)], [("padding", ">=", 1, None)]
    first = _bug("forward", "conv2d", problem(stride=(2, 2)), stride, case_file="a.json",
                 alone=True, cause="a")
    region = _bug("forward", "conv2d", problem(padding=(1, 1)), padding, case_file="b.json",
                  alone=True, cause="b")
    first.absorb(region)
    assert first.joined == ["b"]
    again = Bug.from_json(first.to_json())  # as a worker sends it to the controller
    sighting = _bug("forward", "conv1d", _conv("conv1d", padding=(1,)), padding,
                    cause="b", sighting=True)
    (entry,) = merge([sighting, again], ["forward"])
    assert entry.functions == ["conv2d", "conv1d"] and entry.case_file == "a.json"


@pytest.mark.parametrize("name, stride, axes", [
    ("nd_any_axis", (1, 1, 2), None), ("nd_any_axis", (1, 2), None), ("nd_any_axis", (2,), 1),
    ("nd_two_causes", (1, 1, 2), 3)])
def test_an_axis_condition_names_its_axis_only_where_the_other_axes_pass(name, stride, axes):
    """The explanation swaps the bug's axis with each other one: where the bug shows on
    every axis, its condition names none (``axes`` None: it covers a stride on h of a
    conv2d as a stride on w of a conv3d); where a swap passes (nd_two_causes reads its
    last axis only), or there is no other axis (conv1d), it stays on its axis."""
    n = len(stride)
    case = constant_case(_conv(f"conv{n}d", stride=stride, input_size=(1,) * (n - 1) + (3,)),
                         x=1.0)
    check, kind = ("grad_weight", "grad_weight") if name == "nd_any_axis" else (
        "forward", "forward")
    impl, failure = first_failure(name, check, case)
    assert failure.check == kind
    explanation = explain(case, failure_probe(impl, failure, None),
                          impl.capabilities_for((failure.function,)))
    stride_conditions = [c for c in explanation.trigger if c.feature == "stride"]
    assert stride_conditions and all(c.axes == axes for c in stride_conditions), \
        explanation.trigger


def test_a_value_every_axis_shares_is_varied_on_all_of_them():
    """nd_two_causes' strided gather on a 1x1x1 conv3d with a stride of 2 on every axis
    (a minimal case a run shrank to): setting one axis's stride to 1 still fails, so
    the stride is varied on all three, and the trigger needs it (it said "no feature
    is needed" when one axis was varied)."""
    case = constant_case(_conv("conv3d", stride=(2, 2, 2)), x=1.0)
    impl, failure = first_failure("nd_two_causes", "forward", case)
    explanation = explain(case, failure_probe(impl, failure, None), impl.capabilities)
    assert [c.text() for c in explanation.trigger] == ["stride >= 2"], explanation.one_line()


def _conv(op: str, **axes) -> ConvProblem:
    """A 1x1 problem of ``op`` with per-axis values given as tuples (stride=(1, 1, 2))."""
    n = {"conv1d": 1, "conv2d": 2, "conv3d": 3}[op]
    base = dict(input_size=(1,) * n, kernel_size=(1,) * n, stride=(1,) * n,
                padding=(0,) * n, dilation=(1,) * n)
    return problem(op=op, **{**base, **axes})


def test_an_axis_condition_read_on_another_dimensionality_is_the_axis_of_its_name():
    """A trigger is stated on its bug's own minimal problem: conv1d's "stride >= 2" is a
    stride on w. Read on conv3d through the run-wide book (no explanation, no case
    file: a covered failure is only counted), it covers a stride on conv3d's w, the
    same N-d code path, and not a stride on d alone: a different cause, which must be
    found and explained, not swallowed. An exception's message is evidence of its own:
    a conv1d dilation refusal covers conv3d's on any axis."""
    from conv_harness.running.calling import CheckFailure
    from conv_harness.triage.explain import Condition, matches
    stride_w = Condition("stride", ">=", 2, 0, axes=1)
    assert Condition.from_json(stride_w.to_json()) == stride_w
    gather = _bug("forward", "conv1d", _conv("conv1d", input_size=(2,), stride=(2,)),
                  signature="forward", cause="gather")
    gather.conditions = [stride_w]
    on_w = _conv("conv3d", input_size=(1, 1, 2), stride=(1, 1, 2))
    on_d = _conv("conv3d", input_size=(2, 1, 1), stride=(2, 1, 1))

    def covered(record, kind, message, p):
        case = constant_case(p)
        failure = CheckFailure(kind, message, function=p.op, case=case)
        return causes.covers(record, failure, case, None, None)

    assert covered(gather, "forward", "wrong", on_w)
    assert not covered(gather, "forward", "wrong", on_d)
    on_h = _conv("conv2d", input_size=(2, 1), stride=(2, 1))
    assert not matches([stride_w], on_h, {}, same_axes=True)
    # a condition on conv2d's h has no axis of that name on conv1d
    stride_h = Condition("stride", ">=", 2, 0, axes=2)
    assert not matches([stride_h], _conv("conv1d", input_size=(2,), stride=(2,)), {},
                       same_axes=True)
    assert matches([stride_h], _conv("conv3d", input_size=(1, 2, 1), stride=(1, 2, 1)), {},
                   same_axes=True)
    # one function's own trigger (its further searches) holds on any axis: the
    # explanation varied one axis and did not tell it from the others
    assert matches([stride_w], on_h, {}) and matches([stride_h], on_w, {})
    # a further search's sighting of that cause rejects and covers as the book read it
    seen = _bug("forward", "conv3d", on_w, signature="forward", sighting=True)
    seen.conditions = [stride_w]
    assert seen.region_holds(constant_case(on_w)) and not seen.region_holds(
        constant_case(on_d))
    refused = _bug("raised", "conv1d", _conv("conv1d", dilation=(2,)),
                   signature="raised ValueError: dilation > N is not supported",
                   cause="dilation")
    refused.conditions = [Condition("dilation", ">=", 2, 0, axes=1)]
    assert covered(refused, "raised", "conv3d raised ValueError: dilation > 1 is not "
                   "supported", _conv("conv3d", dilation=(2, 1, 1)))
    # and the merge agrees: the depth-stride finding, explained, stays its own entry
    depth = _bug("forward", "conv3d", on_d, signature="forward")
    depth.conditions = [Condition("stride", ">=", 2, 0, axes=3)]
    width = _bug("forward", "conv3d", on_w, signature="forward")
    width.conditions = [Condition("stride", ">=", 2, 2, axes=3)]
    assert not part_of(depth, gather) and part_of(width, gather)
    entries = merge([gather, depth, width], ["forward"])
    assert sorted(tuple(sorted(e.functions)) for e in entries) == [
        ("conv1d", "conv3d"), ("conv3d",)]


def test_a_further_search_excludes_a_sighting_as_it_would_its_own_cause():
    """Under xdist, another worker's cause met first by a search is a sighting; the
    further search rejects its region as it would a cause it had explained itself
    (else a conv3d search spends its examples on the known dilation refusal and never
    reaches the forward's own failure), unless evidence attributed it: a grad_bias
    wrong by a float32 rounding under a float32 cause leaves room for a grad_bias taken
    as a mean in that region."""
    from conv_harness.searching.search import _excludes
    cause = _bug("raised", "conv1d", problem(dilation=(2, 1)), [("dilation", ">=", 2, 0)],
                 signature="raised ValueError: no")
    by_region = _bug("raised", "conv3d", problem(dilation=(2, 1)), [("dilation", ">=", 2, 0)],
                     signature="raised ValueError: no", sighting=True)
    by_precision = _bug("grad_bias", "conv2d_backward", problem(), sighting=True,
                        evidence={"precision": "float32"})
    inherited = _bug("grad_input", "conv2d_backward", problem(stride=(2, 2)), sighting=True,
                     evidence={"forward_fails": True, "consistent": True})
    assert _excludes(cause) and _excludes(by_region)
    assert not _excludes(by_precision) and not _excludes(inherited)


def test_signatures_do_not_depend_on_the_function_or_sizes():
    assert signature("raised", "conv2d raised ValueError: bad size 3 (at x.py:12)") == \
        signature("raised", "conv3d_backward raised ValueError: bad size 7 (at x.py:12)")
    assert signature("dtype", "conv1d's result has dtype float32; inputs are float64") == \
        signature("dtype", "conv1d_backward's grad_input has dtype float32; inputs are "
                           "float16") == "returns float32"


def test_signatures_do_not_depend_on_the_number_of_dimensions():
    """Issue 34: an N-d library's size check names each call's shapes, as tuples."""
    assert signature("raised", "conv1d raised ValueError: kernel (3,) too large for (1, 1, 2)") \
        == signature("raised", "conv3d raised ValueError: kernel (3, 1, 1) too large for "
                               "(1, 1, 2, 2, 2)") \
        == signature("raised", "conv2d raised ValueError: kernel [3, 1] too large for 1x1x2x2") \
        == "raised ValueError: kernel N too large for N"
    assert signature("raised", "conv2d raised ValueError: kernel (3, 1) too large") != \
        signature("raised", "conv2d raised ValueError: stride (3, 1) too large")


def test_a_feature_needed_on_another_axis_than_the_main_one_is_in_the_trigger():
    """The size check refuses a kernel larger than the unpadded input once any axis is
    dilated: conv3d's minimal case has its kernel and padding on h, its dilation on
    w. The explanation varies h; making w's dilation 1 passes, so the trigger needs it."""
    p = parse_descriptor("mb1ic1id1ih1iw1oc1kd1kh2kw1sd1sh1sw1pd0ph1pw0dd0dh0dw1",
                         op="conv3d", dtype="float64", bias=True)
    case = constant_case(p)
    impl, failure = first_failure("nd_size_check", "forward", case)
    explanation = explain(case, failure_probe(impl, failure, None), impl.capabilities)
    assert [c.text() for c in explanation.trigger] == ["padding >= 1", "kernel >= 2",
                                                       "dilation >= 2"]
    assert "dilation (axis 2)       1:pass  2*:FAIL" in explanation.table()


def test_the_book_of_causes_is_shared_through_the_folder(tmp_path):
    run = causes.new_run(tmp_path)
    one, two = causes.CauseBook(), causes.CauseBook()  # two workers
    one.open(tmp_path, run)
    two.open(tmp_path, run)
    bug = _bug("forward", "conv2d", problem(stride=(2, 2)), [("stride", ">=", 2, None)],
               signature="forward", cause="c1")
    one.publish("mine.py", bug)
    (known,) = two.known("mine.py")
    assert known.cause == "c1" and known.conditions == bug.conditions
    assert two.known("other.py") == []
    # a new run starts with none
    three = causes.CauseBook()
    three.open(tmp_path, causes.new_run(tmp_path))
    assert three.known("mine.py") == []


def test_a_script_that_fails_after_a_note_reproduces_its_bug():
    """A property check's script first notes that it compares every result with torch;
    its FAILED line follows, or, for a bug that raises, Python's traceback (on stderr).
    It reproduces the bug (the float32 entry's linearity script, and nd_two_causes'
    dilation cause found by finite_difference, showed reproduces_alone null)."""
    from conv_harness.triage.history import _fails
    note = "note: check 'linearity' is not restated here; comparing every result with torch\n"
    assert _fails((1, note + "FAILED mine conv2d check linearity:\ndtype: ...\n")) is True
    assert _fails((1, note + "Traceback ...\n")) is None
    assert _fails((0, note + "passed\n")) is False
    assert _fails((1, note), "raised") is True and _fails((1, ""), "raised") is True
    assert _fails((1, note), "forward") is None
    assert _fails((1, note + "something else\n"), "raised") is None


def test_scripts_run_in_forked_children_with_their_own_exit_codes(tmp_path, monkeypatch):
    scratch = tmp_path / "tmp"  # where the server keeps its children's output
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
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
        # the folder asked for, and the environment as it is at the request
        where = tmp_path / "elsewhere"
        where.mkdir()
        env = tmp_path / "env.py"
        env.write_text("import os\nprint(os.getcwd(), os.environ.get('CONV_RUNNER_PROBE'))\n")
        monkeypatch.setenv("CONV_RUNNER_PROBE", "set after the server started")
        assert runner.run(env, 60, cwd=where) == (
            0, f"{where} set after the server started\n")
        hang = tmp_path / "hang.py"
        hang.write_text("import time\ntime.sleep(60)\n")
        assert runner.run(hang, 0.5)[0] is None
        assert list(scratch.iterdir())
    finally:
        runner.close()
    assert not list(scratch.iterdir())  # nothing left behind


# -------------------------------------------------------------- whole runs

def entries(run_pytest, tmp_path, name: str, selection: str,
            *extra: str) -> tuple[list[dict], Path, str]:
    failures = tmp_path / "failures"
    done = run_pytest("--impl", spec(name), "-k", selection, "--conv-failures", failures,
                      *extra, timeout=900)  # several searches, on a machine that may be loaded
    assert done.returncode == 1, done.stdout[-4000:] + done.stderr[-2000:]
    summary = json.loads((failures / "summary.json").read_text())
    return summary["implementations"][0]["bugs"], failures, done.stdout


def in_process(tmp_path, monkeypatch, name: str, checks: tuple[str, ...],
               ops: tuple[str, ...] = ("conv2d",),
               seed: int | None = None) -> tuple[list[dict], Path, str]:
    """`entries` of a run of ``checks`` on ``ops``, made in this process (one process,
    as a run without xdist): the same searches, triage and merge, no pytest start-up;
    ``seed``: each search's seed from it, as in a default run (else the profile's)."""
    failures = tmp_path / "failures"
    bugs, out = triaged(spec(name), checks, ops, failures, seed=seed)
    return bugs, failures, out


@pytest.mark.long
def test_one_code_path_many_functions_is_two_entries(run_pytest, tmp_path):
    """Under xdist, as a user runs it: workers find causes at once, and a search often
    meets another worker's cause first (a sighting); still two entries. (Whether
    conv3d's forward search meets the forward cause at all is its examples' chance:
    2% of conv3d draws show it, so it is not asserted; what a further search spends
    them on is pinned in process, by the test of `_excludes`.)"""
    bugs, failures, out = entries(
        run_pytest, tmp_path, "nd_two_causes",
        "(test_forward or test_grad_input) and (conv1d] or conv3d])", "-n", "2")
    assert sorted(b["failure"] for b in bugs) == ["forward", "raised"], bugs
    forward = next(b for b in bugs if b["failure"] == "forward")
    raised = next(b for b in bugs if b["failure"] == "raised")
    assert len(forward["functions"]) >= 3 and len(raised["functions"]) >= 3, bugs
    # a search that met a known cause wrote no case file for it: its line names the cause's
    for line in out.splitlines():
        if line.startswith("also met known bug:"):
            shown = re.search(r", case file (\S+\.json) \(\d+ examples?\)$", line)
            assert shown and (failures / Path(shown.group(1)).name).is_file(), line
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


@pytest.mark.long
def test_a_cause_on_any_axis_is_one_entry_whichever_axis_each_function_shows(run_pytest,
                                                                               tmp_path):
    """grad_weight off when any stride is above 1, in the backwards of conv3d (given
    with its stride on w) and conv2d (on h): one entry, whichever is found first, the
    other a sighting of it, though their strides are on axes of different names."""
    bugs, failures, _ = entries(run_pytest, tmp_path, "nd_any_axis", "test_grad_weight",
                                "--conv-problem", "mb1ic1id1ih1iw3oc1kd1kh1kw1sd1sh1sw2",
                                "--conv-problem", "mb1ic1ih3iw1oc1kh1kw1sh2sw1", "-n", "2")
    assert len(bugs) == 1, [(b["function"], b["descriptor"], b["trigger"]) for b in bugs]
    (bug,) = bugs
    assert sorted(bug["functions"]) == ["conv2d_backward", "conv3d_backward"], bug
    assert bug["reproduces_alone"] is True
    scripts_exit_1(failures, bugs)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_cause_in_three_dimensions_is_one_entry(tmp_path, monkeypatch, seed):
    """Issue 34: the size check raises in conv1d, conv2d and conv3d with messages that
    differ in the shapes they name: one entry listing the three, its script exits 1."""
    bugs, failures, _ = in_process(tmp_path, monkeypatch, "nd_size_check", ("forward",),
                                   ("conv1d", "conv2d", "conv3d"), seed=seed)
    assert len(bugs) == 1, [(b["function"], b["descriptor"], b["trigger"]) for b in bugs]
    (bug,) = bugs
    assert sorted(bug["functions"]) == ["conv1d", "conv2d", "conv3d"], bug
    assert bug["trigger"].startswith("fails when padding >= 1 and kernel >= 2 and "
                                     "dilation >= 2"), bug["trigger"]
    p = bug["params"]
    assert p["batch"] == p["in_channels"] == p["out_channels"] == 1, p
    # its case in the fewest dimensions, conv3d's kept with the sightings
    assert (bug["function"], bug["op"]) == ("conv1d", "conv1d"), bug
    changes = bug["explanation"]["changes"]  # of that conv1d problem: its one axis
    assert changes and all(row["axis"] in (None, 0) for row in changes), changes
    assert any(s["function"] == "conv3d" and s["case_file"] for s in bug["sightings"]), bug
    assert bug["reproduces_alone"] is True
    scripts_exit_1(failures, bugs)


def test_a_call_that_does_not_repeat_is_evidence_not_a_trigger():
    """Issue 34: a cache that accumulates without being cleared. Its wrong forward
    does not repeat on the same inputs (on the case's zeros it may: then on noise);
    the evidence says so, and such a finding is part of the entry of the state kept."""
    case = constant_case(problem(), b=1.0)
    impl = load_implementation(spec("dirty_cache"))
    examine("forward", impl, case)
    (failure,) = examine("forward", impl, case)  # the second call reads the first's
    assert evidence.gather(impl, failure, case, None) == {"unrepeatable": "3 of 3"}
    finding = _bug("forward", "conv2d", problem(), evidence={"unrepeatable": "3 of 3"})
    state = _bug("repeatable", "conv2d", problem())
    assert part_of(finding, state) and part_of(state, finding)
    assert not part_of(finding, _bug("repeatable", "conv2d_backward", problem()))
    assert not part_of(_bug("forward", "conv2d", problem()), state)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_cache_not_cleared_is_one_entry(tmp_path, monkeypatch, seed):
    """Issue 34: its symptoms (repeatable, a wrong forward that depends on the calls
    before) are one entry, not one per check, at the plainest problem, and no trigger
    is read from noise."""
    bugs, failures, _ = in_process(tmp_path, monkeypatch, "dirty_cache",
                                   ("forward", "repeatable", "linearity"), seed=seed)
    assert len(bugs) == 1, [(b["failure"], b["check"], b["trigger"]) for b in bugs]
    (bug,) = bugs
    assert bug["failure"] in ("history", "repeatable"), bug
    assert {"forward", "repeatable"} <= set(bug["checks"]), bug
    assert bug["case_file"] and bug["reproduces_alone"] is True, bug
    # Hypothesis cannot shrink it (a shape met before fails even on zeros); the sequence
    # rebuilt for it shows it on the plainest problem, which is its case
    assert bug["descriptor"] == "mb1ic1ih1iw1oc1kh1kw1sh1sw1ph0pw0" and bug["minimal"], bug
    record = json.loads((failures / bug["case_file"]).read_text())
    assert record["params"] == bug["params"] and record["before"], record
    scripts_exit_1(failures, bugs)


def test_a_dtype_cause_and_its_value_errors_are_one_entry(tmp_path, monkeypatch):
    bugs, failures, _ = in_process(tmp_path, monkeypatch, "float32_compute",
                                   ("forward", "grad_input", "grad_weight"))
    (bug,) = bugs
    assert set(bug["functions"]) == {"conv2d", "conv2d_backward"}, bug
    assert bug["params"]["batch"] == 1 and bug["params"]["in_channels"] == 1
    scripts_exit_1(failures, bugs)


def test_a_cause_hidden_behind_a_lower_precision_is_found(tmp_path, monkeypatch):
    """Issue 11's case: float32 whatever the input, and grad_bias the batch mean."""
    bugs, failures, _ = in_process(tmp_path, monkeypatch, "float32_and_mean",
                                   ("forward", "grad_bias"))
    assert len(bugs) == 2, bugs
    mean = [b for b in bugs if b["failure"] == "grad_bias"]
    assert mean and mean[0]["params"]["batch"] == 2, bugs
    assert mean[0]["trigger"].startswith("fails when batch >= 2")
    scripts_exit_1(failures, bugs)


def test_a_product_condition_is_one_entry(tmp_path, monkeypatch):
    bugs, failures, _ = in_process(tmp_path, monkeypatch, "product_bias", ("forward",))
    (bug,) = bugs
    assert bug["trigger"].startswith("fails when with bias and K (in channels per group x "
                                     "kernel taps) >= 2")
    p = bug["params"]
    assert (p["in_channels"], p["kernel_size"]) in ((2, [1, 1]), (1, [2, 1]), (1, [1, 2]))
    scripts_exit_1(failures, bugs)


def test_masking_gives_no_false_condition(tmp_path, monkeypatch):
    bugs, failures, _ = in_process(tmp_path, monkeypatch, "masking", ("grad_input",))
    assert sorted(b["failure"] for b in bugs) == ["dtype", "raised"], bugs
    dtype = next(b for b in bugs if b["failure"] == "dtype")
    assert "padding" not in [c["feature"] for c in dtype["conditions"]], dtype
    scripts_exit_1(failures, bugs)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_no_cause_is_hidden_by_another_of_its_kind(tmp_path, monkeypatch, seed):
    bugs, failures, _ = in_process(tmp_path, monkeypatch, "shapes", ("grad_input",),
                                   seed=seed)
    assert [b["failure"] for b in bugs] == ["shape", "shape"], bugs
    empty, short = sorted(bugs, key=lambda b: sum(b["params"]["padding"]))
    assert empty["params"]["padding"] == [0, 0] and empty["params"]["input_size"] == [1, 1]
    assert short["params"]["stride"] != [1, 1]
    scripts_exit_1(failures, bugs)


@pytest.mark.long
def test_a_read_past_the_buffer_is_one_entry(tmp_path, monkeypatch):
    """Wrong, non-finite and history-dependent results of one cause: one entry. Its
    case is minimal, or the entry says it is not and why (a failure that does not
    repeat cannot be shrunk); its script exits 1, or the entry says it does not."""
    bugs, failures, out = in_process(tmp_path, monkeypatch, "read_past",
                                     ("grad_input", "repeatable"))
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


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.long
def test_garbage_that_comes_and_goes_is_one_cause_beside_a_deterministic_one(
        tmp_path, monkeypatch, seed):
    """Issue 34: memory not initialised, read where the stride leaves a remainder (wrong
    on about half of the calls), beside padding applied twice. Two entries, the same
    for each seed: the garbage is searched and explained with several calls per
    problem, so it shrinks to its minimal case and its trigger is its region, with how
    often it fails; its script makes as many calls, and exits 1."""
    bugs, failures, out = in_process(tmp_path, monkeypatch, "garbage_and_padding",
                                     ("forward", "repeatable"), seed=seed)
    assert len(bugs) == 2, [(b["failure"], b["descriptor"], b["trigger"]) for b in bugs]
    padding = next(b for b in bugs if not b["evidence"].get("fails_in"))
    garbage = next(b for b in bugs if b["evidence"].get("fails_in"))
    assert padding["trigger"].startswith("fails when padding >= 1;"), padding["trigger"]
    assert padding["descriptor"] == "mb1ic1ih1iw1oc1kh1kw1sh1sw1ph0pw1", padding
    assert garbage["trigger"].startswith(
        "fails when stride >= 2 and stride remainder >= 1"), garbage["trigger"]
    assert re.search(r"fails in \d of 8 calls on the same inputs", garbage["trigger"])
    assert garbage["descriptor"] == "mb1ic1ih1iw2oc1kh1kw1sh1sw2ph0pw0", garbage
    assert garbage["failure"] == "forward" and "repeatable" in garbage["checks"], garbage
    assert json.loads((failures / garbage["case_file"]).read_text())["tries"] == 8
    # each change of its explanation says in how many of its calls it failed
    assert "k/n: each change called n times, k failed" in out
    assert re.search(r":FAIL [1-8]/8 ", out) and re.search(r":pass 0/16\b", out), out
    assert all(b["reproduces_alone"] is True and b["minimal"] for b in bugs), bugs
    scripts_exit_1(failures, bugs)


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.long
def test_one_wrong_size_with_two_symptoms_across_a_boundary_is_one_entry(
        tmp_path, monkeypatch, seed):
    """Issue 34: grad_input cropped from the offset k - 1 - p instead of p: wrong values
    where that offset lands inside the padded gradient, an IndexError where it does
    not. One step across the raise's boundary (its passing padding) fails as the wrong
    value: one entry, listing both symptoms, the same for each seed."""
    bugs, failures, _ = in_process(tmp_path, monkeypatch, "crop_offset", ("grad_input",),
                                   seed=seed)
    assert len(bugs) == 1, [(b["failure"], b["descriptor"], b["trigger"]) for b in bugs]
    (bug,) = bugs
    assert {bug["failure"]} | {s["failure"] for s in bug["sightings"]} == {
        "raised", "grad_input"}, bug
    other = "grad_input" if bug["failure"] == "raised" else "raised"
    assert any(a.startswith(f"{other} (conv2d_backward) fails when") for a in bug["also"])
    p = bug["params"]
    assert p["batch"] == p["in_channels"] == p["out_channels"] == 1, p
    assert bug["reproduces_alone"] is True
    scripts_exit_1(failures, bugs)


def test_two_causes_of_one_function_that_share_no_boundary_stay_apart():
    """The boundary evidence needs a feature both bugs depend on, and a step across one
    bug's boundary that fails as the other: a dtype wrong everywhere depends on no
    size, and a raise at padding >= 1 beside it is its own cause (though every step
    from the raise's problem shows the wrong dtype)."""
    impl = load_implementation(spec("float32_compute"))
    raised = _bug("raised", "conv2d_backward", problem(), [("kernel", ">=", 2, 0)])
    raised.explanation = [Row("kernel", 0, 2, (2, 3), (1,)), Row("padding", 0, 0, (0,), (1, 2))]
    dtype = _bug("dtype", "conv2d_backward", problem(), [("dtype", "in", ("float64",), None)])
    dtype.explanation = [Row("dtype", None, "float64", ("float64",), ("float32",))]
    case = constant_case(problem(), b=1.0)
    assert boundary.across(impl, raised, case, raised.explanation, [dtype],
                           Capabilities(), None) is None


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_product_condition_under_square_kernels_is_at_its_plainest_case(
        tmp_path, monkeypatch, seed):
    """Issue 34: a bias added once per product, under square-only capabilities. The
    search may stop at one channel and a 2x2 kernel (K = 4); its explanation meets two
    channels and a 1x1 kernel (K = 2) failing the same way, a plainer problem, and that
    is the entry's case, the same for each seed."""
    bugs, failures, out = in_process(tmp_path, monkeypatch, "product_bias_square",
                                     ("forward",), seed=seed)
    (bug,) = bugs
    assert bug["trigger"].startswith("fails when with bias and K (in channels per group x "
                                     "kernel taps) >= 2"), bug["trigger"]
    p = bug["params"]
    assert (p["in_channels"], p["kernel_size"], p["input_size"]) == (2, [1, 1], [1, 1]), p
    scripts_exit_1(failures, bugs)


def test_a_bug_of_every_other_value_is_one_region():
    """Odd batches of 3 or more (tests/harness/two_bugs.py's batch_swap): batch 3 fails,
    2 and 4 pass. The next values up are tried, and the trigger names the parity, so
    that a further search does not find batch 5, 7, 9, ... one region at a time."""
    def odd_batches_with_two_taps(case: ConvCase) -> bool:
        p = case.problem
        return p.batch >= 3 and p.batch % 2 == 1 and p.kernel_size[1] >= 2

    case = constant_case(problem(batch=3, input_size=(1, 2), kernel_size=(1, 2)))
    explanation = explain(case, odd_batches_with_two_taps, Capabilities())
    assert sorted(c.text() for c in explanation.trigger) == ["batch odd >= 3", "kernel >= 2"]
    (odd,) = [c for c in explanation.trigger if c.feature == "batch"]
    assert [odd.holds(b) for b in range(1, 10)] == [False, False, True, False, True,
                                                    False, True, False, True]
    assert type(odd).from_json(odd.to_json()) == odd
    # every odd batch, 1 the least: 1 and 3 fail, 2 passes, and nothing lies below 1
    def odd_batches(case: ConvCase) -> bool:
        return case.problem.batch % 2 == 1 and case.problem.kernel_size[1] >= 2

    every = explain(constant_case(problem(batch=1, input_size=(1, 2), kernel_size=(1, 2))),
                    odd_batches, Capabilities())
    assert sorted(c.text() for c in every.trigger) == ["batch odd", "kernel >= 2"]
    # two failing values are a pair, not a parity
    def kernels_2_and_4(case: ConvCase) -> bool:
        return case.problem.kernel_size[1] in (2, 4)

    pair = explain(case, kernels_2_and_4, Capabilities())
    assert [c.text() for c in pair.trigger] == ["kernel in {2, 4}"]


def test_the_bug_count_says_which_scripts_were_not_run_alone_and_why():
    """A script not run alone (here: no case file was saved) is counted apart from the
    scripts that passed alone, and the entry says why, where the count once read
    "1 not: see below" with nothing below."""
    from conv_harness.reporting.summary import bug_lines

    def bug(failure: str, alone: bool | None) -> Bug:
        found = Bug(check="forward", failure=failure, function="conv2d", op="conv2d",
                    params=problem().params(), layouts={}, trigger="", conditions=[],
                    explanation=[], case_file=None if alone is None else f"{failure}.json",
                    cause=failure)
        found.alone = alone
        return found

    lines = bug_lines([bug("forward", True), bug("crashed", None), bug("raised", False)])
    assert lines[0] == ("  distinct bugs: 3 (1 reproduced by their script alone; 1 not: "
                        "see below; 1 not run alone: see below)")
    assert any(line == "     not run alone: no case file was saved (see the failure's report)"
               for line in lines), lines
    assert any("DOES NOT REPRODUCE ALONE" in line for line in lines)
