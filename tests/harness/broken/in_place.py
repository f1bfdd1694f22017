"""Scales its input in place (and undoes it in the result): the caller's x changes."""
from conv_impl.einsum import conv2d as _conv2d


def conv2d(x, weight, bias, **kwargs):
    x *= 2
    return _conv2d(x / 2, weight, bias, **kwargs)
