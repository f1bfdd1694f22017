"""The regression corpus: every case file under tests/regressions/, replayed on
every run against every implementation under test (``--impl``), before the
random search (harness/replay.py moves these tests to the front).

A case passes when the check holds for the implementation on exactly the
recorded values, dtype and memory layouts; a case whose operation the
implementation does not provide, or that its CAPABILITIES exclude, is
skipped with the reason. To add a case, copy a JSON file from
``.conv-failures/`` into tests/regressions/ (tools/seed_regressions.py
regenerates the tutorial's).
"""

import pytest

from harness import replay
from harness.plugin import loaded_implementations, timeout_of


def pytest_generate_tests(metafunc):
    if "regression" not in metafunc.fixturenames:
        return
    cases = replay.corpus_files()
    metafunc.parametrize(
        "regression",
        [pytest.param((impl, path), id=f"{impl.name}-{path.stem}")
         for impl in loaded_implementations(metafunc.config) for path in cases])


@pytest.mark.conv_regression
def test_regression(regression, request):
    impl, path = regression
    replay.run_regression(impl, path, timeout_of(request.config))
