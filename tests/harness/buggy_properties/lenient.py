"""KNOWN-BUGGY: conv_impl.einsum that never raises (returns zeros of a guessed
shape instead), so the opt-in ``invalid`` check must fail on it."""

import numpy as np

from conv_impl import einsum as _einsum


def _lenient(name):
    fn = getattr(_einsum, name)

    def call(x, weight, bias, **kwargs):
        try:
            return fn(x, weight, bias, **kwargs)
        except Exception:  # noqa: BLE001 - the bug: swallow the argument check
            return np.zeros((x.shape[0], weight.shape[0], 1), dtype=x.dtype)
    return call


conv1d, conv2d, conv3d = (_lenient(f"conv{n}d") for n in (1, 2, 3))
