"""Rescales its result by its largest magnitude and back: NaN (0/0) when it is all zeros."""
import numpy as np

from conv_impl.einsum import conv2d as _conv2d


def conv2d(x, weight, bias, **kwargs):
    y = _conv2d(x, weight, bias, **kwargs)
    scale = np.abs(y).max()
    return (y / scale) * scale
