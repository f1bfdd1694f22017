"""A zoo of buggy convolutions with known root causes, generated (issue 59).

Each zoo implementation wraps the correct `conv_impl.einsum` (conv1d/2d/3d and their
backwards) and injects one to three root causes drawn from `CAUSES`, the mistakes real
convolution code makes. A cause is applied to every function real code would share it
across (all the dimensions the implementation provides; the forward, the backward or
both), and carries its ground truth: the exact condition on the problem under which it
makes a result wrong (`Cause.holds`), what its minimal case looks like
(`Cause.minimal`), and the words a trigger that states its condition contains.

An implementation is named ``zoo_<seed>_<index>`` and built from that name alone, so a
saved script (a fresh process) gets the same one: ``--impl benchmarks/zoo.py:zoo_1_7``.
``zoo_torch_<seed>_<index>`` is the same implementation on torch tensors (CAPABILITIES
``"arrays": "torch"``): its functions take and return CPU tensors, in whatever layout
the harness draws (channels-last included), and compute on their NumPy views, so the
same causes go through the harness's torch path.
benchmarks/triage_zoo.py scores the harness's bug lists against the ground truth.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, Callable

import numpy as np

from conv_harness.problem import ConvProblem
from conv_harness.ties import dilated_kernel
from conv_impl import einsum

Forward = Callable[..., np.ndarray]
Backward = Callable[..., tuple]


def _remainders(p: ConvProblem) -> tuple[int, ...]:
    """Per axis: input positions past the last window, (in + 2p - d(k-1) - 1) % s."""
    return tuple((n + 2 * pad - d * (k - 1) - 1) % s for n, pad, d, k, s in zip(
        p.input_size, p.padding, p.dilation, p.kernel_size, p.stride))


def _reads_input(p: ConvProblem) -> bool:
    """Whether some output's window reads an input position (not padding only)."""
    return all(any(0 <= o * s - pad + t * d < n for o in range(out) for t in range(k))
               for n, pad, d, k, s, out in zip(p.input_size, p.padding, p.dilation,
                                               p.kernel_size, p.stride, p.output_size))


def _flip_shows(p: ConvProblem) -> bool:
    """Whether flipping the kernel changes a result: some window reads an input position
    through a tap whose mirror is another tap (not the middle of an odd kernel)."""
    return _reads_input(p) and any(
        any(0 <= o * s - pad + t * d < n and 2 * t != k - 1
            for o in range(out) for t in range(k))
        for n, pad, d, k, s, out in zip(p.input_size, p.padding, p.dilation, p.kernel_size,
                                        p.stride, p.output_size))


def _axes_with_remainder(stride, padding, dilation, shape, kernel) -> list[int]:
    return [a for a, (n, pad, d, k, s) in enumerate(zip(shape, padding, dilation, kernel,
                                                         stride))
            if (n + 2 * pad - d * (k - 1) - 1) % s]


def _bump(a: np.ndarray | None, where: int = 0) -> np.ndarray | None:
    """``a`` with one element off by more than any element's size (a term added twice,
    a window read from the wrong place: wrong by a value's own order, so that no
    rounding bound, however long the sum, covers it)."""
    if a is None:
        return None
    a = np.array(a, copy=True)
    a.flat[where % a.size] += 1 + 8 * float(np.max(np.abs(a), initial=0))
    return a


def _plainest(p: ConvProblem, free: frozenset[str]) -> bool:
    """Whether ``p`` is at its plainest in every feature not in ``free``: one image, one
    channel per group, no groups, dilation 1, stride 1, a 1-tap kernel, and padding 0
    on each axis but where the input is shorter than the kernel's reach (there padding
    is what lets a window fit: input 1 with padding 1 is as plain as input 2)."""
    per_group_in, per_group_out = p.in_channels // p.groups, p.out_channels // p.groups
    reach = [(k - 1) * d + 1 for k, d in zip(p.kernel_size, p.dilation)]
    padded = all(pad == 0 or n < r for pad, n, r in zip(p.padding, p.input_size, reach))
    return ((p.batch == 1 or "batch" in free)
            and ((per_group_in == 1 and per_group_out == 1) or "channels" in free)
            and (p.groups == 1 or "groups" in free)
            and (set(p.dilation) == {1} or "dilation" in free)
            and (padded or "padding" in free)
            and (set(p.stride) == {1} or "stride" in free)
            and (set(p.kernel_size) == {1} or "kernel" in free))


@dataclass(frozen=True)
class Cause:
    """One root cause: how it breaks the functions, and its ground truth."""

    name: str
    #: which results it makes wrong, or "raised" / "history"
    symptoms: tuple[str, ...]
    #: the exact condition on the problem under which it shows
    holds: Callable[[ConvProblem], bool]
    #: the features its minimal case needs (the rest at their plainest)
    free: frozenset[str]
    #: a trigger that states its condition matches one of these (regular expressions)
    words: tuple[str, ...]
    forward: Callable[..., Any] | None = None  # (fwd, x, weight, bias, **kw) -> y
    backward: Callable[..., Any] | None = None  # (bwd, go, x, weight, bias, **kw) -> grads
    #: its results differ from call to call (uninitialised memory)
    garbage: bool = False
    #: the dimensions it can show in (a condition between axes needs two)
    dims: tuple[int, ...] = (1, 2, 3)

    def minimal(self, p: ConvProblem) -> bool:
        return self.holds(p) and _plainest(p, self.free)


# -- the library of mistakes -------------------------------------------------------------

def _remainder_row(gx: np.ndarray, x, weight, stride, padding, dilation
                   ) -> tuple[np.ndarray, tuple] | None:
    """A copy of ``gx`` and the index of its last row on the first axis with a stride
    remainder; None where no axis has one."""
    axes = _axes_with_remainder(stride, padding, dilation, x.shape[2:], weight.shape[2:])
    if not axes:
        return None
    index = [slice(None)] * gx.ndim
    index[2 + axes[0]] = -1
    return np.array(gx, copy=True), tuple(index)


def _remainder_backward(bwd, go, x, weight, bias, *, stride, padding, dilation, groups):
    gx, gw, gb = bwd(go, x, weight, bias, stride=stride, padding=padding, dilation=dilation,
                     groups=groups)
    row = _remainder_row(gx, x, weight, stride, padding, dilation)
    if row is not None:  # the positions past the last window get the last window's again
        gx, index = row
        gx[index] += 1
    return gx, gw, gb


def _garbage_backward(bwd, go, x, weight, bias, *, stride, padding, dilation, groups):
    gx, gw, gb = bwd(go, x, weight, bias, stride=stride, padding=padding, dilation=dilation,
                     groups=groups)
    row = _remainder_row(gx, x, weight, stride, padding, dilation)
    if row is not None:  # np.empty for the remainder rows: whatever the memory held
        gx, index = row
        garbage = np.random.default_rng().standard_normal(gx[index].shape) * 1e3
        gx[index] = garbage.astype(gx.dtype)
    return gx, gw, gb


def _padding_forward(fwd, x, weight, bias, *, padding, **kw):
    y = fwd(x, weight, bias, padding=padding, **kw)
    return _bump(y) if any(padding) else y


def _padding_backward(bwd, go, x, weight, bias, *, padding, **kw):
    gx, gw, gb = bwd(go, x, weight, bias, padding=padding, **kw)
    return (_bump(gx), gw, gb) if any(padding) else (gx, gw, gb)


def _stride3_backward(bwd, go, x, weight, bias, *, stride, **kw):
    gx, gw, gb = bwd(go, x, weight, bias, stride=stride, **kw)
    return (gx, _bump(gw), gb) if max(stride) >= 3 else (gx, gw, gb)


def _as_float32(a):
    return None if a is None else np.asarray(a, dtype=np.float32)


def _downcast_forward(fwd, x, weight, bias, **kw):
    if x.dtype != np.float64:
        return fwd(x, weight, bias, **kw)
    return fwd(_as_float32(x), _as_float32(weight), _as_float32(bias), **kw).astype(np.float64)


def _downcast_backward(bwd, go, x, weight, bias, **kw):
    if x.dtype != np.float64:
        return bwd(go, x, weight, bias, **kw)
    grads = bwd(_as_float32(go), _as_float32(x), _as_float32(weight), _as_float32(bias), **kw)
    return tuple(None if g is None else g.astype(np.float64) for g in grads)


def _batch_mean_backward(bwd, go, x, weight, bias, **kw):
    gx, gw, gb = bwd(go, x, weight, bias, **kw)
    return gx, gw, None if gb is None else gb / go.shape[0]


def _positions_mean_backward(bwd, go, x, weight, bias, **kw):
    gx, gw, gb = bwd(go, x, weight, bias, **kw)
    per_image = int(np.prod(go.shape[2:]))
    return gx, gw, None if gb is None else gb / (go.shape[0] * per_image)


def _flipped_forward(fwd, x, weight, bias, **kw):
    return fwd(x, np.ascontiguousarray(weight[(slice(None),) * 2 + (slice(None, None, -1),)
                                              * (weight.ndim - 2)]), bias, **kw)


def _refuse_dilation(dilation) -> None:
    if max(dilation) > 1:
        raise ValueError(f"dilation {tuple(dilation)} is not supported")


def _dilation_forward(fwd, x, weight, bias, *, dilation, **kw):
    _refuse_dilation(dilation)
    return fwd(x, weight, bias, dilation=dilation, **kw)


def _dilation_backward(bwd, go, x, weight, bias, *, dilation, **kw):
    _refuse_dilation(dilation)
    return bwd(go, x, weight, bias, dilation=dilation, **kw)


def _no_bias_forward(fwd, x, weight, bias, **kw):
    # the bias is reshaped before it is known to be there
    bias.reshape(-1)
    return fwd(x, weight, bias, **kw)


def _no_bias_backward(bwd, go, x, weight, bias, **kw):
    bias.reshape(-1)
    return bwd(go, x, weight, bias, **kw)


def _groups_forward(fwd, x, weight, bias, *, groups, **kw):
    y = fwd(x, weight, bias, groups=groups, **kw)
    if groups > 1:  # the second group's channels written over the first's
        y = np.array(y, copy=True)
        per_group = y.shape[1] // groups
        y[:, :per_group] = y[:, per_group:2 * per_group]
    return y


def _check_sizes(x, weight, dilation) -> None:
    # per axis, the kernel must fit the input: the padding that makes room forgotten
    for axis, (n, k, d) in enumerate(zip(x.shape[2:], weight.shape[2:], dilation)):
        if n < d * (k - 1) + 1:
            raise ValueError(f"input size {n} on axis {axis} is smaller than the kernel's "
                             f"span {d * (k - 1) + 1}")


def _size_check_forward(fwd, x, weight, bias, *, dilation, **kw):
    _check_sizes(x, weight, dilation)
    return fwd(x, weight, bias, dilation=dilation, **kw)


def _size_check_backward(bwd, go, x, weight, bias, *, dilation, **kw):
    _check_sizes(x, weight, dilation)
    return bwd(go, x, weight, bias, dilation=dilation, **kw)


def _narrow(p: ConvProblem) -> bool:
    """Whether some axis's input is shorter than its dilated kernel (padding makes room)."""
    return any(n < span for n, span in zip(p.input_size, dilated_kernel(p)))


def _dilation_grad_weight(bwd, go, x, weight, bias, *, dilation, **kw):
    gx, gw, gb = bwd(go, x, weight, bias, dilation=dilation, **kw)
    return (gx, _bump(gw), gb) if max(dilation) > 1 else (gx, gw, gb)


def _square_backward(bwd, go, x, weight, bias, **kw):
    if len(set(go.shape[2:])) > 1:
        raise ValueError(f"the output must be square, got {go.shape[2:]}")
    return bwd(go, x, weight, bias, **kw)


def _dilated_3x3_path_forward(fwd, x, weight, bias, *, stride, padding, dilation, groups):
    """A 3x3 stride-1 dense path (a Winograd kernel's, keyed to ResNet's and DeepLab's
    archetypes) that never checks dilation: the undilated convolution, cropped to the
    dilated output's shape."""
    n = weight.ndim - 2
    kw = dict(stride=stride, padding=padding, groups=groups)
    if weight.shape[2:] != (3,) * n or stride != (1,) * n or groups != 1 \
            or dilation == (1,) * n:
        return fwd(x, weight, bias, dilation=dilation, **kw)
    right = fwd(x, weight, bias, dilation=dilation, **kw)
    y = fwd(x, weight, bias, dilation=(1,) * n, **kw)
    return np.ascontiguousarray(y[(slice(None), slice(None))
                                  + tuple(slice(0, size) for size in right.shape[2:])])


def _on_3x3_path(p: ConvProblem) -> bool:
    return (set(p.kernel_size) == {3} and set(p.stride) == {1} and p.groups == 1
            and max(p.dilation) >= 2 and _reads_input(p))


#: the channels a blocked path handles at once
BLOCK = 8


def _block_tail_forward(fwd, x, weight, bias, *, groups, **kw):
    y = fwd(x, weight, bias, groups=groups, **kw)
    per_group = x.shape[1] // groups
    if per_group > BLOCK and per_group % BLOCK:  # the last, partial block read twice
        y = _bump(y)
    return y


def _batch_block_backward(bwd, go, x, weight, bias, **kw):
    gx, gw, gb = bwd(go, x, weight, bias, **kw)
    if go.shape[0] > 4:  # images past a block of four: their grad_input dropped
        gx = np.array(gx, copy=True)
        gx[4:] = 0 * gx[4:] + 1
    return gx, gw, gb


#: the products a float16 path for long sums takes (`_float16_long_forward`)
FLOAT16_LONG = 2048


def _float16_long_forward(fwd, x, weight, bias, **kw):
    y = fwd(x, weight, bias, **kw)
    # a float16 path taken by sums of more than FLOAT16_LONG products, a term added twice
    long = x.dtype == np.float16 and int(np.prod(weight.shape[1:])) > FLOAT16_LONG
    return _bump(y) if long else y


def _outputs(p: ConvProblem) -> tuple[int, ...]:
    return tuple(p.output_size)


#: a remainder needs a stride and an extent past a window: input 1 with padding 1 under
#: stride 3 is as plain as input 2 under stride 2
_REMAINDER_FREE = frozenset({"stride", "padding"})

CAUSES: dict[str, Cause] = {cause.name: cause for cause in (
    Cause("stride remainder in grad_input", ("grad_input",),
          lambda p: any(_remainders(p)), _REMAINDER_FREE,
          (r"stride remainder >= 1", r"stride remainder"), backward=_remainder_backward),
    Cause("uninitialised remainder rows", ("grad_input",),
          lambda p: any(_remainders(p)), _REMAINDER_FREE,
          (r"stride remainder",), backward=_garbage_backward, garbage=True),
    Cause("padding off by one", ("forward", "grad_input"),
          lambda p: any(p.padding), frozenset({"padding"}),
          (r"padding >= 1",), forward=_padding_forward, backward=_padding_backward),
    Cause("stride >= 3 in grad_weight", ("grad_weight",),
          lambda p: max(p.stride) >= 3, frozenset({"stride"}),
          (r"stride >= 3",), backward=_stride3_backward),
    Cause("float64 computed in float32", ("forward", "grad_input", "grad_weight", "grad_bias"),
          lambda p: p.dtype == "float64" and (_reads_input(p) or p.bias),
          frozenset({"batch", "channels", "kernel"}),
          (r"dtype = float64", r"float32"), forward=_downcast_forward,
          backward=_downcast_backward),
    Cause("grad_bias a batch mean", ("grad_bias",),
          lambda p: p.batch >= 2 and p.bias, frozenset({"batch"}),
          (r"batch >= 2",), backward=_batch_mean_backward),
    Cause("grad_bias a mean over batch x positions", ("grad_bias",),
          lambda p: p.bias and p.batch * int(np.prod(_outputs(p))) >= 2,
          frozenset({"batch"}),
          (r"batch x output positions",), backward=_positions_mean_backward),
    Cause("kernel flipped in the forward", ("forward",),
          _flip_shows, frozenset({"kernel"}),
          (r"kernel >= 2",), forward=_flipped_forward),
    Cause("dilation refused", ("raised",),
          lambda p: max(p.dilation) >= 2, frozenset({"dilation"}),
          (r"dilation >= 2",), forward=_dilation_forward, backward=_dilation_backward),
    Cause("no case for bias None", ("raised",),
          lambda p: not p.bias, frozenset(),
          (r"no bias", r"bias = (False|None)", r"bias=None"),
          forward=_no_bias_forward, backward=_no_bias_backward),
    Cause("groups mixed", ("forward",),
          lambda p: p.groups >= 2 and (_reads_input(p) or p.bias), frozenset({"groups"}),
          (r"groups >= 2",), forward=_groups_forward),
    Cause("dilation ignored in grad_weight", ("grad_weight",),
          lambda p: max(p.dilation) >= 2, frozenset({"dilation"}),
          (r"dilation >= 2",), backward=_dilation_grad_weight),
    Cause("backward of square outputs only", ("raised",),
          lambda p: len(set(_outputs(p))) > 1, frozenset(),
          (r"!=", r"not square"), backward=_square_backward, dims=(2, 3)),
    Cause("size check without padding", ("raised",),
          _narrow, frozenset({"kernel", "padding"}),
          (r"the kernel \(dilated\) longer than the input on an axis",),
          forward=_size_check_forward, backward=_size_check_backward),
    Cause("partial block of channels", ("forward",),
          lambda p: p.in_channels // p.groups > BLOCK and (p.in_channels // p.groups) % BLOCK,
          frozenset({"channels"}),
          (r"in channels per group",), forward=_block_tail_forward),
    Cause("3x3 path ignores dilation", ("forward",),
          _on_3x3_path, frozenset({"kernel", "dilation"}),
          (r"dilation >= 2",), forward=_dilated_3x3_path_forward),
    Cause("long float16 reduction", ("forward",),
          lambda p: p.dtype == "float16" and p.forward_terms() > FLOAT16_LONG,
          frozenset({"channels", "kernel"}),
          (rf"K \(in channels per group x kernel taps\) >= {FLOAT16_LONG + 1}",),
          forward=_float16_long_forward),
    Cause("batch block of four", ("grad_input",),
          lambda p: p.batch > 4, frozenset({"batch"}),
          (r"batch >= 5",), backward=_batch_block_backward),
)}


# -- implementations ------------------------------------------------------------------

@dataclass
class ZooImplementation:
    """A generated implementation's functions and its ground truth."""

    name: str
    dims: tuple[int, ...]
    causes: list[Cause] = field(default_factory=list)
    #: the array library its functions take and return: "numpy" or "torch"
    arrays: str = "numpy"

    def module(self) -> SimpleNamespace:
        functions: dict[str, Any] = {}
        for n in self.dims:
            fwd, bwd = getattr(einsum, f"conv{n}d"), getattr(einsum, f"conv{n}d_backward")
            for cause in self.causes:
                if n not in cause.dims:
                    continue
                if cause.forward is not None:
                    fwd = _wrapped(cause.forward, fwd)
                if cause.backward is not None:
                    bwd = _wrapped(cause.backward, bwd)
            functions[f"conv{n}d"], functions[f"conv{n}d_backward"] = fwd, bwd
        capabilities = None
        if self.arrays == "torch":
            functions = {name: _on_torch(f) for name, f in functions.items()}
            capabilities = {"arrays": "torch"}
        return SimpleNamespace(**functions, CAPABILITIES=capabilities,
                               ZOO_CAUSES=[cause.name for cause in self.causes])

    @property
    def ops(self) -> tuple[str, ...]:
        return tuple(f"conv{n}d" for n in self.dims)


def _wrapped(mistake: Callable[..., Any], inner: Callable[..., Any]) -> Callable[..., Any]:
    return lambda *args, **kw: mistake(inner, *args, **kw)


def _on_torch(function: Callable[..., Any]) -> Callable[..., Any]:
    """``function`` (on NumPy arrays) taking and returning CPU torch tensors."""
    import torch

    def numpy_of(a: Any) -> Any:
        return a.detach().numpy() if isinstance(a, torch.Tensor) else a

    def tensor_of(r: Any) -> Any:
        return None if r is None else torch.from_numpy(np.ascontiguousarray(r))

    def on_torch(*args: Any, **kw: Any) -> Any:
        result = function(*map(numpy_of, args), **kw)
        if isinstance(result, tuple):
            return tuple(map(tensor_of, result))
        return tensor_of(result)
    return on_torch


#: causes added after the zoo's first figures (paths real kernels take for one
#: archetype's geometry or one size, a size check), each drawn apart from the others
#: from a stream of its own (`generate`): an implementation that does not draw one
#: keeps the causes it had before it was added, so earlier figures stay comparable
APART_CAUSES: tuple[str, ...] = ("3x3 path ignores dilation", "long float16 reduction",
                                 "size check without padding")
#: one implementation in APART_SHARE draws each of them
APART_SHARE = 5
#: the most causes an implementation has: three, and one drawn apart
MOST_CAUSES = 4

#: causes that hide each other entirely (the same condition and results, or one's
#: region inside the other's in the same function: a 3x3 dilated problem shows a
#: flipped kernel too): never together
_EXCLUSIVE = ({"stride remainder in grad_input", "uninitialised remainder rows"},
              {"dilation refused", "dilation ignored in grad_weight"},
              {"dilation refused", "3x3 path ignores dilation"},
              {"kernel flipped in the forward", "3x3 path ignores dilation"},
              # the sums that long are visited with a kernel of many taps, all flipped
              {"kernel flipped in the forward", "long float16 reduction"},
              {"grad_bias a batch mean", "grad_bias a mean over batch x positions"},
              {"float64 computed in float32", "no case for bias None"})


def generate(seed: int, index: int, arrays: str = "numpy") -> ZooImplementation:
    """The zoo's implementation ``index`` of ``seed``: one to three causes, one or three
    dimensions, and in one of `APART_SHARE` each of `APART_CAUSES` besides; on ``arrays``
    ("numpy" or "torch": the same causes)."""
    rng = random.Random(f"zoo {seed} {index}")
    dims = rng.choice([(2,), (2,), (1, 2, 3)])
    chosen: list[Cause] = []

    def options(names) -> list[str]:
        return [n for n in names if n not in {c.name for c in chosen}
                and set(CAUSES[n].dims) & set(dims)
                and not any({n, c.name} <= group for group in _EXCLUSIVE for c in chosen)]
    for _ in range(rng.choice([1, 2, 2, 3])):
        chosen.append(CAUSES[rng.choice(options(sorted(set(CAUSES) - set(APART_CAUSES))))])
    for k, name in enumerate(APART_CAUSES):
        stream = random.Random(f"zoo paths {seed} {index}" if k == 0
                              else f"zoo paths {k} {seed} {index}")
        if stream.randrange(APART_SHARE) == 0 and options([name]) \
                and len(chosen) < MOST_CAUSES:
            chosen.append(CAUSES[name])
    library = "" if arrays == "numpy" else f"{arrays}_"
    return ZooImplementation(f"zoo_{library}{seed}_{index}", dims, chosen, arrays)


def alone(impl: ZooImplementation, cause: Cause) -> ZooImplementation:
    """``impl`` with only ``cause``: what shows a case is that cause's."""
    if impl.causes == [cause]:
        return impl
    k = impl.causes.index(cause)
    return ZooImplementation(f"{impl.name}_cause{k}", impl.dims, [cause], impl.arrays)


_NAME = re.compile(r"zoo_(?:(torch)_)?(\d+)_(\d+)(?:_cause(\d+))?$")


def __getattr__(name: str) -> SimpleNamespace:
    """``zoo_<seed>_<index>``: that implementation's functions (a spec's attribute);
    ``zoo_<seed>_<index>_cause<k>``: with its k-th cause alone."""
    match = _NAME.match(name)
    if match is None:
        raise AttributeError(name)
    library, seed, index, cause = match.groups()
    impl = generate(int(seed), int(index), library or "numpy")
    if cause is not None:
        impl = alone(impl, impl.causes[int(cause)])
    return impl.module()
