"""Pure-NumPy N-d convolution written with ``np.einsum`` over strided windows.

This is the project's own reference implementation of the harness contract
(see CONTRACT.md): ``conv{1,2,3}d``, ``conv_transpose{1,2,3}d`` and their
``_backward`` functions, with the semantics of
``torch.nn.functional.conv{1,2,3}d`` / ``conv_transpose{1,2,3}d``.

One core serves every number of spatial axes. Three primitives do all the
work (``_correlate``, ``_correlate_grad_weight``, ``_correlate_grad_input``);
a transposed convolution is the input gradient of an ordinary one, and its
backward pass reuses the forward primitives with the roles of the arrays
swapped.

Inputs are never written to: the zero-padded copy of the input is our own
array, and windows are read-only ``as_strided`` views of it built from its
real strides. float16 is computed in float32 and cast back; float32 and
float64 are computed in their own dtype.
"""

from __future__ import annotations

import itertools
from typing import Optional, Sequence

import numpy as np
from numpy.lib.stride_tricks import as_strided

__all__ = [
    "conv1d", "conv2d", "conv3d",
    "conv1d_backward", "conv2d_backward", "conv3d_backward",
    "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
    "conv_transpose1d_backward", "conv_transpose2d_backward",
    "conv_transpose3d_backward",
]

Ints = tuple[int, ...]

# einsum letters for up to three spatial axes: output positions and kernel taps
_POS = "xyz"
_TAP = "uvw"


# ----------------------------------------------------------------------------
# small helpers
# ----------------------------------------------------------------------------

def _compute_dtype(dtype: np.dtype) -> np.dtype:
    """float16 is accumulated in float32; other floats in their own dtype."""
    if dtype == np.float16:
        return np.dtype(np.float32)
    if dtype in (np.float32, np.float64):
        return np.dtype(dtype)
    raise ValueError(f"unsupported dtype {dtype}; expected float16, float32 or float64")


def _as_ints(value: Sequence[int] | int, nd: int, name: str) -> Ints:
    if isinstance(value, (int, np.integer)):
        return (int(value),) * nd
    out = tuple(int(v) for v in value)
    if len(out) != nd:
        raise ValueError(f"{name} must have {nd} entries, got {value!r}")
    return out


def _pad(x: np.ndarray, padding: Ints, dtype: np.dtype) -> np.ndarray:
    """A fresh zero-padded copy of ``x`` (never a view of the caller's array)."""
    nd = len(padding)
    shape = x.shape[:2] + tuple(s + 2 * p for s, p in zip(x.shape[2:], padding))
    xp = np.zeros(shape, dtype=dtype)
    inner = (slice(None), slice(None)) + tuple(
        slice(p, p + s) for s, p in zip(x.shape[2:], padding)
    )
    xp[inner] = x
    assert xp.ndim == nd + 2
    return xp


def _windows(xp: np.ndarray, out_size: Ints, kernel: Ints, stride: Ints,
             dilation: Ints) -> np.ndarray:
    """Read-only view (N, C, *out_size, *kernel) of every window of ``xp``.

    Built from ``xp``'s real strides. The last tap of the last window is at
    ``stride*(out-1) + dilation*(k-1)`` along each axis, which callers keep
    inside ``xp`` (the padded input is at least that long).
    """
    sp = xp.strides[2:]
    for o, k, s, d, n in zip(out_size, kernel, stride, dilation, xp.shape[2:]):
        if o > 0 and s * (o - 1) + d * (k - 1) >= n:
            raise AssertionError("window view would read outside the array")
    shape = xp.shape[:2] + tuple(out_size) + tuple(kernel)
    strides = (xp.strides[:2] + tuple(a * s for a, s in zip(sp, stride))
               + tuple(a * d for a, d in zip(sp, dilation)))
    return as_strided(xp, shape=shape, strides=strides, writeable=False)


def _out_size(size: Ints, kernel: Ints, stride: Ints, padding: Ints,
              dilation: Ints) -> Ints:
    return tuple((n + 2 * p - d * (k - 1) - 1) // s + 1
                 for n, k, s, p, d in zip(size, kernel, stride, padding, dilation))


# ----------------------------------------------------------------------------
# the three primitives (cross-correlation, as torch's "convolution")
# ----------------------------------------------------------------------------

def _correlate(x: np.ndarray, w: np.ndarray, stride: Ints, padding: Ints,
               dilation: Ints, groups: int, out_size: Ints) -> np.ndarray:
    """y[n, o, i] = sum_{c, k} xpad[n, c, i*stride + k*dilation] * w[o, c, k].

    ``x``: (N, C_in, *S); ``w``: (C_out, C_in/groups, *K); returns
    (N, C_out, *out_size) in ``x``'s dtype (the caller picks the compute dtype).
    """
    nd = x.ndim - 2
    n, c_in = x.shape[:2]
    c_out, cg = w.shape[:2]
    kernel = w.shape[2:]
    win = _windows(_pad(x, padding, x.dtype), out_size, kernel, stride, dilation)
    win = win.reshape((n, groups, cg) + win.shape[2:])
    wg = w.reshape((groups, c_out // groups, cg) + kernel)
    pos, tap = _POS[:nd], _TAP[:nd]
    y = np.einsum(f"ngc{pos}{tap},goc{tap}->ngo{pos}", win, wg, optimize=True)
    return y.reshape((n, c_out) + tuple(out_size))


def _correlate_grad_weight(x: np.ndarray, go: np.ndarray, stride: Ints,
                           padding: Ints, dilation: Ints, groups: int,
                           kernel: Ints) -> np.ndarray:
    """d(sum y*go)/dw for ``_correlate``: (C_out, C_in/groups, *kernel)."""
    nd = x.ndim - 2
    n, c_in = x.shape[:2]
    c_out = go.shape[1]
    cg = c_in // groups
    out_size = go.shape[2:]
    win = _windows(_pad(x, padding, x.dtype), out_size, kernel, stride, dilation)
    win = win.reshape((n, groups, cg) + win.shape[2:])
    gog = go.reshape((n, groups, c_out // groups) + out_size)
    pos, tap = _POS[:nd], _TAP[:nd]
    gw = np.einsum(f"ngc{pos}{tap},ngo{pos}->goc{tap}", win, gog, optimize=True)
    return gw.reshape((c_out, cg) + tuple(kernel))


def _correlate_grad_input(go: np.ndarray, w: np.ndarray, stride: Ints,
                          padding: Ints, dilation: Ints, groups: int,
                          in_size: Ints) -> np.ndarray:
    """d(sum y*go)/dx for ``_correlate``: (N, C_in, *in_size).

    col2im: for each kernel offset k, the contribution go @ w[..., k] lands on
    the padded input positions ``k*dilation + stride*i`` (a strided slice), so
    no work is spent on inserted zeros, and trailing input positions that no
    window reaches (a stride remainder) simply stay zero. Offsets are visited
    in a fixed order, so the result is deterministic.
    """
    nd = go.ndim - 2
    n, c_out = go.shape[:2]
    cg = w.shape[1]
    kernel = w.shape[2:]
    out_size = go.shape[2:]
    padded = tuple(s + 2 * p for s, p in zip(in_size, padding))
    gxp = np.zeros((n, groups, cg) + padded, dtype=go.dtype)
    gog = go.reshape((n, groups, c_out // groups) + tuple(out_size))
    wg = w.reshape((groups, c_out // groups, cg) + tuple(kernel))
    pos = _POS[:nd]
    for k in itertools.product(*(range(kk) for kk in kernel)):
        contrib = np.einsum(f"ngo{pos},goc->ngc{pos}", gog,
                            wg[(slice(None),) * 3 + k], optimize=True)
        dst = (slice(None),) * 3 + tuple(
            slice(kk * d, kk * d + s * (o - 1) + 1, s)
            for kk, d, s, o in zip(k, dilation, stride, out_size))
        gxp[dst] += contrib
    crop = (slice(None),) * 3 + tuple(slice(p, p + s) for s, p in zip(in_size, padding))
    return gxp[crop].reshape((n, groups * cg) + tuple(in_size))


# ----------------------------------------------------------------------------
# argument handling
# ----------------------------------------------------------------------------

def _prepare(nd: int, x, weight, bias, stride, padding, dilation, groups):
    x = np.asarray(x)
    weight = np.asarray(weight)
    if x.ndim != nd + 2:
        raise ValueError(f"expected input with {nd + 2} dimensions, got shape {x.shape}")
    if weight.ndim != nd + 2:
        raise ValueError(f"expected weight with {nd + 2} dimensions, got shape {weight.shape}")
    if x.dtype != weight.dtype:
        raise ValueError(f"input dtype {x.dtype} and weight dtype {weight.dtype} differ")
    cdt = _compute_dtype(x.dtype)
    stride = _as_ints(stride, nd, "stride")
    padding = _as_ints(padding, nd, "padding")
    dilation = _as_ints(dilation, nd, "dilation")
    if any(s <= 0 for s in stride):
        raise ValueError(f"stride must be positive, got {stride}")
    if any(d <= 0 for d in dilation):
        raise ValueError(f"dilation must be positive, got {dilation}")
    if any(p < 0 for p in padding):
        raise ValueError(f"padding must be non-negative, got {padding}")
    groups = int(groups)
    if groups <= 0:
        raise ValueError(f"groups must be positive, got {groups}")
    if bias is not None:
        bias = np.asarray(bias)
        if bias.dtype != x.dtype:
            raise ValueError(f"bias dtype {bias.dtype} differs from input dtype {x.dtype}")
    return x, weight, bias, cdt, stride, padding, dilation, groups


def _check_conv(x: np.ndarray, weight: np.ndarray, bias, stride: Ints,
                padding: Ints, dilation: Ints, groups: int) -> Ints:
    """Validate a forward convolution problem; return its output size."""
    c_in, c_out = x.shape[1], weight.shape[0]
    if c_in % groups or c_out % groups:
        raise ValueError(f"groups={groups} must divide in_channels={c_in} "
                         f"and out_channels={c_out}")
    if weight.shape[1] * groups != c_in:
        raise ValueError(f"weight shape {weight.shape} expects "
                         f"{weight.shape[1] * groups} input channels, got {c_in}")
    if bias is not None and bias.shape != (c_out,):
        raise ValueError(f"bias must have shape ({c_out},), got {bias.shape}")
    kernel = weight.shape[2:]
    for n, k, p, d in zip(x.shape[2:], kernel, padding, dilation):
        if d * (k - 1) + 1 > n + 2 * p:
            raise ValueError(
                f"kernel size {tuple(kernel)} (dilation {dilation}) is larger "
                f"than the padded input {tuple(s + 2 * q for s, q in zip(x.shape[2:], padding))}")
    return _out_size(x.shape[2:], kernel, stride, padding, dilation)


def _check_transpose(x: np.ndarray, weight: np.ndarray, bias, stride: Ints,
                     padding: Ints, output_padding: Ints, dilation: Ints,
                     groups: int) -> Ints:
    """Validate a transposed convolution problem; return its output size."""
    c_in = x.shape[1]
    if weight.shape[0] != c_in:
        raise ValueError(f"weight shape {weight.shape} expects {weight.shape[0]} "
                         f"input channels, got {c_in}")
    if c_in % groups:
        raise ValueError(f"groups={groups} must divide in_channels={c_in}")
    c_out = weight.shape[1] * groups
    if bias is not None and bias.shape != (c_out,):
        raise ValueError(f"bias must have shape ({c_out},), got {bias.shape}")
    for op, s, d in zip(output_padding, stride, dilation):
        if op < 0 or op >= max(s, d):
            raise ValueError(f"output_padding {output_padding} must be smaller "
                             f"than either stride {stride} or dilation {dilation}")
    kernel = weight.shape[2:]
    out = tuple((n - 1) * s - 2 * p + d * (k - 1) + op + 1
                for n, k, s, p, op, d in zip(x.shape[2:], kernel, stride, padding,
                                              output_padding, dilation))
    if any(o <= 0 for o in out):
        raise ValueError(f"transposed convolution output size {out} is not positive")
    return out


def _grad_bias(go: np.ndarray, bias) -> Optional[np.ndarray]:
    if bias is None:
        return None
    return go.sum(axis=(0,) + tuple(range(2, go.ndim)))


def _add_bias(y: np.ndarray, bias) -> np.ndarray:
    if bias is not None:
        y += bias.reshape((1, -1) + (1,) * (y.ndim - 2))
    return y


# ----------------------------------------------------------------------------
# the contract's entry points (one N-d implementation of each)
# ----------------------------------------------------------------------------

def _conv_nd(nd, x, weight, bias, stride, padding, dilation, groups):
    x, weight, bias, cdt, stride, padding, dilation, groups = _prepare(
        nd, x, weight, bias, stride, padding, dilation, groups)
    out_size = _check_conv(x, weight, bias, stride, padding, dilation, groups)
    y = _correlate(x.astype(cdt, copy=False), weight.astype(cdt, copy=False),
                   stride, padding, dilation, groups, out_size)
    y = _add_bias(y, None if bias is None else bias.astype(cdt, copy=False))
    return y.astype(x.dtype, copy=False)


def _conv_nd_backward(nd, grad_output, x, weight, bias, stride, padding,
                      dilation, groups):
    x, weight, bias, cdt, stride, padding, dilation, groups = _prepare(
        nd, x, weight, bias, stride, padding, dilation, groups)
    out_size = _check_conv(x, weight, bias, stride, padding, dilation, groups)
    go = np.asarray(grad_output)
    if go.shape != x.shape[:1] + weight.shape[:1] + out_size:
        raise ValueError(f"grad_output shape {go.shape} does not match the "
                         f"output shape {x.shape[:1] + weight.shape[:1] + out_size}")
    goc = go.astype(cdt, copy=False)
    xc = x.astype(cdt, copy=False)
    wc = weight.astype(cdt, copy=False)
    gx = _correlate_grad_input(goc, wc, stride, padding, dilation, groups, x.shape[2:])
    gw = _correlate_grad_weight(xc, goc, stride, padding, dilation, groups, weight.shape[2:])
    gb = _grad_bias(goc, bias)
    dt = x.dtype
    return (gx.astype(dt, copy=False), gw.astype(dt, copy=False),
            None if gb is None else gb.astype(dt, copy=False))


def _conv_transpose_nd(nd, x, weight, bias, stride, padding, output_padding,
                       dilation, groups):
    x, weight, bias, cdt, stride, padding, dilation, groups = _prepare(
        nd, x, weight, bias, stride, padding, dilation, groups)
    output_padding = _as_ints(output_padding, nd, "output_padding")
    out_size = _check_transpose(x, weight, bias, stride, padding, output_padding,
                                dilation, groups)
    # A transposed convolution is the input gradient of the convolution whose
    # weight (C_out_conv, C_in_conv/groups, *k) is this weight.
    y = _correlate_grad_input(x.astype(cdt, copy=False), weight.astype(cdt, copy=False),
                              stride, padding, dilation, groups, out_size)
    y = _add_bias(y, None if bias is None else bias.astype(cdt, copy=False))
    return y.astype(x.dtype, copy=False)


def _conv_transpose_nd_backward(nd, grad_output, x, weight, bias, stride, padding,
                                output_padding, dilation, groups):
    x, weight, bias, cdt, stride, padding, dilation, groups = _prepare(
        nd, x, weight, bias, stride, padding, dilation, groups)
    output_padding = _as_ints(output_padding, nd, "output_padding")
    out_size = _check_transpose(x, weight, bias, stride, padding, output_padding,
                                dilation, groups)
    go = np.asarray(grad_output)
    expect = x.shape[:1] + (weight.shape[1] * groups,) + out_size
    if go.shape != expect:
        raise ValueError(f"grad_output shape {go.shape} does not match the "
                         f"output shape {expect}")
    goc = go.astype(cdt, copy=False)
    xc = x.astype(cdt, copy=False)
    wc = weight.astype(cdt, copy=False)
    in_size = x.shape[2:]
    # The forward map is the adjoint of _correlate(., weight); so its input
    # gradient is _correlate itself (only the first in_size windows: with
    # output_padding >= stride there would be one more), and its weight
    # gradient is _correlate_grad_weight with grad_output as the "input".
    gx = _correlate(goc, wc, stride, padding, dilation, groups, in_size)
    gw = _correlate_grad_weight(goc, xc, stride, padding, dilation, groups,
                                weight.shape[2:])
    gb = _grad_bias(goc, bias)
    dt = x.dtype
    return (gx.astype(dt, copy=False), gw.astype(dt, copy=False),
            None if gb is None else gb.astype(dt, copy=False))


def conv1d(x, weight, bias, *, stride, padding, dilation, groups):
    """torch.nn.functional.conv1d in NumPy."""
    return _conv_nd(1, x, weight, bias, stride, padding, dilation, groups)


def conv2d(x, weight, bias, *, stride, padding, dilation, groups):
    """torch.nn.functional.conv2d in NumPy."""
    return _conv_nd(2, x, weight, bias, stride, padding, dilation, groups)


def conv3d(x, weight, bias, *, stride, padding, dilation, groups):
    """torch.nn.functional.conv3d in NumPy."""
    return _conv_nd(3, x, weight, bias, stride, padding, dilation, groups)


def conv1d_backward(grad_output, x, weight, bias, *, stride, padding, dilation, groups):
    """(grad_input, grad_weight, grad_bias) of conv1d; grad_bias None iff bias is."""
    return _conv_nd_backward(1, grad_output, x, weight, bias, stride, padding,
                             dilation, groups)


def conv2d_backward(grad_output, x, weight, bias, *, stride, padding, dilation, groups):
    """(grad_input, grad_weight, grad_bias) of conv2d; grad_bias None iff bias is."""
    return _conv_nd_backward(2, grad_output, x, weight, bias, stride, padding,
                             dilation, groups)


def conv3d_backward(grad_output, x, weight, bias, *, stride, padding, dilation, groups):
    """(grad_input, grad_weight, grad_bias) of conv3d; grad_bias None iff bias is."""
    return _conv_nd_backward(3, grad_output, x, weight, bias, stride, padding,
                             dilation, groups)


def conv_transpose1d(x, weight, bias, *, stride, padding, output_padding, dilation, groups):
    """torch.nn.functional.conv_transpose1d in NumPy."""
    return _conv_transpose_nd(1, x, weight, bias, stride, padding, output_padding,
                              dilation, groups)


def conv_transpose2d(x, weight, bias, *, stride, padding, output_padding, dilation, groups):
    """torch.nn.functional.conv_transpose2d in NumPy."""
    return _conv_transpose_nd(2, x, weight, bias, stride, padding, output_padding,
                              dilation, groups)


def conv_transpose3d(x, weight, bias, *, stride, padding, output_padding, dilation, groups):
    """torch.nn.functional.conv_transpose3d in NumPy."""
    return _conv_transpose_nd(3, x, weight, bias, stride, padding, output_padding,
                              dilation, groups)


def conv_transpose1d_backward(grad_output, x, weight, bias, *, stride, padding,
                              output_padding, dilation, groups):
    """(grad_input, grad_weight, grad_bias) of conv_transpose1d."""
    return _conv_transpose_nd_backward(1, grad_output, x, weight, bias, stride, padding,
                                       output_padding, dilation, groups)


def conv_transpose2d_backward(grad_output, x, weight, bias, *, stride, padding,
                              output_padding, dilation, groups):
    """(grad_input, grad_weight, grad_bias) of conv_transpose2d."""
    return _conv_transpose_nd_backward(2, grad_output, x, weight, bias, stride, padding,
                                       output_padding, dilation, groups)


def conv_transpose3d_backward(grad_output, x, weight, bias, *, stride, padding,
                              output_padding, dilation, groups):
    """(grad_input, grad_weight, grad_bias) of conv_transpose3d."""
    return _conv_transpose_nd_backward(3, grad_output, x, weight, bias, stride, padding,
                                       output_padding, dilation, groups)
