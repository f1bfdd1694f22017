"""The conformance suite's checks against torch: the tests live in
harness/conformance/test_conformance.py (shipped in the package, run by
``conv-harness``) and are collected here too, under this file's test ids."""

from harness.conformance.test_conformance import (  # noqa: F401
    test_forward, test_grad_bias, test_grad_input, test_grad_weight, test_repeatable)
