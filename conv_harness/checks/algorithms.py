"""The rounding growth of the algorithms an implementation may declare (CAPABILITIES["algorithm"]).

A direct sum of K products, in any order, is within gamma(K) * sum|products|
of the exact result (conv_harness/checks/tolerance.py). Winograd's minimal
filtering F(m, r) is not a sum of the products: it transforms a tile of
alpha = m + r - 1 inputs and the filter, multiplies the transforms, and
transforms back,

    y = A^T [ (G g) * (B^T d) ]            (per axis; in D-d a tensor product)

and every transform rounds values that mix the whole tile. Bounding each
step the standard way (each transform row an inner product of length <= alpha,
the rounded constants of G one more unit roundoff each, the channel sum K
terms), an element of one tile's result is within

    gamma(K + 3*D*alpha) * sum_c |A^T| [ (|G| |g_c|) * (|B^T| |d_c|) ]

of the exact one. That is no function of the element's own products, so it
is turned into a normwise bound by Cauchy-Schwarz over channels and transformed
positions: with ||.|| the 2-norm, ||P||_F <= || |G| ||_2^D ||g|| and likewise for
B^T, an element's error is at most

    gamma(K + 3*D*alpha) * c^D * ||x|| * ||w||,   c = max|A^T| * || |G| ||_2 * || |B^T| ||_2

for the forward pass. The gradients' usual formulations give their own c:
the input gradient as the adjoint, B [ (G g) * (A dy) ] overlap-added, every
input in at most ceil(alpha/m) tiles per axis: ceil(alpha/m) * max|B^T| *
|| |G| || * || |A^T| ||; the weight gradient as G^T [ (B^T d) * (A dy) ] summed over
tiles, where the input tiles overlap: max|G| * || |B^T| || * || |A^T| || *
sqrt(ceil(alpha/m)). `growth` gives the weight gradient its own, and the
forward pass and the input gradient the larger of theirs (a transposed
convolution's forward pass is an input gradient, and its input gradient a
forward pass; an input gradient may also be computed as the forward pass
with the kernel flipped).

The constants per axis, for Lavin & Gray's matrices (the ones "winograd
F(2,3)" and "winograd F(4,3)" declare), forward / input / weight: F(2,3)
3.5 / 6.8 / 7.2, F(4,3) 91 / 141 / 201. Raised to the number of axes, F(4,3)'s
exceed 1/u in float16 already in 1-d and its weight gradient's in float32
in 3-d: there the bound allows any error as large as the norms' product and
the check cannot fail -- F(4,3) is not accurate in those dtypes, which is
why conv_impl.winograd computes float16 in float32.

An FFT's error is normwise to begin with (Higham, Accuracy and Stability of
Numerical Algorithms, sec. 24.1): the floor every implementation already gets
(`tolerance.normwise_floor`) is that bound, so "fft" adds nothing.
"""

from __future__ import annotations

import math

import numpy as np

#: (B^T, G, A^T) of Lavin & Gray's F(2,3) and F(4,3): what an implementation
#: that declares them uses (conv_impl/_winograd.py holds its own copy; a test
#: pins that they agree)
WINOGRAD: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {
    "winograd F(2,3)": (
        np.array([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]], dtype=float),
        np.array([[1, 0, 0], [1 / 2, 1 / 2, 1 / 2], [1 / 2, -1 / 2, 1 / 2], [0, 0, 1]]),
        np.array([[1, 1, 1, 0], [0, 1, -1, -1]], dtype=float)),
    "winograd F(4,3)": (
        np.array([[4, 0, -5, 0, 1, 0], [0, -4, -4, 1, 1, 0], [0, 4, -4, -1, 1, 0],
                  [0, -2, -1, 2, 1, 0], [0, 2, -1, -2, 1, 0], [0, 4, 0, -5, 0, 1]],
                 dtype=float),
        np.array([[1 / 4, 0, 0], [-1 / 6, -1 / 6, -1 / 6], [-1 / 6, 1 / 6, -1 / 6],
                  [1 / 24, 1 / 12, 1 / 6], [1 / 24, -1 / 12, 1 / 6], [0, 0, 1]]),
        np.array([[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0],
                  [0, 1, -1, 8, -8, 1]], dtype=float)),
}


def _spectral(a: np.ndarray) -> float:
    return float(np.linalg.norm(np.abs(a), 2))


def winograd_growth(algorithm: str) -> dict[str, float]:
    """c per axis of the module docstring for a declared Winograd algorithm, by result."""
    bt, g, at = WINOGRAD[algorithm]
    alpha, m = bt.shape[0], at.shape[0]
    overlap = -(-alpha // m)
    norm_g, norm_bt, norm_at = _spectral(g), _spectral(bt), _spectral(at)
    forward = float(np.abs(at).max()) * norm_g * norm_bt
    input_grad = overlap * float(np.abs(bt).max()) * norm_g * norm_at
    weight_grad = float(np.abs(g).max()) * norm_bt * norm_at * math.sqrt(overlap)
    return {"forward": forward, "input": input_grad, "weight": weight_grad}


def extra_terms(algorithm: str, dims: int) -> int:
    """Roundings on top of the result's own K that the algorithm's transforms add."""
    if algorithm not in WINOGRAD:
        return 0
    return 3 * dims * WINOGRAD[algorithm][0].shape[0]


def growth(algorithm: str, result: str, dims: int) -> float:
    """The factor of gamma(K + extra_terms) * ||a|| * ||b|| in the floor of ``result``
    (``y``, ``grad_input``, ``grad_weight``; ``grad_bias`` is a plain sum); 0 for a
    direct sum and for an FFT (whose bound is the generic normwise floor)."""
    if algorithm not in WINOGRAD or result == "grad_bias":
        return 0.0
    c = winograd_growth(algorithm)
    per_axis = c["weight"] if result == "grad_weight" else max(c["forward"], c["input"])
    return per_axis ** dims
