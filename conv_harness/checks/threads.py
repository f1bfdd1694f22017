"""Results on one thread and on several (issue 36 item 6, contract section 7).

An optimised kernel splits its work by the thread count: which loop is
parallel, how a reduction is blocked, whether a tail is handled by the last
thread. oneDNN#6035 was a 1x1 backward-weights convolution that was wrong,
hung or crashed depending on ``OMP_NUM_THREADS``. The rest of a run calls the
implementation on one thread (the oracle pins torch's intra-op threads to
one: on the suite's small problems more threads only contend with the other
xdist workers); the ``repeatable`` check of an implementation on torch
tensors also calls it on several (as many as this process may run on, at
least two) and compares the two. Their sums may be ordered differently, so the
two need not agree bit for bit: each is within the rounding bound of the
exact result (conv_harness/checks/tolerance.py), so they are within twice that
bound of each other, and a difference beyond it is a bug.
"""

from __future__ import annotations

import contextlib
from typing import Callable, Iterator, Sequence

import numpy as np

from conv_harness.checks import oracle
from conv_harness.checks.tolerance import Arithmetic, tolerance
from conv_harness.cores import several
from conv_harness.problem import ConvCase
from conv_harness.running.calling import CheckFailure

THREAD_COUNT = "thread_count"  # the kind of failure it reports


@contextlib.contextmanager
def torch_threads(count: int) -> Iterator[None]:
    """torch's intra-op thread count set to ``count`` within the block."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def compare_thread_counts(function: str, labels: Sequence[str], call: Callable[[], tuple],
                          case: ConvCase, arithmetic: Arithmetic) -> None:
    """Call ``function`` (``call``) on one thread and on `several`; a `CheckFailure`
    when a result differs between them by more than twice its rounding bound."""
    many = several()
    with torch_threads(1):
        alone = call()
    with torch_threads(many):
        shared = call()
    expected, magnitude = oracle.evaluate(case)
    for label, a, b in zip(labels, alone, shared):
        if a is None:
            continue
        bound = 2 * np.asarray(tolerance(case, label, magnitude, arithmetic).bound)
        difference = np.abs(a.astype(np.float64) - b.astype(np.float64))
        beyond = ~(difference <= bound)  # a NaN on one side only is beyond too
        if not beyond.any():
            continue
        worst = tuple(int(i) for i in np.unravel_index(
            int(np.argmax(np.where(beyond, difference - bound, -np.inf))), a.shape))
        raise CheckFailure(
            THREAD_COUNT,
            f"{function} gave a different {label} on 1 thread than on {many} threads: "
            f"{int(beyond.sum())} of {a.size} elements differ by more than twice the rounding "
            f"bound, the largest at index {worst}: {float(a[worst])!r} on 1 thread, "
            f"{float(b[worst])!r} on {many} (torch gives {float(expected[label][worst])!r}; "
            f"allowed difference {float(np.broadcast_to(bound, a.shape)[worst]):.3g})",
            function=function, case=case)
