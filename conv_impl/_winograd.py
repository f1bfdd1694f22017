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

#: bytes of one chunk's transformed input tiles (64->64 32px float32 forward, load 9:
#: 1 MB 17.1 ms, 2 MB 20.0, 4 MB 37.4: past the L2 the GEMMs lose more than they gain)
CHUNK_BYTES = 1 << 20


def applies(kernel: Ints, stride: Ints, dilation: Ints) -> bool:
    """Whether Winograd F(m, 3) computes this correlation: 3 taps on every axis,
    stride 1 and dilation 1."""
    return all(k == 3 for k in kernel) and all(s == 1 for s in stride) and \
        all(d == 1 for d in dilation)


def _apply(mat: np.ndarray, a: np.ndarray, axes: int, out: Optional[np.ndarray] = None
           ) -> np.ndarray:
    """``mat`` applied along each of the first ``axes`` axes of the C-contiguous ``a``.

    Axis i is transformed by one broadcast ``np.matmul`` of ``mat`` with ``a``
    seen as (leading, size_i, rest): small GEMMs with long rows, no transposes.
    """
    for i in range(axes):
        lead = math.prod(a.shape[:i])
        rest = math.prod(a.shape[i + 1:])
        shape = a.shape[:i] + (mat.shape[0],) + a.shape[i + 1:]
        dst = out if (out is not None and i == axes - 1 and out.shape == shape) else None
        b = np.matmul(mat, a.reshape(lead, a.shape[i], rest),
                      out=None if dst is None else dst.reshape(lead, mat.shape[0], rest))
        a = b.reshape(shape)
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
    xp[(slice(None), slice(None)) + tuple(slice(p, p + s) for p, s in
                                          zip(padding, x.shape[2:]))] = x[n0:n1]
    st = xp.strides
    # the tiles, gathered as (alpha..., c, n, T...): the layout the transforms and
    # the GEMMs read without a transpose
    view = np.lib.stride_tricks.as_strided(
        xp, shape=(alpha,) * nd + (c, n1 - n0) + tiles,
        strides=st[2:] + (st[1], st[0]) + tuple(s * m for s in st[2:]), writeable=False)
    d = np.empty(view.shape, dtype=dtype)
    np.copyto(d, view)
    del xp
    v = _apply(bt, d, nd)
    return v.reshape(alpha ** nd, groups, c // groups, -1)


def _weight_tiles(w: np.ndarray, g: np.ndarray, groups: int) -> np.ndarray:
    """G g of every filter, as (alpha^D, groups, C_out/groups, C_in/groups)."""
    nd = w.ndim - 2
    o, cg = w.shape[:2]
    taps = np.ascontiguousarray(np.moveaxis(w, (0, 1), (-2, -1)))   # (3..., o, cg)
    u = _apply(g.astype(w.dtype), taps, nd)                          # (xi..., o, cg)
    return u.reshape(-1, groups, o // groups, cg)


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
    exact = all(t * m == s for t, s in zip(tiles, out_size))
    for n0 in range(0, n, step):
        n1 = min(n, n0 + step)
        v = _input_tiles(x, n0, n1, padding, tiles, m, bt, groups, w.dtype)
        mm = np.matmul(u, v)                         # (xi, groups, og, images * tiles)
        del v
        z = _apply(at, mm.reshape((alpha,) * nd + (o, n1 - n0) + tiles), nd)
        del mm                                       # z: (m..., o, n, T...)
        # (m..., o, n, T...) -> (n, o, T1, m1, T2, m2, ...)
        order = (nd + 1, nd) + tuple(i for a in range(nd) for i in (nd + 2 + a, a))
        z = z.transpose(order)
        full = (n1 - n0, o) + tuple(t * m for t in tiles)
        if exact:
            np.copyto(y[n0:n1].reshape(z.shape), z)
        else:
            y[n0:n1] = z.reshape(full)[(slice(None), slice(None)) +
                                       tuple(slice(0, s) for s in out_size)]
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
        # grad-output's tiles (no overlap), gathered as (m..., o, n, T...)
        gp = np.zeros((n1 - n0, o) + tuple(t * m for t in tiles), dtype=dtype)
        gp[(slice(None), slice(None)) + tuple(slice(0, s) for s in out_size)] = go[n0:n1]
        gp = gp.reshape((n1 - n0, o) + tuple(i for t in tiles for i in (t, m)))
        order = tuple(3 + 2 * a for a in range(nd)) + (1, 0) + tuple(2 + 2 * a for a in range(nd))
        gt = np.empty(tuple(gp.shape[i] for i in order), dtype=dtype)
        np.copyto(gt, gp.transpose(order))
        del gp
        gh = _apply(at.T, gt, nd).reshape(alpha ** nd, groups, o // groups, -1)
        z += np.matmul(gh, v.swapaxes(-1, -2))
    # (xi..., groups, og, cg) -> G^T along the xi axes -> (3..., o, cg) -> (o, cg, 3...)
    dw = _apply(g.T, z.reshape((alpha,) * nd + (o, c // groups)), nd)
    return np.ascontiguousarray(np.moveaxis(dw, (-2, -1), (0, 1)))
