"""The einsum engine's paths that the default sizes rarely reach, checked by the suite."""

from __future__ import annotations

from pathlib import Path

CHANNELS_LAST = Path(__file__).resolve().parent / "einsum_channels_last.py"


def test_the_float32_channels_last_path_passes_the_suite(run_pytest, tmp_path):
    done = run_pytest("--impl", CHANNELS_LAST, "-n", "2", "-k",
                      "conv2d] or conv3d] or conv_transpose2d]", "--hypothesis-profile", "ci")
    assert done.returncode == 0, done.stdout[-4000:]
    assert "einsum_channels_last" in done.stdout and " passed" in done.stdout
