"""Small known-buggy implementations, one per check: each is caught by that check only.

Each wraps the correct `conv_impl.einsum` and breaks one thing. They are
specs for the suite (``--impl tests/harness/known_bugs.py:<name>``) and
targets for `conv_harness.checks.registry.run_check` in the harness's own tests.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from conv_impl import einsum

ALL = ("float32_inside", "float16_accumulation", "wrong_forward", "wrong_grad_weight",
       "wrong_grad_bias", "not_repeatable")


def _conv2d_only(conv2d, conv2d_backward, **capabilities):
    return SimpleNamespace(conv2d=conv2d, conv2d_backward=conv2d_backward,
                           CAPABILITIES=capabilities or None)


def _float32_inside_conv2d(x, weight, bias, **kw):
    cast = lambda a: None if a is None else a.astype(np.float32)  # noqa: E731
    return einsum.conv2d(cast(x), cast(weight), cast(bias), **kw).astype(x.dtype)


#: Claims float64 but computes in float32: only the rounding bound catches it.
float32_inside = _conv2d_only(_float32_inside_conv2d, einsum.conv2d_backward,
                              dtypes=("float64",))


def _float16_accumulation_conv2d(x, weight, bias, *, stride, padding, dilation, groups):
    """float32 in, but every partial sum rounded to float16 (one kernel offset at a time)."""
    out = None
    kh, kw = weight.shape[2:]
    for i in range(kh):
        for j in range(kw):
            single = np.zeros_like(weight)
            single[:, :, i, j] = weight[:, :, i, j]
            part = einsum.conv2d(x, single, None, stride=stride, padding=padding,
                                 dilation=dilation, groups=groups).astype(np.float16)
            out = part if out is None else (out + part).astype(np.float16)
    if bias is not None:
        out = (out + bias.astype(np.float16)[:, None, None]).astype(np.float16)
    return out.astype(x.dtype)


#: float32 that accumulates in float16.
float16_accumulation = _conv2d_only(_float16_accumulation_conv2d, einsum.conv2d_backward,
                                    dtypes=("float32",))


def _wrong_forward(x, weight, bias, **kw):
    y = einsum.conv2d(x, weight, bias, **kw)
    y[..., -1] = 0  # forgets the last output column
    return y


wrong_forward = _conv2d_only(_wrong_forward, einsum.conv2d_backward)


def _wrong_grad_weight_backward(grad_output, x, weight, bias, **kw):
    gx, gw, gb = einsum.conv2d_backward(grad_output, x, weight, bias, **kw)
    return gx, gw[..., ::-1, ::-1].copy(), gb  # rotated kernel gradient


wrong_grad_weight = _conv2d_only(einsum.conv2d, _wrong_grad_weight_backward)


def _wrong_grad_bias_backward(grad_output, x, weight, bias, **kw):
    gx, gw, gb = einsum.conv2d_backward(grad_output, x, weight, bias, **kw)
    if gb is not None:
        gb = grad_output.mean(axis=(0, 2, 3)).astype(gb.dtype)  # mean instead of sum
    return gx, gw, gb


wrong_grad_bias = _conv2d_only(einsum.conv2d, _wrong_grad_bias_backward)

_calls = [0]


def _not_repeatable_conv2d(x, weight, bias, **kw):
    _calls[0] += 1
    y = einsum.conv2d(x, weight, bias, **kw)
    if _calls[0] % 2 == 0 and y.size:
        y.flat[0] = np.nextafter(y.flat[0], np.inf)  # one ulp off on every other call
    return y


#: Differs by one ulp between calls: within tolerance, so only `repeatable` sees it.
not_repeatable = _conv2d_only(_not_repeatable_conv2d, einsum.conv2d_backward)
