"""Raises for any stride other than 1 (an implementation that never handled strides)."""
from conv_impl.einsum import conv2d as _conv2d


def conv2d(x, weight, bias, *, stride, padding, dilation, groups):
    if any(s != 1 for s in stride):
        raise NotImplementedError(f"stride {stride} is not supported yet\nsecond line")
    return _conv2d(x, weight, bias, stride=stride, padding=padding, dilation=dilation,
                   groups=groups)
