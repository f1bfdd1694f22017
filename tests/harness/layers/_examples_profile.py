"""A pytest plugin (``-p _examples_profile``, with this folder on PYTHONPATH) for
the runs of tests/harness/test_examples.py: a Hypothesis profile like the
project's ``harness-test`` (derandomised, no example database) but with
``$EXAMPLES_MAX_EXAMPLES`` examples per test (default 20), so that running the
suite on every shipped example stays cheap.

Loaded before the project's conftest.py, which then loads it by
$HYPOTHESIS_PROFILE=examples-quick.
"""

import os

from hypothesis import HealthCheck, Phase, settings

settings.register_profile(
    "examples-quick", max_examples=int(os.environ.get("EXAMPLES_MAX_EXAMPLES", "20")),
    derandomize=True, database=None, deadline=None,
    phases=[p for p in Phase if p is not Phase.explain],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
