"""conv2d_backward returns (grad_input, grad_weight) and forgets grad_bias."""
from conv_impl.einsum import conv2d_backward as _backward


def conv2d_backward(grad_output, x, weight, bias, **kwargs):
    grad_input, grad_weight, _ = _backward(grad_output, x, weight, bias, **kwargs)
    return grad_input, grad_weight
