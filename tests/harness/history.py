"""An implementation whose results depend on earlier calls (for the history report).

conv2d caches its weight by shape: a later call with a weight of the same shape
but other values gets the cached one, as a kernel cache keyed by shape would.
"""

from __future__ import annotations

from types import SimpleNamespace

from conv_impl import einsum

_cache: dict = {}


def _conv2d(x, weight, bias, **kw):
    key = (weight.shape, weight.dtype.str)
    cached = _cache.setdefault(key, weight.copy())
    return einsum.conv2d(x, cached, bias, **kw)


shape_cache = SimpleNamespace(conv2d=_conv2d)
