"""The large size tier (issue 12): realistic sizes are reached, cheaply, and
shrink to the boundary of the region that fails.

Strategy-level tests draw problems only (fast); one test runs the suite on
the known size-dependent bugs of size_bugs.py and reads the shrunk cases.
"""

from __future__ import annotations

import functools
import json
import math
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, find, given, settings

from conv_harness.checks.registry import run_check
from conv_harness.problem import OPS, ConvCase, ConvProblem
from conv_harness.running.calling import CheckFailure
from conv_harness.running.capabilities import Capabilities
from conv_harness.running.loader import load_implementation
from strategies import DEFAULT_BOUNDS, conv_cases, conv_problems
from strategies.cases import noise
from strategies.problems import FLOAT16_MAX_TERMS, LARGE_TIERS
from tests.harness.conftest import fails
from tests.harness.test_triage import script_exits_1

HERE = Path(__file__).parent
QUIET = dict(database=None, deadline=None,
             suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
FIND = settings(max_examples=5000, derandomize=True, **QUIET)


def positions(p: ConvProblem) -> int:
    return math.prod(p.output_size)


def work(p: ConvProblem) -> int:
    """Multiply-adds of the forward pass (transposed: over its input positions)."""
    lo = p.input_size if p.spec.transposed else p.output_size
    return (p.batch * p.in_channels * (p.out_channels // p.groups) * math.prod(lo)
            * math.prod(p.kernel_size))


def tiny(p: ConvProblem) -> bool:
    b = DEFAULT_BOUNDS[p.spec.spatial_dims]
    lo = p.input_size if p.spec.transposed else p.output_size
    return (p.batch <= b.batch and max(p.kernel_size) <= b.kernel
            and p.in_channels // p.groups <= b.channels_per_group
            and p.out_channels // p.groups <= b.channels_per_group
            and max(lo) <= b.outputs + 2 * b.padding)  # padding may add outputs


@functools.lru_cache(maxsize=None)
def drawn(op: str, n: int) -> tuple[ConvProblem, ...]:
    """``n`` problems as the suite's search draws them (shared by the tests; a fixed
    seed, so that what is reached is the same every time)."""
    out: list[ConvProblem] = []

    @settings(max_examples=n, phases=[Phase.generate], derandomize=True, **QUIET)
    @given(conv_problems(op))
    def collect(p):
        out.append(p)

    collect()
    return tuple(out)


#: Realistic sizes the random search reaches, per operation
REACHED = {
    "conv1d": {"1024 positions": lambda p: positions(p) >= 1024,
               "kernel 11": lambda p: max(p.kernel_size) >= 11,
               "K 1024": lambda p: p.forward_terms() > 1024},
    # 2-d positions need both axes large: 1024 and more is rarer (a boundary test
    # below finds and shrinks it)
    "conv2d": {"768 positions": lambda p: positions(p) >= 768,
               "batch 16": lambda p: p.batch >= 16,
               "64 channels per group": lambda p: p.in_channels // p.groups >= 64,
               "kernel 7": lambda p: max(p.kernel_size) >= 7,
               "K 2048": lambda p: p.forward_terms() >= 2048},
    "conv3d": {"512 positions": lambda p: positions(p) >= 512,  # 1331 is reached, rarely
               "kernel 5": lambda p: max(p.kernel_size) >= 5,
               "batch 16": lambda p: p.batch >= 16},
    "conv_transpose2d": {"K 1024": lambda p: p.forward_terms() >= 1024,
                         "kernel 7": lambda p: max(p.kernel_size) >= 7},
}


# -- the share and the budget --------------------------------------------------------

@pytest.mark.parametrize("op", sorted(REACHED))
def test_most_examples_stay_tiny_and_every_one_is_cheap(op):
    problems = drawn(op, 4000)
    large = [p for p in problems if not tiny(p)]
    assert 0.03 <= len(large) / len(problems) <= 0.3, len(large)
    budget = LARGE_TIERS[OPS[op].spatial_dims].budget
    assert max(work(p) for p in problems) <= 1.5 * budget


def max_terms(p: ConvProblem) -> int:
    return max(p.forward_terms() + 1, p.grad_input_terms(), p.grad_weight_terms(),
               p.grad_bias_terms())


@pytest.mark.parametrize("op", ["conv2d", "conv_transpose2d"])
def test_float16_only_where_its_bound_means_something(op):
    problems = drawn(op, 4000)
    assert max(map(max_terms, problems)) > 2 * FLOAT16_MAX_TERMS
    assert max(max_terms(p) for p in problems if p.dtype == "float16") <= FLOAT16_MAX_TERMS


def test_a_float16_only_implementation_gets_large_problems_within_its_bound():
    caps = Capabilities(dtypes=("float16",))

    @settings(max_examples=300, phases=[Phase.generate], **QUIET)
    @given(conv_problems("conv2d", capabilities=caps))
    def within(p):
        assert p.forward_terms() + 1 <= FLOAT16_MAX_TERMS + 1
        assert p.grad_input_terms() <= FLOAT16_MAX_TERMS
        assert p.batch * positions(p) <= FLOAT16_MAX_TERMS

    within()


# -- realistic sizes are reached, and shrink to the boundary -------------------------

BOUNDARIES = [
    # op, what, predicate, what the shrunk problem must be
    ("conv1d", "more than 64 output positions", lambda p: positions(p) > 64,
     lambda p: positions(p) == 65),
    # in 2-d the product is drawn, then split: exactly 65, on one axis (drawn
    # per axis, the shrinker stopped where no axis could shrink alone: 3x22, 2x33)
    ("conv2d", "more than 64 output positions", lambda p: positions(p) > 64,
     lambda p: p.output_size == (1, 65)),
    ("conv2d", "1024 output positions", lambda p: positions(p) >= 1024,
     lambda p: positions(p) == 1024),
    ("conv_transpose1d", "more than 64 input positions",
     lambda p: math.prod(p.input_size) > 64, lambda p: p.input_size == (65,)),
    ("conv_transpose2d", "more than 64 input positions",
     lambda p: math.prod(p.input_size) > 64, lambda p: p.input_size == (1, 65)),
    # 3-d: the tiny tier's padding makes 5 outputs of an input of 1 (padding 2),
    # 125 positions, which shrinking preferred to the large tier's 1x1x65; with
    # the archetypes' share (issue 22) it now reaches the boundary itself, 1x1x65
    ("conv3d", "more than 64 output positions", lambda p: positions(p) > 64,
     lambda p: (p.output_size == (5, 5, 5) and p.input_size == (1, 1, 1))
     or (p.input_size == (1, 1, 65) and p.padding == (0, 0, 0))),
    ("conv2d", "batch above 8", lambda p: p.batch > 8, lambda p: p.batch == 9),
    ("conv2d", "more than 32 output channels, no groups",
     lambda p: p.out_channels > 32 and p.groups == 1, lambda p: p.out_channels == 33),
    ("conv2d", "a 7 kernel", lambda p: max(p.kernel_size) >= 7,
     lambda p: sorted(p.kernel_size) == [1, 7]),
    ("conv1d", "a kernel of 17", lambda p: max(p.kernel_size) >= 17,
     lambda p: p.kernel_size == (17,)),
    ("conv3d", "a 5 kernel", lambda p: max(p.kernel_size) >= 5,
     lambda p: sorted(p.kernel_size) == [1, 1, 5]),
    ("conv2d", "K above 1024", lambda p: p.forward_terms() > 1024,
     lambda p: 1024 < p.forward_terms() <= 1100),
    ("conv1d", "K above 1024", lambda p: p.forward_terms() > 1024,
     lambda p: 1024 < p.forward_terms() <= 1100),
]


@pytest.mark.parametrize("op,what,needs,minimal", BOUNDARIES,
                         ids=[f"{b[0]}: {b[1]}" for b in BOUNDARIES])
def test_a_size_that_fails_shrinks_to_the_boundary(op, what, needs, minimal):
    """What Hypothesis's shrinker makes of a problem that needs a size: the
    smallest size past the threshold, everything else at its simplest."""
    p = find(conv_problems(op), needs, settings=FIND)
    assert minimal(p), p.describe()
    assert p.groups == 1 and p.stride == (1,) * len(p.stride) and p.dtype == "float64"


@pytest.mark.parametrize("op", sorted(REACHED))
def test_realistic_sizes_are_reached(op):
    """Within the random search's first 4000 problems (the thorough profile draws
    3000 per test; the default 100 reaches each some of the time)."""
    problems = drawn(op, 4000)
    missing = [what for what, needs in REACHED[op].items() if not any(map(needs, problems))]
    assert not missing


def test_sizes_near_powers_of_two_are_likely():
    problems = [p for p in drawn("conv1d", 4000) if positions(p) > 16]
    counts = Counter(positions(p) for p in problems)
    near = sum(n for size, n in counts.items()
               if size & (size - 1) == 0 or (size - 1) & (size - 2) == 0)
    assert near >= len(problems) / 3, counts.most_common(10)


# -- the bound at K in the thousands ---------------------------------------------------

def reduction_case(kind: str, terms_per_channel: int = 33, channels: int = 64,
                   fill: float = 1 / 3) -> ConvCase:
    problem = ConvProblem(op="conv1d", batch=1, in_channels=channels, out_channels=2,
                          input_size=(terms_per_channel + 3,), kernel_size=(terms_per_channel,),
                          stride=(1,), padding=(0,), dilation=(1,), groups=1, bias=False,
                          dtype="float32")
    shapes = problem.shapes()

    def values(name: str, seed: int) -> np.ndarray:
        if kind == "constant":
            return np.full(shapes[name], fill, dtype=np.float32)
        return noise(kind, "float32", shapes[name], seed)

    return ConvCase(problem=problem, x=values("x", 1), weight=values("weight", 2), bias=None,
                    grad_output=values("grad_output", 3))


@pytest.mark.parametrize("kind", ["floats", "thirds", "constant"])
def test_float16_accumulation_is_caught_at_k_in_the_thousands(kind):
    """float32 summed in a float16 accumulator, K = 64 * 33 = 2112: off by about
    u16 * K * |terms| against a bound of u32 * K * sum|terms|, 8192 / K times
    smaller."""
    case = reduction_case(kind)
    assert case.problem.forward_terms() == 2112
    run_check("forward", load_implementation("conv_impl.einsum"), case)
    with pytest.raises(CheckFailure):
        run_check("forward", load_implementation(f"{HERE / 'size_bugs.py'}:long_reduction"),
                  case)


def test_float16_rounded_inputs_are_caught_by_coherent_data():
    """Inputs rounded to float16 err by up to u16 per product, both ways at random:
    with random data they add up to sqrt(K) * u16 * |term|, inside float32's
    worst-case bound at K = 2112 (which a sound bound cannot avoid); constant
    thirds all round the same way, K * u16 * |term|, far outside it. The data
    draw constant arrays (noise kind none) with such fill values."""
    impl = load_implementation(f"{HERE / 'size_bugs.py'}:half_inputs")
    with pytest.raises(CheckFailure):
        run_check("forward", impl, reduction_case("constant"))


# -- the suite finds the size-dependent bugs and shrinks them to the boundary ---------

def narrowest(p: ConvProblem) -> tuple[int, int, int] | None:
    """(input, dilated kernel, padding) of the first axis narrower than its kernel."""
    for n, k, pad, d in zip(p.input_size, p.kernel_size, p.padding, p.dilation):
        if n < d * (k - 1) + 1:
            return n, d * (k - 1) + 1, pad
    return None


def simplest_else(p: ConvProblem, *, batch: int = 1, out: int = 1) -> bool:
    """Everything the bug does not need at its simplest (bias and data aside)."""
    return (p.batch == batch and p.in_channels == p.groups == 1 and p.out_channels == out
            and set(p.stride) == {1} and set(p.dilation) == {1} and p.dtype == "float64")


def one_axis_kernel(p: ConvProblem, size: int) -> bool:
    return max(p.kernel_size) == size and math.prod(p.kernel_size) == size


#: implementation: (the tests, check and op, whose search must find it; what every
#: case they shrink it to must be). Which tests find a bug with the harness-test
#: seed was measured (forward, pointwise, delta_kernel, linearity, adjoint,
#: batch_consistency on conv1d/2d/3d), last when issue 22 changed where problems
#: come from (two thirds of conv2d problems from archetypes), and again when an
#: array's values became two choices (batch_block: pointwise conv1d, adjoint conv1d
#: and linearity conv3d found it, batch_consistency and forward no more; narrow_input:
#: forward conv2d's follow-up searches left a case with dilation 2, delta_kernel's
#: and linearity's on conv2d one minimal case each; positions_tail: adjoint conv1d
#: no longer found it, adjoint conv2d stopped at 81 positions, a 1x1 input padded by
#: 4, forward conv2d at 1x65): each test below
#: alone found its bug and shrank it to the boundary (linearity's channel tail
#: stopped at 34; narrow_input's forward conv1d search also left follow-up
#: cases with padding 2 or kernel 3 that are not minimal).
FOUND = {
    "batch_block": ((("pointwise", "conv1d"), ("linearity", "conv3d")),
                    lambda p: simplest_else(p, batch=9) and positions(p) == 1),
    "channels_tail": ((("forward", "conv1d"), ("adjoint", "conv2d")),
                      lambda p: simplest_else(p, out=33) and positions(p) == 1),
    # 65 positions on one axis (1-d: 65; 2-d: 1x65; 3-d: 1x1x65), or, where the
    # suite's shrinker stopped one short, 66 (2x33: the least first axis for 66
    # positions, one axis at most 65)
    "positions_tail": ((("forward", "conv2d"),),
                       lambda p: simplest_else(p) and set(p.kernel_size) == {1} and (
                           p.output_size in ((65,), (1, 65), (2, 33), (1, 1, 65)))),
    # 2-d: an input of 1 on one axis under a kernel on that axis alone, where
    # the shrinker stops (seen: kernel 1x2 padding 0x2; kernel 4x1 padding 3x0;
    # kernel 2x1 padding 1x0): the input size is derived from the outputs drawn,
    # so lowering the kernel or the padding alone widens the input. 1-d: an
    # input of 1 under a kernel of 2 with padding 1
    "narrow_input": ((("delta_kernel", "conv2d"),),
                     lambda p: simplest_else(p) and narrowest(p) is not None
                     and narrowest(p)[0] == 1 and sorted(p.kernel_size)[:-1] == [1] * (
                         len(p.kernel_size) - 1)
                     and (len(p.kernel_size) > 1 or narrowest(p) == (1, 2, 1))),
    # the kernel's boundary, 7, on one axis
    "large_kernel": ((("adjoint", "conv1d"),),
                     lambda p: one_axis_kernel(p, 7) and p.in_channels == p.out_channels == 1),
    # linearity compares three results, each within float32's bound: float16
    # accumulation shows there only at a larger K (seen: 2060); the forward
    # check's boundary is pinned below
    "long_reduction": ((("linearity", "conv3d"),),
                       lambda p: p.dtype == "float32" and p.forward_terms() > 1024),
}

#: long_reduction, apart: see its mark below
LONG = ("long_reduction",)


@pytest.mark.parametrize("bugs", [
    pytest.param(tuple(b for b in FOUND if b not in LONG), id="five"),
    pytest.param(LONG, id="long_reduction", marks=pytest.mark.xfail(strict=False, reason=(
        "float32 K > 1024 is in 0.6-1.4% of a test's examples (30 seeds x 100 examples "
        "per operation), so a test reaches it about one time in six: with the harness-test "
        "seed none of the 18 tests (forward, pointwise, delta_kernel, linearity, adjoint, "
        "batch_consistency on conv1d/2d/3d) found long_reduction after the archetype draw "
        "changed (issue 22); linearity conv3d finds it again since an array's values are "
        "two choices, which any change to the strategies can undo"))),
])
@pytest.mark.long
def test_the_suite_finds_size_bugs_and_shrinks_them_to_the_boundary(run_pytest, tmp_path,
                                                                     bugs):
    """In the default number of examples (the harness-test profile: 100, fixed seed).

    Each size is past its bug's threshold in some 1-3% of a test's examples
    (measured over 4000 problems per operation; a K above 1024 in float32,
    under 1%), so one test of 100 finds a given bug most of the time, not
    always; a run of the suite, every check and operation, finds each. Which
    tests a fixed seed finds it in moves with any change to the strategies or
    the checks: pinned here, one or two tests per bug, each bug found, every
    case shrunk to the boundary (batch 9, 33 channels, 65 positions, a kernel
    of 7; narrow_input: an input of 1 under a kernel of 2), with a script that
    exits 1.
    """
    selection = " or ".join(f"(test_{check} and {impl}-{op}])"
                            for impl in bugs for check, op in FOUND[impl][0])
    args = [a for impl in bugs for a in ("--impl", f"{HERE / 'size_bugs.py'}:{impl}")]
    result = run_pytest(*args, "-k", selection, timeout=900)
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-3000:]
    found: dict[str, list[dict]] = {}
    for path in sorted((tmp_path / "failures").glob("*.json")):
        record = json.loads(path.read_text())
        if "params" in record:
            found.setdefault(record["impl"].rpartition(":")[2], []).append(
                dict(record, path=str(path)))
    assert set(found) == set(bugs), sorted(found)
    scripts = []
    for impl, records in found.items():
        minimal = FOUND[impl][1]
        for record in records:
            problem = ConvProblem.from_params(record["op"], record["params"])
            assert minimal(problem), (impl, record["check"], problem.describe())
            scripts.append((impl, Path(record["path"]).with_suffix(".py")))
    for impl, script in scripts:
        script_exits_1(script, HERE.parents[1])


@pytest.mark.parametrize("bug,op,minimal", [
    ("large_kernel", "conv2d", lambda p: p.kernel_size == (7, 1) and p.batch == 1),
    # K just past 1024 (seen: 1032), or, where the data shrank to ones, which
    # float16 sums exactly up to 2048, just past 2048 (seen: 2057 = 121 x 17). In
    # conv3d: since an array's values are two choices, this seed's 3000 conv1d
    # examples met a float32 K above 1024 twice, each time with tiny weights, which
    # float16 flushes in torch and here alike (conv2d's stops at 2058, conv3d's at 1032)
    ("long_reduction", "conv3d",
     lambda p: p.dtype == "float32" and p.batch == 1 and (
         1024 < p.forward_terms() <= 1100 or 2048 < p.forward_terms() <= 2200)),
], ids=["large_kernel-conv2d", "long_reduction-conv3d"])
@pytest.mark.long
def test_the_forward_check_shrinks_kernel_and_k_bugs_to_the_boundary(bug, op, minimal):
    """The forward check alone, on the suite's cases, searched longer than the
    default 100 (a kernel of 7 or a float32 K above 1024 is in about 1% of the
    problems). K may stop just past 2048 instead (seen: 2052 in 2-d, 2057 in
    1-d): the data had shrunk to ones, which float16 sums exactly up to 2048,
    and a smaller K needs data that do not round exactly, a later and larger
    choice that the shrinker does not raise."""
    impl = load_implementation(f"{HERE / 'size_bugs.py'}:{bug}")
    case = find(conv_cases(op), lambda c: fails("forward", impl, c),
                settings=settings(max_examples=3000, derandomize=True, **QUIET))
    assert minimal(case.problem), case.problem.describe()


def test_the_summary_says_which_sizes_are_never_drawn():
    """Issue 35 item 3: a path taken only past the large tier (a batch block of 32) or
    in a float16 sum longer than its bound can judge is never reached by a default
    run; the summary says so for each implementation, and how to reach it."""
    from strategies.problems import FLOAT16_MAX_TERMS, never_drawn

    assert never_drawn(("float64", "float32")) == [
        "batch > 17", "channels per group > 129", "forward and grad_input K > 4096"]
    assert never_drawn(("float32", "float16"))[-1] == f"K > {FLOAT16_MAX_TERMS} in float16"
    assert never_drawn(("bfloat16",), "bfloat16")[-1] == "K > 64 in bfloat16"
    assert not any("bfloat16" in s for s in never_drawn(("bfloat16",), "float32"))
