"""Squeezes its result: every axis of length 1 disappears from the shape."""
import numpy as np

from conv_impl.einsum import conv2d as _conv2d


def conv2d(x, weight, bias, **kwargs):
    return np.squeeze(_conv2d(x, weight, bias, **kwargs))
