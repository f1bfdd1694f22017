"""Tolerances from a rounding-error bound, elementwise, never a tuned constant.

Each result element is a sum of K products (K: the reduction length). Summed
in floating point in *any* order, blocked or not, with any accumulation type
at least as wide as the data, the error is at most gamma(K) * sum |products|
with gamma(n) = n*u / (1 - n*u) and u the unit roundoff of the dtype (Higham,
Accuracy and Stability of Numerical Algorithms, 2nd ed., sec. 3.1). The sum
of |products| is the same operation on absolute values, which the oracle
computes. On top of that bound:

- the oracle's own float64 error, the same bound with float64's u;
- underflow and flushing to zero, which are absolute (`flush_allowance`);
- for an implementation that declares a Winograd algorithm in CAPABILITIES
  (``"algorithm": "winograd F(4,3)"``), the normwise growth of its transforms
  (conv_harness/checks/algorithms.py), only for it;
- bfloat16 products (exact in float32: two 8-bit significands) summed in
  float32, as the implementation declares by default, then rounded once to
  bfloat16: ``u_bf16 * sum|terms|`` for that rounding and float32's
  gamma(K) for the sum; where it declares ``"bfloat16_accumulation":
  "bfloat16"``, bfloat16's own gamma(K);
- float16 results of more than `FLOAT16_MAX_TERMS` terms, where float16's own
  gamma(K) approaches 1 and could not fail: the same exact products summed in
  float32 and rounded once, as real float16 kernels compute them (where the
  implementation declares ``"float16_accumulation": "float16"`` such problems
  are not drawn, and their bound stays float16's gamma(K));
- for an implementation that declares ``"float32_precision": "tf32"``, float32
  inputs rounded to TF32 before they are multiplied (`TF32_UNIT_ROUNDOFF`);
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

Subnormals (contract section 2): an implementation may flush subnormal values
to zero, its results (FTZ) and its inputs (DAZ), as optimised CPU and GPU
kernels do; flushing a *normal* number is a bug. `flush_allowance` is the
absolute error that policy permits, with lambda the dtype's smallest normal
number (1.2e-38 in float32) and K the result's number of terms:

- results flushed: every product and every partial sum whose value is below
  lambda may become 0, a change of less than lambda each. An element is K
  products and at most K additions and roundings into the accumulator and
  output type (the bias counts as a term), so at most 2*K*lambda. (Gradual
  underflow, which never flushes, is off by at most half a subnormal per
  product and exact in its additions: the 2*K*lambda covers it.) Each such
  change can be magnified by the later roundings by at most (1 + gamma(K)).
- operands flushed: a subnormal operand a_i (|a_i| < lambda) read as 0 changes
  its product by |a_i * b_i| < lambda * |b_i|, |b_i| the other factor. Over
  the K terms of an element that is at most K * lambda * max|b| when some a is
  subnormal (and the same with a and b swapped; a subnormal bias adds lambda).
  It is also at most the element's sum of |products| (a flushed term loses no
  more than itself), so the allowance is the smaller of the two: where every
  result is tiny it is the result itself, and it is 0 when no operand is
  subnormal, which is most of the time.

So a flushing implementation passes, while one that zeroes results of
2**10 * lambda (1.2e-35 in float32) or 1e-30 fails: the data include a noise
kind of tiny values (strategies/cases.py) whose results land there.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable

import numpy as np

from conv_harness.checks import algorithms
from conv_harness.checks.oracle import Reference
from conv_harness.problem import FLOAT16_MAX_TERMS, ConvCase, finfo
from conv_harness.running.calling import Observed
from conv_harness.running.loader import Implementation

FLOAT64_UNIT_ROUNDOFF = float(np.finfo(np.float64).eps) / 2
#: TF32 keeps 10 explicit mantissa bits: rounding to nearest, a relative error of 2**-11.
#: A product of two such inputs is then off by (1 + d1)(1 + d2) - 1, at most 2u + u**2
#: of |x w|, before float32's accumulation adds its gamma(K) (NVIDIA's TF32 rounds the
#: inputs of the products only, and accumulates in float32).
TF32_UNIT_ROUNDOFF = 2.0 ** -11


def unit_roundoff(dtype: str | np.dtype) -> float:
    return float(finfo(dtype).eps) / 2


#: the largest relative bound `gamma` gives: where n u >= 1 a narrow dtype's bound
#: (1 + u)**n - 1 can overflow float64, and an infinite bound times a zero magnitude
#: is NaN. 1e150 times the least non-zero sum of |products| (two subnormals of
#: bfloat16, 8.5e-81) still exceeds any value a dtype narrower than float64 holds, and
#: float64 never gets there (n u >= 1 needs 4.5e15 terms).
GAMMA_CAP = 1e150


def gamma(n: int, u: float) -> float:
    """The relative error bound of n roundings with unit roundoff u, any order: Higham's
    gamma_n = n u / (1 - n u) while n u < 1, and from there the bound it comes from
    (Lemma 3.1), (1 + u)**n - 1, finite for every n (a bfloat16 sum of 256 terms or
    a float16 one of 2048 is within 1.72 and 1.72 times its sum of |terms|)."""
    if n * u < 1:
        return n * u / (1 - n * u)
    return math.expm1(min(n * math.log1p(u), math.log(GAMMA_CAP)))


def smallest_normal(dtype: str | np.dtype) -> float:
    """lambda: the dtype's smallest positive normal number (below it, values may flush)."""
    return float(finfo(dtype).smallest_normal)


def has_subnormal(a: np.ndarray | None) -> bool:
    """Whether ``a`` holds a non-zero value below its dtype's smallest normal number."""
    if a is None or a.size == 0:
        return False
    magnitudes = np.abs(a)
    return bool(np.any((magnitudes > 0) & (magnitudes < smallest_normal(a.dtype))))


def _largest(a: np.ndarray) -> float:
    return float(np.max(np.abs(np.asarray(a, dtype=np.float64)), initial=0.0))


def flush_allowance(dtype: str, terms: int, operands: tuple[np.ndarray, np.ndarray | None],
                    magnitude: np.ndarray, bias: np.ndarray | None = None) -> np.ndarray:
    """The error flushing subnormals to zero may cause, elementwise (see the module doc).

    ``operands`` are the two factors of every product (the second None when
    it is 1, as for grad_bias, the sum of grad_output); ``bias`` the bias
    added to the result, if any; ``magnitude`` the sum of |products| per
    element.
    """
    lam = smallest_normal(dtype)
    u = unit_roundoff(dtype)
    results = 2 * terms * lam * (1 + gamma(terms, u))
    a, b = operands
    other_b = 1.0 if b is None else _largest(b)
    flushed_inputs = terms * lam * (other_b * has_subnormal(a)
                                    + (0.0 if b is None else _largest(a) * has_subnormal(b)))
    flushed_inputs += lam * has_subnormal(bias)
    if flushed_inputs:
        inputs = np.minimum(np.asarray(magnitude, dtype=np.float64), flushed_inputs)
    else:
        inputs = 0.0
    return results + inputs


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
    #: the part of ``bound`` that flushing subnormals to zero may use (elementwise
    #: or a scalar): an error beyond ``bound - flush`` means the result was flushed
    flush: np.ndarray | float = 0.0
    #: whether it allows float32 inputs rounded to TF32 (declared)
    tf32: bool = False
    #: whether it is that of half-precision products summed in float32, rounded once
    summed_in_float32: bool = False

    def explain(self) -> str:
        rounding = ("(u + float32's gamma(K))*sum|terms| elementwise (products summed in "
                    "float32, rounded once)" if self.summed_in_float32
                    else "gamma(K)*sum|terms| elementwise")
        text = (f"{self.dtype} (u={unit_roundoff(self.dtype):.3g}), reduction length "
                f"K={self.terms}: {rounding} + normwise floor {self.floor:.3g}")
        if self.tf32:
            text += (f" + inputs rounded to TF32 (u={TF32_UNIT_ROUNDOFF:.3g}: "
                     "(2u+u^2)*sum|terms|, declared)")
        if np.any(np.asarray(self.flush) > 0):
            text += (f" + flush to zero (2K smallest normals {smallest_normal(self.dtype):.3g}"
                     ", and subnormal operands read as 0)")
        return text


FLUSH_NOTE = "flushes subnormals to zero"

@dataclass(frozen=True)
class Arithmetic:
    """How an implementation declares it computes (its CAPABILITIES): what the
    tolerance of its results allows beyond a direct sum in the problem's dtype."""

    #: how it sums (one of conv_harness.running.capabilities.ALGORITHMS)
    algorithm: str = "direct"
    #: "tf32": its float32 products may take inputs rounded to TF32
    float32_precision: str = "ieee"
    #: the type its bfloat16 sums are kept in
    bfloat16_accumulation: str = "float32"
    #: the type its float16 sums of more than FLOAT16_MAX_TERMS terms are kept in
    float16_accumulation: str = "float32"


def declared_arithmetic(impl: Implementation, functions: Iterable[str]) -> Arithmetic:
    """The arithmetic ``impl`` declares for ``functions`` together (the widest of them)."""
    declared = impl.capabilities_for(functions)
    return Arithmetic(declared.algorithm, declared.float32_precision,
                      declared.bfloat16_accumulation, declared.float16_accumulation)


def tf32_allowance(dtype: str, operands: tuple[np.ndarray, np.ndarray | None],
                   magnitude: np.ndarray) -> np.ndarray | float:
    """What rounding float32 inputs to TF32 may add to a result that sums products
    (0 for another dtype, or for grad_bias, which multiplies nothing)."""
    if dtype != "float32" or operands[1] is None:
        return 0.0
    u = TF32_UNIT_ROUNDOFF  # the product of two 11-bit significands is exact in float32
    return (2 * u + u * u) * magnitude


def algorithm_floor(algorithm: str, name: str, operands: tuple[np.ndarray, np.ndarray | None],
                    dims: int, terms: int, u: float) -> float:
    """The declared algorithm's normwise term gamma(K + extra) * c^D * ||a|| * ||b||
    (conv_harness/checks/algorithms.py); 0 for a direct sum or an FFT."""
    a, b = operands
    c = algorithms.growth(algorithm, name, dims)
    if not c or b is None:
        return 0.0
    return gamma(terms + algorithms.extra_terms(algorithm, dims), u) * c * norm2(a) * norm2(b)


def flushed(actual: np.ndarray, expected: np.ndarray, tol: Tolerance) -> bool:
    """Whether ``actual`` shows subnormals flushed to zero (within ``tol``).

    Either an element is 0 where the reference is a non-zero value in the
    subnormal range (above K smallest subnormals, which gradual underflow
    could round away), or an element needed the flush allowance: its error
    exceeds the bound of an implementation that does not flush (the bound
    without the allowance, plus one smallest subnormal per term). Elements beyond the
    whole bound are failures, not flushes.
    """
    if not np.any(np.asarray(tol.flush) > 0):
        return False
    a = np.asarray(actual, dtype=np.float64)
    e = np.asarray(expected, dtype=np.float64)
    if a.shape != e.shape:
        return False
    with np.errstate(invalid="ignore"):
        error = np.abs(a - e)
        within = error <= tol.bound
        tiny = float(finfo(tol.dtype).smallest_subnormal)
        result_flushed = ((a == 0) & (np.abs(e) > tol.terms * tiny)
                          & (np.abs(e) < smallest_normal(tol.dtype)))
        # without flushing, gradual underflow is off by half a subnormal per term at most
        needed_allowance = error > (np.asarray(tol.bound) - np.asarray(tol.flush)
                                    + tol.terms * tiny)
    return bool(np.any(within & (result_flushed | needed_allowance)))


def note_flushes(actual: np.ndarray, expected: np.ndarray, tol: Tolerance,
                 seen: Observed | None) -> None:
    """Note in ``seen`` (the check's) that the implementation flushes, when it does: the
    run's summary says so."""
    if seen is not None and flushed(actual, expected, tol):
        seen.notes[FLUSH_NOTE] += 1


def summed_in_float32(dtype: str, products: int, arithmetic: Arithmetic) -> bool:
    """Whether a result in ``dtype`` of ``products`` products is judged as their exact
    products summed in float32 and rounded once: bfloat16 unless declared summed in
    bfloat16; float16 past `FLOAT16_MAX_TERMS` unless declared summed in float16."""
    if dtype == "bfloat16":
        return arithmetic.bfloat16_accumulation == "float32"
    return (dtype == "float16" and products > FLOAT16_MAX_TERMS
            and arithmetic.float16_accumulation == "float32")


def tolerance(case: ConvCase, name: str, magnitude: Reference,
              arithmetic: Arithmetic) -> Tolerance:
    """The tolerance for result ``name`` (``y``, ``grad_input``, ...) of ``case``, computed
    with ``arithmetic`` (`declared_arithmetic`; ``Arithmetic()`` for a direct sum)."""
    p = case.problem
    terms, operands = {
        "y": (p.forward_terms() + 1, (case.x, case.weight)),
        "grad_input": (p.grad_input_terms(), (case.grad_output, case.weight)),
        "grad_weight": (p.grad_weight_terms(), (case.x, case.grad_output)),
        "grad_bias": (p.grad_bias_terms(), (case.grad_output, None)),
    }[name]
    u = unit_roundoff(p.dtype)
    wide = summed_in_float32(p.dtype, terms - (name == "y"), arithmetic)  # y: bias a term
    # a transform's normwise error is in the type it computes in: half-precision data
    # summed in float32 are transformed in float32 (and each result rounded once, below)
    u_sum = unit_roundoff("float32") if wide else u
    floor = 0.0 if operands[1] is None else normwise_floor(*operands, u_sum)
    floor += algorithm_floor(arithmetic.algorithm, name, operands, p.spec.spatial_dims, terms,
                             u_sum)
    size = magnitude[name]
    flush = flush_allowance(p.dtype, terms, operands, size,
                            case.bias if name == "y" else None)
    tf32 = arithmetic.float32_precision == "tf32" and p.dtype == "float32"
    rounded = tf32_allowance(p.dtype, operands, size) if tf32 else 0.0
    # the float32 sum of the rounded products, each at most (1 + u_tf32)**2 |x w|
    summed = gamma(terms, u)
    if wide:  # exact products summed in float32, then one rounding to the dtype
        summed = u + gamma(terms, u_sum) * (1 + u)
    bound = ((summed * ((1 + TF32_UNIT_ROUNDOFF) ** 2 if tf32 else 1)
              + gamma(terms, FLOAT64_UNIT_ROUNDOFF)) * size + rounded + flush + floor)
    return Tolerance(bound=bound, dtype=p.dtype, terms=terms, floor=floor, flush=flush,
                     tf32=tf32, summed_in_float32=wide)
