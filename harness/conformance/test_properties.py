"""The oracle-free properties (harness/checks/properties.py), for every implementation
and operation: generated from their registration (harness/conformance/generate.py).

They need no torch: when PyTorch is not installed these still run. ``invalid``
compares raising with torch's and is opt-in (``--conv-invalid``), since many
implementations do not validate their arguments.
"""

from harness.conformance.generate import conformance_tests

globals().update(conformance_tests("test_properties"))
