"""Right results, but a call with padding leaves the process to die at its next file write.

As a call that corrupts the heap makes the process die at a later allocation,
often in the caller's own code: here at the next ``open``, which is where the
harness writes the next call's in-flight record (test_crash_records.py).
"""
import builtins
import os

from conv_impl.einsum import conv2d as _conv2d


def _die(*args, **kwargs):
    os.abort()


def conv2d(x, weight, bias, *, stride, padding, dilation, groups):
    y = _conv2d(x, weight, bias, stride=stride, padding=padding, dilation=dilation,
                groups=groups)
    if any(padding):
        builtins.open = _die  # the damage, showing at the next file opened
    return y
