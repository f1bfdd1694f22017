"""Time conv_impl.einsum's conv2d against torch.nn.functional.conv2d.

Run from the repository root with one command:

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python -m benchmarks.conv_speed

(or ``python benchmarks/conv_speed.py``; options: ``--dtypes float32``,
``--layers 0,3``, ``--budget SECONDS``). Unsetting the two OpenBLAS variables
matters only where the machine sets them: they pin NumPy's BLAS to an older
kernel. The script prints which kernel NumPy's BLAS runs.

Both sides run in this one process on one thread each (threadpoolctl for
NumPy's BLAS, ``torch.set_num_threads(1)``), on the same data, in
alternating runs so that drift in the machine's speed hits both alike. Per
layer it reports the median time (this thread's CPU time, or wall time
with ``--wall``) of each side and the ratio numpy/torch, for
the forward pass alone and for forward + backward (input, weight and bias
gradients), the geometric means of the ratios, and the peak memory traced by
tracemalloc during one NumPy forward + backward, also as a multiple of the
bytes of the arrays that forward + backward return.

``conv_impl.einsum`` takes, per layer, the algorithm its measured table
(conv_impl/_algorithm_table.py, benchmarks/algorithm_table.py) says is
fastest; the engine alone (``algorithm="gemm"``) is timed in the same
alternating rounds, so each layer shows what the dispatch gained ("engine"
columns), and the "path" column which algorithm each part took.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import statistics
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Callable, NamedTuple

if __package__ in (None, ""):  # run as a script: make the repo importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np
import torch
from threadpoolctl import threadpool_info, threadpool_limits

from conv_impl import _winograd
from conv_impl import einsum as impl


class Layer(NamedTuple):
    n: int
    c_in: int
    c_out: int
    hw: int
    k: int
    stride: int
    pad: int
    dilation: int
    groups: int
    note: str = ""

    def label(self) -> str:
        s = (f"N{self.n} {self.c_in}->{self.c_out} {self.hw}x{self.hw} k{self.k}"
             f" s{self.stride} p{self.pad} d{self.dilation} g{self.groups}")
        return s + (f" ({self.note})" if self.note else "")


# The layers of issue 6: (N, C_in, C_out, H=W, k, stride, pad, dilation, groups)
LAYERS = [
    Layer(32, 3, 16, 32, 3, 1, 1, 1, 1),
    Layer(16, 64, 64, 32, 3, 1, 1, 1, 1),
    Layer(16, 128, 128, 16, 3, 1, 1, 1, 1),
    Layer(16, 64, 128, 32, 3, 2, 1, 1, 1),
    Layer(8, 32, 32, 32, 5, 1, 2, 1, 1),
    Layer(64, 16, 16, 28, 1, 1, 0, 1, 1),
    Layer(16, 32, 32, 32, 3, 1, 1, 1, 32, "depthwise"),
    Layer(8, 64, 64, 32, 3, 1, 2, 2, 1, "dilated"),
]


#: the clock of the timings: this thread's CPU time by default (both sides
#: run on this one thread, and on a shared machine wall time mostly measures
#: the scheduler); ``--wall`` switches to wall time
CLOCK: Callable[[], float] = time.thread_time


def _median_alternating(fns: list[Callable[[], object]], budget: float) -> list[float]:
    """Median time of each function, run in alternation.

    One untimed warm-up each, then rounds of one call of each function until
    ``budget`` seconds of wall time have passed (at least 5 rounds, at most 40).
    """
    for f in fns:
        f()
    times: list[list[float]] = [[] for _ in fns]
    start = time.perf_counter()
    rounds = 0
    while rounds < 5 or (time.perf_counter() - start < budget and rounds < 40):
        for f, t in zip(fns, times):
            t0 = CLOCK()
            f()
            t.append(CLOCK() - t0)
        rounds += 1
    return [statistics.median(t) for t in times]


ENGINE = impl.entry_points("gemm")


def bench_layer(layer: Layer, dtype: np.dtype, budget: float) -> dict:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((layer.n, layer.c_in, layer.hw, layer.hw)).astype(dtype)
    w = (rng.standard_normal((layer.c_out, layer.c_in // layer.groups, layer.k, layer.k))
         / math.sqrt(layer.c_in // layer.groups * layer.k ** 2)).astype(dtype)
    b = rng.standard_normal(layer.c_out).astype(dtype)
    kw = dict(stride=(layer.stride,) * 2, padding=(layer.pad,) * 2,
              dilation=(layer.dilation,) * 2, groups=layer.groups)
    y_shape = impl.conv2d(x, w, b, **kw).shape
    go = rng.standard_normal(y_shape).astype(dtype)

    tx = torch.from_numpy(x).requires_grad_(True)
    tw = torch.from_numpy(w).requires_grad_(True)
    tb = torch.from_numpy(b).requires_grad_(True)
    tgo = torch.from_numpy(go)
    tkw = dict(stride=layer.stride, padding=layer.pad, dilation=layer.dilation,
               groups=layer.groups)

    def np_fwd():
        return impl.conv2d(x, w, b, **kw)

    def np_fwdbwd():
        impl.conv2d(x, w, b, **kw)
        return impl.conv2d_backward(go, x, w, b, **kw)

    def engine_fwd():
        return ENGINE["conv2d"](x, w, b, **kw)

    def engine_fwdbwd():
        ENGINE["conv2d"](x, w, b, **kw)
        return ENGINE["conv2d_backward"](go, x, w, b, **kw)

    def torch_fwd():
        with torch.no_grad():
            return torch.nn.functional.conv2d(tx, tw, tb, **tkw)

    def torch_fwdbwd():
        tx.grad = tw.grad = tb.grad = None
        y = torch.nn.functional.conv2d(tx, tw, tb, **tkw)
        y.backward(tgo)

    impl.harness_events()
    np_fwdbwd()
    path = ", ".join(e.split(": ", 1)[1] for e in impl.harness_events())
    np_f, e_f, t_f = _median_alternating([np_fwd, engine_fwd, torch_fwd], budget)
    np_fb, e_fb, t_fb = _median_alternating([np_fwdbwd, engine_fwdbwd, torch_fwdbwd], budget)

    _winograd.release_scratch()  # the traced call allocates its work arrays too
    tracemalloc.start()
    try:
        y = impl.conv2d(x, w, b, **kw)
        grads = impl.conv2d_backward(go, x, w, b, **kw)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    returned = np.asarray(y).nbytes + sum(np.asarray(g).nbytes for g in grads if g is not None)
    return dict(np_f=np_f, t_f=t_f, np_fb=np_fb, t_fb=t_fb, e_f=e_f, e_fb=e_fb, path=path,
                peak=peak, returned=returned)


def layer_flops(layer: Layer) -> float:
    """Multiply-adds * 2 of the layer's forward pass."""
    out = (layer.hw + 2 * layer.pad - layer.dilation * (layer.k - 1) - 1) // layer.stride + 1
    return 2.0 * layer.n * layer.c_out * out * out * (layer.c_in // layer.groups) * layer.k ** 2


def gemm_peak(dtype: np.dtype, size: int = 2048, runs: int = 5) -> float:
    """GFLOP/s of NumPy's BLAS on a size^3 matmul, best of ``runs`` (this
    thread's CPU time), in the caller's thread limits."""
    rng = np.random.default_rng(1)
    a = rng.standard_normal((size, size)).astype(dtype)
    b = rng.standard_normal((size, size)).astype(dtype)
    out = np.empty((size, size), dtype=dtype)
    np.matmul(a, b, out=out)
    best = math.inf
    for _ in range(runs):
        t0 = CLOCK()
        np.matmul(a, b, out=out)
        best = min(best, CLOCK() - t0)
    return 2.0 * size ** 3 / best / 1e9


def _geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dtypes", default="float32,float64")
    ap.add_argument("--layers", default=None, help="comma-separated layer indices")
    ap.add_argument("--budget", type=float, default=1.5,
                    help="seconds of alternating runs per layer and measurement")
    ap.add_argument("--wall", action="store_true",
                    help="time with the wall clock instead of this thread's CPU time")
    args = ap.parse_args(argv)
    global CLOCK
    if args.wall:
        CLOCK = time.perf_counter
    layers = LAYERS if args.layers is None else [LAYERS[int(i)] for i in args.layers.split(",")]

    torch.set_num_threads(1)
    with threadpool_limits(limits=1, user_api="blas"):
        blas = [f"{i.get('internal_api')} {i.get('version')} arch={i.get('architecture')} "
                f"threads={i.get('num_threads')}" for i in threadpool_info()
                if i.get("user_api") == "blas"]
        print(f"numpy {np.__version__} (BLAS: {'; '.join(blas)}), torch {torch.__version__} "
              f"(threads={torch.get_num_threads()}), python {platform.python_version()}")
        print(f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '<unset>')} "
              f"OPENBLAS_L2_SIZE={os.environ.get('OPENBLAS_L2_SIZE', '<unset>')}")
        print(f"times are medians in ms of {'wall' if args.wall else 'thread CPU'} time; "
              "ratio = numpy / torch; peak = tracemalloc peak of one numpy fwd+bwd, and "
              "its multiple of the returned arrays' bytes")
        print(f"load average at start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs\n")
        summary = []
        peaks = {name: gemm_peak(np.dtype(name)) for name in args.dtypes.split(",")}
        print("GEMM peak of NumPy's BLAS, one thread (2048^3 np.matmul, best of 5): "
              + ", ".join(f"{name} {peak:.0f} GFLOP/s" for name, peak in peaks.items()) + "\n")
        for name in args.dtypes.split(","):
            dtype = np.dtype(name)
            rates = []
            print(f"== {name}")
            print(f"{'layer':<44} {'fwd np':>8} {'torch':>8} {'ratio':>6}   "
                  f"{'f+b np':>8} {'torch':>8} {'ratio':>6}   {'peak MB':>8} {'x ret':>6}   "
                  f"{'engine f+b':>10} {'ratio':>6}   path")
            rf, rfb, efb = [], [], []
            for layer in layers:
                r = bench_layer(layer, dtype, args.budget)
                rates.append((layer, r))
                rf.append(r["np_f"] / r["t_f"])
                rfb.append(r["np_fb"] / r["t_fb"])
                efb.append(r["e_fb"] / r["t_fb"])
                print(f"{layer.label():<44} {r['np_f'] * 1e3:8.2f} {r['t_f'] * 1e3:8.2f} "
                      f"{rf[-1]:6.2f}   {r['np_fb'] * 1e3:8.2f} {r['t_fb'] * 1e3:8.2f} "
                      f"{rfb[-1]:6.2f}   {r['peak'] / 2**20:8.1f} "
                      f"{r['peak'] / r['returned']:6.2f}   {r['e_fb'] * 1e3:10.2f} "
                      f"{efb[-1]:6.2f}   {r['path']}", flush=True)
            gf, gfb = _geomean(rf), _geomean(rfb)
            print(f"{'geometric mean':<44} {'':>8} {'':>8} {gf:6.2f}   {'':>8} {'':>8} {gfb:6.2f}"
                  f"   {'':>8} {'':>6}   {'':>10} {_geomean(efb):6.2f}\n")
            peak = peaks[name]
            print(f"useful GFLOP/s ({name}: the direct sum's 2*MACs, whatever the algorithm; "
                  f"GEMM peak {peak:.0f}; % = NumPy's share of that peak)")
            print(f"{'layer':<44} {'GFLOP':>6} {'fwd np':>8} {'torch':>8} {'%':>4}   "
                  f"{'f+b np':>8} {'torch':>8} {'%':>4}")
            for layer, r in rates:
                fl = layer_flops(layer) / 1e9
                f_np, f_t = fl / r["np_f"], fl / r["t_f"]
                fb_np, fb_t = 3 * fl / r["np_fb"], 3 * fl / r["t_fb"]
                print(f"{layer.label():<44} {fl:6.3f} {f_np:8.1f} {f_t:8.1f} "
                      f"{100 * f_np / peak:4.0f}   {fb_np:8.1f} {fb_t:8.1f} "
                      f"{100 * fb_np / peak:4.0f}")
            print()
            over = [f"{layer.label()} {r['peak'] / r['returned']:.2f}" for layer, r in rates
                    if r["peak"] > 1.5 * r["returned"]]
            worst = max((v, layer.label()) for v, (layer, _) in zip(rfb, rates)
                        if layer.note != "depthwise")
            depthwise = [v for v, (layer, _) in zip(rfb, rates) if layer.note == "depthwise"]
            summary.append((name, gf, gfb, worst, depthwise, over))
        print("targets (issue 25): float32 fwd+bwd <= 0.8 with no layer above 1.3 (depthwise "
              "1.6), float64 fwd+bwd <= 0.45; peak memory <= 1.5x the returned arrays on the "
              "64->64 layer")
        for name, gf, gfb, worst, depthwise, over in summary:
            print(f"  {name}: fwd {gf:.2f}, fwd+bwd {gfb:.2f} (highest layer but depthwise "
                  f"{worst[0]:.2f}, {worst[1]}; depthwise "
                  f"{', '.join(f'{v:.2f}' for v in depthwise) or '-'}); "
                  f"peak memory above 1.5x: {', '.join(over) if over else 'none'}")
        print(f"load average at end: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
