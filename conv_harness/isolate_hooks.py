"""The pytest wiring of --isolate and of crash records (conv_harness/running/isolate.py
says what each does): where a run's processes record their calls, what the pytest-xdist
controller does when a worker dies, and the crashes an earlier run left.
"""

from __future__ import annotations

import faulthandler
import os
import tempfile
from pathlib import Path
from typing import Any, Callable

import pytest

from conv_harness.running import calling
from conv_harness.running.isolate import (
    INFLIGHT_KEY,
    CrashRecorder,
    fatal_report,
    inflight_records,
    isolate_implementations,
    read_record,
    recover_crashes,
    replay_hint,
    save_crash,
    shutdown,
)
from conv_harness.searching.state import current as current_state


def isolate_for(config: pytest.Config, impls: list[Any]) -> None:
    """`isolate_implementations` in this run: the zygote starts in a process that calls
    implementations, not in a pytest-xdist controller."""
    isolate_implementations(impls, start=not _is_xdist_controller(config))


#: this run's `CrashRecorder`, in the processes that call implementations without
#: ``--isolate``
_RECORDER = pytest.StashKey[CrashRecorder]()


def _failures_dir(config: pytest.Config) -> Path:
    path = Path(config.getoption("--conv-failures"))
    return path if path.is_absolute() else Path(config.invocation_params.dir) / path


def _is_xdist_controller(config: pytest.Config) -> bool:
    return (not hasattr(config, "workerinput")
            and getattr(config.option, "dist", "no") != "no"
            and not getattr(config.option, "collectonly", False))


def _observer(recorder: CrashRecorder | None) -> calling.CallObserver:
    """What runs before each call: the run's record of calls (for history-dependent
    bugs, conv_harness/triage/history.py), then ``recorder``'s crash record, if any."""
    def observe(case: Any, function: str) -> Callable[[], None] | None:
        current_state().run.calls(case, function)
        return recorder(case, function) if recorder is not None else None
    return observe


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    from conv_harness.plugin import loaded_implementations

    if not hasattr(config, "workerinput"):
        config.stash[_RECOVERED] = recover_crashes(_failures_dir(config))
    if config.getoption("--isolate"):
        if not _is_xdist_controller(config):  # the processes that call implementations
            calling.set_call_observer(_observer(None))
        isolate_for(config, loaded_implementations(config))
        return
    if _is_xdist_controller(config):
        fatal_dir = tempfile.mkdtemp(prefix="conv-harness-fatal-")
        config.stash[_FATAL_DIR] = fatal_dir
        return
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        process, run_id = workerinput["workerid"], workerinput.get("testrunuid", "")
        fatal_dir = workerinput.get(INFLIGHT_KEY)
        if fatal_dir:  # the controller reads where the worker died from this file
            handle = open(os.path.join(fatal_dir, f"{process}.log"), "w")
            config.stash[_FATAL_FILE] = handle
            faulthandler.enable(file=handle, all_threads=False)
    else:
        process, run_id = f"pid{os.getpid()}", ""
    recorder = config.stash[_RECORDER] = CrashRecorder(_failures_dir(config), process, run_id)
    calling.set_call_observer(_observer(recorder))


_FATAL_DIR = pytest.StashKey[str]()
_FATAL_FILE = pytest.StashKey[Any]()


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    fatal_dir = node.config.stash.get(_FATAL_DIR, None)
    if fatal_dir:
        node.workerinput[INFLIGHT_KEY] = fatal_dir


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    recorder = item.config.stash.get(_RECORDER, None)
    target = getattr(getattr(item, "callspec", None), "params", {}).get("target")
    if target is None or not hasattr(target, "impl"):
        if recorder is not None:
            # An earlier conformance test's last call did not kill the process before
            # this other test began: a crash from now on is this test's, not that call's.
            recorder.forget_returned()
        return (yield)
    marker = item.get_closest_marker("conv_check")
    if recorder is not None:
        recorder.current = (target.impl.spec, target.impl.name,
                            marker.args[0] if marker else item.name)
    try:
        return (yield)
    finally:
        if recorder is not None:
            recorder.current = None


@pytest.hookimpl(optionalhook=True)
def pytest_handlecrashitem(crashitem: str, report: pytest.TestReport, sched: Any) -> None:
    """A worker died: report the problem it was running, from its crash record."""
    node = getattr(report, "node", None)
    config = getattr(node, "config", None)  # the controller's (xdist's WorkerController)
    workerinput = getattr(node, "workerinput", None) or {}
    process, run_id = workerinput.get("workerid"), workerinput.get("testrunuid", "")
    if config is None or process is None:
        return
    fatal_dir = config.stash.get(_FATAL_DIR, None)
    fatal_summary = fatal_text = ""
    if fatal_dir:
        log = Path(fatal_dir, f"{process}.log")
        if log.exists():
            fatal_summary, fatal_text = fatal_report(log.read_text(errors="replace"))
    records = inflight_records(_failures_dir(config), process, run_id)
    if not records:
        if fatal_text:
            report.longrepr = f"{report.longrepr}\n{fatal_text}"
        return
    (inflight, returned), *others = records
    try:
        record = read_record(inflight)
        saved, message = save_crash(inflight, record, process,
                                     f"the test process (pytest-xdist worker {process!r})",
                                     fatal_summary, returned)
    except (OSError, ValueError, KeyError, TypeError):
        return
    for other, _ in others:  # superseded: the one reported is the call that died
        other.unlink(missing_ok=True)
    from conv_harness.records.failures import CRASH_CASE

    report.user_properties.append((CRASH_CASE, str(saved)))  # the run summary's entry
    report.longrepr = (f"{message}\ncase saved to {saved}\n{replay_hint(saved)}"
                       + (f"\n{fatal_text}" if fatal_text else ""))


_RECOVERED = pytest.StashKey[list]()


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    recovered = config.stash.get(_RECOVERED, [])
    if recovered:
        terminalreporter.section("conv-harness: crashes of earlier runs")
        for line in recovered:
            terminalreporter.write_line(line)


def pytest_unconfigure(config: pytest.Config) -> None:
    shutdown()
    calling.set_call_observer(None)
    recorder = config.stash.get(_RECORDER, None)
    if recorder is not None:
        recorder.forget_returned()  # the process ends normally: nothing to report
        del config.stash[_RECORDER]
    handle = config.stash.get(_FATAL_FILE, None)
    if handle is not None:
        faulthandler.disable()
        handle.close()
    fatal_dir = config.stash.get(_FATAL_DIR, None)
    if fatal_dir:
        import shutil
        shutil.rmtree(fatal_dir, ignore_errors=True)
