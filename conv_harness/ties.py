"""Ties between sizes of different arrays (issue 35): where code that compares two
sizes takes a branch of its own.

Implementations choose by comparing sizes: which operand of a GEMM is the
larger (its orientation), im2col against direct, which array to loop over.
The branch where two sizes are equal is one that independent draws rarely
take: in conv2d, about 3% of the problems tie any of the pairs below, in
conv3d fewer. A real autodiff library's convolution backward recursed forever
whenever two of them were equal. The explanation names a tie where the bug
follows it (conv_harness/triage/explain.py), and the run summary counts the problems
that held each (strategies/cases.py's `features`).

The sizes are those of the GEMM a convolution is (per group): M, the images
times the positions of each (the forward's rows, grad_weight's reduction); N,
the out channels; K, the in channels times the kernel taps (the forward's and
grad_input's reduction). For a transposed convolution the positions are its
input's, the GEMM of the convolution it is the gradient of. A tie holds where
both sides are equal and at least 2: at 1 every problem of one position, one
channel and a 1x1 kernel would tie.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass

from conv_harness.problem import ConvProblem, conv_output_length


def positions(p: ConvProblem) -> int:
    """The positions of an image the GEMM runs over: the outputs' (a transposed
    convolution: its input's)."""
    return math.prod(p.input_size if p.spec.transposed else p.output_size)


def m_size(p: ConvProblem) -> int:
    """batch x positions: the reduction length of grad_weight."""
    return p.grad_weight_terms()


def n_size(p: ConvProblem) -> int:
    return p.out_channels // p.groups


def k_size(p: ConvProblem) -> int:
    """in channels x taps, per group: the reduction length of the forward."""
    return p.forward_terms()


@dataclass(frozen=True)
class Tie:
    """Two sizes of different arrays that a tie makes equal."""

    name: str
    #: what the text calls it: "batch x output positions = K (...)"
    text: str
    left: Callable[[ConvProblem], int]
    right: Callable[[ConvProblem], int]
    #: the triage's features (conv_harness/triage/features.py) either side follows from
    components: frozenset[str]

    def holds(self, p: ConvProblem) -> bool:
        return self.left(p) == self.right(p) >= 2

    def value(self, p: ConvProblem) -> int:
        """The size both sides share where the tie holds, else 0: what a trigger's
        tie condition reads (``= K >= 16``: a branch taken on the tie from 16 on)."""
        return self.left(p) if self.holds(p) else 0


_M = frozenset({"batch", "outputs", "positions", "batch_positions", "stride", "remainder",
                "padding", "kernel", "dilation", "extent"})
_K = frozenset({"in_channels", "kernel", "K"})
_N = frozenset({"out_channels"})

TIES: tuple[Tie, ...] = (
    Tie("M=K", "batch x output positions = K (in channels per group x kernel taps)",
        m_size, k_size, _M | _K),
    Tie("N=K", "out channels per group = K (in channels per group x kernel taps)",
        n_size, k_size, _N | _K),
    Tie("M=N", "batch x output positions = out channels per group", m_size, n_size, _M | _N),
    Tie("P=K", "output positions = K (in channels per group x kernel taps)",
        positions, k_size, (_M - {"batch"}) | _K),
)
BY_NAME: dict[str, Tie] = {t.name: t for t in TIES}


def _channels(p: ConvProblem, per_in: int | None = None,
              per_out: int | None = None) -> ConvProblem:
    g = p.groups
    return dataclasses.replace(
        p, in_channels=g * (per_in if per_in is not None else p.in_channels // g),
        out_channels=g * (per_out if per_out is not None else p.out_channels // g))


def _last_axis_outputs(p: ConvProblem, count: int) -> ConvProblem | None:
    """``p`` with ``count`` positions on its last axis (the input size rebuilt from
    them, its stride remainder kept); None where no input has that many."""
    if count < 1:
        return None
    a = len(p.input_size) - 1
    n, k, s, pad, d = (p.input_size[a], p.kernel_size[a], p.stride[a], p.padding[a],
                       p.dilation[a])
    if p.spec.transposed:
        size = count
        if pad > ((size - 1) * s + d * (k - 1) + p.output_padding[a]) // 2:
            return None
    else:
        o = conv_output_length(n, k, s, pad, d)
        remainder = n + 2 * pad - d * (k - 1) - 1 - (o - 1) * s
        size = (count - 1) * s + d * (k - 1) + 1 + remainder - 2 * pad
        if size < 1 or conv_output_length(size, k, s, pad, d) != count:
            return None
    return dataclasses.replace(p, input_size=p.input_size[:a] + (size,))


def _quotient(a: int, b: int) -> int | None:
    return a // b if b >= 1 and a % b == 0 and a >= b else None


def p_last(p: ConvProblem) -> int:
    """The positions on the last axis (the one `_last_axis_outputs` sets)."""
    return (p.input_size if p.spec.transposed else p.output_size)[-1]


def _some(value, then):
    return None if value is None else then(value)


#: per tie, the ways it is made: one size set to what the other side needs
#: (None where it cannot be: a side not divisible by the other's fixed part)
MOVES: dict[str, tuple[Callable[[ConvProblem], ConvProblem | None], ...]] = {
    "N=K": (lambda p: _channels(p, per_out=k_size(p)),),
    "M=N": (lambda p: _channels(p, per_out=m_size(p)),),
    "M=K": (lambda p: _some(_quotient(k_size(p), positions(p)),
                            lambda b: dataclasses.replace(p, batch=b)),
            lambda p: _some(_quotient(m_size(p), math.prod(p.kernel_size)),
                            lambda c: _channels(p, per_in=c))),
    "P=K": (lambda p: _some(_quotient(positions(p), math.prod(p.kernel_size)),
                            lambda c: _channels(p, per_in=c)),
            lambda p: _some(_quotient(k_size(p), positions(p) // p_last(p)),
                            lambda n: _last_axis_outputs(p, n))),
}


def made(p: ConvProblem, name: str) -> list[ConvProblem]:
    """``p`` with tie ``name`` made by each of its `MOVES` that can, at 2 or more."""
    tie = BY_NAME[name]
    return [q for q in (move(p) for move in MOVES[name]) if q is not None and tie.holds(q)]


#: a step of one size: the tie broken, or, followed by a move, made at another value
STEPS: tuple[Callable[[ConvProblem], ConvProblem | None], ...] = (
    lambda p: dataclasses.replace(p, batch=p.batch + 1),
    lambda p: _channels(p, per_in=p.in_channels // p.groups + 1),
    lambda p: _last_axis_outputs(p, p_last(p) + 1),
    lambda p: _channels(p, per_out=p.out_channels // p.groups + 1),
)


def broken(p: ConvProblem, name: str) -> list[ConvProblem]:
    """``p`` with one size a step larger where tie ``name`` then no longer holds:
    what passes when a bug follows the tie, and fails when it follows something
    else that ``p`` has (a padding, say)."""
    tie = BY_NAME[name]
    return [q for q in (step(p) for step in STEPS) if q is not None and not tie.holds(q)]


def retied(p: ConvProblem, name: str) -> list[ConvProblem]:
    """Problems on which tie ``name`` holds at another value than on ``p``: one size
    of ``p`` a step larger, the tie made again by another. What an explanation
    tries, to tell a bug that follows the tie from one at the tie's sizes."""
    tie, out = BY_NAME[name], []
    for step in STEPS:
        q = step(p)
        for r in [] if q is None else made(q, name):
            if r not in out and tie.left(r) != tie.left(p):
                out.append(r)
                break
    return out


def _kernel(p: ConvProblem, kernel: tuple[int, ...],
            dilation: tuple[int, ...] | None = None) -> ConvProblem | None:
    """``p`` with ``kernel`` (and ``dilation``), the input kept (None where invalid: no
    output position on some axis, as a transposed problem's padding leaves with a
    shorter kernel)."""
    try:
        q = dataclasses.replace(p, kernel_size=kernel, dilation=dilation or p.dilation)
    except ValueError:
        return None
    return q if min(q.output_size) >= 1 else None


def _kernel_axis(p: ConvProblem, axis: int, size: int) -> ConvProblem | None:
    """``p`` with a kernel of ``size`` on ``axis``, the input kept (None where invalid)."""
    return _kernel(p, p.kernel_size[:axis] + (size,) + p.kernel_size[axis + 1:])


def _down(value: int) -> set[int]:
    """Smaller values of a size to try: 1, half, one less."""
    return {v for v in (1, value // 2, value - 1) if 1 <= v < value}


def _with_k(p: ConvProblem, value: int) -> list[ConvProblem | None]:
    """``p`` with K = ``value``: through its in channels, its last kernel axis, or the
    in channels alone with a kernel of one tap."""
    taps, rest = math.prod(p.kernel_size), p.in_channels // p.groups * math.prod(
        p.kernel_size[:-1])
    one_tap = _kernel(p, (1,) * len(p.kernel_size))
    return [_channels(p, per_in=value // taps) if value % taps == 0 else None,
            _kernel_axis(p, len(p.kernel_size) - 1, value // rest) if value % rest == 0
            else None,
            None if one_tap is None else _channels(one_tap, per_in=value)]


def _with_m(p: ConvProblem, value: int) -> list[ConvProblem | None]:
    """``p`` with batch x positions = ``value``: through its batch, or its last axis
    (with its batch, or one image)."""
    per_image, others = positions(p), positions(p) // p_last(p)
    return [dataclasses.replace(p, batch=value // per_image) if value % per_image == 0
            else None,
            _last_axis_outputs(p, value // (p.batch * others))
            if value % (p.batch * others) == 0 else None,
            _last_axis_outputs(dataclasses.replace(p, batch=1), value // others)
            if value % others == 0 else None]


def _with_p(p: ConvProblem, value: int) -> list[ConvProblem | None]:
    rest = positions(p) // p_last(p)
    return [_last_axis_outputs(p, value // rest) if value % rest == 0 else None]


#: each side of a tie set to a value, every way `at` tries
SIDES: dict[str, Callable[[ConvProblem, int], list[ConvProblem | None]]] = {
    "M": _with_m, "N": lambda p, value: [_channels(p, per_out=value)], "K": _with_k,
    "P": _with_p}


def at(p: ConvProblem, name: str, value: int) -> list[ConvProblem]:
    """``p`` with tie ``name`` made at ``value``: one side set to it (each way `SIDES`
    knows), then the other set to it too or made to match (`made`). What an
    explanation tries to find the least value a bug on a tie needs (a square GEMM
    branch taken from 16 on); empty where no such way reaches the value."""
    tie, out = BY_NAME[name], []
    first, second = name.split("=")
    for one, other in ((first, second), (second, first)):
        for q in SIDES[one](p, value):
            if q is None:
                continue
            for r in [*SIDES[other](q, value), *made(q, name)]:
                if r is not None and tie.value(r) == value and r not in out:
                    out.append(r)
    return out


def lowered(p: ConvProblem, name: str) -> list[ConvProblem]:
    """Problems on which tie ``name`` holds with one size of ``p`` lower (1, half, or
    one less: the batch, the in channels, a kernel axis, the last axis's positions),
    the tie made again by another: what an explanation tries to shrink a bug that
    follows a tie, which Hypothesis's shrinking and single changes cannot (a change
    of one size breaks the tie). Plainest first."""
    g = p.groups
    steps = [dataclasses.replace(p, batch=b) for b in _down(p.batch)]
    steps += [_channels(p, per_in=c) for c in _down(p.in_channels // g)]
    steps += [_kernel_axis(p, a, k) for a, size in enumerate(p.kernel_size) for k in _down(size)]
    steps += [_last_axis_outputs(p, n) for n in _down(p_last(p))]
    out: list[ConvProblem] = []
    for q in steps:
        for r in [] if q is None else made(q, name):
            if r not in out and r != p:
                out.append(r)
    return sorted(out, key=ConvProblem.size_rank)


# -- crossings ---------------------------------------------------------------------------

def dilated_kernel(p: ConvProblem) -> tuple[int, ...]:
    """The span the kernel covers on each axis, dilation included."""
    return tuple(d * (k - 1) + 1 for k, d in zip(p.kernel_size, p.dilation))


def axis_positions(p: ConvProblem) -> tuple[int, ...]:
    """The positions of each axis the GEMM runs over (`positions`, per axis)."""
    return p.input_size if p.spec.transposed else p.output_size


def _kernel_span(p: ConvProblem, axis: int, span: int) -> ConvProblem | None:
    """``p`` with the least kernel on ``axis`` whose dilated span is at least ``span``,
    the input kept (None where the padded input cannot hold it)."""
    d = p.dilation[axis]
    return _kernel_axis(p, axis, max(1, -(-(span - 1) // d) + 1))


def _kernel_widest(p: ConvProblem, axis: int) -> ConvProblem | None:
    """``p`` with the widest kernel the padded input holds on ``axis``: one output there
    (a transposed problem: its input kept, so its kernel made as long as that)."""
    if p.spec.transposed:
        return _kernel_axis(p, axis, max(p.kernel_size[axis], p.input_size[axis]))
    room = p.input_size[axis] + 2 * p.padding[axis] - 1
    return _kernel_axis(p, axis, room // p.dilation[axis] + 1)


def _input_longer(p: ConvProblem, axis: int, by: int = 1) -> ConvProblem:
    return dataclasses.replace(p, input_size=p.input_size[:axis] + (p.input_size[axis] + by,)
                               + p.input_size[axis + 1:])


def _span_again(p: ConvProblem, a: int, b: int, axis: int) -> list[ConvProblem | None]:
    return [_input_longer(p, axis)] if a < b else []


def _span_fits(p: ConvProblem, a: int, b: int, axis: int) -> ConvProblem | None:
    return _kernel_axis(p, axis, 1) if a > b else p


def _span_covers(p: ConvProblem, a: int, b: int, axis: int) -> ConvProblem | None:
    return _kernel_span(p, axis, b) if a < b else p


def _taps_covers(p: ConvProblem, a: int, b: int, axis: int) -> ConvProblem | None:
    return _kernel_widest(p, axis) if a < b else p


def _kernel_and_input(p: ConvProblem, axis: int, taps: int,
                      positions: int) -> ConvProblem | None:
    """``p`` with ``taps`` more kernel taps and ``positions`` more input positions on
    ``axis``."""
    return _kernel_axis(_input_longer(p, axis, positions), axis, p.kernel_size[axis] + taps)


def _span_tied_again(p: ConvProblem, a: int, b: int, axis: int) -> list[ConvProblem | None]:
    """The span and the input a dilation step longer each: tied at the next size; and
    tied with more outputs (padding on the axis), so that a bug of one output (which
    the tie gives without padding) is not taken for one of the tie."""
    if not a == b >= 2:
        return []
    padded = dataclasses.replace(p, padding=p.padding[:axis] + (p.padding[axis] + 1,)
                                 + p.padding[axis + 1:])
    return [_kernel_and_input(p, axis, 1, p.dilation[axis]),
            padded if min(padded.output_size) >= 1 else None]


def _taps_tied_again(p: ConvProblem, a: int, b: int, axis: int) -> list[ConvProblem | None]:
    """A tap and an output position more: the input longer by a dilation step and a
    stride (a transposed problem's positions are its input's: one more)."""
    if not a == b >= 2:
        return []
    more = 1 if p.spec.transposed else p.dilation[axis] + p.stride[axis]
    return [_kernel_and_input(p, axis, 1, more)]


def _input_untied(p: ConvProblem, a: int, b: int, axis: int) -> ConvProblem | None:
    """The input longer by a position (a stride where the positions are the outputs:
    one more of them), the kernel kept: the tie broken by the input alone."""
    if not a == b >= 2:
        return p
    more = 1 if p.spec.transposed else p.stride[axis]
    return _kernel_and_input(p, axis, 0, more)


def _kernel_untied(p: ConvProblem, a: int, b: int, axis: int) -> ConvProblem | None:
    """The kernel a tap shorter, the input kept: the tie broken by the kernel alone."""
    return _kernel_axis(p, axis, p.kernel_size[axis] - 1) if a == b >= 2 else p


#: a change of one axis of a problem, given the crossing's two sizes there
AxisMove = Callable[[ConvProblem, int, int, int], "ConvProblem | None"]
#: the problems a crossing holds on at other sizes, from one axis
AxisMoves = Callable[[ConvProblem, int, int, int], "list[ConvProblem | None]"]


def _longer_again(p: ConvProblem, a: int, b: int, axis: int) -> list[ConvProblem | None]:
    """Where the span is the longer: a tap longer, and the input a position longer if it
    stays the shorter; where it is not: made longer there too (so that a bug of a
    crossing, which needs an axis where the kernel is the shorter, passes). Where the
    axis is dilated: the same span in taps (so that a bug that needs a dilation too,
    a size check made only for dilated kernels, passes)."""
    if a > b:
        moved = [_kernel_axis(p, axis, p.kernel_size[axis] + 1),
                 _input_longer(p, axis) if a > b + 1 else None]
    else:
        moved = [_kernel_span(p, axis, b + 1)]
    if p.dilation[axis] > 1:
        moved.append(_undilated(p, axis))
    return moved


def _undilated(p: ConvProblem, axis: int) -> ConvProblem | None:
    """``p`` with dilation 1 on ``axis`` and as many taps as its dilated span there."""
    span = dilated_kernel(p)[axis]
    return _kernel(p, p.kernel_size[:axis] + (span,) + p.kernel_size[axis + 1:],
                   p.dilation[:axis] + (1,) + p.dilation[axis + 1:])


def _input_spans(p: ConvProblem, a: int, b: int, axis: int) -> ConvProblem | None:
    """The input as long as the span where it was the shorter, the kernel kept."""
    return _input_longer(p, axis, a - b) if a > b else p


def _crossed(pairs: list[tuple[int, int]]) -> bool:
    return any(a > b for a, b in pairs) and any(a < b for a, b in pairs)


def _tied(pairs: list[tuple[int, int]]) -> bool:
    """Equal on some axis, at 2 or more (at 1, every 1x1 kernel over one position)."""
    return any(a == b >= 2 for a, b in pairs)


@dataclass(frozen=True)
class Crossing:
    """Two per-axis sizes of different arrays, one larger on some axis and smaller on
    another: where code that picks the larger operand by comparing them on every axis
    (a correlation routine choosing which array slides over the other) finds neither.
    Random draws cross the kernel and the input in about a fifth of conv2d problems;
    what they lack is the name, which the explanation gives where the bug follows it.
    Of ``kind`` "tie": the two sizes equal on some axis (one operand exactly covers the
    other there), the other branch such a comparison takes; explained the same way."""

    name: str
    text: str
    left: Callable[[ConvProblem], tuple[int, ...]]
    right: Callable[[ConvProblem], tuple[int, ...]]
    components: frozenset[str]
    #: the crossing made at other sizes: one axis changed where the left is the smaller
    again: AxisMoves = _span_again
    #: the crossing undone two ways: the left made the smaller (``fits``), or the larger
    #: (``covers``), on each axis where it was not (of "longer": the left made the
    #: smaller, or the right as long as the left)
    fits: AxisMove = _span_fits
    covers: AxisMove = _taps_covers
    #: "crossing"; "tie" for a relation of two per-axis sizes equal on some axis;
    #: "longer" for the left longer than the right on some axis
    kind: str = "crossing"

    def holds(self, p: ConvProblem) -> bool:
        pairs = list(zip(self.left(p), self.right(p)))
        if self.kind == "longer":
            return any(a > b for a, b in pairs)
        return _tied(pairs) if self.kind == "tie" else _crossed(pairs)


_AXIS_SIZES = frozenset({"kernel", "dilation", "padding", "outputs", "stride", "remainder",
                         "extent", "positions"})
CROSSINGS: tuple[Crossing, ...] = (
    Crossing("W~X", "the kernel (dilated) larger than the input on one axis and smaller on "
             "another", dilated_kernel, lambda p: p.input_size, _AXIS_SIZES,
             covers=_span_covers),
    # grad_weight correlates the input with the output gradient: code that picks which
    # of the two slides over the other by comparing the kernel's and the outputs'
    # shapes (a real autodiff library's backward recursed forever there: 2x1 kernel,
    # 1x2 outputs) finds neither the larger
    Crossing("W~O", "the kernel larger than the outputs on one axis and smaller on another",
             lambda p: p.kernel_size, axis_positions, _AXIS_SIZES),
    # per-axis ties: the branch where one operand exactly covers the other (a "full"
    # correlation: one output; the kernel as long as the output gradient it meets)
    Crossing("W=X", "the kernel (dilated) as long as the input on an axis", dilated_kernel,
             lambda p: p.input_size, _AXIS_SIZES, again=_span_tied_again,
             fits=_input_untied, covers=_kernel_untied, kind="tie"),
    Crossing("W=O", "the kernel as long as the outputs on an axis", lambda p: p.kernel_size,
             axis_positions, _AXIS_SIZES, again=_taps_tied_again, fits=_input_untied,
             covers=_kernel_untied, kind="tie"),
    # a size check that forgets the padding (the input must hold the kernel): refuses
    # every problem whose padding makes room for a kernel longer than the input
    Crossing("W>X", "the kernel (dilated) longer than the input on an axis", dilated_kernel,
             lambda p: p.input_size, _AXIS_SIZES, again=_longer_again, fits=_span_fits,
             covers=_input_spans, kind="longer"),
)
CROSSING_BY_NAME: dict[str, Crossing] = {c.name: c for c in CROSSINGS}


def crossed_again(p: ConvProblem, name: str) -> list[ConvProblem]:
    """``p`` crossed at other sizes: the input a position longer on each axis where the
    kernel is the shorter (a kernel a tap longer would change which of its taps meet
    the data, and with it what a bug shows); a per-axis tie made at the next size on
    each axis it holds on (the kernel a tap longer and the input to match)."""
    crossing, out = CROSSING_BY_NAME[name], []
    for axis, (a, b) in enumerate(zip(crossing.left(p), crossing.right(p))):
        for q in crossing.again(p, a, b, axis):
            if q is not None and crossing.holds(q) and q not in out:
                out.append(q)
    return out


def uncrossed(p: ConvProblem, name: str) -> list[ConvProblem]:
    """``p`` with the kernel the smaller on every axis (one tap where it was the larger),
    and with it the larger on every axis (covering the input, or the outputs, where it
    was the shorter): the crossing undone each way, the kernel kept above one tap
    somewhere. A per-axis tie is broken by the input alone (longer) and by the kernel
    alone (a tap shorter)."""
    crossing = CROSSING_BY_NAME[name]
    pairs = list(zip(crossing.left(p), crossing.right(p)))
    fits, covers = p, p
    for axis, (a, b) in enumerate(pairs):
        fits = None if fits is None else crossing.fits(fits, a, b, axis)
        covers = None if covers is None else crossing.covers(covers, a, b, axis)
    return [q for q in (fits, covers) if q is not None and not crossing.holds(q)]
