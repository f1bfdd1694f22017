"""TensorFlow 2.21: float32 Conv2DBackpropFilter corrupts the heap.

A 1x1 kernel with stride 4x3 on a 64x15 float32 input: within a few identical
calls glibc aborts ("corrupted double-linked list", "double free or
corruption") or the process segfaults; stride 1 does not. Not deterministic per
call, so 50 calls. Exit status: killed (SIGABRT or SIGSEGV) while the bug is
there, 0 once fixed.
"""

import numpy as np
import tensorflow as tf

x = tf.constant(np.ones((1, 64, 15, 1), np.float32))  # NHWC
w = tf.constant(np.ones((1, 1, 1, 1), np.float32))
for call in range(50):
    with tf.GradientTape() as tape:
        tape.watch(w)
        y = tf.nn.conv2d(x, w, strides=(1, 4, 3, 1), padding="VALID")
    grad_w = tape.gradient(y, w, output_gradients=tf.ones_like(y))
print("returned after 50 calls: fixed", grad_w.numpy().ravel().tolist())
