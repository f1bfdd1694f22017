"""The strategies produce only valid problems, reach every feature, honour CAPABILITIES."""

from __future__ import annotations

import functools

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, Phase, find, given, settings
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from conv_harness.problem import OPS
from conv_harness.running.capabilities import Capabilities
from strategies import conv_cases, conv_problems, features

FAST = settings(max_examples=30, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.mark.parametrize("op", sorted(OPS))
@FAST
@given(data=st.data())
def test_problems_are_valid_for_torch(op, data):
    case = data.draw(conv_cases(op))
    p = case.problem
    fn = getattr(torch.nn.functional, op)
    y = fn(torch.from_numpy(case.x.astype(np.float64)),
           torch.from_numpy(case.weight.astype(np.float64)),
           None if case.bias is None else torch.from_numpy(case.bias.astype(np.float64)),
           **p.kwargs())
    assert tuple(y.shape) == p.output_shape == case.grad_output.shape
    assert min(p.output_size) >= 1 and min(p.input_size) >= 1
    for name, array in case.arrays().items():
        if array is not None:
            assert array.dtype == np.dtype(p.dtype)
            assert np.all(np.isfinite(array)) and np.max(np.abs(array), initial=0) <= 4


CONV2D_FEATURES = [
    "stride > 1", "stride remainder", "stride > kernel", "padding > 0", "padding >= kernel",
    "dilation > 1", "groups > 1", "depthwise", "non-square", "output size 1", "batch 1",
    "bias None", "dtype float16", "dtype float32", "dtype float64", "layout F",
    "layout strided", "layout reversed",
]


@pytest.mark.parametrize("feature", CONV2D_FEATURES)
def test_every_feature_is_reached_quickly(feature):
    """Each feature turns up within a few dozen examples (find gives up after 100), in
    the same draws every run: at random, a rare one (float16) was missed once in a few
    dozen runs."""
    find(conv_cases("conv2d"), lambda case: feature in features(case),
         settings=settings(max_examples=100, database=None, deadline=None,
                           phases=[Phase.generate], derandomize=True))


def test_transposed_output_padding_is_reached():
    find(conv_cases("conv_transpose2d"), lambda case: "output_padding > 0" in features(case),
         settings=settings(max_examples=100, database=None, phases=[Phase.generate]))


@FAST
@given(data=st.data())
def test_capabilities_narrow_what_is_generated(data):
    caps = Capabilities(dtypes=("float32",), dilation=False, groups=False, bias_none=False,
                        square=True, contiguous_only=True)
    case = data.draw(conv_cases("conv2d", capabilities=caps))
    p = case.problem
    assert p.dtype == "float32" and p.groups == 1 and p.bias
    assert set(p.dilation) == {1}
    for values in (p.kernel_size, p.stride, p.padding):
        assert len(set(values)) == 1
    assert set(case.layouts.values()) == {"C"}


def test_capabilities_reject_unknown_keys_and_bad_values():
    with pytest.raises(ValueError, match="unknown CAPABILITIES key"):
        Capabilities.from_mapping({"dilations": False})
    with pytest.raises(ValueError, match="subset"):
        Capabilities.from_mapping({"dtypes": ("float8",)})
    with pytest.raises(ValueError, match="True or False"):
        Capabilities.from_mapping({"groups": "no"})


def test_bad_op_is_a_clear_error():
    with pytest.raises(InvalidArgument, match="conv4d"):
        conv_problems("conv4d")


def test_simplest_problem_is_the_minimal_one():
    """What every shrink heads for: the smallest problem in every parameter."""
    case = find(conv_cases("conv2d"), lambda case: True, settings=settings(database=None))
    p = case.problem
    assert (p.batch, p.in_channels, p.out_channels, p.groups) == (1, 1, 1, 1)
    assert p.input_size == p.kernel_size == p.stride == p.dilation == (1, 1)
    assert p.padding == (0, 0) and not p.bias and p.dtype == "float64"
    assert set(case.layouts.values()) == {"C"}
    assert not case.x.any() and not case.weight.any()


# -- reachability (issue 15): shapes real bugs needed, drawn on purpose ---------------

@functools.lru_cache(maxsize=None)
def drawn(op: str, n: int = 3000) -> tuple:
    out: list = []

    @settings(max_examples=n, phases=[Phase.generate], derandomize=True, database=None,
              deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                    HealthCheck.data_too_large])
    @given(conv_problems(op))
    def collect(p):
        out.append(p)

    collect()
    return tuple(out)


def square(p) -> bool:
    return all(len(set(t)) == 1 for t in (p.kernel_size, p.stride, p.padding, p.dilation))


def narrow(p) -> bool:
    """Some input axis narrower than its dilated kernel (padding makes the room)."""
    return any(n < d * (k - 1) + 1 for n, k, d in zip(p.input_size, p.kernel_size, p.dilation))


@pytest.mark.parametrize("op", ["conv2d", "conv3d", "conv_transpose2d"])
def test_a_square_geometry_is_a_deliberate_choice(op):
    """Most real layers are square; drawn axis by axis, under 1% of 2-d problems
    were (measured: 0.8%), now about a third of the ordinary ones, and with
    the archetypes (issue 22: most of them square) more: the bound leaves room
    for conv2d's two thirds from archetypes."""
    share = np.mean([square(p) for p in drawn(op)])
    assert 0.2 <= share <= 0.65, share


@pytest.mark.parametrize("op", ["conv1d", "conv2d", "conv3d"])
def test_an_input_axis_narrower_than_its_kernel_is_common(op):
    """Padding alone makes room for the window (measured: about 20% of 1-d, 40% of
    2-d and 50% of 3-d problems have such an axis)."""
    assert np.mean([narrow(p) for p in drawn(op)]) >= 0.1


def test_jaxs_abort_geometry_is_drawn():
    """JAX's conv2d input gradient aborts (issue 15; jaxlib 0.10.2, mapped by running
    it on a grid: batch, channels and groups do not matter) where one axis has
    kernel 2, stride 2, padding 1 and an even input of 4 or more, and another a
    kernel wider than its one or two outputs, as issue 15's kernel 2x2, stride
    2x2, padding 1x1 on an input of 4x1. Drawn axis by axis, that geometry on
    both axes was about 1 problem in 4,000 and the region was never drawn in
    10,000 conv2d problems; as a square geometry, about 1 in 500 (and the
    region about 1 in 2,000).

    Since most conv2d problems come from archetypes (issue 22: two thirds), the
    ordinary draw brings it less often, and its count in 3,000 problems ran
    from 2 to 20 over six seeds (mutations copy a hit five times or not at
    all); ConvNeXt's 2x2 stride-2 downsampling's padding neighbour (square, one
    step from 0: padding 1) brings it back: 6 to 22 over the same seeds."""
    hits = [p for p in drawn("conv2d") if square(p) and p.kernel_size == (2, 2)
            and p.stride == (2, 2) and p.padding == (1, 1) and p.dilation == (1, 1)]
    assert len(hits) >= 2, len(hits)
