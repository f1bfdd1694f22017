"""Slow implementations (a compiler per shape, say), for --conv-budget.

``correct`` is conv_impl.einsum made slow, 0.1 s per call; ``buggy`` is the
tutorial with only its stride bug, made slow the same way at 0.05 s a call (its
test's budget is as many calls, in half the time); ``by_size`` (and
``buggy_by_size``, the tutorial's stride bug) is
conv_impl.einsum made slow in proportion to its work, 4 microseconds per
multiply-add (a problem of the large tier, 2**17 of them, about 0.5 s a call; a
tiny one well under a millisecond), as a slow pure-Python or interpreted
implementation would be. Specs: ``--impl tests/harness/slow.py:correct``.
"""

from __future__ import annotations

import math
import time
from types import SimpleNamespace

from conv_impl import einsum, tutorial

SECONDS_PER_CALL = 0.1
BUGGY_SECONDS_PER_CALL = 0.05
SECONDS_PER_MULTIPLY_ADD = 4e-6


def _slow(fn, seconds: float = SECONDS_PER_CALL):
    def call(*args, **kwargs):
        time.sleep(seconds)
        return fn(*args, **kwargs)
    call.__name__ = fn.__name__
    return call


correct = SimpleNamespace(conv2d=_slow(einsum.conv2d),
                          conv2d_backward=_slow(einsum.conv2d_backward))
_bug = tutorial.stride_bug_only
buggy = SimpleNamespace(conv2d=_slow(_bug.conv2d, BUGGY_SECONDS_PER_CALL),
                        conv2d_backward=_slow(_bug.conv2d_backward, BUGGY_SECONDS_PER_CALL),
                        CAPABILITIES=_bug.CAPABILITIES)


def _slow_by_size(fn, backward: bool):
    def call(*args, **kwargs):
        result = fn(*args, **kwargs)
        output = args[0] if backward else result  # grad_output has the output's shape
        weight = args[2] if backward else args[1]
        time.sleep(SECONDS_PER_MULTIPLY_ADD * output.size * math.prod(weight.shape[1:]))
        return result
    call.__name__ = fn.__name__
    return call


by_size = SimpleNamespace(conv2d=_slow_by_size(einsum.conv2d, False),
                          conv2d_backward=_slow_by_size(einsum.conv2d_backward, True))
buggy_by_size = SimpleNamespace(conv2d=_slow_by_size(_bug.conv2d, False),
                                conv2d_backward=_slow_by_size(_bug.conv2d_backward, True),
                                CAPABILITIES=_bug.CAPABILITIES)
