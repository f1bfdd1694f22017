"""Set-up of the conformance suite when it runs installed (``conv-harness``).

In a clone the root conftest.py does the same (it imports from here).
"""

import pytest

from conv_harness.checks import oracle
from conv_harness.profiles import register_and_load

register_and_load()


@pytest.fixture(scope="session", autouse=True)
def _warm_torch():
    """torch's first convolution in a process is slow; pay it once per worker."""
    if oracle.torch_available():
        oracle.warm_up()
