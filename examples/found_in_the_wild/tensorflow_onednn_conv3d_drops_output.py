"""TensorFlow 2.21 (oneDNN on): float32 Conv3D drops an output: [0, 0, 0] where [0, 1, 0] is right.

Found and shrunk by the suite (check adjoint): input 1x1x1 of one, padded
0x1x1 (with tf.pad), kernel 1x1x2 of ones, stride 2 on the last axis. float64,
and float32 with TF_ENABLE_ONEDNN_OPTS=0, are right.
Exit status 1 while the bug is there, 0 once fixed.
"""

import sys

import numpy as np
import tensorflow as tf

x = np.pad(np.ones((1, 1, 1, 1, 1), np.float32), [(0, 0), (0, 0), (1, 1), (1, 1), (0, 0)])
w = np.ones((1, 1, 2, 1, 1), np.float32)  # DHWIO
y = tf.nn.conv3d(x, w, strides=(1, 1, 1, 2, 1), padding="VALID").numpy().ravel()
print("got", y.tolist(), "expected", [0.0, 1.0, 0.0])
sys.exit(0 if y.tolist() == [0.0, 1.0, 0.0] else 1)
