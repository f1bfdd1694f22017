"""Regenerate the README's tutorial example from a real run (never hand-edit it).

Runs the conformance suite's grad_input check against the known-buggy
``conv_impl.tutorial`` (derandomised: HYPOTHESIS_PROFILE=harness-test, so
the same shrunk case every time), then runs the reproduction script it saved
and replays the case file against the tutorial and against conv_impl.einsum,
and writes all four outputs into README.md between the markers

    <!-- tutorial-example:begin -->
    <!-- tutorial-example:end -->

(the only part of README.md this tool writes). Without the markers it prints
the section instead. The run's temporary failures folder is shown as
``.conv-failures`` (the default), which is the only change made to the output.

    python tools/readme_example.py [--print]
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
BEGIN, END = "<!-- tutorial-example:begin -->", "<!-- tutorial-example:end -->"


def _run(command: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=900)


def _pytest(*args: str) -> list[str]:
    return [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
            "-W", "ignore::DeprecationWarning", *args]


def _failure_section(stdout: str) -> str:
    """The first failure's report as pytest prints it (header to summary)."""
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("_") and "test_" in line
                 or line.startswith("_ replay"))
    end = next(i for i in range(start + 1, len(lines))
               if lines[i].startswith("=") or lines[i].startswith("___"))
    return "\n".join(lines[start:end]).rstrip()


def _last_line(stdout: str) -> str:
    return stdout.strip().splitlines()[-1]


def generate() -> str:
    with tempfile.TemporaryDirectory() as tmp:
        failures = Path(tmp) / "failures"
        env = {**os.environ, "HYPOTHESIS_PROFILE": "harness-test"}
        env.pop("CI", None)

        def show(text: str) -> str:
            return text.replace(str(failures), ".conv-failures")

        found = _run(_pytest("tests/conformance/test_conformance.py", "-k", "grad_input",
                             "--impl", "conv_impl.tutorial", "--conv-failures",
                             str(failures)), env)
        cases = sorted(failures.glob("*.json"))
        if found.returncode != 1 or len(cases) != 1:
            raise SystemExit(f"expected one failure from the tutorial, got exit status "
                             f"{found.returncode} and {len(cases)} case file(s):\n"
                             + found.stdout[-3000:] + found.stderr[-3000:])
        case = cases[0]
        script = case.with_suffix(".py")
        ran = _run([sys.executable, str(script)], env)
        replay_bad = _run(_pytest("--replay", str(case)), env)
        replay_good = _run(_pytest("--replay", str(case), "--impl", "conv_impl.einsum"), env)
        shown_case = show(str(case))
        parts = [
            "The known-buggy tutorial, `pytest -n auto --impl conv_impl.tutorial` "
            "(here only its `grad_input` check). Its report, as pytest prints it:",
            "```text\n" + show(_failure_section(found.stdout)) + "\n"
            + _last_line(found.stdout) + "\n```",
            f"The standalone script saved beside the case file, run on its own "
            f"(exit status {ran.returncode}):",
            f"```text\n$ python {show(str(script))}\n" + show(ran.stdout.rstrip()) + "\n```",
            f"Replaying the case file against the tutorial (exit status "
            f"{replay_bad.returncode}) and against `conv_impl.einsum` "
            f"(exit status {replay_good.returncode}):",
            f"```text\n$ pytest --replay {shown_case}\n"
            + show(_failure_section(replay_bad.stdout)) + "\n"
            + _last_line(replay_bad.stdout)
            + f"\n\n$ pytest --replay {shown_case} --impl conv_impl.einsum\n"
            + _last_line(replay_good.stdout) + "\n```",
        ]
    return "\n\n".join(parts)


def main(argv: list[str]) -> int:
    section = generate()
    text = README.read_text(encoding="utf-8") if README.exists() else ""
    pattern = re.compile(re.escape(BEGIN) + r".*?" + re.escape(END), re.S)
    if "--print" in argv or not pattern.search(text):
        if "--print" not in argv:
            print(f"(no {BEGIN} ... {END} markers in README.md: printing the section)",
                  file=sys.stderr)
        print(section)
        return 0
    README.write_text(pattern.sub(lambda _: f"{BEGIN}\n{section}\n{END}", text, count=1),
                      encoding="utf-8")
    print(f"README.md: tutorial example regenerated ({len(section.splitlines())} lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
