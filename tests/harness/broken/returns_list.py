"""Returns a nested list of the right values (np.asarray makes it float64)."""
from conv_impl.einsum import conv2d as _conv2d


def conv2d(x, weight, bias, **kwargs):
    return _conv2d(x, weight, bias, **kwargs).tolist()
