"""Strategies for a problem's values and memory layouts: whole `ConvCase` s.

Speed matters here: the suite draws a case for every example, and Hypothesis's
cost grows with the number of choices it records (its shrinker most of all). An
array is therefore two choices, not one per element: a constant or dense noise
of one kind, and a number that is the constant's value or the noise's seed
(see `draw_array`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import numpy as np
from hypothesis import event
from hypothesis import strategies as st
from hypothesis.control import currently_in_test_context

from conv_harness import ties
from conv_harness.problem import (ARRAY_NAMES, CHANNEL_LAYOUTS, LAYOUTS_OF, ConvCase, ConvProblem,
                             finfo)
from conv_harness.running.capabilities import Capabilities
from strategies.archetypes import coverage_label
from strategies.problems import DEFAULT_BOUNDS, Bounds, Focus, conv_problems

MAX_ABS_VALUE = 4.0

#: What varies an array beyond its fill value, simplest first (shrinking heads
#: for "none", a constant array). "tiny" comes last, so it changes no shrunk
#: case that does not need it.
NOISE_KINDS: tuple[str, ...] = ("none", "ints", "thirds", "floats", "tiny")

#: How many octaves above the dtype's smallest normal number the "tiny" kind's
#: scale reaches: float32's 2**-102 (2e-31) takes its results past 1e-30;
#: float16's 2**-4 is where its ordinary values begin.
TINY_OCTAVES = {"float16": 10, "float32": 24, "float64": 24, "bfloat16": 24}
_noise_kinds = st.sampled_from(NOISE_KINDS)
#: an array's second choice: its fill value's (kind "none", `fill`) or its noise's seed
_fills_or_seeds = st.integers(0, 2**32 - 1)


@functools.lru_cache(maxsize=None)
def values(dtype: str | np.dtype) -> st.SearchStrategy[float]:
    """Scalars of ``dtype`` within +-4: small integers, thirds, then any floats.

    Small integers (tried first, so data shrinks to zeros and ones) make
    counterexamples easy to read, but every float type sums them exactly, so a
    precision bug would hide behind them; thirds and arbitrary floats do not
    round exactly, so they expose an implementation that computes in a
    narrower type than it claims. The bound keeps float16 sums far from
    overflow.
    """
    dt = np.dtype(dtype)
    return st.one_of(
        st.integers(-3, 3),
        st.sampled_from(_fills(dt.name)[1]),
        st.floats(-MAX_ABS_VALUE, MAX_ABS_VALUE, width=dt.itemsize * 8, allow_subnormal=False),
    )


def noise_case(problem: ConvProblem) -> ConvCase:
    """``problem`` with float noise in every array, each seeded by its place in the
    problem's arrays: the same case every time, C-contiguous."""
    arrays = {name: None if shape is None else noise("floats", problem.dtype, shape, seed)
              for seed, (name, shape) in enumerate(problem.shapes().items())}
    return ConvCase(problem=problem, layouts={}, **arrays)


def noise(kind: str, dtype: str | np.dtype, shape: tuple[int, ...], seed: int) -> np.ndarray:
    """Dense values of one `NOISE_KINDS` kind, from NumPy's generator seeded by ``seed``.

    The same kinds as `values`: integers in [-3, 3], thirds k/3 with |k| <= 12,
    or floats uniform in [-4, 4], all rounded to ``dtype``; and "tiny": floats
    uniform in [-4, 4] times one scale per array, 2**(e - 2) times the dtype's
    smallest normal number with e in [0, `TINY_OCTAVES`] drawn from the seed.

    Why "tiny": an implementation may flush subnormals to zero (contract
    section 2), so the tolerance allows that (conv_harness/checks/tolerance.py), but it
    must not flush normal numbers. Without values near the bottom of the
    dtype's range no result ever comes near it, and a float32 convolution
    that zeroes everything below 1e-30 would pass. At the smallest scales
    most values are subnormal (a flushing implementation must still pass);
    at the larger ones every value and result is a small normal number.
    """
    rng = np.random.default_rng(seed)
    if kind == "ints":
        drawn = rng.integers(-3, 4, size=shape)
    elif kind == "thirds":
        drawn = rng.integers(-12, 13, size=shape) / 3
    elif kind == "floats":
        drawn = rng.uniform(-MAX_ABS_VALUE, MAX_ABS_VALUE, size=shape)
    elif kind == "tiny":
        dt = np.dtype(dtype)
        octave = int(rng.integers(0, TINY_OCTAVES[dt.name] + 1))
        scale = float(finfo(dt).smallest_normal) * 2.0 ** (octave - 2)
        drawn = rng.uniform(-MAX_ABS_VALUE, MAX_ABS_VALUE, size=shape) * scale
    else:
        raise ValueError(f"unknown noise kind {kind!r}; expected one of {NOISE_KINDS[1:]}")
    return drawn.astype(dtype)


@functools.lru_cache(maxsize=None)
def _fills(dtype: str) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """The small integers (0, 1, -1, ..., -3) and the thirds k/3 (|k| <= 12) of ``dtype``,
    each in the order shrinking prefers: nearest 0 first."""
    dt = np.dtype(dtype)
    integers = tuple(float(v) for v in sorted(range(-3, 4), key=lambda v: (abs(v), v < 0)))
    thirds = tuple(sorted({float(dt.type(k / 3)) for k in range(-12, 13)},
                          key=lambda v: (abs(v), v < 0)))
    return integers, thirds


def fill(dtype: str, choice: int) -> float:
    """The value of a constant array of ``dtype`` for its drawn ``choice``: the kinds of
    value `values` draws, a small integer, a third, or a float in [-4, 4].

    The least choices are the integers, nearest 0 first, then the thirds (shrinking
    heads for 0, then 1); above those, the choice modulo 3 picks the kind, so that
    random draws give each kind a third of the constants, as `values` does (a float:
    uniform, from NumPy's generator seeded by the choice, rounded to ``dtype``)."""
    integers, thirds = _fills(dtype)
    if choice < len(integers):
        return integers[choice]
    if choice < len(integers) + len(thirds):
        return thirds[choice - len(integers)]
    kind, index = choice % 3, choice // 3
    if kind == 0:
        return integers[index % len(integers)]
    if kind == 1:
        return thirds[index % len(thirds)]
    drawn = np.random.default_rng(choice).uniform(-MAX_ABS_VALUE, MAX_ABS_VALUE)
    return float(np.dtype(dtype).type(drawn))


def draw_array(draw, dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    """An array from two choices: a noise kind, and a number that is the fill value of
    a constant array (`fill`) or the seed of the noise.

    Why not `hypothesis.extra.numpy.arrays`: it draws a fill value plus about
    sqrt(size) (at least 10) single elements, four or five choices each, so a
    case cost some 200 choices and most of an example's time, and every
    element beyond those few was the fill value. Here an array is constant
    (kind "none": the fill, which Hypothesis shrinks towards 0 and 1) or dense
    noise of one kind (every element varies, which finds more bugs) from a
    seed that Hypothesis draws and shrinks, so every example replays exactly.
    Both kinds draw the same two choices, so the choices keep their places:
    the shrinker can turn noise into a constant by lowering the kind alone,
    without shifting every later choice (measured: with the seed drawn only
    for noise, the tutorial's shrunk case kept noise in all four arrays).

    Why one number for both, not a fill value and a seed each: the shrinker's
    cost grows faster than the number of choices (it tries moving value
    between every choice and its next few, and deleting each run of them):
    with four choices an array, a case's 45 choices took a shrink some 375-730
    calls; with two, the same tests' shrinking took half the time.
    The saved case file holds the arrays themselves, never the choices.
    """
    kind = draw(_noise_kinds)
    choice = draw(_fills_or_seeds)
    if kind == "none":
        return np.full(shape, fill(dtype, choice), dtype=dtype)
    return noise(kind, dtype, shape, choice)


def array_values(dtype: str, shape: tuple[int, ...]) -> st.SearchStrategy[np.ndarray]:
    """Arrays of ``dtype`` and ``shape`` as the cases draw them (see `draw_array`)."""
    return st.composite(lambda draw: draw_array(draw, dtype, shape))()


@functools.lru_cache(maxsize=None)
def layouts(contiguous_only: bool = False, arrays: str = "numpy",
            ndim: int = 3) -> st.SearchStrategy[str]:
    """Memory layouts an input of ``ndim`` axes is handed over in, for an implementation
    on the array library ``arrays`` (C order first: it shrinks there). Built once per
    argument: a fresh strategy is validated on its first draw, which cost more than
    the draw itself (a case draws one per array)."""
    if contiguous_only:
        return st.just("C")
    return st.sampled_from(tuple(layout for layout in LAYOUTS_OF[arrays]
                                 if ndim >= 3 or layout not in CHANNEL_LAYOUTS))


def draw_case(draw, problem: ConvProblem, contiguous_only: bool = False,
              arrays: str = "numpy") -> ConvCase:
    """Values and layouts for ``problem``, reported to Hypothesis's `event()` (the run's
    coverage tally counts the cases the search runs: conv_harness/searching/suite.py);
    ``arrays``: the array library the inputs are handed over in (its layouts)."""
    shapes = problem.shapes()
    values = {name: None if shapes[name] is None else draw_array(draw, problem.dtype, shapes[name])
              for name in ARRAY_NAMES}
    chosen = {name: draw(layouts(contiguous_only, arrays, a.ndim))
              for name, a in values.items() if a is not None}
    case = ConvCase(problem=problem, layouts=chosen, **values)
    if currently_in_test_context():
        for feature in features(case):
            event(feature)
    return case


@st.composite
def cases_for(draw, problem: ConvProblem, contiguous_only: bool = False,
              arrays: str = "numpy") -> ConvCase:
    """Values and layouts for a given ``problem``."""
    return draw_case(draw, problem, contiguous_only, arrays)


def conv_cases(
    op: str = "conv2d",
    *,
    capabilities: Capabilities | None = None,
    bounds: Bounds | None = None,
    where: Callable[[ConvProblem], bool] | None = None,
    focus: Focus | None = None,
    given: Sequence[ConvProblem] | None = None,
) -> st.SearchStrategy[ConvCase]:
    """Whole cases: a valid problem for ``op``, its values and memory layouts.

    ``capabilities``, ``bounds``, ``where``, ``focus`` and ``given`` choose the
    problem as in `conv_problems`.

    Usable from your own tests::

        from hypothesis import given
        from strategies import conv_cases

        @given(conv_cases("conv2d"))
        def test_mine(case):
            y = my_conv2d(case.x, case.weight, case.bias, **case.problem.kwargs())
    """
    caps = capabilities if capabilities is not None else Capabilities()
    problems = conv_problems(op, capabilities=caps, bounds=bounds, where=where, focus=focus,
                             given=given)
    flat = caps.for_op(op) if isinstance(caps, Capabilities) else caps

    @st.composite
    def cases(draw) -> ConvCase:
        problem = draw(problems)
        return draw_case(draw, problem, flat.holds("contiguous_only", problem.dtype),
                         flat.arrays)

    return cases()


def _large(p: ConvProblem) -> list[str]:
    """Which sizes are beyond the tiny tier's bounds (the large tier reached them)."""
    tiny = DEFAULT_BOUNDS[len(p.input_size)]
    positions = p.input_size if p.spec.transposed else p.output_size
    large = {"batch": p.batch > tiny.batch,
             "channels": max(p.in_channels, p.out_channels) // p.groups > tiny.channels_per_group,
             "positions": max(positions) > tiny.outputs,
             "kernel": max(p.kernel_size) > tiny.kernel}
    return [f"large {name}" for name, is_large in large.items() if is_large]


def features(case: ConvCase) -> list[str]:
    """The features a case exercises: for `event()` statistics and the run summary."""
    p = case.problem
    out = [f"dtype {p.dtype}"]
    out += _large(p)
    geometry = list(zip(p.input_size, p.kernel_size, p.stride, p.padding, p.dilation))
    if any(s > 1 for s in p.stride):
        out.append("stride > 1")
    if not p.spec.transposed and any(
            (n + 2 * pad - d * (k - 1) - 1) % s for n, k, s, pad, d in geometry):
        out.append("stride remainder")
    if any(s > k for _, k, s, _, _ in geometry):
        out.append("stride > kernel")
    if any(pad > 0 for pad in p.padding):
        out.append("padding > 0")
    if any(pad >= k for _, k, _, pad, _ in geometry):
        out.append("padding >= kernel")
    if any(d > 1 for d in p.dilation):
        out.append("dilation > 1")
    if p.groups > 1:
        out.append("groups > 1")
        if p.groups == p.in_channels:
            out.append("depthwise")
    if len(set(p.kernel_size)) > 1 or len(set(p.stride)) > 1 or len(set(p.padding)) > 1:
        out.append("non-square")
    if any(op > 0 for op in p.output_padding):
        out.append("output_padding > 0")
    if any(n == 1 for n in p.output_size):
        out.append("output size 1")
    if p.batch == 1:
        out.append("batch 1")
    if not p.bias:
        out.append("bias None")
    # two sizes of different arrays equal (conv_harness/ties.py): the summary counts each
    out += [f"tie {tie.name}" for tie in ties.TIES if tie.holds(p)]
    out += [f"{c.kind} {c.name}" for c in ties.CROSSINGS if c.holds(p)]
    out += sorted({f"layout {layout}" for layout in case.layouts.values() if layout != "C"})
    # torch's own formats, per tensor: a kernel may take channels-last for x and not
    # for its weight (pytorch#82060, #99519)
    out += [f"{name} {layout}" for name, layout in sorted(case.layouts.items())
            if layout in CHANNEL_LAYOUTS]
    archetype = coverage_label(p)
    if archetype is not None:
        out.append(archetype)
    return out
