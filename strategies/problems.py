"""Strategies for valid convolution problems (parameters only, no values).

Every problem is valid by construction, with no ``filter`` or ``assume``: the
kernel, stride, padding and dilation are drawn first, then the number of
output positions and the stride remainder, and the input size is derived from
them. The draw order is the shrink order: Hypothesis simplifies earlier
choices first, and every choice shrinks towards the simplest value (kernel 1,
stride 1, padding 0, dilation 1, one output position, no remainder, groups 1,
one channel, batch 1, no bias, float64).

Capabilities that hold in some dtypes only (``"dilation": ("float32",)``)
keep that order: the dtype is still drawn last, from the dtypes that accept
every feature drawn before it. A feature is drawn only while some dtype
still accepts it, so the set never runs empty, and shrinking a feature
away gives the dtypes back.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from harness.capabilities import Capabilities
from harness.problem import OPS, ConvProblem


@dataclass(frozen=True)
class Bounds:
    """Largest values drawn; per number of spatial axes, so conv3d stays small."""

    kernel: int
    stride: int
    padding: int
    dilation: int
    outputs: int
    batch: int = 3
    groups: int = 3
    channels_per_group: int = 3


DEFAULT_BOUNDS: dict[int, Bounds] = {
    1: Bounds(kernel=5, stride=4, padding=3, dilation=3, outputs=8),
    2: Bounds(kernel=4, stride=4, padding=3, dilation=3, outputs=5),
    3: Bounds(kernel=3, stride=3, padding=2, dilation=2, outputs=3, batch=2),
}


@functools.lru_cache(maxsize=None)
def _ints(lo: int, hi: int) -> st.SearchStrategy[int]:
    """``st.integers(lo, hi)``, built once: a problem draws some twenty bounded
    integers, and looking each strategy up again in Hypothesis's own cache
    (argument checks and hashing) cost about 6% of a case's drawing time."""
    return st.integers(lo, hi)


@functools.lru_cache(maxsize=None)
def _sampled(options: tuple) -> st.SearchStrategy:
    return st.sampled_from(options)


def _per_axis(draw, values: st.SearchStrategy[int], axes: int, square: bool) -> tuple[int, ...]:
    if square:
        return (draw(values),) * axes
    return tuple(draw(values) for _ in range(axes))


def _check_op(op: str) -> None:
    if op not in OPS:
        raise InvalidArgument(f"op={op!r} is not a convolution this harness knows; "
                              f"expected one of {sorted(OPS)}")


def conv_problems(
    op: str = "conv2d",
    *,
    capabilities: Capabilities | None = None,
    bounds: Bounds | None = None,
) -> st.SearchStrategy[ConvProblem]:
    """Valid problems for ``op`` (``"conv2d"``, ``"conv_transpose1d"``, ...).

    ``capabilities`` narrows what is drawn (an implementation's declared
    ``CAPABILITIES``); ``bounds`` caps the sizes (default: `DEFAULT_BOUNDS`).
    """
    _check_op(op)
    caps = capabilities if capabilities is not None else Capabilities()
    if not isinstance(caps, Capabilities):
        raise InvalidArgument(f"capabilities must be a Capabilities, got {caps!r}")
    caps = caps.for_op(op)  # per-function declarations: what op and its backward share
    if not caps.dtypes:
        raise InvalidArgument(f"the capabilities leave no dtype to draw for {op}: "
                              "its functions share none")
    limits = bounds if bounds is not None else DEFAULT_BOUNDS[OPS[op].spatial_dims]
    return _problems(op, caps, limits)


def _narrowed(allowed: tuple[str, ...], caps: Capabilities, name: str,
              used: bool) -> tuple[str, ...]:
    """The dtypes still allowed once feature ``name`` was (``used``) or was not drawn."""
    if not used:
        return allowed
    return tuple(d for d in allowed if caps.holds(name, d))


def _all_square(allowed: tuple[str, ...], caps: Capabilities) -> bool:
    """Whether every dtype still allowed needs square sizes (so they are drawn square)."""
    return all(caps.holds("square", d) for d in allowed)


def _unsquared(allowed: tuple[str, ...], caps: Capabilities,
               *sizes: tuple[int, ...]) -> tuple[str, ...]:
    """The dtypes still allowed after ``sizes`` were drawn: if any is not the same on
    every axis, only those that accept non-square problems."""
    if any(len(set(t)) > 1 for t in sizes):
        return tuple(d for d in allowed if not caps.holds("square", d))
    return allowed


@st.composite
def _problems(draw, op: str, caps: Capabilities, b: Bounds) -> ConvProblem:
    spec = OPS[op]
    axes = spec.spatial_dims
    allowed = tuple(caps.dtypes)  # narrowed by each feature drawn; never empty
    square = _all_square(allowed, caps)
    kernel = _per_axis(draw, _ints(1, b.kernel), axes, square)
    stride = _per_axis(draw, _ints(1, b.stride), axes, square)
    padding = _per_axis(draw, _ints(0, b.padding), axes, square)
    allowed = _unsquared(allowed, caps, kernel, stride, padding)
    dilated = _narrowed(allowed, caps, "dilation", True)  # the dtypes that take dilation
    if dilated:
        dilation = _per_axis(draw, _ints(1, b.dilation), axes, _all_square(dilated, caps))
        allowed = _unsquared(_narrowed(allowed, caps, "dilation",
                                       any(d != 1 for d in dilation)), caps, dilation)
    else:
        dilation = (1,) * axes
    if spec.transposed:
        input_size, padding, output_padding = _transposed_sizes(
            draw, kernel, stride, padding, dilation, b, _all_square(allowed, caps))
        allowed = _unsquared(allowed, caps, padding, output_padding)
    else:
        input_size, output_padding = _conv_sizes(draw, kernel, stride, padding, dilation, b), ()
    groups = draw(_ints(1, b.groups)) if any(caps.holds("groups", d) for d in allowed) else 1
    allowed = _narrowed(allowed, caps, "groups", groups != 1)
    in_channels = groups * draw(_ints(1, b.channels_per_group))
    out_channels = groups * draw(_ints(1, b.channels_per_group))
    batch = draw(_ints(1, b.batch))
    bias = (draw(st.booleans()) if any(caps.holds("bias_none", d) for d in allowed)
            else True)
    allowed = _narrowed(allowed, caps, "bias_none", not bias)
    dtype = draw(_sampled(allowed))
    return ConvProblem(op=op, batch=batch, in_channels=in_channels, out_channels=out_channels,
                       input_size=input_size, kernel_size=kernel, stride=stride, padding=padding,
                       dilation=dilation, groups=groups, bias=bias, dtype=dtype,
                       output_padding=output_padding)


def _conv_sizes(draw, kernel, stride, padding, dilation, b: Bounds) -> tuple[int, ...]:
    """Input sizes from the number of outputs and the stride remainder per axis.

    size = (outputs - 1) * stride + effective kernel + remainder - 2 * padding,
    at least 1: the padded input then always holds the dilated kernel, so the
    problem is valid; where padding alone covers the kernel the size is 1.
    """
    sizes = []
    for k, s, p, d in zip(kernel, stride, padding, dilation):
        outputs = draw(_ints(1, b.outputs))
        remainder = draw(_ints(0, s - 1))
        sizes.append(max(1, (outputs - 1) * s + d * (k - 1) + 1 + remainder - 2 * p))
    return tuple(sizes)


def _transposed_sizes(draw, kernel, stride, padding, dilation, b: Bounds, square: bool):
    """Input sizes, padding and output_padding of a valid transposed problem.

    output_padding must be below max(stride, dilation) on each axis (torch's
    rule); padding is capped so that every axis keeps at least one output.
    """
    output_padding = _per_axis(draw, _ints(0, max(b.stride, b.dilation) - 1),
                               len(kernel), square)
    output_padding = tuple(min(op, max(s, d) - 1)
                           for op, s, d in zip(output_padding, stride, dilation))
    sizes = tuple(draw(_ints(1, b.outputs)) for _ in kernel)
    capped = tuple(min(p, ((n - 1) * s + d * (k - 1) + op) // 2)
                   for p, n, k, s, d, op in zip(padding, sizes, kernel, stride, dilation,
                                                output_padding))
    if square:  # one padding for every axis: the smallest cap
        capped = (min(capped),) * len(capped)
    return sizes, capped, output_padding
