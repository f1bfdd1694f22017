"""A 3-D, channels-last layer class unlike any in examples/: the adapter's
``NCDHW`` path, a weight laid out ``(C_out, kd, kh, kw, C_in)``, a bias of
shape ``(1, 1, 1, 1, C_out)``, per-axis tuple sizes, keyword-only
constructor arguments and ``backward`` returning ``(dw, dx, db)``.

It computes by looping over kernel offsets: slow, plainly correct.
"""

from __future__ import annotations

import itertools

import numpy as np

from conv_impl.adapters import LayerAdapter


class ChannelsLast3D:
    """``ChannelsLast3D(c_in, c_out, *, ksize, strides, pads)``, sizes as triples;
    ``forward(x)`` on (N, D, H, W, C_in)."""

    def __init__(self, c_in, c_out, *, ksize, strides, pads):
        self.ksize, self.strides, self.pads = tuple(ksize), tuple(strides), tuple(pads)
        rng = np.random.default_rng(0)
        self.weight = rng.standard_normal((c_out, *self.ksize, c_in))
        self.bias = rng.standard_normal((1, 1, 1, 1, c_out))

    def _taps(self):
        for offset in itertools.product(*(range(k) for k in self.ksize)):
            yield offset, tuple(slice(o, o + s * (n - 1) + 1, s)
                                for o, s, n in zip(offset, self.strides, self.out_shape))

    def forward(self, x):
        pad = ((0, 0), *((p, p) for p in self.pads), (0, 0))
        self.xp = np.pad(x, pad)
        self.in_shape = x.shape[1:4]
        self.out_shape = tuple((n + 2 * p - k) // s + 1 for n, p, k, s
                               in zip(self.in_shape, self.pads, self.ksize, self.strides))
        y = np.zeros((x.shape[0], *self.out_shape, self.weight.shape[0]), dtype=x.dtype)
        for (a, b, c), sl in self._taps():
            y += np.einsum("ndhwi,oi->ndhwo", self.xp[(slice(None), *sl)], self.weight[:, a, b, c])
        return y + self.bias

    def backward(self, dout):
        dxp = np.zeros_like(self.xp)
        dw = np.zeros_like(self.weight)
        for (a, b, c), sl in self._taps():
            index = (slice(None), *sl)
            dw[:, a, b, c] = np.einsum("ndhwo,ndhwi->oi", dout, self.xp[index])
            dxp[index] += np.einsum("ndhwo,oi->ndhwi", dout, self.weight[:, a, b, c])
        crop = (slice(None), *(slice(p, p + n) for p, n in zip(self.pads, self.in_shape)))
        db = dout.sum(axis=(0, 1, 2, 3)).reshape(self.bias.shape)
        return dw, dxp[crop], db


def adapter() -> LayerAdapter:
    return LayerAdapter(
        ChannelsLast3D,
        construct=lambda s: ChannelsLast3D(s.in_channels, s.out_channels, ksize=s.kernel_size,
                                           strides=s.stride, pads=s.padding),
        input_layout="NDHWC", weight_layout="ODHWI", grads=("dw", "dx", "db"), square=False,
    )
