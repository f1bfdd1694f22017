"""The oracle-free properties: the tests live in harness/conformance/test_properties.py
(shipped in the package, run by ``conv-harness``) and are collected here too,
under this file's test ids."""

from harness.conformance.test_properties import (  # noqa: F401
    test_adjoint, test_batch_consistency, test_delta_kernel, test_finite_difference, test_invalid,
    test_linearity, test_pointwise)
