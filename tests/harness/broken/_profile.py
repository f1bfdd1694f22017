"""A pytest plugin (``-p _profile``, with this folder on PYTHONPATH) for the runs of
tests/harness/test_broken.py: a Hypothesis profile like the project's
``harness-test`` (derandomised, no database) but with fewer examples.

Loaded before conftest.py, which then loads it by $HYPOTHESIS_PROFILE.
"""

from hypothesis import HealthCheck, Phase, settings

settings.register_profile(
    "broken-quick", max_examples=25, derandomize=True, database=None, deadline=None,
    phases=[p for p in Phase if p is not Phase.explain],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
