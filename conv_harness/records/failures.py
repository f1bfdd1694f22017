"""Failure case files: the contract's JSON record of one shrunk failure.

Written for the final (shrunk) example only (conv_harness/searching/suite.py decides that),
by whichever process found it, xdist worker or not, atomically: each file's
content goes to a temporary file in the same folder, then `os.replace` moves
it into place, so a reader never sees half a file. The file name carries a
hash of the content, so two different failures never share a name (no
clobbering) and two workers that found the same case write the same bytes
to the same name. The standalone reproduction script (conv_harness/records/script.py) is
saved beside the JSON, same stem, ``.py``; it is written first, so a JSON
file that exists always has its script.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from conv_harness.descriptor import format_descriptor
from conv_harness.problem import (ALL_DTYPES, ARRAY_NAMES, LAYOUTS, OPS, ConvCase, ConvProblem,
                             bfloat16)
from conv_harness.specs import is_path, split_spec

SCHEMA_VERSION = 1
REQUIRED_KEYS: tuple[str, ...] = ("impl", "op", "check", "params", "inputs")


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


def _impl_file(impl_spec: str) -> str | None:
    """The absolute path of a file spec (so a replay from elsewhere finds it)."""
    module, _ = split_spec(impl_spec)
    if not is_path(module):
        return None
    return str(Path(module).expanduser().resolve())


def _packed(a: np.ndarray) -> dict[str, Any]:
    # bfloat16 by name: its ``dtype.str`` is a bare "<V2" (ml_dtypes' type is a void
    # type to NumPy), which would read back as raw bytes
    dtype = a.dtype.name if a.dtype.name == "bfloat16" else a.dtype.str
    return {"dtype": dtype, "shape": list(a.shape), "nbytes": int(a.nbytes)}


def _dtype(name: str) -> np.dtype:
    return bfloat16() if name == "bfloat16" else np.dtype(name)


def packed_payload(case: ConvCase) -> list[memoryview]:
    """The raw bytes of ``case``'s arrays, in the order of `case_record`'s
    ``packed_inputs`` (C order, without a copy where the array already is).

    Viewed as bytes through NumPy, not ``memoryview.cast``: the buffer protocol
    has no format for bfloat16 (ml_dtypes), and NumPy's byte view needs none."""
    arrays = case.arrays()
    return [memoryview(np.ascontiguousarray(arrays[name]).reshape(-1).view(np.uint8))
            for name in ARRAY_NAMES if arrays[name] is not None]


def unpacked_inputs(packed: dict[str, Any], payload: bytes) -> dict[str, Any]:
    """The contract's ``inputs`` (nested lists) from `case_record`'s ``packed_inputs``
    and the bytes that `packed_payload` gave for them."""
    inputs, offset = {}, 0
    for name, p in packed.items():
        if p is None:
            inputs[name] = None
            continue
        end = offset + p["nbytes"]
        inputs[name] = np.frombuffer(payload[offset:end], dtype=_dtype(p["dtype"])).reshape(
            p["shape"]).tolist()
        offset = end
    return inputs


#: what a case record holds of an implementation's own arrays (contract section 7)
NATIVE_KEYS: tuple[str, ...] = ("arrays", "device", "derived", "float32_precision",
                                 "bfloat16_accumulation", "float16_accumulation")


#: the user property of a crash report under pytest-xdist that names the case file its
#: controller saved (conv_harness/running/isolate.py), for the run summary's bug list
CRASH_CASE = "conv_harness_crash_case"


def case_record(impl_spec: str, case: ConvCase, check: str, message: str,
                run_check: str | None = None, packed: bool = False,
                before: list[tuple[str, ConvCase]] | None = None,
                native: dict[str, Any] | None = None) -> dict[str, Any]:
    """The JSON-ready record of a failing case (contract section 3).

    ``check`` is the check that failed as the report names it (``forward``,
    ``grad_input``, ... or ``raised``, ``dtype``, ``shape``, ...);
    ``run_check`` is the registered check that was running (what a replay
    runs again), ``check`` when omitted.

    ``before``: (function, case) of calls that must come first, for a failure
    that depends on earlier calls; the script and a replay make them before
    the failing one. A call on another problem (of the same op) keeps its own
    ``params`` and ``layouts``.

    ``packed``: the arrays as ``packed_inputs`` (dtype, shape and size; their
    bytes are `packed_payload`'s, written after the record) instead of ``inputs``,
    for a record written before every call of an implementation
    (conv_harness/running/isolate.py): as nested lists in JSON they cost about a
    millisecond per call on small problems, and as base64 in JSON 130 ms on a
    ResNet layer of 8.8 MB, four times the call; `unpacked_inputs` turns them
    into ``inputs`` when the record becomes a case file.

    ``native``: for an implementation on another array library than NumPy, its
    ``arrays``, ``device`` and ``derived`` functions (`Implementation.native_record`).
    """
    arrays = case.arrays()
    inputs_key = "packed_inputs" if packed else "inputs"
    record: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "impl": impl_spec,
        "op": case.problem.op,
        "check": check,
        "run_check": run_check or check,
        "params": case.problem.params(),
        "descriptor": format_descriptor(case.problem),  # benchdnn notation (docs/fast-paths.md)
        inputs_key: {name: None if arrays[name] is None else
                     _packed(arrays[name]) if packed else arrays[name].tolist()
                     for name in ARRAY_NAMES},
        "layouts": {name: case.layouts.get(name, "C") for name in ARRAY_NAMES
                    if arrays[name] is not None},
        "versions": _versions(),
        "message": message,
        **(native or {}),
    }
    if before:  # calls that must come first (results depend on them)
        record["before"] = []
        for function, earlier in before:
            entry: dict[str, Any] = {"function": function, "inputs": {
                name: None if a is None else a.tolist() for name, a in earlier.arrays().items()}}
            if earlier.problem != case.problem:  # another problem of the same op
                entry["params"] = earlier.problem.params()
                entry["layouts"] = {name: earlier.layouts.get(name, "C")
                                    for name, a in earlier.arrays().items() if a is not None}
            record["before"].append(entry)
    impl_file = _impl_file(impl_spec)
    if impl_file is not None:
        record["impl_file"] = impl_file
    return record


def atomic_write(path: Path, text: str | Sequence[bytes | memoryview],
                 durable: bool = True) -> None:
    """Write ``text`` (or those bytes, one chunk after another) to ``path`` so that no
    reader ever sees part of it.

    ``durable``: also flush it to disk before it takes the name, so that it
    survives the machine going down, not only the process. A case file needs
    that; a record that only has to outlive a crash of this process does not
    (the kernel keeps what was written), and flushing costs about half a
    millisecond of waiting per write here.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            for chunk in [text.encode("utf-8")] if isinstance(text, str) else text:
                handle.write(chunk)
            if durable:
                handle.flush()
                os.fsync(handle.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes it private; a case file is not
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def safe_name(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)


def case_path(directory: Path, record: dict[str, Any], stem_prefix: str) -> Path:
    """Where ``record`` is saved: ``<prefix>-<op>-<check>-<hash of the content>.json``."""
    digest = hashlib.sha256(dump_record(record).encode()).hexdigest()[:10]
    stem = "-".join([safe_name(stem_prefix), safe_name(record["op"]),
                     safe_name(record["check"]), digest])
    return Path(directory) / f"{stem}.json"


def dump_record(record: dict[str, Any]) -> str:
    """The record as JSON, one key per line and each array on one line (easy to diff)."""
    def compact(value: Any) -> str:
        return json.dumps(value, separators=(", ", ": "))

    lines = []
    for key, value in record.items():
        if isinstance(value, dict) and key in ("inputs", "versions", "layouts"):
            inner = ",\n".join(f"  {json.dumps(k)}: {compact(v)}" for k, v in value.items())
            lines.append(f" {json.dumps(key)}: {{\n{inner}\n }}")
        else:
            lines.append(f" {json.dumps(key)}: {compact(value)}")
    return "{\n" + ",\n".join(lines) + "\n}\n"


def script_path(case_file: Path) -> Path:
    """The reproduction script saved beside a case file."""
    return Path(case_file).with_suffix(".py")


def save_case(directory: Path, record: dict[str, Any], stem_prefix: str,
              script: str | None = None) -> Path:
    """Write ``record`` (and ``script`` beside it) into ``directory``; returns the JSON's path.

    A file of the same name already holds the same bytes (the name is a hash
    of them), so it is left as it is.
    """
    path = case_path(directory, record, stem_prefix)
    if script is not None and not script_path(path).exists():
        atomic_write(script_path(path), script)
    if not path.exists():
        atomic_write(path, dump_record(record))
    return path


def read_record(path: Path) -> dict[str, Any]:
    """The JSON object of a case file, checked for what a replay needs."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CaseFileError(f"{path}: no such case file") from None
    except IsADirectoryError:
        raise CaseFileError(f"{path}: is a folder, not a case file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise CaseFileError(f"{path}: cannot read it ({exc})") from None
    if not text.strip():
        raise CaseFileError(f"{path}: empty file, not a case file")
    try:
        record = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CaseFileError(f"{path}: not valid JSON, truncated or damaged ({exc})") from None
    if not isinstance(record, dict):
        raise CaseFileError(f"{path}: not a case file (the JSON is not an object)")
    version = record.get("schema_version", SCHEMA_VERSION)
    if version != SCHEMA_VERSION:
        raise CaseFileError(f"{path}: schema version {version!r}; this harness reads "
                            f"version {SCHEMA_VERSION}")
    missing = [key for key in REQUIRED_KEYS if key not in record]
    if missing:
        raise CaseFileError(f"{path}: not a case file, missing {', '.join(missing)}")
    for key in ("impl", "op", "check"):
        if not isinstance(record[key], str) or not record[key]:
            raise CaseFileError(f"{path}: {key!r} must be a non-empty string, "
                                f"got {record[key]!r}")
    if record["op"] not in OPS:
        raise CaseFileError(f"{path}: unknown op {record['op']!r}; expected one of "
                            f"{sorted(OPS)}")
    if not isinstance(record["params"], dict) or not isinstance(record["inputs"], dict):
        raise CaseFileError(f"{path}: 'params' and 'inputs' must be JSON objects")
    return record


def case_from_record(record: dict[str, Any], path: Path | str = "<record>") -> ConvCase:
    """The `ConvCase` of a record: the same values, dtype and memory layouts."""
    try:
        problem = ConvProblem.from_params(record["op"], record["params"])
        if problem.dtype not in ALL_DTYPES:
            raise ValueError(f"dtype {problem.dtype!r} is not one of {', '.join(ALL_DTYPES)}")
        shapes = problem.shapes()
        arrays: dict[str, np.ndarray | None] = {}
        for name in ARRAY_NAMES:
            raw = record["inputs"].get(name)
            if raw is None:
                if name != "bias" or shapes["bias"] is not None:
                    raise ValueError(f"input {name!r} is missing"
                                     + (" but params say bias=true" if name == "bias" else ""))
                arrays[name] = None
                continue
            if shapes[name] is None:
                raise ValueError(f"input {name!r} is given but params say bias=false")
            array = np.array(raw, dtype=np.float64)
            if array.shape != shapes[name]:
                raise ValueError(f"input {name!r} has shape {array.shape}; the params "
                                 f"give {shapes[name]}")
            arrays[name] = array.astype(problem.dtype)
        layouts = dict(record.get("layouts") or {})
        for name, layout in layouts.items():
            if name not in ARRAY_NAMES or layout not in LAYOUTS:
                raise ValueError(f"layout {name}={layout!r}; layouts are "
                                 f"{', '.join(LAYOUTS)} for {', '.join(ARRAY_NAMES)}")
        return ConvCase(problem=problem, layouts=layouts, **arrays)
    except (KeyError, TypeError, ValueError) as exc:
        raise CaseFileError(f"{path}: inconsistent case ({type(exc).__name__}: {exc})") from None


def earlier_calls(record: dict[str, Any], case: ConvCase) -> list[tuple[str, ConvCase]]:
    """The record's ``before`` calls as (function, case), in order: on the failing
    call's problem unless the entry has ``params`` of its own."""
    out = []
    for call in record.get("before") or []:
        problem = (ConvProblem.from_params(record["op"], call["params"]) if "params" in call
                   else case.problem)
        layouts = dict(call.get("layouts") or case.layouts)
        arrays = {name: None if raw is None else np.array(raw, dtype=np.float64).astype(
            problem.dtype) for name, raw in call["inputs"].items()}
        out.append((call["function"], ConvCase(problem=problem, layouts=layouts, **arrays)))
    return out


def load_case(path: Path) -> tuple[dict[str, Any], ConvCase]:
    """Read a case file back into its record and a `ConvCase` (same values and layouts)."""
    record = read_record(path)
    return record, case_from_record(record, path)
