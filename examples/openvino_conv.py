"""Example: OpenVINO's CPU plugin as an implementation under test (forward only).

Each call builds a one-operation model (``Convolution`` or ``GroupConvolution``,
``ConvolutionBackpropData`` or ``GroupConvolutionBackpropData`` for the
transposed ones, then ``Add`` for the bias) with the input and the weight as
parameters, compiles it for the CPU (cached by shapes, dtype and geometry) and
infers. OpenVINO is an inference runtime: no backward functions. Install it
beside the project::

    python -m venv --system-site-packages /tmp/ov-venv
    /tmp/ov-venv/bin/pip install openvino
    /tmp/ov-venv/bin/python -m pytest --impl examples/openvino_conv.py --isolate --conv-budget 15

``--isolate``: its float64 convolution can kill the process. The CPU plugin's
own defaults are kept (inference precision, threads), as a user gets them;
``$CONV_OV_CONFIG`` (JSON, e.g. ``{"INFERENCE_NUM_THREADS": 1,
"INFERENCE_PRECISION_HINT": "bf16"}``) passes a configuration to
``compile_model``.
"""

from __future__ import annotations

import functools
import json
import os

import numpy as np
import openvino as ov
import openvino.opset13 as ops

CAPABILITIES = {"dtypes": ("float16", "float32", "float64")}

_CORE = ov.Core()
_CONFIG = json.loads(os.environ.get("CONV_OV_CONFIG", "{}"))


@functools.lru_cache(maxsize=256)
def _compiled(x_shape, w_shape, has_bias, dtype, stride, padding, output_padding, dilation,
              groups):
    x = ops.parameter(x_shape, dtype, name="x")
    w = ops.parameter(w_shape, dtype, name="w")
    params = [x, w]
    nd = len(stride)
    geometry = dict(strides=list(stride), pads_begin=list(padding), pads_end=list(padding),
                    dilations=list(dilation))
    transposed = output_padding is not None
    if groups > 1:
        # (G, C_out/G, C_in/G, *k) for a plain one, (G, C_in/G, C_out/G, *k) transposed
        shape = [groups, w_shape[0] // groups, w_shape[1], *w_shape[2:]]
        grouped = ops.reshape(w, ops.constant(np.array(shape, np.int64)), special_zero=False)
        y = (ops.group_convolution_backprop_data(x, grouped, output_padding=list(output_padding),
                                                 **geometry)
             if transposed else ops.group_convolution(x, grouped, **geometry))
    elif transposed:
        y = ops.convolution_backprop_data(x, w, output_padding=list(output_padding), **geometry)
    else:
        y = ops.convolution(x, w, **geometry)
    if has_bias:
        channels = w_shape[1] * groups if transposed else w_shape[0]
        b = ops.parameter([1, channels] + [1] * nd, dtype, name="b")
        params.append(b)
        y = ops.add(y, b)
    return _CORE.compile_model(ov.Model([y], params), "CPU", _CONFIG)


def _call(x, weight, bias, stride, padding, dilation, groups, output_padding=None):
    x, weight = np.asarray(x), np.asarray(weight)
    nd = x.ndim - 2
    compiled = _compiled(x.shape, weight.shape, bias is not None, x.dtype, tuple(stride),
                         tuple(padding), None if output_padding is None else tuple(output_padding),
                         tuple(dilation or (1,) * nd), int(groups))
    inputs = [np.ascontiguousarray(x), np.ascontiguousarray(weight)]
    if bias is not None:
        inputs.append(np.asarray(bias).reshape((1, -1) + (1,) * nd))
    return np.asarray(compiled(inputs)[0])


def _functions(nd: int):
    def conv(x, weight, bias, *, stride, padding, dilation=None, groups=1):
        return _call(x, weight, bias, stride, padding, dilation, groups)

    def conv_transpose(x, weight, bias, *, stride, padding, output_padding, dilation=None,
                       groups=1):
        return _call(x, weight, bias, stride, padding, dilation, groups, output_padding)
    conv.__name__, conv_transpose.__name__ = f"conv{nd}d", f"conv_transpose{nd}d"
    return {conv.__name__: conv, conv_transpose.__name__: conv_transpose}


for _nd in (1, 2, 3):
    globals().update(_functions(_nd))
