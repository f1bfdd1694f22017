"""The regression corpus (tests/regressions/*.json): the test lives in
conv_harness/conformance/test_regressions.py (shipped in the package, run by
``conv-harness``) and is collected here too, under this file's test ids."""

from conv_harness.conformance.test_regressions import (  # noqa: F401
    pytest_generate_tests, test_regression)
