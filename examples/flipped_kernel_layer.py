"""Example: a signal-processing style layer, wrapped for the conv_harness.

``TrueConv2D`` computes a *true* convolution (the kernel rotated by 180
degrees, as ``scipy.signal.convolve2d`` does) instead of the cross-correlation
that deep-learning libraries call convolution, with im2col and a matrix
product.  Its parameters are ``W`` (C_out, C_in, k, k) and ``b`` (C_out, 1);
``backward(dout)`` returns ``dx`` only and leaves ``dW`` and ``db`` on the
layer.  It is correct for what it computes.

Check it with::

    pytest --impl examples/flipped_kernel_layer.py
"""

import numpy as np

from conv_impl.adapters import LayerAdapter


class TrueConv2D:
    def __init__(self, n_in, n_out, k, stride=1, pad=0):
        self.k, self.stride, self.pad = k, stride, pad
        self.W = np.random.default_rng().standard_normal((n_out, n_in, k, k)) * 0.1
        self.b = np.zeros((n_out, 1))

    def _im2col(self, xp, out_h, out_w):
        n, c = xp.shape[:2]
        k, s = self.k, self.stride
        cols = np.empty((n, c, k, k, out_h, out_w), dtype=xp.dtype)
        for a in range(k):
            for b in range(k):
                cols[:, :, a, b] = xp[:, :, a : a + s * out_h : s, b : b + s * out_w : s]
        return cols.reshape(n, c * k * k, out_h * out_w)

    def forward(self, x):
        n, c, h, w = x.shape
        k, s, p = self.k, self.stride, self.pad
        out_h, out_w = (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
        xp = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p)))
        cols = self._im2col(xp, out_h, out_w)                       # (N, C*k*k, L)
        kernel = self.W[:, :, ::-1, ::-1].reshape(len(self.W), -1)  # flipped: true convolution
        y = kernel @ cols + self.b                                  # (N, C_out, L)
        self.cache = x.shape, xp.shape, cols, (out_h, out_w)
        return y.reshape(n, -1, out_h, out_w)

    def backward(self, dout):
        (n, c, h, w), xp_shape, cols, (out_h, out_w) = self.cache
        k, s, p = self.k, self.stride, self.pad
        d = dout.reshape(n, dout.shape[1], -1)                      # (N, C_out, L)
        d_kernel = np.einsum("nol,nkl->ok", d, cols).reshape(self.W.shape)
        self.dW = d_kernel[:, :, ::-1, ::-1]
        self.db = d.sum(axis=(0, 2)).reshape(self.b.shape)
        kernel = self.W[:, :, ::-1, ::-1].reshape(len(self.W), -1)
        dcols = (kernel.T @ d).reshape(n, c, k, k, out_h, out_w)
        dxp = np.zeros(xp_shape, dtype=dout.dtype)
        for a in range(k):                                          # col2im
            for b in range(k):
                dxp[:, :, a : a + s * out_h : s, b : b + s * out_w : s] += dcols[:, :, a, b]
        return dxp[:, :, p : p + h, p : p + w]


impl = LayerAdapter(TrueConv2D, weight_attr="W", bias_attr="b", kernel_flipped=True,
                    grads=lambda dx, layer: (dx, layer.dW, layer.db))
conv2d, conv2d_backward, CAPABILITIES = impl.conv2d, impl.conv2d_backward, impl.CAPABILITIES
