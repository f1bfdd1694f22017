"""The SciPy tap-GEMM experiment of issue 14, kept runnable: is SciPy's BLAS
worth a dependency for ``conv_impl.einsum``?

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python -m benchmarks.scipy_taps

The idea (from the engine's 2026-11 session): on the flat layout, laid out
channels-last, every kernel tap's window over a run of output positions is a
contiguous (positions x C_in/G) matrix, so a convolution is one GEMM per tap
accumulated into the result by BLAS itself (``?gemm`` with beta = 1, which
NumPy's ``np.matmul`` cannot express and ``scipy.linalg.blas.sgemm`` can):
no window copy at all. The weight gradient is the same GEMMs' other product
accumulated into each tap's weight block, the input gradient their transpose
accumulated onto each tap's slice of the input gradient's layout.

This module implements that path (forward, weight and input gradient, any
stride, dilation, groups, N-d; float32 and float64) on the engine's plan
(``conv_impl._einsum_engine.make_plan``) and times it, side by side in one
process with alternating runs (thread CPU time, medians), against the
engine's own paths and against the same tap path with NumPy only (a product
into a scratch array plus an add instead of beta = 1), on the benchmark's
GEMM-shaped layers. It also checks the tap path's results against the
engine's. Result (2026-12, recorded in benchmarks/results-2026-12.txt): the
accumulating GEMMs run at 205-216 GFLOP/s useful on the 3x3 layers (10-25%
faster than NumPy's product plus add), but they are no faster than the
engine's one long GEMM over a window copy, their layout transposes cost as
much as that copy, and their weight gradient (64 x 64 blocks, one per tap)
runs at 130-150 GFLOP/s: the path is even on the forward pass and 10-40%
slower on the backward pass, so the engine does not use it and SciPy is not
a dependency. Needs SciPy (not a project dependency) to run.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from pathlib import Path
from typing import Optional

if __package__ in (None, ""):  # run as a script: make the repo importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np
from numpy.lib.stride_tricks import as_strided
from scipy.linalg.blas import dgemm as _dgemm, sgemm as _sgemm
from threadpoolctl import threadpool_limits

from conv_impl import _einsum_engine as engine
from conv_impl._einsum_engine import Plan, TRANSPOSE_BYTES, _phase_slices, make_plan

#: accumulate with SciPy's ?gemm (beta = 1); False: np.matmul and an add
USE_SCIPY = True

#: fewest channels per group (the GEMMs' inner dimension, both ways) for the
#: tap-GEMM path; below it the exact-window paths' one long GEMM pays more
TAP_MIN_CHANNELS = 16
#: bytes of one chunk's channels-last layout of its images
TAP_CHUNK_BYTES = 1 << 19


def _gemm_into(a: np.ndarray, b: np.ndarray, c: np.ndarray, beta: float) -> None:
    """c = a @ b + beta * c, in place, for 2-D ``c`` C-contiguous and ``a``,
    ``b`` each C- or F-contiguous (a transposed view): one BLAS call
    (SciPy's ``?gemm``, no copy of any operand). In BLAS's column-major terms
    c^T = b^T a^T, and a C-contiguous array is its transpose F-contiguous."""
    if not USE_SCIPY:  # NumPy only: a product into scratch, then an add
        if beta == 0.0:
            np.matmul(a, b, out=c)
        else:
            c += np.matmul(a, b)
        return
    gemm = _sgemm if c.dtype == np.float32 else _dgemm

    def operand(m: np.ndarray) -> tuple[np.ndarray, int]:
        return (m.T, 0) if m.flags.c_contiguous else (m, 1)

    bt, tb = operand(b)
    at, ta = operand(a)
    gemm(1.0, bt, at, beta=beta, c=c.T, trans_a=tb, trans_b=ta, overwrite_c=1)


def _tap_images(plan: Plan) -> int:
    """Images per chunk: a chunk's layout (of the wider of the input and
    grad-output) about ``TAP_CHUNK_BYTES``, at least one image."""
    box = math.prod(plan.need) * max(plan.c_in, plan.c_out) * plan.dtype.itemsize
    return max(1, min(plan.n, TAP_CHUNK_BYTES // box))


def _tap_chunks(plan: Plan) -> list[tuple[int, int, Plan]]:
    """(n0, n1, the chunk's plan) of every chunk: the chunk plan lays out
    ``n1 - n0`` images (its ``n``) and gives the grid, the taps' offsets,
    the layout's length."""
    m = _tap_images(plan)
    out = []
    for n0 in range(0, plan.n, m):
        n1 = min(plan.n, n0 + m)
        sub = make_plan(n1 - n0, plan.c_in, plan.c_out, plan.groups, plan.in_size,
                        plan.kernel, plan.stride, plan.padding, plan.dilation,
                        plan.out_size, plan.dtype)
        out.append((n0, n1, sub))
    return out


def _tap_span(sub: Plan) -> int:
    """Grid positions of a chunk that hold every real output (its GEMMs' rows)."""
    return (sub.n - 1) * sub.per_image + sub.out_size[0] * sub.row[0]


def _tap_valid(sub: Plan, rows: np.ndarray) -> np.ndarray:
    """(images, *out_size, C) view of the real outputs in a chunk's
    (positions, C) rows."""
    st = rows.strides[0]
    return as_strided(rows, shape=(sub.n,) + sub.out_size + (rows.shape[1],),
                      strides=(sub.per_image * st,) + tuple(r * st for r in sub.row)
                      + (rows.strides[1],))


def _channel_blocks(channels: int, spatial: int, itemsize: int):
    """Blocks of channels of about ``TRANSPOSE_BYTES`` per image, for
    transposing copies NCHW <-> channels-last."""
    step = max(1, TRANSPOSE_BYTES // max(1, spatial * itemsize))
    return [(c0, min(channels, c0 + step)) for c0 in range(0, channels, step)]


def _tap_layout(sub: Plan, a: np.ndarray, n0: int, buf: np.ndarray) -> np.ndarray:
    """Images ``n0 : n0 + sub.n`` of ``a`` (N, C, *S) in the chunk's flat
    phase layout, channels-last per group: ``buf`` (G, length, C/G). Only
    the padding (and the slack) is zeroed; the images are copied in by
    blocks of channels."""
    G, cg, nd = sub.groups, sub.cg, len(sub.kernel)
    body = len(sub.phases) * sub.n * sub.per_image
    buf[:, body:] = 0
    view = buf[:, :body].reshape((G, len(sub.phases), sub.n) + sub.grid + (cg,))
    for i, ph in enumerate(sub.phases):
        g_sl, s_sl = _phase_slices(sub, ph)
        block = view[:, i]  # (G, images, *grid, cg)
        if not g_sl:
            block[...] = 0
            continue
        for axis, sl in enumerate(g_sl):  # the padding before and after, axis by axis
            lead = (slice(None), slice(None)) + g_sl[:axis]
            block[lead + (slice(0, sl.start),)] = 0
            block[lead + (slice(sl.stop, None),)] = 0
        src = a[(slice(n0, n0 + sub.n), slice(None)) + s_sl]
        spatial = math.prod(src.shape[2:])
        order = (0,) + tuple(range(2, nd + 2)) + (1,)
        for g in range(G):
            dst = block[g]
            for c0, c1 in _channel_blocks(cg, spatial, a.itemsize):
                dst[(slice(None),) + g_sl + (slice(c0, c1),)] = \
                    src[:, g * cg + c0:g * cg + c1].transpose(order)
    return buf


def _tap_put(sub: Plan, rows: np.ndarray, out: np.ndarray, n0: int, channels: int,
             bias: Optional[np.ndarray] = None) -> None:
    """out[n0 : n0 + images, channels : channels + C] (+ bias) <- the real
    outputs of a chunk's (positions, C) rows, transposed a block of output
    rows (first axis) at a time."""
    c = rows.shape[1]
    valid = _tap_valid(sub, rows)  # (images, *out, C)
    nd = len(sub.out_size)
    per_row = math.prod(sub.out_size[1:])
    step = max(1, TRANSPOSE_BYTES // (per_row * c * rows.itemsize))
    order = (0, nd + 1) + tuple(range(1, nd + 1))
    b = None if bias is None else bias.reshape((1, c) + (1,) * nd)
    for i0 in range(0, sub.out_size[0], step):
        i1 = min(sub.out_size[0], i0 + step)
        src = valid[:, i0:i1].transpose(order)
        dst = out[n0:n0 + sub.n, channels:channels + c, i0:i1]
        if b is None:
            dst[...] = src
        else:
            np.add(src, b, out=dst)


def _tap_forward(plan: Plan, x: np.ndarray, w: np.ndarray,
                 bias: Optional[np.ndarray]) -> np.ndarray:
    """Forward pass of the tap-GEMM path: per chunk and group, one GEMM per
    tap, the first writing the (positions, C_out/G) result, the others
    adding into it."""
    G, og, cg, T = plan.groups, plan.og, plan.cg, plan.taps
    y = np.empty((plan.n, plan.c_out) + plan.out_size, dtype=plan.dtype)
    wt = np.ascontiguousarray(w.reshape(G, og, cg, T).transpose(0, 3, 2, 1))  # (G, T, cg, og)
    chunks = _tap_chunks(plan)
    first = chunks[0][2]
    lay = np.empty((G, first.length, cg), dtype=plan.dtype)
    res = np.empty((G, _tap_span(first), og), dtype=plan.dtype)
    for n0, n1, sub in chunks:
        span = _tap_span(sub)
        xl = _tap_layout(sub, x, n0, lay[:, :sub.length])
        for g in range(G):
            r = res[g, :span]
            for t, off in enumerate(sub.offsets):
                _gemm_into(xl[g, off:off + span], wt[g, t], r, 0.0 if t == 0 else 1.0)
            _tap_put(sub, r, y, n0, g * og, None if bias is None else bias[g * og:(g + 1) * og])
    return y


def _tap_backward(plan: Plan, x: Optional[np.ndarray], w: np.ndarray, go: np.ndarray,
                  want_input: bool, want_weight: bool, want_bias: bool):
    """Gradients of the tap-GEMM path. Per chunk, grad-output is laid out
    on the grid once (zero at the thrown-away positions); per group and
    tap, the weight gradient's block (C_in/G x C_out/G) accumulates the
    tap's slice of the input layout transposed times it, and the input
    gradient's layout accumulates it times the tap's weight transposed on
    the tap's slice; the input gradient's layout is then copied out of its
    phases."""
    G, og, cg, T = plan.groups, plan.og, plan.cg, plan.taps
    dt = plan.dtype
    go = go.astype(dt, copy=False)
    chunks = _tap_chunks(plan)
    first = chunks[0][2]
    gw = np.zeros((G, T, cg, og), dtype=dt) if want_weight else None
    gb = np.zeros((G, og), dtype=dt) if want_bias else None
    gx = None
    if want_input:
        pieces = [_phase_slices(plan, ph) for ph in plan.phases]
        covered = sum(math.prod(len(range(size)[sl]) for sl, size in zip(s, plan.in_size))
                      for g_, s in pieces if g_)
        whole = covered == math.prod(plan.in_size)
        gx = (np.empty if whole else np.zeros)((plan.n, plan.c_in) + plan.in_size, dtype=dt)
        wtt = np.ascontiguousarray(w.reshape(G, og, cg, T).transpose(0, 3, 1, 2))  # (G,T,og,cg)
        dlay = np.empty((G, first.length, cg), dtype=dt)
    lay = np.empty((G, first.length, cg), dtype=dt) if want_weight else None
    gol = None
    gol_images = 0
    for n0, n1, sub in chunks:
        span = _tap_span(sub)
        if gol is None or sub.n != gol_images:  # zeroed once per chunk size
            gol = np.zeros((G, span, og), dtype=dt)
            gol_images = sub.n
        for g in range(G):
            valid = _tap_valid(sub, gol[g])  # (images, *out, og)
            src = go[n0:n1, g * og:(g + 1) * og]
            for c0, c1 in _channel_blocks(og, math.prod(plan.out_size), dt.itemsize):
                valid[..., c0:c1] = np.moveaxis(src[:, c0:c1], 1, -1)
        if want_bias:
            gb += gol.sum(axis=1)
        if want_weight:
            xl = _tap_layout(sub, x, n0, lay[:, :sub.length])
            for g in range(G):
                for t, off in enumerate(sub.offsets):
                    _gemm_into(xl[g, off:off + span].T, gol[g], gw[g, t], 1.0)
        if want_input:
            dl = dlay[:, :sub.length]
            dl[...] = 0
            for g in range(G):
                for t, off in enumerate(sub.offsets):
                    _gemm_into(gol[g], wtt[g, t], dl[g, off:off + span], 1.0)
            _tap_unlayout(sub, dl, gx, n0)
    gwo = None
    if want_weight:
        gwo = np.ascontiguousarray(gw.transpose(0, 3, 2, 1)).reshape(
            (plan.c_out, cg) + plan.kernel)
    return gx, gwo, None if gb is None else gb.reshape(plan.c_out)


def _tap_unlayout(sub: Plan, dl: np.ndarray, gx: np.ndarray, n0: int) -> None:
    """gx[n0 : n0 + images] <- the input positions of a chunk's input
    gradient layout ``dl`` (G, length, C/G) (inverse of ``_tap_layout``;
    positions no phase holds are left as they are)."""
    G, cg, nd = sub.groups, sub.cg, len(sub.kernel)
    body = len(sub.phases) * sub.n * sub.per_image
    view = dl[:, :body].reshape((G, len(sub.phases), sub.n) + sub.grid + (cg,))
    order = (0, nd + 1) + tuple(range(1, nd + 1))
    for i, ph in enumerate(sub.phases):
        g_sl, s_sl = _phase_slices(sub, ph)
        if not g_sl:
            continue
        dst = gx[(slice(n0, n0 + sub.n), slice(None)) + s_sl]
        spatial = math.prod(dst.shape[2:])
        for g in range(G):
            src = view[g, i][(slice(None),) + g_sl]  # (images, *sub, cg)
            for c0, c1 in _channel_blocks(cg, spatial, gx.itemsize):
                dst[:, g * cg + c0:g * cg + c1] = src[..., c0:c1].transpose(order)


def _time(fns: dict, rounds: int) -> dict:
    """Median thread CPU time of each function, alternating (after a warm-up)."""
    for f in fns.values():
        f()
    times = {k: [] for k in fns}
    for _ in range(rounds):
        for k, f in fns.items():
            t0 = time.thread_time()
            f()
            times[k].append(time.thread_time() - t0)
    return {k: statistics.median(v) for k, v in times.items()}


def main(argv: Optional[list[str]] = None) -> int:
    global USE_SCIPY
    from benchmarks.conv_speed import LAYERS
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--rounds", type=int, default=15)
    args = ap.parse_args(argv)
    dt = np.dtype(args.dtype)
    print(f"times: medians in ms of thread CPU time, {args.rounds} alternating rounds, one thread;"
          " engine = conv_impl.einsum's paths, taps = the tap path with SciPy's ?gemm(beta=1),"
          " taps-np = the same with np.matmul + add")
    print(f"{'layer':<44} {'':>8} {'engine':>8} {'taps':>8} {'taps-np':>8}")
    with threadpool_limits(limits=1, user_api="blas"):
        for layer in LAYERS:
            if layer.groups > 1 or layer.k == 1 or layer.c_in < TAP_MIN_CHANNELS:
                continue  # the tap path is for many channels per group
            rng = np.random.default_rng(0)
            x = rng.standard_normal((layer.n, layer.c_in, layer.hw, layer.hw)).astype(dt)
            w = (rng.standard_normal((layer.c_out, layer.c_in, layer.k, layer.k))
                 / math.sqrt(layer.c_in * layer.k ** 2)).astype(dt)
            b = rng.standard_normal(layer.c_out).astype(dt)
            out = (layer.hw + 2 * layer.pad - layer.dilation * (layer.k - 1) - 1) // layer.stride + 1
            plan = make_plan(layer.n, layer.c_in, layer.c_out, 1, (layer.hw,) * 2, (layer.k,) * 2,
                             (layer.stride,) * 2, (layer.pad,) * 2, (layer.dilation,) * 2,
                             (out, out), dt)
            go = rng.standard_normal((layer.n, layer.c_out, out, out)).astype(dt)
            # the tap path's results against the engine's
            USE_SCIPY = True
            y0, y1 = engine.forward(plan, x, w, b), _tap_forward(plan, x, w, b)
            g0 = engine.backward(plan, x, w, go, True, True, True)
            g1 = _tap_backward(plan, x, w, go, True, True, True)
            err = max(float(np.max(np.abs(u - v)) / np.max(np.abs(u)))
                      for u, v in zip((y0,) + g0, (y1,) + g1))
            assert err < (1e-4 if dt == np.float32 else 1e-12), err

            def taps(f, scipy_blas):
                def run():
                    global USE_SCIPY
                    USE_SCIPY = scipy_blas
                    f()
                return run

            fwd = _time({"engine": lambda: engine.forward(plan, x, w, b),
                         "taps": taps(lambda: _tap_forward(plan, x, w, b), True),
                         "taps-np": taps(lambda: _tap_forward(plan, x, w, b), False)},
                        args.rounds)
            bwd = _time({"engine": lambda: engine.backward(plan, x, w, go, True, True, True),
                         "taps": taps(lambda: _tap_backward(plan, x, w, go, True, True, True),
                                      True),
                         "taps-np": taps(lambda: _tap_backward(plan, x, w, go, True, True, True),
                                         False)},
                        args.rounds)
            for name, t in (("fwd", fwd), ("bwd", bwd)):
                print(f"{layer.label() if name == 'fwd' else '':<44} {name:>8} "
                      + " ".join(f"{t[k] * 1e3:8.2f}" for k in ("engine", "taps", "taps-np")),
                      flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
