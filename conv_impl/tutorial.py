"""KNOWN-BUGGY DEMONSTRATION TARGET: the NumPy einsum tutorial's Conv2D layer.

Do not use this module to compute convolutions.  It re-creates, in this
project's own code, the layer class of a well-known NumPy tutorial that
computes conv2d with ``np.einsum`` over strided windows, *including the bugs
of its backward pass*.  It serves two purposes:

* it is how a user sees the harness work: ``pytest --impl conv_impl.tutorial``
  fails, and the report shows a shrunk counterexample;
* it is the model for wrapping one's own layer class: the bottom of this file
  exposes :class:`Conv2D` through the contract with
  :class:`conv_impl.adapters.LayerAdapter` in three lines.

The layer: ``Conv2D(in_channels, out_channels, kernel_size, stride=1,
padding=0)``, with ``weight`` of shape ``(C_out, C_in, kh, kw)`` and ``bias``
of shape ``(C_out,)`` initialised at random, ``forward(x)`` on ``(N, C, H, W)``
inputs, and ``backward(dout) -> (db, dw, dx)`` (sums over the batch).  As in
the tutorial, sizes may be single ints; unlike it, they may also be pairs
``(h, w)``, and each bug then acts per axis.

The forward pass is right.  So are ``dw`` (grad_weight) and ``db``
(grad_bias): they only reuse the forward windows.  All the bugs are in ``dx``
(grad_input), which the tutorial gets by correlating the zero-dilated,
padded ``dout`` with the kernel rotated by 180 degrees:

``"stride_zeros"`` (a)
    Only ONE zero is inserted between ``dout`` elements along an axis whose
    stride is > 1, whatever the stride; ``stride - 1`` zeros are needed.
    Right for stride 1 and 2; wrong ``dx`` for stride >= 3 along an axis where
    the output has at least two positions.  Smallest case: batch 1, one
    channel in and out, kernel (1, 1), padding (0, 0), stride (3, 1), input
    (4, 1).

``"backward_padding"`` (b)
    The dilated ``dout`` is padded with ``k - 1 if p == 0 else p`` on each
    side, where ``k - 1 - p`` is right (and a negative value means cropping).
    Right for p = 0 and for 2p = k - 1 (the "same" padding the tutorial
    tested, e.g. k=3, p=1); otherwise a wrong, shifted ``dx``.  Smallest case:
    kernel 1, stride 1, padding 1, input 1x1 (the right padding is -1, a crop;
    the tutorial pads by 1 and reads only padding: ``dx`` = 0).

``"window_remainder"`` (c)
    The dilated ``dout`` gets the same padding on the trailing side as on
    the leading side (never a crop there), and the window helper always
    takes one window per input position; when the stride leaves a remainder
    (``(H + 2p - k) % stride != 0``), or when bug (a) or (b) made the padded
    ``dout`` too short, those windows run past the end of the array.  The tutorial's ``as_strided`` then read
    whatever memory followed; this re-creation never reads outside an array:
    it extends the array with zeros first.  The zeros are what a correct
    derivation reads there, so this bug is harmless on its own here (no
    wrong value); with it switched off the backward pass pads the trailing
    side explicitly by ``k - 1 - p + remainder`` instead.

:func:`tutorial_impl` builds contract objects for variants with some bugs
switched off (for the harness's own tests); with none left it is correct.
"""

from __future__ import annotations

from collections.abc import Collection

import numpy as np
from numpy.lib.stride_tricks import as_strided

from .adapters import LayerAdapter, LayerSpec

__all__ = [
    "ALL_BUGS",
    "Conv2D",
    "get_windows",
    "tutorial_impl",
    "conv2d",
    "conv2d_backward",
    "CAPABILITIES",
    "stride_bug_only",
    "fixed",
]

#: The names of the tutorial's backward-pass bugs; see the module docstring.
ALL_BUGS: frozenset[str] = frozenset({"stride_zeros", "backward_padding", "window_remainder"})


def _pair(v) -> tuple[int, int]:
    if isinstance(v, (tuple, list)):
        if len(v) != 2:
            raise ValueError(f"expected an int or a pair, got {v!r}")
        return int(v[0]), int(v[1])
    return int(v), int(v)


def _dilate(a: np.ndarray, zeros: tuple[int, int]) -> np.ndarray:
    """Insert ``zeros[i]`` zeros between neighbours along axis ``2 + i``."""
    if zeros == (0, 0):
        return a
    n, c, h, w = a.shape
    zh, zw = zeros
    out = np.zeros((n, c, (h - 1) * (zh + 1) + 1, (w - 1) * (zw + 1) + 1), dtype=a.dtype)
    out[:, :, :: zh + 1, :: zw + 1] = a
    return out


def _pad_or_crop(a: np.ndarray, lead: tuple[int, int], trail: tuple[int, int]) -> np.ndarray:
    """Zero-pad (positive) or crop (negative) the two spatial axes."""
    crop = tuple(
        slice(max(-lo, 0), max(a.shape[2 + i] - max(-hi, 0), max(-lo, 0)))
        for i, (lo, hi) in enumerate(zip(lead, trail))
    )
    a = a[(slice(None), slice(None)) + crop]
    widths = ((0, 0), (0, 0)) + tuple((max(lo, 0), max(hi, 0)) for lo, hi in zip(lead, trail))
    return np.pad(a, widths) if any(map(any, widths)) else a


def get_windows(
    a: np.ndarray,
    out_size: tuple[int, int],
    kernel_size: tuple[int, int],
    stride: tuple[int, int] = (1, 1),
    *,
    past_end: bool = False,
) -> np.ndarray:
    """Read-only windows ``(N, C, out_h, out_w, kh, kw)`` of ``a`` (N, C, H, W).

    Window ``(i, j)`` starts at ``(i * sh, j * sw)``, as in the tutorial.
    If they would run past the end of ``a``: with ``past_end=True`` (the
    tutorial's bug (c), made safe) ``a`` is first extended with zeros so
    that the windows read zeros there; otherwise that is an error.  The view
    is built with ``as_strided`` from ``a``'s real strides and checked to stay
    inside the array.
    """
    n, c, h, w = a.shape
    oh, ow = out_size
    kh, kw = kernel_size
    sh, sw = stride
    need_h, need_w = (oh - 1) * sh + kh, (ow - 1) * sw + kw
    if need_h > h or need_w > w:
        if not past_end:
            raise ValueError(f"windows need {(need_h, need_w)} but the array is only {(h, w)}")
        a = np.pad(a, ((0, 0), (0, 0), (0, max(need_h - h, 0)), (0, max(need_w - w, 0))))
        h, w = a.shape[2:]
    assert need_h <= h and need_w <= w and min(oh, ow, kh, kw) >= 1
    bs, cs, hs, ws = a.strides
    return as_strided(
        a,
        shape=(n, c, oh, ow, kh, kw),
        strides=(bs, cs, sh * hs, sw * ws, hs, ws),
        writeable=False,
    )


class Conv2D:
    """The tutorial's 2-D convolution layer (KNOWN-BUGGY, see module doc).

    ``bugs`` selects which of the tutorial's backward bugs are present
    (default: all of :data:`ALL_BUGS`); ``bugs=frozenset()`` gives a correct
    layer.
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size,
        stride=1,
        padding=0,
        *,
        bugs: Collection[str] = ALL_BUGS,
        seed=None,
    ) -> None:
        unknown = set(bugs) - ALL_BUGS
        if unknown:
            raise ValueError(f"unknown bugs {sorted(unknown)}; known: {sorted(ALL_BUGS)}")
        self.bugs = frozenset(bugs)
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = _pair(kernel_size)
        self.stride = _pair(stride)
        self.padding = _pair(padding)
        rng = np.random.default_rng(seed)
        self.weight = rng.standard_normal((out_channels, in_channels) + self.kernel_size)
        self.bias = rng.standard_normal(out_channels)

    def forward(self, x: np.ndarray) -> np.ndarray:
        n, c, h, w = x.shape
        (kh, kw), (sh, sw), (ph, pw) = self.kernel_size, self.stride, self.padding
        out_h = (h + 2 * ph - kh) // sh + 1
        out_w = (w + 2 * pw - kw) // sw + 1
        padded = _pad_or_crop(x, (ph, pw), (ph, pw))
        windows = get_windows(padded, (out_h, out_w), (kh, kw), (sh, sw))
        out = np.einsum("bihwkl,oikl->bohw", windows, self.weight)
        out = out + self.bias[None, :, None, None]
        self.cache = x, windows
        return out

    def backward(self, dout: np.ndarray):
        x, windows = self.cache
        h, w = x.shape[2:]
        kernel, stride, padding = self.kernel_size, self.stride, self.padding

        db = np.sum(dout, axis=(0, 2, 3))
        dw = np.einsum("bihwkl,bohw->oikl", windows, dout)

        if "stride_zeros" in self.bugs:  # (a): one zero, whatever the stride
            zeros = tuple(min(s - 1, 1) for s in stride)
        else:
            zeros = tuple(s - 1 for s in stride)
        dilated = _dilate(dout, zeros)

        if "backward_padding" in self.bugs:  # (b): p instead of k - 1 - p
            lead = tuple(k - 1 if p == 0 else p for k, p in zip(kernel, padding))
        else:
            lead = tuple(k - 1 - p for k, p in zip(kernel, padding))

        if "window_remainder" in self.bugs:  # (c): same padding both sides, windows run past the end
            trail = tuple(max(lo, 0) for lo in lead)
        else:  # enough on the trailing side for exactly one window per input position
            trail = tuple(
                size + k - 1 - lo - d for size, k, lo, d in zip((h, w), kernel, lead, dilated.shape[2:])
            )
        padded = _pad_or_crop(dilated, lead, trail)
        dout_windows = get_windows(padded, (h, w), kernel, past_end="window_remainder" in self.bugs)
        rot_kern = self.weight[:, :, ::-1, ::-1]
        dx = np.einsum("bohwkl,oikl->bihw", dout_windows, rot_kern)
        return db, dw, dx


def tutorial_impl(bugs: Collection[str] = ALL_BUGS, *, square: bool = True) -> LayerAdapter:
    """A contract object (``conv2d``, ``conv2d_backward``, ``CAPABILITIES``)
    for the tutorial layer with the given ``bugs`` left in.

    ``square=True`` passes single ints to the layer, as the tutorial does,
    and declares ``square`` in ``CAPABILITIES``; ``square=False`` passes
    pairs and lets the harness generate non-square problems.
    ``tutorial_impl(frozenset())`` is a correct convolution.
    """
    bugs = frozenset(bugs)

    def construct(spec: LayerSpec) -> Conv2D:
        return Conv2D(
            spec.in_channels, spec.out_channels, spec.kernel_size, spec.stride, spec.padding, bugs=bugs
        )

    label = ",".join(sorted(bugs)) or "none"
    return LayerAdapter(Conv2D, construct=construct, square=square, name=f"tutorial(bugs={label})")


# The contract interface, exactly as a user wraps their own layer class:
_impl = LayerAdapter(Conv2D, name="tutorial.Conv2D")
conv2d, conv2d_backward = _impl.conv2d, _impl.conv2d_backward
CAPABILITIES = _impl.CAPABILITIES

# Ready-made variants for the harness's own tests, usable as specs, e.g.
# ``pytest --impl conv_impl.tutorial:stride_bug_only``:
#: Only bug (a) left, non-square problems allowed: fails only for stride >= 3.
stride_bug_only = tutorial_impl({"stride_zeros"}, square=False)
#: All bugs fixed, non-square problems allowed: a correct convolution.
fixed = tutorial_impl(frozenset(), square=False)
