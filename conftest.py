"""Hypothesis profiles and per-worker set-up for every run of this project.

The harness's options (--impl, --conv-failures, --conv-timeout, --replay)
are declared by its plugin, conv_harness/plugin.py, an entry point loaded before
any conftest (it has to be; the plugin's docstring says why).

The profiles (dev, ci, thorough, harness-test) are defined in
conv_harness/profiles.py, shared with the installed suite (``conv-harness``,
whose conftest is conv_harness/conformance/conftest.py); choose one with
--hypothesis-profile NAME or $HYPOTHESIS_PROFILE.
"""

from conv_harness.conformance.conftest import _warm_torch  # noqa: F401  (an autouse fixture)
from conv_harness.profiles import register_and_load

register_and_load()
