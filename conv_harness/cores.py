"""The cores this process may run on: what the thread check and the saved scripts that
repeat it compare one thread with."""

from __future__ import annotations

import os


def several() -> int:
    """The thread count compared with one: the cores this process may run on, at least 2."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return max(2, cores)
