"""Example: a layer class with a torch-like API, wrapped for the conv_harness.

``TorchLikeConv2d`` mirrors ``torch.nn.Conv2d``'s constructor (tuple or int
sizes, ``dilation``, ``groups``, ``bias=True|False``), keeps its parameters
in a ``params`` dict and returns its gradients from ``backward`` as a dict
``{"input": ..., "weight": ..., "bias": ...}``.  It loops over kernel offsets
(slow, obviously correct).  Because it really supports dilation, groups,
non-square sizes and no bias, its adapter declares all of them.

Check it with::

    pytest --impl examples/torchlike_layer.py
"""

import numpy as np

from conv_impl.adapters import LayerAdapter


def _tuple(v):
    return tuple(v) if isinstance(v, (tuple, list)) else (v, v)


class TorchLikeConv2d:
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0,
                 dilation=1, groups=1, bias=True):
        if in_channels % groups or out_channels % groups:
            raise ValueError("channels must be divisible by groups")
        self.kernel_size, self.stride = _tuple(kernel_size), _tuple(stride)
        self.padding, self.dilation, self.groups = _tuple(padding), _tuple(dilation), groups
        rng = np.random.default_rng()
        bound = 1.0 / np.sqrt(in_channels // groups * np.prod(self.kernel_size))
        self.params = {
            "weight": rng.uniform(-bound, bound, (out_channels, in_channels // groups, *self.kernel_size)),
            "bias": rng.uniform(-bound, bound, out_channels) if bias else None,
        }

    def _taps(self, out_h, out_w):
        """(a, b, slice_h, slice_w): the input positions each kernel tap reads."""
        (kh, kw), (sh, sw), (dh, dw) = self.kernel_size, self.stride, self.dilation
        for a in range(kh):
            for b in range(kw):
                yield a, b, slice(a * dh, a * dh + sh * (out_h - 1) + 1, sh), \
                    slice(b * dw, b * dw + sw * (out_w - 1) + 1, sw)

    def forward(self, x):
        n, c, h, w = x.shape
        (kh, kw), (sh, sw), (ph, pw), (dh, dw) = self.kernel_size, self.stride, self.padding, self.dilation
        g, weight = self.groups, self.params["weight"]
        out_h = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
        out_w = (w + 2 * pw - dw * (kw - 1) - 1) // sw + 1
        xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
        wg = weight.reshape(g, -1, *weight.shape[1:])  # (G, C_out/G, C_in/G, kh, kw)
        y = np.zeros((n, g, wg.shape[1], out_h, out_w), dtype=x.dtype)
        for a, b, rows, cols in self._taps(out_h, out_w):
            patch = xp[:, :, rows, cols].reshape(n, g, -1, out_h, out_w)
            y += np.einsum("ngchw,goc->ngohw", patch, wg[:, :, :, a, b])
        y = y.reshape(n, -1, out_h, out_w)
        if self.params["bias"] is not None:
            y += self.params["bias"][:, None, None]
        self.cache = xp, (h, w), (out_h, out_w)
        return y

    def backward(self, dout):
        xp, (h, w), (out_h, out_w) = self.cache
        (ph, pw), g, weight = self.padding, self.groups, self.params["weight"]
        n = xp.shape[0]
        wg = weight.reshape(g, -1, *weight.shape[1:])
        dg = dout.reshape(n, g, -1, out_h, out_w)
        dxp = np.zeros_like(xp)
        dwg = np.zeros_like(wg)
        for a, b, rows, cols in self._taps(out_h, out_w):
            patch = xp[:, :, rows, cols].reshape(n, g, -1, out_h, out_w)
            dwg[:, :, :, a, b] = np.einsum("ngohw,ngchw->goc", dg, patch)
            dxp[:, :, rows, cols] += np.einsum("ngohw,goc->ngchw", dg, wg[:, :, :, a, b]).reshape(
                n, -1, out_h, out_w)
        grads = {"input": dxp[:, :, ph : ph + h, pw : pw + w], "weight": dwg.reshape(weight.shape)}
        grads["bias"] = dout.sum(axis=(0, 2, 3)) if self.params["bias"] is not None else None
        return grads


def _set_params(layer, weight, bias):
    layer.params["weight"] = weight
    if bias is not None:
        layer.params["bias"] = bias


impl = LayerAdapter(
    TorchLikeConv2d,
    construct=lambda s: TorchLikeConv2d(s.in_channels, s.out_channels, s.kernel_size, s.stride,
                                        s.padding, s.dilation, s.groups, bias=s.bias),
    square=False,
    set_params=_set_params,
    grads={"dx": "input", "dw": "weight", "db": "bias"},
    capabilities={"dilation": True, "groups": True, "bias_none": True},
)
conv2d, conv2d_backward, CAPABILITIES = impl.conv2d, impl.conv2d_backward, impl.CAPABILITIES
