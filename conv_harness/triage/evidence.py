"""What a few more calls on a bug's minimal case say about its cause.

Gathered once per finding (a handful of calls), before it is explained, so
that a finding that is a symptom of a known cause (conv_harness/triage/catalog.py,
`part_of`) is attributed to it instead of explained again:

``precision``
    The lowest dtype, below the case's own, whose rounding bound (the
    harness's tolerance for that dtype, conv_harness/checks/tolerance.py) the
    failing result is within: an implementation that computes a float64
    problem in float32 has errors the size of float32's rounding. Only the
    result that failed counts: a backward whose grad_weight is off by float32's
    rounding and whose grad_bias is a batch mean shows two causes in one call,
    and the grad_weight finding is the lower precision's (the grad_bias one is
    found by its own kind of failure).
``forward_fails``, ``consistent``
    For a wrong backward: whether the forward fails on the same problem (its
    values, or seeded noise: a backward's minimal input is often zeros), and
    whether the backward is the exact gradient of the implementation's own
    forward, by the adjoint identity ``<g, f(x + dx) - f(x)> = <grad_x, dx>``
    (likewise for the weight and the bias) with seeded directions, within the
    rounding bound of those sums. Both true: the backward inherits the
    forward's error (an autograd backward, or one that reuses the forward's
    windows).
``undeclared``
    A lower precision the implementation could declare, and does not, whose
    bound every result of the failure's kind is within (`UNDECLARED`):
    ``"float32_precision: tf32"`` for a float32 failure whose errors fit
    inputs rounded to TF32 (10-bit mantissa), as NVIDIA GPUs compute float32
    convolutions by default; ``"bfloat16_accumulation: bfloat16"`` for a
    bfloat16 one whose errors fit sums rounded to bfloat16 at each step. Such
    a finding is that precision, undeclared, not a cause to explain: its
    report says so, in one line that says how to declare it.
``unrepeatable``
    ``"k of n"``: of `REPEATS` further calls on the same inputs, how many gave
    results other than the first's, bit for bit (absent when all agreed). A
    failure whose call does not repeat (a cache not cleared, memory not
    initialised) is a symptom of the state its function keeps, not a cause
    of its own, and an explanation of it would read noise as a trigger.
``fails_in``
    ``"k of n"``: for a failure that comes and goes on the same inputs (memory
    not initialised: some calls pass), how many of ``n`` calls on its case
    fail. Such a failure is searched for and explained with ``n`` calls per
    problem, any failing counting (`repeated`), so that its trigger is the
    region where it can happen, never read from a call that happened to pass.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from conv_harness.checks.compare import compare
from conv_harness.checks.diagnosis import (BACKWARD_RESULTS, FORWARD_RESULTS, VALUE_KIND, diagnose,
                                      reference)
from conv_harness.checks.registry import PRODUCED_BY, REGISTRY
from conv_harness.checks.tolerance import (Arithmetic, flush_allowance, gamma, tolerance,
                                           unit_roundoff)
from conv_harness.problem import DTYPES, ConvCase, finfo
from conv_harness.running.calling import (CheckFailure, Observed, Timeout, call_backward,
                                          call_forward)
from conv_harness.running.loader import Implementation
from conv_harness.triage.explain import Probe, failure_probe, values_for
from strategies.problems import BFLOAT16_MAX_TERMS

#: per dtype, a lower precision an implementation may declare: (the key, its value, the
#: trigger of a finding whose errors fit it, undeclared: one line)
UNDECLARED: dict[str, tuple[str, str, str]] = {
    "float32": ("float32_precision", "tf32",
                "float32 inputs rounded to TF32: its errors fit that rounding (10-bit mantissa, "
                "as NVIDIA GPUs compute float32 convolutions by default), not float32's; if "
                "that is intended, declare \"float32_precision\": \"tf32\" in CAPABILITIES"),
    "bfloat16": ("bfloat16_accumulation", "bfloat16",
                 "bfloat16 products summed in bfloat16: its errors fit sums rounded to "
                 "bfloat16, not float32 sums rounded once; if that is intended, declare "
                 "\"bfloat16_accumulation\": \"bfloat16\" in CAPABILITIES"),
}
VALUE_KINDS = frozenset({"forward", "grad_input", "grad_weight", "grad_bias"})


def gather(impl: Implementation, failure: CheckFailure, case: ConvCase,
           timeout: Timeout, tries: int = 1) -> dict[str, Any]:
    """The evidence of one failure on its own case (empty for other kinds). ``tries``:
    the calls per example of the search that found it; more than one, for a failure
    that comes and goes, the evidence is how often it fails (the rest would be noise);
    one that fails on every call (another cause that search met) gets the rest."""
    if tries > 1:
        try:
            failing = fails_in(impl, failure, case, timeout, tries)
        except CheckFailure:
            return {}
        if failing < tries:
            return {"fails_in": f"{failing} of {tries}"}
    if failure.check not in VALUE_KINDS or failure.function is None:
        return {}
    out: dict[str, Any] = {}
    try:
        differ = unrepeatable(impl, failure.function, case, timeout)
        if differ:
            out["unrepeatable"] = f"{differ} of {REPEATS}"
            return out  # what the other evidence measures would be noise too
        lower = undeclared_precision(impl, failure.function, case, timeout, failure.check)
        if lower:
            out["undeclared"] = lower
            return out  # the lower precision is one it may declare
        low = precision(impl, failure.function, case, timeout, failure.check)
        if low:
            out["precision"] = low
        if failure.function.endswith("_backward"):
            forward = case.problem.op
            if impl.has(forward):
                # on the case's own values (a backward's minimal x is often zeros, on
                # which a wrong forward can be right) and on seeded noise
                out["forward_fails"] = any(
                    f.check == "forward" for values in (case, _noise(case))
                    for f in diagnose(impl, forward, values, timeout))
                out["consistent"] = consistent(impl, case, timeout)
    except CheckFailure:
        pass
    return out


#: further calls on a failing case's inputs, to tell a call that does not repeat
REPEATS = 3


def unrepeatable(impl: Implementation, function: str, case: ConvCase,
                 timeout: Timeout) -> int:
    """How many of `REPEATS` further calls of ``function`` on ``case`` give results that
    differ, bit for bit, from the first call's; where none do, on seeded noise (a
    minimal case of zeros can hide a cache that accumulates)."""
    call = call_backward if function.endswith("_backward") else call_forward

    def results(values: ConvCase) -> list[bytes]:
        # the values are what count here: a deferred failure (a wrong dtype) is let go
        out = call(impl.function(function), values, timeout, Observed())
        return [b"" if a is None else np.asarray(a).tobytes()
                for a in (out if isinstance(out, tuple) else (out,))]
    for values in (case, _noise(case)):
        first = results(values)
        differ = sum(results(values) != first for _ in range(REPEATS))
        if differ:
            return differ
    return 0


#: further calls that tell a failure that comes and goes from one that repeats: one
#: failing on half of the calls passes in one of them but once in 64
FURTHER_CALLS = 6


def fails_in(impl: Implementation, failure: CheckFailure, case: ConvCase,
             timeout: Timeout, calls: int) -> int:
    """Of ``calls`` calls on ``case``, how many show ``failure``'s kind of failure."""
    probe = failure_probe(impl, failure, timeout)
    return sum(probe(case) is True for _ in range(calls))


def comes_and_goes(impl: Implementation, failure: CheckFailure, case: ConvCase,
                   timeout: Timeout) -> bool:
    """Whether a failure seen on ``case`` passes on one of `FURTHER_CALLS` further calls
    on the same inputs (memory not initialised, a race), as a deterministic wrong
    result, or one that depends on a state every call changes, never does."""
    if failure.function is None and PRODUCED_BY.get(failure.check,
                                                    failure.check) not in REGISTRY:
        return False  # no check to call it again with
    probe = failure_probe(impl, failure, timeout)
    try:
        return any(probe(case) is False for _ in range(FURTHER_CALLS))
    except CheckFailure:
        return False


def fails_in_text(evidence: dict[str, Any], tries: int) -> str:
    """The trigger's words for a failure that comes and goes."""
    shown = evidence.get("fails_in", f"some of {tries}")
    return (f"fails in {shown} calls on the same inputs: its results do not repeat "
            f"(memory not initialised, or state kept between calls); each problem above "
            f"was called {tries} times, any failing counted")


class Repeated:
    """``probe`` for a failure that comes and goes: a case fails when any of ``tries``
    calls fails; otherwise it is masked when a call was, else passes. Every call is
    made, so that `last` can say in how many of them the case failed (the
    explanation's table shows it per changed problem: "FAIL 3/8")."""

    def __init__(self, probe: Probe, tries: int) -> None:
        self.probe, self.tries = probe, tries
        #: (failing calls, calls) of the last case called
        self.last: tuple[int, int] | None = None

    def __call__(self, case: ConvCase) -> bool | str:
        failing = 0
        masked: bool | str = False
        for _ in range(self.tries):
            verdict = self.probe(case)
            if verdict is True:
                failing += 1
            else:
                masked = masked or verdict
        self.last = (failing, self.tries)
        return True if failing else masked


def _noise(case: ConvCase) -> ConvCase:
    return values_for(case, case.problem, dict(case.layouts), False, seed=4321)


def _results(impl: Implementation, function: str, case: ConvCase, timeout: Timeout,
             kind: str | None) -> tuple[tuple[str, ...], tuple]:
    """(names, results) of one call of ``function`` on ``case``: those of that ``kind``
    of failure only, where given (``grad_weight``...)."""
    backward = function.endswith("_backward")
    results = (call_backward if backward else call_forward)(
        impl.function(function), case, timeout, Observed())
    results = results if backward else (results,)
    names = BACKWARD_RESULTS if backward else FORWARD_RESULTS
    if kind is not None:
        only = [(name, actual) for name, actual in zip(names, results)
                if VALUE_KIND.get(name) == kind]
        names, results = tuple(n for n, _ in only), tuple(a for _, a in only)
    return names, results


def undeclared_precision(impl: Implementation, function: str, case: ConvCase,
                         timeout: Timeout, kind: str | None = None) -> str | None:
    """``"key: value"`` of `UNDECLARED` when the call, not declaring it, shows what that
    declaration computes (every result of that ``kind``, where given), by positive
    evidence: not an error that merely fits the wider envelope the declaration allows
    (in bfloat16 its normwise floor lets a small problem be off by 100%).

    - TF32: each result is, within float32's own bound, the exact convolution of the
      inputs rounded to TF32 (to nearest, or truncated): what such a kernel computes;
    - bfloat16 sums: each result is within bfloat16's elementwise bound of sums,
      gamma(K) * sum|terms|, with no normwise floor for other algorithms, and sums at
      most `BFLOAT16_MAX_TERMS` terms (beyond, the bound allows errors as large as the
      result: no evidence)."""
    if case.problem.dtype not in UNDECLARED:
        return None
    key, value, _ = UNDECLARED[case.problem.dtype]
    if getattr(impl.capabilities_for((function,)), key) == value:
        return None
    names, results = _results(impl, function, case, timeout, kind)
    if not names:
        return None
    fits = _computed_from_tf32 if key == "float32_precision" else _within_bfloat16_sums
    return f"{key}: {value}" if fits(case, names, results) else None


def _within(case: ConvCase, names: tuple[str, ...], results: tuple,
            arithmetic: Arithmetic = Arithmetic(), elementwise: bool = False,
            max_terms: int | None = None, known: tuple | None = None) -> bool:
    """Whether every result is within ``case``'s bound of the reference on ``case``,
    computed with ``arithmetic`` (a direct sum: each hypothesis names its own)
    (with ``elementwise``, that bound less its normwise floor; with ``max_terms``, only
    where each result sums at most that many terms, else False). ``known``: that
    reference, (results, sums of |terms|), where the caller has it for these arrays."""
    expected, magnitude = reference(case) if known is None else known
    for name, actual in zip(names, results):
        if actual is None or expected[name] is None:
            continue
        tol = tolerance(case, name, magnitude, arithmetic)
        if max_terms is not None and tol.terms > max_terms:
            return False
        if elementwise:
            tol = dataclasses.replace(tol, bound=tol.bound - tol.floor, floor=0.0)
        if compare(name, actual, expected[name], tol) is not None:
            return False
    return True


#: TF32 keeps 10 of float32's 23 explicit mantissa bits
_TF32_DROPPED = 13


def tf32_rounded(a: np.ndarray | None, nearest: bool) -> np.ndarray | None:
    """float32 ``a`` rounded to TF32: to nearest (ties away from zero, as NVIDIA's
    conversion does) or truncated."""
    if a is None:
        return None
    bits = np.ascontiguousarray(a, dtype=np.float32).view(np.int32)
    if nearest:
        bits = bits + np.int32(1 << (_TF32_DROPPED - 1))
    return (bits & np.int32(-(1 << _TF32_DROPPED))).view(np.float32)


def _computed_from_tf32(case: ConvCase, names: tuple[str, ...], results: tuple) -> bool:
    for nearest in (True, False):
        rounded = dataclasses.replace(case, x=tf32_rounded(case.x, nearest),
                                      weight=tf32_rounded(case.weight, nearest),
                                      grad_output=tf32_rounded(case.grad_output, nearest))
        if _within(rounded, names, results):
            return True
    return False


def _within_bfloat16_sums(case: ConvCase, names: tuple[str, ...], results: tuple) -> bool:
    """Only where the sums are short enough for bfloat16's bound to say anything
    (`BFLOAT16_MAX_TERMS`, gamma(64) = 1/3, where the strategies stop drawing for a
    declared one): over 147 terms gamma is 1.35, and a doubled grad_bias fitted it."""
    return _within(case, names, results, Arithmetic(bfloat16_accumulation="bfloat16"),
                   elementwise=True, max_terms=BFLOAT16_MAX_TERMS)


def undeclared_trigger(undeclared: str) -> str:
    """The one-line trigger of a finding with the evidence ``undeclared``."""
    return next(trigger for key, value, trigger in UNDECLARED.values()
                if undeclared == f"{key}: {value}")


def precision(impl: Implementation, function: str, case: ConvCase,
              timeout: Timeout, kind: str | None = None) -> str | None:
    """The lowest dtype below ``case``'s whose rounding every result of the call is within
    (the result of that ``kind`` of failure only, where given: ``grad_weight``...)."""
    names, results = _results(impl, function, case, timeout, kind)
    if not names:
        return None
    known = reference(case)  # the same arrays in every dtype tried: computed once
    dtype = case.problem.dtype
    lower = DTYPES[DTYPES.index(dtype) + 1:] if dtype in DTYPES else ()
    # a lower dtype that cannot hold a result's value did not compute it: a non-zero
    # value below its smallest subnormal would have flushed to 0 there (a float32
    # result of 1e-32 is no float16 computation, though float16's flush allowance
    # covers any error that small)
    lower = tuple(d for d in lower if not any(_below_range(actual, d) for actual in results))
    found = None
    for dtype in lower:
        as_low = dataclasses.replace(case, problem=dataclasses.replace(case.problem, dtype=dtype))
        if _within(as_low, names, results, known=known):
            found = dtype
            break  # the highest precision that explains the errors
    return found


def _below_range(actual: np.ndarray | None, dtype: str) -> bool:
    """Whether ``actual`` holds a non-zero value smaller than ``dtype``'s smallest subnormal."""
    if actual is None:
        return False
    a = np.abs(np.asarray(actual, dtype=np.float64))
    return bool(np.any((a > 0) & (a < float(finfo(dtype).smallest_subnormal))))


def consistent(impl: Implementation, case: ConvCase, timeout: Timeout) -> bool:
    """Whether the backward is the exact gradient of the implementation's own forward."""
    p = case.problem
    forward, backward = impl.function(p.op), impl.function(p.spec.backward_name)
    gx, gw, gb = call_backward(backward, case, timeout, Observed())
    y0 = np.asarray(call_forward(forward, case, timeout, Observed()), dtype=np.float64)
    rng = np.random.default_rng(0)
    g = np.asarray(case.grad_output, dtype=np.float64)
    u = unit_roundoff(p.dtype)
    size0 = reference(case)[1]["y"]
    for name, grad in (("x", gx), ("weight", gw), ("bias", gb)):
        base = getattr(case, name)
        if base is None or grad is None:
            continue
        moved = (base + rng.uniform(-1, 1, base.shape)).astype(p.dtype)
        step = moved.astype(np.float64) - base.astype(np.float64)  # exactly what moved
        changed = dataclasses.replace(case, **{name: moved})
        y1 = np.asarray(call_forward(forward, changed, timeout, Observed()), dtype=np.float64)
        size1 = reference(changed)[1]["y"]
        lhs = float(np.sum(g * (y1 - y0)))
        rhs = float(np.sum(np.asarray(grad, dtype=np.float64) * step))
        # each forward result is within gamma(K+1) of the sum of its terms' magnitudes
        # (K: the forward's reduction length), each backward result within gamma of
        # its own reduction length; the float64 sums here add theirs
        forward_terms = float(np.sum(np.abs(g) * (size0 + size1)))
        backward_terms = float(np.sum(np.abs(np.asarray(grad, dtype=np.float64)) * np.abs(step)))
        reduction = max(p.grad_input_terms(), p.grad_weight_terms(), p.grad_bias_terms(), 1)
        # and what underflow may take from each result (conv_harness/checks/tolerance.py's
        # flush allowance): tiny data (a delta kernel's 1e-32 in float32) make products
        # of 1e-64 that round to 0 in the dtype, far beyond the relative terms above
        flushed = (float(np.sum(np.abs(g) * (
            _forward_flush(case, size0) + _forward_flush(changed, size1))))
            + float(np.sum(np.abs(step) * flush_allowance(
                p.dtype, reduction, _backward_operands(case, name),
                np.full(base.shape, np.inf)))))
        bound = (gamma(p.forward_terms() + 1, u) * forward_terms
                 + gamma(reduction, u) * backward_terms + flushed
                 + gamma(g.size + step.size, unit_roundoff("float64"))
                 * (forward_terms + backward_terms + flushed))
        if not abs(lhs - rhs) <= bound:
            return False
    return True


def _forward_flush(case: ConvCase, magnitude: np.ndarray) -> np.ndarray:
    """What underflow may take from each forward result of ``case``."""
    return flush_allowance(case.problem.dtype, case.problem.forward_terms() + 1,
                           (case.x, case.weight), magnitude, case.bias)


def _backward_operands(case: ConvCase, name: str) -> tuple[np.ndarray, np.ndarray | None]:
    """The two factors of the products each gradient of ``name`` sums."""
    return {"x": (case.grad_output, case.weight), "weight": (case.grad_output, case.x),
            "bias": (case.grad_output, None)}[name]


def beyond_rounding(probe, impl: Implementation, function: str, timeout: Timeout):
    """``probe`` for a value bug whose errors are beyond any lower precision's rounding:
    a changed problem whose errors are only that large passes (this bug is not
    there; what is left is a cause that computes in lower precision)."""
    def sized(case: ConvCase) -> bool | str:
        verdict = probe(case)
        if verdict is True:
            try:
                return not precision(impl, function, case, timeout)
            except CheckFailure:
                return verdict
        return verdict
    return sized
