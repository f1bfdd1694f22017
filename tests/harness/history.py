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


_compiled: set = set()


def _second_call_wrong(x, weight, bias, **kw):
    y = einsum.conv2d(x, weight, bias, **kw)
    key = (x.shape, weight.shape, x.dtype.str)
    if key in _compiled:  # "compiled" for this shape by the first call: wrong from then on
        y = y + 1
    _compiled.add(key)
    return y


#: First call of a shape right, every later call of that shape wrong (a kernel
#: compiled and cached by the first call, as tinygrad 0.14's backward was seen to).
second_call_wrong = SimpleNamespace(conv2d=_second_call_wrong)
