"""Hypothesis strategies for valid convolution problems and their data.

    from strategies import conv_cases, conv_problems

`conv_problems(op)` draws parameters (a `ConvProblem`), `conv_cases(op)` adds
values and memory layouts (a `ConvCase`). Both take the implementation's
`Capabilities` to narrow what is drawn.
"""

from conv_harness.problem import ConvCase, ConvProblem
from conv_harness.running.capabilities import Capabilities
from strategies.cases import (
                              array_values,
                              cases_for,
                              conv_cases,
                              draw_array,
                              features,
                              layouts,
                              values,
)
from strategies.problems import DEFAULT_BOUNDS, Bounds, conv_problems

__all__ = [
    "Bounds", "Capabilities", "ConvCase", "ConvProblem", "DEFAULT_BOUNDS", "array_values",
    "cases_for", "conv_cases", "conv_problems", "draw_array", "features", "layouts", "values",
]
