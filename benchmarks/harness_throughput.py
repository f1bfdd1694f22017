"""How fast the conformance harness runs (issue 6, part 3).

Run from the repository root with one command:

    python -m benchmarks.harness_throughput

(options: ``--examples N`` per check, ``--impl SPEC``, ``--skip-pytest``,
``--out FILE``). It prints, and writes to ``--out`` (default
benchmarks/throughput-results.txt):

1. **Examples per second per worker** on the suite's small conv2d problems:
   for every registered check (``invalid`` is opt-in and left out), N
   examples through the real code path, ``conv_harness.searching.suite.run`` inside a
   Hypothesis ``@given`` with the project's ``dev`` profile (conftest.py),
   ``database=None`` and ``derandomize=True`` so every run draws the same
   cases. One process is one worker. Beside them, the same settings on a
   test that only draws as many integers as a case takes choices: what
   Hypothesis's engine alone costs per example, the floor for any strategy
   that makes that many choices; and the suite's own case strategy drawn
   with nothing run, the floor for any check on these cases.
2. **Where an example's time goes**: the functions the real path calls are
   wrapped with timers (exclusive time: a timer's own time minus the timers
   it calls), so the table splits each example into case generation
   (``data.draw``: Hypothesis drawing through strategies.conv_cases), the
   torch oracle (``oracle.evaluate``: results and magnitudes), the
   implementation's own calls, the crash record written before each call
   (as in every pytest process without --isolate; conv_harness/running/isolate.py), the
   harness's work around those calls
   (fresh input copies in their layouts, stdout capture, time limit, result
   validation, input-unchanged check), the tolerance and comparison, and
   what is left: Hypothesis's engine outside the test body plus the rest
   of ``suite.run``.
3. **pytest -n 2 against -n 0** on the main job (``tests/conformance``,
   every operation; about 1.5 minutes with one worker): both run as
   subprocesses, one after the other (``--rounds`` times each,
   alternating), wall time and the children's CPU time. The whole suite,
   not a slice of it: every pytest process pays seconds of start-up
   (importing torch and Hypothesis, collecting), which a short slice would
   mostly measure.
4. **Time to find and shrink the tutorial's bug**: ``pytest --impl
   conv_impl.tutorial -k "test_grad_input and conv2d]"`` with
   HYPOTHESIS_PROFILE=harness-test and a fixed ``--hypothesis-seed``; the
   test's "call" duration from ``--durations``.

The machine may be shared: the load average is printed with each part, and
wall times under load are upper bounds.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import io
import os
import platform
import re
import resource
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
if __package__ in (None, ""):  # run as a script: make the repo importable
    sys.path.insert(0, str(ROOT))

# --------------------------------------------------------------------------
# exclusive timers around the functions of the real code path
# --------------------------------------------------------------------------


#: clock of the breakdown: this process's CPU time (the machine may be
#: shared, and wall time then mostly measures the scheduler); --wall: wall time
CLOCK: Callable[[], float] = time.process_time


class Timers:
    """Exclusive time (of CLOCK) per label: nested timed calls are charged to the
    innermost label only."""

    def __init__(self) -> None:
        self.total: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self._stack: list[list[float]] = []  # per open timer: [start, child time]

    def wrap(self, label: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            frame = [CLOCK(), 0.0]
            self._stack.append(frame)
            try:
                return fn(*args, **kwargs)
            finally:
                self._stack.pop()
                spent = CLOCK() - frame[0]
                self.total[label] += spent - frame[1]
                self.calls[label] += 1
                if self._stack:
                    self._stack[-1][1] += spent
        return timed

    def reset(self) -> None:
        self.total.clear()
        self.calls.clear()


@contextlib.contextmanager
def patched(obj: Any, name: str, value: Any):
    old = getattr(obj, name)
    setattr(obj, name, value)
    try:
        yield
    finally:
        setattr(obj, name, old)


def instrument(timers: Timers, impl: Any) -> contextlib.ExitStack:
    """Wrap the functions of the real path with timers; undone on exit."""
    from hypothesis.strategies._internal.core import DataObject

    import conv_harness.checks.oracle as oracle
    import conv_harness.checks.registry as checks
    import conv_harness.running.calling as calling

    stack = contextlib.ExitStack()
    stack.enter_context(patched(DataObject, "draw",
                                timers.wrap("case generation (data.draw)", DataObject.draw)))
    stack.enter_context(patched(oracle, "evaluate",
                                timers.wrap("oracle: results and magnitudes (torch)",
                                            oracle.evaluate)))
    harness_call = "harness around the call (copies, capture, validation)"
    compare_label = "tolerance + comparison"
    modules = [checks]
    try:
        import conv_harness.checks.properties as properties
        modules.append(properties)
    except ImportError:  # pragma: no cover
        pass
    for mod in modules:
        for name, label in (("call_forward", harness_call), ("call_backward", harness_call),
                            ("compare", compare_label), ("tolerance", compare_label)):
            if hasattr(mod, name):
                stack.enter_context(patched(mod, name, timers.wrap(label, getattr(mod, name))))
    if hasattr(calling, "invoke"):
        stack.enter_context(patched(calling, "invoke",
                                    timers.wrap(harness_call, calling.invoke)))
    wrapped = {name: timers.wrap("implementation's own calls", fn)
               for name, fn in impl.functions.items()}
    stack.enter_context(patched(impl, "functions", wrapped))
    return stack


# --------------------------------------------------------------------------
# part 1 and 2: examples per second, and where the time goes
# --------------------------------------------------------------------------


def _choices_made(data: Any) -> int:
    """How many choices Hypothesis has recorded for this example so far (private API:
    0 if this Hypothesis version keeps them elsewhere)."""
    return len(getattr(getattr(data, "conjecture_data", None), "choices", ()))


def engine_floor(choices: int, examples: int, base: Any) -> tuple[float, float]:
    """(wall s, CPU s) of Hypothesis running a test that only draws ``choices``
    integers, with the suite's settings: what any test with that many choices costs."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    integers = st.integers(0, 10)

    @st.composite
    def draws(draw: Any) -> list[int]:
        return [draw(integers) for _ in range(choices)]

    @settings(base, max_examples=examples, database=None, derandomize=True)
    @given(draws())
    def test(values: list[int]) -> None:
        pass

    w0, c0 = time.perf_counter(), time.process_time()
    test()
    return time.perf_counter() - w0, time.process_time() - c0


def strategy_floor(target: Any, examples: int, base: Any) -> tuple[float, float, int]:
    """(wall s, CPU s, mean choices) of Hypothesis drawing the suite's own cases
    (the ``forward`` check's strategy) with nothing run: the floor for any
    check, however cheap, on these cases."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from conv_harness.searching import suite

    cases = suite.case_strategy("forward", target.op, target.impl.capabilities)
    choices = [0]

    @settings(base, max_examples=examples, database=None, derandomize=True)
    @given(data=st.data())
    def test(data: st.DataObject) -> None:
        data.draw(cases)
        choices[0] += _choices_made(data)

    test()  # untimed: the first examples of a process pay for imports and caches
    choices[0] = 0
    w0, c0 = time.perf_counter(), time.process_time()
    test()
    return time.perf_counter() - w0, time.process_time() - c0, round(choices[0] / examples)


def throughput(spec: str, examples: int, op: str, out: Callable[[str], None]) -> None:
    from hypothesis import given, settings
    from hypothesis import strategies as st

    import conftest  # noqa: F401  (registers and loads the project's profiles)
    from conv_harness.searching import suite
    from conv_harness.checks import oracle
    from conv_harness.checks.registry import REGISTRY
    from conv_harness.running import calling
    from conv_harness.options import DEFAULT_TIMEOUT
    from conv_harness.running.isolate import CrashRecorder
    from conv_harness.running.loader import load_implementation
    from conv_harness.running.target import Target

    impl = load_implementation(spec)
    oracle.warm_up()  # what the suite's session fixture does once per worker
    failures = Path(tempfile.mkdtemp(prefix="throughput-failures-"))
    target = Target(impl, op, DEFAULT_TIMEOUT, failures)
    base = settings.get_profile("dev")
    out(f"## 1. examples per second per worker ({spec}, {op}, {examples} examples per check,")
    out("##    profile dev, database=None, derandomize=True; one process = one worker)")
    out(f"load average at start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    out(f"{'check':<20} {'examples':>8} {'wall s':>8} {'ex/s':>8} {'CPU s':>8} "
        f"{'ex/CPUs':>9} {'ms/ex':>7}")

    # warm-up, untimed: the first calls of torch's autograd and of each
    # code path in a process are slow (the suite pays it once per worker)
    for name, check in REGISTRY.items():
        if name != "invalid" and check.applies_to(impl, op):
            @settings(base, max_examples=10, database=None, derandomize=True)
            @given(data=st.data())
            def warm(data: st.DataObject, ) -> None:
                suite.run(target, warm_name, data)
            warm_name = name
            try:
                warm()
            except Exception:  # noqa: BLE001 - reported by the timed run
                pass

    timers = Timers()
    # what the isolate plugin does in every pytest process without --isolate:
    # record each call's case before the call, in case the process dies in it
    recorder = CrashRecorder(failures, f"pid{os.getpid()}", "")
    calling.set_call_observer(timers.wrap("crash record before each call", recorder))
    per_check: dict[str, dict[str, float]] = {}
    all_labels: list[str] = []
    totals = dict(n=0, wall=0.0, cpu=0.0, body=0.0, choices=0)
    for name, check in REGISTRY.items():
        if name == "invalid" or not check.applies_to(impl, op):
            continue
        count = [0]
        body = [0.0]
        choices = [0]

        def make_test(check_name: str) -> Callable[[], None]:
            @settings(base, max_examples=examples, database=None, derandomize=True)
            @given(data=st.data())
            def test(data: st.DataObject) -> None:
                t0 = CLOCK()
                try:
                    suite.run(target, check_name, data)
                finally:
                    body[0] += CLOCK() - t0
                    count[0] += 1
                    choices[0] += _choices_made(data)
            return test

        test = make_test(name)
        recorder.current = (spec, impl.name, name)

        timers.reset()
        status = ""
        with instrument(timers, impl):
            w0, c0 = time.perf_counter(), time.process_time()
            try:
                test()
            except Exception as exc:  # noqa: BLE001 - report, do not stop
                status = f"  FAILED: {type(exc).__name__}: {str(exc).splitlines()[0][:80]}"
            wall, cpu = time.perf_counter() - w0, time.process_time() - c0
        n = max(count[0], 1)
        out(f"{name:<20} {count[0]:>8} {wall:8.2f} {count[0] / wall:8.0f} {cpu:8.2f} "
            f"{count[0] / cpu:9.0f} {1e3 * wall / n:7.2f}{status}")
        split = dict(timers.total)
        split["rest of suite.run (check dispatch)"] = body[0] - sum(timers.total.values())
        split["Hypothesis engine outside the test body"] = (
            (wall if CLOCK is time.perf_counter else cpu) - body[0])
        per_check[name] = {k: v / n for k, v in split.items()}
        for k in split:
            if k not in all_labels:
                all_labels.append(k)
        totals["n"] += count[0]
        totals["wall"] += wall
        totals["cpu"] += cpu
        totals["choices"] += choices[0]
    calling.set_call_observer(None)
    n, wall, cpu = max(totals["n"], 1), totals["wall"] or 1.0, totals["cpu"] or 1.0
    out(f"{'all checks':<20} {n:>8} {wall:8.2f} {n / wall:8.0f} {cpu:8.2f} {n / cpu:9.0f} "
        f"{1e3 * wall / n:7.2f}")
    mean_choices = round(totals["choices"] / n)
    floor_wall, floor_cpu = engine_floor(mean_choices, examples * 5, base)
    out(f"{'Hypothesis alone':<20} {examples * 5:>8} {floor_wall:8.2f} "
        f"{examples * 5 / floor_wall:8.0f} {floor_cpu:8.2f} {examples * 5 / floor_cpu:9.0f} "
        f"{1e3 * floor_wall / (examples * 5):7.2f}   (a test that only draws {mean_choices} "
        "integers: the mean number of choices per example above)")
    n_floor = examples * 5
    case_wall, case_cpu, case_choices = strategy_floor(target, n_floor, base)
    out(f"{'cases drawn alone':<20} {n_floor:>8} {case_wall:8.2f} {n_floor / case_wall:8.0f} "
        f"{case_cpu:8.2f} {n_floor / case_cpu:9.0f} {1e3 * case_wall / n_floor:7.2f}   "
        f"(the suite's case strategy, {case_choices} choices, nothing run)")
    out("target (issue 6): >= 500 examples/s per worker\n")

    clock = "wall" if CLOCK is time.perf_counter else "process CPU"
    out(f"## 2. where an example's time goes (ms per example, exclusive {clock} time)")
    order = ["case generation (data.draw)", "Hypothesis engine outside the test body",
             "oracle: results and magnitudes (torch)",
             "implementation's own calls", "crash record before each call",
             "harness around the call (copies, capture, validation)",
             "tolerance + comparison", "rest of suite.run (check dispatch)"]
    labels = [k for k in order if k in all_labels] + [k for k in all_labels if k not in order]
    names = list(per_check)
    short = {nm: nm[:9] for nm in names}
    out(f"{'':<48}" + "".join(f"{short[nm]:>10}" for nm in names) + f"{'mean':>9} {'share':>6}")
    sums = {lab: sum(per_check[nm].get(lab, 0.0) for nm in names) / len(names) for lab in labels}
    grand = sum(sums.values())
    for lab in labels:
        out(f"{lab:<48}" + "".join(f"{1e3 * per_check[nm].get(lab, 0.0):10.2f}" for nm in names)
            + f"{1e3 * sums[lab]:9.2f} {100 * sums[lab] / grand:5.0f}%")
    out(f"{'total':<48}" + "".join(f"{1e3 * sum(per_check[nm].values()):10.2f}" for nm in names)
        + f"{1e3 * grand:9.2f}")
    out("")


# --------------------------------------------------------------------------
# part 3 and 4: pytest subprocesses
# --------------------------------------------------------------------------


def _pytest(args: list[str], env: dict[str, str] | None = None) -> tuple[float, float, str, int]:
    """(wall s, children's CPU s, output, return code) of one pytest run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "pytest", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, proc.stdout + proc.stderr, proc.returncode


def _summary_line(output: str) -> str:
    lines = [ln.strip("= ") for ln in output.strip().splitlines()
             if re.search(r"\d+ (passed|failed|error)", ln)]
    return lines[-1] if lines else "(no summary line)"


def xdist_speedup(spec: str, rounds: int, out: Callable[[str], None]) -> None:
    common = ["-q", "-p", "no:cacheprovider", "tests/conformance", "--impl", spec]
    out("## 3. pytest -n 2 against -n 0 (the main job: tests/conformance, every op, "
        "profile dev)")
    out(f"command: python -m pytest {' '.join(common)} -n {{0,2}}")
    out(f"{'run':<8} {'wall s':>8} {'CPU s':>8} {'load':>5}  result")
    walls: dict[str, list[float]] = {"-n 0": [], "-n 2": []}
    for _ in range(rounds):
        for workers in ("0", "2"):
            load = os.getloadavg()[0]
            wall, cpu, text, rc = _pytest(common + ["-n", workers])
            walls[f"-n {workers}"].append(wall)
            out(f"{'-n ' + workers:<8} {wall:8.1f} {cpu:8.1f} {load:5.1f}  "
                f"rc={rc} {_summary_line(text)}")
    w0, w2 = min(walls["-n 0"]), min(walls["-n 2"])
    out(f"speedup of -n 2 over -n 0 (best wall times): {w0 / w2:.2f}x "
        f"(target: >= 1.7x on 2 cores; meaningful only on an otherwise idle machine:\n"
        f"compare the load average with the {os.cpu_count()} CPUs, and CPU s with wall s)\n")


def tutorial_bug(seed: int, out: Callable[[str], None]) -> None:
    failures = tempfile.mkdtemp(prefix="throughput-tutorial-")
    args = ["--impl", "conv_impl.tutorial", "-k", "test_grad_input and conv2d]",
            "-p", "no:cacheprovider", f"--hypothesis-seed={seed}", "--durations=5",
            "--durations-min=0", "--conv-failures", failures]
    out("## 4. find and shrink the tutorial's bug")
    out(f"command: HYPOTHESIS_PROFILE=harness-test python -m pytest {' '.join(args)}")
    env = dict(os.environ, HYPOTHESIS_PROFILE="harness-test")
    load = os.getloadavg()[0]
    wall, cpu, text, rc = _pytest(args, env)
    calls = re.findall(r"^\s*([\d.]+)s call\s+(\S+)", text, flags=re.M)
    # Hypothesis 6.170 says "Failing test case" where earlier versions said "Falsifying example"
    falsified = re.search(r"Falsifying example|Failing test case", text)
    found = "found" if rc == 1 and falsified else f"NOT found (rc={rc})"
    out(f"bug {found}; load average {load:.1f}; whole pytest process: {wall:.1f} s wall, "
        f"{cpu:.1f} s CPU")
    for seconds, test in calls:
        out(f"  call {float(seconds):6.2f} s  {test}")
    shrunk = re.search(r"parameters: (.*)", text)
    if shrunk:
        out(f"  shrunk to: {shrunk.group(1)}")
    out("target (issue 6): found and shrunk in under 10 s of test time\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--impl", default="conv_impl.einsum")
    ap.add_argument("--op", default="conv2d")
    ap.add_argument("--examples", type=int, default=100, help="examples per check")
    ap.add_argument("--rounds", type=int, default=1, help="runs of each of -n 0 and -n 2")
    ap.add_argument("--seed", type=int, default=0, help="--hypothesis-seed of part 4")
    ap.add_argument("--skip-pytest", action="store_true", help="parts 1 and 2 only")
    ap.add_argument("--wall", action="store_true",
                    help="break the time down in wall time instead of process CPU time")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "throughput-results.txt"))
    args = ap.parse_args(argv)
    os.chdir(ROOT)
    global CLOCK
    if args.wall:
        CLOCK = time.perf_counter
    lines: list[str] = []

    def out(text: str) -> None:
        print(text, flush=True)
        lines.append(text)

    import hypothesis
    import numpy as np
    import torch
    out(f"# python -m benchmarks.harness_throughput  ({time.strftime('%Y-%m-%d %H:%M')})")
    out(f"python {platform.python_version()}, numpy {np.__version__}, torch {torch.__version__}, "
        f"hypothesis {hypothesis.__version__}; {os.cpu_count()} CPUs, load average "
        f"{os.getloadavg()[0]:.1f}\n")
    throughput(args.impl, args.examples, args.op, out)
    if not args.skip_pytest:
        xdist_speedup(args.impl, args.rounds, out)
        tutorial_bug(args.seed, out)
    if args.out:
        Path(args.out).write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
