"""Loading an implementation under test from a spec (contract section 1).

A spec is a file path (``path/to/mine.py``), a dotted module name
(``my_pkg.conv``), either followed by ``:attr`` naming a module, class or
instance inside it (``my_pkg.conv:Impl``). Anything that goes wrong is one
`SpecError` whose message names the spec and the reason; the pytest plugin
turns it into a usage error (exit status 4).
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Iterable, Mapping, Sequence

from conv_harness.descriptor import DescriptorError, parse_problem_line
from conv_harness.problem import OPS, ConvProblem
from conv_harness.running import native
from conv_harness.running.calling import Heard, silenced
from conv_harness.running.capabilities import Capabilities, CapabilitiesError
from conv_harness.specs import is_path, short_name, split_spec

CONTRACT_FUNCTIONS: tuple[str, ...] = tuple(
    name for op in OPS.values() for name in (op.name, op.backward_name))



class SpecError(Exception):
    """An implementation spec that cannot be loaded; the message says why."""


@dataclass
class Implementation:
    """A loaded implementation: its contract functions and capabilities."""

    spec: str
    name: str
    target: Any
    functions: dict[str, Callable[..., Any]] = field(default_factory=dict)
    capabilities: Capabilities = field(default_factory=Capabilities)
    #: the implementation's optional ``harness_events()``: labels of what its calls
    #: since the last call did (which path, which algorithm), reported as events
    events: Callable[[], Any] | None = None
    #: the spec that loads it from this folder, when ``spec`` (as a case file
    #: recorded it elsewhere) does not: what ``--isolate``'s child process loads
    loads_from: str | None = None
    #: (how many, the first) warnings raised while importing it (counted as in a test)
    import_warnings: tuple[int, str | None] = (0, None)
    #: the dispatch paths it declares (``HARNESS_PATHS``): each path's label, as its
    #: ``harness_events`` names it, and problems on which it takes that path; every
    #: check visits them (conv_harness/searching/sweep.py) and the summary counts each path
    paths: dict[str, tuple[ConvProblem, ...]] = field(default_factory=dict)

    def derived(self) -> dict[str, str]:
        """The functions the harness made, not the implementation, and how:
        ``{"conv2d_backward": "autograd"}`` for a torch forward without its backward."""
        return {name: fn.derived for name, fn in self.functions.items()
                if getattr(fn, "derived", None)}

    def native_record(self, function: str) -> dict[str, Any]:
        """What a case file of a call of ``function`` records of its arrays (contract
        section 7): nothing for NumPy; the library, the device, and the functions
        the harness made (its backward from autograd) otherwise; and a float32
        precision other than IEEE's, where declared."""
        own = self.capabilities.function(function)
        record: dict[str, Any] = {}
        if own.arrays != "numpy":
            record.update(arrays=own.arrays, device=own.device)
            derived = self.derived()
            if derived:
                record["derived"] = derived
        if own.float32_precision != "ieee":
            record["float32_precision"] = own.float32_precision
        if own.bfloat16_accumulation != "float32":
            record["bfloat16_accumulation"] = own.bfloat16_accumulation
        if own.float16_accumulation != "float32":
            record["float16_accumulation"] = own.float16_accumulation
        return record

    def has(self, function: str) -> bool:
        return function in self.functions

    def function(self, name: str) -> Callable[..., Any]:
        return self.functions[name]

    def missing(self) -> list[str]:
        return [name for name in CONTRACT_FUNCTIONS if name not in self.functions]

    def capabilities_for(self, functions: Iterable[str]) -> Capabilities:
        """The flat capabilities that hold for all of ``functions`` that it provides.

        What a check calling these functions may draw (CAPABILITIES may narrow
        one function, e.g. ``"conv2d_backward": {"groups": False}``). Names it
        does not provide are left out: the check does not call them. The
        result's ``dtypes`` is empty when the functions share no dtype.
        """
        provided = [name for name in functions if name in self.functions]
        return self.capabilities.for_functions(provided)


def _package_module(path: Path) -> tuple[Path, str] | None:
    """(folder to import from, dotted name) when ``path`` lies inside a package."""
    path = path.resolve()
    parts = [path.stem]
    folder = path.parent
    while (folder / "__init__.py").is_file():
        parts.insert(0, folder.name)
        folder = folder.parent
    return (folder, ".".join(parts)) if len(parts) > 1 else None


def _import_file(spec: str, path: Path, heard: Heard) -> ModuleType:
    if not path.is_file():
        raise SpecError(f"--impl {spec!r}: no such file {str(path)!r}")
    package = _package_module(path)
    if package is not None:  # a module of a package: import it as such (relative imports)
        folder, dotted = package
        if str(folder) not in sys.path:
            sys.path.insert(0, str(folder))
        return _import_dotted(spec, dotted, heard)
    name = f"_conv_impl_under_test_{abs(hash(str(path.resolve())))}"
    if name in sys.modules:
        return sys.modules[name]
    module_spec = importlib.util.spec_from_file_location(name, path)
    if module_spec is None or module_spec.loader is None:
        raise SpecError(f"--impl {spec!r}: {str(path)!r} is not a Python module")
    module = importlib.util.module_from_spec(module_spec)
    # The file's folder goes on sys.path so that it can import its neighbours.
    sys.path.insert(0, str(path.resolve().parent))
    sys.modules[name] = module
    try:
        with silenced(heard):
            module_spec.loader.exec_module(module)
    except BaseException as exc:
        del sys.modules[name]
        if isinstance(exc, KeyboardInterrupt):
            raise
        raise SpecError(f"--impl {spec!r}: importing {str(path)!r} raised "
                        f"{type(exc).__name__}: {exc}") from None
    finally:
        sys.path.remove(str(path.resolve().parent))
    return module


def _import_dotted(spec: str, dotted: str, heard: Heard) -> ModuleType:
    try:
        with silenced(heard):
            return importlib.import_module(dotted)
    except ModuleNotFoundError as exc:
        if exc.name and (dotted == exc.name or dotted.startswith(exc.name + ".")):
            raise SpecError(f"--impl {spec!r}: no module named {exc.name!r} "
                            "(nor a file of that name)") from None
        raise SpecError(f"--impl {spec!r}: importing {dotted!r} raised "
                        f"ModuleNotFoundError: {exc}") from None
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt):
            raise
        raise SpecError(f"--impl {spec!r}: importing {dotted!r} raised "
                        f"{type(exc).__name__}: {exc}") from None


def _resolve_attribute(spec: str, module: ModuleType, attr: str) -> Any:
    target: Any = module
    for part in attr.split("."):
        if not hasattr(target, part):
            raise SpecError(f"--impl {spec!r}: {module.__name__ if target is module else attr!r}"
                            f" has no attribute {part!r}")
        target = getattr(target, part)
    if inspect.isclass(target) and any(
            inspect.isfunction(inspect.getattr_static(target, name, None))
            for name in CONTRACT_FUNCTIONS):
        try:  # a class whose functions are instance methods: use an instance
            with silenced():
                target = target()
        except Exception as exc:
            raise SpecError(f"--impl {spec!r}: cannot construct {attr}() to call its methods: "
                            f"{type(exc).__name__}: {exc}") from None
    return target


def load_implementation(spec: str) -> Implementation:
    """Import ``spec`` and collect its contract functions and CAPABILITIES."""
    spec = spec.strip()
    if not spec:
        raise SpecError("--impl '': empty implementation spec")
    module_name, attr = split_spec(spec)
    imported = Heard()  # this import's warnings
    if is_path(module_name):
        module = _import_file(spec, Path(module_name).expanduser(), imported)
    else:
        module = _import_dotted(spec, module_name, imported)
    target = _resolve_attribute(spec, module, attr) if attr else module
    functions: dict[str, Callable[..., Any]] = {}
    for name in CONTRACT_FUNCTIONS:
        fn = getattr(target, name, None)
        if fn is None:
            continue
        if not callable(fn):
            raise SpecError(f"--impl {spec!r}: {name} is a {type(fn).__name__}, not a function")
        functions[name] = fn
    if not functions:
        raise SpecError(f"--impl {spec!r}: provides none of the contract's functions "
                        f"({', '.join(CONTRACT_FUNCTIONS)})")
    try:
        capabilities = Capabilities.from_mapping(getattr(target, "CAPABILITIES", None))
    except CapabilitiesError as exc:
        raise SpecError(f"--impl {spec!r}: {exc}") from None
    functions = native_functions(spec, functions, capabilities)
    events = getattr(target, "harness_events", None)
    if events is None:  # functions taken from an object that has the hook (a LayerAdapter's)
        events = next((fn.harness_events for fn in functions.values()
                       if callable(getattr(fn, "harness_events", None))), None)
    return Implementation(spec=spec, name=short_name(spec), target=target,
                          functions=functions, capabilities=capabilities,
                          events=events if callable(events) else None,
                          import_warnings=(imported.count, imported.first),
                          paths=declared_paths(spec, getattr(target, "HARNESS_PATHS", None)))


def load_implementations(specs: Sequence[str]) -> list[Implementation]:
    """Each of ``specs`` loaded, the same spec once; two of the same name (two files
    called mine.py) told apart by their specs."""
    impls = [load_implementation(spec) for spec in dict.fromkeys(specs)]
    names = [impl.name for impl in impls]
    for impl in impls:
        if names.count(impl.name) > 1:
            impl.name = impl.spec
    return impls


def native_functions(spec: str, functions: dict[str, Callable[..., Any]],
                     capabilities: Capabilities) -> dict[str, Callable[..., Any]]:
    """The functions as the harness calls them (conv_harness/running/native.py): each on
    its declared arrays and device; a torch forward's missing backward from autograd."""
    out = {}
    for name, fn in functions.items():
        own = capabilities.function(name)
        problem = native.device_problem(own.arrays, own.device)
        if problem is not None:
            raise SpecError(f"--impl {spec!r}: {name} {problem}")
        out[name] = native.wrap(fn, own.arrays, own.device)
    for op in OPS.values():
        own = capabilities.function(op.name)
        if op.name in functions and op.backward_name not in functions and own.arrays == "torch":
            out[op.backward_name] = native.wrap(native.autograd_backward(functions[op.name]),
                                                "torch", own.device, derived=native.AUTOGRAD)
    return out


def declared_paths(spec: str, raw: Any) -> dict[str, tuple[ConvProblem, ...]]:
    """``HARNESS_PATHS`` read: ``{label: [problem lines]}``, each line as
    ``--conv-problem`` takes it (``conv2d float32 mb1ic16ih34oc16kh3ph1``); a
    clear `SpecError` for anything else."""
    if raw is None:
        return {}
    where = f"--impl {spec!r}: HARNESS_PATHS"
    if not isinstance(raw, Mapping):
        raise SpecError(f"{where} must be a dict of path label -> problem lines, got "
                        f"{type(raw).__name__}")
    out = {}
    for label, lines in raw.items():
        if not isinstance(label, str) or isinstance(lines, str) or not isinstance(
                lines, (list, tuple)) or not lines:
            raise SpecError(f"{where}[{label!r}]: a path's label is a string and its "
                            f"problems a non-empty list of descriptor lines")
        problems = []
        for line in lines:
            try:
                problem = parse_problem_line(str(line))
            except DescriptorError as exc:
                raise SpecError(f"{where}[{label!r}]: {exc}") from None
            if problem is None:
                raise SpecError(f"{where}[{label!r}]: {line!r} is not a problem")
            problems.append(problem)
        out[label] = tuple(problems)
    return out
