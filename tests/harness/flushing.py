"""Known implementations around the subnormal policy (contract section 2).

Flushing subnormal values to zero is allowed; flushing normal numbers is a
bug. Each wraps the correct `conv_impl.einsum`:

- ``flushes_subnormals``: what XLA and oneDNN do on CPU, inputs read as zero
  when subnormal (DAZ) and every partial sum and result below the smallest
  normal number set to zero (FTZ). It must pass every check.
- ``flushes_below_1e30``: float32 that zeroes every result below 1e-30, a
  normal number (2.4e-8 of float32's range above its smallest normal).
- ``flushes_normals``: zeroes results below 2**10 smallest normals of the
  dtype (1.2e-35 in float32), in every dtype.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from conv_impl import einsum

ALL = ("flushes_subnormals", "flushes_below_1e30", "flushes_normals")


def _flush(a: np.ndarray | None, below: float | None = None) -> np.ndarray | None:
    """``a`` with every value of magnitude below ``below`` (default: the
    smallest normal number of its dtype) set to zero."""
    if a is None:
        return None
    a = np.asarray(a)
    limit = float(np.finfo(a.dtype).smallest_normal) if below is None else below
    return np.where(np.abs(a) < limit, np.zeros((), dtype=a.dtype), a)


def _ftz_daz_forward(op: str):
    """Inputs flushed (DAZ); then the result summed one kernel offset at a time,
    every partial sum flushed (FTZ), as a blocked kernel with FTZ set does."""
    conv = getattr(einsum, op)

    def forward(x, weight, bias, **kw):
        x, weight, bias = _flush(x), _flush(weight), _flush(bias)
        kernel = weight.shape[2:]
        out = None
        for offset in np.ndindex(*kernel):
            single = np.zeros_like(weight)
            single[(Ellipsis, *offset)] = weight[(Ellipsis, *offset)]
            part = _flush(conv(x, single, None, **kw))
            out = part if out is None else _flush(out + part)
        if bias is not None:
            out = _flush(out + bias.reshape((1, -1) + (1,) * (out.ndim - 2)))
        return out
    forward.__name__ = op
    return forward


def _ftz_daz_backward(op: str):
    backward = getattr(einsum, f"{op}_backward")

    def flushed_backward(grad_output, x, weight, bias, **kw):
        results = backward(_flush(grad_output), _flush(x), _flush(weight), _flush(bias), **kw)
        return tuple(_flush(r) for r in results)
    flushed_backward.__name__ = f"{op}_backward"
    return flushed_backward


def _flushing(below: float | None, dtypes: tuple[str, ...] | None = None) -> SimpleNamespace:
    """Every operation of einsum, with results whose magnitude is below
    ``below`` (None: per dtype, 2**10 smallest normals) set to zero."""
    def limit(a: np.ndarray) -> float:
        return float(np.finfo(a.dtype).smallest_normal) * 2**10 if below is None else below

    def wrap(fn):
        def wrapped(*args, **kw):
            result = fn(*args, **kw)
            if isinstance(result, tuple):
                return tuple(None if r is None else _flush(r, limit(r)) for r in result)
            return _flush(result, limit(result))
        wrapped.__name__ = fn.__name__
        return wrapped

    functions = {name: wrap(getattr(einsum, name)) for name in _OPS_AND_BACKWARDS}
    return SimpleNamespace(**functions, CAPABILITIES={"dtypes": dtypes} if dtypes else None)


_OPS = tuple(f"conv{t}{n}d" for n in (1, 2, 3) for t in ("", "_transpose"))
_OPS_AND_BACKWARDS = tuple(name for op in _OPS for name in (op, f"{op}_backward"))

#: DAZ and FTZ: allowed, passes every check.
flushes_subnormals = SimpleNamespace(
    **{op: _ftz_daz_forward(op) for op in _OPS},
    **{f"{op}_backward": _ftz_daz_backward(op) for op in _OPS})

#: float32 results below 1e-30 become 0: a bug.
flushes_below_1e30 = _flushing(1e-30, dtypes=("float32",))

#: results below 2**10 smallest normals become 0, in every dtype: a bug.
flushes_normals = _flushing(None)
