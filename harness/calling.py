"""Calling an implementation under test, and everything that can go wrong there.

Each call gets fresh copies of the inputs in the case's memory layouts, runs
under a time limit, and its results are checked for what the contract
promises (type, arity, shape, dtype, finiteness) before any value is
compared. Anything else is one `CheckFailure` naming the check that failed.
"""

from __future__ import annotations

import contextlib
import io
import signal
import threading
import traceback
import warnings
from typing import Any, Callable, Iterator

import numpy as np

from harness.problem import ConvCase

DEFAULT_TIMEOUT = 20.0  # seconds per call: generated problems take milliseconds


class CheckFailure(AssertionError):
    """A falsified check: ``check`` names it, the message says what happened."""

    def __init__(self, check: str, message: str):
        super().__init__(message)
        self.check = check
        self.message = message


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


def _describe_exception(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    where = f" (at {frames[-1].filename}:{frames[-1].lineno})" if frames else ""
    return f"{type(exc).__name__}: {exc}{where}"


def invoke(fn: Callable[..., Any], name: str, args: tuple, kwargs: dict,
           timeout: float | None) -> Any:
    """Call ``fn``, turning an exception or a time-out into a `CheckFailure`.

    What the implementation prints or warns is kept out of the run's output:
    it is noise here, and a failure report says what matters.
    """
    try:
        with time_limit(timeout), warnings.catch_warnings(), \
                contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            return fn(*args, **kwargs)
    except _TimeLimitExceeded:
        raise CheckFailure("timeout", f"{name} did not return within {timeout:g} s "
                                      "(--conv-timeout)") from None
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001 - any exception is the implementation's
        raise CheckFailure("raised", f"{name} raised {_describe_exception(exc)}") from None


def _check_inputs_unchanged(case: ConvCase, given: dict[str, np.ndarray | None], name: str) -> None:
    for arg, original in case.arrays().items():
        passed = given[arg]
        if original is None:
            continue
        if not np.array_equal(passed, original, equal_nan=True):
            changed = int(np.count_nonzero(~((passed == original)
                                             | (np.isnan(passed) & np.isnan(original)))))
            raise CheckFailure(
                "input_changed",
                f"{name} changed its input {arg!r} in place ({changed} of {original.size} "
                "elements); the harness treats inputs as read-only")


def as_result(value: Any, what: str, dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    """``value`` as an array of ``dtype`` and ``shape``, or a `CheckFailure`."""
    if value is None:
        raise CheckFailure("result_type", f"{what} is None; expected an array of shape "
                                          f"{shape} and dtype {dtype}")
    try:
        array = np.asarray(value)
    except Exception as exc:  # noqa: BLE001
        raise CheckFailure("result_type", f"{what} is a {type(value).__name__} that "
                                          f"np.asarray cannot take ({exc})") from None
    if array.dtype.kind not in "fiub":
        raise CheckFailure("result_type", f"{what} is a {type(value).__name__} of dtype "
                                          f"{array.dtype}; expected an array of {dtype}")
    if array.shape != shape:
        raise CheckFailure("shape", f"{what} has shape {array.shape}; torch gives {shape}")
    if array.dtype != np.dtype(dtype):
        raise CheckFailure("dtype", f"{what} has dtype {array.dtype}; inputs are {dtype}, "
                                    f"so the result must be {dtype}")
    if not np.all(np.isfinite(array)):
        bad = int(np.count_nonzero(~np.isfinite(array)))
        raise CheckFailure("nonfinite", f"{what} holds {bad} NaN or inf value(s) "
                                        "for finite inputs")
    return array


def call_forward(fn: Callable[..., Any], case: ConvCase, timeout: float | None) -> np.ndarray:
    p = case.problem
    given = case.fresh_inputs()
    name = p.op
    result = invoke(fn, name, (given["x"], given["weight"], given["bias"]), p.kwargs(), timeout)
    _check_inputs_unchanged(case, given, name)
    return as_result(result, f"{name}'s result", p.dtype, p.output_shape)


def call_backward(fn: Callable[..., Any], case: ConvCase,
                  timeout: float | None) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    p = case.problem
    given = case.fresh_inputs()
    name = p.spec.backward_name
    result = invoke(fn, name, (given["grad_output"], given["x"], given["weight"], given["bias"]),
                    p.kwargs(), timeout)
    _check_inputs_unchanged(case, given, name)
    if not isinstance(result, (tuple, list)) or len(result) != 3:
        got = (f"a {type(result).__name__} of length {len(result)}"
               if isinstance(result, (tuple, list)) else f"a {type(result).__name__}")
        raise CheckFailure("result_type", f"{name} returned {got}; expected a tuple "
                                          "(grad_input, grad_weight, grad_bias)")
    grad_input, grad_weight, grad_bias = result
    shapes = p.shapes()
    out_input = as_result(grad_input, f"{name}'s grad_input", p.dtype, shapes["x"])
    out_weight = as_result(grad_weight, f"{name}'s grad_weight", p.dtype, shapes["weight"])
    if p.bias:
        out_bias = as_result(grad_bias, f"{name}'s grad_bias", p.dtype, shapes["bias"])
    elif grad_bias is not None:
        raise CheckFailure("result_type", f"{name}'s grad_bias is a {type(grad_bias).__name__}"
                                          " but bias is None; it must be None")
    else:
        out_bias = None
    return out_input, out_weight, out_bias
