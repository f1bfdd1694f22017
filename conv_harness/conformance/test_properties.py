"""The oracle-free properties (conv_harness/checks/properties.py), for every implementation
and operation: generated from their registration (conv_harness/conformance/generate.py).

They need no torch: when PyTorch is not installed these still run. ``invalid``
compares raising with torch's and is opt-in (``--conv-invalid``), since many
implementations do not validate their arguments.
"""

from conv_harness.conformance.generate import conformance_tests

globals().update(conformance_tests("test_properties"))
