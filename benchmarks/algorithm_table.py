"""Measure which algorithm is fastest per layer and write conv_impl/_algorithm_table.py.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python -m benchmarks.algorithm_table

For each dtype, kernel and dilation, channel pair and image size of the grid
below it times every algorithm that applies -- the engine (GEMM), Winograd
F(2,3) and F(4,3), FFT -- on each part of a layer (forward, input gradient,
weight gradient) on one thread, in alternating rounds (median of this
thread's CPU time), and records the winner (the engine unless another is
faster by more than the noise, ``MARGIN``). ``conv_impl.einsum`` then takes, per call,
the winner of the nearest measured layer (`conv_impl._algorithm_table`).
``--dry-run`` prints the table instead of writing it.
"""

from __future__ import annotations

import argparse
import itertools
import os
import platform
import statistics
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np
from threadpoolctl import threadpool_limits

from conv_impl import einsum

TABLE = Path(__file__).resolve().parent.parent / "conv_impl" / "_algorithm_table.py"

#: the grid: (kernel, dilation) pairs (square), (C_in, C_out) pairs, image sizes
#: (square), batch
KERNELS = ((3, 1), (3, 2), (5, 1))
CHANNELS = ((3, 16), (16, 16), (64, 64), (128, 128))
SIZES = (16, 32)
BATCH = 8
#: another algorithm wins only if it takes at most this share of the engine's time:
#: on this shared machine the medians of a few rounds move by 5-10% from run to run
#: (3->16 32px float32 forward: Winograd 0.60 vs engine 0.62 ms at batch 8 made it
#: the winner, and it ran 1.8-3.7x slower than the engine at batch 32)
MARGIN = 0.9
#: the algorithm argument of einsum that forces each path (where it applies)
FORCING = {einsum.GEMM: "gemm", einsum.WINOGRAD[2]: "winograd-f2",
           einsum.WINOGRAD[4]: "winograd", einsum.FFT: "fft"}


def _part(part: str, algorithm: str, x, w, go, padding, dilation):
    nd = x.ndim - 2
    one = (1,) * nd
    if part == "forward":
        return lambda: einsum._correlate(x, w, None, one, padding, dilation, 1, go.shape[2:],
                                         algorithm)
    want_input = part == "input"
    return lambda: einsum._correlate_grads(x, go, w, one, padding, dilation, 1, x.shape[2:],
                                           want_input, not want_input, False, algorithm)


def _medians(fns: list, rounds: int) -> list[float]:
    for f in fns:
        f()
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(rounds):
        for f, t in zip(fns, times):
            t0 = time.thread_time()
            f()
            t.append(time.thread_time() - t0)
    return [statistics.median(t) for t in times]


def measure(dtype: str, rounds: int) -> tuple[dict, list[str]]:
    table, lines = {}, []
    rng = np.random.default_rng(0)
    for (k, d), (ci, co), hw in itertools.product(KERNELS, CHANNELS, SIZES):
        pad = d * (k // 2)
        x = rng.standard_normal((BATCH, ci, hw, hw)).astype(dtype)
        w = rng.standard_normal((co, ci, k, k)).astype(dtype)
        go = rng.standard_normal((BATCH, co, hw, hw)).astype(dtype)
        for part in ("forward", "input", "weight"):
            paths = [einsum.GEMM] + [p for p in (einsum.WINOGRAD[2], einsum.WINOGRAD[4],
                                                   einsum.FFT)
                                     if einsum._applies(p, part, (k, k), (1, 1), (pad, pad),
                                                        (d, d))]
            times = _medians([_part(part, FORCING[p], x, w, go, (pad, pad), (d, d))
                              for p in paths], rounds)
            best = paths[int(np.argmin(times))]
            if min(times) > MARGIN * times[0]:  # within the noise of the engine's time
                best = einsum.GEMM
            positions = (hw + 2 * pad) ** 2
            table[(dtype, part, (k, k), (d, d), ci, co, positions)] = best
            lines.append(f"{dtype:8} {part:8} k{k} d{d} {ci:4}->{co:<4} {hw:3}px  " + "  ".join(
                f"{p} {t * 1e3:.2f}" for p, t in zip(paths, times)) + f"  -> {best}")
            print(lines[-1], flush=True)
    return table, lines


def render(table: dict, source: str) -> str:
    text = TABLE.read_text()
    head = text[:text.index("MEASURED: dict")]
    body = "MEASURED: dict[tuple[str, str, Ints, Ints, int, int, int], str] = {\n"
    body += "".join(f"    {key!r}: {value!r},\n" for key, value in table.items()) + "}\n"
    tail = text[text.index("\n#: the run that measured MEASURED"):]
    tail = tail[:tail.index("SOURCE = ")] + f"SOURCE = {source!r}\n" + \
        tail[tail.index("\n\n\ndef _distance"):]
    return head + body + tail


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dtypes", default="float32,float64")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--dry-run", action="store_true")
    args = ap.parse_args(argv)
    load = os.getloadavg()[0]
    print(f"numpy {np.__version__}, python {platform.python_version()}, load {load:.1f} "
          f"on {os.cpu_count()} CPUs; medians of {args.rounds} rounds, ms of thread CPU time")
    table: dict = {}
    with threadpool_limits(limits=1, user_api="blas"):
        for dtype in args.dtypes.split(","):
            table.update(measure(dtype, args.rounds)[0])
    source = (f"benchmarks/algorithm_table.py, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"
              f", load {load:.1f}-{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    text = render(table, source)
    if args.dry_run:
        print(text)
    else:
        TABLE.write_text(text)
        print(f"wrote {TABLE}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
