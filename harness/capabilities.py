"""An implementation's optional ``CAPABILITIES``: what it may be given.

Contract section 2: every key is optional, an unknown key or a bad value is an
error in the implementation's spec (the harness never guesses), and what an
implementation declares it does not support is never generated for it.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Mapping

from harness.problem import DTYPES


class CapabilitiesError(ValueError):
    """A ``CAPABILITIES`` mapping the harness cannot honour."""


@dataclass(frozen=True)
class Capabilities:
    dtypes: tuple[str, ...] = DTYPES
    dilation: bool = True
    groups: bool = True
    bias_none: bool = True
    square: bool = False
    contiguous_only: bool = False

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any] | None) -> "Capabilities":
        if raw is None:
            return cls()
        if not isinstance(raw, Mapping):
            raise CapabilitiesError(f"CAPABILITIES must be a dict, got {type(raw).__name__}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(raw) - known)
        if unknown:
            raise CapabilitiesError(
                f"unknown CAPABILITIES key(s) {unknown}; known keys are {sorted(known)}")
        values: dict[str, Any] = {}
        for name, value in raw.items():
            if name == "dtypes":
                if isinstance(value, str) or not all(isinstance(d, str) for d in value):
                    raise CapabilitiesError(
                        f"CAPABILITIES['dtypes'] must be a tuple of dtype names, got {value!r}")
                bad = sorted(set(value) - set(DTYPES))
                if bad or not value:
                    raise CapabilitiesError(
                        f"CAPABILITIES['dtypes'] = {tuple(value)!r}: must be a non-empty "
                        f"subset of {DTYPES}")
                # Keep the harness's order (float64 first), so shrinking is the same
                # whatever order the user wrote.
                values[name] = tuple(d for d in DTYPES if d in value)
            else:
                if not isinstance(value, bool):
                    raise CapabilitiesError(
                        f"CAPABILITIES[{name!r}] must be True or False, got {value!r}")
                values[name] = value
        return cls(**values)

    def excludes(self, case: Any) -> list[str]:
        """Why these capabilities rule out ``case`` (a `ConvCase`; empty: they do not)."""
        p = case.problem
        out = []
        if p.dtype not in self.dtypes:
            out.append(f"dtype {p.dtype} (accepts {', '.join(self.dtypes)})")
        if not self.dilation and any(d != 1 for d in p.dilation):
            out.append("dilation > 1")
        if not self.groups and p.groups != 1:
            out.append("groups > 1")
        if not self.bias_none and not p.bias:
            out.append("bias=None")
        if self.square and any(len(set(t)) > 1 for t in (
                p.kernel_size, p.stride, p.padding, p.dilation, p.output_padding)):
            out.append("non-square kernel/stride/padding/dilation")
        if self.contiguous_only and any(v != "C" for v in case.layouts.values()):
            out.append("non-contiguous inputs")
        return out

    def not_generated(self) -> list[str]:
        """What this declaration keeps out of the generated problems, for the summary."""
        out = [f"dtype {d}" for d in DTYPES if d not in self.dtypes]
        if not self.dilation:
            out.append("dilation > 1")
        if not self.groups:
            out.append("groups > 1")
        if not self.bias_none:
            out.append("bias=None")
        if self.square:
            out.append("non-square kernel/stride/padding/dilation")
        if self.contiguous_only:
            out.append("non-contiguous inputs")
        return out
