"""Results that depend on earlier calls: found, rebuilt as a sequence, reported as such.

Every bug's saved script makes the failing call alone in a fresh process
(`verify_alone`). When it passes there, the same call failed in the run
only after other calls: a cache keyed by shape that returns an earlier
call's weights, a kernel compiled for an earlier call, uninitialised
memory. Such a bug is reported as failure ``history``, and the harness
rebuilds a sequence of calls that shows it in a fresh process (`rebuild`):
each candidate is a case file whose ``before`` lists the calls made first
(on the same problem), tried with its own script until one exits 1. The
candidates, shortest first:

* the same call twice ("first call right, the repeated call wrong": a kernel
  compiled or cached by the first call);
* a call on the same problem with other values first (a cache keyed by
  shape, keeping the first call's weights).

What the harness recorded (the case file with ``before``) is enough to
rebuild the sequence: the script and ``pytest --replay`` make those calls
first.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from harness.checks import oracle
from harness.plugin import Target
from harness.problem import ConvCase
from harness.reporting.failures import (
    atomic_write,
    case_record,
    load_case,
    save_case,
    script_path,
)
from harness.reporting.script import render_script
from harness.running.calling import CheckFailure
from harness.triage.catalog import Bug

HISTORY = "history"  # the failure of a bug whose results depend on earlier calls
#: failures whose script cannot be run alone to a verdict (it would hang or crash)
_NOT_VERIFIED = frozenset({"timeout", "crashed", HISTORY})
SCRIPT_SECONDS = 120.0


def _start(script: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(script)], cwd=os.getcwd(), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)


def _fails(proc: subprocess.Popen) -> bool | None:
    """True: the script reproduced the failure (exit 1); False: it passed; None: neither."""
    try:
        out, _ = proc.communicate(timeout=SCRIPT_SECONDS)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return None
    if proc.returncode == 1 and out.startswith("FAILED"):
        return True
    return False if proc.returncode == 0 else None


#: bugs whose script this process has seen fail alone, by what makes them one bug
#: (several checks find the same one: a script costs a fresh process, about 2 s)
_VERIFIED: set[str] = set()


def _identity(target: Target, bug: Bug) -> str:
    return json.dumps([target.impl.spec, bug.failure, bug.function, bug.op,
                       [c.to_json() for c in bug.conditions]], sort_keys=True)


def verify_alone(target: Target, bugs: list[Bug]) -> None:
    """Run each bug's saved script in a fresh process: it must reproduce the failure.

    A bug whose script passes there becomes a ``history`` bug, with a sequence
    of calls rebuilt for it where one of the candidates shows it. A bug this
    process has already verified (found again by another check) is not run again.
    """
    if not oracle.torch_available():  # the scripts need torch
        return
    runs = []
    for bug in bugs:
        script = None if bug.case_file is None else script_path(target.failures_dir / bug.case_file)
        if _identity(target, bug) in _VERIFIED:
            bug.alone = True
            bug.report += ("\nverified: the same bug's script, found by another check, "
                           "failed alone in a fresh process (exit 1)")
            runs.append(None)
            continue
        runs.append(None if bug.failure in _NOT_VERIFIED or script is None
                    or not script.is_file() else _start(script))
    for bug, proc in zip(bugs, runs):
        if proc is None:
            continue
        verdict = _fails(proc)
        if verdict:
            bug.alone = True
            _VERIFIED.add(_identity(target, bug))
            bug.report += "\nverified: its script, run alone in a fresh process, fails (exit 1)"
        elif verdict is False:
            _history(target, bug)


def _history(target: Target, bug: Bug) -> None:
    bug.alone = False
    head = (f"RESULTS DEPEND ON EARLIER CALLS: this {bug.failure} failure does not show when "
            "the same call is made alone in a fresh process (its first script passes); in "
            "the run, identical inputs gave a wrong result after other calls")
    rebuilt = rebuild(target, bug)
    if rebuilt is None:
        head += ("\nno sequence rebuilt: neither the same call twice nor a call on the same "
                 "problem with other values first shows it in a fresh process")
        bug.trigger = f"depends on earlier calls (alone it passes); {bug.trigger}"
    else:
        path, label = rebuilt
        _drop(target.failures_dir / bug.case_file)  # its script passes: it would mislead
        bug.case_file = os.path.relpath(path, target.failures_dir)
        bug.alone = True
        head += (f"\nrebuilt: first call right, wrong after {label}; the case file and "
                 f"script below make those calls, and the script fails (exit 1):\n"
                 f"case file: {path}\nscript:    python {script_path(path)}")
        bug.trigger = f"depends on earlier calls: wrong after {label}; {bug.trigger}"
    bug.report = head + "\n" + bug.report
    bug.failure = HISTORY


def _drop(case_file: Path) -> None:
    """Remove a case file (and its script) that the rebuilt sequence replaces."""
    script_path(case_file).unlink(missing_ok=True)
    case_file.unlink(missing_ok=True)


def _other_values(case: ConvCase) -> ConvCase:
    from harness.triage.explain import _data
    return _data(case, case.problem, dict(case.layouts), False, seed=12345)


def rebuild(target: Target, bug: Bug) -> tuple[Path, str] | None:
    """A case file whose calls (``before``, then the failing one) show the bug in a
    fresh process, and what came first; None if no candidate does."""
    if bug.case_file is None or bug.function is None:
        return None
    record, case = load_case(target.failures_dir / bug.case_file)
    candidates = [("the same call made once before", [(bug.function, case)]),
                  ("a call on the same problem with other values",
                   [(bug.function, _other_values(case))])]
    with tempfile.TemporaryDirectory() as tmp:
        procs = []
        for i, (_, before) in enumerate(candidates):
            trial = case_record(record["impl"], case, HISTORY, record.get("message", ""),
                                run_check=record.get("run_check"), before=before)
            script = Path(tmp) / f"candidate{i}.py"
            atomic_write(script, render_script(trial, case, name=script.name), durable=False)
            procs.append((trial, _start(script)))
        for (label, _), (trial, proc) in zip(candidates, procs):
            if _fails(proc):
                script = render_script(trial, case)
                return save_case(target.failures_dir, trial, target.impl.name,
                                 script=script), label
    return None


def history_dependent(last, save_failure, saved_lines) -> Bug:
    """A failure Hypothesis could not reproduce: the same example failed, then passed.

    The results of identical calls differed, so they depend on what the
    implementation was called with before. Reported as such, on the last
    failing example, not as Hypothesis's "Flaky" traceback.
    """
    failure, target = last.failure, last.target
    case = failure.case if failure.case is not None else last.drawn
    text = "\n".join([
        f"{target.impl.spec} {case.problem.op}: results depend on earlier calls: check "
        f"{last.check!r} failed on the example below, then passed when Hypothesis ran the "
        "same example again (identical calls gave different results in this process).",
        "Not shrunk: shrinking needs a failure that repeats.", last.text])
    history = CheckFailure(HISTORY, text, function=failure.function, case=case)
    path = save_failure(target, history, last.check, text, last.drawn)
    case_file = None if path is None else os.path.relpath(path, target.failures_dir)
    lines = [text] + (saved_lines(path) if path is not None else [])
    bug = Bug(check=last.check, failure=HISTORY, function=failure.function, op=case.problem.op,
              params=case.problem.params(), layouts=dict(case.layouts),
              trigger="depends on earlier calls (the same call gave different results)",
              conditions=[], explanation=[], case_file=case_file, report="\n".join(lines))
    if case_file is not None:
        rebuilt = rebuild(target, bug)
        if rebuilt is not None:
            path, label = rebuilt
            bug.case_file = os.path.relpath(path, target.failures_dir)
            bug.report += (f"\nrebuilt: wrong after {label}: case file {path}, script "
                           f"python {script_path(path)} (exit 1)")
    return bug
