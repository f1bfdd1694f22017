"""Convolution by FFT in N-d, in the input's precision: the math of ``conv_impl.fft``.

With the padded input of length L on an axis and the (dilated) kernel of
length kd = d*(k-1) + 1, the valid output has L - kd + 1 positions. On a
transform length L' >= L (`fast_length`: a product of 2, 3 and 5):

* forward: y[i] = sum_k xp[i + k] w[k] is the circular correlation of xp and
  w, spectrum X * conj(W); it wraps only for i > L' - kd, past the output;
* input gradient: dxp[u] = sum_i dy[i] w[u - i] is the circular convolution
  of dy and w, spectrum DY * W, of length (L - kd + 1) + kd - 1 = L <= L':
  no wrap;
* weight gradient: dw[k] = sum_i dy[i] xp[i + k], spectrum X * conj(DY),
  wraps only for k > L' - (L - kd + 1), past the kernel.

The kernel's spectrum and the weight gradient's taps are small DFTs (one
product per axis with an (L, k) matrix) rather than transforms of arrays
that are mostly zeros (`_kernel_spectrum`, `_kernel_taps`).

The channel sums are batched complex GEMMs over the frequencies (one
``np.matmul``). ``np.fft`` computes float32 in complex64 (NumPy >= 2.0):
the precision of the input. Stride 1 only (the caller delegates the rest).
"""

from __future__ import annotations

import numpy as np

Ints = tuple[int, ...]


def fast_length(n: int) -> int:
    """The smallest 2^a 3^b 5^c >= n (pocketfft's fast sizes)."""
    best = 1 << max(0, (n - 1).bit_length())
    p5 = 1
    while p5 < best:
        p35 = p5
        while p35 < best:
            q = p35
            while q < n:
                q *= 2
            best = min(best, q)
            p35 *= 3
        p5 *= 5
    return best


def _dilated(w: np.ndarray, dilation: Ints) -> np.ndarray:
    """The kernel with d - 1 zeros between its taps on every axis."""
    if all(d == 1 for d in dilation):
        return w
    size = tuple(d * (k - 1) + 1 for k, d in zip(w.shape[2:], dilation))
    out = np.zeros(w.shape[:2] + size, dtype=w.dtype)
    out[(slice(None), slice(None)) + tuple(slice(None, None, d) for d in dilation)] = w
    return out


def _lengths(x_size: Ints, padding: Ints) -> Ints:
    return tuple(fast_length(s + 2 * p) for s, p in zip(x_size, padding))


def _spectrum(a: np.ndarray, lengths: Ints, lo: Ints, dtype: np.dtype) -> np.ndarray:
    """rfftn of ``a`` placed at offset ``lo`` in zeros of ``lengths`` (last axes)."""
    nd = len(lengths)
    buf = np.zeros(a.shape[:2] + lengths, dtype=dtype)
    buf[(slice(None), slice(None)) + tuple(slice(q, q + s) for q, s in
                                           zip(lo, a.shape[2:]))] = a
    return np.fft.rfftn(buf, axes=tuple(range(2, 2 + nd)))


def _kernel_spectrum(w: np.ndarray, lengths: Ints, dtype: np.dtype) -> np.ndarray:
    """rfftn of the (dilated) kernel placed at the origin in zeros of ``lengths``,
    as a DFT of its few taps: per axis one product with the (L, k) matrix of
    e^(-2 pi i f k / L) (the last axis L // 2 + 1 frequencies). Far cheaper than
    C_out * C_in transforms of arrays that are mostly zeros."""
    nd = len(lengths)
    cplx = np.result_type(dtype, np.complex64)
    spec = w
    for i, (size, taps) in enumerate(zip(lengths, w.shape[2:])):
        freqs = np.arange(size // 2 + 1 if i == nd - 1 else size)
        dft = np.exp(-2j * np.pi * np.outer(freqs, np.arange(taps)) / size).astype(cplx)
        spec = np.tensordot(spec, dft, axes=([2], [1]))   # axis 2 done, its f appended
    return spec


def _kernel_taps(spec: np.ndarray, lengths: Ints, taps: Ints, dilation: Ints,
                 dtype: np.dtype) -> np.ndarray:
    """The taps ``k * dilation`` (k < taps) of the real array whose rfftn is ``spec``
    (A, B, *F): the inverse DFT at those positions only, per axis one small
    product; on the last axis the half spectrum's Hermitian weights (1 for
    frequency 0 and L/2, 2 between), as ``irfftn`` reads it."""
    nd = len(lengths)
    out = spec
    for i, (size, k, d) in enumerate(zip(lengths, taps, dilation)):
        freqs = np.arange(size // 2 + 1 if i == nd - 1 else size)
        idft = np.exp(2j * np.pi * np.outer(np.arange(k) * d, freqs) / size) / size
        if i == nd - 1:
            weights = np.full(len(freqs), 2.0)
            weights[0] = 1.0
            if size % 2 == 0:
                weights[-1] = 1.0
            idft = idft * weights
        out = np.tensordot(out, idft.astype(spec.dtype), axes=([2], [1]))
    return np.ascontiguousarray(out.real).astype(dtype, copy=False)


def _grouped(spec: np.ndarray, groups: int) -> np.ndarray:
    """(A, B, *freq) -> (*freq flattened, groups, A, B / groups)."""
    a, b = spec.shape[:2]
    s = spec.reshape(a, groups, b // groups, -1)
    return s.transpose(3, 1, 0, 2)


def _weight_grouped(spec: np.ndarray, groups: int) -> np.ndarray:
    """(C_out, C_in/groups, *freq) -> (*freq flattened, groups, C_out/groups, C_in/groups)."""
    o, cg = spec.shape[:2]
    return spec.reshape(groups, o // groups, cg, -1).transpose(3, 0, 1, 2)


def _ungrouped(prod: np.ndarray, freq: Ints) -> np.ndarray:
    """(F, groups, A, B/groups) -> (A, B, *freq)."""
    f, g, a, bg = prod.shape
    return prod.transpose(2, 1, 3, 0).reshape((a, g * bg) + freq)


def correlate(x: np.ndarray, w: np.ndarray, padding: Ints, dilation: Ints,
              groups: int) -> np.ndarray:
    """y = correlate(pad(x, padding), w) at stride 1, in ``w``'s dtype, no bias."""
    nd = w.ndim - 2
    wd = _dilated(w, dilation)
    lengths = _lengths(x.shape[2:], padding)
    out_size = tuple(s + 2 * p - k + 1 for s, p, k in zip(x.shape[2:], padding, wd.shape[2:]))
    xs = _spectrum(x, lengths, padding, w.dtype)               # (N, C, *F)
    ws = _kernel_spectrum(wd, lengths, w.dtype)                 # (O, Cg, *F)
    freq = xs.shape[2:]
    # Y[n, o] = sum_c X[n, c] conj(W[o, c]): per frequency and group (N, Cg) @ (Cg, Og)
    prod = np.matmul(_grouped(xs, groups), np.conj(_weight_grouped(ws, groups)).swapaxes(-1, -2))
    ys = _ungrouped(prod, freq)                                 # (N, O, *F)
    full = np.fft.irfftn(ys, s=lengths, axes=tuple(range(2, 2 + nd)))
    return np.ascontiguousarray(full[(slice(None), slice(None)) +
                                     tuple(slice(0, o) for o in out_size)]).astype(w.dtype, copy=False)


def input_grad(go: np.ndarray, w: np.ndarray, in_size: Ints, padding: Ints,
               dilation: Ints, groups: int) -> np.ndarray:
    """d/dx of sum(correlate(pad(x, padding), w) * go), (N, C_in, *in_size)."""
    nd = w.ndim - 2
    wd = _dilated(w, dilation)
    lengths = _lengths(in_size, padding)
    gs = _spectrum(go, lengths, (0,) * nd, w.dtype)             # (N, O, *F)
    ws = _kernel_spectrum(wd, lengths, w.dtype)                 # (O, Cg, *F)
    freq = gs.shape[2:]
    # DX[n, c] = sum_o DY[n, o] W[o, c]: per frequency and group (N, Og) @ (Og, Cg)
    prod = np.matmul(_grouped(gs, groups), _weight_grouped(ws, groups))
    full = np.fft.irfftn(_ungrouped(prod, freq), s=lengths, axes=tuple(range(2, 2 + nd)))
    return np.ascontiguousarray(full[(slice(None), slice(None)) + tuple(
        slice(p, p + s) for p, s in zip(padding, in_size))]).astype(w.dtype, copy=False)


def weight_grad(x: np.ndarray, go: np.ndarray, kernel: Ints, padding: Ints,
                dilation: Ints, groups: int, dtype: np.dtype) -> np.ndarray:
    """d/dw of sum(correlate(pad(x, padding), w) * go), (C_out, C_in/groups, *kernel)."""
    nd = len(kernel)
    lengths = _lengths(x.shape[2:], padding)
    xs = _spectrum(x, lengths, padding, dtype)                  # (N, C, *F)
    gs = _spectrum(go, lengths, (0,) * nd, dtype)               # (N, O, *F)
    freq = xs.shape[2:]
    n, c = x.shape[:2]
    o = go.shape[1]
    # DW[o, c] = sum_n conj(DY[n, o]) X[n, c]: per frequency and group (Og, N) @ (N, Cg)
    gg = np.conj(_grouped(gs, groups)).swapaxes(-1, -2)         # (F, G, Og, N)
    prod = np.matmul(gg, _grouped(xs, groups))                  # (F, G, Og, Cg)
    f, g, og, cg = prod.shape
    dws = prod.transpose(1, 2, 3, 0).reshape((o, cg) + freq)
    return _kernel_taps(dws, lengths, kernel, dilation, dtype)
