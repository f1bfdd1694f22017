"""A problem in oneDNN benchdnn's descriptor notation (minimal: formatting only).

``mb1ic1oc1ih4iw1kh1kw1sh3sw1ph0pw0``: g (groups, when > 1), mb, ic, oc, then
per spatial axis (d, h, w for 3-d; h, w for 2-d; w for 1-d) the input size,
kernel, stride and padding, and dilation as benchdnn writes it (dilation - 1,
only when > 0). Helper h22 owns the full module (parsing too); this is the
part the bug list needs.
"""

from __future__ import annotations

from harness.problem import ConvProblem

_AXES = {1: "w", 2: "hw", 3: "dhw"}


def format_descriptor(problem: ConvProblem) -> str:
    """``problem``'s geometry in benchdnn's notation (dtype, bias and layouts are not part of it)."""
    axes = _AXES[len(problem.input_size)]
    parts = [f"g{problem.groups}"] if problem.groups > 1 else []
    parts.append(f"mb{problem.batch}ic{problem.in_channels}oc{problem.out_channels}")
    for letter, values in (("i", problem.input_size), ("k", problem.kernel_size),
                           ("s", problem.stride), ("p", problem.padding)):
        parts += [f"{letter}{a}{v}" for a, v in zip(axes, values)]
    parts += [f"d{a}{d - 1}" for a, d in zip(axes, problem.dilation) if d > 1]
    return "".join(parts)
