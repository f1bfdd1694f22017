"""What pyproject.toml cannot say: the packages found *and* one folder mapped into them.

The wheel carries the regression corpus, tests/regressions/*.json, as the
package folder conv_harness/conformance/regressions/, so that the installed suite
(``conv-harness``) replays the same cases as a clone (conv_harness/replay.py reads
the clone's folder when there is one, else that). pyproject.toml's
``packages.find`` cannot add a package from another folder, and a fixed
``packages`` list would silently drop a new subpackage; so they are found here.
Everything else is in pyproject.toml.
"""

from setuptools import find_packages, setup

setup(
    packages=find_packages(include=["conv_impl*", "strategies*", "conv_harness*"])
    + ["conv_harness.conformance.regressions"],
    package_dir={"conv_harness.conformance.regressions": "tests/regressions"},
)
