"""Segfaults (reads address 0 through ctypes) when there is any padding."""
import ctypes

from conv_impl.einsum import conv2d as _conv2d


def conv2d(x, weight, bias, *, stride, padding, dilation, groups):
    if any(padding):
        ctypes.string_at(0)
    return _conv2d(x, weight, bias, stride=stride, padding=padding, dilation=dilation,
                   groups=groups)
