"""The einsum engine's paths that the default sizes rarely reach, checked by the suite."""

from __future__ import annotations

from pathlib import Path

CHANNELS_LAST = Path(__file__).resolve().parent / "einsum_channels_last.py"


def test_the_float32_channels_last_path_passes_the_suite(run_pytest, tmp_path):
    # the oracle checks of the path's forward, input and weight gradients (the
    # properties run on it in the thorough profile, see benchmarks/results-after.txt)
    done = run_pytest("--impl", CHANNELS_LAST, "-n", "2", "-k",
                      "(test_forward or test_grad_input or test_grad_weight) and "
                      "(conv2d] or conv_transpose2d] or conv3d])")
    assert done.returncode == 0, done.stdout[-4000:]
    assert "einsum_channels_last" in done.stdout and " passed" in done.stdout
