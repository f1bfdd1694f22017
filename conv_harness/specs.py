"""An implementation spec (``--impl``): a file path, a dotted module, or either with
``:attribute``. What the names of a spec are, without importing it (the loader,
conv_harness/running/loader.py, imports it)."""

from __future__ import annotations

import re
from pathlib import Path

_ATTRIBUTE = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")


def split_spec(spec: str) -> tuple[str, str | None]:
    """``"mod:attr"`` -> (``"mod"``, ``"attr"``); no attribute -> (spec, None)."""
    module, sep, attr = spec.rpartition(":")
    if sep and module and _ATTRIBUTE.match(attr):
        return module, attr
    return spec, None


def is_path(module: str) -> bool:
    return module.endswith(".py") or "/" in module or "\\" in module or Path(module).is_file()


def short_name(spec: str) -> str:
    """What test ids call the implementation: a file's stem, or the dotted name."""
    module, attr = split_spec(spec)
    base = Path(module).stem if is_path(module) else module
    return f"{base}:{attr}" if attr else base
