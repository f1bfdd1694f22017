"""Regenerate examples/README.md's "Found in the wild" section from real runs (never hand-edit it).

Runs the suite, as a user would, against each real framework's example
adapter that is installed here (examples/jax_conv.py, tensorflow_conv.py,
tinygrad_conv.py), each run under ``--conv-budget`` and with the options
the framework needs (``--isolate`` where it crashes the process), then runs
the reproduction script of every distinct bug the run listed
(``summary.json``), alone in a fresh process, and writes into
examples/README.md between the markers

    <!-- found-in-the-wild:tensorflow:begin -->
    <!-- found-in-the-wild:tensorflow:end -->

(one pair per framework: ``jax``, ``tensorflow``, ``tinygrad``) its versions,
the commands, each run's time and exit status, its summary table, and per
bug the report as the harness printed it (shrunk case, explanation,
trigger), the script and what the script printed with its exit status. A framework that is not installed is listed as not run. The
run's temporary failures folder is shown as ``.conv-failures``.

    python tools/found_in_the_wild.py [--print] [--only NAME ...] [--budget-scale X]

A whole regeneration takes about as long as the runs' budgets add up to
(about 33 minutes on 2 shared cores with the default budgets: JAX 19, TensorFlow 3,
tinygrad 11). Run it with the Python that has the frameworks (e.g. a venv with
``--system-site-packages`` beside the project's install), so the project's own
environment, and CI, stay free of them.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "examples" / "README.md"
CONFORMANCE = "tests/conformance/test_conformance.py"


@dataclass
class Run:
    """One run of the suite: which tests, with which options, and why this selection."""

    why: str
    args: list[str]
    budget: float
    profile: str = "dev"
    workers: int = 0  # pytest-xdist workers (0: none)


@dataclass
class Framework:
    name: str
    module: str  # what must be importable
    dists: list[str]  # the distributions whose versions are reported
    impl: str
    runs: list[Run]
    note: str = ""
    env: dict[str, str] = field(default_factory=dict)


FRAMEWORKS = [
    Framework(
        "JAX", "jax", ["jax", "jaxlib"], "examples/jax_conv.py",
        [Run("the whole suite, every operation and check, on 2 workers, each call in a child "
             "process (`--isolate`), so that XLA's abort is a failure to shrink, not the end of "
             "the run", ["-n", "2", "--isolate"], 15),
         Run("every check that calls conv3d's backward, under `--isolate`, with more time and "
             "the `thorough` profile: the abort needs, on one axis, kernel 2, stride 2, "
             "padding 1 and an even input of 4 or more, and on another a kernel wider than the "
             "output (examples/jax_crash_map.py), which about one conv3d problem in 800 has "
             "and no conv2d problem in 5,000 draws of the strategies had",
             [CONFORMANCE, "tests/conformance/test_properties.py", "-n", "2",
              "-k", "conv3d and not test_forward", "--isolate"], 120, profile="thorough")]),
    Framework(
        "TensorFlow", "tensorflow", ["tensorflow-cpu"], "examples/tensorflow_conv.py",
        [Run("the whole suite, every operation and check, on 2 workers", ["-n", "2"], 15),
         Run("conv2d's weight gradient with every call in a child process (`--isolate`), "
             "to shrink a crash of the backward", [CONFORMANCE, "-k",
                                                   "test_grad_weight and conv2d",
                                                   "--isolate"], 90),
         Run("conv2d's forward pass, `thorough` profile (more examples per check)",
             [CONFORMANCE, "-k", "test_forward and conv2d"], 240, profile="thorough")]),
    Framework(
        "tinygrad", "tinygrad", ["tinygrad"], "examples/tinygrad_conv.py",
        [Run("the whole suite, every operation and check, on 2 workers", ["-n", "2"], 15),
         Run("conv2d's input gradient and repeatability, with more time per check",
             [CONFORMANCE, "-n", "2", "-k", "conv2d and (test_grad_input or test_repeatable)"],
             150)],
        note="tinygrad's CPU device needs a C compiler: `apt-get install clang`."),
]


def _versions(framework: Framework) -> str:
    out = []
    for dist in framework.dists:
        try:
            out.append(f"{dist} {importlib.metadata.version(dist)}")
        except importlib.metadata.PackageNotFoundError:
            out.append(f"{dist} (not installed)")
    return ", ".join(out)


def _show(text: str, failures: Path) -> str:
    return text.replace(str(failures), ".conv-failures")


def _quiet(stdout: str) -> str:
    """Drop TensorFlow's and pytest-benchmark's start-up chatter from a run's output."""
    noise = ("oneDNN custom operations", "absl::InitializeLog", "PytestBenchmarkWarning",
             "warner(PytestBenchmarkWarning")
    return "\n".join(line for line in stdout.splitlines()
                     if not any(n in line for n in noise))


def _summary_block(stdout: str) -> str:
    if "convolution harness summary" not in stdout:
        return ""
    block = stdout.split("convolution harness summary", 1)[1].split("\n", 1)[1]
    lines = []
    for line in block.splitlines():
        if line.startswith("(this summary as JSON") or line.startswith("====="):
            break
        lines.append(line)
    return "\n".join(lines).rstrip()


def _command(framework: Framework, run: Run, scale: float = 1.0) -> str:
    budget = f"--conv-budget {run.budget * scale:g}"
    profile = "" if run.profile == "dev" else f"HYPOTHESIS_PROFILE={run.profile} "
    return f"{profile}pytest --impl {framework.impl} {' '.join(_q(a) for a in run.args)} {budget}"


def _q(arg: str) -> str:
    return f'"{arg}"' if " " in arg else arg


def _do_run(framework: Framework, run: Run, scale: float, tmp: Path, index: int) -> str:
    failures = tmp / f"{framework.module}-{index}"
    budget = run.budget * scale
    env = {**os.environ, "HYPOTHESIS_PROFILE": run.profile, **framework.env}
    env.pop("CI", None)
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
               "-W", "ignore::DeprecationWarning", "--impl", framework.impl, *run.args,
               "--conv-budget", f"{budget:g}", "--conv-failures", str(failures)]
    start = time.monotonic()
    try:
        done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=max(1800.0, 40 * budget))
        stdout, status = _quiet(done.stdout), str(done.returncode)
    except subprocess.TimeoutExpired as exc:
        stdout = _quiet(exc.stdout.decode() if isinstance(exc.stdout, bytes) else exc.stdout or "")
        status = "killed (time limit)"
    seconds = time.monotonic() - start
    summary_file = failures / "summary.json"
    impls = (json.loads(summary_file.read_text())["implementations"]
             if summary_file.is_file() else [])
    bugs = impls[0]["bugs"] if impls else []
    tail = stdout.strip().splitlines()[-1] if stdout.strip() else "(no output)"
    parts = [f"**Run {index}**: {run.why}.",
             f"```text\n$ {_command(framework, run, scale)}\n{_show(tail, failures)}\n```",
             f"It took {seconds:.0f} s on this machine (exit status {status}) and listed "
             f"{len(bugs)} distinct bug(s)."]
    summary = _summary_block(stdout)
    if summary:
        parts.append("Its summary:\n\n```text\n" + _show(summary, failures) + "\n```")
    elif status != "0":
        parts.append("Its output ends:\n\n```text\n"
                     + _show("\n".join(stdout.splitlines()[-30:]), failures) + "\n```")
    crashes = re.findall(r"^.*crashed the test process.*$|^worker '\w+' crashed.*$", stdout, re.M)
    if crashes:
        parts.append("Crashes it reported outside the bug list (a crash without `--isolate` "
                     "is not shrunk):\n\n```text\n"
                     + _show("\n".join(dict.fromkeys(crashes)), failures) + "\n```")
    for number, bug in enumerate(bugs, 1):
        parts.append(_bug(number, bug, failures, env, stdout, summary))
    return "\n\n".join(parts)


def _report(stdout: str, bug: dict) -> str:
    """The bug's report as pytest printed it: in the failure section of the test of the
    check that found it, the block of that failure kind (summary.json holds no text)."""
    header = re.compile(rf"^_+ test_{re.escape(bug['check'])}\[[^\]]*-{re.escape(bug['op'])}\] _+$",
                        re.M)
    match = header.search(stdout)
    if not match:
        return ""
    rest = stdout[match.end():]
    end = re.search(r"^(_{3,} |={3,} )", rest, re.M)
    section = rest[:end.start()] if end else rest
    blocks = re.split(r"^--- bug \d+ of \d+ -+$", section, flags=re.M)
    for block in blocks[1:] or blocks:
        if f"check '{bug['failure']}'" in block:
            return block.strip("\n")
    return section.strip("\n")


def _entry(summary: str, number: int) -> str:
    """Entry ``number`` of the summary's list of distinct bugs."""
    match = re.search(rf"^  {number}\. .*?(?=^  \d+\. |^  check |\Z)", summary, re.M | re.S)
    return match.group(0).rstrip() if match else ""


def _bug(number: int, bug: dict, failures: Path, env: dict[str, str], stdout: str = "",
         summary: str = "") -> str:
    title = (f"Bug {number}: `{bug['failure']}` in `{bug.get('function') or bug['op']}` "
             f"(checks: {', '.join(bug.get('checks') or [bug['check']])})")
    report = bug.get("report", "").rstrip() or _report(stdout, bug) or _entry(summary, number)
    parts = [f"*{title}*, as the harness reported it:",
             "```text\n" + _show(report, failures) + "\n```"]
    case = failures / bug["case_file"] if bug.get("case_file") else None
    script = case.with_suffix(".py") if case else None
    if script and script.is_file():
        try:
            ran = subprocess.run([sys.executable, str(script)], cwd=ROOT, env=env,
                                 capture_output=True, text=True, timeout=600)
            status = str(ran.returncode)
            output = "\n".join(_quiet(ran.stdout).splitlines()[:40]
                               + _quiet(ran.stderr).splitlines()[-12:]).rstrip()
        except subprocess.TimeoutExpired:
            status, output = "killed after 600 s", ""
        parts += [f"Its reproduction script, run alone in a fresh process "
                  f"(exit status {status}):",
                  "```text\n$ python " + _show(str(script), failures) + "\n"
                  + _show(output, failures) + "\n```",
                  "<details><summary>the script</summary>\n\n```python\n"
                  + _show(script.read_text().rstrip(), failures) + "\n```\n\n</details>"]
    return "\n\n".join(parts)


def _markers(framework: Framework) -> tuple[str, str]:
    key = framework.module
    return f"<!-- found-in-the-wild:{key}:begin -->", f"<!-- found-in-the-wild:{key}:end -->"


def generate(framework: Framework, scale: float) -> str:
    """One framework's part of the section: its versions, runs, bugs and scripts."""
    parts = [f"### {framework.name} ({_versions(framework)})"]
    if importlib.util.find_spec(framework.module) is None:
        return "\n\n".join(parts + [f"Not installed here: not run "
                                     f"(`pip install -e '.[{framework.module}]'`)."])
    if framework.note:
        parts.append(framework.note)
    with tempfile.TemporaryDirectory() as tmp:
        for index, run in enumerate(framework.runs, 1):
            print(f"{framework.name}: run {index} ...", file=sys.stderr, flush=True)
            parts.append(_do_run(framework, run, scale, Path(tmp), index))
    return "\n\n".join(parts)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--print", action="store_true", help="print, do not write the README")
    parser.add_argument("--only", nargs="*", default=[],
                        help="frameworks to run, by name (the others' parts are kept)")
    parser.add_argument("--budget-scale", type=float, default=1.0,
                        help="multiply every run's --conv-budget")
    args = parser.parse_args(argv)
    only = [o.lower() for o in args.only]
    text = README.read_text(encoding="utf-8")
    for framework in FRAMEWORKS:
        if only and framework.name.lower() not in only:
            continue
        section = generate(framework, args.budget_scale)
        begin, end = _markers(framework)
        pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.S)
        if args.print or not pattern.search(text):
            print(section)
            continue
        # Read again: another framework's part may have been written meanwhile.
        text = README.read_text(encoding="utf-8")
        text = pattern.sub(lambda _: f"{begin}\n{section}\n{end}", text, count=1)
        README.write_text(text, encoding="utf-8")
        print(f"examples/README.md: {framework.name} regenerated "
              f"({len(section.splitlines())} lines)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
