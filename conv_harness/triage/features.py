"""The features of a problem a bug may depend on, and problems that differ in one.

A feature is a parameter a person would name in a bug report: stride,
padding, kernel, dilation, the number of positions, the stride remainder
(per spatial axis); groups, channels per group, batch, dtype, memory layout,
bias (for the whole problem). Each has a trivial value, the one the
strategies shrink towards (stride 1, padding 0, ..., float64, C order).

`with_feature` changes one feature of a problem and keeps the others,
rebuilding the input size so that the problem stays valid: a convolution
axis is (kernel, stride, padding, dilation, outputs, remainder), and its
input size follows from them, as in strategies/problems.py.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from conv_harness import ties
from conv_harness.problem import (
    ARRAY_NAMES,
    LAYOUTS,
    PER_AXIS_FIELDS,
    ConvProblem,
    conv_output_length,
)
from conv_harness.running.capabilities import Capabilities

#: per spatial axis; "outputs" is the number of output positions of a plain
#: convolution and of input positions of a transposed one
AXIS_FEATURES: tuple[str, ...] = ("stride", "remainder", "padding", "kernel", "dilation",
                                  "outputs", "output_padding")
GLOBAL_FEATURES: tuple[str, ...] = ("groups", "in_channels", "out_channels", "batch", "dtype",
                                    "layout", "bias")
FEATURES: tuple[str, ...] = AXIS_FEATURES + GLOBAL_FEATURES
NUMERIC: frozenset[str] = frozenset(AXIS_FEATURES) | {"groups", "in_channels", "out_channels",
                                                      "batch"}
#: the numeric features whose boundary an explanation bisects (the others' candidates
#: are every value there is, or it is at most one step away)
BISECTED: frozenset[str] = NUMERIC - {"remainder", "output_padding"}
#: features derived from others, by the features they follow from: the extent of an
#: axis (its input size with padding, the span every tiled or transformed path reads;
#: per axis, the others are of the whole problem), the reduction length K of the
#: forward (in channels per group x kernel taps) and the output positions of an image
#: (the product over the axes). In this order: an axis's extent before the positions,
#: which its outputs are also a component of
DERIVED: dict[str, frozenset[str]] = {
    "extent": frozenset({"outputs", "stride", "remainder", "kernel", "dilation", "padding"}),
    "K": frozenset({"in_channels", "kernel"}),
    "positions": frozenset({"outputs"}),
    # the rows of the GEMM a convolution is lowered to: a sum or a mean over all of them
    # (a bias gradient divided by the count) needs their product, not either factor
    "batch_positions": frozenset({"batch", "outputs", "positions"})}
#: per-axis sizes a bug may need unequal between the axes (a backward written for
#: square outputs only): each gives a feature of the whole problem, true where two
#: axes differ, by the features that follow from the size (whose conditions it replaces)
UNEQUAL: dict[str, str] = {"outputs": "outputs_unequal", "kernel": "kernel_unequal",
                           "stride": "stride_unequal", "padding": "padding_unequal",
                           "dilation": "dilation_unequal"}
UNEQUAL_NAMES: frozenset[str] = frozenset(UNEQUAL.values())
FOLLOWS: dict[str, frozenset[str]] = {
    "outputs": frozenset({"outputs", "positions", "batch_positions"}),
    "kernel": frozenset({"kernel", "K"}),
    **{size: frozenset({size}) for size in ("stride", "padding", "dilation")}}
#: derived features with a value per spatial axis
AXIS_DERIVED: frozenset[str] = frozenset({"extent"})
#: every feature whose value is a tuple, one per spatial axis
PER_AXIS: frozenset[str] = frozenset(AXIS_FEATURES) | AXIS_DERIVED
#: what the text calls each feature
LABELS = {"in_channels": "in channels per group", "out_channels": "out channels per group",
          "remainder": "stride remainder", "output_padding": "output_padding",
          "K": "K (in channels per group x kernel taps)", "positions": "output positions",
          "extent": "input size with padding", "batch_positions": "batch x output positions",
          **{name: f"{size} not square (not the same on every axis: height != width)"
             for size, name in UNEQUAL.items()},
          **{tie.name: tie.text for tie in ties.TIES},
          **{c.name: c.text for c in ties.CROSSINGS}}


def trivial(feature: str, caps: Capabilities) -> Any:
    """The value shrinking heads for."""
    if feature in ("padding", "remainder", "output_padding"):
        return 0
    if feature == "dtype":
        return caps.dtypes[0]
    if feature == "layout":
        return "C"
    if feature == "bias":
        return not caps.bias_none
    return 1


def _axis_values(p: ConvProblem, axis: int) -> dict[str, int]:
    n, k, s, pad, d = (p.input_size[axis], p.kernel_size[axis], p.stride[axis],
                       p.padding[axis], p.dilation[axis])
    out = {"stride": s, "padding": pad, "kernel": k, "dilation": d,
           "output_padding": p.output_padding[axis]}
    if p.spec.transposed:
        out.update(outputs=n, remainder=0)
    else:
        o = conv_output_length(n, k, s, pad, d)
        out.update(outputs=o, remainder=max(0, (n + 2 * pad - d * (k - 1) - 1) - (o - 1) * s))
    return out


def values(p: ConvProblem, layouts: dict[str, str]) -> dict[str, Any]:
    """Every feature's value: a tuple (one per axis) or a scalar; layout as the set used."""
    axes = [_axis_values(p, a) for a in range(len(p.input_size))]
    out: dict[str, Any] = {f: tuple(ax[f] for ax in axes) for f in AXIS_FEATURES}
    out.update(groups=p.groups, in_channels=p.in_channels // p.groups,
               out_channels=p.out_channels // p.groups, batch=p.batch, dtype=p.dtype,
               bias=p.bias, layout=_layout(layouts))
    out["extent"] = tuple(n + 2 * pad for n, pad in zip(p.input_size, p.padding))
    out["K"] = out["in_channels"] * _product(p.kernel_size)
    out["positions"] = _product(out["outputs"])
    out["batch_positions"] = p.batch * out["positions"]
    out.update({name: len(set(out[size])) > 1 for size, name in UNEQUAL.items()})
    out.update({tie.name: tie.value(p) for tie in ties.TIES})  # 0: the tie does not hold
    out.update({c.name: c.holds(p) for c in ties.CROSSINGS})
    return out


def _product(values: tuple[int, ...]) -> int:
    result = 1
    for v in values:
        result *= v
    return result


def realisations(p: ConvProblem, layouts: dict[str, str], derived: str, value: int, axis: int,
                 axes: tuple[int, ...]) -> list[tuple[ConvProblem, dict[str, str]]]:
    """Problems on which the ``derived`` feature is ``value`` by each component alone.

    K: ``value`` in channels per group with a kernel of one tap, and one in
    channel with a kernel of ``value`` taps on ``axis`` (the others 1).
    Positions: ``value`` outputs on one axis, one on the others, for each axis
    (``axes``: all of them together for an implementation of square problems only).
    Batch x positions: a batch of ``value`` images of one output position, and one
    image of ``value`` positions (as positions are). Extent: `extent_realisations`.
    """
    if derived == "extent":
        return extent_realisations(p, layouts, value, axis, axes)
    if derived == "batch_positions":
        return _batch_positions_realisations(p, layouts, value, axis, axes)
    out = []
    every = tuple(range(len(p.input_size)))
    if derived == "K":
        # a kernel of one tap on every axis, and of `value` taps on one axis and one on
        # the others: a tap kept on another axis would multiply K
        others = [("kernel", 1, tuple(a for a in every if a != axis))] if len(every) > 1 \
            else []
        steps = [("kernel", 1, every), ("in_channels", value, None)], \
                [("in_channels", 1, None), *others, ("kernel", value, (axis,))]
        if len(axes) > 1 and value ** (1 / len(axes)) % 1:
            steps = steps[:1]  # a square kernel of `value` taps does not exist
        elif len(axes) > 1:
            steps = (steps[0], [("in_channels", 1, None),
                                ("kernel", round(value ** (1 / len(axes))), axes)])
    elif len(p.input_size) < 2 or len(axes) > 1:
        return []
    else:
        steps = tuple([("outputs", 1, tuple(range(len(p.input_size)))),
                       ("outputs", value, (a,))] for a in range(len(p.input_size)))
    for changes in steps:
        q: tuple[ConvProblem, dict[str, str]] | None = (p, layouts)
        for feature, v, on in changes:
            q = None if q is None else with_feature(q[0], q[1], feature, v, on or (axis,))
        if q is not None:
            out.append(q)
    return out


def square_realisation(p: ConvProblem, layouts: dict[str, str], derived: str, value: int
                       ) -> tuple[ConvProblem, dict[str, str]] | None:
    """Positions, or batch x positions, of at least ``value`` carried by the outputs on
    every axis alike (one image; the least ``m`` per axis with ``m ** axes >= value``):
    where `realisations`' ways on one axis are refused (a backward of square outputs
    only), the positions alone at the least square value at or above it. None in one
    dimension, and for other derived features."""
    every = tuple(range(len(p.input_size)))
    if derived not in ("positions", "batch_positions") or len(every) < 2:
        return None
    m = 1
    while m ** len(every) < value:
        m += 1
    q = with_feature(p, layouts, "batch", 1, every) if derived == "batch_positions" \
        else (p, layouts)
    return None if q is None else with_feature(*q, "outputs", m, every)


def _batch_positions_realisations(p: ConvProblem, layouts: dict[str, str], value: int,
                                  axis: int, axes: tuple[int, ...]
                                  ) -> list[tuple[ConvProblem, dict[str, str]]]:
    """``value`` images of one position, and one image of ``value`` positions on each axis
    (as `realisations` makes positions, in one dimension too); none where the positions
    cannot carry the value alone (one realisation would take a batch bug for one of the
    product)."""
    every = tuple(range(len(p.input_size)))
    one = with_feature(p, layouts, "outputs", 1, every)
    single = None if one is None else with_feature(*one, "batch", 1, every)
    if single is None or len(axes) > 1:  # square problems only: no axis carries them
        return []
    by_positions = [q for q in (with_feature(*single, "outputs", value, (a,)) for a in every)
                    if q is not None]
    by_batch = with_feature(*one, "batch", value, every)
    if not by_positions or by_batch is None:
        return []
    return [by_batch, *by_positions]


def extent_realisations(p: ConvProblem, layouts: dict[str, str], value: int, axis: int,
                        axes: tuple[int, ...]) -> list[tuple[ConvProblem, dict[str, str]]]:
    """Axes of input size with padding ``value`` on ``axis``, each by one component:
    (size, kernel, stride, padding, dilation) = (value outputs of a 1-tap kernel),
    (one output of a ``value``-tap kernel), (one output of a 1-tap kernel at stride
    ``value``, the rest a remainder), (a 1-position input padded to ``value``), (one
    output of a 2-tap kernel dilated to span ``value``). The other axes are kept.
    None for a transposed convolution (its padding crops the output: there is no
    padded input) nor for an implementation of square problems only (one axis
    cannot change alone): an empty list."""
    if p.spec.transposed or len(axes) > 1 or value < 1:
        return []
    shapes = [(value, 1, 1, 0, 1), (value, value, 1, 0, 1)]
    if value >= 2:
        shapes.append((value, 1, value, 0, 1))
    if value >= 3 and value % 2:
        shapes.append((1, 1, 1, (value - 1) // 2, 1))
    if value >= 3:
        shapes.append((value, 2, 1, 0, value - 1))
    out = []
    for size, kernel, stride, pad, dil in shapes:
        fields = {name: list(getattr(p, name)) for name in
                  ("input_size", "kernel_size", "stride", "padding", "dilation")}
        for name, v in zip(fields, (size, kernel, stride, pad, dil)):
            fields[name][axis] = v
        q = dataclasses.replace(p, **{name: tuple(v) for name, v in fields.items()})
        assert conv_output_length(size, kernel, stride, pad, dil) >= 1
        out.append((q, dict(layouts)))
    return out


def swap_axes(p: ConvProblem, a: int, b: int) -> ConvProblem:
    """``p`` with the spatial axes ``a`` and ``b`` exchanged (every per-axis field)."""
    def swapped(values: tuple[int, ...]) -> tuple[int, ...]:
        out = list(values)
        out[a], out[b] = out[b], out[a]
        return tuple(out)
    return dataclasses.replace(p, **{name: swapped(getattr(p, name))
                                     for name in PER_AXIS_FIELDS})


def _layout(layouts: dict[str, str]) -> str:
    """One name for the layouts of a problem's arrays: C, or the first other one."""
    others = [layouts[name] for name in ARRAY_NAMES if layouts.get(name, "C") != "C"]
    return others[0] if others else "C"


def non_trivial(p: ConvProblem, layouts: dict[str, str], caps: Capabilities) -> list[str]:
    v = values(p, layouts)
    return [f for f in FEATURES
            if (any(x != trivial(f, caps) for x in v[f]) if f in AXIS_FEATURES
                else v[f] != trivial(f, caps))]


def main_axis(p: ConvProblem, layouts: dict[str, str], caps: Capabilities) -> int:
    """The axis with the most non-trivial features (the first on a tie)."""
    v = values(p, layouts)
    counts = [sum(v[f][a] != trivial(f, caps) for f in AXIS_FEATURES)
              for a in range(len(p.input_size))]
    return counts.index(max(counts))


def _rebuild_axis(p: ConvProblem, axis: int, a: dict[str, int],
                  keep_size: bool) -> dict[str, int] | None:
    """The axis's (input size, padding, output_padding) for the features ``a``; None if invalid.

    The number of outputs and the remainder are kept, as the strategies
    draw them; where that needs an input of fewer than one position (more
    padding, say) and ``keep_size``, the input size is kept instead. A change
    of the stride or the remainder keeps the remainder then, with as few more
    outputs as hold it: a stride 3 with remainder 2 made stride 2 on the same
    input would leave none, and a remainder bug would read as a stride >= 3 bug.
    """
    k, s, pad, d = a["kernel"], a["stride"], a["padding"], a["dilation"]
    if min(k, s, d) < 1 or pad < 0:
        return None
    n = p.input_size[axis]
    if p.spec.transposed:
        n = a["outputs"]
        op = min(a["output_padding"], max(s, d) - 1)
        if n < 1 or op < 0 or pad > ((n - 1) * s + d * (k - 1) + op) // 2:
            return None
        return {"size": n, "padding": pad, "output_padding": op}
    o, r = a["outputs"], a["remainder"]
    if a.get("_changed") != "remainder":
        r = min(r, s - 1)  # a smaller stride leaves a smaller remainder
    if o < 1 or not 0 <= r < s:
        return None
    size = (o - 1) * s + d * (k - 1) + 1 + r - 2 * pad
    if size < 1 and a.get("_changed") in ("stride", "remainder"):
        more = -(-(1 - size) // s)
        o, size = o + more, size + more * s
    if size < 1:  # padding alone covers the kernel: not this many positions
        if keep_size and n + 2 * pad >= d * (k - 1) + 1:
            return {"size": n, "padding": pad, "output_padding": 0}
        return None
    n = size
    assert conv_output_length(n, k, s, pad, d) == o
    return {"size": n, "padding": pad, "output_padding": 0}


def with_feature(p: ConvProblem, layouts: dict[str, str], feature: str, value: Any,
                 axes: tuple[int, ...]) -> tuple[ConvProblem, dict[str, str]] | None:
    """``p`` with ``feature`` set to ``value`` (on ``axes`` for an axis feature); None if invalid."""
    layouts = dict(layouts)
    if feature in AXIS_FEATURES:
        if feature == "remainder" and p.spec.transposed:
            return None
        if feature == "output_padding" and not p.spec.transposed:
            return None
        sizes, paddings, ops = list(p.input_size), list(p.padding), list(p.output_padding)
        fields = {"kernel": list(p.kernel_size), "stride": list(p.stride),
                  "dilation": list(p.dilation)}
        for axis in axes:
            a = _axis_values(p, axis)
            a[feature] = value
            a["_changed"] = feature  # type: ignore[assignment]
            rebuilt = _rebuild_axis(p, axis, a, feature in ("stride", "padding", "kernel",
                                                            "dilation"))
            if rebuilt is None:
                return None
            sizes[axis], paddings[axis], ops[axis] = (rebuilt["size"], rebuilt["padding"],
                                                      rebuilt["output_padding"])
            for name in fields:
                fields[name][axis] = a[name]
        new = dataclasses.replace(
            p, input_size=tuple(sizes), padding=tuple(paddings), output_padding=tuple(ops),
            kernel_size=tuple(fields["kernel"]), stride=tuple(fields["stride"]),
            dilation=tuple(fields["dilation"]))
        return new, layouts
    if feature in ("in_channels", "out_channels", "groups"):
        per_in, per_out = p.in_channels // p.groups, p.out_channels // p.groups
        groups = value if feature == "groups" else p.groups
        per_in = value if feature == "in_channels" else per_in
        per_out = value if feature == "out_channels" else per_out
        if min(groups, per_in, per_out) < 1:
            return None
        return dataclasses.replace(p, groups=groups, in_channels=groups * per_in,
                                   out_channels=groups * per_out), layouts
    if feature == "batch":
        return (dataclasses.replace(p, batch=value), layouts) if value >= 1 else None
    if feature == "dtype":
        return dataclasses.replace(p, dtype=value), layouts
    if feature == "bias":
        if value:
            layouts.setdefault("bias", "C")
        else:
            layouts.pop("bias", None)
        return dataclasses.replace(p, bias=value), layouts
    if feature == "layout":
        if value not in LAYOUTS:
            return None
        return p, {name: value for name in layouts}
    raise ValueError(f"unknown feature {feature!r}; expected one of {FEATURES}")


def candidates(feature: str, current: Any, caps: Capabilities, p: ConvProblem,
               axis: int | None) -> list[Any]:
    """The values tried for ``feature``: the trivial one, small ones, next to the
    current, and halfway from the current to the trivial one: a failure that comes
    back below a value that passes (the tail of a block: 9 to 15 and 17 to 23 fail,
    16 passes) shows there, and the case is shrunk to it."""
    if feature == "dtype":
        return list(caps.dtypes)
    if feature == "layout":
        return list(caps.layouts(p.dtype))
    if feature == "bias":
        return [False, True] if caps.bias_none else [True]
    if feature == "dilation" and not caps.dilation:
        return [1]
    if feature == "groups" and not caps.groups:
        return [1]
    if feature == "remainder":
        return list(range(max(p.stride[axis], 1))) if axis is not None else [0]
    if feature == "output_padding":
        return list(range(max(p.stride[axis], p.dilation[axis]))) if axis is not None else [0]
    low = 0 if feature == "padding" else 1
    tried = {low, low + 1, low + 2, current - 1, current, current + 1, current // 2 + 1}
    if feature in ("stride", "kernel"):
        tried.add(low + 3)
    return sorted(v for v in tried if v >= low)
