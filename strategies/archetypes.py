"""A catalogue of the layer geometries real networks use (issue 22): data only.

Optimised convolutions special-case the commonest layers (a Winograd path for
3x3 stride 1, a depthwise kernel, a 1x1 GEMM, a pixel-shuffle upsampling) and
their bugs live on those paths and in the conditions that choose them. The
strategies draw every parameter on its own, so such conjunctions were rare
(3x3 stride 1 groups 1: 0.43% of conv2d problems); a share of the problems is
now drawn from this catalogue instead, exact or changed in a feature or two
(strategies/problems.py), and the run summary counts which archetypes and
which of their one-step neighbours the cases reached (`classify`).

An archetype fixes the geometry only: kernel, stride, padding, dilation and
the groups pattern. Sizes, channel counts, batch, bias, dtype and memory
layouts are drawn as for any problem (the size tiers and their budget), so
every archetype also comes with odd sizes, channel tails, bias None, every
dtype and layout. To add one, append an `Archetype` to `CATALOGUE`.
"""

from __future__ import annotations

from dataclasses import dataclass

from conv_harness.problem import OPS, ConvProblem
from conv_harness.records import coverage

GROUPS_PATTERNS = ("dense", "depthwise", "grouped")
#: the features an archetype fixes, in the order a problem draws them
FEATURES = ("kernel", "stride", "padding", "dilation", "groups")


@dataclass(frozen=True)
class Archetype:
    """One layer geometry of a well-known network.

    ``groups``: ``dense`` (groups 1), ``depthwise`` (groups = channels, one
    filter per channel) or ``grouped`` (1 < groups < channels). ``dilation``
    defaults to 1 on every axis. ``name`` is what the summary prints.
    """

    family: str
    name: str
    op: str
    kernel: tuple[int, ...]
    stride: tuple[int, ...]
    padding: tuple[int, ...]
    dilation: tuple[int, ...] = ()
    groups: str = "dense"

    def __post_init__(self) -> None:
        n = OPS[self.op].spatial_dims
        if not self.dilation:
            object.__setattr__(self, "dilation", (1,) * n)
        if any(len(t) != n for t in (self.kernel, self.stride, self.padding, self.dilation)):
            raise ValueError(f"archetype {self.name}: every geometry needs {n} axes")
        if self.groups not in GROUPS_PATTERNS:
            raise ValueError(f"archetype {self.name}: groups {self.groups!r} is not one of "
                             f"{GROUPS_PATTERNS}")

    @property
    def label(self) -> str:
        return f"{self.family} {self.name}"

    @property
    def square(self) -> bool:
        return all(len(set(t)) == 1 for t in (self.kernel, self.stride, self.padding,
                                              self.dilation))

    def value(self, feature: str):
        return {"kernel": self.kernel, "stride": self.stride, "padding": self.padding,
                "dilation": self.dilation, "groups": self.groups}[feature]


def _sq(op: str, name: str, family: str, k: int, s: int = 1, p: int = 0, d: int = 1,
        groups: str = "dense") -> Archetype:
    """A square archetype: the same kernel, stride, padding and dilation on every axis."""
    n = OPS[op].spatial_dims
    return Archetype(family, name, op, (k,) * n, (s,) * n, (p,) * n, (d,) * n, groups)


#: The catalogue. ResNet's 1x1 stride-1 bottleneck is also MobileNet's and
#: EfficientNet's pointwise (the same geometry, listed once, under ResNet: a
#: problem draws its family first, and MobileNet's share then goes to its
#: depthwise layers); EfficientNet's depthwise 3x3 and 5x5 are MobileNet's.
CATALOGUE: tuple[Archetype, ...] = (
    _sq("conv2d", "7x7 s2 p3 stem", "resnet", 7, 2, 3),
    _sq("conv2d", "3x3 s1 p1", "resnet", 3, 1, 1),
    _sq("conv2d", "3x3 s2 p1", "resnet", 3, 2, 1),
    _sq("conv2d", "1x1 s2 projection", "resnet", 1, 2, 0),
    _sq("conv2d", "1x1 s1 pointwise", "resnet", 1, 1, 0),
    _sq("conv2d", "depthwise 3x3 s1 p1", "mobilenet", 3, 1, 1, groups="depthwise"),
    _sq("conv2d", "depthwise 3x3 s2 p1", "mobilenet", 3, 2, 1, groups="depthwise"),
    _sq("conv2d", "depthwise 5x5 s1 p2", "mobilenet", 5, 1, 2, groups="depthwise"),
    _sq("conv2d", "depthwise 5x5 s2 p2", "mobilenet", 5, 2, 2, groups="depthwise"),
    _sq("conv2d", "grouped 3x3 s1 p1", "resnext", 3, 1, 1, groups="grouped"),
    _sq("conv2d", "depthwise 7x7 p3", "convnext", 7, 1, 3, groups="depthwise"),
    # ConvNeXt's (and Swin's patch-merging) downsampling between stages: 2x2 stride 2,
    # no padding; its padding neighbour (kernel 2, stride 2, padding 1) is the
    # geometry JAX's input gradient aborts on (tests/harness/test_strategies.py)
    _sq("conv2d", "2x2 s2 downsample", "convnext", 2, 2, 0),
    _sq("conv2d", "3x3 d2 p2", "deeplab", 3, 1, 2, 2),
    _sq("conv2d", "3x3 d4 p4", "deeplab", 3, 1, 4, 4),
    _sq("conv2d", "3x3 d6 p6", "deeplab", 3, 1, 6, 6),
    Archetype("inception", "1x7 p0x3", "conv2d", (1, 7), (1, 1), (0, 3)),
    Archetype("inception", "7x1 p3x0", "conv2d", (7, 1), (1, 1), (3, 0)),
    _sq("conv_transpose2d", "2x2 s2 up", "unet", 2, 2, 0),
    _sq("conv_transpose2d", "4x4 s2 p1 up", "dcgan", 4, 2, 1),
    # wav2vec 2.0's feature encoder: k10 s5, then k3 s2 and k2 s2, no padding
    _sq("conv1d", "k10 s5", "wav2vec", 10, 5, 0),
    _sq("conv1d", "k3 s2", "wav2vec", 3, 2, 0),
    _sq("conv1d", "k2 s2", "wav2vec", 2, 2, 0),
    # WaveNet's causal 3-tap stack: torch's symmetric padding (k - 1) * d, the
    # outputs past the end trimmed by the caller
    _sq("conv1d", "causal 3-tap d2 p4", "wavenet", 3, 1, 4, 2),
    _sq("conv1d", "causal 3-tap d4 p8", "wavenet", 3, 1, 8, 4),
    _sq("conv3d", "3x3x3 p1", "c3d", 3, 1, 1),
    Archetype("r2plus1d", "1x3x3 p0x1x1", "conv3d", (1, 3, 3), (1, 1, 1), (0, 1, 1)),
    Archetype("r2plus1d", "3x1x1 p1x0x0", "conv3d", (3, 1, 1), (1, 1, 1), (1, 0, 0)),
)


def for_op(op: str) -> tuple[Archetype, ...]:
    return tuple(a for a in CATALOGUE if a.op == op)


def groups_pattern(problem: ConvProblem) -> str:
    """``dense``, ``depthwise`` or ``grouped`` (one channel per group is depthwise)."""
    if problem.groups == 1:
        return "dense"
    return "depthwise" if problem.groups == problem.in_channels else "grouped"


def differences(archetype: Archetype, problem: ConvProblem) -> list[str]:
    """The features of `FEATURES` in which ``problem`` differs from ``archetype``."""
    got = {"kernel": problem.kernel_size, "stride": problem.stride,
           "padding": problem.padding, "dilation": problem.dilation,
           "groups": groups_pattern(problem)}
    out = [f for f in FEATURES if got[f] != archetype.value(f)]
    if any(problem.output_padding) and "padding" not in out:  # archetypes have none
        out.insert(FEATURES.index("padding"), "padding")
    return out


def classify(problem: ConvProblem) -> tuple[Archetype, str | None] | None:
    """The archetype ``problem`` is (feature None) or is a one-step neighbour of
    (the one feature that differs); None if neither. An exact match wins over
    a neighbour; among neighbours the first in the catalogue."""
    near = None
    for archetype in for_op(problem.op):
        diff = differences(archetype, problem)
        if not diff:
            return archetype, None
        if len(diff) == 1 and near is None:
            near = (archetype, diff[0])
    return near


def origin(problem: ConvProblem, drawn_from: Archetype | None = None) -> str | None:
    """Where ``problem`` comes from in the catalogue, for a report: the archetype it
    was ``drawn_from`` (``deeplab 3x3 d4 p4``; ``..., changed in padding, dilation``
    where it differs), else the one it is or is a one-step neighbour of (``deeplab
    3x3 d2 p2's padding neighbour``, see `classify`); None if neither."""
    if drawn_from is not None:
        diff = differences(drawn_from, problem)
        if len(diff) != 1:
            return drawn_from.label + (f", changed in {', '.join(diff)}" if diff else "")
        found: tuple[Archetype, str | None] | None = (drawn_from, diff[0])
    else:
        found = classify(problem)
    if found is None:
        return None
    archetype, feature = found
    return archetype.label + (f"'s {feature} neighbour" if feature else "")


def coverage_label(problem: ConvProblem) -> str | None:
    """The coverage tally's key for ``problem`` (see conv_harness/records/coverage.py)."""
    found = classify(problem)
    if found is None:
        return None
    return coverage.archetype_label(found[0].label, found[1])
