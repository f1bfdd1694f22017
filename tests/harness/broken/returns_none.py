"""Computes the result and forgets to return it."""
from conv_impl.einsum import conv2d as _conv2d


def conv2d(x, weight, bias, **kwargs):
    y = _conv2d(x, weight, bias, **kwargs)  # noqa: F841
