"""Which algorithm ``conv_impl.einsum`` takes per layer: data measured by a benchmark.

Written by ``python -m benchmarks.algorithm_table`` (do not edit by hand):
for each dtype and part of the computation (forward, input gradient, weight
gradient), the layers it timed, the engine (GEMM) against each other
algorithm that applies, and the winner. `fastest` answers for a layer by the
nearest measured layer of the same kernel (in log-distance of channels and
positions; where equally near ones disagree, the engine), so a threshold is
always a measured crossover, never a guess.
"""

from __future__ import annotations

import math
from typing import Optional, Sequence

import numpy as np

Ints = tuple[int, ...]

#: (dtype, part, kernel, dilation, channels per group in, out, positions per image)
#: -> winner; filled by benchmarks/algorithm_table.py
MEASURED: dict[tuple[str, str, Ints, Ints, int, int, int], str] = {
    ('float32', 'forward', (3, 3), (1, 1), 3, 16, 324): 'gemm',
    ('float32', 'input', (3, 3), (1, 1), 3, 16, 324): 'winograd F(4,3)',
    ('float32', 'weight', (3, 3), (1, 1), 3, 16, 324): 'gemm',
    ('float32', 'forward', (3, 3), (1, 1), 3, 16, 1156): 'gemm',
    ('float32', 'input', (3, 3), (1, 1), 3, 16, 1156): 'gemm',
    ('float32', 'weight', (3, 3), (1, 1), 3, 16, 1156): 'gemm',
    ('float32', 'forward', (3, 3), (1, 1), 16, 16, 324): 'gemm',
    ('float32', 'input', (3, 3), (1, 1), 16, 16, 324): 'winograd F(4,3)',
    ('float32', 'weight', (3, 3), (1, 1), 16, 16, 324): 'gemm',
    ('float32', 'forward', (3, 3), (1, 1), 16, 16, 1156): 'winograd F(4,3)',
    ('float32', 'input', (3, 3), (1, 1), 16, 16, 1156): 'winograd F(4,3)',
    ('float32', 'weight', (3, 3), (1, 1), 16, 16, 1156): 'winograd F(4,3)',
    ('float32', 'forward', (3, 3), (1, 1), 64, 64, 324): 'winograd F(4,3)',
    ('float32', 'input', (3, 3), (1, 1), 64, 64, 324): 'winograd F(4,3)',
    ('float32', 'weight', (3, 3), (1, 1), 64, 64, 324): 'winograd F(4,3)',
    ('float32', 'forward', (3, 3), (1, 1), 64, 64, 1156): 'winograd F(4,3)',
    ('float32', 'input', (3, 3), (1, 1), 64, 64, 1156): 'winograd F(4,3)',
    ('float32', 'weight', (3, 3), (1, 1), 64, 64, 1156): 'winograd F(4,3)',
    ('float32', 'forward', (3, 3), (1, 1), 128, 128, 324): 'winograd F(4,3)',
    ('float32', 'input', (3, 3), (1, 1), 128, 128, 324): 'winograd F(4,3)',
    ('float32', 'weight', (3, 3), (1, 1), 128, 128, 324): 'winograd F(4,3)',
    ('float32', 'forward', (3, 3), (1, 1), 128, 128, 1156): 'winograd F(4,3)',
    ('float32', 'input', (3, 3), (1, 1), 128, 128, 1156): 'winograd F(4,3)',
    ('float32', 'weight', (3, 3), (1, 1), 128, 128, 1156): 'winograd F(4,3)',
    ('float32', 'forward', (3, 3), (2, 2), 3, 16, 400): 'gemm',
    ('float32', 'input', (3, 3), (2, 2), 3, 16, 400): 'gemm',
    ('float32', 'weight', (3, 3), (2, 2), 3, 16, 400): 'gemm',
    ('float32', 'forward', (3, 3), (2, 2), 3, 16, 1296): 'gemm',
    ('float32', 'input', (3, 3), (2, 2), 3, 16, 1296): 'gemm',
    ('float32', 'weight', (3, 3), (2, 2), 3, 16, 1296): 'gemm',
    ('float32', 'forward', (3, 3), (2, 2), 16, 16, 400): 'winograd F(4,3)',
    ('float32', 'input', (3, 3), (2, 2), 16, 16, 400): 'winograd F(4,3)',
    ('float32', 'weight', (3, 3), (2, 2), 16, 16, 400): 'gemm',
    ('float32', 'forward', (3, 3), (2, 2), 16, 16, 1296): 'winograd F(4,3)',
    ('float32', 'input', (3, 3), (2, 2), 16, 16, 1296): 'winograd F(4,3)',
    ('float32', 'weight', (3, 3), (2, 2), 16, 16, 1296): 'winograd F(4,3)',
    ('float32', 'forward', (3, 3), (2, 2), 64, 64, 400): 'winograd F(4,3)',
    ('float32', 'input', (3, 3), (2, 2), 64, 64, 400): 'winograd F(4,3)',
    ('float32', 'weight', (3, 3), (2, 2), 64, 64, 400): 'winograd F(4,3)',
    ('float32', 'forward', (3, 3), (2, 2), 64, 64, 1296): 'winograd F(4,3)',
    ('float32', 'input', (3, 3), (2, 2), 64, 64, 1296): 'winograd F(4,3)',
    ('float32', 'weight', (3, 3), (2, 2), 64, 64, 1296): 'winograd F(4,3)',
    ('float32', 'forward', (3, 3), (2, 2), 128, 128, 400): 'winograd F(2,3)',
    ('float32', 'input', (3, 3), (2, 2), 128, 128, 400): 'winograd F(2,3)',
    ('float32', 'weight', (3, 3), (2, 2), 128, 128, 400): 'winograd F(2,3)',
    ('float32', 'forward', (3, 3), (2, 2), 128, 128, 1296): 'winograd F(4,3)',
    ('float32', 'input', (3, 3), (2, 2), 128, 128, 1296): 'winograd F(4,3)',
    ('float32', 'weight', (3, 3), (2, 2), 128, 128, 1296): 'winograd F(4,3)',
    ('float32', 'forward', (5, 5), (1, 1), 3, 16, 400): 'gemm',
    ('float32', 'input', (5, 5), (1, 1), 3, 16, 400): 'gemm',
    ('float32', 'weight', (5, 5), (1, 1), 3, 16, 400): 'gemm',
    ('float32', 'forward', (5, 5), (1, 1), 3, 16, 1296): 'gemm',
    ('float32', 'input', (5, 5), (1, 1), 3, 16, 1296): 'gemm',
    ('float32', 'weight', (5, 5), (1, 1), 3, 16, 1296): 'gemm',
    ('float32', 'forward', (5, 5), (1, 1), 16, 16, 400): 'gemm',
    ('float32', 'input', (5, 5), (1, 1), 16, 16, 400): 'gemm',
    ('float32', 'weight', (5, 5), (1, 1), 16, 16, 400): 'gemm',
    ('float32', 'forward', (5, 5), (1, 1), 16, 16, 1296): 'gemm',
    ('float32', 'input', (5, 5), (1, 1), 16, 16, 1296): 'gemm',
    ('float32', 'weight', (5, 5), (1, 1), 16, 16, 1296): 'gemm',
    ('float32', 'forward', (5, 5), (1, 1), 64, 64, 400): 'gemm',
    ('float32', 'input', (5, 5), (1, 1), 64, 64, 400): 'gemm',
    ('float32', 'weight', (5, 5), (1, 1), 64, 64, 400): 'gemm',
    ('float32', 'forward', (5, 5), (1, 1), 64, 64, 1296): 'gemm',
    ('float32', 'input', (5, 5), (1, 1), 64, 64, 1296): 'gemm',
    ('float32', 'weight', (5, 5), (1, 1), 64, 64, 1296): 'gemm',
    ('float32', 'forward', (5, 5), (1, 1), 128, 128, 400): 'gemm',
    ('float32', 'input', (5, 5), (1, 1), 128, 128, 400): 'gemm',
    ('float32', 'weight', (5, 5), (1, 1), 128, 128, 400): 'gemm',
    ('float32', 'forward', (5, 5), (1, 1), 128, 128, 1296): 'gemm',
    ('float32', 'input', (5, 5), (1, 1), 128, 128, 1296): 'gemm',
    ('float32', 'weight', (5, 5), (1, 1), 128, 128, 1296): 'gemm',
    ('float64', 'forward', (3, 3), (1, 1), 3, 16, 324): 'gemm',
    ('float64', 'input', (3, 3), (1, 1), 3, 16, 324): 'gemm',
    ('float64', 'weight', (3, 3), (1, 1), 3, 16, 324): 'gemm',
    ('float64', 'forward', (3, 3), (1, 1), 3, 16, 1156): 'gemm',
    ('float64', 'input', (3, 3), (1, 1), 3, 16, 1156): 'gemm',
    ('float64', 'weight', (3, 3), (1, 1), 3, 16, 1156): 'gemm',
    ('float64', 'forward', (3, 3), (1, 1), 16, 16, 324): 'winograd F(4,3)',
    ('float64', 'input', (3, 3), (1, 1), 16, 16, 324): 'winograd F(4,3)',
    ('float64', 'weight', (3, 3), (1, 1), 16, 16, 324): 'winograd F(4,3)',
    ('float64', 'forward', (3, 3), (1, 1), 16, 16, 1156): 'winograd F(4,3)',
    ('float64', 'input', (3, 3), (1, 1), 16, 16, 1156): 'winograd F(4,3)',
    ('float64', 'weight', (3, 3), (1, 1), 16, 16, 1156): 'winograd F(4,3)',
    ('float64', 'forward', (3, 3), (1, 1), 64, 64, 324): 'winograd F(4,3)',
    ('float64', 'input', (3, 3), (1, 1), 64, 64, 324): 'winograd F(4,3)',
    ('float64', 'weight', (3, 3), (1, 1), 64, 64, 324): 'winograd F(4,3)',
    ('float64', 'forward', (3, 3), (1, 1), 64, 64, 1156): 'winograd F(4,3)',
    ('float64', 'input', (3, 3), (1, 1), 64, 64, 1156): 'winograd F(4,3)',
    ('float64', 'weight', (3, 3), (1, 1), 64, 64, 1156): 'winograd F(4,3)',
    ('float64', 'forward', (3, 3), (1, 1), 128, 128, 324): 'winograd F(4,3)',
    ('float64', 'input', (3, 3), (1, 1), 128, 128, 324): 'winograd F(4,3)',
    ('float64', 'weight', (3, 3), (1, 1), 128, 128, 324): 'winograd F(4,3)',
    ('float64', 'forward', (3, 3), (1, 1), 128, 128, 1156): 'winograd F(4,3)',
    ('float64', 'input', (3, 3), (1, 1), 128, 128, 1156): 'winograd F(4,3)',
    ('float64', 'weight', (3, 3), (1, 1), 128, 128, 1156): 'winograd F(4,3)',
    ('float64', 'forward', (3, 3), (2, 2), 3, 16, 400): 'gemm',
    ('float64', 'input', (3, 3), (2, 2), 3, 16, 400): 'gemm',
    ('float64', 'weight', (3, 3), (2, 2), 3, 16, 400): 'gemm',
    ('float64', 'forward', (3, 3), (2, 2), 3, 16, 1296): 'gemm',
    ('float64', 'input', (3, 3), (2, 2), 3, 16, 1296): 'gemm',
    ('float64', 'weight', (3, 3), (2, 2), 3, 16, 1296): 'gemm',
    ('float64', 'forward', (3, 3), (2, 2), 16, 16, 400): 'winograd F(4,3)',
    ('float64', 'input', (3, 3), (2, 2), 16, 16, 400): 'winograd F(4,3)',
    ('float64', 'weight', (3, 3), (2, 2), 16, 16, 400): 'winograd F(4,3)',
    ('float64', 'forward', (3, 3), (2, 2), 16, 16, 1296): 'winograd F(4,3)',
    ('float64', 'input', (3, 3), (2, 2), 16, 16, 1296): 'winograd F(4,3)',
    ('float64', 'weight', (3, 3), (2, 2), 16, 16, 1296): 'winograd F(4,3)',
    ('float64', 'forward', (3, 3), (2, 2), 64, 64, 400): 'winograd F(4,3)',
    ('float64', 'input', (3, 3), (2, 2), 64, 64, 400): 'winograd F(4,3)',
    ('float64', 'weight', (3, 3), (2, 2), 64, 64, 400): 'winograd F(4,3)',
    ('float64', 'forward', (3, 3), (2, 2), 64, 64, 1296): 'winograd F(4,3)',
    ('float64', 'input', (3, 3), (2, 2), 64, 64, 1296): 'winograd F(4,3)',
    ('float64', 'weight', (3, 3), (2, 2), 64, 64, 1296): 'winograd F(4,3)',
    ('float64', 'forward', (3, 3), (2, 2), 128, 128, 400): 'winograd F(4,3)',
    ('float64', 'input', (3, 3), (2, 2), 128, 128, 400): 'winograd F(4,3)',
    ('float64', 'weight', (3, 3), (2, 2), 128, 128, 400): 'winograd F(4,3)',
    ('float64', 'forward', (3, 3), (2, 2), 128, 128, 1296): 'winograd F(4,3)',
    ('float64', 'input', (3, 3), (2, 2), 128, 128, 1296): 'winograd F(4,3)',
    ('float64', 'weight', (3, 3), (2, 2), 128, 128, 1296): 'winograd F(4,3)',
    ('float64', 'forward', (5, 5), (1, 1), 3, 16, 400): 'gemm',
    ('float64', 'input', (5, 5), (1, 1), 3, 16, 400): 'gemm',
    ('float64', 'weight', (5, 5), (1, 1), 3, 16, 400): 'gemm',
    ('float64', 'forward', (5, 5), (1, 1), 3, 16, 1296): 'gemm',
    ('float64', 'input', (5, 5), (1, 1), 3, 16, 1296): 'gemm',
    ('float64', 'weight', (5, 5), (1, 1), 3, 16, 1296): 'gemm',
    ('float64', 'forward', (5, 5), (1, 1), 16, 16, 400): 'gemm',
    ('float64', 'input', (5, 5), (1, 1), 16, 16, 400): 'fft',
    ('float64', 'weight', (5, 5), (1, 1), 16, 16, 400): 'gemm',
    ('float64', 'forward', (5, 5), (1, 1), 16, 16, 1296): 'fft',
    ('float64', 'input', (5, 5), (1, 1), 16, 16, 1296): 'fft',
    ('float64', 'weight', (5, 5), (1, 1), 16, 16, 1296): 'gemm',
    ('float64', 'forward', (5, 5), (1, 1), 64, 64, 400): 'gemm',
    ('float64', 'input', (5, 5), (1, 1), 64, 64, 400): 'gemm',
    ('float64', 'weight', (5, 5), (1, 1), 64, 64, 400): 'gemm',
    ('float64', 'forward', (5, 5), (1, 1), 64, 64, 1296): 'gemm',
    ('float64', 'input', (5, 5), (1, 1), 64, 64, 1296): 'gemm',
    ('float64', 'weight', (5, 5), (1, 1), 64, 64, 1296): 'gemm',
    ('float64', 'forward', (5, 5), (1, 1), 128, 128, 400): 'gemm',
    ('float64', 'input', (5, 5), (1, 1), 128, 128, 400): 'gemm',
    ('float64', 'weight', (5, 5), (1, 1), 128, 128, 400): 'gemm',
    ('float64', 'forward', (5, 5), (1, 1), 128, 128, 1296): 'gemm',
    ('float64', 'input', (5, 5), (1, 1), 128, 128, 1296): 'gemm',
    ('float64', 'weight', (5, 5), (1, 1), 128, 128, 1296): 'gemm',
}

#: the run that measured MEASURED
SOURCE = 'benchmarks/algorithm_table.py, 2026-12-02 13:38 UTC, load 7.3-8.2 on 2 CPUs'



def _distance(a: tuple[int, int, int], b: tuple[int, int, int]) -> float:
    return sum(abs(math.log(x / y)) for x, y in zip(a, b))


def fastest(part: str, dtype: np.dtype, n: int, c_in: int, c_out: int, groups: int,
            kernel: Ints, in_size: Ints, padding: Ints, dilation: Ints,
            allowed: Sequence[str]) -> Optional[str]:
    """The measured winner among the engine and ``allowed`` for the nearest measured
    layer of this dtype, part, kernel and dilation; None (the engine) when none was
    measured or the winner does not apply here. Only ungrouped layers were measured:
    grouped ones (depthwise: the engine's direct path) stay on the engine."""
    if groups != 1:
        return None
    name = "float32" if np.dtype(dtype) == np.float32 else str(np.dtype(dtype))
    positions = math.prod(s + 2 * p for s, p in zip(in_size, padding))
    here = (c_in // groups, c_out // groups, max(1, positions))
    best, winners = math.inf, set()
    for (d, p, k, dil, ci, co, pos), won in MEASURED.items():
        if d == name and p == part and k == tuple(kernel) and dil == tuple(dilation):
            dist = _distance(here, (ci, co, pos))
            if dist < best - 1e-9:
                best, winners = dist, {won}
            elif dist < best + 1e-9:
                winners.add(won)
    # equally near measurements that disagree: the engine
    winner = winners.pop() if len(winners) == 1 else None
    return winner if winner in allowed else None
