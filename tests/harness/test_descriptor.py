"""benchdnn descriptors: the round trip, benchdnn's rules, and clear errors."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conv_harness.descriptor import (
    DescriptorError,
    descriptor_name,
    format_descriptor,
    parse_descriptor,
)
from conv_harness.problem import OPS, ConvProblem
from strategies import conv_problems


@pytest.mark.parametrize("op", sorted(OPS))
@settings(max_examples=60, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_round_trip(op, data):
    problem = data.draw(conv_problems(op))
    text = format_descriptor(problem)
    assert parse_descriptor(text, op=op, dtype=problem.dtype, bias=problem.bias) == problem
    # any order, with underscores, still the same problem
    shuffled = "_".join(reversed(_entries(text)))
    assert parse_descriptor(shuffled, op=op, dtype=problem.dtype, bias=problem.bias) == problem


def _entries(text: str) -> list[str]:
    import re
    return re.findall(r"[a-z]+\d+", text)


def test_the_contract_example():
    p = parse_descriptor("mb1ic1oc1ih4iw1kh1kw1sh3sw1ph0pw0")
    assert p == ConvProblem(op="conv2d", batch=1, in_channels=1, out_channels=1,
                            input_size=(4, 1), kernel_size=(1, 1), stride=(3, 1),
                            padding=(0, 0), dilation=(1, 1), groups=1, bias=True,
                            dtype="float32")
    # printed in benchdnn's canonical order (input sizes before oc)
    assert format_descriptor(p) == "mb1ic1ih4iw1oc1kh1kw1sh3sw1ph0pw0"


def test_defaults_square_and_derived_padding():
    p = parse_descriptor('ic16ih7oc16oh7kh5n"DNNL-537"')
    assert (p.batch, p.input_size, p.kernel_size, p.padding, p.stride, p.dilation) == (
        2, (7, 7), (5, 5), (2, 2), (1, 1), (1, 1))
    assert descriptor_name('ic16ih7oc16oh7kh5n"DNNL-537"') == "DNNL-537"
    assert descriptor_name("g2ic32id5oc6od3kd3pd0noc%simd_width") == "oc%simd_width"
    cube = parse_descriptor("mb1_ic16oc16_id4od2kd3")
    assert cube.op == "conv3d" and cube.input_size == (4, 4, 4) and cube.padding == (0, 0, 0)
    line = parse_descriptor("mb1_ic16oc16_iw80ow80kw31sw1dw0pw15")
    assert line.op == "conv1d" and line.input_size == (80,) and line.padding == (15,)


def test_dilation_is_zero_based():
    p = parse_descriptor("mb1ic2ih9oc2kh3dh1ph2")
    assert p.dilation == (2, 2)
    assert format_descriptor(p) == "mb1ic2ih9iw9oc2kh3kw3sh1sw1ph2pw2dh1dw1"


def test_groups_printed_only_above_one():
    p = parse_descriptor("g4mb1ic8ih5oc8kh3ph1")
    assert p.groups == 4 and format_descriptor(p).startswith("g4mb1")
    assert "g" not in format_descriptor(parse_descriptor("g1mb1ic8ih5oc8kh3ph1"))


def test_transposed_output_padding_is_printed_as_output_size():
    p = parse_descriptor("mb1ic2ih3oc2oh7kh2sh2", op="conv_transpose2d")
    assert p.output_padding == (1, 1) and p.padding == (0, 0) and p.output_size == (7, 7)
    text = format_descriptor(p)
    assert "oh7ow7" in text
    assert parse_descriptor(text, op="conv_transpose2d") == p


@pytest.mark.parametrize("text, why", [
    ("mb2_g1ic32oc32_ih7oh11kh3ph2", "asymmetric"),   # oneDNN's DNNL-796
    ("mb2ic3ih300oc32oh150kh3sh2", "asymmetric"),     # benchdnn pads 0 left, 1 right
    ("mb1ic4ih5oc4kh3ph-1", "negative padding"),
    ("mb1ic4ih5oc4kh9", "larger than the padded input"),
    ("mb1ic4ih5oc4", "no kh"),
    ("mb1ic4oc4kh3", "no ih"),
    ("mb1ic4oc4", "no spatial size"),
    ("mb1ic4ih5kh3", "oc is missing"),
    ("g3mb1ic4ih5oc6kh3", "does not divide"),
    ("mb1ic4ih5oc4kh3kh3", "given twice"),
    ("mb1ic4ih5oc4kh3x2", "cannot read"),
    ("mb1ic4ih5oc4kh3sh0", "at least 1"),
])
def test_errors_say_what_is_wrong(text, why):
    with pytest.raises(DescriptorError, match=why):
        parse_descriptor(text)


def test_op_must_match_the_axes():
    with pytest.raises(DescriptorError, match="2 spatial axes"):
        parse_descriptor("mb1ic4ih5oc4kh3", op="conv3d")
    with pytest.raises(DescriptorError, match="output_padding"):
        parse_descriptor("mb1ic2ih3oc2oh9kh2sh2", op="conv_transpose2d")
