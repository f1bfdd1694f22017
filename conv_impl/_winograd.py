"""Winograd minimal filtering F(m, 3) over tiles, in N-d: the math of ``conv_impl.winograd``.

F(m, r) computes m outputs of an r-tap correlation from a tile of
alpha = m + r - 1 inputs with alpha multiplications (Lavin & Gray, "Fast
Algorithms for Convolutional Neural Networks", 2016):

    y = A^T [ (G g) * (B^T d) ]          (g: r taps, d: alpha inputs, y: m outputs)

In D dimensions the transforms act on every axis (tensor products), and the
sum over input channels happens between the transforms: for each of the
alpha^D transformed positions one GEMM (tiles x C_in) @ (C_in x C_out), on a
channels-last layout (`_input_tiles`, `_store`). That
is 2.25x (F(2,3)) or 4x (F(4,3)) fewer multiplications than a direct 3x3.

The gradients use the same transforms:

* weight gradient, the adjoint of y in g:  dg = G^T [ (B^T d) * (A dy) ]
  summed over images and tiles, the sum one GEMM per transformed position;
* input gradient: the correlation of grad_output with the kernel flipped and
  its channel axes swapped, placed at 2d - padding, the same forward algorithm.

A dilation d needs no algorithm of its own: the taps of a dilated kernel read
only one residue class of positions (r, r + d, ...), so each residue class has
its own tiles, of every d-th position (`_tile_view`).

Everything here is stride 1, a kernel of 3 on every axis, in the dtype of the
weight (the caller casts float16 to float32). Images go a chunk at a time
(`CHUNK_BYTES` of transformed tiles: whole images or blocks of an image's
tile rows), so the transformed arrays never hold the whole batch.
"""

from __future__ import annotations

import math
import threading
from typing import Optional

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ._einsum_engine import TRANSPOSE_BYTES, _PlacedImagesNHWC

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

#: bytes of one chunk's transformed input tiles: whole images while they fit, else
#: blocks of an image's tile rows (`_chunks`). Measured with the work arrays kept
#: (forward, float32 / float64, ms, load 9.5; 256 kB / 512 kB / 1 MB / 2 MB):
#: 16 x 64->64 32px 7.2 6.7 6.9 7.5 / 14.6 12.7 11.6 12.3; 16 x 128->128 16px
#: 5.7 5.1 4.6 5.6 / 11.9 10.1 10.9 10.0; 8 x 64->64 16px 1.3 1.1 0.8 1.0 / 4.3 1.7
#: 1.6 1.9 (weight gradients within noise of each other)
CHUNK_BYTES = 1 << 20
#: the weight gradient's per-chunk products are summed in this many blocks of
#: transformed positions (its peak memory: one block's products beside the sum)
SUM_BLOCKS = 4


def applies(kernel: Ints, stride: Ints, dilation: Ints) -> bool:
    """Whether Winograd F(m, 3) computes this correlation: 3 taps on every axis and
    stride 1 (any dilation: one undilated correlation per residue class, `_phases`)."""
    return all(k == 3 for k in kernel) and all(s == 1 for s in stride)


class _Scratch:
    """Named work arrays, reused from chunk to chunk and from call to call (one set
    per thread and dtype, `_scratch`): a fresh array of a megabyte per step is
    fresh pages from the system (page faults and zeroing), which cost more than
    the memory-bound transforms that fill them (measured, 64->64 16x16 float32
    forward with 1 MB chunks: 4.3 ms with fresh arrays per call, 0.9 ms kept).
    They hold about five chunks' worth (``CHUNK_BYTES``) per thread and dtype
    until `release_scratch`."""

    def __init__(self, dtype: np.dtype):
        self.dtype = np.dtype(dtype)
        self.buffers: dict[str, np.ndarray] = {}

    def __call__(self, name: str, shape: Ints) -> np.ndarray:
        size = math.prod(shape)
        buf = self.buffers.get(name)
        if buf is None or buf.size < size:
            buf = self.buffers[name] = np.empty(size, dtype=self.dtype)
        return buf[:size].reshape(shape)


_KEPT = threading.local()


def _scratch(dtype: np.dtype) -> _Scratch:
    """This thread's work arrays for ``dtype``."""
    kept = _KEPT.__dict__.setdefault("by_dtype", {})
    return kept.setdefault(np.dtype(dtype), _Scratch(dtype))


def release_scratch() -> None:
    """Drop this thread's work arrays (the next call allocates them again)."""
    _KEPT.__dict__.pop("by_dtype", None)


def _apply(mat: np.ndarray, a: np.ndarray, axes: int, scratch: Optional[_Scratch] = None,
           names: tuple[str, str] = ("", "")) -> np.ndarray:
    """``mat`` applied along each of the first ``axes`` axes of the C-contiguous ``a``
    (axis i into ``scratch``'s array ``names[i % 2]`` if given: ``names[0]`` may
    not hold ``a``).

    Axis i is transformed by one broadcast ``np.matmul`` of ``mat`` with ``a``
    seen as (leading, size_i, rest): small GEMMs with long rows, no transposes.
    """
    for i in range(axes):
        lead = math.prod(a.shape[:i])
        rest = math.prod(a.shape[i + 1:])
        shape = a.shape[:i] + (mat.shape[0],) + a.shape[i + 1:]
        out = None if scratch is None else scratch(names[i % 2], (lead, mat.shape[0], rest))
        a = np.matmul(mat, a.reshape(lead, a.shape[i], rest), out=out).reshape(shape)
    return a


def _tile_counts(out_size: Ints, m: int, dilation: Ints) -> Ints:
    """Tiles per residue class and axis: the residues' outputs, ceil(out / d), by m."""
    return tuple(-(-(-(-o // d)) // m) for o, d in zip(out_size, dilation))


def _chunks(n: int, c: int, tiles: Ints, alpha: int, itemsize: int, budget: int
            ) -> tuple[int, list[tuple[int, int, int, int]]]:
    """(images placed at once, chunks (n0, n1, r0, r1)): images n0:n1, tile rows
    r0:r1 of the first axis, whose transformed tiles (of C channels: the larger
    side's, input or output, times the residue classes) take about
    ``budget`` bytes: whole images while one fits, else balanced blocks of one
    image's tile rows (at least one)."""
    row = c * math.prod(tiles[1:]) * alpha ** len(tiles) * itemsize
    if row * tiles[0] <= budget:
        step = max(1, min(n, budget // (row * tiles[0])))
        return step, [(n0, min(n, n0 + step), 0, tiles[0]) for n0 in range(0, n, step)]
    count = -(-tiles[0] // max(1, budget // row))
    rows = -(-tiles[0] // count)
    return 1, [(i, i + 1, r0, min(tiles[0], r0 + rows))
               for i in range(n) for r0 in range(0, tiles[0], rows)]


def _rows(a: np.ndarray, r0: int, r1: int, step: int, halo: int) -> np.ndarray:
    """Tile rows r0:r1 (first spatial axis) of a channels-last chunk (images, *size, C)
    whose tiles are ``step`` apart and ``halo`` longer: a view, C-contiguous for one
    image."""
    return a[:, r0 * step:r1 * step + halo]


def _tile_view(a: np.ndarray, lead: int, size: int, rest: int, tiles: int, m: int,
               alpha: int, d: int) -> np.ndarray:
    """(alpha, lead, d, tiles, rest) view of the overlapping tiles along the middle
    axis of the C-contiguous ``a`` seen as (lead, size, rest): tile t of residue r
    is the positions r + d * (m*t + j), j < alpha (d = 1: plain tiles m apart)."""
    it = a.itemsize
    return as_strided(a, shape=(alpha, lead, d, tiles, rest),
                      strides=(d * rest * it, size * rest * it, rest * it, d * m * rest * it, it),
                      writeable=False)


def _input_tiles(placed: np.ndarray, tiles: Ints, m: int, bt: np.ndarray,
                 dilation: Ints, scratch: _Scratch) -> np.ndarray:
    """B^T d of every tile of the channels-last images ``placed`` (n, *size, C)
    (size = dilation * (tiles * m + 2)), as (alpha^D, X, C), X = n * prod(dilation
    * tiles): the transformed positions (a_D, ..., a_1) first, then the tiles (n,
    (r_1, t_1), ..., (r_D, t_D)), channels last. With a dilation d each residue
    class r of an axis has its own tiles, of every d-th position (the taps of a
    dilated kernel read only their residue class).

    Axis by axis: the overlapping tiles along the axis are gathered as
    (alpha, before, residues, tiles, after) -- one copy whose runs are the whole
    rest of the array (at least the C channels), so it streams -- and B^T is one
    GEMM over the new leading alpha axis (a K = alpha product, memory-bound). The
    gathered axis ends up first, the tiles axis in place of the axis: after
    the last axis, the layout the GEMMs over the channels read as
    (tiles x C) matrices."""
    alpha = bt.shape[0]
    a = placed
    lead = placed.shape[0]
    for i, (t, d) in enumerate(zip(tiles, dilation)):
        size = placed.shape[1 + i]
        rest = math.prod(placed.shape[2 + i:])
        g = scratch("a", (alpha, lead, d, t, rest))
        np.copyto(g, _tile_view(a, lead, size, rest, t, m, alpha, d))
        a = np.matmul(bt, g.reshape(alpha, -1), out=scratch("b", (alpha, lead * d * t * rest)))
        lead *= alpha * d * t
    return a.reshape(alpha ** len(tiles), -1, placed.shape[-1])


def _weight_tiles(w: np.ndarray, g: np.ndarray, groups: int) -> np.ndarray:
    """G g of every filter, as (alpha^D, groups, C_in/groups, C_out/groups), the
    transformed positions in ``_input_tiles``' order (a_D, ..., a_1)."""
    nd = w.ndim - 2
    o, cg = w.shape[:2]
    # (k_D, ..., k_1, cg, o): the last kernel axis first, as _input_tiles orders them
    taps = np.ascontiguousarray(w.transpose(tuple(range(w.ndim - 1, 1, -1)) + (1, 0)))
    u = _apply(g.astype(w.dtype), taps, nd)                          # (a_D..a_1, cg, o)
    return np.ascontiguousarray(
        u.reshape(-1, cg, groups, o // groups).transpose(0, 2, 1, 3))


def _grouped_columns(a: np.ndarray, groups: int) -> np.ndarray:
    """(P, rows, C) -> (P, groups, rows, C/groups) view."""
    p, r, c = a.shape
    return a.reshape(p, r, groups, c // groups).transpose(0, 2, 1, 3)


def _store(z: np.ndarray, y: np.ndarray, tiles: Ints, m: int, dilation: Ints,
           scratch: _Scratch, name: str) -> None:
    """y (n, o, *out) <- the output tiles z (m_D, ..., m_1, n, (r_1, t_1), ..., (r_D,
    t_D), o) (output position r + d * (m*t + j)): the tiles copied into place
    channels-last (runs of o), then transposed into ``y`` a block of rows at a time
    (``TRANSPOSE_BYTES``: a whole image's transpose reads with a power-of-two
    stride and thrashes the cache)."""
    nd = len(tiles)
    n, o = y.shape[:2]
    full = tuple(d * t * m for t, d in zip(tiles, dilation))
    # (n, t_1, m_1, r_1, ..., t_D, m_D, r_D, o) as axes of z
    order = (nd,) + tuple(i for a in range(nd) for i in (nd + 2 + 2 * a, nd - 1 - a,
                                                          nd + 1 + 2 * a)) + (3 * nd + 1,)
    split = tuple(i for t, d in zip(tiles, dilation) for i in (d, t))
    src = z.reshape((m,) * nd + (n,) + split + (o,)).transpose(order)
    nhwc = scratch(name, (n,) + full + (o,))
    np.copyto(nhwc.reshape(src.shape), src)
    out_size = y.shape[2:]
    row = math.prod(out_size[1:]) * o * y.itemsize
    rows = max(1, TRANSPOSE_BYTES // max(1, row))
    crop = tuple(slice(0, s) for s in out_size[1:])
    back = (0, nd + 1) + tuple(range(1, nd + 1))
    for r0 in range(0, out_size[0], rows):
        r1 = min(out_size[0], r0 + rows)
        y[(slice(None), slice(None), slice(r0, r1))] = \
            nhwc[(slice(None), slice(r0, r1)) + crop].transpose(back)


def _correlate_placed(x: np.ndarray, w: np.ndarray, lo: Ints, y: np.ndarray, groups: int,
                      m: int, dilation: Ints) -> None:
    """y (N, C_out, *out) <- the correlation (stride 1) with ``w`` (taps ``dilation``
    apart) of ``x`` placed at offset ``lo`` among zeros (cropped where it does not fit).

    Channels-last throughout: a chunk of images is placed channels-last among
    zeros, its tiles transformed (``_input_tiles``), one GEMM per transformed
    position and group ((tiles x C_in/G) @ (C_in/G x C_out/G)), A^T along each
    axis, and the tiles copied into ``y`` (``_store``).
    """
    bt, g, at = (t.astype(w.dtype) for t in TRANSFORMS[m])
    alpha = bt.shape[0]
    nd = w.ndim - 2
    n, c = x.shape[:2]
    o = w.shape[0]
    tiles = _tile_counts(y.shape[2:], m, dilation)
    u = _weight_tiles(w, g, groups)                  # (xi, groups, cg, og)
    step, chunks = _chunks(n, max(c, o) * math.prod(dilation), tiles, alpha,
                           w.dtype.itemsize, CHUNK_BYTES)
    placed = _PlacedImagesNHWC(x, lo, _placed_size(tiles, m, dilation), step, w.dtype)
    scratch = _scratch(w.dtype)
    d1 = dilation[0]
    images = None
    for n0, n1, r0, r1 in chunks:
        if r0 == 0:
            images = placed[n0:n1]
        part = (r1 - r0,) + tiles[1:]
        v = _input_tiles(_rows(images, r0, r1, d1 * m, 2 * d1), part, m, bt, dilation,
                         scratch)                       # (xi, X, C)
        # three arrays in turn: v in b, its products in a, A^T into b and a by turns,
        # the channels-last output in whichever of them A^T did not end in
        mm = scratch("a", v.shape[:2] + (o,))
        np.matmul(_grouped_columns(v, groups), u, out=_grouped_columns(mm, groups))
        z = _apply(at, mm.reshape((alpha,) * nd + mm.shape[1:]), nd, scratch, ("b", "a"))
        _store(z, y[n0:n1, :, r0 * d1 * m:r1 * d1 * m], part, m, dilation, scratch,
               "ab"[nd % 2])


def _placed_size(tiles: Ints, m: int, dilation: Ints) -> Ints:
    """Extent of the zero box the tiles read: residue r's last tile reaches
    r + d * (m*t + m + 1)."""
    return tuple(d * (t * m + 2) for t, d in zip(tiles, dilation))


def correlate(x: np.ndarray, w: np.ndarray, padding: Ints, groups: int, m: int,
              dilation: Optional[Ints] = None) -> np.ndarray:
    """y = correlate(pad(x, padding), w) for 3-tap kernels at stride 1.

    ``x``: (N, C_in, *S) (any float dtype, read only); ``w``: (C_out, C_in/groups,
    3, ...) in the compute dtype. Returns (N, C_out, *out) in ``w``'s dtype, no bias."""
    nd = w.ndim - 2
    dilation = dilation or (1,) * nd
    out_size = tuple(s + 2 * p - 2 * d for s, p, d in zip(x.shape[2:], padding, dilation))
    y = np.empty((x.shape[0], w.shape[0]) + out_size, dtype=w.dtype)
    _correlate_placed(x, w, padding, y, groups, m, dilation)
    return y


def input_grad(go: np.ndarray, w: np.ndarray, in_size: Ints, padding: Ints, groups: int,
               m: int, dilation: Optional[Ints] = None) -> np.ndarray:
    """d/dx of sum(correlate(pad(x, padding), w) * go), (N, C_in, *in_size):
    dx[u] = sum_k go[u + p - k*d] w[k], the correlation of ``go`` placed at
    2d - p with the kernel flipped and its channel axes swapped (within each
    group)."""
    nd = w.ndim - 2
    dilation = dilation or (1,) * nd
    o, cg = w.shape[:2]
    og = o // groups
    flipped = w[(slice(None), slice(None)) + (slice(None, None, -1),) * nd]
    swapped = flipped.reshape((groups, og, cg) + w.shape[2:]).swapaxes(1, 2)
    swapped = np.ascontiguousarray(swapped).reshape((groups * cg, og) + w.shape[2:])
    gx = np.empty((go.shape[0], groups * cg) + tuple(in_size), dtype=w.dtype)
    _correlate_placed(go, swapped, tuple(2 * d - p for p, d in zip(padding, dilation)), gx,
                      groups, m, dilation)
    return gx


def _output_tiles(go: np.ndarray, tiles: Ints, m: int, dilation: Ints, at: np.ndarray,
                  scratch: _Scratch) -> np.ndarray:
    """A dy of every output tile of the channels-last grad-output chunk ``go``
    (n, *dilation * tiles * m, O) (zeros past the output), as (alpha^D, X, O) in
    ``_input_tiles``' order: the tiles gathered as (m_D, ..., m_1, n, (r_1, t_1),
    ..., (r_D, t_D), O) (runs of O), A (= (A^T)^T) along each leading axis."""
    nd = len(tiles)
    n, o = go.shape[0], go.shape[-1]
    # position r + d * (m*t + j) of an axis as its (t, j, r)
    split = go.reshape((n,) + tuple(i for t, d in zip(tiles, dilation) for i in (t, m, d))
                       + (o,))
    # (m_D, ..., m_1, n, r_1, t_1, ..., r_D, t_D, O) as axes of split
    order = tuple(3 * a + 2 for a in range(nd - 1, -1, -1)) + (0,) + \
        tuple(i for a in range(nd) for i in (3 * a + 3, 3 * a + 1)) + (3 * nd + 1,)
    gt = scratch("a", tuple(split.shape[i] for i in order))
    np.copyto(gt, split.transpose(order))
    gh = _apply(np.ascontiguousarray(at.T), gt, nd, scratch, ("c", "a"))  # not b: v's
    return gh.reshape(at.shape[1] ** nd, -1, o)


def weight_grad(x: np.ndarray, go: np.ndarray, padding: Ints, groups: int, m: int,
                dtype: np.dtype, dilation: Optional[Ints] = None) -> np.ndarray:
    """d/dw of sum(correlate(pad(x, padding), w) * go), (C_out, C_in/groups, 3, ...):
    G^T [ (B^T d) * (A dy) ] summed over images and tiles (of every residue class),
    one GEMM per transformed position and group ((C_in/G x tiles) @ (tiles x
    C_out/G)), channels-last as in `_correlate_placed`."""
    bt, g, at = (t.astype(dtype) for t in TRANSFORMS[m])
    alpha = bt.shape[0]
    nd = go.ndim - 2
    dilation = dilation or (1,) * nd
    n, c = x.shape[:2]
    o = go.shape[1]
    cg, og = c // groups, o // groups
    z = np.zeros((alpha ** nd, groups, cg, og), dtype=dtype)
    # the products of a block of transformed positions at a time, added into z: a
    # whole chunk's would be a second array of z's size (2.4 MB at 128 channels)
    block = max(1, z.shape[0] // SUM_BLOCKS)
    part = np.empty((block,) + z.shape[1:], dtype=dtype)
    scratch = _scratch(dtype)
    tiles = _tile_counts(go.shape[2:], m, dilation)
    # chunks large enough that the products added into z (its size per chunk)
    # do not outweigh the chunk's own work
    step, chunks = _chunks(n, max(c, o) * math.prod(dilation), tiles, alpha,
                           np.dtype(dtype).itemsize, max(CHUNK_BYTES, z.nbytes // 2))
    placed = _PlacedImagesNHWC(x, padding, _placed_size(tiles, m, dilation), step, dtype)
    placed_go = _PlacedImagesNHWC(go, (0,) * nd, tuple(d * t * m for t, d in
                                                        zip(tiles, dilation)), step, dtype)
    d1 = dilation[0]
    for n0, n1, r0, r1 in chunks:
        if r0 == 0:
            images, images_go = placed[n0:n1], placed_go[n0:n1]
        part_tiles = (r1 - r0,) + tiles[1:]
        v = _grouped_columns(_input_tiles(_rows(images, r0, r1, d1 * m, 2 * d1), part_tiles,
                                          m, bt, dilation, scratch), groups)
        gh = _grouped_columns(_output_tiles(_rows(images_go, r0, r1, d1 * m, 0), part_tiles,
                                            m, dilation, at, scratch), groups)
        for p0 in range(0, z.shape[0], block):
            p1 = min(z.shape[0], p0 + block)
            np.matmul(v[p0:p1].swapaxes(-1, -2), gh[p0:p1], out=part[:p1 - p0])
            z[p0:p1] += part[:p1 - p0]
    # (a_D..a_1, cg, o) -> G^T along the a axes -> (k_D..k_1, cg, o) -> (o, cg, k_1..k_D)
    dw = _apply(np.ascontiguousarray(g.T),
                z.transpose(0, 2, 1, 3).reshape((alpha,) * nd + (cg, o)), nd)
    return np.ascontiguousarray(dw.transpose((nd + 1, nd) + tuple(range(nd - 1, -1, -1))))
