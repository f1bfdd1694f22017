"""Example: a channels-last layer class, wrapped for the conv_harness.

``NHWCConv2D`` is written the way many course notebooks and Keras-minded
code write it: inputs ``(N, H, W, C)``, a kernel of shape
``(k, k, C_in, C_out)``, and a ``backward`` that returns ``(dx, dW, db)``
with ``dW`` and ``db`` averaged over the batch.  It is correct.

Check it with::

    pytest --impl examples/nhwc_layer.py

The three lines at the bottom are all the wrapping it needs.
"""

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from conv_impl.adapters import LayerAdapter


class NHWCConv2D:
    """``NHWCConv2D(in_channels, out_channels, kernel_size, stride=1, padding=0)``.

    ``weight``: (k, k, C_in, C_out); ``bias``: (C_out,).
    ``forward(x)``: x (N, H, W, C_in) -> (N, H_out, W_out, C_out).
    ``backward(dout)`` -> ``(dx, dW, db)``, ``dW`` and ``db`` batch means.
    """

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0):
        k = kernel_size
        self.k, self.s, self.p = k, stride, padding
        scale = np.sqrt(2.0 / (k * k * in_channels))  # He initialisation
        self.weight = np.random.default_rng().normal(0.0, scale, (k, k, in_channels, out_channels))
        self.bias = np.zeros(out_channels)

    def forward(self, x):
        k, s, p = self.k, self.s, self.p
        n, h, w, c = x.shape
        self.out_h = (h + 2 * p - k) // s + 1
        self.out_w = (w + 2 * p - k) // s + 1
        xp = np.pad(x, ((0, 0), (p, p), (p, p), (0, 0)))
        # (N, H', W', C, k, k) windows, every s-th one, cut to the output size
        win = sliding_window_view(xp, (k, k), axis=(1, 2))[:, ::s, ::s][:, : self.out_h, : self.out_w]
        self.x_shape, self.xp_shape, self.win = x.shape, xp.shape, win
        return np.einsum("nhwckl,klco->nhwo", win, self.weight) + self.bias

    def backward(self, dout):
        k, s, p = self.k, self.s, self.p
        n, h, w, _ = self.x_shape
        dW = np.einsum("nhwckl,nhwo->klco", self.win, dout) / n
        db = dout.sum(axis=(0, 1, 2)) / n
        dxp = np.zeros(self.xp_shape, dtype=dout.dtype)
        for a in range(k):  # scatter each kernel tap's contribution back
            for b in range(k):
                dxp[:, a : a + s * self.out_h : s, b : b + s * self.out_w : s, :] += np.einsum(
                    "nhwo,co->nhwc", dout, self.weight[a, b]
                )
        dx = dxp[:, p : p + h, p : p + w, :]
        return dx, dW, db


impl = LayerAdapter(NHWCConv2D, input_layout="NHWC", weight_layout="HWIO",
                    grads=("dx", "dw", "db"), grads_are_batch_means=True)
conv2d, conv2d_backward, CAPABILITIES = impl.conv2d, impl.conv2d_backward, impl.CAPABILITIES
