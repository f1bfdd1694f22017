"""Known-buggy implementations that are wrong only above a size (issue 12).

Each wraps the correct `conv_impl.einsum` (every operation) and breaks the
forward pass of the plain convolutions only where a blocked, optimised
implementation would: at a block tail, on a large-kernel path, on a
long-reduction precision path, in a batch block. The suite must find each
one and shrink it to the boundary (tests/harness/test_size_tiers.py):

    positions_tail   output positions per image > 64, not a multiple of 64:
                     the last position of the tail block is left 0      -> 65
    channels_tail    output channels per group > 32: the tail channels of
                     each group get the group's first channel's weights -> 33
    batch_block      batch > 8, not a multiple of 8: the tail images lose
                     their bias                                         -> 9
    large_kernel     a kernel of 7 or more on some axis: the last kernel
                     offset of that axis is skipped                     -> 7
    long_reduction   float32 with K = C_in/groups * prod(kernel) > 1024:
                     summed in a float16 accumulator                    -> K 1025
    half_inputs      the same K, inputs rounded to float16 (a half-precision
                     GEMM): random data round both ways and hide it
                     inside float32's bound; constant data show it
    narrow_input     an input axis narrower than its dilated kernel (padding
                     makes room for the window): the first output along it
                     is left 0                        -> input 1, kernel 2, padding 1
                     (not a size bug, a reachability one: issue 15's JAX crash
                     needs such an axis; in NARROW)
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np

from conv_impl import einsum

ALL = ("positions_tail", "channels_tail", "batch_block", "large_kernel", "long_reduction")
BOUNDARY = {"positions_tail": 65, "channels_tail": 33, "batch_block": 9, "large_kernel": 7,
            "long_reduction": 1025}

_PLAIN = ("conv1d", "conv2d", "conv3d")
_ALL_OPS = tuple(f"conv{t}{n}d" for n in (1, 2, 3) for t in ("", "_transpose"))


def _module(**forwards) -> SimpleNamespace:
    functions = {name: getattr(einsum, name) for op in _ALL_OPS
                 for name in (op, f"{op}_backward")}
    functions.update(forwards)
    return SimpleNamespace(**functions)


def _wrapped(op: str, bug):
    conv = getattr(einsum, op)

    def forward(x, weight, bias, **kw):
        return bug(conv, x, weight, bias, kw)
    forward.__name__ = op
    return forward


def _positions_tail(conv, x, weight, bias, kw):
    y = conv(x, weight, bias, **kw)
    positions = math.prod(y.shape[2:])
    if positions > 64 and positions % 64:
        flat = y.reshape(y.shape[0], y.shape[1], -1)
        flat[:, :, -1] = 0
    return y


def _channels_tail(conv, x, weight, bias, kw):
    per_group = weight.shape[0] // kw["groups"]
    if per_group <= 32:
        return conv(x, weight, bias, **kw)
    wrong = np.array(weight)
    for first in range(0, weight.shape[0], per_group):
        wrong[first + 32:first + per_group] = weight[first]
    return conv(x, wrong, bias, **kw)


def _narrow_input(conv, x, weight, bias, kw):
    y = conv(x, weight, bias, **kw)
    for axis, (n, k, d) in enumerate(zip(x.shape[2:], weight.shape[2:], kw["dilation"])):
        if n < d * (k - 1) + 1:
            index = [slice(None)] * y.ndim
            index[2 + axis] = 0
            y[tuple(index)] = 0
            break
    return y


def _batch_block(conv, x, weight, bias, kw):
    y = conv(x, weight, bias, **kw)
    n = y.shape[0]
    if n > 8 and n % 8 and bias is not None:
        tail = n - n % 8
        y[tail:] -= bias.reshape((1, -1) + (1,) * (y.ndim - 2))
    return y


def _large_kernel(conv, x, weight, bias, kw):
    kernel = weight.shape[2:]
    if max(kernel) < 7:
        return conv(x, weight, bias, **kw)
    axis = 2 + int(np.argmax(kernel))
    wrong = np.array(weight)
    index = [slice(None)] * wrong.ndim
    index[axis] = -1
    wrong[tuple(index)] = 0
    return conv(x, wrong, bias, **kw)


def _patches(x: np.ndarray, kernel, stride, padding, dilation) -> np.ndarray:
    """(N, C, *out, *kernel) windows of the zero-padded x (a view where it can)."""
    nd = len(kernel)
    xp = np.pad(x, [(0, 0), (0, 0)] + [(p, p) for p in padding])
    extent = tuple(d * (k - 1) + 1 for k, d in zip(kernel, dilation))
    windows = np.lib.stride_tricks.sliding_window_view(xp, extent, axis=tuple(range(2, 2 + nd)))
    step = tuple(slice(None, None, s) for s in stride) + tuple(
        slice(None, None, d) for d in dilation)
    return windows[(slice(None), slice(None)) + step]


def _float16_sum(x, weight, bias, *, stride, padding, dilation, groups) -> np.ndarray:
    """The forward pass summed term by term in a float16 accumulator."""
    kernel = weight.shape[2:]
    nd = len(kernel)
    p = _patches(x, kernel, stride, padding, dilation)
    n, out_size = x.shape[0], p.shape[2:2 + nd]
    cg, og = x.shape[1] // groups, weight.shape[0] // groups
    y = np.zeros((n, weight.shape[0], *out_size), dtype=np.float16)
    for g in range(groups):
        cols = np.moveaxis(p[:, g * cg:(g + 1) * cg], 1, 1 + nd)  # (N, *out, C, *kernel)
        cols = cols.reshape(n, math.prod(out_size), -1)
        w = weight[g * og:(g + 1) * og].reshape(og, -1)
        acc = np.zeros((n, cols.shape[1], og), dtype=np.float16)
        for t in range(w.shape[1]):
            acc = (acc + cols[:, :, t, None].astype(np.float32) * w[None, None, :, t]).astype(
                np.float16)
        y[:, g * og:(g + 1) * og] = np.moveaxis(acc, 2, 1).reshape(n, og, *out_size)
    y = y.astype(x.dtype)
    if bias is not None:
        y = (y + bias.reshape((1, -1) + (1,) * nd)).astype(x.dtype)
    return y


def _long_reduction(conv, x, weight, bias, kw):
    terms = weight.shape[1] * math.prod(weight.shape[2:])
    if x.dtype != np.float32 or terms <= 1024:
        return conv(x, weight, bias, **kw)
    return _float16_sum(x, weight, bias, **kw)


def _half_inputs(conv, x, weight, bias, kw):
    terms = weight.shape[1] * math.prod(weight.shape[2:])
    if x.dtype != np.float32 or terms <= 1024:
        return conv(x, weight, bias, **kw)
    half = lambda a: None if a is None else a.astype(np.float16).astype(np.float32)  # noqa: E731
    return conv(half(x), half(weight), half(bias), **kw)


positions_tail = _module(**{op: _wrapped(op, _positions_tail) for op in _PLAIN})
channels_tail = _module(**{op: _wrapped(op, _channels_tail) for op in _PLAIN})
batch_block = _module(**{op: _wrapped(op, _batch_block) for op in _PLAIN})
large_kernel = _module(**{op: _wrapped(op, _large_kernel) for op in _PLAIN})
long_reduction = _module(**{op: _wrapped(op, _long_reduction) for op in _PLAIN})
#: not in ALL: caught by coherent data only (see test_size_tiers.py)
half_inputs = _module(**{op: _wrapped(op, _half_inputs) for op in _PLAIN})
#: not in ALL: a shape, not a size (see test_size_tiers.py)
narrow_input = _module(**{op: _wrapped(op, _narrow_input) for op in _PLAIN})
