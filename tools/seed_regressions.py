"""Regenerate the tutorial's cases in the regression corpus (tests/regressions/).

Runs the conformance suite (derandomised: HYPOTHESIS_PROFILE=harness-test)
against the known-buggy tutorial and against its square variant with only the
stride bug, so that each of its backward bugs has its own shrunk case, and
copies the JSON case files it leaves into tests/regressions/. Nothing is
hand-written: what is committed is what the harness found and shrank.

    python tools/seed_regressions.py            # from the project root
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from conv_harness.records.failures import dump_record  # noqa: E402

CORPUS = ROOT / "tests" / "regressions"
SPECS = ("conv_impl.tutorial", "tools/tutorial_variants.py:stride_bug_square")


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        failures = Path(tmp) / "failures"
        command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
                   "tests/conformance/test_conformance.py", "--conv-failures", str(failures)]
        for spec in SPECS:
            command += ["--impl", spec]
        env = {**os.environ, "HYPOTHESIS_PROFILE": "harness-test"}
        done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
        found = sorted(failures.glob("*.json"))
        if done.returncode != 1 or not found:
            sys.stderr.write(done.stdout[-3000:] + done.stderr[-3000:])
            print(f"expected failures from the tutorial (exit status {done.returncode})",
                  file=sys.stderr)
            return 1
        CORPUS.mkdir(parents=True, exist_ok=True)
        for old in [*CORPUS.glob("conv_impl.tutorial*.json"), *CORPUS.glob("tutorial_variants*.json")]:
            old.unlink()
        for path in found:
            # The absolute path of a file spec is this machine's: not for the corpus.
            record = json.loads(path.read_text(encoding="utf-8"))
            record.pop("impl_file", None)
            (CORPUS / path.name).write_text(dump_record(record), encoding="utf-8")
            print(f"tests/regressions/{path.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
