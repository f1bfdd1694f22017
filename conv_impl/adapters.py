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
for the problem, sets its parameters to the problem's ``weight`` and
``bias`` (in the layer's own layout), runs ``forward`` (and, for the
backward check, ``forward`` then ``backward``), and maps the results back to
the contract's layouts and order.  Its ``CAPABILITIES`` never claim more than
a plain layer class can do: no dilation, no groups, no ``bias=None``, and,
when the constructor takes single ints, square problems only.

It shows the layer as it is (contract section 2): the layer gets the
harness's arrays themselves (views when its layout is another axis order;
a C-contiguous array in its own order when the harness's was C-contiguous),
and its results come back in the dtype it computed them in, so a layer
that returns float64 gradients for float32 inputs, or mishandles a strided
input, fails.  Two explicit options change that, and the run's summary
notes each time they did: ``cast_results=True`` casts results to the input
dtype, ``copy_inputs=True`` hands the layer fresh C-contiguous copies (and
so declares ``contiguous_only``: the layouts it never sees are not
generated, nor counted as covered).

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
    # The layer gets the harness's layouts (copy_inputs=True: copies, contiguous only).
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
    cast_results:
        Cast every result to the input dtype (default False: a result in
        another dtype is the layer's failure).  For a layer known to compute
        in float64 whatever it is given, to check its values anyway; the
        summary notes each cast that changed a dtype.
    copy_inputs:
        Hand the layer fresh C-contiguous copies of its inputs and parameters
        (default False: the harness's arrays, so a layer that writes into
        its input or mishandles a non-contiguous one fails).  Implies
        ``contiguous_only`` in ``CAPABILITIES``: the layer never sees another
        layout, so none is generated for it or counted as covered.
    name:
        Shown by ``repr`` (and so in test ids); default the class's name.

    The adapter constructs a fresh layer for every call, so calls are
    independent.  Its messages name the contract function with the layer's
    method in parentheses: ``conv2d_backward (Conv2D.backward): ...``.
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
        cast_results: bool = False,
        copy_inputs: bool = False,
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

        self.cast_results = bool(cast_results)
        self.copy_inputs = bool(copy_inputs)
        #: notes for the run's summary since `harness_events` last emptied it
        self._notes: list[str] = []
        caps = dict(DEFAULT_LAYER_CAPABILITIES, square=self.square,
                    contiguous_only=self.copy_inputs)
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
        if self.copy_inputs and not caps["contiguous_only"]:
            raise ValueError(
                "capabilities: contiguous_only=False contradicts copy_inputs=True (the layer "
                "only ever gets C-contiguous copies, so no other layout is tested)")
        #: The contract's capability dict (see CONTRACT.md, section 2).
        self.CAPABILITIES: dict[str, Any] = caps

        # The contract's entry points for this number of spatial axes, as
        # instance attributes so that e.g. a 2-D adapter has no ``conv1d``;
        # functions of the contract's names, so that tracebacks name them.
        self.forward_function = f"conv{ndim}d"
        self.backward_function = f"conv{ndim}d_backward"
        setattr(self, self.forward_function, self._entry(self.convolve, self.forward_function))
        setattr(self, self.backward_function,
                self._entry(self.convolve_backward, self.backward_function))

    def _entry(self, method: Callable[..., Any], name: str) -> Callable[..., Any]:
        def entry(*args: Any, **kwargs: Any) -> Any:
            return method(*args, **kwargs)
        entry.__name__ = name
        entry.__qualname__ = f"{self!r}.{name}"
        entry.__doc__ = method.__doc__
        entry.harness_events = self.harness_events  # found by the loader from the function
        return entry

    def harness_events(self) -> list[str]:
        """What the adapter's explicit options did since the last call (the contract's
        optional hook): a ``"note: ..."`` label per cast that changed a dtype and per call
        with copied inputs, which the run's summary lists under its notes."""
        notes, self._notes = self._notes, []
        return notes

    def _who(self, contract: str, method: str | None = None) -> str:
        """``conv2d_backward (Conv2D.backward)``: the contract function and the layer's method."""
        method = method or (self.backward_name if contract.endswith("_backward")
                            else self.forward_name)
        return f"{contract} ({self.name}.{method})"

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
        who = self._who(self.forward_function)
        x, weight, bias, dtype = self._arrays(x, weight, bias, who)
        layer = self._layer(x, weight, bias, stride, padding, dilation, groups, who)
        y = getattr(layer, self.forward_name)(self._to_layer_input(x))
        return self._result(self._from_layer_input(y, "result", who), "result", dtype)

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
        layouts, as sums over the batch, in the dtype the layer gave them
        (``cast_results=True``: the input dtype).
        """
        who = self._who(self.backward_function)
        x, weight, bias, dtype = self._arrays(x, weight, bias, who)
        grad_output = self._given(np.asarray(grad_output))
        layer = self._layer(x, weight, bias, stride, padding, dilation, groups, who)
        getattr(layer, self.forward_name)(self._to_layer_input(x))
        result = getattr(layer, self.backward_name)(self._to_layer_input(grad_output))
        dx, dw, db = self._unpack_grads(result, layer, who)

        batch = x.shape[0]
        dx = self._from_layer_input(dx, "grad_input", who)
        dw = self._from_layer_weight(dw, who)
        if bias is None:
            db = None
        else:
            db = np.asarray(db)
            if db.size != weight.shape[0]:
                raise ValueError(
                    f"{who}: grad_bias has shape {db.shape}, expected {weight.shape[0]} values"
                )
            db = db.reshape(weight.shape[0])
        scaled = {"dx": dx, "dw": dw, "db": db}
        for key in self.grads_are_batch_means:
            if scaled[key] is not None:  # a float array times an int keeps its dtype
                scaled[key] = scaled[key] * batch
        return tuple(None if scaled[key] is None else self._result(scaled[key], what, dtype)
                     for key, what in zip(_GRAD_NAMES, ("grad_input", "grad_weight",
                                                        "grad_bias")))

    # ------------------------------------------------------------ internals

    def _arrays(self, x, weight, bias, who: str):
        x = np.asarray(x)
        dtype = x.dtype
        if dtype.name not in self.CAPABILITIES["dtypes"]:
            raise UnsupportedProblemError(
                f"{who}: dtype {dtype.name} not in CAPABILITIES['dtypes'] "
                f"{self.CAPABILITIES['dtypes']}"
            )
        if x.ndim != self.ndim + 2:
            raise ValueError(
                f"{who}: a {self.ndim}-D layer needs x with {self.ndim + 2} axes "
                f"(N, C, *spatial), got shape {x.shape}"
            )
        if self.copy_inputs:
            self._notes.append(f"note: {self!r} handed the layer C-contiguous copies of its "
                               "inputs (copy_inputs=True)")
        weight = self._given(np.asarray(weight))
        return self._given(x), weight, None if bias is None else self._given(np.asarray(bias)), \
            dtype

    def _given(self, a: np.ndarray) -> np.ndarray:
        """An input as the layer gets it: itself, or with copy_inputs a C-contiguous copy."""
        return np.array(a, order="C", copy=True) if self.copy_inputs else a

    @staticmethod
    def _rearranged(a: np.ndarray, view: np.ndarray) -> np.ndarray:
        """``view`` (``a`` transposed or flipped into the layer's order), C-contiguous when
        ``a`` was: the harness's layout, in the layer's axis order; ``a`` itself when the
        layer's order is the contract's."""
        if view.shape == a.shape and view.strides == a.strides:
            return a
        if a.flags.c_contiguous and not view.flags.c_contiguous:
            return np.ascontiguousarray(view)
        return view

    def _result(self, a: np.ndarray, what: str, dtype: np.dtype) -> np.ndarray:
        """A result as the layer gave it, or cast to the input dtype with cast_results."""
        if not self.cast_results or a.dtype == dtype:
            return a
        contract = self.backward_function if what.startswith("grad_") else self.forward_function
        self._notes.append(f"note: {self!r} cast {contract}'s {what} from {a.dtype} to "
                           f"{dtype} (cast_results=True)")
        return a.astype(dtype)

    def _spec(self, x, weight, bias, stride, padding, dilation, groups, who) -> LayerSpec:
        n = self.ndim
        kernel = tuple(int(k) for k in weight.shape[2:])
        stride = tuple(int(s) for s in stride)
        padding = tuple(int(p) for p in padding)
        dilation = (1,) * n if dilation is None else tuple(int(d) for d in dilation)
        groups = int(groups)
        for label, value in (("stride", stride), ("padding", padding), ("dilation", dilation)):
            if len(value) != n:
                raise ValueError(f"{who}: {label} needs {n} values, got {value}")
        caps = self.CAPABILITIES
        if dilation != (1,) * n and not caps["dilation"]:
            raise UnsupportedProblemError(
                f"{who}: dilation {dilation} requested, but the layer has no dilation "
                f"(CAPABILITIES['dilation'] is False)"
            )
        if groups != 1 and not caps["groups"]:
            raise UnsupportedProblemError(
                f"{who}: groups={groups} requested, but the layer has no groups "
                f"(CAPABILITIES['groups'] is False)"
            )
        if bias is None and not caps["bias_none"]:
            raise UnsupportedProblemError(
                f"{who}: bias=None requested, but the layer always has a bias "
                f"(CAPABILITIES['bias_none'] is False)"
            )
        sizes = {"kernel_size": kernel, "stride": stride, "padding": padding, "dilation": dilation}
        if self.square:
            for label, value in sizes.items():
                if len(set(value)) != 1:
                    raise UnsupportedProblemError(
                        f"{who}: {label} {value} differs between axes, but the layer "
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

    def _layer(self, x, weight, bias, stride, padding, dilation, groups, who):
        spec = self._spec(x, weight, bias, stride, padding, dilation, groups, who)
        layer = self.construct(spec)
        spatial = tuple(range(2, 2 + self.ndim))
        w = np.flip(weight, axis=spatial) if self.kernel_flipped else weight
        w = self._rearranged(weight, w.transpose(_perm(self._contract_weight, self.weight_layout)))
        if self.set_params is not None:
            self.set_params(layer, w, bias)
            return layer
        old_w = getattr(layer, self.weight_attr, None)
        if old_w is not None and np.shape(old_w) != w.shape:
            raise ValueError(
                f"{who}: weight_layout {self.weight_layout!r} gives weight shape "
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
                        f"{who}: layer's {self.bias_attr!r} has shape {np.shape(old_b)}, "
                        f"expected {bias.size} values"
                    )
                b = bias.reshape(np.shape(old_b))  # e.g. (C_out, 1) or (1, 1, 1, C_out)
            setattr(layer, self.bias_attr, b)
        return layer

    def _to_layer_input(self, a: np.ndarray) -> np.ndarray:
        return self._rearranged(a, a.transpose(_perm(self._contract_input, self.input_layout)))

    def _from_layer_input(self, a, what: str, who: str) -> np.ndarray:
        a = np.asarray(a)
        if a.ndim != self.ndim + 2:
            raise ValueError(
                f"{who}: {what} has shape {a.shape}, expected {self.ndim + 2} axes "
                f"in layout {self.input_layout!r}"
            )
        return a.transpose(_perm(self.input_layout, self._contract_input))

    def _from_layer_weight(self, dw, who: str) -> np.ndarray:
        dw = np.asarray(dw)
        if dw.ndim != self.ndim + 2:
            raise ValueError(
                f"{who}: grad_weight has shape {dw.shape}, expected "
                f"{self.ndim + 2} axes in layout {self.weight_layout!r}"
            )
        dw = dw.transpose(_perm(self.weight_layout, self._contract_weight))
        if self.kernel_flipped:
            dw = np.flip(dw, axis=tuple(range(2, 2 + self.ndim)))
        return dw

    def _unpack_grads(self, result, layer, who: str):
        grads = self._grads
        if callable(grads):
            out = tuple(grads(result, layer))
            if len(out) != 3:
                raise ValueError(f"{who}: grads callable must return (dx, dw, db), got {len(out)} items")
            return out
        if isinstance(grads, dict):
            if not isinstance(result, Mapping):
                raise TypeError(f"{who} returned {type(result).__name__}, expected a mapping")
            return tuple(result[grads[key]] for key in _GRAD_NAMES)
        if not isinstance(result, (tuple, list)) or len(result) != len(grads):
            raise TypeError(
                f"{who} returned {type(result).__name__}, expected a "
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
