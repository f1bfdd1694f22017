"""The oracle-free properties (harness/checks/properties.py), for every implementation and operation.

They need no torch: when PyTorch is not installed these still run. ``invalid``
compares raising with torch's and is opt-in (``--conv-invalid``), since many
implementations do not validate their arguments.
"""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness import suite


@pytest.mark.conv_check("adjoint")
@given(data=st.data())
def test_adjoint(target, data):
    suite.run(target, "adjoint", data)


@pytest.mark.conv_check("linearity")
@given(data=st.data())
def test_linearity(target, data):
    suite.run(target, "linearity", data)


@pytest.mark.conv_check("finite_difference")
@given(data=st.data())
def test_finite_difference(target, data):
    suite.run(target, "finite_difference", data)


@pytest.mark.conv_check("batch_consistency")
@given(data=st.data())
def test_batch_consistency(target, data):
    suite.run(target, "batch_consistency", data)


@pytest.mark.conv_check("pointwise")
@given(data=st.data())
def test_pointwise(target, data):
    suite.run(target, "pointwise", data)


@pytest.mark.conv_check("delta_kernel")
@given(data=st.data())
def test_delta_kernel(target, data):
    suite.run(target, "delta_kernel", data)


@pytest.mark.skipif("not config.getoption('--conv-invalid', False)",
                    reason="invalid problems are opt-in: --conv-invalid")
@pytest.mark.conv_check("invalid")
@given(data=st.data())
def test_invalid(target, data):
    suite.run(target, "invalid", data)
