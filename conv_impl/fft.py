"""Convolution by FFT (``np.fft.rfftn`` in the input's precision) for stride-1 layers.

The contract's twelve functions (conv1d ... conv_transpose3d_backward). Every
stride-1 correlation with more than one kernel tap -- the forward pass, the
input gradient and the weight gradient, any dilation, padding and groups,
and so the transposed convolutions' too -- is an FFT of the padded input
(``conv_impl._fft``), a batched complex GEMM over the channels per
frequency, and an inverse FFT: O(n log n) whatever the kernel size, which is
what pays for large kernels (``conv_impl.einsum`` takes it where its
measured table says so). Strided and 1x1 layers are ``conv_impl.einsum``'s
engine. float16 is computed in float32 and rounded once at the end: its
normwise error is then far below float16's (docs/algorithms.md).
"""

from __future__ import annotations

from . import einsum as _einsum

#: for the harness: which algorithm, so that its rounding bound can allow for it
CAPABILITIES = {"algorithm": "fft"}

globals().update(_einsum.entry_points("fft"))
__all__ = sorted(_einsum.__all__)
#: the paths (Winograd, FFT or the engine's) the calls took, for the harness's events
harness_events = _einsum.harness_events
