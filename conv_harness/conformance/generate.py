"""The conformance tests, generated from the registry of checks: a check is added in
one place, its registration (conv_harness/checks/check.py's `Check`), which names the
test module that runs it.

Each test is parametrised by ``target`` (implementation x operation, see
conv_harness/plugin.py) and draws its problems from the strategies, narrowed by the
implementation's CAPABILITIES; its body is `conv_harness.searching.suite.run`.
"""

from __future__ import annotations

from typing import Any, Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conv_harness.searching import suite
from conv_harness.checks.check import Check
from conv_harness.checks.registry import REGISTRY


def conformance_tests(module: str) -> dict[str, Callable[..., Any]]:
    """The tests of the checks registered for ``module`` (``Check.test_module``), by
    their pytest names (``test_<check>``), in the registry's order."""
    return {f"test_{check.name}": _test_of(check) for check in REGISTRY.values()
            if check.test_module == module}


def _test_of(check: Check) -> Callable[..., Any]:
    name = check.name

    def test(target: Any, data: st.DataObject) -> None:
        suite.run(target, name, data)

    test.__name__ = test.__qualname__ = f"test_{name}"
    test = pytest.mark.conv_check(name)(given(data=st.data())(test))
    if check.opt_in is not None:
        option, why = check.opt_in
        test = pytest.mark.skipif(f"not config.getoption({option!r}, False)",
                                  reason=why)(test)
    return test
