"""Argument checking and padding shared by the NumPy reference convolutions.

Used by :mod:`conv_impl.direct` and :mod:`conv_impl.im2col`. Everything here
is pure: no function writes into an array it was given.

Conventions (those of ``torch.nn.functional.conv{1,2,3}d``):

- ``x`` is ``(N, C_in, *spatial)``, ``weight`` is
  ``(C_out, C_in // groups, *kernel)``, ``bias`` is ``(C_out,)`` or None;
- ``stride``, ``padding`` and ``dilation`` hold one int per spatial axis
  (a single int is accepted as shorthand for the same value on every axis);
- padding is symmetric and zero-filled;
- along a spatial axis, with ``P = size + 2 * padding`` the padded size and
  ``E = dilation * (kernel - 1) + 1`` the kernel's extent, the output has
  ``(P - E) // stride + 1`` positions, and output position ``o`` meets
  kernel element ``k`` at padded input position ``o * stride + k * dilation``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

IntOrTuple = int | Sequence[int]
Gradients = tuple[np.ndarray, np.ndarray, np.ndarray | None]

_FLOAT_DTYPES = (np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64))


@dataclass(frozen=True)
class Geometry:
    """A validated convolution problem: everything but the array contents."""

    nd: int                      # number of spatial axes, 1 to 3
    batch: int                   # N
    in_channels: int             # C_in
    out_channels: int            # C_out
    groups: int
    input_size: tuple[int, ...]  # spatial sizes of x, before padding
    kernel_size: tuple[int, ...]
    stride: tuple[int, ...]
    padding: tuple[int, ...]
    dilation: tuple[int, ...]
    dtype: np.dtype              # dtype of the inputs and of the results
    compute_dtype: np.dtype      # dtype the arithmetic is done in

    @property
    def padded_size(self) -> tuple[int, ...]:
        return tuple(n + 2 * p for n, p in zip(self.input_size, self.padding))

    @property
    def output_size(self) -> tuple[int, ...]:
        return tuple(
            (n - (d * (k - 1) + 1)) // s + 1
            for n, k, s, d in zip(self.padded_size, self.kernel_size, self.stride, self.dilation)
        )

    @property
    def output_shape(self) -> tuple[int, ...]:
        return (self.batch, self.out_channels, *self.output_size)

    @property
    def in_per_group(self) -> int:
        return self.in_channels // self.groups

    @property
    def out_per_group(self) -> int:
        return self.out_channels // self.groups


def compute_dtype_for(dtype: np.dtype) -> np.dtype:
    """float16 is computed in float32 (and cast back); float32/64 in themselves."""
    return np.dtype(np.float32) if dtype == np.float16 else dtype


def _per_axis(name: str, value: IntOrTuple, nd: int, minimum: int) -> tuple[int, ...]:
    """``value`` as a tuple of ``nd`` ints, each at least ``minimum``."""
    values = (value,) * nd if isinstance(value, (int, np.integer)) else tuple(value)
    if len(values) != nd:
        raise ValueError(f"{name} must have {nd} value(s), one per spatial axis, got {value!r}")
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise ValueError(f"{name} must hold ints, got {value!r}")
        if v < minimum:
            raise ValueError(f"{name} must be >= {minimum} on every axis, got {value!r}")
    return tuple(int(v) for v in values)


def check_problem(
    x: np.ndarray,
    weight: np.ndarray,
    bias: np.ndarray | None,
    *,
    stride: IntOrTuple,
    padding: IntOrTuple,
    dilation: IntOrTuple,
    groups: int,
    nd: int,
) -> Geometry:
    """Validate an ``nd``-dimensional convolution problem; ValueError if invalid."""
    if x.ndim != nd + 2:
        raise ValueError(f"conv{nd}d: x must be (N, C_in, {nd} spatial axes), got shape {x.shape}")
    if weight.ndim != nd + 2:
        raise ValueError(
            f"conv{nd}d: weight must be (C_out, C_in // groups, {nd} kernel axes), "
            f"got shape {weight.shape}"
        )
    dtype = x.dtype
    if dtype not in _FLOAT_DTYPES:
        raise ValueError(f"x must be float16, float32 or float64, got {dtype}")
    for name, arr in (("weight", weight), ("bias", bias)):
        if arr is not None and arr.dtype != dtype:
            raise ValueError(f"{name} has dtype {arr.dtype}, but x has dtype {dtype}")

    if isinstance(groups, bool) or not isinstance(groups, (int, np.integer)) or groups < 1:
        raise ValueError(f"groups must be an int >= 1, got {groups!r}")
    groups = int(groups)
    batch, in_channels = x.shape[:2]
    out_channels = weight.shape[0]
    if in_channels % groups or out_channels % groups:
        raise ValueError(
            f"groups={groups} must divide both in_channels={in_channels} "
            f"and out_channels={out_channels}"
        )
    if weight.shape[1] != in_channels // groups:
        raise ValueError(
            f"weight has {weight.shape[1]} input channels per group, expected "
            f"in_channels // groups = {in_channels} // {groups} = {in_channels // groups}"
        )
    if bias is not None and bias.shape != (out_channels,):
        raise ValueError(f"bias must have shape ({out_channels},), got {bias.shape}")

    geometry = Geometry(
        nd=nd,
        batch=batch,
        in_channels=in_channels,
        out_channels=out_channels,
        groups=groups,
        input_size=tuple(x.shape[2:]),
        kernel_size=tuple(weight.shape[2:]),
        stride=_per_axis("stride", stride, nd, 1),
        padding=_per_axis("padding", padding, nd, 0),
        dilation=_per_axis("dilation", dilation, nd, 1),
        dtype=dtype,
        compute_dtype=compute_dtype_for(dtype),
    )
    for axis, (k, d, n) in enumerate(
        zip(geometry.kernel_size, geometry.dilation, geometry.padded_size)
    ):
        if k < 1:
            raise ValueError(f"kernel size must be >= 1 on every axis, got {geometry.kernel_size}")
        if d * (k - 1) + 1 > n:
            raise ValueError(
                f"kernel larger than the padded input on spatial axis {axis}: kernel {k} "
                f"with dilation {d} spans {d * (k - 1) + 1}, padded input size is {n}"
            )
    return geometry


def check_grad_output(grad_output: np.ndarray, geometry: Geometry) -> None:
    """ValueError unless ``grad_output`` has the shape and dtype of the forward result."""
    if grad_output.shape != geometry.output_shape:
        raise ValueError(
            f"grad_output must have the output's shape {geometry.output_shape}, "
            f"got {grad_output.shape}"
        )
    if grad_output.dtype != geometry.dtype:
        raise ValueError(f"grad_output has dtype {grad_output.dtype}, but x has dtype {geometry.dtype}")


def pad_with_zeros(x: np.ndarray, geometry: Geometry) -> np.ndarray:
    """A new C-contiguous array: ``x`` in the compute dtype, zero-padded on each spatial axis."""
    padded = np.zeros((geometry.batch, geometry.in_channels, *geometry.padded_size),
                      dtype=geometry.compute_dtype)
    padded[interior(geometry)] = x
    return padded


def interior(geometry: Geometry) -> tuple[slice, ...]:
    """Index of the unpadded input inside a padded ``(N, C_in, *padded)`` array."""
    return (slice(None), slice(None),
            *(slice(p, p + n) for p, n in zip(geometry.padding, geometry.input_size)))


def window(offset: tuple[int, ...], geometry: Geometry) -> tuple[slice, ...]:
    """Strided slices of the padded spatial axes that kernel element ``offset`` meets.

    Element ``o`` of the slice along an axis is padded position
    ``offset * dilation + o * stride``, for every output position ``o``.
    """
    return tuple(
        slice(k * d, k * d + (m - 1) * s + 1, s)
        for k, d, s, m in zip(offset, geometry.dilation, geometry.stride, geometry.output_size)
    )


def channels(group: int, per_group: int) -> slice:
    """The channels of ``group`` when each group has ``per_group`` of them."""
    return slice(group * per_group, (group + 1) * per_group)


# --- The public functions, built from a module's forward and backward kernels ---
#
# A kernel receives arrays already checked against the returned Geometry; the
# functions below add the contract's signature, the conversion to arrays and
# the checks, so that each implementation module only holds its algorithm.

ForwardKernel = Callable[[np.ndarray, np.ndarray, np.ndarray | None, Geometry], np.ndarray]
BackwardKernel = Callable[
    [np.ndarray, np.ndarray, np.ndarray, np.ndarray | None, Geometry], Gradients
]


def _as_arrays(*arrays: np.ndarray | None) -> list[np.ndarray | None]:
    return [None if a is None else np.asarray(a) for a in arrays]


def _name(function: Callable, name: str, module: str, doc: str) -> None:
    function.__name__ = function.__qualname__ = name
    function.__module__ = module
    function.__doc__ = doc


def forward_function(kernel: ForwardKernel, nd: int, module: str) -> Callable[..., np.ndarray]:
    """``conv{nd}d(x, weight, bias, *, stride, padding, dilation, groups)`` computed by ``kernel``."""

    def conv(
        x: np.ndarray, weight: np.ndarray, bias: np.ndarray | None, *,
        stride: IntOrTuple, padding: IntOrTuple, dilation: IntOrTuple, groups: int,
    ) -> np.ndarray:
        x, weight, bias = _as_arrays(x, weight, bias)
        g = check_problem(x, weight, bias, stride=stride, padding=padding,
                          dilation=dilation, groups=groups, nd=nd)
        return kernel(x, weight, bias, g)

    _name(conv, f"conv{nd}d", module,
          f"``torch.nn.functional.conv{nd}d`` on NumPy arrays; ValueError for an invalid problem.")
    return conv


def backward_function(kernel: BackwardKernel, nd: int, module: str) -> Callable[..., Gradients]:
    """``conv{nd}d_backward(grad_output, x, weight, bias, *, ...)`` computed by ``kernel``."""

    def conv_backward(
        grad_output: np.ndarray, x: np.ndarray, weight: np.ndarray, bias: np.ndarray | None, *,
        stride: IntOrTuple, padding: IntOrTuple, dilation: IntOrTuple, groups: int,
    ) -> Gradients:
        grad_output, x, weight, bias = _as_arrays(grad_output, x, weight, bias)
        g = check_problem(x, weight, bias, stride=stride, padding=padding,
                          dilation=dilation, groups=groups, nd=nd)
        check_grad_output(grad_output, g)
        return kernel(grad_output, x, weight, bias, g)

    _name(conv_backward, f"conv{nd}d_backward", module,
          f"Gradients of ``conv{nd}d``: ``(grad_input, grad_weight, grad_bias)``, "
          f"grad_bias None exactly when bias is None.")
    return conv_backward
