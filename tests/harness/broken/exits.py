"""Ends the process with os._exit(3) when bias is None (a library "handling" an error)."""
import os

from conv_impl.einsum import conv2d as _conv2d


def conv2d(x, weight, bias, **kwargs):
    if bias is None:
        os._exit(3)
    return _conv2d(x, weight, bias, **kwargs)
