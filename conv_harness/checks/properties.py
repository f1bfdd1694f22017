"""Checks that need no oracle: properties every convolution has.

They call the implementation only (through `conv_harness.running.calling`), never torch,
so they run when PyTorch is not installed, and they are independent evidence
when it is. Every one works for all operations, transposed ones included.

The algebra they rest on: a convolution (plain or transposed) is the
trilinear form

    Phi(lo, w, hi) = sum over n, groups, a, b, kernel offset q, position j of
                     lo[n, a, j] * w[a, b, q] * hi[n, b, j * s + q * d - p]

("lo" is the side with one position per window: the output of a plain
convolution, the input of a transposed one; "hi" the other side; out-of-range
``hi`` positions are the zero padding). With g the output gradient,
<conv(x, w), g> = Phi(g, w, x) for a plain convolution and Phi(x, w, g) for a
transposed one; forward, grad_input and grad_weight are the three partial
derivatives of Phi, and grad_bias is the sum of g per channel.

Rounding bounds, never tuned constants: each result element the
implementation returns is a sum of K products, so its error is at most
gamma(K) * (sum of |products|) + K * smallest subnormal + the normwise floor
(conv_harness/checks/tolerance.py explains each term); the sums of |products| are the
same convolution on absolute values, which this module computes in float64
with NumPy (conv_harness/checks/closed_form.py: a gather per kernel offset). A scalar formed
from results (an inner product, a difference of two losses) is bounded by
the same per-element bounds weighted by the other factor, plus the float64
error of forming it (gamma(n, u64) * sum |terms|), plus n smallest float64
subnormals eta = 2**-1074 for its n products (`_dot`, `_weighted`):

- The scalar's n products a_i * b_i are rounded in float64, which near the
  bottom of the range is not relative: fl(a_i b_i) = a_i b_i (1 + d) + e with
  |d| <= u64 and |e| <= lambda * u64 = eta / 2 (Higham sec. 2.2, the model
  with gradual underflow, NumPy's float64; lambda the smallest normal). The d
  are in gamma(n, u64) * sum |terms|, the e are not: n * eta / 2. Its
  additions lose nothing more: a sum of two float64 numbers below 2 * lambda
  is exact (both are multiples of eta), and above it rounds by at most u64
  times the sum, which gamma(n, u64) * sum |terms| (then >= eta) covers.
- The weighted bound sum(bound_i * |c_i|) is itself formed in float64: each
  of its n products can round down by eta / 2, to 0 when bound_i * |c_i| <
  eta / 2 (a float64 result's flush allowance 2K * 2.2e-308 times a |g| of
  1e-160 does), so the sum of the rounded products can fall short of the
  real one by n * eta / 2.

So each inner product of n terms gets n * eta on top (each half rounded up
to a multiple of eta, as eta / 2 is no float64). Without it, where
every product lies in or below the subnormal range (x = 2, w = g = 8.25e-162
in a 1x1 float64 conv2d of batch 2: <conv(x, w), g> sums two rounded
products, <w, grad_weight> rounds one), the two sides differ by one eta
while the allowed error computes to 0. The results' own underflow and
flushing to zero (2K smallest normals of their dtype per element, whether
the implementation flushes or underflows gradually) are in their bounds
already (conv_harness/checks/tolerance.py), and weighted like the rest.

Checks:

``adjoint``         <conv(x, w), g> - <b, sum g> = <x, grad_input> = <w, grad_weight>,
                    and grad_bias = sum of g per channel.
``linearity``       forward additive in x and in w (x split into two parts that
                    add up exactly), bias shifts the output by exactly the bias;
                    the gradients additive in g, grad_input in w, grad_weight in
                    x; and, because the loss L = <conv(x, w, b), g> is affine in
                    each argument, its gradient is its exact slope:
                    L(x) - L(x1) = <x - x1, grad_input>, likewise in w and b.
``finite_difference`` central differences of L for every element of x, w and
                    b in float64 on small problems.
``pointwise``       a 1x1 kernel is a channel matmul of the (padded, strided)
                    input: np.einsum on a gathered view, plain matmul for
                    stride 1, padding 0.
``delta_kernel``    a kernel with a single non-zero offset q: the output is the
                    channel mix of the padded input shifted by q*d and
                    subsampled by the stride (transposed: scattered).
``invalid``         (opt-in, needs torch) on an invalid problem the
                    implementation raises exactly when torch does.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable

import numpy as np
from hypothesis import strategies as st

import strategies
from conv_harness.checks import oracle
from conv_harness.checks.check import Check, register
from conv_harness.checks.closed_form import as_float64 as _f64
from conv_harness.checks.closed_form import closed_forms, magnitudes
from conv_harness.checks.compare import compare
from conv_harness.checks.tolerance import (
    FLOAT64_UNIT_ROUNDOFF,
    Arithmetic,
    Tolerance,
    declared_arithmetic,
    gamma,
    tolerance,
)
from conv_harness.problem import OPS, ConvCase, ConvProblem
from conv_harness.running.calling import (CheckFailure, Observed, Timeout, call_backward,
                                          call_forward, invoke)
from conv_harness.running.loader import Implementation
from strategies.cases import noise_case
from strategies.invalid import invalid_cases

U64 = FLOAT64_UNIT_ROUNDOFF
#: eta, the smallest positive float64 (a subnormal): the spacing of float64 numbers
#: below twice the smallest normal, where rounding is absolute (module doc)
ETA64 = float(np.finfo(np.float64).smallest_subnormal)
GRADS = ("grad_input", "grad_weight", "grad_bias")


def _arithmetic(impl: Implementation, case: ConvCase, name: str) -> Arithmetic:
    """What ``impl`` declares for the function that returns result ``name``."""
    p = case.problem
    return declared_arithmetic(impl, (p.op if name == "y" else p.spec.backward_name,))


def _bounds(impl: Implementation, case: ConvCase,
            forward_only: bool = False) -> dict[str, np.ndarray | None]:
    """The elementwise error bound of each result the implementation returns."""
    mag = magnitudes(case, forward_only)
    return {name: None if mag[name] is None else
            tolerance(case, name, mag, _arithmetic(impl, case, name)).bound
            for name in ("y", *GRADS)}


def _with(case: ConvCase, **changes) -> ConvCase:
    """A copy of ``case`` with some arrays (and so maybe the problem) replaced."""
    problem = changes.pop("problem", case.problem)
    arrays = case.arrays()
    arrays.update(changes)
    if "bias" in changes and (changes["bias"] is None) == problem.bias:
        problem = dataclasses.replace(problem, bias=changes["bias"] is not None)
    return ConvCase(problem=problem, layouts=dict(case.layouts), **arrays)


def _dot(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """<a, b> in float64 and the bound of its own rounding error: gamma(n, u64) *
    sum |a_i b_i|, and eta / 2 per product for its underflow (module doc)."""
    a, b = _f64(a), _f64(b)
    products = a * b
    return float(np.sum(products)), (gamma(a.size, U64) * float(np.sum(np.abs(products)))
                                     + _underflow(products.size))


def _weighted(bound: np.ndarray, factor: np.ndarray) -> float:
    """sum(bound * |factor|): what the errors ``bound`` of one factor of an inner
    product can change it by, plus eta / 2 per term for the float64 products
    that round it down (module doc)."""
    terms = bound * np.abs(_f64(factor))
    return float(np.sum(terms)) + _underflow(terms.size)


def _underflow(n: int) -> float:
    """n * eta / 2, what rounding n float64 products can lose in or below the
    subnormal range (module doc), rounded up to a float64: eta / 2 itself would
    round to 0."""
    return math.ceil(n / 2) * ETA64


def _bias_term(b: np.ndarray | None, g: np.ndarray) -> np.ndarray | None:
    """The bias's share of y broadcast to y's shape, or None."""
    if b is None:
        return None
    return np.broadcast_to(_f64(b).reshape((1, -1) + (1,) * (g.ndim - 2)), g.shape)


def _forward(impl: Implementation, case: ConvCase, timeout: Timeout,
             seen: Observed | None) -> np.ndarray:
    return call_forward(impl.function(case.problem.op), case, timeout, seen)


def _backward(impl: Implementation, case: ConvCase, timeout: Timeout, seen: Observed | None):
    return call_backward(impl.function(case.problem.spec.backward_name), case, timeout, seen)


def _fail(check: str, text: str) -> None:
    raise CheckFailure(check, text)


def _scalar(check: str, what: str, left: float, right: float, allowed: float,
            reason: str) -> None:
    if not abs(left - right) <= allowed:  # also false for NaN
        _fail(check, f"{what}: {left!r} vs {right!r}, differ by {abs(left - right):.6g}; "
                     f"allowed {allowed:.3g} ({reason})")


def _elementwise(check: str, name: str, actual: np.ndarray, expected: np.ndarray,
                 bound: np.ndarray, case: ConvCase, terms: int, why: str) -> None:
    tol = Tolerance(bound=np.broadcast_to(bound, np.shape(expected)), dtype=case.problem.dtype,
                    terms=terms, floor=0.0)
    mismatch = compare(name, actual, expected, tol)
    if mismatch is not None:
        _fail(check, f"{why}\n{mismatch.report()}")


# ----------------------------------------------------------------------------
# adjoint
# ----------------------------------------------------------------------------

def _loss(case: ConvCase, y: np.ndarray, y_bound: np.ndarray) -> tuple[float, float]:
    """L = <y, g> and its error bound, y the implementation's forward result."""
    g = _f64(case.grad_output)
    value, rounding = _dot(y, g)
    return value, rounding + _weighted(y_bound, g)


def check_adjoint(impl: Implementation, case: ConvCase, timeout: Timeout = None,
                  seen: Observed | None = None) -> None:
    name = "adjoint"
    y = _forward(impl, case, timeout, seen)
    gi, gw, gb = _backward(impl, case, timeout, seen)
    bound = _bounds(impl, case)
    g = _f64(case.grad_output)
    loss, loss_err = _loss(case, y, bound["y"])
    bias = _bias_term(case.bias, g)
    if bias is not None:  # <b, sum of g per channel>: subtract the bias's share exactly-ish
        share, share_err = _dot(bias, g)
        loss, loss_err = loss - share, loss_err + share_err + U64 * abs(loss - share)
    left = "<conv(x, w), g>" + (" - <b, sum g>" if bias is not None else "")
    for label, arg, grad, grad_bound in (
            ("<x, grad_input(g)>", case.x, gi, bound["grad_input"]),
            ("<w, grad_weight(g)>", case.weight, gw, bound["grad_weight"])):
        value, err = _dot(arg, grad)
        err += _weighted(grad_bound, arg)
        _scalar(name, f"adjoint identity {left} = {label} fails for {case.problem.op}",
                loss, value, loss_err + err,
                "sum of the results' rounding bounds gamma(K)*sum|terms| weighted by the other "
                "factor, plus float64 summation and one smallest subnormal per term")
    if gb is not None:
        expected = g.sum(axis=(0,) + tuple(range(2, g.ndim)))
        _elementwise(name, "grad_bias", gb, expected, bound["grad_bias"], case,
                     case.problem.grad_bias_terms(), "grad_bias is not the sum of g per channel")


# ----------------------------------------------------------------------------
# linearity
# ----------------------------------------------------------------------------

def split(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Two arrays of a's dtype that add up to ``a`` exactly: alternate elements."""
    mask = (np.arange(a.size) % 2 == 0).reshape(a.shape)
    first = np.where(mask, a, np.zeros_like(a))
    return first, a - first  # a - first is a or 0 elementwise: exact


def check_linearity(impl: Implementation, case: ConvCase, timeout: Timeout = None,
                    seen: Observed | None = None) -> None:
    name = "linearity"
    p = case.problem
    has_fwd, has_bwd = impl.has(p.op), impl.has(p.spec.backward_name)
    g = _f64(case.grad_output)
    bias = _bias_term(case.bias, g)
    zero_bias = 0.0 if bias is None else bias
    x1, x2 = split(case.x)
    w1, w2 = split(case.weight)
    g1, g2 = split(case.grad_output)
    variants = {"x": (_with(case, x=x1), _with(case, x=x2)),
                "w": (_with(case, weight=w1), _with(case, weight=w2)),
                "g": (_with(case, grad_output=g1), _with(case, grad_output=g2))}
    c0 = None if bias is None else _with(case, bias=np.zeros_like(case.bias))
    why = ("each call's rounding bound gamma(K)*sum|terms| (+ normwise floor) summed over "
           "the calls, plus float64 rounding of the combination")
    memo: dict[tuple[int, str], object] = {}

    def cached(kind: str, c: ConvCase):
        key = (id(c), kind)
        if key not in memo:
            memo[key] = {"bounds": lambda: _bounds(impl, c, forward_only=not has_bwd),
                         "y": lambda: _f64(_forward(impl, c, timeout, seen)),
                         "grads": lambda: _backward(impl, c, timeout, seen)}[kind]()
        return memo[key]

    # 1. The loss L = <conv(x, w, b), g> is affine in x, w and b: its gradient is
    #    its exact slope, L(x) - L(x1) = <x - x1, grad_input(g)> (likewise w, b).
    if has_fwd and has_bwd:
        grads = cached("grads", case)
        loss, loss_err = _loss(case, cached("y", case), cached("bounds", case)["y"])
        slopes = [("x", "grad_input", case.x, variants["x"][0], "x", 0),
                  ("w", "grad_weight", case.weight, variants["w"][0], "weight", 1)]
        if c0 is not None:
            slopes.append(("b", "grad_bias", case.bias, c0, "bias", 2))
        for arg, grad, full, other, field_name, k in slopes:
            l_other, e_other = _loss(other, cached("y", other), cached("bounds", other)["y"])
            moved = _f64(full) - _f64(other.arrays()[field_name])  # exact: a split
            value, err = _dot(moved, grads[k])
            err += _weighted(cached("bounds", case)[grad], moved)
            _scalar(name,
                    f"the loss L = <conv(x, w, b), g> is affine in {arg}, so L({arg}) - "
                    f"L({arg}1) must equal <{arg} - {arg}1, {grad}(g)>; it does not",
                    loss - l_other, value,
                    loss_err + e_other + err + U64 * abs(loss - l_other), why)

    # 2. The forward pass is additive in x and in w; bias shifts it by exactly b.
    if has_fwd:
        y, bound = cached("y", case), cached("bounds", case)["y"]
        for arg in ("x", "w"):
            c1, c2 = variants[arg]
            y1, y2 = cached("y", c1), cached("y", c2)
            expected = y1 + y2 - zero_bias
            err = bound + cached("bounds", c1)["y"] + cached("bounds", c2)["y"] + gamma(
                3, U64) * (np.abs(y1) + np.abs(y2) + np.abs(zero_bias))
            _elementwise(name, "y", y, expected, err, case, p.forward_terms() + 1,
                         f"{p.op} is not additive in {arg}: conv({arg}1 + {arg}2) != "
                         f"conv({arg}1) + conv({arg}2) - b ({arg} split into alternate "
                         f"elements; {why})")
        if c0 is not None:
            y0 = cached("y", c0)
            err = bound + cached("bounds", c0)["y"] + gamma(2, U64) * (np.abs(y0) + np.abs(bias))
            _elementwise(name, "y", y, y0 + bias, err, case, p.forward_terms() + 1,
                         f"conv(x, w, b) != conv(x, w, 0) + b ({why})")

    # 3. The gradients are additive in g; grad_input in w; grad_weight in x.
    if has_bwd:
        grads, bound = cached("grads", case), cached("bounds", case)
        linear_in = {"g": GRADS, "w": ("grad_input",), "x": ("grad_weight",)}
        for arg, names in linear_in.items():
            c1, c2 = variants[arg]
            r1, r2 = cached("grads", c1), cached("grads", c2)
            e1, e2 = cached("bounds", c1), cached("bounds", c2)
            for k, grad in enumerate(GRADS):
                if grad not in names or grads[k] is None:
                    continue
                a1, a2 = _f64(r1[k]), _f64(r2[k])
                err = bound[grad] + e1[grad] + e2[grad] + gamma(2, U64) * (np.abs(a1) + np.abs(a2))
                _elementwise(name, grad, grads[k], a1 + a2, err, case,
                             getattr(p, f"{grad}_terms")(),
                             f"{grad} is not additive in {arg} ({arg} split into alternate "
                             f"elements; {why})")


# ----------------------------------------------------------------------------
# finite differences
# ----------------------------------------------------------------------------

def _bumped(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For every element: (c + 1, c - 1) with c the element rounded to an integer."""
    c = np.round(_f64(values))
    return c + 1, c - 1


def _fd_slopes(impl, case: ConvCase, big: ConvCase, pairs: int, timeout, seen,
               reduce: Callable[[np.ndarray], np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(L+ - L-)/2 for each of ``pairs`` perturbations laid out in ``big`` and its bound.

    ``reduce`` maps y*g (or a bound times |g|) of ``big`` to one value per
    evaluation, in perturbation order (+, -, +, -, ...).
    """
    y = _f64(_forward(impl, big, timeout, seen))
    g = _f64(big.grad_output)
    y_bound = _bounds(impl, big, forward_only=True)["y"]
    losses = reduce(y * g)
    errors = reduce(y_bound * np.abs(g)) + gamma(y[0].size * y.shape[0], U64) * reduce(np.abs(y * g))
    losses, errors = losses.reshape(pairs, 2), errors.reshape(pairs, 2)
    slope = (losses[:, 0] - losses[:, 1]) / 2  # step 2 (c+1 - (c-1)): exact
    return slope, (errors[:, 0] + errors[:, 1]) / 2 + U64 * np.abs(slope)


def _fd_input(impl, case: ConvCase, timeout, seen):
    """Every element of x perturbed on its own: one batch row per evaluation."""
    p = case.problem
    x = case.x
    n, per = x.shape[0], x[0].size
    plus, minus = _bumped(x)
    rows = np.repeat(x.reshape(n, per), 2 * per, axis=0).reshape(n, per, 2, per)
    idx = np.arange(per)
    rows[:, idx, 0, idx] = plus.reshape(n, per).astype(x.dtype)
    rows[:, idx, 1, idx] = minus.reshape(n, per).astype(x.dtype)
    big_x = rows.reshape((n * per * 2,) + x.shape[1:])
    big_g = np.repeat(case.grad_output, 2 * per, axis=0)
    big = _with(case, problem=dataclasses.replace(p, batch=big_x.shape[0]), x=big_x,
                grad_output=big_g)
    axes = tuple(range(1, big_g.ndim))
    slope, err = _fd_slopes(impl, case, big, x.size, timeout, seen, lambda a: a.sum(axis=axes))
    return slope.reshape(x.shape), err.reshape(x.shape)


def _canonical(w: np.ndarray, p: ConvProblem) -> np.ndarray:
    """w as (groups, out per group, in per group, *kernel)."""
    g = p.groups
    if p.spec.transposed:
        return w.reshape((g, w.shape[0] // g) + w.shape[1:]).swapaxes(1, 2)
    return w.reshape((g, w.shape[0] // g) + w.shape[1:])


def _from_canonical(v: np.ndarray, p: ConvProblem) -> np.ndarray:
    if p.spec.transposed:
        v = v.swapaxes(1, 2)
        return v.reshape((v.shape[0] * v.shape[1],) + v.shape[2:])
    return v.reshape((v.shape[0] * v.shape[1],) + v.shape[2:])


def _fd_weight_bias(impl, case: ConvCase, timeout, seen):
    """Every element of w and b perturbed on its own: one output channel per evaluation."""
    p = case.problem
    groups = p.groups
    wc = _canonical(case.weight, p)  # (G, Og, Ig, *k)
    og = wc.shape[1]
    per = wc[0, 0].size
    plus, minus = _bumped(wc)
    # rows of one group: for each out channel o and element e of w[o]: +, -; then bias +, -
    w_rows = np.repeat(wc.reshape(groups, og, 1, 1, per), per, axis=2).repeat(2, axis=3).copy()
    idx = np.arange(per)
    w_rows[:, :, idx, 0, idx] = plus.reshape(groups, og, per).astype(wc.dtype)
    w_rows[:, :, idx, 1, idx] = minus.reshape(groups, og, per).astype(wc.dtype)
    channel = np.arange(p.out_channels).reshape(groups, og)
    w_chan = np.repeat(channel[:, :, None, None], per, axis=2).repeat(2, axis=3)
    rows = [w_rows.reshape(groups, og * per * 2, per)]
    chans = [w_chan.reshape(groups, -1)]
    b_rows = None
    if case.bias is not None:
        b = case.bias.reshape(groups, og)
        base = np.repeat(wc.reshape(groups, og, 1, per), 2, axis=2)
        rows.append(base.reshape(groups, og * 2, per))
        chans.append(np.repeat(channel, 2, axis=1))
        bp, bm = _bumped(b)
        b_bumped = np.stack([bp, bm], axis=2).astype(b.dtype)  # (G, Og, 2)
        b_rows = np.concatenate([np.repeat(b[:, :, None], per * 2, axis=2).reshape(groups, -1),
                                 b_bumped.reshape(groups, -1)], axis=1)
    all_rows = np.concatenate(rows, axis=1)  # (G, R, per)
    chan = np.concatenate(chans, axis=1).reshape(-1)  # original out channel of each new one
    r = all_rows.shape[1]
    big_w = _from_canonical(all_rows.reshape((groups, r) + wc.shape[2:]), p)
    big_p = dataclasses.replace(p, out_channels=groups * r)
    big = _with(case, problem=big_p, weight=np.ascontiguousarray(big_w),
                bias=None if b_rows is None else b_rows.reshape(-1),
                grad_output=np.ascontiguousarray(case.grad_output[:, chan]))
    axes = (0,) + tuple(range(2, case.grad_output.ndim))
    total = og * per * 2
    slope, err = _fd_slopes(impl, case, big, groups * r // 2, timeout, seen,
                            lambda a: a.sum(axis=axes))
    slope, err = slope.reshape(groups, r // 2), err.reshape(groups, r // 2)
    w_slope = _from_canonical(slope[:, :total // 2].reshape(wc.shape), p)
    w_err = _from_canonical(err[:, :total // 2].reshape(wc.shape), p)
    if case.bias is None:
        return w_slope, w_err, None, None
    return w_slope, w_err, slope[:, total // 2:].reshape(-1), err[:, total // 2:].reshape(-1)


def check_finite_difference(impl: Implementation, case: ConvCase,
                            timeout: Timeout = None,
                            seen: Observed | None = None) -> None:
    """Central differences of L = <conv(x, w, b), g> against the backward pass.

    L is affine in each of x, w, b with the others fixed, so a central (indeed
    any) difference is its exact derivative: no truncation error whatever the
    step. The step is therefore large, 1 on each side of the element rounded
    to an integer (c - 1 and c + 1 are exact in every dtype), so the
    difference quotient's error is the two losses' rounding errors over the
    step 2, and no cancellation is amplified. The bound: the mean of the two
    losses' bounds (each sum of the forward's elementwise bound times |g|,
    plus float64 summation) + the gradient element's own bound.
    """
    name = "finite_difference"
    gi, gw, gb = _backward(impl, case, timeout, seen)
    bound = _bounds(impl, case)
    why = ("L is affine in each argument, so central differences with step 1 have no "
           "truncation error; bound = the two losses' rounding bounds / 2 + the gradient "
           "element's gamma(K)*sum|terms|")
    slope, err = _fd_input(impl, case, timeout, seen)
    _elementwise(name, "grad_input", gi, slope, err + bound["grad_input"], case,
                 case.problem.grad_input_terms(),
                 f"grad_input differs from central differences of <conv(x, w, b), g> in x ({why})")
    w_slope, w_err, b_slope, b_err = _fd_weight_bias(impl, case, timeout, seen)
    _elementwise(name, "grad_weight", gw, w_slope, w_err + bound["grad_weight"], case,
                 case.problem.grad_weight_terms(),
                 f"grad_weight differs from central differences in w ({why})")
    if gb is not None:
        _elementwise(name, "grad_bias", gb, b_slope, b_err + bound["grad_bias"], case,
                     case.problem.grad_bias_terms(),
                     f"grad_bias differs from central differences in b ({why})")


# ----------------------------------------------------------------------------
# batch consistency
# ----------------------------------------------------------------------------

def _image(case: ConvCase, i: int) -> ConvCase:
    """Image ``i`` of ``case`` as a problem of its own (batch 1)."""
    return _with(case, problem=dataclasses.replace(case.problem, batch=1),
                 x=np.ascontiguousarray(case.x[i:i + 1]),
                 grad_output=np.ascontiguousarray(case.grad_output[i:i + 1]))


def check_batch_consistency(impl: Implementation, case: ConvCase,
                            timeout: Timeout = None,
                            seen: Observed | None = None) -> None:
    """A batch's results are its images' results stacked (forward, grad_input) or
    summed (grad_weight, grad_bias).

    Not bitwise: a blocked GEMM may sum in another order for another batch
    size, which is right. The bound is the batched result's rounding bound
    plus the single images' (each gamma(K)*sum|terms|), and for the sums over
    images their float64 summation. An implementation that blocks the batch
    (tiles of 4, 8, 16 images) and gets a tail wrong, or mixes images up, is
    caught on the batch that shows it, without an oracle.
    """
    name = "batch_consistency"
    p = case.problem
    if p.batch < 2:
        return
    has_fwd, has_bwd = impl.has(p.op), impl.has(p.spec.backward_name)
    images = [_image(case, i) for i in range(p.batch)]
    bound = _bounds(impl, case, forward_only=not has_bwd)
    single = [_bounds(impl, c, forward_only=not has_bwd) for c in images]
    why = ("the batched result's rounding bound gamma(K)*sum|terms| plus the single "
           "image's (and float64 summation over images)")
    if has_fwd:
        y = _forward(impl, case, timeout, seen)
        parts = [_f64(_forward(impl, c, timeout, seen)) for c in images]
        _elementwise(name, "y", y, np.concatenate(parts), bound["y"] + np.concatenate(
            [b["y"] for b in single]), case, p.forward_terms() + 1,
            f"{p.op} of the batch is not its images' results stacked ({why})")
    if has_bwd:
        gi, gw, gb = _backward(impl, case, timeout, seen)
        parts = [_backward(impl, c, timeout, seen) for c in images]
        _elementwise(name, "grad_input", gi, np.concatenate([_f64(r[0]) for r in parts]),
                     bound["grad_input"] + np.concatenate([b["grad_input"] for b in single]),
                     case, p.grad_input_terms(),
                     f"grad_input of the batch is not its images' stacked ({why})")
        for k, grad in ((1, "grad_weight"), (2, "grad_bias")):
            ours = (gw, gb)[k - 1]
            if ours is None:
                continue
            terms = [_f64(r[k]) for r in parts]
            total = np.sum(terms, axis=0)
            err = (bound[grad] + np.sum([b[grad] for b in single], axis=0)
                   + gamma(p.batch, U64) * np.sum(np.abs(terms), axis=0))
            _elementwise(name, grad, ours, total, err, case, getattr(p, f"{grad}_terms")(),
                         f"{grad} of the batch is not the sum of its images' ({why})")


def batch_cases(op: str, caps,
                given: tuple[ConvProblem, ...] | None = None
                ) -> st.SearchStrategy[ConvCase]:
    """Cases of two images or more (one image has nothing to be consistent with).

    The problem is filtered before its values are drawn, so that a rejected
    batch-1 problem costs no data and is not counted as an example run."""
    problems = strategies.conv_problems(op, capabilities=caps, where=lambda p: p.batch > 1,
                                        given=given)
    flat = caps.for_op(op)

    @st.composite
    def batched(draw) -> ConvCase:
        problem = draw(problems)
        return draw(strategies.cases_for(
            problem, flat.holds("contiguous_only", problem.dtype), flat.arrays))

    return batched()


# ----------------------------------------------------------------------------
# closed forms: 1x1 kernels and delta kernels
# ----------------------------------------------------------------------------

def _check_closed_form(check: str, impl: Implementation, case: ConvCase,
                       timeout: Timeout, seen: Observed | None, what: str) -> None:
    p = case.problem
    expected = closed_forms(case)
    mag = magnitudes(case)
    got: dict[str, np.ndarray | None] = {}
    if impl.has(p.op):
        got["y"] = _forward(impl, case, timeout, seen)
    if impl.has(p.spec.backward_name):
        got.update(zip(GRADS, _backward(impl, case, timeout, seen)))
    for name, actual in got.items():
        if actual is None:
            continue
        tol = tolerance(case, name, mag, _arithmetic(impl, case, name))
        mismatch = compare(name, actual, expected[name], tol, seen)
        if mismatch is not None:
            _fail(check, f"{name} differs from the closed form: {what}\n{mismatch.report()}")


def check_pointwise(impl: Implementation, case: ConvCase, timeout: Timeout = None,
                    seen: Observed | None = None) -> None:
    _check_closed_form("pointwise", impl, case, timeout, seen,
                       "a 1x1 kernel is a channel matmul (np.einsum over each group's "
                       "channels) of the zero-padded input subsampled by the stride "
                       "(transposed: of the input, scattered to every stride-th output)")


def check_delta_kernel(impl: Implementation, case: ConvCase,
                       timeout: Timeout = None,
                       seen: Observed | None = None) -> None:
    _check_closed_form("delta_kernel", impl, case, timeout, seen,
                       "a kernel with one non-zero offset q mixes channels of the zero-padded "
                       "input shifted by q*dilation and subsampled by the stride (transposed: "
                       "scattered); grad_weight at offset q correlates g with that shifted input")


# ----------------------------------------------------------------------------
# case strategies
# ----------------------------------------------------------------------------

def pointwise_cases(op: str, caps,
                    given: tuple[ConvProblem, ...] | None = None
                    ) -> st.SearchStrategy[ConvCase]:
    """Cases with a 1x1 kernel (stride, padding and groups still drawn)."""
    bounds = dataclasses.replace(strategies.DEFAULT_BOUNDS[_ndim(op)], kernel=1)
    return strategies.conv_cases(op, capabilities=caps, bounds=bounds, given=given)


def _ndim(op: str) -> int:
    return OPS[op].spatial_dims


def delta_cases(op: str, caps,
                given: tuple[ConvProblem, ...] | None = None
                ) -> st.SearchStrategy[ConvCase]:
    """Cases whose weight is non-zero at one kernel offset only."""
    cases = strategies.conv_cases(op, capabilities=caps, given=given)

    @st.composite
    def delta(draw) -> ConvCase:
        case = draw(cases)
        offset = tuple(draw(st.integers(0, k - 1)) for k in case.problem.kernel_size)
        weight = np.zeros_like(case.weight)
        weight[(Ellipsis, *offset)] = strategies.draw_array(draw, case.problem.dtype,
                                                            case.weight.shape[:2])
        return dataclasses.replace(case, weight=weight)

    return delta()


SMALL_BOUNDS = {1: dict(kernel=3, stride=3, padding=2, dilation=2, outputs=4, batch=2,
                        groups=2, channels_per_group=2),
                2: dict(kernel=3, stride=3, padding=2, dilation=2, outputs=3, batch=2,
                        groups=2, channels_per_group=2),
                3: dict(kernel=2, stride=2, padding=1, dilation=2, outputs=2, batch=1,
                        groups=2, channels_per_group=1)}


#: The most array elements the finite-difference check builds for one case: it
#: perturbs every element of x (and of w) on its own, one batch row (output
#: channel) per perturbation, so its arrays grow with the square of an image's
#: (a filter's) size. `SMALL_BOUNDS` stay far below it (measured: under 2**20); a given
#: problem (``--conv-problem``) above it is not run by this check.
FD_MAX_ELEMENTS = 2**23


def fd_affordable(p: ConvProblem) -> bool:
    """Whether the finite-difference check's arrays for ``p`` fit `FD_MAX_ELEMENTS`."""
    x_image = p.in_channels * math.prod(p.input_size)
    y_image = p.out_channels * math.prod(p.output_size)
    w_filter = math.prod(p.shapes()["weight"][1:])
    inputs = 2 * p.batch * x_image * max(x_image, y_image)
    weights = 2 * p.out_channels * (w_filter + 1) * max(w_filter, p.batch * y_image)
    return max(inputs, weights) <= FD_MAX_ELEMENTS


def small_float64_cases(op: str, caps,
                        given: tuple[ConvProblem, ...] | None = None
                        ) -> st.SearchStrategy[ConvCase]:
    """Small problems in float64 (else the widest dtype the implementation takes);
    given problems (``--conv-problem``) only where the check can afford them."""
    widest = "float64" if "float64" in caps.dtypes else max(
        caps.dtypes, key=lambda d: np.dtype(d).itemsize)
    caps = dataclasses.replace(caps, dtypes=(widest,))
    return strategies.conv_cases(op, capabilities=caps,
                                 bounds=strategies.Bounds(**SMALL_BOUNDS[_ndim(op)]),
                                 where=fd_affordable, given=given)


# ----------------------------------------------------------------------------
# invalid problems (opt-in; needs torch)
# ----------------------------------------------------------------------------

def _torch_raises(case: ConvCase) -> str | None:
    """What torch raises for the case's forward call, or None."""
    torch = oracle.torch_module()
    fn = getattr(torch.nn.functional, case.problem.op)
    args = [torch.tensor(_f64(a)) for a in (case.x, case.weight)]
    bias = None if case.bias is None else torch.tensor(_f64(case.bias))
    try:
        fn(*args, bias, **case.problem.kwargs())
    except Exception as exc:  # noqa: BLE001 - torch's reason, reported as text
        return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    return None


def check_invalid(impl: Implementation, case: ConvCase, timeout: Timeout = None,
                  seen: Observed | None = None) -> None:
    """On an invalid problem the implementation raises exactly when torch does.

    Called through `conv_harness.running.calling.invoke` (fresh inputs, time limit), not
    `call_forward`: an invalid problem has no output shape to validate against.
    """
    p = case.problem
    given = case.fresh_inputs()
    ours: str | None = None
    try:
        invoke(impl.function(p.op), p.op, (given["x"], given["weight"], given["bias"]),
               p.kwargs(), timeout)
    except CheckFailure as failure:
        if failure.check != "raised":
            raise
        ours = failure.message
    theirs = _torch_raises(case)
    if (ours is None) != (theirs is None):
        if ours is None:
            _fail("invalid", f"{p.op} accepted an invalid problem that torch rejects "
                             f"({theirs}); it should raise")
        _fail("invalid", f"{p.op} raised on a problem torch accepts: {ours}")


# ----------------------------------------------------------------------------
# registration
# ----------------------------------------------------------------------------

def _visit_small(case: ConvCase) -> ConvCase | None:
    """A visit's problem in float64, where finite differences can afford it."""
    p = dataclasses.replace(case.problem, dtype="float64")
    return noise_case(p) if fd_affordable(p) else None


def _visit_batched(case: ConvCase) -> ConvCase | None:
    """A visit's problem with two images or more."""
    return noise_case(dataclasses.replace(case.problem, batch=max(2, case.problem.batch)))


def _visit_pointwise(case: ConvCase) -> ConvCase | None:
    return case if all(k == 1 for k in case.problem.kernel_size) else None


def _visit_delta(case: ConvCase) -> ConvCase | None:
    """A visit's case with its weight at the kernel's middle offset alone."""
    middle = tuple(k // 2 for k in case.problem.kernel_size)
    weight = np.zeros_like(case.weight)
    weight[(Ellipsis, *middle)] = case.weight[(Ellipsis, *middle)]
    return dataclasses.replace(case, weight=weight)


register(Check("adjoint", check_adjoint, ("forward", "backward"), oracle=False, attribute=True,
               description="<conv(x, w), g> = <x, grad_input(g)> = <w, grad_weight(g)>, "
                           "grad_bias = sum of g, within the rounding bound"))
register(Check("linearity", check_linearity, (), oracle=False, cost=2.5, attribute=True,
               description="additive in x, w and g; bias shifts the output exactly; the "
                           "gradients are the exact slopes of the affine loss"))
register(Check("finite_difference", check_finite_difference, ("forward", "backward"),
               oracle=False, cases=small_float64_cases, cost=1.5, attribute=True,
               visit=_visit_small,
               description="central differences of <conv(x, w, b), g> in float64 on small "
                           "problems"))
register(Check("batch_consistency", check_batch_consistency, (), oracle=False,
               cases=batch_cases, cost=2.0, attribute=True, visit=_visit_batched,
               description="a batch's results are its images' results stacked (forward, "
                           "grad_input) or summed (grad_weight, grad_bias)"))
register(Check("pointwise", check_pointwise, (), oracle=False, cases=pointwise_cases,
               attribute=True, visit=_visit_pointwise,
               description="a 1x1 kernel is a channel matmul of the padded, strided input"))
register(Check("delta_kernel", check_delta_kernel, (), oracle=False, cases=delta_cases,
               attribute=True, visit=_visit_delta,
               description="a delta kernel shifts and subsamples the padded input"))


def _invalid_cases(op: str, caps,
                   given: tuple[ConvProblem, ...] | None = None
                   ) -> st.SearchStrategy[ConvCase]:
    return invalid_cases(op, capabilities=caps, given=given)


register(Check("invalid", check_invalid, ("forward",), oracle=True, cases=_invalid_cases,
               tallied=False,
               opt_in=("--conv-invalid", "invalid problems are opt-in: --conv-invalid"),
               description="(opt-in) raises on an invalid problem exactly when torch does"))
