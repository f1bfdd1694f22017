"""Per-function and per-dtype CAPABILITIES (contract section 2) are respected.

A capability's value may be a tuple of the dtypes where it holds, and a
contract function's name may hold a dict of its own that overrides the
module's. The strategies never draw what the functions a check calls refuse,
`excludes` and `not_generated` say so, and unknown keys stay errors.
"""

from __future__ import annotations

import textwrap
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, Phase, find, given, settings
from hypothesis import strategies as st

from conv_harness.problem import OPS
from conv_harness.running.capabilities import Capabilities, CapabilitiesError
from conv_harness.running.loader import SpecError, load_implementation
from strategies import conv_cases, conv_problems
from strategies.invalid import invalid_cases
from tests.harness.runs import suite_in_process

FAST = settings(max_examples=120, deadline=None, database=None, phases=[Phase.generate],
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
FIND = settings(max_examples=400, deadline=None, database=None, phases=[Phase.generate],
                derandomize=True,  # the same draws every run: a find by chance is a flaky test
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

#: What TensorFlow's CPU kernels accept (issue 15), as one declaration.
TF_LIKE = {
    "conv2d_backward": {"groups": False, "dilation": ("float32",)},
    "conv3d": {"groups": False},
    "conv3d_backward": {"groups": False},
}


def non_square(p) -> bool:
    return any(len(set(t)) > 1 for t in (p.kernel_size, p.stride, p.padding, p.dilation,
                                         p.output_padding))


def violations(caps: Capabilities, case) -> list[str]:
    """What ``case`` does that flat ``caps`` refuse, checked field by field here
    (not with `excludes`, which is under test too)."""
    p, out = case.problem, []
    if p.dtype not in caps.dtypes:
        out.append("dtype")
    if any(d != 1 for d in p.dilation) and not caps.holds("dilation", p.dtype):
        out.append("dilation")
    if p.groups != 1 and not caps.holds("groups", p.dtype):
        out.append("groups")
    if not p.bias and not caps.holds("bias_none", p.dtype):
        out.append("bias_none")
    if caps.holds("square", p.dtype) and non_square(p):
        out.append("square")
    if caps.holds("contiguous_only", p.dtype) and set(case.layouts.values()) - {"C"}:
        out.append("contiguous_only")
    return out


# -- declaring them ----------------------------------------------------------------

def test_a_function_dict_overrides_the_modules_keys_for_that_function():
    caps = Capabilities.from_mapping({"dtypes": ("float32", "float64"), "groups": False,
                                      "conv2d_backward": {"dilation": ("float32",),
                                                          "dtypes": ("float32",)}})
    assert caps.function("conv2d") == Capabilities(dtypes=("float64", "float32"), groups=False)
    assert caps.function("conv2d_backward") == Capabilities(
        dtypes=("float32",), groups=False, dilation=("float32",))
    both = caps.for_functions(["conv2d", "conv2d_backward"])
    assert both.dtypes == ("float32",) and both.groups is False
    assert both.holds("dilation", "float32") and not both.holds("dilation", "float64")


def test_per_dtype_values_are_normalised():
    caps = Capabilities.from_mapping({"dilation": ("float16", "float64", "float32"),
                                      "groups": (), "square": ["float16", "float64"]})
    assert caps.dilation is True and caps.groups is False
    assert caps.square == ("float64", "float16")  # the harness's order


def test_features_meet_and_restrictions_join_across_functions():
    caps = Capabilities.from_mapping({
        "conv1d": {"bias_none": ("float64", "float32"), "contiguous_only": ("float16",)},
        "conv1d_backward": {"bias_none": ("float32", "float16"), "square": ("float64",)}})
    both = caps.for_functions(["conv1d", "conv1d_backward"])
    assert both.bias_none == ("float32",)
    assert both.contiguous_only == ("float16",) and both.square == ("float64",)
    # a function without a dict of its own has the module's capabilities
    assert caps.for_functions(["conv2d"]) == Capabilities()


def test_capabilities_for_leaves_out_functions_it_does_not_provide():
    impl = load_implementation("conv_impl.einsum")
    impl.capabilities = Capabilities.from_mapping(TF_LIKE)
    assert impl.capabilities_for(["conv2d"]).groups is True
    assert impl.capabilities_for(["conv2d", "conv2d_backward"]).groups is False
    del impl.functions["conv2d_backward"]
    assert impl.capabilities_for(["conv2d", "conv2d_backward"]).groups is True


@pytest.mark.parametrize("raw,message", [
    ({"dilations": False}, r"unknown CAPABILITIES key\(s\) \['dilations'\].*function names"),
    ({"conv2d_backward": {"grups": False}},
     r"unknown CAPABILITIES\['conv2d_backward'\] key\(s\) \['grups'\]"),
    ({"conv2d_backward": {"conv2d": {}}}, r"cannot name functions"),
    ({"conv2d": False}, r"CAPABILITIES\['conv2d'\] must be a dict"),
    ({"dilation": ("float8",)}, r"subset of"),
    ({"dilation": "float32"}, r"tuple of the dtype names where it holds"),
    ({"conv3d": {"groups": 1}}, r"CAPABILITIES\['conv3d'\]\['groups'\] must be True or False"),
    ({"conv3d": {"dtypes": ()}}, r"non-empty subset"),
    ({"float16_accumulation": "half"}, r"float16_accumulation'\] must be one of "
                                       r"\('float32', 'float16'\)"),
])
def test_unknown_keys_and_bad_values_are_errors(raw, message):
    with pytest.raises(CapabilitiesError, match=message):
        Capabilities.from_mapping(raw)


def test_a_bad_declaration_is_a_spec_error_naming_the_key(tmp_path):
    module = tmp_path / "mine.py"
    module.write_text(textwrap.dedent("""
        def conv2d(x, weight, bias, **kw):
            raise NotImplementedError
        CAPABILITIES = {"conv2d_backward": {"dilatoin": ("float32",)}}
    """))
    with pytest.raises(SpecError, match=r"mine.py.*'dilatoin'"):
        load_implementation(str(module))


# -- what is generated ---------------------------------------------------------------

@pytest.mark.parametrize("op", sorted(OPS))
@FAST
@given(data=st.data())
def test_drawn_problems_never_violate_per_dtype_capabilities(op, data):
    """Every capability per dtype at once, with the dtype drawn last."""
    caps = Capabilities.from_mapping({
        "dilation": ("float32",), "groups": ("float64", "float16"),
        "bias_none": ("float16",), "square": ("float64",), "contiguous_only": ("float32",)})
    case = data.draw(conv_cases(op, capabilities=caps))
    assert violations(caps, case) == []
    assert caps.excludes(case) == []


@pytest.mark.parametrize("check_functions", [("conv2d",), ("conv2d_backward",),
                                             ("conv2d", "conv2d_backward")])
@FAST
@given(data=st.data())
def test_a_check_draws_only_what_its_functions_support(check_functions, data):
    caps = Capabilities.from_mapping(TF_LIKE).for_functions(check_functions)
    case = data.draw(conv_cases("conv2d", capabilities=caps))
    assert violations(caps, case) == []
    if "conv2d_backward" in check_functions:
        p = case.problem
        assert p.groups == 1
        assert set(p.dilation) == {1} or p.dtype == "float32"


def test_what_one_function_refuses_the_others_still_get():
    """Narrowing conv2d_backward does not narrow a check that calls conv2d only."""
    caps = Capabilities.from_mapping(TF_LIKE).for_functions(["conv2d"])
    find(conv_cases("conv2d", capabilities=caps),
         lambda c: c.problem.groups > 1 and c.problem.dtype == "float64"
         and max(c.problem.dilation) > 1, settings=FIND)


def test_a_feature_allowed_in_one_dtype_is_drawn_in_it():
    caps = Capabilities.from_mapping({"dilation": ("float32",)})
    case = find(conv_cases("conv2d", capabilities=caps),
                lambda c: max(c.problem.dilation) > 1, settings=FIND)
    assert case.problem.dtype == "float32"


def test_without_being_told_the_functions_the_strategies_respect_both():
    """`conv_cases(op, capabilities=...)` with per-function declarations draws what
    the op and its backward both take (never too much)."""
    caps = Capabilities.from_mapping(TF_LIKE)

    @FAST
    @given(case=conv_cases("conv3d", capabilities=caps))
    def never_grouped(case):
        assert case.problem.groups == 1

    never_grouped()


@FAST
@given(data=st.data())
def test_invalid_cases_respect_per_dtype_capabilities(data):
    caps = Capabilities.from_mapping({"dilation": ("float32",), "groups": ("float64",),
                                      "contiguous_only": ("float16",)})
    case = data.draw(invalid_cases("conv2d", capabilities=caps))
    p = case.problem
    assert set(p.dilation) == {1} or p.dtype == "float32"
    assert p.dtype != "float16" or set(case.layouts.values()) == {"C"}


def test_simplest_problem_is_unchanged_by_per_dtype_capabilities():
    caps = Capabilities.from_mapping({"dilation": ("float32",), "groups": ("float16",)})
    case = find(conv_cases("conv2d", capabilities=caps), lambda case: True,
                settings=settings(database=None))
    p = case.problem
    assert p.dtype == "float64" and p.groups == 1 and not p.bias and set(p.dilation) == {1}
    assert p.kernel_size == p.input_size == (1, 1)


def test_the_dtype_follows_the_features_drawn_before_it():
    """The draw order is the shrink order: features first, then the first dtype
    that takes them all (here bias=None, the simplest, exists in float32 only)."""
    caps = Capabilities.from_mapping({"conv2d_backward": {"bias_none": ("float32",)}})
    p = find(conv_cases("conv2d", capabilities=caps), lambda case: True,
             settings=settings(database=None)).problem
    assert not p.bias and p.dtype == "float32"
    p = find(conv_cases("conv2d", capabilities=caps), lambda case: case.problem.bias,
             settings=settings(database=None)).problem
    assert p.dtype == "float64"


def test_no_common_dtype_is_a_clear_error():
    caps = Capabilities.from_mapping({"conv2d": {"dtypes": ("float32",)},
                                      "conv2d_backward": {"dtypes": ("float64",)}})
    with pytest.raises(Exception, match="no dtype"):
        find(conv_problems("conv2d", capabilities=caps), lambda p: True)
    assert caps.for_functions(["conv2d"]).dtypes == ("float32",)


# -- what they say ------------------------------------------------------------------

def _case(**changes):
    import numpy as np

    from conv_harness.problem import ConvCase, ConvProblem
    params = dict(op="conv2d", batch=1, in_channels=2, out_channels=2, input_size=(3, 3),
                  kernel_size=(1, 1), stride=(1, 1), padding=(0, 0), dilation=(2, 2),
                  groups=2, bias=True, dtype="float64")
    params.update(changes)
    p = ConvProblem(**params)
    arrays = {k: None if s is None else np.zeros(s, dtype=p.dtype)
              for k, s in p.shapes().items()}
    return ConvCase(problem=p, layouts={}, **arrays)


def test_excludes_names_the_dtype_and_the_functions():
    caps = Capabilities.from_mapping(TF_LIKE)
    case = _case()
    assert caps.excludes(case, functions=["conv2d"]) == []
    reasons = caps.excludes(case, functions=["conv2d", "conv2d_backward"])
    assert reasons == [
        "dilation > 1 in float64 (only in float32) (for conv2d, conv2d_backward)",
        "groups > 1 (for conv2d, conv2d_backward)"]
    assert caps.excludes(case) == reasons  # default: the op and its backward
    assert caps.excludes(_case(groups=1, dtype="float32"),
                         functions=["conv2d_backward"]) == []
    flat = Capabilities.from_mapping({"square": ("float64",)})
    assert flat.excludes(_case(kernel_size=(1, 2), dilation=(1, 1), groups=1)) == [
        "non-square kernel/stride/padding/dilation in float64 (only in float32, float16)"]


def test_not_generated_lists_per_dtype_and_per_function_limits():
    caps = Capabilities.from_mapping({"dtypes": ("float64", "float32"),
                                      "bias_none": ("float32",), **TF_LIKE})
    assert caps.not_generated() == [
        "dtype float16", "bias=None in float64",
        "conv2d_backward: dilation > 1 in float64, groups > 1",
        "conv3d: groups > 1", "conv3d_backward: groups > 1"]


def test_the_adapter_style_flat_declaration_is_unchanged():
    impl = SimpleNamespace(CAPABILITIES={"dtypes": ("float32",), "dilation": False})
    caps = Capabilities.from_mapping(impl.CAPABILITIES)
    assert caps == Capabilities(dtypes=("float32",), dilation=False)
    assert caps.for_op("conv2d") is caps
    assert caps.not_generated() == ["dtype float64", "dtype float16", "dilation > 1"]


# -- output_padding: "below_stride" (issue 20) ------------------------------------------

BELOW_STRIDE = "tests/harness/below_stride.py"


def test_output_padding_key_is_validated_and_per_function():
    caps = Capabilities.from_mapping({"conv_transpose2d": {"output_padding": "below_stride"}})
    assert caps.output_padding == "torch"
    assert caps.function("conv_transpose2d").output_padding == "below_stride"
    assert caps.for_functions(["conv_transpose2d", "conv_transpose2d_backward"]) \
        .output_padding == "below_stride"
    assert caps.for_functions(["conv_transpose2d_backward"]).output_padding == "torch"
    assert caps.not_generated() == ["conv_transpose2d: output_padding >= stride (transposed)"]
    assert Capabilities().output_padding_limit(1, 3) == 2
    assert Capabilities(output_padding="below_stride").output_padding_limit(1, 3) == 0
    for bad in (True, "below-stride", None):
        with pytest.raises(CapabilitiesError, match="output_padding"):
            Capabilities.from_mapping({"output_padding": bad})


@pytest.mark.parametrize("op", ["conv_transpose1d", "conv_transpose2d", "conv_transpose3d"])
@FAST
@given(data=st.data())
def test_below_stride_problems_keep_output_padding_below_stride(op, data):
    caps = Capabilities.from_mapping({"output_padding": "below_stride"})
    p = data.draw(conv_cases(op, capabilities=caps)).problem
    assert all(o < s for o, s in zip(p.output_padding, p.stride)), p


def test_torchs_rule_still_draws_output_padding_at_or_above_stride():
    """Without the key the strategies reach what the key rules out (stride 1, dilation 2,
    output_padding 1), and `excludes` names it for an implementation that declares it."""
    case = find(conv_cases("conv_transpose1d"),
                lambda c: c.problem.output_padding[0] >= c.problem.stride[0], settings=FIND)
    assert Capabilities().excludes(case) == []
    assert Capabilities(output_padding="below_stride").excludes(case) == [
        "output_padding >= stride (transposed)"]


def test_an_implementation_refusing_output_padding_at_stride_passes_only_declaring_it(
        tmp_path):
    declared, undeclared = f"{BELOW_STRIDE}:declared", f"{BELOW_STRIDE}:undeclared"
    done = suite_in_process([declared, undeclared], ("forward",), ("conv_transpose1d",),
                            tmp_path / "f")
    assert done.entry(declared)["verdict"] == "passed", done.text
    assert done.entry(undeclared)["verdict"] == "failed", done.text
    assert "must be smaller than stride" in done.text
    summary = "\n".join(done.lines)
    assert "conv_transpose1d: output_padding >= stride (transposed)" in summary
