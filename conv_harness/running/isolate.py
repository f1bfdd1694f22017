"""Implementations that crash or hang in C: ``--isolate``, and crash records.

Two ways an implementation can take more than one check down with it, and
what this plugin does about each (one of the suite's plugins, registered by
the entry point, conv_harness/pytest_entry.py, which declares ``--isolate``):

* **It crashes the process** (a segfault in a C extension, ``os._exit``).
  Without ``--isolate``, every call first records the problem it is about to
  give the implementation in the failures folder
  (``<impl>-<op>-crashed-in-<process>.record``); when the call returns, the
  record is renamed ``...-returned-in-<process>.record`` and kept until the
  next call's record is complete (`CrashRecorder`), so that a process that
  dies between calls (heap corruption that shows at a later allocation, in
  the harness's own code, or a library's background thread) still leaves
  the problem of the last call made. If the process dies, that record
  becomes the failure's case file. Under
  pytest-xdist the controller reads it when the worker dies
  (``pytest_handlecrashitem``), replaces xdist's bare "worker crashed"
  report with what happened and on which problem, and saves it as an
  ordinary case file; xdist starts a new worker and the run goes on.
  Without xdist the crash ends the run; the next run finds the record of
  the dead process, saves it as an ordinary case file and says so in its
  header (`recover_crashes`). Either case file replays with ``--isolate``.

* **It hangs inside C code**, where the time limit's signal cannot interrupt
  it, or crashes and the problem should be shrunk like any other failure.
  With ``--isolate`` every call runs in a child process: a fork of a
  "zygote" process that has imported the implementations once, so that a
  fresh child after a crash or a time-out costs milliseconds. The child is
  killed when a call exceeds the time limit; its death by a signal or an
  exit is a ``crashed`` failure naming the signal or status and, from
  faulthandler, where it happened. The child is persistent between calls, so
  an implementation's own state behaves as it does without ``--isolate``.
"""

from __future__ import annotations

import atexit
import faulthandler
import glob
import json
import os
import pickle
import select
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any, Callable

from conv_harness.problem import CHANNEL_LAYOUTS, make_layout
from conv_harness.running import calling, native
from conv_harness.running.calling import CheckFailure

INFLIGHT_KEY = "conv_harness_fatal_dir"  # xdist workerinput: where workers log fatal errors


# --- messages over a socket -------------------------------------------------------

_HEADER = struct.Struct("!Q")


def _send(sock: socket.socket, obj: Any = None, *, payload: bytes | None = None) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL) if payload is None else payload
    sock.sendall(_HEADER.pack(len(data)) + data)


def _recv_exactly(sock: socket.socket, size: int) -> bytes:
    chunks, got = [], 0
    while got < size:
        chunk = sock.recv(min(size - got, 1 << 20))
        if not chunk:
            raise EOFError("the other process closed the connection")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def _recv(sock: socket.socket) -> Any:
    (size,) = _HEADER.unpack(_recv_exactly(sock, _HEADER.size))
    return pickle.loads(_recv_exactly(sock, size))


# --- the child processes ------------------------------------------------------------

def _layout_of(array: Any) -> str:
    """The `conv_harness.problem.make_layout` name of an input's memory layout."""
    if array.flags.c_contiguous:
        return "C"
    if array.flags.f_contiguous:
        return "F"
    if array.strides and array.strides[-1] < 0:
        return "reversed"
    for layout in CHANNEL_LAYOUTS:  # made the same way, they have the same strides
        if array.ndim >= 3 and make_layout(array, layout).strides == array.strides:
            return layout
    return "strided"


def _zygote_main(fd: int) -> None:
    """Import implementations once, then fork one child at a time to call them.

    Requests on the control socket: ``("spawn", specs)``. The zygote loads
    any spec it has not loaded yet, forks a child, sends the parent the
    child's end of a new socket (with its pid), waits for the child to end
    and sends ``("exited", wait status)``.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    control = socket.socket(fileno=fd)
    loaded: dict[str, Any] = {}
    while True:
        try:
            request = _recv(control)
        except EOFError:
            os._exit(0)
        _, specs = request
        for spec in specs:
            if spec not in loaded:
                _load_into(loaded, spec)
        ours, theirs = socket.socketpair()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            control.close()
            theirs.close()
            try:
                _serve(ours, loaded)
            finally:
                os._exit(0)
        ours.close()
        socket.send_fds(control, [_HEADER.pack(pid)], [theirs.fileno()])
        theirs.close()
        _, status = os.waitpid(pid, 0)
        try:
            _send(control, ("exited", status))
        except OSError:
            os._exit(0)


def _load_into(loaded: dict[str, Any], spec: str) -> None:
    """Load ``spec`` into ``loaded``: its `Implementation`, or why it cannot be loaded."""
    from conv_harness.running.loader import SpecError, load_implementation

    try:
        loaded[spec] = load_implementation(spec)
    except SpecError as exc:
        loaded[spec] = str(exc)
    except BaseException as exc:  # noqa: BLE001
        loaded[spec] = f"--impl {spec!r}: {type(exc).__name__}: {exc}"


def _serve(sock: socket.socket, loaded: dict[str, Any]) -> None:
    """The child: call what it is asked to, send back results and changed inputs."""
    import numpy as np

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)  # prints, from Python or C, go nowhere
    sys.stdout = open(os.devnull, "w")
    faulthandler.enable(file=sys.__stderr__, all_threads=False)  # where a crash happened
    warnings.simplefilter("ignore")
    while True:
        try:
            _, spec, name, arrays, kwargs = _recv(sock)
        except EOFError:
            return
        if spec not in loaded:  # not known when this child was forked: load it here
            _load_into(loaded, spec)
        impl = loaded[spec]
        if isinstance(impl, str):
            _send(sock, ("unloadable", impl))
            continue
        args = [None if a is None else make_layout(a[0], a[1]) for a in arrays]
        originals = [None if a is None else a.copy() for a in args]
        try:
            result = impl.function(name)(*args, **kwargs)
        except BaseException as exc:  # noqa: BLE001 - reported, like any exception
            _send(sock, ("raised", calling.describe_exception(exc)))
            continue
        changed = {i: np.ascontiguousarray(a) for i, (a, o) in enumerate(zip(args, originals))
                   if a is not None and not np.array_equal(a, o, equal_nan=True)}
        result = native.host_tree(result)  # a device's tensors, as the parent can take them
        try:
            payload = pickle.dumps(("returned", result, changed), protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:  # noqa: BLE001
            payload = pickle.dumps(("unpicklable", type(result).__name__, changed))
        _send(sock, payload=payload)


# --- the parent's side ----------------------------------------------------------------

def _describe_status(status: int) -> str:
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = "unknown signal"
        return f"killed by signal {number} ({name})"
    if os.WIFEXITED(status):
        return f"exited with status {os.WEXITSTATUS(status)} without returning"
    return f"ended with wait status {status}"


_LIBRARY_DIRS = tuple({os.path.join(prefix, "lib") + os.sep
                       for prefix in (sys.prefix, sys.base_prefix, sys.exec_prefix)})


_HARNESS_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "calling.py")


def fatal_report(text: str) -> tuple[str, str]:
    """(one-line summary, full text) of what faulthandler wrote, if anything."""
    text = text.strip()
    if not text:
        return "", ""
    first = text.splitlines()[0].strip()  # "Fatal Python error: Segmentation fault"
    lines = text.splitlines()
    # 'File "/x/mine.py", line 12 in conv2d', innermost first; the frames inside the
    # implementation's call come before the harness's own (calling.py) frame
    harness = [i for i, line in enumerate(lines) if _HARNESS_FILE in line]
    if harness:
        lines = lines[:harness[0]]
        text = "\n".join(lines)
    files = [line.strip() for line in lines if line.strip().startswith("File ")]
    own = [line for line in files
           if not any(line.startswith(f'File "{d}') for d in _LIBRARY_DIRS)]
    where = (own or files or [""])[0]
    summary = first + (f", {where}" if where else "")
    return summary, text


class Isolation:
    """One zygote and at most one live child, for the calls of this process."""

    def __init__(self, specs: list[str]):
        self.specs = list(specs)
        self.zygote: subprocess.Popen | None = None
        self.control: socket.socket | None = None
        self.child: socket.socket | None = None
        self.child_pid = 0
        self.call_seconds = 0.0  # of the last call, in the child: its start-up not included
        self.log = tempfile.TemporaryFile()

    # life cycle
    def _start_zygote(self) -> None:
        ours, theirs = socket.socketpair()
        code = f"import conv_harness.running.isolate as i; i._zygote_main({theirs.fileno()})"
        self.zygote = subprocess.Popen(
            [sys.executable, "-c", code], pass_fds=(theirs.fileno(),),
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self.log,
            cwd=os.getcwd(), start_new_session=True)
        theirs.close()
        self.control = ours

    def _start_child(self) -> None:
        if self.zygote is None or self.zygote.poll() is not None:
            self._stop_zygote()
            self._start_zygote()
        assert self.control is not None
        _send(self.control, ("spawn", self.specs))
        data, fds, _, _ = socket.recv_fds(self.control, _HEADER.size, 1)
        if len(data) < _HEADER.size or not fds:  # the zygote died loading an implementation
            assert self.zygote is not None
            try:
                code = self.zygote.wait(timeout=10)
            except subprocess.TimeoutExpired:
                code = None
            self._stop_zygote()
            how = ("did not answer" if code is None else
                   _describe_status((-code) if code < 0 else (code << 8)))
            raise CheckFailure("crashed", "importing the implementation in the isolated "
                                          f"process ended it: it {how}")
        (self.child_pid,) = _HEADER.unpack(data)
        self.child = socket.socket(fileno=fds[0])

    def _child_ended(self) -> int:
        """Close the child's socket and return its wait status (from the zygote)."""
        if self.child is not None:
            self.child.close()
            self.child = None
        assert self.control is not None
        self.control.settimeout(30)
        try:
            _, status = _recv(self.control)
        except (EOFError, OSError):
            self._stop_zygote()
            status = 0
        finally:
            if self.control is not None:
                self.control.settimeout(None)
        self.child_pid = 0
        return status

    def _kill_child(self) -> None:
        if self.child_pid:
            try:
                os.kill(self.child_pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self._child_ended()

    def _stop_zygote(self) -> None:
        for sock in (self.child, self.control):
            if sock is not None:
                sock.close()
        self.child = self.control = None
        if self.child_pid:
            try:
                os.kill(self.child_pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.child_pid = 0
        if self.zygote is not None:
            try:
                self.zygote.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.zygote.kill()
                self.zygote.wait()
            self.zygote = None

    def close(self) -> None:
        self._stop_zygote()
        self.log.close()

    # calls
    def call(self, spec: str, name: str, args: tuple, kwargs: dict,
             limit: float | None) -> Any:
        """Run ``spec``'s ``name`` in the child; results back, or a `CheckFailure`."""
        if self.child is None:
            self._start_child()
        assert self.child is not None
        arrays = [None if a is None else (np.ascontiguousarray(a), _layout_of(a)) for a in args]
        self.log.seek(0, os.SEEK_END)
        log_start = self.log.tell()
        try:
            _send(self.child, ("call", spec, name, arrays, kwargs))
            started = time.perf_counter()
            ready, _, _ = select.select([self.child], [], [], limit)
            self.call_seconds = time.perf_counter() - started
            if not ready:
                self._kill_child()
                raise CheckFailure("timeout", f"{name} did not return within {limit:g} s")
            reply = _recv(self.child)
        except (EOFError, OSError):
            status = self._child_ended()
            self.log.seek(log_start)
            summary, full = fatal_report(self.log.read().decode("utf-8", "replace"))
            message = f"{name} crashed the isolated process: {_describe_status(status)}"
            if summary:
                message += f" ({summary})"
            raise CheckFailure("crashed", message + (f"\n{full}" if full else "")) from None
        kind = reply[0]
        if kind == "raised":
            raise CheckFailure("raised", f"{name} raised {reply[1]}")
        if kind == "unloadable":
            raise CheckFailure("raised", f"the isolated process could not load it: {reply[1]}")
        for index, values in reply[2].items():  # what it changed in place, changed here too
            np.copyto(args[index], values)
        if kind == "unpicklable":
            raise CheckFailure("result_type", f"{name} returned a {reply[1]}, which cannot be "
                                              "sent back from the isolated process (pickle)")
        return reply[1]


import numpy as np  # noqa: E402  (after the child's code, which imports it lazily)

_isolation: Isolation | None = None


class IsolatedFunction:
    """Stands for an implementation's function; each call runs in the child."""

    def __init__(self, spec: str, name: str, original: Callable[..., Any]):
        self.spec, self.name, self.original = spec, name, original
        self.call_seconds = 0.0
        self.__wrapped__ = original
        self.__doc__ = getattr(original, "__doc__", None)

    def __harness_invoke__(self, name: str, args: tuple, kwargs: dict,
                           limit: float | None) -> Any:
        isolation = _the_isolation([self.spec])
        try:
            return isolation.call(self.spec, self.name, args, kwargs, limit)
        finally:
            self.call_seconds = isolation.call_seconds

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.__harness_invoke__(self.name, args, kwargs, None)

    def __repr__(self) -> str:
        return f"<{self.name} of {self.spec}, isolated>"


def _the_isolation(specs: list[str]) -> Isolation:
    """This process's `Isolation`, knowing ``specs`` (all loaded in the zygote at once)."""
    global _isolation
    if _isolation is None:
        _isolation = Isolation([])
        atexit.register(shutdown)
    for spec in specs:
        if spec not in _isolation.specs:
            _isolation.specs.append(spec)
    return _isolation


def isolated(impl: Any) -> Any:
    """Make every function of a loaded `Implementation` run in the child process."""
    spec = impl.loads_from or impl.spec
    impl.functions = {name: fn if isinstance(fn, IsolatedFunction)
                      else IsolatedFunction(spec, name, fn)
                      for name, fn in impl.functions.items()}
    return impl


def isolate_implementations(impls: list[Any], start: bool = True) -> None:
    """Run these implementations' calls in the child process from now on; ``start``: start
    its zygote now (not in a process that makes no calls, a pytest-xdist controller)."""
    for impl in impls:
        isolated(impl)
    if start:
        _the_isolation([impl.loads_from or impl.spec for impl in impls])


def shutdown() -> None:
    global _isolation
    if _isolation is not None:
        _isolation.close()
        _isolation = None


# --- crash records without --isolate -------------------------------------------------

class CrashRecorder:
    """Before each call, write the case it is about to run; keep it until the next one's.

    At every moment after the first call, a complete record of the last call
    made is on disk: the record is written under a temporary name and takes
    its name atomically (a rename), and when the call returns it is
    renamed (one atomic step) to the *returned* record, which is removed only
    once the next call's record has its name. A process that dies while the
    next record is being written (a crash at the next allocation after a
    call corrupted the heap, say) leaves the returned record: the problem of
    the call that most likely did the damage. Before, the record was removed
    when the call returned, and such a crash lost its problem.
    """

    def __init__(self, failures_dir: Path, process: str, run_id: str):
        self.failures_dir = failures_dir
        self.process = process
        self.run_id = run_id
        self.current: tuple[str, str, str] | None = None  # (spec, impl name, check)
        self.returned: Path | None = None  # the last call's record, once it returned
        # The last record, less its bytes and its function: checks call several
        # functions, and the same one twice, on (fresh copies of) one case.
        self._last: tuple[tuple, dict[str, Any], str] | None = None
        self._paths: dict[tuple[str, str], tuple[Path, Path, Path]] = {}

    def _record(self, case: Any, function: str) -> dict[str, Any]:
        from conv_harness.records.failures import case_record

        current = self.current
        assert current is not None
        # what the record says of the case: its problem, and its arrays' layouts,
        # dtypes and shapes (not their bytes, which are written after it)
        key = (current, case.problem, tuple(case.layouts.items()),
               tuple(None if a is None else (a.dtype.str, a.shape)
                     for a in case.arrays().values()))
        if self._last is None or self._last[0] != key:
            spec, _, check = current
            base = case_record(spec, case, "crashed", "", run_check=check, packed=True)
            self._last = (key, base, case.problem.describe())
        _, base, problem = self._last
        return {**base, "message": _crash_message(
            function, f"the test process ({self.process})", problem, ""),
            "function": function, "during_check": current[2], "run": self.run_id}

    def _names(self, impl_name: str, op: str) -> tuple[Path, Path, Path]:
        """The in-call record's name, its temporary name, and the returned record's."""
        names = self._paths.get((impl_name, op))
        if names is None:
            from conv_harness.records.failures import safe_name

            stem = f"{safe_name(impl_name)}-{op}"
            process = safe_name(self.process)
            path = self.failures_dir / f"{stem}{IN_CALL}{process}{RECORD}"
            names = (path, path.with_name(f".{path.name}.{os.getpid()}.tmp"),
                     self.failures_dir / f"{stem}{RETURNED}{process}{RECORD}")
            self._paths[(impl_name, op)] = names
        return names

    def __call__(self, case: Any, function: str) -> Callable[[], None] | None:
        if self.current is None:
            return None
        from conv_harness.records.failures import packed_payload

        path, tmp, returned = self._names(self.current[1], case.problem.op)
        # Written before every call of the implementation, so kept cheap: one line
        # of compact JSON (json's C encoder; with an indent it falls back to pure
        # Python), then the arrays' raw bytes, under a temporary name of this process
        # that then takes the record's name (atomic: a reader sees all of it or
        # none), and not flushed to disk: it has to outlive this process, not the
        # machine.
        chunks = [(json.dumps(self._record(case, function)) + "\n").encode("utf-8"),
                  *packed_payload(case)]
        try:
            handle = open(tmp, "wb")
        except FileNotFoundError:  # the folder is made by the first record, or was removed
            self.failures_dir.mkdir(parents=True, exist_ok=True)
            handle = open(tmp, "wb")
        with handle:
            handle.writelines(chunks)
        os.replace(tmp, path)
        # Only now: until here it was the last call's record. Removed, not replaced by
        # the rename below: on ext4 a rename over an existing file waits for its data
        # to be written out (auto_da_alloc), four times the cost of the whole record.
        self.forget_returned()

        def done() -> None:
            try:
                os.replace(path, returned)  # atomic: one of the two names holds it
            except OSError:  # removed meanwhile (a folder cleaned up): nothing to keep
                return
            self.returned = returned
        return done

    def forget_returned(self) -> None:
        """Remove the last call's record (a newer one has its name, or the run is over)."""
        if self.returned is not None:
            self.returned.unlink(missing_ok=True)
            self.returned = None


#: in-flight record names: ``<impl>-<op><IN_CALL><process><RECORD>`` while a call runs,
#: ``<impl>-<op><RETURNED><process><RECORD>`` once it has returned; a record is a line
#: of JSON (`case_record`'s, packed), then the bytes of its arrays
IN_CALL, RETURNED, RECORD = "-crashed-in-", "-returned-in-", ".record"


def read_record(path: Path, header_only: bool = False) -> dict:
    """An in-flight record: its JSON line, with the arrays as the case file's ``inputs``
    (``header_only``: as ``packed_inputs``, their bytes not read). ValueError for a
    file this harness did not write."""
    with open(path, "rb") as handle:
        record = json.loads(handle.readline())
        if header_only:
            return record
        payload = handle.read()
    from conv_harness.records.failures import unpacked_inputs

    # the case file's own form, in the same key order
    return {("inputs" if key == "packed_inputs" else key):
            (unpacked_inputs(value, payload) if key == "packed_inputs" else value)
            for key, value in record.items()}


def _crash_message(function: str, who: str, problem: str, fatal: str,
                   returned: bool = False) -> str:
    when = ("it died after the call returned, before the next call (most likely from "
            "damage the call did that showed later: a corrupted heap, a background thread)"
            if returned else "it died during the call")
    return (f"{function} crashed {who}: {when} "
            f"({fatal or 'a segfault, os._exit or another fatal error'}); "
            "not shrunk (--isolate contains crashes and shrinks them)\n"
            f"problem: {problem}")


def inflight_records(failures: Path, process: str, run_id: str | None = None
                      ) -> list[tuple[Path, bool]]:
    """``process``'s in-flight records (of ``run_id``, if given), the one to report first.

    Each is (path, whether its call had returned). A record of a call in
    progress comes first; else the last call's returned record (the process
    died between calls). Newest first within each kind.
    """
    found = []
    for marker, returned in ((IN_CALL, False), (RETURNED, True)):
        for name in glob.glob(str(failures / f"*{marker}{process}{RECORD}")):
            path = Path(name)
            try:
                run = read_record(path, header_only=True).get("run", "")
                mtime = path.stat().st_mtime
            except (OSError, ValueError, AttributeError):
                continue
            if run_id is None or run == run_id:
                found.append((returned, -mtime, path))
    return [(path, returned) for returned, _, path in sorted(found)]


def save_crash(inflight: Path, record: dict, process: str, who: str,
                fatal: str, returned: bool = False) -> tuple[Path, str]:
    """Turn the in-flight record of a dead ``process`` into an ordinary case file.

    Returns where it is saved and its message; raises KeyError, TypeError or
    ValueError for a record this harness did not write.
    """
    from conv_harness.problem import ConvProblem
    from conv_harness.records.failures import case_path, save_case, script_path
    from conv_harness.records.script import render_script

    problem = ConvProblem.from_params(record["op"], record["params"]).describe()
    message = _crash_message(record.get("function", record["op"]), who, problem, fatal,
                             returned)
    marker = RETURNED if returned else IN_CALL
    impl_name = inflight.name[: -len(f"-{record['op']}{marker}{process}{RECORD}")]
    record["message"] = message
    record.pop("run", None)
    # its script makes the recorded call in a child process, whose death is its failure
    try:
        script = render_script(record, name=script_path(case_path(inflight.parent, record,
                                                                  impl_name)).name)
    except (KeyError, ValueError, TypeError):  # the case file still matters
        script = None
    saved = save_case(inflight.parent, record, impl_name, script=script)
    inflight.unlink(missing_ok=True)
    return saved, message


def replay_hint(saved: Path, indent: str = "") -> str:
    """How to run a saved crash again: its replay, contained, and its script, whose call
    runs in a child process."""
    script = saved.with_suffix(".py")
    return f"replay:    pytest --replay {saved} --isolate" + (
        f"\n{indent}script:    python {script}   (standalone: NumPy and torch only; the call "
        "runs in a child process)" if script.is_file() else "")


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, someone else's
        return True
    return True


def recover_crashes(failures: Path) -> list[str]:
    """Save the crash records that test processes left when they died, as case files.

    Without pytest-xdist or ``--isolate`` a crash ends the run, so nobody
    turns its in-flight record into a case file; the next run does, for
    records of processes that no longer exist (``pid<N>``; a worker's
    record is its controller's to handle). Returns one line per case saved.
    """
    lines = []
    processes = sorted({Path(name).stem.rsplit(marker, 1)[1]
                        for marker in (IN_CALL, RETURNED)
                        for name in glob.glob(str(failures / f"*{marker}pid*{RECORD}"))})
    for process in processes:
        pid = process[len("pid"):]
        if not pid.isdigit() or _process_alive(int(pid)):
            continue
        records = inflight_records(failures, process)
        if not records:
            continue
        (inflight, returned), *others = records
        try:
            record = read_record(inflight)
            saved, _ = save_crash(inflight, record, process,
                                   f"an earlier test run (process {pid}, without pytest-xdist "
                                   "or --isolate, so the run ended there)", "", returned)
        except (OSError, ValueError, KeyError, TypeError):
            continue  # not a record this harness wrote: leave it alone
        for other, _ in others:
            other.unlink(missing_ok=True)
        lines.append(f"{record.get('function', record['op'])} of {record.get('impl')} crashed "
                     f"an earlier run (process {pid}); its case is saved to {saved}\n"
                     f"  {replay_hint(saved, '  ')}")
    return lines
