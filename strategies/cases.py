"""Strategies for a problem's values and memory layouts: whole `ConvCase` s."""

from __future__ import annotations

import numpy as np
from hypothesis import event, strategies as st
from hypothesis.control import currently_in_test_context
from hypothesis.extra import numpy as hnp

from harness import coverage
from harness.capabilities import Capabilities
from harness.problem import ARRAY_NAMES, LAYOUTS, ConvCase, ConvProblem
from strategies.problems import Bounds, conv_problems

MAX_ABS_VALUE = 4.0


def values(dtype: str | np.dtype) -> st.SearchStrategy[float]:
    """Array elements: small integers, thirds, and floats of ``dtype``, within +-4.

    Small integers (tried first, so data shrinks to zeros and ones) make
    counterexamples easy to read, but every float type sums them exactly, so a
    precision bug would hide behind them; thirds and arbitrary floats do not
    round exactly, so they expose an implementation that computes in a
    narrower type than it claims. The bound keeps float16 sums far from
    overflow.
    """
    dt = np.dtype(dtype)
    thirds = sorted({float(dt.type(k / 3)) for k in range(-12, 13)}, key=abs)
    # No .map(): these strategies' values are reusable, which lets `arrays`
    # draw a fill value and a sparse set of elements instead of every one.
    return st.one_of(
        st.integers(-3, 3),
        st.sampled_from(thirds),
        st.floats(-MAX_ABS_VALUE, MAX_ABS_VALUE, width=dt.itemsize * 8, allow_subnormal=False),
    )


def array_values(dtype: str, shape: tuple[int, ...]) -> st.SearchStrategy[np.ndarray]:
    return hnp.arrays(np.dtype(dtype), shape, elements=values(dtype))


def layouts(contiguous_only: bool = False) -> st.SearchStrategy[str]:
    """Memory layouts an input is handed over in (C order first: it shrinks there)."""
    return st.just("C") if contiguous_only else st.sampled_from(LAYOUTS)


@st.composite
def cases_for(draw, problem: ConvProblem, contiguous_only: bool = False) -> ConvCase:
    """Values and layouts for a given ``problem``."""
    shapes = problem.shapes()
    arrays = {name: None if shapes[name] is None else draw(array_values(problem.dtype, shapes[name]))
              for name in ARRAY_NAMES}
    chosen = {name: draw(layouts(contiguous_only)) for name in ARRAY_NAMES
              if arrays[name] is not None}
    case = ConvCase(problem=problem, layouts=chosen, **arrays)
    exercised = features(case)
    coverage.record(exercised)
    if currently_in_test_context():
        for feature in exercised:
            event(feature)
    return case


def conv_cases(
    op: str = "conv2d",
    *,
    capabilities: Capabilities | None = None,
    bounds: Bounds | None = None,
) -> st.SearchStrategy[ConvCase]:
    """Whole cases: a valid problem for ``op``, its values and memory layouts.

    Usable from your own tests::

        from hypothesis import given
        from strategies import conv_cases

        @given(conv_cases("conv2d"))
        def test_mine(case):
            y = my_conv2d(case.x, case.weight, case.bias, **case.problem.kwargs())
    """
    caps = capabilities if capabilities is not None else Capabilities()
    return conv_problems(op, capabilities=caps, bounds=bounds).flatmap(
        lambda p: cases_for(p, caps.contiguous_only))


def features(case: ConvCase) -> list[str]:
    """The features a case exercises: for `event()` statistics and the run summary."""
    p = case.problem
    out = [f"dtype {p.dtype}"]
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
    out += sorted({f"layout {layout}" for layout in case.layouts.values() if layout != "C"})
    return out
