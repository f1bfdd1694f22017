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
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from conv_harness.problem import FLOAT16_MAX_TERMS, OPS, ConvProblem, conv_output_length
from conv_harness.running.capabilities import Capabilities
from strategies import archetypes, pinned
from strategies.archetypes import Archetype


@dataclass(frozen=True)
class LargeTier:
    """Realistic layer sizes, drawn for a share of the examples (issue 12).

    Optimised convolutions break at the tail of a block of 8, 16, 32 or 64
    (images, channels, output positions), on a separate path for large
    kernels, or in a lower-precision accumulation for long reductions: sizes
    the tiny problems never reach. About one example in six (see `ODDS`)
    draws its sizes up to these bounds instead of the tiny ones.

    ``kernel``, ``outputs`` (output positions per axis; for a transposed
    problem, input positions), ``positions`` (their product, per image),
    ``batch`` and ``channels_per_group`` are the largest values; ``budget``
    bounds the multiply-adds of one forward pass (batch * channels *
    positions * K), so that a large example costs milliseconds (2**17:
    measured, the main job's CPU time grew by 10-37% at 2**18, mostly in the
    linearity check's many calls); ``max_terms`` bounds the forward and
    input-gradient reduction length K, below 8192 where a float32 result
    accumulated in float16 would hide inside float32's rounding bound.

    One axis may take all the ``positions`` (``outputs`` >= 65 on every
    axis): a bug that needs more than 64 positions per image then shrinks
    to exactly 65 (1x65, 1x1x65), not to a product of two snapped axes
    (5x13 or 2x33) where neither axis can shrink alone.
    """

    kernel: int
    outputs: int
    positions: int
    batch: int = 17
    channels_per_group: int = 129
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


#: The large tier: kernels up to 17 in 1-d (33 doubled the main job's slowest
#: test, the linearity check of conv_transpose1d, which loops over kernel
#: offsets), 7 in 2-d, 5 in 3-d; output positions per image up to 1025 in 1-d
#: and 2049 in 2-d and 3-d, any one axis up to 65; 17 images (16 + 1); 129
#: channels per group (128 + 1; with 65, a 1-d K = 17 * 65 = 1105 passed 1024
#: in about one problem in 1000): each one past a power of two.
LARGE_TIERS: dict[int, LargeTier] = {
    1: LargeTier(kernel=17, outputs=1025, positions=1025),
    2: LargeTier(kernel=7, outputs=65, positions=2**11 + 1),
    3: LargeTier(kernel=5, outputs=65, positions=2**11 + 1),
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
#: focus rarer. The output channels are large on their own: when they shared
#: the budget with the input channels (the square root each), in 2-d and 3-d
#: the tiny kernel and positions left them above 32 in under 2% of the
#: problems, and a bug in the tail of a block of 32 output channels went
#: unfound in 14,400 examples (six seeds of four checks); the input channels
#: are large in the reduction.
FOCI: tuple[frozenset[str], ...] = (
    frozenset({"batch"}), frozenset({"out"}), frozenset({"positions"}),
    frozenset({"kernel", "in"}))

#: The tier is the problem's first choice, an integer in [0, ODDS]: ODDS picks
#: the large tier (Hypothesis draws 0 more often than the others: measured,
#: 11% to 20% of the problems, depending on the operation and the run), and
#: shrinking heads for 0, the tiny one.
ODDS = 4

#: A problem with more than one spatial axis draws a square geometry (one
#: kernel size, stride, padding, dilation and output_padding for every axis,
#: as most real layers have) when this choice, an integer in [0, SQUARE_ODDS],
#: is SQUARE_ODDS; otherwise each axis draws its own, and shrinking heads
#: there (0), to the axis a bug needs. Drawn independently, all four agree on
#: every axis in under 1% of 2-d problems: JAX's conv2d backward crash (issue
#: 15: kernel 2x2, stride 2x2, padding 1x1, on an input of 4x1) was never
#: drawn in 10,000 problems.
SQUARE_ODDS = 2

#: float16 is drawn only where every result sums at most FLOAT16_MAX_TERMS terms
#: (conv_harness/problem.py), where its own worst-case bound means something
#: whatever type the implementation sums in; larger problems go to float32 and
#: float64 (in both tiers: tiny transposed problems reach K = 720 in grad_bias).
#: For an implementation that takes float16 only, the large tier keeps K and
#: batch * positions within it instead. The catalogue sweep visits one longer
#: float16 sum per operation (strategies/catalogue.py `long_float16_visits`).

#: likewise for bfloat16 summed in bfloat16 (u = 2**-8): gamma(64) = 1/3. Summed in
#: float32 (the default), its bound is u + float32's gamma(K): no limit.
BFLOAT16_MAX_TERMS = 64


def never_drawn(dtypes: Sequence[str], bfloat16_accumulation: str = "float32") -> list[str]:
    """The sizes no draw reaches, in words, for an implementation taking ``dtypes``:
    past the large tier's bounds (in any dimension), and reductions in a half
    precision longer than its rounding bound can judge (`FLOAT16_MAX_TERMS`,
    `BFLOAT16_MAX_TERMS`). A path taken only there (a batch block of 32, a float16
    kernel for long sums) is reached by giving such problems (``--conv-problem``)."""
    tiers = [b.large for b in DEFAULT_BOUNDS.values() if b.large is not None]
    sizes = [f"batch > {max(t.batch for t in tiers)}",
             f"channels per group > {max(t.channels_per_group for t in tiers)}",
             f"forward and grad_input K > {max(t.max_terms for t in tiers)}"]
    if "float16" in dtypes:
        sizes.append(f"K > {FLOAT16_MAX_TERMS} in float16")
    if "bfloat16" in dtypes and bfloat16_accumulation == "bfloat16":
        sizes.append(f"K > {BFLOAT16_MAX_TERMS} in bfloat16")
    return sizes


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
    """One value per axis; ``square``: the first axis's on every axis.

    Every axis is drawn either way, so that the choices keep their places:
    the shrinker can drop a square geometry (a kernel of 7x7) for the
    independent one (1x7) by lowering the square choice alone."""
    drawn = tuple(draw(values) for _ in range(axes))
    return (drawn[0],) * axes if square else drawn


def _snapped(base: int, snap: int, hi: int) -> int:
    """``base`` (snap 0), or the largest power of two (snap 1) or power of two
    plus one (snap 2) at most ``base``; at most ``hi``."""
    if snap == 1:
        base = 1 << (base.bit_length() - 1)
    elif snap == 2 and base > 1:
        base = (1 << (base - 1).bit_length() - 1) + 1
    return min(base, hi)


def _size(draw, lo: int, hi: int) -> int:
    """A size in [lo, hi] of the large tier: near a power of two or one past it
    two times in three, where blocked implementations keep their tails.

    Two choices, a snap and a base: the size is the base (snap 0) or the
    largest power of two (snap 1) or power of two plus one (snap 2) at most
    the base; the base runs to 1.5 * hi, so that the top power below ``hi``
    is likely (and ``hi`` itself, for snap 0). Rounding down, not up, keeps
    shrinking continuous: snap 0 never gives less than the other snaps, so
    the shrinker can always drop the snap and then lower the base one by one
    down to the smallest size that still fails (a bug that needs more than
    32 channels ends at 33, a reduction K = C * kh * kw above 1024 at the
    first C past it). Rounding up stopped it: 32 was base 17 snapped up, and
    dropping the snap gave 17, so 5x7 kernels kept 32 channels (K = 1120)
    where 30 (1050) still failed.
    """
    if hi <= lo:
        return lo
    snap = draw(_ints(0, 2))
    base = draw(_ints(lo, hi + hi // 2))
    return max(lo, _snapped(base, snap, hi))


#: an archetype and the feature its neighbour changes (None: the archetype itself)
Focus = tuple[Archetype, "str | None"]


def _check_op(op: str) -> None:
    if op not in OPS:
        raise InvalidArgument(f"op={op!r} is not a convolution this harness knows; "
                              f"expected one of {sorted(OPS)}")


def conv_problems(
    op: str = "conv2d",
    *,
    capabilities: Capabilities | None = None,
    bounds: Bounds | None = None,
    where: Callable[[ConvProblem], bool] | None = None,
    focus: Focus | None = None,
    given: Sequence[ConvProblem] | None = None,
) -> st.SearchStrategy[ConvProblem]:
    """Valid problems for ``op`` (``"conv2d"``, ``"conv_transpose1d"``, ...).

    ``capabilities`` narrows what is drawn (an implementation's declared
    ``CAPABILITIES``); ``bounds`` caps the sizes (default: `DEFAULT_BOUNDS`);
    ``where``: only problems it accepts (a filter). ``focus``: an archetype of
    ``op`` (strategies/archetypes.py) and the feature its neighbour changes, or
    None: every problem is drawn from it, as a share of the problems are
    otherwise (shrinking still takes away what a failure does not need).
    ``given``: draw only these problems (``--conv-problem``, strategies/pinned.py:
    those of ``op`` that fit the capabilities, the dtype changed where needed).
    """
    _check_op(op)
    if focus is not None and (len(focus) != 2 or not isinstance(focus[0], Archetype)
                              or focus[0].op != op or focus[1] not in (None,)
                              + archetypes.FEATURES):
        raise InvalidArgument(f"focus must be (an archetype of {op}, one of "
                              f"{archetypes.FEATURES} or None), got {focus!r}")
    caps = capabilities if capabilities is not None else Capabilities()
    if not isinstance(caps, Capabilities):
        raise InvalidArgument(f"capabilities must be a Capabilities, got {caps!r}")
    caps = caps.for_op(op)  # per-function declarations: what op and its backward share
    if not caps.dtypes:
        raise InvalidArgument(f"the capabilities leave no dtype to draw for {op}: "
                              "its functions share none")
    limits = bounds if bounds is not None else DEFAULT_BOUNDS[OPS[op].spatial_dims]
    if given is not None:
        if not all(isinstance(p, ConvProblem) for p in given):
            raise InvalidArgument(f"given must be ConvProblems, got {given!r}")
        return pinned.problems(pinned.given_problems(given), op, caps, limits.kernel == 1,
                               where, _max_terms, FLOAT16_MAX_TERMS)
    drawn = _problems(op, caps, limits, focus)
    return drawn if where is None else drawn.filter(where)


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
    output channels, the positions, or the reduction (kernel and input
    channels). The budget allows one or two sizes near their largest at
    once, not more: measured, when every size could be large at once, each
    got a small share and fewer than 2% of large examples passed 64
    positions. Each large axis gets an even share of what is left of the
    budget (the k-th root for the k large axes still to draw), so the last
    one drawn may take all that is left: one axis of a 2-d image alone can
    reach 65 positions. The other sizes keep their tiny bounds, within the
    budget too.
    """

    NAMES = ("kernel", "positions", "in", "out", "batch")

    def __init__(self, draw, b: Bounds, large: bool, max_terms: int):
        self.draw, self.b = draw, b
        self.tier = b.large if large else None
        self.max_terms = max_terms
        self.cost = 1  # multiply-adds per forward pass of what is drawn so far
        self._drawn_positions = 1
        self._splitting = False  # large positions drawn as a product (`_split`)
        self._left = 1  # what `_split` leaves to the axes still to draw
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

    def _hi(self, name: str, tiny: int, top: int, axes: int = 1, index: int = 0) -> int:
        """The largest value of axis ``index`` (of ``axes``) of size ``name``."""
        room = max(1, self.tier.budget // self.cost)
        if not self.big.get(name):
            return max(1, min(tiny, room))
        if name == "positions":  # their product per image is bounded too
            room = max(1, min(room, self.tier.positions // self._drawn_positions))
        later = sum(1 for n in self.NAMES[self.NAMES.index(name) + 1:] if self.big.get(n))
        share = room ** (1 / (axes - index + later * axes))
        return max(1, min(top, room, int(share + 1e-9)))

    def _draw(self, name: str, tiny: int, top: int, axes: int = 1, cap: int | None = None,
              lo: int = 1, index: int = 0) -> int:
        if self.tier is None:
            return self.draw(_ints(lo, tiny))
        hi = self._hi(name, tiny, top, axes, index)
        if cap is not None:
            hi = max(1, min(hi, cap))
        hi = max(lo, hi)
        value = _size(self.draw, lo, hi) if self.big.get(name) else self.draw(_ints(lo, hi))
        self.cost *= value
        return value

    def kernel(self, axes: int, square: bool) -> tuple[int, ...]:
        """Every axis is drawn, as in `_per_axis`; ``square``: the first one's
        size on every axis (within the budget: the first axis's share is the
        axes-th root of theirs)."""
        top = self.tier.kernel if self.tier else 0
        drawn = tuple(self._draw("kernel", self.b.kernel, top, axes, index=i)
                      for i in range(axes))
        if not square:
            return drawn
        self.cost = self.cost // math.prod(drawn) * drawn[0] ** axes
        return (drawn[0],) * axes

    def replace_kernel(self, drawn: tuple[int, ...], kernel: tuple[int, ...]) -> tuple[int, ...]:
        """``kernel`` instead of the ``drawn`` one (an archetype's), in the budget's count."""
        if self.tier is not None and kernel != drawn:
            self.cost = max(1, self.cost // math.prod(drawn)) * math.prod(kernel)
        return kernel

    def _terms_cap(self, later: int = 1) -> int | None:
        """For a float16-only implementation, batch * positions (the gradients' K)
        stays within `max_terms` too; ``later``: how many times the positions
        still to draw may multiply them (see `positions`)."""
        if self.tier is None or self.max_terms > FLOAT16_MAX_TERMS:
            return None
        return max(1, self.max_terms // (self._drawn_positions * later))

    def positions(self, axes: int, padding: tuple[int, ...] | None = None):
        """Draws one output (transposed: input) size per axis, called in turn.

        Large positions are drawn as their product per image first, then
        split into axes (see `_split`). Where padding alone covers the
        kernel an axis has more outputs than were drawn, up to 2 * padding + 1
        (see `count`): a float16-only implementation's cap keeps room for
        that on the axes still to draw.
        """
        top = self.tier.outputs if self.tier else 0
        self._drawn_positions = 1
        most = [2 * p + 1 for p in padding] if padding else [1] * axes
        drawn = iter(range(axes))
        split = (self.tier is not None and self.big.get("positions")
                 and self.max_terms > FLOAT16_MAX_TERMS)
        self._splitting = bool(split)

        def one() -> int:
            i = next(drawn)
            if split:
                value = self._split(i, axes, most[-1])
            else:
                value = self._draw("positions", self.b.outputs, top, axes,
                                   cap=self._terms_cap(math.prod(most[i + 1:])), index=i)
            self._drawn_positions *= value
            return value
        return one

    def _split(self, index: int, axes: int, last_most: int) -> int:
        """Axis ``index`` of large positions: the first draws their product P
        (near a power of two or one past it, see `_size`), then each axis but
        the last draws its share a and leaves floor(P / a) to the others, the
        last takes what is left: at most P positions, exactly P when the
        first axes are 1, where shrinking takes them.

        Why not a size per axis: shrinking lowers the first axis first, and
        stops where no single axis can shrink alone: a bug that needs more
        than 64 positions ended at 3x22 = 66 or 2x33, never 65, since a
        product lands on 65 only when the first axis divides it. Here P
        shrinks to the boundary, 65, and the first axes to 1: 1x65.

        Within the budget: an axis that padding gives more outputs than drawn
        leaves the others less (`count`); the last one may have up to
        ``last_most`` however few were drawn, so P leaves room for that.
        """
        top = self.tier.outputs
        if index == 0:
            later = sum(1 for n in self.NAMES[self.NAMES.index("positions") + 1:]
                        if self.big.get(n))
            room = max(1, self.tier.budget // self.cost)
            hi = max(1, min(self.tier.positions,
                            int(room ** (1 / (1 + later)) + 1e-9) // last_most))
            self._left = _size(self.draw, 1, hi)
        left = self._left
        if index < axes - 1:
            lo = -(-left // top ** (axes - 1 - index))
            hi = min(top, left)
            # drawn above its least, so that shrinking P lowers it too
            value = lo + self.draw(_ints(0, hi - lo)) if hi > lo else lo
            self._left = left // value
        else:
            value = left
        self.cost *= value
        return value

    def count(self, drawn: int, real: int) -> None:
        """An axis drawn with ``drawn`` outputs has ``real`` (more where padding
        alone covers the kernel): what the later sizes' budget and caps count."""
        self._drawn_positions = self._drawn_positions // drawn * real
        if self.tier is not None:
            self.cost = self.cost // drawn * real
        if self._splitting and real > drawn:
            self._left = max(1, self._left * drawn // real)

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


#: Where a problem comes from: one choice, an integer, picks the ordinary
#: draw (below ORDINARY_SHARE, where shrinking heads) or one of the
#: operation's archetype families (strategies/archetypes.py), each as likely
#: as a third of the ordinary draw; then an archetype of that family. conv2d
#: has six families: a third of its problems are ordinary, a ninth come from
#: each family; conv1d, conv3d and the transposed 2-d have two: three fifths
#: ordinary, a fifth from each. Why so many: only about 17 of a check's 100
#: examples are new draws (Hypothesis follows each with up to five mutations
#: of it, which keep its geometry), so a check reaches a fast path reliably
#: only if a tenth of new draws take it; with a third of the problems spread
#: over conv2d's 17 archetypes, Inception's two got 3% and a check missed its
#: 1xN path one time in two; with half of them by family, 8%, and a seeded
#: default run still missed it in all three checks that see it
#: (docs/fast-paths.md).
ORDINARY_SHARE = 3

#: An archetype's neighbour: this choice, an integer in [0, NEIGHBOUR_ODDS],
#: names the feature of `archetypes.FEATURES` (kernel, stride, padding,
#: dilation, groups) the problem takes from the ordinary draw instead, when it
#: is below their number: a fifth of the archetype problems are a one-step
#: neighbour of theirs, a 25th in each feature; the others keep every
#: feature. A fast path's condition is a conjunction; its bug shows where one
#: conjunct differs (a Winograd 3x3 stride-1 path that ignores dilation: on
#: ResNet's 3x3's dilation neighbour).
NEIGHBOUR_ODDS = 24

#: Each feature an archetype fixes also has two choices of its own, so that
#: shrinking can take away any part of the archetype the failure does not
#: need (the neighbour choice alone names one feature). Which axes keep the
#: archetype's value, an integer in [0, KEEP_ODDS]: 0 none (as if it were the
#: neighbour's feature), 1 the first axis only, 2 every axis but the first,
#: more: every axis. And how close the kept axes come to it, an integer
#: ``step`` in [0, STEPS]: each kept axis takes min(archetype's, ordinary +
#: step), the archetype's value unless ``step`` is small. Drawn, both are
#: nearly always the archetype's (measured: with a keep of 0 one time in 32
#: in each of five features, 28% of new archetype draws and 38% of their
#: mutations were not exact); both shrink towards the ordinary value, the
#: first axis by axis, the second one step at a time, so shrinking keeps of
#: the archetype only what the failure needs, down to the problem the
#: ordinary draw shrinks to (the Winograd dilation bug, found on DeepLab's
#: 3x3 dilation 4 padding 4: 3x3, stride 1, padding 0, dilation 2 on one
#: axis), never stopping at the archetype's padding or dilation.
#:
#: A neighbour's feature (the neighbour choice's, or a keep of 0) takes the
#: ordinary value on every axis, unless that is the archetype's own (padding
#: 0, stride 1, dilation 1 are the ordinary draw's commonest values): then one
#: step from it (one more, one less at the bound), on the first ``step`` axes,
#: so that shrinking ``step`` takes the steps away axis by axis and ends on
#: the ordinary value (a bug that needs dilation 2 on one axis is not stuck at
#: 2x2). And while ``step`` is above 0 a square archetype's neighbour is square
#: too (the ordinary first axis on every axis): ConvNeXt's 2x2 stride-2
#: downsampling with padding 1, not 0, is the geometry JAX's input gradient
#: aborts on (issue 15).
KEEP_ODDS = 255
STEPS = 255

@functools.lru_cache(maxsize=None)
def _eligible(op: str, caps: Capabilities, b: Bounds) -> tuple[Archetype, ...]:
    """The archetypes of ``op`` that these capabilities and bounds can draw: a
    feature some dtype accepts, and a bound of 1 stays 1 (``kernel=1``: 1x1 only)."""
    some = {name: any(caps.holds(name, d) for d in caps.dtypes)
            for name in ("dilation", "groups")}
    some_unsquare = any(not caps.holds("square", d) for d in caps.dtypes)
    out = []
    for a in archetypes.for_op(op):
        if b.kernel == 1 and set(a.kernel) != {1}:
            continue
        if any(d != 1 for d in a.dilation) and (b.dilation == 1 or not some["dilation"]):
            continue
        if a.groups != "dense" and (b.groups == 1 or not some["groups"]):
            continue
        if not a.square and not some_unsquare:
            continue
        out.append(a)
    return tuple(out)


@functools.lru_cache(maxsize=None)
def _families(eligible: tuple[Archetype, ...]) -> tuple[tuple[Archetype, ...], ...]:
    """``eligible`` grouped by family, in the catalogue's order."""
    families: dict[str, list[Archetype]] = {}
    for a in eligible:
        families.setdefault(a.family, []).append(a)
    return tuple(tuple(f) for f in families.values())


def _draw_archetype(draw, op: str, caps: Capabilities,
                    b: Bounds) -> tuple[Archetype | None, str | None]:
    """An archetype or None (the ordinary draw, see `ORDINARY_SHARE`), and its
    feature a neighbour changes (see `NEIGHBOUR_ODDS`) or None."""
    families = _families(_eligible(op, caps, b))
    if not families:
        return None, None
    source = draw(_ints(0, ORDINARY_SHARE + len(families) - 1))
    if source < ORDINARY_SHARE:
        return None, None
    family = families[source - ORDINARY_SHARE]
    arch = family[0] if len(family) == 1 else draw(_sampled(family))
    n = draw(_ints(0, NEIGHBOUR_ODDS))
    return arch, (archetypes.FEATURES[n] if n < len(archetypes.FEATURES) else None)


def _keeps(draw, arch: Archetype | None, possible: bool = True, off: bool = False) -> bool:
    """Whether an archetype's feature without axes (groups) keeps its value (see
    `KEEP_ODDS`); drawn in an archetype even where it is not ``possible``."""
    return arch is not None and draw(_ints(0, KEEP_ODDS)) != 0 and possible and not off


def _off(archetype: int, ordinary: int, up: bool, lowest: int, top: int) -> int:
    """An axis of a neighbour's feature (see `KEEP_ODDS`): the ordinary value, or,
    where that is the archetype's own and ``up``, one step from it."""
    if ordinary != archetype or not up:
        return ordinary
    if archetype < top:
        return archetype + 1
    return archetype - 1 if archetype > lowest else archetype


def _kept(draw, arch: Archetype | None, feature: str, drawn: tuple[int, ...],
          possible: bool, square: bool, lowest: int, top: int,
          off: str | None = None) -> tuple[int, ...]:
    """An archetype's value of ``feature`` on the axes it keeps (see `KEEP_ODDS`),
    ``drawn`` on the others; none if ``off`` names it (the neighbour's feature:
    then ``drawn`` or a step from the archetype's, within [``lowest``,
    ``top``]); ``square``: on every axis or none. Drawn in an archetype even
    where it is not ``possible`` (the capabilities refuse it)."""
    if arch is None:
        return drawn
    keep = draw(_ints(0, KEEP_ODDS))
    step = draw(_ints(0, STEPS))
    if not possible:
        return drawn
    wanted = arch.value(feature)
    if keep == 0 or off == feature:
        if step and len(set(wanted)) == 1:  # a square archetype's neighbour is square
            drawn = (drawn[0],) * len(drawn)
        value = tuple(_off(a, d, step > i, lowest, top)
                      for i, (a, d) in enumerate(zip(wanted, drawn)))
    else:
        kept = (True,) * len(drawn) if keep > 2 or len(drawn) == 1 or square else tuple(
            (i == 0) == (keep == 1) for i in range(len(drawn)))
        value = tuple(min(a, d + step) if k else d for a, d, k in zip(wanted, drawn, kept))
    return (value[0],) * len(value) if square else value


@st.composite
def _problems(draw, op: str, caps: Capabilities, b: Bounds,
              focus: Focus | None = None) -> ConvProblem:
    spec = OPS[op]
    axes = spec.spatial_dims
    allowed = tuple(caps.dtypes)  # narrowed by each feature drawn; never empty
    large = b.large is not None and draw(_ints(0, ODDS)) == ODDS
    arch, off = _draw_archetype(draw, op, caps, b) if focus is None else focus
    only_float16 = allowed == ("float16",)
    # bfloat16 alone, summed in bfloat16: its large tier keeps within its own limit
    only_bfloat16_sums = allowed == ("bfloat16",) and caps.bfloat16_accumulation == "bfloat16"
    sizes = _Sizes(draw, b, large,
                   FLOAT16_MAX_TERMS if only_float16 else BFLOAT16_MAX_TERMS
                   if only_bfloat16_sums else (b.large.max_terms if large else 0))
    square = _all_square(allowed, caps) or (
        axes > 1 and draw(_ints(0, SQUARE_ODDS)) == SQUARE_ODDS)

    squares = _all_square(allowed, caps)

    def fits(feature: str) -> bool:  # an archetype's value, where squares are needed
        return arch is not None and (len(set(arch.value(feature))) == 1 or not squares)

    kernel = sizes.kernel(axes, square)
    # an archetype's kernel within the bounds' largest: the large tier's where there
    # is one (a 7x7 stem in any problem), else the tiny bound (--conv-budget dropped
    # the large tier: no archetype brings its kernels back)
    top = b.large.kernel if b.large is not None else b.kernel
    kernel = sizes.replace_kernel(kernel, tuple(min(k, top) for k in _kept(
        draw, arch, "kernel", kernel, fits("kernel"), squares, 1, top, off)))
    stride = _per_axis(draw, _ints(1, b.stride), axes, square)
    stride = _kept(draw, arch, "stride", stride, fits("stride"), squares, 1, b.stride, off)
    padding = _per_axis(draw, _ints(0, b.padding), axes, square)
    drawn_padding = padding
    padding = _kept(draw, arch, "padding", padding, fits("padding"), squares, 0, b.padding, off)
    # an archetype's padding kept on some axis: no output_padding (archetypes have none)
    no_output_padding = arch is not None and any(
        p != d or p == a for p, d, a in zip(padding, drawn_padding, arch.padding))
    allowed = _unsquared(allowed, caps, kernel, stride, padding)
    dilated = _narrowed(allowed, caps, "dilation", True)  # the dtypes that take dilation
    dilation = (1,) * axes
    if dilated:
        dilation = _per_axis(draw, _ints(1, b.dilation), axes,
                             square or _all_square(dilated, caps))
    if arch is not None:
        dilation = _kept(draw, arch, "dilation", dilation, set(arch.dilation) == {1} or bool(
            dilated and (len(set(arch.dilation)) == 1 or not _all_square(dilated, caps))),
            squares or bool(dilated and _all_square(dilated, caps)), 1,
            b.dilation if dilated else 1, off)
    if dilated:
        allowed = _unsquared(_narrowed(allowed, caps, "dilation",
                                       any(d != 1 for d in dilation)), caps, dilation)
    outputs = sizes.positions(axes, None if spec.transposed else padding)
    if spec.transposed:
        input_size, padding, output_padding = _transposed_sizes(
            draw, kernel, stride, padding, dilation, b, square or _all_square(allowed, caps),
            outputs, caps.output_padding_limit, no_output_padding)
        allowed = _unsquared(allowed, caps, padding, output_padding)
    else:
        input_size = _conv_sizes(draw, kernel, stride, padding, dilation, outputs, sizes.count)
        output_padding = ()
    groups = draw(_ints(1, b.groups)) if any(caps.holds("groups", d) for d in allowed) else 1
    pattern = None
    if arch is not None and _keeps(draw, arch, arch.groups == "dense" or any(
            caps.holds("groups", d) for d in allowed), off == "groups"):
        pattern = arch.groups
        groups = {"dense": 1, "depthwise": 1, "grouped": max(2, groups)}[pattern]
    in_channels, out_channels = sizes.channels(groups, kernel)
    if pattern == "depthwise":  # one filter per channel, two channels at least (one
        groups = out_channels = in_channels = in_channels + 1  # is dense)
    allowed = _narrowed(allowed, caps, "groups", groups != 1)
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
    if caps.bfloat16_accumulation == "bfloat16" and _max_terms(problem) > BFLOAT16_MAX_TERMS:
        allowed = tuple(d for d in allowed if d != "bfloat16") or allowed
    dtype = draw(_sampled(allowed))
    # the archetype travels with the problem, for a report to say where a failure was
    # found (conv_harness/searching/suite.py)
    return dataclasses.replace(problem, dtype=dtype, drawn_from=arch)


def _conv_sizes(draw, kernel, stride, padding, dilation, outputs, count) -> tuple[int, ...]:
    """Input sizes from the number of outputs and the stride remainder per axis.

    size = (outputs - 1) * stride + effective kernel + remainder - 2 * padding,
    at least 1: the padded input then always holds the dilated kernel, so the
    problem is valid; where padding alone covers the kernel the size is 1.
    ``outputs()`` draws one axis's number of outputs; ``count(drawn, real)``
    is told how many the axis really has.
    """
    sizes = []
    for k, s, p, d in zip(kernel, stride, padding, dilation):
        n = outputs()
        remainder = draw(_ints(0, s - 1))
        sizes.append(max(1, (n - 1) * s + d * (k - 1) + 1 + remainder - 2 * p))
        count(n, conv_output_length(sizes[-1], k, s, p, d))
    return tuple(sizes)


def _transposed_sizes(draw, kernel, stride, padding, dilation, b: Bounds, square: bool,
                      outputs, limit=lambda s, d: max(s, d) - 1,
                      no_output_padding: bool = False):
    """Input sizes, padding and output_padding of a valid transposed problem.

    output_padding must be below max(stride, dilation) on each axis (torch's
    rule), or what ``limit(stride, dilation)`` allows (CAPABILITIES'
    ``output_padding``); padding is capped so that every axis keeps at least
    one output. ``no_output_padding``: an archetype's padding, kept
    (output_padding 0). ``outputs()`` draws one axis's input size.
    """
    output_padding = _per_axis(draw, _ints(0, max(b.stride, b.dilation) - 1),
                               len(kernel), square)
    output_padding = tuple(0 if no_output_padding else min(op, limit(s, d))
                           for op, s, d in zip(output_padding, stride, dilation))
    sizes = tuple(outputs() for _ in kernel)
    capped = tuple(min(p, ((n - 1) * s + d * (k - 1) + op) // 2)
                   for p, n, k, s, d, op in zip(padding, sizes, kernel, stride, dilation,
                                                output_padding))
    if square:  # one padding for every axis: the smallest cap
        capped = (min(capped),) * len(capped)
    return sizes, capped, output_padding
