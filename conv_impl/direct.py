"""Convolution by its direct definition, in plain NumPy: slow, obviously correct.

Forward: zero-pad the input, then for every group and every kernel element
(offset) take the strided slice of the padded input that this kernel element
meets -- one input value per output position -- multiply it by the weights at
that offset and add the product, summed over the group's input channels, into
the output. Backward: the same loops, with the products scattered (added) back
into a padded input-gradient buffer that is then cropped, and summed into the
weight gradient at that offset.

Semantics are those of ``torch.nn.functional.conv{1,2,3}d``; float16 is
computed in float32 and cast back. Written once for any number of spatial
axes; ``conv1d``/``conv2d``/``conv3d`` and their ``*_backward`` are built
from ``_forward``/``_backward`` by :mod:`conv_impl._common`, which also checks
the arguments (ValueError for an invalid problem).

It is one of the implementations shipped with the harness, and an example of
pointing the suite at an implementation::

    pytest -n auto --impl conv_impl.direct
"""

from __future__ import annotations

import numpy as np

from conv_impl._common import (
    Geometry,
    Gradients,
    backward_function,
    channels,
    forward_function,
    interior,
    pad_with_zeros,
    window,
)

__all__ = [
    "conv1d", "conv2d", "conv3d",
    "conv1d_backward", "conv2d_backward", "conv3d_backward",
]


def _weights_at(weight: np.ndarray, offset: tuple[int, ...], nd: int) -> np.ndarray:
    """``weight[:, :, *offset]`` shaped ``(C_out_g, C_in_g, 1, ..., 1)`` to broadcast over space."""
    return weight[(slice(None), slice(None), *offset)].reshape(weight.shape[:2] + (1,) * nd)


def _forward(x: np.ndarray, weight: np.ndarray, bias: np.ndarray | None, g: Geometry) -> np.ndarray:
    x_padded = pad_with_zeros(x, g)
    w = weight.astype(g.compute_dtype)
    y = np.zeros(g.output_shape, dtype=g.compute_dtype)
    for group in range(g.groups):
        c_in, c_out = channels(group, g.in_per_group), channels(group, g.out_per_group)
        for offset in np.ndindex(*g.kernel_size):
            # (N, 1, C_in_g, *out) * (1, C_out_g, C_in_g, 1...) summed over C_in_g
            x_window = x_padded[(slice(None), c_in, *window(offset, g))][:, None]
            w_offset = _weights_at(w[c_out], offset, g.nd)[None]
            y[:, c_out] += (x_window * w_offset).sum(axis=2)
    if bias is not None:
        y += bias.astype(g.compute_dtype).reshape((g.out_channels,) + (1,) * g.nd)
    return y.astype(g.dtype)


def _backward(
    grad_output: np.ndarray, x: np.ndarray, weight: np.ndarray, bias: np.ndarray | None,
    g: Geometry,
) -> Gradients:
    x_padded = pad_with_zeros(x, g)
    w = weight.astype(g.compute_dtype)
    dy = grad_output.astype(g.compute_dtype)
    dx_padded = np.zeros_like(x_padded)
    dw = np.zeros(w.shape, dtype=g.compute_dtype)
    # Axes of an (N, C_out_g, C_in_g, *out) product summed to give the weight gradient.
    batch_and_space = (0, *range(3, 3 + g.nd))
    for group in range(g.groups):
        c_in, c_out = channels(group, g.in_per_group), channels(group, g.out_per_group)
        dy_group = dy[:, c_out][:, :, None]  # (N, C_out_g, 1, *out)
        for offset in np.ndindex(*g.kernel_size):
            at_offset = (slice(None), c_in, *window(offset, g))
            x_window = x_padded[at_offset][:, None]               # (N, 1, C_in_g, *out)
            w_offset = _weights_at(w[c_out], offset, g.nd)[None]  # (1, C_out_g, C_in_g, 1...)
            # The forward added sum over C_in_g of x_window * w_offset to y[:, c_out], so:
            dx_padded[at_offset] += (dy_group * w_offset).sum(axis=1)
            dw[(c_out, slice(None), *offset)] = (dy_group * x_window).sum(axis=batch_and_space)
    dx = dx_padded[interior(g)]
    db = None if bias is None else dy.sum(axis=(0, *range(2, 2 + g.nd))).astype(g.dtype)
    return dx.astype(g.dtype), dw.astype(g.dtype), db


conv1d = forward_function(_forward, 1, __name__)
conv2d = forward_function(_forward, 2, __name__)
conv3d = forward_function(_forward, 3, __name__)
conv1d_backward = backward_function(_backward, 1, __name__)
conv2d_backward = backward_function(_backward, 2, __name__)
conv3d_backward = backward_function(_backward, 3, __name__)
