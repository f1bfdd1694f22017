"""Tolerances from a rounding-error bound, elementwise, never a tuned constant.

Each result element is a sum of K products (K: the reduction length). Summed
in floating point in *any* order, blocked or not, with any accumulation type
at least as wide as the data, the error is at most gamma(K) * sum |products|
with gamma(n) = n*u / (1 - n*u) and u the unit roundoff of the dtype (Higham,
Accuracy and Stability of Numerical Algorithms, 2nd ed., sec. 3.1). The sum
of |products| is the same operation on absolute values, which the oracle
computes. On top of that bound:

- the oracle's own float64 error, the same bound with float64's u;
- underflow, which is absolute: at most one smallest subnormal per term;
- a normwise floor c * u * ||a|| * ||b|| for the two operands, because FFT-
  and Winograd-style algorithms round transformed values that mix all
  elements: their error is normwise, not elementwise. Where a window reads
  only padding the elementwise bound is 0 while such an algorithm returns
  1e-17, and the output's own largest value would be no floor at all when it
  is small by cancellation. c = 5 * log2(2 + n), the FFT bound's growth
  (Higham sec. 24.1) with n the larger operand's size.

A float64 implementation that computes in float32, or a float32 one that
accumulates in float16, is off by about u(narrow) * |y|: orders of magnitude
beyond this bound once the data do not round exactly, so it is caught.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from harness.oracle import Reference
from harness.problem import ConvCase

FLOAT64_UNIT_ROUNDOFF = float(np.finfo(np.float64).eps) / 2


def unit_roundoff(dtype: str | np.dtype) -> float:
    return float(np.finfo(np.dtype(dtype)).eps) / 2


def gamma(n: int, u: float) -> float:
    """Higham's gamma_n = n u / (1 - n u): the relative bound of an n-term sum."""
    return math.inf if n * u >= 1 else n * u / (1 - n * u)


def norm2(a: np.ndarray) -> float:
    """The 2-norm of ``a`` without underflow or overflow in its squares.

    `np.linalg.norm` squares the elements first, so values below about
    1e-154 give a norm of 0 (and the floor would vanish exactly where a
    normwise-accurate algorithm is off by 1e-266); scaling by the largest
    magnitude keeps every square in range.
    """
    values = np.abs(np.asarray(a, dtype=np.float64).ravel())
    largest = float(values.max(initial=0.0))
    if largest == 0.0 or not math.isfinite(largest):
        return largest
    return largest * float(np.sqrt(np.dot(values / largest, values / largest)))


def normwise_floor(a: np.ndarray, b: np.ndarray, u: float) -> float:
    n = max(a.size, b.size)
    c = 5 * math.log2(2 + n)
    return c * u * norm2(a) * norm2(b)


@dataclass(frozen=True)
class Tolerance:
    """The allowed error of one result, elementwise, and why."""

    bound: np.ndarray
    dtype: str
    terms: int
    floor: float

    def explain(self) -> str:
        return (f"{self.dtype} (u={unit_roundoff(self.dtype):.3g}), reduction length "
                f"K={self.terms}: gamma(K)*sum|terms| elementwise + normwise floor "
                f"{self.floor:.3g}")


def tolerance(case: ConvCase, name: str, magnitude: Reference) -> Tolerance:
    """The tolerance for result ``name`` (``y``, ``grad_input``, ...) of ``case``."""
    p = case.problem
    terms, operands = {
        "y": (p.forward_terms() + 1, (case.x, case.weight)),
        "grad_input": (p.grad_input_terms(), (case.grad_output, case.weight)),
        "grad_weight": (p.grad_weight_terms(), (case.x, case.grad_output)),
        "grad_bias": (p.grad_bias_terms(), None),
    }[name]
    u = unit_roundoff(p.dtype)
    floor = 0.0 if operands is None else normwise_floor(*operands, u)
    tiny = float(np.finfo(np.dtype(p.dtype)).smallest_subnormal)
    size = magnitude[name]
    bound = ((gamma(terms, u) + gamma(terms, FLOAT64_UNIT_ROUNDOFF)) * size
             + terms * tiny + floor)
    return Tolerance(bound=bound, dtype=p.dtype, terms=terms, floor=floor)
