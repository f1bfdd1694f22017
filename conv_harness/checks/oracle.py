"""The oracle: PyTorch's convolution and autograd on the same values in float64.

Besides the reference results it returns the *magnitudes* the rounding-error
bound needs: the same operation on absolute values, |x| (*) |w| + |b| for the
forward pass and the matching sums for each gradient. Because a convolution
and its gradients are bilinear, a forward and backward on absolute values
gives every one of them exactly.

Both come from one torch call: the problem and its absolute-value twin are
the two halves of one grouped convolution with twice the groups (inputs,
weights, biases and output gradients concatenated along their channels), so
each half sees only its own channels. On the suite's small problems a torch
call costs far more in fixed overhead than in arithmetic; one call instead
of two halves the oracle's share of an example.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from conv_harness.problem import ConvCase, ConvProblem

RESULT_NAMES: tuple[str, ...] = ("y", "grad_input", "grad_weight", "grad_bias")


class OracleUnavailable(RuntimeError):
    """PyTorch is not installed: the oracle checks cannot run."""


def not_run_reason(check: str) -> str:
    """Why the oracle check ``check`` is skipped where torch cannot be imported."""
    return f"oracle check {check!r} not run: PyTorch is not importable"


@lru_cache(maxsize=1)
def _torch() -> Any:
    try:
        import torch
    except ImportError as exc:  # pragma: no cover - exercised by the no-torch tests
        raise OracleUnavailable(f"PyTorch is not importable ({exc})") from exc
    # The oracle's problems are tiny: torch's intra-op threads only spin and
    # contend with the other xdist workers (measured: 100x slower on 2 cores).
    torch.set_num_threads(1)
    return torch


def torch_module() -> Any:
    """The torch module (pinned to one thread), or `OracleUnavailable`."""
    return _torch()


def torch_available() -> bool:
    try:
        _torch()
    except OracleUnavailable:
        return False
    return True


@dataclass(frozen=True)
class Reference:
    """float64 results of one problem: ``y`` and the three gradients (None for no bias,
    and all three None where only the forward was asked for)."""

    y: np.ndarray
    grad_input: np.ndarray | None
    grad_weight: np.ndarray | None
    grad_bias: np.ndarray | None

    def __getitem__(self, name: str) -> np.ndarray | None:
        return getattr(self, name)


def _run(problem: ConvProblem, x: np.ndarray, weight: np.ndarray, bias: np.ndarray | None,
         grad_output: np.ndarray, gradients: bool = True) -> tuple[Reference, Reference]:
    """Results and magnitudes of ``problem`` on these values (see the module doc);
    without ``gradients``, the forward's alone."""
    torch = _torch()
    fn = getattr(torch.nn.functional, problem.op)

    def twin(a: np.ndarray, axis: int) -> np.ndarray:
        a = np.asarray(a, dtype=np.float64)
        return np.concatenate([a, np.abs(a)], axis=axis)

    def leaf(a: np.ndarray, axis: int) -> Any:
        return torch.from_numpy(twin(a, axis)).requires_grad_(gradients)

    tx, tw = leaf(x, 1), leaf(weight, 0)
    tb = None if bias is None else leaf(bias, 0)
    kwargs = dict(problem.kwargs(), groups=2 * problem.groups)
    y = fn(tx, tw, tb, **kwargs)

    def halves(t: Any, axis: int) -> tuple[np.ndarray, np.ndarray]:
        a = t.detach().numpy()
        return tuple(np.split(a, 2, axis=axis))  # type: ignore[return-value]

    parts = [halves(y, 1)] + [(None, None)] * 3
    if gradients:  # the backward costs most of a small problem's torch time
        y.backward(torch.from_numpy(twin(grad_output, 1)))
        parts[1:] = [halves(tx.grad, 1), halves(tw.grad, 0),
                     (None, None) if tb is None else halves(tb.grad, 0)]
    return Reference(*(part[0] for part in parts)), Reference(*(part[1] for part in parts))


def evaluate(case: ConvCase, gradients: bool = True) -> tuple[Reference, Reference]:
    """The case's float64 results and their magnitudes, from one torch call; without
    ``gradients``, the forward's alone (``y``; the gradients None)."""
    return _run(case.problem, case.x, case.weight, case.bias, case.grad_output, gradients)


def warm_up() -> None:
    """One small call, so torch's one-time set-up is not charged to the first example."""
    torch = _torch()
    x = torch.zeros((1, 1, 3, 3), dtype=torch.float64, requires_grad=True)
    w = torch.zeros((1, 1, 2, 2), dtype=torch.float64, requires_grad=True)
    torch.nn.functional.conv2d(x, w).sum().backward()
