"""Example: a 1-D layer class, wrapped for the conv_harness.

The adapter handles 1-D (and 3-D) layers too: the layout string's length
says how many spatial axes there are, and the adapter then provides
``conv1d``/``conv1d_backward`` instead of the 2-D pair.  ``Conv1D`` is the
tutorial's layer in one dimension (and without its bugs).

Check it with::

    pytest --impl examples/conv1d_layer.py
"""

import numpy as np

from conv_impl.adapters import LayerAdapter


class Conv1D:
    """``Conv1D(in_channels, out_channels, kernel_size, stride=1, padding=0)``
    on (N, C, L) inputs; ``backward(dout) -> (db, dw, dx)``."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0):
        self.k, self.s, self.p = kernel_size, stride, padding
        rng = np.random.default_rng()
        self.weight = rng.standard_normal((out_channels, in_channels, kernel_size))
        self.bias = rng.standard_normal(out_channels)

    def forward(self, x):
        k, s, p = self.k, self.s, self.p
        self.xp = np.pad(x, ((0, 0), (0, 0), (p, p)))
        self.length, self.out_len = x.shape[2], (x.shape[2] + 2 * p - k) // s + 1
        taps = [self.xp[:, :, t : t + s * self.out_len : s] for t in range(k)]
        self.win = np.stack(taps, axis=-1)                       # (N, C, L_out, k)
        return np.einsum("nclk,ock->nol", self.win, self.weight) + self.bias[:, None]

    def backward(self, dout):
        k, s, p = self.k, self.s, self.p
        dw = np.einsum("nclk,nol->ock", self.win, dout)
        db = dout.sum(axis=(0, 2))
        dxp = np.zeros_like(self.xp)
        for t in range(k):
            dxp[:, :, t : t + s * self.out_len : s] += np.einsum("nol,oc->ncl", dout, self.weight[:, :, t])
        return db, dw, dxp[:, :, p : p + self.length]


impl = LayerAdapter(Conv1D, input_layout="NCW", weight_layout="OIW")
conv1d, conv1d_backward, CAPABILITIES = impl.conv1d, impl.conv1d_backward, impl.CAPABILITIES
