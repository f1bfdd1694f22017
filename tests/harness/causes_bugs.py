"""Known-buggy implementations with several symptoms per root cause (issue 21).

Each wraps the correct `conv_impl.einsum` and breaks it so that one cause
shows in several functions, checks or kinds of failure; one run must give
exactly one entry per cause (tests/harness/test_causes.py). Specs:
``--impl tests/harness/causes_bugs.py:<name>``.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from conv_impl import einsum

DIMS = (1, 2, 3)


def _module(forward=None, backward=None, dims=DIMS, **extra) -> SimpleNamespace:
    """conv{n}d and conv{n}d_backward for each n in ``dims`` from ``forward(n, ...)`` and
    ``backward(n, ...)`` (einsum's where None)."""
    functions = {}
    for n in dims:
        fwd, bwd = getattr(einsum, f"conv{n}d"), getattr(einsum, f"conv{n}d_backward")
        functions[f"conv{n}d"] = fwd if forward is None else (
            lambda *a, _n=n, _f=fwd, **kw: forward(_f, *a, **kw))
        functions[f"conv{n}d_backward"] = bwd if backward is None else (
            lambda *a, _n=n, _b=bwd, **kw: backward(_b, *a, **kw))
    return SimpleNamespace(**functions, CAPABILITIES=None, **extra)


# -- one code path, many functions: an N-d library with two causes -------------------

def _masked(x: np.ndarray, stride) -> np.ndarray:
    """The last input position along the last axis read as 0 when that axis's stride is
    over 1: an off-by-one in a strided gather every dimension shares."""
    if stride[-1] > 1:
        x = x.copy()
        x[..., -1] = 0
    return x


def _no_dilation(dilation) -> None:
    if any(d > 1 for d in dilation):
        raise ValueError("dilation > 1 is not supported")


def _nd_forward(fwd, x, weight, bias, *, stride, padding, dilation, groups):
    _no_dilation(dilation)
    return fwd(_masked(x, stride), weight, bias, stride=stride, padding=padding,
               dilation=dilation, groups=groups)


def _nd_backward(bwd, grad_output, x, weight, bias, *, stride, padding, dilation, groups):
    """The exact gradients of `_nd_forward` (an autograd library's backward)."""
    _no_dilation(dilation)
    gx, gw, gb = bwd(grad_output, _masked(x, stride), weight, bias, stride=stride,
                     padding=padding, dilation=dilation, groups=groups)
    return _masked(gx, stride), gw, gb


#: 2 causes behind 6 functions: the strided gather (forward wrong, and the backward
#: its exact gradient) and dilation refused (raised, with one message, everywhere).
nd_two_causes = _module(_nd_forward, _nd_backward)


def _any_stride_backward(bwd, grad_output, x, weight, bias, *, stride, **kw):
    gx, gw, gb = bwd(grad_output, x, weight, bias, stride=stride, **kw)
    if any(s > 1 for s in stride):
        gw = gw.copy()
        gw.flat[0] += 1  # an off-by-one in a weight-gradient loop every dimension shares
    return gx, gw, gb


#: 1 cause behind 3 backwards: grad_weight off by one when a stride, on any axis, is
#: above 1. conv1d's stride is on w, a conv2d search may find it on h, conv3d's on d.
nd_any_axis = _module(backward=_any_stride_backward)


# -- a cause and its consequences: computes in float32 whatever the input -------------

def _f32(a):
    return None if a is None else np.asarray(a, dtype=np.float32)


def _f32_forward(fwd, x, weight, bias, **kw):
    return fwd(_f32(x), _f32(weight), _f32(bias), **kw)


def _f32_backward(bwd, grad_output, x, weight, bias, **kw):
    return bwd(_f32(grad_output), _f32(x), _f32(weight), _f32(bias), **kw)


#: One cause: float32 results (dtype) in both functions, and float32-sized value
#: errors on float64 inputs in forward, grad_input and grad_weight.
float32_compute = _module(_f32_forward, _f32_backward, dims=(2,))


def _f32_mean_backward(bwd, grad_output, x, weight, bias, **kw):
    gx, gw, gb = _f32_backward(bwd, grad_output, x, weight, bias, **kw)
    if gb is not None:
        gb = gb / grad_output.shape[0]  # the batch mean, not the sum
    return gx, gw, gb


#: Two causes (issue 11's case): float32 whatever the input, and grad_bias the
#: batch mean (wrong from batch 2 on, by far more than float32's rounding).
float32_and_mean = _module(_f32_forward, _f32_mean_backward, dims=(2,))


# -- a condition that is a product --------------------------------------------------

def _product_forward(fwd, x, weight, bias, **kw):
    """The bias added once per term of the window sum: K = in channels per group x taps."""
    y = fwd(x, weight, None, **kw)
    if bias is not None:
        groups = kw["groups"]
        terms = (x.shape[1] // groups) * int(np.prod(weight.shape[2:]))
        y = y + (terms * bias).reshape((1, -1) + (1,) * (y.ndim - 2)).astype(y.dtype)
    return y


#: Forward wrong when K >= 2 (in channels per group x kernel taps), with a bias.
product_bias = _module(_product_forward, dims=(2,))

#: The same bug in an implementation of square problems only: its smallest kernel
#: above one tap has four, but two channels and one tap make K = 2 (issue 34).
product_bias_square = _module(_product_forward, dims=(2,))
product_bias_square.CAPABILITIES = {"square": True}


# -- masking: a second bug raises where the first would show ------------------------

def _masking_backward(bwd, grad_output, x, weight, bias, *, padding, **kw):
    if any(p == 0 for p in padding):
        raise ValueError("unpadded inputs are not handled")  # bug 1
    wide = [None if a is None else np.asarray(a, dtype=np.float64)
            for a in (grad_output, x, weight, bias)]
    return bwd(*wide, padding=padding, **kw)  # bug 2: float64 results for every input


#: Two causes in conv2d_backward: it raises where an axis has no padding, and returns float64
#: whatever the input dtype (shown with padding: the dtype bug does not need it).
masking = _module(backward=_masking_backward, dims=(2,))


# -- a cause hidden by another of the same kind -------------------------------------

def _shapes_backward(bwd, grad_output, x, weight, bias, *, stride, padding, dilation,
                     groups):
    gx, gw, gb = bwd(grad_output, x, weight, bias, stride=stride, padding=padding,
                     dilation=dilation, groups=groups)
    if all(p == 0 for p in padding):
        return np.zeros((0,) + gx.shape[1:], gx.dtype), gw, gb  # bug 1: empty
    for axis, (n, k, s, p, d) in enumerate(zip(x.shape[2:], weight.shape[2:], stride,
                                               padding, dilation)):
        left = (n + 2 * p - d * (k - 1) - 1) % s
        if left:  # bug 2: the remainder rows lost
            gx = np.take(gx, range(n - left), axis=2 + axis)
    return gx, gw, gb


#: Two shape bugs of conv2d_backward: grad_input empty without padding, and short by
#: the stride's remainder.
shapes = _module(backward=_shapes_backward, dims=(2,))


# -- a read past the buffer: wrong, non-finite and history-dependent ----------------

#: what the last image's "next rows" read: the rows a previous call of the same shape
#: left behind; NaN (uninitialised memory) for a shape not seen before
_LEFT_BEHIND: dict[tuple, np.ndarray] = {}


def _read_past_backward(bwd, grad_output, x, weight, bias, *, stride, padding, dilation,
                        groups):
    gx, gw, gb = bwd(grad_output, x, weight, bias, stride=stride, padding=padding,
                     dilation=dilation, groups=groups)
    n, k, s, p, d = x.shape[2], weight.shape[2], stride[0], padding[0], dilation[0]
    left = (n + 2 * p - d * (k - 1) - 1) % s
    if not left:
        return gx, gw, gb
    gx = gx.copy()
    key = gx.shape
    behind = _LEFT_BEHIND.get(key, np.full(gx.shape[1:2] + (left,) + gx.shape[3:], np.nan))
    _LEFT_BEHIND[key] = gx[-1, :, :left].copy()
    for i in range(gx.shape[0]):  # the remainder rows read from the next image's start
        gx[i, :, n - left:] = gx[i + 1, :, :left] if i + 1 < gx.shape[0] else behind
    return gx, gw, gb


#: One cause in conv2d_backward: where the vertical stride leaves a remainder, the
#: remainder rows of grad_input come from past the image (the next image's rows, and
#: for the last image what an earlier call left, or NaN).
read_past = _module(backward=_read_past_backward, dims=(2,))


# -- one size check, three dimensions: its message names each call's shapes ---------

def _check_dilated_fits(x, weight, padding, dilation) -> None:
    """A size check that forgets the padding: the dilated kernel must fit the input
    alone. It raises with the shapes in its message, which differ per dimension."""
    extent = tuple(d * (k - 1) + 1 for k, d in zip(weight.shape[2:], dilation))
    if any(d > 1 for d in dilation) and any(e > n for e, n in zip(extent, x.shape[2:])):
        raise ValueError(f"dilated kernel {extent} does not fit input of shape "
                         f"{tuple(x.shape)}")


def _size_check_forward(fwd, x, weight, bias, *, padding, dilation, **kw):
    _check_dilated_fits(x, weight, padding, dilation)
    return fwd(x, weight, bias, padding=padding, dilation=dilation, **kw)


#: One cause in conv1d, conv2d and conv3d: a dilated kernel larger than the unpadded
#: input is refused, by a message with that call's shapes in it.
nd_size_check = _module(_size_check_forward)


# -- a scratch buffer reused without being cleared ----------------------------------

#: the output buffer of each shape, kept between calls (a workspace cache)
_SCRATCH: dict[tuple, np.ndarray] = {}


def _cached_forward(fwd, x, weight, bias, **kw):
    """The result accumulated into a cached buffer that is never zeroed: right on the
    first call of each shape, wrong on every later one."""
    y = fwd(x, weight, bias, **kw)
    key = (y.shape, y.dtype.str)
    buffer = _SCRATCH.setdefault(key, np.zeros(y.shape, y.dtype))
    buffer += y
    return buffer.copy()


#: One cause: results depend on the calls before (a cache not cleared).
dirty_cache = _module(_cached_forward, dims=(2,))


# -- garbage reads where the stride leaves a remainder, plus a deterministic cause ---

_UNINITIALISED = np.random.default_rng(0)


def _garbage_forward(fwd, x, weight, bias, *, stride, padding, dilation, groups):
    """The padded input added where it should be assigned (every output doubled
    wherever there is padding), and, where the stride leaves a remainder on the last
    axis, the last output column read from a buffer nothing initialised: what memory
    held, which is a right value on about half of the calls."""
    y = fwd(x, weight, bias, stride=stride, padding=padding, dilation=dilation,
            groups=groups)
    if any(padding):
        y = y + y
    n, k = x.shape[-1], weight.shape[-1]
    left = (n + 2 * padding[-1] - dilation[-1] * (k - 1) - 1) % stride[-1]
    if left and _UNINITIALISED.random() < 0.5:
        y = y.copy()
        y[..., -1] = _UNINITIALISED.standard_normal(y[..., -1].shape) * 1e3
    return y


#: Two causes of conv2d's forward: doubled wherever there is padding (deterministic),
#: and garbage in the last output column, on some calls, where the stride leaves a
#: remainder on the last axis.
garbage_and_padding = _module(_garbage_forward, dims=(2,))


# -- one wrong size, two symptoms: a wrong value on one side, a raise on the other ---

def _crop_backward(bwd, grad_output, x, weight, bias, *, stride, padding, dilation,
                   groups):
    """grad_input as the gradient of the padded input, cropped from an offset computed
    as the full correlation's (k - 1 - p, on the last axis) instead of p: right where
    k - 1 = 2p; a shifted window (wrong values) where the offset stays inside the
    padded gradient, an IndexError where it does not."""
    p, k = padding[-1], weight.shape[-1]
    pads = [(0, 0)] * (x.ndim - 1) + [(p, p)]
    _, gw, gb = bwd(grad_output, x, weight, bias, stride=stride, padding=padding,
                    dilation=dilation, groups=groups)
    padded = np.pad(x, pads)
    gx_padded, _, _ = bwd(grad_output, padded, weight, bias, stride=stride,
                          padding=tuple(padding[:-1]) + (0,), dilation=dilation,
                          groups=groups)
    start, n = k - 1 - p, x.shape[-1]
    gx = np.take(gx_padded, range(start, start + n), axis=-1, mode="raise")
    return gx, gw, gb


#: One cause of conv1d and conv2d_backward's grad_input: the crop offset k - 1 - p, not
#: p: wrong values where it lands inside the padded gradient, IndexError outside it.
crop_offset = _module(backward=_crop_backward, dims=(2,))
