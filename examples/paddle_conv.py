"""Example: PaddlePaddle's CPU convolutions as an implementation under test.

``paddle.nn.functional.conv1d`` / ``conv2d`` / ``conv3d`` (NCHW, torch's
weight layout) for the forward pass and ``paddle.grad`` of it for the
backward pass, on the CPU. PaddlePaddle is not an extra of this project (it
pins its own versions of a few packages); install it in a virtual
environment of its own that sees the project's::

    python -m venv --system-site-packages paddle-venv
    paddle-venv/bin/pip install paddlepaddle
    paddle-venv/bin/python -m pytest --impl examples/paddle_conv.py --conv-budget 15

Notes on what is being tested:

* PaddlePaddle 3.3's CPU build has no float16 convolution kernel (it raises
  "kernel ... not found" for the CPU backend), so ``CAPABILITIES`` declares
  float32 and float64 only; every other feature is passed on as Paddle's
  own argument.
"""

from __future__ import annotations

import numpy as np

from conv_impl.adapters import nd_functions  # noqa: E402
import paddle
import paddle.nn.functional as F

paddle.set_device("cpu")

CAPABILITIES = {
    "dtypes": ("float32", "float64"),
    "dilation": True,
    "groups": True,
    "bias_none": True,
    "square": False,
    "contiguous_only": False,
}

_CONV = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}


def _tuple(v, nd: int, default=None) -> list[int]:
    v = default if v is None else v
    v = [int(i) for i in v]
    if len(v) != nd:
        raise ValueError(f"expected {nd} values, got {v}")
    return v


def _tensor(a, dtype, grad: bool = False):
    if a is None:
        return None
    return paddle.to_tensor(np.ascontiguousarray(a, dtype=dtype), stop_gradient=not grad)


def _forward(nd, x, weight, bias, stride, padding, dilation, groups):
    if len(x.shape) != nd + 2:
        raise ValueError(f"conv{nd}d needs x of shape (N, C, {nd} spatial), got {x.shape}")
    return _CONV[nd](x, weight, bias, stride=_tuple(stride, nd), padding=_tuple(padding, nd),
                     dilation=_tuple(dilation, nd, (1,) * nd), groups=int(groups))


def _convnd(nd, x, weight, bias, stride, padding, dilation, groups):
    dt = np.asarray(x).dtype
    y = _forward(nd, _tensor(x, dt), _tensor(weight, dt), _tensor(bias, dt),
                 stride, padding, dilation, groups)
    return np.asarray(y.numpy(), dtype=dt)


def _convnd_backward(nd, grad_output, x, weight, bias, stride, padding, dilation, groups):
    dt = np.asarray(x).dtype
    sources = [_tensor(x, dt, True), _tensor(weight, dt, True)]
    if bias is not None:
        sources.append(_tensor(bias, dt, True))
    y = _forward(nd, sources[0], sources[1], sources[2] if bias is not None else None,
                 stride, padding, dilation, groups)
    grads = paddle.grad([y], sources, grad_outputs=[_tensor(grad_output, dt)])
    out = [np.asarray(g.numpy(), dtype=dt) for g in grads]
    return out[0], out[1], (out[2] if bias is not None else None)


# conv1d, conv2d, conv3d and their _backward: the contract's six functions
globals().update(nd_functions(_convnd, _convnd_backward))
