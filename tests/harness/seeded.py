"""A pytest plugin for the harness's own tests: ``-p tests.harness.seeded
--seeded-run N`` gives each test its own fixed Hypothesis seed, derived from N
and the test's id.

A default run (no ``--hypothesis-seed``) gives every test a random seed of its
own, so the checks of one operation search different problems; with
``--hypothesis-seed`` they all draw the same ones. This repeats the default
run's spread exactly, for several runs N.
"""

from __future__ import annotations

import zlib

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--seeded-run", type=int, default=None, metavar="N",
                     help="a fixed Hypothesis seed per test, from N and the test's id")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item):
    run = item.config.getoption("--seeded-run")
    test = getattr(item, "obj", None)
    if run is not None and hasattr(test, "hypothesis"):
        test._hypothesis_internal_use_seed = zlib.crc32(f"{run} {item.nodeid}".encode())
    yield
