"""A transposed convolution that refuses output_padding >= stride, as Chainer's
deconvolution_2d, ONNX Runtime's ConvTranspose and PyTensor's conv2d_transpose
do (torch accepts output_padding < max(stride, dilation)); correct otherwise.

``declared`` says so in CAPABILITIES (``"output_padding": "below_stride"``,
for its transposed functions only) and passes; ``undeclared`` is the same
code without the key, and fails (``raised``) on a dilated problem with
stride <= output_padding < dilation.
"""

from types import SimpleNamespace

from conv_impl import einsum


def _refusing(name):
    inner = getattr(einsum, name)

    def call(*args, stride, dilation, output_padding, **kwargs):
        if any(op >= s for op, s in zip(output_padding, stride)):
            raise ValueError(f"output_padding {output_padding} must be smaller than "
                             f"stride {stride}")
        return inner(*args, stride=stride, dilation=dilation, output_padding=output_padding,
                     **kwargs)
    call.__name__ = name
    return call


FUNCTIONS = {name: _refusing(name) for nd in (1, 2)
             for name in (f"conv_transpose{nd}d", f"conv_transpose{nd}d_backward")}
FUNCTIONS["conv1d"] = einsum.conv1d  # a forward that takes every problem

declared = SimpleNamespace(**FUNCTIONS, CAPABILITIES={
    name: {"output_padding": "below_stride"} for name in FUNCTIONS if "transpose" in name})
undeclared = SimpleNamespace(**FUNCTIONS)
