"""The conformance suite's checks against torch, and repeatability, for every
implementation and operation: generated from their registration
(conv_harness/conformance/generate.py, conv_harness/checks/against_torch.py)."""

from conv_harness.conformance.generate import conformance_tests

globals().update(conformance_tests("test_conformance"))
