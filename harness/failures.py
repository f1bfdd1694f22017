"""Failure case files: the contract's JSON record of one shrunk failure.

Written for the final (shrunk) example only, by whichever process found it,
atomically: the content goes to a temporary file in the same folder, then
`os.replace` moves it into place, so a reader never sees half a file and two
xdist workers never write the same file at once (the name carries a hash of
the content, so two workers that found the same case write the same bytes).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from harness.problem import ARRAY_NAMES, ConvCase, ConvProblem

SCHEMA_VERSION = 1
DEFAULT_FAILURES_DIR = ".conv-failures"


class CaseFileError(Exception):
    """A case file that cannot be read back; the message names the file and the problem."""


def _versions() -> dict[str, str]:
    versions = {"numpy": np.__version__}
    try:
        import torch
        versions["torch"] = torch.__version__
    except ImportError:
        versions["torch"] = "not installed"
    return versions


def case_record(impl_spec: str, case: ConvCase, check: str, message: str) -> dict[str, Any]:
    """The JSON-ready record of a failing case (contract section 3)."""
    arrays = case.arrays()
    return {
        "schema_version": SCHEMA_VERSION,
        "impl": impl_spec,
        "op": case.problem.op,
        "check": check,
        "params": case.problem.params(),
        "inputs": {name: None if arrays[name] is None else arrays[name].tolist()
                   for name in ARRAY_NAMES},
        "layouts": {name: case.layouts.get(name, "C") for name in ARRAY_NAMES
                    if arrays[name] is not None},
        "versions": _versions(),
        "message": message,
    }


def atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)


def save_case(directory: Path, record: dict[str, Any], stem_prefix: str) -> Path:
    """Write ``record`` into ``directory``; returns the file's path."""
    text = json.dumps(record, indent=1) + "\n"
    digest = hashlib.sha256(text.encode()).hexdigest()[:10]
    path = Path(directory) / f"{_safe(stem_prefix)}-{record['op']}-{record['check']}-{digest}.json"
    atomic_write(path, text)
    return path


def load_case(path: Path) -> tuple[dict[str, Any], ConvCase]:
    """Read a case file back into its record and a `ConvCase` (same values and layouts)."""
    try:
        record = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CaseFileError(f"{path}: no such case file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise CaseFileError(f"{path}: cannot read it ({exc})") from None
    except json.JSONDecodeError as exc:
        raise CaseFileError(f"{path}: not valid JSON, truncated or damaged ({exc})") from None
    if not isinstance(record, dict):
        raise CaseFileError(f"{path}: not a case file (the JSON is not an object)")
    version = record.get("schema_version", SCHEMA_VERSION)
    if version != SCHEMA_VERSION:
        raise CaseFileError(f"{path}: schema version {version!r}; this harness reads "
                            f"version {SCHEMA_VERSION}")
    missing = [key for key in ("impl", "op", "check", "params", "inputs") if key not in record]
    if missing:
        raise CaseFileError(f"{path}: not a case file, missing {', '.join(missing)}")
    try:
        problem = ConvProblem.from_params(record["op"], record["params"])
        shapes = problem.shapes()
        arrays = {}
        for name in ARRAY_NAMES:
            raw = record["inputs"].get(name)
            if raw is None:
                arrays[name] = None
                continue
            arrays[name] = np.array(raw, dtype=problem.dtype).reshape(shapes[name])
        layouts = dict(record.get("layouts") or {})
        return record, ConvCase(problem=problem, layouts=layouts, **arrays)
    except (KeyError, TypeError, ValueError) as exc:
        raise CaseFileError(f"{path}: inconsistent case ({type(exc).__name__}: {exc})") from None
