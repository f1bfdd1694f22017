"""Correct convolutions that sum differently from the oracle: they must never be flagged.

- `fft`: forward by FFT (normwise error, nonzero where every window reads
  only padding), float64 and float32;
- `float16_accumulation`: float16 in, every partial sum rounded to float16;
- `reversed_order`: the kernel offsets summed in reverse order in float32.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from conv_impl import einsum


def _fft_conv2d(x, weight, bias, *, stride, padding, dilation, groups):
    assert groups == 1 and dilation == (1, 1)
    xp = np.pad(x, ((0, 0), (0, 0), (padding[0],) * 2, (padding[1],) * 2))
    h, w = xp.shape[2:]
    kh, kw = weight.shape[2:]
    spectrum = np.einsum("nchw,ochw->nohw", np.fft.rfft2(xp, s=(h, w)),
                         np.conj(np.fft.rfft2(weight, s=(h, w))))
    full = np.fft.irfft2(spectrum, s=(h, w))  # full[m] = sum_k xp[m + k] w[k] (no wrap for m <= h - kh)
    y = full[:, :, : h - kh + 1 : stride[0], : w - kw + 1 : stride[1]]
    if bias is not None:
        y = y + bias[:, None, None]
    return y.astype(x.dtype)


fft = SimpleNamespace(conv2d=_fft_conv2d, CAPABILITIES={
    "dtypes": ("float64", "float32"), "dilation": False, "groups": False})


def _offsetwise(x, weight, bias, order, acc_dtype, *, stride, padding, dilation, groups):
    kh, kw = weight.shape[2:]
    out = None
    for i, j in order(kh, kw):
        single = np.zeros_like(weight)
        single[:, :, i, j] = weight[:, :, i, j]
        part = einsum.conv2d(x, single, None, stride=stride, padding=padding,
                             dilation=dilation, groups=groups).astype(acc_dtype)
        out = part if out is None else (out + part).astype(acc_dtype)
    if bias is not None:
        out = (out + bias.astype(acc_dtype)[:, None, None]).astype(acc_dtype)
    return out.astype(x.dtype)


def _forward_order(kh, kw):
    return [(i, j) for i in range(kh) for j in range(kw)]


def _reverse_order(kh, kw):
    return _forward_order(kh, kw)[::-1]


float16_accumulation = SimpleNamespace(
    conv2d=lambda x, w, b, **kw: _offsetwise(x, w, b, _forward_order, np.float16, **kw),
    CAPABILITIES={"dtypes": ("float16",)})

reversed_order = SimpleNamespace(
    conv2d=lambda x, w, b, **kw: _offsetwise(x, w, b, _reverse_order, np.float32, **kw),
    CAPABILITIES={"dtypes": ("float32",)})
