"""Every other call's result is one unit in the last place off: within tolerance, not repeatable."""
import numpy as np

from conv_impl.einsum import conv2d as _conv2d

_calls = [0]


def conv2d(x, weight, bias, **kwargs):
    y = _conv2d(x, weight, bias, **kwargs)
    _calls[0] += 1
    return np.nextafter(y, np.inf) if _calls[0] % 2 == 0 else y
