"""Implementations on their own arrays and devices (issue 36, contract section 7).

The torch cases run on the CPU, and again on a CUDA device where torch sees
one (``python -m pytest tests/harness/test_native.py`` on a GPU machine checks
cuDNN's convolutions); without one, those are skipped. In process
(conv_harness/run.py), like the triage's other tests.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import Phase, assume, given, settings

from conv_harness.checks import threads
from conv_harness.checks.registry import examine, run_check
from conv_harness.problem import CHANNEL_LAYOUTS, LAYOUTS_OF, ConvCase, ConvProblem, make_layout
from conv_harness.running import native
from conv_harness.running.calling import CheckFailure
from conv_harness.running.capabilities import Capabilities
from conv_harness.running.isolate import _layout_of
from conv_harness.running.loader import SpecError, load_implementation
from strategies import conv_cases
from strategies.cases import noise
from tests.harness.runs import triaged
from tests.harness.conftest import QUIET
from tests.harness.test_triage import scripts_exit_1

HERE = Path(__file__).parent
ORACLE_CHECKS = ("forward", "grad_input", "grad_weight", "grad_bias")
DEVICES = [pytest.param("cpu"), pytest.param("cuda", marks=pytest.mark.skipif(
    not torch.cuda.is_available(), reason="torch sees no CUDA device"))]


def torch_impl(device: str, name: str):
    return load_implementation(f"{HERE / 'torch_impls.py'}:{device}.{name}")


def small_case(dtype: str = "float64", layouts: dict | None = None) -> ConvCase:
    p = ConvProblem(op="conv2d", batch=1, in_channels=2, out_channels=2, input_size=(3, 3),
                    kernel_size=(2, 2), stride=(1, 1), padding=(0, 0), dilation=(1, 1),
                    groups=1, bias=True, dtype=dtype)
    arrays = {name: None if shape is None else noise("floats", dtype, shape, seed)
              for seed, (name, shape) in enumerate(p.shapes().items())}
    return ConvCase(problem=p, layouts=layouts or {}, **arrays)


# -- handing arrays over -----------------------------------------------------------

@pytest.mark.parametrize("layout", LAYOUTS_OF["torch"])
def test_a_tensor_has_the_drawn_layouts_strides_and_memory(layout):
    values = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5)
    array = make_layout(values, layout)
    tensor = native.to_torch(array, "cpu")
    assert torch.equal(tensor, torch.from_numpy(values))
    assert tensor.stride() == tuple(s // 4 for s in array.strides)
    assert tensor.is_contiguous(memory_format=torch.channels_last) == (layout == "channels_last")
    if layout == "channels_last_slice":  # a slice: the other channels are there, around it
        assert tensor.storage_offset() == 1 and tensor.untyped_storage().nbytes() > array.nbytes
    assert _layout_of(array) == layout  # what --isolate's child rebuilds


def test_torch_layouts_are_drawn_for_torch_and_numpys_for_numpy():
    seen = {"numpy": set(), "torch": set()}
    for arrays in seen:
        caps = Capabilities(arrays=arrays)

        @settings(max_examples=200, phases=[Phase.generate], **QUIET)
        @given(case=conv_cases("conv2d", capabilities=caps))
        def draw(case):
            seen[arrays].update(case.layouts[name] for name in ("x", "weight", "grad_output"))
            assert case.layouts.get("bias", "C") not in ("channels_last", "channels_last_slice")

        draw()
    assert seen == {arrays: set(LAYOUTS_OF[arrays]) for arrays in seen}


# -- a correct torch implementation passes ---------------------------------------------

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ["float64", "float32", "float16", "bfloat16"])
def test_torch_functional_passes_every_oracle_check_in_every_layout(device, dtype):
    impl = torch_impl(device, "functional")
    caps = dataclasses.replace(impl.capabilities, dtypes=(dtype,))
    layouts = set()

    # the same draws whatever profile an earlier test in this worker loaded
    @settings(max_examples=100, phases=[Phase.generate], derandomize=True, **QUIET)
    @given(case=conv_cases("conv2d", capabilities=caps))
    def passes(case):
        layouts.update(case.layouts.values())
        assume(not torchs_own_bug(case))  # pinned by the test below
        for check in ORACLE_CHECKS:
            run_check(check, impl, case)

    passes()
    assert {"channels_last", "channels_last_slice"} <= layouts
    assert impl.derived() == {name: "autograd" for name in (
        "conv1d_backward", "conv2d_backward", "conv3d_backward", "conv_transpose2d_backward")}


def torchs_own_bug(case: ConvCase) -> bool:
    """torch 2.13's CPU conv2d backward raises "slow_conv2d: grad_weight must be
    contiguous" for a channels-last input and a Fortran-ordered weight."""
    return case.layouts.get("x") in CHANNEL_LAYOUTS and case.layouts.get("weight") == "F"


def test_torchs_own_backward_raises_for_a_channels_last_input_and_a_fortran_weight():
    """Found by the test above on the CPU (torch 2.13.0, float32 and float16, 2 input
    channels, kernel 2x1): F.conv2d's backward raises "slow_conv2d: grad_weight must be
    contiguous" where the input is channels-last and the weight Fortran-ordered; the same
    problem in any other pair of layouts passes."""
    impl = torch_impl("cpu", "functional")
    p = dataclasses.replace(small_case("float32").problem, out_channels=1, kernel_size=(2, 1))
    arrays = {name: None if shape is None else noise("floats", "float32", shape, seed)
              for seed, (name, shape) in enumerate(p.shapes().items())}
    case = ConvCase(problem=p, layouts={"x": "channels_last", "weight": "F"}, **arrays)
    failures = examine("grad_weight", impl, case)
    _skip_unless_torch_shows(bool(failures), "the backward's raise for these layouts",
                             "no failure")
    (failure,) = failures
    assert failure.check == "raised" and "grad_weight must be contiguous" in failure.message
    assert not examine("grad_weight", impl, dataclasses.replace(case, layouts={"x": "channels_last"}))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.long
def test_a_run_of_torch_functional_finds_nothing(device, tmp_path, monkeypatch):
    bugs, _ = triaged(f"{HERE / 'torch_impls.py'}:{device}.functional",
                      ("forward", "grad_input", "repeatable"),
                      ("conv1d", "conv3d", "conv_transpose2d"),
                      tmp_path / "failures")
    assert bugs == []


# -- contract checks on the native results ---------------------------------------------

def test_a_tensor_of_the_wrong_dtype_is_a_dtype_failure():
    failures = examine("forward", torch_impl("cpu", "float32_result"), small_case("float64"))
    (dtype,) = [f for f in failures if f.check == "dtype"]
    assert "conv2d's result has dtype float32; inputs are float64" in dtype.message


def test_an_input_tensor_changed_in_place_is_an_input_changed_failure():
    failures = examine("forward", torch_impl("cpu", "scales_its_input"),
                       small_case(layouts={"x": "channels_last_slice"}))
    assert [f.check for f in failures] == ["input_changed"]
    assert "changed its input 'x' in place (18 of 18 elements)" in failures[0].message


def test_declarations_it_cannot_honour_are_usage_errors(tmp_path):
    def load(caps: str):
        path = tmp_path / f"impl{abs(hash(caps))}.py"
        path.write_text(f"CAPABILITIES = {caps}\ndef conv2d(x, w, b, **kw):\n    return x\n")
        return load_implementation(str(path))

    with pytest.raises(SpecError, match=r"\['arrays'\] must be one of \('numpy', 'torch'\)"):
        load('{"arrays": "jax"}')
    with pytest.raises(SpecError, match="NumPy arrays live on the CPU"):
        load('{"device": "cuda:0"}')
    with pytest.raises(SpecError, match="torch does not know"):
        load('{"arrays": "torch", "device": "tpu:7"}')
    if not torch.cuda.is_available():
        with pytest.raises(SpecError, match="torch sees no CUDA device here"):
            load('{"arrays": "torch", "device": "cuda:0"}')


# -- bugs of torch implementations, found, shrunk and reproduced ------------------------

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.long
def test_a_channels_last_only_bug_is_found_with_its_layout_and_script(device, tmp_path,
                                                                      monkeypatch):
    failures = tmp_path / "failures"
    bugs, out = triaged(f"{HERE / 'torch_impls.py'}:{device}.channels_last_only",
                        ("forward",), ("conv2d",), failures)
    assert len(bugs) == 1, out
    (bug,) = bugs
    record = json.loads((failures / bug["case_file"]).read_text())
    assert record["arrays"] == "torch" and record["device"] == device
    assert record["layouts"]["x"] in ("channels_last", "F")  # F is channels-last at 1 row
    assert record["params"]["in_channels"] == 2 and record["params"]["batch"] == 1
    assert "layout" in bug["trigger"] and f"arrays:     torch on {device}" in out
    assert bug["reproduces_alone"] is True
    scripts_exit_1(failures, bugs)


@pytest.mark.parametrize("device", DEVICES)
def test_a_forward_alones_wrong_autograd_backward_is_found_and_said_to_come_from_autograd(
        device, tmp_path, monkeypatch):
    failures = tmp_path / "failures"
    bugs, out = triaged(f"{HERE / 'torch_impls.py'}:{device}.autograd_function",
                        ("forward", "grad_input", "grad_weight", "grad_bias"),
                        ("conv2d",), failures)
    assert [(b["check"], b["function"]) for b in bugs] == [("grad_weight", "conv2d_backward")]
    (bug,) = bugs
    assert (bug["params"]["input_size"], bug["params"]["kernel_size"]) == ([1, 1], [1, 1])
    assert "conv2d_backward from autograd (it provides none)" in out
    record = json.loads((failures / bug["case_file"]).read_text())
    assert record["derived"] == {"conv2d_backward": "autograd"}
    scripts_exit_1(failures, bugs)


def test_the_torch_example_passes(tmp_path, monkeypatch):
    """examples/torch_unfold_conv.py: a forward on tensors, its backward from autograd."""
    bugs, _ = triaged(str(HERE.parent.parent / "examples" / "torch_unfold_conv.py"),
                      ("forward", "grad_input", "grad_weight", "adjoint"),
                      ("conv2d",), tmp_path / "failures")
    assert bugs == []


# -- thread counts ------------------------------------------------------------------------

@pytest.mark.long
def test_a_result_that_depends_on_the_thread_count_is_one_entry_with_both_counts(
        tmp_path, monkeypatch):
    failures = tmp_path / "failures"
    bugs, out = triaged(f"{HERE / 'torch_impls.py'}:cpu.thread_dependent",
                        ("forward", "repeatable"), ("conv2d",), failures)
    assert [b["failure"] for b in bugs] == [threads.THREAD_COUNT], out
    (bug,) = bugs
    assert bug["trigger"].startswith("fails when in channels per group >= 2"), bug["trigger"]
    assert f"on 1 thread than on {threads.several()} threads" in out
    scripts_exit_1(failures, bugs)


def test_sums_ordered_differently_on_more_threads_are_no_failure():
    impl = torch_impl("cpu", "thread_order")

    @settings(max_examples=40, phases=[Phase.generate], **QUIET)
    @given(case=conv_cases("conv2d", capabilities=impl.capabilities))
    def passes(case):
        run_check("repeatable", impl, case)

    passes()
    with pytest.raises(CheckFailure, match="thread_count|on 1 thread"):
        run_check("repeatable", torch_impl("cpu", "thread_dependent"), small_case())


# -- TF32 -----------------------------------------------------------------------------

def test_tf32_rounding_passes_where_declared_and_fails_float32s_bound_where_not():
    declared, undeclared = (torch_impl("cpu", name) for name in ("tf32_rounding",
                                                                 "tf32_undeclared"))
    caps = dataclasses.replace(declared.capabilities, dtypes=("float32",))

    @settings(max_examples=60, phases=[Phase.generate], derandomize=True, **QUIET)
    @given(case=conv_cases("conv2d", capabilities=caps))
    def passes(case):
        assume(not torchs_own_bug(case))
        for check in ORACLE_CHECKS:
            run_check(check, declared, case)

    passes()
    with pytest.raises(CheckFailure, match=r"tolerance: float32 \(u=5.96e-08\)") as info:
        run_check("forward", undeclared, small_case("float32"))
    assert "TF32" not in info.value.message  # float32's bound: TF32 is not allowed
    run_check("forward", declared, small_case("float32"))


def test_undeclared_tf32_is_one_entry_that_says_so_and_how_to_declare_it(tmp_path,
                                                                         monkeypatch):
    failures = tmp_path / "failures"
    bugs, out = triaged(f"{HERE / 'torch_impls.py'}:cpu.tf32_undeclared",
                        ORACLE_CHECKS, ("conv2d",), failures)
    assert len(bugs) == 1, [(b["check"], b["trigger"]) for b in bugs]
    (bug,) = bugs
    assert bug["params"]["dtype"] == "float32"
    assert bug["trigger"].startswith("float32 inputs rounded to TF32")
    assert '"float32_precision": "tf32"' in bug["trigger"]
    scripts_exit_1(failures, bugs)


# -- bfloat16 -----------------------------------------------------------------------------

def test_bfloat16_summed_in_bfloat16_is_found_unless_declared(tmp_path, monkeypatch):
    failures = tmp_path / "failures"
    bugs, out = triaged(f"{HERE / 'torch_impls.py'}:cpu.bfloat16_sums",
                        ("forward",), ("conv2d",), failures)
    assert [(b["check"], b["params"]["dtype"]) for b in bugs] == [("forward", "bfloat16")], out
    assert "tolerance: bfloat16" in out
    assert bugs[0]["trigger"].startswith("bfloat16 products summed in bfloat16")
    assert '"bfloat16_accumulation": "bfloat16"' in bugs[0]["trigger"]
    scripts_exit_1(failures, bugs)
    declared = torch_impl("cpu", "bfloat16_sums_declared")

    @settings(max_examples=60, phases=[Phase.generate], **QUIET)
    @given(case=conv_cases("conv2d", capabilities=declared.capabilities))
    def passes(case):
        run_check("forward", declared, case)

    passes()


def test_a_numpy_implementation_gets_and_returns_ml_dtypes_bfloat16(tmp_path):
    path = tmp_path / "numpy_bfloat16.py"
    path.write_text(
        "import numpy as np\nimport torch\n"
        "CAPABILITIES = {'dtypes': ('bfloat16',)}\n"
        "def conv2d(x, weight, bias, **kw):\n"
        "    assert str(x.dtype) == 'bfloat16' and isinstance(x, np.ndarray)\n"
        "    as64 = lambda a: None if a is None else torch.from_numpy(a.astype(np.float64))\n"
        "    y = torch.nn.functional.conv2d(as64(x), as64(weight), as64(bias), **kw)\n"
        "    return y.numpy().astype(x.dtype)\n")
    impl = load_implementation(str(path))

    @settings(max_examples=40, phases=[Phase.generate], **QUIET)
    @given(case=conv_cases("conv2d", capabilities=impl.capabilities))
    def passes(case):
        assert case.problem.dtype == "bfloat16"
        run_check("forward", impl, case)

    passes()


def _skip_unless_torch_shows(shown: bool, what: str, seen: object) -> None:
    """Go on only where torch's bug shows: torch picks its CPU kernels by instruction
    set, so a test of one of its bugs skips, saying so and what it saw (``seen``), where the
    bug does not show on this CPU."""
    if not shown:
        import platform
        pytest.skip(f"torch {torch.__version__} does not show {what} on this CPU "
                    f"({platform.machine()}, torch's CPU capability "
                    f"{torch.backends.cpu.get_cpu_capability()}): {seen}")


def _where_torch_shows_it(runs: dict, bug: str, shows: object, control: str,
                          what: str) -> None:
    """`_skip_unless_torch_shows` for exit statuses: the control variant must run cleanly
    everywhere (0), the bug variant as ``shows`` where the bug shows."""
    assert runs[control] == 0, runs
    _skip_unless_torch_shows(runs[bug] == shows, what, runs)


def _exit_codes(code: str, *variants: str) -> dict[str, int]:
    """Each variant's exit status of ``python -c code variant``, each in a fresh
    interpreter (a segmentation fault there is -11, not the end of this test run)."""
    import subprocess
    import sys
    return {variant: subprocess.run([sys.executable, "-c", code, variant],
                                    capture_output=True, timeout=300).returncode
            for variant in variants}


_TORCH_CRASH = """
import sys, torch
torch.manual_seed(0)
x = torch.randn(1, 2, 5, 1).to(torch.bfloat16)
weight = torch.randn(3, 2, 3, 1).to(torch.bfloat16)
if sys.argv[1] == "channels_last":
    weight = weight.contiguous(memory_format=torch.channels_last)
torch.nn.functional.conv2d(x, weight, None, stride=(3, 2), padding=(1, 1), dilation=(1, 2))
"""


def test_torchs_own_conv2d_crashes_for_a_bfloat16_channels_last_weight():
    """Found by test_torch_functional_passes_every_oracle_check_in_every_layout (torch
    2.13.0, CPU): F.conv2d dies of a segmentation fault for a bfloat16 weight in
    channels-last memory where an axis has a stride and a dilation of 2 and padding 1
    (and for a float32 one at other sizes); the same problem with a contiguous weight
    runs. tests/harness/torch_impls.py passes
    such a weight contiguous (`crashes_torch`, which covers this problem), so that its
    implementations are what they say; when torch fixes it, this test says so."""
    from tests.harness.torch_impls import crashes_torch
    weight = torch.zeros(3, 2, 3, 1, dtype=torch.bfloat16).contiguous(
        memory_format=torch.channels_last)
    assert crashes_torch(weight, (3, 2), (1, 1), (1, 2))
    assert not crashes_torch(weight.contiguous(), (3, 2), (1, 1), (1, 2))
    runs = _exit_codes(_TORCH_CRASH, "channels_last", "contiguous")
    _where_torch_shows_it(runs, "channels_last", -11, "contiguous",
                          "the crash of a bfloat16 channels-last weight")


_TORCH_BFLOAT16_STRIDED_CRASH = """
import sys, torch
x = torch.as_strided(torch.ones(108, dtype=torch.bfloat16), (2, 3, 10, 1), (50, 1, 5, 5), 1)
if sys.argv[1] == "contiguous":
    x = x.contiguous()
torch.nn.functional.conv2d(x, torch.ones(9, 1, 3, 1, dtype=torch.bfloat16), None,
                           stride=(3, 2), padding=(0, 3), dilation=(1, 3), groups=3)
"""


def test_torchs_own_bfloat16_conv2d_crashes_for_a_strided_input():
    """Found by test_torch_functional_passes_every_oracle_check_in_every_layout (torch
    2.13.0, CPU, bfloat16, 3 groups, the input strided from an offset, the weight
    contiguous): F.conv2d dies of a segmentation fault where an axis has a stride of 2,
    a dilation of 3 and padding 3; the same input passed contiguous runs.
    tests/harness/torch_impls.py passes such an input contiguous
    (`crashes_torch_bfloat16_input`); when torch fixes it, this test says so."""
    from tests.harness.torch_impls import crashes_torch_bfloat16_input
    x = torch.as_strided(torch.ones(108, dtype=torch.bfloat16), (2, 3, 10, 1), (50, 1, 5, 5), 1)
    assert crashes_torch_bfloat16_input(x, (3, 2), (0, 3), (1, 3))
    assert not crashes_torch_bfloat16_input(x.contiguous(), (3, 2), (0, 3), (1, 3))
    assert not crashes_torch_bfloat16_input(x.float(), (3, 2), (0, 3), (1, 3))
    runs = _exit_codes(_TORCH_BFLOAT16_STRIDED_CRASH, "strided", "contiguous")
    _where_torch_shows_it(runs, "strided", -11, "contiguous",
                          "the crash of a strided bfloat16 input")


_TORCH_FLOAT16_CRASH = """
import sys, torch
dtype = getattr(torch, sys.argv[1])
x, weight = torch.ones(1, 2, 1, 1, dtype=dtype), torch.ones(2, 1, 1, 1, dtype=dtype)
torch.nn.functional.conv2d(x, weight, None, stride=(1, 2), padding=(0, 1), dilation=(1, 2),
                           groups=2)
"""


def test_torchs_own_float16_conv2d_crashes():
    """Found by test_torch_functional_passes_every_oracle_check_in_every_layout (torch
    2.13.0, CPU, float16, 3 groups, a Fortran-ordered input): F.conv2d dies of a
    segmentation fault in float16 where an axis has a stride and a dilation of 2 and
    padding 1, whatever the arrays' memory; one 1x1 image of two channels in two groups
    is enough, and the same call in float32 runs. tests/harness/torch_impls.py computes
    such a float16 convolution in float32 (`crashes_torch_float16`); when torch fixes
    it, this test says so."""
    from tests.harness.torch_impls import crashes_torch_float16, torch_conv2d
    weight = torch.ones(2, 1, 1, 1, dtype=torch.float16)
    assert crashes_torch_float16(weight, (1, 2), (0, 1), (1, 2))
    assert not crashes_torch_float16(weight.float(), (1, 2), (0, 1), (1, 2))
    assert not crashes_torch_float16(weight, (1, 2), (0, 1), (1, 1))
    x = torch.arange(6.0).reshape(1, 2, 1, 3)
    expected = torch.nn.functional.conv2d(x, weight.float(), None, (1, 2), (0, 1), (1, 2), 2)
    assert torch.equal(torch_conv2d(x.half(), weight, None, (1, 2), (0, 1), (1, 2), 2),
                       expected.half())
    runs = _exit_codes(_TORCH_FLOAT16_CRASH, "float16", "float32")
    _where_torch_shows_it(runs, "float16", -11, "float32", "the float16 conv2d crash")


def test_torchs_own_float64_grouped_grad_weight_is_wrong_for_an_f_input_and_a_sliced_weight():
    """Found by the harness (issue 57) on a kernel that hands F.conv2d its tensors as
    drawn (torch 2.13.0, CPU): in float64, 2 groups, 4 -> 2 channels, a 1x2 input and a
    1x1 kernel, grad_weight is wrong when the input is Fortran-ordered and the weight a
    channel slice of a channels-last buffer; examples/found_in_the_wild/
    torch_float64_grouped_grad_weight_layouts.py reproduces it with NumPy and torch.
    tests/harness/torch_impls.py passes such a weight contiguous."""
    from tests.harness.torch_impls import wrong_torch_float64_grad_weight
    p = ConvProblem(op="conv2d", batch=1, in_channels=4, out_channels=2, input_size=(1, 2),
                    kernel_size=(1, 1), stride=(1, 1), padding=(0, 0), dilation=(1, 1),
                    groups=2, bias=False, dtype="float64")
    arrays = {name: None if shape is None else noise("floats", "float64", shape, seed)
              for seed, (name, shape) in enumerate(p.shapes().items())}
    case = ConvCase(problem=p, layouts={"x": "F", "weight": "channels_last_slice"}, **arrays)
    x = torch.from_numpy(make_layout(case.x, "F"))
    weight = torch.from_numpy(make_layout(case.weight, "channels_last_slice"))
    assert wrong_torch_float64_grad_weight(x, weight, 2)
    assert not wrong_torch_float64_grad_weight(x.contiguous(), weight, 2)
    assert not examine("grad_weight", torch_impl("cpu", "functional"), case)
    failures = examine("grad_weight", torch_impl("cpu", "native_strides"), case)
    _skip_unless_torch_shows(bool(failures), "the wrong float64 grouped grad_weight",
                             "the right grad_weight")
    (failure,) = failures
    assert failure.check == "grad_weight", failure.message
    for layouts in ({"x": "F"}, {"weight": "channels_last_slice"}):
        assert not examine("grad_weight", torch_impl("cpu", "native_strides"),
                           dataclasses.replace(case, layouts=layouts))


_TORCH_GARBAGE = """
import sys, torch
dtype = getattr(torch, sys.argv[1])
wrong = 0
for _ in range(200):
    junk = [torch.randn(64, 64).to(dtype) * 1e18 for _ in range(4)]  # freed memory not 0
    del junk
    x = torch.zeros(2, 2, 3, 6, 3, dtype=dtype)
    y = torch.nn.functional.conv3d(x, torch.ones(1, 2, 1, 1, 2, dtype=dtype), None,
                                   (1, 2, 3), 0, (1, 1, 2))
    wrong += not bool((y == 0).all())
print(wrong)
"""


def test_torchs_own_bfloat16_conv3d_reads_garbage():
    """Found by test_a_run_of_torch_functional_finds_nothing (torch 2.13.0, CPU): conv3d
    in bfloat16 of an input of zeros gives garbage (3.99e18 once) where the last axis
    has a stride of 3, a dilation of 2 and a 2-tap kernel over 3 positions: it reads
    memory it did not write, so its result depends on what was there (the harness saw
    "results depend on earlier calls"). The same call in float32 gives zeros. Its
    functional implementation does not declare bfloat16 for conv3d on the CPU; when
    torch fixes it, this test says so. In a fresh process (what a long-lived one left
    in freed memory decides what is read), 200 tries each after freeing large values:
    one wrong result is enough (measured: 189 and 193 of 200, on 1 and 2 threads)."""
    import subprocess
    import sys
    wrong = {dtype: int(subprocess.run([sys.executable, "-c", _TORCH_GARBAGE, dtype],
                                       capture_output=True, text=True, timeout=300,
                                       check=True).stdout)
             for dtype in ("bfloat16", "float32")}
    assert wrong["float32"] == 0, wrong
    _skip_unless_torch_shows(wrong["bfloat16"] > 0, "the bfloat16 conv3d garbage read",
                             "0 of 200 wrong")


class _OffBy:
    """conv2d on torch tensors, exact in float64, then its result times ``factor``."""

    def __init__(self, factor: float, dtype: str) -> None:
        self.factor = factor
        self.CAPABILITIES = {"arrays": "torch", "device": "cpu", "dtypes": (dtype,)}

    def conv2d(self, x, weight, bias, *, stride, padding, dilation, groups):
        wide = [None if t is None else t.double() for t in (x, weight, bias)]
        y = torch.nn.functional.conv2d(*wide, stride=stride, padding=padding,
                                       dilation=dilation, groups=groups)
        return (y * self.factor).to(x.dtype)


@pytest.mark.parametrize("dtype, factor, channels", [("bfloat16", 2.0, 60),
                                                     ("float32", 1 + 2.0 ** -12, 6)])
def test_a_lower_precision_is_named_on_positive_evidence_only(dtype, factor, channels,
                                                              tmp_path):
    """An undeclared TF32 or bfloat16-sum entry needs the results to be what that
    precision computes: a bfloat16 result doubled fitted the normwise floor of bfloat16
    sums on a small problem, and a float32 one off by 2**-12 fits TF32's envelope; both
    are wrong values, not a precision to declare. tf32_undeclared and bfloat16_sums are
    (``channels`` where they fail, within the 64 terms that bfloat16's bound can judge)."""
    from conv_harness.triage.evidence import undeclared_precision
    path = tmp_path / "off_by.py"
    path.write_text(f"from tests.harness.test_native import _OffBy\n"
                    f"impl = _OffBy({factor!r}, {dtype!r})\n")
    def cases(**changes):
        p = dataclasses.replace(small_case().problem, dtype=dtype, kernel_size=(1, 1),
                                input_size=(1, 2), bias=False, **changes)
        noisy = {name: None if shape is None else noise("floats", dtype, shape, seed)
                 for seed, (name, shape) in enumerate(p.shapes().items())}
        ones = {name: None if a is None else np.ones_like(a) for name, a in noisy.items()}
        return [ConvCase(problem=p, **arrays) for arrays in (ones, noisy)]

    off_by = load_implementation(f"{path}:impl")
    for case in [*cases(in_channels=6, out_channels=6, groups=3),  # the normwise floor
                 *cases(in_channels=150, out_channels=2)]:  # K = 150: gamma(K) = 1.4
        assert undeclared_precision(off_by, "conv2d", case, 20, "forward") is None
    lower = torch_impl("cpu", "tf32_undeclared" if dtype == "float32" else "bfloat16_sums")
    named = [undeclared_precision(lower, "conv2d", case, 20, "forward")
             for case in cases(in_channels=channels, out_channels=2)
             if examine("forward", lower, case)]
    assert named and all(named), named
