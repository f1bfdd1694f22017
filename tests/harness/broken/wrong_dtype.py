"""Always returns float64, whatever the inputs' dtype."""
import numpy as np

from conv_impl.einsum import conv2d as _conv2d


def conv2d(x, weight, bias, **kwargs):
    return _conv2d(x, weight, bias, **kwargs).astype(np.float64)
