"""The run summary: per implementation, the verdict, its distinct bugs, coverage.

Each conformance test leaves a `record_of`: its tally of examples and features
(conv_harness.records.coverage) and the bugs it found (conv_harness/triage). A
`Summary` gathers the records of a run (`Summary.add`), merges the bugs of each
implementation across checks (one entry per distinct bug), and gives the summary's
lines and ``DIR/summary.json`` (contract section 4), written once, at the end of the
run, atomically. The pytest run hands it the records its workers attach to their
reports (conv_harness/summary_hooks.py); the in-process run (conv_harness/run.py)
hands them over directly.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from conv_harness.checks import oracle
from conv_harness.checks.registry import REGISTRY
from conv_harness.problem import OPS, ConvProblem
from conv_harness.records import coverage
from conv_harness.records.failures import atomic_write
from conv_harness.running.loader import Implementation
from conv_harness.running.target import Target
from conv_harness.triage.catalog import Bug, merge
from conv_harness.triage.history import CallLog, verify_alone
from strategies.cases import noise_case
from strategies.problems import never_drawn

SUMMARY_FILE = "summary.json"



@dataclass
class ImplementationRecord:
    outcomes: dict[tuple[str, str], str] = field(default_factory=dict)  # (check, op) -> outcome
    examples: Counter = field(default_factory=Counter)  # (check, op) -> examples drawn
    tally: Counter = field(default_factory=Counter)
    bugs: list[Bug] = field(default_factory=list)  # as each test found them, not merged
    largest: dict[str, int] = field(default_factory=dict)  # the largest sizes reached
    crashed: list[str] = field(default_factory=list)  # tests whose process died
    skipped: dict[tuple[str, str], str] = field(default_factory=dict)  # (check, op) -> why
    warnings: int = 0  # how many warnings its calls raised
    first_warning: str | None = None
    #: check -> what its tests' examples exercised (the features and paths they counted)
    reached: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))


def record_of(impl: str, op: str, check: str, tally: coverage.Tally,
                bugs: Sequence[dict], torch: bool) -> dict[str, Any]:
    """What one test of ``check`` on ``impl``'s ``op`` leaves for the summary (as JSON:
    it travels from a pytest-xdist worker to the controller): its tally, its bugs
    (`Bug.to_json`), and whether its process could import torch."""
    return {"impl": impl, "op": op, "check": check, "tally": dict(tally.features),
            "bugs": list(bugs), "sizes": dict(tally.largest), "torch": torch,
            "warnings": (tally.warnings, tally.first_warning)}


class Summary:
    """A run's record, filled from its tests' records."""

    def __init__(self, implementations: list[Implementation], failures_dir: Path | None = None):
        self.implementations = implementations
        self.failures_dir = failures_dir
        self.records: dict[str, ImplementationRecord] = defaultdict(ImplementationRecord)
        self.torch_missing = False  # as the processes that ran the tests found it

    def add(self, value: dict[str, Any], outcome: str, skip_reason: str = "") -> None:
        """One test's `record_of` and its outcome ("passed", "failed", "skipped",
        with ``skip_reason``)."""
        record = self.records[value["impl"]]
        slot = (value["check"], value["op"])
        if record.outcomes.get(slot) != "failed":
            record.outcomes[slot] = outcome
        if outcome == "skipped":
            record.skipped[slot] = skip_reason
        record.tally.update(value["tally"])
        if outcome != "skipped":
            record.reached[value["check"]].update(
                name for name, count in value["tally"].items() if count)
        record.examples[slot] += value["tally"].get("examples", 0)
        record.bugs += [Bug.from_json(raw) for raw in value.get("bugs", [])]
        for name, size in value.get("sizes", {}).items():
            record.largest[name] = max(size, record.largest.get(name, 0))
        self.torch_missing |= value.get("torch") is False
        count, first = value.get("warnings") or (0, None)
        record.warnings += count
        record.first_warning = record.first_warning or first

    def add_crash(self, check: str, target: str, saved: Sequence[Path]) -> None:
        """A conformance test of ``check`` on ``target`` (its id, ``impl-op``) whose
        process died without its record (a crash under xdist): its verdict still counts,
        and each case its controller ``saved`` is an entry of the bug list, its script
        run alone."""
        for impl in self.implementations:
            for op in OPS:
                if target == f"{impl.name}-{op}":
                    record = self.records[impl.name]
                    record.outcomes[(check, op)] = "failed"
                    record.crashed.append(f"{check} ({op})")
                    for path in saved:
                        bug = crash_bug(path)
                        if bug is not None:  # its script makes the call in a child
                            verify_alone(Target(impl, op, None, path.parent), [bug],
                                         CallLog(), set(), rebuild_history=False)
                            record.bugs.append(bug)

    def distinct_bugs(self, impl: Implementation) -> list[Bug]:
        record = self.records.get(impl.name, ImplementationRecord())
        return merge(record.bugs, list(REGISTRY))

    def as_json(self) -> dict[str, Any]:
        """Contract section 4's summary.json."""
        out = []
        for impl in self.implementations:
            record = self.records.get(impl.name, ImplementationRecord())
            failed = any(o == "failed" for o in record.outcomes.values())
            bugs = [bug_entry(bug) for bug in self.distinct_bugs(impl)]
            notes = coverage.split(record.tally)[1]
            out.append({"impl": impl.spec, "verdict": "failed" if failed else (
                "passed" if record.outcomes else "nothing ran"),
                "examples": record.tally.get("examples", 0), "bugs": bugs,
                "sweep_visits": record.tally.get(coverage.VISITS, 0),
                "examples_per_test": {f"{check} {op}": n for (check, op), n in
                                      sorted(record.examples.items())},
                "notes": sorted(notes), "largest": dict(record.largest),
                "archetypes": coverage.archetypes(record.tally),
                "paths": {path: record.tally.get(path, 0) for path in impl.paths},
                "paths_by_check": {path: checks_reaching(record, path) for path in impl.paths},
                "arrays": {"library": impl.capabilities.arrays,
                           "device": impl.capabilities.device, "derived": impl.derived()},
                "crashed": list(record.crashed),
                "warnings": dict(zip(("count", "first"), warnings_of(impl, record))),
                "operations_not_run": operations_not_provided(impl),
                "checks_not_run": checks_not_run(impl, record)})
        return {"implementations": out}

    def write(self) -> None:
        """summary.json in the failures folder, if any test ran (a replay, or a run of
        other tests, has none) and the folder is writable."""
        if self.failures_dir is None or not self.records:
            return
        try:
            atomic_write(self.failures_dir / SUMMARY_FILE,
                         json.dumps(self.as_json(), indent=1) + "\n")
        except OSError:
            pass

    def lines(self) -> list[str]:
        """The summary as printed at the end of a run: empty where no test ran."""
        if not self.records:
            return []
        lines = []
        if self.torch_missing:  # the workers' word: importing torch here costs seconds
            lines.append("oracle checks (forward, grad_*) not run: PyTorch is not "
                         "importable; only the oracle-free checks ran")
        for impl in self.implementations:
            lines += self.describe(impl)
        if self.failures_dir is not None:
            lines.append(f"(this summary as JSON: {self.failures_dir / SUMMARY_FILE})")
        return lines

    def describe(self, impl: Implementation) -> list[str]:
        record = self.records.get(impl.name, ImplementationRecord())
        ops = [op for op in OPS if any(o == op for (_, o) in record.outcomes)]
        failed = sorted({f"{check} ({op})" for (check, op), outcome in record.outcomes.items()
                         if outcome == "failed"})
        verdict = ("FAILED: " + ", ".join(failed)) if failed else (
            "passed" if record.outcomes else "nothing ran")
        lines = [f"{impl.name} [{impl.spec}]: {verdict}"]
        if record.crashed:
            lines.append("  crashed its process (see the failure reports and "
                         "--isolate): " + ", ".join(record.crashed))
        lines += bug_lines(self.distinct_bugs(impl))
        if ops:
            width = max(len("check (examples)"), *(len(c) for c in REGISTRY)) + 2
            lines.append("  " + "check (examples)".ljust(width) + "".join(op.ljust(18) for op in ops))
            for check in REGISTRY:
                cells = [f"{record.outcomes[(check, op)]} ({record.examples[(check, op)]})"
                         if (check, op) in record.outcomes else "-" for op in ops]
                if any(cell != "-" for cell in cells):
                    lines.append("  " + check.ljust(width)
                                 + "".join(cell.ljust(18) for cell in cells))
        tally, notes = coverage.split(record.tally)
        examples = tally.pop("examples", 0)
        lines.append(f"  examples tried: {examples}")
        visits = tally.pop(coverage.VISITS, 0)
        if visits:
            lines.append(f"  catalogue sweep: {visits} visits (each archetype and each "
                         "declared path, once per check that passed and can hold them; for "
                         "checks of ordinary problems also its one-step neighbours, its ties, "
                         "its crossing, nine images and, in float16, sums of thousands of terms, "
                         "padded and not)")
        if record.largest:
            labels = {"batch": "batch", "channels_per_group": "channels per group",
                      "positions": "output positions per image", "kernel": "kernel",
                      "K": "reduction length K"}
            lines.append("  largest reached: " + ", ".join(
                f"{labels.get(name, name)} {size}" for name, size in record.largest.items()))
            caps = impl.capabilities
            lines.append("  never drawn (give such problems with --conv-problem): " + ", ".join(
                never_drawn(caps.dtypes, caps.bfloat16_accumulation)))
        if notes:
            lines.append("  noted (not failures): " + ", ".join(
                f"{text} ({count} {'time' if count == 1 else 'times'})"
                for text, count in sorted(notes.items())))
        if coverage.archetypes(tally):
            lines.append("  archetypes reached: " + coverage.archetype_text(tally))
        if impl.paths:
            lines.append("  dispatch paths it declares (examples): " + ", ".join(
                f"{path} ({path_reach(record, path, problems)})"
                for path, problems in impl.paths.items()))
        if tally:
            lines.append("  features covered: " + ", ".join(
                f"{name} ({count})" for name, count in sorted(tally.items())
                if not name.startswith(coverage.ARCHETYPE_PREFIX)))
        if impl.capabilities.arrays != "numpy":
            lines.append(f"  arrays: {impl.capabilities.arrays} on {impl.capabilities.device}"
                         + "".join(f"; {name} from {how} of its forward"
                                   for name, how in impl.derived().items()))
        excluded = impl.capabilities.not_generated()
        if excluded:
            lines.append("  not generated (its CAPABILITIES): " + ", ".join(excluded))
        count, first = warnings_of(impl, record)
        if count:
            lines.append(f"  warnings it raised (on import and in its calls): {count}; the "
                         f"first: {first}")
        lines += not_run_lines(impl, record)
        return lines


def checks_ran(record: ImplementationRecord) -> list[str]:
    """The checks that ran (not skipped) on some operation, in the registry's order."""
    ran = {check for (check, _), outcome in record.outcomes.items() if outcome != "skipped"}
    return [check for check in REGISTRY if check in ran]


def checks_reaching(record: ImplementationRecord, path: str) -> list[str]:
    """The checks that ran whose examples took ``path``."""
    return [check for check in checks_ran(record) if path in record.reached.get(check, ())]


def can_hold(check: str, problems: Sequence[ConvProblem]) -> bool:
    """Whether ``check``'s cases can hold one of a declared path's ``problems`` (a
    pointwise check cannot hold a 3x3 path's; finite differences cannot afford a
    large one)."""
    return any(REGISTRY[check].visit_case(noise_case(p)) is not None for p in problems)


def path_reach(record: ImplementationRecord, path: str,
               problems: Sequence[ConvProblem] = ()) -> str:
    """How many examples took a declared path, and in which checks that ran: each
    check whose cases can hold the path's ``problems`` should have some (the sweep
    visits them), so one without says so, and so do the checks that cannot."""
    count = record.tally.get(path, 0)
    if not count:
        return "0: not reached"
    ran, reaching = checks_ran(record), checks_reaching(record, path)
    unable = [check for check in ran if problems and not can_hold(check, problems)]
    able = [check for check in ran if check not in unable]
    missing = [check for check in able if check not in reaching]
    text = (f"{count}; none in {', '.join(missing)}" if missing else
            f"{count}, in each of the {len(able)} checks that can hold its problems"
            if able else str(count))
    if unable:
        text += f"; {', '.join(unable)} cannot"
    return text


#: why a crash under pytest-xdist without --isolate has a case neither minimal nor explained
CRASH_NOT_SHRUNK = ("the crash took its pytest-xdist worker down before the search could "
                    "shrink it")


def crash_bug(case_file: Path) -> Bug | None:
    """The entry of a crash that took a pytest-xdist worker down: the case its controller
    saved (conv_harness/running/isolate.py), neither shrunk nor explained. None for a file
    that is not such a case."""
    try:
        record = json.loads(case_file.read_text(encoding="utf-8"))
        check, op = record.get("run_check") or record["check"], record["op"]
        function = record.get("function") or op
        ConvProblem.from_params(op, record["params"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return Bug(check=check, failure="crashed", function=function, op=op,
               params=record["params"], layouts=record.get("layouts") or {},
               trigger="not explained: " + CRASH_NOT_SHRUNK,
               conditions=[], explanation=[], case_file=case_file.name,
               report=record.get("message", ""), checks=[check], functions=[function],
               not_minimal=CRASH_NOT_SHRUNK + " (--isolate contains crashes, shrinks and "
                                              "explains them)")


def bug_entry(bug: Bug) -> dict[str, Any]:
    """One distinct bug as summary.json lists it (contract section 4)."""
    entry = bug.to_json()
    entry["explanation"] = {"minimal": bug.params, "changes": entry["explanation"]}
    for internal in ("report", "sighting"):
        del entry[internal]
    return entry


def warnings_of(impl: Implementation, record: ImplementationRecord) -> tuple[int, str | None]:
    """How many warnings the implementation raised (importing it and in its calls), the first."""
    imported, first = impl.import_warnings
    return imported + record.warnings, first or record.first_warning


def operations_not_provided(impl: Implementation) -> list[str]:
    """The operations of which ``impl`` provides neither the forward nor the backward."""
    return [op for op, spec in OPS.items()
            if not impl.has(op) and not impl.has(spec.backward_name)]


def checks_not_run(impl: Implementation, record: ImplementationRecord) -> list[dict[str, str]]:
    """Each (check, operation) that did not run on an operation ``impl`` provides, and why:
    a function it lacks, or the reason its test was skipped (contract section 2)."""
    out = []
    absent = operations_not_provided(impl)
    for check, registered in REGISTRY.items():
        for op in OPS:
            if op in absent:
                continue
            missing = registered.missing(impl, op)
            if missing:
                joined = (" and " if registered.needs else " or ").join(missing)
                reason = f"needs {joined}, which it does not provide"
            elif (check, op) in record.skipped:
                reason = record.skipped[(check, op)]
            elif (check, op) not in record.outcomes:
                reason = "not collected (deselected, or the run stopped first)"
            else:
                continue
            out.append({"check": check, "op": op, "reason": reason})
    return out


def not_run_lines(impl: Implementation, record: ImplementationRecord) -> list[str]:
    """The summary's lines of what did not run: operations, then checks grouped by reason."""
    lines = []
    absent = operations_not_provided(impl)
    if absent:
        lines.append(f"  operations not run (it provides neither the function nor its "
                     f"backward): {', '.join(absent)}")
    ops_of: dict[tuple[str, str], list[str]] = defaultdict(list)  # (reason, check) -> ops
    for entry in checks_not_run(impl, record):
        ops_of[(entry["reason"], entry["check"])].append(entry["op"])
    grouped: dict[tuple[str, tuple[str, ...]], list[str]] = defaultdict(list)
    for (reason, check), ops in ops_of.items():
        grouped[(reason, tuple(ops))].append(check)
    for (reason, ops), checks in grouped.items():
        lines.append(f"  not run on {', '.join(ops)}: {', '.join(checks)}: {reason}")
    return lines


VALUE_FAILURES = ("forward", "grad_input", "grad_weight", "grad_bias")


def not_run_alone(bug: Bug) -> str:
    """Why ``bug``'s script was not run alone in a fresh process."""
    if bug.case_file is None:
        return "no case file was saved (see the failure's report)"
    if not oracle.torch_available():
        return "the scripts compare with torch, which is not installed"
    return "its script was not run"


def bug_lines(bugs: list[Bug]) -> list[str]:
    """The bug list of one implementation: a few lines per root cause, its other
    sightings counted on one line, never printed again."""
    if not bugs:
        return []
    alone = sum(bug.alone is True for bug in bugs)
    failed = sum(bug.alone is False for bug in bugs)
    head = f"  distinct bugs: {len(bugs)}"
    if alone != len(bugs):
        counts = [f"{alone} reproduced by their script alone"]
        counts += [f"{failed} not: see below"] if failed else []
        unrun = len(bugs) - alone - failed
        counts += [f"{unrun} not run alone: see below"] if unrun else []
        head += f" ({'; '.join(counts)})"
    lines = [head]
    for i, bug in enumerate(bugs, 1):
        what = f"{bug.failure} wrong" if bug.failure in VALUE_FAILURES else bug.failure
        functions = bug.functions or ([bug.function] if bug.function else [])
        lines.append(f"  {i}. {what}" + (f" in {', '.join(functions)}" if functions else "")
                     + f"; seen by {', '.join(bug.checks)}")
        lines.append(f"     minimal: {bug.descriptor()} ({bug.problem.describe()})"
                     + ("" if not bug.not_minimal else " NOT MINIMAL"))
        if bug.not_minimal:
            lines.append(f"     {bug.not_minimal}")
        if bug.found_on:
            lines.append(f"     found on: {bug.found_on}")
        lines.append(f"     trigger: {bug.trigger}")
        lines += [f"     also:    {other}" for other in bug.also[:3]]
        if bug.case_file:
            lines.append(f"     case file: {bug.case_file}")
        if bug.alone is False:
            lines.append("     DOES NOT REPRODUCE ALONE: "
                         + (bug.alone_reason or "its script passes in a fresh process"))
        elif bug.alone is None:
            lines.append("     not run alone: " + not_run_alone(bug))
        others = [s for s in bug.sightings if s.get("function") != bug.function
                  or s.get("failure") != bug.failure]
        if others:
            shown = sorted({f"{s['failure']} ({s['function']})" for s in others})
            lines.append(f"     also seen as: {', '.join(shown[:8])}"
                         + (f" and {len(shown) - 8} more" if len(shown) > 8 else ""))
    return lines
