"""The zoo of buggy convolutions (benchmarks/zoo.py) and its score (benchmarks/triage_zoo.py):
its ground truth holds, and a small fixed sample scores as pinned."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings

from benchmarks import zoo
from benchmarks.triage_zoo import CHECKS, ZOO, misses, score
from conv_harness.checks.registry import examine
from conv_harness.problem import ConvProblem
from conv_harness.running.capabilities import Capabilities
from conv_harness.run import run_checks
from conv_harness.running.loader import load_implementation
from conv_harness.triage.catalog import Bug, merge
from conv_harness.triage.explain import Condition, Row
from strategies import catalogue, conv_problems
from strategies.cases import noise_case

#: which check shows each symptom
CHECK_OF = {"forward": "forward", "grad_input": "grad_input", "grad_weight": "grad_weight",
            "grad_bias": "grad_bias", "raised": "grad_input"}


def test_an_implementation_is_built_from_its_name_alone():
    first, again = zoo.generate(1, 7), zoo.generate(1, 7)
    assert [c.name for c in first.causes] == [c.name for c in again.causes]
    assert 1 <= len(first.causes) <= 3
    module = zoo.zoo_1_7
    assert module.ZOO_CAUSES == [c.name for c in first.causes]
    assert set(vars(module)) >= {f"conv{n}d" for n in first.dims}
    alone = getattr(zoo, "zoo_1_7_cause0")
    assert alone.ZOO_CAUSES == [first.causes[0].name]
    with pytest.raises(AttributeError):
        zoo.zoo_1  # noqa: B018 - not a zoo name
    sizes = [len(zoo.generate(1, i).causes) for i in range(100)]
    assert sum(sizes) >= 150  # the zoo: 100 implementations, 150 causes



def test_the_torch_variant_is_the_same_implementation_on_tensors():
    """``zoo_torch_<seed>_<index>``: the same causes, on CPU tensors in any layout."""
    numpy_one, torch_one = zoo.zoo_1_2, zoo.zoo_torch_1_2
    assert torch_one.CAPABILITIES == {"arrays": "torch"} and numpy_one.CAPABILITIES is None
    assert torch_one.ZOO_CAUSES == numpy_one.ZOO_CAUSES
    assert zoo.zoo_torch_1_2_cause1.ZOO_CAUSES == [numpy_one.ZOO_CAUSES[1]]
    x = np.random.default_rng(0).standard_normal((1, 2, 5, 5))
    w = np.random.default_rng(1).standard_normal((2, 2, 3, 3))
    kw = dict(stride=(1, 1), padding=(1, 1), dilation=(1, 1), groups=1)
    on_tensors = torch_one.conv2d(torch.from_numpy(x).to(memory_format=torch.channels_last),
                                  torch.from_numpy(w), None, **kw)
    assert isinstance(on_tensors, torch.Tensor)
    assert np.array_equal(on_tensors.numpy(), numpy_one.conv2d(x, w, None, **kw))


@pytest.mark.parametrize("name", sorted(n for n, c in zoo.CAUSES.items() if not c.garbage))
def test_a_cause_alone_fails_where_its_condition_holds_and_only_there(name):
    """The ground truth: on random problems with dense values, the cause's check fails
    exactly where `Cause.holds` says. In float32 and float64: in a half precision a
    wrong sum may fit a long reduction's rounding bound (a flipped kernel's sum of 120
    products differs from the right one by about as much as float16's bound allows)."""
    cause = zoo.CAUSES[name]
    # an implementation that has the cause, with it alone, as a spec names it
    index, k = next((i, k) for i in range(400)
                    for k, c in enumerate(zoo.generate(9, i).causes) if c is cause)
    built = zoo.generate(9, index)
    impl = load_implementation(f"{zoo.__file__}:zoo_9_{index}_cause{k}")
    op = f"conv{built.dims[-1]}d"
    check = CHECK_OF[next(s for s in cause.symptoms if s in CHECK_OF)]
    seen = {True: 0, False: 0}

    @settings(max_examples=25, derandomize=True, database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(conv_problems(op).filter(lambda p: p.dtype in ("float32", "float64")))
    def agree(problem):
        failed = bool(examine(check, impl, noise_case(problem)))
        assert failed == bool(cause.holds(problem)), (name, problem.describe())
        seen[failed] += 1

    agree()
    assert seen[False], name  # the condition is not everywhere


def test_a_long_float16_reduction_fails_past_its_products_only():
    """Its ground truth, which random problems in float32 and float64 do not test: the
    sweep's long float16 visits fail, padded or not; float16 of 2048 products passes,
    of 2049 fails; float32 of 2049 passes."""
    cause = zoo.CAUSES["long float16 reduction"]
    impl = load_implementation(f"{zoo.__file__}:zoo_1_67_cause1")
    assert zoo.zoo_1_67_cause1.ZOO_CAUSES == [cause.name]
    visits = catalogue.long_float16_visits("conv2d", Capabilities())
    assert [any(v.problem.padding) for v in visits] == [True, False]
    problems = [(v.problem, v.case()) for v in visits] + [
        (q, noise_case(q)) for q in (
            ConvProblem(op="conv2d", batch=1, in_channels=channels, out_channels=1,
                        input_size=(1, 1), kernel_size=(1, 1), stride=(1, 1), padding=(0, 0),
                        dilation=(1, 1), groups=1, bias=False, dtype=dtype)
            for channels, dtype in ((2048, "float16"), (2049, "float16"), (2049, "float32")))]
    failed = [bool(examine("forward", impl, case)) for _, case in problems]
    assert failed == [True, True, False, True, False]
    assert failed == [cause.holds(p) for p, _ in problems]


@pytest.mark.long
def test_a_fixed_sample_of_the_zoo_scores_as_pinned(tmp_path):
    """Two implementations: two causes in different functions with their own triggers
    (two entries); and a cause that shows in the forward and the backward with the same
    trigger at the same minimal problem (one entry), beside a path of blocked channels
    that only the catalogue sweep reaches (run after a follow-up search that passed,
    outside the first cause's region: before, the other cause hid it). The second on
    torch tensors, as a user's torch implementation comes."""
    flipped_and_dilation = score(zoo.generate(1, 1), 1, tmp_path / "a")
    assert flipped_and_dilation.all_exact, misses(flipped_and_dilation)
    padding_and_block = score(zoo.generate(1, 2, "torch"), 1, tmp_path / "b")
    assert padding_and_block.all_exact, misses(padding_and_block)
    padding = zoo.CAUSES["padding off by one"]
    assert padding_and_block.minimal(padding) and padding_and_block.trigger(padding)
    entry = padding_and_block.entry(padding)
    assert {"conv2d", "conv2d_backward"} <= set(entry["functions"]), entry
    block = padding_and_block.entry(zoo.CAUSES["partial block of channels"])
    assert block["found_on"], block  # an archetype the sweep visited


@pytest.mark.parametrize("index,name,stated", [
    (12, "grad_bias a mean over batch x positions", "batch x output positions >= 2"),
    (13, "backward of square outputs only", "outputs not square"),
    (18, "uninitialised remainder rows", "stride remainder >= 1")])
def test_a_trigger_states_a_product_a_relation_of_axes_and_a_garbage_cause_s_region(
        tmp_path, index, name, stated):
    """Each cause alone: a mean over batch x positions is the product (not "batch >= 2",
    which one image of two positions contradicts); a backward of square outputs only
    needs the axes to differ (2x2 passes); uninitialised rows that differ call after
    call are mapped with every changed problem called as often as the case was."""
    cause = zoo.CAUSES[name]
    alone = score(zoo.alone(zoo.generate(1, index), cause), 1, tmp_path)
    assert alone.all_exact and alone.trigger(cause), misses(alone)
    assert stated in alone.entry(cause)["trigger"]


def test_a_wrong_precision_in_the_forward_and_in_grad_bias_is_one_entry(tmp_path):
    """float64 computed in float32 shows in every result; grad_bias needs a bias to
    exist, so its finding's "with bias" is its kind's: beside that, the trigger
    (dtype = float64, which every other dtype passing now states) and the minimal
    problem agree with the forward's, and the two are one entry."""
    cause = zoo.CAUSES["float64 computed in float32"]
    alone = score(zoo.alone(zoo.generate(1, 0), cause), 1, tmp_path)
    assert alone.all_exact and alone.trigger(cause), misses(alone)
    entry = alone.entry(cause)
    assert {"conv2d", "conv2d_backward"} <= set(entry["functions"]), entry
    assert "dtype = float64" in entry["trigger"]


def test_one_cause_is_one_entry_across_dimensions_and_sizes_left_unshrunk():
    """A float64 computed in float32 found by conv3d's forward at 1x1x1, and by its
    backward's grad_input at padding (0, 1, 1), which the explanation shows the bug
    independent of (a shrink that stopped short): one trigger, one plainest problem
    written with three axes as with one, so one entry; a padding the grad_input
    needs (it passes at padding 0) keeps them two, unless the forward needs it too,
    on whichever axes."""
    def bug(check: str, padding: list[int], padding_passes: tuple = ()) -> Bug:
        params = {"batch": 1, "in_channels": 1, "out_channels": 1, "input_size": [1, 1, 1],
                  "kernel_size": [1, 1, 1], "stride": [1, 1, 1], "padding": padding,
                  "dilation": [1, 1, 1], "groups": 1, "bias": False, "dtype": "float64"}
        rows = [Row("dtype", None, "float64", ("float64",), ("float32", "float16")),
                Row("bias", None, False, (False, True), ())]
        rows += [Row("padding", axis, p, (p,) if padding_passes else (0, 1, 2),
                     padding_passes if axis else ()) for axis, p in enumerate(padding)]
        return Bug(check, check, "conv3d" if check == "forward" else "conv3d_backward",
                   "conv3d", params, {"x": "C", "weight": "C"}, "fails when dtype = float64",
                   [Condition("dtype", "in", ("float64",), None)], rows, None,
                   evidence={"precision": "float32"})

    order = ["forward", "grad_input"]
    (entry,) = merge([bug("forward", [0, 0, 0]), bug("grad_input", [0, 1, 1])], order)
    assert entry.functions == ["conv3d", "conv3d_backward"]
    needs_padding = bug("grad_input", [0, 1, 1], padding_passes=(0,))
    assert len(merge([bug("forward", [0, 0, 0]), needs_padding], order)) == 2
    # the padding each needs, on whichever axes each function shrank to
    assert len(merge([bug("forward", [1, 1, 0], padding_passes=(0,)), needs_padding],
                     order)) == 1


def test_a_partial_block_of_channels_is_one_entry_in_every_dimension(tmp_path):
    """In channels per group past a block of 8 and off its multiples fail (9 to 15, 17
    to 23, ...): conv3d's search stopped at 17 (16 passes, so shrinking went no lower),
    conv1d's at 9. The explanation tries halfway down from 17 too, meets 9 failing,
    shrinks the case there, and the two are one entry."""
    cause = zoo.CAUSES["partial block of channels"]
    alone = score(zoo.alone(zoo.generate(1, 37), cause), 1, tmp_path)
    assert alone.all_exact and alone.trigger(cause), misses(alone)
    assert alone.entry(cause)["params"]["in_channels"] == 9


def test_a_batch_block_beside_a_bug_of_every_padded_problem_is_found(tmp_path):
    """Images past a block of four get a wrong grad_input; a padding off by one fails
    every padded problem's grad_input too. Found first, the padding bug's region is
    left out of the sweep after the follow-up search, and with it the batch
    neighbour of the first archetype (padded): a batch neighbour of each kind of
    geometry leaves one unpadded, where the block is found."""
    built = zoo.generate(3, 44)
    assert {c.name for c in built.causes} == {"batch block of four", "padding off by one"}
    scored = score(built, 3, tmp_path)
    assert scored.all_exact, misses(scored)


def test_four_causes_of_the_forward_two_of_them_met_only_by_the_sweep_are_four_entries(
        tmp_path):
    """A padding off by one, a partial block of channels, a 3x3 path and a float16 path
    for long sums, all in the forward. The sweep's visits off the padding bug's region
    fail by the block (channels neighbours) and by the long sum (the stem unpadded in
    float16): the sweep is made again after the bug it found, so the long sum is the
    fourth entry, which a default of three bugs per check cut off besides."""
    built = zoo.generate(2, 76)
    assert {c.name for c in built.causes} == {
        "padding off by one", "partial block of channels", "3x3 path ignores dilation",
        "long float16 reduction"}
    result = run_checks(f"{ZOO}:{built.name}", ["forward"], ["conv2d"],
                        failures_dir=tmp_path, seed=2, profile_name="zoo")
    triggers = [bug["trigger"] for bug in result.bugs()]
    assert len(triggers) == 4, triggers
    assert any("dtype = float16 and K" in t for t in triggers), triggers


def test_a_product_whose_one_axis_ways_another_cause_refuses_is_still_the_product(tmp_path):
    """grad_bias divided by batch x output positions, beside a backward of square
    outputs only: one image of 1x2 positions raises, so the positions' way at the
    minimal value (batch 2) is masked; 2x2 positions of one image fail, and the
    trigger is the product, not "batch >= 2"."""
    built = zoo.generate(3, 42)
    cause = zoo.CAUSES["grad_bias a mean over batch x positions"]
    assert cause in built.causes and zoo.CAUSES["backward of square outputs only"] in built.causes
    result = run_checks(f"{ZOO}:{built.name}", CHECKS, ["conv2d"], failures_dir=tmp_path,
                        seed=3, profile_name="zoo")
    triggers = [bug["trigger"] for bug in result.bugs() if bug["failure"] == "grad_bias"]
    assert triggers and all("batch x output positions >= 2" in t for t in triggers), triggers


@pytest.mark.parametrize("seed, index, name, checks", [
    (1, 84, "batch block of four", ("forward", "grad_input")),
    (1, 6, "long float16 reduction", ("forward",)),
    (2, 47, "batch block of four", ("forward", "grad_input"))])
def test_a_case_the_sweep_left_unshrunk_is_made_plainest_beside_a_size_check(
        tmp_path, seed, index, name, checks):
    """The stem's neighbour (7x7, stride 2, padding 3), a sweep visit that the focused
    search did not shrink, beside a size check that refuses a kernel longer than the
    unpadded input: padding 0 keeping the outputs widens the input, and stride 1
    keeping them narrows it under the kernel (refused). The explanation's plainest
    problem takes the outputs at their least with padding 0, and a stride whose 1
    another cause masked: the case is the cause's minimal one (it kept padding 1 and
    batch 9, or stride 2 and padding 3). Where each explanation's smaller case only
    leads to the next (7x7, then 2x2, 1x2, 1x1 inputs, then padding 0 and five images),
    the case is described again as often as it takes."""
    built = zoo.generate(seed, index)
    cause = zoo.CAUSES[name]
    assert {cause, zoo.CAUSES["size check without padding"]} <= set(built.causes)
    result = run_checks(f"{ZOO}:{built.name}", list(checks), ["conv2d"],
                        failures_dir=tmp_path, seed=seed, profile_name="zoo")
    shown = [ConvProblem.from_params(b["op"], b["params"]) for b in result.bugs()]
    assert any(cause.minimal(p) for p in shown), [p.describe() for p in shown]
