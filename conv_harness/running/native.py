"""An implementation's own arrays: inputs handed over natively, results brought back.

An implementation that declares ``"arrays": "torch"`` (and a ``"device"``) in
CAPABILITIES computes on torch tensors (contract section 7). Its functions are
wrapped once, when it is loaded (`wrap`): the harness still draws, keeps and
compares NumPy arrays, and the wrapper hands the implementation a torch tensor
on its device for each, with the element strides of the drawn NumPy layout and
the same memory around it (so a channels-last tensor, a channel slice of one,
a Fortran-ordered or a strided view is what the kernel sees). An input the
implementation changes in place is copied back into the NumPy array it came
from, so that the harness's read-only check sees the change. Results stay as
the implementation returned them; `host` brings them to NumPy, in their own
dtype, for the contract checks and the comparison (float64 on the CPU).

A torch implementation that provides a forward and not its backward gets one
from autograd (`autograd_backward`): what a Triton or CUDA kernel wrapped in a
``torch.autograd.Function`` is used through.
"""

from __future__ import annotations

import functools
import sys
from typing import Any, Callable

import numpy as np

from conv_harness.problem import bfloat16

AUTOGRAD = "autograd"  # how a derived backward is named in reports and case files


def is_tensor(value: Any) -> bool:
    """Whether ``value`` is a torch tensor (without importing torch for NumPy runs)."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(value, torch.Tensor)


def host(value: Any) -> np.ndarray:
    """``value`` as a NumPy array on the CPU in its own dtype: a torch tensor (on any
    device, with or without grad) through its host copy, anything else through
    ``np.asarray``."""
    if is_tensor(value):
        value = value.detach().to("cpu")
        if value.dtype == _torch().bfloat16:  # NumPy's is ml_dtypes': the same bits
            return value.view(_torch().int16).numpy().view(bfloat16())
        return value.numpy()
    return np.asarray(value)


def _torch() -> Any:
    return sys.modules["torch"]


def host_tree(value: Any) -> Any:
    """``value`` with each tensor in it (a result, or a tuple of them) brought to NumPy."""
    if isinstance(value, (tuple, list)):
        return type(value)(host_tree(v) for v in value)
    return host(value) if is_tensor(value) else value


def device_problem(arrays: str, device: str) -> str | None:
    """Why ``device`` cannot be used here (None: it can)."""
    if arrays != "torch":
        return None
    try:
        import torch
    except ImportError as exc:
        return f"declares \"arrays\": \"torch\", but torch cannot be imported ({exc})"
    try:
        where = torch.device(device)
    except (RuntimeError, ValueError) as exc:
        return f"declares device {device!r}, which torch does not know ({exc})"
    if where.type == "cuda" and not torch.cuda.is_available():
        return f"declares device {device!r}, but torch sees no CUDA device here"
    if where.type == "cuda" and (where.index or 0) >= torch.cuda.device_count():
        return f"declares device {device!r}, but torch sees {torch.cuda.device_count()} " \
               "CUDA device(s)"
    if where.type == "mps" and not torch.backends.mps.is_available():
        return f"declares device {device!r}, but torch sees no MPS device here"
    return None


def _memory(values: np.ndarray) -> tuple[np.ndarray, int]:
    """The contiguous NumPy array whose memory ``values`` views, flat in memory order,
    and the offset of ``values``' first element in it (in elements)."""
    root = values
    while isinstance(root.base, np.ndarray):
        root = root.base
    if not (root.flags.c_contiguous or root.flags.f_contiguous) or root.dtype != values.dtype:
        root = values = np.ascontiguousarray(values)
    start = values.__array_interface__["data"][0] - root.__array_interface__["data"][0]
    return root.ravel(order="K"), start // values.itemsize


def to_torch(values: np.ndarray, device: str) -> Any:
    """A new tensor on ``device`` equal to ``values``, with its element strides and
    the memory it views (a strided view's gaps, a channel slice's other channels)."""
    import torch

    if any(s < 0 for s in values.strides):
        raise ValueError("torch tensors have no negative strides: a reversed layout "
                         "cannot be handed to a torch implementation")
    flat, offset = _memory(values)
    if flat.dtype.name == "bfloat16":  # torch takes its bits as int16
        storage = torch.from_numpy(flat.view(np.int16).copy()).view(torch.bfloat16).to(device)
    else:
        storage = torch.from_numpy(np.array(flat, copy=True)).to(device)
    strides = tuple(s // values.itemsize for s in values.strides)
    return storage.as_strided(values.shape, strides, offset)


class TorchFunction:
    """A contract function of a torch implementation, called with NumPy arrays."""

    def __init__(self, fn: Callable[..., Any], device: str, derived: str | None = None):
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.device = device
        #: how the harness made it, if the implementation does not provide it
        self.derived = derived

    def __call__(self, *arrays: np.ndarray | None, **kwargs: Any) -> Any:
        tensors = [None if a is None else to_torch(a, self.device) for a in arrays]
        result = self.fn(*tensors, **kwargs)
        for given, tensor in zip(arrays, tensors):
            if given is not None:
                back = host(tensor)
                if not np.array_equal(back, given, equal_nan=True):
                    given[...] = back  # changed in place: the harness's check must see it
        return result


def autograd_backward(forward: Callable[..., Any]) -> Callable[..., Any]:
    """The backward of a torch forward ``forward(x, weight, bias, **kwargs)``, by
    autograd: its gradients for ``grad_output`` at (x, weight, bias), in the contract's
    ``(grad_input, grad_weight, grad_bias)``; None for the bias when there is none."""
    import torch

    def backward(grad_output: Any, x: Any, weight: Any, bias: Any, **kwargs: Any) -> tuple:
        leaves = [None if t is None else t.detach().requires_grad_() for t in (x, weight, bias)]
        with torch.enable_grad():
            y = forward(*leaves, **kwargs)
        wanted = [t for t in leaves if t is not None]
        grads = iter(torch.autograd.grad(y, wanted, grad_output, allow_unused=True))
        return tuple(None if t is None else next(grads) for t in leaves)

    backward.__name__ = backward.__qualname__ = f"{getattr(forward, '__name__', 'forward')}" \
                                                "_backward"
    return backward


def wrap(fn: Callable[..., Any], arrays: str, device: str,
         derived: str | None = None) -> Callable[..., Any]:
    """``fn`` as the harness calls it: itself for NumPy, a `TorchFunction` for torch."""
    return TorchFunction(fn, device, derived) if arrays == "torch" else fn
