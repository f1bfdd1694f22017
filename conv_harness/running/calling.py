"""Calling an implementation under test, and everything that can go wrong there.

Each call gets fresh copies of the inputs in the case's memory layouts, runs
under a time limit, and its results are checked for what the contract
promises (type, arity, shape, dtype, finiteness) before any value is
compared. Anything else is one `CheckFailure` naming the check that failed,
whose message's first line says what happened, readable on its own.

The time limit is a signal (SIGALRM): it interrupts Python code, not a C call
that never returns. ``--isolate`` (conv_harness/running/isolate.py) runs every call in a
child process instead; it hands `invoke` functions with a
``__harness_invoke__`` method, which keep their own time limit.
"""

from __future__ import annotations

import contextlib
import io
import os
import signal
import sys
import threading
import time
import traceback
import warnings
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Optional, Union

import numpy as np

from conv_harness.problem import ConvCase, is_float
from conv_harness.running.native import host, is_tensor



class CheckFailure(AssertionError):
    """A falsified check: ``check`` names it, the message says what happened.

    ``function`` and ``case`` say which call of the implementation failed,
    when that is known: the contract function (``conv2d``,
    ``conv2d_backward``, ...) and the problem it was given, which may be a
    problem the check derived from the drawn one (a stacked batch, a split
    input). Reports and case files describe that call.
    """

    def __init__(self, check: str, message: str, *, function: str | None = None,
                 case: ConvCase | None = None):
        super().__init__(message)
        self.check = check
        self.message = message
        self.function = function
        self.case = case

    def on(self, function: str, case: ConvCase) -> "CheckFailure":
        """This failure, said to come from calling ``function`` on ``case`` (if not said yet)."""
        if self.function is None:
            self.function = function
        if self.case is None:
            self.case = case
        return self


# --- what one example saw: deferred failures and the calls made ----------------

@dataclass
class Call:
    """One call of the implementation during a check: what it was given and returned."""

    function: str
    case: ConvCase
    results: tuple[np.ndarray | None, ...] | None = None  # None: it failed before returning


@dataclass
class Heard:
    """The warnings an implementation raised (`silenced`): how many, and the first's text."""

    count: int = 0
    first: str | None = None

    def add(self, caught: list[warnings.WarningMessage]) -> None:
        if caught:
            first = caught[0]
            self.count += len(caught)
            self.first = self.first or (
                f"{first.category.__name__}: {one_line(str(first.message), 200)} "
                f"({os.path.basename(first.filename)}:{first.lineno})")


@dataclass
class Observed:
    """What one check saw beside its verdict: failures that must not stop it (see
    `defer`), every call it made, the warnings its calls raised, and notes worth
    saying that are no failure ("flushes subnormals to zero"), by how many times."""

    deferred: list[CheckFailure] = field(default_factory=list)
    calls: list[Call] = field(default_factory=list)
    heard: Heard = field(default_factory=Heard)
    notes: Counter = field(default_factory=Counter)


def defer(failure: CheckFailure, seen: Observed | None) -> None:
    """Record a failure that must not hide the value comparison that follows.

    A result of the wrong dtype, or an input changed in place, is a bug of
    its own, but the result's values are still compared: a dtype bug and a
    value bug are two bugs, and the first must not mask the second. Without
    ``seen`` (no one to report it later) the failure is raised at once.
    """
    if seen is None:
        raise failure
    if not any(f.check == failure.check and f.function == failure.function
               for f in seen.deferred):
        seen.deferred.append(failure)


def _record_call(seen: Observed | None, function: str, case: ConvCase) -> Call | None:
    if seen is None:
        return None
    call = Call(function, case)
    seen.calls.append(call)
    return call


@contextlib.contextmanager
def silenced(heard: Heard | None = None) -> Iterator[Heard]:
    """Keep what an implementation prints (stdout, stderr) or warns out of the run:
    noise here, on import as on a call; a failure report says what matters.

    Its warnings are counted, not lost: into ``heard`` (a new one if not given), how
    many and the first, which the run's summary shows once per implementation.
    """
    heard = heard if heard is not None else Heard()
    with warnings.catch_warnings(record=True) as caught, \
            contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        warnings.simplefilter("always")
        try:
            yield heard
        finally:
            heard.add(caught)


class _TimeLimitExceeded(BaseException):
    """Raised inside the implementation by the alarm; BaseException so that an
    implementation's own ``except Exception`` cannot swallow it."""


@contextlib.contextmanager
def time_limit(seconds: float | None) -> Iterator[None]:
    """Interrupt the block after ``seconds`` (main thread only; otherwise no limit).

    A signal interrupts Python code, not a long-running C call; an
    implementation that hangs inside C is what ``--isolate`` is for.
    """
    if not seconds or threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_alarm(signum: int, frame: Any) -> None:
        raise _TimeLimitExceeded()

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


# --- describing what went wrong -------------------------------------------

_HARNESS_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
_LIBRARY_DIRS = tuple({os.path.join(prefix, "lib") + os.sep
                       for prefix in (sys.prefix, sys.base_prefix, sys.exec_prefix)})
_MAX_DETAIL = 300  # characters of an exception's message in the one-line summary


def one_line(text: str, limit: int = _MAX_DETAIL) -> str:
    """The first non-empty line of ``text``, cut at ``limit`` characters."""
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    first = lines[0] if lines else ""
    if len(first) > limit:
        return first[:limit - 3] + "..."
    return first + (" ..." if len(lines) > 1 else "")


def describe_exception(exc: BaseException) -> str:
    """The exception's type, its message's first line and where, on one line.

    "Where" is the deepest frame of the implementation's own code (not the
    standard library's, site-packages' or this harness's), else the deepest
    frame. The implementation's part of the traceback, and the rest of a
    multi-line message, follow on later lines.
    """
    every = traceback.extract_tb(exc.__traceback__)
    frames = [f for f in every if not f.filename.startswith(_HARNESS_DIR)] or every
    own = [f for f in frames
           if not f.filename.startswith(_LIBRARY_DIRS) and not f.filename.startswith("<")]
    frame = (own or frames)[-1] if frames else None
    where = f" (at {frame.filename}:{frame.lineno})" if frame else ""
    message = one_line(str(exc))
    text = (f"{type(exc).__name__}: {message}" if message else type(exc).__name__) + where
    if frames:
        text += ("\ntraceback of the call, innermost last:\n"
                 + "".join(traceback.format_list(frames[-8:])).rstrip())
    if "\n" in str(exc).strip():
        text += f"\n{type(exc).__name__}: {str(exc).strip()}"
    return text


# --- time limits -------------------------------------------------------------

# A function that has timed out once in a run gets a shorter limit from then on:
# Hypothesis shrinks the failure by calling it again on smaller problems, and at
# the full limit each of those calls that hangs as well would cost the full
# limit (minutes of a stuck-looking run). The shorter limit is ten times its
# slowest call that did return (a tenth of the limit if none did), at least a
# quarter of a second, at most the limit.
_SHORTER_FACTOR = 10.0
_SHORTER_FLOOR = 0.25  # seconds (or the configured limit, if that is smaller)


class TimeLimit:
    """One run's per-call time limit (``--conv-timeout``; None: none) and what the run's
    calls taught it: which functions timed out, and each one's slowest call that
    returned. The plugin makes one per run and every `Target` of the run holds it,
    so that what one test learns shortens another's waits, and nothing outlives
    the run."""

    def __init__(self, seconds: float | None) -> None:
        self.seconds = seconds or None
        self._timed_out: set[int] = set()  # id(fn) of the functions that have timed out
        self._slowest: dict[int, float] = {}  # id(fn) -> its slowest call that returned
        self._known: dict[int, Any] = {}  # id(fn) -> fn: kept alive, so its id stays its own

    def __repr__(self) -> str:
        return f"TimeLimit({self.seconds!r})"

    def for_call(self, fn: Callable[..., Any]) -> float | None:
        """The limit for the next call of ``fn``: the run's, or less once it timed out."""
        if self.seconds is None or id(fn) not in self._timed_out:
            return self.seconds
        base = self._slowest.get(id(fn), self.seconds / _SHORTER_FACTOR)
        return min(self.seconds, max(_SHORTER_FACTOR * base, _SHORTER_FLOOR))

    def returned(self, fn: Callable[..., Any], seconds: float) -> None:
        """A call of ``fn`` returned after ``seconds``."""
        if seconds > self._slowest.get(id(fn), -1.0):
            self._slowest[id(fn)] = seconds
            self._known[id(fn)] = fn

    def exceeded(self, fn: Callable[..., Any], name: str, limit: float) -> CheckFailure:
        """The failure of a call of ``fn`` that exceeded ``limit``; later calls get less."""
        self._timed_out.add(id(fn))
        self._known[id(fn)] = fn
        return timeout_failure(name, limit, self.seconds or limit)


#: what a call's time limit is given as: a run's `TimeLimit`, or seconds (None: no
#: limit) for a call that shares nothing with other calls
Timeout = Union[TimeLimit, float, None]


def as_time_limit(timeout: Timeout) -> TimeLimit:
    """``timeout`` as a `TimeLimit`: itself, or a fresh one of that many seconds."""
    return timeout if isinstance(timeout, TimeLimit) else TimeLimit(timeout)


def timeout_failure(name: str, limit: float, configured: float) -> CheckFailure:
    """The failure of a call of ``name`` that exceeded ``limit`` (``configured``: the
    run's limit, which ``limit`` is shorter than once the function timed out)."""
    if limit < configured:
        return CheckFailure("timeout", f"{name} did not return within {limit:.3g} s (the shorter "
                                       "limit once a call of it has exceeded --conv-timeout "
                                       f"{configured:g} s: 10 times its slowest call that "
                                       "returned)")
    return CheckFailure("timeout", f"{name} did not return within {limit:g} s (--conv-timeout)")


# --- observing calls -----------------------------------------------------------

# Something that wants to know which problem the implementation is being given
# right now (conv_harness/running/isolate.py: a crash of the whole process is then reported
# with it). Called with (case, function name) before each call; what it
# returns, if not None, is called once the call has returned or raised.
CallObserver = Callable[[ConvCase, str], Optional[Callable[[], None]]]
_call_observer: CallObserver | None = None


def set_call_observer(observer: CallObserver | None) -> None:
    global _call_observer
    _call_observer = observer


@contextlib.contextmanager
def _observed(case: ConvCase, name: str) -> Iterator[None]:
    done = _call_observer(case, name) if _call_observer is not None else None
    try:
        yield
    finally:
        if done is not None:
            done()


# --- calling -------------------------------------------------------------------

def invoke(fn: Callable[..., Any], name: str, args: tuple, kwargs: dict,
           timeout: Timeout, seen: Observed | None = None) -> Any:
    """Call ``fn``, turning an exception or a time-out into a `CheckFailure`.

    What the implementation prints (to sys.stdout or sys.stderr) or warns is
    kept out of the run's output: it is noise here, and a failure report says
    what matters; its warnings are counted into ``seen``, where given.

    A function with a ``__harness_invoke__(name, args, kwargs, limit)``
    method (an isolated call, conv_harness/running/isolate.py) is called through it: it
    keeps the time limit itself and raises `CheckFailure` itself, with
    `timeout_failure` for a time-out.
    """
    limits = as_time_limit(timeout)
    limit = limits.for_call(fn)
    remote = getattr(fn, "__harness_invoke__", None)
    started = time.perf_counter()
    if remote is not None:
        try:
            result = remote(name, args, kwargs, limit)
            # the call's own time if it says (not a child process's start-up)
            limits.returned(fn, getattr(fn, "call_seconds", time.perf_counter() - started))
            return result
        except CheckFailure as failure:
            if failure.check == "timeout" and limit:
                raise limits.exceeded(fn, name, limit) from None
            raise
    try:
        with time_limit(limit), silenced(None if seen is None else seen.heard):
            result = fn(*args, **kwargs)
        limits.returned(fn, time.perf_counter() - started)
        return result
    except _TimeLimitExceeded:
        raise limits.exceeded(fn, name, limit) from None
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001 - any exception is the implementation's
        raise CheckFailure("raised", f"{name} raised {describe_exception(exc)}") from None


def _check_inputs_unchanged(case: ConvCase, given: dict[str, np.ndarray | None], name: str,
                            seen: Observed | None) -> None:
    for arg, original in case.arrays().items():
        passed = given[arg]
        if original is None:
            continue
        if not np.array_equal(passed, original, equal_nan=True):
            changed = int(np.count_nonzero(~((passed == original)
                                             | (np.isnan(passed) & np.isnan(original)))))
            defer(CheckFailure(
                "input_changed",
                f"{name} changed its input {arg!r} in place ({changed} of {original.size} "
                "elements); the harness treats inputs as read-only", function=name, case=case),
                  seen)


def as_result(value: Any, what: str, dtype: str, shape: tuple[int, ...], *,
              function: str | None = None, case: ConvCase | None = None,
              seen: Observed | None = None) -> np.ndarray:
    """``value`` as an array of ``shape``, or a `CheckFailure`.

    A wrong dtype is deferred (`defer`, into ``seen``): the array is returned as it
    is, so its values are still compared.
    """
    if value is None:
        raise CheckFailure("result_type", f"{what} is None; expected a {dtype} array of "
                                          f"shape {shape}")
    kind = type(value).__name__
    try:
        array = host(value)
    except Exception as exc:  # noqa: BLE001
        raise CheckFailure("result_type", f"{what} is a {kind} that np.asarray cannot take "
                                          f"({one_line(str(exc), 120)}); expected a {dtype} "
                                          f"array of shape {shape}") from None
    # Anything np.asarray takes is accepted, but a list or a scalar says so in
    # every message: np.asarray makes Python floats float64.
    what_is = what if isinstance(value, np.ndarray) or is_tensor(value) else f"{what} (a {kind})"
    if array.dtype.kind not in "fiub" and not is_float(array.dtype):
        raise CheckFailure("result_type", f"{what_is} has dtype {array.dtype}; expected a "
                                          f"{dtype} array of shape {shape}")
    if array.shape != shape:
        raise CheckFailure("shape", f"{what_is} has shape {array.shape}; torch gives {shape}")
    if array.dtype != np.dtype(dtype):
        because = (f" (what np.asarray makes of a {kind} of Python floats)"
                   if isinstance(value, (list, tuple, float)) else "")
        defer(CheckFailure("dtype", f"{what_is} has dtype {array.dtype}{because}; inputs are "
                                    f"{dtype}, so the result must be {dtype}",
                           function=function, case=case), seen)
    finite = np.isfinite(array)
    if not finite.all():
        bad = int(finite.size - np.count_nonzero(finite))
        first = tuple(int(i) for i in np.argwhere(~finite)[0])
        raise CheckFailure("nonfinite", f"{what_is} holds {bad} NaN or inf value(s) for "
                                        f"finite inputs (the first is {array[first]} at "
                                        f"index {first})")
    return array


def call_forward(fn: Callable[..., Any], case: ConvCase, timeout: Timeout,
                 seen: Observed | None = None) -> np.ndarray:
    """The forward's result on ``case``, or a `CheckFailure`. With ``seen`` (a check's),
    the call is recorded there, and a failure that must not hide the values is deferred
    to it (`defer`); without, that failure is raised."""
    p = case.problem
    name = p.op
    call = _record_call(seen, name, case)
    try:
        given = case.fresh_inputs()
        with _observed(case, name):
            result = invoke(fn, name, (given["x"], given["weight"], given["bias"]), p.kwargs(),
                            timeout, seen)
        _check_inputs_unchanged(case, given, name, seen)
        y = as_result(result, f"{name}'s result", p.dtype, p.output_shape, function=name,
                      case=case, seen=seen)
    except CheckFailure as failure:
        raise failure.on(name, case)
    if call is not None:
        call.results = (y,)
    return y


def call_backward(fn: Callable[..., Any], case: ConvCase, timeout: Timeout,
                  seen: Observed | None = None
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """The backward's three results on ``case`` (`call_forward` says what ``seen`` is for)."""
    name = case.problem.spec.backward_name
    call = _record_call(seen, name, case)
    try:
        grads = _backward_results(fn, case, name, timeout, seen)
    except CheckFailure as failure:
        raise failure.on(name, case)
    if call is not None:
        call.results = grads
    return grads


def _backward_results(fn: Callable[..., Any], case: ConvCase, name: str, timeout: Timeout,
                      seen: Observed | None
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    p = case.problem
    given = case.fresh_inputs()
    with _observed(case, name):
        result = invoke(fn, name, (given["grad_output"], given["x"], given["weight"],
                                   given["bias"]), p.kwargs(), timeout, seen)
    _check_inputs_unchanged(case, given, name, seen)
    if not isinstance(result, (tuple, list)) or len(result) != 3:
        got = (f"a {type(result).__name__} of length {len(result)}"
               if isinstance(result, (tuple, list)) else f"a {type(result).__name__}")
        raise CheckFailure("result_type", f"{name} returned {got}; expected a tuple "
                                          "(grad_input, grad_weight, grad_bias)")
    grad_input, grad_weight, grad_bias = result
    shapes = p.shapes()
    out = dict(function=name, case=case, seen=seen)
    out_input = as_result(grad_input, f"{name}'s grad_input", p.dtype, shapes["x"], **out)
    out_weight = as_result(grad_weight, f"{name}'s grad_weight", p.dtype, shapes["weight"], **out)
    if p.bias:
        out_bias = as_result(grad_bias, f"{name}'s grad_bias", p.dtype, shapes["bias"], **out)
    elif grad_bias is not None:
        raise CheckFailure("result_type", f"{name}'s grad_bias is a {type(grad_bias).__name__}"
                                          " but bias is None; it must be None")
    else:
        out_bias = None
    return out_input, out_weight, out_bias
