"""Known-buggy implementations with two independent bugs each (and one with one).

Each wraps the correct `conv_impl.einsum` (conv2d only) and breaks it in two
places with different triggers, for the distinct-bug search
(conv_harness/triage): one run must report both, each on its own minimal
problem, and a single-bug implementation exactly one. Specs:
``--impl tests/harness/two_bugs.py:<name>``.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from conv_impl import einsum


def _conv2d_only(conv2d, conv2d_backward):
    return SimpleNamespace(conv2d=conv2d, conv2d_backward=conv2d_backward, CAPABILITIES=None)


def _two_grad_input_backward(grad_output, x, weight, bias, *, stride, padding, dilation, groups):
    gx, gw, gb = einsum.conv2d_backward(grad_output, x, weight, bias, stride=stride,
                                        padding=padding, dilation=dilation, groups=groups)
    gx = gx.copy()
    if any(p > 0 for p in padding):  # bug 1: needs padding
        gx.flat[0] += 1
    if any(d > 1 for d in dilation):  # bug 2: needs dilation
        gx.flat[-1] -= 2
    return gx, gw, gb


#: grad_input off when padding > 0, and (independently) when dilation > 1.
two_grad_input_bugs = _conv2d_only(einsum.conv2d, _two_grad_input_backward)


def _upcast_backward(grad_output, x, weight, bias, **kw):
    wide = [None if a is None else a.astype(np.float64) for a in (grad_output, x, weight, bias)]
    gx, gw, gb = einsum.conv2d_backward(*wide, **kw)  # float64 results whatever the inputs
    if gb is not None and grad_output.shape[0] > 1:
        gb = gb / grad_output.shape[0]  # bug 2: the batch mean, not the sum
    return gx, gw, gb


#: Returns float64 gradients for every input dtype (exact values, wrong dtype),
#: and a grad_bias divided by the batch size.
dtype_and_grad_bias = _conv2d_only(einsum.conv2d, _upcast_backward)


def _two_forward(x, weight, bias, *, stride, padding, dilation, groups):
    y = einsum.conv2d(x, weight, bias, stride=stride, padding=padding, dilation=dilation,
                      groups=groups).copy()
    if groups > 1:  # bug 1: the last group's first output channel doubled
        per = y.shape[1] // groups
        y[:, (groups - 1) * per] *= 2
        y[:, (groups - 1) * per] += 1
    if any(s > 1 for s in stride):  # bug 2: one element off
        y.flat[0] += 1
    return y


#: forward off when groups > 1, and (independently) when stride > 1.
two_forward_bugs = _conv2d_only(_two_forward, einsum.conv2d_backward)


def _big_batch_forward(x, weight, bias, **kw):
    y = einsum.conv2d(x, weight, bias, **kw)
    if x.shape[0] > 4:
        y = y.copy()
        y[4:] *= 2  # images after the fourth are off
    return y


#: forward wrong only for batches of more than 4 images, which no drawn problem
#: has, but finite_difference's stacked batch does.
big_batch_only = _conv2d_only(_big_batch_forward, einsum.conv2d_backward)


def _one_bug_backward(grad_output, x, weight, bias, **kw):
    gx, gw, gb = einsum.conv2d_backward(grad_output, x, weight, bias, **kw)
    if kw["stride"][0] > 1 and gx.shape[2] > 1:
        gx = gx.copy()
        gx[:, :, -1] = 0  # the last row of the input gradient lost for a vertical stride
    return gx, gw, gb


#: One bug (grad_input with a vertical stride), which six checks can see.
one_bug = _conv2d_only(einsum.conv2d, _one_bug_backward)


def _stride2_backward(grad_output, x, weight, bias, *, stride, **kw):
    gx, gw, gb = einsum.conv2d_backward(grad_output, x, weight, bias, stride=stride, **kw)
    if any(s == 2 and n >= 2 for s, n in zip(stride, grad_output.shape[2:])):
        gx = gx.copy()
        gx.flat[-1] += 1
    return gx, gw, gb


#: grad_input off for stride 2 exactly (two outputs along that axis): minimal
#: case stride 2, input 3, where the tutorial's stride bug needs stride 3, input 4.
stride2_bug = _conv2d_only(einsum.conv2d, _stride2_backward)


def _swapped(a: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """Images 0 and 1 exchanged, for an odd batch of 3 or more and a kernel of more than
    one tap: a blocked loop that writes its tiles back in the wrong order."""
    taps = np.count_nonzero(np.any(weight != 0, axis=(0, 1)))
    if a.shape[0] >= 3 and a.shape[0] % 2 and taps > 1:
        a = a.copy()
        a[[0, 1]] = a[[1, 0]]
    return a


def _swap_forward(x, weight, bias, **kw):
    return _swapped(einsum.conv2d(x, weight, bias, **kw), weight)


def _swap_backward(grad_output, x, weight, bias, **kw):
    """The exact gradients of `_swap_forward`: those of the unswapped forward at the
    swapped grad_output (the swap is its own transpose and commutes with the
    per-image convolution)."""
    return einsum.conv2d_backward(_swapped(grad_output, weight), x, weight, bias, **kw)


#: Forward and backward both exchange images 0 and 1 of odd batches (3 or more) with
#: kernels of more than one tap. Consistent with itself: every identity of the adjoint
#: (grad_weight's too) and finite differences (even stacked batches) hold; pointwise and
#: delta kernels have one tap. (Swapping only grad_input, as this once did, left
#: grad_weight the unswapped forward's, which the adjoint's weight identity sees once
#: the strategies draw a three-image batch with a two-tap kernel.)
#: Among the oracle-free checks batch_consistency sees it, and linearity, whose split
#: weight can have a single tap where the whole one has two.
batch_swap = _conv2d_only(_swap_forward, _swap_backward)
