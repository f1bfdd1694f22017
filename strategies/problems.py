"""Strategies for valid convolution problems (parameters only, no values).

Every problem is valid by construction, with no ``filter`` or ``assume``: the
kernel, stride, padding and dilation are drawn first, then the number of
output positions and the stride remainder, and the input size is derived from
them. The draw order is the shrink order: Hypothesis simplifies earlier
choices first, and every choice shrinks towards the simplest value (kernel 1,
stride 1, padding 0, dilation 1, one output position, no remainder, groups 1,
one channel, batch 1, no bias, float64).

A share of the problems is drawn at realistic layer sizes instead, within a
budget of work (`LargeTier`); shrinking lowers each size to the smallest that
still fails, the boundary of the region (65 positions, not back to tiny).

Capabilities that hold in some dtypes only (``"dilation": ("float32",)``)
keep that order: the dtype is still drawn last, from the dtypes that accept
every feature drawn before it. A feature is drawn only while some dtype
still accepts it, so the set never runs empty, and shrinking a feature
away gives the dtypes back.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass

from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from harness.problem import OPS, ConvProblem, conv_output_length
from harness.running.capabilities import Capabilities


@dataclass(frozen=True)
class LargeTier:
    """Realistic layer sizes, drawn for a share of the examples (issue 12).

    Optimised convolutions break at the tail of a block of 8, 16, 32 or 64
    (images, channels, output positions), on a separate path for large
    kernels, or in a lower-precision accumulation for long reductions: sizes
    the tiny problems never reach. About one example in six (see `ODDS`)
    draws its sizes up to these bounds instead of the tiny ones.

    ``kernel``, ``outputs`` (output positions per axis; for a transposed
    problem, input positions), ``batch`` and ``channels_per_group`` are the
    largest values; ``budget`` bounds the multiply-adds of one forward pass
    (batch * channels * positions * K), so that a large example costs
    milliseconds (2**17: measured, the main job's CPU time grew by 10-37% at
    2**18, mostly in the linearity check's many calls); ``max_terms`` bounds the forward and input-gradient
    reduction length K, below 8192 where a float32 result accumulated in
    float16 would hide inside float32's rounding bound.
    """

    kernel: int
    outputs: int
    batch: int = 17
    channels_per_group: int = 65
    budget: int = 2**17
    max_terms: int = 4096


@dataclass(frozen=True)
class Bounds:
    """Largest values drawn; per number of spatial axes, so conv3d stays small.

    ``large``, if set, is the size tier a share of the examples is drawn from
    (see `LargeTier`); a bound of 1 stays 1 there (``kernel=1``: 1x1 kernels only).
    """

    kernel: int
    stride: int
    padding: int
    dilation: int
    outputs: int
    batch: int = 3
    groups: int = 3
    channels_per_group: int = 3
    large: LargeTier | None = None


#: The large tier: kernels up to 17 in 1-d (K = 17 * 65 = 1105; 33 doubled the
#: main job's slowest test, the linearity check of conv_transpose1d, which
#: loops over kernel offsets), 7 in 2-d, 5 in 3-d; output positions per image
#: up to 1025, 33x33 = 1089 and 11**3 = 1331; 17 images (16 + 1); 65 channels
#: per group (64 + 1): each one past a power of two.
LARGE_TIERS: dict[int, LargeTier] = {
    1: LargeTier(kernel=17, outputs=1025),
    2: LargeTier(kernel=7, outputs=33),
    3: LargeTier(kernel=5, outputs=11),
}

DEFAULT_BOUNDS: dict[int, Bounds] = {
    1: Bounds(kernel=5, stride=4, padding=3, dilation=3, outputs=8, large=LARGE_TIERS[1]),
    2: Bounds(kernel=4, stride=4, padding=3, dilation=3, outputs=5, large=LARGE_TIERS[2]),
    3: Bounds(kernel=3, stride=3, padding=2, dilation=2, outputs=3, batch=2,
              large=LARGE_TIERS[3]),
}

#: What one large example draws large (see `_Sizes`), one choice.
#: The reduction (kernel and input channels, sharing the budget) also takes
#: kernels to their largest: a focus of its own for the kernel made every
#: focus rarer.
FOCI: tuple[frozenset[str], ...] = (
    frozenset({"batch"}), frozenset({"in", "out"}), frozenset({"positions"}),
    frozenset({"kernel", "in"}))

#: The tier is the problem's first choice, an integer in [0, ODDS]: ODDS picks
#: the large tier (Hypothesis draws 0 more often than the others: measured,
#: 11% to 20% of the problems, depending on the operation and the run), and
#: shrinking heads for 0, the tiny one.
ODDS = 4

#: float16's worst-case bound gamma(K) reaches 1 at K = 1024 (u = 2**-11): from
#: there on it would allow any error as large as the result, so the check
#: could not fail. A probabilistic bound (sqrt(K) u) would be sharper but is not
#: sound for the errors real implementations make: summing 4096 ones in
#: float16 stagnates at 2048, a legitimate result for float16 accumulation that
#: it would call a bug. So float16 is drawn only where every result sums at
#: most 512 terms (gamma(512) = 1/3), and larger problems go to float32 and
#: float64 (in both tiers: tiny transposed problems reach K = 720 in grad_bias).
#: For an implementation that takes float16 only, the large tier keeps K and
#: batch * positions within 512 instead.
FLOAT16_MAX_TERMS = 512


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


def _snapped(base: int, snap: int, hi: int) -> int:
    """``base`` (snap 0), or the smallest power of two (snap 1) or power of two
    plus one (snap 2) at least ``base``; at most ``hi``."""
    if snap == 1:
        base = 1 << (base - 1).bit_length()
    elif snap == 2:
        base = (1 << max(0, base - 2).bit_length()) + 1
    return min(base, hi)


def _size(draw, lo: int, hi: int) -> int:
    """A size in [lo, hi] of the large tier: near a power of two or one past it
    two times in three, where blocked implementations keep their tails.

    Two choices, a snap and a base: shrinking lowers the base, and the snapped
    size with it, down to the smallest size that still fails (a bug that
    needs more than 64 positions shrinks to 65, not back to tiny), and tries
    snap 0 (the base itself) for a boundary that is no power of two.
    """
    if hi <= lo:
        return lo
    snap = draw(_ints(0, 2))
    base = draw(_ints(lo, hi))
    return max(lo, _snapped(base, snap, hi))


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


class _Sizes:
    """How one problem draws its sizes: the tiny bounds, or the large tier's.

    In the large tier one choice picks what is large (`FOCI`): the batch, the
    channels, the positions, or the reduction (kernel and input channels). The budget allows one or two sizes near their largest at once,
    not more: measured, when every size could be large at once, each got a
    small share and fewer than 2% of large examples passed 64 positions. Each
    large size gets an even share of what is left of the budget (the k-th
    root for the k large sizes still to draw), so the channels in and out are
    alike. The other sizes keep their tiny bounds, within the budget too.
    """

    NAMES = ("kernel", "positions", "in", "out", "batch")

    def __init__(self, draw, b: Bounds, large: bool, max_terms: int):
        self.draw, self.b = draw, b
        self.tier = b.large if large else None
        self.max_terms = max_terms
        self.cost = 1  # multiply-adds per forward pass of what is drawn so far
        self._drawn_positions = 1
        self.big: dict[str, bool] = {}
        if self.tier is not None:
            t = self.tier
            tiny = {"kernel": b.kernel, "positions": b.outputs, "in": b.channels_per_group,
                    "out": b.channels_per_group, "batch": b.batch}
            top = {"kernel": t.kernel, "positions": t.outputs, "in": t.channels_per_group,
                   "out": t.channels_per_group, "batch": t.batch}
            focus = FOCI[draw(_ints(0, len(FOCI) - 1))]
            for name in self.NAMES:
                self.big[name] = name in focus and tiny[name] > 1 and top[name] > tiny[name]

    def _hi(self, name: str, tiny: int, top: int, axes: int = 1) -> int:
        """The largest value of one axis of size ``name``."""
        room = max(1, self.tier.budget // self.cost)
        if not self.big.get(name):
            return max(1, min(tiny, room))
        left = sum(1 for n in self.NAMES[self.NAMES.index(name):] if self.big.get(n))
        share = room ** (1 / (left * axes))
        return max(1, min(top, room, int(share + 1e-9)))

    def _draw(self, name: str, tiny: int, top: int, axes: int = 1, cap: int | None = None,
              lo: int = 1) -> int:
        if self.tier is None:
            return self.draw(_ints(lo, tiny))
        hi = self._hi(name, tiny, top, axes)
        if cap is not None:
            hi = max(1, min(hi, cap))
        hi = max(lo, hi)
        value = _size(self.draw, lo, hi) if self.big.get(name) else self.draw(_ints(lo, hi))
        self.cost *= value
        return value

    def kernel(self, axes: int, square: bool) -> tuple[int, ...]:
        top = self.tier.kernel if self.tier else 0
        if square:
            k = self._draw("kernel", self.b.kernel, top, axes)
            self.cost *= k ** (axes - 1)
            return (k,) * axes
        return tuple(self._draw("kernel", self.b.kernel, top, axes) for _ in range(axes))

    def _terms_cap(self) -> int | None:
        """For a float16-only implementation, batch * positions (the gradients' K)
        stays within `max_terms` too."""
        if self.tier is None or self.max_terms > FLOAT16_MAX_TERMS:
            return None
        return max(1, self.max_terms // self._drawn_positions)

    def positions(self, axes: int):
        """Draws one output (transposed: input) size per axis, called in turn."""
        top = self.tier.outputs if self.tier else 0
        self._drawn_positions = 1

        def one() -> int:
            value = self._draw("positions", self.b.outputs, top, axes, cap=self._terms_cap())
            self._drawn_positions *= value
            return value
        return one

    def padded(self, input_size, kernel, stride, padding, dilation) -> None:
        """Count the outputs the input really has: where padding alone covers the
        kernel (input size 1) there are more than were drawn."""
        drawn = self._drawn_positions
        real = math.prod(conv_output_length(*axis) for axis in zip(
            input_size, kernel, stride, padding, dilation))
        self.cost = self.cost // drawn * real

    def channels(self, groups: int, kernel: tuple[int, ...]) -> tuple[int, int]:
        """(in, out) channels: ``groups`` times a number per group each; each is a
        reduction length's factor (K of y, K of grad_input), capped by ``max_terms``."""
        top = self.tier.channels_per_group if self.tier else 0
        cap = max(1, self.max_terms // math.prod(kernel)) if self.tier else None
        self.cost *= groups
        per_in = self._draw("in", self.b.channels_per_group, top, cap=cap)
        per_out = self._draw("out", self.b.channels_per_group, top, cap=cap)
        return groups * per_in, groups * per_out

    def batch(self) -> int:
        return self._draw("batch", self.b.batch, self.tier.batch if self.tier else 0,
                          cap=self._terms_cap())


def _max_terms(p: ConvProblem) -> int:
    return max(p.forward_terms() + 1, p.grad_input_terms(), p.grad_weight_terms(),
               p.grad_bias_terms())


@st.composite
def _problems(draw, op: str, caps: Capabilities, b: Bounds) -> ConvProblem:
    spec = OPS[op]
    axes = spec.spatial_dims
    allowed = tuple(caps.dtypes)  # narrowed by each feature drawn; never empty
    large = b.large is not None and draw(_ints(0, ODDS)) == ODDS
    only_float16 = allowed == ("float16",)
    sizes = _Sizes(draw, b, large,
                   FLOAT16_MAX_TERMS if only_float16 else (b.large.max_terms if large else 0))
    square = _all_square(allowed, caps)
    kernel = sizes.kernel(axes, square)
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
    outputs = sizes.positions(axes)
    if spec.transposed:
        input_size, padding, output_padding = _transposed_sizes(
            draw, kernel, stride, padding, dilation, b, _all_square(allowed, caps), outputs)
        allowed = _unsquared(allowed, caps, padding, output_padding)
    else:
        input_size = _conv_sizes(draw, kernel, stride, padding, dilation, outputs)
        output_padding = ()
        sizes.padded(input_size, kernel, stride, padding, dilation)
    groups = draw(_ints(1, b.groups)) if any(caps.holds("groups", d) for d in allowed) else 1
    allowed = _narrowed(allowed, caps, "groups", groups != 1)
    in_channels, out_channels = sizes.channels(groups, kernel)
    batch = sizes.batch()
    bias = (draw(st.booleans()) if any(caps.holds("bias_none", d) for d in allowed)
            else True)
    allowed = _narrowed(allowed, caps, "bias_none", not bias)
    problem = ConvProblem(op=op, batch=batch, in_channels=in_channels,
                          out_channels=out_channels, input_size=input_size,
                          kernel_size=kernel, stride=stride, padding=padding,
                          dilation=dilation, groups=groups, bias=bias, dtype=allowed[0],
                          output_padding=output_padding)
    if not only_float16 and _max_terms(problem) > FLOAT16_MAX_TERMS:
        allowed = tuple(d for d in allowed if d != "float16") or allowed
    dtype = draw(_sampled(allowed))
    return dataclasses.replace(problem, dtype=dtype)


def _conv_sizes(draw, kernel, stride, padding, dilation, outputs) -> tuple[int, ...]:
    """Input sizes from the number of outputs and the stride remainder per axis.

    size = (outputs - 1) * stride + effective kernel + remainder - 2 * padding,
    at least 1: the padded input then always holds the dilated kernel, so the
    problem is valid; where padding alone covers the kernel the size is 1.
    ``outputs()`` draws one axis's number of outputs.
    """
    sizes = []
    for k, s, p, d in zip(kernel, stride, padding, dilation):
        n = outputs()
        remainder = draw(_ints(0, s - 1))
        sizes.append(max(1, (n - 1) * s + d * (k - 1) + 1 + remainder - 2 * p))
    return tuple(sizes)


def _transposed_sizes(draw, kernel, stride, padding, dilation, b: Bounds, square: bool,
                      outputs):
    """Input sizes, padding and output_padding of a valid transposed problem.

    output_padding must be below max(stride, dilation) on each axis (torch's
    rule); padding is capped so that every axis keeps at least one output.
    ``outputs()`` draws one axis's input size.
    """
    output_padding = _per_axis(draw, _ints(0, max(b.stride, b.dilation) - 1),
                               len(kernel), square)
    output_padding = tuple(min(op, max(s, d) - 1)
                           for op, s, d in zip(output_padding, stride, dilation))
    sizes = tuple(outputs() for _ in kernel)
    capped = tuple(min(p, ((n - 1) * s + d * (k - 1) + op) // 2)
                   for p, n, k, s, d, op in zip(padding, sizes, kernel, stride, dilation,
                                                output_padding))
    if square:  # one padding for every axis: the smallest cap
        capped = (min(capped),) * len(capped)
    return sizes, capped, output_padding
