"""Wrap a layer-style convolution class into the harness's interface.

Course material and hand-written networks usually implement a convolution as
a *layer class*: it is built with the channel counts, kernel size, stride and
padding, initialises its own ``weight`` and ``bias``, and has ``forward(x)``
and ``backward(dout)`` methods.  The harness (see the contract, section 2)
instead calls plain functions::

    conv2d(x, weight, bias, *, stride, padding, dilation, groups) -> y
    conv2d_backward(grad_output, x, weight, bias, *, stride, padding,
                    dilation, groups) -> (grad_input, grad_weight, grad_bias)

:class:`LayerAdapter` bridges the two.  For each call it builds a fresh layer
for the problem, overwrites its parameters with copies of the problem's
``weight`` and ``bias`` (in the layer's own layout and in the input dtype),
runs ``forward`` (and, for the backward check, ``forward`` then
``backward``), maps the results back to the contract's layouts and order and
returns them in the input dtype.  Its ``CAPABILITIES`` never claim more than
a plain layer class can do: no dilation, no groups, no ``bias=None``, and,
when the constructor takes single ints, square problems only.

The common case, a class like the NumPy tutorial's
``Conv2D(in_channels, out_channels, kernel_size, stride, padding)`` with
``backward`` returning ``(db, dw, dx)``::

    from conv_impl.adapters import LayerAdapter
    from my_course import Conv2D

    impl = LayerAdapter(Conv2D)                # the defaults fit that class
    conv2d, conv2d_backward = impl.conv2d, impl.conv2d_backward
    CAPABILITIES = impl.CAPABILITIES

Point the harness at it with ``pytest --impl path/to/that_file.py`` (module
attributes) or ``--impl path/to/that_file.py:impl`` (the instance).

A layer that differs is described with keyword arguments, for example an
NHWC layer with ``(k, k, C_in, C_out)`` weights whose ``backward`` returns
``(dx, dw, db)`` averaged over the batch::

    impl = LayerAdapter(MyConv, input_layout="NHWC", weight_layout="HWIO",
                        grads=("dx", "dw", "db"), grads_are_batch_means=True)

See :class:`LayerAdapter` for every option (custom constructors, dict or
attribute gradients, flipped kernels, non-square sizes, 1-D and 3-D layers).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

import numpy as np

__all__ = [
    "nd_functions",
    "LayerAdapter",
    "LayerSpec",
    "UnsupportedProblemError",
    "adapt_layer",
    "DEFAULT_LAYER_CAPABILITIES",
]

#: The spatial axis letters used in layout strings, by number of spatial axes.
_SPATIAL_LETTERS = {1: "W", 2: "HW", 3: "DHW"}

#: The three gradient names used by ``grads`` and ``grads_are_batch_means``.
_GRAD_NAMES = ("dx", "dw", "db")

#: Capability keys the contract defines, with the contract's defaults.
_CONTRACT_CAPABILITY_KEYS = (
    "dtypes",
    "dilation",
    "groups",
    "bias_none",
    "square",
    "contiguous_only",
)

#: What a plain layer class is assumed to support unless told otherwise.
#: ``square`` is filled in from the adapter's ``square`` argument.
DEFAULT_LAYER_CAPABILITIES: Mapping[str, Any] = {
    "dtypes": ("float16", "float32", "float64"),
    "dilation": False,
    "groups": False,
    "bias_none": False,
    # The adapter hands the layer C-contiguous copies, so any input layout works.
    "contiguous_only": False,
}


class UnsupportedProblemError(NotImplementedError):
    """The problem needs something the wrapped layer does not declare.

    Raised, for instance, for ``dilation != 1`` when ``CAPABILITIES`` says
    ``dilation=False``.  The harness never generates such problems for an
    implementation that declares its capabilities; seeing this error means
    a caller ignored ``CAPABILITIES``.
    """


@dataclasses.dataclass(frozen=True)
class LayerSpec:
    """One problem's layer hyper-parameters, handed to ``construct``.

    ``kernel_size``, ``stride``, ``padding`` and ``dilation`` are single ints
    when the adapter was built with ``square=True`` (all axes are then
    equal) and tuples with one int per spatial axis otherwise.
    """

    in_channels: int
    out_channels: int
    kernel_size: int | tuple[int, ...]
    stride: int | tuple[int, ...]
    padding: int | tuple[int, ...]
    dilation: int | tuple[int, ...]
    groups: int
    #: False when the problem has ``bias=None`` (only with ``bias_none``).
    bias: bool
    #: The dtype of the problem's arrays, e.g. ``np.dtype("float32")``.
    dtype: np.dtype


def _default_construct(layer_cls: Callable[..., Any]) -> Callable[[LayerSpec], Any]:
    def construct(spec: LayerSpec) -> Any:
        return layer_cls(
            spec.in_channels,
            spec.out_channels,
            spec.kernel_size,
            spec.stride,
            spec.padding,
        )

    return construct


def _check_layout(layout: str, letters: str, what: str) -> str:
    if not isinstance(layout, str) or sorted(layout) != sorted(letters):
        raise ValueError(
            f"{what} {layout!r} must be a permutation of {letters!r} "
            f"(one letter per axis)"
        )
    return layout


def _perm(src: str, dst: str) -> tuple[int, ...]:
    """Axes permutation taking an array laid out as ``src`` to ``dst``."""
    return tuple(src.index(letter) for letter in dst)


class LayerAdapter:
    """Expose a layer-style convolution class through the harness contract.

    Parameters
    ----------
    layer_cls:
        The layer class (or any factory); only used by the default
        ``construct``.
    construct:
        ``construct(spec: LayerSpec) -> layer``.  Default:
        ``layer_cls(in_channels, out_channels, kernel_size, stride, padding)``
        with positional arguments.  Give one when the constructor has other
        names or extra arguments, e.g.
        ``construct=lambda s: MyConv(s.in_channels, s.out_channels,
        k=s.kernel_size, stride=s.stride, pad=s.padding)``.
    input_layout:
        Axis order of the layer's inputs and outputs: ``"NCHW"`` (default) or
        ``"NHWC"`` or any permutation of ``N``, ``C`` and the spatial letters.
        Its length fixes the number of spatial axes: ``"NCW"`` is a 1-D layer
        (the adapter then provides ``conv1d``), ``"NCDHW"`` a 3-D one.
    weight_layout:
        Axis order of the layer's weight: ``"OIHW"`` (default, as torch) or,
        e.g., ``"HWIO"`` for ``(kh, kw, C_in, C_out)``.
    grads:
        Where ``backward(dout)``'s result keeps the three gradients.
        A sequence of the names ``"dx"``, ``"dw"``, ``"db"`` in the order the
        layer returns them (default ``("db", "dw", "dx")``, as the tutorial);
        a mapping ``{"dx": key, "dw": key, "db": key}`` for a dict result; or
        a callable ``grads(result, layer) -> (dx, dw, db)`` for anything
        else (say, ``lambda r, layer: (r, layer.dW, layer.db)`` for a layer
        that returns ``dx`` and stores the others as attributes).
    grads_are_batch_means:
        The layer divides some gradients by the batch size.  ``True`` means
        ``dw`` and ``db`` are batch means; a collection of names says which.
        The adapter multiplies them by the batch size to get the contract's
        sums.
    kernel_flipped:
        The layer computes a true convolution (kernel rotated by 180 degrees)
        rather than torch's cross-correlation.  The adapter flips the weight
        it sets and the weight gradient it gets back.
    square:
        ``True`` (default) when the constructor takes a single int for
        kernel size, stride and padding: ``LayerSpec`` then carries ints and
        ``CAPABILITIES["square"]`` is True.  ``False`` passes tuples.
    weight_attr, bias_attr:
        Attribute names of the parameters (default ``"weight"``, ``"bias"``).
    set_params:
        ``set_params(layer, weight, bias)`` for layers that keep their
        parameters elsewhere (e.g. in a dict).  ``weight`` is already in
        ``weight_layout``; ``bias`` is a ``(C_out,)`` array or None.
        Overrides ``weight_attr``/``bias_attr`` for setting.
    forward, backward:
        Method names (default ``"forward"``, ``"backward"``).
    capabilities:
        Overrides of ``CAPABILITIES`` keys.  Declare only what the layer really
        supports: ``dilation=True``/``groups=True`` need a ``construct`` that
        passes ``spec.dilation``/``spec.groups`` on, ``bias_none=True`` one
        that builds a bias-free layer for ``spec.bias=False`` (the adapter then
        sets no bias and returns ``grad_bias=None``), ``dtypes`` lists those
        the layer computes in correctly.
    name:
        Shown by ``repr`` (and so in test ids); default the class's name.

    The adapter constructs a fresh layer for every call and hands it copies,
    so the caller's arrays are never touched and calls are independent.
    """

    def __init__(
        self,
        layer_cls: Callable[..., Any],
        *,
        construct: Callable[[LayerSpec], Any] | None = None,
        input_layout: str = "NCHW",
        weight_layout: str = "OIHW",
        grads: Sequence[str] | Mapping[str, Any] | Callable[[Any, Any], Sequence[Any]] = (
            "db",
            "dw",
            "dx",
        ),
        grads_are_batch_means: bool | Collection[str] = False,
        kernel_flipped: bool = False,
        square: bool = True,
        weight_attr: str = "weight",
        bias_attr: str = "bias",
        set_params: Callable[[Any, np.ndarray, np.ndarray | None], None] | None = None,
        forward: str = "forward",
        backward: str = "backward",
        capabilities: Mapping[str, Any] | None = None,
        name: str | None = None,
    ) -> None:
        self.layer_cls = layer_cls
        self.construct = construct if construct is not None else _default_construct(layer_cls)

        ndim = len(input_layout) - 2 if isinstance(input_layout, str) else 0
        if ndim not in _SPATIAL_LETTERS:
            raise ValueError(
                f"input_layout {input_layout!r}: expected N, C and 1 to 3 spatial "
                f"letters ({', '.join(_SPATIAL_LETTERS.values())}), e.g. 'NCHW' or 'NHWC'"
            )
        self.ndim = ndim
        spatial = _SPATIAL_LETTERS[ndim]
        self._contract_input = "NC" + spatial
        self._contract_weight = "OI" + spatial
        self.input_layout = _check_layout(input_layout, self._contract_input, "input_layout")
        self.weight_layout = _check_layout(weight_layout, self._contract_weight, "weight_layout")

        if callable(grads):
            self._grads = grads
        elif isinstance(grads, Mapping):
            if sorted(grads) != sorted(_GRAD_NAMES):
                raise ValueError(f"grads mapping must have exactly the keys {_GRAD_NAMES}, got {list(grads)}")
            self._grads = dict(grads)
        else:
            grads = tuple(grads)
            if sorted(grads) != sorted(_GRAD_NAMES):
                raise ValueError(
                    f"grads {grads!r} must name each of {_GRAD_NAMES} once, in the order "
                    f"the layer's backward returns them"
                )
            self._grads = grads
        self.grads = grads

        if grads_are_batch_means is True:
            means = frozenset({"dw", "db"})
        elif grads_are_batch_means is False:
            means = frozenset()
        else:
            means = frozenset(grads_are_batch_means)
            if not means <= set(_GRAD_NAMES):
                raise ValueError(f"grads_are_batch_means: unknown names {sorted(means - set(_GRAD_NAMES))}")
        self.grads_are_batch_means = means

        self.kernel_flipped = bool(kernel_flipped)
        self.square = bool(square)
        self.weight_attr = weight_attr
        self.bias_attr = bias_attr
        self.set_params = set_params
        self.forward_name = forward
        self.backward_name = backward
        self.name = name or getattr(layer_cls, "__qualname__", None) or repr(layer_cls)

        caps = dict(DEFAULT_LAYER_CAPABILITIES, square=self.square)
        for key, value in (capabilities or {}).items():
            if key not in _CONTRACT_CAPABILITY_KEYS:
                raise ValueError(
                    f"capabilities: unknown key {key!r}; the contract knows {_CONTRACT_CAPABILITY_KEYS}"
                )
            caps[key] = value
        if isinstance(caps["dtypes"], str):
            raise ValueError(f"capabilities: dtypes must be a tuple of dtype names, "
                             f"got the string {caps['dtypes']!r}")
        for key in _CONTRACT_CAPABILITY_KEYS[1:]:
            if not isinstance(caps[key], bool):
                raise ValueError(f"capabilities: {key} must be True or False, got {caps[key]!r}")
        caps["dtypes"] = tuple(np.dtype(d).name for d in caps["dtypes"])
        if self.square and not caps["square"]:
            raise ValueError(
                "capabilities: square=False contradicts square=True (the constructor takes "
                "single ints); pass square=False to the adapter for a layer taking tuples"
            )
        #: The contract's capability dict (see CONTRACT.md, section 2).
        self.CAPABILITIES: dict[str, Any] = caps

        # The contract's entry points for this number of spatial axes, as
        # instance attributes so that e.g. a 2-D adapter has no ``conv1d``.
        setattr(self, f"conv{ndim}d", self.convolve)
        setattr(self, f"conv{ndim}d_backward", self.convolve_backward)

    def __repr__(self) -> str:
        return f"LayerAdapter({self.name})"

    # ------------------------------------------------------------------ API

    def convolve(
        self,
        x: np.ndarray,
        weight: np.ndarray,
        bias: np.ndarray | None,
        *,
        stride: Sequence[int],
        padding: Sequence[int],
        dilation: Sequence[int] | None = None,
        groups: int = 1,
    ) -> np.ndarray:
        """The contract's ``conv{n}d``: forward pass of a fresh layer."""
        x, weight, bias, dtype = self._arrays(x, weight, bias)
        layer = self._layer(x, weight, bias, stride, padding, dilation, groups)
        y = getattr(layer, self.forward_name)(self._to_layer_input(x))
        return self._from_layer_input(y, "forward output", dtype)

    def convolve_backward(
        self,
        grad_output: np.ndarray,
        x: np.ndarray,
        weight: np.ndarray,
        bias: np.ndarray | None,
        *,
        stride: Sequence[int],
        padding: Sequence[int],
        dilation: Sequence[int] | None = None,
        groups: int = 1,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """The contract's ``conv{n}d_backward``: forward then backward.

        Returns ``(grad_input, grad_weight, grad_bias)`` in the contract's
        layouts, as sums over the batch, in the input dtype.
        """
        x, weight, bias, dtype = self._arrays(x, weight, bias)
        grad_output = np.array(grad_output, dtype=dtype, copy=True)
        layer = self._layer(x, weight, bias, stride, padding, dilation, groups)
        getattr(layer, self.forward_name)(self._to_layer_input(x))
        result = getattr(layer, self.backward_name)(self._to_layer_input(grad_output))
        dx, dw, db = self._unpack_grads(result, layer)

        batch = x.shape[0]
        dx = self._from_layer_input(dx, "grad_input", dtype)
        dw = self._from_layer_weight(dw, dtype)
        if bias is None:
            db = None
        else:
            db = np.asarray(db)
            if db.size != weight.shape[0]:
                raise ValueError(
                    f"{self.name}.backward: bias gradient has shape {db.shape}, "
                    f"expected {weight.shape[0]} values"
                )
            db = db.reshape(weight.shape[0]).astype(dtype, copy=False)
        scaled = {"dx": dx, "dw": dw, "db": db}
        for key in self.grads_are_batch_means:
            if scaled[key] is not None:
                scaled[key] = (scaled[key] * batch).astype(dtype, copy=False)
        return scaled["dx"], scaled["dw"], scaled["db"]

    # ------------------------------------------------------------ internals

    def _arrays(self, x, weight, bias):
        x = np.asarray(x)
        dtype = x.dtype
        if dtype.name not in self.CAPABILITIES["dtypes"]:
            raise UnsupportedProblemError(
                f"{self.name}: dtype {dtype.name} not in CAPABILITIES['dtypes'] "
                f"{self.CAPABILITIES['dtypes']}"
            )
        if x.ndim != self.ndim + 2:
            raise ValueError(
                f"{self.name}: a {self.ndim}-D layer needs x with {self.ndim + 2} axes "
                f"(N, C, *spatial), got shape {x.shape}"
            )
        x = np.array(x, dtype=dtype, copy=True)
        weight = np.array(weight, dtype=dtype, copy=True)
        if bias is not None:
            bias = np.array(bias, dtype=dtype, copy=True)
        return x, weight, bias, dtype

    def _spec(self, x, weight, bias, stride, padding, dilation, groups) -> LayerSpec:
        n = self.ndim
        kernel = tuple(int(k) for k in weight.shape[2:])
        stride = tuple(int(s) for s in stride)
        padding = tuple(int(p) for p in padding)
        dilation = (1,) * n if dilation is None else tuple(int(d) for d in dilation)
        groups = int(groups)
        for label, value in (("stride", stride), ("padding", padding), ("dilation", dilation)):
            if len(value) != n:
                raise ValueError(f"{self.name}: {label} needs {n} values, got {value}")
        caps = self.CAPABILITIES
        if dilation != (1,) * n and not caps["dilation"]:
            raise UnsupportedProblemError(
                f"{self.name}: dilation {dilation} requested, but the layer has no dilation "
                f"(CAPABILITIES['dilation'] is False)"
            )
        if groups != 1 and not caps["groups"]:
            raise UnsupportedProblemError(
                f"{self.name}: groups={groups} requested, but the layer has no groups "
                f"(CAPABILITIES['groups'] is False)"
            )
        if bias is None and not caps["bias_none"]:
            raise UnsupportedProblemError(
                f"{self.name}: bias=None requested, but the layer always has a bias "
                f"(CAPABILITIES['bias_none'] is False)"
            )
        sizes = {"kernel_size": kernel, "stride": stride, "padding": padding, "dilation": dilation}
        if self.square:
            for label, value in sizes.items():
                if len(set(value)) != 1:
                    raise UnsupportedProblemError(
                        f"{self.name}: {label} {value} differs between axes, but the layer "
                        f"takes a single int (CAPABILITIES['square'] is True)"
                    )
            sizes = {label: value[0] for label, value in sizes.items()}
        return LayerSpec(
            in_channels=int(x.shape[1]),
            out_channels=int(weight.shape[0]),
            groups=groups,
            bias=bias is not None,
            dtype=x.dtype,
            **sizes,
        )

    def _layer(self, x, weight, bias, stride, padding, dilation, groups):
        spec = self._spec(x, weight, bias, stride, padding, dilation, groups)
        layer = self.construct(spec)
        spatial = tuple(range(2, 2 + self.ndim))
        w = np.flip(weight, axis=spatial) if self.kernel_flipped else weight
        w = np.ascontiguousarray(w.transpose(_perm(self._contract_weight, self.weight_layout)))
        if self.set_params is not None:
            self.set_params(layer, w, bias)
            return layer
        old_w = getattr(layer, self.weight_attr, None)
        if old_w is not None and np.shape(old_w) != w.shape:
            raise ValueError(
                f"{self.name}: weight_layout {self.weight_layout!r} gives weight shape "
                f"{w.shape}, but the layer initialised {self.weight_attr!r} with shape "
                f"{np.shape(old_w)}; check weight_layout"
            )
        setattr(layer, self.weight_attr, w)
        if bias is not None:
            old_b = getattr(layer, self.bias_attr, None)
            b = bias
            if old_b is not None:
                if np.size(old_b) != bias.size:
                    raise ValueError(
                        f"{self.name}: layer's {self.bias_attr!r} has shape {np.shape(old_b)}, "
                        f"expected {bias.size} values"
                    )
                b = bias.reshape(np.shape(old_b))  # e.g. (C_out, 1) or (1, 1, 1, C_out)
            setattr(layer, self.bias_attr, np.array(b, copy=True))
        return layer

    def _to_layer_input(self, a: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(a.transpose(_perm(self._contract_input, self.input_layout)))

    def _from_layer_input(self, a, what: str, dtype: np.dtype) -> np.ndarray:
        a = np.asarray(a)
        if a.ndim != self.ndim + 2:
            raise ValueError(
                f"{self.name}: {what} has shape {a.shape}, expected {self.ndim + 2} axes "
                f"in layout {self.input_layout!r}"
            )
        return a.transpose(_perm(self.input_layout, self._contract_input)).astype(dtype, copy=False)

    def _from_layer_weight(self, dw, dtype: np.dtype) -> np.ndarray:
        dw = np.asarray(dw)
        if dw.ndim != self.ndim + 2:
            raise ValueError(
                f"{self.name}: weight gradient has shape {dw.shape}, expected "
                f"{self.ndim + 2} axes in layout {self.weight_layout!r}"
            )
        dw = dw.transpose(_perm(self.weight_layout, self._contract_weight))
        if self.kernel_flipped:
            dw = np.flip(dw, axis=tuple(range(2, 2 + self.ndim)))
        return dw.astype(dtype, copy=False)

    def _unpack_grads(self, result, layer):
        grads = self._grads
        if callable(grads):
            out = tuple(grads(result, layer))
            if len(out) != 3:
                raise ValueError(f"{self.name}: grads callable must return (dx, dw, db), got {len(out)} items")
            return out
        if isinstance(grads, dict):
            if not isinstance(result, Mapping):
                raise TypeError(f"{self.name}.backward returned {type(result).__name__}, expected a mapping")
            return tuple(result[grads[key]] for key in _GRAD_NAMES)
        if not isinstance(result, (tuple, list)) or len(result) != len(grads):
            raise TypeError(
                f"{self.name}.backward returned {type(result).__name__}, expected a "
                f"{len(grads)}-tuple ordered as {grads}"
            )
        by_name = dict(zip(grads, result))
        return tuple(by_name[key] for key in _GRAD_NAMES)


def adapt_layer(layer_cls: Callable[..., Any], **options: Any) -> LayerAdapter:
    """Shorthand for :class:`LayerAdapter` ``(layer_cls, **options)``."""
    return LayerAdapter(layer_cls, **options)


def nd_functions(convnd: Callable[..., Any], convnd_backward: Callable[..., Any]
                 ) -> dict[str, Callable[..., Any]]:
    """The contract's ``conv1d`` ... ``conv3d_backward`` from two N-d functions that
    take the number of spatial axes first: ``convnd(nd, x, weight, bias, stride,
    padding, dilation, groups)`` and ``convnd_backward(nd, grad_output, x, weight,
    bias, stride, padding, dilation, groups)``. For a library module:
    ``globals().update(nd_functions(_convnd, _convnd_backward))``."""
    out: dict[str, Callable[..., Any]] = {}
    for nd in (1, 2, 3):
        def forward(x, weight, bias, *, stride, padding, dilation=None, groups=1, _nd=nd):
            return convnd(_nd, x, weight, bias, stride, padding, dilation, groups)

        def backward(grad_output, x, weight, bias, *, stride, padding, dilation=None,
                     groups=1, _nd=nd):
            return convnd_backward(_nd, grad_output, x, weight, bias, stride, padding,
                                   dilation, groups)
        forward.__name__, backward.__name__ = f"conv{nd}d", f"conv{nd}d_backward"
        out[forward.__name__], out[backward.__name__] = forward, backward
    return out
