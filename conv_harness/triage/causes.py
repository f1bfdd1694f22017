"""The causes known run-wide: found once, excluded from every other search.

When a search explains a new cause, it writes the cause's record (its `Bug`
as JSON) to ``DIR/.causes/<run>/``, atomically; every search of every xdist
worker reads the folder (new files only) and does not count a failure a
known cause covers (`covers`): another check, another function, another
worker meets it as a *sighting*, which costs no shrinking, no explanation, no
case file, and is listed under the cause's entry. A finding attributed to a
known cause on evidence (conv_harness/triage/catalog.py, `part_of`) is written as
a sighting record, which then covers that kind of failure of that function too.

The run's id comes from the xdist controller (`new_run`, before the workers
start; each worker gets it in its ``workerinput``, `RUN_INPUT`), so that a
folder reused by the next run starts with no known cause.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from pathlib import Path
from typing import Any

from conv_harness.problem import ConvCase
from conv_harness.records.failures import atomic_write
from conv_harness.running.calling import CheckFailure, Timeout
from conv_harness.running.loader import Implementation
from conv_harness.triage import evidence
from conv_harness.triage.catalog import Bug, signature
from conv_harness.triage.explain import matches

#: the key of a pytest-xdist worker's ``workerinput`` that holds the run's id
RUN_INPUT = "conv_harness_run"
FOLDER = ".causes"


def new_run(failures_dir: Path) -> str:
    """Start a run's record (on the controller, before any worker): a new id, no causes."""
    run = uuid.uuid4().hex[:12]
    shutil.rmtree(failures_dir / FOLDER, ignore_errors=True)
    return run


def end_run(failures_dir: Path) -> None:
    """Remove the run's record (on the controller, once every worker has finished)."""
    shutil.rmtree(failures_dir / FOLDER, ignore_errors=True)


def new_id() -> str:
    return uuid.uuid4().hex[:12]


class CauseBook:
    """This process's view of the run's known causes (records written by any process)."""

    def __init__(self) -> None:
        self.folder: Path | None = None
        self.records: dict[str, tuple[str, Bug]] = {}  # file name -> (impl spec, bug)
        self.frozen: dict[str, tuple[str, Bug]] | None = None  # what searches see
        self.own: set[str] = set()  # the records this process wrote

    def open(self, failures_dir: Path, run: str) -> None:
        """Read and write the causes of run ``run`` (`new_run`'s id) in ``failures_dir``."""
        self.folder = failures_dir / FOLDER / run
        self.records, self.frozen, self.own = {}, None, set()

    def publish(self, spec: str, bug: Bug) -> None:
        """Write ``bug``'s record (a new cause, or a sighting attributed to one)."""
        if self.folder is None or not bug.cause:
            return
        name = f"{bug.cause}-{new_id()}.json" if bug.sighting else f"{bug.cause}.json"
        raw = {"impl": spec, "bug": {**bug.to_json(), "report": ""}}
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            atomic_write(self.folder / name, json.dumps(raw), durable=False)
        except OSError:
            return
        # a copy, as every other process reads it: the finder's own Bug changes after
        # publishing (its script verified alone may make it a history bug)
        self.records[name] = (spec, Bug.from_json(raw["bug"]))
        self.own.add(name)

    def freeze(self) -> None:
        """Read the folder now, and let `known` give what it held until the next freeze:
        a search's notion of what is known must not change while Hypothesis shrinks and
        replays its failure (a failure covered only at its replay would be 'flaky')."""
        self.frozen = None
        self.frozen = dict(self._read())

    def grown(self) -> bool:
        """Whether another process wrote records since the last `freeze`: the next
        search's view of what is known differs from the last one's by more than what
        this process published from it."""
        frozen = self.frozen
        return frozen is not None and any(name not in frozen and name not in self.own
                                          for name in self._read())

    def known(self, spec: str, fresh: bool = False) -> list[Bug]:
        """The causes and sightings of ``spec`` known so far (as of the last `freeze`,
        unless ``fresh``), causes first."""
        records = self._read() if fresh or self.frozen is None else self.frozen
        found = [bug for impl, bug in records.values() if impl == spec]
        return sorted(found, key=lambda b: b.sighting)

    def _read(self) -> dict[str, tuple[str, Bug]]:
        if self.folder is not None and self.folder.is_dir():
            for name in sorted(os.listdir(self.folder)):
                if name in self.records or not name.endswith(".json"):
                    continue
                try:
                    raw = json.loads((self.folder / name).read_text())
                    self.records[name] = (raw["impl"], Bug.from_json(raw["bug"]))
                except (OSError, ValueError, KeyError):
                    continue  # not there yet, or half a file from another tool
        return self.records


def covers(record: Bug, failure: CheckFailure, case: ConvCase, impl: Implementation,
           timeout: Timeout) -> bool:
    """Whether a known cause (or a sighting of one) covers ``failure`` on ``case``.

    The same kind of failure of the same function in the record's trigger
    region; for a sighting attributed by evidence, that evidence again (its
    errors the size of the lower precision's rounding, or its forward wrong and
    the backward its exact gradient: a few calls, for failing examples only);
    for a cause, also the same kind and signature in another function, in its
    trigger region (when it has one, or a signature more specific than the kind).
    Where the signature is the kind alone (a wrong forward), the trigger is all
    that ties the two together, so its axis conditions are read on the axes of
    the same name (conv_harness/triage/explain.py's `matches`, ``same_axes``):
    conv1d's "stride >= 2" covers a conv3d failure with its last stride >= 2,
    not one whose stride is on its first axis only. An exception's message
    says more: one raised by any axis's dilation stays one cause.
    """
    p, layouts = case.problem, case.layouts
    same_call = (failure.check, failure.function) == (record.failure, record.function)
    if same_call:
        if not matches(record.conditions, p, layouts):
            return False
        low = record.evidence.get("precision") if record.sighting else None
        if low:
            return _quietly(lambda: evidence.precision(impl, failure.function, case, timeout,
                                                       failure.check) == low)
        if record.sighting and record.evidence.get("consistent"):
            return bool(_quietly(lambda: evidence.gather(impl, failure, case, timeout).get(
                "consistent")))
        return True
    if record.sighting or failure.check != record.failure:
        return False
    specific = record.signature not in ("", record.failure)
    return (signature(failure.check, failure.message) == record.signature
            and (bool(record.conditions) or specific)
            and matches(record.conditions, p, layouts, same_axes=not specific))


def covering(records: list[Bug], failure: CheckFailure, case: ConvCase,
             impl: Implementation, timeout: Timeout) -> Bug | None:
    """The first of ``records`` that `covers` ``failure`` on ``case``; None if none."""
    return next((record for record in records
                 if covers(record, failure, case, impl, timeout)), None)


def _quietly(measure) -> Any:
    try:
        return measure()
    except CheckFailure:
        return False


def sighting(record: Bug, found_check: str, failure: CheckFailure, case: ConvCase) -> Bug:
    """A finding attributed to ``record``'s cause: listed under its entry, not explained."""
    return Bug(check=found_check, failure=failure.check, function=failure.function,
               op=case.problem.op, params=case.problem.params(), layouts=dict(case.layouts),
               trigger=record.trigger, conditions=list(record.conditions), explanation=[],
               case_file=None, cause=record.cause, sighting=True,
               signature=signature(failure.check, failure.message))
