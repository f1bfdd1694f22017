"""Winograd and FFT forward passes with one classic bug each (tests/harness/test_algorithms.py).

- `winograd_wrong_entry`: 2-d Winograd F(2,3) with one wrong entry of A^T
  (-1 where Lavin & Gray's matrix has 1: the second output of every tile
  subtracts the second transformed value instead of adding it).
- `fft_wraps`: conv2d by FFT on the unpadded input's length, the padding
  left to the transform's wrap-around (a circular correlation): right
  without padding, wrong wherever padding is read.

So that the main job's problems reach them often, both serve every conv2d:
groups one at a time, dilation as a kernel with zero taps, stride as the
stride-1 result subsampled; the Winograd one takes kernels (dilated) up to
3x3, padded with zero taps to 3x3, and leaves larger ones to conv_impl.einsum.

Both declare their algorithm, so the harness applies its Winograd (FFT)
bound to them: the bugs are caught in spite of it.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from conv_impl import einsum

_BT = np.array([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]], dtype=float)
_G = np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]])
_AT_WRONG = np.array([[1, -1, 1, 0], [0, 1, -1, -1]], dtype=float)  # [0, 1] should be 1


def _general(stride1):
    """A conv2d from a stride-1, dilation-1, one-group ``stride1(x, w, padding, dt)``."""
    def conv2d(x, weight, bias, *, stride, padding, dilation, groups):
        dt = np.float32 if x.dtype == np.float16 else x.dtype
        k = tuple(d * (n - 1) + 1 for n, d in zip(weight.shape[2:], dilation))
        wd = np.zeros(weight.shape[:2] + k, dtype=dt)
        wd[:, :, ::dilation[0], ::dilation[1]] = weight
        if stride1 is _winograd and max(k) > 3:
            return einsum.conv2d(x, weight, bias, stride=stride, padding=padding,
                                 dilation=dilation, groups=groups)
        cg, og = x.shape[1] // groups, weight.shape[0] // groups
        y = np.concatenate([stride1(x[:, g * cg:(g + 1) * cg], wd[g * og:(g + 1) * og],
                                    padding, dt) for g in range(groups)], axis=1)
        y = y[:, :, ::stride[0], ::stride[1]]
        if bias is not None:
            y = y + bias.astype(dt)[:, None, None]
        return np.ascontiguousarray(y).astype(x.dtype)
    return conv2d


def _winograd(x, weight, padding, dt):
    kh, kw = weight.shape[2:]
    w3 = np.zeros(weight.shape[:2] + (3, 3), dtype=dt)
    w3[:, :, :kh, :kw] = weight
    n, c, h, w = x.shape
    oh, ow = h + 2 * padding[0] - kh + 1, w + 2 * padding[1] - kw + 1
    th, tw = -(-oh // 2), -(-ow // 2)
    xp = np.zeros((n, c, 2 * th + 2, 2 * tw + 2), dtype=dt)
    xp[:, :, padding[0]:padding[0] + h, padding[1]:padding[1] + w] = x
    tiles = np.stack([np.stack([xp[:, :, 2 * i:2 * i + 4, 2 * j:2 * j + 4] for j in range(tw)], 2)
                      for i in range(th)], 2)                     # (n, c, th, tw, 4, 4)
    v = np.einsum("ai,ncxyij,bj->ncxyab", _BT.astype(dt), tiles, _BT.astype(dt))
    u = np.einsum("ai,ocij,bj->ocab", _G.astype(dt), w3, _G.astype(dt))
    m = np.einsum("ncxyab,ocab->noxyab", v, u)
    y = np.einsum("ia,noxyab,jb->noxiyj", _AT_WRONG.astype(dt), m, _AT_WRONG.astype(dt))
    return y.reshape(n, weight.shape[0], 2 * th, 2 * tw)[:, :, :oh, :ow]


winograd_wrong_entry = SimpleNamespace(conv2d=_general(_winograd),
                                       CAPABILITIES={"algorithm": "winograd F(2,3)"})


def _fft(x, weight, padding, dt):
    h, w = x.shape[2:]
    kh, kw = weight.shape[2:]
    oh, ow = h + 2 * padding[0] - kh + 1, w + 2 * padding[1] - kw + 1
    xs = np.fft.rfft2(x.astype(dt), s=(h, w))                     # the bug: no room for padding
    ws = np.fft.rfft2(weight.astype(dt), s=(h, w))
    full = np.fft.irfft2(np.einsum("nchw,ochw->nohw", xs, np.conj(ws)), s=(h, w))
    rows = (np.arange(oh) - padding[0]) % h
    cols = (np.arange(ow) - padding[1]) % w
    return full[:, :, rows][:, :, :, cols]


fft_wraps = SimpleNamespace(conv2d=_general(_fft), CAPABILITIES={"algorithm": "fft"})
