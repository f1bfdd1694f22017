"""jaxlib 0.10.2: the input gradient of a valid conv2d aborts the whole process.

XLA's algebraic simplifier: "Window dimensions do not match RHS shape" (SIGABRT).
Minimal case: batch 1, 1 -> 1 channel, input 4x1, kernel 2x2, stride 2x2,
padding 1x1 (one input row more, 5x1, compiles). Exit status: killed by SIGABRT
while the bug is there, 0 once fixed.
"""

import jax

jax.config.update("jax_enable_x64", True)

import numpy as np  # noqa: E402
from jax import lax  # noqa: E402

x = np.ones((1, 1, 4, 1))
w = np.ones((1, 1, 2, 2))


def conv(x, w):
    return lax.conv_general_dilated(x, w, window_strides=(2, 2), padding=[(1, 1), (1, 1)],
                                    dimension_numbers=("NCHW", "OIHW", "NCHW"))


y, vjp = jax.vjp(conv, x, w)
print("forward", y.shape, flush=True)
grad_x, grad_w = vjp(np.ones(y.shape))  # the abort happens here
print("backward returned: fixed", np.asarray(grad_x).shape)
