"""conv_impl.adapters.LayerAdapter, in process, against differently shaped layer classes.

The classes: the examples' channels-last layer (NHWC inputs, HWIO weights,
batch-mean gradients), torch-like layer (tuples, dilation, groups, no bias,
dict parameters and gradients), flipped-kernel layer (``W``/``b`` of shape
(C_out, 1), gradients left as attributes) and 1-D layer; the tutorial's
``Conv2D`` with every bug off (``conv_impl.tutorial.fixed``); and a 3-D
channels-last layer of our own (tests/harness/layers/channels_last_3d.py).

Each adapter is checked on fixed problems against torch.nn.functional in
float64, for honest CAPABILITIES, for showing the layer as it is (no casts,
no copies: the layer gets the harness's arrays and its results come back in
its own dtype) unless asked to (``cast_results``, ``copy_inputs``), and for
clear errors, naming the contract function and the layer's method, on what
it does not support or does not know.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from dataclasses import dataclass

import numpy as np
import pytest
import torch

from conv_impl import tutorial
from conv_impl.adapters import (
    DEFAULT_LAYER_CAPABILITIES,
    LayerAdapter,
    LayerSpec,
    UnsupportedProblemError,
)
from tests.harness.conftest import PROJECT_ROOT
from tests.harness.layers import channels_last_3d
from tests.harness.runs import suite_in_process

CONTRACT_KEYS = {"dtypes", "dilation", "groups", "bias_none", "square", "contiguous_only"}
ALL_OPS = ("conv1d", "conv2d", "conv3d")


def load_example(stem: str):
    """examples/<stem>.py as a module (examples/ is not a package)."""
    name = f"_adapter_tests_examples_{stem}"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, PROJECT_ROOT / "examples" / f"{stem}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


NHWC = load_example("nhwc_layer")
TORCHLIKE = load_example("torchlike_layer")
FLIPPED = load_example("flipped_kernel_layer")
CONV1D = load_example("conv1d_layer")


@dataclass(frozen=True)
class Adapted:
    """One layer class under test: how to build its adapter and what it really supports."""

    make: object          # () -> LayerAdapter, a fresh adapter each time
    ndim: int
    square: bool
    dilation: bool = False
    groups: bool = False
    bias_none: bool = False

    @property
    def op(self) -> str:
        return f"conv{self.ndim}d"


ADAPTED = {
    "nhwc": Adapted(lambda: NHWC.impl, 2, square=True),
    "torchlike": Adapted(lambda: TORCHLIKE.impl, 2, square=False,
                         dilation=True, groups=True, bias_none=True),
    "flipped": Adapted(lambda: FLIPPED.impl, 2, square=True),
    "conv1d": Adapted(lambda: CONV1D.impl, 1, square=True),
    "tutorial_fixed": Adapted(lambda: tutorial.fixed, 2, square=False),
    "channels_last_3d": Adapted(channels_last_3d.adapter, 3, square=False),
}


@dataclass(frozen=True)
class Problem:
    batch: int
    in_channels: int
    out_channels: int
    input_size: tuple[int, ...]
    kernel_size: tuple[int, ...]
    stride: tuple[int, ...]
    padding: tuple[int, ...]
    dilation: tuple[int, ...] | None = None
    groups: int = 1
    bias: bool = True

    @property
    def ndim(self) -> int:
        return len(self.input_size)

    @property
    def dilation_(self) -> tuple[int, ...]:
        return self.dilation or (1,) * self.ndim

    def arrays(self, seed: int = 0, dtype=np.float64):
        rng = np.random.default_rng(seed)
        x = rng.standard_normal((self.batch, self.in_channels, *self.input_size))
        w = rng.standard_normal((self.out_channels, self.in_channels // self.groups,
                                 *self.kernel_size))
        b = rng.standard_normal(self.out_channels) if self.bias else None
        y_shape = torch_forward(self, x, w, b).shape
        g = rng.standard_normal(y_shape)
        return tuple(None if a is None else a.astype(dtype) for a in (x, w, b, g))

    def kwargs(self):
        return dict(stride=self.stride, padding=self.padding, dilation=self.dilation_,
                    groups=self.groups)


def _square(n, batch, c_in, c_out, size, k, s, p):
    return Problem(batch, c_in, c_out, (size,) * n, (k,) * n, (s,) * n, (p,) * n)


def square_problems(n):
    """Square problems any layer class takes: batch > 1 (batch means), stride
    remainders, stride > kernel, padding >= kernel, 1x1 kernels, 1x1 outputs."""
    return [
        _square(n, 3, 2, 4, 6, 3, 2, 1),
        _square(n, 2, 3, 2, 7, 2, 3, 0),
        _square(n, 1, 1, 3, 4, 1, 1, 1),
        _square(n, 2, 2, 1, 3, 3, 1, 0),
        _square(n, 2, 1, 2, 2, 2, 1, 2),
    ]


NON_SQUARE = [
    Problem(2, 3, 2, (6, 5), (3, 2), (2, 1), (1, 0)),
    Problem(3, 2, 3, (4, 7), (1, 3), (1, 3), (0, 2)),
]
NON_SQUARE_3D = [
    Problem(2, 2, 3, (4, 5, 3), (2, 3, 1), (1, 2, 3), (1, 0, 1)),
    Problem(1, 1, 2, (3, 3, 3), (3, 1, 2), (2, 1, 1), (0, 1, 0)),
]
TORCHLIKE_EXTRAS = [
    Problem(2, 4, 6, (7, 6), (3, 2), (1, 2), (1, 1), dilation=(2, 1), groups=2),
    Problem(2, 3, 3, (5, 5), (2, 2), (1, 1), (0, 0), groups=3, bias=False),
    Problem(1, 2, 2, (6, 4), (2, 2), (2, 1), (0, 1), dilation=(2, 3), bias=False),
]


def problems_for(key: str) -> list[Problem]:
    a = ADAPTED[key]
    problems = square_problems(a.ndim)
    if not a.square:
        problems += NON_SQUARE_3D if a.ndim == 3 else NON_SQUARE
    if key == "torchlike":
        problems += TORCHLIKE_EXTRAS
    return problems


CASES = [pytest.param(key, i, id=f"{key}-{i}")
         for key in ADAPTED for i in range(len(problems_for(key)))]


def _t(a, grad=False):
    return None if a is None else torch.tensor(a, requires_grad=grad)


def torch_forward(p: Problem, x, w, b):
    f = getattr(torch.nn.functional, f"conv{p.ndim}d")
    return f(_t(x), _t(w), _t(b), **p.kwargs()).detach().numpy()


def torch_backward(p: Problem, g, x, w, b):
    f = getattr(torch.nn.functional, f"conv{p.ndim}d")
    tx, tw, tb = _t(x, True), _t(w, True), _t(b, True)
    f(tx, tw, tb, **p.kwargs()).backward(_t(g))
    return tx.grad.numpy(), tw.grad.numpy(), None if tb is None else tb.grad.numpy()


def assert_close(actual, expected, what):
    assert actual is not None, what
    actual = np.asarray(actual)
    assert actual.dtype == expected.dtype, f"{what}: dtype {actual.dtype}"
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != {expected.shape}"
    np.testing.assert_allclose(actual, expected, rtol=1e-10, atol=1e-11, err_msg=what)


# --------------------------------------------------------------- results


@pytest.mark.parametrize("key, index", CASES)
def test_forward_and_backward_match_torch(key, index):
    p = problems_for(key)[index]
    impl = ADAPTED[key].make()
    x, w, b, g = p.arrays(seed=index)
    y = getattr(impl, f"conv{p.ndim}d")(x, w, b, **p.kwargs())
    assert_close(y, torch_forward(p, x, w, b), "forward")

    gx, gw, gb = getattr(impl, f"conv{p.ndim}d_backward")(g, x, w, b, **p.kwargs())
    ex, ew, eb = torch_backward(p, g, x, w, b)
    assert_close(gx, ex, "grad_input")
    assert_close(gw, ew, "grad_weight")
    if b is None:
        assert gb is None, "grad_bias must be None exactly when bias is None"
    else:
        assert_close(gb, eb, "grad_bias")


@pytest.mark.parametrize("copy_inputs", [False, True])
@pytest.mark.parametrize("key", ADAPTED)
def test_non_contiguous_inputs_give_the_same_results(key, copy_inputs):
    """The layer itself gets the non-contiguous arrays: the same values up to the
    rounding of another summation order (float64, a few terms: far below 1e-10);
    with copy_inputs the layer gets C-contiguous copies, so bit for bit."""
    p = problems_for(key)[0]
    impl = ADAPTED[key].make()
    if copy_inputs:
        impl = LayerAdapter(impl.layer_cls, **{**_options(impl), "copy_inputs": True})
    x, w, b, g = p.arrays(seed=7)
    # Same values, other memory layouts: Fortran order, and a strided view.
    xs = np.asfortranarray(x)
    ws = np.repeat(w, 2, axis=-1)[..., ::2]
    gs = np.asfortranarray(g)
    assert not ws.flags.c_contiguous and not xs.flags.c_contiguous
    same = np.testing.assert_array_equal if copy_inputs else (
        lambda a, e: assert_close(a, e, "non-contiguous"))
    op = getattr(impl, f"conv{p.ndim}d")
    same(op(xs, ws, b, **p.kwargs()), op(x, w, b, **p.kwargs()))
    back = getattr(impl, f"conv{p.ndim}d_backward")
    for got, want in zip(back(gs, xs, ws, b, **p.kwargs()), back(g, x, w, b, **p.kwargs())):
        same(got, want)


def _options(impl: LayerAdapter) -> dict:
    """The options that rebuild ``impl`` (for a variant with one option changed)."""
    return dict(construct=impl.construct, input_layout=impl.input_layout,
                weight_layout=impl.weight_layout, grads=impl.grads,
                grads_are_batch_means=impl.grads_are_batch_means,
                kernel_flipped=impl.kernel_flipped, square=impl.square,
                weight_attr=impl.weight_attr, bias_attr=impl.bias_attr,
                set_params=impl.set_params, name=impl.name,
                capabilities={k: v for k, v in impl.CAPABILITIES.items()
                              if k != "contiguous_only"})


def _received(impl: LayerAdapter) -> list:
    """Wrap ``impl``'s construct so that each layer records the x its forward got."""
    got = []
    make = impl.construct

    def construct(spec):
        layer = make(spec)
        forward = getattr(layer, impl.forward_name)
        setattr(layer, impl.forward_name, lambda x: got.append(x) or forward(x))
        return layer
    impl.construct = construct
    return got


@pytest.mark.parametrize("key", ["tutorial_fixed", "nhwc"])
def test_the_layer_gets_the_harness_arrays_themselves(key):
    """No copies by default: an NCHW layer gets the very array (a strided view stays
    strided); a channels-last one a view of it in its own order, C-contiguous in that
    order when the harness's array was; copy_inputs=True hands it a copy."""
    p = problems_for(key)[0]
    x, w, b, _ = p.arrays(seed=2)
    strided = np.repeat(x, 2, axis=-1)[..., ::2]
    for given in (x, strided):
        impl = ADAPTED[key].make()
        impl = LayerAdapter(impl.layer_cls, **_options(impl))
        got = _received(impl)
        impl.conv2d(given, w, b, **p.kwargs())
        (layer_x,) = got
        if key == "tutorial_fixed":
            assert layer_x is given
        else:
            assert np.shares_memory(layer_x, given) or given.flags.c_contiguous
            assert layer_x.flags.c_contiguous == given.flags.c_contiguous
        copying = LayerAdapter(impl.layer_cls, **{**_options(impl), "copy_inputs": True})
        got = _received(copying)
        copying.conv2d(given, w, b, **p.kwargs())
        assert got[0].flags.c_contiguous and not np.shares_memory(got[0], given)


@pytest.mark.parametrize("dtype", ["float16", "float32"])
@pytest.mark.parametrize("key", ADAPTED)
def test_results_come_back_in_the_input_dtype(key, dtype):
    """These layers compute in the input dtype, and the adapter returns what they give."""
    p = problems_for(key)[0]
    impl = ADAPTED[key].make()
    x, w, b, g = p.arrays(seed=3, dtype=np.dtype(dtype))
    y = getattr(impl, f"conv{p.ndim}d")(x, w, b, **p.kwargs())
    assert np.asarray(y).dtype == dtype
    expected = torch_forward(p, *(None if a is None else a.astype(np.float64) for a in (x, w, b)))
    np.testing.assert_allclose(np.asarray(y, dtype=np.float64), expected, rtol=0.05, atol=0.05)
    grads = getattr(impl, f"conv{p.ndim}d_backward")(g, x, w, b, **p.kwargs())
    assert [np.asarray(a).dtype for a in grads] == [np.dtype(dtype)] * 3


# ---------------------------------------------------------- capabilities


@pytest.mark.parametrize("key", ADAPTED)
def test_capabilities_claim_only_what_the_layer_supports(key):
    a = ADAPTED[key]
    caps = a.make().CAPABILITIES
    assert set(caps) == CONTRACT_KEYS
    assert caps["dilation"] is a.dilation
    assert caps["groups"] is a.groups
    assert caps["bias_none"] is a.bias_none
    assert caps["square"] is a.square
    assert caps["contiguous_only"] is False
    assert caps["dtypes"] == ("float16", "float32", "float64")


@pytest.mark.parametrize("key", ADAPTED)
def test_provides_exactly_the_functions_of_its_dimension(key):
    a = ADAPTED[key]
    impl = a.make()
    for op in ALL_OPS:
        for name in (op, f"{op}_backward"):
            assert hasattr(impl, name) is (op == a.op), name
    for name in ("conv_transpose1d", "conv_transpose2d", "conv_transpose3d"):
        assert not hasattr(impl, name)


def test_the_tutorial_as_shipped_declares_square_problems():
    assert tutorial.CAPABILITIES["square"] is True
    assert tutorial.CAPABILITIES["dilation"] is False
    assert tutorial.CAPABILITIES["groups"] is False
    assert tutorial.CAPABILITIES["bias_none"] is False


class _Minimal:
    """A layer class that is never built: for the adapter's own bookkeeping."""

    def __init__(self, *args, **kwargs):  # pragma: no cover - never called
        raise AssertionError("not built in these tests")


def test_default_capabilities_are_those_of_a_plain_layer_class():
    caps = LayerAdapter(_Minimal).CAPABILITIES
    assert caps == {**DEFAULT_LAYER_CAPABILITIES, "square": True}
    assert caps["dilation"] is False and caps["groups"] is False and caps["bias_none"] is False
    assert LayerAdapter(_Minimal, square=False).CAPABILITIES["square"] is False


def test_declared_capabilities_are_kept_and_dtypes_normalised():
    impl = LayerAdapter(_Minimal, square=False, capabilities={
        "dilation": True, "groups": True, "bias_none": True,
        "dtypes": (np.float64, np.dtype("float32")), "contiguous_only": True})
    assert impl.CAPABILITIES == {"dtypes": ("float64", "float32"), "dilation": True,
                                 "groups": True, "bias_none": True, "square": False,
                                 "contiguous_only": True}


# ------------------------------------------------ inputs and parameters


@pytest.mark.parametrize("key", ADAPTED)
def test_inputs_are_left_unchanged(key):
    p = problems_for(key)[0]
    impl = ADAPTED[key].make()
    arrays = p.arrays(seed=11)
    before = [None if a is None else a.copy() for a in arrays]
    x, w, b, g = arrays
    getattr(impl, f"conv{p.ndim}d")(x, w, b, **p.kwargs())
    getattr(impl, f"conv{p.ndim}d_backward")(g, x, w, b, **p.kwargs())
    for got, want in zip(arrays, before):
        if want is not None:
            np.testing.assert_array_equal(got, want)


class Scribbler:
    """A course-style layer that is hard on its arrays: it keeps references,
    scribbles over its input and ``dout`` after use, and takes an SGD step on
    its own parameters in ``backward`` (in place, as course code does)."""

    built: list = []

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0):
        self.inner = tutorial.Conv2D(in_channels, out_channels, kernel_size, stride, padding,
                                     bugs=frozenset())
        Scribbler.built.append(self)

    # the adapter sets these; the inner layer computes with them
    weight = property(lambda self: self.inner.weight,
                      lambda self, v: setattr(self.inner, "weight", v))
    bias = property(lambda self: self.inner.bias, lambda self, v: setattr(self.inner, "bias", v))

    def forward(self, x):
        self.x = x
        y = self.inner.forward(x.copy())
        x[...] = np.nan
        return y

    def backward(self, dout):
        db, dw, dx = self.inner.backward(dout.copy())
        self.weight -= 0.5 * dw
        self.bias -= 0.5 * db
        dout[...] = np.nan
        return db, dw, dx


@pytest.fixture
def scribbler():
    Scribbler.built.clear()
    yield LayerAdapter(Scribbler)
    Scribbler.built.clear()


def test_a_layer_that_writes_into_its_arrays_is_shown_doing_so(scribbler):
    """By default the layer writes into the caller's arrays (the harness's
    in-place check then fails it, as it should): the adapter hides nothing."""
    p = _square(2, 2, 2, 3, 5, 3, 2, 1)
    x, w, b, g = p.arrays(seed=5)
    scribbler.conv2d(x, w, b, **p.kwargs())
    assert np.isnan(x).all()
    scribbler.conv2d_backward(g, x.copy(), w, b, **p.kwargs())
    assert np.isnan(g).all()


def test_with_copy_inputs_a_scribbling_layer_touches_no_caller_array(scribbler):
    scribbler = LayerAdapter(Scribbler, copy_inputs=True)
    p = _square(2, 2, 2, 3, 5, 3, 2, 1)
    x, w, b, g = p.arrays(seed=5)
    before = [a.copy() for a in (x, w, b, g)]
    y = scribbler.conv2d(x, w, b, **p.kwargs())
    grads = scribbler.conv2d_backward(g, x, w, b, **p.kwargs())
    for got, want in zip((x, w, b, g), before):
        np.testing.assert_array_equal(got, want)
    # and the results are still right: each call got its own fresh layer
    assert_close(y, torch_forward(p, x, w, b), "forward")
    for got, want, what in zip(grads, torch_backward(p, g, x, w, b),
                               ("grad_input", "grad_weight", "grad_bias")):
        assert_close(got, want, what)
    assert len(Scribbler.built) == 2
    assert scribbler.harness_events() == [  # noted for the summary, once per call
        "note: LayerAdapter(Scribbler) handed the layer C-contiguous copies of its inputs "
        "(copy_inputs=True)"] * 2
    assert scribbler.harness_events() == []


@pytest.mark.parametrize("copy_inputs", [False, True])
def test_the_parameters_set_on_the_layer_are_copies_only_when_asked(copy_inputs):
    Scribbler.built.clear()
    scribbler = LayerAdapter(Scribbler, copy_inputs=copy_inputs)
    p = _square(2, 1, 2, 3, 4, 2, 1, 0)
    x, w, b, g = p.arrays(seed=6)
    scribbler.conv2d_backward(g, x, w, b, **p.kwargs())
    (layer,) = Scribbler.built
    for theirs in (w, b, x):  # weight and bias were changed in place by its SGD step
        shared = any(np.shares_memory(mine, theirs) for mine in (layer.weight, layer.bias,
                                                                  layer.x))
        assert shared is not copy_inputs
    Scribbler.built.clear()


@pytest.mark.parametrize("key", ["nhwc", "flipped"])
def test_parameters_are_set_in_the_layers_layout_and_dtype(key, monkeypatch):
    """The example layers' own layouts: HWIO weight, and W flipped with b of shape (C_out, 1)."""
    impl = ADAPTED[key].make()
    built = []
    original = impl.construct
    monkeypatch.setattr(impl, "construct", lambda spec: built.append(original(spec)) or built[-1])
    p = _square(2, 2, 3, 4, 5, 2, 1, 0)
    x, w, b, _ = p.arrays(seed=8, dtype=np.float32)
    impl.conv2d(x, w, b, **p.kwargs())
    (layer,) = built
    if key == "nhwc":
        assert layer.weight.shape == (2, 2, 3, 4) and layer.weight.dtype == np.float32
        np.testing.assert_array_equal(layer.weight, w.transpose(2, 3, 1, 0))
        np.testing.assert_array_equal(layer.bias, b)
    else:
        assert layer.W.dtype == np.float32 and layer.b.shape == (4, 1)
        np.testing.assert_array_equal(layer.W, w[:, :, ::-1, ::-1])
        np.testing.assert_array_equal(layer.b[:, 0], b)
    assert not np.shares_memory(layer.weight if key == "nhwc" else layer.W, w)


def test_the_constructor_gets_the_problems_spec():
    specs = []

    def construct(spec):
        specs.append(spec)
        return tutorial.Conv2D(spec.in_channels, spec.out_channels, spec.kernel_size,
                               spec.stride, spec.padding, bugs=frozenset())

    x, w, b, _ = NON_SQUARE[0].arrays(dtype=np.float32)
    LayerAdapter(tutorial.Conv2D, construct=construct, square=False).conv2d(
        x, w, b, **NON_SQUARE[0].kwargs())
    square = _square(2, 2, 3, 4, 6, 3, 2, 1)
    x2, w2, b2, _ = square.arrays()
    LayerAdapter(tutorial.Conv2D, construct=construct).conv2d(x2, w2, b2, **square.kwargs())
    assert specs == [
        LayerSpec(in_channels=3, out_channels=2, kernel_size=(3, 2), stride=(2, 1),
                  padding=(1, 0), dilation=(1, 1), groups=1, bias=True,
                  dtype=np.dtype("float32")),
        LayerSpec(in_channels=3, out_channels=4, kernel_size=3, stride=2, padding=1,
                  dilation=1, groups=1, bias=True, dtype=np.dtype("float64")),
    ]


# --------------------------------------------- problems it cannot take


def _unsupported(key):
    """(label, problem, dtype, words the message must contain) the adapter must refuse."""
    a = ADAPTED[key]
    n = a.ndim
    cases = []
    if not a.dilation:
        cases.append(("dilation", Problem(2, 2, 2, (6,) * n, (2,) * n, (1,) * n, (0,) * n,
                                          dilation=(2,) * n), "float64",
                      ["dilation", "CAPABILITIES['dilation'] is False"]))
    if not a.groups:
        cases.append(("groups", Problem(1, 2, 4, (5,) * n, (2,) * n, (1,) * n, (0,) * n,
                                        groups=2), "float64",
                      ["groups=2", "CAPABILITIES['groups'] is False"]))
    if not a.bias_none:
        cases.append(("bias_none", Problem(1, 2, 2, (4,) * n, (2,) * n, (1,) * n, (0,) * n,
                                           bias=False), "float64",
                      ["bias=None", "CAPABILITIES['bias_none'] is False"]))
    if a.square and n > 1:
        for field, value, label in (("kernel_size", (2, 1), "kernel_size (2, 1)"),
                                    ("stride", (1, 2), "stride (1, 2)"),
                                    ("padding", (0, 1), "padding (0, 1)")):
            fields = dict(batch=1, in_channels=1, out_channels=1, input_size=(5, 5),
                          kernel_size=(2, 2), stride=(1, 1), padding=(0, 0))
            fields[field] = value
            cases.append((f"non-square {field}", Problem(**fields), "float64",
                          [label, "differs between axes", "CAPABILITIES['square'] is True"]))
    return cases


UNSUPPORTED = [pytest.param(key, i, id=f"{key}-{label}")
               for key in ADAPTED for i, (label, *_) in enumerate(_unsupported(key))]


@pytest.mark.parametrize("key, index", UNSUPPORTED)
def test_an_undeclared_feature_raises_unsupported_problem_error(key, index):
    _, p, dtype, words = _unsupported(key)[index]
    impl = ADAPTED[key].make()
    x, w, b, g = p.arrays(dtype=np.dtype(dtype))
    forward, backward = f"conv{p.ndim}d", f"conv{p.ndim}d_backward"
    for who, call in ((f"{forward} ({impl.name}.forward): ",
                       lambda: getattr(impl, forward)(x, w, b, **p.kwargs())),
                      (f"{backward} ({impl.name}.backward): ",
                       lambda: getattr(impl, backward)(g, x, w, b, **p.kwargs()))):
        with pytest.raises(UnsupportedProblemError) as info:
            call()
        message = str(info.value)
        # the contract function, with the layer's method in parentheses
        assert message.startswith(who), message
        for word in words:
            assert word in message, message
    assert issubclass(UnsupportedProblemError, NotImplementedError)


def test_every_adapted_class_refuses_something_or_supports_everything():
    """The table above is not vacuous: only the torch-like layer takes all of it."""
    refusing = {key for key in ADAPTED if _unsupported(key)}
    assert refusing == set(ADAPTED) - {"torchlike"}


def test_an_undeclared_dtype_raises_unsupported_problem_error():
    impl = tutorial.tutorial_impl(frozenset(), square=False)
    only64 = LayerAdapter(tutorial.Conv2D, construct=impl.construct, square=False,
                          capabilities={"dtypes": ("float64",)})
    p = NON_SQUARE[0]
    x, w, b, _ = p.arrays(dtype=np.float32)
    with pytest.raises(UnsupportedProblemError, match=r"dtype float32 not in CAPABILITIES\['dtypes'\]"):
        only64.conv2d(x, w, b, **p.kwargs())
    x, w, b, _ = p.arrays(dtype=np.float64)
    assert_close(only64.conv2d(x, w, b, **p.kwargs()), torch_forward(p, x, w, b), "forward")


def test_a_wrong_number_of_axes_or_sizes_is_a_clear_value_error():
    impl = NHWC.impl
    p = square_problems(2)[0]
    x, w, b, _ = p.arrays()
    with pytest.raises(ValueError, match=r"a 2-D layer needs x with 4 axes"):
        impl.conv2d(x[0], w, b, **p.kwargs())
    with pytest.raises(ValueError, match=r"stride needs 2 values, got \(1,\)"):
        impl.conv2d(x, w, b, stride=(1,), padding=(0, 0))


def test_a_weight_layout_that_does_not_fit_the_layer_is_named():
    wrong = LayerAdapter(NHWC.NHWCConv2D, input_layout="NHWC", grads=("dx", "dw", "db"))
    p = _square(2, 1, 2, 3, 4, 2, 1, 0)
    x, w, b, _ = p.arrays()
    with pytest.raises(ValueError, match="check weight_layout"):
        wrong.conv2d(x, w, b, **p.kwargs())


# ------------------------------------------ options it does not know


@pytest.mark.parametrize("options, match", [
    (dict(capabilities={"dilations": True}), "unknown key 'dilations'"),
    (dict(capabilities={"square": False}), "square=False contradicts square=True"),
    (dict(input_layout="NCHX"), "input_layout 'NCHX' must be a permutation of 'NCHW'"),
    (dict(input_layout="NC"), "input_layout 'NC': expected N, C and 1 to 3 spatial"),
    (dict(input_layout="NCABCD"), "expected N, C and 1 to 3 spatial"),
    (dict(weight_layout="OIDHW"), "weight_layout 'OIDHW' must be a permutation of 'OIHW'"),
    (dict(input_layout="NCW", weight_layout="OIHW"), "must be a permutation of 'OIW'"),
    (dict(grads=("dx", "dw")), "must name each of"),
    (dict(grads=("dx", "dw", "dw")), "must name each of"),
    (dict(grads={"dx": "input", "dw": "weight"}), "exactly the keys"),
    (dict(grads_are_batch_means={"dw", "dy"}), r"unknown names \['dy'\]"),
])
def test_unknown_or_inconsistent_options_are_errors(options, match):
    with pytest.raises(ValueError, match=match):
        LayerAdapter(_Minimal, **options)


def test_a_misspelt_option_is_a_type_error():
    with pytest.raises(TypeError, match="grad_are_batch_means"):
        LayerAdapter(_Minimal, grad_are_batch_means=True)


@pytest.mark.parametrize("backward_result, match", [
    ([1, 2], r"expected a 3-tuple ordered as \('db', 'dw', 'dx'\)"),
    ("dx", "returned str, expected a 3-tuple"),
])
def test_a_backward_result_of_the_wrong_form_is_a_clear_type_error(backward_result, match):
    class Odd(tutorial.Conv2D):
        def backward(self, dout):
            return backward_result

    p = _square(2, 1, 1, 1, 3, 2, 1, 0)
    x, w, b, g = p.arrays()
    with pytest.raises(TypeError, match=match):
        LayerAdapter(Odd).conv2d_backward(g, x, w, b, **p.kwargs())


# ------------------------------------------- no silent casts (issue 20)

FLOAT64_LAYER = "tests/harness/layers/float64_layer.py"


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_a_layer_computing_in_float64_gives_float64_and_the_harness_fails_it(dtype):
    from conv_harness.checks.registry import examine
    from conv_harness.problem import ConvCase, ConvProblem
    from conv_harness.running.loader import load_implementation

    p = _square(2, 1, 1, 3, 4, 2, 1, 0)
    x, w, b, g = p.arrays(seed=1, dtype=np.dtype(dtype))
    shown = load_implementation(f"{FLOAT64_LAYER}:impl")
    assert shown.function("conv2d")(x, w, b, **p.kwargs()).dtype == np.float64
    problem = ConvProblem("conv2d", 1, 1, 3, (4, 4), (2, 2), (1, 1), (0, 0), (1, 1), 1, True,
                          dtype)
    case = ConvCase(problem, x, w, b, g)
    for check in ("forward", "grad_weight"):
        assert "dtype" in [f.check for f in examine(check, shown, case)]
    # the explicit option: the values are checked in the input dtype, and each cast noted
    cast = load_implementation(f"{FLOAT64_LAYER}:cast")
    assert examine("forward", cast, case) == []
    assert examine("grad_weight", cast, case) == []
    notes = cast.events()
    assert (f"note: LayerAdapter(Float64Conv2D-cast) cast conv2d_backward's grad_weight from "
            f"float64 to {dtype} (cast_results=True)") in notes
    assert cast.capabilities.contiguous_only is True  # copy_inputs: only C is generated


@pytest.mark.long
def test_the_summary_notes_casts_and_copies_and_counts_no_layout_the_layer_never_got(
        tmp_path):
    done = suite_in_process([f"{FLOAT64_LAYER}:impl", f"{FLOAT64_LAYER}:cast"], ("forward",),
                            ("conv2d",), tmp_path / "f", budget=2)
    assert not done.passed, done.text
    summary = "\n".join(done.lines)
    shown, cast = summary.split("float64_layer:cast [")
    assert "float64_layer:impl [" in shown and "FAILED: forward (conv2d)" in shown
    assert "dtype" in shown
    assert "]: passed" in cast.splitlines()[0]
    assert "cast conv2d's result from float64 to float" in cast
    assert "handed the layer C-contiguous copies of its inputs (copy_inputs=True)" in cast
    assert "not generated (its CAPABILITIES): " in cast and "non-contiguous inputs" in cast
    covered = re.search(r"features covered: (.*)", cast).group(1)
    assert "layout" not in covered
