"""A convolution written for torch tensors: ``unfold`` (im2col) and a matrix product.

It takes and returns torch tensors on its device, as a Triton or CUDA kernel
does, and says so in ``CAPABILITIES``: the harness hands it tensors in the
drawn memory formats (channels-last, a channel slice of a channels-last
tensor, strided views) and checks its results against torch in float64.

It gives the forward alone; the harness takes the backward from autograd
through it (the report says so), which checks that every operation here is
differentiable the way a training run uses it.

    pytest --impl examples/torch_unfold_conv.py

On a GPU, set ``DEVICE`` to ``"cuda"``: the same run checks it there.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

DEVICE = "cpu"
CAPABILITIES = {"arrays": "torch", "device": DEVICE}


def conv2d(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None,
           stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups: int = 1) -> torch.Tensor:
    n, c_in, h, w = x.shape
    c_out, c_per_group, kh, kw = weight.shape
    out_h = (h + 2 * padding[0] - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    out_w = (w + 2 * padding[1] - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    # (n, c_in * kh * kw, positions), channels outermost: one block per group
    columns = F.unfold(x, (kh, kw), dilation=dilation, padding=padding, stride=stride)
    columns = columns.view(n, groups, c_per_group * kh * kw, out_h * out_w)
    kernels = weight.reshape(groups, c_out // groups, c_per_group * kh * kw)
    y = torch.einsum("gok,ngkp->ngop", kernels, columns).reshape(n, c_out, out_h, out_w)
    return y if bias is None else y + bias.view(1, c_out, 1, 1)
