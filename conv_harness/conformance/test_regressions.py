"""The regression corpus: every case file under tests/regressions/, replayed on
every run before the random search (conv_harness/replay.py moves these tests to
the front), against the implementation that recorded it when it is under
test (``--conv-regressions all``: against every ``--impl``; ``none``: not at all).

A case passes when the check holds for the implementation on exactly the
recorded values, dtype and memory layouts; a case whose operation the
implementation does not provide, or that its CAPABILITIES exclude, is
skipped with the reason. A failure is the implementation's own bug, in the
summary with the others. To add a case, copy a JSON file from
``.conv-failures/`` into tests/regressions/ (tools/seed_regressions.py
regenerates the tutorial's).
"""

import pytest

from conv_harness import replay
from conv_harness.plugin import failures_dir, loaded_implementations, timeout_of


def pytest_generate_tests(metafunc):
    if "regression" not in metafunc.fixturenames:
        return
    mode = metafunc.config.getoption("--conv-regressions", default="own")
    pairs = replay.corpus_cases(loaded_implementations(metafunc.config), mode)
    if not pairs:  # pytest's own empty parameter set would say less
        reason = ("--conv-regressions none" if mode == "none" else
                  "no case of the regression corpus was recorded for the implementations "
                  "under test (--conv-regressions all replays every case against them)")
        metafunc.parametrize("regression", [pytest.param(None, marks=pytest.mark.skip(
            reason=reason))], ids=["none"])
        return
    metafunc.parametrize("regression", [pytest.param(pair, id=f"{pair[0].name}-{pair[1].stem}")
                                        for pair in pairs])


@pytest.mark.conv_regression
def test_regression(regression, request):
    impl, path = regression
    replay.run_regression(request.node, impl, path, timeout_of(request.config),
                          failures_dir(request.config))
