"""Every path of the einsum engine is reached and checked.

The main job's own strategies reach every algorithmic path of
``conv_impl.einsum`` (each reported as a Hypothesis event, ``einsum path:
...``); the paths that need sizes beyond the suite's cost budget (several
chunks; float32 channels-last at few rows) are reached by a spec that lowers
the engine's thresholds (tests/harness/einsum_every_path.py), and the oracle
checks run on it.
"""

from __future__ import annotations

import re
from pathlib import Path

from hypothesis import HealthCheck, given, settings

from conv_impl import einsum
from conv_harness.problem import OPS
from strategies import conv_cases
from tests.harness.runs import suite_in_process

EVERY_PATH = Path(__file__).resolve().parent / "einsum_every_path.py"
ALGORITHMS = {"pointwise", "direct", "exact windows", "exact windows, channels-last",
              "gathering input gradient", "flat input gradient"}


def test_the_main_jobs_strategies_reach_every_engine_path():
    reached: set[str] = set()
    for op in OPS:
        backward = getattr(einsum, f"{op}_backward")
        forward = getattr(einsum, op)

        @settings(max_examples=100, derandomize=True, database=None, deadline=None,
                  suppress_health_check=list(HealthCheck))
        @given(conv_cases(op))
        def run(case):
            kw = case.problem.kwargs()
            forward(case.x, case.weight, case.bias, **kw)
            backward(case.grad_output, case.x, case.weight, case.bias, **kw)
            reached.update(label.removeprefix("einsum path: ")
                           for label in einsum.harness_events())
        run()
    assert ALGORITHMS <= reached, sorted(reached)


def test_the_thresholded_paths_pass_the_oracle_checks(tmp_path):
    done = suite_in_process(str(EVERY_PATH), ("forward", "grad_input", "grad_weight"),
                            ("conv2d", "conv_transpose2d", "conv3d"), tmp_path / "failures")
    assert done.passed, done.text[-4000:]
    features = re.search(r"features covered: (.*)", done.text).group(1)
    for label in ("several chunks", "channels-last"):
        assert "einsum path: " in features and label in features, features
