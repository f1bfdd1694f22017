"""The conformance suite: every check, for every implementation and operation.

Each test is parametrised by ``target`` (implementation x operation, see
harness/plugin.py) and draws its problems from the strategies, narrowed by the
implementation's CAPABILITIES.
"""

import pytest
from hypothesis import given, strategies as st

from harness import suite


@pytest.mark.conv_check("forward")
@given(data=st.data())
def test_forward(target, data):
    suite.run(target, "forward", data)


@pytest.mark.conv_check("grad_input")
@given(data=st.data())
def test_grad_input(target, data):
    suite.run(target, "grad_input", data)


@pytest.mark.conv_check("grad_weight")
@given(data=st.data())
def test_grad_weight(target, data):
    suite.run(target, "grad_weight", data)


@pytest.mark.conv_check("grad_bias")
@given(data=st.data())
def test_grad_bias(target, data):
    suite.run(target, "grad_bias", data)


@pytest.mark.conv_check("repeatable")
@given(data=st.data())
def test_repeatable(target, data):
    suite.run(target, "repeatable", data)
