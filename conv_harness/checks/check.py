"""What a check is, and the registry the checks add themselves to.

Its own module so that the property checks (conv_harness/checks/properties.py) can
register themselves without importing conv_harness/checks/registry.py, which imports
them: import the registry from there, where every check is registered.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from hypothesis.strategies import SearchStrategy

from conv_harness.problem import OPS, ConvCase, ConvProblem
from conv_harness.running.calling import Observed, Timeout
from conv_harness.running.capabilities import Capabilities
from conv_harness.running.loader import Implementation


@dataclass(frozen=True)
class Check:
    """A named check: what it calls, whether it needs torch, how it draws cases.

    ``needs`` lists the kinds of function it calls, ``"forward"`` (``conv2d``)
    and/or ``"backward"`` (``conv2d_backward``), all required; an empty tuple
    means it runs with whichever of them the implementation provides.
    ``cases``, if given, replaces the default case strategy
    (``cases(op, capabilities, given)``, ``given`` the problems of
    ``--conv-problem`` or None), e.g. for checks that need small float64
    problems.
    """

    name: str
    #: (implementation, case, timeout, what the calls leave: conv_harness.running.calling.Observed)
    run: Callable[[Implementation, ConvCase, Timeout, Observed | None], None]
    needs: tuple[str, ...]
    oracle: bool
    cases: Callable[[str, Capabilities, tuple[ConvProblem, ...] | None],
                    SearchStrategy[ConvCase]] | None = None
    description: str = ""
    #: time per example relative to a single oracle check (measured by
    #: benchmarks/harness_throughput.py): pytest runs the costly tests first,
    #: so that pytest-xdist's workers do not end on one long test
    cost: float = 1.0
    #: when the check itself fails (not a call inside it), find the wrong
    #: result among the calls it made (conv_harness/checks/diagnosis.py): a property that
    #: combines several calls cannot say which one was wrong
    attribute: bool = False
    #: the conformance test module that runs it (conv_harness/conformance/): the checks
    #: against torch and repeatability in test_conformance, the properties in
    #: test_properties; its test there, ``test_<name>``, is generated (generate.py)
    test_module: str = "test_properties"
    #: for a check that runs only when asked: (the pytest option, why it is opt-in)
    opt_in: tuple[str, str] | None = None
    #: for a check with cases of its own: a catalogue sweep visit's case (seeded noise
    #: on an archetype's problem, or on one an implementation declares for a dispatch
    #: path) as one of its cases, or None where its cases cannot hold that problem (a
    #: pointwise check, a 3x3 kernel); without it, the sweep does not visit the check
    visit: Callable[[ConvCase], ConvCase | None] | None = None
    #: whether its cases count in the run's coverage tally (an invalid problem's
    #: features say nothing of what the implementation computes)
    tallied: bool = True

    def visit_case(self, case: ConvCase) -> ConvCase | None:
        """``case``, a sweep visit's, as this check takes it (None: it cannot)."""
        if self.cases is None:
            return case
        return None if self.visit is None else self.visit(case)

    def functions(self, op: str) -> tuple[str, ...]:
        names = {"forward": op, "backward": f"{op}_backward"}
        return tuple(names[kind] for kind in self.needs)

    def calls(self, op: str) -> tuple[str, ...]:
        """The functions the check may call: those it needs, else ``op`` and its backward."""
        return self.functions(op) or (op, f"{op}_backward")

    def cost_on(self, op: str) -> float:
        """The relative cost of this check's test of ``op``: the runs put the costliest
        first, so that pytest-xdist does not end on a long one."""
        return self.cost * OPS[op].spatial_dims

    def requirement(self) -> str:
        """What an implementation must provide for the check, in words."""
        if not self.needs:
            return "a forward or a backward of the operation (conv2d or conv2d_backward, ...)"
        return " and ".join({"forward": "a forward (conv2d, ...)",
                             "backward": "a backward (conv2d_backward, ...)"}[kind]
                            for kind in self.needs) + (" of the same operation"
                                                       if len(self.needs) > 1 else "")

    def missing(self, impl: Implementation, op: str) -> tuple[str, ...]:
        """The functions ``impl`` lacks to run the check on ``op`` (empty: it runs).

        For a check that runs with either function, both are listed when both
        are missing.
        """
        if self.applies_to(impl, op):
            return ()
        return tuple(name for name in self.calls(op) if not impl.has(name))

    def applies_to(self, impl: Implementation, op: str) -> bool:
        if self.needs:
            return all(impl.has(name) for name in self.functions(op))
        return any(impl.has(name) for name in self.calls(op))


REGISTRY: dict[str, Check] = {}


def register(check: Check) -> Check:
    if check.name in REGISTRY:
        raise ValueError(f"check {check.name!r} is registered twice")
    REGISTRY[check.name] = check
    return check
