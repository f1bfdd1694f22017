"""The oracle: PyTorch's convolution and autograd on the same values in float64.

Besides the reference results it returns the *magnitudes* the rounding-error
bound needs: the same operation on absolute values, |x| (*) |w| + |b| for the
forward pass and the matching sums for each gradient. Because a convolution
and its gradients are bilinear, one extra forward and backward on absolute
values gives every one of them exactly.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from harness.problem import ConvCase, ConvProblem

RESULT_NAMES: tuple[str, ...] = ("y", "grad_input", "grad_weight", "grad_bias")


class OracleUnavailable(RuntimeError):
    """PyTorch is not installed: the oracle checks cannot run."""


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
    """float64 results of one problem: ``y`` and the three gradients (None for no bias)."""

    y: np.ndarray
    grad_input: np.ndarray
    grad_weight: np.ndarray
    grad_bias: np.ndarray | None

    def __getitem__(self, name: str) -> np.ndarray | None:
        return getattr(self, name)


def _run(problem: ConvProblem, x: np.ndarray, weight: np.ndarray, bias: np.ndarray | None,
         grad_output: np.ndarray) -> Reference:
    torch = _torch()
    fn = getattr(torch.nn.functional, problem.op)

    def leaf(a: np.ndarray) -> Any:
        return torch.tensor(np.asarray(a, dtype=np.float64), requires_grad=True)

    tx, tw = leaf(x), leaf(weight)
    tb = None if bias is None else leaf(bias)
    y = fn(tx, tw, tb, **problem.kwargs())
    y.backward(torch.from_numpy(np.asarray(grad_output, dtype=np.float64)))
    return Reference(
        y=y.detach().numpy(),
        grad_input=tx.grad.numpy(),
        grad_weight=tw.grad.numpy(),
        grad_bias=None if tb is None else tb.grad.numpy(),
    )


def reference(case: ConvCase) -> Reference:
    """The float64 results torch gives for the case's values."""
    return _run(case.problem, case.x, case.weight, case.bias, case.grad_output)


def magnitudes(case: ConvCase) -> Reference:
    """The same computation on absolute values: the sums of |terms| per element."""
    def absolute(a: np.ndarray | None) -> np.ndarray | None:
        return None if a is None else np.abs(np.asarray(a, dtype=np.float64))
    return _run(case.problem, absolute(case.x), absolute(case.weight), absolute(case.bias),
                absolute(case.grad_output))


def warm_up() -> None:
    """One small call, so torch's one-time set-up is not charged to the first example."""
    torch = _torch()
    x = torch.zeros((1, 1, 3, 3), dtype=torch.float64, requires_grad=True)
    w = torch.zeros((1, 1, 2, 2), dtype=torch.float64, requires_grad=True)
    torch.nn.functional.conv2d(x, w).sum().backward()
