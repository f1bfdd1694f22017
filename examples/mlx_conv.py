"""Example: Apple MLX's convolutions (CPU build) as an implementation under test.

``mx.conv_general`` for conv1d/2d/3d and ``mx.conv_transpose1d/2d/3d`` for the
transposed ones, the backward passes by ``mx.vjp``. MLX is not a dependency of
the harness; install it beside the project (its CPU wheel on Linux)::

    python -m venv --system-site-packages /tmp/mlx-venv
    /tmp/mlx-venv/bin/pip install "mlx[cpu]"
    /tmp/mlx-venv/bin/python -m pytest --impl examples/mlx_conv.py --isolate --conv-budget 15

MLX is channels-last: inputs ``(N, *spatial, C)``, weights ``(C_out, *kernel,
C_in / groups)`` for a plain convolution and ``(C_out, *kernel, C_in)`` for a
transposed one; this module transposes to and from the contract's layouts.
MLX has no float64 convolution on the CPU; its transposed convolutions are
declared without groups (the layout of a grouped transposed weight is not
documented). ``mx.array`` refuses NumPy arrays with negative strides
("Cannot convert DLPack arrays with negative strides"), so every input is
copied to a C-contiguous array first. Nothing else is worked around: what MLX
gets wrong, the suite reports (examples/README.md). Some transposed problems
kill the process (dilation 3, kernel 3x3, stride 3x3 on a 1x2 input did in one
run): run it with ``--isolate``.
"""

from __future__ import annotations

import mlx.core as mx
import numpy as np

from conv_impl.adapters import nd_functions

CAPABILITIES = {
    "dtypes": ("float16", "float32"),
    **{f"conv_transpose{n}d{kind}": {"groups": False} for n in (1, 2, 3)
       for kind in ("", "_backward")},
}


def _mx(a: np.ndarray) -> mx.array:
    return mx.array(np.ascontiguousarray(a))


def _channels_last(a: np.ndarray) -> mx.array:
    return _mx(np.moveaxis(np.asarray(a), 1, -1))


def _channels_first(a: mx.array, dtype) -> np.ndarray:
    return np.moveaxis(np.array(a), -1, 1).astype(dtype, copy=False)


def _plain(nd: int, stride, padding, dilation, groups):
    def f(x, w, b):
        y = mx.conv_general(x, w, stride=list(stride), padding=list(padding),
                            kernel_dilation=list(dilation or (1,) * nd), groups=groups)
        return y if b is None else y + b
    return f


def _transposed(nd: int, stride, padding, output_padding, dilation):
    conv = {1: mx.conv_transpose1d, 2: mx.conv_transpose2d, 3: mx.conv_transpose3d}[nd]

    def unpack(v):
        return v[0] if nd == 1 else tuple(v)

    def f(x, w, b):
        y = conv(x, w, stride=unpack(stride), padding=unpack(padding),
                 dilation=unpack(dilation or (1,) * nd), output_padding=unpack(output_padding))
        return y if b is None else y + b
    return f


def _weight(w: np.ndarray, transposed: bool) -> mx.array:
    w = np.asarray(w)
    # plain (C_out, C_in/g, *k) -> (C_out, *k, C_in/g); transposed (C_in, C_out, *k) -> (C_out, *k, C_in)
    order = (1, *range(2, w.ndim), 0) if transposed else (0, *range(2, w.ndim), 1)
    return _mx(np.transpose(w, order))


def _weight_back(gw: mx.array, transposed: bool, dtype) -> np.ndarray:
    g = np.array(gw)
    order = (g.ndim - 1, 0, *range(1, g.ndim - 1)) if transposed else (0, g.ndim - 1,
                                                                        *range(1, g.ndim - 1))
    return np.transpose(g, order).astype(dtype, copy=False)


def _run(f, transposed, x, weight, bias):
    dt = np.asarray(x).dtype
    args = [_channels_last(x), _weight(weight, transposed)]
    y = f(*args, None if bias is None else _mx(bias))
    return _channels_first(y, dt)


def _run_backward(f, transposed, grad_output, x, weight, bias):
    dt = np.asarray(x).dtype
    primals = [_channels_last(x), _weight(weight, transposed)]
    if bias is not None:
        primals.append(_mx(bias))
    _, grads = mx.vjp(lambda *a: f(a[0], a[1], a[2] if len(a) > 2 else None), primals,
                      [_channels_last(grad_output)])
    return (_channels_first(grads[0], dt), _weight_back(grads[1], transposed, dt),
            None if bias is None else np.array(grads[2]).astype(dt, copy=False))


def _convnd(nd, x, weight, bias, stride, padding, dilation, groups):
    return _run(_plain(nd, stride, padding, dilation, groups), False, x, weight, bias)


def _convnd_backward(nd, grad_output, x, weight, bias, stride, padding, dilation, groups):
    return _run_backward(_plain(nd, stride, padding, dilation, groups), False, grad_output, x,
                         weight, bias)


# conv1d, conv2d, conv3d and their _backward: the contract's six functions
globals().update(nd_functions(_convnd, _convnd_backward))


def _transposed_functions(nd: int):
    def forward(x, weight, bias, *, stride, padding, output_padding, dilation=None, groups=1):
        return _run(_transposed(nd, stride, padding, output_padding, dilation), True, x,
                    weight, bias)

    def backward(grad_output, x, weight, bias, *, stride, padding, output_padding,
                 dilation=None, groups=1):
        return _run_backward(_transposed(nd, stride, padding, output_padding, dilation), True,
                             grad_output, x, weight, bias)
    forward.__name__, backward.__name__ = f"conv_transpose{nd}d", f"conv_transpose{nd}d_backward"
    return {forward.__name__: forward, backward.__name__: backward}


for _nd in (1, 2, 3):
    globals().update(_transposed_functions(_nd))
