"""Small layer classes for tests/harness/test_adapters.py, shaped unlike the
examples/ ones, and the Hypothesis profile plugin of tests/harness/test_examples.py."""
