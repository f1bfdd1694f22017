"""The benchmark's N-d module: conv1d, conv2d, conv3d and their backwards (six
functions) with two root causes, each behind three of them:

1. the forward of every dimension is off by one in its last element when groups > 1;
2. grad_weight of every dimension is off by one in its first element when a stride
   is above 1.

Everything else is the project's correct einsum implementation.
"""

from __future__ import annotations

from conv_impl import einsum


def _grouped_forward(forward):
    def conv(x, weight, bias, *, stride, padding, dilation, groups):
        y = forward(x, weight, bias, stride=stride, padding=padding, dilation=dilation,
                    groups=groups)
        if groups > 1:
            y = y.copy()
            y.flat[-1] += 1
        return y
    return conv


def _strided_backward(backward):
    def conv_backward(grad_output, x, weight, bias, *, stride, padding, dilation, groups):
        gx, gw, gb = backward(grad_output, x, weight, bias, stride=stride, padding=padding,
                              dilation=dilation, groups=groups)
        if any(s > 1 for s in stride):
            gw = gw.copy()
            gw.flat[0] += 1
        return gx, gw, gb
    return conv_backward


conv1d = _grouped_forward(einsum.conv1d)
conv2d = _grouped_forward(einsum.conv2d)
conv3d = _grouped_forward(einsum.conv3d)
conv1d_backward = _strided_backward(einsum.conv1d_backward)
conv2d_backward = _strided_backward(einsum.conv2d_backward)
conv3d_backward = _strided_backward(einsum.conv3d_backward)
