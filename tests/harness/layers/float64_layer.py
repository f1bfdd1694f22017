"""A course-style layer that computes in float64 whatever it is given, as layers
that accumulate into ``np.zeros(shape)`` do (issue 20: two real course layers
return float64 gradients for float32 inputs).

``impl`` shows it as it is: its float32 and float16 results are float64, a
``dtype`` failure of the layer. ``cast`` is the same layer with the adapter's
explicit options, ``cast_results=True`` and ``copy_inputs=True``: it passes,
and the run's summary notes the casts and copies (and, the layer only ever
seeing C-contiguous copies, no other layout is generated or counted).
"""

import numpy as np

from conv_impl import tutorial
from conv_impl.adapters import LayerAdapter


class Float64Conv2D(tutorial.Conv2D):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding,
                         bugs=frozenset())

    def forward(self, x):
        self.weight = self.weight.astype(np.float64)
        self.bias = self.bias.astype(np.float64)
        return super().forward(x.astype(np.float64))

    def backward(self, dout):
        return super().backward(dout.astype(np.float64))


impl = LayerAdapter(Float64Conv2D)
cast = LayerAdapter(Float64Conv2D, cast_results=True, copy_inputs=True, name="Float64Conv2D-cast")
