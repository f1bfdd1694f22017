"""An implementation's optional ``CAPABILITIES``: what it may be given.

Contract section 2: every key is optional, an unknown key or a bad value is an
error in the implementation's spec (the harness never guesses), and what an
implementation declares it does not support is never generated for it.

Two refinements (issue 15: TensorFlow's CPU backward takes no groups and
dilation only in float32, its Conv3D no groups):

- a capability's value may be a tuple of dtype names where it holds,
  ``"dilation": ("float32",)``: dilation > 1 is generated in float32 only;
- a contract function's name (``"conv2d_backward"``) may hold a dict of its
  own, whose keys override the module's for that function.

One key is not a per-dtype flag: ``"output_padding": "below_stride"``
(issue 20: Chainer's deconvolution_2d, ONNX Runtime's ConvTranspose and
PyTensor's conv2d_transpose refuse output_padding >= stride, where torch
accepts output_padding < max(stride, dilation)) keeps transposed problems to
output_padding < stride on every axis; its default, ``"torch"``, is torch's rule.

`Capabilities` keeps both; `for_functions` gives the flat capabilities that
hold for every function a check calls (a check of ``conv2d`` and
``conv2d_backward`` draws only what both accept), which is what the
strategies draw from.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from functools import lru_cache
from typing import Any, Iterable, Mapping, Union

from conv_harness.problem import ALL_DTYPES, DTYPES, LAYOUTS_OF, OPS, bfloat16

#: Features an implementation may accept: True (in every dtype), False, or the
#: dtypes where it accepts them.
PERMISSIONS: tuple[str, ...] = ("dilation", "groups", "bias_none")
#: Restrictions an implementation may need: True (in every dtype), False, or
#: the dtypes where it needs them.
RESTRICTIONS: tuple[str, ...] = ("square", "contiguous_only")
#: Values of ``algorithm``: how the implementation sums, so that the rounding bound
#: allows for its growth (conv_harness/checks/tolerance.py), in increasing growth; "direct"
#: is any order of the products' sum (the default)
ALGORITHMS: tuple[str, ...] = ("direct", "fft", "winograd F(2,3)", "winograd F(4,3)")

FUNCTION_NAMES: tuple[str, ...] = tuple(
    name for op in OPS.values() for name in (op.name, op.backward_name))

#: True, False, or the dtype names where it holds
PerDtype = Union[bool, tuple[str, ...]]

#: values of ``float32_precision``: float32 products of float32 inputs, or of inputs
#: rounded to TF32 (10 explicit mantissa bits), as NVIDIA GPUs compute by default
FLOAT32_PRECISIONS: tuple[str, ...] = ("ieee", "tf32")

#: values of ``bfloat16_accumulation``: the type its bfloat16 products are summed in
BFLOAT16_ACCUMULATIONS: tuple[str, ...] = ("float32", "bfloat16")

#: values of ``float16_accumulation``: the type its float16 products are summed in
#: where a result sums more than `FLOAT16_MAX_TERMS` of them
FLOAT16_ACCUMULATIONS: tuple[str, ...] = ("float32", "float16")


#: the array libraries an implementation may compute on (conv_harness/running/native.py)
ARRAY_LIBRARIES: tuple[str, ...] = ("numpy", "torch")

#: the values of the ``output_padding`` key: torch's rule (output_padding <
#: max(stride, dilation)), or output_padding < stride
OUTPUT_PADDING_RULES: tuple[str, ...] = ("torch", "below_stride")

_DESCRIPTIONS = {
    "dilation": "dilation > 1",
    "groups": "groups > 1",
    "bias_none": "bias=None",
    "square": "non-square kernel/stride/padding/dilation",
    "contiguous_only": "non-contiguous inputs",
    "output_padding": "output_padding >= stride (transposed)",
}


#: the keys whose value is one of a few names, and those names
_CHOICES: dict[str, tuple[str, ...]] = {
    "algorithm": ALGORITHMS, "arrays": ARRAY_LIBRARIES,
    "bfloat16_accumulation": BFLOAT16_ACCUMULATIONS, "float32_precision": FLOAT32_PRECISIONS,
    "float16_accumulation": FLOAT16_ACCUMULATIONS,
}


class CapabilitiesError(ValueError):
    """A ``CAPABILITIES`` mapping the harness cannot honour."""


def _dtype_tuple(where: str, value: Any, allow_empty: bool) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, (tuple, list, set, frozenset)) or \
            not all(isinstance(d, str) for d in value):
        raise CapabilitiesError(f"{where} must be a tuple of dtype names, got {value!r}")
    bad = sorted(set(value) - set(ALL_DTYPES))
    if bad or (not value and not allow_empty):
        raise CapabilitiesError(f"{where} = {tuple(value)!r}: must be a "
                                f"{'' if allow_empty else 'non-empty '}subset of {ALL_DTYPES}")
    # Keep the harness's order (float64 first), so shrinking is the same
    # whatever order the user wrote.
    return tuple(d for d in ALL_DTYPES if d in value)


def _normal(value: PerDtype) -> PerDtype:
    """A per-dtype value in its simplest form: every dtype is True, none is False
    (the three drawn by default stand for every one: bfloat16 is opt-in)."""
    if isinstance(value, tuple):
        if set(value) >= set(DTYPES):
            return True
        if not value:
            return False
    return value


def _where(value: PerDtype) -> frozenset[str]:
    """The dtypes where a per-dtype value holds."""
    if value is True:
        return frozenset(ALL_DTYPES)
    if value is False:
        return frozenset()
    return frozenset(value)


@dataclass(frozen=True)
class Capabilities:
    dtypes: tuple[str, ...] = DTYPES
    dilation: PerDtype = True
    groups: PerDtype = True
    bias_none: PerDtype = True
    square: PerDtype = False
    contiguous_only: PerDtype = False
    #: "below_stride": transposed problems only with output_padding < stride per axis
    output_padding: str = "torch"
    #: how it sums (one of ALGORITHMS)
    algorithm: str = "direct"
    #: the array library its functions take and return (ARRAY_LIBRARIES); for a
    #: check's functions together, "mixed" when they differ
    arrays: str = "numpy"
    #: the device its arrays live on, as the library names it ("cpu", "cuda:0")
    device: str = "cpu"
    #: "tf32": its float32 products may take inputs rounded to TF32 (FLOAT32_PRECISIONS)
    float32_precision: str = "ieee"
    #: what it sums bfloat16 products in (BFLOAT16_ACCUMULATIONS)
    bfloat16_accumulation: str = "float32"
    #: what it sums float16 products in, past FLOAT16_MAX_TERMS (FLOAT16_ACCUMULATIONS)
    float16_accumulation: str = "float32"
    #: (function name, its own flat capabilities) for the functions that declare
    #: any; the fields above are the module's, which hold for every other function
    functions: tuple[tuple[str, "Capabilities"], ...] = ()

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any] | None) -> "Capabilities":
        if raw is None:
            return cls()
        module = cls._flat(raw, "CAPABILITIES", allow_functions=True)
        overrides = []
        for name in FUNCTION_NAMES:  # the contract's order: the same whatever the dict's
            if name in raw:
                own = raw[name]
                if not isinstance(own, Mapping):
                    raise CapabilitiesError(
                        f"CAPABILITIES[{name!r}] must be a dict of {name}'s own capabilities, "
                        f"got {type(own).__name__}")
                overrides.append((name, cls._flat({**{k: v for k, v in raw.items()
                                                       if k not in FUNCTION_NAMES}, **own},
                                                   f"CAPABILITIES[{name!r}]",
                                                   allow_functions=False, keys=own)))
        return replace(module, functions=tuple(overrides))

    @classmethod
    def _flat(cls, raw: Mapping[str, Any], where: str, allow_functions: bool,
              keys: Iterable[str] | None = None) -> "Capabilities":
        if not isinstance(raw, Mapping):
            raise CapabilitiesError(f"{where} must be a dict, got {type(raw).__name__}")
        known = {f.name for f in fields(cls)} - {"functions"}
        checked = set(raw if keys is None else keys)
        unknown = sorted(checked - known - (set(FUNCTION_NAMES) if allow_functions else set()))
        if unknown:
            hint = (f"; known keys are {sorted(known)}"
                    + (" and the contract's function names (conv2d, conv2d_backward, ...)"
                       if allow_functions else " (a function's dict cannot name functions)"))
            raise CapabilitiesError(f"unknown {where} key(s) {unknown}{hint}")
        values: dict[str, Any] = {}
        for name, value in raw.items():
            if name in FUNCTION_NAMES:
                continue
            label = f"{where}[{name!r}]" if name in checked else f"CAPABILITIES[{name!r}]"
            if name == "dtypes":
                values[name] = _dtype_tuple(label, value, allow_empty=False)
                if "bfloat16" in values[name]:
                    bfloat16()  # its arrays are drawn by dtype name
            elif name == "output_padding":
                if value not in OUTPUT_PADDING_RULES:
                    raise CapabilitiesError(
                        f"{label} must be one of {OUTPUT_PADDING_RULES} ('below_stride': "
                        f"output_padding < stride; 'torch': < max(stride, dilation)), "
                        f"got {value!r}")
                values[name] = value
            elif name in _CHOICES:
                if value not in _CHOICES[name]:
                    raise CapabilitiesError(f"{label} must be one of {_CHOICES[name]}, "
                                            f"got {value!r}")
                values[name] = value
            elif name == "device":
                if not isinstance(value, str) or not value.strip():
                    raise CapabilitiesError(f"{label} must be a device name such as 'cpu' or "
                                            f"'cuda:0', got {value!r}")
                values[name] = value.strip()
            elif isinstance(value, bool):
                values[name] = value
            elif isinstance(value, (tuple, list, set, frozenset)):
                values[name] = _normal(_dtype_tuple(label, value, allow_empty=True))
            else:
                raise CapabilitiesError(
                    f"{label} must be True or False, or a tuple of the dtype names where it "
                    f"holds, got {value!r}")
        made = cls(**values)
        if made.arrays == "numpy" and made.device != "cpu":
            raise CapabilitiesError(f"{where}: NumPy arrays live on the CPU; a device "
                                    f"({made.device!r}) needs \"arrays\": \"torch\"")
        return made

    # -- reading ---------------------------------------------------------------
    def holds(self, name: str, dtype: str) -> bool:
        """Whether capability ``name`` (``"dilation"``, ``"square"``, ...) holds in ``dtype``."""
        return dtype in _where(getattr(self, name))

    def where(self, name: str) -> tuple[str, ...]:
        """The dtypes (of `dtypes`) in which capability ``name`` holds."""
        held = _where(getattr(self, name))
        return tuple(d for d in self.dtypes if d in held)

    def function(self, name: str) -> "Capabilities":
        """The flat capabilities of one contract function."""
        own = dict(self.functions)
        return own[name] if name in own else replace(self, functions=())

    def for_functions(self, functions: Iterable[str]) -> "Capabilities":
        """Flat capabilities that hold for every one of ``functions`` together.

        A dtype is kept if every function accepts it, a feature (dilation,
        groups, bias=None) holds in a dtype if every function accepts it
        there, and a restriction (square, contiguous_only) applies in a dtype
        if any function needs it there. With no functions: the module's.
        ``dtypes`` may come out empty: the functions share no dtype.
        """
        return _for_functions(self, tuple(functions))

    def _combined(self, functions: tuple[str, ...]) -> "Capabilities":
        flats = [self.function(name) for name in functions] or [replace(self, functions=())]
        values: dict[str, Any] = {
            "dtypes": tuple(d for d in ALL_DTYPES if all(d in f.dtypes for f in flats)),
            "algorithm": max((f.algorithm for f in flats), key=ALGORITHMS.index)}
        for name in PERMISSIONS:
            common = frozenset(ALL_DTYPES)
            for f in flats:
                common &= _where(getattr(f, name))
            values[name] = _normal(tuple(d for d in ALL_DTYPES if d in common))
        for name in RESTRICTIONS:
            anywhere: frozenset[str] = frozenset()
            for f in flats:
                anywhere |= _where(getattr(f, name))
            values[name] = _normal(tuple(d for d in ALL_DTYPES if d in anywhere))
        values["output_padding"] = ("below_stride" if any(
            f.output_padding == "below_stride" for f in flats) else "torch")
        libraries = {f.arrays for f in flats}
        values["arrays"] = libraries.pop() if len(libraries) == 1 else "mixed"
        values["device"] = flats[0].device
        values["bfloat16_accumulation"] = ("bfloat16" if any(
            f.bfloat16_accumulation == "bfloat16" for f in flats) else "float32")
        values["float16_accumulation"] = ("float16" if any(
            f.float16_accumulation == "float16" for f in flats) else "float32")
        values["float32_precision"] = ("tf32" if any(f.float32_precision == "tf32"
                                                     for f in flats) else "ieee")
        return Capabilities(**values)

    def layouts(self, dtype: str) -> tuple[str, ...]:
        """The memory layouts inputs in ``dtype`` are drawn in (C first)."""
        return ("C",) if self.holds("contiguous_only", dtype) else LAYOUTS_OF[self.arrays]

    def output_padding_limit(self, stride: int, dilation: int) -> int:
        """The largest output_padding these capabilities allow on an axis."""
        if self.output_padding == "below_stride":
            return stride - 1
        return max(stride, dilation) - 1

    def for_op(self, op: str) -> "Capabilities":
        """Flat capabilities of ``op`` and its backward together (what the strategies
        draw when not told which functions a check calls: never too much)."""
        if not self.functions:
            return self
        return self.for_functions((op, OPS[op].backward_name))

    # -- what they rule out ----------------------------------------------------
    def excludes(self, case: Any, functions: Iterable[str] | None = None) -> list[str]:
        """Why these capabilities rule out ``case`` (a `ConvCase`; empty: they do not).

        ``functions``: the functions that would be called (default: the case's
        operation and its backward, both).
        """
        p = case.problem
        flat = self.for_functions(functions) if functions is not None else self.for_op(p.op)
        who = ""
        if flat is not self and self.functions:
            names = tuple(functions) if functions is not None else (p.op, p.spec.backward_name)
            who = f" (for {', '.join(names)})"
        out = []
        if p.dtype not in flat.dtypes:
            out.append(f"dtype {p.dtype} (accepts {', '.join(flat.dtypes) or 'none'})")

        def refused(name: str) -> str:
            text = _DESCRIPTIONS[name]
            where = flat.where(name) if name in PERMISSIONS else tuple(
                d for d in flat.dtypes if not flat.holds(name, d))
            if where and getattr(flat, name) not in (True, False):
                text += f" in {p.dtype} (only in {', '.join(where)})"
            return text

        if not flat.holds("dilation", p.dtype) and any(d != 1 for d in p.dilation):
            out.append(refused("dilation"))
        if not flat.holds("groups", p.dtype) and p.groups != 1:
            out.append(refused("groups"))
        if not flat.holds("bias_none", p.dtype) and not p.bias:
            out.append(refused("bias_none"))
        if flat.holds("square", p.dtype) and any(len(set(t)) > 1 for t in (
                p.kernel_size, p.stride, p.padding, p.dilation, p.output_padding)):
            out.append(refused("square"))
        if flat.holds("contiguous_only", p.dtype) and any(
                v != "C" for v in case.layouts.values()):
            out.append(refused("contiguous_only"))
        elif flat.arrays == "torch" and "reversed" in case.layouts.values():
            out.append("a reversed layout (torch tensors have no negative strides)")
        if any(op > flat.output_padding_limit(s, d)
               for op, s, d in zip(p.output_padding, p.stride, p.dilation)):
            out.append(_DESCRIPTIONS["output_padding"])
        return [reason + who for reason in out]

    def _not_generated_flat(self) -> list[str]:
        out = [f"dtype {d}" for d in DTYPES if d not in self.dtypes]
        for name in (*PERMISSIONS, *RESTRICTIONS):
            value = getattr(self, name)
            refused = (set(self.dtypes) - _where(value) if name in PERMISSIONS
                       else set(self.dtypes) & _where(value))
            if not refused:
                continue
            text = _DESCRIPTIONS[name]
            if set(self.dtypes) - refused:  # refused in some of its dtypes only
                text += " in " + ", ".join(d for d in ALL_DTYPES if d in refused)
            out.append(text)
        if self.output_padding == "below_stride":
            out.append(_DESCRIPTIONS["output_padding"])
        return out

    def not_generated(self) -> list[str]:
        """What this declaration keeps out of the generated problems, for the summary.

        Per-function declarations follow the module's, prefixed by the
        function's name, with what they add to the module's.
        """
        module = replace(self, functions=())
        out = module._not_generated_flat()
        for name, own in self.functions:
            extra = [item for item in own._not_generated_flat() if item not in out]
            if extra:
                out.append(f"{name}: " + ", ".join(extra))
        return out


@lru_cache(maxsize=256)
def _for_functions(caps: Capabilities, functions: tuple[str, ...]) -> Capabilities:
    """`Capabilities.for_functions`, kept: it is pure (both are frozen), and the checks ask
    it for the same few sets of functions at every call of the implementation."""
    return caps._combined(functions)
