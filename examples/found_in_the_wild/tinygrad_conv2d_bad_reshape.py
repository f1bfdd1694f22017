"""tinygrad 0.14.0: conv2d's backward raises "bad reshape: () -> (1, 3)" on a valid problem.

Found and shrunk by the suite (check grad_input): input 1x1, kernel 1x2,
stride 3x1, padding 2x1 (torch's output is 2x2); stride 2 works. Needs a C
compiler for tinygrad's CPU device (apt-get install clang).
Exit status 1 while the bug is there, 0 once fixed.
"""

import sys

import numpy as np
from tinygrad import Tensor

x = Tensor(np.ones((1, 1, 1, 1)), requires_grad=True)  # float64, as the suite's case
w = Tensor(np.ones((1, 1, 1, 2)), requires_grad=True)
y = x.conv2d(w, stride=(3, 1), padding=(2, 1))  # symmetric: 2 rows, 1 column
print("forward", y.shape)
try:
    grad_x, grad_w = y.gradient(x, w, gradient=Tensor(np.ones(y.shape)))
    grad_x.realize()
except ValueError as exc:
    print("backward raised ValueError:", exc)
    sys.exit(1)
print("backward returned: fixed", grad_x.numpy().ravel().tolist())
