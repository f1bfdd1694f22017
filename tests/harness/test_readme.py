"""The README and the docs say what a run shows.

The generated parts (the tutorial's bug list in README.md, its full report in
docs/failures.md) are regenerated from a real run and compared; the quoted end
of the main job is compared with what pytest collects; every link points to a
file that exists.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.harness.conftest import PROJECT_ROOT
from tests.harness.test_triage import scripts_exit_1
from tools import readme_example

README = PROJECT_ROOT / "README.md"


def _failed_or_passed(match: re.Match) -> str:
    return f"{int(match[1]) + int(match[2])} failed or passed"


def _without_chance(text: str) -> str:
    """The generated text with what a run may change masked; the rest must match.

    pytest's wall-clock figures move with the machine's load; so does, under -n 2,
    how many examples of a search met a cause another worker published (26 or 32 in
    two runs of one commit). Which examples a check draws moves with the Hypothesis
    version (6.155 and 6.170 draw differently with the same profile): so which other
    checks also meet a bug ("seen by" after the first, the check that names it),
    which tests fail of the ones run, the problem a check met a known bug on, and
    the archetype a search first failed on ("found on", a line that is there only
    when the first failing example was on or next to one). A case file's name ends in a
    hash of its content, whose data values move with the draw (the same minimal problem
    drawn with other values), so the hash is masked and the rest of the name kept.
    The bugs themselves, their minimal cases, triggers and case files' names may not move."""
    text = re.sub(r" in \d+(\.\d+)?s( \(\d+:\d\d:\d\d\))?", " in <time>", text)
    text = re.sub(r"-[0-9a-f]{10}\.(json|py)\b", r"-<hash>.\1", text)
    text = re.sub(r"^ *found on: .*\n", "", text, flags=re.M)
    text = re.sub(r"^(also met known bug: [^\n]*?) on [^,\n]*, (.*) \(\d+ examples?\)$",
                  r"\1 on <problem>, \2 (<n> examples)", text, flags=re.M)
    text = re.sub(r"; seen by (\w+)(, \w+)*$", r"; seen by \1, <others>", text, flags=re.M)
    text = re.sub(r"\]: FAILED: .*$", "]: FAILED: <checks>", text, flags=re.M)
    return re.sub(r"^(\d+) failed, (\d+) passed", _failed_or_passed, text, flags=re.M)


def test_what_chance_moves_is_masked_and_nothing_else():
    """The two runs that differed (Hypothesis 6.155 and 6.170) compare equal; a changed
    trigger, the check naming a bug, or the number of tests run do not."""
    ran = ("x [x]: FAILED: adjoint (conv2d), grad_input (conv2d)\n"
           "  2. grad_input wrong in f; seen by grad_input, adjoint, delta_kernel\n"
           "     found on: convnext 2x2 s2 downsample's stride neighbour\n"
           "     trigger: fails when stride >= 3 and outputs >= 2\n"
           "     case file: conv_impl.tutorial-conv2d-grad_input-8e088d6daf.json\n"
           "also met known bug: grad_input (f) on conv2d batch=1 input=1x4, fails when "
           "padding >= 1 (5 examples)\n"
           "7 failed, 5 passed, 1 skipped in 26.67s\n")
    other = (ran.replace("adjoint (conv2d), ", "").replace("adjoint, ", "linearity, ")
             .replace("1x4", "10x11").replace("(5 examples)", "(13 examples)")
             .replace("8e088d6daf", "7eaa9bf950")
             .replace("7 failed, 5 passed", "6 failed, 6 passed").replace("26.67", "64.64")
             .replace("     found on: convnext 2x2 s2 downsample's stride neighbour\n", ""))
    assert _without_chance(other) == _without_chance(ran)
    for changed in (ran.replace("stride >= 3", "stride >= 2"),
                    ran.replace("seen by grad_input", "seen by adjoint"),
                    ran.replace("5 passed", "4 passed"),
                    ran.replace("when padding", "when kernel"),
                    ran.replace("grad_input-8e088d6daf", "forward-8e088d6daf")):
        assert _without_chance(changed) != _without_chance(ran)


def test_readme_is_short():
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 300


@pytest.mark.long
def test_one_default_run_of_the_tutorial(tmp_path):
    """One default run of the tutorial (-n 2, as the README shows it), read twice: the
    README's generated parts are current, and the run lists the tutorial's two bugs.
    One test, so that the run is made once whichever xdist worker takes it."""
    parts = readme_example.generate(tmp_path)
    _generated_tutorial_parts_are_current(parts)
    _the_run_lists_the_tutorials_two_bugs(tmp_path / "failures",
                                          (tmp_path / "run.log").read_text())


def _generated_tutorial_parts_are_current(parts: dict[str, str]) -> None:
    """A run of tools/readme_example.py would change nothing but what chance moves."""
    for key, part in parts.items():
        path = readme_example.PLACES[key][0]
        text = path.read_text(encoding="utf-8")
        regenerated = readme_example.place(text, key, part)
        assert regenerated is not None, f"{path.name} lost its {key} markers"
        assert _without_chance(regenerated) == _without_chance(text), (
            f"{path.name} is stale: run python tools/readme_example.py")


def _the_run_lists_the_tutorials_two_bugs(failures: Path, out: str) -> None:
    summary = json.loads((failures / "summary.json").read_text())
    (entry,) = summary["implementations"]
    assert entry["verdict"] == "failed" and entry["examples"] > 0
    padding, stride = entry["bugs"]
    assert padding["failure"] == stride["failure"] == "grad_input"
    assert padding["params"] == {
        "batch": 1, "in_channels": 1, "out_channels": 1, "input_size": [1, 1],
        "kernel_size": [1, 1], "stride": [1, 1], "padding": [1, 1], "dilation": [1, 1],
        "groups": 1, "bias": True, "dtype": "float64"}
    assert padding["trigger"].startswith("fails when padding >= 1")
    # every check that can see it, one entry
    assert set(padding["checks"]) >= {"grad_input", "adjoint", "finite_difference"}
    p = stride["params"]
    assert p["stride"] == [3, 3] and sorted(p["input_size"]) == [1, 4]  # square: the tutorial
    assert p["kernel_size"] == [1, 1] and p["padding"] == [0, 0] and p["batch"] == 1
    assert stride["trigger"].startswith("fails when stride >= 3 and outputs >= 2")
    rows = {row["feature"]: row for row in stride["explanation"]["changes"]}
    assert sorted(rows["stride"]["passes"]) == [1, 2] and sorted(rows["stride"]["fails"]) == [3, 4]
    scripts_exit_1(failures, entry["bugs"])
    # a few hundred lines, not the scripts (on CI pytest repeats each message in its
    # short summary: count the reports)
    assert len(out.split("short test summary info")[0].splitlines()) < 600


def _main_job_items() -> list[str]:
    collected = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"],
        cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=600)
    assert collected.returncode == 0, collected.stdout[-2000:] + collected.stderr[-2000:]
    return [line for line in collected.stdout.splitlines() if "::" in line]


def test_quoted_end_of_the_main_job_matches_what_it_runs():
    """The README's 'N passed, M skipped' and 'examples tried: 6600': every collected
    test, the opt-in `invalid` ones and an empty regression corpus skipped, 100 examples (the dev profile) per check
    test, none for the replays of the regression corpus."""
    text = README.read_text(encoding="utf-8")
    passed, skipped = map(int, re.search(r"=+ (\d+) passed, (\d+) skipped in ", text).groups())
    examples = int(re.search(r"examples tried: (\d+)", text).group(1))
    items = _main_job_items()
    invalid = [item for item in items if "test_invalid" in item]
    checks = [item for item in items if "test_regressions" not in item]
    no_corpus = [item for item in items if item.endswith("test_regression[none]")]
    assert (passed + skipped, skipped) == (len(items), len(invalid) + len(no_corpus))
    assert examples == 100 * (len(checks) - len(invalid))


LINK = re.compile(r"\]\(([^)#\s]+)(#[^)]*)?\)")


@pytest.mark.parametrize("page", ["README.md", "examples/README.md",
                                  *sorted(p.relative_to(PROJECT_ROOT).as_posix()
                                          for p in (PROJECT_ROOT / "docs").glob("*.md"))])
def test_links_point_to_files(page):
    source = PROJECT_ROOT / page
    missing = []
    for target, _ in LINK.findall(source.read_text(encoding="utf-8")):
        if "://" in target:
            continue
        path = (source.parent / target).resolve()
        if not path.exists():
            missing.append(target)
    assert not missing, f"{page} links to missing files: {missing}"
