"""TensorFlow 2.21 (oneDNN on): float32 Conv2D returns [2, 0, 2, 0] where every output is 2.

x of ones (N=2, C=1, 2x3, channels-last here), w of ones 1x2, stride (1, 2),
no padding. Right with TF_ENABLE_ONEDNN_OPTS=0, with batch 1 or with 3 rows.
Exit status 1 while the bug is there, 0 once fixed.
"""

import sys

import numpy as np
import tensorflow as tf

x = np.ones((2, 2, 3, 1), np.float32)  # NHWC
w = np.ones((1, 2, 1, 1), np.float32)  # HWIO
y = tf.nn.conv2d(x, w, strides=(1, 1, 2, 1), padding="VALID").numpy().ravel()
print("got", y.tolist(), "expected", [2.0] * y.size)
sys.exit(0 if np.array_equal(y, np.full(y.size, 2.0)) else 1)
