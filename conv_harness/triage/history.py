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
  shape, keeping the first call's weights);
* the calls the run itself made before the failing one, from its own record
  (a `CallLog` in the run's state, the last `MAX_CALLS` calls of this
  process): the shortest tail of them that shows it (the last 1, 2, 4, ...
  calls): a state built up over several calls (a buffer pool, a counter), or
  left by particular values.

Where one of the first two shows it, it is tried on the plainest problem too
(`ConvProblem.plainest`), whose case then stands for the bug: Hypothesis cannot
shrink such a failure (a shape the run met before fails even on zeros).

The harness's own record of the calls is enough to rebuild the sequence,
and what it recorded in the case file (``before``) is enough to replay it:
the script and ``pytest --replay`` make those calls first; an earlier call
on another problem keeps its own parameters there.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections import deque
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from conv_harness.checks import oracle
from conv_harness.problem import ConvCase
from conv_harness.records.failures import (
    NATIVE_KEYS,
    atomic_write,
    case_record,
    load_case,
    save_case,
    script_path,
)
from conv_harness.records.script import render_script
from conv_harness.running.calling import CheckFailure
from conv_harness.running.target import Target
from conv_harness.triage.catalog import Bug
from conv_harness.triage.explain import values_for
from conv_harness.triage.runner import RUNNER

HISTORY = "history"  # the failure of a bug whose results depend on earlier calls
NOT_SHRUNK = ("not shrunk: a failure that depends on earlier calls does not repeat, so "
              "Hypothesis cannot shrink it; this is the last failing example")
NOT_REBUILT = ("its script passes alone in a fresh process, and no sequence of earlier calls "
               "rebuilt shows it there: the run saw it, its script does not reproduce it")
#: calls of the implementations under test this process keeps (`CallLog`): a state
#: may have been built while Hypothesis shrank, long before the final failing call
MAX_CALLS = 128
#: and at most this many bytes of their arrays (large cases are a megabyte or so)
MAX_BYTES = 64 << 20


@dataclass(frozen=True)
class Call:
    """One call the run made: which implementation (its spec), which function, on what."""

    spec: str
    function: str
    case: ConvCase


class CallLog:
    """The last `MAX_CALLS` calls this process made of the implementation under test.

    A call observer (conv_harness/running/calling.py): conv_harness/isolate_hooks.py
    installs it, and says which implementation the current test calls
    (``spec``; calls outside a conformance test are not recorded). It keeps
    references to the cases, which nothing changes after they are drawn.
    """

    def __init__(self, size: int = MAX_CALLS):
        self.spec: str | None = None
        self.calls: deque[Call] = deque(maxlen=size)
        #: the record as it was when a failure was saved, by its case file: the
        #: explanation and follow-up searches make calls of their own afterwards
        self.kept: dict[str, list[Call]] = {}
        self.bytes = 0  # of the recorded calls' arrays

    def __call__(self, case: ConvCase, function: str) -> None:
        if self.spec is None:
            return
        if len(self.calls) == self.calls.maxlen:
            self.bytes -= _nbytes(self.calls[0].case)
        self.calls.append(Call(self.spec, function, case))
        self.bytes += _nbytes(case)
        while self.bytes > MAX_BYTES and len(self.calls) > 1:
            self.bytes -= _nbytes(self.calls.popleft().case)

    def snapshot(self) -> list[Call]:
        return list(self.calls)

    def keep(self, case_file: Path | None, calls: list[Call] | None = None) -> None:
        """Keep the record (now, or ``calls``) for the failure saved in ``case_file``."""
        if case_file is None:
            return
        while len(self.kept) >= 16:
            self.kept.pop(next(iter(self.kept)))
        self.kept[str(Path(case_file).resolve())] = self.snapshot() if calls is None else calls

    def before(self, spec: str, function: str, case: ConvCase,
               case_file: Path | None = None) -> list[Call]:
        """``spec``'s recorded calls before its last call of ``function`` on ``case``
        (same problem, same values), oldest first, from the record kept for
        ``case_file`` if there is one; [] if that call is not recorded."""
        kept = None if case_file is None else self.kept.get(str(Path(case_file).resolve()))
        calls = [c for c in (self.calls if kept is None else kept) if c.spec == spec]
        for i in range(len(calls) - 1, -1, -1):
            if calls[i].function == function and _same_case(calls[i].case, case):
                return calls[:i]
        return []


def _nbytes(case: ConvCase) -> int:
    """What a case's arrays hold in memory: the call log's measure (`MAX_BYTES`), not a
    rule for which case is smaller (that is `ConvProblem.size_rank`)."""
    return sum(a.nbytes for a in case.arrays().values() if a is not None)


def _same_case(a: ConvCase, b: ConvCase) -> bool:
    if a.problem != b.problem:
        return False
    arrays_a, arrays_b = a.arrays(), b.arrays()
    return all((arrays_a[k] is None) == (arrays_b[k] is None) and
               (arrays_a[k] is None or np.array_equal(arrays_a[k], arrays_b[k], equal_nan=True))
               for k in arrays_a)


#: this process's record of calls (see `CallLog`)
#: failures whose script `verify_alone` does not run: a history bug's scripts were run
#: alone when it was made one (`rebuild` tries its sequences in fresh processes and
#: sets ``alone``). A time-out's script exits 1 once its recorded limit has passed,
#: even inside a C call, and a crash's makes the call in a child process whose death
#: is its failure: both are run as any other
_NOT_VERIFIED = frozenset({HISTORY})
SCRIPT_SECONDS = 120.0


def _start(script: Path) -> tuple[int | None, str]:
    """Run ``script`` as if alone in a fresh Python (conv_harness/triage/runner.py: a forked
    child of a process that imported only NumPy and torch): its exit code and output."""
    return RUNNER.run(script, SCRIPT_SECONDS)


def _fails(ran: tuple[int | None, str], kind: str = "") -> bool | None:
    """True: the script reproduced the failure (exit 1); False: it passed; None: neither.

    A ``raised`` bug's script reproduces it by raising the same exception: it exits 1
    with Python's traceback, not its own FAILED line. The FAILED line, or the
    traceback, may follow a note (a property check's script says that it compares
    every result with torch)."""
    code, out = ran
    lines = [line for line in out.splitlines() if line.strip()]
    failed = any(line.startswith("FAILED") for line in lines)
    noted_only = all(line.startswith("note:") for line in lines)
    if code == 1 and (failed or (kind == "raised" and noted_only)):
        return True
    return False if code == 0 else None


def _identity(target: Target, bug: Bug) -> str:
    return json.dumps([target.impl.spec, bug.failure, bug.function, bug.op,
                       [c.to_json() for c in bug.conditions]], sort_keys=True)


def verify_alone(target: Target, bugs: list[Bug], calls: CallLog, verified: set[str],
                 rebuild_history: bool = True) -> None:
    """Run each bug's saved script in a fresh process: it must reproduce the failure.

    A bug whose script passes there becomes a ``history`` bug, with a sequence
    of calls rebuilt for it where one of the candidates shows it (without
    ``rebuild_history``, for a sighting of a known cause: only ``alone`` False).
    A bug this process has already verified (in ``verified``, by what makes it
    one bug: several checks find the same one, and a script costs a fresh process,
    about 2 s) is not run again. ``calls`` is the run's record of calls.
    """
    if not oracle.torch_available():  # the scripts need torch
        return
    runs = []
    for bug in bugs:
        script = None if bug.case_file is None else script_path(target.failures_dir / bug.case_file)
        if _identity(target, bug) in verified:
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
        verdict = _fails(proc, bug.failure)
        if verdict:
            bug.alone = True
            verified.add(_identity(target, bug))
            bug.report += "\nverified: its script, run alone in a fresh process, fails (exit 1)"
        elif verdict is False and rebuild_history:
            _history(target, bug, calls)
        elif verdict is False:
            bug.alone = False


def _history(target: Target, bug: Bug, calls: CallLog) -> None:
    bug.alone = False
    head = (f"RESULTS DEPEND ON EARLIER CALLS: this {bug.failure} failure does not show when "
            "the same call is made alone in a fresh process (its first script passes); in "
            "the run, identical inputs gave a wrong result after other calls")
    rebuilt = rebuild(target, bug, calls)
    if rebuilt is None:
        head += ("\nno sequence rebuilt: neither the same call twice, nor a call on the same "
                 "problem with other values, nor the calls the run made before it (its own "
                 "record, those a case file holds) show it in a fresh process")
        bug.trigger = f"depends on earlier calls (alone it passes); {bug.trigger}"
        bug.alone_reason = NOT_REBUILT
    else:
        path, label, case = rebuilt
        _drop(target.failures_dir / bug.case_file)  # its script passes: it would mislead
        bug.case_file = os.path.relpath(path, target.failures_dir)
        bug.alone = True
        head += (f"\nrebuilt: first call right, wrong after {label}{_take_case(bug, case)}"
                 "; the case file and script below make those calls, and the script "
                 f"fails (exit 1):\ncase file: {path}\nscript:    python {script_path(path)}")
        bug.trigger = f"depends on earlier calls: wrong after {label}; {bug.trigger}"
    bug.report = head + "\n" + bug.report
    bug.failure = HISTORY


def _take_case(bug: Bug, case: ConvCase) -> str:
    """Make the rebuilt sequence's ``case`` the bug's; where that is the plainest
    problem, not the run's, the report's words for it (and the bug is minimal)."""
    if case.problem == bug.problem:
        return ""
    bug.params, bug.layouts = case.problem.params(), dict(case.layouts)
    bug.not_minimal = ""
    return (f", on the plainest problem ({case.problem.describe()}; the run's failing "
            "call was on a larger one)")


def _drop(case_file: Path) -> None:
    """Remove a case file (and its script) that the rebuilt sequence replaces."""
    script_path(case_file).unlink(missing_ok=True)
    case_file.unlink(missing_ok=True)


def _other_values(case: ConvCase) -> ConvCase:
    return values_for(case, case.problem, dict(case.layouts), False, seed=12345)


def _try(target: Target, record: dict, case: ConvCase,
         candidates: list[tuple[str, list[tuple[str, ConvCase]]]]
         ) -> tuple[dict, str] | None:
    """Run the candidates' scripts at once; the first (in order) that fails, with its label."""
    with tempfile.TemporaryDirectory() as tmp:
        procs = []
        for i, (_, before) in enumerate(candidates):
            trial = case_record(record["impl"], case, HISTORY, record.get("message", ""),
                                run_check=record.get("run_check"), before=before,
                                native={k: record[k] for k in NATIVE_KEYS if k in record})
            script = Path(tmp) / f"candidate{i}.py"
            atomic_write(script, render_script(trial, case, name=script.name), durable=False)
            procs.append((trial, _start(script)))
        found = None
        for (label, _), (trial, proc) in zip(candidates, procs):
            if _fails(proc) and found is None:
                found = trial, label
        return found


def _recorded(target: Target, bug: Bug, case: ConvCase, case_file: Path,
              log: CallLog) -> list[tuple[str, ConvCase]]:
    """The calls the run made before the failing one (its own record, ``log``) of the
    same op, the calls a case file can hold."""
    calls = log.before(target.impl.spec, bug.function, case, case_file)
    return [(c.function, c.case) for c in calls if c.case.problem.op == case.problem.op]


def _repeated_calls(function: str, case: ConvCase) -> list[tuple[str, list[tuple[str, ConvCase]]]]:
    """The candidates that need nothing the run recorded: the same call made once
    before, or a call on the same problem with other values."""
    return [("the same call made once before", [(function, case)]),
            ("a call on the same problem with other values", [(function, _other_values(case))])]


def rebuild(target: Target, bug: Bug, calls: CallLog) -> tuple[Path, str, ConvCase] | None:
    """A case file whose calls (``before``, then the failing one) show the bug in a
    fresh process, what came first, and the failing call's case; None if no
    candidate does.

    Hypothesis cannot shrink a failure that depends on earlier calls: a shape the
    run met before fails even on zeros, a new one only with other values. So where
    a repeated call shows it, the same sequence is tried on the plainest problem
    (`ConvProblem.plainest`, noise values) too, and kept where it fails: a cache keyed
    by shape fails there, a state that needs larger sizes does not."""
    if bug.case_file is None or bug.function is None:
        return None
    case_file = target.failures_dir / bug.case_file
    record, case = load_case(case_file)
    found = _try(target, record, case, _repeated_calls(bug.function, case))
    plainest = case.problem.plainest()
    if found is not None and plainest != case.problem:
        small = values_for(case, plainest, dict(case.layouts), False, seed=54321)
        label = found[1]
        smaller = _try(target, record, small, [c for c in _repeated_calls(bug.function, small)
                                               if c[0] == label])
        if smaller is not None:
            found, case = smaller, small
    if found is None:
        found = _from_record(target, record, case,
                             _recorded(target, bug, case, case_file, calls))
    if found is None:
        return None
    trial, label = found
    script = render_script(trial, case)
    return save_case(target.failures_dir, trial, target.impl.name, script=script), label, case


def _from_record(target: Target, record: dict, case: ConvCase,
                 calls: list[tuple[str, ConvCase]]) -> tuple[dict, str] | None:
    """The shortest tail of the run's recorded calls that shows the bug.

    The last 1, 2, 4, 8, ... calls, then all of them, two candidates at a
    time (a fresh process each), the shortest that fails winning: a state
    built by the last calls is found quickly, one built long before costs a
    few more rounds.
    """
    lengths = [n for n in (1, 2, 4, 8, 16, 32, 64) if n < len(calls)] + [len(calls)]
    for pair in (lengths[i:i + 2] for i in range(0, len(lengths), 2)) if calls else ():
        found = _try(target, record, case, [
            (f"the last {n} call{'s' if n > 1 else ''} the run made before it (its own "
             "record)", calls[-n:]) for n in pair])
        if found is not None:
            return found
    return None


def history_dependent(last, save_failure, saved_lines, calls: CallLog) -> Bug:
    """A failure Hypothesis could not reproduce: the same example failed, then passed.

    The results of identical calls differed, so they depend on what the
    implementation was called with before. Reported as such, on the last
    failing example, not as Hypothesis's "Flaky" traceback.
    """
    failure, target = last.failure, last.target
    case = last.case
    text = "\n".join([
        f"{target.impl.spec} {case.problem.op}: results depend on earlier calls: check "
        f"{last.check!r} failed on the example below, then passed when Hypothesis ran the "
        "same example again (identical calls gave different results in this process).",
        "Not shrunk: shrinking needs a failure that repeats.", last.text])
    history = CheckFailure(HISTORY, text, function=failure.function, case=case)
    path = save_failure(target, history, last.check, text, last.drawn)
    calls.keep(path, last.calls)
    case_file = None if path is None else os.path.relpath(path, target.failures_dir)
    lines = [text] + (saved_lines(path) if path is not None else [])
    bug = Bug(check=last.check, failure=HISTORY, function=failure.function, op=case.problem.op,
              params=case.problem.params(), layouts=dict(case.layouts),
              trigger="depends on earlier calls (the same call gave different results)",
              conditions=[], explanation=[], case_file=case_file, report="\n".join(lines),
              not_minimal=NOT_SHRUNK)
    bug.alone, bug.alone_reason = False, NOT_REBUILT
    if case_file is not None:
        rebuilt = rebuild(target, bug, calls)
        if rebuilt is not None:
            bug.alone, bug.alone_reason = True, ""
            path, label, rebuilt_case = rebuilt
            bug.case_file = os.path.relpath(path, target.failures_dir)
            bug.report += (f"\nrebuilt: wrong after {label}{_take_case(bug, rebuilt_case)}: "
                           f"case file {path}, script python {script_path(path)} (exit 1)")
    return bug
