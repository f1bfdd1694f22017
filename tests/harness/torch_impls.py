"""Implementations on torch tensors (issue 36), for tests/harness/test_native.py.

``cpu.<name>`` computes on the CPU, ``cuda.<name>`` on the first CUDA device
(spec ``tests/harness/torch_impls.py:cpu.functional``). ``functional`` is
correct; each other one has one known bug. Most give forwards alone: their
backwards come from autograd, as for a kernel wrapped in ``torch.autograd.Function``.
"""

from __future__ import annotations

from types import SimpleNamespace

import torch
import torch.nn.functional as F


class _ScaledWeightGrad(torch.autograd.Function):
    """conv2d whose hand-written backward doubles grad_weight."""

    @staticmethod
    def forward(ctx, x, weight, bias, stride, padding, dilation, groups):
        ctx.save_for_backward(x, weight)
        ctx.geometry = (stride, padding, dilation, groups)
        ctx.has_bias = bias is not None
        return torch_conv2d(x, weight, bias, stride, padding, dilation, groups)

    @staticmethod
    def backward(ctx, grad_output):
        x, weight = ctx.saved_tensors
        stride, padding, dilation, groups = ctx.geometry
        grad_input = torch.nn.grad.conv2d_input(x.shape, weight, grad_output, stride, padding,
                                                dilation, groups)
        grad_weight = torch.nn.grad.conv2d_weight(x, weight.shape, grad_output, stride,
                                                  padding, dilation, groups)
        grad_bias = grad_output.sum((0, 2, 3)) if ctx.has_bias else None
        return grad_input, 2 * grad_weight, grad_bias, None, None, None, None


def _pair(value) -> tuple[int, int]:
    return tuple(value) if isinstance(value, (tuple, list)) else (value, value)


def _strided_dilated_padded(stride, padding, dilation) -> bool:
    """Whether an axis has a stride and a dilation of 2 or more and some padding: the
    geometry of every crash of torch 2.13's CPU conv2d met so far."""
    return any(s > 1 and d > 1 and p > 0
               for s, p, d in zip(_pair(stride), _pair(padding), _pair(dilation)))


def crashes_torch(weight: torch.Tensor, stride, padding, dilation) -> bool:
    """Where torch 2.13's CPU conv2d may die of a segmentation fault (found by
    test_native.py, pinned by its test_torchs_own_conv2d_crashes_...): a weight in
    channels-last memory, on an axis with a stride and a dilation of 2 or more and
    some padding. Every crash met had the three: in bfloat16 (a sweep of those sizes,
    one input channel pair), and in float32 at other sizes (2 groups, batch 3)."""
    if weight.device.type != "cpu" or weight.dim() != 4 or weight.is_contiguous():
        return False
    return _strided_dilated_padded(stride, padding, dilation)


def crashes_torch_float16(weight: torch.Tensor, stride, padding, dilation) -> bool:
    """Where torch 2.13's CPU conv2d dies of a segmentation fault in float16, whatever
    the arrays' memory (pinned by test_native.py's
    test_torchs_own_float16_conv2d_crashes): an axis with a stride and a dilation of 2
    or more and some padding. The smallest met: one 1x1 image of 2 channels, 2 groups,
    a 1x1 kernel, stride, dilation 2 and padding 1 on one axis; also in one group (2 in
    and 3 out channels, a 3x1 kernel). Not every such problem crashes; in float32 none
    has."""
    return (weight.device.type == "cpu" and weight.dim() == 4
            and weight.dtype == torch.float16
            and _strided_dilated_padded(stride, padding, dilation))


def crashes_torch_bfloat16_input(x: torch.Tensor, stride, padding, dilation) -> bool:
    """Where torch 2.13's CPU conv2d dies of a segmentation fault for a bfloat16 input
    that is not contiguous (pinned by test_native.py's
    test_torchs_own_bfloat16_conv2d_crashes_for_a_strided_input), on an axis with a
    stride and a dilation of 2 or more and some padding (the geometry of every crash
    met). The one met: 3 groups, a contiguous 3x1 weight, an input of 10x1 images read
    with strides (50, 1, 5, 5) from an offset of 1; the same input passed contiguous
    runs."""
    return (x.device.type == "cpu" and x.dim() == 4 and x.dtype == torch.bfloat16
            and not x.is_contiguous() and _strided_dilated_padded(stride, padding, dilation))


def wrong_torch_float64_grad_weight(x: torch.Tensor, weight: torch.Tensor, groups: int) -> bool:
    """Where torch 2.13's CPU conv2d backward may give a wrong grad_weight (pinned by
    test_native.py's test_torchs_own_float64_grouped_grad_weight_..., and a row of
    examples/README.md's found in the wild): float64, groups, a non-contiguous input and
    a non-contiguous weight (the one met: a Fortran-ordered input and a channel slice of
    a channels-last weight; either alone is right)."""
    return (weight.device.type == "cpu" and weight.dtype == torch.float64 and groups > 1
            and not x.is_contiguous() and not weight.is_contiguous())


def torch_conv2d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """F.conv2d, where torch's own kernel would crash (`crashes_torch`,
    `crashes_torch_bfloat16_input`, `crashes_torch_float16`) or be wrong
    (`wrong_torch_float64_grad_weight`) with the weight or the
    input passed contiguous, or in float16 computed in float32 and rounded once (as
    exact as torch's float16 kernel, which accumulates in float32): the
    implementations here are correct, or wrong as they say, and none is to die of
    torch's bug (the harness reports a crash as such)."""
    if crashes_torch(weight, stride, padding, dilation) or wrong_torch_float64_grad_weight(
            x, weight, groups):
        weight = weight.contiguous()
    if crashes_torch_bfloat16_input(x, stride, padding, dilation):
        x = x.contiguous()
    if crashes_torch_float16(weight, stride, padding, dilation):
        wide = [None if t is None else t.float() for t in (x, weight, bias)]
        return F.conv2d(*wide, stride, padding, dilation, groups).to(x.dtype)
    return F.conv2d(x, weight, bias, stride, padding, dilation, groups)


def to_tf32(t: torch.Tensor) -> torch.Tensor:
    """float32 values rounded to TF32's 10 explicit mantissa bits (to nearest, ties away);
    to autograd, the identity (the gradient flows as through the unrounded values)."""
    bits = t.detach().contiguous().view(torch.int32)
    rounded = ((bits + 0x1000) & -0x2000).view(torch.float32)
    return t + (rounded - t).detach()


def implementations(device: str) -> SimpleNamespace:
    on = {"arrays": "torch", "device": device}

    class functional:
        """torch.nn.functional's convolutions themselves: correct. On CUDA, cuDNN computes
        float32 with TF32 inputs by default (torch.backends.cudnn.allow_tf32), said here;
        bfloat16 is taken, with the bound of sums in bfloat16 (see below)."""

        CAPABILITIES = {**on, "float32_precision": "tf32" if device != "cpu" else "ieee",
                        "dtypes": ("float64", "float32", "float16", "bfloat16"),
                        # torch 2.13's CPU grad_input in bfloat16 is off by up to 2u sum|terms|
                        # (measured): not float32 sums rounded once, so declared as bfloat16's
                        "bfloat16_accumulation": "bfloat16",
                        # torch 2.13's CPU conv3d in bfloat16 reads memory it did not
                        # write: its result on zeros is garbage (test_native.py's
                        # test_torchs_own_bfloat16_conv3d_reads_garbage), and its backward
                        # gave another grad_weight on 1 thread than on 2. torch's bug, so
                        # not drawn for this correct one
                        **({name: {"dtypes": ("float64", "float32", "float16")}
                            for name in ("conv3d", "conv3d_backward")}
                           if device == "cpu" else {})}
        conv1d = staticmethod(F.conv1d)
        conv2d = staticmethod(torch_conv2d)  # F.conv2d, but where torch crashes (above)
        conv3d = staticmethod(F.conv3d)
        conv_transpose2d = staticmethod(F.conv_transpose2d)

    class native_strides:
        """torch.nn.functional.conv2d on the tensors as drawn, with no way round torch's
        own bugs: what a user's kernel that calls it directly does."""

        CAPABILITIES = on
        conv2d = staticmethod(F.conv2d)

    class channels_last_only:
        """Reads a channels-last input's memory as if it were NCHW (pytorch#82060's kind)."""

        CAPABILITIES = on

        @staticmethod
        def conv2d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
            if x.dim() == 4 and x.is_contiguous(memory_format=torch.channels_last):
                x = x.as_strided(x.shape, torch.empty(x.shape).stride(), x.storage_offset())
            return torch_conv2d(x, weight, bias, stride, padding, dilation, groups)

    class autograd_function:
        """A forward alone, whose autograd.Function backward doubles grad_weight."""

        CAPABILITIES = on

        @staticmethod
        def conv2d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
            return _ScaledWeightGrad.apply(x, weight, bias, stride, padding, dilation, groups)

    class float32_result:
        """Returns float32 whatever its inputs' dtype."""

        CAPABILITIES = on

        @staticmethod
        def conv2d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
            return torch_conv2d(x, weight, bias, stride, padding, dilation, groups).float()

    class scales_its_input:
        """Scales x in place (and back into its result)."""

        CAPABILITIES = on

        @staticmethod
        def conv2d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
            x.mul_(2)
            return torch_conv2d(x / 2, weight, bias, stride, padding, dilation, groups)

    class thread_dependent:
        """Drops the last input channel's contribution when run on several threads
        (oneDNN#6035's kind: a result that depends on the thread count)."""

        CAPABILITIES = on

        @staticmethod
        def conv2d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
            if torch.get_num_threads() > 1 and groups == 1 and x.shape[1] > 1:
                weight = weight.clone()
                weight[:, -1] = 0
            return torch_conv2d(x, weight, bias, stride, padding, dilation, groups)

    class thread_order:
        """Sums in float64 on several threads and in its own dtype on one: results that
        differ bit for bit between thread counts, each within the rounding bound."""

        CAPABILITIES = on

        @staticmethod
        def conv2d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
            if torch.get_num_threads() > 1:
                return torch_conv2d(x.double(), weight.double(), None if bias is None else
                                bias.double(), stride, padding, dilation, groups).to(x.dtype)
            return torch_conv2d(x, weight, bias, stride, padding, dilation, groups)

    class tf32_rounding:
        """Rounds float32 inputs to TF32 (10 explicit mantissa bits, to nearest) before a
        float32 convolution, as cuDNN does on NVIDIA GPUs by default; declared."""

        CAPABILITIES = {**on, "float32_precision": "tf32"}

        @staticmethod
        def conv2d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
            if x.dtype == torch.float32:
                x, weight = to_tf32(x), to_tf32(weight)
            return torch_conv2d(x, weight, bias, stride, padding, dilation, groups)

    class tf32_undeclared(tf32_rounding):
        """The same, without saying so."""

        CAPABILITIES = on

    class bfloat16_sums:
        """Sums bfloat16 products in bfloat16 (each partial sum rounded), where it
        declares nothing, so float32 sums are what the bound allows."""

        CAPABILITIES = {**on, "dtypes": ("bfloat16",), "groups": False}

        @staticmethod
        def conv2d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
            n, c_out = x.shape[0], weight.shape[0]
            kernel = weight.shape[2:]
            out = [(size + 2 * p - d * (k - 1) - 1) // s + 1 for size, k, s, p, d in zip(
                x.shape[2:], kernel, stride, padding, dilation)]
            columns = F.unfold(x, kernel, dilation=dilation, padding=padding, stride=stride)
            products = columns.unsqueeze(1).float() * weight.reshape(1, c_out, -1, 1).float()
            total = torch.zeros(n, c_out, columns.shape[-1], dtype=torch.bfloat16,
                                device=x.device)
            for k in range(products.shape[2]):  # exact products, rounded partial sums
                total = (total.float() + products[:, :, k]).to(torch.bfloat16)
            if bias is not None:
                total = (total.float() + bias.float().view(1, c_out, 1)).to(torch.bfloat16)
            return total.view(n, c_out, *out)

    class bfloat16_sums_declared(bfloat16_sums):
        """The same, saying so."""

        CAPABILITIES = {**bfloat16_sums.CAPABILITIES, "bfloat16_accumulation": "bfloat16"}

    return SimpleNamespace(**{c.__name__: c for c in (
        bfloat16_sums, bfloat16_sums_declared,
        functional, native_strides, channels_last_only, autograd_function, float32_result, scales_its_input,
        thread_dependent, thread_order, tf32_rounding, tf32_undeclared)})


cpu = implementations("cpu")
cuda = implementations("cuda")
