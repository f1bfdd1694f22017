"""Problems in oneDNN benchdnn's descriptor notation, both ways.

benchdnn (oneDNN's test driver, tests/benchdnn/doc/driver_conv.md and
knobs_desc.md there) writes a convolution as one word of entries, each a name
and an integer: ``g mb ic id ih iw oc od oh ow kd kh kw sd sh sw pd ph pw dd
dh dw``, then an optional name ``n"..."``. Its rules, as `parse_descriptor`
reads them:

- entries come in any order; ``_`` between them is ignored;
- defaults: g 1, mb 2, stride 1, dilation 0 (benchdnn's dilation is zero-based:
  ``dh0`` is no dilation, ``dh1`` is torch's dilation 2), padding 0 when no
  output size is given;
- an axis is given when any of its entries is; the problem has 3 spatial
  axes if a depth entry is given, else 2 if a height entry is, else 1 (the
  w axis); a missing lower axis copies the one above (h from d, w from h):
  ``ic16ih7oc16kh3`` is a square 7x7 problem with a 3x3 kernel;
- an output size given without padding derives the padding from it; with
  padding, the two must agree.

benchdnn pads the end of an axis by whatever the output size needs
(asymmetric padding); torch pads both ends alike. A descriptor whose output
size needs a different padding at the end than at the start (beyond what the
stride leaves unread) is a `DescriptorError`, as is a bad entry.

For a transposed problem (benchdnn's ``--deconv``), ``ic``/``i*`` are the
input of the transposed convolution, ``oc``/``o*`` its output, and an output
size beyond what the padding gives is torch's ``output_padding``.
"""

from __future__ import annotations

import re

from conv_harness.problem import OPS, ConvProblem, conv_output_length, transposed_output_length


class DescriptorError(ValueError):
    """A descriptor that is malformed or names a problem torch cannot compute."""


#: spatial axis letters per number of spatial axes (1-d uses w, as benchdnn does)
AXES: dict[int, tuple[str, ...]] = {1: ("w",), 2: ("h", "w"), 3: ("d", "h", "w")}
_PER_AXIS = ("i", "o", "k", "s", "p", "d")
_KEYS = ("mb", "ic", "oc", *(f + a for f in _PER_AXIS for a in "dhw"), "g")
_TOKEN = re.compile(r"(" + "|".join(sorted(_KEYS, key=len, reverse=True)) + r")(-?\d+)")


def format_descriptor(problem: ConvProblem) -> str:
    """``problem`` as a benchdnn descriptor, in benchdnn's canonical entry order.

    Every axis is written out (no square shortcut), and so are mb, stride and
    padding; g only when above 1, dilation only when some axis has one, output
    sizes only where they carry something the rest does not: a transposed
    problem's output_padding. ``parse_descriptor`` of the result, with the
    problem's op, dtype and bias, gives the problem back.
    """
    p = problem
    axes = AXES[len(p.input_size)]

    def per_axis(prefix: str, values) -> str:
        return "".join(f"{prefix}{a}{v}" for a, v in zip(axes, values))

    parts = [f"g{p.groups}"] if p.groups > 1 else []
    parts += [f"mb{p.batch}", f"ic{p.in_channels}", per_axis("i", p.input_size),
              f"oc{p.out_channels}"]
    if p.spec.transposed and any(p.output_padding):
        parts.append(per_axis("o", p.output_size))
    parts += [per_axis("k", p.kernel_size), per_axis("s", p.stride),
              per_axis("p", p.padding)]
    if any(d != 1 for d in p.dilation):
        parts.append(per_axis("d", (d - 1 for d in p.dilation)))
    return "".join(parts)


def descriptor_name(text: str) -> str | None:
    """The ``n`` entry of a descriptor (quotes removed), None if it has none."""
    return _split_name(text.strip())[1]


def _split_name(text: str) -> tuple[str, str | None]:
    """(entries, name): the name is everything after the first ``n`` that starts
    an entry (benchdnn's names may hold digits, ``_`` and other letters)."""
    at = 0
    while at < len(text):
        if text[at] == "_":
            at += 1
            continue
        if text[at] == "n":
            name = text[at + 1:]
            if len(name) >= 2 and name[0] == name[-1] == '"':
                name = name[1:-1]
            return text[:at], name
        match = _TOKEN.match(text, at)
        if match is None:
            return text, None  # the entries' parser says what is wrong there
        at = match.end()
    return text, None


def _entries(text: str) -> dict[str, int]:
    values: dict[str, int] = {}
    at = 0
    while at < len(text):
        if text[at] == "_":
            at += 1
            continue
        match = _TOKEN.match(text, at)
        if match is None:
            raise DescriptorError(
                f"descriptor {text!r}: cannot read {text[at:at + 12]!r} at position {at}; "
                f"expected an entry of {' '.join(_KEYS)} followed by an integer, or n\"name\"")
        key, value = match.group(1), int(match.group(2))
        if key in values:
            raise DescriptorError(f"descriptor {text!r}: {key} is given twice")
        values[key] = value
        at = match.end()
    return values


def _positive(text: str, key: str, value: int, least: int = 1) -> int:
    if value < least:
        raise DescriptorError(f"descriptor {text!r}: {key}{value} must be at least {least}")
    return value


def _c_half(n: int) -> int:
    """n / 2 rounded towards zero, as benchdnn's C computes a derived padding."""
    return -((-n) // 2) if n < 0 else n // 2


def _axis(text: str, axis: str, given: dict[str, int], transposed: bool, op: str
          ) -> tuple[int, int, int, int, int, int]:
    """(input, kernel, stride, padding, dilation, output_padding) of one axis."""
    for f in "ik":
        if f not in given:
            raise DescriptorError(f"descriptor {text!r}: axis {axis} has no {f}{axis}")
    i = _positive(text, f"i{axis}", given["i"])
    k = _positive(text, f"k{axis}", given["k"])
    s = _positive(text, f"s{axis}", given.get("s", 1))
    dil = _positive(text, f"d{axis}", given.get("d", 0), least=0) + 1
    o, pad = given.get("o"), given.get("p")
    span = dil * (k - 1) + 1
    if o is not None:
        _positive(text, f"o{axis}", o)
    if pad is None:
        pad = 0 if o is None else max(0, _c_half(
            ((i - 1) * s + span - o) if transposed else ((o - 1) * s - i + span)))
    if pad < 0:
        raise DescriptorError(f"descriptor {text!r}: p{axis}{pad}: negative padding; torch "
                              "pads with zeros only")
    if transposed:
        base = transposed_output_length(i, k, s, pad, dil, 0)
        out_pad = 0 if o is None else o - base
        if base + out_pad < 1 or not 0 <= out_pad < max(s, dil):
            raise DescriptorError(
                f"descriptor {text!r}: axis {axis} of {op}: input {i}, kernel {k}, stride {s}, "
                f"padding {pad}, dilation {dil} gives {base} outputs"
                + (f", not o{axis}{o}: torch can add output_padding below max(stride, "
                   "dilation) only, and pads both ends alike" if o is not None else ""))
        return i, k, s, pad, dil, out_pad
    torch_out = conv_output_length(i, k, s, pad, dil)
    if torch_out < 1:
        raise DescriptorError(
            f"descriptor {text!r}: axis {axis}: the dilated kernel ({span}) is larger than "
            f"the padded input ({i} + 2 * {pad})")
    if o is not None and o != torch_out:
        end = (o - 1) * s + span - i - pad
        raise DescriptorError(
            f"descriptor {text!r}: axis {axis}: o{axis}{o} needs padding {pad} at the start "
            f"and {end} at the end (torch, padding {pad} on both ends, gives {torch_out}): "
            "asymmetric padding torch cannot compute")
    return i, k, s, pad, dil, 0


def parse_descriptor(text: str, *, op: str | None = None, dtype: str = "float32",
                     bias: bool = True) -> ConvProblem:
    """The problem a benchdnn descriptor names (see the module's docstring).

    ``op``: the operation (default: ``conv1d``/``conv2d``/``conv3d`` by the
    descriptor's axes; a transposed one must be named); ``dtype`` and
    ``bias`` are not part of the notation (benchdnn's --cfg and --dir).
    """
    text = text.strip()
    entries, _ = _split_name(text)
    values = _entries(entries)
    per_axis = {a: {f: values[f + a] for f in _PER_AXIS if f + a in values} for a in "dhw"}
    ndims = 3 if per_axis["d"] else 2 if per_axis["h"] else 1 if per_axis["w"] else 0
    if ndims == 0:
        raise DescriptorError(f"descriptor {text!r}: no spatial size (iw, ih or id) given")
    op = op if op is not None else f"conv{ndims}d"
    if op not in OPS:
        raise DescriptorError(f"unknown operation {op!r}; expected one of {sorted(OPS)}")
    if OPS[op].spatial_dims != ndims:
        raise DescriptorError(f"descriptor {text!r} has {ndims} spatial axes; {op} has "
                              f"{OPS[op].spatial_dims}")
    axes = AXES[ndims]
    for upper, lower in zip(axes, axes[1:]):  # the square (cubic) default
        if not per_axis[lower]:
            per_axis[lower] = dict(per_axis[upper])
    for key in ("ic", "oc"):
        if key not in values:
            raise DescriptorError(f"descriptor {text!r}: {key} is missing")
    groups = _positive(text, "g", values.get("g", 1))
    ic, oc = _positive(text, "ic", values["ic"]), _positive(text, "oc", values["oc"])
    if ic % groups or oc % groups:
        raise DescriptorError(f"descriptor {text!r}: g{groups} does not divide ic{ic} and oc{oc}")
    geometry = list(zip(*(_axis(text, a, per_axis[a], OPS[op].transposed, op) for a in axes)))
    return ConvProblem(
        op=op, batch=_positive(text, "mb", values.get("mb", 2)), in_channels=ic,
        out_channels=oc, input_size=geometry[0], kernel_size=geometry[1], stride=geometry[2],
        padding=geometry[3], dilation=geometry[4], groups=groups, bias=bias, dtype=dtype,
        output_padding=geometry[5])


def parse_problem_line(line: str) -> ConvProblem | None:
    """One ``--conv-problem`` value or line of its file: a descriptor, optionally
    after an operation and a dtype (``conv_transpose2d float64 mb1ic2ih3oc2kh2sh2``);
    None for a blank line or a ``#`` comment. Defaults: by the axes, float32."""
    words = line.split("#", 1)[0].split()
    if not words:
        return None
    op, dtype = None, "float32"
    for word in words[:-1]:
        if word in OPS:
            op = word
        elif word in ("float16", "float32", "float64"):
            dtype = word
        else:
            raise DescriptorError(f"{line.strip()!r}: {word!r} is neither an operation "
                                  f"({', '.join(OPS)}) nor a dtype (float16, float32, float64)")
    return parse_descriptor(words[-1], op=op, dtype=dtype)
