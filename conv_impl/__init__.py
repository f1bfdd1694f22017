"""Convolutions shipped with the harness, and the adapter for layer classes.

- `conv_impl.einsum`: the reference, np.einsum over strided windows, every op;
- `conv_impl.direct`: the direct definition (loops over kernel offsets);
- `conv_impl.im2col`: im2col + GEMM;
- `conv_impl.tutorial`: a KNOWN-BUGGY re-creation of a NumPy tutorial's layer;
- `LayerAdapter`: wraps a layer-style class into the harness's interface.
"""

from conv_impl.adapters import LayerAdapter, LayerSpec, UnsupportedProblemError, adapt_layer

__all__ = ["LayerAdapter", "LayerSpec", "UnsupportedProblemError", "adapt_layer"]
