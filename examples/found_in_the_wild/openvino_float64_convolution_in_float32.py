"""OpenVINO 2026.4 (CPU plugin): a float64 Convolution is computed in float32 and returned as float64.

Found and shrunk by the suite (checks forward and delta_kernel, every
operation: conv1d/2d/3d and the transposed ones): the smallest case is a 1-d
convolution of one element, x = 1/3, w = 1/3, which must give 1/9 to within
one float64 rounding (1.4e-17); OpenVINO's result is off by 8e-9, a float32
rounding. float32 and float16 are right. The CPU plugin's inference
precision is left at its default, as a user gets it.
Exit status 1 while the bug is there, 0 once fixed.
"""

import sys

import numpy as np
import openvino as ov
import openvino.opset13 as ops

x = ops.parameter([1, 1, 1], np.float64, name="x")
w = ops.parameter([1, 1, 1], np.float64, name="w")
y = ops.convolution(x, w, strides=[1], pads_begin=[0], pads_end=[0], dilations=[1])
compiled = ov.Core().compile_model(ov.Model([y], [x, w]), "CPU")
third = np.full((1, 1, 1), 1 / 3)
got = compiled([third, third])[0]
error = abs(float(got.ravel()[0]) - 1 / 9)
print(f"dtype {got.dtype}, got {float(got.ravel()[0])!r}, expected {1 / 9!r}, error {error:.3g} "
      f"(float64 allows {np.finfo(np.float64).eps / 9:.3g})")
sys.exit(1 if error > np.finfo(np.float64).eps / 9 else 0)
