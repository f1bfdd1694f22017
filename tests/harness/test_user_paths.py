"""The paths users take, as real pytest runs: a matrix of spec forms x arrays x dtypes x
(-n 0, -n 2) x (--isolate or not).

Each cell is one implementation of conv2d (and its backward) written as a user would:
a file given by path, a dotted module on the user's PYTHONPATH, ``module:attr`` naming
a namespace, ``module:Class``, or a `LayerAdapter` of a layer class; on NumPy arrays
or on torch tensors (its backward then from autograd); in one dtype, bfloat16
included. Every cell has a correct implementation, which must pass, and one with a
single bug (its result off by one everywhere), which must fail with exactly one entry
whose script exits 1 and whose case fails again under ``pytest --replay``.

The whole product is 160 cells; it runs pairwise (`CELLS`: every pair of values of
two factors is in some cell, which `test_the_cells_cover_every_meaningful_pair`
checks), in one pytest run per (-n, --isolate) pair with every cell of that run given
as an ``--impl`` of its own. Only the verdict is under test, so each test runs one
example (``--conv-budget 0.01``), as tests/harness/test_subsets.py's runs do; the bug
shows on every problem, so that example finds it. docs/implementations.md lists the
cells.
"""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path

import pytest

from tests.harness.conftest import suite_run
from tests.harness.test_triage import script_exits_1

FORMS = ("path", "dotted", "attr", "class", "layer")
ARRAYS = ("numpy", "torch")
DTYPES = ("float16", "bfloat16", "float32", "float64")
#: (-n, --isolate): one pytest run each
RUNS = (("0", False), ("2", True), ("2", False), ("0", True))
PACKAGE = "user_kernels"


def _cells() -> list[tuple[str, str, str, int]]:
    """(form, arrays, dtype, run index): every form in every run, each run with every
    dtype, and each form with both arrays and every dtype over the runs. A layer class
    computes on NumPy arrays only (the adapter hands it NumPy)."""
    cells = []
    for run, form in itertools.product(range(len(RUNS)), FORMS):
        k = FORMS.index(form)
        arrays = "numpy" if form == "layer" else ARRAYS[(k + run // 2) % 2]
        cells.append((form, arrays, DTYPES[(k + run) % len(DTYPES)], run))
    return cells


CELLS = _cells()


def test_the_cells_cover_every_meaningful_pair():
    factors = {"form": FORMS, "arrays": ARRAYS, "dtype": DTYPES, "run": range(len(RUNS))}
    rows = [dict(zip(factors, cell)) for cell in CELLS]
    for a, b in itertools.combinations(factors, 2):
        for pair in itertools.product(factors[a], factors[b]):
            wanted = dict(zip((a, b), pair))
            if wanted.get("form") == "layer" and wanted.get("arrays") == "torch":
                continue  # not meaningful: the adapter computes on NumPy
            assert any(all(row[k] == v for k, v in wanted.items()) for row in rows), wanted


# -- the implementations, as a user writes them ------------------------------------

_NUMPY_MATH = '''
import numpy as np
from conv_impl import einsum as _exact  # correct in float64: each result rounded once


def _wide(a):
    return None if a is None else np.asarray(a, dtype=np.float64)


def conv2d(x, weight, bias, *, stride, padding, dilation, groups):
    y = _exact.conv2d(_wide(x), _wide(weight), _wide(bias), stride=stride, padding=padding,
                      dilation=dilation, groups=groups)
    return (y + OFF).astype(x.dtype)


def conv2d_backward(grad_output, x, weight, bias, *, stride, padding, dilation, groups):
    grads = _exact.conv2d_backward(_wide(grad_output), _wide(x), _wide(weight), _wide(bias),
                                   stride=stride, padding=padding, dilation=dilation,
                                   groups=groups)
    return tuple(None if g is None else g.astype(x.dtype) for g in grads)
'''

_TORCH_MATH = '''
import torch
import torch.nn.functional as F


def conv2d(x, weight, bias, *, stride, padding, dilation, groups):
    # in float64 on contiguous tensors, rounded once: correct on any CPU (torch's own
    # half-precision and some strided CPU kernels are not, tests/harness/test_native.py)
    wide = [None if t is None else t.contiguous().double() for t in (x, weight, bias)]
    y = F.conv2d(*wide, stride=stride, padding=padding, dilation=dilation, groups=groups)
    return (y + OFF).to(x.dtype)
'''

_LAYER = '''
import numpy as np
from conv_impl import LayerAdapter
from conv_impl import einsum as _exact


class Conv2D:
    """A course-style layer: square sizes, weight (C_out, C_in, k, k), backward -> (db, dw, dx)."""

    def __init__(self, in_channels, out_channels, kernel_size, stride, padding):
        self.geometry = dict(stride=(stride, stride), padding=(padding, padding),
                             dilation=(1, 1), groups=1)
        self.weight = np.zeros((out_channels, in_channels, kernel_size, kernel_size))
        self.bias = np.zeros(out_channels)

    def forward(self, x):
        self.x = x
        y = _exact.conv2d(x.astype(np.float64), self.weight.astype(np.float64),
                          self.bias.astype(np.float64), **self.geometry)
        return (y + OFF).astype(x.dtype)

    def backward(self, dout):
        dx, dw, db = _exact.conv2d_backward(
            dout.astype(np.float64), self.x.astype(np.float64), self.weight.astype(np.float64),
            self.bias.astype(np.float64), **self.geometry)
        return db.astype(dout.dtype), dw.astype(dout.dtype), dx.astype(dout.dtype)


impl = LayerAdapter(Conv2D, capabilities={"dtypes": (DTYPE,)})
'''


def _capabilities(arrays: str, dtype: str) -> str:
    native = {"arrays": "torch", "device": "cpu"} if arrays == "torch" else {}
    return repr({**native, "dtypes": (dtype,)})


def _source(form: str, arrays: str, dtype: str, buggy: bool) -> str:
    off = "1" if buggy else "0"
    if form == "layer":
        return _LAYER.replace("OFF", off).replace("DTYPE", repr(dtype))
    math = (_NUMPY_MATH if arrays == "numpy" else _TORCH_MATH).replace("OFF", off)
    caps = _capabilities(arrays, dtype)
    if form in ("path", "dotted"):
        return f"{math}\n\nCAPABILITIES = {caps}\n"
    functions = ["conv2d"] + (["conv2d_backward"] if arrays == "numpy" else [])
    if form == "attr":
        members = ", ".join(f"{f}={f}" for f in functions)
        return (f"{math}\n\nimport types\n\nimpl = types.SimpleNamespace({members}, "
                f"CAPABILITIES={caps})\n")
    members = "\n".join(f"    {f} = staticmethod({f})" for f in functions)
    return f"{math}\n\nclass Kernel:\n    CAPABILITIES = {caps}\n{members}\n"


def _spec(root: Path, name: str, form: str) -> str:
    module = f"{PACKAGE}.{name}"
    return {"path": str(root / PACKAGE / f"{name}.py"), "dotted": module,
            "attr": f"{module}:impl", "class": f"{module}:Kernel",
            "layer": f"{root / PACKAGE / f'{name}.py'}:impl"}[form]


def _write_cells(root: Path, run: int) -> dict[str, tuple[str, bool]]:
    """The run's implementations under ``root``: {spec: (cell name, buggy)}."""
    package = root / PACKAGE
    package.mkdir(parents=True, exist_ok=True)
    (package / "__init__.py").write_text("")
    specs = {}
    for form, arrays, dtype, cell_run in CELLS:
        if cell_run != run:
            continue
        for buggy in (False, True):
            name = f"{form}_{arrays}_{dtype}_{'buggy' if buggy else 'correct'}"
            (package / f"{name}.py").write_text(_source(form, arrays, dtype, buggy))
            specs[_spec(root, name, form)] = (name, buggy)
    return specs


@pytest.mark.long
@pytest.mark.parametrize("run", range(len(RUNS)),
                         ids=[f"n{n}{'-isolate' if iso else ''}" for n, iso in RUNS])
def test_each_cell_passes_when_correct_and_fails_once_when_buggy(run, tmp_path):
    workers, isolate = RUNS[run]
    specs = _write_cells(tmp_path, run)
    failures = tmp_path / "failures"
    args = ["-n", workers, "--conv-budget", "0.01", *(["--isolate"] if isolate else []),
            *itertools.chain.from_iterable(("--impl", spec) for spec in specs)]
    env = {"PYTHONPATH": os.pathsep.join(filter(None, [str(tmp_path),
                                                       os.environ.get("PYTHONPATH")]))}
    done = suite_run(*args, failures=failures, env=env)
    assert done.returncode == 1, done.stdout[-4000:] + done.stderr[-2000:]
    summary = {entry["impl"]: entry
               for entry in json.loads((failures / "summary.json").read_text())
               ["implementations"]}
    assert set(summary) == set(specs), (sorted(summary), sorted(specs))
    replays = []
    for spec, (name, buggy) in specs.items():
        entry = summary[spec]
        bugs = entry["bugs"]
        if not buggy:
            assert entry["verdict"] == "passed" and not bugs, (name, bugs)
            continue
        assert entry["verdict"] == "failed" and len(bugs) == 1, (name, bugs)
        case_file = failures / bugs[0]["case_file"]
        assert case_file.exists(), (name, bugs[0])
        script_exits_1(case_file.with_suffix(".py"), failures)
        replays.append(case_file)
    # every saved case fails again, each as a test of its own, under --replay
    again = suite_run(*itertools.chain.from_iterable(("--replay", c) for c in replays),
                      *(["--isolate"] if isolate else []),
                      failures=tmp_path / "replayed", env=env)
    assert again.returncode == 1, again.stdout[-4000:]
    assert again.stdout.count("FAILED") >= len(replays), again.stdout[-4000:]
    assert " passed" not in again.stdout.splitlines()[-1], again.stdout[-2000:]


def test_the_docs_list_the_cells():
    """docs/implementations.md's table of the cells is this module's `CELLS`."""
    from tests.harness.conftest import PROJECT_ROOT
    names = {"numpy": "NumPy", "torch": "torch"}
    text = (PROJECT_ROOT / "docs" / "implementations.md").read_text()
    for run, (workers, isolate) in enumerate(RUNS):
        label = f"`-n {workers}{' --isolate' if isolate else ''}`"
        row = " | ".join(f"{names[arrays]}, {dtype}" for _, arrays, dtype, cell_run in CELLS
                         if cell_run == run)
        assert f"| {label} | {row} |" in text, (label, row)
