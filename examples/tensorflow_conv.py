"""Example: TensorFlow's CPU convolutions as an implementation under test.

``tf.nn.conv1d`` / ``conv2d`` / ``conv3d`` for the forward pass and a
``tf.GradientTape`` over it for the backward pass, in TensorFlow's native
channels-last layout (NWC, NHWC, NDHWC; weights WIO, HWIO, DHWIO).
TensorFlow is an optional extra (the CPU-only wheel, tensorflow-cpu)::

    pip install torch==2.13.0 -e '.[tensorflow]'
    pytest --impl examples/tensorflow_conv.py --conv-budget 60

Notes on what is being tested:

* The contract's symmetric zero padding is applied with ``tf.pad`` and the
  convolution then runs with ``padding="VALID"``: ``tf.nn.conv3d`` has no
  explicit padding, and one code path for all three keeps them alike.
* Grouped convolution is TensorFlow's implicit form: a weight with
  ``C_in // groups`` input channels.
* What TensorFlow 2.21's CPU kernels refuse is declared in ``CAPABILITIES``
  (each refusal checked by hand, with the exception it raises), so the
  suite never generates it and its summary lists it as not generated:

  - every backward (``Conv2DBackpropInput``, also used for 1-D): "Gradients
    for grouped convolutions are not supported on CPU", and dilation > 1
    only in float32 ("Current CPU implementations do not yet support
    dilation rates larger than 1" in float16 and float64);
  - ``tf.nn.conv3d``: no groups at all ("input and filter must have the
    same depth"), dilation only in float32 ("CPU implementation of Conv3D
    currently only supports dilated rates of 1").

* TensorFlow's x86 CPU kernels are oneDNN's unless ``TF_ENABLE_ONEDNN_OPTS=0``
  is set before TensorFlow is imported; they may flush subnormal results to
  zero, which the contract allows.
"""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # no start-up banner per process

import numpy as np  # noqa: E402

from conv_impl.adapters import nd_functions  # noqa: E402
import tensorflow as tf  # noqa: E402

_NO_GROUPS_DILATION_FLOAT32 = {"groups": False, "dilation": ("float32",)}

CAPABILITIES = {
    "dtypes": ("float16", "float32", "float64"),
    "dilation": True,
    "groups": True,
    "bias_none": True,
    "square": False,
    "contiguous_only": False,
    "conv1d_backward": dict(_NO_GROUPS_DILATION_FLOAT32),
    "conv2d_backward": dict(_NO_GROUPS_DILATION_FLOAT32),
    "conv3d": dict(_NO_GROUPS_DILATION_FLOAT32),
    "conv3d_backward": dict(_NO_GROUPS_DILATION_FLOAT32),
}



def _tuple(v, nd: int, default=None) -> tuple[int, ...]:
    v = default if v is None else v
    v = tuple(int(i) for i in v)
    if len(v) != nd:
        raise ValueError(f"expected {nd} values, got {v}")
    return v


def _channels_last(a: np.ndarray) -> np.ndarray:
    """(N, C, *spatial) -> (N, *spatial, C), or (O, I, *k) -> (*k, I, O)."""
    return np.moveaxis(a, 1, -1)


def _forward(nd, x, weight, bias, stride, padding, dilation):
    """y in channels-last layout; x, weight already channels-last tensors."""
    x = tf.pad(x, [[0, 0]] + [[p, p] for p in padding] + [[0, 0]])
    if nd == 1:
        y = tf.nn.conv1d(x, weight, stride=stride[0], padding="VALID", dilations=dilation[0])
    elif nd == 2:
        y = tf.nn.conv2d(x, weight, strides=(1,) + stride + (1,), padding="VALID",
                         dilations=(1,) + dilation + (1,))
    else:
        y = tf.nn.conv3d(x, weight, strides=(1,) + stride + (1,), padding="VALID",
                         dilations=(1,) + dilation + (1,))
    return y if bias is None else y + bias


def _inputs(nd, name, x, weight, bias, stride, padding, dilation, groups):
    x = np.asarray(x)
    if x.ndim != nd + 2:
        raise ValueError(f"{name} needs x of shape (N, C, {nd} spatial), got {x.shape}")
    weight = np.asarray(weight, dtype=x.dtype)
    if weight.ndim != nd + 2 or int(groups) < 1 or x.shape[1] != weight.shape[1] * int(groups):
        raise ValueError(f"{name}: weight {weight.shape} does not fit x {x.shape} "
                         f"with groups={groups}")
    if weight.shape[0] % int(groups):
        raise ValueError(f"{name}: {weight.shape[0]} output channels, groups={groups}")
    tensors = (tf.constant(_channels_last(x)),
               tf.constant(np.moveaxis(weight, (0, 1), (-1, -2))),
               None if bias is None else tf.constant(np.asarray(bias, dtype=x.dtype)))
    return x.dtype, tensors, (_tuple(stride, nd), _tuple(padding, nd),
                              _tuple(dilation, nd, (1,) * nd))


def _convnd(nd, x, weight, bias, stride, padding, dilation, groups):
    dtype, (x, weight, bias), static = _inputs(nd, f"conv{nd}d", x, weight, bias, stride,
                                               padding, dilation, groups)
    y = _forward(nd, x, weight, bias, *static)
    return np.ascontiguousarray(np.moveaxis(y.numpy(), -1, 1), dtype=dtype)


def _convnd_backward(nd, grad_output, x, weight, bias, stride, padding, dilation, groups):
    dtype, (x, weight, bias), static = _inputs(nd, f"conv{nd}d_backward", x, weight, bias,
                                               stride, padding, dilation, groups)
    g = tf.constant(_channels_last(np.asarray(grad_output, dtype=dtype)))
    sources = [x, weight] + ([] if bias is None else [bias])
    with tf.GradientTape() as tape:
        for s in sources:
            tape.watch(s)
        y = _forward(nd, x, weight, bias, *static)
    grads = tape.gradient(y, sources, output_gradients=g)
    gx = np.moveaxis(grads[0].numpy(), -1, 1)
    gw = np.moveaxis(grads[1].numpy(), (-1, -2), (0, 1))
    gb = None if bias is None else grads[2].numpy()
    return (np.ascontiguousarray(gx, dtype=dtype), np.ascontiguousarray(gw, dtype=dtype),
            None if gb is None else np.asarray(gb, dtype=dtype))


# conv1d, conv2d, conv3d and their _backward: the contract's six functions
globals().update(nd_functions(_convnd, _convnd_backward))
