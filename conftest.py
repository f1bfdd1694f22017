"""Hypothesis profiles and per-worker set-up for every run of this project.

The harness's options (--impl, --conv-failures, --conv-timeout, --replay)
are declared by its plugin, harness/plugin.py, an entry point loaded before
any conftest (it has to be; the plugin's docstring says why).

Profiles (choose with --hypothesis-profile NAME or HYPOTHESIS_PROFILE):
  dev       default: a quick, thorough-enough search on every run
  ci        CI (loaded when $CI is set): derandomised, prints the reproduction blob
  thorough  thousands of examples per property, for a release or a new implementation
"""

import os

import pytest
from hypothesis import HealthCheck, Phase, settings

from harness import oracle

# No deadline: the time limit that matters is the harness's own per-call limit
# (--conv-timeout), and a deadline would flake on the first torch call of a worker.
# No explain phase: our own report says where the error is, and the phase
# traces every line of the shrunk example again (seconds per failure).
_COMMON = dict(deadline=None,
               phases=[p for p in Phase if p is not Phase.explain],
               suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
# derandomize=False said outright: when Hypothesis detects a CI machine its own
# defaults, which these profiles inherit, are derandomised, and dev or thorough
# would then ignore --hypothesis-seed there.
settings.register_profile("dev", max_examples=100, derandomize=False, **_COMMON)
settings.register_profile("ci", max_examples=100, derandomize=True, print_blob=True, **_COMMON)
settings.register_profile("thorough", max_examples=3000, derandomize=False, **_COMMON)
# For the harness's own tests that run the suite in a subprocess: a fixed
# seed and no example database, so that what they find is the same every time.
settings.register_profile("harness-test", max_examples=100, derandomize=True, database=None,
                          **_COMMON)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev"))


@pytest.fixture(scope="session", autouse=True)
def _warm_torch():
    """torch's first convolution in a process is slow; pay it once per worker."""
    if oracle.torch_available():
        oracle.warm_up()
