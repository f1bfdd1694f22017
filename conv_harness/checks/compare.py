"""Compare a result with the oracle's under an elementwise tolerance.

`torch.testing.assert_close` takes one scalar rtol and atol for a whole
tensor; the bound here differs per element (it follows each element's sum of
|terms|), so the comparison is our own, and so is the report, which must say
where the largest error is and what the bound was there.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from conv_harness.checks.tolerance import Tolerance, note_flushes
from conv_harness.running.calling import Observed

SMALL_ARRAY = 64  # results up to this many elements are printed whole


@dataclass(frozen=True)
class Mismatch:
    """How a result differs from the reference beyond the tolerance."""

    name: str
    count: int
    size: int
    index: tuple[int, ...]
    actual: float
    expected: float
    error: float
    allowed: float
    tolerance: Tolerance
    actual_array: np.ndarray
    expected_array: np.ndarray

    def report(self) -> str:
        lines = [
            f"{self.name}: {self.count} of {self.size} elements off; largest error "
            f"{self.error:.6g} at index {self.index}: got {self.actual!r}, expected "
            f"{self.expected!r} (allowed {self.allowed:.3g})",
            f"tolerance: {self.tolerance.explain()}",
        ]
        if self.size <= SMALL_ARRAY:
            with np.printoptions(precision=6, suppress=True, linewidth=100):
                lines += [f"expected {self.name}:", str(self.expected_array),
                          f"actual {self.name}:", str(self.actual_array)]
        return "\n".join(lines)


def compare(name: str, actual: np.ndarray, expected: np.ndarray, tol: Tolerance,
            seen: Observed | None = None) -> Mismatch | None:
    """None when ``actual`` is within ``tol`` of ``expected`` everywhere; a flush of
    subnormals, which is no failure, is noted in ``seen`` (a check's), where given."""
    a = np.asarray(actual, dtype=np.float64)
    note_flushes(a, expected, tol, seen)
    # Overflow to inf (a huge error, an error over a tiny bound) and inf - inf are
    # results here, handled below, not something to warn the user about.
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        error = np.abs(a - expected)
        # NaN or inf where the reference is finite is always an error (and
        # error > bound is False for NaN, so it must be caught explicitly).
        bad = ~np.isfinite(a) | (error > tol.bound)
        count = int(np.count_nonzero(bad))
        if count == 0:
            return None
        ratio = np.where(bad, np.nan_to_num(error / np.maximum(tol.bound, 1e-300), nan=np.inf,
                                            posinf=np.inf), -1.0)
    flat = int(np.argmax(ratio))
    index = tuple(int(i) for i in np.unravel_index(flat, a.shape))
    return Mismatch(
        name=name, count=count, size=a.size, index=index, actual=float(a[index]),
        expected=float(expected[index]), error=float(error[index]),
        allowed=float(tol.bound[index]), tolerance=tol,
        actual_array=np.asarray(actual), expected_array=expected,
    )
