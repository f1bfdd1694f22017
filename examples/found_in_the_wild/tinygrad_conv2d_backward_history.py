"""tinygrad 0.14.0: conv2d's input gradient is right alone, wrong after an earlier call with the same shapes.

Cut down by hand from the suite's `history` finding: batch 1, 1 -> 1 channel,
input 1x2, kernel 2x2, padding 2x1, dilation 1x3. The same backward call made
twice: the first result is right, the second is off by O(1). Needs a C
compiler for tinygrad's CPU device (apt-get install clang).
Exit status 1 while the bug is there, 0 once fixed.
"""

import sys

import numpy as np
from tinygrad import Tensor

rng = np.random.default_rng(0)
x = rng.standard_normal((1, 1, 1, 2)).astype(np.float32)
w = rng.standard_normal((1, 1, 2, 2)).astype(np.float32)


def grad_input():
    xt = Tensor(x, requires_grad=True)
    y = xt.conv2d(Tensor(w), padding=(2, 1), dilation=(1, 3))
    return y.gradient(xt, gradient=Tensor(np.ones(y.shape, np.float32)))[0].numpy()


first, second = grad_input(), grad_input()
difference = float(np.abs(first - second).max())
print("first", first.ravel().tolist(), "second", second.ravel().tolist())
sys.exit(1 if difference > 0.01 else 0)
