"""Time to verdict: how long a run takes to its whole bug list, and where the time goes.

    python -m benchmarks.time_to_verdict [--baseline /path/to/other/tree] [--rounds N]
                                         [--only NAME] [-n 2] [--out FILE]
                                         [--set verdict|causes] [--tree /path/to/tree]

For each member of a fixed set (`SET`: a correct conv2d-with-backward
module, the tutorial, a one-cause module, an N-d module with two causes
behind six functions) it runs ``conv-harness -n 2 --impl SPEC`` (``python -m
conv_harness.cli``, the ``dev`` profile, in a fresh folder with no example
database) and prints: the wall time; the examples tried and the
implementation calls made; the verdict and the distinct bugs of its
summary.json, the lines the run printed and the case files it wrote; and
where the time went: start-up (launch to the first test of
any worker), search and shrink (Hypothesis's own statistics of each
conformance test), explanation, further searches, script verification and
history rebuild (the triage's functions, timed by name). The phase times
come from a plugin loaded into every process of the run,
benchmarks/timing_plugin/conv_verdict_timing.py; they are seconds of each
worker, summed over tests, so with ``-n 2`` they add up to about twice the
wall time.

With ``--baseline TREE`` every member runs under both trees, one after the
other and alternating which goes first (``PYTHONPATH`` names the tree: the
project is imported from it), ``--rounds`` times, and each figure is shown
for both with their ratio (this tree / baseline): measured in one run, under
the same load. The machine's load (``uptime``) is printed before each run.

``--set causes`` measures issue 21's set instead (`CAUSES_SET`: a module per
pattern of tests/harness/causes_bugs.py, the tutorial, a one-bug module and
the shipped correct conv_impl.einsum), with the modules taken from this
checkout under both trees; ``--tree`` names another checkout as "this tree"
(a snapshot, so that editing this one does not change a running benchmark).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
TREE = HERE.parent
PLUGIN_DIR = HERE / "timing_plugin"
#: (name, spec, what the right verdict is)
SET = (
    ("correct conv2d+backward", str(HERE / "verdict_set" / "correct_conv2d.py"), "passed"),
    ("tutorial", "conv_impl.tutorial", "failed: 2 bugs (padding, stride)"),
    ("one cause", str(TREE / "tests" / "harness" / "two_bugs.py") + ":one_bug",
     "failed: 1 bug (grad_input, vertical stride)"),
    ("N-d, two causes, six functions", str(HERE / "verdict_set" / "nd_two_causes.py"),
     "failed: 2 causes (forward with groups, grad_weight with stride) in 3 ops each"),
)
#: issue 21's set (``--set causes``): one multi-cause module per pattern of the issue
#: (tests/harness/causes_bugs.py), the tutorial, a one-bug module, and the shipped
#: correct implementation (the main job's suite: "a correct implementation is not slower")
CAUSES_BUGS = str(TREE / "tests" / "harness" / "causes_bugs.py")
CAUSES_SET = (
    ("N-d, one code path (nd_two_causes)", CAUSES_BUGS + ":nd_two_causes",
     "failed: 2 causes (strided gather, dilation refused) in 6 functions"),
    ("float32 compute", CAUSES_BUGS + ":float32_compute", "failed: 1 cause"),
    ("float32 + grad_bias mean", CAUSES_BUGS + ":float32_and_mean", "failed: 2 causes"),
    ("product condition (bias x K)", CAUSES_BUGS + ":product_bias", "failed: 1 cause"),
    ("masking", CAUSES_BUGS + ":masking", "failed: 2 causes (raises, float64)"),
    ("hidden by its kind (shapes)", CAUSES_BUGS + ":shapes", "failed: 2 causes"),
    ("read past the buffer", CAUSES_BUGS + ":read_past", "failed: 1 cause"),
    ("Winograd wrong entry", str(TREE / "tests" / "harness" / "buggy_algorithms.py")
     + ":winograd_wrong_entry", "failed: 1 cause (a tile holding two inputs)"),
    SET[1], SET[2],
    ("correct: conv_impl.einsum", "conv_impl.einsum", "passed"),
)
SETS = {"verdict": SET, "causes": CAUSES_SET}
PHASES = ("start-up", "search", "shrink", "explanation", "further searches",
          "script verification", "history rebuild")


@dataclass
class Result:
    wall: float
    verdict: str
    bugs: int
    examples: int
    calls: int
    lines: int = 0  # of the run's output (stdout and stderr)
    case_files: int = 0  # case JSON files written in the failures folder
    phases: dict[str, float] = field(default_factory=dict)


def load() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def run_once(tree: Path, spec: str, workers: str, extra: list[str]) -> Result:
    """One ``conv-harness`` run of ``spec`` under ``tree``, in a fresh folder."""
    with tempfile.TemporaryDirectory(prefix="time-to-verdict-") as folder:
        folder = Path(folder)
        timing = folder / "timing.jsonl"
        env = {k: v for k, v in os.environ.items()
               if k not in ("CONV_IMPL", "CONV_DB", "HYPOTHESIS_PROFILE", "PYTEST_ADDOPTS", "CI")}
        env["PYTHONPATH"] = os.pathsep.join([str(tree), str(PLUGIN_DIR)])
        env["CONV_VERDICT_TIMING"] = str(timing)
        args = [sys.executable, "-m", "conv_harness.cli", "-q", "-n", workers, "--impl", spec,
                "-p", "conv_verdict_timing", "--hypothesis-profile", "dev",
                "-p", "no:randomly", *extra]
        started = time.time()
        done = subprocess.run(args, cwd=folder, env=env, capture_output=True, text=True)
        wall = time.time() - started
        summary_file = folder / ".conv-failures" / "summary.json"
        if not summary_file.is_file():
            raise RuntimeError(f"{spec} under {tree}: no summary.json (exit "
                               f"{done.returncode}):\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
        impls = json.loads(summary_file.read_text())["implementations"]
        case_files = sum(1 for f in summary_file.parent.glob("*.json")
                         if f.name != "summary.json")
        records = [json.loads(line) for line in timing.read_text().splitlines()] \
            if timing.is_file() else []
    phases = {name: 0.0 for name in PHASES}
    firsts = [r["at"] for r in records if r["phase"] == "first test"]
    phases["start-up"] = (min(firsts) - started) if firsts else float("nan")
    for r in records:
        if r["phase"] in phases and "seconds" in r:
            phases[r["phase"]] += r["seconds"]
    return Result(wall=wall, verdict=",".join(i["verdict"] for i in impls),
                  bugs=sum(len(i["bugs"]) for i in impls),
                  examples=sum(i["examples"] for i in impls),
                  calls=sum(r.get("count", 0) for r in records if r["phase"] == "calls"),
                  lines=len((done.stdout + done.stderr).splitlines()), case_files=case_files,
                  phases=phases)


def _median(results: list[Result], get) -> float:
    return statistics.median(get(r) for r in results)


def table(name: str, expected: str, runs: dict[str, list[Result]]) -> list[str]:
    trees = list(runs)
    lines = [f"== {name} (right verdict: {expected})"]
    rows = [("wall time (s)", lambda r: r.wall), ("examples", lambda r: r.examples),
            ("implementation calls", lambda r: r.calls), ("distinct bugs", lambda r: r.bugs),
            ("output lines", lambda r: r.lines), ("case files", lambda r: r.case_files)]
    rows += [(f"  {p} (s)", (lambda p: lambda r: r.phases.get(p, 0.0))(p)) for p in PHASES]
    head = f"  {'':28}" + "".join(f"{t:>14}" for t in trees)
    lines.append(head + ("   ratio" if len(trees) == 2 else ""))
    for label, get in rows:
        values = [_median(runs[t], get) for t in trees]
        cells = "".join(f"{v:14.1f}" if isinstance(v, float) else f"{v:14d}" for v in values)
        ratio = ""
        if len(trees) == 2:
            ratio = f"   {values[1] / values[0]:.2f}" if values[0] else "      -"
        lines.append(f"  {label:28}{cells}{ratio}")
    for t in trees:
        lines.append(f"  verdicts under {t}: " + "; ".join(
            f"{r.verdict} ({r.bugs} bugs)" for r in runs[t]))
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", type=Path, help="another checkout to compare with")
    parser.add_argument("--tree", type=Path, default=TREE,
                        help="the tree measured as 'this tree' (default: this checkout)")
    parser.add_argument("--set", choices=sorted(SETS), default="verdict",
                        help="which set: time to verdict's, or issue 21's (causes)")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--only", action="append", help="a member's name (repeatable)")
    parser.add_argument("-n", dest="workers", default="2")
    parser.add_argument("--out", type=Path, help="also append the figures to this file")
    options, extra = parser.parse_known_args(argv)
    trees = {"this tree": options.tree.resolve()}
    if options.baseline is not None:
        trees = {"baseline": options.baseline.resolve(), "this tree": options.tree.resolve()}
    out: list[str] = [f"time to verdict: -n {options.workers}, " + ", ".join(
        f"{label} = {path}" for label, path in trees.items())]
    print(out[0], flush=True)
    for i, (name, spec, expected) in enumerate(SETS[options.set]):
        if options.only and name not in options.only:
            continue
        runs: dict[str, list[Result]] = {label: [] for label in trees}
        for round_ in range(options.rounds):
            order = list(trees) if (i + round_) % 2 == 0 else list(trees)[::-1]
            for label in order:
                note = f"  [{name}, {label}, round {round_ + 1}] load: {load()}"
                print(note, flush=True)
                out.append(note)
                result = run_once(trees[label], spec, options.workers, extra)
                runs[label].append(result)
                # each run as it ends, so that a run cut short keeps what it measured
                line = (f"  [{name}, {label}] wall {result.wall:.1f} s, {result.examples} "
                        f"examples, {result.calls} calls, {result.verdict} ({result.bugs} "
                        f"bugs), {result.lines} output lines, {result.case_files} case "
                        "files; " + ", ".join(f"{p} {v:.1f} s"
                                              for p, v in result.phases.items()))
                print(line, flush=True)
                out.append(line)
        lines = table(name, expected, runs)
        print("\n".join(lines), flush=True)
        out += lines
    if options.out is not None:
        with options.out.open("a") as f:
            f.write("\n".join(out) + "\n\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
