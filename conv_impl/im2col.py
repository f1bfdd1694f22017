"""Convolution as im2col + GEMM, in NumPy.

im2col gathers, for every output position, the input values its kernel window
covers into one column of a matrix: row ``(c, k)`` of column ``(n, o)`` holds
the zero-padded input at sample ``n``, channel ``c``, spatial position
``o * stride + k * dilation``. The gather is a read-only strided view of the
padded input (every index it can address lies inside that array), copied once
into a ``(groups, C_in_g * K, N * L)`` matrix, where ``K`` is the number of
kernel elements and ``L`` the number of output positions.

- forward: per group, ``y = W @ cols`` with ``W`` the weight as a
  ``(C_out_g, C_in_g * K)`` matrix, plus the bias;
- grad_weight: per group, ``dY @ cols.T``;
- grad_input: per group, the column gradient ``W.T @ dY``, then col2im --
  each kernel element's slice of it added (scattered) into a padded gradient
  buffer at the positions that element read from -- then cropped.

Semantics are those of ``torch.nn.functional.conv{1,2,3}d``; float16 is
computed in float32 and cast back. Written once for any number of spatial
axes; ``conv1d``/``conv2d``/``conv3d`` and their ``*_backward`` are built
from ``_forward``/``_backward`` by :mod:`conv_impl._common`, which also checks
the arguments (ValueError for an invalid problem).

It is one of the implementations shipped with the harness, and an example of
pointing the suite at an implementation::

    pytest -n auto --impl conv_impl.im2col
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import as_strided

from conv_impl._common import (
    Geometry,
    Gradients,
    backward_function,
    forward_function,
    interior,
    pad_with_zeros,
    window,
)

__all__ = [
    "conv1d", "conv2d", "conv3d",
    "conv1d_backward", "conv2d_backward", "conv3d_backward",
]


def _windows(x_padded: np.ndarray, g: Geometry) -> np.ndarray:
    """Read-only view ``v`` of shape ``(N, C_in, *kernel, *out)`` with
    ``v[n, c, *k, *o] == x_padded[n, c, *(o * stride + k * dilation)]``.

    Along each spatial axis the largest index read is
    ``(kernel - 1) * dilation + (out - 1) * stride``, which is at most
    ``padded_size - 1`` by the definition of ``out``: nothing outside
    ``x_padded`` is addressed.
    """
    batch_stride, channel_stride, *spatial_strides = x_padded.strides
    shape = (g.batch, g.in_channels, *g.kernel_size, *g.output_size)
    strides = (
        batch_stride,
        channel_stride,
        *(st * d for st, d in zip(spatial_strides, g.dilation)),
        *(st * s for st, s in zip(spatial_strides, g.stride)),
    )
    return as_strided(x_padded, shape=shape, strides=strides, writeable=False)


def _im2col(x_padded: np.ndarray, g: Geometry) -> np.ndarray:
    """The column matrices, one per group: ``(groups, C_in_g * K, N * L)``."""
    nd = g.nd
    # (N, C_in, *kernel, *out) -> (C_in, *kernel, N, *out); C_in = groups * C_in_g.
    order = (1, *range(2, 2 + nd), 0, *range(2 + nd, 2 + 2 * nd))
    columns = _windows(x_padded, g).transpose(order)
    return columns.reshape(g.groups, g.in_per_group * _prod(g.kernel_size),
                           g.batch * _prod(g.output_size))


def _col2im(d_columns: np.ndarray, g: Geometry) -> np.ndarray:
    """Adjoint of :func:`_im2col`: the cropped input gradient ``(N, C_in, *input_size)``."""
    # (groups, C_in_g * K, N * L) -> (C_in, *kernel, N, *out)
    d_columns = d_columns.reshape(g.in_channels, *g.kernel_size, g.batch, *g.output_size)
    dx_padded = np.zeros((g.batch, g.in_channels, *g.padded_size), dtype=g.compute_dtype)
    for offset in np.ndindex(*g.kernel_size):
        # (C_in, N, *out) -> (N, C_in, *out), added where this kernel element read.
        contribution = np.swapaxes(d_columns[(slice(None), *offset)], 0, 1)
        dx_padded[(slice(None), slice(None), *window(offset, g))] += contribution
    return dx_padded[interior(g)]


def _prod(sizes: tuple[int, ...]) -> int:
    return int(np.prod(sizes, dtype=np.int64))


def _weight_matrices(weight: np.ndarray, g: Geometry) -> np.ndarray:
    """The weight as ``(groups, C_out_g, C_in_g * K)`` in the compute dtype."""
    return weight.astype(g.compute_dtype).reshape(
        g.groups, g.out_per_group, g.in_per_group * _prod(g.kernel_size))


def _output_matrices(grad_output: np.ndarray, g: Geometry) -> np.ndarray:
    """``(N, C_out, *out)`` as ``(groups, C_out_g, N * L)`` in the compute dtype."""
    as_rows = np.swapaxes(grad_output.astype(g.compute_dtype), 0, 1)  # (C_out, N, *out)
    return as_rows.reshape(g.groups, g.out_per_group, g.batch * _prod(g.output_size))


def _forward(x: np.ndarray, weight: np.ndarray, bias: np.ndarray | None, g: Geometry) -> np.ndarray:
    columns = _im2col(pad_with_zeros(x, g), g)
    w = _weight_matrices(weight, g)
    y = np.stack([w[group] @ columns[group] for group in range(g.groups)])  # (groups, C_out_g, N*L)
    y = np.swapaxes(y.reshape(g.out_channels, g.batch, *g.output_size), 0, 1)
    if bias is not None:
        y = y + bias.astype(g.compute_dtype).reshape((g.out_channels,) + (1,) * g.nd)
    return np.ascontiguousarray(y, dtype=g.dtype)


def _backward(
    grad_output: np.ndarray, x: np.ndarray, weight: np.ndarray, bias: np.ndarray | None,
    g: Geometry,
) -> Gradients:
    columns = _im2col(pad_with_zeros(x, g), g)
    w = _weight_matrices(weight, g)
    dy = _output_matrices(grad_output, g)
    dw = np.stack([dy[group] @ columns[group].T for group in range(g.groups)])
    d_columns = np.stack([w[group].T @ dy[group] for group in range(g.groups)])
    dx = _col2im(d_columns, g)
    db = None
    if bias is not None:
        db = grad_output.astype(g.compute_dtype).sum(axis=(0, *range(2, 2 + g.nd))).astype(g.dtype)
    return dx.astype(g.dtype), dw.reshape(weight.shape).astype(g.dtype), db


conv1d = forward_function(_forward, 1, __name__)
conv2d = forward_function(_forward, 2, __name__)
conv3d = forward_function(_forward, 3, __name__)
conv1d_backward = backward_function(_backward, 1, __name__)
conv2d_backward = backward_function(_backward, 2, __name__)
conv3d_backward = backward_function(_backward, 3, __name__)
