"""Ties between sizes of different arrays (issue 35, conv_harness/ties.py): made and made
again at other values, named by the explanation, and a bug on one found.

``fast_paths.py:gemm_tie`` is a GEMM conv2d that takes a square branch when a group's
weight matrix is square, out channels = in channels x kernel taps (2 or more), and
there reads it transposed: right everywhere but on that tie.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conv_harness import ties
from conv_harness.problem import OPS, ConvProblem
from conv_harness.running.capabilities import Capabilities
from conv_harness.running.loader import load_implementation
from conv_harness.triage.explain import Condition, explain, matches
from conv_harness.searching import sweep
from strategies import catalogue, conv_problems
from strategies.cases import features, noise_case
from tests.harness.runs import triaged
from tests.harness.conftest import fails

HERE = Path(__file__).parent
FAST = settings(max_examples=50, deadline=None, database=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
FORWARD_CHECKS = ("forward", "delta_kernel", "adjoint")


def _problem(**kw) -> ConvProblem:
    base = dict(op="conv2d", batch=1, in_channels=1, out_channels=1, input_size=(3, 3),
                kernel_size=(1, 1), stride=(1, 1), padding=(0, 0), dilation=(1, 1),
                groups=1, bias=True, dtype="float64")
    return ConvProblem(**{**base, **kw})


@pytest.mark.parametrize("op", sorted(OPS))
@FAST
@given(data=st.data())
def test_each_tie_made_holds_on_a_valid_problem(op, data):
    p = data.draw(conv_problems(op))
    for tie in ties.TIES:
        for q in ties.made(p, tie.name):  # every way it is made
            assert tie.holds(q) and min(q.output_size) >= 1, (tie.name, q.describe())
            for r in ties.retied(q, tie.name):
                assert tie.holds(r) and tie.left(r) != tie.left(q) and min(r.output_size) >= 1


def test_a_tie_condition_reads_and_matches():
    condition = Condition("M=K", ">=", 2, None)
    assert condition.text() == "batch x output positions = K (in channels per group x kernel taps)"
    assert matches([condition], _problem(in_channels=2, input_size=(1, 2)), {})
    assert not matches([condition], _problem(in_channels=3, input_size=(1, 2)), {})
    assert not matches([condition], _problem(), {})  # 1 = 1 is no tie
    # a condition stored before ties had values reads as any tie
    assert Condition.from_json(dict(condition.to_json(), op="in", value=[True])) == condition
    # from a least value on: the tie below it is outside
    least = Condition("M=K", ">=", 3, None)
    assert least.text() == "batch x output positions = K (in channels per group x kernel taps)" \
        " >= 3"
    assert matches([least], _problem(in_channels=3, input_size=(1, 3)), {})
    assert not matches([least], _problem(in_channels=2, input_size=(1, 2)), {})


@pytest.mark.parametrize("name", [t.name for t in ties.TIES])
@pytest.mark.parametrize("value", [2, 3, 4, 6, 16])
def test_a_tie_is_made_at_a_given_value(name, value):
    """`ties.at`: the tie made at exactly that value, every way it can be from the
    problem, by one side set to it and the other made to match."""
    p = _problem(batch=2, out_channels=5, input_size=(1, 6), kernel_size=(1, 3))
    made = ties.at(p, name, value)
    assert made and all(ties.BY_NAME[name].value(q) == value for q in made), name
    assert len(set(made)) == len(made)


def test_the_summary_counts_the_ties_a_problem_holds():
    assert "tie N=K" in features(noise_case(_problem(in_channels=2, out_channels=2)))
    assert not [f for f in features(noise_case(_problem())) if f.startswith("tie ")]


def test_gemm_tie_is_wrong_on_its_tie_only():
    impl = load_implementation(f"{HERE / 'fast_paths.py'}:gemm_tie")
    for on_tie in (dict(in_channels=2, out_channels=2),  # N = K = 2
                   dict(out_channels=4, kernel_size=(2, 2)),
                   dict(groups=2, in_channels=2, out_channels=4, kernel_size=(1, 2))):
        assert fails("forward", impl, noise_case(_problem(**on_tie))), on_tie
    for off in (dict(in_channels=2, out_channels=3), dict(in_channels=3, out_channels=2),
                dict(out_channels=3, kernel_size=(2, 2)),
                dict()):  # N = K = 1: no tie
        assert not fails("forward", impl, noise_case(_problem(**off))), off



def _one_entry(name: str, seed: int, tmp_path, monkeypatch):
    """The one entry a default run of the checks that call the forward pass gives
    fast_paths.py's ``name`` with ``seed``: the entry, its problem, the run's output
    and its failures folder."""
    failures = tmp_path / "failures"
    bugs, out = triaged(f"{HERE / 'fast_paths.py'}:{name}", FORWARD_CHECKS,
                        ("conv2d",), failures, seed=seed)
    assert len(bugs) == 1, out[-3000:]
    (bug,) = bugs
    return bug, ConvProblem.from_params(bug["op"], bug["params"]), out, failures


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_default_run_finds_a_bug_on_a_tie_and_names_the_tie(seed, tmp_path, monkeypatch):
    """The checks that call the forward pass, each with its own seed, as a default run
    does: one entry, on a tie, whose trigger is the tie, not the sizes it shrank to
    (``in channels = 2 and out channels = 2``, true of the minimal problem and no
    other)."""
    bug, p, _, failures = _one_entry("gemm_tie", seed, tmp_path, monkeypatch)
    record = json.loads((failures / bug["case_file"]).read_text())
    assert ConvProblem.from_params(record["op"], record["params"]) == p
    assert p.out_channels // p.groups == p.forward_terms() == 2, p.describe()
    assert bug["trigger"].startswith(
        "fails when out channels per group = K (in channels per group x kernel taps);"), bug


def _explained(case_problem: ConvProblem, fails_when):
    return explain(noise_case(case_problem), lambda case: fails_when(case.problem),
                   Capabilities())


def _trigger(case_problem: ConvProblem, fails_when) -> str:
    return " and ".join(c.text() for c in _explained(case_problem, fails_when).trigger)


def test_the_explanation_names_a_tie_only_where_the_bug_follows_it():
    """Made at other values it fails, broken by one side alone it passes: the tie.
    A bug of in channels alone, on a minimal problem that happens to hold the tie,
    fails where the tie is broken too: its trigger stays the in channels."""
    on_tie = _problem(in_channels=2, out_channels=2, input_size=(1, 1))
    assert _trigger(on_tie, lambda p: p.out_channels // p.groups == p.forward_terms() >= 2) \
        == "out channels per group = K (in channels per group x kernel taps)"
    assert _trigger(on_tie, lambda p: p.in_channels // p.groups >= 2) \
        == "in channels per group >= 2"
    # its row in the explanation's table: the tie held fails, broken passes
    table = _explained(on_tie, lambda p: p.out_channels // p.groups == p.forward_terms() >= 2
                       ).table()
    assert "  out channels per group = K (in channels per group x kernel taps)  broken:pass  " \
        "2*:FAIL  3:FAIL" in table, table


@pytest.mark.parametrize("least, start", [(16, dict(out_channels=18, kernel_size=(3, 6),
                                                     input_size=(3, 6))),
                                          (5, dict(in_channels=7, out_channels=7))])
def test_a_tie_taken_from_a_least_value_on_names_that_value(least, start):
    """A branch taken on a tie from a size on (a blocked GEMM's square branch, from 16):
    the tie made at smaller values passes below it, so the trigger names the least
    value that fails, found by bisection; a further search then still meets ties
    below it."""
    def fails_when(p: ConvProblem) -> bool:
        return p.out_channels // p.groups == p.forward_terms() >= least
    explained = _explained(_problem(**start), fails_when)
    assert " and ".join(c.text() for c in explained.trigger) == \
        f"out channels per group = K (in channels per group x kernel taps) >= {least}"
    assert f" {least - 1}:pass  {least}:FAIL" in explained.table(), explained.table()


@pytest.mark.parametrize("op", ["conv1d", "conv2d", "conv_transpose2d", "conv3d"])
def test_the_sweep_makes_each_archetype_a_tie(op):
    """Each archetype, made into each tie its moves can make (once per problem): the
    sweep's tie visits, which random draws make at realistic sizes in under 1%."""
    visits = catalogue.tie_visits(op, Capabilities())
    assert visits
    for visit in visits:
        assert visit.tie in ties.BY_NAME and visit.archetype.op == op
        assert ties.BY_NAME[visit.tie].holds(visit.problem), visit
        assert visit.label.startswith(visit.archetype.label + " made a tie, ")
        assert sweep.focus(visit) == (visit.archetype, None)  # searched from its archetype
    assert len({v.problem for v in visits}) == len(visits)
    made = {(v.archetype, v.tie) for v in visits}
    assert any(tie == "N=K" for _, tie in made) and any(tie == "M=N" for _, tie in made)


def test_the_tie_visits_honour_the_capabilities():
    square = Capabilities(square=True)
    assert all(len(set(v.problem.kernel_size)) == 1
               for v in catalogue.tie_visits("conv2d", square))
    no_groups = Capabilities(groups=False)
    assert all(v.problem.groups == 1 for v in catalogue.tie_visits("conv2d", no_groups))


def test_a_tie_is_lowered_along_itself():
    """`ties.lowered`: one size lower, the tie made again; each holds the tie and is
    plainer than where it started, plainest first."""
    p = _problem(in_channels=2, out_channels=98, kernel_size=(7, 7), input_size=(2, 2),
                 padding=(3, 3))
    lowered = ties.lowered(p, "N=K")
    assert lowered and all(ties.BY_NAME["N=K"].holds(q) for q in lowered)
    assert all(q.size_rank() < p.size_rank() for q in lowered)
    assert [q.size_rank() for q in lowered] == sorted(q.size_rank() for q in lowered)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_tie_at_realistic_sizes_is_found_by_the_sweep_and_shrunk_along_it(
        seed, tmp_path, monkeypatch):
    """``gemm_tie_large`` takes its square branch only at N = K >= 16, which no
    random draw of these seeds makes: the sweep's tie visit of an archetype does
    (a 7x7 stem with N = K = 98). Single changes break the tie and Hypothesis does
    not search a visit, so the explanation shrinks it along the tie, one size lower
    and the tie made again, to N = K below 20; the trigger is the tie."""
    bug, p, out, failures = _one_entry("gemm_tie_large", seed, tmp_path, monkeypatch)
    assert 16 <= p.out_channels // p.groups == p.forward_terms() < 20, p.describe()
    assert bug["trigger"].startswith(
        "fails when out channels per group = K (in channels per group x kernel taps) >= 16;"
    ), bug
    assert "made a tie, out channels per group = K" in out
    record = json.loads((failures / bug["case_file"]).read_text())
    assert record["params"] == bug["params"]


# -- crossings ---------------------------------------------------------------------------

def _crossed(p: ConvProblem) -> bool:
    return ties.CROSSING_BY_NAME["W~X"].holds(p)


def test_a_crossing_is_named_only_where_the_bug_follows_it():
    """Kernel 2x1 on an input of 1x2 (padding 1 on h): longer on h, shorter on w.
    Crossed again and with the axes swapped it fails, undone both ways (kernel 1x1;
    kernel 2x2) it passes: the trigger is the crossing. A bug of a kernel of two taps
    on h alone fails where the kernel is the longer on both axes too: its own
    conditions stay."""
    crossed = _problem(input_size=(1, 2), kernel_size=(2, 1), padding=(1, 0))
    assert _crossed(crossed)
    assert all(_crossed(q) for q in ties.crossed_again(crossed, "W~X"))
    assert len(ties.uncrossed(crossed, "W~X")) == 2
    assert not any(_crossed(q) for q in ties.uncrossed(crossed, "W~X"))
    text = ties.CROSSING_BY_NAME["W~X"].text
    assert _trigger(crossed, _crossed) == text
    assert f"  {text}  broken:pass  held*:FAIL" in _explained(crossed, _crossed).table()
    assert _trigger(crossed, lambda p: max(p.kernel_size) >= 2) != text


def test_a_kernel_longer_than_the_input_is_named_only_where_the_bug_follows_it():
    """Kernel 1x2 over a 1x1 input padded on w: a size check that forgets the padding
    refuses it. Made again (a tap longer) it fails; undone (kernel 1x1; input 1x2) it
    passes: the trigger names it. A bug of padding with a kernel of two taps fails on
    the input made as long as the kernel, and of a crossing (the kernel the shorter on
    some axis) where the kernel is made the longer on every axis: neither is named so."""
    narrow = _problem(input_size=(1, 1), kernel_size=(1, 2), padding=(0, 1))
    longer = ties.CROSSING_BY_NAME["W>X"]

    def refused(p: ConvProblem) -> bool:
        return longer.holds(p)
    assert [q.kernel_size for q in ties.crossed_again(narrow, "W>X")] == [(1, 3)]
    assert [(q.kernel_size, q.input_size) for q in ties.uncrossed(narrow, "W>X")] == [
        ((1, 1), (1, 1)), ((1, 2), (1, 2))]
    assert _trigger(narrow, refused) == longer.text
    assert _trigger(narrow, lambda p: max(p.padding) >= 1 and max(p.kernel_size) >= 2) \
        != longer.text
    crossed = _problem(input_size=(1, 2), kernel_size=(2, 1), padding=(1, 0))
    assert longer.holds(crossed)
    assert _trigger(crossed, _crossed) == ties.CROSSING_BY_NAME["W~X"].text


def test_crossing_swap_is_wrong_on_a_crossing_only():
    impl = load_implementation(f"{HERE / 'fast_paths.py'}:crossing_swap")
    weight_varies = dict(in_channels=1)
    assert fails("forward", impl, noise_case(_problem(
        input_size=(1, 2), kernel_size=(2, 1), padding=(1, 0), **weight_varies)))
    for off in (dict(input_size=(2, 2), kernel_size=(2, 1)),  # shorter everywhere
                dict(input_size=(1, 1), kernel_size=(2, 2), padding=(1, 1))):  # longer
        assert not fails("forward", impl, noise_case(_problem(**off))), off
    assert "crossing W~X" in features(noise_case(_problem(
        input_size=(1, 2), kernel_size=(2, 1), padding=(1, 0))))


def test_the_sweep_crosses_each_archetype_at_its_own_geometry():
    """A crossing visit shortens one axis's input to a position below the kernel's span
    (where the padding allows it) and keeps another longer: the stem's 7x7 kernel over
    6x8, deeplab's dilation-6 span of 13 over 12. One axis, or a transposed problem,
    has nothing to cross. The stem's visit fails stem_crossed."""
    caps = Capabilities()
    visits = {v.archetype.label: v for v in catalogue.crossing_visits("conv2d", caps)}
    stem = visits["resnet 7x7 s2 p3 stem"]
    assert stem.crossing == "W~X" and "stem made a crossing" in stem.label
    assert stem.problem.input_size == (6, 8) and _crossed(stem.problem)
    assert visits["deeplab 3x3 d6 p6"].problem.input_size[0] == 12
    assert all(_crossed(v.problem) for v in visits.values())
    assert catalogue.crossing_visits("conv1d", caps) == ()
    assert catalogue.crossing_visits("conv_transpose2d", caps) == ()
    impl = load_implementation(f"{HERE / 'fast_paths.py'}:stem_crossed")
    assert fails("forward", impl, stem.case())
    assert not fails("forward", impl, visits["convnext depthwise 7x7 p3"].case())


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_crossing_at_a_stems_geometry_is_found_through_the_sweep(seed, tmp_path,
                                                                   monkeypatch):
    """``stem_crossed`` takes the crossing's wrong branch on the 7x7 stride-2 stem alone.
    The random draws of seeds 1 and 2 cross no such kernel (without the crossing visits
    those runs pass it); the stem's crossing visit fails, a search focused on the stem
    meets and shrinks it: one entry, one image and channel, the trigger the crossing."""
    bug, p, _, _ = _one_entry("stem_crossed", seed, tmp_path, monkeypatch)
    assert (p.kernel_size, p.stride, p.padding) == ((7, 7), (2, 2), (3, 3)), p.describe()
    assert _crossed(p) and p.batch == p.in_channels == p.out_channels == 1, p.describe()
    assert bug["trigger"].startswith("fails when " + ties.CROSSING_BY_NAME["W~X"].text), bug
    assert bug["reproduces_alone"] is True


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_default_run_finds_a_bug_on_a_crossing_and_names_it(seed, tmp_path, monkeypatch):
    """About a fifth of the conv2d problems drawn cross the kernel and the input, so a
    default run meets such a bug; its trigger names the crossing, where the sizes it
    shrank to (a kernel of 2 on h, padding 1 on h, 2 outputs on w) hold of few others."""
    bug, p, _, _ = _one_entry("crossing_swap", seed, tmp_path, monkeypatch)
    assert _crossed(p) and p.batch == p.in_channels == p.out_channels == 1, p.describe()
    assert bug["trigger"].startswith("fails when " + ties.CROSSING_BY_NAME["W~X"].text), bug
    assert bug["reproduces_alone"] is True


def _outputs_crossed(p: ConvProblem) -> bool:
    return ties.CROSSING_BY_NAME["W~O"].holds(p)


@pytest.mark.parametrize("op", ["conv2d", "conv_transpose2d", "conv3d"])
@FAST
@given(data=st.data())
def test_each_crossing_made_again_or_undone_is_a_valid_problem(op, data):
    """`ties.crossed_again` keeps the crossing, `ties.uncrossed` undoes it, both on valid
    problems (a kernel that covers the outputs: the widest the padded input holds)."""
    p = data.draw(conv_problems(op))
    for crossing in ties.CROSSINGS:
        if not crossing.holds(p):
            continue
        for q in ties.crossed_again(p, crossing.name):
            assert crossing.holds(q) and min(q.output_size) >= 1, (crossing.name, q.describe())
        for q in ties.uncrossed(p, crossing.name):
            assert not crossing.holds(q) and min(q.output_size) >= 1, (crossing.name,
                                                                       q.describe())


def test_a_crossing_of_kernel_and_outputs_is_named_only_where_the_bug_follows_it():
    """A 2x1 kernel over a 2x2 input: one output on h, two on w. The kernel is longer
    than the outputs on h and shorter on w (a crossing of the grad_weight correlation's
    two operands), but shorter than the input nowhere it is longer: not W~X. A bug of
    that crossing is named so; a bug of a two-tap kernel on h alone is not."""
    crossed = _problem(input_size=(2, 2), kernel_size=(2, 1))
    assert _outputs_crossed(crossed) and not _crossed(crossed)
    assert all(_outputs_crossed(q) for q in ties.crossed_again(crossed, "W~O"))
    undone = ties.uncrossed(crossed, "W~O")
    assert [q.kernel_size for q in undone] == [(1, 1), (2, 2)]
    assert not any(_outputs_crossed(q) for q in undone)
    text = ties.CROSSING_BY_NAME["W~O"].text
    assert _trigger(crossed, _outputs_crossed) == text
    assert _trigger(crossed, lambda p: p.kernel_size[0] >= 2) != text
    assert "crossing W~O" in features(noise_case(crossed))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_backward_that_recurses_on_a_crossing_is_one_entry_that_names_it(
        seed, tmp_path, monkeypatch):
    """``crossing_recursion``'s backward asks which of the kernel and the output gradient
    is the smaller on every axis, and asks again the other way round where neither is:
    a real autodiff library's backward recursed forever there, on one channel, a 2x2
    input and a 2x1 kernel. Each seed's default run gives one entry at that problem (or
    its mirror, 1x2), its trigger the crossing of the kernel and the outputs."""
    failures = tmp_path / "failures"
    bugs, out = triaged(f"{HERE / 'fast_paths.py'}:crossing_recursion",
                        ("grad_input", "grad_weight"), ("conv2d",), failures, seed=seed)
    assert len(bugs) == 1, out[-3000:]
    (bug,) = bugs
    p = ConvProblem.from_params(bug["op"], bug["params"])
    assert (bug["failure"], bug["function"]) == ("raised", "conv2d_backward"), bug
    assert p.input_size == (2, 2) and p.kernel_size in ((2, 1), (1, 2)), p.describe()
    assert p.batch == p.in_channels == p.out_channels == 1, p.describe()
    assert bug["trigger"].startswith("fails when " + ties.CROSSING_BY_NAME["W~O"].text), bug
    assert bug["reproduces_alone"] is True


@pytest.mark.parametrize("name, tied", [
    ("W=X", dict(input_size=(2, 1), kernel_size=(2, 1))),  # one output on h
    ("W=X", dict(input_size=(3, 2), kernel_size=(2, 1), dilation=(2, 1))),
    ("W=O", dict(input_size=(3, 1), kernel_size=(2, 1))),  # two taps, two outputs on h
])
def test_a_per_axis_tie_is_named_only_where_the_bug_follows_it(name, tied):
    """The kernel's span as long as the input on an axis (W=X), or its taps as many as
    the outputs (W=O): made at the next size, with padding (more outputs), and on the
    other axis it fails; broken by the input alone or the kernel alone it passes. A
    bug of one output, which W=X without padding also gives, or of a two-tap kernel,
    keeps its own conditions."""
    tie = ties.CROSSING_BY_NAME[name]
    p = _problem(**tied)
    assert tie.holds(p)
    assert all(tie.holds(q) for q in ties.crossed_again(p, name))
    assert len(ties.uncrossed(p, name)) == 2
    assert not any(tie.holds(q) for q in ties.uncrossed(p, name))
    assert _trigger(p, tie.holds) == tie.text
    assert f"  {tie.text}  broken:pass  held*:FAIL" in _explained(p, tie.holds).table()
    assert _trigger(p, lambda q: q.kernel_size[0] >= 2) != tie.text
    assert _trigger(p, lambda q: q.kernel_size[0] >= 2 and q.output_size[0] == 1) != tie.text
    assert f"tie {name}" in features(noise_case(p))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_default_run_finds_a_bug_on_a_per_axis_tie_and_names_it(seed, tmp_path,
                                                                   monkeypatch):
    """``full_window`` reads the kernel flipped on an axis its dilated span covers
    exactly: each seed's run gives one entry, at a 2-tap kernel over 2 positions, its
    trigger the tie (not "kernel >= 2 and outputs = 1", which the tie gives there)."""
    bug, p, _, _ = _one_entry("full_window", seed, tmp_path, monkeypatch)
    assert ties.CROSSING_BY_NAME["W=X"].holds(p), p.describe()
    assert p.batch == p.in_channels == p.out_channels == 1, p.describe()
    assert bug["trigger"].startswith("fails when " + ties.CROSSING_BY_NAME["W=X"].text), bug
    assert bug["reproduces_alone"] is True
