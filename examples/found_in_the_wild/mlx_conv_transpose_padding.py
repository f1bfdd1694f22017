"""MLX 0.32: conv_transpose gives the wrong shape, or raises, when padding > dilation * (kernel - 1).

The output length of a transposed convolution is
(L - 1) * stride - 2 * padding + dilation * (kernel - 1) + output_padding + 1
(torch's, and MLX's own documentation's); MLX computes it as a padded plain
convolution, which breaks once the padding exceeds dilation * (kernel - 1):

- L=4, kernel 3, stride 2, padding 3: length 3 expected, MLX returns 1;
- L=2, kernel 1, stride 3, padding 1: length 2 expected, MLX raises ValueError
  ("[conv] Spatial dimensions of input after padding cannot be smaller ...").

1-d, one channel, float32; conv_transpose2d/3d behave alike.
Exit status 1 while the bug is there, 0 once fixed.
"""

import sys

import mlx.core as mx
import numpy as np

wrong = 0
for length, kernel, stride, padding in [(4, 3, 2, 3), (2, 1, 3, 1)]:
    expected = (length - 1) * stride - 2 * padding + (kernel - 1) + 1
    x = mx.array(np.ones((1, length, 1), np.float32))  # (N, L, C_in)
    w = mx.array(np.ones((1, kernel, 1), np.float32))  # (C_out, K, C_in)
    case = f"L={length} kernel={kernel} stride={stride} padding={padding}"
    try:
        got = mx.conv_transpose1d(x, w, stride=stride, padding=padding).shape[1]
    except ValueError as exc:
        print(f"{case}: expected length {expected}, MLX raised: {exc}")
        wrong += 1
        continue
    print(f"{case}: expected length {expected}, got {got}")
    wrong += got != expected
sys.exit(1 if wrong else 0)
