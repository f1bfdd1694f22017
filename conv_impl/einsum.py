"""Pure-NumPy N-d convolution written with ``np.einsum`` over strided windows.

This is the project's own reference implementation of the harness contract
(see CONTRACT.md): ``conv{1,2,3}d``, ``conv_transpose{1,2,3}d`` and their
``_backward`` functions, with the semantics of
``torch.nn.functional.conv{1,2,3}d`` / ``conv_transpose{1,2,3}d``.

One core serves every number of spatial axes: a cross-correlation and its
gradients (``_correlate`` and ``_correlate_grads``, computed by
``_einsum_engine``, whose docstring explains the layout and why it is fast).
A transposed convolution is the input gradient of an ordinary one, and its
backward pass reuses the same two primitives with the roles of the arrays
swapped. This module holds the contract's entry points and the argument
checks, which raise ``ValueError`` wherever torch raises.

Inputs are never written to: all work happens on our own zero-padded copy
of the input, and every window is a slice of that copy. float16 is computed
in float32 and cast back; float32 and float64 in their own dtype.

bfloat16 (ml_dtypes.bfloat16, which the harness draws only for an implementation
that declares it) is not taken: ``np.einsum`` has no bfloat16 loop ("invalid data
type for einsum"), and a cast to float32 and back would check that cast, not this
module's arithmetic. So its dtypes are the harness's default three.
"""

from __future__ import annotations

import math
from typing import Callable, Optional, Sequence

import numpy as np

from . import _algorithm_table as _table
from . import _einsum_engine as _engine
from . import _fft, _winograd

__all__ = [
    "conv1d", "conv2d", "conv3d",
    "conv1d_backward", "conv2d_backward", "conv3d_backward",
    "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
    "conv_transpose1d_backward", "conv_transpose2d_backward",
    "conv_transpose3d_backward",
]

Ints = tuple[int, ...]


# ----------------------------------------------------------------------------
# small helpers
# ----------------------------------------------------------------------------

def _compute_dtype(dtype: np.dtype) -> np.dtype:
    """float16 is accumulated in float32; other floats in their own dtype."""
    if dtype == np.float16:
        return np.dtype(np.float32)
    if dtype in (np.float32, np.float64):
        return np.dtype(dtype)
    raise ValueError(f"unsupported dtype {dtype}; expected float16, float32 or float64")


def _as_ints(value: Sequence[int] | int, nd: int, name: str) -> Ints:
    if isinstance(value, (int, np.integer)):
        return (int(value),) * nd
    out = tuple(int(v) for v in value)
    if len(out) != nd:
        raise ValueError(f"{name} must have {nd} entries, got {value!r}")
    return out


def _out_size(size: Ints, kernel: Ints, stride: Ints, padding: Ints,
              dilation: Ints) -> Ints:
    """Output size of a convolution, as torch computes it."""
    return tuple((n + 2 * p - d * (k - 1) - 1) // s + 1
                 for n, k, s, p, d in zip(size, kernel, stride, padding, dilation))


# ----------------------------------------------------------------------------
# the two primitives (cross-correlation, as torch's "convolution", and its
# gradients), computed by _einsum_engine
# ----------------------------------------------------------------------------

def _plan(x_shape: Ints, w_shape: Ints, groups: int, in_size: Ints, stride: Ints,
          padding: Ints, dilation: Ints, out_size: Ints, dtype: np.dtype) -> _engine.Plan:
    """Plan of correlate(x, w): x (N, C_in, *in_size), w (C_out, C_in/g, *k)."""
    return _engine.make_plan(int(x_shape[0]), int(w_shape[1]) * groups, int(w_shape[0]),
                             groups, tuple(in_size), tuple(w_shape[2:]), stride,
                             padding, dilation, tuple(out_size), np.dtype(dtype))


def _correlate(x: np.ndarray, w: np.ndarray, bias, stride: Ints, padding: Ints,
               dilation: Ints, groups: int, out_size: Ints,
               algorithm: str = "auto") -> np.ndarray:
    """y[n, o, i] = sum_{c, k} xpad[n, c, i*stride + k*dilation] * w[o, c, k] + b[o].

    ``x``: (N, C_in, *S); ``w``: (C_out, C_in/groups, *K); returns
    (N, C_out, *out_size) in ``w``'s dtype (the caller picks the compute
    dtype; ``x`` may be float16, it is converted while being laid out).
    ``algorithm``: see `_choose`.
    """
    path = _choose(algorithm, "forward", x.shape, w, stride, padding, dilation, groups,
                   algorithm == "auto" and x.dtype == np.float16)
    if path != GEMM:
        _PATHS.append(path)
        y = _run(path, "forward", x, w, None, stride, padding, dilation, groups, x.shape[2:])
        if y.shape[2:] != tuple(out_size):  # a transposed convolution's output padding
            y = np.ascontiguousarray(y[(Ellipsis,) + tuple(slice(0, o) for o in out_size)])
        return _add_bias(y, bias)
    plan = _plan(x.shape, w.shape, groups, x.shape[2:], stride, padding, dilation,
                 out_size, w.dtype)
    _PATHS.extend(_engine.paths(plan, backward=False))
    return _engine.forward(plan, x, w, bias)


def _correlate_grads(x: Optional[np.ndarray], go: np.ndarray, w: np.ndarray,
                     stride: Ints, padding: Ints, dilation: Ints, groups: int,
                     in_size: Ints, want_input: bool, want_weight: bool,
                     want_bias: bool = False, algorithm: str = "auto"):
    """(d/dx, d/dw, d/db) of sum((correlate(x, w) + b) * go); ``x`` only for
    d/dw; each None unless wanted.

    d/dx is (N, C_in, *in_size) and exactly zero where no window reads
    (stride remainders); d/dw is (C_out, C_in/groups, *K); d/db is (C_out,),
    grad_output summed over batch and positions in ``w``'s dtype (the
    engine sums it alongside the weight gradient).
    """
    shape = go.shape[:1] + (w.shape[1] * groups,) + tuple(in_size)
    narrow = algorithm == "auto" and go.dtype == np.float16
    gx = gw = gb = None
    engine_input = engine_weight = False
    # the weight gradient first: its work arrays then do not sit beside the input
    # gradient (the peak memory of a Winograd layer's backward pass)
    if want_weight or want_bias:
        path = _choose(algorithm, "weight", shape, w, stride, padding, dilation, groups, narrow)
        if path == GEMM:
            engine_weight = True
        else:
            _PATHS.append(path)
            if want_weight:
                gw = _run(path, "weight", go, w, x, stride, padding, dilation, groups,
                          in_size)
            gb = _grad_bias(go, True if want_bias else None, w.dtype)
    if want_input:
        path = _choose(algorithm, "input", shape, w, stride, padding, dilation, groups, narrow)
        if path == GEMM:
            engine_input = True
        else:
            _PATHS.append(path)
            gx = _run(path, "input", go, w, None, stride, padding, dilation, groups, in_size)
    if engine_input or engine_weight:
        plan = _plan(go.shape, w.shape, groups, in_size,
                     stride, padding, dilation, go.shape[2:], w.dtype)
        _PATHS.extend(_engine.paths(plan, True, engine_input, engine_weight))
        egx, egw, egb = _engine.backward(plan, x, w, go, engine_input,
                                         engine_weight and want_weight,
                                         engine_weight and want_bias)
        gx = egx if engine_input else gx
        gw, gb = (egw, egb) if engine_weight else (gw, gb)
    return gx, gw, gb


# ----------------------------------------------------------------------------
# the other algorithms: Winograd F(2,3) / F(4,3) and FFT (conv_impl.winograd,
# conv_impl.fft), and which one a call takes
# ----------------------------------------------------------------------------

GEMM = "gemm"
WINOGRAD = {2: "winograd F(2,3)", 4: "winograd F(4,3)"}
FFT = "fft"
#: what each ``algorithm`` argument may take, besides the engine (GEMM)
ALGORITHMS: dict[str, tuple[str, ...]] = {
    "auto": (WINOGRAD[2], WINOGRAD[4], FFT),  # as the measured table says (_algorithm_table)
    "gemm": (),
    "winograd": (WINOGRAD[4],),
    "winograd-f2": (WINOGRAD[2],),
    "fft": (FFT,),
}


def _applies(path: str, part: str, kernel: Ints, stride: Ints, padding: Ints,
             dilation: Ints) -> bool:
    """Whether ``path`` computes ``part`` (forward, input, weight) of this geometry."""
    if path == FFT:
        return all(s == 1 for s in stride) and math.prod(kernel) > 1
    return _winograd.applies(kernel, stride, dilation)


def _choose(algorithm: str, part: str, x_shape: Ints, w: np.ndarray, stride: Ints,
            padding: Ints, dilation: Ints, groups: int, narrow: bool = False) -> str:
    """The path of ``part`` (``forward``, ``input``, ``weight``) of correlate(x, w).

    ``algorithm``: ``gemm`` (the engine), ``winograd`` (F(4,3)), ``winograd-f2``,
    ``fft`` (each where its geometry allows, else the engine), or ``auto``: the
    fastest path the benchmark measured for such a layer (`_algorithm_table`).
    ``narrow``: the data are float16 (computed in float32); ``auto`` then never
    takes F(4,3).
    """
    kernel = tuple(w.shape[2:])
    allowed = [p for p in ALGORITHMS[algorithm]
               if _applies(p, part, kernel, stride, padding, dilation)]
    if narrow:
        # float16 data, computed in float32: F(4,3)'s growth in float32 can exceed
        # the direct-sum bound in float16 that the harness gives this module; F(2,3)'s
        # and the FFT's stay far below it (docs/algorithms.md)
        allowed = [p for p in allowed if p != WINOGRAD[4]]
    if algorithm != "auto" or not allowed:
        return allowed[0] if allowed else GEMM
    return _table.fastest(part, w.dtype, int(x_shape[0]), int(x_shape[1]), int(w.shape[0]),
                          groups, kernel, tuple(x_shape[2:]), padding, dilation,
                          allowed) or GEMM


def _run(path: str, part: str, a: np.ndarray, w: np.ndarray, x: Optional[np.ndarray],
         stride: Ints, padding: Ints, dilation: Ints, groups: int,
         in_size: Ints) -> np.ndarray:
    """``part`` of the correlation by Winograd or FFT: ``a`` is x (forward) or
    grad_output (input, weight); ``x`` the input, for the weight gradient."""
    if path == FFT:
        if part == "forward":
            return _fft.correlate(a, w, padding, dilation, groups)
        if part == "input":
            return _fft.input_grad(a, w, in_size, padding, dilation, groups)
        return _fft.weight_grad(x, a, tuple(w.shape[2:]), padding, dilation, groups, w.dtype)
    m = 2 if path == WINOGRAD[2] else 4
    if part == "forward":
        return _winograd.correlate(a, w, padding, groups, m, dilation)
    if part == "input":
        return _winograd.input_grad(a, w, in_size, padding, groups, m, dilation)
    return _winograd.weight_grad(x, a, padding, groups, m, w.dtype, dilation)


#: The algorithm paths ``auto`` dispatches to, each with a layer on which the measured
#: table takes it (checked by tests/harness/test_engine_paths.py): the conformance
#: suite visits these problems in every check, and its summary counts each path.
HARNESS_PATHS = {
    f"einsum path: {WINOGRAD[4]}": ["conv2d float32 mb1ic16ih34iw34oc16kh3kw3ph1pw1"],
    f"einsum path: {WINOGRAD[2]}": ["conv2d float32 mb1ic96ih12iw12oc96kh3kw3ph2pw2dh1dw1"],
    f"einsum path: {FFT}": ["conv2d float64 mb1ic16ih36iw36oc16kh5kw5ph2pw2"],
}

#: the engine's paths taken since `harness_events` last emptied it
_PATHS: list[str] = []


def harness_events() -> list[str]:
    """The engine paths the calls since the last call of this function took (see
    ``_einsum_engine.paths``), each once: the conformance suite reports them as
    Hypothesis events and in its summary, so a run shows which paths it reached."""
    taken = sorted(set(_PATHS))
    _PATHS.clear()
    return [f"einsum path: {label}" for label in taken]


# ----------------------------------------------------------------------------
# argument handling
# ----------------------------------------------------------------------------

def _prepare(nd: int, x, weight, bias, stride, padding, dilation, groups):
    x = np.asarray(x)
    weight = np.asarray(weight)
    if x.ndim != nd + 2:
        raise ValueError(f"expected input with {nd + 2} dimensions, got shape {x.shape}")
    if weight.ndim != nd + 2:
        raise ValueError(f"expected weight with {nd + 2} dimensions, got shape {weight.shape}")
    if x.dtype != weight.dtype:
        raise ValueError(f"input dtype {x.dtype} and weight dtype {weight.dtype} differ")
    cdt = _compute_dtype(x.dtype)
    stride = _as_ints(stride, nd, "stride")
    padding = _as_ints(padding, nd, "padding")
    dilation = _as_ints(dilation, nd, "dilation")
    if any(s <= 0 for s in stride):
        raise ValueError(f"stride must be positive, got {stride}")
    if any(d <= 0 for d in dilation):
        raise ValueError(f"dilation must be positive, got {dilation}")
    if any(p < 0 for p in padding):
        raise ValueError(f"padding must be non-negative, got {padding}")
    groups = int(groups)
    if groups <= 0:
        raise ValueError(f"groups must be positive, got {groups}")
    if bias is not None:
        bias = np.asarray(bias)
        if bias.dtype != x.dtype:
            raise ValueError(f"bias dtype {bias.dtype} differs from input dtype {x.dtype}")
    return x, weight, bias, cdt, stride, padding, dilation, groups


def _check_conv(x: np.ndarray, weight: np.ndarray, bias, stride: Ints,
                padding: Ints, dilation: Ints, groups: int) -> Ints:
    """Validate a forward convolution problem; return its output size."""
    c_in, c_out = x.shape[1], weight.shape[0]
    if c_in % groups or c_out % groups:
        raise ValueError(f"groups={groups} must divide in_channels={c_in} "
                         f"and out_channels={c_out}")
    if weight.shape[1] * groups != c_in:
        raise ValueError(f"weight shape {weight.shape} expects "
                         f"{weight.shape[1] * groups} input channels, got {c_in}")
    if bias is not None and bias.shape != (c_out,):
        raise ValueError(f"bias must have shape ({c_out},), got {bias.shape}")
    kernel = weight.shape[2:]
    for n, k, p, d in zip(x.shape[2:], kernel, padding, dilation):
        if d * (k - 1) + 1 > n + 2 * p:
            raise ValueError(
                f"kernel size {tuple(kernel)} (dilation {dilation}) is larger "
                f"than the padded input {tuple(s + 2 * q for s, q in zip(x.shape[2:], padding))}")
    return _out_size(x.shape[2:], kernel, stride, padding, dilation)


def _check_transpose(x: np.ndarray, weight: np.ndarray, bias, stride: Ints,
                     padding: Ints, output_padding: Ints, dilation: Ints,
                     groups: int) -> Ints:
    """Validate a transposed convolution problem; return its output size."""
    c_in = x.shape[1]
    if weight.shape[0] != c_in:
        raise ValueError(f"weight shape {weight.shape} expects {weight.shape[0]} "
                         f"input channels, got {c_in}")
    if c_in % groups:
        raise ValueError(f"groups={groups} must divide in_channels={c_in}")
    c_out = weight.shape[1] * groups
    if bias is not None and bias.shape != (c_out,):
        raise ValueError(f"bias must have shape ({c_out},), got {bias.shape}")
    for op, s, d in zip(output_padding, stride, dilation):
        if op < 0 or op >= max(s, d):
            raise ValueError(f"output_padding {output_padding} must be smaller "
                             f"than either stride {stride} or dilation {dilation}")
    kernel = weight.shape[2:]
    out = tuple((n - 1) * s - 2 * p + d * (k - 1) + op + 1
                for n, k, s, p, op, d in zip(x.shape[2:], kernel, stride, padding,
                                              output_padding, dilation))
    if any(o <= 0 for o in out):
        raise ValueError(f"transposed convolution output size {out} is not positive")
    return out


def _grad_bias(go: np.ndarray, bias, dtype: np.dtype) -> Optional[np.ndarray]:
    """Sum of grad_output over batch and positions, accumulated in ``dtype``."""
    if bias is None:
        return None
    return go.sum(axis=(0,) + tuple(range(2, go.ndim)), dtype=dtype)


def _add_bias(y: np.ndarray, bias) -> np.ndarray:
    if bias is not None:
        y += bias.reshape((1, -1) + (1,) * (y.ndim - 2))
    return y


# ----------------------------------------------------------------------------
# the contract's entry points (one N-d implementation of each)
# ----------------------------------------------------------------------------

def _cast(a: Optional[np.ndarray], dtype: np.dtype) -> Optional[np.ndarray]:
    return None if a is None else a.astype(dtype, copy=False)


def _conv_nd(nd, x, weight, bias, stride, padding, dilation, groups, algorithm="auto"):
    x, weight, bias, cdt, stride, padding, dilation, groups = _prepare(
        nd, x, weight, bias, stride, padding, dilation, groups)
    out_size = _check_conv(x, weight, bias, stride, padding, dilation, groups)
    # x and grad_output are converted to the compute dtype while being laid
    # out (no separate float16 -> float32 copy); weight and bias here.
    y = _correlate(x, _cast(weight, cdt), _cast(bias, cdt), stride, padding,
                   dilation, groups, out_size, algorithm)
    return y.astype(x.dtype, copy=False)


def _conv_nd_backward(nd, grad_output, x, weight, bias, stride, padding,
                      dilation, groups, algorithm="auto"):
    x, weight, bias, cdt, stride, padding, dilation, groups = _prepare(
        nd, x, weight, bias, stride, padding, dilation, groups)
    out_size = _check_conv(x, weight, bias, stride, padding, dilation, groups)
    go = np.asarray(grad_output)
    if go.shape != x.shape[:1] + weight.shape[:1] + out_size:
        raise ValueError(f"grad_output shape {go.shape} does not match the "
                         f"output shape {x.shape[:1] + weight.shape[:1] + out_size}")
    gx, gw, gb = _correlate_grads(x, go, _cast(weight, cdt), stride, padding, dilation,
                                  groups, x.shape[2:], True, True, bias is not None,
                                  algorithm)
    dt = x.dtype
    return gx.astype(dt, copy=False), gw.astype(dt, copy=False), _cast(gb, dt)


def _conv_transpose_nd(nd, x, weight, bias, stride, padding, output_padding,
                       dilation, groups, algorithm="auto"):
    x, weight, bias, cdt, stride, padding, dilation, groups = _prepare(
        nd, x, weight, bias, stride, padding, dilation, groups)
    output_padding = _as_ints(output_padding, nd, "output_padding")
    out_size = _check_transpose(x, weight, bias, stride, padding, output_padding,
                                dilation, groups)
    # A transposed convolution is the input gradient of the convolution whose
    # weight (C_out_conv, C_in_conv/groups, *k) is this weight, with x in the
    # role of that convolution's grad_output.
    y, _, _ = _correlate_grads(None, x, _cast(weight, cdt), stride, padding, dilation,
                               groups, out_size, True, False, algorithm=algorithm)
    y = _add_bias(y, _cast(bias, cdt))
    return y.astype(x.dtype, copy=False)


def _conv_transpose_nd_backward(nd, grad_output, x, weight, bias, stride, padding,
                                output_padding, dilation, groups, algorithm="auto"):
    x, weight, bias, cdt, stride, padding, dilation, groups = _prepare(
        nd, x, weight, bias, stride, padding, dilation, groups)
    output_padding = _as_ints(output_padding, nd, "output_padding")
    out_size = _check_transpose(x, weight, bias, stride, padding, output_padding,
                                dilation, groups)
    go = np.asarray(grad_output)
    expect = x.shape[:1] + (weight.shape[1] * groups,) + out_size
    if go.shape != expect:
        raise ValueError(f"grad_output shape {go.shape} does not match the "
                         f"output shape {expect}")
    wc = _cast(weight, cdt)
    in_size = x.shape[2:]
    # The forward map is the adjoint of correlate(., weight); so its input
    # gradient is that correlation of grad_output (only the first in_size
    # windows: with output_padding >= stride there would be one more), and
    # its weight gradient is the correlation's weight gradient with
    # grad_output in the role of the input and x in that of grad_output.
    gx = _correlate(go, wc, None, stride, padding, dilation, groups, in_size, algorithm)
    _, gw, _ = _correlate_grads(go, x, wc, stride, padding, dilation, groups,
                                out_size, False, True, algorithm=algorithm)
    gb = _grad_bias(go, bias, cdt)
    dt = x.dtype
    return gx.astype(dt, copy=False), gw.astype(dt, copy=False), _cast(gb, dt)


def entry_points(algorithm: str) -> dict[str, Callable]:
    """The contract's twelve functions computing with ``algorithm`` (see `_choose`):
    ``conv_impl.winograd`` and ``conv_impl.fft`` are these with theirs."""
    if algorithm not in ALGORITHMS:
        raise ValueError(f"unknown algorithm {algorithm!r}; expected one of {sorted(ALGORITHMS)}")

    def forward(nd: int) -> Callable:
        def conv(x, weight, bias, *, stride, padding, dilation, groups):
            return _conv_nd(nd, x, weight, bias, stride, padding, dilation, groups, algorithm)
        return conv

    def backward(nd: int) -> Callable:
        def conv_backward(grad_output, x, weight, bias, *, stride, padding, dilation, groups):
            return _conv_nd_backward(nd, grad_output, x, weight, bias, stride, padding,
                                     dilation, groups, algorithm)
        return conv_backward

    def transposed(nd: int) -> Callable:
        def conv_transpose(x, weight, bias, *, stride, padding, output_padding, dilation,
                           groups):
            return _conv_transpose_nd(nd, x, weight, bias, stride, padding, output_padding,
                                      dilation, groups, algorithm)
        return conv_transpose

    def transposed_backward(nd: int) -> Callable:
        def conv_transpose_backward(grad_output, x, weight, bias, *, stride, padding,
                                    output_padding, dilation, groups):
            return _conv_transpose_nd_backward(nd, grad_output, x, weight, bias, stride,
                                               padding, output_padding, dilation, groups,
                                               algorithm)
        return conv_transpose_backward

    out: dict[str, Callable] = {}
    for nd in (1, 2, 3):
        for name, make in ((f"conv{nd}d", forward), (f"conv{nd}d_backward", backward),
                           (f"conv_transpose{nd}d", transposed),
                           (f"conv_transpose{nd}d_backward", transposed_backward)):
            fn = make(nd)
            fn.__name__ = fn.__qualname__ = name
            fn.__doc__ = f"{globals()[name].__doc__} ({algorithm} algorithm)"
            out[name] = fn
    return out


def conv1d(x, weight, bias, *, stride, padding, dilation, groups):
    """torch.nn.functional.conv1d in NumPy."""
    return _conv_nd(1, x, weight, bias, stride, padding, dilation, groups)


def conv2d(x, weight, bias, *, stride, padding, dilation, groups):
    """torch.nn.functional.conv2d in NumPy."""
    return _conv_nd(2, x, weight, bias, stride, padding, dilation, groups)


def conv3d(x, weight, bias, *, stride, padding, dilation, groups):
    """torch.nn.functional.conv3d in NumPy."""
    return _conv_nd(3, x, weight, bias, stride, padding, dilation, groups)


def conv1d_backward(grad_output, x, weight, bias, *, stride, padding, dilation, groups):
    """(grad_input, grad_weight, grad_bias) of conv1d; grad_bias None iff bias is."""
    return _conv_nd_backward(1, grad_output, x, weight, bias, stride, padding,
                             dilation, groups)


def conv2d_backward(grad_output, x, weight, bias, *, stride, padding, dilation, groups):
    """(grad_input, grad_weight, grad_bias) of conv2d; grad_bias None iff bias is."""
    return _conv_nd_backward(2, grad_output, x, weight, bias, stride, padding,
                             dilation, groups)


def conv3d_backward(grad_output, x, weight, bias, *, stride, padding, dilation, groups):
    """(grad_input, grad_weight, grad_bias) of conv3d; grad_bias None iff bias is."""
    return _conv_nd_backward(3, grad_output, x, weight, bias, stride, padding,
                             dilation, groups)


def conv_transpose1d(x, weight, bias, *, stride, padding, output_padding, dilation, groups):
    """torch.nn.functional.conv_transpose1d in NumPy."""
    return _conv_transpose_nd(1, x, weight, bias, stride, padding, output_padding,
                              dilation, groups)


def conv_transpose2d(x, weight, bias, *, stride, padding, output_padding, dilation, groups):
    """torch.nn.functional.conv_transpose2d in NumPy."""
    return _conv_transpose_nd(2, x, weight, bias, stride, padding, output_padding,
                              dilation, groups)


def conv_transpose3d(x, weight, bias, *, stride, padding, output_padding, dilation, groups):
    """torch.nn.functional.conv_transpose3d in NumPy."""
    return _conv_transpose_nd(3, x, weight, bias, stride, padding, output_padding,
                              dilation, groups)


def conv_transpose1d_backward(grad_output, x, weight, bias, *, stride, padding,
                              output_padding, dilation, groups):
    """(grad_input, grad_weight, grad_bias) of conv_transpose1d."""
    return _conv_transpose_nd_backward(1, grad_output, x, weight, bias, stride, padding,
                                       output_padding, dilation, groups)


def conv_transpose2d_backward(grad_output, x, weight, bias, *, stride, padding,
                              output_padding, dilation, groups):
    """(grad_input, grad_weight, grad_bias) of conv_transpose2d."""
    return _conv_transpose_nd_backward(2, grad_output, x, weight, bias, stride, padding,
                                       output_padding, dilation, groups)


def conv_transpose3d_backward(grad_output, x, weight, bias, *, stride, padding,
                              output_padding, dilation, groups):
    """(grad_input, grad_weight, grad_bias) of conv_transpose3d."""
    return _conv_transpose_nd_backward(3, grad_output, x, weight, bias, stride, padding,
                                       output_padding, dilation, groups)
