"""What makes jaxlib 0.10.2 abort in conv backward ("Window dimensions do not match RHS
shape", XLA's algebraic simplifier): each problem below is compiled in a forked child, so
an abort is a row of the table, not the end of the script.

    python examples/jax_crash_map.py

Findings (2-D sweeps over input 1-6, kernel 1-4, stride 1-3, padding 0-3, dilation 1-2
per axis, one axis at a time, the other held at a crashing setting; 1-D: 351 problems):

* Only the input gradient (``jax.vjp`` with respect to x); the weight gradient compiles.
* It needs two axes (no 1-D problem aborts; conv3d does, on any two of its three axes):
  - axis A: kernel 2, stride 2, padding 1, dilation 1, and an even input of 4 or more
    (4, 6, 8, 10 abort; 5, 7 and 2 do not; no other kernel, stride or padding did);
  - axis B: a kernel wider than the output on that axis, almost always (e.g. input 1,
    kernel 2, padding 1; or input 9, kernel 8, stride 1: the input need not be narrower
    than the kernel).
* groups > 1 does not abort (a different lowering); batch, channels, float16/32/64 do not
  matter.
"""

from __future__ import annotations

import os
import signal

import jax
import numpy as np

jax.config.update("jax_enable_x64", True)
from jax import lax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

LAYOUTS = {1: ("NCH", "OIH", "NCH"), 2: ("NCHW", "OIHW", "NCHW"), 3: ("NCDHW", "OIDHW", "NCDHW")}

#: (what it shows, input, kernel, stride, padding, groups, gradient with respect to)
PROBLEMS = [
    ("issue 15's case", (4, 1), (2, 2), (2, 2), (1, 1), 1, "x"),
    ("the weight gradient of it", (4, 1), (2, 2), (2, 2), (1, 1), 1, "w"),
    ("axes swapped", (1, 4), (2, 2), (2, 2), (1, 1), 1, "x"),
    ("axis A input 5 (odd)", (5, 1), (2, 2), (2, 2), (1, 1), 1, "x"),
    ("axis A input 8", (8, 1), (2, 2), (2, 2), (1, 1), 1, "x"),
    ("axis A kernel 3, padding 2", (5, 1), (3, 2), (2, 2), (2, 1), 1, "x"),
    ("axis A stride 3", (4, 1), (2, 2), (3, 2), (1, 1), 1, "x"),
    ("axis B stride 1 (output 2 = kernel)", (4, 1), (2, 2), (2, 1), (1, 1), 1, "x"),
    ("axis B input 9 >= kernel 8 > output 2", (4, 9), (2, 8), (2, 1), (1, 0), 1, "x"),
    ("axis B input 9, kernel 5 (output 5)", (4, 9), (2, 5), (2, 1), (1, 0), 1, "x"),
    ("groups 2 (4 -> 4 channels)", (4, 1), (2, 2), (2, 2), (1, 1), 2, "x"),
    ("1-D, axis A alone", (4,), (2,), (2,), (1,), 1, "x"),
    ("conv3d, A and B on two axes", (1, 4, 1), (2, 2, 1), (2, 2, 1), (1, 1, 0), 1, "x"),
    ("conv3d, the harness's minimal case", (1, 4, 4), (1, 3, 2), (1, 2, 2), (0, 0, 1), 1, "x"),
]


def _compile(size, kernel, stride, padding, groups, wrt) -> None:
    nd, channels = len(size), 2 * groups if groups > 1 else 1
    x = jnp.ones((1, channels, *size), np.float32)
    w = jnp.ones((channels, channels // groups, *kernel), np.float32)

    def f(x, w):
        return lax.conv_general_dilated(x, w, stride, [(p, p) for p in padding],
                                        dimension_numbers=LAYOUTS[nd],
                                        feature_group_count=groups)
    g = jnp.ones_like(f(x, w))
    if wrt == "x":
        grad = jax.jit(lambda g, x, w: jax.vjp(lambda x: f(x, w), x)[1](g))
    else:
        grad = jax.jit(lambda g, x, w: jax.vjp(lambda w: f(x, w), w)[1](g))
    jax.block_until_ready(grad(g, x, w))


def outcome(*problem) -> str:
    pid = os.fork()
    if pid == 0:
        os.dup2(os.open(os.devnull, os.O_WRONLY), 2)  # XLA's abort message
        try:
            _compile(*problem)
        except Exception:  # noqa: BLE001
            os._exit(3)
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        return f"ABORTS ({signal.Signals(os.WTERMSIG(status)).name})"
    return "compiles" if os.WEXITSTATUS(status) == 0 else "raises"


if __name__ == "__main__":
    print(f"jax {jax.__version__}", flush=True)
    for what, *problem in PROBLEMS:
        size, kernel, stride, padding, groups, wrt = problem
        print(f"{outcome(*problem):<16} d{wrt}  input {size} kernel {kernel} stride {stride} "
              f"padding {padding} groups {groups}: {what}", flush=True)
