"""Regenerate the README's tutorial example from a real run (never hand-edit it).

Runs the whole conformance suite against the known-buggy
``conv_impl.tutorial`` (derandomised: HYPOTHESIS_PROFILE=harness-test, so
the same shrunk cases every time), then runs the reproduction script of each
distinct bug it listed and replays one case file against the tutorial and
against conv_impl.einsum, and writes the run's bug list, the grad_input
test's report and those outputs into README.md between the markers

    <!-- tutorial-example:begin -->
    <!-- tutorial-example:end -->

(the only part of README.md this tool writes). Without the markers it prints
the section instead. The run's temporary failures folder is shown as
``.conv-failures`` (the default), which is the only change made to the output.

    python tools/readme_example.py [--print]
"""

from __future__ import annotations

import json
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


def _failure_section(stdout: str, test: str = "") -> str:
    """A failure's report as pytest prints it (header to the next one): the first, or
    the one whose header names ``test``."""
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("_") and (
        test in line if test else ("test_" in line or line.startswith("_ replay"))))
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

        found = _run(_pytest("-n", "2", "--impl", "conv_impl.tutorial", "--conv-failures",
                             str(failures)), env)
        summary_file = failures / "summary.json"
        bugs = (json.loads(summary_file.read_text())["implementations"][0]["bugs"]
                if summary_file.is_file() else [])
        if found.returncode != 1 or len(bugs) != 2:
            raise SystemExit(f"expected the tutorial's two bugs, got exit status "
                             f"{found.returncode} and {len(bugs)} bug(s):\n"
                             + found.stdout[-3000:] + found.stderr[-3000:])
        cases = [failures / bug["case_file"] for bug in bugs]
        ran = [_run([sys.executable, str(case.with_suffix(".py"))], env) for case in cases]
        case = cases[0]
        replay_bad = _run(_pytest("--replay", str(case)), env)
        replay_good = _run(_pytest("--replay", str(case), "--impl", "conv_impl.einsum"), env)
        shown_case = show(str(case))
        summary = found.stdout.split("convolution harness summary")[1].split("\n", 1)[1]
        summary = summary.split("\n  check ")[0]
        parts = [
            "The known-buggy tutorial, `pytest -n auto --impl conv_impl.tutorial`: the end "
            "of the run, with its distinct bugs (the same list is in "
            "`.conv-failures/summary.json`):",
            "```text\n" + show(summary.rstrip()) + "\n" + _last_line(found.stdout) + "\n```",
            "The report of one failing test, `test_grad_input`, as pytest prints it: each "
            "bug it found, shrunk, explained, with its case file and script:",
            "```text\n" + show(_failure_section(found.stdout, "test_grad_input[")) + "\n```",
            "The standalone script saved beside each case file, run on its own "
            f"(exit status {' and '.join(str(r.returncode) for r in ran)}):",
            "```text\n" + "\n\n".join(
                f"$ python {show(str(c.with_suffix('.py')))}\n" + show(r.stdout.rstrip())
                for c, r in zip(cases, ran)) + "\n```",
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
