"""Loops forever, in Python, for any stride other than 1 (`while pos != end`, stepping over end)."""
from conv_impl.einsum import conv2d as _conv2d


def conv2d(x, weight, bias, *, stride, padding, dilation, groups):
    pos, end = 0, 1
    while pos != end:
        pos += stride[0] * stride[1]
    return _conv2d(x, weight, bias, stride=stride, padding=padding, dilation=dilation,
                   groups=groups)
