"""Slow implementations (a compiler per shape, say): 0.1 s per call, for --conv-budget.

``correct`` is conv_impl.einsum made slow; ``buggy`` is the tutorial with only its
stride bug, made slow. Specs: ``--impl tests/harness/slow.py:correct``.
"""

from __future__ import annotations

import time
from types import SimpleNamespace

from conv_impl import einsum, tutorial

SECONDS_PER_CALL = 0.1


def _slow(fn):
    def call(*args, **kwargs):
        time.sleep(SECONDS_PER_CALL)
        return fn(*args, **kwargs)
    call.__name__ = fn.__name__
    return call


correct = SimpleNamespace(conv2d=_slow(einsum.conv2d),
                          conv2d_backward=_slow(einsum.conv2d_backward))
_bug = tutorial.stride_bug_only
buggy = SimpleNamespace(conv2d=_slow(_bug.conv2d), conv2d_backward=_slow(_bug.conv2d_backward),
                        CAPABILITIES=_bug.CAPABILITIES)
