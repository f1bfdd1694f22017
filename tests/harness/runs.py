"""The harness's tests' runs of the suite in this process: `conv_harness.run.run_checks`
under the settings profile that `run_pytest`'s processes load."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from conv_harness.run import RunResult, run_checks

#: the Hypothesis profile of the harness's runs of the suite (conv_harness/profiles.py)
HARNESS_PROFILE = "harness-test"


def suite_in_process(specs: Any, checks: Sequence[str] | None, ops: Sequence[str] | None,
                     failures: Path, profile: str = HARNESS_PROFILE,
                     **options: Any) -> RunResult:
    """`run_checks` of ``specs`` with its files in ``failures``, under ``profile``; a
    run that ended in an error of the harness fails the test with its traceback."""
    result = run_checks(specs, checks, ops, failures_dir=failures, profile_name=profile,
                        **options)
    assert not result.errors, "\n".join(text for _, text in result.errors)
    return result


def triaged(spec: str, checks: Sequence[str], ops: Sequence[str], failures: Path, *,
            budget: float | None = None, seed: int | None = None,
            profile: str = HARNESS_PROFILE) -> tuple[list[dict], str]:
    """The bug list (summary.json's entries) of a run of ``checks`` on ``ops`` of
    ``spec``, with the text it prints (the failed tests' reports, then the summary)."""
    result = suite_in_process(spec, checks, ops, failures, profile, budget=budget, seed=seed)
    return result.bugs(), result.text
