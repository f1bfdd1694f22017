"""Example: tinygrad's convolution as an implementation under test.

``Tensor.conv2d`` (which, despite its name, takes any number of spatial
axes) for the forward pass and ``Tensor.gradient`` of it for the backward
pass, on tinygrad's CPU device. tinygrad is an optional extra::

    pip install torch==2.13.0 -e '.[tinygrad]'
    pytest --impl examples/tinygrad_conv.py --conv-budget 60

Notes on what is being tested:

* The CPU device compiles each kernel with clang (``apt-get install
  clang``); without a compiler tinygrad raises "no usable devices".
* tinygrad compiles every new shape, from a fraction of a second to a few
  seconds per call, so give it a time budget (``--conv-budget``): a run over
  every operation and check without one takes about an hour.
* Every feature of the contract is passed on as tinygrad's own argument
  (``groups``, ``stride``, ``dilation``, per-axis symmetric ``padding``),
  in float16, float32 and float64: nothing is declared unsupported.
* Nothing is cached here between calls: a result that depends on earlier
  calls is tinygrad's own state.
"""

from __future__ import annotations

import numpy as np

from conv_impl.adapters import nd_functions  # noqa: E402
from tinygrad import Tensor

CAPABILITIES = {
    "dtypes": ("float16", "float32", "float64"),
    "dilation": True,
    "groups": True,
    "bias_none": True,
    "square": False,
    "contiguous_only": False,
}


def _tuple(v, nd: int, default=None) -> tuple[int, ...]:
    v = default if v is None else v
    v = tuple(int(i) for i in v)
    if len(v) != nd:
        raise ValueError(f"expected {nd} values, got {v}")
    return v


def _tensor(a, dtype):
    return None if a is None else Tensor(np.ascontiguousarray(a, dtype=dtype))


def _check(nd: int, name: str, x: np.ndarray, weight: np.ndarray) -> None:
    if x.ndim != nd + 2 or np.ndim(weight) != nd + 2:
        raise ValueError(f"{name} needs x and weight with {nd} spatial axes, "
                         f"got {x.shape} and {np.shape(weight)}")


def _forward(nd, x, weight, bias, stride, padding, dilation, groups):
    return x.conv2d(weight, bias, groups=int(groups), stride=_tuple(stride, nd),
                    dilation=_tuple(dilation, nd, (1,) * nd), padding=_tuple(padding, nd))


def _convnd(nd, x, weight, bias, stride, padding, dilation, groups):
    x = np.asarray(x)
    _check(nd, f"conv{nd}d", x, weight)
    dt = x.dtype
    y = _forward(nd, _tensor(x, dt), _tensor(weight, dt), _tensor(bias, dt),
                 stride, padding, dilation, groups)
    return np.asarray(y.numpy(), dtype=dt)


def _convnd_backward(nd, grad_output, x, weight, bias, stride, padding, dilation, groups):
    x = np.asarray(x)
    _check(nd, f"conv{nd}d_backward", x, weight)
    dt = x.dtype
    sources = [_tensor(x, dt), _tensor(weight, dt)]
    if bias is not None:
        sources.append(_tensor(bias, dt))
    y = _forward(nd, sources[0], sources[1], sources[2] if bias is not None else None,
                 stride, padding, dilation, groups)
    grads = y.gradient(*sources, gradient=_tensor(grad_output, dt))
    out = [np.asarray(g.numpy(), dtype=dt) for g in grads]
    return out[0], out[1], (out[2] if bias is not None else None)


# conv1d, conv2d, conv3d and their _backward: the contract's six functions
globals().update(nd_functions(_convnd, _convnd_backward))
