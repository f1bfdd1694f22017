"""Known-buggy implementations, each wrong on one fast path only (issue 22).

Each wraps the correct `conv_impl.einsum` (every operation) and breaks one
forward pass where an optimised implementation special-cases a layer real
networks use: a wrong dispatch condition, or a wrong kernel on that path.
Everywhere else it is correct. The suite must find each one in a default run
and shrink it to its minimal case (tests/harness/test_fast_paths.py):

    winograd_dilation   resnet/deeplab: conv2d 3x3, stride 1, groups 1 takes a
                        Winograd path that never checks dilation (it computes
                        the undilated convolution)
                        -> 3x3, dilation 2 on one axis, padding 0, 1 channel
    depthwise_channel0  mobilenet: a depthwise 3x3/5x5 path with a wrong channel
                        stride in the weights: every channel gets channel 0's
                        filter
                        -> 3x3, groups = 2 channels, input 3x3
    inception_wrap      inception: a 1xN / Nx1 path (N >= 5) that pads the
                        long axis circularly instead of with zeros
                        -> 1x5 (or 5x1), padding 1 on that axis, input 3
    unet_no_bias        unet: the 2x2 stride-2 transposed path (a pixel
                        shuffle) leaves the bias out
                        -> 2x2 stride 2, input 1x1, a bias
    wav2vec_frames      wav2vec: a conv1d path for kernels a multiple of the
                        stride (> 1), built from frames of the input, that
                        leaves the last output 0 when the input length is
                        not a multiple of the stride
                        -> kernel 2, stride 2, input 3
    r2plus1d_transposed r2plus1d: a conv3d 1x3x3 path, run frame by frame as
                        2-d convolutions, that reads the filter's height and
                        width swapped
                        -> 1x3x3 on a 1x3x3 input

Three more (issues 35, 59), whose bugs lie one step off an archetype the random
draws reach often, on a neighbour they rarely reach; the catalogue sweep visits it:

    stem_padding        resnet: a 7x7 stride-2 stem path that pads by 3 whatever
                        the padding asked (it computes the outputs of padding 3,
                        from the top left)
                        -> 7x7 stride 2, padding other than 3
    depthwise_odd_tail  mobilenet: a depthwise 3x3 stride-2 path that computes
                        output columns in pairs and leaves the last one 0 when
                        their count is odd (and over 1)
                        -> 3x3 stride 2, groups = 2 channels, three columns
    grouped_partial_block
                        resnext: a grouped (not depthwise) 3x3 stride-1 path
                        that sums each group's input channels in blocks of 4,
                        taken from 4 channels per group on, and drops the
                        last, partial block
                        -> 3x3 stride 1, 2 groups of 5 channels (one above a block)

And one (issue 59) on a path for long float16 sums, which the random draws never
reach (they keep float16 within 512 terms); the sweep's long float16 visit does:

    float16_long_chunks a float16 forward that sums more than 2048 products in chunks
                        of 2048, its accumulator reset for each: only the last
                        chunk's sum is kept
                        -> float16, K 2049 (1x1 kernel, 2049 channels)

And one (issue 35) whose bug lies on a tie between sizes of different arrays,
which independent draws rarely make (conv_harness/ties.py):

    gemm_tie            a GEMM conv2d that takes a square branch when the
                        weight matrix of a group is square, out channels = in
                        channels x kernel taps (N = K, 2 or more), and there
                        reads it transposed
                        -> N = K = 2
    gemm_tie_large      the same square branch, taken only at 16 or more (a
                        blocked GEMM's): random draws tie N and K that high in
                        well under 1% of problems; the sweep's tie visits make it
                        -> N = K, at 16 or more
    crossing_swap       a conv2d that slides the smaller operand over the larger,
                        comparing their sizes on every axis; where the kernel is
                        the longer on one axis and the shorter on another it takes
                        the branch for a kernel larger than the input, which
                        flips it
                        -> the kernel longer than the input on one axis only
    stem_crossed        the same wrong branch on a ResNet stem's path alone (7x7,
                        stride 2, padding 3): random draws cross such a kernel
                        rarely; the sweep's crossing visit of the stem makes it
                        -> the stem, crossed
    full_window         a conv2d with a path for an axis the dilated kernel spans
                        exactly (the input as long as it), which reads the kernel
                        flipped there (a "full" correlation's path)
                        -> the kernel as long as the input on one axis
    crossing_recursion  a conv2d backward that slides the smaller of the kernel
                        and the output gradient over the other, picking it by
                        comparing their shapes on every axis and, where neither
                        is, asking again with the two swapped: it recurses
                        forever (a real autodiff library's backward did)
                        -> the kernel longer than the outputs on one axis only
"""

from __future__ import annotations

import math

import numpy as np

from conv_impl import einsum

try:
    from tests.harness.size_bugs import _module, _wrapped
except ModuleNotFoundError:  # run by a saved script, which imports this file from its folder
    from size_bugs import _module, _wrapped  # type: ignore[no-redef]

ALL = ("winograd_dilation", "depthwise_channel0", "inception_wrap", "unet_no_bias",
       "wav2vec_frames", "r2plus1d_transposed")
#: the two whose bug is on an archetype's neighbour (issue 35)
NEIGHBOURS = ("stem_padding", "depthwise_odd_tail", "grouped_partial_block")
#: the block of channels grouped_partial_block sums a group's input channels in
BLOCK = 4


def _winograd_dilation(conv, x, weight, bias, kw):
    if weight.shape[2:] != (3, 3) or kw["stride"] != (1, 1) or kw["groups"] != 1:
        return conv(x, weight, bias, **kw)
    right = conv(x, weight, bias, **kw)  # only for the output's shape
    y = conv(x, weight, bias, **{**kw, "dilation": (1, 1)})
    return np.ascontiguousarray(y[:, :, :right.shape[2], :right.shape[3]])


def _depthwise_channel0(conv, x, weight, bias, kw):
    depthwise = kw["groups"] > 1 and kw["groups"] == x.shape[1] == weight.shape[0]
    if not depthwise or weight.shape[2:] not in ((3, 3), (5, 5)):
        return conv(x, weight, bias, **kw)
    return conv(x, np.broadcast_to(weight[:1], weight.shape), bias, **kw)


def _inception_wrap(conv, x, weight, bias, kw):
    kernel = weight.shape[2:]
    if sorted(kernel)[0] != 1 or max(kernel) < 5 or kernel == (1, 1):
        return conv(x, weight, bias, **kw)
    axis = int(np.argmax(kernel))
    pad = kw["padding"][axis]
    widths = [(0, 0)] * x.ndim
    widths[2 + axis] = (pad, pad)
    wrapped = np.pad(x, widths, mode="wrap")
    padding = list(kw["padding"])
    padding[axis] = 0
    return conv(wrapped, weight, bias, **{**kw, "padding": tuple(padding)})


def _unet_no_bias(conv, x, weight, bias, kw):
    if weight.shape[2:] == (2, 2) and kw["stride"] == (2, 2):
        return conv(x, weight, None if bias is None else np.zeros_like(bias), **kw)
    return conv(x, weight, bias, **kw)


def _wav2vec_frames(conv, x, weight, bias, kw):
    y = conv(x, weight, bias, **kw)
    (k,), (s,) = weight.shape[2:], kw["stride"]
    if s > 1 and k % s == 0 and x.shape[2] % s:
        y[..., -1] = 0
    return y


def _r2plus1d_transposed(conv, x, weight, bias, kw):
    if weight.shape[2:] != (1, 3, 3):
        return conv(x, weight, bias, **kw)
    return conv(x, np.ascontiguousarray(np.swapaxes(weight, 3, 4)), bias, **kw)


winograd_dilation = _module(conv2d=_wrapped("conv2d", _winograd_dilation))
depthwise_channel0 = _module(conv2d=_wrapped("conv2d", _depthwise_channel0))
inception_wrap = _module(conv2d=_wrapped("conv2d", _inception_wrap))
unet_no_bias = _module(conv_transpose2d=_wrapped("conv_transpose2d", _unet_no_bias))
wav2vec_frames = _module(conv1d=_wrapped("conv1d", _wav2vec_frames))
r2plus1d_transposed = _module(conv3d=_wrapped("conv3d", _r2plus1d_transposed))


def _stem_padding(conv, x, weight, bias, kw):
    if weight.shape[2:] != (7, 7) or kw["stride"] != (2, 2) or kw["padding"] == (3, 3):
        return conv(x, weight, bias, **kw)
    right = conv(x, weight, bias, **kw)  # only for the output's shape
    y = conv(x, weight, bias, **{**kw, "padding": (3, 3)})
    out = np.zeros_like(right)
    rows, cols = min(y.shape[2], out.shape[2]), min(y.shape[3], out.shape[3])
    out[:, :, :rows, :cols] = y[:, :, :rows, :cols]
    return out


def _depthwise_odd_tail(conv, x, weight, bias, kw):
    y = conv(x, weight, bias, **kw)
    depthwise = kw["groups"] > 1 and kw["groups"] == x.shape[1] == weight.shape[0]
    if depthwise and weight.shape[2:] == (3, 3) and kw["stride"] == (2, 2) \
            and y.shape[3] % 2 and y.shape[3] > 1:
        y[..., -1] = 0
    return y


def _grouped_partial_block(conv, x, weight, bias, kw):
    groups = kw["groups"]
    per_group = weight.shape[1]
    grouped = 1 < groups < x.shape[1]
    if not grouped or weight.shape[2:] != (3, 3) or kw["stride"] != (1, 1) \
            or per_group < BLOCK or per_group % BLOCK == 0:
        return conv(x, weight, bias, **kw)
    kept = weight.copy()
    kept[:, per_group - per_group % BLOCK:] = 0  # the last, partial block left out
    return conv(x, kept, bias, **kw)


stem_padding = _module(conv2d=_wrapped("conv2d", _stem_padding))
depthwise_odd_tail = _module(conv2d=_wrapped("conv2d", _depthwise_odd_tail))
grouped_partial_block = _module(conv2d=_wrapped("conv2d", _grouped_partial_block))


# -- a path taken only at sizes the random draws do not reach, declared -------------

def _wide_blocked(conv, x, weight, bias, kw):
    if x.shape[1] < 160 or kw["groups"] != 1:
        return conv(x, weight, bias, **kw)
    # a blocked path for wide layers that drops its last block of 8 input channels
    return conv(x[:, :-8], weight[:, :-8], bias, **kw)


#: wrong only on a path for 160 input channels or more, which it declares: the random
#: draws never reach that many channels; the sweep visits the declared problem
wide_blocked = _module(conv2d=_wrapped("conv2d", _wide_blocked))
wide_blocked.HARNESS_PATHS = {"wide blocked": ["conv2d float32 mb1ic160ih2iw2oc8kh1kw1"]}


#: the products a long float16 sum of float16_long_chunks takes at a time
FLOAT16_CHUNK = 2048


def _float16_long_chunks(conv, x, weight, bias, kw):
    terms = math.prod(weight.shape[1:])
    if x.dtype != np.float16 or terms <= FLOAT16_CHUNK:
        return conv(x, weight, bias, **kw)
    # a float16 path for long sums, in chunks of products summed in float32, the
    # accumulator set (not added to) by each chunk: only the last one's products count.
    # (A chunk left out would be one term at K 2049, within rounding on most data.)
    kept = weight.reshape(weight.shape[0], -1).copy()
    kept[:, :(terms - 1) // FLOAT16_CHUNK * FLOAT16_CHUNK] = 0
    return conv(x, kept.reshape(weight.shape), bias, **kw)


#: wrong only in float16 sums of more than 2048 products: the
#: random draws keep float16 within 512; the sweep's long float16 visit reaches it
float16_long_chunks = _module(**{op: _wrapped(op, _float16_long_chunks)
                                 for op in ("conv1d", "conv2d", "conv3d")})


def _gemm_tie(conv, x, weight, bias, kw, least: int = 2):
    groups = kw["groups"]
    n, k = weight.shape[0] // groups, math.prod(weight.shape[1:])
    if n != k or n < least:
        return conv(x, weight, bias, **kw)
    # the square branch: each group's weight matrix (N x K) read transposed, which
    # its shape allows
    square = weight.reshape(groups, n, k).swapaxes(1, 2).reshape(weight.shape)
    return conv(x, np.ascontiguousarray(square), bias, **kw)


gemm_tie = _module(conv2d=_wrapped("conv2d", _gemm_tie))


def _gemm_tie_large(conv, x, weight, bias, kw):
    return _gemm_tie(conv, x, weight, bias, kw, least=16)


gemm_tie_large = _module(conv2d=_wrapped("conv2d", _gemm_tie_large))


def _crossing_swap(conv, x, weight, bias, kw):
    span = [d * (k - 1) + 1 for k, d in zip(weight.shape[2:], kw["dilation"])]
    if all(k <= n for k, n in zip(span, x.shape[2:])):
        return conv(x, weight, bias, **kw)
    if all(k >= n for k, n in zip(span, x.shape[2:])):  # the input slides over the kernel
        return conv(x, weight, bias, **kw)
    # neither is the smaller on every axis: the larger-kernel branch, which correlates
    # with the kernel flipped, as a convolution of the input over it would
    return conv(x, np.ascontiguousarray(weight[:, :, ::-1, ::-1]), bias, **kw)


crossing_swap = _module(conv2d=_wrapped("conv2d", _crossing_swap))


def _stem_crossed(conv, x, weight, bias, kw):
    if weight.shape[2:] != (7, 7) or kw["stride"] != (2, 2) or kw["padding"] != (3, 3) \
            or kw["dilation"] != (1, 1):
        return conv(x, weight, bias, **kw)
    return _crossing_swap(conv, x, weight, bias, kw)


stem_crossed = _module(conv2d=_wrapped("conv2d", _stem_crossed))


def _smaller_everywhere(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    """Which of two shapes slides over the other: the one no larger on any axis, else
    the question asked the other way round (which never ends where they cross)."""
    if all(i <= j for i, j in zip(a, b)):
        return a
    if all(j <= i for i, j in zip(a, b)):
        return b
    return _smaller_everywhere(b, a)


def _crossing_recursion_backward(grad_output, x, weight, bias, **kw):
    _smaller_everywhere(weight.shape[2:], grad_output.shape[2:])
    return einsum.conv2d_backward(grad_output, x, weight, bias, **kw)


_crossing_recursion_backward.__name__ = "conv2d_backward"
crossing_recursion = _module(conv2d_backward=_crossing_recursion_backward)


def _full_window(conv, x, weight, bias, kw):
    span = [d * (k - 1) + 1 for k, d in zip(weight.shape[2:], kw["dilation"])]
    tied = [axis for axis, (k, n) in enumerate(zip(span, x.shape[2:])) if k == n >= 2]
    if not tied:
        return conv(x, weight, bias, **kw)
    return conv(x, np.ascontiguousarray(np.flip(weight, [2 + a for a in tied])), bias, **kw)


full_window = _module(conv2d=_wrapped("conv2d", _full_window))
