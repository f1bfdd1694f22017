"""Hypothesis's own reproduction aids work through the suite (README: "Hypothesis's
own reproduction"): the ci profile's blob and ``--hypothesis-seed``."""

from __future__ import annotations

import re

TUTORIAL_GRAD_INPUT = ("--impl", "conv_impl.tutorial", "-k", "test_grad_input and conv2d]")
EINSUM_FORWARD = ("--impl", "conv_impl.einsum", "-k", "test_forward and conv2d]")


def test_the_ci_profile_prints_a_reproduce_failure_blob(run_pytest):
    done = run_pytest(*TUTORIAL_GRAD_INPUT, env={"HYPOTHESIS_PROFILE": "ci"})
    assert done.returncode == 1, done.stdout[-3000:]
    # "this example ... on your test case" until Hypothesis 6.16x, "this test case ...
    # on your test function" since
    assert re.search(r"You can reproduce this (example|test case) by temporarily adding "
                     r"@reproduce_failure\('[\d.]+', b'[^']+'\)", done.stdout), done.stdout[-3000:]


def _features(run_pytest, tmp_path, seed: int) -> str:
    """The run summary's features line of a random (not derandomised) search."""
    done = run_pytest(*EINSUM_FORWARD, f"--hypothesis-seed={seed}",
                      env={"HYPOTHESIS_PROFILE": "dev",
                           "HYPOTHESIS_STORAGE_DIRECTORY": str(tmp_path / "hypothesis")})
    assert done.returncode == 0, done.stdout[-3000:]
    (line,) = re.findall(r"^\s*features covered: .*$", done.stdout, re.M)
    return line


def test_hypothesis_seed_repeats_the_same_random_search(run_pytest, tmp_path):
    first, again = _features(run_pytest, tmp_path, 7), _features(run_pytest, tmp_path, 7)
    assert first == again
    assert _features(run_pytest, tmp_path, 8) != first
