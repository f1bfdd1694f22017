"""Example: JAX's convolution as an implementation under test.

``jax.lax.conv_general_dilated`` for the forward pass and ``jax.vjp`` of it
for the backward pass, exposed with the contract's functions for 1-D, 2-D
and 3-D.  JAX is an optional extra, not a dependency of the harness::

    pip install -e '.[jax]'          # or: pip install jax
    pytest --impl examples/jax_conv.py

Notes on what is being tested:

* JAX computes in float32 unless ``jax_enable_x64`` is set; with it unset a
  float64 input would silently come back rounded to float32.  This module
  sets it when imported (``jax.config.update("jax_enable_x64", True)``),
  which affects every later use of JAX in the same process.
* ``precision=HIGHEST`` asks for full-precision products where an
  accelerator would otherwise use reduced-precision (bf16/TF32) passes; on
  the CPU it changes nothing.
* float16 is accepted: XLA's CPU backend does the arithmetic as it sees fit
  (it may accumulate in float32).  Whatever precision it really delivers is
  what the suite reports; the tolerance is not loosened for it.
* jaxlib 0.10.2 aborts the whole process compiling some input gradients
  (XLA's algebraic simplifier: "Window dimensions do not match RHS shape"):
  on one axis kernel 2, stride 2, padding 1 and an even input of 4 or more,
  on another a kernel wider than the output (``examples/jax_crash_map.py``).
  Run it with ``--isolate`` so that the abort is a failure, shrunk and
  reported, not the end of the run.  Nothing here works around it: the
  suite reports it (examples/README.md, "Found in the wild").
"""

from functools import partial

import jax
import numpy as np

from conv_impl.adapters import nd_functions  # noqa: E402

jax.config.update("jax_enable_x64", True)

from jax import lax  # noqa: E402  (after the x64 switch, on purpose)
import jax.numpy as jnp  # noqa: E402

CAPABILITIES = {
    "dtypes": ("float16", "float32", "float64"),
    "dilation": True,
    "groups": True,
    "bias_none": True,
    "square": False,
    "contiguous_only": False,
}

_LAYOUTS = {1: ("NCH", "OIH", "NCH"), 2: ("NCHW", "OIHW", "NCHW"), 3: ("NCDHW", "OIDHW", "NCDHW")}


def _forward(x, weight, bias, stride, padding, dilation, groups):
    nd = x.ndim - 2
    y = lax.conv_general_dilated(
        x,
        weight,
        window_strides=stride,
        padding=[(p, p) for p in padding],
        rhs_dilation=dilation,
        dimension_numbers=_LAYOUTS[nd],
        feature_group_count=groups,
        precision=lax.Precision.HIGHEST,
    )
    if bias is not None:
        y = y + bias.reshape((1, -1) + (1,) * nd)
    return y


@partial(jax.jit, static_argnames=("stride", "padding", "dilation", "groups"))
def _jit_forward(x, weight, bias, *, stride, padding, dilation, groups):
    return _forward(x, weight, bias, stride, padding, dilation, groups)


@partial(jax.jit, static_argnames=("stride", "padding", "dilation", "groups"))
def _jit_backward(grad_output, x, weight, bias, *, stride, padding, dilation, groups):
    def f(x, weight, bias):
        return _forward(x, weight, bias, stride, padding, dilation, groups)

    _, vjp = jax.vjp(f, x, weight, bias)
    return vjp(grad_output)


def _static(nd, stride, padding, dilation, groups):
    def tup(v, default):
        v = default if v is None else v
        v = tuple(int(i) for i in v)
        if len(v) != nd:
            raise ValueError(f"expected {nd} values, got {v}")
        return v

    return dict(stride=tup(stride, None), padding=tup(padding, None),
                dilation=tup(dilation, (1,) * nd), groups=int(groups))


def _jnp(a, dtype):
    return None if a is None else jnp.asarray(np.asarray(a, dtype=dtype))


def _convnd(nd, x, weight, bias, stride, padding, dilation, groups):
    x = np.asarray(x)
    if x.ndim != nd + 2:
        raise ValueError(f"conv{nd}d needs x of shape (N, C, {nd} spatial), got {x.shape}")
    y = _jit_forward(_jnp(x, x.dtype), _jnp(weight, x.dtype), _jnp(bias, x.dtype),
                     **_static(nd, stride, padding, dilation, groups))
    return np.array(y, dtype=x.dtype)


def _convnd_backward(nd, grad_output, x, weight, bias, stride, padding, dilation, groups):
    x = np.asarray(x)
    if x.ndim != nd + 2:
        raise ValueError(f"conv{nd}d_backward needs x of shape (N, C, {nd} spatial), got {x.shape}")
    dt = x.dtype
    gx, gw, gb = _jit_backward(_jnp(grad_output, dt), _jnp(x, dt), _jnp(weight, dt), _jnp(bias, dt),
                               **_static(nd, stride, padding, dilation, groups))
    return (np.array(gx, dtype=dt), np.array(gw, dtype=dt),
            None if bias is None else np.array(gb, dtype=dt))


# conv1d, conv2d, conv3d and their _backward: the contract's six functions
globals().update(nd_functions(_convnd, _convnd_backward))
