"""Winograd minimal filtering F(m, 3) over tiles, in N-d: the math of ``conv_impl.winograd``.

F(m, r) computes m outputs of an r-tap correlation from a tile of
alpha = m + r - 1 inputs with alpha multiplications (Lavin & Gray, "Fast
Algorithms for Convolutional Neural Networks", 2016):

    y = A^T [ (G g) * (B^T d) ]          (g: r taps, d: alpha inputs, y: m outputs)

In D dimensions the transforms act on every axis (tensor products), and the
sum over input channels happens between the transforms: for each of the
alpha^D transformed positions one GEMM (C_out x C_in) @ (C_in x tiles). That
is 2.25x (F(2,3)) or 4x (F(4,3)) fewer multiplications than a direct 3x3.

The gradients use the same transforms:

* weight gradient, the adjoint of y in g:  dg = G^T [ (B^T d) * (A dy) ]
  summed over images and tiles, the sum one GEMM per transformed position;
* input gradient: the correlation of grad_output with the kernel flipped and
  its channel axes swapped, padded by 2 - padding (stride 1, dilation 1), the
  same forward algorithm.

Everything here is stride 1, dilation 1, a kernel of 3 on every axis, in the
dtype of the weight (the caller casts float16 to float32). Images go a chunk
at a time (`CHUNK_BYTES` of transformed tiles), so the transformed arrays
never hold the whole batch.
"""

from __future__ import annotations

import math
from typing import Optional

import numpy as np

Ints = tuple[int, ...]

#: (B^T, G, A^T) of F(2, 3) and F(4, 3) (Lavin & Gray; points 0, +-1 and 0,
#: +-1, +-2, with the point at infinity)
TRANSFORMS: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {
    2: (np.array([[1, 0, -1, 0],
                  [0, 1, 1, 0],
                  [0, -1, 1, 0],
                  [0, 1, 0, -1]], dtype=np.float64),
        np.array([[1, 0, 0],
                  [0.5, 0.5, 0.5],
                  [0.5, -0.5, 0.5],
                  [0, 0, 1]], dtype=np.float64),
        np.array([[1, 1, 1, 0],
                  [0, 1, -1, -1]], dtype=np.float64)),
    4: (np.array([[4, 0, -5, 0, 1, 0],
                  [0, -4, -4, 1, 1, 0],
                  [0, 4, -4, -1, 1, 0],
                  [0, -2, -1, 2, 1, 0],
                  [0, 2, -1, -2, 1, 0],
                  [0, 4, 0, -5, 0, 1]], dtype=np.float64),
        np.array([[1 / 4, 0, 0],
                  [-1 / 6, -1 / 6, -1 / 6],
                  [-1 / 6, 1 / 6, -1 / 6],
                  [1 / 24, 1 / 12, 1 / 6],
                  [1 / 24, -1 / 12, 1 / 6],
                  [0, 0, 1]], dtype=np.float64),
        np.array([[1, 1, 1, 1, 1, 0],
                  [0, 1, -1, 2, -2, 0],
                  [0, 1, 1, 4, 4, 0],
                  [0, 1, -1, 8, -8, 1]], dtype=np.float64)),
}

#: bytes of one chunk's transformed input tiles
CHUNK_BYTES = 1 << 21


def applies(kernel: Ints, stride: Ints, dilation: Ints) -> bool:
    """Whether Winograd F(m, 3) computes this correlation: 3 taps on every axis,
    stride 1 and dilation 1."""
    return all(k == 3 for k in kernel) and all(s == 1 for s in stride) and \
        all(d == 1 for d in dilation)


def _along(a: np.ndarray, mat: np.ndarray, axes: int) -> np.ndarray:
    """``mat`` applied along each of the last ``axes`` axes of ``a`` (their order kept)."""
    for _ in range(axes):
        a = np.tensordot(a, mat, axes=([a.ndim - axes], [1]))
    return a


def _lead(a: np.ndarray, mat: np.ndarray, axes: int) -> np.ndarray:
    """``mat`` applied along each of the first ``axes`` axes of ``a`` (their order kept)."""
    for i in range(axes):
        a = np.moveaxis(np.tensordot(mat, a, axes=([1], [i])), 0, i)
    return a


def _tile_counts(out_size: Ints, m: int) -> Ints:
    return tuple(-(-o // m) for o in out_size)


def _images_per_chunk(n: int, c: int, tiles: Ints, alpha: int, itemsize: int) -> int:
    per_image = c * math.prod(tiles) * alpha ** len(tiles) * itemsize
    return max(1, min(n, CHUNK_BYTES // max(1, per_image)))


def _input_tiles(x: np.ndarray, n0: int, n1: int, padding: Ints, tiles: Ints, m: int,
                 bt: np.ndarray, groups: int, dtype: np.dtype) -> np.ndarray:
    """B^T d of every tile of images n0:n1, as (alpha^D, groups, C/groups, images * tiles)."""
    nd = len(tiles)
    alpha = bt.shape[0]
    c = x.shape[1]
    size = tuple(t * m + 2 for t in tiles)
    xp = np.zeros((n1 - n0, c) + size, dtype=dtype)
    src = tuple(slice(0, min(s, z - p)) for s, z, p in zip(x.shape[2:], size, padding))
    dst = tuple(slice(p, p + r.stop) for p, r in zip(padding, src))
    xp[(slice(None), slice(None)) + dst] = x[(slice(n0, n1), slice(None)) + src]
    st = xp.strides
    view = np.lib.stride_tricks.as_strided(
        xp, shape=xp.shape[:2] + tiles + (alpha,) * nd,
        strides=st[:2] + tuple(s * m for s in st[2:]) + st[2:], writeable=False)
    v = _along(view, bt, nd)                         # (n, c, T..., xi...)
    order = tuple(range(2 + nd, 2 + 2 * nd)) + (1, 0) + tuple(range(2, 2 + nd))
    v = v.transpose(order)                           # (xi..., c, n, T...)
    return np.ascontiguousarray(v).reshape(alpha ** nd, groups, c // groups, -1)


def _weight_tiles(w: np.ndarray, g: np.ndarray, groups: int) -> np.ndarray:
    """G g of every filter, as (alpha^D, groups, C_out/groups, C_in/groups)."""
    nd = w.ndim - 2
    u = _along(w, g.astype(w.dtype), nd)             # (o, cg, xi...)
    o, cg = w.shape[:2]
    u = u.reshape(groups, o // groups, cg, -1)
    return np.ascontiguousarray(u.transpose(3, 0, 1, 2))


def correlate(x: np.ndarray, w: np.ndarray, padding: Ints, groups: int, m: int,
              out: Optional[np.ndarray] = None) -> np.ndarray:
    """y = correlate(pad(x, padding), w) for 3-tap kernels, stride and dilation 1.

    ``x``: (N, C_in, *S) (any float dtype, read only); ``w``: (C_out, C_in/groups,
    3, ...) in the compute dtype. Returns (N, C_out, *out) in ``w``'s dtype, no bias.
    """
    bt, g, at = (t.astype(w.dtype) for t in TRANSFORMS[m])
    alpha = bt.shape[0]
    nd = w.ndim - 2
    n, c = x.shape[:2]
    o = w.shape[0]
    out_size = tuple(s + 2 * p - 2 for s, p in zip(x.shape[2:], padding))
    tiles = _tile_counts(out_size, m)
    u = _weight_tiles(w, g, groups)
    y = np.empty((n, o) + out_size, dtype=w.dtype) if out is None else out
    step = _images_per_chunk(n, c, tiles, alpha, w.dtype.itemsize)
    for n0 in range(0, n, step):
        n1 = min(n, n0 + step)
        v = _input_tiles(x, n0, n1, padding, tiles, m, bt, groups, w.dtype)
        mm = np.matmul(u, v)                         # (xi, groups, og, images * tiles)
        mm = mm.reshape((alpha,) * nd + (o, n1 - n0) + tiles)
        z = _lead(mm, at, nd)                        # (m..., o, n, T...)
        # (n, o, T1, m1, T2, m2, ...) -> (n, o, T1*m1, ...)
        order = (nd + 1, nd) + tuple(i for a in range(nd) for i in (nd + 2 + a, a))
        z = z.transpose(order).reshape((n1 - n0, o) + tuple(t * m for t in tiles))
        y[n0:n1] = z[(slice(None), slice(None)) + tuple(slice(0, s) for s in out_size)]
    return y


def input_grad(go: np.ndarray, w: np.ndarray, padding: Ints, groups: int,
               m: int) -> np.ndarray:
    """d/dx of sum(correlate(pad(x, padding), w) * go), for padding <= 2 on every axis:
    the correlation of ``go`` padded by 2 - padding with the kernel flipped and its
    channel axes swapped (within each group)."""
    nd = w.ndim - 2
    o, cg = w.shape[:2]
    og = o // groups
    flipped = w[(slice(None), slice(None)) + (slice(None, None, -1),) * nd]
    swapped = flipped.reshape((groups, og, cg) + w.shape[2:]).swapaxes(1, 2)
    swapped = np.ascontiguousarray(swapped).reshape((groups * cg, og) + w.shape[2:])
    return correlate(go, swapped, tuple(2 - p for p in padding), groups, m)


def weight_grad(x: np.ndarray, go: np.ndarray, padding: Ints, groups: int, m: int,
                dtype: np.dtype) -> np.ndarray:
    """d/dw of sum(correlate(pad(x, padding), w) * go), (C_out, C_in/groups, 3, ...):
    G^T [ (B^T d) * (A dy) ] summed over images and tiles, one GEMM per
    transformed position."""
    bt, g, at = (t.astype(dtype) for t in TRANSFORMS[m])
    alpha = bt.shape[0]
    nd = go.ndim - 2
    n, c = x.shape[:2]
    o = go.shape[1]
    out_size = go.shape[2:]
    tiles = _tile_counts(out_size, m)
    z = np.zeros((alpha ** nd, groups, o // groups, c // groups), dtype=dtype)
    step = _images_per_chunk(n, c, tiles, alpha, np.dtype(dtype).itemsize)
    for n0 in range(0, n, step):
        n1 = min(n, n0 + step)
        v = _input_tiles(x, n0, n1, padding, tiles, m, bt, groups, dtype)
        gp = np.zeros((n1 - n0, o) + tuple(t * m for t in tiles), dtype=dtype)
        gp[(slice(None), slice(None)) + tuple(slice(0, s) for s in out_size)] = go[n0:n1]
        # (n, o, T1, m, T2, m, ...) -> (n, o, T..., m...) -> A along the m axes
        gp = gp.reshape((n1 - n0, o) + tuple(i for t in tiles for i in (t, m)))
        order = (0, 1) + tuple(2 + 2 * a for a in range(nd)) + tuple(3 + 2 * a for a in range(nd))
        gh = _along(gp.transpose(order), at.T, nd)    # (n, o, T..., xi...)
        gh = gh.transpose(tuple(range(2 + nd, 2 + 2 * nd)) + (1, 0) + tuple(range(2, 2 + nd)))
        gh = np.ascontiguousarray(gh).reshape(alpha ** nd, groups, o // groups, -1)
        z += np.matmul(gh, v.swapaxes(-1, -2))
    z = z.transpose(1, 2, 3, 0).reshape((o, c // groups) + (alpha,) * nd)
    return _along(z, g.T, nd)
