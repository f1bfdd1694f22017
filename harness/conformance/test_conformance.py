"""The conformance suite's checks against torch, and repeatability, for every
implementation and operation: generated from their registration
(harness/conformance/generate.py, harness/checks/against_torch.py)."""

from harness.conformance.generate import conformance_tests

globals().update(conformance_tests("test_conformance"))
