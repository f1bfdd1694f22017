"""torch 2.13.0 (CPU): a float64 grouped conv2d's weight gradient is wrong when the input
is Fortran-ordered and the weight is a channel slice of a channels-last buffer.

Found by the harness (issue 57) on a kernel that hands torch the arrays in the memory
layouts it draws: 2 groups, 4 -> 2 channels, a 1x2 input, a 1x1 kernel. Each layout alone
is right, and so is float32; only NumPy and torch are needed. Exit 1 while the bug is there.
"""

import sys

import numpy as np
import torch

x = np.arange(1.0, 9.0).reshape(1, 4, 1, 2)  # N, C_in, H, W
weight = np.array([1.0, 2.0, 3.0, 4.0]).reshape(2, 2, 1, 1)  # C_out, C_in / groups, kh, kw
grad_output = np.array([1.0, -1.0, 2.0, 0.5]).reshape(1, 2, 1, 2)

# the expected gradient, by its definition: grad_weight[o, c] = sum_j g[o, j] x[group(o) c, j]
expected = np.zeros_like(weight)
for o in range(2):
    for c in range(2):
        expected[o, c, 0, 0] = np.dot(grad_output[0, o, 0], x[0, 2 * o + c, 0])

x_fortran = np.asfortranarray(x)
buffer = np.zeros((2, 1, 1, 4))  # channels-last, two channels more than the weight has
channel_slice = np.moveaxis(buffer, -1, 1)[:, 1:3]
channel_slice[...] = weight


def grad_weight(x_array, weight_array):
    """torch's grad_weight, the tensors sharing the arrays' memory (and so their strides)."""
    tx = torch.from_numpy(x_array).requires_grad_()
    tw = torch.from_numpy(weight_array).requires_grad_()
    torch.nn.functional.conv2d(tx, tw, None, groups=2).backward(torch.from_numpy(grad_output))
    return tw.grad.numpy()


results = {
    "float64, F-ordered input, channel-slice weight": grad_weight(x_fortran, channel_slice),
    "float64, contiguous arrays": grad_weight(x, weight),
    "float64, F-ordered input alone": grad_weight(x_fortran, weight),
    "float64, channel-slice weight alone": grad_weight(x, channel_slice),
}
print("torch", torch.__version__, "expected grad_weight", expected.ravel().tolist())
wrong = False
for what, got in results.items():
    ok = np.array_equal(got, expected)
    wrong |= not ok
    print(f"{what}: {got.ravel().tolist()}" + ("" if ok else "  <- wrong"))
sys.exit(1 if wrong else 0)
