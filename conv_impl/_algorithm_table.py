"""Which algorithm ``conv_impl.einsum`` takes per layer: data measured by a benchmark.

Written by ``python -m benchmarks.algorithm_table`` (do not edit by hand):
for each dtype and part of the computation (forward, input gradient, weight
gradient), the layers it timed, the engine (GEMM) against each other
algorithm that applies, and the winner. `fastest` answers for a layer by the
nearest measured layer of the same kernel (in log-distance of channels and
positions), so a threshold is always a measured crossover, never a guess.
"""

from __future__ import annotations

import math
from typing import Optional, Sequence

import numpy as np

Ints = tuple[int, ...]

#: (dtype, part, kernel, channels per group in, out, positions per image) -> winner;
#: filled by benchmarks/algorithm_table.py
MEASURED: dict[tuple[str, str, Ints, int, int, int], str] = {}

#: the run that measured MEASURED
SOURCE = "not measured yet"


def _distance(a: tuple[int, int, int], b: tuple[int, int, int]) -> float:
    return sum(abs(math.log(x / y)) for x, y in zip(a, b))


def fastest(part: str, dtype: np.dtype, n: int, c_in: int, c_out: int, groups: int,
            kernel: Ints, in_size: Ints, padding: Ints, dilation: Ints,
            allowed: Sequence[str]) -> Optional[str]:
    """The measured winner among the engine and ``allowed`` for the nearest measured
    layer of this dtype, part and kernel; None (the engine) when none was measured
    or the winner does not apply here."""
    name = "float32" if np.dtype(dtype) == np.float32 else str(np.dtype(dtype))
    positions = math.prod(s + 2 * p for s, p in zip(in_size, padding))
    here = (c_in // groups, c_out // groups, max(1, positions))
    best, winner = math.inf, None
    for (d, p, k, ci, co, pos), won in MEASURED.items():
        if d == name and p == part and k == tuple(kernel):
            dist = _distance(here, (ci, co, pos))
            if dist < best:
                best, winner = dist, won
    return winner if winner in allowed else None
