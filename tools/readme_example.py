"""Regenerate the tutorial's example from a real run (never hand-edit it).

Runs the whole conformance suite against the known-buggy
``conv_impl.tutorial`` (derandomised: HYPOTHESIS_PROFILE=harness-test, so
the same shrunk cases every time), then runs the reproduction script of each
distinct bug it listed and replays one case file against the tutorial and
against conv_impl.einsum. It writes the run's bug list into README.md, and the
grad_input test's report and those outputs into docs/failures.md, each between
its markers

    <!-- tutorial-example:begin -->        (README.md)
    <!-- tutorial-example:end -->
    <!-- tutorial-report:begin -->         (docs/failures.md)
    <!-- tutorial-report:end -->

(the only parts of those files this tool writes). Without the markers it prints
the part instead. The run's temporary failures folder is shown as
``.conv-failures`` (the default), and pytest's ``[gw0] linux -- Python ...``
line (it names the interpreter's path) is left out; nothing else is changed.
tests/harness/test_readme.py checks that both copies are current (up to what a run
may change: durations, and which checks meet a bug besides the one naming it).

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

try:
    from tools.markers import between
except ImportError:  # run as a script: tools/ is on the path
    from markers import between

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
FAILURES_PAGE = ROOT / "docs" / "failures.md"
#: where each generated part goes: file, begin marker, end marker
PLACES = {"bugs": (README, "<!-- tutorial-example:begin -->", "<!-- tutorial-example:end -->"),
          "report": (FAILURES_PAGE, "<!-- tutorial-report:begin -->", "<!-- tutorial-report:end -->")}


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


def generate(keep: Path | None = None) -> dict[str, str]:
    """The parts of `PLACES`, from one run. With ``keep``, the run's failures folder is
    left in ``keep/failures`` and its output in ``keep/run.log``, for tests that read
    the same run (tests/harness/test_readme.py)."""
    with tempfile.TemporaryDirectory() as tmp:
        failures = Path(keep or tmp) / "failures"
        env = {**os.environ, "HYPOTHESIS_PROFILE": "harness-test"}
        env.pop("CI", None)

        def show(text: str) -> str:
            text = re.sub(r"^\[gw\d+\] \w+ -- Python .*\n", "", text, flags=re.M)
            return text.replace(str(failures), ".conv-failures")

        found = _run(_pytest("-n", "2", "--impl", "conv_impl.tutorial", "--conv-failures",
                             str(failures)), env)
        if keep is not None:
            (keep / "run.log").write_text(found.stdout)
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
        bug_list = [
            "The known-buggy tutorial, `pytest -n auto --impl conv_impl.tutorial`: the end "
            "of the run, with its distinct bugs (the same list is in "
            "`.conv-failures/summary.json`). The bugs, their minimal cases and triggers "
            "are the same in every run; which other checks also meet a bug (`seen by` "
            "after the first), and so which tests fail, and the network layer a search "
            "first failed on (`found on`), depend on the examples drawn, which change "
            "with the Hypothesis version:",
            "```text\n" + show(summary.rstrip()) + "\n" + _last_line(found.stdout) + "\n```"]
        report = [
            "The report of one failing test, `test_grad_input`, as pytest prints it: each "
            "bug it found, shrunk, explained, with its case file and script (a bug "
            "another check found first is only counted, on the first problem it met it "
            "on: that problem depends on the examples drawn):",
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
    return {"bugs": "\n\n".join(bug_list), "report": "\n\n".join(report)}


def place(text: str, key: str, part: str) -> str | None:
    """``text`` with ``part`` between its markers, or None without them."""
    _, begin, end = PLACES[key]
    return between(text, begin, end, part)


def main(argv: list[str]) -> int:
    parts = generate()
    for key, part in parts.items():
        path = PLACES[key][0]
        text = path.read_text(encoding="utf-8") if path.exists() else ""
        new = None if "--print" in argv else place(text, key, part)
        if new is None:
            if "--print" not in argv:
                print(f"(no {key} markers in {path.name}: printing the part)", file=sys.stderr)
            print(part)
            continue
        path.write_text(new, encoding="utf-8")
        print(f"{path.relative_to(ROOT)}: tutorial {key} regenerated "
              f"({len(part.splitlines())} lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
