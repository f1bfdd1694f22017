"""MLX 0.32: the vjp of conv_transpose with output_padding gives an input cotangent one element short.

conv_transpose1d of an input of length 2, kernel 1, stride 2, output_padding 1:
the forward pass is right (length 4), but mx.vjp returns an input cotangent of
length 1, not 2 (the input's shape). The same with kernel 2 on length 3
(cotangent 2, not 3). float32, one channel.
Exit status 1 while the bug is there, 0 once fixed.
"""

import sys

import mlx.core as mx
import numpy as np

x = mx.array(np.ones((1, 2, 1), np.float32))  # (N, L, C_in)
w = mx.array(np.ones((1, 1, 1), np.float32))  # (C_out, K, C_in)


def f(x, w):
    return mx.conv_transpose1d(x, w, stride=2, output_padding=1)


y = f(x, w)
_, (grad_x, grad_w) = mx.vjp(f, [x, w], [mx.ones(y.shape)])
print(f"forward {y.shape} (expected (1, 4, 1)); input cotangent {grad_x.shape}, "
      f"input {x.shape}")
sys.exit(0 if grad_x.shape == x.shape else 1)
