"""The fast core of ``conv_impl.einsum``: chunked BLAS contractions over
window copies of the padded input, four paths by the shape of the problem.

* Exact windows (every forward pass and weight gradient with more than
  one input channel per group, and the input gradient unless there are few;
  ``_exact_*``): the window copy of a chunk of whole images is one copy of
  an as_strided view of the chunk's zero-padded images (padded a chunk at a
  time, in a reused buffer), real output positions only, and one GEMM per
  image (``np.matmul``) writes the output. The input gradient is a
  stride-1 correlation per stride phase. float32 window copies of 32 rows
  or more are channels-last (``_exact_correlate_nhwc``: OpenBLAS's float32
  kernels are far faster on that GEMM orientation). See the section's
  comment for why.
* Flat polyphase layout (described below): the input gradient with few
  input channels per group (e.g. a first layer on RGB,
  ``_flat_input_grad``): a col2im scatter of contiguous slices, which is
  what pays when the gathering input gradient's GEMM would have a handful
  of rows; and the direct path's layout.
* Direct (one input channel per group: depthwise): per channel, its row
  of the flat layout shifted along the kernel's last axis (contiguous
  copies), one small BLAS product with the channel's weights giving partial
  sums, added at the other axes' offsets; no GEMM across channels.
* Pointwise (1x1 kernel, no padding): one batched ``np.matmul`` on the input.

The flat layout. A cross-correlation with stride ``s`` and dilation ``d``
reads, for output position ``i`` and kernel tap ``k``, the padded input at
``u = i*s + k*d``. Split every padded axis into its ``s`` phases
(``u = t*s + r``): tap ``k`` then reads phase ``r = (k*d) % s`` at
``t = i + (k*d) // s``, i.e. a *shift* of the output grid by a constant.
Lay each channel out as ``[phase][image][t_1 ... t_D]`` in one flat row and
compute the output on the phase grid's full width (positions whose trailing
coordinates fall past the real output are computed and thrown away): then
the window of every tap over a run of output positions is one contiguous
slice of that row, at a constant offset. So

* the direct path reads each tap's window as a slice of the layout;
* the input gradient (``_flat_input_grad``) is a convolution's im2col
  backwards: per chunk of output positions one GEMM for every tap's block
  (``np.matmul``), each block added onto its contiguous slice (col2im), so
  the stride's "inserted zeros" never exist;
* a stride remainder is never even copied: only the part of the padded
  input that some window reads is laid out, and the input gradient of the
  rest stays zero.

Grad-output values at the thrown-away positions are set to exactly zero, so
they add exactly nothing to the weight and input gradients.

Everything runs in a fixed order (chunks, groups, taps) on the calling
thread; BLAS splits a product across its threads the same way on every call
with the same thread count, so results are bit-identical from call to call.
Inputs are only ever read.
"""

from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass
from typing import Optional

import numpy as np
from numpy.lib.stride_tricks import as_strided

Ints = tuple[int, ...]

#: bytes of one chunk's window copy (im2col block); about the L2 cache
CHUNK_BYTES = 1 << 21
#: but at least this many output positions per chunk, for BLAS efficiency
MIN_POSITIONS = 256
#: bytes of one chunk's block of the flat layout's input gradient
#: (``_flat_input_grad``, ``Plan.chunks``), smaller than a window copy's:
#: its block and grad-output's chunk come on top of the whole input
#: gradient, and at 2 MB they made the first layer's peak memory 2.45x the
#: returned arrays (1.82x at 1 MB, where the forward pass's window copy is
#: the peak); 512 kB cost 10-17% on that layer's input gradient, 1 MB 0-7%
FLAT_CHUNK_BYTES = 1 << 20


@dataclass(frozen=True)
class Plan:
    """Geometry of one cross-correlation problem, computed once per shape."""

    n: int                 # batch
    c_in: int
    c_out: int
    groups: int
    in_size: Ints          # unpadded input spatial size
    kernel: Ints
    stride: Ints
    padding: Ints
    dilation: Ints
    out_size: Ints
    grid: Ints             # Q: phase-grid size per axis
    row: Ints              # R: flat stride of each grid axis (elements)
    per_image: int         # M = prod(grid)
    phases: tuple[Ints, ...]   # used phases (r_1..r_D), in layout order
    offsets: Ints          # flat read offset of each kernel tap (C order of taps)
    length: int            # elements per channel row, slack included
    chunks: tuple[tuple[int, int, int, int], ...]  # (n0, n1, i0, i1)
    direct: bool           # depthwise-style path (one input channel per group)
    pointwise: bool        # 1x1... kernel, no padding: a plain channel contraction
    dtype: np.dtype

    @property
    def cg(self) -> int:
        return self.c_in // self.groups

    @property
    def og(self) -> int:
        return self.c_out // self.groups

    @property
    def taps(self) -> int:
        return len(self.offsets)

    @property
    def exact(self) -> bool:
        """The forward pass and the weight gradient take the exact-window path
        (``_exact_*``), and so does the input gradient, gathering or
        scattering (``gather_input_grad``)."""
        return not self.direct and not self.pointwise

    @property
    def gather_input_grad(self) -> bool:
        """The exact-window path's input gradient gathers (window copies of
        grad-output, ``_exact_input_grad``) unless there are at most half as
        many input channels as output channels per group (2*C_in/G <=
        C_out/G): the gather copies C_out/G rows per tap and position, the
        flat layout's col2im scatter (``_flat_input_grad``) adds C_in/G.
        Measured (float64, 3x3): scatter 2-2.5x faster on 3->16 (a gather
        GEMM with a handful of rows), 4-13% faster on 64->128 at stride 1
        and stride 2, 25% on 32->128 at stride 2; even on 64->96 and on
        C_in = C_out at stride 2; gather 17-20% faster on 64->64 (dilated).
        """
        return 2 * self.cg > self.og

    @property
    def need(self) -> Ints:
        """Padded input extent that some window reads, per spatial axis."""
        return _window_extent(self.kernel, self.stride, self.dilation, self.out_size)

    @property
    def widest_chunk(self) -> int:
        """Positions of the longest chunk: the width of a per-chunk buffer."""
        return max(_chunk_geometry(self, c)[1] for c in self.chunks)


@functools.lru_cache(maxsize=256)
def make_plan(n: int, c_in: int, c_out: int, groups: int, in_size: Ints,
              kernel: Ints, stride: Ints, padding: Ints, dilation: Ints,
              out_size: Ints, dtype: np.dtype) -> Plan:
    """Lay out the phase grid, the taps' offsets and the chunks of a problem.

    The caller guarantees ``stride*(out-1) + dilation*(k-1) < in + 2*padding``
    on every axis.
    """
    nd = len(kernel)
    # only the first `need` padded positions of each axis are ever read
    need = tuple(s * (o - 1) + d * (k - 1) + 1
                 for s, o, d, k in zip(stride, out_size, dilation, kernel))
    grid = tuple(-(-m // s) for m, s in zip(need, stride))
    row = tuple(math.prod(grid[a + 1:]) for a in range(nd))
    per_image = math.prod(grid)
    block = n * per_image  # one phase of one channel

    taps = list(itertools.product(*(range(k) for k in kernel)))
    phase_of = [tuple((k * d) % s for k, d, s in zip(t, dilation, stride)) for t in taps]
    phases = tuple(sorted(set(phase_of)))
    index = {ph: i for i, ph in enumerate(phases)}
    offsets = tuple(
        index[ph] * block + sum(((k * d) // s) * r
                                for k, d, s, r in zip(t, dilation, stride, row))
        for t, ph in zip(taps, phase_of))
    slack = max(o - index[ph] * block for o, ph in zip(offsets, phase_of))
    length = len(phases) * block + slack

    cg = c_in // groups
    direct = cg == 1 and groups > 1  # (the direct path works on whole rows, not chunks)
    # a chunk's (taps * channels, positions) block about FLAT_CHUNK_BYTES
    cols = max(MIN_POSITIONS, FLAT_CHUNK_BYTES // (len(taps) * cg * np.dtype(dtype).itemsize))
    r1, o1 = row[0], out_size[0]
    span = o1 * r1  # flat extent of one image's output rows
    chunks = []
    if span >= cols:
        rows = max(1, cols // r1)
        count = -(-o1 // rows)
        rows = -(-o1 // count)  # balance the blocks
        for i in range(n):
            for i0 in range(0, o1, rows):
                chunks.append((i, i + 1, i0, min(o1, i0 + rows)))
    else:
        imgs = max(1, (cols - span) // per_image + 1)
        count = -(-n // imgs)
        imgs = -(-n // count)
        for n0 in range(0, n, imgs):
            chunks.append((n0, min(n, n0 + imgs), 0, o1))
    return Plan(n, c_in, c_out, groups, tuple(in_size), tuple(kernel), tuple(stride),
                tuple(padding), tuple(dilation), tuple(out_size), grid, row, per_image,
                phases, offsets, length, tuple(chunks), direct,
                all(k == 1 for k in kernel) and not any(padding), np.dtype(dtype))


# ----------------------------------------------------------------------------
# layout conversions
# ----------------------------------------------------------------------------

def _phase_slices(plan: Plan, phase: Ints) -> tuple[tuple[slice, ...], tuple[slice, ...]]:
    """Matching (grid, input) slices of one phase: grid t <-> input t*s + r - p."""
    grid_sl, in_sl = [], []
    for r, s, p, size, q in zip(phase, plan.stride, plan.padding, plan.in_size, plan.grid):
        lo = max(0, -(-(p - r) // s))
        hi = min(q, -(-(p + size - r) // s))
        if hi <= lo:
            return (), ()
        grid_sl.append(slice(lo, hi))
        start = lo * s + r - p
        in_sl.append(slice(start, start + (hi - lo - 1) * s + 1, s))
    return tuple(grid_sl), tuple(in_sl)


def _grid_view(plan: Plan, flat: np.ndarray) -> np.ndarray:
    """(C, phases, N, *grid) view of a (C, length) buffer."""
    body = flat[:, :len(plan.phases) * plan.n * plan.per_image]
    return body.reshape((flat.shape[0], len(plan.phases), plan.n) + plan.grid)


def to_phases(plan: Plan, x: np.ndarray, out: Optional[np.ndarray] = None) -> np.ndarray:
    """Padded input (N, C, *S) as (C, length) rows in the phase layout, in
    ``out`` or a new array (C is x's, any number of channels).

    Only the padding around each phase's copy of the input (and the slack
    after the last phase) is zeroed, not the whole array first."""
    flat = np.empty((x.shape[1], plan.length), dtype=plan.dtype) if out is None else out
    view = _grid_view(plan, flat)
    flat[:, view.shape[1] * plan.n * plan.per_image:] = 0  # the slack
    xt = x.transpose((1, 0) + tuple(range(2, x.ndim)))  # (C, N, *S)
    for i, ph in enumerate(plan.phases):
        g, s = _phase_slices(plan, ph)
        block = view[:, i]  # (C, N, *grid)
        if not g:
            block[...] = 0
            continue
        for axis, sl in enumerate(g):  # the padding before and after, axis by axis
            lead = (slice(None), slice(None)) + g[:axis]
            block[lead + (slice(0, sl.start),)] = 0
            block[lead + (slice(sl.stop, None),)] = 0
        block[(slice(None), slice(None)) + g] = xt[(slice(None), slice(None)) + s]
    return flat


def covers_input(plan: Plan) -> bool:
    """Whether some window reads every input position (no stride remainder
    left unread): the phases are disjoint, so count their positions."""
    pieces = [_phase_slices(plan, ph) for ph in plan.phases]
    covered = sum(math.prod(len(range(size)[sl]) for sl, size in zip(s, plan.in_size))
                  for g, s in pieces if g)
    return covered == math.prod(plan.in_size)


def from_phases(plan: Plan, flat: np.ndarray, out: Optional[np.ndarray] = None) -> np.ndarray:
    """Inverse of ``to_phases`` for a gradient: (N, C_in, *in_size), zero
    wherever no window reads; written into ``out`` if given (which must then
    hold zeros at those positions already)."""
    if out is None:
        out = (np.empty if covers_input(plan) else np.zeros)(
            (plan.n, plan.c_in) + plan.in_size, dtype=plan.dtype)
    view = _grid_view(plan, flat)
    ot = out.transpose((1, 0) + tuple(range(2, out.ndim)))
    for i, ph in enumerate(plan.phases):
        g, s = _phase_slices(plan, ph)
        if g:
            ot[(slice(None), slice(None)) + s] = view[(slice(None), i, slice(None)) + g]
    return out


def _chunk_geometry(plan: Plan, chunk: tuple[int, int, int, int]) -> tuple[int, int, int]:
    """(first flat position, number of positions, rows) of a chunk."""
    n0, n1, i0, i1 = chunk
    q0 = n0 * plan.per_image + i0 * plan.row[0]
    size = (n1 - n0 - 1) * plan.per_image + (i1 - i0) * plan.row[0]
    return q0, size, i1 - i0


def _valid(plan: Plan, buf: np.ndarray, chunk: tuple[int, int, int, int]) -> np.ndarray:
    """(C, images, rows, *out_size[1:]) view of the real outputs in a chunk's
    (C, positions) buffer (built from the buffer's real strides)."""
    n0, n1, i0, i1 = chunk
    it = buf.strides[1]
    shape = (buf.shape[0], n1 - n0, i1 - i0) + plan.out_size[1:]
    strides = (buf.strides[0], plan.per_image * it) + tuple(r * it for r in plan.row)
    return as_strided(buf, shape=shape, strides=strides)


def _out_block(arr: np.ndarray, chunk, channels: slice) -> np.ndarray:
    """(C, images, rows, ...) view of a chunk's block of an (N, C, *S) array."""
    n0, n1, i0, i1 = chunk
    blk = arr[n0:n1, channels, i0:i1]
    return blk.transpose((1, 0) + tuple(range(2, arr.ndim)))


# ----------------------------------------------------------------------------
# forward, weight gradient, input gradient
# ----------------------------------------------------------------------------

def _sampled(plan: Plan, a: np.ndarray) -> tuple:
    """Index of the input positions a pointwise (1x1) kernel reads."""
    return (slice(None), slice(None)) + tuple(
        slice(0, s * (o - 1) + 1, s) for s, o in zip(plan.stride, plan.out_size))


def _pointwise_operand(plan: Plan, a: np.ndarray, channels: int) -> np.ndarray:
    """(N, [G,] C/G, positions) view (or copy) of an (N, C, *S) array."""
    q = math.prod(a.shape[2:])
    a = a.astype(plan.dtype, copy=False)
    if plan.groups == 1:
        return a.reshape(plan.n, channels, q)
    return a.reshape(plan.n, plan.groups, channels // plan.groups, q)


def _pointwise_weight(plan: Plan, w: np.ndarray) -> np.ndarray:
    """The weight as ([G,] C_out/G, C_in/G), broadcast by ``np.matmul``
    along the images (and the groups axis left out for one group: NumPy
    would merge it by copying)."""
    return w.reshape(plan.c_out, plan.cg) if plan.groups == 1 else \
        w.reshape(plan.groups, plan.og, plan.cg)


def _pointwise_forward(plan: Plan, x: np.ndarray, w: np.ndarray,
                       bias: Optional[np.ndarray]) -> np.ndarray:
    """A 1x1 kernel without padding: y[n, o] = w[o, :] . x[n, :, sampled]; one
    batched ``np.matmul`` straight on the input (no layout conversion) into
    the output."""
    xs = _pointwise_operand(plan, x[_sampled(plan, x)], plan.c_in)
    y = np.empty((plan.n, plan.c_out) + plan.out_size, dtype=plan.dtype)
    np.matmul(_pointwise_weight(plan, w), xs, out=_pointwise_operand(plan, y, plan.c_out))
    if bias is not None:
        y += bias.reshape((-1,) + (1,) * len(plan.out_size))
    return y


def _pointwise_backward(plan: Plan, x: Optional[np.ndarray], w: np.ndarray,
                        go: np.ndarray, want_input: bool, want_weight: bool,
                        want_bias: bool):
    """Gradients of ``_pointwise_forward``; input positions the kernel does
    not read (stride > 1) get zero."""
    gos = _pointwise_operand(plan, go, plan.c_out)
    gx = gw = gb = None
    if want_bias:
        gb = np.einsum("noq->o", gos.reshape(plan.n, plan.c_out, -1))
    if want_weight:
        xs = _pointwise_operand(plan, x[_sampled(plan, x)], plan.c_in)
        per_image = np.matmul(gos, xs.swapaxes(-1, -2))  # (N, [G,] C_out/G, C_in/G)
        gw = per_image.sum(axis=0).reshape((plan.c_out, plan.cg) + plan.kernel)
    if want_input:
        wt = _pointwise_weight(plan, w).swapaxes(-1, -2)
        full = plan.out_size == plan.in_size  # every input position is read
        gx = (np.empty if full else np.zeros)((plan.n, plan.c_in) + plan.in_size,
                                               dtype=plan.dtype)
        if full:
            np.matmul(wt, gos, out=_pointwise_operand(plan, gx, plan.c_in))
        else:
            d = np.matmul(wt, gos)
            gx[_sampled(plan, gx)] = d.reshape((plan.n, plan.c_in) + plan.out_size)
    return gx, gw, gb


# ----------------------------------------------------------------------------
# the direct path: one input channel per group (depthwise)
# ----------------------------------------------------------------------------
#
# With one input channel per group a GEMM has a single row per tap, so
# BLAS does not pay and a window copy of every tap costs more than the
# arithmetic. Instead each tap is one multiply of a contiguous slice of the
# flat layout (the tap's window, see the module docstring) by the tap's
# weight, added into an accumulator: no window copy.
#
# One channel at a time, over all its positions (every image) in one row:
# each NumPy call is then a 1-D contiguous loop over a row that stays in
# cache (18 000 positions: 74 kB in float32), by a scalar. Broadcasting a
# (channels, 1) column of weights over (channels, positions) blocks instead
# runs NumPy's inner loop once per channel row, several times slower per
# element on cache-sized blocks, and on long blocks streams three arrays
# from L3: 0.72 vs 0.87-0.92 ms (float32), 1.29 vs 1.93 ms (float64) for the
# taps of a 16 x 32-channel 32x32 layer.

#: channels laid out at once by the direct path (input, grad-output)
DIRECT_CHANNELS = 8
#: channels per step of the direct forward pass (one NumPy call of each
#: step for this many channels' rows): on the benchmark's depthwise layer,
#: under load, 2 channels 0.89 vs 0.98 ms float32, 1.59 vs 1.79 float64 (1
#: channel); 4 channels 3-6% faster still, but their buffers (three rows of
#: the whole batch per channel) raise the layer's peak memory from 1.39x to
#: 1.64x the returned arrays
DIRECT_BLOCK = 2


def _direct_span(plan: Plan) -> int:
    """Positions of the flat layout that hold every real output (all images)."""
    return (plan.n - 1) * plan.per_image + plan.out_size[0] * plan.row[0]


def _direct_valid(plan: Plan, rows: np.ndarray) -> np.ndarray:
    """(C, N, *out_size) view of the real outputs in (C, span) rows."""
    return _valid(plan, rows, (0, plan.n, 0, plan.out_size[0]))


def _last_axis_split(plan: Plan) -> tuple[Ints, Ints]:
    """(base, delta): the flat offset of tap (rest, j) (``rest`` the index
    over the kernel's other axes, ``j`` along its last axis) is
    ``base[rest] + delta[j]``. The used phases are a product of per-axis
    sets, so a tap's phase index, and with it its offset, is a sum of
    per-axis terms."""
    k = plan.kernel[-1]
    off = plan.offsets
    base = tuple(off[r * k] for r in range(len(off) // k))
    delta = tuple(off[j] - off[0] for j in range(k))
    assert all(off[r * k + j] == base[r] + delta[j]
               for r in range(len(base)) for j in range(k))
    return base, delta


def _direct_forward(plan: Plan, x: np.ndarray, w: np.ndarray,
                    b: Optional[np.ndarray], y: np.ndarray) -> np.ndarray:
    """y[:, o] = sum_tap w[o, 0, tap] * window_tap(x[:, o // og]) (+ bias),
    a group (input channel) at a time, written into ``y``, in three steps
    on the group's row of the flat layout:

    * the row shifted by each tap offset along the kernel's last axis
      (``_last_axis_split``), copied into the rows of a (k_last, positions)
      buffer (contiguous copies of a cache-resident row);
    * one BLAS product with the group's (og * other taps, k_last) weights:
      for each output channel and each tap over the other axes, the row's
      sums along the last axis;
    * those partial sums added at their offsets (the other axes' taps).

    A 3x3 kernel copies 3 shifted rows instead of 9 tap windows, and its
    product writes 3 rows read by 2 adds: about half the memory traffic
    of copying every tap's window and one product with the (og, taps)
    weights (measured on the benchmark's depthwise layer, float32, with the
    layout below: 0.58-0.62 vs 0.68-0.73 ms).

    The input is laid out (``to_phases``) a block of ``DIRECT_CHANNELS``
    channels at a time, into one reused buffer: the whole batch's layout
    was the largest allocation of the depthwise layer (1.74x the returned
    arrays), and a block's layout is read from cache."""
    og = plan.og
    span = _direct_span(plan)
    base, delta = _last_axis_split(plan)
    nr, kl = len(base), len(delta)
    width = max(base) + span
    wg = np.ascontiguousarray(w.reshape(plan.groups, og * nr, kl))  # BLAS-ready rows
    per = min(plan.groups, DIRECT_CHANNELS)  # groups (input channels) per layout block
    sub = min(per, DIRECT_BLOCK)  # groups per product
    lay = np.empty((per, plan.length), dtype=plan.dtype)
    shifted = np.empty((sub, kl, width), dtype=plan.dtype)
    part = np.empty((sub, og * nr, width), dtype=plan.dtype)
    acc = np.empty((sub, og, span), dtype=plan.dtype)
    yt = y.transpose((1, 0) + tuple(range(2, y.ndim)))  # (C_out, N, *out)
    for l0 in range(0, plan.groups, per):
        l1 = min(plan.groups, l0 + per)
        xf = to_phases(plan, x[:, l0:l1], lay[:l1 - l0])
        for g0 in range(l0, l1, sub):
            g1 = min(l1, g0 + sub)
            nb = g1 - g0
            sh, pt = shifted[:nb], part[:nb]
            for j, d in enumerate(delta):
                sh[:, j] = xf[g0 - l0:g1 - l0, d:d + width]
            np.matmul(wg[g0:g1], sh, out=pt)
            pt = pt.reshape(nb, og, nr, width)
            if nr == 1:  # (1-d kernels) the partial sums are the result
                res = pt[:, :, 0, base[0]:base[0] + span]
            else:  # contiguous adds, then one copy into y (adding into y's
                # strided view directly ran 1.02 vs 0.82 ms on the benchmark's layer)
                res = acc[:nb]
                np.add(pt[:, :, 0, base[0]:base[0] + span], pt[:, :, 1, base[1]:base[1] + span],
                       out=res)
                for r in range(2, nr):
                    res += pt[:, :, r, base[r]:base[r] + span]
            valid = _direct_valid(plan, np.reshape(res, (nb * og, span), copy=False))
            out = yt[g0 * og:g1 * og]
            if b is None:
                out[...] = valid
            else:
                np.add(valid, b[g0 * og:g1 * og].reshape((-1,) + (1,) * (valid.ndim - 1)),
                       out=out)
    return y


def _direct_backward(plan: Plan, x: Optional[np.ndarray], w: np.ndarray,
                     go: np.ndarray, want_input: bool, want_weight: bool,
                     want_bias: bool):
    """Gradients of ``_direct_forward``, a block of channels of grad_output
    at a time laid out on the grid (zero at thrown-away positions), each
    channel in one row:

    * weight: per tap, row-wise dot products of the block's rows with the
      tap's windows of the input (a batched ``np.matmul``, BLAS dots, no
      copy: 0.46 vs 0.67 ms float32, 0.71 vs 1.39 ms float64, for c_einsum's
      'goq,gq->go' on the benchmark's depthwise layer);
    * input: per channel and tap, the row times the tap's weight added onto
      the tap's window of the input gradient's flat layout (col2im);
    * bias: the rows summed.
    """
    G, og, T = plan.groups, plan.og, plan.taps
    gx = None
    if want_input and og == 1 and all(s == 1 for s in plan.stride) and all(
            p <= d * (k - 1) for p, d, k in zip(plan.padding, plan.dilation, plan.kernel)):
        gx = _direct_input_grad_gather(plan, w, go)
        want_input = False
        if not (want_weight or want_bias):  # nothing left to lay grad-output out for
            return gx, None, None
    span = _direct_span(plan)
    wt = w.reshape(plan.c_out, T)
    gw = np.empty((plan.c_out, T), dtype=plan.dtype) if want_weight else None
    gb = np.empty(plan.c_out, dtype=plan.dtype) if want_bias else None
    per = max(1, DIRECT_CHANNELS // og)  # groups per block
    # the input's and the input gradient's layouts a block at a time (see
    # _direct_forward), the input gradient copied out after each block
    xlay = np.empty((min(per, G), plan.length), dtype=plan.dtype) if want_weight else None
    dlay = np.empty((min(per, G), plan.length), dtype=plan.dtype) if want_input else None
    if want_input:
        gx = (np.empty if covers_input(plan) else np.zeros)(
            (plan.n, plan.c_in) + plan.in_size, dtype=plan.dtype)
    # zeroed once: every block writes the same real positions
    gbuf = np.zeros((per * og, span), dtype=plan.dtype)
    tmp = np.empty(span, dtype=plan.dtype)
    got = go.transpose((1, 0) + tuple(range(2, go.ndim)))  # (C_out, N, *out)
    for g0 in range(0, G, per):
        g1 = min(G, g0 + per)
        o0, o1 = g0 * og, g1 * og
        rows = gbuf[:o1 - o0]
        _direct_valid(plan, rows)[...] = got[o0:o1]
        if want_bias:
            np.sum(rows, axis=1, out=gb[o0:o1])
        if want_weight:
            xf = to_phases(plan, x[:, g0:g1], xlay[:g1 - g0])
            for k, off in enumerate(plan.offsets):
                win = xf[:, off:off + span]
                gw[o0:o1, k] = np.matmul(rows.reshape(g1 - g0, og, span),
                                         win[:, :, None]).reshape(o1 - o0)
        if want_input:
            dxf = dlay[:g1 - g0]
            dxf[...] = 0
            for o in range(o0, o1):
                dst, wo = dxf[o // og - g0], wt[o]
                for k, off in enumerate(plan.offsets):
                    np.multiply(rows[o - o0], wo[k], out=tmp)
                    dst[off:off + span] += tmp
            from_phases(plan, dxf, gx[:, g0:g1])
    gwo = None if gw is None else gw.reshape((plan.c_out, 1) + plan.kernel)
    return gx, gwo, gb


def _direct_input_grad_gather(plan: Plan, w: np.ndarray, go: np.ndarray) -> np.ndarray:
    """Input gradient of a stride-1 depthwise correlation with one output
    channel per group: the correlation of grad-output, padded by
    d*(k-1) - p, with the flipped kernel, by ``_direct_forward`` (a layout
    copy of grad-output and one product per channel, instead of a multiply
    and an add per tap and channel onto the input gradient's layout and a
    copy back from it)."""
    pad = tuple(d * (k - 1) - p for p, d, k in zip(plan.padding, plan.dilation, plan.kernel))
    inv = make_plan(plan.n, plan.c_out, plan.c_in, plan.groups, plan.out_size, plan.kernel,
                    plan.stride, pad, plan.dilation, plan.in_size, plan.dtype)
    flipped = w[(slice(None), slice(None)) + (slice(None, None, -1),) * len(plan.kernel)]
    gx = np.empty((plan.n, plan.c_in) + plan.in_size, dtype=plan.dtype)
    return _direct_forward(inv, go, flipped, None, gx)


# ----------------------------------------------------------------------------
# the exact-window path
# ----------------------------------------------------------------------------
#
# The flat layout computes, and throws away, the padding columns of every
# row (13-27% of the GEMM work on 3x3-5x5 kernels over 16-32 wide images),
# copies the result into the output's layout, and with a stride first
# splits the input into phases. Here the window copy of a chunk of whole
# images takes only the real positions, as one copy of an as_strided view
# of the chunk's zero-padded images (one NumPy call per chunk and group;
# the chunk is padded into a reused buffer just before, see
# ``_PlacedImages``), and the contraction is one GEMM per image, all the
# chunk's in one batched ``np.matmul`` whose result is written straight
# into the output array (out=, C_out x positions per image); in float32,
# channels-last with the result transposed in (``_exact_correlate_nhwc``).
# The bias rides
# along as one more row of ones in the window copy. The weight gradient
# uses the same window copy. The input gradient of a stride-1 correlation
# is the stride-1 correlation of the padded grad-output with the flipped,
# transposed kernel, so it is the same code; with a stride, each phase of
# the input is such a correlation with the phase's taps only.

def _placement(lo: Ints, size: Ints, shape: Ints) -> Optional[tuple[tuple, tuple]]:
    """(destination, source) spatial index of an array of spatial ``shape``
    placed at offset ``lo`` in a ``size`` box (a negative offset, or a short
    ``size``, crops it); None if nothing of it lands in the box."""
    dst, src = [], []
    for l, n, s in zip(lo, size, shape):
        d0, d1 = max(0, l), min(n, l + s)
        if d1 <= d0:
            return None
        dst.append(slice(d0, d1))
        src.append(slice(d0 - l, d1 - l))
    return tuple(dst), tuple(src)


def _placed(a: np.ndarray, lo: Ints, size: Ints, dtype: np.dtype) -> np.ndarray:
    """(N, C, *size) zeros with ``a`` (N, C, *S) placed at offset ``lo``."""
    out = np.zeros(a.shape[:2] + tuple(size), dtype=dtype)
    index = _placement(lo, size, a.shape[2:])
    if index is not None:
        out[(slice(None), slice(None)) + index[0]] = a[(slice(None), slice(None)) + index[1]]
    return out


class _PlacedImages:
    """Images of an (N, C, *S) array, a chunk at a time, placed at offset
    ``lo`` in zero boxes of spatial ``size`` (the zero-padded input, or a
    grad-output placed for the input gradient): ``placed[n0:n1]`` is the
    (n1 - n0, C, *size) placed chunk, valid until the next one is asked for.

    One buffer of ``images`` boxes, zeroed once: every chunk writes the same
    region of it, so the rest stays zero. The chunk's copy is cache-sized
    and is read right away by the window copy (a whole padded copy of the
    array was a memory-bound pass of its own, and a large allocation).
    """

    def __init__(self, a: np.ndarray, lo: Ints, size: Ints, images: int, dtype: np.dtype):
        self.a = a
        self.buf = np.zeros((images, a.shape[1]) + tuple(size), dtype=dtype)
        self.index = _placement(lo, size, a.shape[2:])

    def __getitem__(self, images: slice) -> np.ndarray:
        """(images, C, *size): a contiguous run of images placed."""
        out = self.buf[:images.stop - images.start]
        if self.index is not None:
            dst, src = self.index
            out[(slice(None), slice(None)) + dst] = self.a[(images, slice(None)) + src]
        return out


def _exact_images(rows: int, positions: int, itemsize: int, n: int) -> int:
    """Images per chunk: the window copy about CHUNK_BYTES, at least one."""
    return max(1, min(n, CHUNK_BYTES // (rows * positions * itemsize)))


def _leading_dimension(n: int, itemsize: int) -> int:
    """A row length of at least ``n`` elements whose byte size is an odd
    multiple of 64 (a cache line).

    A matrix whose rows are a multiple of 4 kB apart (a 32x32 image's 1024
    float32 positions) maps its rows onto a few sets of the L1 cache, and
    OpenBLAS's packing of it thrashes them: measured (float32, one thread),
    (64 x 576) @ (576 x 1024) runs at 174 GFLOP/s with rows 1024 apart and at
    233 with rows 1040 apart; (16 x 27) @ (27 x 1024) at 117 against 189.
    This is much of what made the channels-first GEMM orientation look slow
    in float32 (see ``_exact_correlate_nhwc``).
    """
    line = max(1, 64 // itemsize)
    lines = -(-n // line)
    return (lines + 1 - lines % 2) * line


class _ColumnBuffer:
    """A window copy's buffer: ``rows`` rows of up to ``width`` elements,
    each row ``_leading_dimension`` elements long (see there), viewed as
    (rows, images, positions)."""

    def __init__(self, rows: int, width: int, dtype: np.dtype):
        self.ld = _leading_dimension(width, np.dtype(dtype).itemsize)
        self.buf = np.empty((rows, self.ld), dtype=dtype)

    def view(self, images: int, positions: int) -> np.ndarray:
        return np.reshape(self.buf[:, :images * positions],
                          (self.buf.shape[0], images, positions), copy=False)


def _exact_windows(src: np.ndarray, n0: int, n1: int, channels: slice, kernel: Ints,
                   stride: Ints, dilation: Ints, out_size: Ints) -> np.ndarray:
    """(images, *kernel, channels, *out_size) read-only view of the windows
    of ``src`` (N, C, *padded): element [n, t, c, i] = src[n, c, i*s + t*d]."""
    base = src[n0:n1, channels]
    st = base.strides
    return as_strided(base, shape=(n1 - n0,) + tuple(kernel) + (base.shape[1],) + tuple(out_size),
                      strides=(st[0],) + tuple(a * d for a, d in zip(st[2:], dilation))
                      + (st[1],) + tuple(a * s for a, s in zip(st[2:], stride)),
                      writeable=False)


def _fill_windows(cols: np.ndarray, src: np.ndarray, n0: int, n1: int, channels: slice,
                  kernel: Ints, stride: Ints, dilation: Ints, out_size: Ints) -> None:
    """Window copy: cols (taps*channels, images, positions) <- the windows of
    images n0:n1 of ``src`` (see ``_exact_windows``), in one NumPy call."""
    win = _exact_windows(src, n0, n1, channels, kernel, stride, dilation, out_size)
    np.reshape(cols, tuple(kernel) + (win.shape[1 + len(kernel)], n1 - n0) + tuple(out_size),
               copy=False)[...] = np.moveaxis(win, 0, -1 - len(out_size))


def _window_extent(kernel: Ints, stride: Ints, dilation: Ints, out_size: Ints) -> Ints:
    """Spatial extent of the source that the windows of ``out_size`` read."""
    return tuple(s * (o - 1) + d * (k - 1) + 1
                 for k, s, d, o in zip(kernel, stride, dilation, out_size))


def _images_gemm(cols: np.ndarray, wmg: np.ndarray, out: np.ndarray) -> None:
    """out[i] = wmg @ cols[:, i] for every image i of a window copy ``cols``
    (rows, images, positions), ``out`` (images, C_out/G, positions): one GEMM
    per image, in one ``np.matmul`` call (the weight broadcast along images)
    that writes straight into ``out``.

    ``np.matmul``, not ``np.einsum``: NumPy 2's einsum hands a pair to
    matmul after parsing the spec and planning the path on every call,
    about 75 us per call, which was 10% of a 64->64 forward.
    """
    np.matmul(wmg, cols.transpose(1, 0, 2), out=out)


def _images_weight_gemm(cols: np.ndarray, gos: np.ndarray, part: np.ndarray) -> np.ndarray:
    """sum_i cols[:, i] @ gos[i]^T, (rows, C_out/G), for a window copy ``cols``
    (rows, images, positions) and the images' grad-output ``gos`` (images,
    C_out/G, positions), as it is laid out (no copy): one ``np.matmul``
    into ``part`` (images, rows, C_out/G), summed over images in order.

    The transposed weight gradient (rows x C_out/G), not (C_out/G x rows):
    with few output channels OpenBLAS's float32 kernels run far below their
    peak on the C_out/G-row orientation (measured, Zen 5 with the SkylakeX
    kernels: 142 vs 205 GFLOP/s on 64 x 1024 x 577, 95 vs 187 on 32 x 1024 x
    801; float64 even)."""
    np.matmul(cols.transpose(1, 0, 2), gos.transpose(0, 2, 1), out=part)
    return part[0] if part.shape[0] == 1 else part.sum(axis=0)


def _exact_correlate(a: np.ndarray, lo: Optional[Ints], wm: np.ndarray, out: np.ndarray,
                     kernel: Ints, stride: Ints, dilation: Ints,
                     bias: Optional[np.ndarray]) -> np.ndarray:
    """out[n, g*og + o, i] = sum_{t, c} wm[g, o, t*cg + c] src[n, g*cg + c, i*s + t*d]
    (+ bias), for ``out`` (N, G*og, *out_size) and ``src`` the (N, G*cg, ...)
    array ``a`` placed at offset ``lo`` among zeros (``_PlacedImages``, a
    chunk of images at a time), or ``a`` itself if ``lo`` is None.

    The window copy of a chunk is laid out (rows, images, positions). A
    C-contiguous ``out`` is written by the GEMMs themselves, one per image
    (``_images_gemm``); any other ``out`` (a strided phase of the input
    gradient) gets one GEMM per chunk, copied in while in cache.
    """
    n, G, og = out.shape[0], wm.shape[0], wm.shape[1]
    cg = a.shape[1] // G
    out_size = out.shape[2:]
    q, T = math.prod(out_size), math.prod(kernel)
    rows = T * cg + (bias is not None)
    if bias is not None:  # bias as the weight of a row of ones
        wm = np.concatenate([wm, bias.reshape(G, og, 1).astype(wm.dtype)], axis=2)
    m, r = _cf_chunks(n, rows, out_size, out.itemsize)
    images = a if lo is None else _PlacedImages(
        a, lo, _window_extent(kernel, stride, dilation, out_size), m, out.dtype)
    per_row = q // out_size[0]
    buf = _ColumnBuffer(rows, m * r * per_row, out.dtype)
    direct = out.flags.c_contiguous  # the GEMMs write straight into ``out``
    out3 = out.reshape(n, G * og, q) if direct else None
    for n0 in range(0, n, m):
        n1 = min(n, n0 + m)
        images_n = images[n0:n1]
        for i0 in range(0, out_size[0], r):
            i1 = min(out_size[0], i0 + r)
            src, block = _row_block(images_n, i0, i1, stride, out_size)
            p = (i1 - i0) * per_row
            cols = buf.view(n1 - n0, p)
            if bias is not None:
                cols[-1] = 1
            for g in range(G):
                _fill_windows(cols[:T * cg], src, 0, n1 - n0, slice(g * cg, (g + 1) * cg),
                              kernel, stride, dilation, block)
                if direct:
                    _images_gemm(cols, wm[g],
                                 out3[n0:n1, g * og:(g + 1) * og, i0 * per_row:i1 * per_row])
                else:
                    lhs = np.reshape(cols, (rows, (n1 - n0) * p), copy=False)
                    res = np.matmul(wm[g], lhs)
                    out[n0:n1, g * og:(g + 1) * og, i0:i1] = np.moveaxis(
                        res.reshape((og, n1 - n0) + block), 0, 1)
    return out


#: bytes of one image's channels-first window copy above which it is
#: copied (and multiplied) in blocks of output rows: the window copy of a
#: 64-channel 32x32 image's 3x3 windows, 2.4 MB, runs 88 us per image whole
#: and 104-125 us in blocks of 1-2 MB (float32), but a large image's would
#: be tens of MB
CF_ROW_BLOCK_BYTES = 1 << 22


def _cf_chunks(n: int, rows: int, out_size: Ints, itemsize: int) -> tuple[int, int]:
    """(images, output rows) per chunk of a channels-first window copy of
    ``rows`` rows: whole images, about CHUNK_BYTES (at least one), or for
    an image above ``CF_ROW_BLOCK_BYTES`` balanced blocks of its output
    rows (first axis) of about that size."""
    per_row = math.prod(out_size[1:])
    image_bytes = rows * per_row * out_size[0] * itemsize
    if image_bytes <= CF_ROW_BLOCK_BYTES:
        return _exact_images(rows, per_row * out_size[0], itemsize, n), out_size[0]
    r = max(1, min(out_size[0], CF_ROW_BLOCK_BYTES // (rows * per_row * itemsize)))
    count = -(-out_size[0] // r)
    return 1, -(-out_size[0] // count)  # balanced blocks


def _row_block(src: np.ndarray, i0: int, i1: int, stride: Ints, out_size: Ints
               ) -> tuple[np.ndarray, Ints]:
    """The (images, C, *padded) source of output rows i0:i1 (first axis),
    and the block's output size."""
    if i0 == 0 and i1 == out_size[0]:
        return src, tuple(out_size)
    return src[:, :, i0 * stride[0]:], (i1 - i0,) + tuple(out_size[1:])


#: bytes of one transposing copy's block: a whole (C, H, W) -> (H, W, C)
#: copy of an image reads with a stride of H*W elements, often a power of
#: two, and thrashes the cache's sets (98 us for 64x32x32 float32); blocks
#: of channels of about this many bytes read cache-friendly (36 us; 11 vs
#: 24-42 us for 128x16x16), and the GEMM result's (positions, C_out/G) ->
#: (C_out/G, positions) copy likewise goes by blocks of positions (22 vs 32
#: us for 1024 x 64, 13 vs 24 us for 256 x 128)
TRANSPOSE_BYTES = 1 << 15


class _PlacedImagesNHWC:
    """``_PlacedImages`` channels-last: ``placed[n0:n1]`` is the (n1 - n0,
    *size, C) chunk of images placed at offset ``lo`` among zeros, copied
    from the (N, C, *S) array a block of channels at a time
    (``TRANSPOSE_BYTES``)."""

    def __init__(self, a: np.ndarray, lo: Ints, size: Ints, images: int, dtype: np.dtype):
        self.a = a
        self.buf = np.zeros((images,) + tuple(size) + (a.shape[1],), dtype=dtype)
        self.index = _placement(lo, size, a.shape[2:])

    def __getitem__(self, images: slice) -> np.ndarray:
        out = self.buf[:images.stop - images.start]
        if self.index is not None:
            dst, src = self.index
            c = self.a.shape[1]
            nd = self.a.ndim
            block = max(1, TRANSPOSE_BYTES // (math.prod(self.a.shape[2:]) * self.a.itemsize))
            for c0 in range(0, c, block):
                c1 = min(c, c0 + block)
                out[(slice(None),) + dst + (slice(c0, c1),)] = self.a[
                    (images, slice(c0, c1)) + src].transpose((0,) + tuple(range(2, nd)) + (1,))
        return out


def _nhwc_chunks(n: int, rows: int, out_size: Ints, itemsize: int) -> tuple[int, int]:
    """(images, output rows) per chunk of a channels-last window copy of
    ``rows`` rows: whole images, or blocks of the first axis's output rows
    of one image, so that the copy is about CHUNK_BYTES."""
    per_row = math.prod(out_size[1:])
    image_bytes = rows * per_row * out_size[0] * itemsize
    if image_bytes <= CHUNK_BYTES:
        return max(1, min(n, CHUNK_BYTES // image_bytes)), out_size[0]
    r = max(1, min(out_size[0], CHUNK_BYTES // (rows * per_row * itemsize)))
    count = -(-out_size[0] // r)
    return 1, -(-out_size[0] // count)  # balanced blocks


def _fill_windows_nhwc(cols: np.ndarray, src: np.ndarray, i0: int, i1: int,
                       channels: slice, kernel: Ints, stride: Ints, dilation: Ints,
                       out_size: Ints) -> None:
    """Channels-last window copy: cols (images, positions, taps * channels)
    <- the windows of output rows i0:i1 (first axis) of ``src`` (images,
    *padded, C), channels ``channels``, in one NumPy call."""
    nd = len(kernel)
    base = src[(slice(None), slice(i0 * stride[0], None)) + (slice(None),) * (nd - 1)
               + (channels,)]
    st = base.strides
    win = as_strided(
        base, shape=(src.shape[0], i1 - i0) + tuple(out_size[1:]) + tuple(kernel)
        + (base.shape[-1],),
        strides=(st[0],) + tuple(x * s for x, s in zip(st[1:-1], stride))
        + tuple(x * d for x, d in zip(st[1:-1], dilation)) + (st[-1],),
        writeable=False)
    cols.reshape(win.shape)[...] = win


def _exact_correlate_nhwc(a: np.ndarray, lo: Optional[Ints], wm: np.ndarray,
                          out: np.ndarray, kernel: Ints, stride: Ints, dilation: Ints,
                          bias: Optional[np.ndarray]) -> np.ndarray:
    """``_exact_correlate`` with a channels-last window copy, for float32.

    The window copy of a chunk is (images, positions, taps * channels),
    copied from the chunk's images placed channels-last (``_PlacedImagesNHWC``,
    so each position's taps are runs of channels, contiguous on both sides),
    and each image's GEMM is (positions x rows) @ (rows x C_out/G), whose
    result is transposed into ``out`` while in cache. Why: OpenBLAS's float32
    kernels (SkylakeX, on this project's Zen 5 machine) run the C_out/G-row
    orientation of ``_exact_correlate`` well below their peak when C_out/G
    is small (GFLOP/s, 64 x 577 x 1024: 155 vs 215; 32 x 801 x 1024: 85-110
    vs 190; most of that gap was the window copy's rows 4 kB apart, see
    ``_leading_dimension``: with them padded, 233 vs 233 and 174 vs 204-218),
    and the channels-last copy has long contiguous runs (37 vs 89 us
    per 64-channel 32x32 image); the transposes cost 36 + 22 us of that
    (``TRANSPOSE_BYTES``). Measured on the benchmark's layers with the
    padding (2026-12): channels-first ties on 64->64 (7.55 + 14.90 vs 7.60 +
    15.09 ms fwd + bwd) and is 10-25% slower on 128->128 and 5x5.
    float64's kernels run both orientations alike, so float64 keeps
    ``_exact_correlate``. Chunks: whole images, or blocks of output rows of
    one image, so that the window copy is about CHUNK_BYTES.
    """
    n, G, og = out.shape[0], wm.shape[0], wm.shape[1]
    cg = a.shape[1] // G
    out_size = tuple(out.shape[2:])
    nd = len(kernel)
    q, T = math.prod(out_size), math.prod(kernel)
    rows = T * cg + (bias is not None)
    if bias is not None:  # bias as the weight of a column of ones
        wm = np.concatenate([wm, bias.reshape(G, og, 1).astype(wm.dtype)], axis=2)
    wt = np.ascontiguousarray(wm.transpose(0, 2, 1))  # (G, rows, og)
    ext = _window_extent(kernel, stride, dilation, out_size)
    per_row = q // out_size[0]  # positions of one output row (first axis)
    m, r = _nhwc_chunks(n, rows, out_size, out.itemsize)
    images = _PlacedImagesNHWC(a, (0,) * nd if lo is None else lo, ext, m, out.dtype)
    cols = np.empty((m, r * per_row, rows), dtype=out.dtype)
    if bias is not None:
        cols[..., -1] = 1
    res = np.empty((m, r * per_row, og), dtype=out.dtype)
    out3 = out.reshape(n, G * og, q) if out.flags.c_contiguous else None
    tblock = max(1, TRANSPOSE_BYTES // (og * out.itemsize))  # positions per transposing copy
    for n0 in range(0, n, m):
        n1 = min(n, n0 + m)
        b = n1 - n0
        src = images[n0:n1]
        for i0 in range(0, out_size[0], r):
            i1 = min(out_size[0], i0 + r)
            p = (i1 - i0) * per_row
            c, rs = cols[:b, :p], res[:b, :p]
            for g in range(G):
                _fill_windows_nhwc(c[..., :T * cg], src, i0, i1, slice(g * cg, (g + 1) * cg),
                                   kernel, stride, dilation, out_size)
                np.matmul(c, wt[g], out=rs)
                if out3 is not None:
                    for j0 in range(0, p, tblock):
                        j1 = min(p, j0 + tblock)
                        out3[n0:n1, g * og:(g + 1) * og, i0 * per_row + j0:i0 * per_row + j1] = \
                            rs[:, j0:j1].transpose(0, 2, 1)
                else:
                    out[n0:n1, g * og:(g + 1) * og, i0:i1] = rs.transpose(0, 2, 1).reshape(
                        (b, og, i1 - i0) + out_size[1:])
    return out


#: fewest rows (taps * channels per group) of a window copy for the
#: channels-last path: the 3-channel first layer's 27 rows have runs too
#: short for the transposes to pay (its forward 1.5x slower channels-last),
#: while 64 channels (577 rows) gain; 32 also lets the conformance suite's
#: larger kernels (4x4 with 2-3 channels per group, most 3-D kernels) run
#: this path, not only the benchmark's layers
NHWC_MIN_ROWS = 32


def _correlate_fn(dtype: np.dtype, rows: int):
    """The exact-window correlation for a dtype and a window copy of ``rows``
    rows: channels-last for float32 (see ``_exact_correlate_nhwc``) unless
    the rows are few, channels-first otherwise."""
    if dtype == np.float32 and rows >= NHWC_MIN_ROWS:
        return _exact_correlate_nhwc
    return _exact_correlate


def _tap_major(plan: Plan, w: np.ndarray) -> np.ndarray:
    """The weight (C_out, C_in/G, *K) as (G, C_out/G, taps * C_in/G), tap-major:
    the row order of a window copy."""
    G, og, cg, T = plan.groups, plan.og, plan.cg, plan.taps
    return np.ascontiguousarray(
        w.reshape(G, og, cg, T).transpose(0, 1, 3, 2)).reshape(G, og, T * cg)


def _exact_forward(plan: Plan, x: np.ndarray, w: np.ndarray,
                   bias: Optional[np.ndarray]) -> np.ndarray:
    """Forward pass of the exact-window path."""
    y = np.empty((plan.n, plan.c_out) + plan.out_size, dtype=plan.dtype)
    correlate = _correlate_fn(plan.dtype, plan.taps * plan.cg)
    return correlate(x, plan.padding, _tap_major(plan, w), y, plan.kernel, plan.stride,
                     plan.dilation, bias)


def _exact_backward(plan: Plan, x: Optional[np.ndarray], w: np.ndarray, go: np.ndarray,
                    want_input: bool, want_weight: bool, want_bias: bool):
    """Gradients of the exact-window path: ``_exact_weight_grad`` (with the
    bias gradient), and ``_exact_input_grad`` or ``_flat_input_grad`` (see
    ``Plan.gather_input_grad``)."""
    go = go.astype(plan.dtype, copy=False)
    gw = gb = gx = None
    if want_weight or want_bias:
        nhwc = _correlate_fn(plan.dtype, plan.taps * plan.cg) is _exact_correlate_nhwc
        gw, gb = (_exact_weight_grad_nhwc if nhwc else _exact_weight_grad)(plan, x, go, want_bias)
    if want_input:
        gx = (_exact_input_grad if plan.gather_input_grad else _flat_input_grad)(plan, w, go)
    return gx, gw if want_weight else None, gb


def _exact_weight_grad(plan: Plan, x: np.ndarray, go: np.ndarray, want_bias: bool
                       ) -> tuple[np.ndarray, Optional[np.ndarray]]:
    """Weight (and bias) gradient of the exact-window path: per chunk and
    group the same window copy as the forward pass, contracted per image
    with that image's grad-output (already laid out (C_out, positions): no
    layout copy), all the chunk's images in one batched ``np.matmul``
    (``_images_weight_gemm``). The bias gradient rides along as the weight
    of a row of ones in the window copy, as the bias does in the forward
    pass."""
    G, og, cg, T = plan.groups, plan.og, plan.cg, plan.taps
    K, D = plan.kernel, plan.dilation
    q = math.prod(plan.out_size)
    rows = T * cg + int(want_bias)  # the bias gradient's row of ones last
    m, r = _cf_chunks(plan.n, rows, plan.out_size, plan.dtype.itemsize)
    per_row = q // plan.out_size[0]
    placed = _PlacedImages(x, plan.padding, plan.need, m, plan.dtype)
    buf = _ColumnBuffer(rows, m * r * per_row, plan.dtype)
    wgrad = np.zeros((G, rows, og), dtype=plan.dtype)  # transposed, see _images_weight_gemm
    part = np.empty((m, rows, og), dtype=plan.dtype)
    go3 = go.reshape(plan.n, plan.c_out, q)
    for n0 in range(0, plan.n, m):
        n1 = min(plan.n, n0 + m)
        images_n = placed[n0:n1]
        for i0 in range(0, plan.out_size[0], r):
            i1 = min(plan.out_size[0], i0 + r)
            src, block = _row_block(images_n, i0, i1, plan.stride, plan.out_size)
            cols = buf.view(n1 - n0, (i1 - i0) * per_row)
            if want_bias:
                cols[-1] = 1
            for g in range(G):
                _fill_windows(cols[:T * cg], src, 0, n1 - n0, slice(g * cg, (g + 1) * cg), K,
                              plan.stride, D, block)
                wgrad[g] += _images_weight_gemm(
                    cols, go3[n0:n1, g * og:(g + 1) * og, i0 * per_row:i1 * per_row],
                    part[:n1 - n0])
    gb = np.ascontiguousarray(wgrad[:, -1, :]).reshape(plan.c_out) if want_bias else None
    gw = np.ascontiguousarray(
        wgrad[:, :T * cg, :].reshape(G, T, cg, og).transpose(0, 3, 2, 1)).reshape(
            (plan.c_out, cg) + plan.kernel)
    return gw, gb


def _exact_weight_grad_nhwc(plan: Plan, x: np.ndarray, go: np.ndarray, want_bias: bool
                            ) -> tuple[np.ndarray, Optional[np.ndarray]]:
    """``_exact_weight_grad`` with the channels-last window copy of
    ``_exact_correlate_nhwc`` (float32): per chunk and group, grad-output's
    (C_out/G, positions) block times the (positions, rows) window copy, one
    ``np.matmul`` for the chunk's images, summed over images. Measured on
    the 5x5 32->32 layer: 391 vs 431 us per image (the channels-last copy
    is half the channels-first one; its GEMM orientation 10% slower)."""
    G, og, cg, T = plan.groups, plan.og, plan.cg, plan.taps
    out_size = plan.out_size
    q = math.prod(out_size)
    per_row = q // out_size[0]
    rows = T * cg + int(want_bias)  # the bias gradient's column of ones last
    m, r = _nhwc_chunks(plan.n, rows, out_size, plan.dtype.itemsize)
    placed = _PlacedImagesNHWC(x, plan.padding, plan.need, m, plan.dtype)
    cols = np.empty((m, r * per_row, rows), dtype=plan.dtype)
    if want_bias:
        cols[..., -1] = 1
    part = np.empty((m, og, rows), dtype=plan.dtype)
    wgrad = np.zeros((G, og, rows), dtype=plan.dtype)
    go3 = go.reshape(plan.n, plan.c_out, q)
    for n0 in range(0, plan.n, m):
        n1 = min(plan.n, n0 + m)
        b = n1 - n0
        src = placed[n0:n1]
        for i0 in range(0, out_size[0], r):
            i1 = min(out_size[0], i0 + r)
            c = cols[:b, :(i1 - i0) * per_row]
            for g in range(G):
                _fill_windows_nhwc(c[..., :T * cg], src, i0, i1, slice(g * cg, (g + 1) * cg),
                                   plan.kernel, plan.stride, plan.dilation, out_size)
                np.matmul(go3[n0:n1, g * og:(g + 1) * og, i0 * per_row:i1 * per_row], c,
                          out=part[:b])
                wgrad[g] += part[0] if b == 1 else part[:b].sum(axis=0)
    gb = np.ascontiguousarray(wgrad[:, :, -1]).reshape(plan.c_out) if want_bias else None
    gw = np.ascontiguousarray(
        wgrad[:, :, :T * cg].reshape(G, og, T, cg).transpose(0, 1, 3, 2)).reshape(
            (plan.c_out, cg) + plan.kernel)
    return gw, gb


#: bytes of the flat layout of one group of images' input gradient in
#: ``_flat_input_grad`` (a whole batch's layout is larger than the input
#: gradient itself, and was the peak memory of the stride-2 layer)
FLAT_IMAGES_BYTES = 1 << 20


def _flat_images(plan: Plan) -> int:
    """Images per group of ``_flat_input_grad`` (at least one)."""
    image = plan.c_in * len(plan.phases) * plan.per_image * plan.dtype.itemsize
    return max(1, min(plan.n, FLAT_IMAGES_BYTES // image))


def _flat_input_grad(plan: Plan, w: np.ndarray, go: np.ndarray) -> np.ndarray:
    """Input gradient on the flat layout, col2im-style (few input channels
    per group): per group of images (``FLAT_IMAGES_BYTES``) and chunk of
    their positions, grad-output laid out on the flat grid (zero at every
    thrown-away position, so they add exactly nothing), one GEMM for every
    tap's block of the input gradient, each added onto its contiguous slice
    of the group's flat layout, which is then copied out of its phases; the
    blocks have few rows, so they are cheaper to scatter than grad-output's
    windows are to copy for a gather.

    The chunk's layout buffer is zeroed once per group: every chunk's real
    positions sit at the same places relative to its start, so each chunk
    overwrites the same elements and the thrown-away ones stay zero.
    """
    G, og, cg, T = plan.groups, plan.og, plan.cg, plan.taps
    m = _flat_images(plan)
    gx = (np.empty if covers_input(plan) else np.zeros)(
        (plan.n, plan.c_in) + plan.in_size, dtype=plan.dtype)
    wm = _tap_major(plan, w)
    first = _flat_sub_plan(plan, m)  # the largest group's
    dbuf = np.empty((T * cg, first.widest_chunk), dtype=plan.dtype)
    gbuf = np.empty((plan.c_out, first.widest_chunk), dtype=plan.dtype)
    flat = np.empty((plan.c_in, first.length), dtype=plan.dtype)
    for n0 in range(0, plan.n, m):
        n1 = min(plan.n, n0 + m)
        sub = _flat_sub_plan(plan, n1 - n0)
        dxf = flat[:, :sub.length]
        dxf[...] = 0
        gbuf[...] = 0
        gos = go[n0:n1]
        for chunk in sub.chunks:
            q0, size, _ = _chunk_geometry(sub, chunk)
            gc = gbuf[:, :size]
            _valid(sub, gc, chunk)[...] = _out_block(gos, chunk, slice(None))
            for g in range(G):
                rows = slice(g * cg, (g + 1) * cg)
                d = np.matmul(wm[g].T, gc[g * og:(g + 1) * og],
                              out=dbuf[:, :size]).reshape(T, cg, size)
                for t, off in enumerate(sub.offsets):
                    dst = dxf[rows, off + q0: off + q0 + size]
                    dst += d[t]
        from_phases(sub, dxf, gx[n0:n1])
    return gx


def _flat_sub_plan(plan: Plan, images: int) -> Plan:
    """``plan`` for a group of ``images`` of its images."""
    return make_plan(images, plan.c_in, plan.c_out, plan.groups, plan.in_size, plan.kernel,
                     plan.stride, plan.padding, plan.dilation, plan.out_size, plan.dtype)


def _phase_taps(u: int, size: int, k: int, s: int, d: int, p: int):
    """One axis of the input gradient's phase ``u`` (input positions
    v*s + u): dx[v*s + u] = sum_j w[taps[j]]^T go[v + j*step - lo].

    Returns (positions, taps in that order, step, lo): the phase's taps are
    those with t*d = u + p (mod s); they read grad-output at v + c_t with
    c_t = (u + p - t*d) / s, which in decreasing t is an arithmetic
    progression, so the phase is a stride-1 correlation with dilation
    ``step`` of grad-output placed at offset ``lo``.
    """
    positions = -(-(size - u) // s)
    taps = [t for t in range(k - 1, -1, -1) if (t * d - u - p) % s == 0]
    if not taps or positions <= 0:
        return positions, [], 1, 0
    return positions, taps, d // math.gcd(s, d), (taps[0] * d - u - p) // s


def _exact_input_grad(plan: Plan, w: np.ndarray, go: np.ndarray) -> np.ndarray:
    """dx of the exact-window path, one stride phase at a time.

    With stride 1 there is one phase and dx[u] = sum_t w[:, :, t]^T
    go[u + p - t*d]: the stride-1 correlation of grad-output placed at
    offset d*(k-1) - p with the kernel flipped and transposed. With a
    stride, the input positions u = v*s + r of phase r receive only from
    the taps with t*d = r + p (mod s), again as a stride-1 correlation
    (``_phase_taps``), whose result is copied into dx[..., r::s] image by
    image. No inserted zeros are ever multiplied.
    """
    G, og, cg = plan.groups, plan.og, plan.cg
    w5 = w.reshape((G, og, cg) + plan.kernel)
    gx = np.empty((plan.n, plan.c_in) + plan.in_size, dtype=plan.dtype)
    strided = any(s > 1 for s in plan.stride)
    phases = []  # (phase, per-axis _phase_taps) of the phases with positions
    for phase in itertools.product(*(range(s) for s in plan.stride)):
        axes = [_phase_taps(u, n, k, s, d, p) for u, n, k, s, d, p in zip(
            phase, plan.in_size, plan.kernel, plan.stride, plan.dilation, plan.padding)]
        if all(a[0] > 0 for a in axes):
            phases.append((phase, axes))
    live = [axes for _, axes in phases if all(a[1] for a in axes)]
    if len(live) > 1:
        # grad-output placed once, far enough in for every phase's offset
        # (each phase placing its own chunks would copy it once per phase)
        lo = [max(ax[i][3] for ax in live) for i in range(len(plan.kernel))]
        end = [max(ax[i][0] + ax[i][2] * (len(ax[i][1]) - 1) - ax[i][3] for ax in live)
               for i in range(len(plan.kernel))]
        placed = _placed(go, lo, tuple(l + e for l, e in zip(lo, end)), plan.dtype)
    for phase, axes in phases:
        out = gx[(slice(None), slice(None)) + tuple(
            slice(u, None, s) for u, s in zip(phase, plan.stride))] if strided else gx
        if any(not a[1] for a in axes):
            out[...] = 0  # no tap reads these input positions
            continue
        kernel = tuple(len(a[1]) for a in axes)
        step = tuple(a[2] for a in axes)
        sub = w5[np.ix_(range(G), range(og), range(cg), *(a[1] for a in axes))]
        kp = math.prod(kernel)
        # (g, c, tap * o) in the window copy's order, as the transposed view
        # of a (g, tap * o, c) array: the layout the channels-last path
        # multiplies by, so it takes it without another copy of the weight
        wt = np.ascontiguousarray(sub.reshape(G, og, cg, kp).transpose(0, 3, 1, 2)).reshape(
            G, kp * og, cg).transpose(0, 2, 1)
        del sub
        if len(live) > 1:
            src, src_lo = placed[(slice(None), slice(None)) + tuple(
                slice(l - a[3], None) for l, a in zip(lo, axes))], None
        else:
            src, src_lo = go, tuple(a[3] for a in axes)
        correlate = _correlate_fn(plan.dtype, kp * og)
        correlate(src, src_lo, wt, out, kernel, (1,) * len(kernel), step, None)
    return gx




def forward(plan: Plan, x: np.ndarray, w: np.ndarray,
            bias: Optional[np.ndarray]) -> np.ndarray:
    """y = correlate(x, w) + bias, shape (N, C_out, *out_size)."""
    if plan.pointwise:
        return _pointwise_forward(plan, x, w, bias)
    if plan.exact:
        return _exact_forward(plan, x, w, bias)
    # the direct path (one input channel per group)
    y = np.empty((plan.n, plan.c_out) + plan.out_size, dtype=plan.dtype)
    return _direct_forward(plan, x, w, bias, y)


def backward(plan: Plan, x: Optional[np.ndarray], w: np.ndarray, go: np.ndarray,
             want_input: bool, want_weight: bool, want_bias: bool = False
             ) -> tuple[Optional[np.ndarray], Optional[np.ndarray], Optional[np.ndarray]]:
    """(grad_input, grad_weight, grad_bias) of ``correlate(x, w) + bias`` for
    grad-output ``go``; each None unless wanted.

    ``x`` is needed only for the weight gradient. Each path (see the module
    docstring) has its own backward pass. The bias gradient (the sum of
    grad-output over images and positions) comes with the weight gradient
    where that reads grad-output chunk by chunk anyway, so it is not a pass
    of its own over grad-output.
    """
    if plan.pointwise:
        return _pointwise_backward(plan, x, w, go, want_input, want_weight, want_bias)
    if plan.direct:
        return _direct_backward(plan, x, w, go, want_input, want_weight, want_bias)
    return _exact_backward(plan, x, w, go, want_input, want_weight, want_bias)


# ----------------------------------------------------------------------------
# which paths a call takes (for the harness's coverage events)
# ----------------------------------------------------------------------------

def paths(plan: Plan, backward: bool, want_input: bool = True,
          want_weight: bool = True) -> list[str]:
    """The paths of the module docstring that ``forward`` (or ``backward``) takes
    for ``plan``, and whether its work is split into several chunks: the labels
    the conformance suite reports as events, so that a run shows each was reached."""
    if plan.pointwise:
        return ["pointwise"]
    if plan.direct:
        out = ["direct"]
        return out + (["flat layout, several chunks"] if len(plan.chunks) > 1 else [])
    nhwc = _correlate_fn(plan.dtype, plan.taps * plan.cg) is _exact_correlate_nhwc
    exact = "exact windows" + (", channels-last" if nhwc else "")
    images = _exact_images(plan.taps * plan.cg, math.prod(plan.out_size),
                           plan.dtype.itemsize, plan.n)
    out = []
    if not backward or want_weight:
        out.append(exact + (", several chunks" if images < plan.n else ""))
    if backward and want_input:
        if plan.gather_input_grad:
            out.append("gathering input gradient")
        else:
            split = len(plan.chunks) > 1 or _flat_images(plan) < plan.n
            out.append("flat input gradient" + (", several chunks" if split else ""))
    return out
