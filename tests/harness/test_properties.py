"""The oracle-free properties: they catch the tutorial's backward bugs one by
one, pass on correct implementations, and run without torch."""

from __future__ import annotations

import json
import re
import textwrap

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings

from conv_impl import tutorial
from conv_harness.checks import oracle
from conv_harness.checks.closed_form import closed_forms, magnitudes
from conv_harness.checks.registry import REGISTRY, run_check
from conv_harness.problem import OPS, ConvCase, ConvProblem
from conv_harness.running.calling import CheckFailure
from conv_harness.running.capabilities import Capabilities
from conv_harness.running.loader import (
    CONTRACT_FUNCTIONS,
    Implementation,
    load_implementation,
)
from strategies import conv_cases

PROPERTIES = ("adjoint", "linearity", "finite_difference", "pointwise", "delta_kernel")
QUICK = dict(deadline=None, database=None, derandomize=True,
             suppress_health_check=list(HealthCheck))


def as_impl(obj, name: str) -> Implementation:
    functions = {n: getattr(obj, n) for n in CONTRACT_FUNCTIONS if getattr(obj, n, None)}
    return Implementation(spec=name, name=name, target=obj, functions=functions,
                          capabilities=Capabilities.from_mapping(obj.CAPABILITIES))


def strategy(check: str, impl: Implementation, op: str):
    custom = REGISTRY[check].cases
    return custom(op, impl.capabilities) if custom else conv_cases(
        op, capabilities=impl.capabilities)


def first_failure(check: str, impl: Implementation, op: str, examples: int):
    """The first CheckFailure in ``examples`` generated cases (no shrinking), or None.

    The property runs on its own (``Check.run``), without `run_check`'s
    attribution of its failure to a wrong result (tested in test_triage.py).
    """
    found = []

    @settings(max_examples=examples, phases=[Phase.generate], **QUICK)
    @given(strategy(check, impl, op))
    def search(case):
        try:
            REGISTRY[check].run(impl, case, 20)
        except CheckFailure as failure:
            found.append(failure)
            raise
    try:
        search()
    except CheckFailure:
        pass
    return found[0] if found else None


BUGGY = {
    "tutorial": lambda: load_implementation("conv_impl.tutorial"),
    "stride_zeros": lambda: as_impl(tutorial.tutorial_impl({"stride_zeros"}, square=False),
                                    "stride_zeros"),
    "backward_padding": lambda: as_impl(tutorial.tutorial_impl({"backward_padding"}),
                                        "backward_padding"),
}
CORRECT = {
    "einsum": lambda: load_implementation("conv_impl.einsum"),
    # harmless on its own in this re-creation (it reads zeros past the end)
    "window_remainder": lambda: as_impl(tutorial.tutorial_impl({"window_remainder"}),
                                        "window_remainder"),
    "fixed": lambda: as_impl(tutorial.tutorial_impl(frozenset(), square=False), "fixed"),
}


@pytest.mark.parametrize("variant", sorted(BUGGY))
@pytest.mark.parametrize("check", PROPERTIES)
def test_each_property_catches_each_backward_bug(check, variant):
    failure = first_failure(check, BUGGY[variant](), "conv2d", 200)
    assert failure is not None, f"{check} did not catch the tutorial variant {variant}"
    assert failure.check == check, failure.message  # the property itself, not a crash
    assert "grad_input" in failure.message


@pytest.mark.parametrize("variant", sorted(CORRECT))
@pytest.mark.parametrize("check", PROPERTIES)
def test_each_property_passes_on_correct_implementations(check, variant):
    impl = CORRECT[variant]()
    ops = ["conv2d", "conv_transpose3d"] if variant == "einsum" else ["conv2d"]
    for op in ops:
        failure = first_failure(check, impl, op, 15)
        assert failure is None, failure.message


@pytest.mark.skipif(not oracle.torch_available(), reason="needs torch")
@pytest.mark.parametrize("op", sorted(OPS))
def test_numpy_sums_agree_with_torch(op):
    """The shift-and-subsample sums behind the closed forms and the bounds are
    torch's convolution (and its magnitudes) exactly, for every operation."""
    @settings(max_examples=25, **QUICK)
    @given(conv_cases(op))
    def agree(case):
        ref, ref_abs = oracle.evaluate(case)
        ours, ours_abs = closed_forms(case), magnitudes(case)
        for name in ("y", "grad_input", "grad_weight", "grad_bias"):
            if ref[name] is None:
                assert ours[name] is None
                continue
            np.testing.assert_allclose(ours[name], ref[name], rtol=1e-12, atol=1e-12)
            np.testing.assert_allclose(ours_abs[name], ref_abs[name], rtol=1e-12, atol=1e-12)
    agree()


@pytest.mark.skipif(not oracle.torch_available(), reason="needs torch")
def test_invalid_problems_agree_on_raising():
    einsum = load_implementation("conv_impl.einsum")
    for op in OPS:
        assert first_failure("invalid", einsum, op, 15) is None
    lenient = load_implementation("tests/harness/buggy_properties/lenient.py")
    failure = first_failure("invalid", lenient, "conv2d", 50)
    assert failure is not None and failure.check == "invalid"
    assert "should raise" in failure.message


# -- products in and below float64's subnormal range ---------------------------------

#: a float64 value whose square is subnormal: 8.25e-162**2 = 6.8e-323, 13.8 smallest subnormals
TINY = 8.252067293793926e-162
ETA = float(np.finfo(np.float64).smallest_subnormal)


def tiny_case(x: list[float], w: list[float], g: list[float], batch: int = 1) -> ConvCase:
    """A float64 conv2d with one input and one output channel, input 1 x len(x) // batch,
    kernel 1 x len(w), unpadded."""
    width = len(x) // batch
    problem = ConvProblem(op="conv2d", batch=batch, in_channels=1, out_channels=1,
                          input_size=(1, width), kernel_size=(1, len(w)), stride=(1, 1),
                          padding=(0, 0), dilation=(1, 1), groups=1, bias=False,
                          dtype="float64")
    shaped = lambda v, *shape: np.array(v, dtype=np.float64).reshape(shape)  # noqa: E731
    return ConvCase(problem=problem, x=shaped(x, batch, 1, 1, width),
                    weight=shaped(w, 1, 1, 1, len(w)), bias=None,
                    grad_output=shaped(g, batch, 1, 1, -1))


#: The thorough run's shrunk false alarm on conv_impl.einsum (also conv_impl.winograd):
#: <conv(x, w), g> sums two products 2 * TINY**2, each rounded to a multiple of the
#: smallest subnormal, <w, grad_weight> rounds one product 4 * TINY**2.
UNDERFLOW = dict(x=[2.0, 2.0], w=[TINY], g=[TINY, TINY], batch=2)
#: The linearity check's slope in w fails the same way on einsum without the allowance
#: (2.08e-322 vs 2.03e-322, differing by one smallest subnormal, allowed 0).
SLOPE = dict(x=[2.0, 2.0], w=[TINY, TINY], g=[TINY])
PINNED = {"adjoint": UNDERFLOW, "linearity": SLOPE}


def test_the_underflow_case_still_shows_the_gap():
    """The float64 inner products of the pinned case differ by one smallest subnormal,
    which gamma(n, u64) * sum|terms| and the weighted result bounds (both 0 here) miss."""
    left = np.sum(np.array([2 * TINY, 2 * TINY]) * np.array([TINY, TINY]))
    right = TINY * (4 * TINY)
    assert abs(left - right) == ETA


@pytest.mark.parametrize("name", ["conv_impl.einsum", "conv_impl.winograd",
                                  "tests/harness/flushing.py:flushes_subnormals"])
@pytest.mark.parametrize("check", ["adjoint", "linearity"])
def test_products_that_underflow_pass_the_scalar_checks(check, name):
    """Correct implementations, and one that flushes subnormals (FTZ and DAZ), on the
    pinned cases: the adjoint identity (and the linearity check's slopes, formed the
    same way) allow one smallest subnormal per product of each inner product. Before,
    the allowed error computed to 0 and each case failed its check on einsum
    (adjoint: 2.77e-322 vs 2.7e-322)."""
    run_check(check, load_implementation(name), tiny_case(**PINNED[check]))


def test_the_adjoint_still_catches_a_wrong_gradient_of_subnormal_size():
    """known_bugs.wrong_grad_weight (a rotated kernel gradient) where every product is
    in the subnormal range: the sides differ by 55 smallest subnormals, the allowance
    is 4 (eta / 2 per product of each inner product and of its weighted bound, each
    half rounded up), and the correct implementation passes the same case."""
    case = tiny_case(x=[2.0, 0.0], w=[TINY, 3 * TINY], g=[TINY])
    run_check("adjoint", load_implementation("conv_impl.einsum"), case)
    buggy = load_implementation("tests/harness/known_bugs.py:wrong_grad_weight")
    with pytest.raises(CheckFailure, match=r"<w, grad_weight\(g\)> fails") as caught:
        REGISTRY["adjoint"].run(buggy, case, 20)
    assert caught.value.check == "adjoint"


NO_TORCH = textwrap.dedent("""\
    raise ImportError("torch is hidden by a test of the harness (simulating no torch)")
    """)


@pytest.fixture
def without_torch(tmp_path):
    (tmp_path / "hide" / "torch").mkdir(parents=True)
    (tmp_path / "hide" / "torch" / "__init__.py").write_text(NO_TORCH)
    return {"PYTHONPATH": str(tmp_path / "hide")}


def test_properties_run_without_torch(run_pytest, without_torch, tmp_path):
    """No torch: the properties still fail on the tutorial with a shrunk case
    (and a case file), and pass on conv_impl.einsum."""
    failures = tmp_path / "nt-failures"
    bad = run_pytest("tests/conformance/test_properties.py", "--impl", "conv_impl.tutorial",
                     "-k", "test_pointwise", f"--conv-failures={failures}", env=without_torch)
    out = bad.stdout + bad.stderr
    assert bad.returncode == 1, out
    # the property's failure, traced to the wrong result by NumPy's closed form
    assert "grad_input is wrong (conv2d_backward), found by check 'pointwise'" in out, out
    summary = json.loads((failures / "summary.json").read_text())
    bugs = summary["implementations"][0]["bugs"]
    assert bugs and all(bug["failure"] == "grad_input" for bug in bugs)
    records = [json.loads((failures / bug["case_file"]).read_text()) for bug in bugs]
    # replayable without torch: by the property that found it, on the problem it drew
    assert {r["run_check"] for r in records} == {"pointwise"}
    assert records[0]["versions"]["torch"] == "not installed"
    shrunk = records[0]["params"]
    assert shrunk["kernel_size"] == [1, 1] and shrunk["batch"] == 1
    assert shrunk["in_channels"] == shrunk["out_channels"] == 1

    good = run_pytest("tests/conformance/test_properties.py", "--impl", "conv_impl.einsum",
                      "-k", "conv1d and (adjoint or delta_kernel)", env=without_torch)
    assert good.returncode == 0, good.stdout + good.stderr
    assert re.search(r"\b2 passed", good.stdout), good.stdout
    assert ("oracle checks (forward, grad_*) not run: PyTorch is not importable; only the "
            "oracle-free checks ran") in good.stdout


def test_gamma_is_finite_and_sound_past_n_u_of_one():
    """Higham's gamma_n = n u / (1 - n u) has no value once n u >= 1 (256 bfloat16 terms,
    2048 float16 ones); its source, (1 + u)**n - 1, bounds n roundings for every n."""
    import math

    from conv_harness.checks.tolerance import gamma
    u = 2.0 ** -8
    assert gamma(100, u) == 100 * u / (1 - 100 * u)
    for n in (256, 257, 4096, 10 ** 6, 10 ** 9):
        g = gamma(n, u)
        assert math.isfinite(g) and g > 0 and g * 0.0 == 0.0
        assert g >= math.expm1(min(n * math.log1p(u), math.log(1e150))) * (1 - 1e-12)


class _Bfloat16ThroughFloat64:
    """Correct in bfloat16: computed exactly (float64), rounded once."""

    CAPABILITIES = {"dtypes": ("bfloat16",)}

    @staticmethod
    def conv1d(x, weight, bias, **kw):
        import torch
        as64 = lambda a: None if a is None else torch.from_numpy(np.asarray(a, np.float64))
        return torch.nn.functional.conv1d(as64(x), as64(weight), as64(bias), **kw).numpy(
        ).astype(x.dtype)

    @staticmethod
    def conv1d_backward(grad_output, x, weight, bias, **kw):
        import torch
        leaf = lambda a: torch.tensor(np.asarray(a, np.float64), requires_grad=True)
        tx, tw = leaf(x), leaf(weight)
        tb = None if bias is None else leaf(bias)
        torch.nn.functional.conv1d(tx, tw, tb, **kw).backward(
            torch.from_numpy(np.asarray(grad_output, np.float64)))
        return tuple(None if t is None else t.grad.numpy().astype(x.dtype)
                     for t in (tx, tw, tb))


@pytest.mark.skipif(not oracle.torch_available(), reason="needs torch")
@pytest.mark.parametrize("check", PROPERTIES + ("grad_weight",))
def test_bfloat16_reductions_of_256_terms_and_more_pass(check):
    """bfloat16's u = 2**-8, so grad_weight over 256 positions had an infinite bound
    and a zero result an allowed error of NaN (inf * 0): every correct kernel failed."""
    from conv_harness.problem import bfloat16
    impl = as_impl(_Bfloat16ThroughFloat64, "bf16_via_float64")
    for positions, kernel in ((256, 1), (300, 3)):
        p = ConvProblem(op="conv1d", batch=1, in_channels=2, out_channels=2,
                        input_size=(positions,), kernel_size=(kernel,), stride=(1,),
                        padding=(0,), dilation=(1,), groups=1, bias=True, dtype="bfloat16")
        rng = np.random.default_rng(positions)
        shapes = p.shapes()
        arrays = {name: rng.standard_normal(shapes[name]).astype(bfloat16())
                  for name in ("x", "weight", "bias", "grad_output")}
        arrays["x"][..., : positions // 2] = 0  # zero results: where NaN was allowed
        case = ConvCase(problem=p, **arrays)
        run_check(check, impl, case)
