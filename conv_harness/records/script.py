"""A standalone reproduction script for a failure case (contract section 3).

`render_script(record)` turns a case record (the JSON of conv_harness/records/failures.py)
into a Python script that needs only NumPy and torch, no import of this
project: the shrunk inputs written out literally (every float exactly, as
the shortest ``repr`` that reads back to the same float64; float16 and
float32 values are exact in float64), each input built in its recorded
memory layout, the implementation under test imported from the spec it was
loaded from (found beside the script first, so that a script copied next to
the user's file runs there; or named by ``python script.py SPEC`` or
``$CONV_IMPL``), torch in float64 as the oracle, and the harness's elementwise
rounding-error tolerance (conv_harness/checks/tolerance.py) restated inline with its
constants. ``python script.py`` exits 1 and prints the mismatch while the
bug is there, 0 once it is fixed (2 where the device an implementation on torch
tensors computes on is absent: contract section 7). A time-out case's script stops at the
limit the case was recorded with, and exits 1 saying so.

From a saved case file: ``python -m conv_harness.records.script CASE.json [-o OUT.py]``.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any

import numpy as np

from conv_harness.problem import FLOAT16_MAX_TERMS, ConvCase
from conv_harness.records.failures import CaseFileError, case_from_record, load_case
from conv_harness.cores import several
from conv_harness.specs import is_path, split_spec

FORWARD_CHECK = "forward"
GRADIENT_CHECKS = ("grad_input", "grad_weight", "grad_bias")


def _literal(array: np.ndarray | None, dtype: str, indent: int) -> str:
    """``array`` as Python source that rebuilds it exactly."""
    if array is None:
        return "None"

    def fmt(v: float) -> str:
        v = float(v)
        return repr(v) if np.isfinite(v) else f"float('{v}')"

    body = np.array2string(np.asarray(array, dtype=np.float64), separator=", ",
                           formatter={"float_kind": fmt}, threshold=sys.maxsize,
                           max_line_width=88 - indent, prefix=" " * indent)
    return f"np.array({body}, dtype={_dtype_source(dtype)})"


def _dtype_source(dtype: str) -> str:
    """The script's name of ``dtype``: NumPy's, or ml_dtypes' bfloat16."""
    return f"ml_dtypes.{dtype}" if dtype == "bfloat16" else f"np.{dtype}"


def _terms(case: ConvCase) -> dict[str, int]:
    p = case.problem
    return {"y": p.forward_terms() + 1, "grad_input": p.grad_input_terms(),
            "grad_weight": p.grad_weight_terms(), "grad_bias": p.grad_bias_terms()}


_HEADER = '''\
#!/usr/bin/env python3
"""{title}

{params}
layouts: {layouts}{on_arrays}

Standalone: NumPy and torch only. `python {name} [SPEC]`
exits 1 and prints the mismatch while the failure is there, 0 once fixed
(2: it cannot run here, the device the implementation computes on is absent).
The implementation is SPEC (a file path or dotted module, either with :attr),
else $CONV_IMPL, else a file of the recorded name beside this script, else
the recorded path from the current folder, else where it was recorded.
Reference: torch in float64. Tolerance, per element (from the harness's
rounding-error bound): (gamma(K, u) + gamma(K, u64)) * sum|terms| + normwise floor
+ flush allowance (subnormals may be flushed to zero: 2*K smallest normals, and
subnormal operands read as 0), gamma(n, u) = n*u / (1 - n*u).
Found by the convolution harness {versions}.
"""
import importlib
import importlib.util
import inspect
import math
import os
import sys
import threading
import traceback

import numpy as np
import torch
{ml_dtypes_import}

SPEC = {spec!r}  # the implementation under test, as given to --impl
MODULE, ATTR = {module!r}, {attr!r}  # its module (a path or a dotted name) and attribute
# The array library and device it computes on ("numpy", or "torch" on a torch device)
ARRAYS, DEVICE = {arrays!r}, {device!r}
# torch runs on one thread, as in the harness, whose repeatable check also compares
# an implementation on torch with itself on SEVERAL threads
SEVERAL = {several!r}
# "tf32": it declares float32 products of inputs rounded to TF32 (10-bit mantissa)
FLOAT32_PRECISION = {float32_precision!r}
RECORDED_FILE = {module_file!r}  # where the file was when the case was recorded
# A time-out case: the limit its call was recorded with, in seconds (None: no limit)
TIME_LIMIT = {time_limit!r}
# A crash case: the call is made in a child process, whose death is the failure
CRASHED = {crashed!r}
OP, CHECK = {op!r}, {run_check!r}
KWARGS = {kwargs}
LAYOUTS = {layout_dict!r}
# K, the reduction length of each result (products summed per element)
TERMS = {terms!r}
DTYPE = {dtype_source}
finfo = {finfo}  # the dtype's limits (NumPy's finfo knows no bfloat16)
# what it sums bfloat16 products in, as it declares (float32 unless it says bfloat16)
BFLOAT16_ACCUMULATION = {bfloat16_accumulation!r}
# what it sums float16 products in where a result has more than FLOAT16_MAX_TERMS
# (float32 unless it says float16)
FLOAT16_ACCUMULATION = {float16_accumulation!r}
FLOAT16_MAX_TERMS = {float16_max_terms}

x = {x}
weight = {weight}
bias = {bias}
grad_output = {grad_output}
INPUTS = {{"x": x, "weight": weight, "bias": bias, "grad_output": grad_output}}
# Calls made before the failing one, in this order (their results are not
# checked): the failure depends on them. (function, inputs, keyword arguments and
# layouts; None: the failing call's, on the same problem.)
BEFORE = {before}
# A failure that comes and goes on the same inputs: the calls to make, the case
# failing when any of them fails
TRIES = {tries!r}
'''

_BODY = '''

GIVEN = ""  # the implementation named on the command line (set below)


def is_path(module):
    return module.endswith(".py") or "/" in module or "\\\\" in module or os.path.isfile(module)


def implementation_source():
    """(module, attr, file or None): what to import, first found of: the command line
    (`python this_script.py SPEC`), $CONV_IMPL, a file of the recorded name beside this
    script, the recorded path from the current folder, the path it was recorded at."""
    module, attr = MODULE, ATTR
    given = GIVEN or os.environ.get("CONV_IMPL", "").strip()
    if given:
        head, sep, tail = given.rpartition(":")
        module, attr = (head, tail) if sep and head and tail.isidentifier() else (given, ATTR)
        if not is_path(module):
            return module, attr, None
        if not os.path.isfile(module):
            raise SystemExit(f"{{given}}: no such file")
        return module, attr, os.path.abspath(module)
    if not is_path(module):
        return module, attr, None
    here = os.path.dirname(os.path.abspath(__file__))
    for candidate in (os.path.join(here, os.path.basename(module)), module, RECORDED_FILE):
        if candidate and os.path.isfile(candidate):
            return module, attr, os.path.abspath(candidate)
    raise SystemExit(f"cannot find {{os.path.basename(module)}} beside this script, at "
                     f"{{module}} from here, or at {{RECORDED_FILE}}: copy the script beside "
                     "it, or name it: python " + os.path.basename(__file__) + " PATH_OR_MODULE")


def implementation():
    """Import the implementation as the harness did: file path, dotted module, :attr."""
    module_name, attr, module_file = implementation_source()
    if module_file:
        sys.path.insert(0, os.path.dirname(module_file))
        spec = importlib.util.spec_from_file_location("impl_under_test", module_file)
        module = importlib.util.module_from_spec(spec)
        sys.modules["impl_under_test"] = module
        spec.loader.exec_module(module)
    else:
        sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)), os.getcwd()]
        module = importlib.import_module(module_name)
    target = module
    for part in attr.split(".") if attr else ():
        target = getattr(target, part)
    if inspect.isclass(target) and any(
            inspect.isfunction(inspect.getattr_static(target, name, None))
            for name in (OP, OP + "_backward")):
        target = target()  # a class whose functions are methods: use an instance
    return target


def layout(values, how):
    """A fresh copy of values in the memory layout the harness handed over."""
    if how == "C":
        return np.array(values, order="C", copy=True)
    if how == "F":
        return np.array(values, order="F", copy=True)
    if how == "strided":  # every other element of a larger buffer on every axis
        buffer = np.zeros(tuple(2 * n for n in values.shape), dtype=values.dtype)
        view = buffer[tuple(slice(None, None, 2) for _ in values.shape)]
        view[...] = values
        return view
    if how == "reversed":  # negative stride on the last axis
        return np.ascontiguousarray(values[..., ::-1])[..., ::-1]
    if how in ("channels_last", "channels_last_slice") and values.ndim < 3:
        return np.array(values, order="C", copy=True)
    if how == "channels_last":  # channels vary fastest in memory
        return np.moveaxis(np.ascontiguousarray(np.moveaxis(values, 1, -1)), -1, 1)
    if how == "channels_last_slice":  # channels 1..C of a channels-last array of C + 2
        shape = list(values.shape)
        shape[1] += 2
        buffer = np.zeros(tuple(shape[:1] + shape[2:] + shape[1:2]), dtype=values.dtype)
        view = np.moveaxis(buffer, -1, 1)[:, 1:values.shape[1] + 1]
        view[...] = values
        return view
    raise ValueError(how)


def native(values):
    """values as the implementation takes them: the NumPy array itself, or a torch
    tensor on DEVICE with its strides and the memory around it (a channel slice's
    other channels, a strided view's gaps)."""
    if ARRAYS != "torch" or values is None:
        return values
    root = values
    while isinstance(root.base, np.ndarray):
        root = root.base
    start = values.__array_interface__["data"][0] - root.__array_interface__["data"][0]
    flat = root.ravel(order="K").copy()
    if flat.dtype.kind == "V":  # bfloat16 (ml_dtypes): torch takes its bits as int16
        storage = torch.from_numpy(flat.view(np.int16)).view(torch.bfloat16).to(DEVICE)
    else:
        storage = torch.from_numpy(flat).to(DEVICE)
    return storage.as_strided(values.shape, [s // values.itemsize for s in values.strides],
                              start // values.itemsize)


def host(value):
    """A result (or an input after the call) as a NumPy array on the CPU."""
    if isinstance(value, torch.Tensor):
        value = value.detach().to("cpu")
        if value.dtype == torch.bfloat16:
            return value.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
        return value.numpy()
    return np.asarray(value)


def device_absent():
    """Why DEVICE cannot be used on this machine (None: it can)."""
    if ARRAYS != "torch":
        return None
    where = torch.device(DEVICE)
    if where.type == "cuda" and (not torch.cuda.is_available()
                                 or (where.index or 0) >= torch.cuda.device_count()):
        return f"torch sees no CUDA device {{DEVICE}} here"
    if where.type == "mps" and not torch.backends.mps.is_available():
        return "torch sees no MPS device here"
    return None


def autograd_backward(forward):
    """The backward of a torch forward, by autograd (as the harness made it)."""
    def backward(grad_output, x, weight, bias, **kwargs):
        leaves = [None if t is None else t.detach().requires_grad_() for t in (x, weight, bias)]
        with torch.enable_grad():
            y = forward(*leaves, **kwargs)
        grads = iter(torch.autograd.grad(y, [t for t in leaves if t is not None], grad_output,
                                         allow_unused=True))
        return tuple(None if t is None else next(grads) for t in leaves)
    backward.__name__ = OP + "_backward"
    return backward


def backward_of(impl):
    """The implementation's backward; a torch forward's from autograd if it has none."""
    fn = getattr(impl, OP + "_backward", None)
    if fn is None and ARRAYS == "torch" and hasattr(impl, OP):
        fn = autograd_backward(getattr(impl, OP))
    return fn


class Failed(Exception):
    pass


DEFERRED = []  # failures that must not stop the value comparison (a wrong dtype)
ARGUMENTS = {{"forward": ("x", "weight", "bias"), "backward": ("grad_output", "x", "weight", "bias")}}


def call_before(impl):
    """The calls that came before the failing one (BEFORE), results unchecked."""
    for function, inputs, kwargs, layouts in BEFORE:
        kind = "backward" if function.endswith("_backward") else "forward"
        try:
            call(backward_of(impl) if kind == "backward" else getattr(impl, function), *ARGUMENTS[kind], inputs=inputs, kwargs=kwargs,
                 layouts=layouts)
        except Exception:  # what an earlier call did is not what this case checks
            pass


def call(function, *names, inputs=None, kwargs=None, layouts=None):
    """Call the implementation on fresh inputs; they must come back unchanged."""
    inputs = INPUTS if inputs is None else inputs
    layouts = LAYOUTS if layouts is None else layouts
    given = {{name: None if a is None else native(layout(a, layouts[name]))
             for name, a in inputs.items()}}
    result = function(*(given[name] for name in names), **(KWARGS if kwargs is None else kwargs))
    for name, original in inputs.items():
        if original is not None and not np.array_equal(host(given[name]), original,
                                                       equal_nan=True):
            raise Failed(f"input_changed: {{function.__name__}} changed its input {{name!r}} in place")
    return result


def as_result(value, what, shape):
    if value is None:
        raise Failed(f"result_type: {{what}} is None")
    array = host(value)
    if array.dtype.kind not in "fiub":
        raise Failed(f"result_type: {{what}} has dtype {{array.dtype}}")
    if array.shape != shape:
        raise Failed(f"shape: {{what}} has shape {{array.shape}}; torch gives {{shape}}")
    if array.dtype != DTYPE:  # reported after the values are compared: it must not hide them
        DEFERRED.append(f"dtype: {{what}} has dtype {{array.dtype}}; inputs are {{np.dtype(DTYPE)}}")
    if not np.all(np.isfinite(array)):
        raise Failed(f"nonfinite: {{what}} holds NaN or inf for finite inputs")
    return array


def torch_results(absolute=False):
    """float64 results of torch; with absolute=True, the sums of |terms| per element."""
    def leaf(a):
        a = np.asarray(a, dtype=np.float64)
        return torch.tensor(np.abs(a) if absolute else a, requires_grad=True)
    tx, tw = leaf(x), leaf(weight)
    tb = None if bias is None else leaf(bias)
    y = getattr(torch.nn.functional, OP)(tx, tw, tb, **KWARGS)
    g = np.asarray(grad_output, dtype=np.float64)  # torch takes no ml_dtypes bfloat16
    y.backward(torch.from_numpy(np.abs(g) if absolute else g))
    return {{"y": y.detach().numpy(), "grad_input": tx.grad.numpy(),
            "grad_weight": tw.grad.numpy(), "grad_bias": None if tb is None else tb.grad.numpy()}}


def gamma(n, u):
    """Relative bound of n roundings: n*u / (1 - n*u), or (1 + u)**n - 1 from n*u = 1 on."""
    if n * u < 1:
        return n * u / (1 - n * u)
    return math.expm1(min(n * math.log1p(u), GAMMA_LOG_CAP))


GAMMA_LOG_CAP = math.log(1e150)  # beyond any result of a narrower dtype than float64


def norm2(a):
    """2-norm, scaled so that tiny values do not underflow when squared."""
    values = np.abs(np.asarray(a, dtype=np.float64).ravel())
    largest = float(values.max(initial=0.0))
    if largest == 0.0 or not math.isfinite(largest):
        return largest
    return largest * float(np.sqrt(np.dot(values / largest, values / largest)))


def has_subnormal(a):
    """Whether a holds a non-zero value below its dtype's smallest normal number."""
    if a is None:
        return False
    m = np.abs(a)
    return bool(np.any((m > 0) & (m < finfo(DTYPE).smallest_normal)))


def largest(a):
    return float(np.max(np.abs(np.asarray(a, dtype=np.float64)), initial=0.0))


def flush_allowance(k, a, b, magnitude, with_bias):
    """Flushing subnormals to zero is allowed: each product and partial sum below
    the smallest normal number lam may become 0 (2*k*lam), and a subnormal operand
    read as 0 loses its product, at most lam * |other factor| per term and never
    more than the element's sum of |terms|. b is None when the other factor is 1."""
    lam = float(finfo(DTYPE).smallest_normal)
    u = float(finfo(DTYPE).eps) / 2
    results = 2 * k * lam * (1 + gamma(k, u))
    inputs = k * lam * ((1.0 if b is None else largest(b)) * has_subnormal(a)
                        + (0.0 if b is None else largest(a) * has_subnormal(b)))
    inputs += lam * (with_bias and has_subnormal(bias))
    return results + (np.minimum(magnitude, inputs) if inputs else 0.0)


def allowed(name, magnitude):
    """The harness's elementwise bound on the error of result `name`."""
    u = float(finfo(DTYPE).eps) / 2
    u64 = float(np.finfo(np.float64).eps) / 2
    k = TERMS[name]
    a, b = {{"y": (x, weight), "grad_input": (grad_output, weight),
            "grad_weight": (x, grad_output), "grad_bias": (grad_output, None)}}[name]
    wide = (np.dtype(DTYPE).kind == "V" and BFLOAT16_ACCUMULATION == "float32"
            or np.dtype(DTYPE) == np.float16 and k - (name == "y") > FLOAT16_MAX_TERMS
            and FLOAT16_ACCUMULATION == "float32")
    u_sum = float(np.finfo(np.float32).eps) / 2 if wide else u  # summed in float32
    floor = 0.0
    if b is not None:  # normwise floor for FFT/Winograd-style algorithms
        floor = 5 * math.log2(2 + max(a.size, b.size)) * u_sum * norm2(a) * norm2(b)
    flush = flush_allowance(k, a, b, magnitude, name == "y")
    if wide:  # half-precision products exact in float32, summed there, rounded once
        return (u + gamma(k, u_sum) * (1 + u) + gamma(k, u64)) * magnitude + flush + floor
    if FLOAT32_PRECISION == "tf32" and np.dtype(DTYPE) == np.float32 and b is not None:
        ut = 2.0 ** -11  # inputs rounded to TF32: (2u + u^2) per product, float32 sums
        return ((gamma(k, u) * (1 + ut) ** 2 + gamma(k, u64)) * magnitude
                + (2 * ut + ut * ut) * magnitude + flush + floor)
    return (gamma(k, u) + gamma(k, u64)) * magnitude + flush + floor


def compare(name, actual, expected, magnitude):
    bound = allowed(name, magnitude)
    a = np.asarray(actual, dtype=np.float64)
    error = np.abs(a - expected)
    bad = ~np.isfinite(a) | (error > bound)
    if not bad.any():
        return
    ratio = np.where(bad, np.nan_to_num(error / np.maximum(bound, 1e-300), nan=np.inf,
                                        posinf=np.inf), -1.0)
    i = np.unravel_index(int(np.argmax(ratio)), a.shape)
    index = tuple(int(v) for v in i)
    lines = [f"{{name}}: {{int(bad.sum())}} of {{a.size}} elements off; largest error "
             f"{{error[i]:.6g}} at index {{index}}: got {{float(a[i])!r}}, expected {{float(expected[i])!r}} "
             f"(allowed {{bound[i]:.3g}}, K={{TERMS[name]}}, {{np.dtype(DTYPE)}})"]
    if a.size <= 64:
        with np.printoptions(precision=6, suppress=True, linewidth=100):
            lines += [f"expected {{name}}:", str(expected), f"actual {{name}}:", str(np.asarray(actual))]
    raise Failed("\\n".join(lines))


def forward(impl, shapes):
    return as_result(call(getattr(impl, OP), "x", "weight", "bias"), f"{{OP}}'s result", shapes["y"])


def backward(impl, shapes):
    fn = backward_of(impl)
    result = call(fn, "grad_output", "x", "weight", "bias")
    if not isinstance(result, (tuple, list)) or len(result) != 3:
        raise Failed(f"result_type: {{fn.__name__}} returned {{type(result).__name__}}, "
                     "not (grad_input, grad_weight, grad_bias)")
    grads = {{}}
    for name, value in zip(("grad_input", "grad_weight", "grad_bias"), result):
        if name == "grad_bias" and bias is None:
            if value is not None:
                raise Failed("result_type: grad_bias must be None when bias is None")
            grads[name] = None
        else:
            grads[name] = as_result(value, f"{{fn.__name__}}'s {{name}}", shapes[name])
    return grads


def main(impl):
    if device_absent():
        print(f"SKIPPED: {{SPEC}} computes on {{DEVICE}}, and {{device_absent()}}: this "
              "script cannot run the case here")
        sys.exit(2)
    torch.set_num_threads(1)
    expected, magnitude = torch_results(), torch_results(absolute=True)
    shapes = {{name: None if v is None else v.shape for name, v in expected.items()}}
    call_before(impl)
{main}
    if DEFERRED:
        raise Failed("\\n".join(DEFERRED))


def stop_at_the_limit():
    """Exit 1 once TIME_LIMIT has passed, even inside a C call that never returns."""
    def stop():
        print(f"FAILED {{SPEC}} {{OP}}: did not return within {{TIME_LIMIT:g}} s (the time "
              "limit this case was recorded with)", flush=True)
        os._exit(1)
    timer = threading.Timer(TIME_LIMIT, stop)
    timer.daemon = True
    timer.start()


def run_case():
    try:
        loaded = implementation()  # once: a failure that comes and goes lives in its state
        for attempt in range(1, TRIES + 1):
            DEFERRED.clear()
            try:
                main(loaded)
            except Failed as failure:
                if TRIES > 1:
                    raise Failed(f"{{failure}}\\n(call {{attempt}} of up to {{TRIES}})") from None
                raise
    except Failed as failure:
        print(f"FAILED {{SPEC}} {{OP}} check {{CHECK}}:\\n{{failure}}")
        sys.exit(1)
    print(f"OK: check {{CHECK}} holds for {{SPEC}} {{OP}} on this case")


def in_a_child(run):
    """Run the case in a forked child: a crash (a signal, os._exit) ends the child
    before it says it finished, and is this script's failure (exit 1)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        code = 0
        try:
            run()
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
        except BaseException:  # as an uncaught exception ends a script: exit 1
            traceback.print_exc()
            code = 1
        sys.stdout.flush()
        sys.stderr.flush()
        os.write(write, b"done")
        os._exit(code)
    os.close(write)
    finished = os.read(read, 4) == b"done"
    code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    if not finished:
        how = f"signal {{-code}}" if code < 0 else f"exit status {{code}}"
        print(f"FAILED {{SPEC}} {{OP}}: the call crashed the process it ran in ({{how}}), as "
              "recorded", flush=True)
        sys.exit(1)
    sys.exit(code)


if __name__ == "__main__":
    GIVEN = sys.argv[1] if len(sys.argv) > 1 else ""
    if TIME_LIMIT:
        stop_at_the_limit()
    if CRASHED and hasattr(os, "fork"):
        in_a_child(run_case)
    else:
        run_case()
'''

_MAINS = {
    "forward": '''\
    compare("y", forward(impl, shapes), expected["y"], magnitude["y"])''',
    "gradient": '''\
    grads = backward(impl, shapes)
    if grads[CHECK] is not None:
        compare(CHECK, grads[CHECK], expected[CHECK], magnitude[CHECK])''',
    "repeatable": '''\
    calls = []
    if hasattr(impl, OP):
        calls.append((OP, lambda: {"y": forward(impl, shapes)}))
    if backward_of(impl) is not None:
        calls.append((OP + "_backward", lambda: backward(impl, shapes)))
    for function, run in calls:
        first, second = run(), run()
        for name, a in first.items():
            if a is not None and a.tobytes() != second[name].tobytes():
                differ = int(np.count_nonzero(a != second[name]))
                raise Failed(f"repeatable: {function} gave a different {name} for the same "
                             f"inputs on a second call ({differ} of {a.size} elements differ)")
    for function, run in calls if ARRAYS == "torch" else ():
        alone = run()
        torch.set_num_threads(SEVERAL)
        try:
            shared = run()
        finally:
            torch.set_num_threads(1)
        for name, a in alone.items():
            if a is None:
                continue
            beyond = ~(np.abs(a.astype(np.float64) - shared[name]) <= 2 * allowed(name, magnitude[name]))
            if beyond.any():
                raise Failed(f"thread_count: {function} gave a different {name} on 1 thread than "
                             f"on {SEVERAL}: {int(beyond.sum())} of {a.size} elements differ by "
                             "more than twice the rounding bound")''',
    "other": '''\
    # The harness's check {check!r} is a property this script does not restate;
    # it checks every result against torch instead (replay the case file with
    # `pytest --replay` to run the check itself).
    print("note: check {check!r} is not restated here; comparing every result with torch")
    if hasattr(impl, OP):
        compare("y", forward(impl, shapes), expected["y"], magnitude["y"])
    if backward_of(impl) is not None:
        for name, value in backward(impl, shapes).items():
            if value is not None:
                compare(name, value, expected[name], magnitude[name])''',
}


def _before(record: dict[str, Any], p) -> str:
    """The record's earlier calls (``before``: function and inputs, same problem) as source."""
    calls = record.get("before") or []
    if not calls:
        return "[]"
    out = []
    for call in calls:
        other = type(p).from_params(p.op, call["params"]) if "params" in call else p
        inputs = ", ".join(
            f"{name!r}: " + _literal(None if raw is None else np.asarray(raw), other.dtype, 12)
            for name, raw in call["inputs"].items())
        kwargs = layouts = None
        if other is not p:  # another problem: its own arguments and layouts
            kwargs = "dict(" + ", ".join(f"{k}={v!r}" for k, v in other.kwargs().items()) + ")"
            layouts = repr(call.get("layouts"))
        out.append(f"    ({call['function']!r}, {{{inputs}}}, {kwargs}, {layouts}),")
    return "[\n" + "\n".join(out) + "\n]"


#: what conv_harness/running/calling.py's time-out failure says, with the limit
_TIME_LIMIT = re.compile(r"did not return within ([0-9.]+(?:e[+-]?[0-9]+)?) s")


def recorded_time_limit(record: dict[str, Any]) -> float | None:
    """The limit a time-out case's call was recorded with (None: not a time-out)."""
    if record.get("check") != "timeout":
        return None
    if isinstance(record.get("time_limit"), (int, float)):
        return float(record["time_limit"])
    found = _TIME_LIMIT.search(str(record.get("message", "")))
    return float(found.group(1)) if found else None


def render_script(record: dict[str, Any], case: ConvCase | None = None,
                  name: str = "this_script.py") -> str:
    """The standalone reproduction script of a case record."""
    case = case if case is not None else case_from_record(record)
    p = case.problem
    spec = record["impl"]
    module, attr = split_spec(spec)
    module_file = None
    if is_path(module):
        module_file = record.get("impl_file") or str(Path(module).expanduser().resolve())
    run_check = record.get("run_check") or record["check"]
    time_limit = recorded_time_limit(record)
    if run_check == FORWARD_CHECK:
        main = _MAINS["forward"]
    elif run_check in GRADIENT_CHECKS:
        main = _MAINS["gradient"]
    elif run_check == "repeatable":
        main = _MAINS["repeatable"]
    else:
        main = _MAINS["other"].format(check=run_check)
    arrays = case.arrays()
    layouts = {k: case.layouts.get(k, "C") for k, v in arrays.items() if v is not None}
    kwargs = "dict(" + ", ".join(f"{k}={v!r}" for k, v in p.kwargs().items()) + ")"
    versions = record.get("versions") or {}
    arrays_of, device = record.get("arrays", "numpy"), record.get("device", "cpu")
    on_arrays = ""
    if arrays_of != "numpy":
        made = "".join(f"; {name} from {how}" for name, how in
                       (record.get("derived") or {}).items())
        on_arrays = f"\narrays: {arrays_of} on {device}{made}"
    header = _HEADER.format(
        arrays=arrays_of, device=device, on_arrays=on_arrays, several=several(),
        float32_precision=record.get("float32_precision", "ieee"),
        bfloat16_accumulation=record.get("bfloat16_accumulation", "float32"),
        float16_accumulation=record.get("float16_accumulation", "float32"),
        float16_max_terms=FLOAT16_MAX_TERMS,
        dtype_source=_dtype_source(p.dtype),
        ml_dtypes_import="import ml_dtypes" if p.dtype == "bfloat16" else "",
        finfo="ml_dtypes.finfo" if p.dtype == "bfloat16" else "np.finfo",
        before=_before(record, p), tries=int(record.get("tries", 1)),
        title=f"Reproduce: {spec} {p.op} fails check {record['check']!r}.",
        params=f"parameters: {p.describe()}",
        layouts=", ".join(f"{k}={v}" for k, v in layouts.items()),
        name=name,
        versions=(f"(numpy {versions['numpy']}, torch {versions['torch']})"
                  if "numpy" in versions and "torch" in versions else ""),
        spec=spec, module=module, attr=attr, time_limit=time_limit,
        crashed=record["check"] == "crashed",
        module_file=module_file, op=p.op, run_check=run_check, kwargs=kwargs,
        layout_dict=layouts, terms=_terms(case), dtype=p.dtype,
        **{n: _literal(a, p.dtype, len(n) + 3 + len("np.array(")) for n, a in arrays.items()},
    )
    return header + _BODY.format(main=main)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m conv_harness.records.script",
        description="Write the standalone reproduction script of a failure case file.")
    parser.add_argument("case", type=Path, help="a JSON case file (.conv-failures/*.json)")
    parser.add_argument("-o", "--output", type=Path,
                        help="write the script here (default: print it)")
    args = parser.parse_args(argv)
    try:
        record, case = load_case(args.case)
    except CaseFileError as exc:
        parser.error(str(exc))
    name = args.output.name if args.output else args.case.with_suffix(".py").name
    text = render_script(record, case, name=name)
    if args.output:
        args.output.write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
