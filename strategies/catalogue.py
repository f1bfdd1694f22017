"""Every archetype of an operation and each of its one-step neighbours, as
concrete problems (issue 35): the catalogue sweep's visits.

The strategies draw archetypes by chance (strategies/problems.py): over a
run, a check drew ResNet's 7x7 stride-2 stem 20 to 50 times and its padding
neighbour rarely or never, and a fast path that assumed padding 3 passed.
A sweep visits each archetype and each neighbour once per check, besides
the random draws (conv_harness/searching/sweep.py). A neighbour changes exactly one
feature, one step: the kernel (one tap more, or less), the stride (1 and 2
swap), the padding (one less, or one where there is none), the dilation (1
and 2 swap), the groups pattern (dense and depthwise swap, grouped becomes
dense), the outputs (an odd count on every axis, where the archetype's
own has an even one: a path that tiles by two loses the tail), or the input
channels per group of a dense or grouped archetype (`CHANNELS_NEIGHBOUR`, off
every block an optimised kernel takes channels in: a path that mishandles the
last, partial block of a group's channels fails only there). An archetype
padded by 2 or more, or on some axes only, has an unpadded neighbour too
(DeepLab's dilated 3x3 without its padding: a bug of every padded problem
hides the others of its geometry, and padding one less is still padded).

Every visit has small, fixed sizes (batch 2, two channels per group, four
outputs per axis or the fewest the padding leaves; one visit per kind of geometry
has `BATCH_NEIGHBOUR` images), float32 where the
implementation takes it, C-contiguous arrays; the data are seeded noise.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from conv_harness import ties
from conv_harness.problem import OPS, ConvCase, ConvProblem
from conv_harness.running.capabilities import Capabilities
from strategies import archetypes
from strategies.archetypes import Archetype
from strategies.cases import noise_case
from strategies.problems import Bounds

#: what a neighbour changes: the archetype's features, the outputs' parity and the
#: input channels per group
NEIGHBOUR_FEATURES = archetypes.FEATURES + ("outputs", "channels", "unpadded")
#: the channels neighbour's input channels per group (the reduction's): one above 16,
#: so one above a multiple of 4, 8 and 16 (the blocks kernels take channels in), a
#: tail of one in each;
#: a visit's own two channels per group are below every such block, where a blocked
#: path is not taken
CHANNELS_NEIGHBOUR = 17
#: outputs per axis of a visit (the fewest valid even count at or above it)
OUTPUTS = 4
#: the batch visit's images: one above a multiple of 4 and of 8, and short of 16, so that
#: a path taking images in blocks of any of them has a partial block (`batch_visits`)
BATCH_NEIGHBOUR = 9


#: the long float16 visit's forward K, at least: ResNet's last stage, 3x3 x 512
#: input channels (`long_float16_visits`)
LONG_FLOAT16_TERMS = 4608
#: its ``feature``
LONG_FLOAT16 = "long float16 sum"
#: its data: the noise (values in [-4, 4]) times this power of two, values in [-1, 1],
#: so that no partial sum of K terms comes near float16's overflow (65504)
LONG_FLOAT16_SCALE = 0.25


#: a tie visit's ``feature``: this and the tie's name ("tie N=K"); a crossing visit's:
#: this and the crossing's name ("crossing W~X")
TIE = "tie "
CROSSING = "crossing "


@dataclass(frozen=True)
class Visit:
    """One problem of the sweep: ``archetype`` itself (``feature`` None) or its
    neighbour in ``feature``; or, with no archetype, a problem on which the
    implementation declares it takes dispatch ``path`` (``HARNESS_PATHS``)."""

    archetype: Archetype | None
    feature: str | None
    problem: ConvProblem
    path: str | None = None

    @property
    def label(self) -> str:
        if self.archetype is None:
            return f"its declared path {self.path!r}"
        if self.tie is not None:
            return f"{self.archetype.label} made a tie, {ties.BY_NAME[self.tie].text}"
        if self.crossing is not None:
            return (f"{self.archetype.label} made a crossing, "
                    f"{ties.CROSSING_BY_NAME[self.crossing].text}")
        if self.feature == LONG_FLOAT16:
            unpadded = " unpadded" if any(self.archetype.padding) and not any(
                self.problem.padding) else ""
            return (f"{self.archetype.label}{unpadded} in float16 with "
                    f"{self.problem.forward_terms()} terms per output")
        return self.archetype.label + (f"'s {self.feature} neighbour" if self.feature else "")

    @property
    def tie(self) -> str | None:
        """The tie (conv_harness/ties.py) this visit's archetype was made into, if any."""
        return self.feature[len(TIE):] if self.feature and self.feature.startswith(TIE) else None

    @property
    def crossing(self) -> str | None:
        """The crossing (conv_harness/ties.py) this visit's archetype was made into, if any."""
        return (self.feature[len(CROSSING):]
                if self.feature and self.feature.startswith(CROSSING) else None)

    def case(self) -> ConvCase:
        """The visit's case: seeded noise in every array, C-contiguous (scaled for a
        long float16 sum)."""
        case = noise_case(self.problem)
        if self.feature != LONG_FLOAT16:
            return case
        return dataclasses.replace(case, **{
            name: None if a is None else a * np.float16(LONG_FLOAT16_SCALE)
            for name, a in case.arrays().items()})


def _step(feature: str, value: int) -> int:
    """A one-step neighbour's value of an axis of ``feature``."""
    if feature == "kernel":
        return value + 1 if value == 1 else value - 1
    if feature == "padding":
        return value + 1 if value == 0 else value - 1
    return 2 if value == 1 else 1  # stride, dilation


def _geometry(arch: Archetype, feature: str | None) -> dict:
    geometry = {f: arch.value(f) for f in archetypes.FEATURES}
    if feature in ("kernel", "stride", "padding", "dilation"):
        geometry[feature] = tuple(_step(feature, v) for v in geometry[feature])
    elif feature == "groups":
        geometry["groups"] = "depthwise" if arch.groups == "dense" else "dense"
    elif feature == "unpadded":
        geometry["padding"] = (0,) * len(geometry["padding"])
    return geometry


def _sizes(op: str, g: dict, odd: bool) -> tuple[tuple[int, ...], int] | None:
    """The input size per axis for ``OUTPUTS`` outputs (the fewest valid even count at
    or above it, one more where ``odd``), and that count; None where none is valid."""
    transposed = OPS[op].transposed
    for outputs in range(OUTPUTS, OUTPUTS + 64, 2):
        count = outputs + 1 if odd else outputs
        sizes = []
        for k, s, p, d in zip(g["kernel"], g["stride"], g["padding"], g["dilation"]):
            if transposed:  # its input is what a convolution's output would be
                out = (count - 1) * s - 2 * p + d * (k - 1) + 1
                sizes.append(count if out >= 1 else 0)
            else:
                sizes.append((count - 1) * s + d * (k - 1) + 1 - 2 * p)
        if min(sizes) >= 1:
            return tuple(sizes), count
    return None


def _problem(arch: Archetype, feature: str | None, caps: Capabilities) -> ConvProblem | None:
    op = arch.op
    g = _geometry(arch, feature)
    sized = _sizes(op, g, odd=feature == "outputs")
    if sized is None:
        return None
    channels, groups = {"dense": (2, 1), "depthwise": (2, 2), "grouped": (4, 2)}[g["groups"]]
    in_channels = channels
    if feature == "channels":
        if g["groups"] == "depthwise":  # one channel per group: no block to leave a tail
            return None
        # the input's channels only: the reduction's blocks; the output keeps its own,
        # so that a 1x1 kernel's visit makes no tie of out channels and K (17 = 17)
        in_channels = CHANNELS_NEIGHBOUR * groups
    flat = caps.for_op(op)
    dtype = "float32" if "float32" in flat.dtypes else (flat.dtypes or ("float64",))[0]
    try:
        problem = ConvProblem(op=op, batch=2, in_channels=in_channels, out_channels=channels,
                              input_size=sized[0], kernel_size=g["kernel"], stride=g["stride"],
                              padding=g["padding"], dilation=g["dilation"], groups=groups,
                              bias=True, dtype=dtype,
                              output_padding=(0,) * len(g["kernel"])
                              if OPS[op].transposed else ())
    except ValueError:
        return None
    return None if caps.excludes(ConvCase.bare(problem)) else problem


def visits(op: str, caps: Capabilities) -> tuple[Visit, ...]:
    """The sweep of ``op`` under ``caps``: each archetype, then each one's neighbours,
    in the catalogue's order; a problem visited already (an archetype that is another's
    neighbour: wav2vec's k2 s2 is k3 s2's kernel neighbour) is not visited again, nor
    one the capabilities rule out or that has no valid sizes."""
    out: dict[ConvProblem, Visit] = {}
    for feature in (None,) + NEIGHBOUR_FEATURES:
        for arch in archetypes.for_op(op):
            problem = _problem(arch, feature, caps)
            if problem is not None and problem not in out:
                out[problem] = Visit(arch, feature, problem)
    return tuple(sorted(out.values(), key=lambda v: _ORDER[v.archetype, v.feature]))


def tie_visits(op: str, caps: Capabilities) -> tuple[Visit, ...]:
    """Each archetype of ``op`` made into each tie between sizes of different arrays
    (conv_harness/ties.py: M = K, N = K, M = N, positions = K), by the first of the tie's
    moves that gives a problem the capabilities take: the branch code takes where it
    compares two sizes and finds them equal, at a real network's geometry. Random
    draws make a given tie in about 3% of conv2d problems, and a tie at a
    realistic size (16 or more) in under 1%."""
    out: dict[ConvProblem, Visit] = {}
    for arch in archetypes.for_op(op):
        base = _problem(arch, None, caps)
        for tie in ties.TIES if base is not None else ():
            made = [q for q in ties.made(base, tie.name)
                    if q not in out and not caps.excludes(ConvCase.bare(q))]
            if made:
                out[made[0]] = Visit(arch, TIE + tie.name, made[0])
    return tuple(out.values())


def batch_visits(op: str, caps: Capabilities) -> tuple[Visit, ...]:
    """Archetypes of ``op`` with `BATCH_NEIGHBOUR` images (their batch neighbour):
    optimised kernels take images in blocks, and a path that mishandles the last,
    partial block fails only with more images than a block; random draws have more
    than four images in few problems. A batch block does not depend on the
    geometry, and a visit of nine images costs four of two: one visit per kind of
    geometry (padded or not, strided or not), the first archetype of each, so that
    where a known bug's region holds one kind (every padded problem), the sweep
    after it still has a visit outside that region."""
    visits: dict[tuple[bool, bool], Visit] = {}
    for arch in archetypes.for_op(op):
        base = _problem(arch, None, caps)
        if base is None:
            continue
        kind = (any(base.padding), any(s > 1 for s in base.stride))
        q = dataclasses.replace(base, batch=BATCH_NEIGHBOUR)
        if kind not in visits and not caps.excludes(ConvCase.bare(q)):
            visits[kind] = Visit(arch, "batch", q)
    return tuple(visits.values())


def long_float16_visits(op: str, caps: Capabilities) -> tuple[Visit, ...]:
    """The first dense archetype of ``op`` in float16 with enough input channels that
    each output sums at least `LONG_FLOAT16_TERMS` products (96 channels of a 7x7
    stem, 512 of a 3x3), and the same unpadded where it is padded: real float16
    layers reduce over thousands of terms, and a
    kernel may take a path of its own for long sums, while the random draws keep
    float16 within `FLOAT16_MAX_TERMS` (conv_harness/problem.py). Its bound is that
    of exact products summed in float32 and rounded once, as such kernels compute
    (conv_harness/checks/tolerance.py). None where ``op`` does not take float16, is
    transposed (its forward's sums are not its weight's taps times its channels),
    or declares float16 sums in float16 (``"float16_accumulation": "float16"``)."""
    flat = caps.for_op(op)
    if (OPS[op].transposed or "float16" not in flat.dtypes
            or flat.float16_accumulation != "float32"):
        return ()
    for arch in archetypes.for_op(op):
        base = _problem(arch, None, caps)
        if base is None or arch.groups != "dense":
            continue
        # a multiple of 16, as real layers' channels are: no partial block of them
        channels = -(-LONG_FLOAT16_TERMS // (16 * math.prod(base.kernel_size))) * 16
        q = dataclasses.replace(base, in_channels=channels, dtype="float16")
        if caps.excludes(ConvCase.bare(q)):
            continue
        # and unpadded: a bug of every padded problem beside it would hide the one visit
        bare = _unpadded(q)
        kept = () if bare is None or caps.excludes(ConvCase.bare(bare)) else (bare,)
        return tuple(Visit(arch, LONG_FLOAT16, p) for p in (q, *kept))
    return ()


def _unpadded(p: ConvProblem) -> ConvProblem | None:
    """``p`` with no padding, each axis's input at least its dilated kernel's span; None
    where ``p`` has none."""
    if not any(p.padding):
        return None
    spans = ties.dilated_kernel(p)
    return dataclasses.replace(p, padding=(0,) * len(spans), input_size=tuple(
        max(n, span) for n, span in zip(p.input_size, spans)))


def crossed(p: ConvProblem) -> ConvProblem | None:
    """``p`` with its dilated kernel longer than the input on one axis and shorter on
    another (the crossing W~X): on the first axis whose padding lets the input be one
    position shorter than the kernel's span, the input that long; where no other axis
    is then longer than the span, the next one a position longer than it. None where
    no axis can be crossed (a 1x1 kernel; no padding on any axis with a longer kernel)
    or the problem is transposed (its input is the small side of a convolution)."""
    if p.spec.transposed:
        return None
    spans = ties.dilated_kernel(p)
    for axis, (span, pad) in enumerate(zip(spans, p.padding)):
        if span < 2 or pad < 1:
            continue
        sizes = list(p.input_size)
        sizes[axis] = span - 1
        others = [a for a in range(len(sizes)) if a != axis]
        if others and all(sizes[a] <= spans[a] for a in others):
            sizes[others[0]] = spans[others[0]] + 1
        try:
            q = dataclasses.replace(p, input_size=tuple(sizes))
        except ValueError:
            continue
        if ties.CROSSING_BY_NAME["W~X"].holds(q):
            return q
    return None


def crossing_visits(op: str, caps: Capabilities) -> tuple[Visit, ...]:
    """Each archetype of ``op`` crossed (`crossed`) at its own kernel, stride, padding
    and dilation: a 7x7 stem's kernel longer than a 6-long input on one axis, a
    dilation-6 kernel's 13 taps over 12 positions. Random draws cross in about a fifth
    of conv2d problems, nearly all with kernels of two or three taps; code that takes
    a path of its own for long kernels (an FFT, a kernel-as-input GEMM) meets the
    crossing there only here."""
    out: dict[ConvProblem, Visit] = {}
    for arch in archetypes.for_op(op):
        base = _problem(arch, None, caps)
        q = crossed(base) if base is not None else None
        if q is not None and q not in out and not caps.excludes(ConvCase.bare(q)):
            out[q] = Visit(arch, CROSSING + "W~X", q)
    return tuple(out.values())


def within(problem: ConvProblem, bounds: Bounds) -> bool:
    """Whether ``problem``'s kernel, outputs, batch and channels per group are within
    ``bounds`` (their large tier's where they have one): the sizes ``--conv-budget``
    chose hold for a sweep too (a tie visit has 98 out channels)."""
    top = bounds.large if bounds.large is not None else bounds
    outputs = problem.input_size if problem.spec.transposed else problem.output_size
    channels = max(problem.in_channels, problem.out_channels) // problem.groups
    return (max(problem.kernel_size) <= top.kernel and max(outputs) <= top.outputs
            and problem.batch <= top.batch and channels <= top.channels_per_group)


def path_visits(op: str, caps: Capabilities,
                paths: dict[str, tuple[ConvProblem, ...]]) -> tuple[Visit, ...]:
    """The problems of ``op`` an implementation declares for each of its dispatch
    ``paths``, as visits (those the capabilities rule out are not made)."""
    out = []
    for path, problems in paths.items():
        for problem in problems:
            if problem.op == op and not caps.excludes(ConvCase.bare(problem)):
                out.append(Visit(None, None, problem, path))
    return tuple(out)


_ORDER = {(arch, feature): i for i, (arch, feature) in enumerate(
    (a, f) for a in archetypes.CATALOGUE for f in (None,) + NEIGHBOUR_FEATURES)}
