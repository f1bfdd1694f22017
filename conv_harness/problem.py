"""What a convolution problem is: its operation, geometry, dtype, and values.

`ConvProblem` holds the parameters (the contract's ``params``); `ConvCase` adds
the arrays and the memory layout each array is handed over in. Both are plain
data: the strategies build them, the oracle and the checks read them, the
failure files serialise them.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

# float64 first: the simplest dtype to read is the one shrinking heads for.
DTYPES: tuple[str, ...] = ("float64", "float32", "float16")
#: with bfloat16 (ml_dtypes.bfloat16, which importing ml_dtypes names "bfloat16" for
#: NumPy): drawn only for an implementation that declares it in CAPABILITIES
ALL_DTYPES: tuple[str, ...] = DTYPES + ("bfloat16",)

#: float16's worst-case bound gamma(K) reaches 1 at K = 1024 (u = 2**-11): from
#: there on it would allow any error as large as the result, so no check could
#: fail. A probabilistic bound (sqrt(K) u) would be sharper but is not sound for
#: the errors real implementations make: summing 4096 ones in float16 stagnates
#: at 2048. So a float16 result of at most 512 terms (gamma(512) = 1/3) is judged
#: as summed in any type, float16 included, and only such problems are drawn. A
#: longer one (the catalogue sweep's long float16 visit, a given problem) is
#: judged as real float16 kernels compute it (cuDNN, oneDNN, torch's CPU
#: kernels): exact products summed in float32 and rounded once; an
#: implementation that declares ``"float16_accumulation": "float16"`` gets no such
#: visit, and float16's own gamma(K) on a given one.
FLOAT16_MAX_TERMS = 512


def bfloat16() -> np.dtype:
    """ml_dtypes' bfloat16, imported (and so named "bfloat16" for NumPy) on first use:
    the import costs most of a second, which a run without bfloat16 need not pay."""
    import ml_dtypes

    return np.dtype(ml_dtypes.bfloat16)
#: every memory layout an input may be handed over in (`make_layout`)
LAYOUTS: tuple[str, ...] = ("C", "F", "strided", "reversed", "channels_last",
                            "channels_last_slice")
#: the layouts drawn per array library (C first: it shrinks there). torch tensors
#: have no negative strides; its own formats are channels-last and a channel slice
#: of a channels-last tensor. "mixed": functions of one check on different libraries.
LAYOUTS_OF: dict[str, tuple[str, ...]] = {
    "numpy": ("C", "F", "strided", "reversed"),
    "torch": ("C", "channels_last", "channels_last_slice", "F", "strided"),
    "mixed": ("C", "F", "strided"),
}
#: the layouts that only mean something for an array with a channel axis (3-d or more)
CHANNEL_LAYOUTS: tuple[str, ...] = ("channels_last", "channels_last_slice")
ARRAY_NAMES: tuple[str, ...] = ("x", "weight", "bias", "grad_output")


@dataclass(frozen=True)
class OpSpec:
    """One operation of the contract, e.g. ``conv2d`` or ``conv_transpose3d``."""

    name: str
    spatial_dims: int
    transposed: bool

    @property
    def backward_name(self) -> str:
        return f"{self.name}_backward"


OPS: dict[str, OpSpec] = {
    spec.name: spec
    for n in (1, 2, 3)
    for spec in (OpSpec(f"conv{n}d", n, False), OpSpec(f"conv_transpose{n}d", n, True))
}


_FUNCTION = re.compile(r"(conv(?:_transpose)?)([123])d(_backward)?")


def in_fewer_dimensions(function: str | None, than: str | None) -> bool:
    """Whether contract function ``function`` is ``than`` in fewer spatial dimensions:
    conv1d of conv3d, conv_transpose2d_backward of conv_transpose3d_backward."""
    mine, theirs = (_FUNCTION.fullmatch(name or "") for name in (function, than))
    return (mine is not None and theirs is not None
            and (mine[1], mine[3]) == (theirs[1], theirs[3]) and mine[2] < theirs[2])


def conv_output_length(size: int, kernel: int, stride: int, padding: int, dilation: int) -> int:
    """Output length along one axis of a (non-transposed) convolution."""
    return (size + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1


def transposed_output_length(
    size: int, kernel: int, stride: int, padding: int, dilation: int, output_padding: int
) -> int:
    """Output length along one axis of a transposed convolution."""
    return (size - 1) * stride - 2 * padding + dilation * (kernel - 1) + output_padding + 1


#: the fields of `ConvProblem` that hold one size per spatial axis
PER_AXIS_FIELDS = ("input_size", "kernel_size", "stride", "padding", "dilation",
                   "output_padding")


@dataclass(frozen=True)
class ConvProblem:
    """The parameters of one convolution problem (no values)."""

    op: str
    batch: int
    in_channels: int
    out_channels: int
    input_size: tuple[int, ...]
    kernel_size: tuple[int, ...]
    stride: tuple[int, ...]
    padding: tuple[int, ...]
    dilation: tuple[int, ...]
    groups: int
    bias: bool
    dtype: str
    output_padding: tuple[int, ...] = ()
    #: the archetype (strategies/archetypes.py) the draw of this problem started from,
    #: None for the ordinary draw or a problem not drawn: where a report says a failure
    #: was found; not a parameter (no part of equality, `params` or the descriptor)
    drawn_from: Any = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.dtype == "bfloat16":
            bfloat16()  # its arrays are made by dtype name
        if not self.output_padding:
            object.__setattr__(self, "output_padding", (0,) * len(self.input_size))

    @property
    def spec(self) -> OpSpec:
        return OPS[self.op]

    @property
    def x_shape(self) -> tuple[int, ...]:
        return (self.batch, self.in_channels, *self.input_size)

    @property
    def weight_shape(self) -> tuple[int, ...]:
        if self.spec.transposed:
            return (self.in_channels, self.out_channels // self.groups, *self.kernel_size)
        return (self.out_channels, self.in_channels // self.groups, *self.kernel_size)

    @property
    def bias_shape(self) -> tuple[int, ...] | None:
        return (self.out_channels,) if self.bias else None

    @functools.cached_property
    def output_size(self) -> tuple[int, ...]:
        # cached (in the instance's __dict__, which a frozen dataclass's fields are
        # not in): the checks and their bounds ask for it hundreds of times a case
        axes = zip(self.input_size, self.kernel_size, self.stride, self.padding,
                   self.dilation, self.output_padding)
        if self.spec.transposed:
            return tuple(transposed_output_length(*a) for a in axes)
        return tuple(conv_output_length(*a[:5]) for a in axes)

    @property
    def output_shape(self) -> tuple[int, ...]:
        return (self.batch, self.out_channels, *self.output_size)

    def shapes(self) -> dict[str, tuple[int, ...] | None]:
        return {"x": self.x_shape, "weight": self.weight_shape,
                "bias": self.bias_shape, "grad_output": self.output_shape}

    def kwargs(self) -> dict[str, Any]:
        """Keyword arguments of the contract's call for this problem."""
        kw: dict[str, Any] = {"stride": self.stride, "padding": self.padding}
        if self.spec.transposed:
            kw["output_padding"] = self.output_padding
        kw.update(dilation=self.dilation, groups=self.groups)
        return kw

    def params(self) -> dict[str, Any]:
        """The contract's ``params`` object (JSON-ready)."""
        out = {name: getattr(self, name) for name in PARAMETERS}
        if not self.spec.transposed:
            del out["output_padding"]
        return {k: list(v) if isinstance(v, tuple) else v for k, v in out.items()}

    @classmethod
    def from_params(cls, op: str, params: dict[str, Any]) -> "ConvProblem":
        unknown = set(params) - set(PARAMETERS)
        if unknown:
            raise ValueError(f"unknown parameter(s) {sorted(unknown)}")
        values = {k: tuple(v) if isinstance(v, list) else v for k, v in params.items()}
        return cls(op=op, **values)

    def size_rank(self) -> tuple[int, ...]:
        """The harness's one rule for "the smaller case" (a sighting's, an entry's): the
        arrays' elements (batch x channels x input positions) first, the padding's
        positions counted, then without them, then, on a tie, how far the kernel,
        dilation, padding and stride are from trivial (a dilation-2 kernel of two taps
        is not simpler than a plain one). Smaller sorts first. An input of 2x2 padded
        by 2 is 6x6 positions the kernel sweeps (16 outputs), not fewer than an
        unpadded 3x3 (one output)."""
        elements = self.batch * self.in_channels * self.out_channels
        padded = math.prod(n + 2 * p for n, p in zip(self.input_size, self.padding))
        return (elements * padded, elements * math.prod(self.input_size),
                sum(self.kernel_size), sum(self.dilation), sum(self.padding),
                sum(self.stride))

    def plainest(self) -> "ConvProblem":
        """The plainest problem of this op, dtype and bias: one of everything, a single
        input position per axis, kernel 1, stride 1, no padding, no dilation."""
        ones, zeros = (1,) * len(self.input_size), (0,) * len(self.input_size)
        return dataclasses.replace(
            self, batch=1, in_channels=1, out_channels=1, input_size=ones, kernel_size=ones,
            stride=ones, padding=zeros, dilation=ones, groups=1,
            output_padding=zeros if self.output_padding else (), drawn_from=None)

    def describe(self) -> str:
        """The parameters on one line, as a person would write them."""
        def axes(t: tuple[int, ...]) -> str:
            return "x".join(map(str, t))
        parts = [
            self.op, f"batch={self.batch}", f"in={self.in_channels}", f"out={self.out_channels}",
            f"input={axes(self.input_size)}", f"kernel={axes(self.kernel_size)}",
            f"stride={axes(self.stride)}", f"padding={axes(self.padding)}",
            f"dilation={axes(self.dilation)}",
        ]
        if self.spec.transposed:
            parts.append(f"output_padding={axes(self.output_padding)}")
        parts += [f"groups={self.groups}", f"bias={self.bias}", self.dtype]
        return " ".join(parts)

    # Reduction lengths: how many products each result element sums (an upper
    # bound); the rounding-error bound of every check grows with it.
    def forward_terms(self) -> int:
        return (self.in_channels // self.groups) * math.prod(self.kernel_size)

    def grad_input_terms(self) -> int:
        return (self.out_channels // self.groups) * math.prod(self.kernel_size)

    def grad_weight_terms(self) -> int:
        if self.spec.transposed:
            return self.batch * math.prod(self.input_size)
        return self.batch * math.prod(self.output_size)

    def grad_bias_terms(self) -> int:
        return self.batch * math.prod(self.output_size)


#: the names of a problem's parameters (the contract's ``params``), in order
PARAMETERS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(ConvProblem)
                                    if f.name not in ("op", "drawn_from"))


def finfo(dtype: str | np.dtype) -> np.finfo:
    """The machine limits of ``dtype``, bfloat16's included (NumPy's finfo has none)."""
    return _finfo(str(dtype))


@functools.lru_cache(maxsize=None)
def _finfo(dtype: str) -> np.finfo:
    if dtype == "bfloat16":
        import ml_dtypes

        return ml_dtypes.finfo(bfloat16())
    return np.finfo(np.dtype(dtype))


def is_float(dtype: np.dtype) -> bool:
    """Whether ``dtype`` is a floating-point type, bfloat16 (NumPy kind "V") included."""
    return dtype.kind == "f" or dtype.name == "bfloat16"


def make_layout(values: np.ndarray, layout: str) -> np.ndarray:
    """A fresh array equal to ``values``, laid out in memory as ``layout``.

    ``C``: C-contiguous; ``F``: Fortran order; ``strided``: every other
    element of a larger buffer on every axis; ``reversed``: a view with a
    negative stride on the last axis; ``channels_last``: axis 1 (channels)
    varies fastest in memory (torch's ``channels_last`` for 4-d arrays,
    ``channels_last_3d`` for 5-d); ``channels_last_slice``: channels 1..C of a
    channels-last array of C + 2 channels, whose other two are zero. An array
    of fewer than 3 axes has no channel axis: those two are C order for it.
    Each call returns new memory, so an implementation that writes into its
    inputs cannot reach anyone else's.
    """
    if layout == "C":
        return np.array(values, order="C", copy=True)
    if layout == "F":
        return np.array(values, order="F", copy=True)
    if layout == "strided":
        buffer = np.zeros(tuple(2 * n for n in values.shape), dtype=values.dtype)
        view = buffer[tuple(slice(None, None, 2) for _ in values.shape)]
        view[...] = values
        return view
    if layout == "reversed":
        flipped = np.ascontiguousarray(values[..., ::-1])
        return flipped[..., ::-1]
    if layout in CHANNEL_LAYOUTS:
        if values.ndim < 3:
            return np.array(values, order="C", copy=True)
        if layout == "channels_last":
            return np.moveaxis(np.ascontiguousarray(np.moveaxis(values, 1, -1)), -1, 1)
        shape = list(values.shape)
        shape[1] += 2
        buffer = np.zeros(tuple(shape[:1] + shape[2:] + shape[1:2]), dtype=values.dtype)
        view = np.moveaxis(buffer, -1, 1)[:, 1:values.shape[1] + 1]
        view[...] = values
        return view
    raise ValueError(f"unknown memory layout {layout!r}; expected one of {LAYOUTS}")


@dataclass
class ConvCase:
    """A problem with its values: what one call of an implementation gets.

    The arrays are C-contiguous and owned by the case; `fresh_inputs` gives
    the implementation its own copies in the drawn memory layouts.
    """

    problem: ConvProblem
    x: np.ndarray
    weight: np.ndarray
    bias: np.ndarray | None
    grad_output: np.ndarray
    layouts: dict[str, str] = field(default_factory=dict)

    @classmethod
    def bare(cls, problem: "ConvProblem", layouts: dict[str, str] | None = None) -> "ConvCase":
        """A case without values: for what reads only its problem and layouts (whether
        an implementation's capabilities rule it out)."""
        return cls(problem=problem, x=None, weight=None, bias=None,  # type: ignore[arg-type]
                   grad_output=None, layouts=dict(layouts or {}))  # type: ignore[arg-type]

    def arrays(self) -> dict[str, np.ndarray | None]:
        return {"x": self.x, "weight": self.weight, "bias": self.bias,
                "grad_output": self.grad_output}

    def fresh_inputs(self) -> dict[str, np.ndarray | None]:
        return {name: None if a is None else make_layout(a, self.layouts.get(name, "C"))
                for name, a in self.arrays().items()}

    def __repr__(self) -> str:
        layouts = {k: v for k, v in self.layouts.items() if v != "C"}
        lines = [f"ConvCase({self.problem.describe()}"
                 + (f", layouts={layouts}" if layouts else "")]
        with np.printoptions(threshold=200, linewidth=100):
            for name, array in self.arrays().items():
                if array is not None:
                    lines.append(f"  {name}={np.array2string(array, prefix='  ' + name + '=')}")
        return "\n".join(lines) + ")"

    def _repr_pretty_(self, printer, cycle) -> None:  # how Hypothesis prints it
        printer.text(repr(self))
