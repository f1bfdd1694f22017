"""Winograd minimal filtering F(4,3) for 3x3 (3, 3x3x3) stride-1 layers.

The contract's twelve functions (conv1d ... conv_transpose3d_backward). Every
correlation with three taps on each kernel axis and stride 1 (any dilation
and padding) -- the forward pass, the input gradient and the weight
gradient, and so the transposed convolutions' too -- runs Winograd's F(4,3)
over tiles (``conv_impl._winograd``: transforms, then one GEMM per
transformed position); every other geometry is ``conv_impl.einsum``'s
engine. ``conv_impl.winograd:f2`` is the same with F(2,3).

float16 is computed in float32 and rounded once at the end, as in
``conv_impl.einsum``: F(4,3) amplifies rounding by up to about 10^2 in 2-d,
which in float16 (u = 4.9e-4) would be an error of several percent; in float32
it stays far below float16's own rounding. See docs/algorithms.md.
"""

from __future__ import annotations

from types import SimpleNamespace

from . import einsum as _einsum

#: for the harness: which algorithm, so that its rounding bound can allow for it
CAPABILITIES = {"algorithm": "winograd F(4,3)"}

globals().update(_einsum.entry_points("winograd"))
__all__ = sorted(_einsum.__all__)
#: the paths (Winograd, FFT or the engine's) the calls took, for the harness's events
harness_events = _einsum.harness_events

#: the same functions with F(2,3)
f2 = SimpleNamespace(**_einsum.entry_points("winograd-f2"),
                     CAPABILITIES={"algorithm": "winograd F(2,3)"},
                     harness_events=_einsum.harness_events)
