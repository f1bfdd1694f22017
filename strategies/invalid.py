"""Strategies for invalid convolution problems: what torch refuses.

    from strategies.invalid import invalid_cases, invalid_problems

Each problem is a valid one (from `conv_problems`) with exactly one thing
broken, chosen by ``kind``:

``kernel``          (plain convolutions) the dilated kernel is larger than the
                    padded input on one axis;
``output_size``     (transposed) padding so large that an axis has no output;
``output_padding``  (transposed) output_padding not below max(stride, dilation);
``groups``          the channels (in, or out for a plain convolution) not
                    divisible by groups (only if the implementation takes groups);
``stride``          a stride of 0 or below on one axis.

The arrays have the shapes the implementation is handed: ``x`` (N, C_in,
*input_size), ``weight`` with C_in // groups (resp. C_out // groups) channels.
An invalid problem has no output shape, so ``grad_output`` is an empty array:
only the forward function is called.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
from hypothesis import strategies as st

from conv_harness.problem import OPS, ConvCase, ConvProblem
from conv_harness.running.capabilities import Capabilities
from strategies.cases import draw_array, layouts
from strategies.problems import conv_problems

KINDS = {False: ("kernel", "groups", "stride"),
         True: ("output_size", "output_padding", "groups", "stride")}


def _set(t: tuple[int, ...], axis: int, value: int, square: bool) -> tuple[int, ...]:
    return (value,) * len(t) if square else t[:axis] + (value,) + t[axis + 1:]


@st.composite
def _break(draw, p: ConvProblem, kind: str, square: bool) -> ConvProblem:
    axis = 0 if square else draw(st.integers(0, len(p.input_size) - 1))
    if kind == "stride":
        return dataclasses.replace(p, stride=_set(p.stride, axis, draw(st.integers(-2, 0)),
                                                  square))
    if kind == "kernel":
        k = draw(st.integers(2, 5))
        d = p.dilation[axis]
        pad = draw(st.integers(0, (d * (k - 1) - 1) // 2))  # 2 * pad < d * (k - 1)
        size = draw(st.integers(1, d * (k - 1) - 2 * pad))  # size + 2 pad < d (k - 1) + 1
        kernel = _set(p.kernel_size, axis, k, square)
        padding = _set(p.padding, axis, pad, square)
        sizes = _set(p.input_size, axis, size, square)
        return dataclasses.replace(p, kernel_size=kernel, padding=padding, input_size=sizes)
    if kind == "output_size":  # (n-1) s - 2 pad + d (k-1) + op + 1 <= 0
        n, k, s, d, op = (p.input_size[axis], p.kernel_size[axis], p.stride[axis],
                          p.dilation[axis], p.output_padding[axis])
        least = -(-((n - 1) * s + d * (k - 1) + op + 1) // 2)
        pad = least + draw(st.integers(0, 2))
        return dataclasses.replace(p, padding=_set(p.padding, axis, pad, square))
    if kind == "output_padding":
        s, d = p.stride[axis], p.dilation[axis]
        op = max(s, d) + draw(st.integers(0, 1))
        return dataclasses.replace(p, output_padding=_set(p.output_padding, axis, op, square))
    if kind == "groups":
        groups = draw(st.integers(2, 3))
        per = draw(st.integers(1, 2))
        off = draw(st.integers(1, groups - 1))
        which = "in" if p.spec.transposed else draw(st.sampled_from(("in", "out")))
        channels = {"in_channels": groups * per, "out_channels": groups * per}
        channels[f"{which}_channels"] += off
        return dataclasses.replace(p, groups=groups, **channels)
    raise ValueError(f"unknown kind of invalid problem {kind!r}")


def invalid_problems(op: str = "conv2d", *, capabilities: Capabilities | None = None,
                     kinds: tuple[str, ...] | None = None,
                     given: Sequence[ConvProblem] | None = None
                     ) -> st.SearchStrategy[ConvProblem]:
    """Problems for ``op`` that torch rejects, one thing broken (see the module doc);
    ``given``: the valid problems broken are drawn from these (`conv_problems`)."""
    caps = (capabilities if capabilities is not None else Capabilities()).for_op(op)
    # broken groups only where every dtype takes groups (the dtype is drawn later)
    groups = all(caps.holds("groups", d) for d in caps.dtypes)
    allowed = [k for k in KINDS[OPS[op].transposed] if groups or k != "groups"]
    if kinds is not None:
        allowed = [k for k in allowed if k in kinds]
    base = conv_problems(op, capabilities=dataclasses.replace(caps, groups=False),
                         given=given)
    return st.tuples(base, st.sampled_from(allowed)).flatmap(
        lambda pk: _break(pk[0], pk[1], caps.holds("square", pk[0].dtype)))


@st.composite
def cases_for_invalid(draw, p: ConvProblem, contiguous_only: bool = False,
                      library: str = "numpy") -> ConvCase:
    arrays = {
        "x": draw_array(draw, p.dtype, p.x_shape),
        "weight": draw_array(draw, p.dtype, p.weight_shape),
        "bias": draw_array(draw, p.dtype, (p.out_channels,)) if p.bias else None,
        "grad_output": np.zeros((0,), dtype=p.dtype),
    }
    chosen = {name: draw(layouts(contiguous_only, library, arrays[name].ndim))
              for name in ("x", "weight", "bias") if arrays[name] is not None}
    return ConvCase(problem=p, layouts=chosen, **arrays)


def invalid_cases(op: str = "conv2d", *, capabilities: Capabilities | None = None,
                  kinds: tuple[str, ...] | None = None,
                  given: Sequence[ConvProblem] | None = None) -> st.SearchStrategy[ConvCase]:
    caps = (capabilities if capabilities is not None else Capabilities()).for_op(op)
    return invalid_problems(op, capabilities=caps, kinds=kinds, given=given).flatmap(
        lambda p: cases_for_invalid(p, caps.holds("contiguous_only", p.dtype), caps.arrays))
