"""Implementations whose results depend on earlier calls (for the history report).

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


_calls_of: dict = {}


def _nth_call_wrong(by_problem: bool):
    def conv2d(x, weight, bias, **kw):
        y = einsum.conv2d(x, weight, bias, **kw)
        key = (x.shape, weight.shape, x.dtype.str, bias is None, by_problem,
               tuple(sorted(kw.items())) if by_problem else ())
        _calls_of[key] = _calls_of.get(key, 0) + 1
        if _calls_of[key] >= 3:  # a pool of two buffers, recycled wrongly from then on
            y = y + 1
        return y
    return conv2d


#: The first two calls of a problem right, every later one wrong: a state built up over
#: several calls, keyed by the whole problem (as a compiled-kernel cache keyed by the
#: shapes and the static arguments is). Neither the same call twice nor another call
#: first shows it; the run's own record of its calls does.
third_call_wrong = SimpleNamespace(conv2d=_nth_call_wrong(by_problem=True))
#: The same keyed by the arrays' shapes only: the calls that built the state may be on
#: other problems (another stride, dilation or padding with the same shapes).
third_call_of_shapes_wrong = SimpleNamespace(conv2d=_nth_call_wrong(by_problem=False))


def _blocked_shape_cache(x, weight, bias, **kw):
    if weight.shape[1] < 2:  # one input channel: the direct path, no cache
        return einsum.conv2d(x, weight, bias, **kw)
    return _conv2d(x, weight, bias, **kw)


#: The weight cache keyed by shape, on the blocked path alone (two input channels or
#: more): a repeated call shows it, but not on the plainest problem.
blocked_shape_cache = SimpleNamespace(conv2d=_blocked_shape_cache)
